#!/usr/bin/env bash
# tests/eval_cli.sh - `zeroc train --val-data/--val-every/--val-tokens` end to end:
# in every layout the validation loss of each evaluation step equals the
# single-rank run's (1e-5 relative: fp32), the training losses and norms with
# --val-every are bitwise those of the same run without it, and the flags'
# refusals (one line, exit 2, nothing written); with --dropout too.
# usage: eval_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-eval-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
# the tiny GPT, global batch 8 x 64 tokens; 2048 validation tokens = 4 global batches
COMMON=(--device cpu --model tiny --lr 3e-3 --seed 5 --steps 4 --quiet)
VAL=(--val-data synthetic --val-every 2 --val-tokens 2048)
TOL=1e-5

# The single-rank run: validation after steps 2 and 4.
reference() {
  [ -s "$WORK/ref.jsonl" ] && return
  run 1 "${COMMON[@]}" "${VAL[@]}" --batch 2 --grad-accum 4 --metrics "$WORK/ref.jsonl" \
    || fail "single-rank run"
  steps=$(grep '"val_loss"' "$WORK/ref.jsonl" | field /dev/stdin step | tr '\n' ' ')
  [ "$steps" = "2 4 " ] || fail "single-rank run evaluated after steps '$steps', expected '2 4 '"
}

# layout NP ARGS...: the validation losses against the single-rank run's, and
# the training figures bitwise against the same layout without --val-every.
layout() {
  local np=$1; shift
  reference
  out=$(run "$np" "${COMMON[@]}" "${VAL[@]}" "$@" --metrics "$WORK/a.jsonl" 2>&1) || fail "$* exited $?: $out"
  out=$(run "$np" "${COMMON[@]}" "$@" --metrics "$WORK/b.jsonl" 2>&1) || fail "$* without evaluation exited $?: $out"
  grep '"val_loss"' "$WORK/a.jsonl" | field /dev/stdin step > "$WORK/s"
  [ "$(tr '\n' ' ' < "$WORK/s")" = "2 4 " ] || fail "$*: evaluated after steps $(tr '\n' ' ' < "$WORK/s")"
  field "$WORK/ref.jsonl" val_loss > "$WORK/x"; field "$WORK/a.jsonl" val_loss > "$WORK/y"
  paste "$WORK/x" "$WORK/y" | awk -v t="$TOL" '{ d = $1 - $2; if (d < 0) d = -d; if (!($2 > 0) || d > t * $1) bad++ } END { exit bad > 0 }' \
    || { paste "$WORK/x" "$WORK/y"; fail "$np ranks ($*): val_loss differs from the single-rank run by more than $TOL relative"; }
  ! grep -q '"val_loss"' "$WORK/b.jsonl" || fail "$*: val_loss without --val-every"
  for k in loss grad_norm; do
    cmp -s <(field "$WORK/a.jsonl" $k) <(field "$WORK/b.jsonl" $k) \
      || { paste <(field "$WORK/a.jsonl" $k) <(field "$WORK/b.jsonl" $k); fail "$np ranks ($*): $k changed by --val-every"; }
  done
  echo "$np ranks ($*): val_loss $(tr '\n' ' ' < "$WORK/y")within $TOL of the single-rank run; training bitwise unchanged"
}

# shard FILE N BYTE: an llm.c shard of N tokens, each of two bytes BYTE (0: token 0, 1: 257)
shard() {
  local n=$2
  { printf '\x88\xd8\x34\x01\x01\x00\x00\x00'
    printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8 & 255)))\\x$(printf %02x $((n >> 16 & 255)))\\x00"
    head -c $((253 * 4)) /dev/zero
    head -c $((2 * n)) /dev/zero | tr '\0' "\\$(printf %03o "$3")"; } > "$1"
}

# refused FLAGS... -- TEXT: exit 2, one line naming TEXT, no metrics written (one plain rank)
refused() {
  local args=() ; while [ "$1" != -- ]; do args+=("$1"); shift; done; shift
  out=$("$ZEROC" train --device cpu "${COMMON[@]}" --metrics "$WORK/r.jsonl" "${args[@]}" 2>&1); rc=$?
  [ $rc = 2 ] || fail "${args[*]}: exit $rc, expected 2: $out"
  echo "$out" | grep -qF -- "$1" || fail "${args[*]}: message '$out' does not say '$1'"
  [ "$(echo "$out" | grep -c .)" = 1 ] || fail "${args[*]}: more than one line: $out"
  [ ! -e "$WORK/r.jsonl" ] || fail "${args[*]}: metrics written"
  echo "refused ${args[*]}: $out"
}

case $NAME in
dp)
  layout 1 --batch 8
  layout 2 --batch 4 --zero 0
  layout 2 --batch 2 --grad-accum 2 --zero 1
  layout 2 --batch 4 --zero 2
  layout 4 --batch 2 --zero 3 --prefetch 1
  layout 4 --batch 2 --hsdp 2
  layout 2 --batch 4 --recompute full
  mkdir -p "$WORK/nvme"
  layout 2 --batch 4 --offload-optimizer cpu --offload-params cpu
  layout 2 --batch 4 --offload-optimizer nvme --offload-params nvme --nvme-dir "$WORK/nvme" ;;
tp)
  layout 2 --batch 8 --tp 2
  layout 2 --batch 8 --tp 2 --sequence-parallel
  layout 4 --batch 4 --tp 2 --sequence-parallel --zero 3 ;;
pp)
  layout 2 --batch 2 --pp 2 --microbatches 4
  layout 4 --batch 1 --pp 2 --pp-schedule interleaved --vpp 2 --microbatches 4
  layout 4 --batch 2 --pp 4 --microbatches 4 --recompute full
  layout 4 --batch 2 --pp 2 --tp 2 --microbatches 4 --sequence-parallel ;;
dropout)
  # dropout is off in an evaluation (layer io eval): the same held-out loss in every
  # layout, and the masks the training steps draw are not disturbed by it
  COMMON+=(--dropout 0.1)
  layout 4 --batch 2
  layout 2 --batch 2 --pp 2 --microbatches 4
  layout 2 --batch 8 --tp 2 --sequence-parallel ;;
flags)
  # --val-data alone: one evaluation, after the last step; the progress line shows it
  out=$(run 1 --device cpu --model tiny --steps 3 --val-data synthetic --val-tokens 256 --metrics "$WORK/m.jsonl") \
    || fail "--val-data alone exited $?: $out"
  [ "$(grep -c '"val_loss"' "$WORK/m.jsonl")" = 1 ] && grep -q '^{"step": 3,.*"val_loss": [0-9]' "$WORK/m.jsonl" \
    || fail "--val-data alone: val_loss not only at the last step: $(cat "$WORK/m.jsonl")"
  echo "$out" | grep -q "^step     3/3 | loss [0-9.]* | val [0-9]\.[0-9]\{4\} |" || fail "no 'val X.XXXX' in the progress line: $out"
  echo "$out" | grep -q "validation: synthetic, 1 global batches (256 tokens) after the last step" || fail "header: $out"
  # --val-every 0: off
  run 1 "${COMMON[@]}" --val-data synthetic --val-every 0 --metrics "$WORK/o.jsonl" || fail "--val-every 0"
  ! grep -q val_loss "$WORK/o.jsonl" || fail "--val-every 0 evaluated"
  refused --val-every 2 -- "--val-every needs --val-data"
  refused --val-tokens 4096 -- "--val-tokens needs --val-data"
  refused --val-data synthetic --val-tokens 0 -- "--val-tokens '0': accepted an integer 1..1000000000000"
  refused --val-data synthetic --val-tokens 10000000000000 -- "--val-tokens '10000000000000': accepted"
  refused --val-data synthetic --val-tokens 1e6 -- "--val-tokens '1e6': accepted an integer"
  refused --val-data synthetic --val-every two -- "--val-every 'two': accepted an integer 0..1000000000"
  refused --val-data synthetic --val-every -1 -- "--val-every '-1': accepted an integer"
  refused --val-data -- "--val-data needs a value"
  # held-out shards checked at create: a token outside the vocabulary, no files
  shard "$WORK/bad.bin" 4096 1
  out=$(run 2 "${COMMON[@]}" --val-data "$WORK/bad.bin" --val-every 2 --metrics "$WORK/r.jsonl" 2>&1); rc=$?
  [ $rc != 0 ] && echo "$out" | grep -q "is >= vocab 256" || fail "token 257 in --val-data: exit $rc: $out"
  grep -q '"step"' "$WORK/r.jsonl" 2>/dev/null && fail "a step ran with bad --val-data"
  echo "refused a token outside the vocabulary: $(echo "$out" | head -1)"
  out=$(run 1 "${COMMON[@]}" --val-data "$WORK/none*.bin" 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "matches no files" || fail "--val-data matching nothing: exit $rc: $out"
  # a good shard: 64 sequences, 8 global batches; more tokens asked: at most one pass
  shard "$WORK/good.bin" 4097 0
  out=$(run 1 --device cpu --model tiny --steps 2 --batch 8 --val-data "$WORK/good.bin" --val-tokens 100000 \
        --metrics "$WORK/g.jsonl" 2>&1) || fail "good shard: $out"
  echo "$out" | grep -q "validation: $WORK/good.bin, 8 global batches (4096 tokens) after the last step" \
    || fail "good shard: not one pass of 8 global batches: $out"
  grep -q '^{"step": 2,.*"val_loss": [0-9]' "$WORK/g.jsonl" || fail "good shard: no val_loss at step 2"
  echo "flags: refusals and --val-data alone as documented" ;;
*) fail "unknown test '$NAME'" ;;
esac
