"""daisy 1.x-compatible API on blockwise's engine (what bare ``import blockwise.daisy`` gives).

The v2 names, with daisy 1.x's spellings kept: ``Task(num_workers=..., upstream_tasks=[...])``
(each with a ``DeprecationWarning``), ``SerialServer`` and ``run_blockwise([task, ...])`` on a
list of tasks.
"""

from . import v2
from .v2 import *  # noqa: F401,F403 - the v2 names, with the 1.x Task below
from .v2 import __version__  # noqa: F401
from ._server import SerialServer
from .v1_compat_task import Task  # noqa: F811 - accepts num_workers= and upstream_tasks=

__all__ = sorted(set(v2.__all__) | {"SerialServer"})
