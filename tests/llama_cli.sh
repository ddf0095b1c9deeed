#!/usr/bin/env bash
# tests/llama_cli.sh - the Llama family (llama-tiny: grouped-query attention,
# untied head, llama3 rope scaling; qwen-tiny: q/k/v biases, tied head) through
# `zeroc train` on real ranks (cpu, fp32): every layout's per-step losses equal
# the single-rank run's to 1e-5 relative (ZeRO-3, HSDP, tp with and without
# sequence parallelism, pp 1F1B and interleaved, cp ring and Ulysses, recompute
# and accumulation, optimizer and parameter offload); each rank's peak device
# memory per tag equals the planner's prediction to the byte; a checkpoint
# saved at tp 2 resumes at tp 1 with the same losses and is refused by another
# shape; bad settings exit 2 with one line naming them.
# usage: llama_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-llama-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
tags() { tail -1 "$1" | sed -n "s/.*\"$2\": {\([^}]*\)}.*/\1/p"; }

# same FILE_A FILE_B [N]: the last N (default all) losses agree to 1e-5 relative
same() {
  local n=${3:-0}
  if [ "$n" -gt 0 ]; then field "$1" loss | tail -"$n" > "$WORK/x"; else field "$1" loss > "$WORK/x"; fi
  field "$2" loss > "$WORK/y"
  [ "$(wc -l < "$WORK/x")" = "$(wc -l < "$WORK/y")" ] && [ -s "$WORK/y" ] || fail "$1 and $2 log different step counts"
  paste "$WORK/x" "$WORK/y" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (!(d <= 1e-5 * $1)) bad++ } END { exit bad > 0 }' \
    || { paste "$WORK/x" "$WORK/y"; fail "losses of $2 differ from $1 by more than 1e-5 relative"; }
}

# layouts MODEL "NP FLAGS..." ...: each layout against one rank with the same global
# batch of 4 sequences (a vocabulary that is not a multiple of 64 x tp)
layouts() {
  local model=($1); shift # the model's name and its own flags
  local common=(--model "${model[@]}" --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 5)
  run 1 "${common[@]}" --batch 4 --metrics "$WORK/one.jsonl" || fail "${model[*]} single-rank run"
  for cfg in "$@"; do
    set -- $cfg; local np=$1; shift
    run "$np" "${common[@]}" "$@" --metrics "$WORK/l.jsonl" || fail "${model[*]} np $np '$*' exited $?"
    same "$WORK/one.jsonl" "$WORK/l.jsonl"
    echo "${model[*]} np $np '$*': 5 losses within 1e-5 of one rank: $(field "$WORK/l.jsonl" loss | tr '\n' ' ')"
  done
}

case $NAME in
layouts_llama)
  layouts llama-tiny "2 --zero 3 --batch 2" "4 --zero 3 --hsdp 2 --batch 1" "2 --tp 2 --batch 4" \
    "2 --tp 2 --sequence-parallel --batch 4" "2 --pp 2 --batch 1 --microbatches 4" \
    "2 --cp 2 --batch 4" "2 --cp 2 --cp-mode ulysses --batch 4" \
    "1 --recompute full --batch 2 --grad-accum 2" "1 --offload-optimizer cpu --batch 4" \
    "2 --zero 3 --offload-params cpu --batch 2" "4 --tp 2 --cp 2 --cp-mode ulysses --batch 4"
  # the interleaved schedule needs 2 x 2 chunks: 4 layers
  layouts "llama-tiny --layers 4" "2 --pp 2 --pp-schedule interleaved --vpp 2 --batch 1 --microbatches 4" ;;
layouts_qwen)
  layouts qwen-tiny "2 --zero 3 --batch 2" "4 --tp 2 --sequence-parallel --zero 3 --batch 2" \
    "2 --pp 2 --batch 1 --microbatches 4" "2 --cp 2 --cp-mode ring --batch 4" \
    "2 --cp 2 --cp-mode ulysses --recompute full --batch 4" ;;
memory)
  # every tag of rank 0's peak equals the plan's part, to the byte
  M=(--model llama-tiny --seq 128 --batch 2 --steps 2 --lr 3e-3)
  for cfg in "1" "2 --zero 3" "2 --tp 2 --sequence-parallel --zero 1" "2 --cp 2 --cp-mode ulysses" \
             "2 --cp 2 --cp-mode ring --recompute full" "2 --pp 2 --zero 1" "1 --model qwen-tiny" \
             "2 --zero 3 --dtype bf16" "2 --zero 3 --dtype bf16 --grad-reduce-dtype bf16" \
             "2 --zero 2 --dtype bf16 --grad-accum 2" \
             "2 --zero 1 --dtype bf16 --grad-accum 2 --grad-reduce-dtype bf16" \
             "2 --zero 0 --dtype fp32 --grad-reduce-dtype bf16"; do
    set -- $cfg; np=$1; shift
    run "$np" "${M[@]}" "$@" --metrics "$WORK/m.jsonl" || fail "np $np '$*' run"
    peak=$(tags "$WORK/m.jsonl" peak_by_tag); pred=$(tags "$WORK/m.jsonl" predicted_by_tag)
    [ -n "$peak" ] && [ "$peak" = "$pred" ] || fail "np $np '$*': measured {$peak}, planned {$pred}"
    echo "np $np '$*': measured = planned {$peak}"
  done ;;
resume)
  # saved at tp 2, resumed at tp 1 on 2 ranks: the last 3 losses equal the uninterrupted run's
  R=(--model llama-tiny --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 6)
  run 2 "${R[@]}" --tp 2 --batch 4 --save "$WORK/ck" --save-every 3 --metrics "$WORK/a.jsonl" || fail "tp 2 run"
  run 2 "${R[@]}" --zero 3 --batch 2 --resume "$WORK/ck/step_00000003" --metrics "$WORK/b.jsonl" || fail "tp 1 resume"
  same "$WORK/a.jsonl" "$WORK/b.jsonl" 3
  grep -q 'kv_heads.": 2' "$WORK/ck/step_00000003/manifest.json" || fail "the manifest records no kv_heads"
  # another shape of the same family is refused (its tensors, or the app fields, name it)
  out=$(run 2 "${R[@]}" --kv-heads 4 --batch 2 --resume "$WORK/ck/step_00000003" 2>&1); rc=$?
  [ $rc -ne 0 ] && echo "$out" | grep -q "kv_heads\|model shape" || fail "resume with --kv-heads 4: exit $rc: $out"
  echo "tp 2 -> tp 1: 3 losses within 1e-5 after resuming; --kv-heads 4 refused" ;;
bad_flags)
  for args in "--model llama-tiny --tp 4" "--model llama-tiny --kv-heads 3" "--model llama-tiny --dropout 0.1" \
              "--model tiny --kv-heads 2" "--model llama-tiny --tp 2 --ffn 161" \
              "--model llama-tiny --tp 2 --kv-heads 1"; do
    out=$(run 4 $args 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "'$args' exited $rc, want 2 ($out)"
    lines=$(echo "$out" | grep -c "zeroc train")
    [ "$lines" = 1 ] || fail "'$args' printed $lines zeroc lines: $out"
    echo "$out" | grep -q -- "--tp\|--kv-heads\|--dropout\|--ffn\|kv_heads\|dropout" || fail "'$args': message names no setting: $out"
    echo "'$args': $out"
  done ;;
*) fail "unknown test $NAME" ;;
esac
