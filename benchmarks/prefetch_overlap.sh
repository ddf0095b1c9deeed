#!/usr/bin/env bash
# benchmarks/prefetch_overlap.sh - how much of ZeRO-3's communication the prefetch hides:
# the same model and data under `--zero 3 --prefetch K` for K = 0 (each unit gathered
# when it is needed), 1 and 2, and ZeRO-2 (no parameter gathers) as the floor, run
# round-robin REPS times so load drifts hit every setting alike. Reports the median step
# time and the median exposed communication (time compute waited on the network) over
# all measured steps (the first 3 of each run excluded).
# usage: prefetch_overlap.sh ZEROC_BINARY [RANKS] [REPS] [TRAIN FLAGS...]
set -uo pipefail
ZEROC=${1:?usage: prefetch_overlap.sh ZEROC_BINARY [RANKS] [REPS] [TRAIN FLAGS...]}
NP=${2:-2}
REPS=${3:-3}
shift $(($# < 3 ? $# : 3))
model=("$@")
[ ${#model[@]} = 0 ] && model=(--model custom --layers 8 --hidden 256 --heads 8 --vocab 512 --seq 128 --batch 2)
flags=(--oversubscribe --bind-to none); [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
settings=("zero-3 prefetch 0|--zero 3 --prefetch 0" "zero-3 prefetch 1|--zero 3 --prefetch 1"
          "zero-3 prefetch 2|--zero 3 --prefetch 2" "zero-2 (no gathers)|--zero 2")
for r in $(seq "$REPS"); do
  for i in "${!settings[@]}"; do
    f=${settings[$i]#*|}
    mpirun "${flags[@]}" -np "$NP" "$ZEROC" train "${model[@]}" $f --steps 15 --quiet \
      --metrics "$work/run.jsonl" >/dev/null 2>&1 || { echo "run failed: ${settings[$i]%%|*}" >&2; exit 1; }
    tail -n +4 "$work/run.jsonl" >>"$work/s$i.jsonl"
  done
done
med() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "## ZeRO-3 prefetch, $NP ranks: ${model[*]}; $REPS runs x 12 steps per setting"
echo "| setting | step ms | exposed comm ms | comm MiB/step | step vs prefetch 0 |"
echo "|---|---|---|---|---|"
base=0
for i in "${!settings[@]}"; do
  s=$(sed -n 's/.*"step_ms": \([^,]*\),.*/\1/p' "$work/s$i.jsonl" | med)
  e=$(sed -n 's/.*"exposed_comm_ms": \([^,]*\),.*/\1/p' "$work/s$i.jsonl" | med)
  b=$(sed -n 's/.*"comm_bytes": \([^,]*\),.*/\1/p' "$work/s$i.jsonl" | med)
  [ "$base" = 0 ] && base=$s
  printf '| %s | %.1f | %.1f | %.2f | %.2fx |\n' "${settings[$i]%%|*}" "$s" "$e" \
    "$(awk -v b="$b" 'BEGIN { print b / 1048576 }')" "$(awk -v a="$s" -v b="$base" 'BEGIN { print a / b }')"
done
