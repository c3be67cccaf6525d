"""Runs commands at once and reports their wall time and their resource use as one JSON line:
python3 timed.py SPEC, where SPEC is JSON {"commands": [[argv...], ...], "env": {...},
"cwd": "...", "log": "..."}. CPU and faults come from RUSAGE_CHILDREN: every process the
commands started and waited for (a scheduler's workers included)."""

import json
import os
import resource
import subprocess
import sys
import time

spec = json.loads(sys.argv[1])
env = dict(os.environ)
for name, value in spec.get("env", {}).items():
    if value is None:
        env.pop(name, None)
    else:
        env[name] = value
with open(spec["log"], "ab") as log:
    started = time.perf_counter()
    children = [subprocess.Popen(argv, cwd=spec["cwd"], env=env, stdout=log, stderr=log,
                                 stdin=subprocess.DEVNULL) for argv in spec["commands"]]
    codes = [child.wait() for child in children]
    wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "user": usage.ru_utime, "system": usage.ru_stime,
                  "minflt": usage.ru_minflt, "codes": codes}))
