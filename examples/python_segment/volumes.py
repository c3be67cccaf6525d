"""The example's volumes: .npy files in data/ beside this file, memory-mapped, so every worker
reads and writes the same arrays (blocks write disjoint write ROIs)."""

import fcntl
import os

import numpy as np

SHAPE = (256, 256, 256)
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def volume(name, dtype, make=None):
    """data/<name>.npy, created by the first worker that opens it: zeros, or filled by make."""
    path = os.path.join(DATA, name + ".npy")
    os.makedirs(DATA, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            array = np.lib.format.open_memmap(path + ".tmp", "w+", dtype, SHAPE)
            if make is not None:
                make(array)
            array.flush()
            del array
            os.rename(path + ".tmp", path)
    return np.load(path, mmap_mode="r+")


def random_input(array):
    """The example's input: uniform noise in [0, 1), the same on every run."""
    rng = np.random.default_rng(0)
    for z in range(SHAPE[0]):
        array[z] = rng.random(SHAPE[1:], dtype=np.float32)
