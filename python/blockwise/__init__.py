"""blockwise: a task scheduler for n-dimensional volumes, from Python.

The engine is blockwise's binary; this package is its Python face:

- ``blockwise.geometry``: ``Coordinate`` and ``Roi``, the box arithmetic block functions use,
  and ``read_block``, a padded read of a ROI from a numpy-like array.
- ``blockwise.daisy``: daisy v2's public API (``import blockwise.daisy as daisy``) running on
  blockwise's engine. It is imported on demand, never by ``import blockwise``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
