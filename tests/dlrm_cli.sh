#!/usr/bin/env bash
# tests/dlrm_cli.sh - `zeroc train --model dlrm-tiny` end to end on real ranks:
# every --embedding-sharding mode on 2 and 4 ranks, with ZeRO-3 (and 0, 1, HSDP)
# on the MLPs, gives the single-rank run's per-step losses to 1e-5 relative (fp32,
# cpu, the same global batch); on the synthetic clicks the AUC comes within 0.01 of
# the ceiling the header prints; the Criteo reader trains on a committed fixture and
# refuses a malformed line by file and line; bad flags exit 2 with one line.
# usage: dlrm_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" FIXTURES_DIR TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 FIX=$4 NAME=$5
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-dlrm-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
COMMON=(--model dlrm-tiny --lr 0.01 --warmup 2 --seed 7 --steps 5 --quiet)
GLOBAL=16

# same FILE_A FILE_B: the losses agree to 1e-5 relative; prints the largest difference
same() {
  field "$1" loss > "$WORK/x"
  field "$2" loss > "$WORK/y"
  [ "$(wc -l < "$WORK/x")" = "$(wc -l < "$WORK/y")" ] && [ -s "$WORK/y" ] || fail "$1 and $2 log different step counts"
  paste "$WORK/x" "$WORK/y" | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r; if (!(d <= 1e-5 * $1)) bad++ }
    END { printf "max rel diff %.3g", m; exit bad > 0 }' \
    || { paste "$WORK/x" "$WORK/y"; fail "losses of $2 differ from $1 by more than 1e-5 relative"; }
}

# compare NP ARGS...: the layout against one rank with the same global batch (16 samples)
compare() {
  local np=$1; shift
  [ -s "$WORK/one.jsonl" ] || run 1 "${COMMON[@]}" --batch $GLOBAL --metrics "$WORK/one.jsonl" || fail "single-rank run"
  run "$np" "${COMMON[@]}" --batch $((GLOBAL / np)) "$@" --metrics "$WORK/n.jsonl" || fail "'$*' on $np ranks exited $?"
  echo "$np ranks '$*': $(same "$WORK/one.jsonl" "$WORK/n.jsonl") over 5 steps"
}

case $NAME in
np2)
  for s in table column row data auto; do compare 2 --embedding-sharding $s --zero 3; done
  compare 2 --zero 0
  compare 2 --zero 1 --embedding-sharding row
  compare 2 --recompute full --offload-optimizer cpu
  # the replicated host tables (the reference the embedding layer matches), against a
  # single-rank run of the same (their initial rows are drawn differently)
  rm -f "$WORK/one.jsonl"
  export ZEROC_DLRM_EMBED=0
  compare 2 --embedding-sharding table ;;
np4)
  for s in table column row data auto; do compare 4 --embedding-sharding $s --zero 3; done
  compare 4 --hsdp 2 --embedding-sharding column
  # a mix: auto keeps the small tables data-parallel and shards the large one
  COMMON+=(--rows 50,100,200,100000)
  rm -f "$WORK/one.jsonl"
  compare 4 --embedding-sharding auto ;;
auc)
  # the known ceiling (the hidden model's own probabilities on the held-out samples)
  run 1 --model dlrm-tiny --batch 128 --lr 0.03 --schedule constant --steps 800 --val-every 800 \
    --seed 3 --metrics "$WORK/auc.jsonl" > "$WORK/out.txt" || fail "auc run exited $?"
  ceil=$(sed -n 's/.*best achievable log-loss is [0-9.]* and AUC \([0-9.]*\).*/\1/p' "$WORK/out.txt")
  auc=$(tail -1 "$WORK/auc.jsonl" | sed -n 's/.*"auc": \([^,}]*\).*/\1/p')
  [ -n "$ceil" ] && [ -n "$auc" ] || { cat "$WORK/out.txt"; fail "no ceiling or auc printed"; }
  awk -v a="$auc" -v c="$ceil" 'BEGIN { exit !(a >= c - 0.01 && a <= c + 0.01) }' \
    || fail "AUC $auc is not within 0.01 of the ceiling $ceil"
  echo "AUC $auc after 800 steps, ceiling $ceil (gap $(awk -v a="$auc" -v c="$ceil" 'BEGIN { print c - a }'))" ;;
criteo)
  C=(--model dlrm-tiny --tables 26 --dense 13 --rows 97 --lr 0.01 --steps 3 --val-every 3 --val-tokens 8 --quiet)
  run 2 "${C[@]}" --batch 4 --data "$FIX/criteo_small.tsv" --metrics "$WORK/c2.jsonl" || fail "criteo run on 2 ranks"
  run 1 "${C[@]}" --batch 8 --data "$FIX/criteo_small.tsv" --metrics "$WORK/c1.jsonl" || fail "criteo run on 1 rank"
  echo "Criteo fixture, 2 ranks against 1: $(same "$WORK/c1.jsonl" "$WORK/c2.jsonl")"
  grep -q '"auc": ' "$WORK/c2.jsonl" && grep -q '"logloss": ' "$WORK/c2.jsonl" || fail "no auc/logloss in the metrics"
  { head -3 "$FIX/criteo_small.tsv"; printf '1\t2\t3\n'; } > "$WORK/bad.tsv"
  out=$(run 1 "${C[@]}" --data "$WORK/bad.tsv" 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "bad.tsv:4: 3 fields; accepted 40" || { echo "$out"; fail "malformed line: exit $rc"; }
  echo "malformed line refused: $(echo "$out" | grep bad.tsv)"
  # a FIFO with no writer would block the open; refused by kind, at once (timeout: no hang)
  mkfifo "$WORK/fifo.tsv"
  out=$(timeout 30 "$ZEROC" train --device cpu "${C[@]}" --batch 8 --data "$WORK/fifo.tsv" 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "fifo.tsv' is a fifo, not a regular file" || { echo "$out"; fail "fifo data: exit $rc"; }
  echo "fifo refused: $out" ;;
resume)
  # saved at 2 ranks (column-wise tables) at step 3, resumed at 4 ranks row-wise and at
  # 1 rank data-parallel: the last 3 losses are the uninterrupted run's
  R=(--model dlrm-tiny --lr 0.01 --seed 7 --steps 6 --quiet)
  run 2 "${R[@]}" --batch 8 --embedding-sharding column --save "$WORK/ck" --save-every 3 \
    --metrics "$WORK/a.jsonl" || fail "2-rank run with --save"
  [ -d "$WORK/ck/tables_step_00000003" ] && [ -d "$WORK/ck/step_00000006" ] || fail "no checkpoint"
  field "$WORK/a.jsonl" loss | tail -3 > "$WORK/a3.jsonl.loss"
  for lay in "4 --batch 4 --embedding-sharding row" "1 --batch 16 --embedding-sharding data"; do
    set -- $lay
    np=$1; shift
    run "$np" "${R[@]}" "$@" --resume "$WORK/ck/step_00000003" --metrics "$WORK/b.jsonl" \
      || fail "resume on $np ranks '$*'"
    field "$WORK/b.jsonl" loss > "$WORK/b.loss"
    paste "$WORK/a3.jsonl.loss" "$WORK/b.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (!(d <= 1e-5 * $1)) bad++ } END { exit bad > 0 || NR != 3 }' \
      || { paste "$WORK/a3.jsonl.loss" "$WORK/b.loss"; fail "resumed losses on $np ranks differ"; }
    echo "saved at 2 ranks (column), resumed at $np ranks '$*': 3 losses within 1e-5"
  done
  out=$(run 1 "${R[@]}" --batch 16 --rows 60 --resume "$WORK/ck" 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "model.rows" || { echo "$out"; fail "another table shape resumed: exit $rc"; }
  echo "another table shape refused: $(echo "$out" | head -1)" ;;
bad_flags)
  expect2() {
    local want=$1; shift
    out=$("$ZEROC" train --device cpu --model dlrm-tiny --steps 1 "$@" 2>&1); rc=$?
    [ $rc = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q -- "$want" \
      || { echo "$out"; fail "'$*': exit $rc, want 2 and one line with '$want'"; }
    echo "refused '$*': $out"
  }
  expect2 "embedding-sharding" --embedding-sharding diagonal
  expect2 "bottom MLP ends in 5 but dim is 8" --bottom 16,5
  expect2 "top MLP ends in 2" --top 32,2
  expect2 "rows '0'" --rows 0
  expect2 "rows '10,20'" --rows 10,20
  expect2 "tables" --tables 99
  expect2 "--layers is for the GPT models" --layers 2
  expect2 "bf16" --dtype bf16
  expect2 "file not readable" --data /nonexistent/day_0.tsv
  expect2 "Criteo TSV data has 13 dense" --data "$FIX/criteo_small.tsv"
  expect2 "--grad-accum is for the GPT models" --grad-accum 2
  expect2 "unknown flag" --tabels 3
  expect2 "--save-every needs --save" --save-every 2
  expect2 "no such checkpoint" --resume /nonexistent/ck
  # tables that cannot fit are refused with the figures before anything is allocated
  out=$("$ZEROC" train --device cpu --model dlrm-tiny --steps 1 --rows 1099511627776 2>&1); rc=$?
  [ $rc = 1 ] && echo "$out" | grep -q "GiB per rank" || { echo "$out"; fail "2^40 rows: exit $rc"; }
  echo "refused 2^40 rows per table: $out" ;;
*) fail "unknown test $NAME" ;;
esac
