"""``daisy.logging``: where worker threads' output goes.

Block functions run in worker threads of the calling process. While a worker thread is inside
``worker_log_context(task_id)``, what it prints (``sys.stdout`` / ``sys.stderr``) goes to
``<log basedir>/<task_id>/worker_<n>.out`` / ``.err`` instead of the terminal; other threads
print as usual. Three process-wide knobs, to set before ``run_blockwise``:

- ``set_log_basedir(path)``: the folder of the per-worker files (default ``./daisy_logs``);
  ``None`` turns the files off. Tasks without an explicit tracking path and with no tracking
  basedir set also keep their tracking store in ``<log basedir>/<task_id>``, as in daisy v2.
- ``set_log_mode(mode)``: ``"file"`` (default: files only), ``"console"`` (terminal only) or
  ``"both"``.
- ``set_log_level(level)``: the level of the ``"daisy"`` logger.

Failures are never hidden: ``emit_failure`` writes a block's traceback to the worker's
``.err`` file, and to the terminal too in ``console`` / ``both`` mode or when no file is bound.
"""

from __future__ import annotations

import logging as _logging
import os
import sys
import threading
import traceback as _traceback
from pathlib import Path
from types import TracebackType
from typing import Any, Dict, Optional, TextIO, Tuple, Type, Union

__all__ = [
    "LOG_BASEDIR",
    "logger",
    "set_log_basedir",
    "get_log_basedir",
    "set_log_mode",
    "get_log_mode",
    "set_log_level",
    "get_log_level",
    "get_worker_log_basename",
    "worker_log_context",
    "format_traceback",
    "emit_failure",
    "close_all_log_files",
    "real_stdout",
    "real_stderr",
]

PathLike = Union[str, "os.PathLike[str]"]

#: The folder of the per-worker log files (``None``: no files). Read it with
#: ``get_log_basedir()``; set it with ``set_log_basedir()``.
LOG_BASEDIR: Optional[Path] = Path("./daisy_logs")

_MODES = ("console", "file", "both")
_mode = "file"


class _StderrNowHandler(_logging.Handler):
    """Writes records to the terminal's stderr as it is when the record is emitted (not when
    the handler was made), bypassing the worker routing."""

    def emit(self, record: _logging.LogRecord) -> None:
        try:
            stream = real_stderr()
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


#: The ``"daisy"`` logger, used for block-failure warnings.
logger = _logging.getLogger("daisy")
if not logger.handlers:
    _handler = _StderrNowHandler()
    _handler.setFormatter(
        _logging.Formatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s", datefmt="%H:%M:%S")
    )
    logger.addHandler(_handler)
    logger.propagate = False
    logger.setLevel(_logging.WARNING)


def set_log_basedir(path: Optional[PathLike]) -> None:
    """Set the folder of per-worker log files; ``None`` turns file logging off (worker output
    then goes to the terminal whatever the mode)."""
    global LOG_BASEDIR
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            "set_log_basedir expects a folder path (str or pathlib.Path) or None; got %r (%s)."
            % (path, type(path).__name__)
        )
    LOG_BASEDIR = None if path is None else Path(path)


def get_log_basedir() -> Optional[Path]:
    """The folder of per-worker log files, or ``None`` when file logging is off."""
    return LOG_BASEDIR


def set_log_mode(mode: str) -> None:
    """Route worker output to ``"file"`` (default), ``"console"`` or ``"both"``."""
    global _mode
    if mode not in _MODES:
        raise ValueError(
            "log mode %r is not one of %s; use set_log_mode('file'), 'console' or 'both'."
            % (mode, ", ".join(repr(m) for m in _MODES))
        )
    _mode = mode


def get_log_mode() -> str:
    """The mode in effect: ``"console"`` whenever the log basedir is ``None``."""
    if LOG_BASEDIR is None:
        return "console"
    return _mode


def set_log_level(level: Union[int, str]) -> None:
    """Set the level of the ``"daisy"`` logger (``logging.INFO``, ``"WARNING"``, ...)."""
    try:
        logger.setLevel(level.upper() if isinstance(level, str) else level)
    except (TypeError, ValueError):
        raise ValueError(
            "log level %r is not a logging level; use logging.DEBUG, logging.INFO, "
            "logging.WARNING, logging.ERROR or their names." % (level,)
        ) from None


def get_log_level() -> int:
    """The level of the ``"daisy"`` logger."""
    return logger.level


def get_worker_log_basename(worker_id: Union[int, str], task_id: Optional[str] = None) -> Optional[Path]:
    """``<basedir>/[<task_id>/]worker_<worker_id>`` (add ``.out`` / ``.err``), or ``None`` when
    file logging is off."""
    base = LOG_BASEDIR
    if base is None:
        return None
    if task_id is not None:
        base = base / task_id
    return base / ("worker_%s" % worker_id)


# ---- per-thread routing ----------------------------------------------------------------------

_lock = threading.Lock()
_bound = threading.local()  # .files: the (out, err) pair of this thread, .slots: {task: n}
_files: Dict[Tuple[str, str, str], Tuple[TextIO, TextIO]] = {}
_slot_counts: Dict[Tuple[str, str], int] = {}
_generation = 0  # bumped by close_all_log_files: worker numbers start again at 0
_terminal_stdout: Optional[TextIO] = None
_terminal_stderr: Optional[TextIO] = None


class _ThreadRoutedStream:
    """Stands in for ``sys.stdout`` / ``sys.stderr``: a thread bound to worker log files writes
    there (per the mode), every other thread to the stream it replaced."""

    def __init__(self, which: int, fallback: TextIO) -> None:
        self._which = which  # 0: out, 1: err
        self._fallback = fallback

    def _target(self) -> Optional[TextIO]:
        files = getattr(_bound, "files", None)
        return None if files is None else files[self._which]

    def write(self, text: str) -> int:
        target = self._target()
        if target is None:
            return self._fallback.write(text)
        mode = get_log_mode()
        if mode != "console":
            try:
                target.write(text)
            except ValueError:  # closed by close_all_log_files while the thread ran
                self._fallback.write(text)
        if mode != "file":
            self._fallback.write(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        target = self._target()
        if target is not None:
            try:
                target.flush()
            except ValueError:
                pass
        try:
            self._fallback.flush()
        except Exception:
            pass

    def isatty(self) -> bool:
        if self._target() is not None:
            return False
        return bool(getattr(self._fallback, "isatty", lambda: False)())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fallback, name)


def _install_routing() -> None:
    """Put the routing streams in place of ``sys.stdout`` / ``sys.stderr`` (again, if something
    such as pytest's capture replaced them since)."""
    global _terminal_stdout, _terminal_stderr
    with _lock:
        if not isinstance(sys.stdout, _ThreadRoutedStream):
            _terminal_stdout = sys.stdout
            sys.stdout = _ThreadRoutedStream(0, sys.stdout)  # type: ignore[assignment]
        if not isinstance(sys.stderr, _ThreadRoutedStream):
            _terminal_stderr = sys.stderr
            sys.stderr = _ThreadRoutedStream(1, sys.stderr)  # type: ignore[assignment]


def real_stdout() -> TextIO:
    """The terminal's stdout, past the worker routing (for progress and summaries)."""
    stream = sys.stdout
    if isinstance(stream, _ThreadRoutedStream):
        return stream._fallback
    return stream if stream is not None else sys.__stdout__  # type: ignore[return-value]


def real_stderr() -> TextIO:
    """The terminal's stderr, past the worker routing (for progress and summaries)."""
    stream = sys.stderr
    if isinstance(stream, _ThreadRoutedStream):
        return stream._fallback
    return stream if stream is not None else sys.__stderr__  # type: ignore[return-value]


def _open_pair(base: Path, task_id: str, worker: str) -> Tuple[TextIO, TextIO]:
    """The (out, err) files of one worker, opened (truncated) the first time in this process
    since the last ``close_all_log_files``."""
    key = (str(base), task_id, worker)
    with _lock:
        pair = _files.get(key)
        if pair is not None and not pair[0].closed:
            return pair
        folder = base / task_id
        try:
            folder.mkdir(parents=True, exist_ok=True)
            name = "worker_%s" % worker
            out = open(folder / (name + ".out"), "w", buffering=1, encoding="utf-8", errors="replace")
            err = open(folder / (name + ".err"), "w", buffering=1, encoding="utf-8", errors="replace")
        except OSError as e:
            raise OSError(
                e.errno,
                "cannot create the worker log files in %s (%s); choose a writable folder with "
                "daisy.logging.set_log_basedir(...) or turn files off with "
                "set_log_basedir(None)" % (folder, e.strerror or e),
            ) from e
        _files[key] = (out, err)
        return out, err


def _thread_slot(base: Path, task_id: str) -> str:
    """This thread's worker number within ``task_id``: 0, 1, ... in order of first use."""
    slots = getattr(_bound, "slots", None)
    if slots is None or getattr(_bound, "generation", None) != _generation:
        slots = _bound.slots = {}
        _bound.generation = _generation
    key = (str(base), task_id)
    slot = slots.get(key)
    if slot is None:
        with _lock:
            slot = _slot_counts.get(key, 0)
            _slot_counts[key] = slot + 1
        slots[key] = slot
    return str(slot)


class worker_log_context:
    """Route the calling thread's prints to its worker log files while inside.

    ``with worker_log_context(task_id, worker=3): ...`` writes to
    ``<basedir>/<task_id>/worker_3.out`` / ``.err``; without ``worker`` the thread gets the next
    free number of the task. Nothing is opened when the basedir is ``None`` or the mode is
    ``"console"``. Contexts nest; the previous binding comes back on exit. ``basename`` is the
    files' path without suffix (``None`` when no file is used).
    """

    __slots__ = ("task_id", "worker", "basename", "_previous", "_entered")

    def __init__(self, task_id: str, worker: Optional[Union[int, str]] = None) -> None:
        self.task_id = task_id
        self.worker = worker
        self.basename: Optional[Path] = None
        self._previous: Optional[Tuple[TextIO, TextIO]] = None
        self._entered = False

    def __enter__(self) -> "worker_log_context":
        _install_routing()
        base = LOG_BASEDIR
        if base is None or get_log_mode() == "console":
            return self
        worker = str(self.worker) if self.worker is not None else _thread_slot(base, self.task_id)
        files = _open_pair(base, self.task_id, worker)
        self.basename = base / self.task_id / ("worker_%s" % worker)
        self._previous = getattr(_bound, "files", None)
        _bound.files = files
        self._entered = True
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        if self._entered:
            files = getattr(_bound, "files", None)
            if files is not None:
                for f in files:
                    try:
                        f.flush()
                    except (OSError, ValueError):
                        pass
            _bound.files = self._previous
            self._entered = False
        return False


# ---- failures --------------------------------------------------------------------------------

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_format_lock = threading.Lock()


def _skip_package_frames(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """Drop the leading frames that are blockwise's own, so the trace starts at user code.
    When every frame is blockwise's, the whole trace is kept."""
    first = tb
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR + os.sep):
            return tb
        tb = tb.tb_next
    return first


def format_traceback(
    exc_type: Optional[Type[BaseException]],
    exc: Optional[BaseException],
    tb: Optional[TracebackType],
) -> str:
    """The text of an exception's traceback, from the first frame of user code on. Never
    raises: if formatting fails, the exception's type and repr are returned."""
    with _format_lock:
        try:
            return "".join(_traceback.format_exception(exc_type, exc, _skip_package_frames(tb)))
        except Exception as failure:  # pragma: no cover - formatting itself broke
            name = exc_type.__name__ if exc_type is not None else "Exception"
            return "%s: %r\n(the traceback could not be formatted: %r)\n" % (name, exc, failure)


def emit_failure(message: str) -> None:
    """Write a failure report (a block's traceback) where the mode sends worker errors: the
    bound worker's ``.err`` file and/or the terminal. With no file bound to the calling thread
    it goes to the terminal, so a failure is never lost."""
    if not message.endswith("\n"):
        message += "\n"
    mode = get_log_mode()
    files = getattr(_bound, "files", None)
    written = False
    if files is not None and mode != "console":
        try:
            files[1].write(message)
            files[1].flush()
            written = True
        except (OSError, ValueError):
            pass
    if mode != "file" or not written:
        stream = real_stderr()
        try:
            stream.write(message)
            stream.flush()
        except Exception:
            pass


def close_all_log_files() -> None:
    """Close every worker log file (at the end of a run); the next run truncates them anew."""
    global _generation
    with _lock:
        _generation += 1
        for out, err in _files.values():
            for f in (out, err):
                try:
                    f.close()
                except Exception:
                    pass
        _files.clear()
        _slot_counts.clear()
