"""Worker threads and ``Client``: the worker protocol's Python end inside the caller's process.

A run launches workers as threads of this process (``launch`` events). Each thread connects
back to the run's worker server with the slot and secret of its launch and speaks blockwise's
worker protocol (docs/design/WORKERS.md) through the same code as the standalone Python worker
(``blockwise._worker_client``, which is ``workers/python/blockwise_worker.py``):

- a block-function task's thread calls ``process_function(block)`` for every block it is sent.
  A block that raises (or whose status the function set to ``FAILED``) is reported as a failed
  attempt and then ends the worker (``closing``), as in daisy v2: the run counts a worker
  failure and starts another worker, up to ``max_worker_restarts``.
- a worker-function task's thread binds its ``Context`` to itself (and to
  ``os.environ["DAISY_CONTEXT"]``, as daisy does) and calls ``process_function()`` once;
  ``Client()`` connects with that context, from the thread or from a process it starts, and
  hands out one block per ``acquire_block()``.

When a thread ends, the session hears ``exited`` (``ok`` false with the traceback when the
function raised or the worker could not connect). A worker whose connection the scheduler
closes (the run ended, the launch was cancelled, its block timed out) ends quietly.
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .. import _worker_client as wc
from ..geometry import Roi
from . import logging as _worker_log
from ._context import Context, _bind_thread_context, _unbind_thread_context
from ._types import Block, BlockStatus

__all__ = ["Client", "WorkerLaunches", "FAILURE_REASON"]

# A failed block's stack starts at the user's code: this module's frames are left out too.
wc.OWN_FILES.add(__file__)

FAILURE_REASON = "process_function raised: a failed block ends its worker, as in daisy"
MARKED_FAILED = "process_function set block.status to BlockStatus.FAILED"
# How long a worker function's Client that returned early waits for the scheduler's stop.
LEAVE_SECONDS = 10.0

# Context keys beyond daisy's hostname, port, task_id and worker_id.
SECRET_KEY = "blockwise_secret"
SLOT_KEY = "blockwise_slot"

_PROCESSING = BlockStatus.PROCESSING
_SUCCESS = BlockStatus.SUCCESS
_FAILED = BlockStatus.FAILED


class MarkedFailed(Exception):
    """The process function returned after setting ``block.status = BlockStatus.FAILED``."""


# ---- blocks from (position, attempt) ---------------------------------------------------------


class _BlockData(dict):
    """A block as ``Block._from_session`` takes it, with the ROIs filled in on first use (most
    block functions read one or two of them; a no-op block reads none)."""

    __slots__ = ()

    def __missing__(self, key: str) -> Any:
        if key != "readRoi" and key != "writeRoi":
            raise KeyError(key)
        geometry = wc.Block()
        self["_layout"].fill(geometry, self["position"])
        read, write = geometry.read_roi, geometry.write_roi
        self["readRoi"] = {"offset": read.offset, "shape": read.shape}
        self["writeRoi"] = {"offset": write.offset, "shape": write.shape}
        return self[key]


def block_factory(layout: "wc.Layout", task_id: str, total_roi: Optional[Roi]
                  ) -> Callable[[int, Any], Block]:
    """A function (position, attempt) -> the daisy Block (status PROCESSING) at `position`."""
    from_session = Block._from_session
    cantor = wc.cantor_number
    processing = _PROCESSING
    axes = tuple((stride, shift) for stride, shift, *_ in layout.axes)
    if len(axes) == 1:
        shift = axes[0][1]

        def make(position: int, attempt: Any) -> Block:
            i = position + shift
            if i < 0:
                i = 0
            # 1-D: the Cantor number of (i,) is i.
            return from_session(_BlockData(task=task_id, id=i, position=position,
                                           attempt=int(attempt), index=(i,), _layout=layout),
                                total_roi, processing)

        return make

    def make_nd(position: int, attempt: Any) -> Block:
        index = []
        rest = position
        for stride, shift in axes:
            g, rest = divmod(rest, stride)
            i = g + shift
            index.append(i if i > 0 else 0)
        return from_session(_BlockData(task=task_id, id=cantor(index), position=position,
                                       attempt=int(attempt), index=tuple(index),
                                       _layout=layout),
                            total_roi, processing)

    return make_nd


def _total_roi(init: Dict[str, Any]) -> Optional[Roi]:
    total = (init.get("layout") or {}).get("totalRoi")
    if not isinstance(total, dict):
        return None
    return Roi(total["offset"], total["shape"])


def _report_failure(block: Block, error: BaseException) -> str:
    """daisy's failure report: a warning on the "daisy" logger and the traceback in the
    worker's .err file; returns the traceback text."""
    text = _worker_log.format_traceback(type(error), error, error.__traceback__)
    try:
        _worker_log.logger.warning("block %s failed: %s", block.block_id, error)
        _worker_log.emit_failure("block %s failed:\n%s" % (block.block_id, text))
    except Exception:  # noqa: BLE001 - reporting must never mask the failure itself
        pass
    return text


# ---- block-function workers ------------------------------------------------------------------


class BlockWorker(wc.Session):
    """A block-function task's connection: process_function(block) for every block sent."""

    capture_output = False
    end_on_failure = True
    end_on_failure_reason = FAILURE_REASON

    def __init__(self, sock: socket.socket, slot: str, secret: str,
                 process_function: Callable[[Block], Any]) -> None:
        wc.Session.__init__(self, sock, slot, secret, None)
        self.process_function = process_function
        self.failure: Optional[str] = None
        self.lost = False

    def initialise(self, init: Dict[str, Any]) -> bool:
        self.setup_task(init)
        self.daisy_total = _total_roi(init)
        process = self.process_function
        failed = _FAILED
        me = self

        def call(block: Block) -> None:
            try:
                process(block)
            except BaseException as error:
                block._status = failed
                me.failure = _report_failure(block, error)
                raise
            if block._status is failed:
                me.failure = "block %s failed: %s" % (block.block_id, MARKED_FAILED)
                raise MarkedFailed(MARKED_FAILED)

        self.call = call
        return True

    def block_maker(self) -> Callable[[int, Any], Block]:
        return block_factory(self.layout, self.task_id, self.daisy_total)

    def peer_lost(self) -> None:
        # The scheduler dropped this worker (its block timed out, the launch was cancelled, the
        # run ended): the block in progress finishes on its own and its result goes nowhere.
        self.lost = True


# ---- worker-function workers: Client -----------------------------------------------------------


class _ClientConnection(wc.Session):
    """A worker function's connection: blocks handed out one at a time by Client."""

    capture_output = False

    def __init__(self, sock: socket.socket, slot: str, secret: str) -> None:
        wc.Session.__init__(self, sock, slot, secret, None)
        self.over = False

    def serve(self) -> None:
        """The handshake, init and ready; then blocks flow through `next_block` / `finish`."""
        self.handshake()
        kind, body = self.wait_frame()
        if kind == wc.ERROR:
            refusal = json.loads(body)
            if refusal.get("later") is True:
                raise wc.SessionEnd("The run needs no more workers now: %s"
                                    % refusal["message"], 0)
            raise wc.SessionEnd("The scheduler refused this worker: %s" % refusal["message"])
        if kind == wc.STOP:
            raise wc.SessionEnd("the scheduler stopped this worker before it started", 0)
        if kind != wc.INIT:
            self.refuse("the scheduler sent frame type 0x%02x instead of init" % kind)
        init = json.loads(body)
        if init.get("protocol") != wc.PROTOCOL:
            self.refuse("the scheduler speaks protocol %s but this worker speaks %d; run the "
                        "same blockwise version on both sides"
                        % (init.get("protocol"), wc.PROTOCOL))
        self.setup_task(init)
        self.make = block_factory(self.layout, self.task_id, _total_roi(init))
        self.meter = wc.Meter() if self.measure else None
        self.results = wc.Results(9 if self.measure else 3, False)
        self.marks = self._marks()
        threading.Thread(target=self.heartbeats, name="daisy-client-heartbeat",
                         daemon=True).start()
        self.send_json(wc.READY, {})

    def _marks(self) -> Tuple[float, float, float, float]:
        if self.meter is None:
            return (0.0, 0.0, 0.0, 0.0)
        read, write = self.meter.io()
        return (time.process_time(), read, write, self.meter.usage()[1])

    def next_block(self) -> Optional[Tuple[float, float]]:
        """The next (position, attempt), or None once the scheduler said stop."""
        queue = self.queue
        while True:
            if queue:
                if not self.receive(False):
                    raise wc.SessionEnd("the scheduler closed the connection")
                if self.start < len(self.buffer):
                    self.take_frames()
                if self.recall:
                    self.hand_back()
                    continue
                return queue.popleft()
            self.flush()
            if self.recall:
                self.hand_back()
                continue
            if self.stopping:
                return None
            if not self.receive(True):
                raise wc.SessionEnd("the scheduler closed the connection")
            self.take_frames()

    def begin(self, position: float) -> float:
        now = time.monotonic()
        with self.lock:
            self.running = (position, now)
            if self.results.count == 0 and now - self.announced_at >= wc.ANNOUNCE_AFTER_SECONDS:
                self.announced = True
                self.announced_at = now
                self.send(wc.HEARTBEAT_FRAME.pack(17, wc.HEARTBEAT, position, 0.0))
        return time.perf_counter()

    def finish(self, position: float, seconds: float, fields: Optional[Dict[str, Any]]) -> None:
        results = self.results
        t1 = time.perf_counter()
        with self.lock:
            self.running = None
            status = 0.0 if fields is None else 1.0
            if self.meter is not None:
                cpu0, read0, write0, faults0 = self.marks
                self.marks = marks = self._marks()
                rss = self.meter.usage()[0]
                results.records.extend((position, status, seconds, marks[0] - cpu0, rss,
                                        marks[1] - read0, marks[2] - write0, time.time(),
                                        marks[3] - faults0))
            else:
                results.records.extend((position, status, seconds))
            if fields is not None:
                fields["position"] = position
                results.errors.append(fields)
            count = results.count = results.count + 1
            if count == 1:
                results.first = t1
            if (self.announced or not self.queue or count >= wc.FLUSH_AFTER_BLOCKS
                    or t1 - results.first >= wc.FLUSH_AFTER_SECONDS):
                self.announced = False
                self.send(results.take())

    def leave(self, reason: str) -> None:
        """Hand back the blocks not started and wait (a while) for the scheduler's stop."""
        self.send_json(wc.LEAVING, {"reason": reason})
        self.final = True
        self.hand_back()
        deadline = time.monotonic() + LEAVE_SECONDS
        while not self.stopping and time.monotonic() < deadline:
            if self.queue:  # sent before our leaving arrived: not started, so returned
                self.hand_back()
            ready = select.select([self.sock], [], [], 0.1)[0]
            if ready:
                if not self.receive(True):
                    return
                self.take_frames()

    def peer_lost(self) -> None:
        pass  # the block in progress ends on its own; its result goes nowhere

    def close(self) -> None:
        if self.over:
            return
        self.over = True
        self.ended.set()
        with self.send_lock:
            self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


_thread_state = threading.local()


class Client:
    """A worker function's connection to its run: ``acquire_block()`` hands out one block at a
    time.

    ``Client()`` reads the worker's ``Context`` (bound to the worker thread, or
    ``DAISY_CONTEXT`` in a process the worker function started); ``Client(context=ctx)`` uses
    the one given::

        client = daisy.Client()
        while True:
            with client.acquire_block() as block:
                if block is None:
                    break
                ...  # process the block; an exception marks it failed (and propagates)
    """

    def __init__(self, context: Optional[Context] = None) -> None:
        if context is None:
            context = Context.from_env()
        self.context = context
        try:
            self.host = context["hostname"]
            self.port = int(context["port"])
            self.worker_id = int(context["worker_id"])
            self.task_id = context["task_id"]
        except KeyError as missing:
            raise KeyError(
                "The worker context lacks %s: Client() needs the context a run gives its "
                "workers (hostname, port, task_id, worker_id); call it from a worker function "
                "of run_blockwise or a process it started" % missing
            ) from None
        secret = context.get(SECRET_KEY)
        slot = context.get(SLOT_KEY)
        if not secret or not slot:
            raise RuntimeError(
                "The worker context (hostname %s, port %s) carries no blockwise secret and "
                "slot (%s, %s): blockwise.daisy's Client connects only to runs of "
                "blockwise.daisy's run_blockwise, whose worker functions get them in their "
                "context; pass that context on unchanged." % (self.host, self.port, SECRET_KEY,
                                                            SLOT_KEY)
            )
        wc.check_secret(secret, "the worker context")
        env = {}  # no BLOCKWISE_PARENT_PID: this process is not a worker process of the run
        self._done = False
        self._connection: Optional[_ClientConnection] = None
        try:
            # The run listens before it launches any worker: a refused connection means it has
            # ended (its blocks ran out before this worker's process came up), not "not yet".
            self._connection = wc.serve_connected(
                self.host, self.port, env, lambda sock: _ClientConnection(sock, slot, secret),
                refused_ends=True)
        except wc.NothingListens:
            self._done = True
            wc.log("daisy.Client: the run at %s:%s has ended (nothing listens there any more); "
                   "no block for this worker" % (self.host, self.port))
        clients = getattr(_thread_state, "clients", None)
        if clients is not None:
            clients.append(self)

    @contextmanager
    def acquire_block(self) -> Iterator[Optional[Block]]:
        """The next block (status PROCESSING), or None once the run has no more for this
        worker. Leaving the ``with`` normally reports the block done (failed if its status was
        set to FAILED); an exception reports it failed and propagates."""
        connection = self._connection
        item = None
        if connection is not None and not self._done:
            try:
                item = connection.next_block()
            except wc.SessionEnd:
                item = None
            if item is None:
                self._done = True
                self.disconnect()
        if item is None:
            yield None
            return
        position, attempt = item
        block = connection.make(int(position), attempt)
        t0 = connection.begin(position)
        fields: Optional[Dict[str, Any]] = None
        try:
            yield block
        except BaseException as error:
            block._status = _FAILED
            fields = wc.error_fields(error)
            _report_failure(block, error)
            raise
        finally:
            seconds = time.perf_counter() - t0
            if fields is None:
                if block._status is _FAILED:
                    fields = {"message": MARKED_FAILED}
                else:
                    block._status = _SUCCESS
            try:
                connection.finish(position, seconds, fields)
            except wc.SessionEnd:
                # The scheduler closed the connection (the run ended, the block timed out):
                # the result goes nowhere, and the next acquire_block() says None.
                self._done = True

    def release_block(self, block: Block) -> None:  # pragma: no cover - daisy 1.x name
        raise RuntimeError(
            "Client.release_block is daisy 1.x's; use `with client.acquire_block() as block:`, "
            "which reports the block when the with-statement ends"
        )

    def disconnect(self) -> None:
        """Close the connection (a worker that still held blocks gets them taken back)."""
        connection = self._connection
        if connection is not None:
            self._connection = None
            connection.close()

    def _end(self, error: Optional[BaseException]) -> None:
        """The worker function ended: a failure says `closing`, a normal end hands back what it
        did not start."""
        connection = self._connection
        if connection is None:
            return
        try:
            if error is not None:
                connection.flush()
                connection.send_json(wc.CLOSING, {
                    "reason": "the worker function raised %s" % wc.error_text(error)})
            elif not connection.stopping:
                connection.flush()
                connection.leave("the worker function returned")
        except (wc.SessionEnd, OSError):
            pass
        self.disconnect()

    def __del__(self) -> None:
        try:
            self.disconnect()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ---- the launches of a run -------------------------------------------------------------------


class _Launch:
    __slots__ = ("task_id", "worker", "env", "cancelled", "thread", "connection")

    def __init__(self, task_id: str, worker: int, env: Dict[str, str]) -> None:
        self.task_id = task_id
        self.worker = worker
        self.env = env
        self.cancelled = False
        self.thread: Optional[threading.Thread] = None
        self.connection: Optional[wc.Session] = None


class WorkerLaunches:
    """The worker threads of one run: `launch` and `cancel` events in, `exited` messages out.

    `tasks` maps task IDs to (process_function, mode) with mode "block" or "worker";
    `send` delivers a message to the session (from any thread; it must not raise)."""

    def __init__(self, tasks: Dict[str, Tuple[Callable[..., Any], str]],
                 send: Callable[[Dict[str, Any]], None]) -> None:
        self.tasks = tasks
        self.send = send
        self.launches: Dict[Tuple[str, int], _Launch] = {}
        self.lock = threading.Lock()

    def launch(self, event: Dict[str, Any]) -> None:
        task_id = str(event["task"])
        worker = int(event["worker"])
        env = {str(k): str(v) for k, v in (event.get("env") or {}).items()}
        launch = _Launch(task_id, worker, env)
        with self.lock:
            self.launches[(task_id, worker)] = launch
        thread = threading.Thread(target=self._run, args=(launch,),
                                  name="daisy-worker-%s-%d" % (task_id, worker), daemon=True)
        launch.thread = thread
        thread.start()

    def cancel(self, event: Dict[str, Any]) -> None:
        with self.lock:
            launch = self.launches.get((str(event["task"]), int(event["worker"])))
        if launch is not None:
            launch.cancelled = True

    def alive(self) -> List[threading.Thread]:
        with self.lock:
            return [l.thread for l in self.launches.values()
                    if l.thread is not None and l.thread.is_alive()]

    def _run(self, launch: _Launch) -> None:
        ok, error = True, None
        try:
            entry = self.tasks.get(launch.task_id)
            if entry is None:
                raise RuntimeError("the run launched a worker for task %r, which this process "
                                   "does not know" % launch.task_id)
            function, mode = entry
            if not launch.cancelled:
                if mode == "worker":
                    ok, error = self._run_worker_function(launch, function)
                else:
                    ok, error = self._run_block_function(launch, function)
        except BaseException:  # noqa: BLE001 - whatever ends the thread is reported
            ok, error = False, traceback.format_exc()
        finally:
            with self.lock:
                self.launches.pop((launch.task_id, launch.worker), None)
            try:
                self.send({"op": "exited", "task": launch.task_id, "worker": launch.worker,
                           "ok": ok, "error": error})
            except Exception:  # noqa: BLE001 - the session is gone: nobody to tell
                pass

    @staticmethod
    def _address(launch: _Launch) -> Tuple[str, int, str, str]:
        env = launch.env
        host, port = wc.parse_address(env.get("BLOCKWISE_CONNECT", ""))
        secret = wc.check_secret(env.get("BLOCKWISE_SECRET", "").strip(), "BLOCKWISE_SECRET")
        slot = env.get("BLOCKWISE_WORKER_SLOT", "")
        return host, port, secret, slot

    def _run_block_function(self, launch: _Launch, function: Callable[..., Any]
                            ) -> Tuple[bool, Optional[str]]:
        try:
            host, port, secret, slot = self._address(launch)
        except wc.Refusal as refusal:
            return False, str(refusal)
        sessions: List[BlockWorker] = []

        def make(sock: socket.socket) -> BlockWorker:
            session = BlockWorker(sock, slot, secret, function)
            sessions.append(session)
            launch.connection = session
            return session

        try:
            with _worker_log.worker_log_context(launch.task_id, launch.worker):
                wc.serve_connected(host, port, {}, make)
            return True, None
        except wc.Refusal as refusal:
            return False, str(refusal)
        except wc.SessionEnd as end:
            session = sessions[-1] if sessions else None
            if session is not None and session.failure is not None:
                # process_function raised (or set FAILED, or called sys.exit()): the failed
                # record and `closing` are sent; the worker ends dirty, as in daisy.
                return False, session.failure
            text = str(end)
            quiet = (end.code == 0 or launch.cancelled or (session is not None and session.lost)
                     or "closed the connection" in text or "connection failed" in text)
            if quiet:
                # The scheduler ended this worker (the run is over, the launch was cancelled,
                # its block timed out): nothing to report.
                return True, None
            return False, text  # refused, or the scheduler broke the protocol
        finally:
            for session in sessions:
                session.ended.set()
                try:
                    session.sock.close()
                except OSError:
                    pass

    def _run_worker_function(self, launch: _Launch, function: Callable[[], Any]
                             ) -> Tuple[bool, Optional[str]]:
        env = launch.env
        try:
            host, port = wc.parse_address(env.get("BLOCKWISE_CONNECT", ""))
        except wc.Refusal as refusal:
            return False, str(refusal)
        context = Context(hostname=host, port=port, task_id=launch.task_id,
                          worker_id=launch.worker)
        context[SECRET_KEY] = env.get("BLOCKWISE_SECRET", "")
        context[SLOT_KEY] = env.get("BLOCKWISE_WORKER_SLOT", "")
        clients: List[Client] = []
        _thread_state.clients = clients
        _bind_thread_context(context)
        os.environ[Context.ENV_VARIABLE] = context.to_env()
        error: Optional[BaseException] = None
        try:
            with _worker_log.worker_log_context(launch.task_id, launch.worker):
                try:
                    function()
                except BaseException as e:  # noqa: BLE001 - reported as the worker's failure
                    error = e
                    text = _worker_log.format_traceback(type(e), e, e.__traceback__)
                    try:
                        _worker_log.logger.warning("worker function %s failed: %s",
                                                   launch.task_id, e)
                        _worker_log.emit_failure(text)
                    except Exception:  # noqa: BLE001
                        pass
        finally:
            _unbind_thread_context()
            _thread_state.clients = None
            for client in clients:
                client._end(error)
        if error is not None:
            return False, "".join(traceback.format_exception(type(error), error,
                                                             error.__traceback__))
        return True, None
