#!/usr/bin/env bash
# benchmarks/cp_table.sh - context parallelism measured (docs/cp.md): one long
# sequence per step spread over cp = 1, 2, 4 ranks, ring and Ulysses, and the
# ring with its overlap switched off (ZEROC_CP_OVERLAP=0: each K/V hop is
# waited for before the attention that uses it). Per layout, the medians over
# RUNS runs of each run's median step (warm-up steps excluded): tokens/s, step
# ms, rank 0's peak activation and buffer bytes (ZeRO-3's gather pools and
# the cp buffers), comm bytes per step per rank (ZeRO-3's collectives and the
# cp traffic) beside the planner's cp bytes, exposed communication ms. Prints
# a Markdown table.
# usage: benchmarks/cp_table.sh ZEROC_BINARY [RUNS] [extra train flags...]
set -eu
ZEROC=${1:?usage: cp_table.sh ZEROC_BINARY [RUNS] [train flags...]}
RUNS=${2:-3}
shift $(($# >= 2 ? 2 : 1))
MPIRUN=${MPIRUN:-mpirun}
MPIFLAGS=${MPIFLAGS:---oversubscribe --bind-to none}
STEPS=${STEPS:-6}
WARM=${WARM:-2}
SHAPE=(--model custom --layers 4 --hidden 128 --heads 8 --vocab 512 --seq "${SEQ:-1024}" --batch 1
       --dtype fp32 --zero 3)
MODEL=("${SHAPE[@]}" --device cpu --lr 1e-3 --seed 1 --quiet "$@")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-cptable-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
tag() { tail -1 "$1" | sed -n "s/.*\"peak_by_tag\": {[^}]*\"$2\": \([0-9]*\).*/\1/p"; }

row() { # LABEL NP OVERLAP TRAIN_FLAGS...
  local label=$1 np=$2 ov=$3; shift 3
  : > "$WORK/runs"
  for r in $(seq "$RUNS"); do
    ZEROC_CP_OVERLAP=$ov $MPIRUN $MPIFLAGS -np "$np" "$ZEROC" train "${MODEL[@]}" --steps "$STEPS" \
      "$@" --metrics "$WORK/m.jsonl" > "$WORK/out" 2>&1 || { cat "$WORK/out"; exit 1; }
    tail -n +$((WARM + 1)) "$WORK/m.jsonl" > "$WORK/k.jsonl"
    echo "$(field "$WORK/k.jsonl" tokens_per_s | median) $(field "$WORK/k.jsonl" step_ms | median)" \
         "$(field "$WORK/k.jsonl" comm_bytes | median) $(field "$WORK/k.jsonl" exposed_comm_ms | median)" \
         "$(tag "$WORK/m.jsonl" activations) $(tag "$WORK/m.jsonl" buffers)" >> "$WORK/runs"
  done
  local c plan
  plan=$("$ZEROC" plan "${SHAPE[@]}" --gpus "$np" "$@" --json | sed -n 's/.*"comm": {[^}]*"cp": \([0-9]*\)}.*/\1/p')
  for c in 1 2 3 4 5 6; do awk -v c=$c '{ print $c }' "$WORK/runs" | median; done | tr '\n' ' ' |
    awk -v l="$label" -v p="$plan" '{ printf "| %s | %.0f | %.0f | %.2f | %.2f | %.0f | %s | %.1f |\n", l, $1, $2, $5 / 1048576, $6 / 1048576, $3, p, $4 }'
}

echo "| layout | tokens/s | step ms | activations MiB | buffers MiB | comm bytes/step/rank | cp bytes/step (plan) | exposed comm ms |"
echo "|---|---|---|---|---|---|---|---|"
row "cp 1" 1 1
for n in 2 4; do
  row "cp $n ring" "$n" 1 --cp "$n" --cp-mode ring
  row "cp $n ring, overlap off" "$n" 0 --cp "$n" --cp-mode ring
  row "cp $n ulysses" "$n" 1 --cp "$n" --cp-mode ulysses
done
