import os

import numpy as np


def load_model():
    # Once per worker: load weights, open datasets, ...
    print("worker %d loaded the model" % os.getpid())
    return {"weights": np.ones(3)}


def process(block, model):
    data = np.random.default_rng(block.id).random(block.read_roi.shape)
    labels = data > block.params["threshold"]
    if block.index == (1, 2, 3) and os.environ.get("NO_FOREGROUND") != "0":
        raise ValueError("block %d: no foreground" % block.id)
    # ... write labels[...] to block.write_roi.to_slices() of your output
