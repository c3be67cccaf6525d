"""bench/daisy_api.py runs: `--quick` (small sizes, budgets not judged) with this interpreter
exits 0 and prints each part and its closing table. No time is asserted: the bench judges
its budgets itself, on an idle machine.

    PYTHONPATH=python BLOCKWISE_BINARY=./blockwise \
        python3 -m pytest -q tests/python/test_daisy_bench.py
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent.parent / "bench" / "daisy_api.py"
try:
    import blockwise  # noqa: F401 - the installed package (a wheel), or PYTHONPATH=python
except ImportError:
    sys.path.insert(0, str(HERE.parent.parent / "python"))

import blockwise._binary as binary  # noqa: E402

pytest.importorskip("numpy", reason="bench/daisy_api.py's real-work part needs numpy")


def test_quick_run_exits_0_and_prints_its_table(tmp_path):
    if not BENCH.exists():
        pytest.skip("%s is not in this checkout" % BENCH)
    try:
        found = binary.find_binary()
    except binary.BinaryNotFound as missing:
        pytest.skip("no blockwise binary: %s" % missing)
    env = dict(os.environ, BLOCKWISE_BINARY=found)
    # The measured processes import blockwise as this test does (the wheel, or the sources).
    parent = str(Path(binary.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (parent, env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    for part in ("no-op blocks (1-D, block 10", "daisy v2's authors' figures",
                 "blocks/s", "real work:", "2 tuned bare loops", "daisy API, 2 threads",
                 "summary (--quick", "load average at start"):
        assert part in out, "%r missing from the output:\n%s" % (part, out)
    table = out[out.index("summary"):]
    for row in ("no-op blocks, 2 workers, first call, tracking off",
                "no-op blocks, 2 workers, first call, tracking on",
                "real work, 2 threads / 2 tuned bare loops"):
        assert row in table, "%r missing from the table:\n%s" % (row, table)
