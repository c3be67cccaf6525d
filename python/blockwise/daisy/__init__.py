"""daisy's public Python API running on blockwise's engine: ``import blockwise.daisy as daisy``.

The top level is daisy's: the daisy 1.x-compatible surface (``blockwise.daisy.v1_compat``).
``blockwise.daisy.v2`` is the v2-native surface and ``blockwise.daisy.logging`` the per-worker
log settings. Block enumeration, dependencies, scheduling, retries and the tracking stores are
the blockwise binary's; Python holds the values, the task descriptions and the worker threads
that call the user's functions.
"""

from .v1_compat import (
    Block,
    BlockStatus,
    BlockwiseDependencyGraph,
    Client,
    Context,
    Coordinate,
    DependencyGraph,
    JsonProgressObserver,
    Pipeline,
    Roi,
    Scheduler,
    SerialServer,
    Server,
    Task,
    TaskState,
    __version__,
    get_done_marker_basedir,
    get_tracking_basedir,
    run_blockwise,
    set_done_marker_basedir,
    set_tracking_basedir,
)
from . import logging, v1_compat, v2  # noqa: E402 - `daisy.v2` and friends as attributes

__all__ = [
    "Block",
    "BlockStatus",
    "BlockwiseDependencyGraph",
    "Client",
    "Context",
    "Coordinate",
    "DependencyGraph",
    "JsonProgressObserver",
    "Pipeline",
    "Roi",
    "Scheduler",
    "SerialServer",
    "Server",
    "Task",
    "TaskState",
    "__version__",
    "get_done_marker_basedir",
    "get_tracking_basedir",
    "run_blockwise",
    "set_done_marker_basedir",
    "set_tracking_basedir",
]
