/**
 * The heatmap's colours: a calm sequential ramp that starts at the panel's background (so near-zero attention
 * fades into the page in light and dark themes) and a float16 → RGBA lookup table, so the pixel fill of a
 * 4,000 × 4,000 matrix is one table read per cell.
 */
import { halfTable } from "./float16";

export type RGB = [number, number, number];
export type Scale = "sqrt" | "log" | "linear";

/** Relative luminance (0 dark … 1 light) of an sRGB colour. */
export function luminance([r, g, b]: RGB): number {
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}

/** The ramp's stops for a background: teal into deep blue on light pages, teal into warm sand on dark ones. */
export function heatStops(background: RGB): RGB[] {
  return luminance(background) > 0.5
    ? [background, [168, 214, 206], [74, 160, 166], [38, 98, 140], [27, 45, 94]]
    : [background, [28, 70, 82], [44, 128, 134], [110, 186, 150], [236, 222, 140]];
}

/** `n` colours interpolated linearly through `stops`, as RGB triples. */
export function buildRamp(stops: RGB[], n = 256): Uint8Array {
  const out = new Uint8Array(n * 3);
  for (let i = 0; i < n; i++) {
    const t = (i / (n - 1)) * (stops.length - 1);
    const k = Math.min(Math.floor(t), stops.length - 2);
    const f = t - k;
    for (let c = 0; c < 3; c++) out[i * 3 + c] = Math.round(stops[k][c] + (stops[k + 1][c] - stops[k][c]) * f);
  }
  return out;
}

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

function pack(r: number, g: number, b: number, a: number): number {
  return littleEndian ? ((a << 24) | (b << 16) | (g << 8) | r) >>> 0 : ((r << 24) | (g << 16) | (b << 8) | a) >>> 0;
}

/** The largest finite non-negative value of a float16 array (bit patterns of non-negatives sort like values). */
export function maxHalf(bits: Uint16Array): number {
  let best = 0;
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i];
    if (b > best && b < 0x7c00) best = b;
  }
  return halfTable()[best];
}

/**
 * The value the ramp tops out at: the `q` quantile of the positive finite cells (one histogram pass over the bit
 * patterns), so a few attention sinks don't wash the rest out; never below 1e-6.
 */
export function quantileHalf(bits: Uint16Array, q = 0.995): number {
  const counts = new Uint32Array(0x7c00);
  let n = 0;
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i];
    if (b > 0 && b < 0x7c00) {
      counts[b]++;
      n++;
    }
  }
  if (!n) return 0;
  let seen = 0;
  const target = Math.ceil(n * q);
  for (let b = 1; b < 0x7c00; b++) {
    seen += counts[b];
    if (seen >= target) return Math.max(halfTable()[b], 1e-6);
  }
  return maxHalf(bits);
}

/** Where a value sits on the ramp (0…1) under a scale, relative to `max`. */
export function scaled(value: number, max: number, scale: Scale): number {
  if (!(value > 0) || !(max > 0)) return 0;
  const t = Math.min(value / max, 1);
  if (scale === "sqrt") return Math.sqrt(t);
  if (scale === "log") return Math.max(0, 1 + Math.log10(t) / 4); // four decades down to 0
  return t;
}

/**
 * A table from every float16 bit pattern to a packed RGBA pixel: zero, negatives and NaN are transparent (the
 * page shows through), positives are ramp colours by `scaled(value, max, scale)`.
 */
export function buildHalfLut(ramp: Uint8Array, max: number, scale: Scale): Uint32Array {
  const values = halfTable();
  const n = ramp.length / 3;
  const lut = new Uint32Array(65536);
  for (let bits = 1; bits < 0x7c00; bits++) {
    const t = scaled(values[bits], max, scale);
    const i = Math.max(1, Math.round(t * (n - 1))) * 3;
    lut[bits] = pack(ramp[i], ramp[i + 1], ramp[i + 2], 255);
  }
  if (max > 0) lut[0x7c00] = lut[0x7bff]; // +Infinity shows as the maximum
  return lut;
}

/** The pixel fill: float16 cells → RGBA bytes (`out` has 4 bytes per cell), through `buildHalfLut`'s table. */
export function fillPixels(bits: Uint16Array, lut: Uint32Array, out: Uint8ClampedArray): void {
  if (out.length < bits.length * 4)
    throw new Error(`fillPixels: out holds ${out.length / 4} pixels, need ${bits.length}`);
  const pixels = new Uint32Array(out.buffer, out.byteOffset, bits.length);
  for (let i = 0; i < bits.length; i++) pixels[i] = lut[bits[i]];
}

/** Parses `#rgb`, `#rrggbb` or `rgb(a)(…)` into RGB; `fallback` when it can't. */
export function parseColor(text: string, fallback: RGB): RGB {
  const s = text.trim();
  const short = /^#([0-9a-f]{3})$/i.exec(s)?.[1];
  if (short) return [0, 1, 2].map((i) => parseInt(short[i] + short[i], 16)) as RGB;
  const long = /^#([0-9a-f]{6})/i.exec(s)?.[1];
  if (long) return [0, 2, 4].map((i) => parseInt(long.slice(i, i + 2), 16)) as RGB;
  const m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)/i.exec(s);
  if (m) return [Number(m[1]), Number(m[2]), Number(m[3])];
  return fallback;
}
