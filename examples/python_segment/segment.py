import os

import numpy as np
from blockwise_geometry import read_block
from volumes import random_input, volume


def load_model():
    # Once per worker: load weights, open datasets, ...
    print("worker %d loaded the model" % os.getpid())
    return {"raw": volume("raw", np.float32, random_input), "labels": volume("labels", np.uint8)}


def process(block, model):
    # At the volume's edge the read ROI sticks out of it: read_block pads that part with zeros.
    data = read_block(model["raw"], block.read_roi)
    labels = data > block.params["threshold"]
    if block.index == (1, 2, 3) and os.environ.get("NO_FOREGROUND") != "0":
        raise ValueError("block %d: no foreground" % block.id)
    inner = block.write_roi.to_slices(origin=block.read_roi.offset)
    model["labels"][block.write_roi.to_slices()] = labels[inner]
