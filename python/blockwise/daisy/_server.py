"""``Server``, ``SerialServer`` and ``run_blockwise``: a pipeline run by blockwise's engine.

The run itself is the session's (``run``: the same stages as ``blockwise run``, its ledger,
retries, restarts, budgets and summary on stderr). This module turns the pipeline into the
session's JSON, then serves the run's events until its answer: worker threads for ``launch``
(``_workers``), ``check_function`` for ``check``, ``process_function`` in this thread for a
serial run's ``block``, and progress observers for ``progress``. A ``KeyboardInterrupt`` while
it waits becomes a ``stop``: the run ends as on Ctrl-C (in-flight blocks get their grace) and
the ``KeyboardInterrupt`` is raised again once its answer is in.
"""

from __future__ import annotations

import heapq
import math
import os
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .. import _worker_client as wc
from . import _allocator
from . import _progress
from . import _task
from . import logging as _worker_log
from ._scheduler import MaskFiles
from ._session import Run, get_session
from ._types import Block, BlockStatus, TaskState, task_states
from ._workers import WorkerLaunches

__all__ = ["Server", "SerialServer", "run_blockwise"]

# After a stop, how long the run may take to deliver its answer before the session is killed.
STOP_PATIENCE_SECONDS = 10.0
# At the end of a run, how long to wait for worker threads to finish (their `exited`).
JOIN_SECONDS = 2.0

_PROCESSING = BlockStatus.PROCESSING
_FAILED = BlockStatus.FAILED

# Keyword arguments of run_blockwise beyond daisy's, and the run options they set.
_BLOCKWISE_OPTIONS = {
    "tracking_dir": "trackingDir",
    "resource_tracking": "resourceTracking",
    "events": "events",
    "listen": "listen",
    "serve": "serve",
}


def _check_resources(resources: Any) -> Optional[Dict[str, float]]:
    if resources is None:
        return None
    if not isinstance(resources, Mapping):
        raise TypeError(
            "resources must be a dict of resource name to amount, e.g. {\"cpu\": 4, \"gpu\": 1}; "
            "got %r (%s)" % (resources, type(resources).__name__))
    out: Dict[str, float] = {}
    for name, amount in resources.items():
        if not isinstance(name, str) or name == "":
            raise TypeError("resources: every name must be a non-empty str, e.g. \"cpu\"; got %r"
                            % (name,))
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise TypeError("resources[%r] must be a number; got %r (%s)"
                            % (name, amount, type(amount).__name__))
        if not math.isfinite(amount) or amount < 0:
            raise ValueError("resources[%r] must be a finite number of at least 0; got %r"
                             % (name, amount))
        out[name] = amount
    return out


def _run_options(serial: bool, resources: Any, progress: bool,
                 extra: Mapping[str, Any]) -> Dict[str, Any]:
    options: Dict[str, Any] = {
        "serial": serial,
        "resources": _check_resources(resources),
        "progress": progress,
        "trackingDir": None,
        "resourceTracking": False,
        "events": None,
    }
    for key, value in extra.items():
        name = _BLOCKWISE_OPTIONS.get(key)
        if name is None:
            raise TypeError(
                "run_blockwise() got an unexpected keyword argument %r; it takes pipeline, "
                "multiprocessing, resources, progress, block_tracking and blockwise's %s"
                % (key, ", ".join(sorted(_BLOCKWISE_OPTIONS))))
        if name == "resourceTracking":
            value = bool(value)
        elif name == "serve" and isinstance(value, bool):
            value = True if value else None  # True: the dashboard at its default address
        elif value is not None:
            value = str(value)
        options[name] = value
    return options


def topo_order(spec: Mapping[str, Any]) -> List[str]:
    """The tasks in dependency order, alphabetical among the ready ones (daisy's order)."""
    ids = [t["id"] for t in spec["tasks"]]
    downstream: Dict[str, List[str]] = {i: [] for i in ids}
    waiting = {i: 0 for i in ids}
    for up, down in spec["edges"]:
        downstream[up].append(down)
        waiting[down] += 1
    ready = [i for i in ids if waiting[i] == 0]
    heapq.heapify(ready)
    order: List[str] = []
    while ready:
        task_id = heapq.heappop(ready)
        order.append(task_id)
        for down in downstream[task_id]:
            waiting[down] -= 1
            if waiting[down] == 0:
                heapq.heappush(ready, down)
    return order


class _Prepared:
    """A pipeline as the session gets it, and the Python side the events need."""

    def __init__(self, pipeline: Any, block_tracking: bool,
                 tracking_dir: Optional[str] = None) -> None:
        self.pipeline = _task.to_pipeline(pipeline)
        self.masks = MaskFiles()
        try:
            self.spec = _task.pipeline_spec(self.pipeline, block_tracking,
                                            skip_mask_file=self.masks)
        except BaseException:
            self.masks.cleanup()
            raise
        if tracking_dir is not None and block_tracking:
            # run_blockwise(tracking_dir=...): this run's ledger folder for every task without a
            # path of its own, over the tracking basedir and daisy.logging's log basedir.
            base = os.path.abspath(str(tracking_dir))
            for task, spec in zip(self.pipeline.tasks, self.spec["tasks"]):
                if task.done_marker_path is None and spec["tracking"] is not False:
                    spec["tracking"] = os.path.join(base, task.task_id)
        self.tasks: Dict[str, Any] = {t.task_id: t for t in self.pipeline.tasks}
        self.modes = {t["id"]: t["mode"] for t in self.spec["tasks"]}
        self.order = topo_order(self.spec)


class _RunLoop:
    """Serves one run's events until its answer."""

    def __init__(self, prepared: _Prepared, run: Run, observer: Any,
                 stop_event: Optional[threading.Event] = None, server: Any = None) -> None:
        self.prepared = prepared
        self.run = run
        self.observer = observer
        self.stop_event = stop_event
        self.server = server
        self.launches = WorkerLaunches(
            {tid: (task.process_function, prepared.modes.get(tid, "block"))
             for tid, task in prepared.tasks.items()}, run.send)
        self.stopped = False
        self.stop_deadline: Optional[float] = None
        self.interrupted = False
        # A serial run's process_function raised: the exception to raise once the run ended.
        self.error: Optional[BaseException] = None
        self.check_warned: set = set()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.stop_deadline = time.monotonic() + STOP_PATIENCE_SECONDS
            self.run.send({"op": "stop"})

    def serve(self) -> Dict[str, Any]:
        """Events until the answer; returns the answer (raises the run's error)."""
        run = self.run
        try:
            while True:
                if (self.stop_event is not None and not self.stopped
                        and self.stop_event.is_set()):
                    self.stop()
                timeout = None
                if self.stop_deadline is not None:
                    timeout = max(0.0, self.stop_deadline - time.monotonic())
                elif self.stop_event is not None:
                    timeout = 0.1
                try:
                    message = run.next(timeout)
                    if message is not None and not run.finished:
                        self.dispatch(message)
                except KeyboardInterrupt:
                    if run.finished or self.interrupted:
                        # A second Ctrl-C: give up on the answer.
                        if not run.finished:
                            run.abandon()
                        raise
                    self.interrupted = True
                    self.stop()
                    continue
                if message is None:
                    if self.stop_deadline is not None and time.monotonic() >= self.stop_deadline:
                        run.abandon()
                        if self.interrupted and self.error is None:
                            raise KeyboardInterrupt
                        raise RuntimeError(
                            "blockwise's daisy session did not end the run within %d s of "
                            "being stopped; it was killed" % STOP_PATIENCE_SECONDS)
                    continue
                if run.finished:
                    return message
        finally:
            self.join_workers()

    def dispatch(self, message: Dict[str, Any]) -> None:
        kind = message.get("ev")
        if kind == "launch":
            if self.server is not None and self.server.hostname is None:
                try:
                    host, port = wc.parse_address(message["env"]["BLOCKWISE_CONNECT"])
                    self.server.hostname, self.server.port = host, port
                except (KeyError, TypeError, wc.Refusal):
                    pass
            self.launches.launch(message)
        elif kind == "cancel":
            self.launches.cancel(message)
        elif kind == "check":
            self.check(message)
        elif kind == "block":
            self.process(message)
        elif kind == "progress":
            self.progress(message)
        # "notice": already printed on stderr by the session.

    def _block(self, data: Dict[str, Any], status: BlockStatus) -> Tuple[Any, Block]:
        task = self.prepared.tasks.get(data["task"])
        total = task.total_roi if task is not None else None
        return task, Block._from_session(data, total, status)

    def check(self, message: Dict[str, Any]) -> None:
        done = False
        try:
            if self.error is None and not self.interrupted:
                task, block = self._block(message["block"], BlockStatus.CREATED)
                function = getattr(task, "check_function", None)
                if function is not None:
                    try:
                        done = bool(function(block))
                    except Exception as error:  # noqa: BLE001 - a broken check: "not done"
                        self.check_failed(block.task_id, error)
        finally:
            # Answered whatever happened (a KeyboardInterrupt included): the run waits for it.
            self.run.send({"op": "checked", "q": message["q"], "done": done})

    def check_failed(self, task_id: str, error: Exception) -> None:
        if task_id in self.check_warned:
            return
        self.check_warned.add(task_id)
        try:
            _worker_log.logger.warning(
                "check_function of task %s raised %s; its blocks count as not done (said once "
                "per task):\n%s", task_id, wc.error_text(error),
                _worker_log.format_traceback(type(error), error, error.__traceback__))
        except Exception:  # noqa: BLE001
            pass

    def process(self, message: Dict[str, Any]) -> None:
        q = message["q"]
        if self.error is not None or self.stopped:
            self.run.send({"op": "ran", "q": q, "ok": False,
                           "error": {"message": "the run is stopping"}})
            return
        task, block = self._block(message["block"], _PROCESSING)
        function = getattr(task, "process_function", None)
        try:
            if function is not None:
                with _worker_log.worker_log_context(block.task_id):
                    function(block)
        except BaseException as error:  # noqa: BLE001 - re-raised once the run has ended
            block.status = _FAILED
            self.error = error
            if isinstance(error, KeyboardInterrupt):
                self.interrupted = True
            else:
                text = _worker_log.format_traceback(type(error), error, error.__traceback__)
                try:
                    _worker_log.logger.warning("block %s failed: %s", block.block_id, error)
                    _worker_log.emit_failure("block %s failed:\n%s" % (block.block_id, text))
                except Exception:  # noqa: BLE001
                    pass
            fields = wc.error_fields(error)
            # The run stops either way; `stop` on `ran` says why (the process function raised),
            # a KeyboardInterrupt is a plain stop.
            interrupted = isinstance(error, KeyboardInterrupt)
            self.run.send({"op": "ran", "q": q, "ok": False, "error": fields,
                           "stop": not interrupted})
            self.stop()
            return
        if block.status == _FAILED:
            self.run.send({"op": "ran", "q": q, "ok": False, "error": {
                "message": "process_function set block.status to BlockStatus.FAILED"}})
        else:
            block.status = BlockStatus.SUCCESS
            self.run.send({"op": "ran", "q": q, "ok": True, "error": None})

    def progress(self, message: Dict[str, Any]) -> None:
        observer = self.observer
        if observer is None:
            return
        method = {"start": "on_start", "progress": "on_progress",
                  "finish": "on_finish"}.get(message.get("kind"))
        if method is None:
            return
        try:
            getattr(observer, method)(task_states(message.get("states") or {}))
        except Exception:  # noqa: BLE001 - a broken observer must not break the run
            pass

    def join_workers(self) -> None:
        deadline = time.monotonic() + JOIN_SECONDS
        for thread in self.launches.alive():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            thread.join(left)


def _execute(pipeline: Any, *, serial: bool, resources: Any, progress: Any,
             block_tracking: bool, extra: Mapping[str, Any],
             stop_event: Optional[threading.Event] = None, server: Any = None
             ) -> Tuple[Dict[str, TaskState], Dict[str, Any], List[str]]:
    """Run `pipeline`; returns (states, the run's answer, the task order)."""
    if not isinstance(block_tracking, bool):
        raise TypeError("block_tracking must be True or False; got %r" % (block_tracking,))
    prepared = _Prepared(pipeline, block_tracking, extra.get("tracking_dir"))
    try:
        if server is not None:
            server.last_task_order = prepared.order
        observer = None if serial else _progress.resolve_observer(progress, prepared.order)
        options = _run_options(serial, resources, observer is not None, extra)
        if not serial:
            _allocator.keep_allocator_warm()  # the worker profile's MALLOC_TOP_PAD_, by mallopt
        run = get_session().start_run(prepared.spec, options)
        loop = _RunLoop(prepared, run, observer, stop_event, server)
        try:
            answer = loop.serve()
        except BaseException:
            if loop.error is not None:
                raise loop.error from None
            raise
        if loop.error is not None:
            raise loop.error
        if loop.interrupted:
            raise KeyboardInterrupt
        return task_states(answer.get("states") or {}), answer, prepared.order
    finally:
        prepared.masks.cleanup()
        _worker_log.close_all_log_files()


class Server:
    """Runs pipelines with worker threads of this process (daisy's multiprocessing path).

    ``run_blockwise(pipeline)`` returns ``{task_id: TaskState}``; ``last_run_stats`` then holds
    the run's statistics (``process``, ``per_task``, ``per_worker``) and ``last_task_order``
    the tasks in dependency order. A ``stop_event`` (``threading.Event``) that gets set stops
    the run as Ctrl-C would."""

    def __init__(self, stop_event: Optional[threading.Event] = None) -> None:
        self._stop_event = stop_event
        self.hostname: Optional[str] = None
        self.port: Optional[int] = None
        self.last_run_stats: Optional[Dict[str, Any]] = None
        self.last_task_order: Optional[List[str]] = None
        self.last_run_result: Optional[Dict[str, Any]] = None

    def run_blockwise(self, pipeline: Any, resources: Optional[Mapping[str, float]] = None,
                      progress: Any = True, block_tracking: bool = True,
                      **blockwise_options: Any) -> Dict[str, TaskState]:
        states, answer, _ = _execute(
            pipeline, serial=False, resources=resources, progress=progress,
            block_tracking=block_tracking, extra=blockwise_options,
            stop_event=self._stop_event, server=self)
        self.last_run_stats = answer.get("stats")
        self.last_run_result = answer
        return states


class SerialServer:
    """Runs pipelines block by block in the calling thread (daisy's serial, debugging path):
    an exception in a process function ends the run at once and is raised as it was."""

    def __init__(self) -> None:
        self.last_run_result: Optional[Dict[str, Any]] = None

    def run_blockwise(self, pipeline: Any, block_tracking: bool = True,
                      **blockwise_options: Any) -> Dict[str, TaskState]:
        states, answer, _ = _execute(
            pipeline, serial=True, resources=None, progress=False,
            block_tracking=block_tracking, extra=blockwise_options)
        self.last_run_result = answer
        return states


def all_done(states: Mapping[str, TaskState]) -> bool:
    """True when every block of every task completed (or was skipped)."""
    return all(s.completed_count == s.total_block_count and s.failed_count == 0
               and s.orphaned_count == 0 for s in states.values())


def run_blockwise(pipeline: Any, multiprocessing: bool = True,
                  resources: Optional[Mapping[str, float]] = None, progress: Any = True,
                  block_tracking: bool = True, **blockwise_options: Any) -> bool:
    """Run `pipeline` (a Pipeline, a Task or a list of tasks) to its end.

    Returns True only when every block of every task completed or was skipped (done in an
    earlier run); a failed or orphaned block makes it False. ``multiprocessing=False`` runs the
    blocks one by one in this thread and raises a process function's exception as it was.
    The run's summary is printed on stderr by the engine."""
    if multiprocessing:
        states = Server().run_blockwise(pipeline, resources=resources, progress=progress,
                                        block_tracking=block_tracking, **blockwise_options)
    else:
        _check_resources(resources)
        states = SerialServer().run_blockwise(pipeline, block_tracking=block_tracking,
                                              **blockwise_options)
    return all_done(states)
