#!/usr/bin/env bash
# benchmarks/tp_memory.sh - per-rank activation and parameter memory of the
# built-in GPT under tensor parallelism (tp 1, 2, 4; with and without sequence
# parallelism), measured by zeroc's memory accountant in `zeroc train`, beside
# the planner's prediction and Korthikanti et al.'s per-layer formulas.
# The per-layer figure is measured as the difference between a 4-layer and a
# 2-layer model, halved (everything outside the blocks cancels).
# usage: tp_memory.sh ZEROC_BINARY [MPIRUN "MPIRUN_FLAGS"]   -> a markdown table on stdout
set -eu
ZEROC=$1 MPIRUN=${2:-mpirun} FLAGS=${3:---oversubscribe --bind-to none}
[ "$(id -u)" = 0 ] && FLAGS="$FLAGS --allow-run-as-root"
S=1024 B=1 H=256 A=8 V=2048                      # sequence, micro-batch, hidden, heads, vocab
MODEL="--model custom --hidden $H --heads $A --vocab $V --seq $S --batch $B --dtype fp32 --device cpu"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-tpmem-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
tag() { sed "s/.*\"$2\": {[^}]*\"$3\": \([0-9]*\).*/\1/" "$1"; }  # tag FILE peak_by_tag activations

echo "| tp | SP | activations / rank (L=4), measured | predicted | per layer, measured | zeroc formula | Megatron formula (16-bit) | Megatron x2 (fp32) | Megatron less masks and a s^2 terms, fp32 | parameters / rank (L=4) | model states / rank (L=4) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for cfg in "1 0" "2 0" "2 1" "4 0" "4 1"; do
  set -- $cfg
  t=$1 sp=$2 flags="--tp $1 --zero 0"
  [ "$sp" = 1 ] && flags="$flags --sequence-parallel"
  for L in 2 4; do
    $MPIRUN $FLAGS -np "$t" "$ZEROC" train --quiet $MODEL --layers $L --steps 1 $flags \
      --metrics "$WORK/m$L.jsonl" >/dev/null
  done
  a4=$(tag "$WORK/m4.jsonl" peak_by_tag activations) a2=$(tag "$WORK/m2.jsonl" peak_by_tag activations)
  p4=$(tag "$WORK/m4.jsonl" predicted_by_tag activations)
  par=$(tag "$WORK/m4.jsonl" peak_by_tag params)
  st=$(( par + $(tag "$WORK/m4.jsonl" peak_by_tag grads) + $(tag "$WORK/m4.jsonl" peak_by_tag optimizer) ))
  awk -v t="$t" -v sp="$sp" -v a4="$a4" -v a2="$a2" -v p4="$p4" -v par="$par" -v st="$st" \
      -v s=$S -v b=$B -v h=$H -v a=$A 'BEGIN {
    sbh = s * b * h; n = s * b; r = sp ? t : 1; e = 4
    layer = (a4 - a2) / 2
    zc = e * n * h * (4 / r + 12 / t) + 16 * n / r + 4 * b * a * s / t
    mg = sp ? sbh * (34 / t + 5 * a * s / (h * t)) : sbh * (10 + 24 / t + 5 * a * s / (h * t))
    if (t == 1) mg = sbh * (34 + 5 * a * s / h)
    # the same tensors at 4 bytes without the 1-byte dropout masks and the softmax terms
    mt = e * sbh * (sp ? 16 / t : 4 + 12 / t)
    mib = 1048576
    printf "| %d | %s | %.2f MiB | %.2f MiB | %.3f MiB | %.3f MiB | %.2f MiB | %.2f MiB | %.3f MiB | %.2f MiB | %.2f MiB |\n",
      t, sp ? "yes" : "no", a4 / mib, p4 / mib, layer / mib, zc / mib, mg / mib, 2 * mg / mib, mt / mib, par / mib, st / mib
  }'
done
