"""daisy's public Python API running on blockwise's engine: ``import blockwise.daisy as daisy``.

The top level is daisy's: the daisy 1.x-compatible surface (``blockwise.daisy.v1_compat``).
``blockwise.daisy.v2`` is the v2-native surface and ``blockwise.daisy.logging`` the per-worker
log settings. Block enumeration, dependencies, scheduling, retries and the tracking stores are
the blockwise binary's; Python holds the values, the task descriptions and the worker threads
that call the user's functions.
"""

from . import logging, v1_compat, v2
from .v1_compat import *  # noqa: F401,F403 - daisy's top level is the 1.x-compatible surface
from .v1_compat import __all__, __version__  # noqa: F401
