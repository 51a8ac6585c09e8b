import { describe, expect, it } from "vitest";
import { decodeFloat16, halfToFloat, toUint16 } from "../src/float16";
import { floatToHalf } from "./synthetic";

describe("float16", () => {
  it("decodes normals, zero, subnormals, infinities and NaN", () => {
    expect(halfToFloat(0x3c00)).toBe(1);
    expect(halfToFloat(0xc000)).toBe(-2);
    expect(halfToFloat(0x3555)).toBeCloseTo(0.33325, 5);
    expect(halfToFloat(0x7bff)).toBe(65504);
    expect(halfToFloat(0x0000)).toBe(0);
    expect(Object.is(halfToFloat(0x8000), -0)).toBe(true);
    expect(halfToFloat(0x0001)).toBe(2 ** -24); // smallest subnormal
    expect(halfToFloat(0x03ff)).toBe(1023 * 2 ** -24); // largest subnormal
    expect(halfToFloat(0x0400)).toBe(2 ** -14); // smallest normal
    expect(halfToFloat(0x7c00)).toBe(Infinity);
    expect(halfToFloat(0xfc00)).toBe(-Infinity);
    expect(halfToFloat(0x7e00)).toBeNaN();
  });

  it("reads little-endian buffers from DataView, ArrayBuffer and unaligned views", () => {
    const bytes = new Uint8Array([0xff, 0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00]); // pad byte, then 1, -2, subnormal
    const view = new DataView(bytes.buffer, 1, 6);
    expect(Array.from(decodeFloat16(view))).toEqual([1, -2, 2 ** -24]);
    const aligned = new Uint8Array([0x00, 0x3c, 0x00, 0x7c]).buffer;
    expect(Array.from(decodeFloat16(aligned))).toEqual([1, Infinity]);
    expect(Array.from(toUint16(new DataView(aligned)))).toEqual([0x3c00, 0x7c00]);
  });

  it("round-trips the test encoder", () => {
    for (const v of [0, 1, 0.5, 0.1, 3.14, 2 ** -20, 60000])
      expect(Math.abs(halfToFloat(floatToHalf(v)) - v)).toBeLessThanOrEqual(v * 2 ** -11);
  });
});
