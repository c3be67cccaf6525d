"""daisy v2's API on blockwise's engine: ``import blockwise.daisy.v2 as daisy``.

The v2-native names only: ``Task`` takes ``max_workers=`` (``num_workers=`` is a
``TypeError``), dependencies are pipelines composed with ``+`` and ``|``. For daisy 1.x names use
``blockwise.daisy`` (= ``blockwise.daisy.v1_compat``).
"""

from .. import __version__
from ..geometry import Coordinate, Roi
from ._context import Context
from ._progress import JsonProgressObserver
from ._scheduler import BlockwiseDependencyGraph, DependencyGraph, Scheduler
from ._server import Server, run_blockwise
from ._task import (
    Pipeline,
    Task,
    get_done_marker_basedir,
    get_tracking_basedir,
    set_done_marker_basedir,
    set_tracking_basedir,
)
from ._types import Block, BlockStatus, TaskState
from ._workers import Client

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
