#!/usr/bin/env bash
# Install the npm dependencies (Bun, Deno and the libraries, from package-lock.json) when they are
# missing or older than package.json / package-lock.json; otherwise do nothing. `npm start` and
# `npm test` call it, so a fresh clone needs no separate install step.
set -euo pipefail
cd "$(dirname "$0")/.."

installed=node_modules/.package-lock.json # npm ci writes it last
if [ -f "$installed" ] && [ -x node_modules/.bin/bun ] && [ -x node_modules/.bin/deno ] &&
  [ ! package-lock.json -nt "$installed" ] && [ ! package.json -nt "$installed" ]; then
  exit 0
fi

if ! command -v npm >/dev/null; then
  echo "install: npm is not installed: install Node.js 20 or later (apt-get install nodejs npm)" >&2
  exit 1
fi
node_version=$(node -p 'process.versions.node')
node_major=${node_version%%.*}
if [ "$node_major" -lt 20 ]; then
  echo "install: Node.js $node_version is too old for npm ci here (commander needs 20 or later): install Node.js 20 or later" >&2
  exit 1
fi
echo "install: installing the npm dependencies (npm ci, from package-lock.json)" >&2
if [ "$node_major" -lt 22 ]; then
  # puppeteer-core (a test-only dependency that drives Chromium under Bun) declares Node 22.12.
  echo "install: on Node.js $node_version npm ci warns EBADENGINE for puppeteer-core and its helpers; harmless here (they run under Bun); Node.js 22.12 or later silences it" >&2
fi
npm ci --no-audit --no-fund >&2
