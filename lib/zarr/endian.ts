/**
 * Byte order. Zarr chunk files, `.npy` bodies and the tracking store's chunks say which order
 * their elements are in; typed arrays use the host's. This is the one place that knows the
 * host's order, so every reader and writer swaps (or refuses) the same way.
 */

/** True when this host stores multi-byte numbers little-endian (every Bun and Deno platform). */
export const HOST_LITTLE_ENDIAN: boolean = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Reverse the bytes of every `itemSize`-byte element of `bytes`, in place. */
export function swapBytes(bytes: Uint8Array, itemSize: number): void {
  if (itemSize <= 1) return;
  for (let i = 0; i + itemSize <= bytes.length; i += itemSize) {
    for (let a = i, b = i + itemSize - 1; a < b; a++, b--) {
      const t = bytes[a]!;
      bytes[a] = bytes[b]!;
      bytes[b] = t;
    }
  }
}

/** Whether elements stored in `order` must be swapped to be read as host numbers. */
export function needsSwap(order: "little" | "big", itemSize: number): boolean {
  return itemSize > 1 && (order === "little") !== HOST_LITTLE_ENDIAN;
}
