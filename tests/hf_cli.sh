#!/usr/bin/env bash
# tests/hf_cli.sh - a transformers save_pretrained directory in and out of
# `zeroc train`: --export DIR writes config.json (the model's transformers
# class and shape) and model.safetensors (the same bytes as the one-file
# export of the same run), published whole; --init DIR takes the model and the
# shape from config.json (transformers' own, tests/fixtures/hf_gpt2, too) and
# refuses a flag that contradicts it, naming both values.
# usage: hf_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" FIXTURES TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 FX=$4 NAME=$5
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-hf-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
train() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
key() { grep -q "\"$2\": $3" "$1/config.json" || fail "config.json has no \"$2\": $3: $(cat "$1/config.json")"; }
refused() { # flags... then the words the one-line error must hold
  local want=${*: -1} out
  out=$("$ZEROC" train --device cpu --steps 1 "${@:1:$#-1}" 2>&1) && fail "accepted: ${*:1:$#-1}"
  [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -qF -- "$want" || fail "'$want' not in: $out"
}

case $NAME in
export)
  COMMON=(--model tiny --steps 4 --lr 3e-3 --seed 5)
  train 2 "${COMMON[@]}" --zero 3 --export "$WORK/d" || fail "export to a directory"
  train 2 "${COMMON[@]}" --zero 3 --export "$WORK/f.safetensors" || fail "export to a file"
  [ -f "$WORK/d/config.json" ] && [ -f "$WORK/d/model.safetensors" ] || fail "files: $(ls "$WORK/d")"
  cmp -s "$WORK/d/model.safetensors" "$WORK/f.safetensors" || fail "the directory's weights differ"
  key "$WORK/d" model_type '"gpt2"'; key "$WORK/d" n_layer 2; key "$WORK/d" n_embd 64
  key "$WORK/d" n_head 4; key "$WORK/d" vocab_size 256; key "$WORK/d" n_positions 64
  key "$WORK/d" tie_word_embeddings true; key "$WORK/d" activation_function '"gelu_new"'
  grep -A1 '"architectures"' "$WORK/d/config.json" | grep -q '"GPT2LMHeadModel"' || fail "class"
  # a second export replaces the first whole, leaving nothing beside it
  train 1 "${COMMON[@]}" --export "$WORK/d" || fail "export over the directory"
  [ "$(ls "$WORK")" = "$(printf 'd\nf.safetensors')" ] || fail "left beside it: $(ls "$WORK")"
  [ "$(ls "$WORK/d")" = "$(printf 'config.json\nmodel.safetensors')" ] || fail "in it: $(ls "$WORK/d")"
  echo "config.json + model.safetensors (= the file export), replaced whole" ;;
init)
  train 2 --model tiny --steps 4 --lr 3e-3 --export "$WORK/d" || fail "export"
  train 2 --init "$WORK/d" --steps 0 --export "$WORK/back.safetensors" || fail "--init DIR"
  cmp -s "$WORK/back.safetensors" "$WORK/d/model.safetensors" || fail "--init DIR changed the weights"
  out=$("$ZEROC" train --device cpu --init "$WORK/d" --steps 1 2>&1) || fail "--init DIR: $out"
  echo "$out" | grep -q "custom (2 layers, hidden 64, 4 heads, vocab 256, seq 64)" || fail "shape: $out"
  # transformers' own directory (fp16, `transformer.` names, n_positions 32)
  out=$("$ZEROC" train --device cpu --init "$FX/hf_gpt2" --steps 1 2>&1) || fail "fixture: $out"
  echo "$out" | grep -q "(2 layers, hidden 32, 4 heads, vocab 256, seq 32)" || fail "fixture: $out"
  refused --init "$WORK/d" --layers 3 '--layers 3 contradicts config.json "n_layer" 2'
  refused --init "$WORK/d" --seq 128 '--seq 128: accepted up to config.json "n_positions" 64'
  refused --init "$WORK/d" --model gpt2-124m '--model gpt2-124m (12 layers'
  echo '{"architectures": ["BertModel"]}' > "$WORK/d/config.json"
  refused --init "$WORK/d" 'names no model zeroc has'
  echo "--init DIR: the shape from config.json, the weights bit for bit; contradictions refused" ;;
bad)
  : > "$WORK/plain"
  refused --model tiny --export "$WORK/plain" "is a regular file; accepted a directory"
  mkdir "$WORK/ro" && chmod 500 "$WORK/ro"
  if [ "$(id -u)" != 0 ]; then refused --model tiny --export "$WORK/ro/d" "--export"; fi
  # a directory holding anything but an export's files would be replaced: refused, kept
  mkdir "$WORK/home" && echo keep > "$WORK/home/notes.txt"
  refused --model tiny --export "$WORK/home" "is a directory holding 'notes.txt'"
  [ "$(cat "$WORK/home/notes.txt")" = keep ] || fail "notes.txt changed"
  echo "an export path that is a file (not .safetensors), or a directory of other files, refused before training" ;;
*) fail "unknown case $NAME" ;;
esac
