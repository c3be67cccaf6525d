#!/usr/bin/env bash
# `npm start`: from a fresh clone, install what is missing (scripts/install.sh), build ./blockwise
# when it is missing or older than the sources (./compile.sh), and run the demo pipeline in
# ./blockwise-demo (or `npm start -- --dir DIR`; any `blockwise demo` option passes on).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install.sh
stale=""
[ -x blockwise ] && stale=$(find main.ts lib workers python/blockwise package.json -newer blockwise -print -quit)
if [ ! -x blockwise ] || [ -n "$stale" ]; then
  echo "start: building ./blockwise (./compile.sh)${stale:+, $stale is newer than it}" >&2
  ./compile.sh >&2
fi

# The demo's folder: ./blockwise-demo (the demo's default) unless the arguments name one. A second
# `npm start` resumes the first run's ledger there (every block already done).
dir=blockwise-demo
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[i]}" = "--dir" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
    dir=${args[i + 1]}
  fi
done
./blockwise demo ${args[@]+"${args[@]}"}
echo
echo "Next: ./blockwise status $dir/tracking    (what the ledger says)"
echo "      ./blockwise report $dir/tracking -o report.html    (a page with the block map and the timeline)"
echo "      docs/guide/pipelines.md    (write your own pipeline)"
