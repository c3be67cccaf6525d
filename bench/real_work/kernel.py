"""The real-work bench's Python block: read 70^3 float32 (context 3) from a memory-mapped .npy,
three passes of a 3-tap box filter along each axis (each pass allocates a new array), write 64^3
into another memory-mapped .npy. Used by bare.py (the bare loops) and task.py (blockwise)."""

import os

import numpy as np

GRID = int(os.environ.get("REAL_WORK_GRID", "8"))
BLOCK = 64
CONTEXT = 3


def make(folder):
    side = GRID * BLOCK
    raw = np.lib.format.open_memmap(os.path.join(folder, "in.npy"), mode="w+",
                                    dtype=np.float32, shape=(side + 2 * CONTEXT,) * 3)
    rng = np.random.default_rng(1)
    for z in range(0, raw.shape[0], BLOCK):
        end = min(z + BLOCK, raw.shape[0])
        raw[z:end] = rng.random((end - z,) + raw.shape[1:], dtype=np.float32)
    raw.flush()
    out = np.lib.format.open_memmap(os.path.join(folder, "out.npy"), mode="w+",
                                    dtype=np.float32, shape=(side,) * 3)
    out.flush()


def open_arrays(folder):
    return (np.load(os.path.join(folder, "in.npy"), mmap_mode="r"),
            np.load(os.path.join(folder, "out.npy"), mmap_mode="r+"))


def box_pass(x, axis):
    """One 3-tap box pass along `axis`, valid part only: one new array, 2 shorter on `axis`."""
    n = x.shape[axis]

    def shifted(by):
        index = [slice(None)] * x.ndim
        index[axis] = slice(by, n - 2 + by)
        return x[tuple(index)]

    y = shifted(0) + shifted(1)
    y += shifted(2)
    y *= np.float32(1 / 3)
    return y


def run_block(arrays, index):
    raw, out = arrays
    z, y, x = (i * BLOCK for i in index)
    data = np.array(raw[z:z + BLOCK + 2 * CONTEXT, y:y + BLOCK + 2 * CONTEXT,
                        x:x + BLOCK + 2 * CONTEXT])
    for axis in range(3):
        for _ in range(CONTEXT):
            data = box_pass(data, axis)
    out[z:z + BLOCK, y:y + BLOCK, x:x + BLOCK] = data
