#!/usr/bin/env bash
# benchmarks/data_throughput.sh - `zeroc data` throughput: each tokenizer on
# each thread count, REPEAT runs each (the page cache warm), the best and the
# median of the summary's tokens/s and MB/s, as a Markdown table. The files are
# read from the page cache and the shards written and fsynced on the same disk.
# The CPU seconds (user + sys of the process) show the work apart from the
# time other jobs on a shared machine take from it.
# usage: data_throughput.sh ZEROC_BINARY "TOKENIZER..." "THREADS..." FILE|GLOB...
#   (env REPEAT, default 5)
set -u
ZEROC=$1 TOKS=$2 THREADS=$3
shift 3
REPEAT=${REPEAT:-5}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-data-bench-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "| tokenizer | threads | documents | MB of text | tokens | MB/s median (best) | tokens/s median (best) | s median | CPU s (user+sys) median | MB per CPU s | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for tok in $TOKS; do
  for t in $THREADS; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    : > "$WORK/runs"; : > "$WORK/cpus"
    for r in $(seq "$REPEAT"); do
      rm -rf "$WORK/out"
      TIMEFORMAT="%U %S"
      { time "$ZEROC" data --tokenizer "$tok" --out "$WORK/out" --threads "$t" --quiet "$@" > "$WORK/sum" 2> "$WORK/err" ; } 2> "$WORK/cpu" \
        || { cat "$WORK/err"; exit 1; }
      awk '{ print $1 + $2 }' "$WORK/cpu" >> "$WORK/cpus"
      docs=$(sed -n 's/^zeroc data: \([0-9]*\) documents, \([0-9.]*\) MB.*/\1 \2/p' "$WORK/sum")
      tr=$(sed -n 's/^  train: \([0-9]*\) tokens.*/\1/p' "$WORK/sum")
      va=$(sed -n 's/^  val: *\([0-9]*\) tokens.*/\1/p' "$WORK/sum")
      sed -n 's/^  \([0-9]*\) tokens\/s, \([0-9.]*\) MB\/s, \([0-9.]*\) s;.*/\1 \2 \3/p' "$WORK/sum" >> "$WORK/runs"
    done
    tps=$(cut -d' ' -f1 "$WORK/runs" | median); tbest=$(cut -d' ' -f1 "$WORK/runs" | sort -g | tail -1)
    mbs=$(cut -d' ' -f2 "$WORK/runs" | median); mbest=$(cut -d' ' -f2 "$WORK/runs" | sort -g | tail -1)
    secs=$(cut -d' ' -f3 "$WORK/runs" | median); cpu=$(median < "$WORK/cpus")
    mbcpu=$(awk -v m="${docs##* }" -v c="$cpu" 'BEGIN { printf "%.1f", (c > 0) ? m / c : 0 }')
    printf "| %s | %s | %s | %s | %s | %.2f (%.2f) | %.0f (%.0f) | %s | %s | %s | %s |\n" "$(basename "$tok")" "$t" \
      "${docs%% *}" "${docs##* }" "$((tr + ${va:-0}))" "$mbs" "$mbest" "$tps" "$tbest" "$secs" "$cpu" "$mbcpu" "$load"
  done
done
