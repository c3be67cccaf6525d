/**
 * Copying a box of elements with any strides into a C-ordered buffer, bit for bit.
 *
 * The elements are moved as integers (32-, 16- or 8-bit words over the same bytes), never as
 * numbers: JavaScriptCore's interpreter turns every NaN read from a Float64Array into its one
 * canonical NaN, so a float copy would change NaN payloads (and, through a wider view, the
 * neighbouring element). Rows along the last axis are copied word by word in an unrolled loop;
 * a 64^3 float32 box out of a 256^3 volume takes 0.45-0.5 ms this way against 0.65-1.0 for an
 * element loop over the typed arrays themselves (docs/design/CODECS.md, "Fewer copies").
 * Where the thread has the native copy (lib/runtime/native_copy.ts: memcpy per row in a loop
 * Bun's C compiler builds), a box of contiguous rows goes to it instead: 0.17 ms for a 64^3
 * float32 block out of 512^3 against 0.42-0.46 for the word loop.
 */

import { nativeBoxCopy } from "../runtime/native_copy.ts";

/**
 * The smallest box (bytes) handed to the native copy: below it the call costs more than the
 * JavaScript loop saves.
 */
const NATIVE_MIN_BYTES = 4096;

/** A box of elements: where it starts in `data`, its shape, and the strides in elements. */
export interface StridedElements {
  readonly data: ArrayBufferView;
  readonly shape: readonly number[];
  readonly stride: readonly number[];
}

type WordArray = Int32Array | Int16Array | Uint8Array;
type WordArrayConstructor = new (
  buffer: ArrayBufferLike,
  byteOffset: number,
  length: number,
) => WordArray;

/**
 * Copies the box `source` into `out` (C order, exactly `shape`'s element count), bit for bit.
 * `out` must have the element size of `source.data` (both typed arrays of one kind).
 */
export function copyStrided(source: StridedElements, out: ArrayBufferView): void {
  const elementBytes = bytesPerElement(source.data);
  if (bytesPerElement(out) !== elementBytes) {
    throw new TypeError(
      `copyStrided: the output holds ${
        bytesPerElement(out)
      }-byte elements but the source ${elementBytes}-byte ones`,
    );
  }
  const rank = source.shape.length;
  // Before the word views below: the native copy needs none of them.
  if (rank > 0 && copiedNatively(source, out, elementBytes)) return;
  const word = wordSize(elementBytes);
  const Words: WordArrayConstructor = word === 4
    ? Int32Array
    : word === 2
    ? Int16Array
    : Uint8Array;
  const scale = elementBytes / word;
  const from = new Words(
    source.data.buffer,
    source.data.byteOffset,
    Math.floor(source.data.byteLength / word),
  );
  const into = new Words(out.buffer, out.byteOffset, Math.floor(out.byteLength / word));
  if (rank === 0) {
    for (let i = 0; i < scale; i++) into[i] = from[i]!;
    return;
  }
  const last = rank - 1;
  const rowElements = source.shape[last]!;
  const step = source.stride[last]! * scale;
  const rowWords = rowElements * scale;
  // Rows come in planes (the second-to-last axis), planes in the outer axes.
  const rowsPerPlane = rank >= 2 ? source.shape[last - 1]! : 1;
  const rowStride = rank >= 2 ? source.stride[last - 1]! * scale : 0;
  const outer = rank >= 2 ? source.shape.slice(0, last - 1) : [];
  const planes = outer.reduce((a, b) => a * b, 1);
  if (planes === 0 || rowsPerPlane === 0 || rowElements === 0) return;
  const index = new Array<number>(outer.length).fill(0);
  let at = 0;
  for (let plane = 0; plane < planes; plane++) {
    let first = 0;
    for (let axis = 0; axis < outer.length; axis++) first += index[axis]! * source.stride[axis]!;
    first *= scale;
    if (step === scale) {
      copyRows(from, first, rowStride, rowsPerPlane, into, at, rowWords);
      at += rowsPerPlane * rowWords;
    } else {
      for (let row = 0; row < rowsPerPlane; row++) {
        copySteps(from, first + row * rowStride, step, into, at, rowElements, scale);
        at += rowWords;
      }
    }
    for (let axis = outer.length - 1; axis >= 0; axis--) {
      if (++index[axis]! < outer[axis]!) break;
      index[axis] = 0;
    }
  }
}

/**
 * The box copied by the native copy (lib/runtime/native_copy.ts), when this thread has one, the
 * rows are contiguous, the box is big enough to gain from it, and every byte it names lies
 * inside both views (JavaScript's copy reads past the end as zeros; memcpy must never). The
 * last two axes go to one call (rows and planes), any outer axes loop here.
 */
function copiedNatively(
  source: StridedElements,
  out: ArrayBufferView,
  elementBytes: number,
): boolean {
  const copy = nativeBoxCopy();
  const { shape, stride } = source;
  const rank = shape.length;
  if (copy === null || stride[rank - 1] !== 1) return false;
  const count = shape.reduce((a, b) => a * b, 1);
  const bytes = count * elementBytes;
  if (bytes < NATIVE_MIN_BYTES || bytes > out.byteLength) return false;
  let low = 0;
  let high = 0;
  for (let axis = 0; axis < rank; axis++) {
    const reach = (shape[axis]! - 1) * stride[axis]!;
    if (reach < 0) low += reach;
    else high += reach;
  }
  if (low < 0 || (high + 1) * elementBytes > source.data.byteLength) return false;
  const rowBytes = shape[rank - 1]! * elementBytes;
  const rows = rank >= 2 ? shape[rank - 2]! : 1;
  const rowStride = rank >= 2 ? stride[rank - 2]! * elementBytes : 0;
  const planes = rank >= 3 ? shape[rank - 3]! : 1;
  const planeStride = rank >= 3 ? stride[rank - 3]! * elementBytes : 0;
  const outer = shape.slice(0, Math.max(0, rank - 3));
  const groups = outer.reduce((a, b) => a * b, 1);
  const groupBytes = planes * rows * rowBytes;
  const index = new Array<number>(outer.length).fill(0);
  for (let group = 0; group < groups; group++) {
    let first = 0;
    for (let axis = 0; axis < outer.length; axis++) first += index[axis]! * stride[axis]!;
    copy(
      out,
      group * groupBytes,
      source.data,
      first * elementBytes,
      planes,
      planeStride,
      rows,
      rowStride,
      rowBytes,
    );
    for (let axis = outer.length - 1; axis >= 0; axis--) {
      if (++index[axis]! < outer[axis]!) break;
      index[axis] = 0;
    }
  }
  return true;
}

function bytesPerElement(view: ArrayBufferView): number {
  const size = (view as { readonly BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT;
  if (size === undefined) {
    throw new TypeError("copyStrided: a DataView has no element size; pass a typed array");
  }
  return size;
}

/**
 * The word the copy moves: the element itself up to 4 bytes, else 4 bytes (a typed array's
 * offset is always a multiple of its element size, so every offset is one of the word's).
 */
function wordSize(elementBytes: number): number {
  return Math.min(elementBytes, 4);
}

/**
 * `rows` runs of `length` consecutive words, `rowStride` words apart from `from[first]`, to
 * consecutive words from `into[at]`: one plane, in one loop with no call per row.
 */
function copyRows(
  from: WordArray,
  first: number,
  rowStride: number,
  rows: number,
  into: WordArray,
  at: number,
  length: number,
) {
  const unrolled = length & ~3;
  let t = at;
  for (let row = 0; row < rows; row++) {
    let f = first + row * rowStride;
    const end = t + length;
    const fast = t + unrolled;
    while (t < fast) {
      into[t] = from[f]!;
      into[t + 1] = from[f + 1]!;
      into[t + 2] = from[f + 2]!;
      into[t + 3] = from[f + 3]!;
      t += 4;
      f += 4;
    }
    while (t < end) into[t++] = from[f++]!;
  }
}

/** `count` elements of `scale` words each, `step` words apart, to consecutive words at `at`. */
function copySteps(
  from: WordArray,
  first: number,
  step: number,
  into: WordArray,
  at: number,
  count: number,
  scale: number,
) {
  let t = at;
  for (let i = 0; i < count; i++) {
    const f = first + i * step;
    for (let w = 0; w < scale; w++) into[t++] = from[f + w]!;
  }
}
