#!/usr/bin/env bash
# tests/gpu_train.sh - the same training on the GPU and on the CPU (world 1, ZeRO-3 code
# path), 10 steps, GPT-2's small and the Llama family's llama-tiny and qwen-tiny: in fp32 the losses agree to 1e-5 relative (the kernels differ only in
# summation order); in bf16, where the GPU's attention runs on the tensor cores with the
# probabilities rounded to bf16 (attention_mma.cu) and the CPU's does not, to 1e-2.
# Exits 77 without a GPU.
# usage: gpu_train.sh ZEROC_BINARY
set -u
ZEROC=$1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-gpu-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU: skipped"; exit 77
fi
field() { sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$1"; }
compare() { # compare DTYPE TOLERANCE [MODEL]
  local dt=$1 tol=$2 model=${3:-small}
  local common=(--model "$model" --steps 10 --zero 3 --dtype "$dt" --lr 1e-3 --seed 5 --quiet)
  "$ZEROC" train "${common[@]}" --device cuda --metrics "$WORK/gpu-$dt.jsonl" || { echo "FAIL: gpu run ($model $dt)"; fails=$((fails + 1)); return; }
  "$ZEROC" train "${common[@]}" --device cpu --metrics "$WORK/cpu-$dt.jsonl" || { echo "FAIL: cpu run ($model $dt)"; fails=$((fails + 1)); return; }
  paste <(field "$WORK/gpu-$dt.jsonl") <(field "$WORK/cpu-$dt.jsonl") | awk -v t="$tol" -v dt="$model $dt" '
    NF == 2 { n++; d = $1 - $2; if (d < 0) d = -d; r = d / $2; if (r > m) m = r; if (r > t) bad++; print }
    END { printf "%s: max relative difference %.2e over %d steps (accepted %g)\n", dt, m, n, t; exit bad > 0 || n != 10 }' ||
    { echo "FAIL: $dt losses differ by more than $tol (or a run printed fewer than 10 steps)"; fails=$((fails + 1)); }
}
fails=0 # every comparison runs (a lease learns all of them at once); any failure fails the test
compare fp32 1e-5
compare bf16 1e-2
# the Llama family's cuda kernels (RMSNorm, RoPE, SwiGLU) and its grouped-query attention
# through the multi-head kernels with the kv heads repeated
compare fp32 1e-5 llama-tiny
compare fp32 1e-5 qwen-tiny
compare bf16 2e-2 llama-tiny
[ "$fails" = 0 ] || { echo "FAIL: $fails of 5 comparisons"; exit 1; }
