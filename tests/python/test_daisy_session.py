"""blockwise.daisy's session client against a fake `blockwise daisy-session` (fake_session.py):
requests and answers, error types, a dead session, the Scheduler's ops, serial runs (the
original exception raised again, check_function answers), KeyboardInterrupt turned into `stop`,
worker threads reporting `exited`, and finding the binary.

    cd /work/main && PYTHONPATH=python python3 -m pytest -q tests/python/test_daisy_session.py
"""

import json
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
try:
    import blockwise  # noqa: F401 - the installed package (a wheel), or PYTHONPATH=python
except ImportError:
    sys.path.insert(0, str(HERE.parent.parent / "python"))

import blockwise._binary as binary  # noqa: E402
import blockwise.daisy as daisy  # noqa: E402
from blockwise.daisy import _session  # noqa: E402

FAKE = HERE / "fake_session.py"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Sessions of this test run fake_session.py; returns a function reading what it got."""
    mode = FAKE.stat().st_mode
    if not mode & stat.S_IXUSR:
        FAKE.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    log = tmp_path / "session.log"
    monkeypatch.setenv("FAKE_SESSION_LOG", str(log))
    monkeypatch.setattr(_session, "find_binary", lambda: str(FAKE))
    daisy.logging.set_log_basedir(None)
    _session.close_sessions()

    def received():
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]

    yield received
    _session.close_sessions()


def task(task_id, process_function, total=40, check_function=None, **kwargs):
    return daisy.Task(
        task_id,
        total_roi=daisy.Roi([0], [total]),
        read_roi=daisy.Roi([0], [10]),
        write_roi=daisy.Roi([0], [10]),
        process_function=process_function,
        check_function=check_function,
        read_write_conflict=False,
        **kwargs,
    )


# ---- requests ----------------------------------------------------------------------------------


def test_request_answer_and_one_shared_session(fake):
    session = _session.get_session()
    assert session.version == "0.0.0-fake"
    assert session.request("hello") == {"version": "0.0.0-fake", "protocol": 1}
    assert _session.get_session() is session
    ops = [m["op"] for m in fake()]
    assert ops == ["hello", "hello"]
    ids = [m["id"] for m in fake()]
    assert ids[0] != ids[1]


@pytest.mark.parametrize("name,kind", [
    ("ValueError", ValueError), ("TypeError", TypeError), ("RuntimeError", RuntimeError),
    ("KeyError", KeyError), ("OSError", RuntimeError),
])
def test_error_answers_raise_the_named_type(fake, name, kind):
    session = _session.get_session()
    with pytest.raises(kind) as caught:
        session.request("fail", type=name, message="The value x is wrong; give y instead.")
    assert type(caught.value) is kind
    assert "The value x is wrong; give y instead." in str(caught.value)
    # The session goes on answering.
    assert session.request("hello")["protocol"] == 1


def test_a_session_that_dies_raises_and_is_replaced(fake):
    session = _session.get_session()
    with pytest.raises(RuntimeError) as caught:
        session.request("die")
    message = str(caught.value)
    assert "exited with status 3" in message
    assert "stderr" in message
    assert not session.alive()
    again = _session.get_session()
    assert again is not session
    assert again.request("hello")["protocol"] == 1


def test_closing_the_session_gives_it_eof(fake):
    session = _session.get_session()
    session.close()
    assert session.process.wait(timeout=5) == 0
    assert fake()[-1] == {"eof": True}


# ---- the Scheduler -------------------------------------------------------------------------------


def test_scheduler_acquire_release_states(fake):
    t = task("sched", lambda b: None, total=30)
    scheduler = daisy.Scheduler([t])
    block = scheduler.acquire_block("sched")
    assert block.status == daisy.BlockStatus.CREATED
    assert block.block_id == ("sched", 0)
    assert block.write_roi == daisy.Roi([0], [10])
    assert block.total_roi == daisy.Roi([0], [30])
    with pytest.raises(ValueError, match="set block.status"):
        scheduler.release_block(block)
    block.status = daisy.BlockStatus.SUCCESS
    scheduler.release_block(block)
    state = scheduler.task_states["sched"]
    assert state.total_block_count == 3
    assert state.completed_count == 1
    opened = [m for m in fake() if m.get("op") == "open"][0]
    spec = opened["pipeline"]["tasks"][0]
    assert spec["tracking"] is False and spec["mode"] == "block"
    released = [m for m in fake() if m.get("op") == "release"][0]
    assert released["status"] == "success" and released["position"] == 0
    with pytest.raises(ValueError, match="No open scheduler"):
        _session.get_session().request("acquire", handle=99, task="sched")


# ---- serial runs -------------------------------------------------------------------------------


def test_serial_run_raises_the_original_exception(fake):
    class Boom(Exception):
        pass

    raised = []

    def boom(block):
        error = Boom("from inside process_function")
        raised.append(error)
        raise error

    with pytest.raises(Boom, match="from inside process_function") as caught:
        daisy.run_blockwise([task("boom", boom)], multiprocessing=False, progress=False)
    assert caught.value is raised[0]
    assert len(raised) == 1
    # The fake logs what it reads: `stop` follows `ran` on the pipe, give it a moment.
    deadline = time.monotonic() + 5
    messages = fake()
    while not any(m.get("op") == "stop" for m in messages) and time.monotonic() < deadline:
        time.sleep(0.02)
        messages = fake()
    ran = [m for m in messages if m.get("op") == "ran"]
    assert len(ran) == 1 and ran[0]["ok"] is False
    assert ran[0]["error"]["message"] == "Boom: from inside process_function"
    assert "raise error" in ran[0]["error"]["stack"]
    assert any(m.get("op") == "stop" for m in messages)
    run = [m for m in messages if m.get("op") == "run"][0]
    assert run["options"]["serial"] is True
    # The session is usable afterwards.
    assert _session.get_session().request("hello")["protocol"] == 1


def test_serial_run_calls_process_and_check_functions(fake):
    seen = []

    def check(block):
        if block.block_id[1] == 1:
            raise ValueError("broken check")
        return block.block_id[1] == 0

    def process(block):
        assert block.status == daisy.BlockStatus.PROCESSING
        seen.append(block.block_id)
        if block.block_id[1] == 3:
            block.status = daisy.BlockStatus.FAILED

    states = daisy.SerialServer().run_blockwise([task("chk", process, check_function=check)])
    assert seen == [("chk", 1), ("chk", 2), ("chk", 3)]
    checked = [m["done"] for m in fake() if m.get("op") == "checked"]
    assert checked == [True, False, False, False]
    ran = [m["ok"] for m in fake() if m.get("op") == "ran"]
    assert ran == [True, True, False]
    assert isinstance(states["chk"], daisy.TaskState)


# ---- runs with workers ---------------------------------------------------------------------------


def test_keyboard_interrupt_sends_stop_and_is_raised_again(fake):
    def fire():
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        daisy.Server().run_blockwise([task("int", lambda b: None)], progress=False)
    assert time.perf_counter() - t0 < 5.0
    ops = [m.get("op") for m in fake()]
    assert ops.count("stop") == 1
    assert ops.index("stop") > ops.index("run")
    assert _session.get_session().request("hello")["protocol"] == 1


def test_progress_observer_and_run_stats(fake):
    events = []

    class Observer:
        def on_start(self, states):
            events.append(("start", states))

        def on_progress(self, states):
            events.append(("progress", states))

        def on_finish(self, states):
            events.append(("finish", states))

    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    server = daisy.Server(stop_event=stop)
    states = server.run_blockwise([task("obs", lambda b: None)], progress=Observer())
    assert events[0][0] == "start" and events[-1][0] == "finish"
    assert isinstance(events[0][1]["obs"], daisy.TaskState)
    assert states["obs"].total_block_count == 4
    assert server.last_run_stats == {"process": {}, "per_task": {}, "per_worker": []}
    assert server.last_task_order == ["obs"]


def test_a_worker_function_that_raises_reports_exited(fake, monkeypatch):
    monkeypatch.setenv("FAKE_SESSION_LAUNCH", "1")

    def crashing_worker():
        raise RuntimeError("simulated crash")

    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    daisy.Server(stop_event=stop).run_blockwise([task("crashy", crashing_worker)],
                                                progress=False)
    exited = [m for m in fake() if m.get("op") == "exited"]
    assert len(exited) == 1
    assert exited[0]["task"] == "crashy" and exited[0]["worker"] == 0
    assert exited[0]["ok"] is False
    assert "RuntimeError: simulated crash" in exited[0]["error"]


def test_resources_are_checked(fake):
    with pytest.raises(TypeError, match="resources"):
        daisy.Server().run_blockwise([task("r", lambda b: None)], resources=["cpu"])
    with pytest.raises(TypeError, match="must be a number"):
        daisy.Server().run_blockwise([task("r", lambda b: None)], resources={"cpu": "4"})
    with pytest.raises(ValueError, match="at least 0"):
        daisy.Server().run_blockwise([task("r", lambda b: None)], resources={"cpu": -1})
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        daisy.run_blockwise([task("r", lambda b: None)], colour="red")
    assert not [m for m in fake() if m.get("op") == "run"]


# ---- finding the binary ------------------------------------------------------------------------


def test_find_binary_order_and_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(binary, "_installed_candidates", lambda: [tmp_path / "none" / "blockwise"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("BLOCKWISE_BINARY", raising=False)
    with pytest.raises(binary.BinaryNotFound) as caught:
        binary.find_binary()
    assert isinstance(caught.value, RuntimeError)
    assert "BLOCKWISE_BINARY" in str(caught.value) and "wheel" in str(caught.value)

    script = tmp_path / "bw.sh"
    script.write_text("#!/bin/sh\nexec bun main.ts \"$@\"\n")
    monkeypatch.setenv("BLOCKWISE_BINARY", str(script))
    with pytest.raises(binary.BinaryNotFound, match="not executable"):
        binary.find_binary()
    script.chmod(0o755)
    assert binary.find_binary() == str(script.resolve())
    monkeypatch.setenv("BLOCKWISE_BINARY", str(tmp_path / "missing"))
    with pytest.raises(binary.BinaryNotFound, match="nothing is there"):
        binary.find_binary()

    installed = tmp_path / "bin" / "blockwise"
    installed.parent.mkdir()
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    monkeypatch.setattr(binary, "_installed_candidates", lambda: [installed])
    assert binary.find_binary() == str(installed)


# ---- worker threads against the fake's worker server ---------------------------------------------


@pytest.fixture
def server_mode(fake, monkeypatch):
    monkeypatch.setenv("FAKE_SESSION_LAUNCH", "server")
    return fake


def exited_of(received, count):
    """The `exited` messages the fake received, once there are `count` (they may arrive just
    after the run's answer)."""
    deadline = time.monotonic() + 5
    while True:
        exited = [m for m in received() if m.get("op") == "exited"]
        if len(exited) >= count or time.monotonic() > deadline:
            return exited
        time.sleep(0.02)


def errors_of(messages):
    return [e for m in messages if "errors" in m for e in m["errors"]]


def test_block_function_threads_run_every_block(server_mode):
    seen = []
    lock = threading.Lock()

    def process(block):
        assert block.status == daisy.BlockStatus.PROCESSING
        with lock:
            seen.append((block.block_id, block.write_roi, block.read_roi))

    t = task("blocks", process, total=2000, max_workers=2)
    states = daisy.Server().run_blockwise([t], progress=False)
    assert states["blocks"].completed_count == 200
    assert states["blocks"].worker_failure_count == 0
    assert sorted(seen) == [(("blocks", i), daisy.Roi([10 * i], [10]), daisy.Roi([10 * i], [10]))
                            for i in range(200)]
    exited = exited_of(server_mode, 2)
    assert sorted((m["worker"], m["ok"]) for m in exited) == [(0, True), (1, True)]


def test_a_failed_block_ends_its_worker(server_mode):
    def process(block):
        if block.block_id[1] in (3, 7):
            raise ValueError("bad block %d" % block.block_id[1])

    t = task("fails", process, total=100, max_workers=1, max_worker_restarts=5)
    states = daisy.Server().run_blockwise([t], progress=False)
    state = states["fails"]
    assert state.failed_count == 2 and state.completed_count == 8
    assert state.worker_failure_count == 2 and state.worker_restart_count == 2
    errors = errors_of(server_mode())
    assert [e["message"] for e in errors] == ["ValueError: bad block 3", "ValueError: bad block 7"]
    assert errors[0]["stack"].startswith("Traceback")
    assert "_workers.py" not in errors[0]["stack"] and "_worker_client" not in errors[0]["stack"]
    assert 'raise ValueError("bad block %d"' in errors[0]["stack"]
    exited = exited_of(server_mode, 3)
    # A thread says it exited once it has ended, after its failed block was reported: the
    # replacement started then may finish its blocks and say so first.
    assert sorted(m["ok"] for m in exited) == [False, False, True]
    failed = [m["error"] for m in exited if not m["ok"]]
    assert any("ValueError: bad block 3" in e for e in failed), failed
    assert any("ValueError: bad block 7" in e for e in failed), failed


def test_worker_function_and_client(server_mode):
    seen = []
    contexts = []

    def worker():
        context = daisy.Context.from_env()
        contexts.append((context["task_id"], os.environ["DAISY_CONTEXT"]))
        client = daisy.Client()
        while True:
            with client.acquire_block() as block:
                if block is None:
                    return
                assert block.status == daisy.BlockStatus.PROCESSING
                seen.append(block.block_id)
                if block.block_id[1] == 5:
                    block.status = daisy.BlockStatus.FAILED

    t = task("wf", worker, total=300, max_workers=2)
    states = daisy.Server().run_blockwise([t], progress=False)
    assert states["wf"].completed_count == 29 and states["wf"].failed_count == 1
    assert sorted(seen) == [("wf", i) for i in range(30)]
    assert [c[0] for c in contexts] == ["wf", "wf"]
    assert "blockwise_slot=" in contexts[0][1]
    exited = exited_of(server_mode, 2)
    assert [m["ok"] for m in exited] == [True, True]


def test_a_worker_function_that_raises_holding_a_block(server_mode):
    def worker():
        client = daisy.Client()
        while True:
            with client.acquire_block() as block:
                if block is None:
                    return
                raise RuntimeError("crash holding a block")

    t = task("crash", worker, total=100, max_workers=1, max_worker_restarts=2)
    states = daisy.Server().run_blockwise([t], progress=False)
    state = states["crash"]
    assert state.failed_count == 3 and state.worker_restart_count == 2
    assert state.worker_failure_count == 3
    errors = errors_of(server_mode())
    assert [e["message"] for e in errors] == ["RuntimeError: crash holding a block"] * 3


def test_the_api_inside_a_running_pipeline_uses_a_second_session(server_mode):
    inner = task("inner", lambda b: None, total=20)
    got = []

    def process(block):
        got.append(daisy.Scheduler([inner]).acquire_block("inner").block_id)

    daisy.Server().run_blockwise([task("outer", process, total=20)], progress=False)
    assert got == [("inner", 0), ("inner", 0)]
    hellos = [m for m in server_mode() if m.get("op") == "hello"]
    assert len(hellos) == 2
