"""Progress observers: ``JsonProgressObserver``, ``ProgressBars`` and ``resolve_observer``.

An observer is any object with ``on_start(states)``, ``on_progress(states)`` and
``on_finish(states)`` (each optional), called in the calling thread with
``{task_id: TaskState}``: once at the start, at most every 100 ms while the run goes, once at
the end.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import IO, Any, Dict, Iterable, List, Mapping, Optional, Sequence, TextIO, Tuple, Union

from . import logging as _daisy_logging
from ._types import TaskState

__all__ = ["JsonProgressObserver", "ProgressBars", "resolve_observer"]

States = Mapping[str, TaskState]
PathLike = Union[str, "os.PathLike[str]"]


class JsonProgressObserver:
    """Streams progress as JSON lines, one per task per event, for dashboards and log tools.

    ``JsonProgressObserver(path="progress.jsonl")`` writes to that file (opened now,
    truncated, closed after the run's last event); ``stream=f`` writes to an open text stream
    (left open); neither writes to stdout. Each line::

        {"t": 1745781234.123, "event": "start" | "progress" | "finish", "task": "extract",
         "total": 100, "ready": 9, "processing": 4, "completed": 43, "skipped": 0,
         "failed": 2, "orphaned": 0, "restarts": 1, "failures": 1}

    ``t`` is ``time.time()``; ``completed`` includes ``skipped``; ``restarts`` is
    ``worker_restart_count`` and ``failures`` ``worker_failure_count``.
    """

    def __init__(self, path: Optional[PathLike] = None, stream: Optional[IO[str]] = None) -> None:
        if path is not None and stream is not None:
            raise ValueError(
                "JsonProgressObserver got both path=%r and stream=%r; pass one of them "
                "(path to write a file, stream to write to an open stream)." % (path, stream)
            )
        self._path = None if path is None else os.fspath(path)
        self._sink: Optional[IO[str]]
        if self._path is not None:
            self._sink = open(self._path, "w", buffering=1, encoding="utf-8")
        else:
            self._sink = stream
        self._owns_sink = self._path is not None

    def _stream(self) -> IO[str]:
        if self._owns_sink:
            if self._sink is None or self._sink.closed:
                # Used for a second run: keep what the first one wrote.
                self._sink = open(self._path, "a", buffering=1, encoding="utf-8")  # type: ignore[arg-type]
            return self._sink
        if self._sink is not None:
            return self._sink
        return _daisy_logging.real_stdout()

    def _emit(self, event: str, states: States) -> None:
        sink = self._stream()
        t = time.time()
        lines = []
        for task_id, state in states.items():
            lines.append(
                json.dumps(
                    {
                        "t": t,
                        "event": event,
                        "task": task_id,
                        "total": int(state.total_block_count),
                        "ready": int(state.ready_count),
                        "processing": int(state.processing_count),
                        "completed": int(state.completed_count),
                        "skipped": int(state.skipped_count),
                        "failed": int(state.failed_count),
                        "orphaned": int(state.orphaned_count),
                        "restarts": int(state.worker_restart_count),
                        "failures": int(state.worker_failure_count),
                    }
                )
            )
        if lines:
            sink.write("\n".join(lines) + "\n")
        try:
            sink.flush()
        except (OSError, ValueError):
            pass

    def on_start(self, states: States) -> None:
        """Write the ``start`` lines."""
        self._emit("start", states)

    def on_progress(self, states: States) -> None:
        """Write ``progress`` lines."""
        self._emit("progress", states)

    def on_finish(self, states: States) -> None:
        """Write the ``finish`` lines and close a file opened from ``path``."""
        try:
            self._emit("finish", states)
        finally:
            if self._owns_sink and self._sink is not None:
                try:
                    self._sink.close()
                except OSError:
                    pass


def _ordered(states: States, task_order: Optional[Sequence[str]]) -> List[Tuple[str, TaskState]]:
    """``states`` in ``task_order`` (the pipeline's order), then the rest alphabetically."""
    if not task_order:
        return list(states.items())
    listed = [(t, states[t]) for t in task_order if t in states]
    known = set(task_order)
    return listed + [(t, states[t]) for t in sorted(states) if t not in known]


def _outcome(state: TaskState) -> str:
    if state.failed_count > 0:
        return "✗"
    if state.orphaned_count > 0:
        return "∅"
    if not state.is_done():
        return "…"  # stopped (Ctrl-C) before its blocks were all done
    return "✔"


def _in_notebook() -> bool:
    return "ipykernel" in sys.modules


class _TqdmBars:
    """One ``tqdm`` bar per task."""

    def __init__(self, tqdm: Any, stream: TextIO) -> None:
        self._tqdm = tqdm
        self._stream = stream
        self._bars: Dict[str, Any] = {}
        self._descriptions: Dict[str, str] = {}

    def _bar(self, task_id: str, state: TaskState) -> Any:
        bar = self._bars.get(task_id)
        if bar is None:
            description = "%s ▶ ♻=0" % task_id
            bar = self._tqdm(
                total=int(state.total_block_count),
                desc=description,
                unit="block",
                leave=True,
                dynamic_ncols=True,
                file=self._stream,
            )
            self._bars[task_id] = bar
            self._descriptions[task_id] = description
        return bar

    def update(self, items: Iterable[Tuple[str, TaskState]], final: bool) -> None:
        for task_id, state in items:
            bar = self._bar(task_id, state)
            delta = int(state.completed_count) - bar.n
            if delta > 0:
                bar.update(delta)
            symbol = _outcome(state) if final else "▶"
            description = "%s %s ♻=%d" % (task_id, symbol, state.worker_restart_count)
            if description != self._descriptions.get(task_id):
                bar.set_description(description, refresh=final)
                self._descriptions[task_id] = description
            bar.set_postfix(
                {
                    "⧗": int(state.pending_count),
                    "▶": int(state.processing_count),
                    "✔": int(state.completed_count),
                    "✗": int(state.failed_count),
                    "∅": int(state.orphaned_count),
                },
                refresh=final,
            )
            if final:
                bar.close()


class _TerminalBars:
    """One redrawn line per task on a terminal, without tqdm."""

    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._drawn = 0

    def _line(self, task_id: str, state: TaskState, width: int, final: bool) -> str:
        total = max(int(state.total_block_count), 0)
        done = int(state.completed_count)
        filled = self.WIDTH if total == 0 else min(self.WIDTH, self.WIDTH * done // total)
        symbol = _outcome(state) if final else "▶"
        return "%-*s %s |%s%s| %d/%d  ▶%d ✗%d ∅%d ♻=%d" % (
            width,
            task_id,
            symbol,
            "█" * filled,
            " " * (self.WIDTH - filled),
            done,
            total,
            state.processing_count,
            state.failed_count,
            state.orphaned_count,
            state.worker_restart_count,
        )

    def update(self, items: Iterable[Tuple[str, TaskState]], final: bool) -> None:
        rows = list(items)
        if not rows:
            return
        width = max(len(t) for t, _ in rows)
        text = ""
        if self._drawn:
            text += "\x1b[%dF" % self._drawn  # back to the first line of the bars
        text += "".join("\x1b[2K" + self._line(t, s, width, final) + "\n" for t, s in rows)
        self._drawn = len(rows)
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass


class _PlainLines:
    """Progress as plain lines (no terminal): at the start, every ``interval`` seconds, and
    at the end."""

    def __init__(self, stream: TextIO, interval: float = 10.0) -> None:
        self._stream = stream
        self._interval = interval
        self._last = 0.0

    def update(self, items: Iterable[Tuple[str, TaskState]], final: bool, first: bool = False) -> None:
        now = time.monotonic()
        if not (first or final or now - self._last >= self._interval):
            return
        self._last = now
        lines = []
        for task_id, state in items:
            lines.append(
                "%s: %d/%d blocks completed (%d skipped), %d processing, %d failed, "
                "%d orphaned%s"
                % (
                    task_id,
                    state.completed_count,
                    state.total_block_count,
                    state.skipped_count,
                    state.processing_count,
                    state.failed_count,
                    state.orphaned_count,
                    " %s" % _outcome(state) if final else "",
                )
            )
        try:
            self._stream.write("".join(line + "\n" for line in lines))
            self._stream.flush()
        except (OSError, ValueError):
            pass


class ProgressBars:
    """daisy's default progress display: one bar per task on stderr.

    On a terminal (or in a notebook) it uses ``tqdm`` when that is installed, else its own
    one-line-per-task bars; when stderr is not a terminal it writes plain progress lines at the
    start, every ``interval`` seconds and at the end. Bars appear in ``task_order`` (the
    pipeline's order), other tasks after them alphabetically. ``stream`` defaults to the
    terminal's stderr at ``on_start``.
    """

    def __init__(
        self,
        task_order: Optional[Sequence[str]] = None,
        stream: Optional[TextIO] = None,
        interval: float = 10.0,
    ) -> None:
        self._task_order = list(task_order) if task_order else None
        self._given_stream = stream
        self._interval = interval
        self._display: Any = None
        self._states: Dict[str, TaskState] = {}

    def _items(self, states: States) -> List[Tuple[str, TaskState]]:
        """Every task seen in this run (an event may carry only some), in display order."""
        self._states.update(states)
        return _ordered(self._states, self._task_order)

    def _make_display(self) -> Any:
        stream = self._given_stream or _daisy_logging.real_stderr()
        try:
            interactive = bool(stream.isatty())
        except (AttributeError, ValueError):
            interactive = False
        if interactive or _in_notebook():
            try:
                if _in_notebook():
                    from tqdm.auto import tqdm  # type: ignore[import-not-found]
                else:
                    from tqdm import tqdm  # type: ignore[import-not-found]
            except ImportError:
                tqdm = None
            if tqdm is not None:
                return _TqdmBars(tqdm, stream)
            if interactive:
                return _TerminalBars(stream)
        return _PlainLines(stream, self._interval)

    def on_start(self, states: States) -> None:
        """Create the bars."""
        self._display = self._make_display()
        self._states = {}
        items = self._items(states)
        if isinstance(self._display, _PlainLines):
            self._display.update(items, final=False, first=True)
        else:
            self._display.update(items, final=False)

    def on_progress(self, states: States) -> None:
        """Advance the bars."""
        if self._display is None:
            self.on_start(states)
            return
        self._display.update(self._items(states), final=False)

    def on_finish(self, states: States) -> None:
        """Draw the final state (✔ success, ✗ failures, ∅ orphans) and close the bars."""
        if self._display is None:
            self._display = self._make_display()
        self._display.update(self._items(states), final=True)
        self._display = None
        self._states = {}


def resolve_observer(progress: Any, task_order: Optional[Sequence[str]] = None) -> Any:
    """The observer for ``run_blockwise(progress=...)``: ``True`` gives ``ProgressBars``,
    ``False`` / ``None`` none, any object with ``on_start`` / ``on_progress`` / ``on_finish``
    itself. ``TypeError`` for anything else."""
    if progress is True:
        return ProgressBars(task_order)
    if progress is None or progress is False:
        return None
    if any(callable(getattr(progress, name, None)) for name in ("on_start", "on_progress", "on_finish")):
        return progress
    raise TypeError(
        "progress must be True (progress bars), False, or an observer with on_start / "
        "on_progress / on_finish methods (e.g. daisy.JsonProgressObserver()); got %r (%s)."
        % (progress, type(progress).__name__)
    )
