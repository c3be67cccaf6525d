"""daisy 1.x-compatible API on blockwise's engine (what bare ``import blockwise.daisy`` gives).

The v2 names, with daisy 1.x's spellings kept: ``Task(num_workers=..., upstream_tasks=[...])``
(each with a ``DeprecationWarning``), ``SerialServer`` and ``run_blockwise([task, ...])`` on a
list of tasks.
"""

from .. import __version__
from ..geometry import Coordinate, Roi
from ._context import Context
from ._progress import JsonProgressObserver
from ._scheduler import BlockwiseDependencyGraph, DependencyGraph, Scheduler
from ._server import SerialServer, Server, run_blockwise
from ._task import (
    Pipeline,
    get_done_marker_basedir,
    get_tracking_basedir,
    set_done_marker_basedir,
    set_tracking_basedir,
)
from ._types import Block, BlockStatus, TaskState
from ._workers import Client
from .v1_compat_task import Task

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
