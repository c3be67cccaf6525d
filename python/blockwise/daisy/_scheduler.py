"""``Scheduler``, ``DependencyGraph`` and ``BlockwiseDependencyGraph``: the engine's scheduler,
driven by hand.

Each is a handle on a scheduler that lives in the session (``open``): blocks come in daisy's
order (level by level, block ID order within a level), dependencies are the engine's, and
nothing is written to a tracking store. Python holds only the handle and the tasks' total ROIs
(to give blocks their ``total_roi``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, Iterator, List, Mapping, Optional

from ..geometry import Roi
from ._session import Session, get_session
from ._task import Task, pipeline_spec, to_pipeline
from ._types import Block, BlockStatus, TaskState, task_states

__all__ = ["Scheduler", "DependencyGraph", "BlockwiseDependencyGraph", "MaskFiles"]

_STATUS_NAMES = {BlockStatus.SUCCESS: "success", BlockStatus.FAILED: "failed"}


def roi_json(roi: Roi) -> Dict[str, List[int]]:
    return {"offset": [int(x) for x in roi.offset], "shape": [int(x) for x in roi.shape]}


class MaskFiles:
    """Array skip masks written as .npy files the session can read, removed by `cleanup()`."""

    def __init__(self) -> None:
        self.folder: Optional[str] = None

    def __call__(self, task: Task) -> str:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="blockwise-daisy-masks-")
        path = os.path.join(self.folder, "%s.npy" % task.task_id)
        write_npy(path, task.skip_mask)
        return path

    def cleanup(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def write_npy(path: str, mask: Any) -> None:
    """`mask` (a numpy array, or nested lists of numbers or bools) as a uint8 .npy file."""
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None:
        numpy.save(path, (numpy.asarray(mask) != 0).astype(numpy.uint8))
        return
    shape: List[int] = []
    level = mask
    while isinstance(level, (list, tuple)):
        shape.append(len(level))
        level = level[0] if level else None
    flat: List[int] = []

    def walk(value: Any, depth: int) -> None:
        if depth == len(shape):
            flat.append(1 if value else 0)
            return
        if not isinstance(value, (list, tuple)) or len(value) != shape[depth]:
            raise ValueError(
                "skip_mask must be a rectangular array (nested lists of equal length, or a numpy "
                "array); axis %d has rows of different lengths" % depth)
        for item in value:
            walk(item, depth + 1)

    walk(mask, 0)
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': %r, }" % (tuple(shape),)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        f.write(bytes(flat))


class _Handle:
    """An open scheduler of the session, closed (best effort) when garbage-collected."""

    def __init__(self, spec: Dict[str, Any]) -> None:
        self.session: Session = get_session()
        self.handle: Optional[int] = None
        answer = self.session.request("open", pipeline=spec)
        self.handle = answer["handle"]
        self.tasks: Dict[str, Dict[str, Any]] = {t["id"]: t for t in answer.get("tasks", [])}

    def request(self, op: str, **fields: Any) -> Dict[str, Any]:
        if not self.session.alive():
            raise RuntimeError(
                "The blockwise session that held this scheduler has ended (its process exited); "
                "open a new Scheduler or BlockwiseDependencyGraph"
            )
        return self.session.request(op, handle=self.handle, **fields)

    def close(self) -> None:
        handle, self.handle = self.handle, None
        if handle is None:
            return
        session = self.session
        try:
            if session.alive():
                # Fire and forget: the answer, whoever reads next, matches no waiting request.
                session.send({"op": "close", "id": session._new_id(), "handle": handle})
        except Exception:  # noqa: BLE001 - best effort, possibly at interpreter exit
            pass

    def __del__(self) -> None:
        self.close()


def _blocks(answer: Mapping[str, Any], totals: Mapping[str, Optional[Roi]],
            status: BlockStatus = BlockStatus.CREATED) -> List[Block]:
    return [Block._from_session(b, totals.get(b["task"]), status) for b in answer["blocks"]]


class DependencyGraph:
    """The block dependencies of a Scheduler's pipeline (``Scheduler.dependency_graph``)."""

    def __init__(self, handle: _Handle, totals: Mapping[str, Optional[Roi]]) -> None:
        self._handle = handle
        self._totals = totals

    def _task_of(self, block: Block) -> str:
        return block.task_id

    def _neighbours(self, op: str, block: Block) -> List[Block]:
        if not isinstance(block, Block):
            raise TypeError("%s() expects a Block; got %r (%s)" % (op, block,
                                                                   type(block).__name__))
        answer = self._handle.request(op, task=self._task_of(block),
                                      writeRoi=roi_json(block.write_roi))
        return _blocks(answer, self._totals)

    def upstream(self, block: Block) -> List[Block]:
        """The blocks `block` depends on, in every task of the pipeline."""
        return self._neighbours("upstream", block)

    def downstream(self, block: Block) -> List[Block]:
        """The blocks that depend on `block`, in every task of the pipeline."""
        return self._neighbours("downstream", block)


class Scheduler:
    """daisy's scheduler, driven by hand: ``acquire_block(task_id)`` hands out the next ready
    block (or None), ``release_block(block)`` reports it by its ``status`` (SUCCESS or FAILED;
    a failed block is retried up to its task's ``max_retries``), ``task_states`` counts."""

    def __init__(self, input: Any) -> None:
        pipeline = to_pipeline(input)
        # Array skip masks go to files the session reads; they live as long as the scheduler.
        self._masks = MaskFiles()
        try:
            spec = pipeline_spec(pipeline, block_tracking=False, skip_mask_file=self._masks)
            self._handle = _Handle(spec)
        except BaseException:
            self._masks.cleanup()
            raise
        self._totals: Dict[str, Optional[Roi]] = {t.task_id: t.total_roi for t in pipeline.tasks}

    def acquire_block(self, task_id: str) -> Optional[Block]:
        """The next block of `task_id` ready to run (status CREATED), or None."""
        if not isinstance(task_id, str):
            raise TypeError("acquire_block expects a task_id (str); got %r (%s)"
                            % (task_id, type(task_id).__name__))
        block = self._handle.request("acquire", task=task_id)["block"]
        if block is None:
            return None
        return Block._from_session(block, self._totals.get(task_id), BlockStatus.CREATED)

    def release_block(self, block: Block) -> None:
        """Report `block` done (status SUCCESS) or failed (status FAILED)."""
        if not isinstance(block, Block):
            raise TypeError("release_block expects a Block; got %r (%s)"
                            % (block, type(block).__name__))
        status = _STATUS_NAMES.get(block.status)
        if status is None:
            raise ValueError(
                "release_block(%s): its status is %s; set block.status = BlockStatus.SUCCESS "
                "or BlockStatus.FAILED first" % (block.block_id, block.status))
        if block.position is None:
            raise ValueError(
                "release_block(%s): this block was not handed out by this scheduler's "
                "acquire_block; release the Block that acquire_block returned" % (block.block_id,))
        self._handle.request("release", task=block.task_id, position=block.position,
                             status=status)

    @property
    def task_states(self) -> Dict[str, TaskState]:
        """Every task's counters, by task ID."""
        return task_states(self._handle.request("states")["states"])

    @property
    def dependency_graph(self) -> DependencyGraph:
        """The pipeline's block dependencies (``upstream(block)`` / ``downstream(block)``)."""
        return DependencyGraph(self._handle, self._totals)

    def close(self) -> None:
        """Free the session's scheduler (done on garbage collection anyway)."""
        self._handle.close()
        self._masks.cleanup()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort, possibly at interpreter exit
            pass


def _context(read: Roi, write: Roi) -> "tuple[List[int], List[int]]":
    neg = [w - r for w, r in zip(write.offset, read.offset)]
    pos = [(r + rs) - (w + ws) for r, rs, w, ws in zip(read.offset, read.shape, write.offset,
                                                       write.shape)]
    return neg, pos


def _require_roi(value: Any, what: str) -> Roi:
    if isinstance(value, Roi):
        return value
    raise TypeError("BlockwiseDependencyGraph %s must be a Roi; got %r (%s)"
                    % (what, value, type(value).__name__))


class BlockwiseDependencyGraph(DependencyGraph):
    """The blocks and dependencies of one task's tiling, without running it.

    ``total_read_roi`` is the task's total ROI; give ``total_write_roi`` instead to have it
    grown by the block context (read ROI around write ROI)."""

    def __init__(self, task_id: str, block_read_roi: Roi, block_write_roi: Roi,
                 read_write_conflict: bool, fit: str, total_read_roi: Optional[Roi] = None,
                 total_write_roi: Optional[Roi] = None) -> None:
        read = _require_roi(block_read_roi, "block_read_roi")
        write = _require_roi(block_write_roi, "block_write_roi")
        if total_read_roi is not None:
            total = _require_roi(total_read_roi, "total_read_roi")
        elif total_write_roi is not None:
            neg, pos = _context(read, write)
            total = _require_roi(total_write_roi, "total_write_roi").grow(neg, pos)
        else:
            raise ValueError(
                "BlockwiseDependencyGraph needs the task's extent: pass total_read_roi= (the "
                "total ROI) or total_write_roi= (the area to write; grown by the block context)")
        if not isinstance(task_id, str):
            raise TypeError("BlockwiseDependencyGraph task_id must be a str; got %r" % (task_id,))
        self.task_id = task_id
        self.total_roi = total
        self.read_roi = read
        self.write_roi = write
        self.fit = fit
        self.read_write_conflict = bool(read_write_conflict)
        spec = {"tasks": [{
            "id": task_id, "totalRoi": roi_json(total), "readRoi": roi_json(read),
            "writeRoi": roi_json(write), "fit": fit, "readWriteConflict": bool(read_write_conflict),
            "maxWorkers": 1, "maxRetries": 0, "maxWorkerRestarts": 0, "timeout": None,
            "requires": {}, "check": False, "mode": "block", "tracking": False,
            "resourceTracking": False, "skipMask": None,
        }], "edges": []}
        DependencyGraph.__init__(self, _Handle(spec), {task_id: total})
        self._info = self._handle.tasks.get(task_id, {})

    @property
    def num_blocks(self) -> int:
        """The number of blocks of the tiling."""
        return int(self._info.get("blocks", 0))

    @property
    def num_levels(self) -> int:
        """The number of dependency levels (blocks of one level never conflict)."""
        return int(self._info.get("levels", 0))

    @property
    def num_roots(self) -> int:
        """The number of blocks without dependencies."""
        return int(self._info.get("roots", 0))

    def _blocks(self, which: str, **fields: Any) -> List[Block]:
        answer = self._handle.request("blocks", task=self.task_id, which=which, **fields)
        return _blocks(answer, self._totals)

    def root_gen(self) -> Iterator[Block]:
        """The blocks without dependencies."""
        return iter(self._blocks("roots"))

    def enumerate_all_dependencies(self) -> List[Block]:
        """Every block of the tiling, in daisy's order."""
        return self._blocks("all")

    def get_subgraph_blocks(self, sub_roi: Roi) -> List[Block]:
        """The blocks whose write ROI meets `sub_roi`."""
        return self._blocks("within", roi=roi_json(_require_roi(sub_roi, "sub_roi")))

    def _task_of(self, block: Block) -> str:
        return self.task_id  # any block of this tiling, whatever task it names
