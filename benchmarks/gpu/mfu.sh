#!/usr/bin/env bash
# benchmarks/gpu/mfu.sh - tokens/s, MFU and peak memory of `zeroc train` on one GPU
# (world 1, bf16, ZeRO-3 code path) for gpt2-124m, gpt2-350m and a ~1.3B GPT
# (24 layers, hidden 2048, 16 heads, seq 2048); and, where PyTorch is installed, the
# same model in PyTorch (benchmarks/gpu/torch_gpt.py: bf16 autocast, SDPA, fused AdamW),
# eager and torch.compile, timed side by side in the same run, with the ratios. Prints a
# markdown table for benchmarks/RESULTS.md; each run's log goes to $LOGDIR (default: a
# temporary folder, removed). Exits 1 when a zeroc run failed (its row says "failed"),
# so a lease script that runs it fails with it; a missing PyTorch only empties its columns.
# usage: mfu.sh ZEROC_BINARY [STEPS]
#   MODELS="gpt2-124m gpt2-350m gpt-1.3b llama3.2-1b"  which rows, in this order
#   ZEROC_FLAGS="..."                      extra flags for zeroc train
#   TORCH=eager,compile | eager | none     which PyTorch rows
set -uo pipefail
ZEROC=${1:?usage: mfu.sh ZEROC_BINARY [STEPS]}
STEPS=${2:-30}
MODELS=${MODELS:-gpt2-124m gpt2-350m gpt-1.3b}
TORCH=${TORCH:-eager,compile}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cudnn_env.sh" # cuDNN 9 on LD_LIBRARY_PATH for zeroc's attention (and said which)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=${LOGDIR:-$work}
mkdir -p "$logs"
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/.*\"$2\": \\([^,}]*\\).*/\\1/p" "$1" | tail -n +6; }   # steps after 5 of warm-up
have_torch=0
[ "$TORCH" != none ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && have_torch=1
gib() { awk -v b="$1" 'BEGIN { if (b == "" || b == "n/a") print "n/a"; else printf "%.1f", b / 2^30 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
torch_run() { # torch_run NAME MODE ARGS... -> "tokens/s peak_bytes" or "n/a n/a"
  local name=$1 mode=$2; shift 2
  local extra=""; [ "$mode" = compile ] && extra=--compile
  local out
  out=$(python3 "$here/torch_gpt.py" "$@" --steps "$STEPS" $extra 2>"$logs/$name.torch-$mode.err" | tail -1)
  [ -n "$out" ] && echo "$out" || echo "n/a n/a"
}
echo "| model | batch x seq | zeroc tokens/s | zeroc MFU | zeroc peak GiB | PyTorch eager tokens/s | eager peak GiB | torch.compile tokens/s | zeroc / eager | zeroc / compile |"
echo "|---|---|---|---|---|---|---|---|---|---|"
failed=0
run() {
  local name=$1 batch=$2; shift 2
  case " $MODELS " in *" $name "*) ;; *) return ;; esac
  local seq; seq=$(echo "$@" | sed -n 's/.*--seq \([0-9]*\).*/\1/p'); seq=${seq:-1024}
  local tps="" mfu=0 peak=""
  # shellcheck disable=SC2086
  if "$ZEROC" train "$@" --device cuda --dtype bf16 --zero 3 --batch "$batch" --steps "$STEPS" \
      --lr 1e-4 --metrics "$work/$name.jsonl" ${ZEROC_FLAGS:-} >"$logs/$name.zeroc.log" 2>&1; then
    tps=$(field "$work/$name.jsonl" tokens_per_s | median)
    mfu=$(field "$work/$name.jsonl" mfu | median)
    peak=$(field "$work/$name.jsonl" peak_device_max | sort -g | tail -1)
    # the planner's prediction against the accountant, every tag (cuDNN's workspace
    # included): said on stderr for the lease's logs, not a failure
    local mpeak mpred
    mpeak=$(tail -1 "$work/$name.jsonl" | sed -n 's/.*"peak_by_tag": {\([^}]*\)}.*/\1/p')
    mpred=$(tail -1 "$work/$name.jsonl" | sed -n 's/.*"predicted_by_tag": {\([^}]*\)}.*/\1/p')
    if [ -n "$mpeak" ] && [ "$mpeak" = "$mpred" ]; then
      echo "mfu.sh: $name: memory measured = planned {$mpeak}" >&2
    else
      echo "mfu.sh: $name: memory measured {$mpeak} DIFFERS from planned {$mpred}" >&2
    fi
  else
    failed=$((failed + 1))
    echo "mfu.sh: zeroc failed on $name; the end of its log:" >&2
    tail -5 "$logs/$name.zeroc.log" >&2
  fi
  local e="n/a n/a" c="n/a n/a"
  if [ $have_torch = 1 ]; then
    e=$(torch_run "$name" eager "$@" --batch "$batch")
    case $TORCH in *compile*) c=$(torch_run "$name" compile "$@" --batch "$batch") ;; esac
  fi
  local etps epeak ctps
  read -r etps epeak <<<"$e"
  read -r ctps _ <<<"$c"
  printf "| %s | %s x %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$name" "$batch" "$seq" \
    "${tps:-failed}" "$(awk -v m="$mfu" 'BEGIN { printf "%.1f%%", 100 * m }')" "$(gib "$peak")" \
    "$etps" "$(gib "$epeak")" "$ctps" "$(ratio "$tps" "$etps")" "$(ratio "$tps" "$ctps")"
}
# the rows in MODELS' order (a lease puts the most valuable first)
for m in $MODELS; do
  case $m in
    gpt2-124m) run gpt2-124m 16 --model gpt2-124m ;;
    gpt2-350m) run gpt2-350m 8 --model gpt2-350m ;;
    gpt-1.3b) run gpt-1.3b 4 --model custom --layers 24 --hidden 2048 --heads 16 --vocab 50257 --seq 2048 ;;
    llama3.2-1b) run llama3.2-1b 2 --model llama3.2-1b --seq 2048 ;;
    *) echo "mfu.sh: unknown model '$m' in MODELS: accepted gpt2-124m, gpt2-350m, gpt-1.3b, llama3.2-1b" >&2; exit 2 ;;
  esac
done
[ "$failed" = 0 ] || { echo "mfu.sh: $failed zeroc run(s) failed" >&2; exit 1; }
