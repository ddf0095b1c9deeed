#!/usr/bin/env bash
# tests/plan_dlrm_cli.sh - `zeroc plan --model dlrm*` end to end: for each
# --embedding-sharding the planned device bytes of rank 0 equal the peak that
# `zeroc train` with the same flags measures on rank 0 (2 ranks); every sharding
# and auto appear side by side; bad flags exit 2 with one line. `zeroc bench
# --model dlrm-tiny` runs every layout (device and host tables) to the same loss.
# usage: plan_dlrm_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS"
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-plan-dlrm-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
SHAPE=(--model dlrm-tiny --rows 30,400,50,6000 --batch 8)
"$ZEROC" plan "${SHAPE[@]}" --gpus 2 > "$WORK/all.txt" || fail "plan exited $?"
for s in table column row data auto; do grep -q "^$s " "$WORK/all.txt" || fail "no $s row: $(cat "$WORK/all.txt")"; done
for s in table column row data auto; do
  "$ZEROC" plan "${SHAPE[@]}" --gpus 2 --rank 0 --embedding-sharding $s --json > "$WORK/p.json" || fail "plan $s"
  planned=$(sed 's/.*"total": \([0-9]*\).*/\1/' "$WORK/p.json")
  $MPIRUN $FLAGS -np 2 "$ZEROC" train --device cpu "${SHAPE[@]}" --embedding-sharding $s --steps 2 \
    --quiet --val-tokens 16 --metrics "$WORK/m.jsonl" || fail "train $s exited $?"
  measured=$(tail -1 "$WORK/m.jsonl" | sed 's/.*"peak_bytes": {"device": \([0-9]*\).*/\1/')
  [ -n "$planned" ] && [ "$planned" = "$measured" ] || fail "$s: planned $planned bytes, measured $measured on rank 0"
  echo "$s: rank 0 planned = measured = $planned bytes"
done
out=$("$ZEROC" plan --model dlrm-tiny --embedding-sharding diagonal 2>&1); rc=$?
[ $rc = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "embedding-sharding" || fail "bad sharding: exit $rc, '$out'"
out=$("$ZEROC" plan --model dlrm-tiny --gpus 4 --hsdp 3 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "hsdp 3" || fail "bad hsdp: exit $rc, '$out'"
echo "bad flags refused"
# zeroc bench --model dlrm-tiny on 2 ranks: every sharding with device tables, the
# model-parallel ones with host tables, all ok, and the same last loss in every row
$MPIRUN $FLAGS -np 2 "$ZEROC" bench --device cpu "${SHAPE[@]}" --steps 5 --warmup-steps 1 --out "$WORK" > "$WORK/b.txt" 2>&1 \
  || { cat "$WORK/b.txt"; fail "bench exited $?"; }
rows=$(grep -cE '^\| (table|column|row|data|auto) \| (device|host) \| [0-9]' "$WORK/bench_dlrm.md")
[ "$rows" = 9 ] || fail "bench_dlrm.md has $rows measured rows, want 9: $(cat "$WORK/bench_dlrm.md")"
losses=$(grep -E '^\| [a-z]+ \| (device|host) \|' "$WORK/bench_dlrm.md" | awk -F'|' '{ print $10 }' | sort -u | wc -l)
[ "$losses" = 1 ] || fail "the layouts' last losses differ: $(cat "$WORK/bench_dlrm.md")"
echo "bench: 9 layouts, one loss"
