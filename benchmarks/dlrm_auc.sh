#!/usr/bin/env bash
# benchmarks/dlrm_auc.sh - how close `zeroc train --model dlrm*` comes to the best
# achievable AUC and log-loss on the synthetic clicks (the hidden model's own
# probabilities on the held-out samples, printed in the header), per config:
# preset, ranks, embedding sharding, steps, batch per rank.
# usage: dlrm_auc.sh ZEROC_BINARY > table.md   (env MPIRUN_FLAGS, CONFIGS)
set -u
ZEROC=$1
FLAGS=${MPIRUN_FLAGS:---oversubscribe --bind-to none --allow-run-as-root}
CONFIGS=${CONFIGS:-"dlrm-tiny,1,auto,800,128 dlrm-tiny,4,row,800,32 dlrm,1,auto,10000,512"}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-dlrm-auc-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "| preset | ranks | tables | steps | samples | AUC | ceiling | gap | log-loss | floor | wall s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for c in $CONFIGS; do
  IFS=, read -r model np shard steps batch <<< "$c"
  t0=$(date +%s.%N)
  mpirun $FLAGS -np "$np" "$ZEROC" train --device cpu --model "$model" --embedding-sharding "$shard" \
    --steps "$steps" --batch "$batch" --lr 0.03 --schedule constant --seed 3 \
    --metrics "$WORK/m.jsonl" > "$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt" >&2; exit 1; }
  t1=$(date +%s.%N)
  read -r floor ceil < <(sed -n 's/.*log-loss is \([0-9.]*\) and AUC \([0-9.]*\).*/\1 \2/p' "$WORK/out.txt")
  auc=$(tail -1 "$WORK/m.jsonl" | sed -n 's/.*"auc": \([^,}]*\).*/\1/p')
  ll=$(tail -1 "$WORK/m.jsonl" | sed -n 's/.*"logloss": \([^,}]*\).*/\1/p')
  awk -v m="$model" -v np="$np" -v s="$shard" -v st="$steps" -v b="$batch" -v a="$auc" -v c="$ceil" \
      -v l="$ll" -v f="$floor" -v w="$(echo "$t1 - $t0" | bc)" \
    'BEGIN { printf "| %s | %d | %s | %d | %d | %.4f | %.4f | %.4f | %.4f | %.4f | %.1f |\n", m, np, s, st, st * b * np, a, c, c - a, l, f, w }'
done
