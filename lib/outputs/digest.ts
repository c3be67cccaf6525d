/**
 * A 64-bit digest built from 32-bit words with integer multiplies (murmur-style mixing on two
 * lanes), for the per-block provenance arrays: deterministic across runtimes and machines, no
 * BigInt, no allocation. It detects change; it is not a cryptographic hash (the manifest keeps
 * SHA-256 for that).
 */

export class Digest64 {
  #a = 0x9e3779b9 | 0;
  #b = 0x85ebca6b | 0;
  #n = 0;

  reset(): this {
    this.#a = 0x9e3779b9 | 0;
    this.#b = 0x85ebca6b | 0;
    this.#n = 0;
    return this;
  }

  /** Fold in one 32-bit word. */
  word(value: number): this {
    let k = Math.imul(value | 0, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    this.#a ^= k;
    this.#a = Math.imul((this.#a << 13) | (this.#a >>> 19), 5) + 0xe6546b64 | 0;
    this.#b ^= Math.imul(k ^ (k >>> 16), 0x85ebca6b);
    this.#b = Math.imul((this.#b << 17) | (this.#b >>> 15), 9) + 0x38495ab5 | 0;
    this.#n++;
    return this;
  }

  /** Fold in a non-negative integer below 2^53 (two words). */
  integer(value: number): this {
    return this.word(value % 0x1_0000_0000).word(Math.floor(value / 0x1_0000_0000));
  }

  /** Fold in a string's UTF-16 code units. */
  text(value: string): this {
    this.word(value.length);
    for (let i = 0; i < value.length; i += 2) {
      this.word(value.charCodeAt(i) | ((value.charCodeAt(i + 1) || 0) << 16));
    }
    return this;
  }

  /** The digest as two words, written to `out[at]`, `out[at + 1]`; never both zero. */
  into(out: Uint32Array, at: number): void {
    let a = this.#a ^ this.#n;
    let b = this.#b ^ Math.imul(this.#n, 0x27d4eb2f);
    a = fmix(a ^ (b >>> 1));
    b = fmix(b ^ a);
    if (a === 0 && b === 0) a = 1; // 0 means "unknown" in the arrays
    out[at] = a >>> 0;
    out[at + 1] = b >>> 0;
  }
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

/** The first 8 bytes of a hex SHA-256, as the two little-endian words of a uint64. */
export function hexPrefixWords(hex: string, out: Uint32Array, at: number): void {
  out[at] = swapBytes(parseInt(hex.slice(0, 8), 16));
  out[at + 1] = swapBytes(parseInt(hex.slice(8, 16), 16));
  if (out[at] === 0 && out[at + 1] === 0) out[at] = 1;
}

/** A 32-bit word read big-endian (as hex digits are), as the little-endian word of its bytes. */
function swapBytes(x: number): number {
  return (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;
}
