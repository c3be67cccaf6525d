"""torch.cuda of the stand-in: the devices CUDA_VISIBLE_DEVICES names (none when it is unset,
as on a machine without an NVIDIA driver)."""

import os


def _visible():
    text = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [d for d in text.split(",") if d != ""] if text != "NoDevFiles" else []


def device_count():
    return len(_visible())


def is_available():
    return device_count() > 0


def get_device_name(index=0):
    return "stand-in GPU %s" % _visible()[index]
