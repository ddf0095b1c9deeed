#!/usr/bin/env bash
# benchmarks/dlrm_vs_torch.sh - samples/s of `zeroc train --model dlrm*` and of the same
# model in PyTorch (benchmarks/dlrm_torch.py) on the same CPU ranks, one thread per rank,
# side by side in one invocation, median step over the measured steps. PyTorch runs three
# ways (dlrm_torch.py's header): sparse tables with one all-gather exchange and row-wise
# AdaGrad (gather), sparse tables under DDP with Adagrad (sparse), dense tables under DDP
# (dense, the naive version). dlrm_torch_rounds.sh repeats this in interleaved rounds.
# usage: dlrm_vs_torch.sh ZEROC_BINARY PYTHON [NP] [PRESET]   (env MPIRUN_FLAGS, STEPS)
set -u
ZEROC=$1 PY=$2 NP=${3:-2} PRESET=${4:-dlrm-tiny} STEPS=${STEPS:-60}
FLAGS=${MPIRUN_FLAGS:---oversubscribe --bind-to none --allow-run-as-root}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-dlrm-torch-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
case $PRESET in
dlrm-tiny) SHAPE=(--rows 50,100,200,400 --dim 8 --dense 4 --bottom 16,8 --top 32,1) B=32 ;;
dlrm) SHAPE=(--rows 1000,2000,5000,10000,20000,50000,100000,100000 --dim 16 --dense 13
             --bottom 64,16 --top 64,32,1) B=128 ;;
*) echo "preset $PRESET: accepted dlrm-tiny, dlrm" >&2; exit 2 ;;
esac
ZEROC_THREADS=1 mpirun $FLAGS -np "$NP" -x ZEROC_THREADS "$ZEROC" train --device cpu --model "$PRESET" \
  --batch $B --steps "$STEPS" --quiet --val-every 1000000000 --val-tokens 1 \
  --metrics "$WORK/m.jsonl" > /dev/null || exit 1
sed -n 's/.*"step_ms": \([^,]*\).*/\1/p' "$WORK/m.jsonl" | tail -n +4 | sort -g |
  awk -v b=$B -v np="$NP" '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
    printf "zeroc: median step %.2f ms, %.0f samples/s over %d ranks\n", m, b * np * 1000 / m, np }'
for v in "gather rowwise" "sparse adagrad" "dense adagrad"; do
  set -- $v
  OMP_NUM_THREADS=1 MASTER_PORT=$((20000 + RANDOM % 20000)) mpirun $FLAGS -np "$NP" \
    -x OMP_NUM_THREADS -x MASTER_PORT "$PY" "$(dirname "$0")/dlrm_torch.py" "${SHAPE[@]}" \
    --batch $B --steps "$STEPS" --tables-grad "$1" --table-opt "$2" || exit 1
done
