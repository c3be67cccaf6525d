"""A bare loop over the real-work blocks: python3 bare.py DIR PART PARTS runs the blocks whose
C-order number is PART modulo PARTS, in C order, in this one process."""

import sys

import kernel

folder, part, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
arrays = kernel.open_arrays(folder)
number = 0
for z in range(kernel.GRID):
    for y in range(kernel.GRID):
        for x in range(kernel.GRID):
            if number % parts == part:
                kernel.run_block(arrays, (z, y, x))
            number += 1
