# examples/daisy/v2_pipeline.py: a daisy v2 script (tasks composed with + and |, max_workers=,
# a worker function that drives daisy.Client()) that runs on blockwise's engine; the import is
# the only change.
#
#   python3 v2_pipeline.py WORK_DIR
#
# blur (a 3x3x3 mean, 1 voxel of context) feeds two tasks side by side: downsample (2x, by a
# worker function) and mask (a threshold). The volume, 64x128x128, is made in WORK_DIR/raw.npy
# if absent; the ledger is WORK_DIR/tracking, which `blockwise status WORK_DIR/tracking` reads
# during the run or after. DAISY_EXAMPLE_PAUSE_MS=N makes every block take N ms longer.
import os
import sys
import time

import numpy as np

import blockwise.daisy.v2 as daisy  # daisy: import daisy.v2 as daisy

SHAPE = (64, 128, 128)
PAUSE = float(os.environ.get("DAISY_EXAMPLE_PAUSE_MS", "0")) / 1000

work = os.path.abspath(sys.argv[1])
os.makedirs(work, exist_ok=True)
os.chdir(work)  # worker logs go to ./daisy_logs
daisy.set_tracking_basedir(os.path.join(work, "tracking"))  # the ledger: tracking/<task_id>
volume = daisy.Roi((0, 0, 0), SHAPE)
write_roi = daisy.Roi((0, 0, 0), (32, 32, 32))  # one block's output; its shape tiles


def array(name, dtype, shape=SHAPE):
    """WORK_DIR/<name>.npy, memory-mapped (created, zeros, the first time)."""
    if not os.path.exists(name + ".npy"):
        np.lib.format.open_memmap(name + ".tmp", "w+", dtype, shape).flush()
        os.rename(name + ".tmp", name + ".npy")
    return np.load(name + ".npy", mmap_mode="r+")


if not os.path.exists("raw.npy"):
    np.save("raw.npy", np.random.default_rng(2).random(SHAPE, dtype=np.float32))
raw = np.load("raw.npy", mmap_mode="r")
blurred = array("blurred", np.float32)
mask = array("mask", np.uint8)
array("small", np.float32, tuple(s // 2 for s in SHAPE))  # written by downsample's workers


def blur(block):
    time.sleep(PAUSE)
    inside = block.read_roi.intersect(volume)  # read what exists, pad the rest (edge values)
    pad = [(i - r, re - ie) for r, i, ie, re in zip(
        block.read_roi.begin, inside.begin, inside.end, block.read_roi.end)]
    data = np.pad(raw[inside.to_slices()], pad, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(data, (3, 3, 3))
    blurred[block.write_roi.to_slices()] = windows.mean(axis=(3, 4, 5))


def threshold(block):
    time.sleep(PAUSE)
    mask[block.write_roi.to_slices()] = blurred[block.write_roi.to_slices()] > 0.5


def downsample_worker():
    # A worker function (no arguments) runs once per worker: open what every block needs once
    # (a model, a dataset), then ask the run for blocks until it has none left.
    source = np.load("blurred.npy", mmap_mode="r")
    small = np.load("small.npy", mmap_mode="r+")
    client = daisy.Client()
    while True:
        with client.acquire_block() as block:
            if block is None:
                break
            time.sleep(PAUSE)
            half = daisy.Roi(block.write_roi.offset // 2, block.write_roi.shape // 2)
            cubes = source[block.write_roi.to_slices()].reshape(
                [n for s in half.shape for n in (s, 2)])
            small[half.to_slices()] = cubes.mean(axis=(1, 3, 5))


blur_task = daisy.Task(
    "blur",
    total_roi=volume.grow(1, 1),
    read_roi=write_roi.grow(1, 1),
    write_roi=write_roi,
    process_function=blur,
    read_write_conflict=False,  # reads raw, writes blurred
    max_workers=2,
    resource_tracking=True,  # per-block time, CPU and memory in the ledger (blockwise report)
)
downsample_task = daisy.Task(
    "downsample", volume, write_roi, write_roi, process_function=downsample_worker,
    read_write_conflict=False, max_workers=2)
mask_task = daisy.Task(
    "mask", volume, write_roi, write_roi, process_function=threshold,
    read_write_conflict=False, max_workers=2)

pipeline = blur_task + (downsample_task | mask_task)  # both wait for the blur blocks they read
ok = daisy.run_blockwise(pipeline)
sys.exit(0 if ok else 1)
