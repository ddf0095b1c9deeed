#!/usr/bin/env bash
# benchmarks/dlrm_torch_rounds.sh - samples/s of `zeroc train --model PRESET` against the
# same model in PyTorch (benchmarks/dlrm_torch.py) on the same CPU ranks, one thread per
# rank in both (OMP_NUM_THREADS=1 as torchrun sets it, ZEROC_THREADS=1), the same shapes,
# batch per rank, optimizers and fp32. Three PyTorch baselines:
#   gather: nn.EmbeddingBag(sparse=True) tables, their sparse gradients exchanged in two
#           all-gathers for all tables, zeroc's row-wise AdaGrad on the touched rows
#           (the fastest plain-PyTorch version found for `dlrm`; for `dlrm-tiny`'s
#           750 rows the dense one is faster);
#   sparse: nn.EmbeddingBag(sparse=True) under DDP (gloo's sparse all-reduce, one per
#           table) and torch.optim.Adagrad (per-element state) on the touched rows;
#   dense:  dense table gradients all-reduced by DDP, Adagrad on every row (what a naive
#           user writes).
# TorchRec installs from pip here but its fbgemm kernels do not load with this torch (see
# RESULTS.md). ROUNDS interleaved rounds, the order reversed every other round (so a slow
# phase of a shared machine hits all); each run's figure is its median step after 3, the
# table the median over the rounds and the range.
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
TOOLS=(zeroc gather sparse dense)

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

# a PyTorch run: variant (gather|sparse|dense), batch, shape flags
run_torch() {
  local variant=$1 b=$2 opt=adagrad; shift 2
  [ "$variant" = gather ] && opt=rowwise
  # a port of its own, so that other jobs' gloo rendezvous never meet this one
  OMP_NUM_THREADS=1 MASTER_PORT=$((20000 + RANDOM % 20000)) mpirun $FLAGS -np "$NP" \
    -x OMP_NUM_THREADS -x MASTER_PORT "$PY" "$HERE/dlrm_torch.py" "$@" --batch "$b" \
    --steps "$STEPS" --tables-grad "$variant" --table-opt $opt |
    sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' | grep . || return 1
}

# median and min..max of the numbers on stdin
stats() { sort -g | awk '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
  printf "%.0f (%.0f..%.0f)", m, a[1], a[NR] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", a / b }'; }

echo "| preset | ranks | batch per rank | zeroc samples/s | PyTorch gather (row-wise AdaGrad) | PyTorch DDP sparse (Adagrad) | PyTorch DDP dense | zeroc / gather | zeroc / sparse | zeroc / dense |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for preset in "${PRESETS[@]}"; do
  case $preset in
  dlrm-tiny) SHAPE=(--rows 50,100,200,400 --dim 8 --dense 4 --bottom 16,8 --top 32,1) B=32 ;;
  dlrm) SHAPE=(--rows 1000,2000,5000,10000,20000,50000,100000,100000 --dim 16 --dense 13
               --bottom 64,16 --top 64,32,1) B=128 ;;
  *) echo "preset $preset: accepted dlrm-tiny, dlrm" >&2; exit 2 ;;
  esac
  for tool in "${TOOLS[@]}"; do : > "$WORK/$tool"; done
  for r in $(seq 1 "$ROUNDS"); do
    order=("${TOOLS[@]}")
    [ $((r % 2)) = 0 ] && order=(dense sparse gather zeroc)
    for tool in "${order[@]}"; do
      if [ "$tool" = zeroc ]; then run_zeroc "$preset" $B >> "$WORK/zeroc" || { echo "zeroc failed" >&2; exit 1; }
      else run_torch "$tool" $B "${SHAPE[@]}" >> "$WORK/$tool" || { echo "torch $tool failed" >&2; exit 1; }; fi
    done
  done
  z=$(stats < "$WORK/zeroc") g=$(stats < "$WORK/gather") s=$(stats < "$WORK/sparse") d=$(stats < "$WORK/dense")
  echo "| $preset | $NP | $B | $z | $g | $s | $d | $(ratio "${z%% *}" "${g%% *}") | $(ratio "${z%% *}" "${s%% *}") | $(ratio "${z%% *}" "${d%% *}") |"
done
