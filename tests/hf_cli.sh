#!/usr/bin/env bash
# tests/hf_cli.sh - a transformers save_pretrained directory in and out of
# `zeroc train`: --export DIR writes config.json (the model's transformers
# class and shape) and model.safetensors (the same bytes as the one-file
# export of the same run), published whole; --init DIR takes the model and the
# shape from config.json (transformers' own, tests/fixtures/hf_gpt2, too) and
# refuses a flag that contradicts it, naming both values. The Llama family
# likewise (LlamaForCausalLM, Qwen2ForCausalLM): export -> init bitwise in other
# layouts, sharded exports, transformers' own files (tests/fixtures/hf_llama:
# bf16, sharded; hf_qwen2: fp16) giving transformers' loss, and the refusals.
# usage: hf_cli.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" FIXTURES TEST_NAME
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 FX=$4 NAME=$5
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-hf-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
train() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
key() { grep -q "\"$2\": $3" "$1/config.json" || fail "config.json has no \"$2\": $3: $(cat "$1/config.json")"; }
# the tensor names of safetensors file $1 (its JSON header)
names() { dd if="$1" bs=1 skip=8 count="$(od -An -t u8 -N8 "$1" | tr -d ' ')" 2>/dev/null | tr ',' '\n' | sed -n 's/.*"\([a-z_.0-9]*\)": *{.*/\1/p'; }
# init_same NP DIR FILE ARGS...: --init DIR, no step, exported to a file: bitwise FILE
init_same() {
  local np=$1 dir=$2 want=$3; shift 3
  train "$np" --init "$dir" --steps 0 "$@" --export "$WORK/back.safetensors" || fail "--init $dir $*"
  cmp -s "$WORK/back.safetensors" "$want" || fail "--init $dir $* changed the weights"
}
# fixture_loss DIR NP BATCH ARGS...: zeroc's step-1 loss on the 4 sequences of
# DIR/tokens.bin (global batch 4) is DIR/loss.txt's to 1e-5
fixture_loss() {
  local dir=$1 np=$2 batch=$3; shift 3
  rm -f "$WORK/m.jsonl"
  train "$np" --init "$dir" --seq 16 --batch "$batch" --steps 1 --lr 0 --data "$dir/tokens.bin" \
    --metrics "$WORK/m.jsonl" "$@" || fail "--init $dir $*"
  local got want
  got=$(sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$WORK/m.jsonl") want=$(cat "$dir/loss.txt")
  awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d <= 1e-5 && d >= -1e-5) }' \
    || fail "$dir ($np ranks $*): loss $got, transformers' $want"
  echo "$(basename "$dir") $np ranks $*: loss $got, transformers $want"
}
# llama_case PRESET CLASS: export -> init bitwise in other layouts, sharded too
llama_case() {
  local preset=$1 class=$2
  train 2 --model "$preset" --zero 3 --steps 4 --lr 3e-3 --seed 5 --export "$WORK/d" || fail "export"
  grep -A1 '"architectures"' "$WORK/d/config.json" | grep -q "\"$class\"" || fail "class"
  key "$WORK/d" num_hidden_layers 2; key "$WORK/d" hidden_size 64; key "$WORK/d" num_key_value_heads 2
  key "$WORK/d" max_position_embeddings 64; key "$WORK/d" hidden_act '"silu"'
  local w="$WORK/d/model.safetensors"
  names "$w" | grep -qx "model.layers.1.self_attn.q_proj.weight" || fail "names: $(names "$w")"
  names "$w" | grep -q "qkv_proj\|gate_up" && fail "fused names in the export: $(names "$w")"
  init_same 1 "$WORK/d" "$w"
  init_same 2 "$WORK/d" "$w" --tp 2
  init_same 2 "$WORK/d" "$w" --pp 2
  # a sharded export: the shards and their index, read back bitwise
  ZEROC_EXPORT_SHARD_BYTES=100000 train 2 --init "$WORK/d" --steps 0 --tp 2 --export "$WORK/s" \
    || fail "sharded export"
  local n
  n=$(ls "$WORK/s" | grep -c '^model-0000[1-9]-of-0000[2-9]\.safetensors$')
  [ -f "$WORK/s/model.safetensors.index.json" ] && [ ! -e "$WORK/s/model.safetensors" ] && [ "$n" -ge 2 ] \
    || fail "shards: $(ls "$WORK/s")"
  for f in $(sed -n 's/.*: "\(model-.*safetensors\)".*/\1/p' "$WORK/s/model.safetensors.index.json" | sort -u); do
    case $f in *-of-0000$n.safetensors) [ -f "$WORK/s/$f" ] || fail "index names $f: $(ls "$WORK/s")" ;;
    *) fail "index names $f, not one of $n shards" ;; esac
  done
  init_same 1 "$WORK/s" "$w"
  init_same 2 "$WORK/s" "$w" --pp 2
}
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
  # a sharded export (shards and their index) reads back bitwise
  ZEROC_EXPORT_SHARD_BYTES=30000 train 2 --init "$WORK/d" --steps 0 --export "$WORK/s" || fail "shards"
  [ -f "$WORK/s/model.safetensors.index.json" ] && [ ! -e "$WORK/s/model.safetensors" ] \
    && [ "$(ls "$WORK/s" | grep -c '^model-000[0-9][0-9]-of-000[0-9][0-9]\.safetensors$')" -ge 2 ] \
    || fail "shards: $(ls "$WORK/s" | tr '\n' ' ')"
  init_same 1 "$WORK/s" "$WORK/d/model.safetensors"
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
llama)
  llama_case llama-tiny LlamaForCausalLM
  key "$WORK/d" tie_word_embeddings false; key "$WORK/d" rope_type '"llama3"'; key "$WORK/d" attention_bias false
  names "$WORK/d/model.safetensors" | grep -qx lm_head.weight || fail "no lm_head.weight (untied)"
  out=$("$ZEROC" train --device cpu --init "$WORK/d" --steps 1 2>&1) || fail "--init DIR: $out"
  echo "$out" | grep -q "llama-custom (2 layers, hidden 64, 4 heads, 2 kv heads, ffn 160, vocab 256, seq 64)" || fail "shape: $out"
  echo "llama-tiny: LlamaForCausalLM names, export -> init bitwise at tp 2, pp 2, from shards" ;;
qwen)
  llama_case qwen-tiny Qwen2ForCausalLM
  key "$WORK/d" tie_word_embeddings true; key "$WORK/d" model_type '"qwen2"'
  names "$WORK/d/model.safetensors" | grep -q lm_head && fail "a tied head exported"
  names "$WORK/d/model.safetensors" | grep -qx "model.layers.0.self_attn.k_proj.bias" || fail "no k bias"
  echo "qwen-tiny: Qwen2ForCausalLM names (q/k/v biases, tied head), export -> init bitwise at tp 2, pp 2, from shards" ;;
fixtures)
  # transformers' own save_pretrained output (make_hf_llama.py): bf16 shards with llama3
  # rope scaling and GQA; fp16 Qwen2 with biases and a tied head
  for np_args in "1 4" "2 4 --tp 2" "2 2 --pp 2" "2 2 --zero 3"; do
    fixture_loss "$FX/hf_llama" $np_args
    fixture_loss "$FX/hf_qwen2" $np_args
  done ;;
llama_bad)
  train 1 --model llama-tiny --steps 1 --export "$WORK/d" || fail "export"
  refused --init "$WORK/d" --kv-heads 4 '--kv-heads 4 contradicts config.json "num_key_value_heads" 2'
  refused --init "$WORK/d" --seq 128 '--seq 128: accepted up to config.json "max_position_embeddings" 64'
  refused --init "$WORK/d" --model qwen-tiny '--model qwen-tiny (2 layers, hidden 64, 4 heads, 2 kv heads, ffn 192'
  refused --init "$WORK/d" --model tiny '--model tiny contradicts'
  edit() { mkdir -p "$WORK/e"; cp "$WORK/d/model.safetensors" "$WORK/e/"; sed "$1" "$WORK/d/config.json" > "$WORK/e/config.json"; }
  edit 's/"hidden_act": "silu"/"hidden_act": "gelu"/'
  refused --init "$WORK/e" 'config.json "hidden_act" "gelu": accepted silu'
  edit 's/"attention_bias": false/"attention_bias": true/'
  refused --init "$WORK/e" 'config.json "attention_bias" true'
  edit 's/"mlp_bias": false/"mlp_bias": true/'
  refused --init "$WORK/e" 'config.json "mlp_bias" true'
  edit 's/"head_dim": 16/"head_dim": 32/'
  refused --init "$WORK/e" 'config.json "head_dim" 32'
  edit 's/"llama3"/"yarn"/g'
  refused --init "$WORK/e" 'config.json rope_type "yarn": accepted default or llama3'
  edit 's/"model_type": "llama"/"model_type": "qwen2", "use_sliding_window": true/; s/LlamaForCausalLM/Qwen2ForCausalLM/'
  refused --init "$WORK/e" 'config.json "use_sliding_window" true'
  edit 's/"intermediate_size": 160/"intermediate_size": 96/'
  refused --init "$WORK/e" "tensor 'model.layers.0.mlp.gate_proj.weight' has shape (160, 64), this model needs (96, 64)"
  edit 's/"num_hidden_layers": 2/"num_hidden_layers": 3/'
  refused --init "$WORK/e" "has no tensor 'model.layers.2.input_layernorm.weight'"
  edit 's/"tie_word_embeddings": false/"tie_word_embeddings": true/'
  refused --init "$WORK/e" "lm_head.weight differs from model.embed_tokens.weight"
  # an index naming a shard that lacks the tensor
  ZEROC_EXPORT_SHARD_BYTES=100000 train 1 --init "$WORK/d" --steps 0 --export "$WORK/s" || fail "shards"
  sed -i 's/"model.norm.weight": "model-0000[0-9]/"model.norm.weight": "model-00001/' "$WORK/s/model.safetensors.index.json"
  refused --init "$WORK/s" "maps tensor 'model.norm.weight' to 'model-00001-of-0000"
  # an earlier sharded export is replaced by a new one
  train 1 --model llama-tiny --steps 1 --export "$WORK/s" || fail "export over a sharded one"
  [ "$(ls "$WORK/s")" = "$(printf 'config.json\nmodel.safetensors')" ] || fail "in it: $(ls "$WORK/s")"
  echo "config.json keys zeroc cannot honour, contradicting flags, missing and mis-shaped tensors: one line each" ;;
*) fail "unknown case $NAME" ;;
esac
