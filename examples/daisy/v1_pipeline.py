# examples/daisy/v1_pipeline.py: a daisy 1.x script (Task(num_workers=, upstream_tasks=),
# run_blockwise([...])) that runs on blockwise's engine; the import is the only change.
#
#   python3 v1_pipeline.py WORK_DIR
#
# It smooths a 64x128x128 volume (made in WORK_DIR/raw.npy if absent) with a 5x5x5 mean, in
# 32^3 blocks that read 2 voxels of context, then labels the foreground of each block. Run it
# again and nothing is redone; kill it and run it again and only the missing blocks run.
# DAISY_EXAMPLE_PAUSE_MS=N makes every block take N ms longer (to watch it, or to kill it).
import os
import sys
import time
import warnings

import numpy as np

import blockwise.daisy as daisy  # daisy: import daisy

# daisy v2 warns about the 1.x spellings (num_workers=, upstream_tasks=), and so does blockwise
warnings.filterwarnings("ignore", category=DeprecationWarning)

SHAPE = (64, 128, 128)
CONTEXT = 2  # voxels of context the smoothing needs on each side
THRESHOLD = 0.5
PAUSE = float(os.environ.get("DAISY_EXAMPLE_PAUSE_MS", "0")) / 1000

work = os.path.abspath(sys.argv[1])
os.makedirs(work, exist_ok=True)
os.chdir(work)  # daisy keeps its logs (and blockwise its ledger) in ./daisy_logs
volume = daisy.Roi((0, 0, 0), SHAPE)


def array(name, dtype):
    """WORK_DIR/<name>.npy, memory-mapped (created, zeros, the first time)."""
    if not os.path.exists(name + ".npy"):
        np.lib.format.open_memmap(name + ".tmp", "w+", dtype, SHAPE).flush()
        os.rename(name + ".tmp", name + ".npy")
    return np.load(name + ".npy", mmap_mode="r+")


if not os.path.exists("raw.npy"):
    np.save("raw.npy", np.random.default_rng(1).random(SHAPE, dtype=np.float32))
raw = np.load("raw.npy", mmap_mode="r")
smoothed = array("smoothed", np.float32)
labels = array("labels", np.uint32)
os.makedirs("labelled", exist_ok=True)


def mean_along(data, axis, radius):
    """Mean over 2 * radius + 1 neighbours along one axis; the result is 2 * radius shorter."""
    n = data.shape[axis] - 2 * radius
    total = np.zeros(data.shape[:axis] + (n,) + data.shape[axis + 1:], np.float32)
    for k in range(2 * radius + 1):
        total += data.take(range(k, k + n), axis=axis)
    return total / np.float32(2 * radius + 1)


def smooth(block):
    time.sleep(PAUSE)
    # The read ROI sticks out of the volume at its faces: read what exists and pad the rest
    # (never a negative slice, which numpy would wrap around).
    inside = block.read_roi.intersect(volume)
    pad = [(i - r, re - ie) for r, i, ie, re in zip(
        block.read_roi.begin, inside.begin, inside.end, block.read_roi.end)]
    data = np.pad(raw[inside.to_slices()], pad, mode="edge")
    for axis in range(3):
        data = mean_along(data, axis, CONTEXT)
    smoothed[block.write_roi.to_slices()] = data  # exactly the write ROI
    print("smoothed block", block.block_id[1])  # goes to daisy_logs/smooth/worker_<n>.out


def label(block):
    time.sleep(PAUSE)
    # Number the foreground per block: block k's voxels get label k + 1 (a first pass of a
    # blockwise connected-components, before relabelling across blocks).
    grid = [s // w for s, w in zip(SHAPE, write_roi.shape)]
    k = np.ravel_multi_index(block.write_roi.begin // write_roi.shape, grid)
    where = block.write_roi.to_slices()
    labels[where] = (smoothed[where] > THRESHOLD) * np.uint32(k + 1)
    open(marker(block), "w").close()  # the daisy 1.x way to remember a block is done
    print("labelled block", block.block_id[1])


def marker(block):
    return os.path.join(work, "labelled", "%d" % block.block_id[1])


def labelled(block):
    # check_function: True when the block was done by an earlier run (blockwise's ledger
    # remembers that too; a check_function still works, as in daisy).
    return os.path.exists(marker(block))


write_roi = daisy.Roi((0, 0, 0), (32, 32, 32))
smooth_task = daisy.Task(
    "smooth",
    total_roi=volume.grow(CONTEXT, CONTEXT),  # the volume plus the context around it
    read_roi=write_roi.grow(CONTEXT, CONTEXT),
    write_roi=write_roi,
    process_function=smooth,
    read_write_conflict=False,  # it reads raw, writes smoothed: neighbours may run together
    num_workers=2,
)
label_task = daisy.Task(
    "label",
    total_roi=volume,
    read_roi=write_roi,
    write_roi=write_roi,
    process_function=label,
    check_function=labelled,
    read_write_conflict=False,
    num_workers=2,
    upstream_tasks=[smooth_task],  # a block starts once the smooth blocks it reads are done
)

ok = daisy.run_blockwise([smooth_task, label_task])
sys.exit(0 if ok else 1)
