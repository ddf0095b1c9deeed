#!/usr/bin/env bash
# benchmarks/gpu/largest.sh - the largest GPT zeroc trains on this one GPU (issue 40's
# memory-limited row), without offload and with the optimizer's state (fp32 master
# weights and Adam moments, 12 bytes a parameter) in host memory: a 4096-wide GPT (32
# heads, vocab 50257, seq 2048, batch 1, full recompute, bf16, the ZeRO-3 code path) is
# deepened two layers at a time while `zeroc plan` says it fits the GPU (nvidia-smi's total
# less RESERVE_GIB, default 2: CUDA's context and cuBLASLt's and cuDNN's own, 0.6-0.9 GiB
# measured, and allocator slack) and, with offload, the host (MemAvailable less 8 GiB);
# then it trains STEPS steps (default 3) and prints tokens/s (the median after step 1), MFU,
# the accountant's peak against the prediction and nvidia-smi's most used memory, as a
# markdown row for benchmarks/RESULTS.md. The anchor is ZeRO-Offload's 13B on one 32 GB
# V100, whose host held several times its GPU; a machine whose host memory is below its
# GPU's gains little from offload (the H200 lent here: 128 GiB host, 139 GiB GPU).
# Initialisation draws every parameter on the host (about 35 s for 8.27B on 16 cores), so
# give each run minutes (RUN_S, default 240). Exits 1 when a run fails, 77 without a GPU.
# usage: largest.sh ZEROC_BINARY [MODES...]   (modes: none cpu; default both)
set -uo pipefail
ZEROC=${1:?usage: largest.sh ZEROC_BINARY [none|cpu ...]}
shift
MODES=${*:-none cpu}
STEPS=${STEPS:-3} RUN_S=${RUN_S:-240} RESERVE=${RESERVE_GIB:-2}
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
gpu_gib=$(awk -v m="$gpu_mib" -v r="$RESERVE" 'BEGIN { printf "%.2f", m / 1024 - r }')
host_gib=$(awk '/^MemAvailable/ { printf "%.2f", $2 / 1048576 - 8 }' /proc/meminfo)
shape=(--model custom --hidden 4096 --heads 32 --vocab 50257 --seq 2048 --batch 1 --recompute full)
work=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-largest-XXXXXX")
trap 'rm -rf "$work"' EXIT
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); m=d["layout"]["memory"]; print(d["model"]["params"], m["total"], m["host"], int(m["fits"]))'; }
echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $gpu_gib GiB for zeroc; host: $host_gib GiB available"
echo "| offload | layers | parameters | tokens/s | MFU | peak GiB (predicted) | nvidia-smi most used GiB | host GiB |"
echo "|---|---|---|---|---|---|---|---|"
failed=0
for mode in $MODES; do
  best="" # the deepest that fits: layers params total host
  for ((L = 8; L <= 200; L += 2)); do
    r=$("$ZEROC" plan "${shape[@]}" --layers $L --offload-optimizer "$mode" --gpu-mem "$gpu_gib" --json | json) || break
    read -r p tot host fits <<<"$r"
    awk -v h="$host" -v a="$host_gib" 'BEGIN { exit !(h / 2^30 <= a) }' || fits=0
    [ "$fits" = 1 ] || break
    best="$L $p $tot $host"
  done
  [ -n "$best" ] || { echo "| $mode | none fits | | | | | | |"; continue; }
  read -r L p tot host <<<"$best"
  (while sleep 1; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; done) >"$work/smi.$mode" 2>/dev/null &
  smi=$!
  timeout "$RUN_S" "$ZEROC" train "${shape[@]}" --layers "$L" --offload-optimizer "$mode" --device cuda \
    --dtype bf16 --zero 3 --steps "$STEPS" --lr 1e-4 --metrics "$work/m.$mode.jsonl" >"$work/log.$mode" 2>&1
  rc=$?
  kill $smi 2>/dev/null
  used=$(sort -n "$work/smi.$mode" | tail -1)
  if [ $rc != 0 ]; then
    failed=$((failed + 1))
    echo "| $mode | $L | $(awk -v p="$p" 'BEGIN { printf "%.2fB", p / 1e9 }') | failed (rc $rc) | | predicted $(awk -v t="$tot" 'BEGIN { printf "%.1f", t / 2^30 }') | $(awk -v u="${used:-0}" 'BEGIN { printf "%.1f", u / 1024 }') | |"
    tail -3 "$work/log.$mode" >&2
    continue
  fi
  med() { sed -n "s/.*\"$1\": \\([^,}]*\\).*/\\1/p" "$work/m.$mode.jsonl" | tail -n +2 | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
  peak=$(sed -n 's/.*"peak_device_max": \([0-9]*\).*/\1/p' "$work/m.$mode.jsonl" | sort -g | tail -1)
  printf "| %s | %s | %.2fB | %s | %.1f%% | %.1f (%.1f) | %.1f | %.1f |\n" "$mode" "$L" "$(awk -v p="$p" 'BEGIN { print p / 1e9 }')" \
    "$(med tokens_per_s)" "$(awk -v m="$(med mfu)" 'BEGIN { print 100 * m }')" \
    "$(awk -v b="$peak" 'BEGIN { print b / 2^30 }')" "$(awk -v t="$tot" 'BEGIN { print t / 2^30 }')" \
    "$(awk -v u="${used:-0}" 'BEGIN { print u / 1024 }')" "$(awk -v h="$host" 'BEGIN { print h / 2^30 }')"
done
[ "$failed" = 0 ] || { echo "largest.sh: $failed run(s) failed" >&2; exit 1; }
