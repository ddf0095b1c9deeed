#!/usr/bin/env bash
# benchmarks/offload_capacity.sh - what offload buys: (1) the largest GPT (layers of
# hidden 256) that trains under a per-rank device-memory cap (ZEROC_DEVICE_MEM_LIMIT)
# with the optimizer and parameters on the device, in host memory, or on NVMe; (2) the
# step time of one model in each mode, medians side by side in one run.
# usage: offload_capacity.sh ZEROC_BINARY NVME_DIR [RANKS] [CAP_MIB]
set -uo pipefail
ZEROC=${1:?usage: offload_capacity.sh ZEROC_BINARY NVME_DIR [RANKS] [CAP_MIB]}
NVME=${2:?nvme dir}
NP=${3:-4}
CAP=${4:-48}
flags=(--oversubscribe --bind-to none); [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
shape=(--model custom --hidden 256 --heads 8 --vocab 512 --seq 128 --batch 2 --zero 3)
modes=("none|" "optimizer cpu|--offload-optimizer cpu" "optimizer nvme|--offload-optimizer nvme --nvme-dir $NVME"
       "optimizer + params nvme|--offload-optimizer nvme --offload-params nvme --nvme-dir $NVME")
fits() { # layers, mode flags
  ZEROC_DEVICE_MEM_LIMIT=$((CAP * 1048576)) mpirun "${flags[@]}" -np "$NP" "$ZEROC" train "${shape[@]}" \
    --layers "$1" --steps 2 --quiet $2 >/dev/null 2>&1
}
echo "## largest model under a ${CAP} MiB per-rank device cap ($NP ranks, ZeRO-3, hidden 256)"
echo "| offload | largest layers that train | parameters |"
echo "|---|---|---|"
for m in "${modes[@]}"; do
  name=${m%%|*} f=${m#*|}
  lo=0 hi=1
  while fits $hi "$f" && [ $hi -lt 1024 ]; do lo=$hi; hi=$((hi * 2)); done
  while [ $((hi - lo)) -gt 1 ]; do mid=$(((lo + hi) / 2)); if fits $mid "$f"; then lo=$mid; else hi=$mid; fi; done
  params=$(awk -v L=$lo 'BEGIN { C = 256; printf "%.1fM", (512 * C + 128 * C + L * (12 * C * C + 13 * C) + 2 * C) / 1e6 }')
  echo "| $name | $lo | $params |"
done
echo
echo "## step time, 8 layers of hidden 256 ($NP ranks, ZeRO-3), median of 20 steps after 5"
echo "| offload | step ms | vs device |"
echo "|---|---|---|"
base=0
for m in "${modes[@]}"; do
  name=${m%%|*} f=${m#*|}
  mpirun "${flags[@]}" -np "$NP" "$ZEROC" train "${shape[@]}" --layers 8 --steps 25 --quiet $f \
    --metrics "$work/s.jsonl" >/dev/null 2>&1 || { echo "| $name | failed | |"; continue; }
  med=$(sed -n 's/.*"step_ms": \([^,]*\),.*/\1/p' "$work/s.jsonl" | tail -n +6 | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  [ "$base" = 0 ] && base=$med
  echo "| $name | $med | $(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.2fx", a / b }') |"
done
