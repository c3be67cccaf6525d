"""daisy's value types: ``BlockStatus``, ``Block`` and ``TaskState``.

Blocks made by the engine arrive as JSON objects (docs/design/DAISY_API.md, "Values") and are
wrapped by ``Block._from_session`` without building any ``Roi`` until one is asked for: a run
hands out up to 150,000 blocks a second and most block functions read two ROIs at most.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from ..geometry import Coordinate, Roi, cantor_number

__all__ = ["BlockStatus", "Block", "TaskState", "task_states"]


#: A block's outputs when its task declares none (read-only, shared by every such block).
NO_OUTPUTS: Mapping[str, str] = MappingProxyType({})


class BlockStatus(enum.IntEnum):
    """A block's lifecycle state. Members are ints (0-3) as in daisy, so they compare with
    ints and with each other."""

    CREATED = 0
    PROCESSING = 1
    SUCCESS = 2
    FAILED = 3

    def __repr__(self) -> str:
        return "BlockStatus.%s" % self.name

    __str__ = __repr__


_STATUSES = tuple(BlockStatus)


def _status(value: Any) -> BlockStatus:
    """``value`` as a BlockStatus; ValueError for anything but 0-3 or a member."""
    if value.__class__ is BlockStatus:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return _STATUSES[value]
    raise ValueError(
        "invalid status value %r: a block's status is one of BlockStatus.CREATED, "
        "PROCESSING, SUCCESS or FAILED (0-3)." % (value,)
    )


def _roi_from_json(value: Mapping[str, Sequence[int]]) -> Roi:
    """A Roi from the session's ``{"offset": [...], "shape": [...]}`` (trusted ints)."""
    return Roi._trusted(value["offset"], value["shape"])


def _require_roi(value: Any, what: str) -> Roi:
    if isinstance(value, Roi):
        return value
    offset = getattr(value, "offset", None)
    shape = getattr(value, "shape", None)
    if offset is not None and shape is not None:
        return Roi(offset, shape)  # a ROI of another library (funlib.geometry)
    raise TypeError(
        "Block %s must be a Roi; got %r (%s). Build it with Roi(offset, shape)."
        % (what, value, type(value).__name__)
    )


class Block:
    """One block of a task: its read and write ROIs, its ID and its status.

    ``Block(total_roi, read_roi, write_roi, block_id=None, task_id=None)`` computes the ID as
    daisy does, the Cantor number of the grid index
    ``(write_roi.offset - total_roi.offset) // write_roi.shape``, unless ``block_id`` (an int)
    is given. ``block_id`` reads back as the pair ``(task_id, id)``; blocks compare and hash by
    it. ``status`` starts as ``BlockStatus.CREATED`` and may be set.
    """

    __slots__ = (
        "_task_id",
        "_id",
        "_status",
        "_total_roi",
        "_read_roi",
        "_write_roi",
        "_index",
        "_raw",
        "position",
        "attempt",
        "outputs",
    )

    def __init__(
        self,
        total_roi: Optional[Roi],
        read_roi: Roi,
        write_roi: Roi,
        block_id: Union[int, Tuple[str, int], None] = None,
        task_id: Optional[str] = None,
    ) -> None:
        # daisy's compiled constructor orders (task_id, block_id); accept that order too.
        if isinstance(block_id, str) and (task_id is None or isinstance(task_id, int)):
            block_id, task_id = task_id, block_id
        if isinstance(block_id, tuple):
            if len(block_id) != 2:
                raise ValueError(
                    "Block block_id %r must be an int or a (task_id, int) pair." % (block_id,)
                )
            if task_id is None:
                task_id = block_id[0]
            block_id = block_id[1]
        if task_id is None:
            task_id = ""
        if not isinstance(task_id, str):
            raise TypeError(
                "Block task_id must be a str; got %r (%s)." % (task_id, type(task_id).__name__)
            )
        read = _require_roi(read_roi, "read_roi")
        write = _require_roi(write_roi, "write_roi")
        total = None if total_roi is None else _require_roi(total_roi, "total_roi")
        if block_id is None:
            if total is None:
                raise ValueError(
                    "Block needs a total_roi to compute its block_id; pass total_roi or "
                    "block_id=<int>."
                )
            index = self._grid_index(total, write)
            spatial_id = cantor_number(index)
        else:
            if isinstance(block_id, bool) or not isinstance(block_id, int):
                raise TypeError(
                    "Block block_id must be an int; got %r (%s)."
                    % (block_id, type(block_id).__name__)
                )
            if block_id < 0:
                raise ValueError("Block block_id %d is negative; IDs are 0 or more." % block_id)
            spatial_id = block_id
            index = None
        self._task_id = task_id
        self._id = spatial_id
        self._status = BlockStatus.CREATED
        self._total_roi = total
        self._read_roi = read
        self._write_roi = write
        self._index = index
        self._raw = None
        self.position: Optional[int] = None
        self.attempt: int = 0
        # Where to write each declared output (Task(outputs=...)) for this block.
        self.outputs: Mapping[str, str] = NO_OUTPUTS

    @staticmethod
    def _grid_index(total: Roi, write: Roi) -> Coordinate:
        if len(total.offset) != len(write.offset):
            raise ValueError(
                "Block total_roi %r and write_roi %r have different dimensions; give ROIs of "
                "the same volume." % (total, write)
            )
        if 0 in write.shape:
            raise ValueError(
                "Block write_roi %r has a zero extent, so it has no grid index; give every "
                "axis an extent of at least 1." % (write,)
            )
        return Coordinate._trusted(
            (w - t) // s for w, t, s in zip(write.offset, total.offset, write.shape)
        )

    @classmethod
    def _from_session(
        cls,
        data: Mapping[str, Any],
        total_roi: Optional[Roi] = None,
        status: BlockStatus = BlockStatus.CREATED,
    ) -> "Block":
        """Wrap a block the session sent (``{"task", "id", "position", "index", "readRoi",
        "writeRoi", "attempt"}``). ROIs and the index are built on first access."""
        block = object.__new__(cls)
        spatial_id = data["id"]
        if spatial_id.__class__ is str:  # past 2**53 the session sends a decimal string
            spatial_id = int(spatial_id)
        block._task_id = data["task"]
        block._id = spatial_id
        block._status = status
        block._total_roi = total_roi
        block._read_roi = None
        block._write_roi = None
        block._index = None
        block._raw = data
        block.position = data.get("position")
        block.attempt = data.get("attempt", 0)
        block.outputs = data.get("outputs") or NO_OUTPUTS
        return block

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (
            _rebuild_block,
            (
                self._task_id,
                self._id,
                int(self._status),
                self._total_roi,
                self.read_roi,
                self.write_roi,
                None if self._index is None and self._raw is None else tuple(self.index),
                self.position,
                self.attempt,
            ),
        )

    @property
    def block_id(self) -> Tuple[str, int]:
        """The pair ``(task_id, id)``; the ID is daisy's Cantor number of the grid index."""
        return (self._task_id, self._id)

    @property
    def task_id(self) -> str:
        """The ID of the task the block belongs to."""
        return self._task_id

    @property
    def id(self) -> int:
        """The block's number within its task (the second half of ``block_id``)."""
        return self._id

    @property
    def read_roi(self) -> Roi:
        """The box the block may read."""
        roi = self._read_roi
        if roi is None:
            roi = self._read_roi = _roi_from_json(self._raw["readRoi"])  # type: ignore[index]
        return roi

    @property
    def write_roi(self) -> Roi:
        """The box the block writes."""
        roi = self._write_roi
        if roi is None:
            roi = self._write_roi = _roi_from_json(self._raw["writeRoi"])  # type: ignore[index]
        return roi

    @property
    def total_roi(self) -> Optional[Roi]:
        """The task's total ROI, when known."""
        return self._total_roi

    @property
    def index(self) -> Coordinate:
        """The block's grid index, from which its ID is computed."""
        index = self._index
        if index is None:
            raw = self._raw
            if raw is not None and raw.get("index") is not None:
                index = Coordinate._trusted(raw["index"])
            elif self._total_roi is not None:
                index = self._grid_index(self._total_roi, self.write_roi)
            else:
                raise AttributeError(
                    "block %s/%d has no grid index: it was made with block_id= and no "
                    "total_roi." % (self._task_id, self._id)
                )
            self._index = index
        return index

    @property
    def status(self) -> BlockStatus:
        """``BlockStatus.CREATED``, ``PROCESSING``, ``SUCCESS`` or ``FAILED``."""
        return self._status

    @status.setter
    def status(self, value: Union[BlockStatus, int]) -> None:
        self._status = _status(value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Block):
            return NotImplemented
        return self._id == other._id and self._task_id == other._task_id

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Block):
            return NotImplemented
        return not (self._id == other._id and self._task_id == other._task_id)

    def __hash__(self) -> int:
        return hash((self._task_id, self._id))

    def __repr__(self) -> str:
        return "%s/%d read=%r write=%r" % (self._task_id, self._id, self.read_roi, self.write_roi)


def _rebuild_block(
    task_id: str,
    spatial_id: int,
    status: int,
    total_roi: Optional[Roi],
    read_roi: Roi,
    write_roi: Roi,
    index: Optional[Tuple[int, ...]],
    position: Optional[int],
    attempt: int,
) -> Block:
    """Unpickle a Block."""
    block = object.__new__(Block)
    block._task_id = task_id
    block._id = spatial_id
    block._status = _STATUSES[status]
    block._total_roi = total_roi
    block._read_roi = read_roi
    block._write_roi = write_roi
    block._index = None if index is None else Coordinate._trusted(index)
    block._raw = None
    block.position = position
    block.attempt = attempt
    block.outputs = NO_OUTPUTS
    return block


class TaskState:
    """A snapshot of one task's block counters, as daisy's ``TaskState``.

    ``completed_count`` includes the skipped blocks (``skipped_count`` counts them again), as
    in daisy. ``pending_count`` is the blocks not yet ready (waiting for their dependencies).
    Built from the session's counters object (``total``, ``ready``, ``processing``,
    ``pending``, ``completed``, ``skipped``, ``failed``, ``orphaned``, ``started``, ``done``,
    ``abandoned``, ``workerFailures``, ``workerRestarts``); missing counters are 0.
    """

    __slots__ = (
        "_started",
        "_total",
        "_ready",
        "_processing",
        "_pending",
        "_completed",
        "_skipped",
        "_failed",
        "_orphaned",
        "_done",
        "_abandoned",
        "_worker_failures",
        "_worker_restarts",
    )

    def __init__(self, counters: Optional[Mapping[str, Any]] = None) -> None:
        c: Mapping[str, Any] = counters if counters is not None else {}
        get = c.get
        self._total = int(get("total", 0))
        self._ready = int(get("ready", 0))
        self._processing = int(get("processing", 0))
        self._completed = int(get("completed", 0))
        self._skipped = int(get("skipped", 0))
        self._failed = int(get("failed", 0))
        self._orphaned = int(get("orphaned", 0))
        pending = get("pending")
        if pending is None:
            pending = (
                self._total
                - self._ready
                - self._processing
                - self._completed
                - self._failed
                - self._orphaned
            )
        self._pending = int(pending)
        self._started = bool(get("started", False))
        self._done = bool(get("done", False))
        self._abandoned = bool(get("abandoned", False))
        self._worker_failures = int(get("workerFailures", 0))
        self._worker_restarts = int(get("workerRestarts", 0))

    @property
    def started(self) -> bool:
        """Whether a block of the task has been handed out."""
        return self._started

    @property
    def total_block_count(self) -> int:
        """The task's number of blocks."""
        return self._total

    @property
    def ready_count(self) -> int:
        """Blocks whose dependencies are done, waiting for a worker."""
        return self._ready

    @property
    def processing_count(self) -> int:
        """Blocks a worker holds."""
        return self._processing

    @property
    def completed_count(self) -> int:
        """Blocks that succeeded, including the skipped ones."""
        return self._completed

    @property
    def skipped_count(self) -> int:
        """Blocks skipped (done in an earlier run, checked done, or masked)."""
        return self._skipped

    @property
    def failed_count(self) -> int:
        """Blocks that failed every attempt."""
        return self._failed

    @property
    def orphaned_count(self) -> int:
        """Blocks that cannot run because something they depend on failed or was abandoned."""
        return self._orphaned

    @property
    def pending_count(self) -> int:
        """Blocks waiting for their dependencies."""
        return self._pending

    @property
    def worker_failure_count(self) -> int:
        """Worker exits with an error (each one, even past the restart cap)."""
        return self._worker_failures

    @property
    def worker_restart_count(self) -> int:
        """Workers started again after a failure (at most ``max_worker_restarts``)."""
        return self._worker_restarts

    @property
    def abandoned(self) -> bool:
        """Whether the run gave the task up (restart cap reached, or upstream abandoned)."""
        return self._abandoned

    def is_done(self) -> bool:
        """Whether every block has settled: completed, failed or orphaned (or the task was
        finished or abandoned)."""
        return (
            self._done
            or self._abandoned
            or self._completed + self._failed + self._orphaned == self._total
        )

    def to_dict(self) -> Dict[str, Any]:
        """The counters in the session's JSON form."""
        return {
            "total": self._total,
            "ready": self._ready,
            "processing": self._processing,
            "pending": self._pending,
            "completed": self._completed,
            "skipped": self._skipped,
            "failed": self._failed,
            "orphaned": self._orphaned,
            "started": self._started,
            "done": self._done,
            "abandoned": self._abandoned,
            "workerFailures": self._worker_failures,
            "workerRestarts": self._worker_restarts,
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TaskState):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            "TaskState(started=%s, total=%d, ready=%d, processing=%d, pending=%d, "
            "completed=%d, skipped=%d, failed=%d, orphaned=%d, worker_failures=%d, "
            "worker_restarts=%d%s)"
            % (
                self._started,
                self._total,
                self._ready,
                self._processing,
                self._pending,
                self._completed,
                self._skipped,
                self._failed,
                self._orphaned,
                self._worker_failures,
                self._worker_restarts,
                ", abandoned=True" if self._abandoned else "",
            )
        )


def task_states(counters_by_task: Mapping[str, Mapping[str, Any]]) -> Dict[str, TaskState]:
    """``{task_id: TaskState}`` from the session's ``{"states": {task_id: counters}}``."""
    return {task_id: TaskState(c) for task_id, c in counters_by_task.items()}
