#!/usr/bin/env bash
# benchmarks/grad_reduce.sh - the error of bf16 parameters' gradient sums against rank
# count, fp32 reduction (the default) against bf16 (--grad-reduce-dtype bf16), on the cpu
# with the MPI and the staged comm (issue 40, hazard 4). Two tables:
#  1. the reduced gradient itself (tests/test_grad_reduce --table): max |error| / max |exact|
#     and the RMS relative error against the sum in fp64 (the 1-rank fp32 sum to 1e-7);
#  2. training: `zeroc train --dtype bf16` on 1, 2, 4 ranks, the largest relative difference
#     of the per-step loss and grad norm from the 1-rank run with fp32 reduction.
# usage: grad_reduce.sh BUILD_DIR [STEPS] > table.md   (env MPIRUN_FLAGS)
set -u
BUILD=$1 STEPS=${2:-30}
FLAGS=${MPIRUN_FLAGS:---oversubscribe --bind-to none --allow-run-as-root}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-gradred-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "Reduced gradient (N = 65536, 16 samples dealt over the ranks, ZeRO-3 reduce-scatter / ZeRO-0 all-reduce):"
echo
echo '```'
for np in 1 2 4; do
  ZEROC_THREADS=1 mpirun $FLAGS -np "$np" "$BUILD/tests/test_grad_reduce" --table |
    { [ "$np" = 1 ] && cat || tail -n +2; }
done
echo '```'
echo
MODEL=(--model tiny --dtype bf16 --steps "$STEPS" --lr 1e-3 --seed 3)
run() { # np reduce zero -> metrics file
  ZEROC_THREADS=1 mpirun $FLAGS -np "$1" "$BUILD/zeroc" train --quiet "${MODEL[@]}" --zero "$3" \
    --batch $((8 / $1)) --grad-reduce-dtype "$2" --metrics "$WORK/$1-$2-$3.jsonl" >/dev/null ||
    echo "run np $1 $2 zero $3 failed" >&2
}
field() { sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p" "$2"; }
maxrel() { paste "$1" "$2" | awk '{ d = $1 - $2; d = d < 0 ? -d : d; r = d / ($2 < 0 ? -$2 : $2); if (r > m) m = r } END { printf "%.2e", m }'; }
echo "Training (tiny GPT, --dtype bf16, global batch 8, $STEPS steps, lr 1e-3): max relative difference from the 1-rank fp32-reduction run"
echo
echo "| ranks | ZeRO | reduce | loss | grad norm |"
echo "|---|---|---|---|---|"
for zero in 3 0; do
  run 1 fp32 "$zero"
  field loss "$WORK/1-fp32-$zero.jsonl" > "$WORK/ref.loss"
  field grad_norm "$WORK/1-fp32-$zero.jsonl" > "$WORK/ref.norm"
  for np in 1 2 4; do
    for red in fp32 bf16; do
      [ "$np" = 1 ] && [ "$red" = fp32 ] && continue
      run "$np" "$red" "$zero"
      f="$WORK/$np-$red-$zero.jsonl"
      field loss "$f" > "$WORK/l"; field grad_norm "$f" > "$WORK/n"
      echo "| $np | $zero | $red | $(maxrel "$WORK/l" "$WORK/ref.loss") | $(maxrel "$WORK/n" "$WORK/ref.norm") |"
    done
  done
done
