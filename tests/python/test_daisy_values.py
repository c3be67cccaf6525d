"""The pure-Python parts of blockwise.daisy: geometry, blocks, task states, tasks, pipeline
composition, the session's pipeline spec, Context, logging knobs and progress observers.

Nothing here starts the engine. Run with:
    PYTHONPATH=python python3 -m pytest -q tests/python/test_daisy_values.py
"""

import copy
import io
import json
import os
import pickle
import threading
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

from blockwise.geometry import Coordinate, Roi, cantor_number
from blockwise.daisy import logging as daisy_logging
from blockwise.daisy._context import Context, _bind_thread_context, _unbind_thread_context
from blockwise.daisy._progress import JsonProgressObserver, ProgressBars, resolve_observer
from blockwise.daisy._task import (
    Pipeline,
    Task,
    get_done_marker_basedir,
    get_tracking_basedir,
    pipeline_spec,
    process_mode,
    set_done_marker_basedir,
    set_tracking_basedir,
    to_pipeline,
    tracking_path_of,
)
from blockwise.daisy._types import Block, BlockStatus, TaskState, task_states
from blockwise.daisy.v1_compat_task import Task as V1Task


@pytest.fixture(autouse=True)
def _isolated_basedirs(tmp_path):
    """Log and tracking basedirs inside the test's folder, restored afterwards."""
    log_before = daisy_logging.get_log_basedir()
    tracking_before = get_tracking_basedir()
    daisy_logging.set_log_basedir(tmp_path / "logs")
    set_tracking_basedir(None)
    try:
        yield
    finally:
        daisy_logging.set_log_basedir(log_before)
        set_tracking_basedir(tracking_before)
        daisy_logging.close_all_log_files()


def make_task(task_id="t", cls=Task, **kwargs):
    fields = dict(
        total_roi=Roi([0], [40]),
        read_roi=Roi([0], [10]),
        write_roi=Roi([0], [10]),
        process_function=lambda block: None,
        read_write_conflict=False,
    )
    fields.update(kwargs)
    return cls(task_id=task_id, **fields)


def ids(tasks):
    return [t.task_id for t in tasks]


def edge_ids(pipeline):
    return {(u.task_id, d.task_id) for u, d in pipeline.edges}


# ---- Coordinate ------------------------------------------------------------------------------


def test_coordinate_is_an_immutable_int_tuple():
    c = Coordinate([1, 2, 3])
    assert c == Coordinate(1, 2, 3) == Coordinate((1, 2, 3))
    assert c.dims == len(c) == 3
    assert (c[0], c[2]) == (1, 3)
    assert list(c) == c.to_list() == [1, 2, 3]
    assert hash(c) == hash(Coordinate([1, 2, 3]))
    assert repr(c) == "(1, 2, 3)"
    with pytest.raises(TypeError):
        c[0] = 5  # type: ignore[index]


def test_coordinate_arithmetic_is_element_wise():
    a, b = Coordinate([7, -7]), Coordinate([2, 3])
    assert a + b == Coordinate([9, -4])
    assert a - b == Coordinate([5, -10])
    assert -a == Coordinate([-7, 7])
    assert a * 2 == 2 * a == Coordinate([14, -14])
    assert a * b == Coordinate([14, -21])
    assert a // 3 == Coordinate([2, -3])  # floor division, as daisy
    assert a // b == Coordinate([3, -3])
    assert (1, 1) + b == Coordinate([3, 4])  # a tuple on the left is not concatenated
    assert isinstance(a + b, Coordinate)


def test_coordinate_rejects_bad_values_with_the_fix():
    with pytest.raises(TypeError, match="integers.*1.5"):
        Coordinate([1, 1.5])
    with pytest.raises(TypeError, match="sequence of integers"):
        Coordinate("12")
    with pytest.raises(ValueError, match="2 and 3 dimensions"):
        Coordinate([1, 2]) + (1, 2, 3)
    with pytest.raises(ZeroDivisionError, match="divisor is 0"):
        Coordinate([1, 2]) // Coordinate([1, 0])


# ---- Roi -------------------------------------------------------------------------------------


def test_roi_properties_and_repr():
    roi = Roi([10, 20], [30, 40])
    assert roi.offset == roi.begin == Coordinate([10, 20])
    assert roi.shape == Coordinate([30, 40])
    assert roi.end == Coordinate([40, 60])
    assert roi.dims == 2
    assert roi.size == 1200
    assert repr(roi) == "Roi((10, 20), (30, 40))"
    assert repr(Roi([0], [10])) == "Roi((0), (10))"
    assert roi == Roi((10, 20), Coordinate([30, 40]))
    assert roi != Roi([10, 20], [30, 41])
    assert len({roi, Roi([10, 20], [30, 40])}) == 1


def test_roi_contains_is_half_open_for_points():
    roi = Roi([10, 20], [30, 40])
    assert roi.contains(Coordinate([10, 20]))
    assert roi.contains([39, 59])
    assert not roi.contains(Coordinate([40, 60]))
    assert Roi([0, 0], [100, 100]).contains(Roi([10, 10], [20, 20]))
    assert not Roi([10, 10], [20, 20]).contains(Roi([0, 0], [100, 100]))
    assert roi.contains(roi)
    with pytest.raises(TypeError, match="Roi or a Coordinate"):
        roi.contains("nope")
    with pytest.raises(ValueError, match="dimensions"):
        roi.contains(Roi([0], [1]))


def test_roi_intersect_grow_shift():
    a, b = Roi([0, 0], [20, 20]), Roi([10, 10], [20, 20])
    assert a.intersect(b) == Roi([10, 10], [10, 10])
    assert a.intersects(b)
    far = Roi([50, 50], [5, 5])
    empty = a.intersect(far)
    assert empty == Roi([50, 50], [0, 0]) and empty.empty()
    assert not a.intersects(far)
    assert not a.intersects(Roi([20, 0], [5, 5]))  # touching is not intersecting
    assert Roi([10, 10], [20, 20]).grow([5, 5], [5, 5]) == Roi([5, 5], [30, 30])
    assert Roi([10, 10], [20, 20]).grow(None, 2) == Roi([10, 10], [22, 22])
    assert Roi([10, 10], [20, 20]).grow(Coordinate([-1, 0]), None) == Roi([11, 10], [19, 20])
    assert a.shift([1, 2]) == a.translate(Coordinate([1, 2])) == a + (1, 2) == Roi([1, 2], [20, 20])
    assert a - (1, 1) == Roi([-1, -1], [20, 20])
    with pytest.raises(ValueError, match="negative shape"):
        a.grow(-15, -15)


def test_roi_to_slices_and_negative_begin():
    assert Roi([2, 3], [4, 5]).to_slices() == (slice(2, 6), slice(3, 8))
    assert Roi([12, 13], [4, 5]).to_slices(origin=[10, 10]) == (slice(2, 6), slice(3, 8))
    with pytest.raises(ValueError) as error:
        Roi([-2, 0], [4, 4]).to_slices()
    message = str(error.value)
    assert "Roi((-2, 0), (4, 4))" in message
    assert "intersect" in message and "read_block(array, roi)" in message


def test_roi_rejects_bad_input_naming_the_value():
    with pytest.raises(ValueError, match=r"offset \(0, 0\) and shape \(10\)"):
        Roi([0, 0], [10])
    with pytest.raises(ValueError, match="negative extent"):
        Roi([0], [-1])
    with pytest.raises(TypeError, match="integers"):
        Roi([0.5], [1])
    with pytest.raises(TypeError, match="sequence of integers"):
        Roi(0, 1)


def test_roi_pickles():
    roi = Roi([1, 2], [3, 4])
    assert pickle.loads(pickle.dumps(roi)) == roi
    assert pickle.loads(pickle.dumps(roi.offset)) == Coordinate([1, 2])


# ---- block IDs -------------------------------------------------------------------------------


def test_cantor_numbers_match_daisy():
    assert [cantor_number([x]) for x in range(4)] == [0, 1, 2, 3]
    assert cantor_number([2, 2]) == 12
    assert cantor_number([2, 4]) == 23
    assert cantor_number([4, 2]) == 25
    assert cantor_number([4, 4]) == 40
    assert cantor_number([0, 0, 0]) == 0
    assert cantor_number([1, 0, 0]) == 3
    assert cantor_number([-3, 2]) == cantor_number([0, 2])  # negatives count as 0, as daisy


def test_cantor_numbers_are_exact_past_2_53():
    big = cantor_number([10**6, 10**6, 10**6])
    assert big > 2**53
    # sum over k of C(S_k + k - 1, k), computed independently
    from math import comb

    s1, s2, s3 = 10**6, 2 * 10**6, 3 * 10**6
    assert big == comb(s1, 1) + comb(s2 + 1, 2) + comb(s3 + 2, 3)


def test_block_ids_of_daisy_scheduler_grid():
    """test_scheduler.py's task_2d: total [0,6)^2, read 3, write [1,1]+1: a 4x4 grid whose
    index is shifted by the context (1, 1)."""
    total = Roi([0, 0], [6, 6])
    grid = []
    for i in range(4):
        row = []
        for j in range(4):
            block = Block(total, Roi([i, j], [3, 3]), Roi([i + 1, j + 1], [1, 1]), task_id="t")
            row.append(block.block_id[1])
        grid.append(row)
    assert grid == [[4, 7, 11, 16], [8, 12, 17, 23], [13, 18, 24, 31], [19, 25, 32, 40]]


# ---- Block -----------------------------------------------------------------------------------


def test_block_construction_and_identity():
    total = Roi([0, 0], [100, 100])
    b1 = Block(total, Roi([0, 0], [20, 20]), Roi([0, 0], [10, 10]), task_id="t")
    b2 = Block(total, Roi([0, 0], [20, 20]), Roi([0, 0], [10, 10]), task_id="t")
    b3 = Block(total, Roi([10, 0], [20, 20]), Roi([10, 0], [10, 10]), task_id="t")
    assert b1.block_id == ("t", 0) and b1.task_id == "t"
    assert b3.block_id == ("t", cantor_number([1, 0]))
    assert b3.index == Coordinate([1, 0])
    assert b1 == b2 and hash(b1) == hash(b2) and b1 != b3
    assert len({b1, b2, b3}) == 2
    assert b1.read_roi == Roi([0, 0], [20, 20]) and b1.write_roi == Roi([0, 0], [10, 10])
    assert b1.total_roi == total
    assert repr(b3) == "t/2 read=Roi((10, 0), (20, 20)) write=Roi((10, 0), (10, 10))"


def test_block_with_given_id_and_default_task():
    block = Block(Roi([0], [3]), Roi([0], [3]), Roi([1], [1]), task_id="test_1d", block_id=1)
    assert block.block_id == ("test_1d", 1)
    assert Block(Roi([0], [10]), Roi([0], [5]), Roi([5], [5])).block_id == ("", 1)
    with pytest.raises(TypeError, match="block_id must be an int"):
        Block(Roi([0], [10]), Roi([0], [5]), Roi([0], [5]), block_id=1.0)


def test_block_status_is_settable_and_validated():
    block = Block(Roi([0], [10]), Roi([0], [5]), Roi([0], [5]), task_id="t")
    assert block.status == BlockStatus.CREATED == 0
    block.status = BlockStatus.SUCCESS
    assert block.status is BlockStatus.SUCCESS
    block.status = 3
    assert block.status is BlockStatus.FAILED
    with pytest.raises(ValueError, match="invalid status value 7"):
        block.status = 7
    assert BlockStatus.CREATED < BlockStatus.PROCESSING < BlockStatus.SUCCESS < BlockStatus.FAILED
    assert repr(BlockStatus.SUCCESS) == "BlockStatus.SUCCESS"
    assert len({BlockStatus.SUCCESS, BlockStatus.SUCCESS, 2}) == 1


def test_block_from_session_builds_rois_lazily():
    data = {
        "task": "seg",
        "id": "18446744073709551617",  # past 2**53 the session sends a string
        "position": 5,
        "index": [3, 4],
        "readRoi": {"offset": [0, 10], "shape": [12, 12]},
        "writeRoi": {"offset": [1, 11], "shape": [10, 10]},
        "attempt": 2,
    }
    block = Block._from_session(data, Roi([0, 0], [100, 100]), BlockStatus.PROCESSING)
    assert block._read_roi is None  # nothing built yet
    assert block.block_id == ("seg", 2**64 + 1)
    assert block.status is BlockStatus.PROCESSING
    assert (block.position, block.attempt) == (5, 2)
    assert block.read_roi == Roi([0, 10], [12, 12])
    assert block.write_roi == Roi([1, 11], [10, 10])
    assert block.index == Coordinate([3, 4])
    assert block == Block._from_session(dict(data, position=6), None)
    copy_ = pickle.loads(pickle.dumps(block))
    assert copy_ == block and copy_.write_roi == block.write_roi and copy_.position == 5


# ---- TaskState -------------------------------------------------------------------------------


def counters(**overrides):
    c = dict(total=4, ready=0, processing=0, pending=0, completed=4, skipped=1, failed=0,
             orphaned=0, started=True, done=True, abandoned=False, workerFailures=1,
             workerRestarts=1)
    c.update(overrides)
    return c


def test_task_state_reads_the_session_counters():
    state = TaskState(counters())
    assert state.started and state.is_done()
    assert (state.total_block_count, state.completed_count, state.skipped_count) == (4, 4, 1)
    assert (state.worker_failure_count, state.worker_restart_count) == (1, 1)
    assert "completed=4" in repr(state) and "skipped=1" in repr(state)
    with pytest.raises(AttributeError):
        state.completed_count = 3  # type: ignore[misc]


def test_task_state_is_done_when_counters_balance_or_abandoned():
    running = TaskState(counters(ready=1, completed=2, pending=1, done=False))
    assert not running.is_done()
    balanced = TaskState(counters(completed=2, failed=1, orphaned=1, done=False))
    assert balanced.is_done()
    assert TaskState(counters(ready=3, completed=0, done=False, abandoned=True)).is_done()
    derived = TaskState({"total": 10, "ready": 2, "processing": 1, "completed": 3})
    assert derived.pending_count == 4
    states = task_states({"a": counters(), "b": counters(total=1, completed=1)})
    assert set(states) == {"a", "b"} and states["b"].total_block_count == 1


# ---- Task ------------------------------------------------------------------------------------


def test_task_defaults_match_daisy_v2():
    task = Task("t", Roi([0], [40]), Roi([0], [10]), Roi([0], [10]))
    assert task.read_write_conflict is True and task.fit == "valid"
    assert (task.max_workers, task.max_retries, task.max_worker_restarts) == (1, 2, 10)
    assert task.timeout_secs is None and task.requires == {}
    assert task.done_marker_path is None and task.process_function is None
    assert task.resource_tracking is False and task.skip_mask is None


def test_task_properties_and_settable_functions():
    task = make_task("t", timeout=timedelta(seconds=90), requires={"gpu": 1}, max_workers=4,
                     done_marker_path=Path("/tmp/marks"))
    assert task.timeout_secs == 90.0
    assert task.requires == {"gpu": 1}
    task.requires["gpu"] = 5  # a fresh dict each time
    assert task.requires == {"gpu": 1}
    assert task.done_marker_path == task.tracking_path == "/tmp/marks"
    f = lambda: None  # noqa: E731
    task.process_function = f
    assert task.process_function is f
    with pytest.raises(TypeError, match="process_function must be a function"):
        task.process_function = 3
    with pytest.raises(AttributeError):
        task.max_workers = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(read_roi=Roi([0, 0], [10, 10])), ValueError, "'t'.*read_roi.*2 dimensions"),
        (dict(fit="tight"), ValueError, "'t'.*fit 'tight'"),
        (dict(process_function=42), TypeError, "'t'.*process_function"),
        (dict(check_function="x"), TypeError, "'t'.*check_function"),
        (dict(max_workers=-1), ValueError, "'t'.*max_workers is -1"),
        (dict(max_retries=1.5), TypeError, "'t'.*max_retries must be an int"),
        (dict(max_worker_restarts=-2), ValueError, "max_worker_restarts"),
        (dict(requires={"gpu": -1}), ValueError, r"requires\['gpu'\]"),
        (dict(timeout="soon"), TypeError, "timeout must be a float seconds"),
        (dict(done_marker_path=True), TypeError, "done_marker_path=True"),
        (dict(write_roi=Roi([0], [0])), ValueError, "zero extent"),
        (dict(total_roi="big"), TypeError, "total_roi must be a Roi"),
        (dict(skip_mask=3), TypeError, "skip_mask"),
    ],
)
def test_task_validation_names_task_field_and_value(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        make_task("t", **kwargs)


def test_task_id_rules_match_the_engine():
    with pytest.raises(ValueError, match="'my task'.*letters, digits"):
        make_task("my task")
    with pytest.raises(ValueError, match="must not start with '__'"):
        make_task("__x")
    with pytest.raises(TypeError, match="task_id must be a str"):
        make_task(7)


def test_v2_task_refuses_num_workers_and_v1_task_accepts_it():
    with pytest.raises(TypeError, match="num_workers.*max_workers"):
        make_task("legacy", num_workers=2)
    with pytest.warns(DeprecationWarning, match="max_workers"):
        task = make_task("legacy", cls=V1Task, num_workers=3)
    assert task.max_workers == 3
    with pytest.raises(TypeError, match="not both"):
        make_task("legacy", cls=V1Task, num_workers=3, max_workers=2)


def test_tracking_path_alias():
    task = make_task("t", tracking_path="/data/track")
    assert task.done_marker_path == "/data/track"
    with pytest.raises(TypeError, match="either tracking_path"):
        make_task("t", tracking_path="/a", done_marker_path="/b")


def test_task_copy_is_shallow_and_independent():
    task = make_task("t", requires={"cpu": 1})
    clone = copy.copy(task)
    deep = copy.deepcopy(task)
    assert clone is not task and type(clone) is Task
    assert clone.process_function is task.process_function is deep.process_function
    clone.process_function = None
    assert task.process_function is not None


# ---- tracking folders and reset --------------------------------------------------------------


def test_tracking_path_resolution(tmp_path):
    task = make_task("t")
    assert tracking_path_of(task) == tmp_path / "logs" / "t"  # the log basedir fallback
    set_tracking_basedir(tmp_path / "track")
    assert get_tracking_basedir() == tmp_path / "track"
    assert tracking_path_of(task) == tmp_path / "track" / "t"
    assert tracking_path_of(make_task("t", done_marker_path=str(tmp_path / "x"))) == tmp_path / "x"
    assert tracking_path_of(make_task("t", done_marker_path=False)) is None
    set_tracking_basedir(None)
    daisy_logging.set_log_basedir(None)
    assert tracking_path_of(task) is None


def test_set_done_marker_basedir_is_a_deprecated_alias(tmp_path):
    with pytest.warns(DeprecationWarning, match="set_tracking_basedir"):
        set_done_marker_basedir(tmp_path / "auto")
    assert get_tracking_basedir() == tmp_path / "auto"
    with pytest.warns(DeprecationWarning):
        assert get_done_marker_basedir() == tmp_path / "auto"
    with pytest.warns(DeprecationWarning):
        set_done_marker_basedir(None)
    assert get_tracking_basedir() is None
    with pytest.raises(TypeError, match="folder path"):
        set_tracking_basedir(3)


def test_reset_removes_the_tracking_folder(tmp_path):
    task = make_task("a")
    folder = tmp_path / "logs" / "a"
    assert task.reset() is None  # nothing there yet
    (folder / "done").mkdir(parents=True)
    (folder / "zarr.json").write_text("{}")
    assert task.reset() == str(folder)
    assert not folder.exists()
    assert make_task("a", done_marker_path=False).reset() is None


def test_pipeline_reset_clears_each_member(tmp_path):
    a, b, c = make_task("a"), make_task("b"), make_task("c")
    for tid in "abc":
        (tmp_path / "logs" / tid).mkdir(parents=True)
    Pipeline.from_task(b).reset()
    assert [(tmp_path / "logs" / t).exists() for t in "abc"] == [True, False, True]
    (a + b + c).reset()
    assert not any((tmp_path / "logs" / t).exists() for t in "abc")


def test_reset_refuses_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    task = make_task("t", done_marker_path=str(tmp_path))
    with pytest.raises(ValueError, match="refuses to remove"):
        task.reset()
    assert tmp_path.exists()


# ---- Pipeline composition (daisy's test_pipeline.py semantics) -------------------------------


def test_task_plus_task_is_sequential():
    a, b = make_task("a"), make_task("b")
    p = a + b
    assert isinstance(p, Pipeline)
    assert ids(p.tasks) == ["a", "b"] and ids(p.sources) == ["a"] and ids(p.outputs) == ["b"]
    assert edge_ids(p) == {("a", "b")}
    assert p.tasks[0] is a and p.tasks[1] is b


def test_task_pipe_task_is_parallel():
    p = make_task("a") | make_task("b")
    assert set(ids(p.sources)) == set(ids(p.outputs)) == {"a", "b"}
    assert p.edges == []


def test_pipeline_plus_pipeline_connects_outputs_to_sources():
    full = (make_task("pre") + make_task("predict")) + (make_task("relabel") + make_task("stats"))
    assert edge_ids(full) == {("pre", "predict"), ("relabel", "stats"), ("predict", "relabel")}
    assert ids(full.sources) == ["pre"] and ids(full.outputs) == ["stats"]


def test_fan_in_fan_out_and_unions():
    a, b, c, d = (make_task(x) for x in "abcd")
    p = (a | b) + c
    assert edge_ids(p) == {("a", "c"), ("b", "c")}
    assert set(ids(p.sources)) == {"a", "b"} and ids(p.outputs) == ["c"]
    diamond = a + (b | c) + d
    assert edge_ids(diamond) == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    par = (a + b) | (c + d)
    assert set(ids(par.sources)) == {"a", "c"} and set(ids(par.outputs)) == {"b", "d"}


def test_composition_dedupes_by_identity_and_never_mutates():
    a, b = make_task("a"), make_task("b")
    sub = a + b
    _ = sub + make_task("c")
    _ = sub | make_task("d")
    assert edge_ids(sub) == {("a", "b")} and ids(sub.tasks) == ["a", "b"]
    again = sub | (a + b)
    assert ids(again.tasks) == ["a", "b"] and len(again.edges) == 1
    twin = make_task("a")
    assert ids((a | twin).tasks) == ["a", "a"]  # two objects: two nodes (refused at run time)


def test_composition_rejects_other_operands():
    a = make_task("a")
    with pytest.raises(TypeError, match="int 42"):
        a + 42
    with pytest.raises(TypeError, match="Task or Pipeline"):
        a | "not a task"
    with pytest.raises(TypeError):
        Pipeline.from_task(a) + 1.5
    with pytest.raises(TypeError):
        "x" + Pipeline.from_task(a)


def test_explicit_constructor_and_repr():
    a, b = make_task("a"), make_task("b")
    p = Pipeline(tasks=[a, b], edges=[(a, b)])
    assert ids(p.sources) == ["a"] and ids(p.outputs) == ["b"]
    assert repr(p) == "Pipeline(tasks=['a', 'b'], sources=['a'], outputs=['b'], edges=[('a', 'b')])"
    assert Pipeline().tasks == []
    with pytest.raises(ValueError, match="not in the pipeline's task list"):
        Pipeline(tasks=[a], edges=[(a, b)])
    with pytest.raises(ValueError, match="twice"):
        Pipeline(tasks=[a, a])
    with pytest.raises(TypeError, match=r"tasks\[1\]"):
        Pipeline(tasks=[a, "b"])


def test_run_blockwise_delegates_to_the_server_module(monkeypatch):
    import sys
    import types

    calls = []
    fake = types.ModuleType("blockwise.daisy._server")
    fake.run_blockwise = lambda p, **kw: calls.append((p, kw)) or True
    monkeypatch.setitem(sys.modules, "blockwise.daisy._server", fake)
    p = make_task("a") + make_task("b")
    assert p.run_blockwise(progress=False) is True
    assert calls == [(p, dict(multiprocessing=True, resources=None, progress=False,
                              block_tracking=True))]


# ---- to_pipeline and the v1 upstream bridge --------------------------------------------------


def test_to_pipeline_accepts_pipelines_tasks_and_lists():
    a, b = make_task("a"), make_task("b")
    p = a + b
    assert to_pipeline(p) is p
    assert ids(to_pipeline(a).tasks) == ["a"]
    listed = to_pipeline([a, b])
    assert ids(listed.tasks) == ["a", "b"] and listed.edges == []
    with pytest.raises(TypeError, match="Pipeline, a Task, or a list"):
        to_pipeline("a")
    with pytest.raises(TypeError, match="position 1"):
        to_pipeline([a, 3])


def test_v1_upstream_tasks_become_edges_transitively():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        a = make_task("a", cls=V1Task)
        b = make_task("b", cls=V1Task, upstream_tasks=[a])
        c = make_task("c", cls=V1Task, upstream_tasks=[b, a])
    assert c.upstream_tasks == [b, a]
    p = to_pipeline([c])  # a and b are found through c
    assert ids(p.tasks) == ["a", "b", "c"]
    assert edge_ids(p) == {("a", "b"), ("b", "c"), ("a", "c")}
    assert edge_ids(to_pipeline(c)) == edge_ids(p)
    assert ids(to_pipeline([a, b, c]).tasks) == ["a", "b", "c"]
    with pytest.warns(DeprecationWarning, match="upstream_task \\+ downstream_task"):
        make_task("d", cls=V1Task, upstream_tasks=[a])
    with pytest.raises(TypeError, match="upstream_tasks must contain Task"):
        make_task("e", cls=V1Task, upstream_tasks=["a"])


# ---- the session's pipeline spec -------------------------------------------------------------


def test_process_mode_follows_daisys_arity_rule():
    def block_fn(block):
        pass

    def worker_fn():
        pass

    class Worker:
        def __call__(self):
            pass

        def method(self, block):
            pass

    assert process_mode(block_fn) == "block"
    assert process_mode(lambda b=None: None) == "block"
    assert process_mode(worker_fn) == "worker"
    assert process_mode(lambda *args: None) == "worker"
    assert process_mode(Worker()) == "worker"
    assert process_mode(Worker().method) == "block"
    assert process_mode(None) == "block"


def test_pipeline_spec_fields(tmp_path):
    a = make_task("a", check_function=lambda b: False, timeout=2.5, requires={"cpu": 2},
                  max_workers=3, max_retries=0, resource_tracking=True)
    b = make_task("b", process_function=lambda: None, done_marker_path=False,
                  skip_mask=str(tmp_path / "mask"))
    c = make_task("c", done_marker_path=str(tmp_path / "marks"), timeout=0)
    spec = pipeline_spec(a + b + c)
    assert spec["edges"] == [["a", "b"], ["b", "c"]]
    first, second, third = spec["tasks"]
    assert first == {
        "id": "a",
        "totalRoi": {"offset": [0], "shape": [40]},
        "readRoi": {"offset": [0], "shape": [10]},
        "writeRoi": {"offset": [0], "shape": [10]},
        "fit": "valid",
        "readWriteConflict": False,
        "maxWorkers": 3,
        "maxRetries": 0,
        "maxWorkerRestarts": 10,
        "timeout": 2.5,
        "requires": {"cpu": 2},
        "check": True,
        "mode": "block",
        "tracking": str(tmp_path / "logs" / "a"),
        "resourceTracking": True,
        "skipMask": None,
    }
    assert second["mode"] == "worker" and second["tracking"] is False
    assert second["skipMask"] == str(tmp_path / "mask") and second["check"] is False
    assert third["tracking"] == str(tmp_path / "marks") and third["timeout"] is None
    json.dumps(spec)  # plain JSON


def test_pipeline_spec_tracking_options(tmp_path):
    task = make_task("a")
    assert pipeline_spec(task, block_tracking=False)["tasks"][0]["tracking"] is False
    assert pipeline_spec(task, tracking_dir_default=None)["tasks"][0]["tracking"] is None
    assert pipeline_spec(task, tracking_dir_default=tmp_path / "d")["tasks"][0]["tracking"] == str(
        tmp_path / "d" / "a"
    )
    set_tracking_basedir(tmp_path / "base")
    assert pipeline_spec(task, tracking_dir_default=None)["tasks"][0]["tracking"] == str(
        tmp_path / "base" / "a"
    )
    set_tracking_basedir(None)
    daisy_logging.set_log_basedir(None)
    assert pipeline_spec(task)["tasks"][0]["tracking"] is False


def test_pipeline_spec_refuses_duplicate_ids_and_needs_a_mask_writer(tmp_path):
    with pytest.raises(ValueError, match="duplicate task_id 'a'"):
        pipeline_spec(make_task("a") | make_task("a"))

    class FakeArray:
        shape = (4,)

    masked = make_task("m", skip_mask=FakeArray())
    with pytest.raises(TypeError, match="skip_mask_file"):
        pipeline_spec(masked)
    spec = pipeline_spec(masked, skip_mask_file=lambda task: tmp_path / ("%s.mask" % task.task_id))
    assert spec["tasks"][0]["skipMask"] == str(tmp_path / "m.mask")


def test_pipeline_spec_dedupes_edges_and_lists_outputs():
    a, b = make_task("a"), make_task("b", outputs={"seg": {"path": "out.zarr"}})
    spec = pipeline_spec(Pipeline(tasks=[a, b], edges=[(a, b), (a, b)]))
    assert spec["edges"] == [["a", "b"]]
    assert spec["tasks"][1]["outputs"] == {"seg": {"path": "out.zarr"}}
    assert "outputs" not in spec["tasks"][0]


# ---- Context ---------------------------------------------------------------------------------


def test_context_round_trip_through_the_environment(monkeypatch):
    ctx = Context(hostname="node1", port=4000, task_id="t", worker_id=3)
    assert ctx["port"] == "4000" and len(ctx) == 4 and "hostname" in ctx
    assert ctx.to_env() == "hostname=node1:port=4000:task_id=t:worker_id=3"
    monkeypatch.setenv(Context.ENV_VARIABLE, ctx.to_env())
    assert Context.from_env() == ctx
    ctx["address"] = "127.0.0.1:5000"  # a ':' survives the round trip
    ctx["odd=key"] = "50%"
    monkeypatch.setenv("DAISY_CONTEXT", ctx.to_env())
    back = Context.from_env()
    assert back["address"] == "127.0.0.1:5000" and back["odd=key"] == "50%"
    assert back.items() == ctx.items()
    monkeypatch.setenv("DAISY_CONTEXT", "a=1:broken")
    with pytest.raises(ValueError, match="'broken'"):
        Context.from_env()


def test_context_mapping_methods():
    ctx = Context(a=1)
    ctx["b"] = 2
    assert ctx.keys() == ["a", "b"] and ctx.values() == ["1", "2"] and list(ctx) == ["a", "b"]
    assert ctx.get("c") is None and ctx.get("c", 5) == 5
    copy_ = ctx.copy()
    del copy_["a"]
    assert "a" in ctx and "a" not in copy_
    with pytest.raises(KeyError):
        ctx["missing"]
    assert repr(ctx) == "a=1:b=2"


def test_context_from_env_prefers_the_thread_binding(monkeypatch):
    monkeypatch.delenv("DAISY_CONTEXT", raising=False)
    with pytest.raises(KeyError, match="DAISY_CONTEXT.*run_blockwise"):
        Context.from_env()
    mine = Context(task_id="mine")
    seen = {}

    def other_thread():
        try:
            Context.from_env()
        except KeyError:
            seen["other"] = None

    _bind_thread_context(mine)
    try:
        assert Context.from_env()["task_id"] == "mine"
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert seen == {"other": None}  # the binding is per thread
        _bind_thread_context(Context(task_id="inner"))
        assert Context.from_env()["task_id"] == "inner"
        _unbind_thread_context()
        assert Context.from_env()["task_id"] == "mine"
    finally:
        _unbind_thread_context()
    with pytest.raises(KeyError):
        Context.from_env()


# ---- logging knobs ---------------------------------------------------------------------------


def test_log_knobs(tmp_path):
    assert daisy_logging.get_log_basedir() == tmp_path / "logs"
    assert daisy_logging.get_log_mode() == "file"
    daisy_logging.set_log_mode("both")
    assert daisy_logging.get_log_mode() == "both"
    daisy_logging.set_log_basedir(None)
    assert daisy_logging.get_log_mode() == "console"
    assert daisy_logging.get_worker_log_basename(2, "t") is None
    daisy_logging.set_log_basedir(tmp_path)
    assert daisy_logging.get_worker_log_basename(2, "t") == tmp_path / "t" / "worker_2"
    daisy_logging.set_log_mode("file")
    with pytest.raises(ValueError, match="'loud'"):
        daisy_logging.set_log_mode("loud")
    level = daisy_logging.get_log_level()
    daisy_logging.set_log_level("INFO")
    assert daisy_logging.get_log_level() == 20
    daisy_logging.set_log_level(level)
    with pytest.raises(ValueError, match="not a logging level"):
        daisy_logging.set_log_level("chatty")


def test_worker_threads_print_to_their_own_files(tmp_path, capsys):
    def worker(n):
        with daisy_logging.worker_log_context("t", worker=n):
            print("hello from", n)
            try:
                raise RuntimeError("boom %d" % n)
            except RuntimeError as e:
                daisy_logging.emit_failure(daisy_logging.format_traceback(type(e), e, e.__traceback__))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("main thread")
    daisy_logging.close_all_log_files()
    folder = tmp_path / "logs" / "t"
    for n in range(2):
        assert (folder / ("worker_%d.out" % n)).read_text() == "hello from %d\n" % n
        err = (folder / ("worker_%d.err" % n)).read_text()
        assert "RuntimeError: boom %d" % n in err and "Traceback" in err
    assert "main thread" in capsys.readouterr().out


def test_worker_log_context_numbers_threads_and_console_mode(tmp_path, capsys):
    names = []

    def worker():
        with daisy_logging.worker_log_context("auto") as ctx:
            names.append(ctx.basename.name)

    for _ in range(2):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert sorted(names) == ["worker_0", "worker_1"]
    daisy_logging.set_log_mode("console")
    try:
        with daisy_logging.worker_log_context("quiet") as ctx:
            print("to the terminal")
            daisy_logging.emit_failure("failure text")
        assert ctx.basename is None
        assert not (tmp_path / "logs" / "quiet").exists()
        captured = capsys.readouterr()
        assert "to the terminal" in captured.out and "failure text" in captured.err
    finally:
        daisy_logging.set_log_mode("file")


def test_emit_failure_without_a_bound_file_reaches_the_terminal(capsys):
    daisy_logging.emit_failure("nobody listens")
    assert "nobody listens" in capsys.readouterr().err


# ---- progress observers ----------------------------------------------------------------------


def test_json_observer_writes_one_line_per_task_per_event():
    buf = io.StringIO()
    obs = JsonProgressObserver(stream=buf)
    states = {"a": TaskState(counters(done=False, completed=1, ready=3, skipped=0)),
              "b": TaskState(counters())}
    obs.on_start(states)
    obs.on_progress(states)
    obs.on_finish(states)
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [(e["event"], e["task"]) for e in events] == [
        ("start", "a"), ("start", "b"), ("progress", "a"), ("progress", "b"),
        ("finish", "a"), ("finish", "b"),
    ]
    keys = {"t", "event", "task", "total", "ready", "processing", "completed", "skipped",
            "failed", "orphaned", "restarts", "failures"}
    assert all(set(e) == keys for e in events)
    assert events[-1]["completed"] == 4 and events[-1]["restarts"] == 1
    assert not buf.closed  # a given stream stays open


def test_json_observer_path_is_opened_and_closed(tmp_path):
    path = tmp_path / "progress.jsonl"
    obs = JsonProgressObserver(path=str(path))
    obs.on_start({"a": TaskState(counters())})
    obs.on_finish({"a": TaskState(counters())})
    assert obs._sink.closed
    lines = path.read_text().splitlines()
    assert [json.loads(x)["event"] for x in lines] == ["start", "finish"]
    with pytest.raises(ValueError, match="both path"):
        JsonProgressObserver(path=str(path), stream=io.StringIO())


def test_progress_bars_write_plain_lines_off_a_terminal():
    buf = io.StringIO()
    bars = ProgressBars(["b", "a"], stream=buf)
    bars.on_start({"a": TaskState(counters(done=False, completed=0, ready=4)),
                   "b": TaskState(counters())})
    bars.on_progress({"a": TaskState(counters(done=False, completed=2, ready=2))})
    bars.on_finish({"a": TaskState(counters(failed=1, completed=3)), "b": TaskState(counters())})
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("b: 4/4") and lines[1].startswith("a: 0/4")
    assert len(lines) == 4  # progress within the interval is not printed
    assert lines[3].startswith("a: 3/4") and lines[3].endswith("✗")


def test_progress_bars_mark_a_task_stopped_before_its_end_as_unfinished():
    buf = io.StringIO()
    bars = ProgressBars(["a"], stream=buf)
    bars.on_start({"a": TaskState(counters(done=False, completed=0, ready=4))})
    bars.on_finish({"a": TaskState(counters(done=False, completed=2, ready=2))})
    last = buf.getvalue().splitlines()[-1]
    assert last.startswith("a: 2/4") and not last.endswith("✔"), last


def test_resolve_observer():
    assert isinstance(resolve_observer(True, ["a"]), ProgressBars)
    assert resolve_observer(False, None) is None and resolve_observer(None, None) is None
    obs = JsonProgressObserver(stream=io.StringIO())
    assert resolve_observer(obs, None) is obs
    with pytest.raises(TypeError, match="observer"):
        resolve_observer("json", None)


# ---- the package -----------------------------------------------------------------------------


def test_import_blockwise_does_not_import_daisy():
    import subprocess
    import sys

    code = "import blockwise, sys; print(blockwise.__version__, 'blockwise.daisy' in sys.modules)"
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    assert out == ["0.1.0", "False"]
