"""A stand-in for the few parts of PyTorch that examples/gpu/predict.py uses, for machines
without a GPU (docs/guide/gpus.md, tests/examples.test.ts): like CUDA, it sees the devices
CUDA_VISIBLE_DEVICES names, renumbered from 0, and names each after its physical id."""

import contextlib
import os

from . import cuda, nn  # noqa: F401


class device(object):  # noqa: N801 - torch's name
    def __init__(self, name):
        self.type, _, index = str(name).partition(":")
        self.index = int(index) if index else 0
        if self.type == "cuda" and self.index >= cuda.device_count():
            raise RuntimeError("CUDA error: invalid device ordinal (cuda:%d; CUDA_VISIBLE_DEVICES=%s)"
                               % (self.index, os.environ.get("CUDA_VISIBLE_DEVICES")))

    def __str__(self):
        return "%s:%d" % (self.type, self.index) if self.type == "cuda" else self.type


class Tensor(object):
    def __init__(self, shape, on):
        self.shape = tuple(shape)
        self.device = on


def zeros(shape, device=None):
    return Tensor(shape, device)


@contextlib.contextmanager
def no_grad():
    yield
