#!/usr/bin/env bash
# tests/reliability.sh - `zeroc train` under faults, on real ranks and files:
# a rank that dies, is stopped or gets stuck ends the whole job within the
# bound with a message naming it; a crash at any point of a checkpoint save
# leaves the previous checkpoint loadable; every resumed run reproduces the
# uninterrupted run's losses bit for bit; non-finite gradients are skipped and
# stop the run after --max-skipped; spikes are reported; runs are deterministic.
# Faults come from the test-only ZEROC_FAULT injector (src/core/fault.h).
# usage: reliability.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" TEST_NAME
# RELIABILITY_SEED=N replays the random choices of an earlier run.
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-rel-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
SEED=${RELIABILITY_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$SEED
echo "RELIABILITY_SEED=$SEED"
T=4       # --comm-timeout of the fault runs, seconds
SLACK=10  # what the bound allows beyond it: detection, MPI_Abort, teardown
STEPS=12
COMMON=(--model tiny --lr 3e-3 --warmup 3 --seed 7 --steps $STEPS --comm-timeout $T)
LAYOUT=()   # extra layout flags of the current trial (use_layout)
REF=$WORK/ref.jsonl

fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
run() { local np=$1; shift; $MPIRUN $FLAGS -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
# runf SPEC NP ARGS...: with ZEROC_FAULT=SPEC on every rank
runf() { local spec=$1 np=$2; shift 2; ZEROC_FAULT=$spec $MPIRUN $FLAGS -x ZEROC_FAULT -np "$np" "$ZEROC" train --device cpu --quiet "$@"; }
# "step loss grad_norm" per metrics line
losses() { sed -n 's/^{"step": \([0-9]*\), "loss": \([^,]*\), .*"grad_norm": \([^,]*\),.*/\1 \2 \3/p' "$1"; }
field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1"; }
pick() { local a=("$@"); echo "${a[RANDOM % ${#a[@]}]}"; }

# Every metrics line ever written (killed runs included) must equal the
# reference's line for that step, bit for bit, and steps 1..STEPS must appear.
same_as_ref() {
  losses "$REF" > "$WORK/ref.txt"; losses "$1" > "$WORK/got.txt"
  awk -v n=$STEPS 'NR == FNR { ref[$1] = $2 " " $3; next }
       { seen[$1] = 1; if (ref[$1] != $2 " " $3) { print "step " $1 ": " $2 " " $3 " vs " ref[$1]; bad = 1 } }
       END { for (s = 1; s <= n; s++) if (!seen[s]) { print "step " s " never ran"; bad = 1 } exit bad }' \
    "$WORK/ref.txt" "$WORK/got.txt" || fail "losses differ from the uninterrupted run"
}

# The job's processes are gone once mpirun returns (their command line names $WORK).
no_leftovers() {
  for _ in 1 2 3 4 5 6; do pgrep -f -- "$WORK/" > /dev/null || return 0; sleep 0.5; done
  local pids; pids=$(pgrep -f -- "$WORK/" | tr '\n' ' ')
  for p in $pids; do kill -9 "$p" 2> /dev/null; done
  fail "processes left after the job ended: $pids"
}

latest_step() { [ -f "$WORK/ck/latest" ] && sed -n 's/^step_0*\([0-9]*\)$/\1/p' "$WORK/ck/latest" || echo 0; }

reference() { run 4 "${COMMON[@]}" "${LAYOUT[@]}" --metrics "$REF" || fail "reference run"; }
# use_layout [FLAGS...]: the layout of the next trial (ZeRO-3 over 4 ranks, or
# e.g. --tp 2 or --pp 2 --zero 1: pairs of tensor-parallel ranks or pipeline
# stages x dp 2), with its own uninterrupted run
use_layout() {
  LAYOUT=("$@")
  REF=$WORK/ref$(echo "$*" | tr -d ' -').jsonl
  [ -f "$REF" ] || reference
  echo "layout: 4 ranks ${*:-ZeRO-3 dp 4}"
}

# fault_run SPEC: runs the job from the latest checkpoint (if any) with the
# fault; sets RC, DT (seconds) and OUT; checks it failed within the bound and
# left no process behind.
fault_run() {
  local resume=()
  [ -f "$WORK/ck/latest" ] && resume=(--resume "$WORK/ck")
  local t0; t0=$(now)
  OUT=$(runf "$1" 4 "${COMMON[@]}" "${LAYOUT[@]}" "${resume[@]}" --save "$WORK/ck" --save-every 2 \
        --metrics "$WORK/m.jsonl" 2>&1); RC=$?
  DT=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  [ $RC -ne 0 ] || { echo "$OUT" | tail -20; fail "'$1': the job exited 0"; }
  awk -v d="$DT" -v b=$((T + SLACK)) 'BEGIN { exit !(d <= b) }' || fail "'$1': the job took $DT s (bound $((T + SLACK)) s)"
  no_leftovers
  echo "'$1': exit $RC after $DT s"
}

# Resumes from the latest checkpoint to the end, without faults.
finish() {
  local resume=() left
  [ -f "$WORK/ck/latest" ] && resume=(--resume "$WORK/ck")
  # what a crash during a save can leave, besides what the trial's crashes left
  mkdir -p "$WORK/ck/step_99999999.tmp" && : > "$WORK/ck/step_99999999.tmp/shard" && : > "$WORK/ck/latest.tmp.999999"
  run 4 "${COMMON[@]}" "${LAYOUT[@]}" "${resume[@]}" --save "$WORK/ck" --save-every 2 --metrics "$WORK/m.jsonl" \
    || fail "resuming from $(cat "$WORK/ck/latest" 2> /dev/null) failed"
  [ "$(latest_step)" = $STEPS ] || fail "latest is step $(latest_step) after the full run"
  left=$(cd "$WORK/ck" && ls -d step_*.tmp latest.tmp.* 2> /dev/null | tr '\n' ' ')
  [ -z "$left" ] || fail "the next save did not remove what interrupted saves left: $left"
}

case $NAME in
dead_rank)
  # A rank killed (SIGKILL) or exiting without finalising at a random point of
  # a step or of a save: the job ends within the bound naming the rank, the
  # last complete checkpoint loads, and the resumed run is bitwise the same.
  for trial in 1 2 3; do
    case $trial in 1) use_layout ;; 2) use_layout --tp 2 ;; 3) use_layout --pp 2 --zero 1 ;; esac
    rm -rf "$WORK/ck" "$WORK/m.jsonl"
    r=$((RANDOM % 4)); act=$(pick kill kill exit)
    if [ $((RANDOM % 2)) = 0 ]; then
      pt=$(pick forward backward step); k=$((3 + RANDOM % (STEPS - 3)))
      expect=$(( (k - 1) / 2 * 2 ))   # the last save before step k
    else
      pt=$(pick ckpt.stage ckpt.shard ckpt.written); k=$((4 + 2 * (RANDOM % 4)))
      expect=$((k - 2))
      [ $r = 0 ] && pt=$(pick ckpt.stage ckpt.shard ckpt.written ckpt.manifest ckpt.publish ckpt.latest)
      [ "$pt" = ckpt.latest ] && expect=$k
    fi
    spec="$act@$pt:rank=$r:step=$k"
    fault_run "$spec"
    echo "$OUT" | grep -Eq "rank $r \(pid [0-9]+\) has exited|process rank $r with PID|Process name: \[\[[0-9]+,1\],$r\]" \
      || { echo "$OUT"; fail "'$spec': no message names rank $r"; }
    [ "$(latest_step)" = $expect ] || fail "'$spec': latest is step $(latest_step), expected $expect"
    finish
    same_as_ref "$WORK/m.jsonl"
    echo "  resumed from step $expect, losses bitwise equal to the uninterrupted run"
  done ;;

stopped_rank)
  # SIGSTOP: node-local peers see the stopped state and fail at once, naming it.
  for trial in 1 2; do
    if [ $trial = 2 ]; then use_layout --pp 2 --zero 1; else use_layout; fi
    rm -rf "$WORK/ck" "$WORK/m.jsonl"
    r=$((RANDOM % 4)); pt=$(pick forward backward step ckpt.shard); k=$((4 + 2 * (RANDOM % 4)))
    spec="stop@$pt:rank=$r:step=$k"
    fault_run "$spec"
    echo "$OUT" | grep -Eq "rank $r \(pid [0-9]+\) is stopped" || { echo "$OUT"; fail "'$spec': no message names the stopped rank $r"; }
    finish
    same_as_ref "$WORK/m.jsonl"
    echo "  named: $(echo "$OUT" | grep -m1 -o "rank $r (pid [0-9]*) is stopped[^:]*")"
  done ;;

stuck_rank)
  # A rank stuck in a loop (alive, never arriving): the others time out after
  # --comm-timeout and name it with what it was doing.
  for trial in 1 2; do
    if [ $trial = 2 ]; then use_layout --tp 2; else use_layout; fi
    rm -rf "$WORK/ck" "$WORK/m.jsonl"
    r=$((RANDOM % 4)); pt=$(pick forward backward step ckpt.stage); k=$((4 + 2 * (RANDOM % 4)))
    spec="hang@$pt:rank=$r:step=$k"
    fault_run "$spec"
    awk -v d="$DT" -v t=$T 'BEGIN { exit !(d >= t) }' || fail "'$spec': ended after $DT s, before the $T s timeout"
    echo "$OUT" | grep -q "did not complete within $T s" || { echo "$OUT"; fail "'$spec': no timeout message"; }
    echo "$OUT" | grep -Eq "rank $r is not in a collective on [a-z_]+ \('" || { echo "$OUT"; fail "'$spec': the message does not name rank $r"; }
    finish
    same_as_ref "$WORK/m.jsonl"
    echo "  named: $(echo "$OUT" | grep -m1 -o "rank $r is not in a collective[^)]*)")"
  done ;;

save_crash_loop)
  # SIGKILL at random points of successive saves, each run resuming from what
  # the previous crash left: the latest checkpoint is always the newest
  # complete one, and the losses of every run match the uninterrupted run.
  use_layout
  for kill in 1 2 3 4 5 6; do
    cur=$(latest_step)
    k=$((cur + 2 + 2 * (RANDOM % 2))); [ $k -gt $STEPS ] && k=$STEPS
    r=$((RANDOM % 4)); pt=$(pick ckpt.stage ckpt.shard ckpt.written)
    [ $r = 0 ] && pt=$(pick ckpt.stage ckpt.shard ckpt.written ckpt.manifest ckpt.publish ckpt.latest)
    expect=$(( k - 2 > cur ? k - 2 : cur ))
    [ "$pt" = ckpt.latest ] && expect=$k
    spec="kill@$pt:rank=$r:step=$k"
    fault_run "$spec"
    [ "$(latest_step)" = $expect ] || fail "'$spec': latest is step $(latest_step), expected $expect"
    if [ $expect -gt 0 ]; then
      m=$WORK/ck/step_$(printf %08d $expect)/manifest.json
      [ -f "$m" ] || fail "latest names step $expect but $m is missing"
    fi
  done
  finish
  same_as_ref "$WORK/m.jsonl"
  echo "6 crashes during saves; every run's losses bitwise equal to the uninterrupted run" ;;

nan_skip)
  # One NaN gradient on one rank: that step is skipped on every rank and
  # counted, training goes on; a run resumed after the skip is bitwise the
  # same (the checkpoint records the optimizer steps actually applied).
  runf "nan@grad:rank=2:step=3:hit=1" 4 "${COMMON[@]}" --save "$WORK/ck" --save-every 6 \
    --metrics "$WORK/a.jsonl" 2> "$WORK/err" || { cat "$WORK/err"; fail "run with one NaN failed"; }
  [ "$(field "$WORK/a.jsonl" skipped | tr -d '\n')" = 001000000000 ] || fail "skipped flags: $(field "$WORK/a.jsonl" skipped | tr '\n' ' ')"
  [ "$(field "$WORK/a.jsonl" skipped_total | tail -1)" = 1 ] || fail "skipped_total is not 1"
  [ "$(field "$WORK/a.jsonl" grad_norm | sed -n 3p)" = null ] || fail "step 3's norm is not null (JSON has no NaN)"
  grep -q "step 3 skipped: gradient norm is nan" "$WORK/err" || fail "no skip warning"
  [ "$(grep -c "skipped: gradient norm" "$WORK/err")" = 1 ] || fail "the skip was reported more than once"
  run 4 "${COMMON[@]}" --resume "$WORK/ck/step_00000006" --metrics "$WORK/b.jsonl" || fail "resume after a skip"
  losses "$WORK/a.jsonl" | tail -6 > "$WORK/a.txt"; losses "$WORK/b.jsonl" > "$WORK/b.txt"
  cmp -s "$WORK/a.txt" "$WORK/b.txt" || { paste "$WORK/a.txt" "$WORK/b.txt"; fail "resumed run differs after a skipped step"; }
  echo "step 3 skipped on every rank; resumed run after the skip bitwise identical" ;;

nan_stop)
  # A NaN at every step from step 5 on rank 1: --max-skipped 2 stops the run
  # at the third skip with one clear line and exit 1, the checkpoint of step 4
  # remains the latest, and nothing hangs.
  t0=$(now)
  out=$(runf "nan@grad:rank=1:step=5-99" 4 "${COMMON[@]}" --max-skipped 2 --save "$WORK/ck" --save-every 4 \
        --metrics "$WORK/a.jsonl" 2>&1); rc=$?
  dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  [ $rc = 1 ] || { echo "$out"; fail "exit $rc, want 1"; }
  lines=$(echo "$out" | grep -c "^zeroc train: rank")
  [ "$lines" = 1 ] || { echo "$out"; fail "$lines error lines, want one"; }
  echo "$out" | grep -q "3 consecutive steps had a non-finite gradient norm (limit 2): stopping" || { echo "$out"; fail "no clear message"; }
  [ "$(field "$WORK/a.jsonl" skipped | tr -d '\n')" = 0000111 ] || fail "skipped flags: $(field "$WORK/a.jsonl" skipped | tr '\n' ' ')"
  [ "$(latest_step)" = 4 ] || fail "latest is step $(latest_step), want 4"
  no_leftovers
  echo "stopped after 3 consecutive skips in $dt s: $(echo "$out" | grep "^zeroc train: rank")" ;;

spike_report)
  # A gradient element of 50 on one rank at step 30 (of 40): the metrics line
  # of step 30 and only it reports a grad-norm spike, and a line says so.
  runf "set=50@grad:rank=3:step=30:hit=1" 4 --model tiny --lr 3e-3 --warmup 3 --seed 7 --steps 40 \
    --metrics "$WORK/a.jsonl" 2> "$WORK/err" || { cat "$WORK/err"; fail "run failed"; }
  flagged=$(grep -v '"spike": "none"' "$WORK/a.jsonl" | sed -n 's/^{"step": \([0-9]*\),.*"spike": "\([a-z_+]*\)".*/\1 \2/p' | tr '\n' ' ')
  [ "$flagged" = "30 grad_norm " ] || fail "flagged steps: '$flagged', want '30 grad_norm'"
  z=$(field "$WORK/a.jsonl" grad_norm_z | sed -n 30p)
  awk -v z="$z" 'BEGIN { exit !(z > 6) }' || fail "z-score at step 30 is $z"
  [ "$(field "$WORK/a.jsonl" loss_z | head -8 | sort -u)" = null ] || fail "z-scores during warm-up"
  grep -q "step 30: grad_norm spike" "$WORK/err" || { cat "$WORK/err"; fail "no spike line"; }
  echo "step 30 flagged (grad norm z $z), no other step" ;;

determinism)
  # The same seed and layout give bitwise the same losses run to run, and
  # ZeRO stages 1, 2 and 3 give the same losses as each other.
  run 4 "${COMMON[@]}" --zero 3 --metrics "$WORK/a.jsonl" || fail "run a"
  run 4 "${COMMON[@]}" --zero 3 --metrics "$WORK/b.jsonl" || fail "run b"
  cmp -s <(losses "$WORK/a.jsonl") <(losses "$WORK/b.jsonl") || fail "two identical runs differ"
  for z in 1 2; do
    run 4 "${COMMON[@]}" --zero $z --metrics "$WORK/z$z.jsonl" || fail "zero $z run"
    cmp -s <(losses "$WORK/a.jsonl") <(losses "$WORK/z$z.jsonl") || fail "ZeRO-$z differs from ZeRO-3"
  done
  run 2 "${COMMON[@]}" --batch 8 --grad-accum 1 --metrics "$WORK/c.jsonl" || fail "run c"
  run 2 "${COMMON[@]}" --batch 8 --grad-accum 1 --metrics "$WORK/d.jsonl" || fail "run d"
  cmp -s <(losses "$WORK/c.jsonl") <(losses "$WORK/d.jsonl") || fail "two identical 2-rank runs differ"
  echo "$STEPS steps: run to run and ZeRO-1/2/3 bitwise identical" ;;

slow_finish)
  # One rank reaching the end 2 s after the others (as a slow file system
  # closing its files would): the ranks already in the final collective wait
  # for it instead of counting each other as lost; the run exits 0 and its
  # export is bitwise the uninterrupted run's.
  run 4 "${COMMON[@]}" --export "$WORK/ref.safetensors" --metrics "$REF" || fail "reference run"
  for r in $((RANDOM % 4)) 0; do
    rm -f "$WORK/got.safetensors"
    t0=$(now)
    out=$(runf "sleep=2@finalize:rank=$r" 4 "${COMMON[@]}" --export "$WORK/got.safetensors" \
          --metrics "$WORK/m$r.jsonl" 2>&1); rc=$?
    dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    [ $rc = 0 ] || { echo "$out"; fail "rank $r late by 2 s: exit $rc"; }
    echo "$out" | grep -Eq "exiting improperly|aborting|has already finished" && { echo "$out"; fail "rank $r late by 2 s: an error was reported"; }
    echo "$out" | grep -q "ZEROC_FAULT 'sleep=2@finalize:rank=$r' fires" || { echo "$out"; fail "the delay did not fire"; }
    cmp -s "$WORK/ref.safetensors" "$WORK/got.safetensors" || fail "rank $r late by 2 s: the export differs from the reference's"
    same_as_ref "$WORK/m$r.jsonl"
    no_leftovers
    echo "rank $r late by 2 s: exit 0 after $dt s, export bitwise equal"
  done ;;

*) fail "unknown test $NAME" ;;
esac
