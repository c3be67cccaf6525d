"""``Task`` and ``Pipeline``: what to run, as plain data, and how the engine receives it.

A ``Task`` describes one block-wise job (ROIs, the user's callables, limits); a ``Pipeline`` is
a DAG of tasks built with ``+`` (sequential: every output of the left feeds every source of the
right) and ``|`` (parallel: a union without new edges). Composition never changes its operands
and keeps the original ``Task`` objects, deduplicated by identity.

For the engine side this module also gives ``to_pipeline`` (a Pipeline, a Task or a list of
tasks, daisy 1.x ``upstream_tasks=`` included) and ``pipeline_spec`` (the session's JSON
pipeline, docs/design/DAISY_API.md), and the tracking-folder rules:

- ``Task(done_marker_path=path)`` (or ``tracking_path=path``): that folder;
- ``done_marker_path=False``: no tracking for the task;
- default: ``<tracking basedir>/<task_id>`` when ``set_tracking_basedir`` set one, else
  ``<daisy.logging log basedir>/<task_id>`` (daisy v2's fallback), else none.
"""

from __future__ import annotations

import inspect
import math
import operator
import os
import re
import shutil
import sys
import warnings
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..geometry import Roi
from . import logging as _daisy_logging

__all__ = [
    "Task",
    "Pipeline",
    "to_pipeline",
    "pipeline_spec",
    "task_spec",
    "process_mode",
    "tracking_path_of",
    "set_tracking_basedir",
    "get_tracking_basedir",
    "set_done_marker_basedir",
    "get_done_marker_basedir",
    "LOG_BASEDIR_DEFAULT",
]

PathLike = Union[str, "os.PathLike[str]"]
TaskInput = Union["Pipeline", "Task", Sequence[Union["Task", "Pipeline"]]]

_FITS = ("valid", "overhang", "shrink")
_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
_MAX_ID_LENGTH = 200
_V1_UPSTREAM_ATTR = "_v1_upstream_tasks"


class _LogBasedir:
    """Marker default: "use daisy.logging's log basedir"."""

    def __repr__(self) -> str:
        return "LOG_BASEDIR_DEFAULT"


#: ``pipeline_spec(..., tracking_dir_default=LOG_BASEDIR_DEFAULT)``: tasks with no explicit path
#: and no tracking basedir are tracked under daisy.logging's log basedir (daisy v2's fallback).
LOG_BASEDIR_DEFAULT: Any = _LogBasedir()


# ---- tracking basedir ------------------------------------------------------------------------

_tracking_basedir: Optional[Path] = None


def _as_folder(path: Any, function: str) -> Optional[Path]:
    if path is None:
        return None
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            "%s expects a folder path (str or pathlib.Path) or None; got %r (%s)."
            % (function, path, type(path).__name__)
        )
    return Path(path)


def set_tracking_basedir(path: Optional[PathLike]) -> None:
    """Keep the tracking store of every task without an explicit path in
    ``<path>/<task_id>``; ``None`` goes back to the log-basedir fallback."""
    global _tracking_basedir
    _tracking_basedir = _as_folder(path, "set_tracking_basedir")


def get_tracking_basedir() -> Optional[Path]:
    """The folder set by ``set_tracking_basedir``, or ``None``."""
    return _tracking_basedir


def set_done_marker_basedir(path: Optional[PathLike]) -> None:
    """Deprecated name of ``set_tracking_basedir`` (the folder holds more than done markers)."""
    warnings.warn(
        "set_done_marker_basedir() is deprecated; call set_tracking_basedir() instead (same "
        "argument).",
        DeprecationWarning,
        stacklevel=2,
    )
    global _tracking_basedir
    _tracking_basedir = _as_folder(path, "set_done_marker_basedir")


def get_done_marker_basedir() -> Optional[Path]:
    """Deprecated name of ``get_tracking_basedir``."""
    warnings.warn(
        "get_done_marker_basedir() is deprecated; call get_tracking_basedir() instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    return _tracking_basedir


# ---- validation helpers ----------------------------------------------------------------------


def _id_problem(task_id: str) -> Optional[str]:
    """Why ``task_id`` is not a valid task id (blockwise's rule), or None."""
    if task_id == "":
        return "must not be empty"
    if not _ID_PATTERN.match(task_id):
        return "must contain only letters, digits, '.', '_' and '-'"
    if task_id.startswith("__"):
        return "must not start with '__' (reserved for blockwise)"
    if task_id in (".", ".."):
        return "must not be '.' or '..'"
    if len(task_id) > _MAX_ID_LENGTH:
        return "must be at most %d characters long" % _MAX_ID_LENGTH
    return None


def _check_task_id(task_id: Any) -> str:
    if not isinstance(task_id, str):
        raise TypeError(
            "Task task_id must be a str; got %r (%s). Name the task, e.g. task_id='predict'."
            % (task_id, type(task_id).__name__)
        )
    problem = _id_problem(task_id)
    if problem is not None:
        suggestion = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id).strip("_") or "task"
        raise ValueError(
            "Task task_id %r %s (it names the task's folders); rename it, e.g. %r."
            % (task_id, problem, suggestion[:_MAX_ID_LENGTH])
        )
    return task_id


def _check_roi(task_id: str, field: str, value: Any) -> Roi:
    if isinstance(value, Roi):
        return value
    offset = getattr(value, "offset", None)
    shape = getattr(value, "shape", None)
    if offset is not None and shape is not None and not isinstance(value, type):
        try:
            return Roi(offset, shape)  # a ROI of another library (funlib.geometry)
        except (TypeError, ValueError) as e:
            raise type(e)("Task %r: %s %r is not a valid ROI: %s" % (task_id, field, value, e)) from None
    raise TypeError(
        "Task %r: %s must be a Roi; got %r (%s). Build it with daisy.Roi(offset, shape)."
        % (task_id, field, value, type(value).__name__)
    )


def _check_count(task_id: str, field: str, value: Any) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise TypeError(
            "Task %r: %s must be an int; got %r (%s)."
            % (task_id, field, value, type(value).__name__)
        ) from None
    if number < 0:
        raise ValueError("Task %r: %s is %d; it must be 0 or more." % (task_id, field, number))
    return number


def _check_callable(task_id: str, field: str, value: Any) -> Optional[Callable[..., Any]]:
    if value is not None and not callable(value):
        raise TypeError(
            "Task %r: %s must be a function (or None); got %r (%s)."
            % (task_id, field, value, type(value).__name__)
        )
    return value


_LAUNCH_KINDS = ("slurm", "command", "manual")


def job_of(function: Callable[..., Any]) -> Tuple[Optional[str], str]:
    """The module file and the name by which a worker process elsewhere imports ``function``,
    or (None, why not)."""
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    module_name = getattr(function, "__module__", None)
    if not isinstance(name, str) or "<" in name or "." in name:
        return None, ("it is %s, not a function defined at the top level of a module"
                      % (repr(name) if isinstance(name, str) else type(function).__name__))
    module = sys.modules.get(module_name or "")
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None, "its module %r has no .py file to import" % module_name
    return os.path.abspath(path), name


def _check_launch(task_id: str, value: Any, function: Optional[Callable[..., Any]]) -> Any:
    if value is None or value == "local" or value == {"kind": "local"}:
        return None
    kind = value.get("kind") if isinstance(value, Mapping) else value
    if kind not in _LAUNCH_KINDS:
        raise ValueError(
            "Task %r: launch=%r is not a way to launch workers; give \"slurm\", "
            "{\"kind\": \"slurm\", \"partition\": ...}, {\"kind\": \"command\", \"argv\": "
            "[..., \"{worker}\"]} or \"manual\" (or leave it out for threads of this process)."
            % (task_id, value)
        )
    if function is None:
        raise ValueError("Task %r: launch=%r needs a process_function to run there."
                         % (task_id, value))
    path, why = job_of(function)
    if path is None:
        raise ValueError(
            "Task %r: launch=%r runs the process_function in worker processes elsewhere, which "
            "import it by name, but %s. Define it with def at the top level of a .py file "
            "(and run the pipeline under `if __name__ == \"__main__\":`)." % (task_id, value, why)
        )
    return dict(value) if isinstance(value, Mapping) else value


def _check_timeout(task_id: str, value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool):
        pass
    elif isinstance(value, (int, float)):
        return float(value)
    else:
        total_seconds = getattr(value, "total_seconds", None)
        if callable(total_seconds):
            return float(total_seconds())
    raise TypeError(
        "Task %r: timeout must be a float seconds, a timedelta, or None; got %r (%s)."
        % (task_id, value, type(value).__name__)
    )


def _check_requires(task_id: str, value: Any) -> Dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            "Task %r: requires must be a dict of resource name to count, e.g. {'gpu': 1}; "
            "got %r (%s)." % (task_id, value, type(value).__name__)
        )
    result: Dict[str, int] = {}
    for name, count in value.items():
        if not isinstance(name, str) or not name:
            raise TypeError(
                "Task %r: requires has the key %r; resource names are non-empty strings, "
                "e.g. {'gpu': 1}." % (task_id, name)
            )
        result[name] = _check_count(task_id, "requires[%r]" % name, count)
    return result


def _check_tracking(task_id: str, field: str, value: Any) -> Union[str, bool, None]:
    if value is None:
        return None
    if value is False:
        return False
    if value is True:
        raise TypeError(
            "Task %r: %s=True is not a valid value; use None (the default folder), False (no "
            "tracking), or a str/Path." % (task_id, field)
        )
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if text == "":
            raise ValueError(
                "Task %r: %s is an empty path; give a folder, or None / False." % (task_id, field)
            )
        return text
    raise TypeError(
        "Task %r: %s must be None, False, or a str/Path; got %r (%s)."
        % (task_id, field, value, type(value).__name__)
    )


def _check_skip_mask(task_id: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if hasattr(value, "shape") or hasattr(value, "__array__"):
        return value
    raise TypeError(
        "Task %r: skip_mask must be an array (one cell per block, nonzero = skip), the path "
        "of a Zarr array, or None; got %r (%s)." % (task_id, value, type(value).__name__)
    )


_V1_HINTS = {
    "num_workers": "daisy v2's Task takes max_workers=; use the v1 surface (import daisy, or "
    "daisy.v1_compat.Task) to keep num_workers=",
    "upstream_tasks": "daisy v2 expresses dependencies with pipelines (upstream + downstream); "
    "use the v1 surface (import daisy, or daisy.v1_compat.Task) to keep upstream_tasks=",
}


# ---- Task ------------------------------------------------------------------------------------


class Task:
    """One block-wise job: tile ``total_roi`` into blocks and call ``process_function``.

    daisy v2's constructor (positional order as daisy's):

    - ``task_id``: unique name in a pipeline (letters, digits, ``.``, ``_``, ``-``).
    - ``total_roi``, ``read_roi``, ``write_roi``: the volume and one block's read and write
      boxes (``write_roi``'s shape is the tiling stride); all of one dimensionality.
    - ``process_function``: ``f(block)`` called for every block in worker threads, or ``f()``
      (no argument) started once per worker, which then uses ``daisy.Client()``.
    - ``check_function``: ``f(block) -> bool``; True skips the block as already done.
    - ``read_write_conflict`` (True), ``fit`` (``"valid"``, ``"overhang"``, ``"shrink"``),
      ``max_workers`` (1), ``max_retries`` (2), ``timeout`` (seconds or timedelta; None),
      ``done_marker_path`` (tracking folder: None for the default, False for none, or a path),
      ``requires`` (resources one worker holds, e.g. ``{"gpu": 1}``),
      ``max_worker_restarts`` (10).

    blockwise extras, keyword-only: ``tracking_path`` (the same as ``done_marker_path``),
    ``resource_tracking`` (record per-block costs in the tracking store), ``skip_mask`` (an
    array with one cell per block, nonzero skips it, or the path of one) and ``outputs``.

    Invalid values raise ``TypeError`` / ``ValueError`` at construction, naming the task and
    the field.
    """

    def __init__(
        self,
        task_id: str,
        total_roi: Roi,
        read_roi: Roi,
        write_roi: Roi,
        process_function: Optional[Callable[..., Any]] = None,
        check_function: Optional[Callable[..., Any]] = None,
        read_write_conflict: bool = True,
        fit: str = "valid",
        max_workers: int = 1,
        max_retries: int = 2,
        timeout: Any = None,
        done_marker_path: Union[PathLike, bool, None] = None,
        requires: Optional[Mapping[str, int]] = None,
        max_worker_restarts: int = 10,
        *,
        tracking_path: Union[PathLike, bool, None] = None,
        resource_tracking: bool = False,
        skip_mask: Any = None,
        outputs: Any = None,
        launch: Any = None,
        **unexpected: Any,
    ) -> None:
        if unexpected:
            name = sorted(unexpected)[0]
            hint = _V1_HINTS.get(name, "check the spelling against daisy.Task's parameters")
            raise TypeError(
                "Task() got an unexpected keyword argument %r: %s." % (name, hint)
            )
        self._task_id = _check_task_id(task_id)
        tid = self._task_id
        self._total_roi = _check_roi(tid, "total_roi", total_roi)
        self._read_roi = _check_roi(tid, "read_roi", read_roi)
        self._write_roi = _check_roi(tid, "write_roi", write_roi)
        dims = self._total_roi.dims
        for field, roi in (("read_roi", self._read_roi), ("write_roi", self._write_roi)):
            if roi.dims != dims:
                raise ValueError(
                    "Task %r: %s %r has %d dimensions but total_roi %r has %d; give all three "
                    "ROIs one value per axis." % (tid, field, roi, roi.dims, self._total_roi, dims)
                )
        if 0 in self._write_roi.shape:
            raise ValueError(
                "Task %r: write_roi %r has a zero extent; its shape is the block stride, so "
                "every axis needs at least 1." % (tid, self._write_roi)
            )
        self._process_function = _check_callable(tid, "process_function", process_function)
        self._check_function = _check_callable(tid, "check_function", check_function)
        self._read_write_conflict = bool(read_write_conflict)
        if fit not in _FITS:
            raise ValueError(
                "Task %r: fit %r is not one of 'valid', 'overhang' or 'shrink'." % (tid, fit)
            )
        self._fit = fit
        self._max_workers = _check_count(tid, "max_workers", max_workers)
        self._max_retries = _check_count(tid, "max_retries", max_retries)
        self._max_worker_restarts = _check_count(tid, "max_worker_restarts", max_worker_restarts)
        self._timeout_secs = _check_timeout(tid, timeout)
        self._requires = _check_requires(tid, requires)
        marker = _check_tracking(tid, "done_marker_path", done_marker_path)
        alias = _check_tracking(tid, "tracking_path", tracking_path)
        if alias is not None:
            if marker is not None and marker != alias:
                raise TypeError(
                    "Task %r: pass either tracking_path=%r or done_marker_path=%r, not both "
                    "(they are the same setting)." % (tid, alias, marker)
                )
            marker = alias
        self._done_marker_path = marker
        self._resource_tracking = bool(resource_tracking)
        self._skip_mask = _check_skip_mask(tid, skip_mask)
        self._outputs = outputs
        self._launch = _check_launch(tid, launch, self._process_function)

    # -- read-only views --

    @property
    def task_id(self) -> str:
        """The task's name."""
        return self._task_id

    @property
    def total_roi(self) -> Roi:
        """The whole volume the task reads."""
        return self._total_roi

    @property
    def read_roi(self) -> Roi:
        """One block's read box (its position relative to ``write_roi`` is the context)."""
        return self._read_roi

    @property
    def write_roi(self) -> Roi:
        """One block's write box; its shape is the tiling stride."""
        return self._write_roi

    @property
    def fit(self) -> str:
        """How blocks at the volume's edge are treated: valid, overhang or shrink."""
        return self._fit

    @property
    def read_write_conflict(self) -> bool:
        """Whether blocks whose read and write boxes overlap run one after the other."""
        return self._read_write_conflict

    @property
    def max_workers(self) -> int:
        """The most workers the task runs at once."""
        return self._max_workers

    @property
    def max_retries(self) -> int:
        """Attempts a block gets after its first one fails."""
        return self._max_retries

    @property
    def max_worker_restarts(self) -> int:
        """Workers restarted after failures before the task is abandoned."""
        return self._max_worker_restarts

    @property
    def timeout_secs(self) -> Optional[float]:
        """The per-block time limit in seconds (None, 0 or less: no limit)."""
        return self._timeout_secs

    @property
    def requires(self) -> Dict[str, int]:
        """Resources one worker holds (a fresh dict)."""
        return dict(self._requires)

    @property
    def done_marker_path(self) -> Union[str, bool, None]:
        """The tracking folder as given: a path, False (off) or None (the default folder)."""
        return self._done_marker_path

    @property
    def tracking_path(self) -> Union[str, bool, None]:
        """Same as ``done_marker_path``."""
        return self._done_marker_path

    @property
    def resource_tracking(self) -> bool:
        """Whether per-block costs are recorded in the tracking store."""
        return self._resource_tracking

    @property
    def skip_mask(self) -> Any:
        """The skip mask as given (an array or a path), or None."""
        return self._skip_mask

    @property
    def launch(self) -> Any:
        """Where the task's workers run: None (threads of this process), or a pipeline file's
        ``launch`` value (``"slurm"``, ``{"kind": "slurm", ...}``, ``{"kind": "command",
        "argv": [...]}``) for worker processes elsewhere."""
        return self._launch

    @property
    def outputs(self) -> Any:
        """The task's declared outputs as given, or None."""
        return self._outputs

    # -- settable callables --

    @property
    def process_function(self) -> Optional[Callable[..., Any]]:
        """``f(block)`` or ``f()``; settable."""
        return self._process_function

    @process_function.setter
    def process_function(self, value: Optional[Callable[..., Any]]) -> None:
        self._process_function = _check_callable(self._task_id, "process_function", value)

    @property
    def check_function(self) -> Optional[Callable[..., Any]]:
        """``f(block) -> bool`` (True: already done), or None; settable."""
        return self._check_function

    @check_function.setter
    def check_function(self, value: Optional[Callable[..., Any]]) -> None:
        self._check_function = _check_callable(self._task_id, "check_function", value)

    # -- behaviour --

    def reset(self) -> Optional[str]:
        """Remove the task's tracking folder so that the next run starts afresh.

        Returns the removed path, or None when the task has no tracking folder or it does not
        exist. Refuses (``ValueError``) a folder that is the file-system root, the home folder
        or the working folder or one of its parents.
        """
        path = tracking_path_of(self)
        if path is None or not os.path.lexists(path):
            return None
        _refuse_dangerous_removal(self._task_id, path)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except OSError as e:
            raise RuntimeError(
                "failed to clear the tracking folder of task %r at %s: %s; remove it by hand "
                "(rm -rf %s)." % (self._task_id, path, e, path)
            ) from e
        return str(path)

    def __copy__(self) -> "Task":
        clone = self.__class__.__new__(self.__class__)
        clone.__dict__.update(self.__dict__)
        clone._requires = dict(self._requires)
        upstream = self.__dict__.get(_V1_UPSTREAM_ATTR)
        if upstream is not None:
            clone.__dict__[_V1_UPSTREAM_ATTR] = list(upstream)
        return clone

    def __deepcopy__(self, memo: Any) -> "Task":
        """As ``copy.copy``: the callables (and a skip-mask array) are shared, not copied."""
        return self.__copy__()

    def __add__(self, other: Union["Task", "Pipeline"]) -> "Pipeline":
        return Pipeline.from_task(self)._compose(other, "+")

    def __or__(self, other: Union["Task", "Pipeline"]) -> "Pipeline":
        return Pipeline.from_task(self)._compose(other, "|")

    def __repr__(self) -> str:
        return "%s(%r, total_roi=%r, read_roi=%r, write_roi=%r, fit=%r, max_workers=%d)" % (
            type(self).__name__,
            self._task_id,
            self._total_roi,
            self._read_roi,
            self._write_roi,
            self._fit,
            self._max_workers,
        )


def _refuse_dangerous_removal(task_id: str, path: Path) -> None:
    target = os.path.realpath(path)
    cwd = os.path.realpath(os.getcwd())
    home = os.path.realpath(os.path.expanduser("~"))
    if target == os.path.dirname(target) or target == home or (cwd + os.sep).startswith(
        target.rstrip(os.sep) + os.sep
    ):
        raise ValueError(
            "Task %r: reset() refuses to remove %s (the tracking path resolves to %s, a root, "
            "home or working folder); give the task its own tracking_path." % (task_id, path, target)
        )


def _record_task_upstream(task: Task, upstream: Optional[Iterable[Task]]) -> None:
    """Record daisy 1.x ``upstream_tasks=`` on the task (read by ``to_pipeline``)."""
    if upstream:
        setattr(task, _V1_UPSTREAM_ATTR, list(upstream))


def _get_task_upstream(task: Task) -> Optional[List[Task]]:
    """The recorded daisy 1.x upstream tasks of ``task``, or None."""
    return getattr(task, _V1_UPSTREAM_ATTR, None)


def tracking_path_of(task: Task, tracking_dir_default: Any = LOG_BASEDIR_DEFAULT) -> Optional[Path]:
    """The tracking folder of ``task``: its explicit path, else ``<tracking basedir>/<id>``,
    else ``<tracking_dir_default>/<id>`` (by default daisy.logging's log basedir); None when
    tracking is off for it (``done_marker_path=False``) or no folder applies."""
    marker = task.done_marker_path
    if marker is False:
        return None
    if isinstance(marker, str):
        return Path(marker)
    if _tracking_basedir is not None:
        return _tracking_basedir / task.task_id
    base = _daisy_logging.get_log_basedir() if tracking_dir_default is LOG_BASEDIR_DEFAULT else tracking_dir_default
    if base is None:
        return None
    return Path(base) / task.task_id


# ---- Pipeline --------------------------------------------------------------------------------


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return "%s %s" % (type(value).__name__, text)


class Pipeline:
    """A DAG of tasks. ``a + b``: b's blocks depend on a's; ``a | b``: side by side.

    ``Pipeline(tasks, edges)`` builds one from a list of tasks and ``(upstream, downstream)``
    pairs of them; sources are the tasks without upstream, outputs those without downstream.
    ``tasks``, ``sources`` and ``outputs`` give the original ``Task`` objects.
    """

    __slots__ = ("_tasks", "_edges", "_sources", "_outputs")

    def __init__(
        self,
        tasks: Optional[Iterable[Task]] = None,
        edges: Optional[Iterable[Tuple[Task, Task]]] = None,
    ) -> None:
        task_list = list(tasks) if tasks is not None else []
        position: Dict[int, int] = {}
        for i, task in enumerate(task_list):
            if not isinstance(task, Task):
                raise TypeError(
                    "Pipeline tasks[%d] is a %s; a pipeline holds daisy Task objects."
                    % (i, _describe(task))
                )
            if id(task) in position:
                raise ValueError(
                    "Pipeline tasks list contains task %r twice (the same object); list each "
                    "task once." % task.task_id
                )
            position[id(task)] = i
        edge_list: List[Tuple[int, int]] = []
        for pair in edges if edges is not None else []:
            try:
                up, down = pair
            except (TypeError, ValueError):
                raise TypeError(
                    "Pipeline edges must be (upstream_task, downstream_task) pairs; got %s."
                    % _describe(pair)
                ) from None
            for role, task in (("upstream", up), ("downstream", down)):
                if id(task) not in position:
                    raise ValueError(
                        "Pipeline edge %s task %s is not in the pipeline's task list; add it "
                        "to tasks=." % (role, _describe(task))
                    )
            edge_list.append((position[id(up)], position[id(down)]))
        has_upstream = {d for _, d in edge_list}
        has_downstream = {u for u, _ in edge_list}
        self._tasks: Tuple[Task, ...] = tuple(task_list)
        self._edges: Tuple[Tuple[int, int], ...] = tuple(edge_list)
        self._sources: Tuple[int, ...] = tuple(
            i for i in range(len(task_list)) if i not in has_upstream
        )
        self._outputs: Tuple[int, ...] = tuple(
            i for i in range(len(task_list)) if i not in has_downstream
        )

    @classmethod
    def _make(
        cls,
        tasks: Sequence[Task],
        edges: Sequence[Tuple[int, int]],
        sources: Sequence[int],
        outputs: Sequence[int],
    ) -> "Pipeline":
        pipeline = object.__new__(cls)
        pipeline._tasks = tuple(tasks)
        pipeline._edges = tuple(dict.fromkeys(edges))
        pipeline._sources = tuple(dict.fromkeys(sources))
        pipeline._outputs = tuple(dict.fromkeys(outputs))
        return pipeline

    @staticmethod
    def from_task(task: Task) -> "Pipeline":
        """A pipeline of one task (its only source and output)."""
        if not isinstance(task, Task):
            raise TypeError(
                "Pipeline.from_task expects a daisy Task; got %s." % _describe(task)
            )
        return Pipeline._make((task,), (), (0,), (0,))

    @property
    def tasks(self) -> List[Task]:
        """Every task, in the order they were added."""
        return list(self._tasks)

    @property
    def sources(self) -> List[Task]:
        """The tasks nothing in the pipeline feeds."""
        return [self._tasks[i] for i in self._sources]

    @property
    def outputs(self) -> List[Task]:
        """The tasks that feed nothing in the pipeline."""
        return [self._tasks[i] for i in self._outputs]

    @property
    def edges(self) -> List[Tuple[Task, Task]]:
        """``(upstream, downstream)`` pairs."""
        return [(self._tasks[u], self._tasks[d]) for u, d in self._edges]

    def reset(self) -> None:
        """Remove the tracking folder of every task (``Task.reset`` on each)."""
        for task in self._tasks:
            task.reset()

    def run_blockwise(
        self,
        *,
        multiprocessing: bool = True,
        resources: Optional[Mapping[str, int]] = None,
        progress: Any = True,
        block_tracking: bool = True,
        **blockwise_options: Any,
    ) -> bool:
        """Run the pipeline; True when every block of every task succeeded (or was skipped).
        The same as ``daisy.run_blockwise(pipeline, ...)``, blockwise's keywords included
        (``tracking_dir=``, ``resource_tracking=``, ``events=``, ``listen=``, ``serve=``)."""
        from ._server import run_blockwise

        return run_blockwise(
            self,
            multiprocessing=multiprocessing,
            resources=resources,
            progress=progress,
            block_tracking=block_tracking,
            **blockwise_options,
        )

    # -- composition --

    def _merge(self, other: "Pipeline") -> Tuple[List[Task], List[int]]:
        """The union of both task lists (by identity) and where other's tasks landed."""
        tasks = list(self._tasks)
        where = {id(t): i for i, t in enumerate(tasks)}
        mapping: List[int] = []
        for task in other._tasks:
            i = where.get(id(task))
            if i is None:
                i = where[id(task)] = len(tasks)
                tasks.append(task)
            mapping.append(i)
        return tasks, mapping

    def _compose(self, other: Any, op: str) -> "Pipeline":
        if isinstance(other, Task):
            right = Pipeline.from_task(other)
        elif isinstance(other, Pipeline):
            right = other
        else:
            raise TypeError(
                "cannot compose a Pipeline with %s using %s; both operands must be a daisy "
                "Task or Pipeline." % (_describe(other), op)
            )
        tasks, m = self._merge(right)
        edges = list(self._edges) + [(m[u], m[d]) for u, d in right._edges]
        if op == "+":
            edges += [(o, m[s]) for o in self._outputs for s in right._sources]
            sources = list(self._sources)
            outputs = [m[o] for o in right._outputs]
        else:
            sources = list(self._sources) + [m[s] for s in right._sources]
            outputs = list(self._outputs) + [m[o] for o in right._outputs]
        return Pipeline._make(tasks, edges, sources, outputs)

    def __add__(self, other: Union[Task, "Pipeline"]) -> "Pipeline":
        return self._compose(other, "+")

    def __or__(self, other: Union[Task, "Pipeline"]) -> "Pipeline":
        return self._compose(other, "|")

    def __radd__(self, other: Union[Task, "Pipeline"]) -> "Pipeline":
        if not isinstance(other, (Task, Pipeline)):
            raise TypeError(
                "cannot compose %s with a Pipeline using +; both operands must be a daisy "
                "Task or Pipeline." % _describe(other)
            )
        left = other if isinstance(other, Pipeline) else Pipeline.from_task(other)
        return left._compose(self, "+")

    def __ror__(self, other: Union[Task, "Pipeline"]) -> "Pipeline":
        if not isinstance(other, (Task, Pipeline)):
            raise TypeError(
                "cannot compose %s with a Pipeline using |; both operands must be a daisy "
                "Task or Pipeline." % _describe(other)
            )
        left = other if isinstance(other, Pipeline) else Pipeline.from_task(other)
        return left._compose(self, "|")

    def __repr__(self) -> str:
        ids = [t.task_id for t in self._tasks]
        return "Pipeline(tasks=%r, sources=%r, outputs=%r, edges=%r)" % (
            ids,
            [ids[i] for i in self._sources],
            [ids[i] for i in self._outputs],
            [(ids[u], ids[d]) for u, d in self._edges],
        )


# ---- engine-side helpers ---------------------------------------------------------------------


def _pipeline_from_tasks(items: Sequence[Any]) -> Pipeline:
    """A pipeline from a list of tasks (and pipelines), following daisy 1.x
    ``upstream_tasks=`` transitively: upstream tasks come first, each recorded upstream
    relation is an edge."""
    order: List[Task] = []
    seen: Dict[int, Task] = {}
    edges: List[Tuple[Task, Task]] = []
    visiting: set = set()

    def visit(task: Task) -> None:
        if id(task) in seen or id(task) in visiting:
            return
        visiting.add(id(task))
        for up in _get_task_upstream(task) or ():
            if not isinstance(up, Task):
                raise TypeError(
                    "task %r lists %s in upstream_tasks; list daisy Task objects."
                    % (task.task_id, _describe(up))
                )
            visit(up)
            edges.append((up, task))
        visiting.discard(id(task))
        seen[id(task)] = task
        order.append(task)

    pipelines: List[Pipeline] = []
    for i, item in enumerate(items):
        if isinstance(item, Task):
            visit(item)
        elif isinstance(item, Pipeline):
            pipelines.append(item)
            for task in item._tasks:
                visit(task)
        else:
            raise TypeError(
                "run_blockwise got %s at position %d of its task list; list daisy Task (or "
                "Pipeline) objects." % (_describe(item), i)
            )
    for pipeline in pipelines:
        edges.extend(pipeline.edges)
    unique = list(dict.fromkeys((id(u), id(d)) for u, d in edges))
    return Pipeline(order, [(seen[u], seen[d]) for u, d in unique])


def to_pipeline(x: TaskInput) -> Pipeline:
    """A Pipeline from a Pipeline (as is), a Task or a list/tuple of tasks. Tasks' daisy 1.x
    ``upstream_tasks=`` are followed transitively and become edges. ``TypeError`` otherwise."""
    if isinstance(x, Pipeline):
        return x
    if isinstance(x, Task):
        if _get_task_upstream(x):
            return _pipeline_from_tasks([x])
        return Pipeline.from_task(x)
    if isinstance(x, (list, tuple)):
        return _pipeline_from_tasks(x)
    raise TypeError(
        "expected a Pipeline, a Task, or a list of tasks; got %s. Compose tasks with + and | "
        "or pass [task1, task2, ...]." % _describe(x)
    )


def process_mode(function: Optional[Callable[..., Any]]) -> str:
    """``"worker"`` when ``function`` takes no positional parameter (it is started once per
    worker and fetches blocks with ``Client()``), else ``"block"`` (called with each block).

    The rule is daisy's: positional parameters are counted whether or not they have
    defaults (a parameter named ``self`` is ignored); ``*args`` counts as none. A callable
    whose signature cannot be read, or None, is ``"block"``.
    """
    if function is None:
        return "block"
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return "block"
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            if parameter.name != "self":
                return "block"
    return "worker"


def _roi_json(roi: Roi) -> Dict[str, List[int]]:
    return {"offset": list(roi.offset), "shape": list(roi.shape)}


def _tracking_value(task: Task, block_tracking: bool, tracking_dir_default: Any) -> Union[str, bool, None]:
    if not block_tracking or task.done_marker_path is False:
        return False
    if task.done_marker_path is None and _tracking_basedir is None and tracking_dir_default is None:
        return None
    path = tracking_path_of(task, tracking_dir_default)
    if path is None:
        return False
    return os.path.abspath(path)


def task_spec(
    task: Task,
    block_tracking: bool = True,
    tracking_dir_default: Any = LOG_BASEDIR_DEFAULT,
    skip_mask_file: Optional[Callable[[Task], PathLike]] = None,
) -> Dict[str, Any]:
    """The session's JSON task spec of ``task`` (see ``pipeline_spec``)."""
    timeout = task.timeout_secs
    if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
        timeout = None
    mask = task.skip_mask
    if mask is not None and not isinstance(mask, str):
        if skip_mask_file is None:
            raise TypeError(
                "task %r has an array skip_mask; pipeline_spec needs skip_mask_file= to write "
                "it to a file the session can read." % task.task_id
            )
        mask = os.fspath(skip_mask_file(task))
    spec: Dict[str, Any] = {
        "id": task.task_id,
        "totalRoi": _roi_json(task.total_roi),
        "readRoi": _roi_json(task.read_roi),
        "writeRoi": _roi_json(task.write_roi),
        "fit": task.fit,
        "readWriteConflict": task.read_write_conflict,
        "maxWorkers": task.max_workers,
        "maxRetries": task.max_retries,
        "maxWorkerRestarts": task.max_worker_restarts,
        "timeout": timeout,
        "requires": task.requires,
        "check": task.check_function is not None,
        "mode": process_mode(task.process_function),
        "tracking": _tracking_value(task, block_tracking, tracking_dir_default),
        # null follows the run (run_blockwise(resource_tracking=True)); True turns it on here
        "resourceTracking": True if task.resource_tracking else None,
        "skipMask": None if mask is None else os.path.abspath(mask),
    }
    if task.outputs is not None:
        spec["outputs"] = task.outputs
    if task.launch is not None:
        module, function = job_of(task.process_function)
        spec["launch"] = task.launch
        spec["job"] = {"module": module, "function": function, "interpreter": sys.executable}
    return spec


def pipeline_spec(
    pipeline: TaskInput,
    block_tracking: bool = True,
    tracking_dir_default: Any = LOG_BASEDIR_DEFAULT,
    skip_mask_file: Optional[Callable[[Task], PathLike]] = None,
) -> Dict[str, Any]:
    """The session's JSON pipeline: ``{"tasks": [task spec, ...], "edges": [[up, down], ...]}``.

    ``pipeline`` is anything ``to_pipeline`` takes. Each task spec has every field of
    docs/design/DAISY_API.md ("Values"), plus ``outputs`` when the task declares some.
    ``tracking`` is False when ``block_tracking`` is False or the task has
    ``done_marker_path=False``; else the absolute tracking folder (``tracking_path_of``) or,
    when ``tracking_dir_default`` is None and the task has neither a path nor a tracking
    basedir, null (the session follows the run's ``trackingDir``). ``skip_mask_file(task)``
    writes an array skip mask to a file and returns its path. Duplicate task ids (two
    different Task objects) raise ``ValueError``.
    """
    p = to_pipeline(pipeline)
    tasks = p._tasks
    by_id: Dict[str, Task] = {}
    for task in tasks:
        other = by_id.get(task.task_id)
        if other is not None and other is not task:
            raise ValueError(
                "duplicate task_id %r in pipeline: two different Task objects share it; give "
                "each task its own task_id, or compose the same Task object." % task.task_id
            )
        by_id[task.task_id] = task
    edges = [
        [tasks[u].task_id, tasks[d].task_id] for u, d in dict.fromkeys(p._edges)
    ]
    return {
        "tasks": [task_spec(t, block_tracking, tracking_dir_default, skip_mask_file) for t in tasks],
        "edges": edges,
    }
