"""The real-work block as a blockwise Python task (the same kernel as bare.py)."""

import os

import kernel


def open_arrays():
    return kernel.open_arrays(os.environ["REAL_WORK_DIR"])


def process(block, arrays):
    kernel.run_block(arrays, block.index)


def skip(block, arrays):
    """The same task with nothing to do: what a run costs besides its blocks' work."""
