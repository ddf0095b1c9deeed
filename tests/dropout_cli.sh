#!/usr/bin/env bash
# tests/dropout_cli.sh - `zeroc train --dropout` end to end on real ranks: with
# --dropout 0.1 every layout's per-step losses match the single rank's to 1e-5
# relative (fp32, cpu, the same global batch), as they do without dropout,
# because each mask is a hash of global coordinates; dropout changes the loss;
# --dropout 0 is bit for bit the run without the flag; a resumed run continues bit
# for bit; bad values exit 2.
# usage: dropout_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-dropout-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
# global batch 4 (2 x 2 on one rank); a vocabulary that is not a multiple of 64 x tp
COMMON=(--model tiny --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 4 --dropout 0.1)

# same FILE_A FILE_B: the losses agree to 1e-5 relative
same() {
  field "$1" loss > "$WORK/x"; field "$2" loss > "$WORK/y"
  [ "$(wc -l < "$WORK/x")" = "$(wc -l < "$WORK/y")" ] && [ -s "$WORK/y" ] || fail "$1 and $2 log different step counts"
  paste "$WORK/x" "$WORK/y" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (!(d <= 1e-5 * $1)) bad++ } END { exit bad > 0 }' \
    || { paste "$WORK/x" "$WORK/y"; fail "losses of $2 differ from $1 by more than 1e-5 relative"; }
}

# layouts "ARGS" ...: each layout on 2 ranks against one rank with the same global batch
layouts() {
  run 1 "${COMMON[@]}" --batch 2 --grad-accum 2 --metrics "$WORK/one.jsonl" || fail "single-rank run"
  for cfg in "$@"; do
    run 2 "${COMMON[@]}" $cfg --metrics "$WORK/l.jsonl" || fail "'$cfg' run exited $?"
    same "$WORK/one.jsonl" "$WORK/l.jsonl"
    echo "2 ranks '$cfg': losses within 1e-5 of the single rank"
  done
}

case $NAME in
dp) layouts "--zero 0 --batch 1 --grad-accum 2" "--zero 1 --batch 2" "--zero 2 --batch 1 --grad-accum 2" \
            "--zero 3 --batch 1 --grad-accum 2" "--hsdp 2 --batch 2" \
            "--zero 3 --batch 1 --grad-accum 2 --offload-optimizer cpu --offload-params cpu" \
            "--zero 3 --batch 2 --recompute full" ;;
tp) layouts "--tp 2 --batch 2 --grad-accum 2" "--tp 2 --sequence-parallel --batch 4" \
            "--tp 2 --sequence-parallel --recompute full --batch 2 --grad-accum 2" ;;
pp) layouts "--pp 2 --batch 2 --microbatches 2" "--pp 2 --pp-schedule interleaved --vpp 2 --batch 1 --microbatches 4" \
            "--pp 2 --batch 2 --microbatches 2 --recompute full" ;;
off_and_bad)
  # dropout changes the losses; --dropout 0 is the run without the flag, bit for bit
  P0=(--model tiny --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 4 --batch 4)
  run 1 "${P0[@]}" --metrics "$WORK/a.jsonl" || fail "run without dropout"
  run 1 "${P0[@]}" --dropout 0 --metrics "$WORK/b.jsonl" || fail "run with --dropout 0"
  run 1 "${P0[@]}" --dropout 0.1 --metrics "$WORK/c.jsonl" || fail "run with --dropout 0.1"
  for f in loss grad_norm; do
    field "$WORK/a.jsonl" $f > "$WORK/a.$f"; field "$WORK/b.jsonl" $f > "$WORK/b.$f"
    [ -s "$WORK/a.$f" ] && cmp -s "$WORK/a.$f" "$WORK/b.$f" || fail "--dropout 0 changes the $f"
  done
  field "$WORK/c.jsonl" loss > "$WORK/c.loss"
  paste "$WORK/a.loss" "$WORK/c.loss" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $1) moved++ } END { exit !(moved == NR) }' \
    || { paste "$WORK/a.loss" "$WORK/c.loss"; fail "--dropout 0.1 leaves a loss unchanged"; }
  # a resumed run draws the masks the uninterrupted one drew: the same losses, bit for bit
  run 1 "${P0[@]}" --dropout 0.1 --steps 6 --save "$WORK/ck" --save-every 3 --metrics "$WORK/r.jsonl" || fail "run to resume"
  run 1 "${P0[@]}" --dropout 0.1 --steps 6 --resume "$WORK/ck/step_00000003" --metrics "$WORK/s.jsonl" || fail "resumed run"
  field "$WORK/r.jsonl" loss | tail -3 > "$WORK/r.loss"; field "$WORK/s.jsonl" loss > "$WORK/s.loss"
  [ -s "$WORK/s.loss" ] && cmp -s "$WORK/r.loss" "$WORK/s.loss" || { paste "$WORK/r.loss" "$WORK/s.loss"; fail "losses differ after resume"; }
  for v in 1 -0.1 abc; do
    out=$(run 1 --dropout "$v" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "--dropout $v exited $rc, want 2 ($out)"
    [ "$(echo "$out" | grep -c "zeroc train")" = 1 ] || fail "--dropout $v printed other than one line: $out"
    echo "$out" | grep -q -- "--dropout" || fail "--dropout $v: the message names no flag: $out"
  done
  echo "dropout 0 bitwise the run without it; 0.1 moves every loss; resume bitwise; 1, -0.1, abc refused" ;;
*) fail "unknown test $NAME" ;;
esac
