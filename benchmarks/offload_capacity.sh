#!/usr/bin/env bash
# benchmarks/offload_capacity.sh - what offload buys, for a GPT whose model states dominate
# its device memory (layers of hidden 256, seq 32, micro-batch 1, full recompute, ZeRO-3):
#   (1) the peak device memory per rank of one model (32 layers) with the optimizer and
#       parameters on the device, in host memory or on NVMe, measured and predicted;
#   (2) the largest model (layers) that trains under a per-rank device cap
#       (ZEROC_DEVICE_MEM_LIMIT, CAP_MIB) in each mode;
#   (3) the step time of the 32-layer model in each mode, medians side by side.
# usage: offload_capacity.sh ZEROC_BINARY NVME_DIR [RANKS] [CAP_MIB]
set -uo pipefail
ZEROC=${1:?usage: offload_capacity.sh ZEROC_BINARY NVME_DIR [RANKS] [CAP_MIB]}
NVME=${2:?nvme dir}
NP=${3:-4}
CAP=${4:-64}
LAYERS=32
flags=(--oversubscribe --bind-to none); [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
shape=(--model custom --hidden 256 --heads 8 --vocab 512 --seq 32 --batch 1 --zero 3 --recompute full)
modes=("none|" "optimizer cpu|--offload-optimizer cpu" "optimizer nvme|--offload-optimizer nvme --nvme-dir $NVME"
       "optimizer + params cpu|--offload-optimizer cpu --offload-params cpu"
       "optimizer + params nvme|--offload-optimizer nvme --offload-params nvme --nvme-dir $NVME")
params_of() { awk -v L="$1" 'BEGIN { C = 256; printf "%.1fM", (512 * C + 32 * C + L * (12 * C * C + 13 * C) + 2 * C) / 1e6 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
field() { # jsonl, python expression on the last record d
  python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print($2)" "$1"
}

echo "## peak device memory per rank, $LAYERS layers ($(params_of $LAYERS) parameters), $NP ranks, ZeRO-3"
echo "| offload | measured MiB | predicted MiB | params | grads | optimizer | activations | buffers | workspace |"
echo "|---|---|---|---|---|---|---|---|---|"
for m in "${modes[@]}"; do
  name=${m%%|*} f=${m#*|}
  mpirun "${flags[@]}" -np "$NP" "$ZEROC" train "${shape[@]}" --layers $LAYERS --steps 2 --quiet $f \
    --metrics "$work/p.jsonl" >/dev/null 2>&1 || { echo "| $name | failed |"; continue; }
  row="| $name | $(mib "$(field "$work/p.jsonl" "d['peak_device_max']")") | $(mib "$(field "$work/p.jsonl" "d['predicted_bytes']['device']")")"
  for t in params grads optimizer activations buffers workspace; do
    row+=" | $(mib "$(field "$work/p.jsonl" "d['peak_by_tag']['$t']")")"
  done
  echo "$row |"
done

echo
echo "## largest model under a ${CAP} MiB per-rank device cap ($NP ranks)"
echo "| offload | largest layers that train | parameters |"
echo "|---|---|---|"
fits() { # layers, mode flags
  ZEROC_DEVICE_MEM_LIMIT=$((CAP * 1048576)) mpirun "${flags[@]}" -np "$NP" "$ZEROC" train "${shape[@]}" \
    --layers "$1" --steps 2 --quiet $2 >/dev/null 2>&1
}
for m in "${modes[@]}"; do
  name=${m%%|*} f=${m#*|}
  lo=0 hi=1
  while fits $hi "$f" && [ $hi -lt 1024 ]; do lo=$hi; hi=$((hi * 2)); done
  while [ $((hi - lo)) -gt 1 ]; do mid=$(((lo + hi) / 2)); if fits $mid "$f"; then lo=$mid; else hi=$mid; fi; done
  echo "| $name | $lo | $(params_of $lo) |"
done

echo
echo "## step time, $LAYERS layers ($NP ranks), median of 10 steps after 3"
echo "| offload | step ms | vs device |"
echo "|---|---|---|"
base=0
for m in "${modes[@]}"; do
  name=${m%%|*} f=${m#*|}
  mpirun "${flags[@]}" -np "$NP" "$ZEROC" train "${shape[@]}" --layers $LAYERS --steps 13 --quiet $f \
    --metrics "$work/s.jsonl" >/dev/null 2>&1 || { echo "| $name | failed | |"; continue; }
  med=$(sed -n 's/.*"step_ms": \([^,]*\),.*/\1/p' "$work/s.jsonl" | tail -n +4 | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  [ "$base" = 0 ] && base=$med
  echo "| $name | $med | $(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.2fx", a / b }') |"
done
