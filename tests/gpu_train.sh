#!/usr/bin/env bash
# tests/gpu_train.sh - the same training on the GPU and on the CPU (fp32 on
# both, world 1, ZeRO-3 code path): losses agree to 1e-4 relative over 10
# steps. Exits 77 without a GPU.
# usage: gpu_train.sh ZEROC_BINARY
set -u
ZEROC=$1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-gpu-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU: skipped"; exit 77
fi
COMMON=(--model small --steps 10 --zero 3 --dtype fp32 --lr 1e-3 --seed 5 --quiet)
"$ZEROC" train "${COMMON[@]}" --device cuda --metrics "$WORK/gpu.jsonl" || { echo "FAIL: gpu run"; exit 1; }
"$ZEROC" train "${COMMON[@]}" --device cpu --metrics "$WORK/cpu.jsonl" || { echo "FAIL: cpu run"; exit 1; }
field() { sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$1"; }
paste <(field "$WORK/gpu.jsonl") <(field "$WORK/cpu.jsonl") | awk '
  { d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > m) m = r; if (r > 1e-4) bad++; print }
  END { printf "max relative difference %.2e\n", m; exit bad > 0 }' || { echo "FAIL: losses differ by more than 1e-4"; exit 1; }
