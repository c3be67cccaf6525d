"""``python -m blockwise.daisy._job``: one worker of a daisy task whose workers are launched
elsewhere (``Task(launch="slurm")``, a launch command): a SLURM job or a process on another node.

The run launches it with the worker's slot and the run's secret in the environment, as it launches
any remote worker. It imports the task's module by path (so the script's
``if __name__ == "__main__":`` part does not run again), finds its ``process_function`` by name,
and then does what a worker thread of the calling process does: a block function gets the blocks
the run hands this worker, a worker function runs once with ``daisy.Client()`` connecting back.
Exit status 0 when the run ended the worker, 1 when the function failed, 2 for a bad start.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from .. import _worker_client as wc
from ._workers import WorkerLaunches, _Launch



def _worker_number(env: dict) -> int:
    """A number for the worker's context (daisy's ``worker_id``): its element of a SLURM job
    array when it is one, else its process id. The launch environment names no number, since
    the workers of one SLURM job array must share one environment but their slot."""
    for name in ("SLURM_ARRAY_TASK_ID", "SLURM_PROCID"):
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return os.getpid()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m blockwise.daisy._job",
        description="One worker of a daisy task, launched by a blockwise run on another node.",
    )
    parser.add_argument("--connect", required=True, help="the run's address, HOST:PORT")
    parser.add_argument("--module", required=True, help="the .py file that defines the function")
    parser.add_argument("--function", required=True, help="the process_function's name in it")
    parser.add_argument("--mode", required=True, choices=("block", "worker"),
                        help="block: called per block; worker: called once, drives daisy.Client")
    parser.add_argument("--task", default="", help="the task's id (for the worker's context)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    env["BLOCKWISE_CONNECT"] = args.connect
    try:
        env["BLOCKWISE_SECRET"] = wc.secret_from_environment(env)
        module = wc.import_module(args.module)
    except wc.Refusal as refusal:
        wc.log(str(refusal))
        return 2
    function = getattr(module, args.function, None)
    if not callable(function):
        wc.log("The module %s defines no function %r (the task's process_function); run the "
               "same script version on every node" % (args.module, args.function))
        return 2
    task_id = args.task or "task"
    worker = _worker_number(env)
    launch = _Launch(task_id, worker, env)
    workers = WorkerLaunches({task_id: (function, args.mode)}, lambda message: None)
    if args.mode == "worker":
        ok, error = workers._run_worker_function(launch, function)
    else:
        ok, error = workers._run_block_function(launch, function)
    if not ok:
        wc.log("The worker ended with a failure:\n%s" % (error or "(no message)"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
