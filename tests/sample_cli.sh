#!/usr/bin/env bash
# tests/sample_cli.sh - `zeroc sample` end to end: deterministic for a seed,
# greedy reproducible and equal to top-k 1, the KV cache changing no token,
# --resume under the checkpoint's layout equal to --init of the export, bad
# flags refused with one line; and `train --sample-every` printing samples on
# 2 ranks (ZeRO-3) with the losses of the run without it, bit for bit; the
# Llama family (llama-tiny, qwen-tiny) through checkpoints.
# usage: sample_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-sample-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
train() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
COMMON=(--model tiny --lr 3e-3 --seed 11)
S=("$ZEROC" sample --tokenizer bytes --prompt "The cat" --tokens 48)

case $NAME in
init)
  train 1 "${COMMON[@]}" --steps 20 --export "$WORK/m.safetensors" || fail "training"
  a=$("${S[@]}" --init "$WORK/m.safetensors" --seed 3) || fail "sample exited $?"
  b=$("${S[@]}" --init "$WORK/m.safetensors" --seed 3) || fail "second sample"
  [ "$a" = "$b" ] || fail "seed 3 gave two different texts"
  case "$a" in "The cat"*) ;; *) fail "the output does not start with the prompt: $a" ;; esac
  c=$("${S[@]}" --init "$WORK/m.safetensors" --seed 4) || fail "seed 4"
  [ "$a" != "$c" ] || fail "seeds 3 and 4 gave the same text"
  d=$("${S[@]}" --init "$WORK/m.safetensors" --seed 3 --no-cache) || fail "--no-cache"
  [ "$a" = "$d" ] || fail "the KV cache changed the text"
  g1=$("${S[@]}" --init "$WORK/m.safetensors" --temperature 0 --seed 1) || fail "greedy"
  g2=$("${S[@]}" --init "$WORK/m.safetensors" --temperature 0 --seed 2) || fail "greedy 2"
  k1=$("${S[@]}" --init "$WORK/m.safetensors" --top-k 1 --seed 5) || fail "top-k 1"
  [ "$g1" = "$g2" ] || fail "greedy depends on the seed"
  [ "$g1" = "$k1" ] || fail "top-k 1 is not greedy"
  echo "seeded, greedy and top-k 1 reproducible; cache changes nothing" ;;

resume)
  # saved by 2 ranks (ZeRO-3): sampled under that layout and on 1 rank
  train 2 "${COMMON[@]}" --steps 12 --save "$WORK/ck" --export "$WORK/m.safetensors" || fail "training"
  a=$("${S[@]}" --init "$WORK/m.safetensors" --temperature 0) || fail "--init"
  b=$($MPIRUN $FLAGS -np 2 "${S[@]}" --resume "$WORK/ck" --temperature 0) || fail "--resume on 2 ranks"
  c=$("${S[@]}" --resume "$WORK/ck" --temperature 0) || fail "--resume on 1 rank"
  [ "$a" = "$b" ] || fail "--resume (2 ranks) differs from --init: '$b' vs '$a'"
  [ "$a" = "$c" ] || fail "--resume (1 rank) differs from --init"
  out=$("${S[@]}" --resume "$WORK/ck" --layers 3 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "a checkpoint of another shape: exit $rc"
  echo "$out" | grep -q -e "model.layers" -e "units saved" || fail "no reason given: $out"
  # a pipeline checkpoint (pp 2) under its layout: the same seeded text as its export
  train 2 "${COMMON[@]}" --pp 2 --steps 4 --save "$WORK/pp" --export "$WORK/p.safetensors" || fail "pp training"
  a=$("${S[@]}" --init "$WORK/p.safetensors" --seed 3) || fail "--init of the pp export"
  b=$($MPIRUN $FLAGS -np 2 "${S[@]}" --pp 2 --resume "$WORK/pp" --seed 3) || fail "--resume --pp 2"
  [ "$a" = "$b" ] || fail "--resume --pp 2 differs from --init"
  echo "--resume on 2 and 1 ranks, and with --pp 2, equals --init" ;;

bad_flags)
  train 1 --model tiny --steps 1 --export "$WORK/m.safetensors" || fail "training"
  I=(--init "$WORK/m.safetensors")
  n=0
  while IFS='|' read -r flag args; do
    # shellcheck disable=SC2086
    out=$("$ZEROC" sample $args 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "'$args' exited $rc, want 2 ($out)"
    [ "$(echo "$out" | grep -c "zeroc sample")" = 1 ] || fail "'$args': not one line: $out"
    echo "$out" | grep -q -- "$flag" || fail "'$args': message does not name $flag: $out"
    n=$((n + 1))
  done <<LIST
--temperature|${I[*]} --tokenizer bytes --prompt hi --temperature -0.5
--top-k|${I[*]} --tokenizer bytes --prompt hi --top-k -1
--tokens|${I[*]} --tokenizer bytes --prompt hi --tokens 0
--tokens|${I[*]} --tokenizer bytes --prompt hi --tokens 2000000
--prompt|${I[*]} --tokenizer bytes
--resume|${I[*]} --resume $WORK --tokenizer bytes --prompt hi
--tokenizer|${I[*]} --prompt hi
--tokenizer|${I[*]} --prompt hi --tokenizer $WORK/none.json
--init|--init $WORK/none.safetensors --tokenizer bytes --prompt hi
--vocab|${I[*]} --tokenizer bytes --prompt hi --vocab 100
--bogus|${I[*]} --tokenizer bytes --prompt hi --bogus
LIST
  echo "$n bad invocations: exit 2, one line each" ;;

train_sample_every)
  # 2 ranks, ZeRO-3: samples every 5 steps, and the losses of the run without them
  out=$(train 2 "${COMMON[@]}" --zero 3 --steps 10 --sample-every 5 --sample-tokens 16 \
        --tokenizer bytes --metrics "$WORK/a.jsonl") || fail "run with samples exited $?"
  train 2 "${COMMON[@]}" --zero 3 --steps 10 --metrics "$WORK/b.jsonl" || fail "run without"
  [ "$(echo "$out" | grep -c '^step 5 sample')" = 1 ] || fail "no single step 5 sample: $out"
  [ "$(echo "$out" | grep -c '^step 10 sample')" = 1 ] || fail "no single step 10 sample: $out"
  field "$WORK/a.jsonl" loss > "$WORK/a.loss"; field "$WORK/b.jsonl" loss > "$WORK/b.loss"
  [ "$(wc -l < "$WORK/a.loss")" = 10 ] || fail "expected 10 losses"
  cmp -s "$WORK/a.loss" "$WORK/b.loss" || { paste "$WORK/a.loss" "$WORK/b.loss"; fail "sampling changed the losses"; }
  # the sample's gathers are not counted in the next step's communication
  field "$WORK/a.jsonl" comm_bytes > "$WORK/a.cb"; field "$WORK/b.jsonl" comm_bytes > "$WORK/b.cb"
  cmp -s "$WORK/a.cb" "$WORK/b.cb" || { paste "$WORK/a.cb" "$WORK/b.cb"; fail "sampling changed comm_bytes"; }
  out=$(train 1 --steps 2 --sample-every 1 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] && echo "$out" | grep -q -- "--tokenizer" || fail "--sample-every without a tokenizer: $rc $out"
  # without --tokenizer: the one `zeroc data` recorded beside the shards
  for i in $(seq 1 200); do echo "line $i of a small text for the sampler test, with some words."; done > "$WORK/t.txt"
  "$ZEROC" data --tokenizer bytes --out "$WORK/shards" --quiet "$WORK/t.txt" > /dev/null || fail "zeroc data"
  out=$(train 1 --steps 4 --seq 32 --data "$WORK/shards" --sample-every 2 --sample-tokens 8) || fail "data tokenizer run"
  [ "$(echo "$out" | grep -c '^step [24] sample')" = 2 ] || fail "no samples with the data's tokenizer: $out"
  # --sample-prompt: the sample starts with it; refused without --sample-every
  out=$(train 1 --steps 2 --seq 32 --data "$WORK/shards" --sample-every 2 --sample-tokens 8 \
        --sample-prompt "line 7 of") || fail "--sample-prompt run"
  echo "$out" | grep -q '^step 2 sample (8 tokens): line 7 of' || fail "sample does not start with the prompt: $out"
  out=$(train 1 --steps 2 --sample-prompt hi 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] && echo "$out" | grep -q -- "--sample-every" || fail "--sample-prompt alone: $rc $out"
  echo "2 samples printed; 10 losses bitwise those of the run without sampling; the data's tokenizer by default; --sample-prompt" ;;
transformers)
  # a GPT2LMHeadModel saved by transformers (fp16, `transformer.` names, no lm_head,
  # n_positions 32) sampled at --seq 16: transformers' own greedy tokens (make_hf_gpt2.py)
  fx=$(dirname "$0")/fixtures/hf_gpt2
  got=$("$ZEROC" sample --model custom --layers 2 --hidden 32 --heads 4 --vocab 256 --seq 16 \
        --init "$fx/model.safetensors" --tokenizer bytes --prompt "The cat sat on" --tokens 20 \
        --temperature 0 | head -c 34 | od -An -tu1 | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
  [ "$got" = "$(cat "$fx/expected.txt")" ] || fail "ids '$got', transformers '$(cat "$fx/expected.txt")'"
  echo "20 greedy tokens equal transformers' (window slid past 16)" ;;

init_shorter_seq)
  # a file of 64 positions trained at --seq 32: export writes all 64 rows back, unchanged
  train 1 "${COMMON[@]}" --steps 3 --export "$WORK/a.safetensors" || fail "training at seq 64"
  train 2 "${COMMON[@]}" --seq 32 --steps 0 --init "$WORK/a.safetensors" --export "$WORK/b.safetensors" \
    || fail "--init at --seq 32"
  cmp -s "$WORK/a.safetensors" "$WORK/b.safetensors" || fail "export at --seq 32 changed the file"
  "${S[@]}" --seq 32 --init "$WORK/a.safetensors" > /dev/null || fail "sample at --seq 32"
  echo "64-position file through --seq 32 exported byte for byte" ;;
sigint)
  # tokens are printed as they come; SIGINT stops the generation there: the
  # text so far stays printed (a prefix of the seed's text), one line, exit 130
  train 1 "${COMMON[@]}" --steps 5 --export "$WORK/m.safetensors" || fail "training"
  "${S[@]}" --init "$WORK/m.safetensors" --seed 3 --no-cache --tokens 100000 > "$WORK/out" 2> "$WORK/err" &
  sp=$!
  for _ in $(seq 300); do [ "$(wc -c < "$WORK/out")" -ge 200 ] && break; sleep 0.1; done
  [ "$(wc -c < "$WORK/out")" -ge 200 ] || { kill -9 $sp; fail "no tokens printed while generating"; }
  kill -INT $sp
  for _ in $(seq 100); do kill -0 $sp 2> /dev/null || break; sleep 0.1; done
  kill -0 $sp 2> /dev/null && { kill -9 $sp; fail "still generating 10 s after SIGINT"; }
  wait $sp; rc=$?
  [ $rc = 130 ] || { cat "$WORK/err"; fail "exit $rc after SIGINT, expected 130"; }
  k=$(sed -n 's/^zeroc sample: stopped by SIGINT after \([0-9]*\) of 100000 tokens$/\1/p' "$WORK/err")
  [ -n "$k" ] || { cat "$WORK/err"; fail "no line saying where it stopped"; }
  # the bytes tokenizer: one byte per token, and the same text as a run of k tokens
  [ "$(wc -c < "$WORK/out")" = $((7 + k + 1)) ] || fail "$(wc -c < "$WORK/out") bytes printed for $k tokens"
  "${S[@]}" --init "$WORK/m.safetensors" --seed 3 --no-cache --tokens "$k" > "$WORK/ref" || fail "the $k-token run"
  cmp -s "$WORK/out" "$WORK/ref" || fail "the interrupted text is not the seed's first $k tokens"
  echo "SIGINT after $k tokens: printed as they came, exit 130, the seed's text so far" ;;
llama)
  # llama-tiny (grouped-query, llama3 rope scaling, untied head) on 2 ranks (ZeRO-3): samples
  # during training, then its checkpoint sampled on 1 and 2 ranks, with and without the cache
  out=$(train 2 --model llama-tiny --lr 3e-3 --seed 11 --zero 3 --steps 10 --sample-every 5 \
        --sample-tokens 16 --tokenizer bytes --save "$WORK/ck") || fail "llama-tiny run exited $?"
  [ "$(echo "$out" | grep -c '^step 5 sample')" = 1 ] || fail "no single step 5 sample: $out"
  [ "$(echo "$out" | grep -c '^step 10 sample')" = 1 ] || fail "no single step 10 sample: $out"
  L=("$ZEROC" sample --model llama-tiny --tokenizer bytes --prompt "The cat" --tokens 80)
  a=$("${L[@]}" --resume "$WORK/ck" --seed 3) || fail "--resume exited $?"
  case "$a" in "The cat"*) ;; *) fail "the output does not start with the prompt: $a" ;; esac
  b=$($MPIRUN $FLAGS -np 2 "${L[@]}" --resume "$WORK/ck" --seed 3) || fail "--resume on 2 ranks"
  [ "$a" = "$b" ] || fail "--resume on 2 ranks differs from 1 rank: '$b' vs '$a'"
  d=$("${L[@]}" --resume "$WORK/ck" --seed 3 --no-cache) || fail "--no-cache"
  [ "$a" = "$d" ] || fail "the KV cache changed the text (80 tokens: the 64-token window slid)"
  c=$("${L[@]}" --resume "$WORK/ck" --seed 4) || fail "seed 4"
  [ "$a" != "$c" ] || fail "seeds 3 and 4 gave the same text"
  # qwen-tiny (q/k/v biases, tied head) saved by tp 2 (kv heads split): sampled on 1 rank and
  # under tp 2, the same greedy text
  train 2 --model qwen-tiny --lr 3e-3 --seed 11 --tp 2 --steps 4 --save "$WORK/tp" || fail "qwen tp 2"
  Q=("$ZEROC" sample --model qwen-tiny --tokenizer bytes --prompt "The cat" --tokens 24 --temperature 0)
  a=$("${Q[@]}" --resume "$WORK/tp") || fail "qwen --resume on 1 rank"
  b=$($MPIRUN $FLAGS -np 2 "${Q[@]}" --tp 2 --resume "$WORK/tp") || fail "qwen --resume --tp 2"
  [ "$a" = "$b" ] || fail "qwen: --tp 2 differs from 1 rank: '$b' vs '$a'"
  # refused in one line: another shape, a GPT-2 model with Llama flags, bad kv heads
  n=0
  while IFS='|' read -r flag args; do
    # shellcheck disable=SC2086
    out=$("$ZEROC" sample --tokenizer bytes --prompt hi $args 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "'$args' exited $rc, want 2 ($out)"
    [ "$(echo "$out" | grep -c "zeroc sample")" = 1 ] || fail "'$args': not one line: $out"
    echo "$out" | grep -q -- "$flag" || fail "'$args': message does not name $flag: $out"
    n=$((n + 1))
  done <<LIST
model shape|--model llama-tiny --kv-heads 1 --resume $WORK/ck
--kv-heads|--model tiny --kv-heads 2 --resume $WORK/ck
--ffn|--model tiny --ffn 64 --resume $WORK/ck
--kv-heads 3|--model llama-tiny --kv-heads 3 --resume $WORK/ck
LIST
  echo "llama-tiny: samples in training; --resume on 1 and 2 ranks equal, cache changes nothing; qwen-tiny tp 2 = 1 rank; $n refusals" ;;
llama_transformers)
  # a LlamaForCausalLM (GQA, llama3 rope scaling, untied) and a Qwen2ForCausalLM (q/k/v
  # biases, tied) saved by transformers in fp16 (make_hf_llama_sample.py): transformers' own 56
  # greedy tokens, past the 64-token window
  for m in llama-tiny:hf_llama_tiny qwen-tiny:hf_qwen_tiny; do
    fx=$(dirname "$0")/fixtures/${m#*:}
    got=$("$ZEROC" sample --model "${m%%:*}" --init "$fx/model.safetensors" --tokenizer bytes \
          --prompt "The cat sat on" --tokens 56 --temperature 0 | head -c 70 | od -An -tu1 |
          tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
    [ "$got" = "$(cat "$fx/expected.txt")" ] || fail "${m%%:*}: ids '$got', transformers '$(cat "$fx/expected.txt")'"
    # the directory itself: the model and shape from its config.json
    got=$("$ZEROC" sample --init "$fx" --tokenizer bytes --prompt "The cat sat on" --tokens 56 \
          --temperature 0 | head -c 70 | od -An -tu1 | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
    [ "$got" = "$(cat "$fx/expected.txt")" ] || fail "--init ${m#*:}/: ids '$got', transformers '$(cat "$fx/expected.txt")'"
  done
  out=$("$ZEROC" sample --init "$(dirname "$0")/fixtures/hf_llama_tiny" --heads 2 --tokenizer bytes --prompt x 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q "its config.json gives the shape" || fail "--init DIR --heads 2: exit $rc: $out"
  echo "llama-tiny and qwen-tiny: 56 greedy tokens equal transformers' (window slid past 64), from the file and from the directory" ;;
*) fail "unknown test $NAME" ;;
esac
