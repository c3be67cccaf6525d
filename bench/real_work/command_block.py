"""A command block for the real-work bench: a fixed amount of pure-Python arithmetic, the same
for every block (run as `python3 -S command_block.py ID`)."""

import sys

total = 0
for i in range(150_000):
    total += i * i % 7
if total < 0:
    print(sys.argv[1])
