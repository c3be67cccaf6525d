"""blockwise.daisy's allocator setting for worker threads (python/blockwise/daisy/_allocator.py):
a multiprocessing run gives this process the worker profile's top pad through mallopt, once,
with the mmap threshold that keeps a late top pad from mapping every array afresh; a user's own
MALLOC_TOP_PAD_ or glibc.malloc tunable is kept; other libcs are skipped quietly. On glibc, a
chain of 1.3 MB temporaries (the real-work block's pattern) re-faults nothing once it is set,
in the main thread and in a reused thread arena; and run_blockwise sets it for multiprocessing
runs, not for serial ones.

    PYTHONPATH=python python3 -m pytest -q tests/python/test_daisy_allocator.py
"""

import json
import os
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
from blockwise.daisy import _allocator  # noqa: E402

PAD = ("mallopt", _allocator.M_TOP_PAD, 256 * 1024 * 1024)
THRESHOLD = ("mallopt", _allocator.M_MMAP_THRESHOLD, 32 * 1024 * 1024)
ON_GLIBC = _allocator.glibc_mallopt() is not None
# The package as this test imports it, for the subprocesses.
PACKAGE_PARENT = str(Path(_allocator.__file__).resolve().parents[2])


@pytest.fixture(autouse=True)
def fresh():
    _allocator._reset_for_tests()
    yield
    _allocator._reset_for_tests()


class Mallopt:
    """A stand-in for glibc's mallopt that records its calls."""

    def __init__(self, answer=1, error=None):
        self.calls = []
        self.answer = answer
        self.error = error

    def __call__(self, parameter, value):
        self.calls.append(("mallopt", parameter, value))
        if self.error is not None:
            raise self.error
        return self.answer


def test_sets_the_mmap_threshold_then_the_top_pad_and_says_so():
    mallopt = Mallopt()
    done = _allocator.keep_allocator_warm({}, mallopt)
    assert mallopt.calls == [THRESHOLD, PAD]
    assert done == "mallopt(M_TOP_PAD, 268435456), mallopt(M_MMAP_THRESHOLD, 33554432)"


def test_once_per_process():
    mallopt = Mallopt()
    first = _allocator.keep_allocator_warm({}, mallopt)
    again = _allocator.keep_allocator_warm({}, mallopt)
    assert again == first
    assert len(mallopt.calls) == 2


@pytest.mark.parametrize("env", [
    {"MALLOC_TOP_PAD_": "0"},
    {"MALLOC_TOP_PAD_": "1048576", "MALLOC_MMAP_THRESHOLD_": "65536"},
    {"GLIBC_TUNABLES": "glibc.malloc.top_pad=1048576"},
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2:glibc.malloc.trim_threshold=0"},
])
def test_a_users_own_top_pad_or_malloc_tunable_is_kept(env):
    mallopt = Mallopt()
    assert _allocator.keep_allocator_warm(env, mallopt) is None
    assert mallopt.calls == []


def test_tunables_of_other_parts_of_glibc_do_not_count():
    mallopt = Mallopt()
    assert _allocator.keep_allocator_warm({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"},
                                          mallopt) is not None
    assert mallopt.calls == [THRESHOLD, PAD]


def test_a_users_mmap_threshold_is_kept_and_the_pad_still_set():
    mallopt = Mallopt()
    done = _allocator.keep_allocator_warm({"MALLOC_MMAP_THRESHOLD_": "65536"}, mallopt)
    assert mallopt.calls == [PAD]
    assert done == "mallopt(M_TOP_PAD, 268435456)"


def test_a_refusal_or_an_error_is_quiet():
    assert _allocator.keep_allocator_warm({}, Mallopt(answer=0)) is None
    _allocator._reset_for_tests()
    assert _allocator.keep_allocator_warm({}, Mallopt(error=OSError("no"))) is None


def test_other_systems_and_libcs_are_skipped_quietly(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert _allocator.glibc_mallopt() is None
    assert _allocator.keep_allocator_warm({}) is None
    monkeypatch.setattr(sys, "platform", "linux")

    def musl(name):
        raise ValueError("unrecognized configuration name")  # musl has no CS_GNU_LIBC_VERSION

    monkeypatch.setattr(os, "confstr", musl)
    assert _allocator.glibc_mallopt() is None
    _allocator._reset_for_tests()
    assert _allocator.keep_allocator_warm({}) is None


# The real-work block's allocation pattern without numpy: a 1.37 MB array, then nine passes that
# each allocate a slightly smaller one and drop the one before. After a few blocks, the steady
# state's minor faults in the thread that runs them (each block touches about 2,900 pages).
CHAIN = """
import json, os, resource, sys, threading
sys.path.insert(0, %(package)r)

def block():
    shape = [70, 70, 70]
    data = bytearray(70 ** 3 * 4)
    for axis in range(3):
        for _ in range(3):
            shape[axis] -= 2
            y = bytearray(shape[0] * shape[1] * shape[2] * 4)
            y[0] = data[0]
            data = y

def faults(out):
    for _ in range(3):
        block()
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(20):
        block()
    out.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)

def in_thread():
    out = []
    t = threading.Thread(target=faults, args=(out,))
    t.start()
    t.join()
    return out[0]
"""


def run_python(script, env=None):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")}
    environ.update(env or {})
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=environ, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not ON_GLIBC, reason="glibc only: other libcs have no M_TOP_PAD")
def test_on_glibc_block_temporaries_reuse_their_pages_in_the_main_thread_and_a_reused_arena():
    script = CHAIN % {"package": PACKAGE_PARENT} + textwrap.dedent("""
        # A thread that allocated and ended before the setting: its arena is reused by the
        # next thread, with the small heap it had.
        t = threading.Thread(target=lambda: bytearray(100000))
        t.start()
        t.join()
        from blockwise.daisy import _allocator
        done = _allocator.keep_allocator_warm()
        main = []
        faults(main)
        print(json.dumps({"done": done, "main": main[0], "thread": in_thread()}))
    """)
    result = run_python(script)
    assert result["done"] == ("mallopt(M_TOP_PAD, 268435456), "
                              "mallopt(M_MMAP_THRESHOLD, 33554432)")
    # Without the threshold, this glibc maps every array afresh here (about 59,000 faults);
    # with no setting at all, the main thread takes about 12,500.
    assert result["main"] < 500, result
    assert result["thread"] < 500, result


@pytest.mark.skipif(not ON_GLIBC, reason="glibc only: other libcs have no M_TOP_PAD")
def test_run_blockwise_sets_it_for_multiprocessing_runs_only(tmp_path):
    try:
        found = binary.find_binary()
    except binary.BinaryNotFound as missing:
        pytest.skip("no blockwise binary: %s" % missing)
    script = CHAIN % {"package": PACKAGE_PARENT} + textwrap.dedent("""
        import blockwise.daisy as daisy
        from blockwise.daisy import _allocator
        daisy.logging.set_log_basedir(None)
        real = _allocator.keep_allocator_warm
        outcomes = []

        def spy(*args, **kwargs):
            outcomes.append(real(*args, **kwargs))
            return outcomes[-1]

        _allocator.keep_allocator_warm = spy

        def task(name):
            return daisy.v2.Task(name, total_roi=daisy.Roi([0], [20]),
                                 read_roi=daisy.Roi([0], [10]), write_roi=daisy.Roi([0], [10]),
                                 process_function=lambda block: None,
                                 read_write_conflict=False, max_workers=1)

        assert daisy.run_blockwise([task("serial")], multiprocessing=False, progress=False,
                                   block_tracking=False)
        serial = len(outcomes)
        assert daisy.run_blockwise([task("threads")], progress=False, block_tracking=False)
        assert daisy.run_blockwise([task("again")], progress=False, block_tracking=False)
        main = []
        faults(main)
        print(json.dumps({"serial": serial, "outcomes": outcomes, "main": main[0]}))
    """)
    result = run_python(script, {"BLOCKWISE_BINARY": found})
    assert result["serial"] == 0
    done = "mallopt(M_TOP_PAD, 268435456), mallopt(M_MMAP_THRESHOLD, 33554432)"
    assert result["outcomes"] == [done, done]  # asked per run, done once
    assert result["main"] < 500, result
    # A user's own setting is kept: nothing is done.
    kept = run_python(script, {"BLOCKWISE_BINARY": found, "MALLOC_TOP_PAD_": "1048576"})
    assert kept["outcomes"] == [None, None]
