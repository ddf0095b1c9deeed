#!/usr/bin/env bash
# benchmarks/dlrm_torch_rounds.sh - samples/s of `zeroc train --model PRESET` against the
# same model in PyTorch (benchmarks/dlrm_torch.py: nn.EmbeddingBag tables under DDP over
# gloo; TorchRec installs from pip here but its fbgemm kernels do not load with this torch,
# see RESULTS.md) on the same CPU ranks, one thread per rank in both (OMP_NUM_THREADS=1 as torchrun sets it,
# ZEROC_THREADS=1), the same shapes and batch, in ROUNDS interleaved rounds (the order
# alternates each round, so a slow phase of a shared machine hits both); each run's figure
# is its median step after 3, the table the median over the rounds and the spread.
# Not part of the build or CTest (the venv is outside the repository).
# usage: dlrm_torch_rounds.sh ZEROC_BINARY PYTHON [NP] [PRESET...]
#        env ROUNDS (5), STEPS (60), MPIRUN_FLAGS
set -u
ZEROC=$1 PY=$2 NP=${3:-2}
shift $(($# < 3 ? $# : 3))
PRESETS=("$@")
[ ${#PRESETS[@]} -gt 0 ] || PRESETS=(dlrm-tiny dlrm)
ROUNDS=${ROUNDS:-5} STEPS=${STEPS:-60}
FLAGS=${MPIRUN_FLAGS:---oversubscribe --bind-to none --allow-run-as-root}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-dlrm-rounds-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# the zeroc run: its median step after 3 -> samples/s over the world
run_zeroc() {
  local preset=$1 b=$2
  ZEROC_THREADS=1 mpirun $FLAGS -np "$NP" -x ZEROC_THREADS "$ZEROC" train --device cpu --model "$preset" \
    --batch "$b" --steps "$STEPS" --quiet --val-every 1000000000 --val-tokens 1 \
    --metrics "$WORK/m.jsonl" > /dev/null || return 1
  sed -n 's/.*"step_ms": \([^,]*\).*/\1/p' "$WORK/m.jsonl" | tail -n +4 | sort -g |
    awk -v b="$b" -v np="$NP" '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
      printf "%.0f\n", b * np * 1000 / m }'
}

run_torch() {
  local b=$1; shift
  OMP_NUM_THREADS=1 mpirun $FLAGS -np "$NP" -x OMP_NUM_THREADS \
    "$PY" "$HERE/dlrm_torch.py" "$@" --batch "$b" --steps "$STEPS" |
    sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p'
}

# median and min..max of the numbers on stdin
stats() { sort -g | awk '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
  printf "%.0f (%.0f..%.0f)", m, a[1], a[NR] }'; }

echo "| preset | ranks | batch per rank | zeroc samples/s | PyTorch samples/s | zeroc / PyTorch |"
echo "|---|---|---|---|---|---|"
for preset in "${PRESETS[@]}"; do
  case $preset in
  dlrm-tiny) SHAPE=(--rows 50,100,200,400 --dim 8 --dense 4 --bottom 16,8 --top 32,1) B=32 ;;
  dlrm) SHAPE=(--rows 1000,2000,5000,10000,20000,50000,100000,100000 --dim 16 --dense 13
               --bottom 64,16 --top 64,32,1) B=128 ;;
  *) echo "preset $preset: accepted dlrm-tiny, dlrm" >&2; exit 2 ;;
  esac
  : > "$WORK/z" && : > "$WORK/t"
  for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="zeroc torch"; else order="torch zeroc"; fi
    for tool in $order; do
      if [ $tool = zeroc ]; then run_zeroc "$preset" $B >> "$WORK/z" || { echo "zeroc failed" >&2; exit 1; }
      else run_torch $B "${SHAPE[@]}" >> "$WORK/t" || { echo "torch failed" >&2; exit 1; }; fi
    done
  done
  z=$(stats < "$WORK/z") t=$(stats < "$WORK/t")
  zm=${z%% *} tm=${t%% *}
  echo "| $preset | $NP | $B | $z | $t | $(awk -v a="$zm" -v b="$tm" 'BEGIN { printf "%.1fx", a / b }') |"
done
