"""One ``blockwise daisy-session`` child process and its JSON-lines protocol.

The binary does everything the daisy API promises about blocks (enumeration, dependencies,
scheduling, retries, restarts, the ledger); Python talks to it through one child process per
Python process, started on first use and reused (``get_session()``). Both directions carry one
JSON object per line: requests with an ``id`` get one answer ``{"re": id, ...}``; a run also
brings events (``{"ev": ...}``) until its answer. See docs/design/DAISY_API.md.

The child runs in a session of its own, so a terminal's Ctrl-C reaches Python alone; Python
turns the ``KeyboardInterrupt`` into a ``stop``. The child ends when its stdin closes, so a
Python process that dies never leaves a run behind.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional

from .._binary import find_binary

__all__ = ["PROTOCOL", "Run", "Session", "SessionDied", "get_session"]

PROTOCOL = 1
# How long a read waits before it looks again: a SIGINT that the kernel handed to another thread
# is only acted on when the main thread runs Python code, so waits must not be unbounded.
POLL_SECONDS = 0.05
# How long closing waits for the child to end on its own before it is killed.
CLOSE_SECONDS = 2.0

_ERROR_TYPES = {
    "ValueError": ValueError,
    "TypeError": TypeError,
    "RuntimeError": RuntimeError,
    "KeyError": KeyError,
}


_EOF = object()


class _BadLine:
    __slots__ = ("line",)

    def __init__(self, line: bytes) -> None:
        self.line = line


class SessionDied(RuntimeError):
    """The ``blockwise daisy-session`` process ended while Python still needed it."""


def error_from(error: Any) -> BaseException:
    """The exception an answer's ``error`` names (RuntimeError for a type not in the contract)."""
    if not isinstance(error, dict):
        return RuntimeError("blockwise's daisy session refused a request: %r" % (error,))
    kind = _ERROR_TYPES.get(str(error.get("type")), RuntimeError)
    return kind(str(error.get("message", "blockwise's daisy session refused a request")))


class Session:
    """A running ``blockwise daisy-session``: requests, runs, and fire-and-forget messages.

    One thread at a time talks request/answer (``request`` and runs take ``_talk``); any thread
    may ``send`` (worker threads send ``exited`` while the main thread reads a run's events).
    """

    def __init__(self, binary: Optional[str] = None) -> None:
        self.binary = binary if binary is not None else find_binary()
        self.pid = os.getpid()
        try:
            self.process = subprocess.Popen(
                [self.binary, "daisy-session"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                bufsize=0,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as error:
            raise RuntimeError(
                "Cannot start %s daisy-session: %s. Check that the file is the blockwise binary "
                "(or a script running `bun main.ts \"$@\"` with a #! line) and is executable."
                % (self.binary, error.strerror or error)
            ) from None
        self._in = self.process.stdin
        # A reader thread takes every line off the pipe into `_inbox`: the thread that waits
        # for messages only waits on the queue, so a KeyboardInterrupt can never land between a
        # read and its bookkeeping and lose part of the stream.
        self._inbox: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._send_lock = threading.Lock()
        # Held by the thread that reads: a request until its answer, a run until its answer.
        self._talk = threading.RLock()
        self._next_id = 0
        self._eof = False
        self._dead_message: Optional[str] = None
        self.running = False
        self.run_thread: Optional[int] = None
        self.version: Optional[str] = None
        threading.Thread(target=self._reader, args=(self.process.stdout,),
                         name="blockwise-daisy-session-reader", daemon=True).start()
        hello = self.request("hello")
        if hello.get("protocol") != PROTOCOL:
            self.close()
            raise RuntimeError(
                "%s speaks the daisy session protocol %r, this Python package protocol %d (binary "
                "%s); install the blockwise wheel and binary of one version."
                % (self.binary, hello.get("protocol"), PROTOCOL, hello.get("version"))
            )
        self.version = hello.get("version")

    # -- state --

    def alive(self) -> bool:
        """Whether the child still runs and belongs to this process (not a fork's parent)."""
        return (self._dead_message is None and not self._eof and self.pid == os.getpid()
                and self.process.poll() is None)

    def _died(self) -> SessionDied:
        if self._dead_message is None:
            code = self.process.poll()
            if code is None:
                try:
                    code = self.process.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    code = None
            if code is None:
                status = "closed its output but is still running"
            elif code < 0:
                status = "was killed by signal %d" % -code
            else:
                status = "exited with status %d" % code
            self._dead_message = (
                "blockwise's daisy session (%s daisy-session, pid %d) %s unexpectedly; its "
                "message, if any, is on stderr above. The next daisy call starts a new session."
                % (self.binary, self.process.pid, status)
            )
        return SessionDied(self._dead_message)

    # -- writing --

    def send(self, message: Dict[str, Any]) -> None:
        """Write one message (thread-safe); SessionDied when the child is gone."""
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        with self._send_lock:
            if self._dead_message is not None:
                raise SessionDied(self._dead_message)
            try:
                self._in.write(data)
            except (BrokenPipeError, OSError, ValueError):
                raise self._died() from None

    # -- reading --

    def _reader(self, stream: Any) -> None:
        """The reader thread: parsed messages into `_inbox`, then _EOF."""
        inbox = self._inbox
        fd = stream.fileno()
        pending = b""
        try:
            while True:
                try:
                    data = os.read(fd, 1 << 20)
                except InterruptedError:  # pragma: no cover - PEP 475 retries
                    continue
                except OSError:
                    data = b""
                if not data:
                    break
                if pending:
                    data = pending + data
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = data
                    continue
                pending = data[cut + 1:]
                for line in data[:cut].split(b"\n"):
                    if not line.strip():
                        continue
                    try:
                        message = json.loads(line)
                    except ValueError:
                        message = _BadLine(line)
                    inbox.put(message)
        finally:
            inbox.put(_EOF)

    def read(self, timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """The next message (an answer or an event), waiting in short slices so that a
        KeyboardInterrupt lands promptly; None when `timeout` passed first. SessionDied once
        the child's output has ended."""
        if self._eof:
            raise self._died()
        inbox = self._inbox
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = POLL_SECONDS
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    try:
                        message = inbox.get_nowait()
                    except queue.Empty:
                        return None
                else:
                    try:
                        message = inbox.get(timeout=wait)
                    except queue.Empty:
                        continue
            else:
                try:
                    message = inbox.get(timeout=wait)
                except queue.Empty:
                    continue
            if message is _EOF:
                self._eof = True
                raise self._died()
            if isinstance(message, _BadLine):
                raise RuntimeError(
                    "blockwise's daisy session sent a line that is not JSON: %r; the binary "
                    "and this package disagree (install both from one wheel)" % message.line[:200]
                )
            if isinstance(message, dict):
                return message

    # -- requests --

    def _new_id(self) -> int:
        with self._send_lock:
            self._next_id += 1
            return self._next_id

    def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        """Send request `op` and return its answer (without `re`); the answer's error raises
        the exception class it names (ValueError, TypeError, KeyError, RuntimeError)."""
        with self._talk:
            if self.running:
                raise RuntimeError(
                    "This Scheduler was opened before the serial run whose process_function "
                    "uses it, and its session is busy running that pipeline; open the "
                    "Scheduler inside the function, or use it after run_blockwise returns"
                )
            ident = self._new_id()
            message = {"op": op, "id": ident}
            message.update(fields)
            self.send(message)
            while True:
                answer = self.read()
                if answer is None or answer.get("re") != ident:
                    # An event outside a run, or the answer of a request whose caller was
                    # interrupted (KeyboardInterrupt) before it arrived: nobody waits for it.
                    continue
                if "error" in answer:
                    raise error_from(answer["error"])
                answer.pop("re", None)
                return answer

    def start_run(self, pipeline: Dict[str, Any], options: Dict[str, Any]) -> "Run":
        """Start a run: returns the Run whose `next()` gives its events, then its answer. The
        session is this thread's until the run's answer arrives (or `Run.abandon()`)."""
        self._talk.acquire()
        try:
            if self.running:
                raise RuntimeError(
                    "run_blockwise was called inside a serial run's process_function; runs of "
                    "one session go one after the other"
                )
            ident = self._new_id()
            self.send({"op": "run", "id": ident, "pipeline": pipeline, "options": options})
            self.running = True
            self.run_thread = threading.get_ident()
        except BaseException:
            self._talk.release()
            raise
        return Run(self, ident)

    # -- the end --

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """End the child: EOF on its stdin (a run in progress stops), then SIGKILL after
        `timeout` seconds. Safe to call twice; does nothing in a forked child (the child is
        its parent's)."""
        if self.pid != os.getpid():
            return
        with self._send_lock:
            if self._dead_message is None:
                self._dead_message = "blockwise's daisy session was closed"
            try:
                self._in.close()
            except OSError:
                pass
        self.kill_after(timeout)

    def kill_after(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the child to end, then kill its process group."""
        try:
            self.process.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL the child (and what it started: it leads its own process group)."""
        with self._send_lock:
            if self._dead_message is None:
                self._dead_message = "blockwise's daisy session was killed"
        try:
            os.killpg(self.process.pid, 9)
        except (OSError, AttributeError):
            try:
                self.process.kill()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL cannot end
            pass


class Run:
    """A run in progress: `next()` returns its events (dicts with "ev") and finally its answer
    (a dict with "re"; `finished` is then True). The run's answer error raises from `next()`."""

    def __init__(self, session: Session, ident: int) -> None:
        self.session = session
        self.id = ident
        self.finished = False
        self.answer: Optional[Dict[str, Any]] = None

    def next(self, timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """The next event or the answer; None when `timeout` passed first."""
        if self.finished:
            raise RuntimeError("the run has ended")
        session = self.session
        while True:
            try:
                message = session.read(timeout)
            except BaseException as error:
                if isinstance(error, SessionDied):
                    self._end()
                raise
            if message is None:
                return None
            if "ev" in message:
                return message
            if message.get("re") != self.id:
                continue  # the late answer of an interrupted request
            self._end()
            if "error" in message:
                raise error_from(message["error"])
            self.answer = message
            return message

    def send(self, message: Dict[str, Any]) -> None:
        """A fire-and-forget message for this run (stop, checked, ran); a dead session is the
        reader's to report, so nothing raises here."""
        try:
            self.session.send(message)
        except SessionDied:
            pass

    def abandon(self) -> None:
        """Give the session up without the answer (it was killed): it is not reused."""
        if not self.finished:
            self.session.kill()
            self._end()

    def _end(self) -> None:
        if not self.finished:
            self.finished = True
            self.session.running = False
            self.session.run_thread = None
            self.session._talk.release()


# ---- the shared sessions of this process -----------------------------------------------------

_sessions: List[Session] = []
_sessions_lock = threading.Lock()


def get_session() -> Session:
    """This process's session, started on first use and again after it died. While it runs a
    pipeline (and a process function calls the API: a Scheduler, a nested run), another session
    is used, started when there is none idle."""
    with _sessions_lock:
        for session in list(_sessions):
            if not session.alive():
                _sessions.remove(session)
                if session.pid == os.getpid():
                    try:
                        session.close(timeout=0.0)
                    except Exception:  # noqa: BLE001 - a dead session's pipes may be gone
                        pass
        for session in _sessions:
            if not session.running:
                return session
        session = Session()
        _sessions.append(session)
        return session


def close_sessions() -> None:
    """Close every session of this process (atexit)."""
    with _sessions_lock:
        sessions = list(_sessions)
        del _sessions[:]
    for session in sessions:
        try:
            session.close()
        except Exception:  # noqa: BLE001 - at exit, nothing to report to
            pass


atexit.register(close_sessions)
