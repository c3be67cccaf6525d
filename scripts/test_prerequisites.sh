#!/usr/bin/env bash
# Say, before `npm test` runs, which optional system packages are here. Without one, the tests
# that need it are skipped (each says why), unless CI's BLOCKWISE_REQUIRE_* makes it a failure.
# Prints one line per package and, when any is missing, the one apt-get line that adds them all.
set -uo pipefail

missing=()
# Debian's python3 first, then the one on PATH, as the tests look for them.
py_has() { /usr/bin/python3 -c "import $1" 2>/dev/null || python3 -c "import $1" 2>/dev/null; }
have() { echo "  found    $1"; }
lack() {
  echo "  missing  $1: $2"
  missing+=("$3")
}

echo "npm test: optional system packages (without one, the tests that need it are skipped):"
chromium=${BLOCKWISE_CHROMIUM:-/usr/bin/chromium}
if [ -x "$chromium" ]; then have "chromium ($chromium): the report and dashboard tests"; else
  lack "chromium" "the report and dashboard tests in a real browser" chromium
fi
if py_has numpy; then have "python3 with numpy: the Python task tests"; else
  lack "python3 with numpy" "the Python task and daisy API tests" python3-numpy
fi
if /usr/bin/python3 -c 'import venv, ensurepip, pytest, pytest_timeout' 2>/dev/null; then
  have "python3 venv, pytest, pytest-timeout: the wheel installed in a venv, tests/python/"
else
  lack "python3 venv, pytest, pytest-timeout" "the Python package tests (the wheel in a fresh venv)" \
    "python3-venv python3-pytest python3-pytest-timeout"
fi
if py_has 'zarr, numcodecs'; then have "zarr-python, numcodecs: the Zarr codec cross-checks"; else
  lack "zarr-python, numcodecs" "the Zarr codec cross-checks with Python" "python3-zarr python3-numcodecs"
fi
if command -v sinfo >/dev/null && sinfo -h >/dev/null 2>&1; then have "a SLURM cluster (sinfo): the SLURM tests"; else
  echo "  missing  a SLURM cluster that sinfo reaches: the SLURM tests (.ci/slurm start DIR starts a one-node one as root)"
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "  to run those too: sudo apt-get install ${missing[*]}"
fi
