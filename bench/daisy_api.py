"""The daisy API on blockwise's engine (issue 47, item 8): daisy's own benchmark shapes through
``blockwise.daisy.run_blockwise``, each in fresh Python processes, so that the daisy session
(the ``blockwise daisy-session`` child) starts once per process, as in a user's script.

- daisy's worker-scaling shape: 10,000 no-op blocks (1-D, total 100,000, block 10,
  ``read_write_conflict=False``, ``max_retries=0``, ``progress=False``) with 1, 2 and 4 workers,
  with ``block_tracking=False`` and with tracking on (a ledger under a fresh tracking basedir).
  Each process times two calls of ``run_blockwise``: the first (session start included: the
  figure the budget uses) and a warm second one. Budget: 2 workers, first call, under 0.15 s.
  daisy v2's published figures (0.47 s with 2 workers, 0.35 s with 4, 0.26 s with 16, on their
  machine) are printed beside them, not measured here.
- 1,000,000 no-op blocks with 2 workers: blocks per second of the first call. Budget: at least
  150,000 blocks/s.
- real work: the block of bench/real_work.ts's Python kind (bench/real_work/kernel.py: read 70^3
  float32 from a memory-mapped .npy, nine 3-tap box passes each allocating a new array, write
  64^3; 512 blocks) as a daisy script with 2 worker threads (``max_workers=2``), timed as a whole
  process from spawn to exit, against two tuned bare loops (bench/real_work/bare.py, two
  processes on alternate blocks with MALLOC_TOP_PAD_=268435456 and one BLAS/OpenMP thread each)
  in the same rounds, interleaved. Budget: within 1.20x. The other rows say what the time is
  made of: the same blocks in two plain threads without daisy (threads against processes), the
  script without blockwise.daisy's ``mallopt`` allocator setting, one thread against one bare
  loop, the run's fixed cost (empty blocks against the bare loops' start-ups), a warm second
  call, the time and CPU inside the blocks, and the minor page faults; a closing breakdown
  splits the difference into fixed cost, threads and the rest.

The daisy processes run in the environment of this command less the worker profile's variables
(``MALLOC_*``, the thread-pool sizes), as a user's script would; numpy's BLAS threads do not
matter here (the kernel runs no BLAS). Budgets compare each row's best round (the least
disturbed by other tenants of a shared machine); medians are printed beside. The load average
is printed at the start and the end: on a busy machine the figures cannot judge the budgets.

    python3 bench/daisy_api.py [--quick] [--rounds N] [--skip noop,million,real]

Run it with an interpreter where ``import blockwise.daisy`` works: a venv with the wheel, or
``PYTHONPATH=python BLOCKWISE_BINARY=./blockwise python3 bench/daisy_api.py``. ``--quick``
runs small sizes in a few seconds (a smoke test; the budgets are not judged). The exit status
is 1 when a budget failed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL_WORK = os.path.join(ROOT, "bench", "real_work")

BUDGET_10K_SECONDS = 0.15
BUDGET_RATE = 150_000
BUDGET_REAL = 1.20
# daisy v2's authors' figures for 10,000 no-op blocks, on their machine (not measured here).
DAISY_V2_PUBLISHED = {2: 0.47, 4: 0.35, 16: 0.26}
BUSY_LOAD = 0.5

TOP_PAD = "268435456"
THREAD_VARIABLES = ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS"]
# Never inherited by the measured processes, so that "untuned" means untuned.
PROFILE_VARIABLES = ["MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                     "MIMALLOC_PURGE_DELAY"] + THREAD_VARIABLES
TUNED = dict({"MALLOC_TOP_PAD_": TOP_PAD}, **{name: "1" for name in THREAD_VARIABLES})


# ---- the measured processes (python3 daisy_api.py --child SPEC) --------------------------------


def _child(spec: Dict[str, Any]) -> None:
    """One fresh process: imports blockwise.daisy, runs the calls, prints one JSON line."""
    import resource

    kind = spec["kind"]
    started = time.perf_counter()
    if kind != "threads":
        import blockwise.daisy as daisy
    imported = time.perf_counter() - started
    if spec.get("no_mallopt"):
        # The same script without blockwise.daisy's allocator setting (a diagnostic row).
        try:
            from blockwise.daisy import _allocator
        except ImportError:  # a package from before the setting: nothing to turn off
            pass
        else:
            _allocator.keep_allocator_warm = lambda *args, **kwargs: None
    if spec.get("tracking"):
        daisy.set_tracking_basedir(spec["tracking"])
    totals = [0.0, 0.0]  # wall and thread CPU inside the blocks, summed over the threads
    if kind == "noop":
        blocks = int(spec["blocks"])

        def make_task(call: int) -> Any:
            return daisy.Task(
                "noop%d" % call, total_roi=daisy.Roi((0,), (blocks * 10,)),
                read_roi=daisy.Roi((0,), (10,)), write_roi=daisy.Roi((0,), (10,)),
                process_function=lambda block: None, read_write_conflict=False,
                max_workers=int(spec["workers"]), max_retries=0)
    else:
        sys.path.insert(0, REAL_WORK)
        import kernel  # bench/real_work/kernel.py: the block of real_work.ts's Python kind

        arrays = kernel.open_arrays(spec["dir"])
        side = kernel.GRID * kernel.BLOCK + 2 * kernel.CONTEXT
        context = kernel.CONTEXT
        size = kernel.BLOCK
        empty = bool(spec.get("empty"))
        perf, thread_time = time.perf_counter, time.thread_time

        def run_block(index: Tuple[int, ...]) -> None:
            w0, c0 = perf(), thread_time()
            kernel.run_block(arrays, index)
            # Two threads add here: a lost update only blurs a diagnostic figure.
            totals[0] += perf() - w0
            totals[1] += thread_time() - c0

        def process(block: Any) -> None:
            if not empty:
                offset = block.write_roi.offset
                run_block(tuple((o - context) // size for o in offset))

        def make_task(call: int) -> Any:
            return daisy.Task(
                "filter%d" % call, total_roi=daisy.Roi((0, 0, 0), (side,) * 3),
                read_roi=daisy.Roi((0, 0, 0), (size + 2 * context,) * 3),
                write_roi=daisy.Roi((context,) * 3, (size,) * 3),
                process_function=process, read_write_conflict=False,
                max_workers=int(spec["workers"]), max_retries=0)

    calls: List[float] = []
    faults: List[int] = []
    inside: List[Tuple[float, float]] = []
    for call in range(int(spec["calls"])):
        totals[0] = totals[1] = 0.0
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        if kind == "threads":
            # The same blocks in plain threads of this process, no scheduler: what threads cost
            # against processes (the GIL), apart from what the daisy API adds.
            grid = kernel.GRID
            indices = [(z, y, x) for z in range(grid) for y in range(grid) for x in range(grid)]
            n = int(spec["workers"])
            threads = [threading.Thread(target=lambda k=k: [run_block(i) for i in indices[k::n]])
                       for k in range(n)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            ok: Any = True
        else:
            ok = daisy.run_blockwise([make_task(call)], progress=False,
                                     block_tracking=bool(spec.get("tracking")))
        calls.append(time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        if kind != "noop":
            inside.append((totals[0], totals[1]))
        if ok is not True:
            raise SystemExit("run_blockwise returned %r (call %d)" % (ok, call))
    print(json.dumps({"import": imported, "calls": calls, "faults": faults,
                      "inside": inside}))


# ---- the parent ---------------------------------------------------------------------------------


class Usage:
    """One timed process tree: wall seconds from spawn to exit, CPU and minor faults (wait4:
    each process and the children it waited for, the daisy session included)."""

    def __init__(self, wall: float, user: float, system: float, minflt: int,
                 report: Optional[Dict[str, Any]]) -> None:
        self.wall, self.user, self.system, self.minflt = wall, user, system, minflt
        self.report = report or {}


def clean_env(extra: Dict[str, str]) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROFILE_VARIABLES}
    # The measured processes run in a scratch folder: relative paths as this command meant them.
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else p
                                            for p in env["PYTHONPATH"].split(os.pathsep))
    if env.get("BLOCKWISE_BINARY") and os.sep in env["BLOCKWISE_BINARY"]:
        env["BLOCKWISE_BINARY"] = os.path.abspath(env["BLOCKWISE_BINARY"])
    env.update(extra)
    return env


def timed(commands: Sequence[Sequence[str]], env: Dict[str, str], cwd: str, log: str) -> Usage:
    """Runs `commands` at once; their wall time until the last exits and their resource use."""
    with open(log, "ab") as err:
        started = time.perf_counter()
        children = [subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=err) for argv in commands]
        outputs = [child.stdout.read() for child in children]  # type: ignore[union-attr]
        user = system = 0.0
        minflt = 0
        codes = []
        for child in children:
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            codes.append(child.returncode)
            user += usage.ru_utime
            system += usage.ru_stime
            minflt += usage.ru_minflt
        wall = time.perf_counter() - started
    if any(code != 0 for code in codes):
        with open(log, "rb") as f:
            tail = f.read()[-3000:].decode("utf-8", "replace")
        raise SystemExit("%s exited with %s; the end of its output (%s):\n%s"
                         % (" ".join(commands[0]), codes, log, tail))
    report = None
    for out in outputs:
        lines = out.decode("utf-8", "replace").strip().splitlines()
        if lines:
            try:
                report = json.loads(lines[-1])
            except ValueError:
                pass
    return Usage(wall, user, system, minflt, report)


def child_command(spec: Dict[str, Any]) -> List[str]:
    return [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]


def load() -> str:
    return " ".join("%.2f" % value for value in os.getloadavg())


def best(values: Sequence[float]) -> float:
    return min(values)


def fmt_s(seconds: float) -> str:
    return "%.3f" % seconds


class Table:
    """The closing table: one row per budgeted figure."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.rows: List[Tuple[str, str, str, str]] = []
        self.failed = 0

    def add(self, figure: str, value: str, budget: str, ok: bool) -> None:
        verdict = "PASS" if ok else "FAIL"
        if self.quick:
            verdict = "-"  # quick sizes cannot judge the budgets
        elif not ok:
            self.failed += 1
        self.rows.append((figure, value, budget, verdict))

    def print(self, load_start: str, load_end: str) -> None:
        width = max([len(r[0]) for r in self.rows] + [6])
        vwidth = max([len(r[1]) for r in self.rows] + [6])
        print("\nsummary%s" % (" (--quick: small sizes, budgets not judged)" if self.quick
                                else ""))
        print("  %s  %s  %-14s %s" % ("figure".ljust(width), "value".rjust(vwidth), "budget",
                                      "verdict"))
        for figure, value, budget, verdict in self.rows:
            print("  %s  %s  %-14s %s" % (figure.ljust(width), value.rjust(vwidth), budget,
                                          verdict))
        print("  load average at start %s, at end %s" % (load_start, load_end))


def noop_bench(args: argparse.Namespace, work: str, log: str, table: Table) -> None:
    blocks = 1_000 if args.quick else 10_000
    rounds = 1 if args.quick else args.rounds
    configs = [(w, t) for t in (False, True) for w in (1, 2, 4)]
    results: Dict[Tuple[int, bool], List[Usage]] = {c: [] for c in configs}
    for r in range(rounds):
        for workers, tracking in configs:
            spec: Dict[str, Any] = {"kind": "noop", "blocks": blocks, "workers": workers,
                                    "calls": 2}
            if tracking:
                spec["tracking"] = tempfile.mkdtemp(prefix="tracking-", dir=work)
            results[(workers, tracking)].append(
                timed([child_command(spec)], clean_env({}), work, log))
            if tracking:
                shutil.rmtree(spec["tracking"], ignore_errors=True)
    print("\n%s no-op blocks (1-D, block 10, read_write_conflict=False), run_blockwise timed, "
          "best of %d fresh processes (median)" % (format(blocks, ","), rounds))
    print("  %-8s %-9s %16s %16s %9s %18s" % ("workers", "tracking", "first call s",
                                               "warm call s", "import s",
                                               "daisy v2 published"))
    for workers, tracking in configs:
        runs = results[(workers, tracking)]
        first = [u.report["calls"][0] for u in runs]
        warm = [u.report["calls"][1] for u in runs]
        imports = [u.report["import"] for u in runs]
        published = DAISY_V2_PUBLISHED.get(workers)
        print("  %-8d %-9s %16s %16s %9s %18s" % (
            workers, "on" if tracking else "off",
            "%s (%s)" % (fmt_s(best(first)), fmt_s(statistics.median(first))),
            "%s (%s)" % (fmt_s(best(warm)), fmt_s(statistics.median(warm))),
            fmt_s(statistics.median(imports)),
            "%.2f s *" % published if published is not None and not tracking else ""))
    print("  * daisy v2's authors' figures on their machine (16 workers: 0.26 s), NOT measured "
          "here; for reference only")
    for tracking in (False, True):
        first = [u.report["calls"][0] for u in results[(2, tracking)]]
        table.add("%s no-op blocks, 2 workers, first call, tracking %s"
                  % (format(blocks, ","), "on" if tracking else "off"),
                  "%.3f s" % best(first), "< %.2f s" % BUDGET_10K_SECONDS,
                  best(first) < BUDGET_10K_SECONDS)


def million_bench(args: argparse.Namespace, work: str, log: str, table: Table) -> None:
    blocks = 20_000 if args.quick else 1_000_000
    rounds = 1 if args.quick else max(2, args.rounds - 2)
    configs = [False, True]
    results: Dict[bool, List[Usage]] = {c: [] for c in configs}
    for r in range(rounds):
        for tracking in configs:
            spec: Dict[str, Any] = {"kind": "noop", "blocks": blocks, "workers": 2,
                                    "calls": 2}
            if tracking:
                spec["tracking"] = tempfile.mkdtemp(prefix="tracking-", dir=work)
            results[tracking].append(timed([child_command(spec)], clean_env({}), work, log))
            if tracking:
                shutil.rmtree(spec["tracking"], ignore_errors=True)
    print("\n%s no-op blocks, 2 workers, blocks/s, best of %d fresh processes (median)"
          % (format(blocks, ","), rounds))
    print("  %-9s %24s %24s" % ("tracking", "first call", "warm call"))
    for tracking in configs:
        runs = results[tracking]
        first = [blocks / u.report["calls"][0] for u in runs]
        warm = [blocks / u.report["calls"][1] for u in runs]
        print("  %-9s %24s %24s" % (
            "on" if tracking else "off",
            "%s (%s)" % (format(round(max(first)), ","), format(round(statistics.median(first)),
                                                               ",")),
            "%s (%s)" % (format(round(max(warm)), ","), format(round(statistics.median(warm)),
                                                              ","))))
    for tracking in configs:
        rate = max(blocks / u.report["calls"][0] for u in results[tracking])
        table.add("%s no-op blocks, 2 workers, first call, tracking %s"
                  % (format(blocks, ","), "on" if tracking else "off"),
                  "%s/s" % format(round(rate), ","), ">= %s/s" % format(BUDGET_RATE, ","),
                  rate >= BUDGET_RATE)


def real_bench(args: argparse.Namespace, work: str, log: str, table: Table) -> None:
    grid = 2 if args.quick else 8
    rounds = 1 if args.quick else args.rounds
    blocks = grid ** 3
    data = os.path.join(work, "real")
    os.makedirs(data)
    env_grid = {"REAL_WORK_GRID": str(grid)}
    subprocess.run([sys.executable, "-c", "import kernel; kernel.make(%r)" % data],
                   cwd=REAL_WORK, env=clean_env(env_grid), check=True)
    bare = os.path.join(REAL_WORK, "bare.py")

    def bare_loop(part: int, parts: int) -> List[str]:
        return [sys.executable, bare, data, str(part), str(parts)]

    start_up = [sys.executable, "-c", "import sys; sys.path.insert(0, %r); import kernel; "
                "kernel.open_arrays(%r)" % (REAL_WORK, data)]

    def child(kind: str, workers: int, calls: int = 1, **extra: Any) -> List[str]:
        spec = dict({"kind": kind, "dir": data, "workers": workers, "calls": calls}, **extra)
        return child_command(spec)

    tuned = clean_env(dict(env_grid, **TUNED))
    user = clean_env(env_grid)
    pair, ours, threads = "2 tuned bare loops", "daisy API, 2 threads", "2 plain threads, no daisy"
    empty, starts = "daisy API, 2 threads, empty blocks", "2 bare start-ups (imports, arrays)"
    # label -> (commands, environment); each runs once per round, in this order.
    rows: List[Tuple[str, List[List[str]], Dict[str, str]]] = [
        (pair, [bare_loop(0, 2), bare_loop(1, 2)], tuned),
        (ours, [child("real", 2)], user),
        ("daisy API, 2 threads, no mallopt", [child("real", 2, no_mallopt=True)], user),
        (threads, [child("threads", 2)], user),
        ("1 tuned bare loop", [bare_loop(0, 1)], tuned),
        ("daisy API, 1 thread", [child("real", 1)], user),
        (starts, [start_up, start_up], tuned),
        (empty, [child("real", 2, empty=True)], user),
        ("daisy API, 2 threads, two calls", [child("real", 2, calls=2)], user),
    ]
    results: Dict[str, List[Usage]] = {label: [] for label, _, _ in rows}
    for r in range(rounds):
        for label, commands, env in rows:
            results[label].append(timed(commands, env, work, log))

    def wall(label: str) -> float:
        return best([u.wall for u in results[label]])

    limit = wall(pair)
    print("\nreal work: %d numpy blocks (bench/real_work/kernel.py), whole processes from spawn "
          "to exit, best of %d interleaved rounds" % (blocks, rounds))
    print("  %-36s %7s %7s %11s %7s %7s %6s %12s" % (
        "run", "best s", "median", "range", "x limit", "user s", "sys s", "minor faults"))
    for label, _, _ in rows:
        runs = results[label]
        walls = [u.wall for u in runs]
        print("  %-36s %7.2f %7.2f %11s %7.2f %7.2f %6.2f %12s" % (
            label, best(walls), statistics.median(walls),
            "%.2f-%.2f" % (min(walls), max(walls)), best(walls) / limit,
            statistics.median(u.user for u in runs), statistics.median(u.system for u in runs),
            format(round(statistics.median(u.minflt for u in runs)), ",")))
    print("  inside the measured processes (median of rounds):")
    print("  %-36s %8s %8s %9s %9s %12s" % ("run", "call s", "2nd call", "in blocks",
                                            "block CPU", "call faults"))
    for label, _, _ in rows:
        reports = [u.report for u in results[label] if u.report]
        if not reports:
            continue
        calls = [r["calls"] for r in reports]
        inside = [r["inside"][0] for r in reports]
        print("  %-36s %8.2f %8s %9.2f %9.2f %12s" % (
            label, statistics.median(c[0] for c in calls),
            "%.2f" % statistics.median(c[1] for c in calls) if len(calls[0]) > 1 else "",
            statistics.median(i[0] for i in inside), statistics.median(i[1] for i in inside),
            format(round(statistics.median(r["faults"][0] for r in reports)), ",")))
    print("  call s: run_blockwise's first call (session start included), or the plain threads' "
          "run; 2nd call: a warm one\n  in the same process; in blocks / block CPU: wall and "
          "thread CPU inside the blocks, summed over both threads")
    fixed = wall(empty) - wall(starts)
    gil = wall(threads) - limit
    dispatch = wall(ours) - wall(threads) - fixed
    print("  made of (best rounds):\n"
          "    %.3f s  the 2 tuned bare loops\n"
          "    %+.3f s  the daisy API's fixed cost (empty blocks against bare start-ups: "
          "import, session, run set-up, exit)\n"
          "    %+.3f s  threads instead of processes (plain threads against the bare loops)\n"
          "    %+.3f s  the rest (dispatch to threads, the scheduler's CPU on the same cores)\n"
          "    %.3f s  = the daisy API, 2 threads" % (limit, fixed, gil, dispatch, wall(ours)))
    per_block = (wall(ours) - wall(empty)) / max(1e-9, limit - wall(starts))
    print("  per block, fixed costs left out: (%s - empty blocks) / (%s - start-ups) = %.3fx"
          % (ours, pair, per_block))
    table.add("real work, 2 threads / 2 tuned bare loops (%d blocks)" % blocks,
              "%.3fx" % (wall(ours) / limit), "<= %.2fx" % BUDGET_REAL,
              wall(ours) / limit <= BUDGET_REAL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes in a few seconds (a smoke test; budgets not judged)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip", default="", help="comma-separated: noop, million, real")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(json.loads(args.child))
        return 0
    skip = {s for s in args.skip.split(",") if s}
    unknown = skip - {"noop", "million", "real"}
    if unknown:
        parser.error("unknown --skip part(s) %s; choose from noop, million, real"
                     % ", ".join(sorted(unknown)))
    try:
        import blockwise.daisy  # noqa: F401
        from blockwise._binary import find_binary
        binary = find_binary()
    except Exception as error:  # noqa: BLE001
        print("bench/daisy_api.py needs an interpreter where `import blockwise.daisy` works and "
              "finds the binary (%s): install the wheel into a venv, or run with "
              "PYTHONPATH=python BLOCKWISE_BINARY=./blockwise" % error, file=sys.stderr)
        return 2
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is None and "real" not in skip:
        print("the real-work part needs numpy for %s (apt-get install python3-numpy, or pip "
              "install numpy), or leave it out with --skip real" % sys.executable,
              file=sys.stderr)
        return 2
    load_start = load()
    print("daisy API bench: %s %s, numpy %s, binary %s, %d cores, load %s" % (
        sys.executable, sys.version.split()[0], numpy.__version__ if numpy else "-", binary,
        os.cpu_count() or 0, load_start))
    if os.getloadavg()[0] > BUSY_LOAD:
        print("note: the 1-minute load is %.2f before the bench starts (over %.1f): another "
              "program is using the cores, so these figures cannot judge the budgets"
              % (os.getloadavg()[0], BUSY_LOAD))
    table = Table(args.quick)
    work = tempfile.mkdtemp(prefix="blockwise-bench-daisy-")
    log = os.path.join(work, "children.log")
    try:
        if "noop" not in skip:
            noop_bench(args, work, log, table)
        if "million" not in skip:
            million_bench(args, work, log, table)
        if "real" not in skip:
            real_bench(args, work, log, table)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table.print(load_start, load())
    return 1 if table.failed else 0


if __name__ == "__main__":
    sys.exit(main())
