#!/usr/bin/env bash
# tests/tp_cli.sh - `zeroc train` with tensor parallelism, end to end on real
# ranks: each layout's per-step losses match the single-rank run's to 1e-5
# relative (fp32, cpu, the same global batch), checkpoints saved at one tp size
# resume at another with equal losses, safetensors export/import round-trips
# between tp sizes, the planner predicts the measured memory, bad flags exit 2.
# usage: tp_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-tp-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
# a vocabulary that is not a multiple of 64 x tp, so the padding differs per tp size
COMMON=(--model tiny --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 5)

# same FILE_A FILE_B [N]: the last N (default all) losses agree to 1e-5 relative
same() {
  local n=${3:-0}
  if [ "$n" -gt 0 ]; then field "$1" loss | tail -"$n" > "$WORK/x"; else field "$1" loss > "$WORK/x"; fi
  field "$2" loss > "$WORK/y"
  [ "$(wc -l < "$WORK/x")" = "$(wc -l < "$WORK/y")" ] && [ -s "$WORK/y" ] || fail "$1 and $2 log different step counts"
  paste "$WORK/x" "$WORK/y" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (!(d <= 1e-5 * $1)) bad++ } END { exit bad > 0 }' \
    || { paste "$WORK/x" "$WORK/y"; fail "losses of $2 differ from $1 by more than 1e-5 relative"; }
}

# compare NP ARGS...: the layout against one rank with the same global batch
compare() {
  local np=$1; shift
  run 1 "${COMMON[@]}" --batch 4 --metrics "$WORK/one.jsonl" || fail "single-rank run"
  run "$np" "${COMMON[@]}" "$@" --metrics "$WORK/tp.jsonl" || fail "'$*' run exited $?"
  same "$WORK/one.jsonl" "$WORK/tp.jsonl"
  echo "$np ranks '$*': 5 losses within 1e-5 of the single rank: $(field "$WORK/tp.jsonl" loss | tr '\n' ' ')"
}

case $NAME in
tp2) compare 2 --tp 2 --batch 4 ;;
tp4) compare 4 --tp 4 --batch 4 ;;
tp2_zero3) compare 4 --tp 2 --zero 3 --batch 2 ;;
tp2_sp) compare 2 --tp 2 --sequence-parallel --batch 4 ;;
tp2_sp_zero3_recompute) compare 4 --tp 2 --sequence-parallel --zero 3 --recompute full --batch 1 --grad-accum 2 ;;

resume_other_tp)
  # saved at tp 2 x ZeRO-3 (4 ranks), resumed at tp 4, at tp 1 on 2 ranks and at
  # tp 2 sequence parallel: the last 3 losses equal the uninterrupted run's
  R=(--model tiny --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 6)
  run 4 "${R[@]}" --tp 2 --zero 3 --batch 2 --save "$WORK/ck" --save-every 3 --metrics "$WORK/a.jsonl" || fail "tp 2 run"
  run 4 "${R[@]}" --tp 4 --batch 4 --resume "$WORK/ck/step_00000003" --metrics "$WORK/b.jsonl" || fail "tp 4 resume"
  same "$WORK/a.jsonl" "$WORK/b.jsonl" 3
  run 2 "${R[@]}" --zero 1 --batch 2 --resume "$WORK/ck/step_00000003" --metrics "$WORK/c.jsonl" || fail "tp 1 resume"
  same "$WORK/a.jsonl" "$WORK/c.jsonl" 3
  # and back: saved at tp 1, resumed at tp 2 with sequence parallelism
  run 1 "${R[@]}" --batch 4 --save "$WORK/ck1" --save-every 3 --metrics "$WORK/d.jsonl" || fail "tp 1 run"
  run 2 "${R[@]}" --tp 2 --sequence-parallel --batch 4 --resume "$WORK/ck1/step_00000003" --metrics "$WORK/e.jsonl" \
    || fail "tp 2 resume of a tp 1 checkpoint"
  same "$WORK/d.jsonl" "$WORK/e.jsonl" 3
  grep -q '"tp_full"' "$WORK/ck/step_00000003/manifest.json" || fail "the manifest records no split"
  echo "tp 2 -> tp 4, tp 2 -> tp 1, tp 1 -> tp 2 (sp): 3 losses each within 1e-5 after resuming" ;;

safetensors)
  # consolidated tensors: what tp 2 exports, tp 1 and tp 4 import and export unchanged
  run 2 "${COMMON[@]}" --tp 2 --batch 4 --export "$WORK/a.safetensors" || fail "tp 2 export"
  run 1 "${COMMON[@]}" --steps 0 --init "$WORK/a.safetensors" --export "$WORK/b.safetensors" || fail "tp 1 init"
  run 4 "${COMMON[@]}" --steps 0 --tp 4 --init "$WORK/a.safetensors" --export "$WORK/c.safetensors" || fail "tp 4 init"
  cmp -s "$WORK/a.safetensors" "$WORK/b.safetensors" || fail "tp 2 -> tp 1 changed the weights"
  cmp -s "$WORK/a.safetensors" "$WORK/c.safetensors" || fail "tp 2 -> tp 4 changed the weights"
  head -c 2000 "$WORK/a.safetensors" | grep -aq '"h.0.attn.c_attn.weight": *{"dtype": *"F32", *"shape": *\[64, *192\]' \
    || fail "c_attn is not exported whole (64, 192)"
  head -c 2000 "$WORK/a.safetensors" | grep -aq '"wte.weight": *{"dtype": *"F32", *"shape": *\[300, *64\]' \
    || fail "wte is not exported as (300, 64)"
  echo "tp 2 -> tp 1 -> tp 4 round trip identical, tensors whole" ;;

memory_prediction)
  # the planner's per-rank prediction against the accountant's measured peak
  for cfg in "--tp 2 --zero 3" "--tp 4 --zero 0" "--tp 2 --zero 1 --sequence-parallel" \
             "--tp 4 --zero 3 --sequence-parallel" "--tp 2 --zero 2 --recompute full"; do
    run 4 --model small --steps 2 $cfg --metrics "$WORK/m.jsonl" || fail "'$cfg' run"
    peak=$(tail -1 "$WORK/m.jsonl" | sed 's/.*"peak_bytes": {"device": \([0-9]*\).*/\1/')
    pred=$(tail -1 "$WORK/m.jsonl" | sed 's/.*"predicted_bytes": {"device": \([0-9]*\).*/\1/')
    awk -v a="$peak" -v b="$pred" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.01) }' \
      || fail "'$cfg': measured $peak bytes, predicted $pred (more than 1% apart)"
    echo "$cfg: measured $peak predicted $pred"
  done ;;

bad_flags)
  for args in "--tp 3" "--tp 2 --heads 3 --hidden 66" "--sequence-parallel" "--tp 2 --sequence-parallel --batch 1 --seq 63"; do
    out=$(run 2 $args 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "'$args' exited $rc, want 2 ($out)"
    lines=$(echo "$out" | grep -c "zeroc train")
    [ "$lines" = 1 ] || fail "'$args' printed $lines zeroc lines: $out"
    echo "$out" | grep -q -- "--tp\|--sequence-parallel" || fail "'$args': message names no flag: $out"
  done
  echo "4 bad tp invocations: exit 2, one line each" ;;
*) fail "unknown test $NAME" ;;
esac
