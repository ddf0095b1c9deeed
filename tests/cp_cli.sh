#!/usr/bin/env bash
# tests/cp_cli.sh - `zeroc train` with context parallelism (--cp), end to end on
# real ranks: every layout's per-step losses match the single-rank run's of the
# same model and data to 1e-5 relative over 5 steps (fp32, cpu), alone and with
# tp (and sequence parallelism), ZeRO-3 x dp, HSDP, pp (1F1B, interleaved),
# recompute, offload, dropout, evaluation and sampling; checkpoints saved at one
# cp size resume at another, weights export and import between cp sizes; bad
# flags print one line and exit non-zero. Each layout prints its largest
# relative loss difference.
# usage: cp_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-cp-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --quiet --device cpu "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }   # one value per line
# tiny (2 layers, hidden 64, 4 heads, seq 64: 8 zigzag chunks at cp 4), a
# vocabulary that is not a multiple of 64 x tp
COMMON=(--model tiny --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 5)

# same KEY FILE_A FILE_B [N]: the last N (default all) values of KEY agree to
# 1e-5 relative; prints the largest relative difference
same() {
  local key=$1 n=${4:-0}
  if [ "$n" -gt 0 ]; then field "$2" "$key" | tail -"$n" > "$WORK/x"; else field "$2" "$key" > "$WORK/x"; fi
  field "$3" "$key" > "$WORK/y"
  [ "$(wc -l < "$WORK/x")" = "$(wc -l < "$WORK/y")" ] && [ -s "$WORK/y" ] || fail "$2 and $3 log different step counts"
  paste "$WORK/x" "$WORK/y" | awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > m) m = d; if (!(d <= 1e-5)) bad++ }
    END { printf "max rel diff %.2e", m; exit bad > 0 }' \
    || { echo; paste "$WORK/x" "$WORK/y"; fail "$key of $3 differs from $2 by more than 1e-5 relative"; }
}

# compare "REF ARGS" NP ARGS...: the layout against one rank running REF ARGS
# (the same global batch); the reference runs once per REF ARGS
compare() {
  local ref=$1 np=$2; shift 2
  local key; key=$(echo "$ref" | tr -c 'a-z0-9' '_')
  if [ ! -s "$WORK/ref_$key.jsonl" ]; then
    run 1 "${COMMON[@]}" $ref --metrics "$WORK/ref_$key.jsonl" > /dev/null || fail "single-rank run '$ref'"
  fi
  run "$np" "${COMMON[@]}" "$@" --metrics "$WORK/cp.jsonl" > "$WORK/out" || { cat "$WORK/out"; fail "'$*' run exited $?"; }
  echo "$np ranks '$*': $(same loss "$WORK/ref_$key.jsonl" "$WORK/cp.jsonl")"
}

case $NAME in
modes)
  # ring and Ulysses at cp 2 and 4, the zigzag's positions and loss scaling
  compare "--batch 4" 2 --cp 2 --batch 4
  compare "--batch 4" 2 --cp 2 --cp-mode ulysses --batch 4
  compare "--batch 4" 4 --cp 4 --batch 4
  compare "--batch 4" 4 --cp 4 --cp-mode ulysses --batch 4
  compare "--batch 4 --recompute full" 2 --cp 2 --recompute full --batch 4
  compare "--batch 4 --recompute full" 4 --cp 4 --cp-mode ulysses --recompute full --batch 4
  # the start-up line names the layout
  $MPIRUN $FLAGS -np 2 "$ZEROC" train --device cpu "${COMMON[@]}" --steps 1 --cp 2 --cp-mode ulysses \
    | grep -q 'tp 1, cp 2 (ulysses), batch' || fail "the start-up line does not show 'cp 2 (ulysses)'"
  echo "start-up line: cp 2 (ulysses)" ;;

composed)
  # with tp (and sequence parallelism), ZeRO-3 x dp 2, HSDP, offload
  compare "--batch 4" 4 --cp 2 --tp 2 --batch 4
  compare "--batch 4" 4 --cp 2 --tp 2 --sequence-parallel --cp-mode ulysses --batch 4
  compare "--batch 4" 4 --cp 2 --zero 3 --batch 2
  compare "--batch 4 --recompute full" 4 --cp 2 --zero 3 --recompute full --batch 2
  compare "--batch 4" 4 --cp 2 --hsdp 2 --zero 3 --batch 2
  compare "--batch 4" 2 --cp 2 --offload-optimizer cpu --batch 4 ;;

pipeline)
  # with pp 2: 1F1B, interleaved, recompute (2 micro-batches of 2 = the batch of 4)
  compare "--batch 4" 4 --cp 2 --pp 2 --batch 2
  compare "--batch 4 --recompute full" 4 --cp 2 --pp 2 --recompute full --batch 2
  compare "--batch 4 --layers 4" 4 --cp 2 --pp 2 --pp-schedule interleaved --vpp 2 --layers 4 --batch 2 ;;

dropout_eval)
  # dropout's masks at global coordinates; evaluation over the split sequences
  compare "--batch 4 --dropout 0.1" 2 --cp 2 --dropout 0.1 --batch 4
  compare "--batch 4 --dropout 0.1" 4 --cp 2 --tp 2 --sequence-parallel --dropout 0.1 --batch 4
  run 1 "${COMMON[@]}" --batch 4 --val-data synthetic --val-tokens 512 --metrics "$WORK/v1.jsonl" > /dev/null || fail "single-rank eval"
  run 2 "${COMMON[@]}" --cp 2 --batch 4 --val-data synthetic --val-tokens 512 --metrics "$WORK/v2.jsonl" > /dev/null || fail "cp 2 eval"
  echo "cp 2 evaluation: $(same val_loss "$WORK/v1.jsonl" "$WORK/v2.jsonl")"
  # --sample-every: the sampler runs on the gathered weights, the same text as one rank's
  S=(--batch 4 --vocab 256 --steps 2 --sample-every 2 --sample-tokens 16 --tokenizer bytes)
  run 1 "${COMMON[@]}" "${S[@]}" | grep 'sample (16 tokens)' > "$WORK/s1" || fail "single-rank sample"
  run 2 "${COMMON[@]}" "${S[@]}" --cp 2 | grep 'sample (16 tokens)' > "$WORK/s2" || fail "cp 2 sample"
  cmp -s "$WORK/s1" "$WORK/s2" || fail "cp 2 sampled other text: $(cat "$WORK/s1" "$WORK/s2")"
  echo "cp 2 --sample-every: the single rank's sample" ;;

resume_other_cp)
  # saved at cp 2 x dp 2 (ZeRO-3), resumed at cp 4 and at cp 1 on one rank; and
  # saved at cp 1, resumed at cp 2: the flat shards are re-cut like a dp change
  R=(--model tiny --vocab 300 --lr 3e-3 --warmup 2 --seed 7 --steps 6)
  run 4 "${R[@]}" --cp 2 --zero 3 --batch 2 --save "$WORK/ck" --save-every 3 --metrics "$WORK/a.jsonl" > /dev/null || fail "cp 2 run"
  grep -q '"cp": 2' "$WORK/ck/step_00000003/manifest.json" || fail "the manifest does not record cp 2"
  run 4 "${R[@]}" --cp 4 --batch 4 --resume "$WORK/ck/step_00000003" --metrics "$WORK/b.jsonl" > /dev/null || fail "cp 4 resume"
  echo "cp 2 x dp 2 -> cp 4: $(same loss "$WORK/a.jsonl" "$WORK/b.jsonl" 3)"
  run 1 "${R[@]}" --batch 4 --resume "$WORK/ck/step_00000003" --metrics "$WORK/c.jsonl" > /dev/null || fail "cp 1 resume"
  echo "cp 2 x dp 2 -> cp 1: $(same loss "$WORK/a.jsonl" "$WORK/c.jsonl" 3)"
  run 1 "${R[@]}" --batch 4 --save "$WORK/ck1" --save-every 3 --metrics "$WORK/d.jsonl" > /dev/null || fail "cp 1 run"
  run 2 "${R[@]}" --cp 2 --cp-mode ulysses --batch 4 --resume "$WORK/ck1/step_00000003" --metrics "$WORK/e.jsonl" > /dev/null \
    || fail "cp 2 resume of a cp 1 checkpoint"
  echo "cp 1 -> cp 2: $(same loss "$WORK/d.jsonl" "$WORK/e.jsonl" 3)"
  # safetensors: what cp 2 exports, cp 4 (x pp 1) imports and exports unchanged
  run 2 "${R[@]}" --steps 2 --cp 2 --batch 4 --export "$WORK/a.safetensors" > /dev/null || fail "cp 2 export"
  run 4 "${R[@]}" --steps 0 --cp 4 --batch 4 --init "$WORK/a.safetensors" --export "$WORK/b.safetensors" > /dev/null \
    || fail "cp 4 init"
  cmp -s "$WORK/a.safetensors" "$WORK/b.safetensors" || fail "cp 2 -> cp 4 changed the exported weights"
  echo "cp 2 export -> cp 4 import/export: identical" ;;

bad_flags)
  # NP|ARGS|a word the message must name
  while IFS='|' read -r np args word; do
    out=$(run "$np" "${COMMON[@]}" $args 2>&1 >/dev/null </dev/null); rc=$?
    [ $rc -ne 0 ] || fail "'$args' on $np ranks exited 0"
    lines=$(echo "$out" | grep -c "zeroc train")
    [ "$lines" = 1 ] || fail "'$args' printed $lines zeroc lines: $out"
    echo "$out" | grep -q -- "$word" || fail "'$args': the message does not name '$word': $out"
    echo "'$args' on $np ranks: exit $rc, $(echo "$out" | grep "zeroc train")"
  done <<'LIST'
4|--cp 3 --seq 60|tp x cp x pp
4|--cp 4 --seq 60|2 x
2|--cp 4 --tp 2 --cp-mode ulysses|ulysses
2|--cp 2 --cp-mode bogus|ring
LIST
  ;;
*) fail "unknown test $NAME" ;;
esac
