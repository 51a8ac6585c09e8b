/** IEEE 754 half precision (float16) decoding for the attention matrices the kernel sends. */

/** One float16 bit pattern → its number (subnormals, ±Infinity and NaN included). */
export function halfToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24; // zero and subnormals
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

let table: Float32Array | null = null;

/** All 65,536 float16 values, indexed by bit pattern (built once). */
export function halfTable(): Float32Array {
  if (!table) {
    table = new Float32Array(65536);
    for (let bits = 0; bits < 65536; bits++) table[bits] = halfToFloat(bits);
  }
  return table;
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A message buffer (DataView, ArrayBuffer or typed array) as float16 bit patterns, read little-endian. */
export function toUint16(buffer: DataView | ArrayBuffer | ArrayBufferView): Uint16Array {
  const view =
    buffer instanceof ArrayBuffer
      ? new DataView(buffer)
      : new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  const count = view.byteLength >> 1;
  if (littleEndian && view.byteOffset % 2 === 0) return new Uint16Array(view.buffer, view.byteOffset, count);
  const out = new Uint16Array(count);
  for (let i = 0; i < count; i++) out[i] = view.getUint16(i * 2, true);
  return out;
}

/** A float16 buffer as float32 values. */
export function decodeFloat16(buffer: DataView | ArrayBuffer | ArrayBufferView): Float32Array {
  const bits = toUint16(buffer);
  const lookup = halfTable();
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = lookup[bits[i]];
  return out;
}
