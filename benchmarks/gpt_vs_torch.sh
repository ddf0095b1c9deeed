#!/usr/bin/env bash
# benchmarks/gpt_vs_torch.sh - tokens/s of `zeroc train` (GPT, fp32, CPU ranks) and of the
# same GPT in PyTorch (benchmarks/gpt_vs_torch.py: DDP + ZeroRedundancyOptimizer over gloo,
# OMP_NUM_THREADS=1 per rank as torchrun sets it for more than one rank), in ROUNDS interleaved rounds whose order
# alternates. Each round's figure is the median tokens/s of steps 4..STEPS; the summary gives
# the median of the rounds, their range, the model GFLOP/s (Megatron's formula, as
# zeroc_plan_flops_megatron in src/model/gpt_price.c) and the share of the sgemm ceiling
# of the machine (bench_sgemm, n = 2048, on all `nproc` threads).
# usage: gpt_vs_torch.sh BUILD_DIR PYTHON [NP] [ROUNDS]
#   PYTHON: /usr/bin/python3 with Debian's python3-torch (1.13, what issue 20 measured) or a venv's
#   env ZEROC_FLAGS (default "--zero 1"), ZEROC_ENV (e.g. "ZEROC_THREADS=1"), the shape in
#   PRESET or LAYERS HIDDEN HEADS VOCAB SEQ BATCH (gpt_shape.sh; default issue 20's GPT),
#   STEPS (default 30), MPIRUN_FLAGS,
#   SKIP_TORCH=1 (zeroc only), TORCH_THREADS (OMP_NUM_THREADS of each PyTorch rank), CEIL (the machine's sgemm GFLOP/s; measured when unset)
set -u
BUILD=$1 PY=$2 NP=${3:-2} ROUNDS=${4:-5}
. "$(dirname "$0")/gpt_shape.sh"
STEPS=${STEPS:-30}
# FAMILY=llama: zeroc's llama-tiny preset at this shape with KV_HEADS (2) and FFN (688), and
# transformers' LlamaForCausalLM (sdpa) on the torch side (a venv's PYTHON with transformers)
FAMILY=${FAMILY:-gpt2} KVH=${KV_HEADS:-2} FFN=${FFN:-688}
if [ "$FAMILY" = llama ]; then
  ZMODEL=(--model llama-tiny --kv-heads "$KVH" --ffn "$FFN") TEXTRA=(--family llama --kv-heads "$KVH" --ffn "$FFN")
else
  ZMODEL=(--model custom) TEXTRA=()
fi
[ "$STEPS" -ge 5 ] 2>/dev/null || { echo "gpt_vs_torch.sh: STEPS '$STEPS' must be an integer >= 5 (steps 1-3 are warm-up)" >&2; exit 2; }
ZF=${ZEROC_FLAGS:---zero 1} ZENV=${ZEROC_ENV:-}
FLAGS=${MPIRUN_FLAGS:---allow-run-as-root --oversubscribe}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-gpt-torch-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# torchrun sets OMP_NUM_THREADS=1 when it starts more than one process per node; one
# process keeps PyTorch's default, a thread per core
TT=${TORCH_THREADS:-$([ "$NP" -gt 1 ] && echo 1 || nproc)}
med() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
run_zeroc() {
  local envx=() e
  for e in $ZENV; do envx+=(-x "$e"); done
  env $ZENV mpirun $FLAGS -np "$NP" "${envx[@]}" "$BUILD/zeroc" train --device cpu "${ZMODEL[@]}" \
    "${SHAPE[@]}" $ZF --steps "$STEPS" --quiet --metrics "$WORK/m.jsonl" > "$WORK/z.log" 2>&1 ||
    { cat "$WORK/z.log" >&2; exit 1; }
  sed -n 's/.*"tokens_per_s": \([^,]*\).*/\1/p' "$WORK/m.jsonl" | sed -n "4,${STEPS}p" | med
}
run_torch() {
  OMP_NUM_THREADS=$TT MASTER_PORT=$((20000 + RANDOM % 20000)) mpirun $FLAGS -np "$NP" \
    -x OMP_NUM_THREADS -x MASTER_PORT "$PY" "$(dirname "$0")/gpt_vs_torch.py" "${SHAPE[@]}" "${TEXTRA[@]}" \
    --steps "$STEPS" > "$WORK/t.log" 2>&1 || { cat "$WORK/t.log" >&2; exit 1; }
  awk -v tok=$((B * T * NP)) '$1 == "step" { print tok * 1000 / $4 }' "$WORK/t.log" | sed -n "4,${STEPS}p" | med
}
: > "$WORK/zr"; : > "$WORK/tr"
for r in $(seq 1 "$ROUNDS"); do
  if [ "${SKIP_TORCH:-0}" = 1 ]; then z=$(run_zeroc); t=nan
  elif [ $((r % 2)) = 1 ]; then z=$(run_zeroc); t=$(run_torch)
  else t=$(run_torch); z=$(run_zeroc); fi
  [ -n "$z" ] && [ -n "$t" ] || { echo "round $r failed" >&2; exit 1; }
  echo "$z" >> "$WORK/zr"; [ "$t" = nan ] || echo "$t" >> "$WORK/tr"
  echo "round $r: zeroc $z tokens/s, torch $t tokens/s"
done
CEIL=${CEIL:-$("$BUILD/benchmarks/bench_sgemm" 2048 "$(nproc)" | sed 's/.*median \([0-9.]*\).*/\1/')}
# Megatron: per token 3 passes of 2 x a block's matrices (12 h^2 for GPT-2; q|k|v, o,
# gate|up, down for Llama) + 4 s h per layer, and 6 h V for the logits (as
# zeroc_plan_flops_megatron in src/model/gpt_price.c)
FPT=$(awk -v l=$L -v h=$H -v s=$T -v V=$V -v f="$FAMILY" -v nh=$NH -v kv=$KVH -v F=$FFN 'BEGIN {
  m = f == "llama" ? (h + 2 * kv * h / nh) * h + h * h + 3 * F * h : 12 * h * h
  printf "%.6g", 3 * l * (2 * m + 4 * s * h) + 6 * h * V }')
for k in zeroc torch; do
  f=$WORK/${k:0:1}r; [ -s "$f" ] || continue
  sort -g "$f" | awk -v k=$k -v fpt="$FPT" -v ceil="$CEIL" -v np="$NP" '{ a[NR] = $1 } END {
    m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "%s: %.0f tokens/s (median of %d rounds, range %.0f-%.0f), %.1f model GFLOP/s, %.0f%% of the %.1f GFLOP/s sgemm ceiling\n",
      k, m, NR, a[1], a[NR], m * fpt / 1e9, 100 * m * fpt / 1e9 / ceil, ceil }'
done
if [ -s "$WORK/tr" ]; then # the ratio two ways: of the medians, and the median of the rounds' ratios
  paste "$WORK/zr" "$WORK/tr" | awk '{ print $1 / $2 }' | sort -g | awk -v zm="$(med < "$WORK/zr")" \
    -v tm="$(med < "$WORK/tr")" '{ a[NR] = $1 } END {
    m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "zeroc/torch: %.2fx (ratio of the medians), %.2fx (median of the per-round ratios, range %.2f-%.2f)\n",
      zm / tm, m, a[1], a[NR] }'
fi
echo "Megatron FLOPs per token: $FPT (shape L=$L h=$H heads=$NH V=$V s=$T, batch $B per rank, $NP ranks, zeroc: $ZENV $ZF)"
