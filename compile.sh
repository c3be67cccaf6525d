#!/usr/bin/env bash
# Build blockwise as one self-contained executable (a Bun runtime, main.ts and every Web Worker
# entry in workers/) for an HPC node type. Run from anywhere; installs the npm dependencies on
# first use.
#
#   ./compile.sh                  ./blockwise for this machine (linux-x64 on x86-64)
#   ./compile.sh --target T       dist/blockwise-T for target T
#   ./compile.sh --all            dist/blockwise-T for every target
#
# Each build also writes the Python wheel dist/blockwise-<version>-py3-none-<platform tag>.whl
# (python/build_wheel.py: the package in python/blockwise/ with that binary as its `blockwise`
# command), which installs offline: `v/bin/pip install --no-index dist/blockwise-*.whl`.
#
# The targets and the Bun runtime each one embeds are pinned in package.json ("bunRuntimes":
# npm package, version, integrity). The runtime is fetched with `npm pack` (so only from the npm
# registry, and from npm's cache when it is there), checked against the pinned integrity, kept
# in .cache/bun-runtimes/ and handed to `bun build --compile-executable-path`: Bun itself never
# downloads anything, and a second build needs no network.
set -euo pipefail
shopt -s inherit_errexit # a failure inside $(...) stops the build too
cd "$(dirname "$0")"

usage() {
  echo "usage: ./compile.sh [--target T]   build ./blockwise (no --target) or dist/blockwise-T" >&2
  echo "       ./compile.sh --all          build dist/blockwise-T for every target" >&2
  echo "       ./compile.sh --deno         explain why there is no Deno build" >&2
  echo "targets: ${targets//$'\n'/, }" >&2
}

if [ "${1:-}" = "--deno" ]; then
  echo "compile.sh: a Deno build is not possible here: 'deno compile' downloads its runtime (denort)" >&2
  echo "from dl.deno.land, which this machine cannot reach, and npm has no denort package." >&2
  echo "Run the sources with Deno instead: deno run -A main.ts ..." >&2
  exit 2
fi

# One target per line, in package.json order.
targets=$(node -e 'for (const t of Object.keys(require("./package.json").bunRuntimes)) console.log(t)')

is_target() { printf '%s\n' "$targets" | grep -qxF -- "$1"; }

host_target() {
  case "$(uname -m)" in
    aarch64 | arm64) echo linux-arm64 ;;
    *) echo linux-x64 ;;
  esac
}

chosen=() # the targets to build
outfile="" # set only for the plain ./compile.sh build
while [ $# -gt 0 ]; do
  case "$1" in
    --all) mapfile -t chosen <<<"$targets" ;;
    --target | --target=*)
      if [ "$1" = --target ]; then
        [ $# -ge 2 ] || { echo "compile.sh: --target needs a value" >&2; usage; exit 2; }
        value=$2
        shift
      else
        value=${1#--target=}
      fi
      if ! is_target "$value"; then
        echo "compile.sh: unknown target '$value': use one of ${targets//$'\n'/, }" >&2
        exit 2
      fi
      chosen+=("$value")
      ;;
    *)
      echo "compile.sh: unknown argument '$1'" >&2
      usage
      exit 2
      ;;
  esac
  shift
done
if [ ${#chosen[@]} -eq 0 ]; then
  chosen=("$(host_target)")
  outfile=blockwise
fi

if [ ! -x node_modules/.bin/bun ]; then
  echo "compile.sh: installing dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund >&2
fi
compiler_version=$(node -p 'require("./node_modules/bun/package.json").version')
cache=.cache/bun-runtimes

# pin TARGET: prints "package version integrity" from package.json.
pin() {
  node -e 'const p = require("./package.json").bunRuntimes[process.argv[1]];
    console.log(p.package, p.version, p.integrity)' "$1"
}

sha512_integrity() {
  node -e 'const data = require("fs").readFileSync(process.argv[1]);
    console.log("sha512-" + require("crypto").createHash("sha512").update(data).digest("base64"))' "$1"
}

# runtime TARGET: prints the path of the verified Bun runtime for TARGET, fetching it if needed.
runtime() {
  local package version integrity
  read -r package version integrity <<<"$(pin "$1")"
  if [ "$version" != "$compiler_version" ]; then
    echo "compile.sh: the pinned runtime $package@$version does not match the Bun that compiles" >&2
    echo "($compiler_version, node_modules/bun): set bunRuntimes in package.json to version" >&2
    echo "$compiler_version with its integrity (npm view $package@$compiler_version dist.integrity)." >&2
    return 1
  fi
  local name
  name=$(echo "${package#@}" | tr / -)-$version
  local tarball="$cache/$name.tgz" binary="$cache/$name/bun"
  mkdir -p "$cache"
  if [ ! -f "$tarball" ]; then
    echo "compile.sh: fetching $package@$version with npm pack" >&2
    local download packed
    download=$(mktemp -d "$cache/download.XXXXXX")
    packed=$(npm pack "$package@$version" --prefer-offline --silent --pack-destination "$download")
    mv "$download/$packed" "$tarball"
    rm -rf "$download"
  fi
  local actual
  actual=$(sha512_integrity "$tarball")
  if [ "$actual" != "$integrity" ]; then
    rm -f "$tarball"
    echo "compile.sh: $package@$version has integrity $actual but package.json pins $integrity;" >&2
    echo "the download was removed: run again, or check bunRuntimes in package.json." >&2
    return 1
  fi
  if [ ! -x "$binary" ] || [ "$tarball" -nt "$binary" ]; then
    local unpack
    unpack=$(mktemp -d "$cache/unpack.XXXXXX")
    tar -xzmf "$tarball" -C "$unpack" package/bin/bun # -m: mtime now, for the -nt test
    mkdir -p "$(dirname "$binary")"
    mv "$unpack/package/bin/bun" "$binary" # a rename: a killed unpack never leaves half a binary
    rm -rf "$unpack"
  fi
  echo "$binary"
}

# wheel BINARY TARGET: the Python wheel for TARGET with BINARY as its `blockwise` command. x86-64
# has one wheel (the platform tag cannot tell the CPUs apart): linux-x64's when both are built.
wheel() {
  local binary=$1 target=$2 started=$SECONDS written
  if [ "$target" = linux-x64-baseline ] && printf '%s\n' "${chosen[@]}" | grep -qxF linux-x64; then
    echo "compile.sh: the x86-64 Python wheel holds linux-x64's binary, not linux-x64-baseline's" >&2
    return 0
  fi
  if ! command -v python3 >/dev/null; then
    echo "compile.sh: no python3 on PATH: skipped the Python wheel for $target (dist/blockwise-*.whl)" >&2
    return 0
  fi
  written=$(python3 python/build_wheel.py --binary "$binary" --target "$target" --out dist)
  echo "compile.sh: wrote $(pwd)/$written ($(du -h "$written" | cut -f1), $((SECONDS - started)) s)" >&2
}

entries=(main.ts lib/demo/demo_module.ts)
shopt -s nullglob
for worker in workers/*.ts; do entries+=("$worker"); done
shopt -u nullglob

for target in "${chosen[@]}"; do
  out=${outfile:-dist/blockwise-$target}
  started=$SECONDS
  executable=$(runtime "$target")
  mkdir -p "$(dirname "$out")"
  # BLOCKWISE_BUILD_TARGET is what `blockwise --version` reports (lib/version.ts).
  node_modules/.bin/bun build --compile --minify --bytecode --format=esm \
    --compile-autoload-package-json \
    --target="bun-$target" --compile-executable-path="$executable" \
    --define "BLOCKWISE_BUILD_TARGET:\"$target\"" \
    "${entries[@]}" --outfile "$out" >&2
  echo "compile.sh: built $(pwd)/$out for $target ($(du -h "$out" | cut -f1), $((SECONDS - started)) s)" >&2
  wheel "$out" "$target"
done
