"""blockwise.geometry.read_block: a padded read of a ROI from a numpy-like array.

Run with:
    PYTHONPATH=python python3 -m pytest -q tests/python/test_read_block.py
"""

import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")

from blockwise.geometry import Roi, read_block  # noqa: E402

VOLUME = np.arange(40 * 40, dtype=np.uint16).reshape(40, 40)


def test_inside_is_a_copy_of_the_slice():
    roi = Roi((8, 8), (14, 14))
    got = read_block(VOLUME, roi)
    assert got.shape == (14, 14) and got.dtype == np.uint16
    assert (got == VOLUME[8:22, 8:22]).all()
    got[0, 0] = 999
    assert VOLUME[8, 8] != 999


def test_edge_block_is_padded_where_the_roi_leaves_the_array():
    roi = Roi((-2, 30), (14, 14))
    got = read_block(VOLUME, roi, fill=7)
    assert got.shape == (14, 14) and got.dtype == np.uint16
    assert (got[2:, :10] == VOLUME[0:12, 30:40]).all()
    assert (got[:2, :] == 7).all() and (got[:, 10:] == 7).all()
    # the naive read returns the wrong shape; to_slices refuses it
    with pytest.raises(ValueError, match="begins at -2 on axis 0"):
        VOLUME[roi.to_slices()]


def test_disjoint_roi_is_all_fill():
    got = read_block(VOLUME, Roi((50, -20), (4, 5)), fill=3)
    assert got.shape == (4, 5) and (got == 3).all()


def test_origin_places_the_array():
    # the array holds the volume's part from (100, 200)
    got = read_block(VOLUME, Roi((98, 230), (4, 12)), origin=(100, 200))
    assert (got[2:, :10] == VOLUME[0:2, 30:40]).all()
    assert (got[:2] == 0).all() and (got[:, 10:] == 0).all()


def test_leading_axes_are_read_whole():
    channels = np.stack([VOLUME, VOLUME + 1, VOLUME + 2])
    got = read_block(channels, Roi((-1, -1), (3, 3)))
    assert got.shape == (3, 3, 3)
    assert (got[:, 1:, 1:] == channels[:, 0:2, 0:2]).all()
    assert (got[:, 0, :] == 0).all()


def test_memmap(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, VOLUME)
    mapped = np.load(path, mmap_mode="r")
    got = read_block(mapped, Roi((36, 36), (8, 8)))
    assert type(got) is np.ndarray
    assert (got[:4, :4] == VOLUME[36:, 36:]).all() and (got[4:] == 0).all()


def test_float_fill_and_nan():
    got = read_block(VOLUME.astype(np.float32), Roi((-1, 0), (2, 2)), fill=np.nan)
    assert np.isnan(got[0]).all() and (got[1] == VOLUME[0, 0:2]).all()


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match="expects a Roi"):
        read_block(VOLUME, ((0, 0), (2, 2)))
    with pytest.raises(ValueError, match="the array has 2 axes"):
        read_block(VOLUME, Roi((0, 0, 0), (1, 1, 1)))
    with pytest.raises(ValueError, match="read_block origin must have 2 values"):
        read_block(VOLUME, Roi((0, 0), (1, 1)), origin=(1, 2, 3))
    with pytest.raises(TypeError, match="numpy-like array"):
        read_block([[1, 2]], Roi((0, 0), (1, 1)))


def test_module_imports_without_numpy():
    # geometry.py stays standard-library at import: numpy is imported by read_block only
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "import blockwise.geometry as g\n"
        "assert g.Roi((0,), (1,)).size == 1\n"
        "try:\n"
        "    g.read_block(None, g.Roi((0,), (1,)))\n"
        "except ImportError:\n"
        "    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
