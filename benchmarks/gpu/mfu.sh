#!/usr/bin/env bash
# benchmarks/gpu/mfu.sh - tokens/s, MFU and peak memory of `zeroc train` on one GPU
# (world 1, bf16, ZeRO-3 code path) for gpt2-124m, gpt2-350m and a ~1.3B GPT
# (24 layers, hidden 2048, 16 heads, seq 2048); and, where PyTorch is installed, the
# same model in PyTorch (benchmarks/gpu/torch_gpt.py) timed side by side in the same
# run, with the ratio. Prints a markdown table for benchmarks/RESULTS.md.
# usage: mfu.sh ZEROC_BINARY [STEPS]
set -uo pipefail
ZEROC=${1:?usage: mfu.sh ZEROC_BINARY [STEPS]}
STEPS=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/.*\"$2\": \\([^,}]*\\).*/\\1/p" "$1" | tail -n +6; }   # steps after 5 of warm-up
have_torch=0
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && have_torch=1
echo "| model | batch x seq | zeroc tokens/s | zeroc MFU | zeroc peak GiB | PyTorch tokens/s | zeroc / PyTorch |"
echo "|---|---|---|---|---|---|---|"
run() {
  local name=$1 batch=$2; shift 2
  "$ZEROC" train "$@" --device cuda --dtype bf16 --zero 3 --batch "$batch" --steps "$STEPS" \
    --lr 1e-4 --quiet --metrics "$work/$name.jsonl" >/dev/null || { echo "| $name | failed | | | | | |"; return; }
  local tps mfu peak
  tps=$(field "$work/$name.jsonl" tokens_per_s | median)
  mfu=$(field "$work/$name.jsonl" mfu | median)
  peak=$(field "$work/$name.jsonl" peak_device_max | sort -g | tail -1)
  local ttps="n/a" ratio="n/a"
  if [ $have_torch = 1 ]; then
    ttps=$(python3 "$here/torch_gpt.py" "$@" --batch "$batch" --steps "$STEPS" 2>/dev/null | tail -1)
    [ -n "$ttps" ] && ratio=$(awk -v a="$tps" -v b="$ttps" 'BEGIN { printf "%.2f", a / b }')
  fi
  local seq; seq=$(echo "$@" | sed -n 's/.*--seq \([0-9]*\).*/\1/p'); seq=${seq:-1024}
  awk -v n="$name" -v b="$batch" -v s="$seq" -v t="$tps" -v m="$mfu" -v p="$peak" -v tt="$ttps" -v r="$ratio" \
    'BEGIN { printf "| %s | %s x %s | %.0f | %.1f%% | %.1f | %s | %s |\n", n, b, s, t, 100 * m, p / 2^30, tt, r }'
}
run gpt2-124m 16 --model gpt2-124m
run gpt2-350m 8 --model gpt2-350m
run gpt-1.3b 4 --model custom --layers 24 --hidden 2048 --heads 16 --vocab 50257 --seq 2048
