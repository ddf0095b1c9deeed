#!/usr/bin/env bash
# tests/cp_plan_cli.sh - context parallelism measured against the planner, on
# real ranks (cpu, fp32): each rank's peak device memory per tag at cp 1/2/4,
# ring and Ulysses, equals `zeroc plan`'s prediction to the byte; the bytes a
# rank sends in its cp group per step equal the formula (docs/cp.md); a
# sequence that does not fit one rank's device cap (ZEROC_DEVICE_MEM_LIMIT)
# fails at cp 1 with the out-of-memory message and trains at cp 4.
# usage: cp_plan_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-cpplan-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --quiet --device cpu "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
# a block of the last --metrics line: "peak_by_tag" or "predicted_by_tag"
tags() { tail -1 "$1" | sed -n "s/.*\"$2\": {\([^}]*\)}.*/\1/p"; }
# a model whose activations matter: 4 heads (Ulysses cp 4), seq 256 (2 x 4 chunks)
SHAPE=(--model tiny --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 256 --dtype fp32)
MODEL=("${SHAPE[@]}" --lr 3e-3 --seed 3)

case $NAME in
memory)
  # every tag of rank 0's peak equals the plan's part, to the byte
  for cfg in "1 --cp 1" "2 --cp 2 --cp-mode ring" "2 --cp 2 --cp-mode ulysses" \
             "4 --cp 4 --cp-mode ring" "4 --cp 4 --cp-mode ulysses" \
             "4 --cp 2 --cp-mode ring --zero 3" "2 --cp 2 --cp-mode ring --recompute full" \
             "4 --cp 2 --cp-mode ulysses --pp 2 --zero 1" "4 --cp 2 --cp-mode ring --tp 2 --zero 3"; do
    set -- $cfg; np=$1; shift
    run "$np" "${MODEL[@]}" --batch 2 --steps 2 "$@" --metrics "$WORK/m.jsonl" || fail "np $np '$*' run"
    peak=$(tags "$WORK/m.jsonl" peak_by_tag); pred=$(tags "$WORK/m.jsonl" predicted_by_tag)
    [ -n "$peak" ] && [ "$peak" = "$pred" ] || fail "np $np '$*': measured {$peak}, planned {$pred}"
    echo "np $np '$*': measured = planned {$peak}"
  done ;;
comm)
  # cp bytes per step per rank: a cp run's comm bytes less those of the same
  # ranks as plain data parallelism (the same ZeRO group size, the same
  # parameters) equal the plan's comm.cp; both runs are ZeRO-3 over 4 ranks
  run 4 "${MODEL[@]}" --zero 3 --batch 2 --steps 2 --metrics "$WORK/dp.jsonl" || fail "dp run"
  run 4 "${MODEL[@]}" --zero 3 --batch 2 --steps 2 --recompute full --metrics "$WORK/dprc.jsonl" || fail "dp run"
  for cfg in "--cp 2 --cp-mode ring" "--cp 2 --cp-mode ulysses" "--cp 4 --cp-mode ring" \
             "--cp 4 --cp-mode ulysses" "--cp 2 --cp-mode ring --recompute full"; do
    set -- $cfg; n=$2; base=dp; [ $# -gt 4 ] && base=dprc
    run 4 "${MODEL[@]}" --zero 3 --batch $((2 * n)) --steps 2 "$@" --metrics "$WORK/cp.jsonl" || fail "'$cfg' run"
    dp=$(field "$WORK/$base.jsonl" comm_bytes | tail -1); cp=$(field "$WORK/cp.jsonl" comm_bytes | tail -1)
    want=$("$ZEROC" plan "${SHAPE[@]}" --gpus 4 --zero 3 --batch $((2 * n)) "$@" --json |
           sed -n 's/.*"comm": {[^}]*"cp": \([0-9]*\)}.*/\1/p')
    [ -n "$want" ] && [ $((cp - dp)) = "$want" ] || fail "'$cfg': cp run $cp - dp run $dp = $((cp - dp)) bytes, formula $want"
    echo "'$cfg': $((cp - dp)) cp bytes per step per rank = formula"
  done ;;
oom)
  # seq 2048: one rank's activations exceed the cap, a quarter of them fit
  LONG=(--model tiny --layers 2 --hidden 64 --heads 4 --vocab 256 --seq 2048 --dtype fp32 --batch 1)
  one=$("$ZEROC" plan "${LONG[@]}" --gpus 1 --zero 3 --workspace-mib 0 --json | sed -n 's/.*"total": \([0-9]*\),.*/\1/p' | head -1)
  four=$("$ZEROC" plan "${LONG[@]}" --gpus 4 --cp 4 --zero 3 --workspace-mib 0 --json | sed -n 's/.*"total": \([0-9]*\),.*/\1/p' | head -1)
  [ -n "$one" ] && [ -n "$four" ] && [ "$four" -lt "$one" ] || fail "plan: cp 1 $one bytes, cp 4 $four"
  cap=$(( (one + four) / 2 ))
  out=$(ZEROC_DEVICE_MEM_LIMIT=$cap run 1 "${LONG[@]}" --steps 2 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "cp 1 under a cap of $cap bytes (plan $one) trained"
  echo "$out" | grep -q "device memory limit reached" || fail "cp 1: no out-of-memory message: $out"
  ZEROC_DEVICE_MEM_LIMIT=$cap run 4 "${LONG[@]}" --steps 2 --cp 4 --metrics "$WORK/m.jsonl" || fail "cp 4 under $cap bytes (plan $four)"
  echo "cap $cap bytes: cp 1 (plan $one) refused with the out-of-memory message, cp 4 (plan $four) trains: loss $(field "$WORK/m.jsonl" loss | tail -1)" ;;
bench)
  # zeroc bench --cp 4 on 4 ranks: the cp rows run, carry their cp size, mode
  # and comm bytes, and compute the same math as ZeRO-3 (losses to rounding)
  $MPIRUN $FLAGS -np 4 "$ZEROC" bench --device cpu --out "$WORK/b" --steps 3 --warmup-steps 1 \
    --seq 128 --cp 4 --only zero-3,cp-2-ring,cp-4-ring,cp-4-ulysses,cp-2-ring+tp-2 > "$WORK/out.txt" 2>&1 \
    || { cat "$WORK/out.txt"; fail "bench exited $?"; }
  for l in cp-2-ring cp-4-ring cp-4-ulysses cp-2-ring+tp-2; do
    n=${l#cp-}; n=${n%%-*}; mode=${l#cp-?-}; mode=${mode%%+*}
    grep -q "^$l,.*,ok,.*,$n,$mode,[0-9][0-9]*\$" "$WORK/b/bench.csv" || fail "layout $l: $(grep "^$l," "$WORK/b/bench.csv")"
  done
  grep -q "^| cp-4-ulysses | 3 | 1 | 1 | 1 | 4 |" "$WORK/b/bench.md" || fail "bench.md has no cp row: $(cat "$WORK/b/bench.md")"
  awk -F, 'NR > 1 { print $16 }' "$WORK/b/bench.csv" | sort -g | sed -n '1p;$p' | paste - - |
    awk '{ d = $2 - $1; exit !(d <= 1e-4 * $1) }' || fail "losses differ: $(cut -d, -f1,16 "$WORK/b/bench.csv")"
  echo "bench --cp 4: $(grep -c ',ok,' "$WORK/b/bench.csv") layouts ok" ;;
*) fail "unknown test $NAME" ;;
esac
