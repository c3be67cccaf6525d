"""blockwise.daisy on the real engine: what blockwise adds through run_blockwise's keywords
(tracking_dir=, resource_tracking=, listen=, serve=, events=), a worker function whose
subprocess drives daisy.Client() through DAISY_CONTEXT, the ledger that `blockwise status`
reads, and bad input refused in one clear line, never a hang.

Runs where the blockwise binary is found (the wheel's, or BLOCKWISE_BINARY):

    BLOCKWISE_BINARY=./blockwise PYTHONPATH=python python3 -m pytest -q tests/python
"""

import json
import subprocess
import sys
import textwrap
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

try:
    BINARY = binary.find_binary()
except binary.BinaryNotFound as missing:  # pragma: no cover - depends on the machine
    pytest.skip("no blockwise binary: %s" % missing, allow_module_level=True)


@pytest.fixture(autouse=True)
def logs_in_tmp(tmp_path):
    daisy.logging.set_log_basedir(tmp_path / "daisy_logs")
    yield
    _session.close_sessions()


def one_d(task_id, process_function, total=100, block=10, **kwargs):
    return daisy.v2.Task(
        task_id,
        total_roi=daisy.Roi([0], [total]),
        read_roi=daisy.Roi([0], [block]),
        write_roi=daisy.Roi([0], [block]),
        process_function=process_function,
        read_write_conflict=False,
        **kwargs,
    )


def status_json(path):
    out = subprocess.run([BINARY, "status", str(path), "--json"], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_tracking_dir_holds_a_ledger_that_status_reads_and_a_rerun_skips(tmp_path):
    calls = []
    task = one_d("count", lambda b: calls.append(b.block_id), max_workers=2)
    assert daisy.run_blockwise(task, tracking_dir=tmp_path / "ledger", progress=False)
    assert len(calls) == 10
    status = status_json(tmp_path / "ledger")
    text = json.dumps(status)
    assert '"count"' in text and str(tmp_path / "ledger" / "count") in text
    again = []
    task = one_d("count", lambda b: again.append(b.block_id), max_workers=2)
    states = daisy.Server().run_blockwise([task], progress=False, tracking_dir=tmp_path / "ledger")
    assert again == []
    assert states["count"].skipped_count == 10 and states["count"].completed_count == 10


def test_resource_tracking_records_per_block_figures(tmp_path):
    task = one_d("measured", lambda b: sum(range(20000)), max_workers=1)
    assert daisy.run_blockwise(task, tracking_dir=tmp_path / "ledger", resource_tracking=True,
                               progress=False)
    out = subprocess.run([BINARY, "status", str(tmp_path / "ledger")], capture_output=True,
                         text=True, check=True).stdout
    assert "not tracked" not in out, out
    assert "resources" in out


def test_events_file_has_a_line_per_state_change(tmp_path):
    events = tmp_path / "events.jsonl"
    assert daisy.run_blockwise(one_d("ev", lambda b: None), events=str(events), progress=False)
    kinds = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end", kinds
    assert "task_progress" in kinds


def test_a_worker_function_starts_a_subprocess_that_drives_client(tmp_path):
    script = tmp_path / "sub_worker.py"
    script.write_text(textwrap.dedent("""
        import sys
        import blockwise.daisy as daisy
        client = daisy.Client()
        while True:
            with client.acquire_block() as block:
                if block is None:
                    break
                with open(sys.argv[1], "a") as out:
                    out.write("%d\\n" % block.block_id[1])
    """))
    done = tmp_path / "done.txt"
    env_python = sys.executable
    paths = [p for p in sys.path if p]

    def worker():
        subprocess.run([env_python, str(script), str(done)], check=True,
                       env=dict(__import__("os").environ, PYTHONPATH=":".join(paths)))

    task = one_d("sub", worker, max_workers=1)
    assert daisy.run_blockwise(task, listen="127.0.0.1:0", progress=False,
                               tracking_dir=tmp_path / "ledger")
    assert sorted(int(x) for x in done.read_text().split()) == list(range(10))


def test_serve_prints_the_dashboard_address(tmp_path, capfd):
    assert daisy.run_blockwise(one_d("shown", lambda b: None), serve="127.0.0.1:0",
                               progress=False, tracking_dir=tmp_path / "ledger")
    err = capfd.readouterr().err
    assert "Dashboard of this run: http://127.0.0.1:" in err, err


@pytest.mark.parametrize("build, kind, words", [
    (lambda: daisy.Task("bad", total_roi=daisy.Roi([0, 0], [10, 10]),
                        read_roi=daisy.Roi([0], [5]), write_roi=daisy.Roi([0], [5]),
                        process_function=lambda b: None),
     ValueError, ["bad", "read_roi"]),
    (lambda: daisy.Task("bad", total_roi=daisy.Roi([0], [10]), read_roi=daisy.Roi([0], [5]),
                        write_roi=daisy.Roi([0], [5]), process_function="not a function"),
     TypeError, ["bad", "process_function"]),
    (lambda: daisy.Task("bad", total_roi=daisy.Roi([0], [10]), read_roi=daisy.Roi([0], [5]),
                        write_roi=daisy.Roi([0], [5]), process_function=lambda b: None,
                        bogus=1),
     TypeError, ["bogus"]),
])
def test_bad_tasks_are_refused_in_one_line(build, kind, words):
    with pytest.raises(kind) as raised:
        build()
    message = str(raised.value)
    for word in words:
        assert word in message, message


def test_unknown_run_keyword_and_bad_resources_are_refused():
    task = one_d("t", lambda b: None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'trakcing_dir'"):
        daisy.run_blockwise(task, trakcing_dir="x")
    with pytest.raises(TypeError, match="resources"):
        daisy.run_blockwise(task, resources=["cpu"])


def test_a_missing_binary_says_how_to_fix_it(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOCKWISE_BINARY", str(tmp_path / "nowhere" / "blockwise"))
    monkeypatch.setattr(binary, "_installed_candidates", lambda: [])
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(binary.BinaryNotFound) as raised:
        binary.find_binary()
    assert "BLOCKWISE_BINARY" in str(raised.value)
    assert "\n" not in str(raised.value).strip()


def test_pipeline_run_blockwise_takes_blockwise_keywords(tmp_path):
    pipeline = one_d("first", lambda b: None) + one_d("second", lambda b: None)
    assert pipeline.run_blockwise(progress=False, tracking_dir=tmp_path / "ledger")
    assert (tmp_path / "ledger" / "first" / "zarr.json").exists()
    assert (tmp_path / "ledger" / "second" / "zarr.json").exists()


def test_a_client_that_connects_after_the_run_ended_gets_no_block_at_once(tmp_path):
    script = tmp_path / "late_worker.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        import blockwise.daisy as daisy
        if sys.argv[2] == "late":
            time.sleep(1.5)  # the other worker does every block meanwhile
        client = daisy.Client()
        n = 0
        while True:
            with client.acquire_block() as block:
                if block is None:
                    break
                n += 1
        with open(sys.argv[1], "a") as out:
            out.write("%s %d\\n" % (sys.argv[2], n))
    """))
    done = tmp_path / "done.txt"
    paths = ":".join(p for p in sys.path if p)
    started = []

    def worker():
        which = "late" if started else "early"
        started.append(which)
        subprocess.run([sys.executable, str(script), str(done), which], check=True,
                       env=dict(__import__("os").environ, PYTHONPATH=paths))

    task = one_d("late", worker, total=40, max_workers=2)
    assert daisy.run_blockwise(task, progress=False, tracking_dir=tmp_path / "ledger")
    import time
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(done.read_text().split("\n")) < 3:
        time.sleep(0.1)
    lines = sorted(done.read_text().split("\n")[:2])
    assert lines == ["early 4", "late 0"], lines


LAUNCHED = '''
import os
import sys
import blockwise.daisy as daisy

OUT = sys.argv[1] if __name__ == "__main__" else os.environ["DAISY_TEST_OUT"]


def count(block):
    with open(os.path.join(OUT, "block-%d.txt" % os.getpid()), "a") as out:
        out.write("%d\\n" % block.block_id[1])


def drive():
    client = daisy.Client()
    while True:
        with client.acquire_block() as block:
            if block is None:
                break
            with open(os.path.join(OUT, "worker-%d.txt" % os.getpid()), "a") as out:
                out.write("%d\\n" % block.block_id[1])


if __name__ == "__main__":
    with open(os.path.join(OUT, "main.pid"), "w") as out:
        out.write(str(os.getpid()))
    launch = {"kind": "command", "argv": ["env", "DAISY_TEST_OUT=" + OUT, "{worker}"]}
    roi = lambda n: daisy.Roi([0], [n])
    a = daisy.v2.Task("a", roi(100), roi(10), roi(10), process_function=count,
                      read_write_conflict=False, max_workers=2, launch=launch)
    b = daisy.v2.Task("b", roi(100), roi(10), roi(10), process_function=drive,
                      read_write_conflict=False, max_workers=1, launch=launch)
    sys.exit(0 if daisy.run_blockwise(a + b, progress=False,
                                      tracking_dir=os.path.join(OUT, "ledger")) else 1)
'''


def test_launch_runs_block_and_worker_functions_in_processes_the_launcher_starts(tmp_path):
    script = tmp_path / "launched.py"
    script.write_text(LAUNCHED)
    env = dict(__import__("os").environ, PYTHONPATH=":".join(p for p in sys.path if p))
    run = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    import os
    blocks = [p for p in tmp_path.iterdir() if p.name.startswith("block-")]
    workers = [p for p in tmp_path.iterdir() if p.name.startswith("worker-")]
    assert blocks and workers, run.stderr
    main = int((tmp_path / "main.pid").read_text())
    assert main not in {int(p.stem.split("-")[1]) for p in blocks + workers}
    done = sorted(int(x) for p in blocks for x in p.read_text().split())
    assert done == list(range(10))
    assert sorted(int(x) for p in workers for x in p.read_text().split()) == list(range(10))


def test_launch_needs_a_function_worker_processes_can_import():
    with pytest.raises(ValueError, match="top level"):
        one_d("t", lambda b: None, launch="slurm")
    with pytest.raises(ValueError, match="not a way to launch"):
        one_d("t", print, launch="ssh")


@pytest.mark.parametrize("multiprocessing", [True, False])
def test_declared_outputs_are_committed_and_verified(tmp_path, multiprocessing):
    def write(block):
        with open(block.outputs["counts"], "w") as out:
            out.write("block %d\n" % block.block_id[1])

    task = one_d("w", write, total=40, max_workers=2,
                 outputs={"counts": {"path": str(tmp_path / "counts" / "{block_id}.txt")}})
    assert daisy.run_blockwise(task, progress=False, tracking_dir=tmp_path / "ledger",
                               multiprocessing=multiprocessing)
    assert sorted(p.name for p in (tmp_path / "counts").iterdir()) == [
        "0.txt", "1.txt", "2.txt", "3.txt"]
    assert (tmp_path / "counts" / "2.txt").read_text() == "block 2\n"
    verify = subprocess.run([BINARY, "verify", str(tmp_path / "ledger")], capture_output=True,
                            text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "4 blocks, 4 files" in verify.stdout, verify.stdout


def test_skip_mask_from_an_array_and_from_a_file(tmp_path):
    np = pytest.importorskip("numpy")
    mask = np.zeros(10, dtype=np.uint8)
    mask[[2, 5]] = 1
    seen = []
    task = one_d("masked", lambda b: seen.append(b.block_id[1]), skip_mask=mask)
    states = daisy.Server().run_blockwise([task], progress=False, block_tracking=False)
    assert sorted(seen) == [0, 1, 3, 4, 6, 7, 8, 9]
    assert states["masked"].skipped_count == 2
    np.save(tmp_path / "mask.npy", mask)
    seen.clear()
    task = one_d("masked", lambda b: seen.append(b.block_id[1]),
                 skip_mask=str(tmp_path / "mask.npy"))
    daisy.Server().run_blockwise([task], progress=False, block_tracking=False)
    assert sorted(seen) == [0, 1, 3, 4, 6, 7, 8, 9]
