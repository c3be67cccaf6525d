#!/usr/bin/env bash
# The GPU figures checked on a real NVIDIA GPU (issue 49 item 5; docs/design/GPU.md).
#
#   bench/gpu_check.sh [BLOCKS]      (default 8 blocks)
#
# On a machine with an NVIDIA GPU and its driver (libcuda.so.1, libnvidia-ml.so.1) it builds
# bench/gpu_check/gpu_load.c with gcc (the driver's libraries are opened with dlopen: no CUDA
# toolkit), runs a one-task pipeline with --resource-tracking whose command blocks each hold
# device memory and keep the device busy for part of every 100 ms (a PTX kernel), and prints per
# block the utilisation and memory blockwise recorded in its ledger next to what each block read
# from NVML directly while it ran, with PASS/FAIL: memory within 5 %, utilisation within 10
# points. Exit 0 when every block passes (or when the check cannot run here), 1 otherwise.
#
# Runs $BLOCKWISE when set (e.g. BLOCKWISE=./blockwise), else `bun main.ts`, else ./blockwise.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
blocks=${1:-8}

# The driver's libraries where the dynamic loader finds them (ldconfig's cache, the usual
# folders, LD_LIBRARY_PATH).
have_library() {
  if command -v ldconfig >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q "[[:space:]]$1 "; then
    return 0
  fi
  local dirs="/usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib"
  dirs="$dirs /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/wsl/lib ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }}"
  local d
  for d in $dirs; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}

if ! have_library libcuda.so.1 || ! have_library libnvidia-ml.so.1; then
  echo "not run: no NVIDIA GPU (libcuda.so.1 / libnvidia-ml.so.1 absent)"
  exit 0
fi
if ! command -v gcc >/dev/null 2>&1; then
  echo "cannot run: gcc is needed to build bench/gpu_check/gpu_load.c (install gcc)" >&2
  exit 1
fi

# $BLOCKWISE (a command), else this checkout's sources through Bun, else a built ./blockwise.
if [ -n "${BLOCKWISE:-}" ]; then
  read -r -a runner <<<"$BLOCKWISE"
elif [ -x node_modules/.bin/bun ]; then
  runner=("$root/node_modules/.bin/bun" "$root/main.ts")
elif command -v bun >/dev/null 2>&1; then
  runner=(bun "$root/main.ts")
elif [ -x ./blockwise ]; then
  runner=("$root/blockwise")
else
  echo "cannot run: neither bun nor ./blockwise (./compile.sh) is here" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/blockwise-gpu-check-XXXXXX")
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -o "$work/gpu_load" bench/gpu_check/gpu_load.c -ldl -lpthread
if ! "$work/gpu_load" probe; then
  echo "not run: no NVIDIA GPU (the driver's libraries are here but report no usable device)"
  exit 0
fi

mkdir -p "$work/direct"
cat >"$work/gpu_check.mjs" <<EOF
// Written by bench/gpu_check.sh: one command block per GPU load, one worker with one GPU.
export default {
  tasks: [
    {
      id: "gpu",
      totalRoi: { offset: [0], shape: [$blocks] },
      readRoi: { offset: [0], shape: [1] },
      writeRoi: { offset: [0], shape: [1] },
      command: ["$work/gpu_load", "{block_id}", "$work/direct"],
      requires: { gpu: 1 },
      maxWorkers: 1,
      maxRetries: 0,
    },
  ],
};
EOF

echo "blockwise: ${runner[*]}"
echo "device:    $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo "(nvidia-smi absent)")"
echo "running $blocks blocks of ~3 s each ..."
"${runner[@]}" run "$work/gpu_check.mjs" --tracking-dir "$work/tracking" --resource-tracking \
  --no-progress >"$work/run.log" 2>&1 || {
  cat "$work/run.log"
  echo "FAIL: the run failed (its output is above)"
  exit 1
}
grep -iE "gpu|nvml|device" "$work/run.log" || true

# The ledger: one cell per block, in block order (1-D grid): float32 and uint64, little-endian.
store="$work/tracking/gpu"
mapfile -t util < <(od -An -v -t f4 -w4 "$store/gpu_util_pct/c/0" | tr -d ' ')
mapfile -t mem < <(od -An -v -t u8 -w8 "$store/gpu_mem_bytes/c/0" | tr -d ' ')

failed=0
printf '%5s %5s %13s %13s %15s %15s %8s  %s\n' block duty "util ledger" "util NVML" \
  "mem ledger" "mem NVML" "mem req" result
for ((b = 0; b < blocks; b++)); do
  if [ ! -f "$work/direct/block_$b.txt" ]; then
    printf '%5s  FAIL (the block wrote no NVML readings)\n' "$b"
    failed=1
    continue
  fi
  read -r d_util d_mem requested duty <"$work/direct/block_$b.txt"
  verdict=$(awk -v ru="${util[$b]}" -v du="$d_util" -v rm="${mem[$b]}" -v dm="$d_mem" 'BEGIN {
    if (ru == "nan" || ru == "-nan") { print "FAIL (no utilisation recorded)"; exit }
    if (rm == 0) { print "FAIL (no memory recorded)"; exit }
    du_ok = (ru - du <= 10 && du - ru <= 10)
    dm_ok = (dm > 0 && (rm - dm) <= 0.05 * dm && (dm - rm) <= 0.05 * dm)
    if (du_ok && dm_ok) print "PASS"
    else print "FAIL (" (du_ok ? "" : "utilisation off by more than 10 points") \
      (!du_ok && !dm_ok ? ", " : "") (dm_ok ? "" : "memory off by more than 5 %") ")"
  }')
  case $verdict in PASS) ;; *) failed=1 ;; esac
  printf '%5s %4s%% %13s %13s %15s %15s %8s  %s\n' "$b" "$duty" "${util[$b]}" "$d_util" \
    "${mem[$b]}" "$d_mem" "$((requested >> 20))M" "$verdict"
done
if [ $failed -eq 0 ]; then
  echo "PASS: every block's recorded figures match NVML's own readings"
else
  echo "FAIL: see the blocks above"
fi
exit $failed
