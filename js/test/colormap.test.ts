import { describe, expect, it, vi } from "vitest";
import { buildHalfLut, buildRamp, fillPixels, heatStops, maxHalf, quantileHalf, scaled } from "../src/colormap";
import { renderHeatmap } from "../src/views/attention";
import { causalHalf, floatToHalf } from "./synthetic";

describe("heatmap pixel fill", () => {
  const ramp = buildRamp(heatStops([255, 255, 255]));

  it("maps values to colours: zero transparent, max the ramp's end, monotone in between", () => {
    const bits = new Uint16Array([0, floatToHalf(0.01), floatToHalf(0.25), floatToHalf(1), floatToHalf(-0.5), 0x7e00]);
    const lut = buildHalfLut(ramp, maxHalf(bits), "sqrt");
    const out = new Uint8ClampedArray(bits.length * 4);
    fillPixels(bits, lut, out);
    const px = (i: number) => Array.from(out.slice(i * 4, i * 4 + 4));
    expect(px(0)[3]).toBe(0); // zero: transparent
    expect(px(4)[3]).toBe(0); // negative
    expect(px(5)[3]).toBe(0); // NaN
    expect(px(3)).toEqual([ramp[765], ramp[766], ramp[767], 255]); // max → last ramp colour
    expect(px(2)).toEqual([ramp[128 * 3], ramp[128 * 3 + 1], ramp[128 * 3 + 2], 255]); // sqrt(0.25) = 0.5
    const lum = (p: number[]) => 0.2126 * p[0] + 0.7152 * p[1] + 0.0722 * p[2];
    expect(lum(px(1))).toBeGreaterThan(lum(px(2)));
    expect(lum(px(2))).toBeGreaterThan(lum(px(3))); // light theme: darker = more attention
  });

  it("ramp starts at the background in both themes", () => {
    expect(Array.from(buildRamp(heatStops([17, 17, 17])).slice(0, 3))).toEqual([17, 17, 17]);
    expect(Array.from(ramp.slice(0, 3))).toEqual([255, 255, 255]);
    expect(scaled(0.5, 0, "sqrt")).toBe(0);
    expect(scaled(1e-4, 1, "log")).toBe(0);
  });

  it("fills a 4000×4000 float16 matrix well under 1 s, and the shape is right", () => {
    const n = 4000;
    const bits = causalHalf(n, n);
    const t0 = performance.now();
    const lut = buildHalfLut(ramp, quantileHalf(bits), "sqrt");
    const out = new Uint8ClampedArray(n * n * 4);
    fillPixels(bits, lut, out);
    const ms = performance.now() - t0;
    expect(ms).toBeLessThan(1000);
    expect(out[(0 * n + 1) * 4 + 3]).toBe(0); // above the diagonal: transparent
    expect(out[(5 * n + 5) * 4 + 3]).toBe(255); // diagonal: drawn
    expect(() => fillPixels(bits, lut, new Uint8ClampedArray(10))).toThrow(/need/);
  });

  it("renderHeatmap sizes the canvas to the matrix and records data-render-ms", () => {
    vi.spyOn(console, "error").mockImplementation(() => {}); // jsdom has no canvas 2d context
    const canvas = document.createElement("canvas");
    renderHeatmap(canvas, causalHalf(50, 40), 50, 40, [255, 255, 255]);
    expect(canvas.width).toBe(40);
    expect(canvas.height).toBe(50);
    expect(Number(canvas.getAttribute("data-render-ms"))).toBeGreaterThanOrEqual(0);
  });
});
