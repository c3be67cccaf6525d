#!/usr/bin/env bash
# Build ./blockwise: one self-contained executable (the Bun runtime, main.ts and every Web
# Worker entry in workers/). Run from anywhere; installs the npm dependencies on first use.
set -euo pipefail
cd "$(dirname "$0")"

if [ "${1:-}" = "--deno" ]; then
  echo "compile.sh: a Deno build is not possible here: 'deno compile' downloads its runtime (denort)" >&2
  echo "from dl.deno.land, which this machine cannot reach, and npm has no denort package." >&2
  echo "Run the sources with Deno instead: deno run -A main.ts ..." >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  echo "usage: ./compile.sh            build ./blockwise with Bun" >&2
  echo "       ./compile.sh --deno     explain why there is no Deno build" >&2
  exit 2
fi

if [ ! -x node_modules/.bin/bun ]; then
  echo "compile.sh: installing dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund >&2
fi

entries=(main.ts lib/demo/demo_module.ts)
shopt -s nullglob
for worker in workers/*.ts; do entries+=("$worker"); done
shopt -u nullglob

node_modules/.bin/bun build --compile --minify --bytecode --format=esm \
  --compile-autoload-package-json \
  "${entries[@]}" --outfile blockwise >&2
echo "compile.sh: built $(pwd)/blockwise ($(du -h blockwise | cut -f1))" >&2
