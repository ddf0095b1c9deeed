#!/usr/bin/env bash
# benchmarks/offload_bw.sh - the NVMe swapper's sequential write and read
# bandwidth against fio with the same block size, queue depth, O_DIRECT,
# io_uring and directory, side by side in one run; medians of REPS runs.
#
#   benchmarks/offload_bw.sh DIR [BUILD_DIR]
#   env: SIZE_MIB (1024), REPS (3), BLOCKS_KIB ("128 1024 4096"), QDS ("4 16 32")
#
# Two zeroc figures per cell: "pool" uses the pinned pool's buffers as the
# engine does (huge pages where THP allows); "scattered" faults the pages so
# each 4 KiB page is its own scatter-gather segment, as fio's buffers are: the
# like-for-like comparison. Prints a markdown table (with the date, command and
# machine) for benchmarks/RESULTS.md. Needs fio and jq.
set -euo pipefail

dir=${1:?usage: offload_bw.sh DIR [BUILD_DIR]}
build=${2:-$(dirname "$0")/../build}
bin=$build/benchmarks/offload_bw
size=${SIZE_MIB:-1024}
reps=${REPS:-3}
blocks=${BLOCKS_KIB:-"128 1024 4096"}
qds=${QDS:-"4 16 32"}

for tool in fio jq; do
  command -v $tool >/dev/null || { echo "offload_bw.sh: '$tool' not found; install the Debian package '$tool'" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "offload_bw.sh: $bin not built (cmake --build $build --target offload_bw)" >&2; exit 2; }
[ -d "$dir" ] || { echo "offload_bw.sh: DIR '$dir' is not a directory" >&2; exit 2; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# fio's bandwidth in MiB/s for one sequential pass (rw = write or read).
fio_bw() {
  local rw=$1 bs=$2 qd=$3 f=$dir/offload_bw_fio.dat
  fio --name=offload_bw --filename="$f" --size="${size}M" --bs="${bs}k" --iodepth="$qd" \
      --ioengine=io_uring --direct=1 --rw="$rw" --numjobs=1 --output-format=json 2>/dev/null |
    jq ".jobs[0].$rw.bw_bytes / 1048576"
}

fstype=$(findmnt -n -o FSTYPE -T "$dir")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "Date: $(date -u +%Y-%m-%d), kernel $(uname -r), $dir on $fstype ($(df --output=source "$dir" | tail -1)),"
echo "CPU: $cpu, $(nproc) cores. Command: \`SIZE_MIB=$size REPS=$reps benchmarks/offload_bw.sh $dir\`"
echo "(file of $size MiB, $reps repetitions interleaved zeroc pool / zeroc scattered / fio, medians, MiB/s)"
echo
echo "| block | QD | write: zeroc pool | zeroc scattered | fio | scattered/fio | pool/fio | read: zeroc pool | zeroc scattered | fio | scattered/fio | pool/fio |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for bs in $blocks; do
  for qd in $qds; do
    pw=(); pr=(); sw=(); sr=(); fw=(); fr=()
    for ((k = 0; k < reps; k++)); do
      line=$("$bin" --dir "$dir" --size-mib "$size" --block-kib "$bs" --qd "$qd" --reps 1 --scatter 0)
      pw+=("$(awk '{print $3}' <<<"$line")"); pr+=("$(awk '{print $5}' <<<"$line")")
      line=$("$bin" --dir "$dir" --size-mib "$size" --block-kib "$bs" --qd "$qd" --reps 1 --scatter 1)
      sw+=("$(awk '{print $3}' <<<"$line")"); sr+=("$(awk '{print $5}' <<<"$line")")
      rm -f "$dir/offload_bw_fio.dat" # fio lays out a fresh file, as the swapper does
      fw+=("$(fio_bw write "$bs" "$qd")")
      fr+=("$(fio_bw read "$bs" "$qd")")
    done
    rm -f "$dir/offload_bw_fio.dat"
    m() { printf '%s\n' "$@" | median; }
    awk -v bs="$bs" -v qd="$qd" -v pw="$(m "${pw[@]}")" -v sw="$(m "${sw[@]}")" -v fw="$(m "${fw[@]}")" \
        -v pr="$(m "${pr[@]}")" -v sr="$(m "${sr[@]}")" -v fr="$(m "${fr[@]}")" 'BEGIN {
      printf "| %s KiB | %s | %.0f | %.0f | %.0f | %.2f | %.2f | %.0f | %.0f | %.0f | %.2f | %.2f |\n",
             bs, qd, pw, sw, fw, sw / fw, pw / fw, pr, sr, fr, sr / fr, pr / fr }'
  done
done
