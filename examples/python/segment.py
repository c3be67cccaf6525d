"""Python process functions for examples/python/pipeline.ts: smooth a volume, then threshold it.

Each worker imports this module once and calls open_volumes() once; process functions get the
block and what open_volumes returned. Volumes are .npy files in data/ (next to this file),
memory-mapped: blocks write disjoint write ROIs, so many workers can write one array. The
input, data/raw.npy, is made by the first worker that opens it.
"""

import fcntl
import json
import os

import numpy as np
from blockwise_geometry import Roi, read_block

SHAPE = (128, 128, 128)
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def volume(name, make=None):
    """The float32 volume data/<name>.npy, created by the first worker that needs it: zeros,
    or ``make(array)`` fills it."""
    path = os.path.join(DATA, name + ".npy")
    os.makedirs(DATA, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            array = np.lib.format.open_memmap(path + ".tmp", "w+", np.float32, SHAPE)
            if make is not None:
                make(array)
            array.flush()
            del array
            os.rename(path + ".tmp", path)
    return np.load(path, mmap_mode="r" if make is not None else "r+")


def make_raw(array):
    """The input: a smooth pattern plus deterministic noise, one z-slab at a time."""
    for z in range(0, SHAPE[0], 16):
        roi = Roi((z, 0, 0), (16,) + SHAPE[1:])
        array[roi.to_slices()] = pattern(roi)


def open_volumes():
    """Runs once per worker: open (or create) the volumes, as a model would be loaded."""
    print("worker %d opened its volumes" % os.getpid())
    return {"raw": volume("raw", make_raw), "smoothed": volume("smoothed"), "mask": volume("mask")}


def pattern(roi):
    """The input's values in ``roi``."""
    z, y, x = np.meshgrid(*(np.arange(o, o + s) for o, s in zip(roi.offset, roi.shape)),
                          indexing="ij")
    noise = np.sin(x * 12.9898 + y * 78.233 + z * 37.719) * 0.3
    return (np.sin(x / 9.0) * np.cos(y / 11.0) + np.sin(z / 7.0) + noise).astype(np.float32)


def smooth(block, volumes):
    """Mean over a cube of 2 * radius + 1 voxels: needs `radius` voxels of context.

    The total ROI is the volume grown by the context, so the blocks write all of it; at the
    volume's edge the read ROI sticks out, and read_block pads it with zeros."""
    r = block.params["radius"]
    data = read_block(volumes["raw"], block.read_roi)
    total = np.zeros_like(data)
    for dz in range(-r, r + 1):
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                total += np.roll(data, (dz, dy, dx), axis=(0, 1, 2))
    mean = total / (2 * r + 1) ** 3
    # The write ROI inside the read ROI (np.roll's wrapped-around values stay outside it).
    inner = block.write_roi.to_slices(origin=block.read_roi.offset)
    volumes["smoothed"][block.write_roi.to_slices()] = mean[inner]


def threshold(block, volumes):
    """Foreground where the smoothed signal is high; one JSON summary per block as an output."""
    smoothed = volumes["smoothed"][block.write_roi.to_slices()]
    mask = smoothed > block.params["level"]
    volumes["mask"][block.write_roi.to_slices()] = mask
    with open(block.outputs["counts"], "w") as f:
        json.dump({"block": block.id, "index": block.index, "foreground": int(mask.sum())}, f)
