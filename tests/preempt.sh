#!/usr/bin/env bash
# tests/preempt.sh - `zeroc train` stopped by the cluster, on 2 real ranks: a
# SIGTERM, SIGINT or SIGUSR1 to one rank (or SIGUSR1 to mpirun, which Open MPI
# forwards to every rank) stops the whole job at the next step boundary with a
# checkpoint there, one line (the signal, the step, the checkpoint, the command
# that resumes) and exit 75, within 30 s; the run resumed from it ends bitwise
# as the uninterrupted run (every step's loss and norm, the exported weights).
# A second signal during that save ends the job at once and leaves the
# previous checkpoint the latest. Without --save the line says nothing was saved.
# save_limit: checkpoint retention (--save-limit N), which these runs rely on.
# usage: preempt.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS" CASE
#   CASE: term_rank | usr1_mpirun | int_nosave | second_signal | save_limit
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3 NAME=$4
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-pre-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export ZEROC_BIND=0 OMP_NUM_THREADS=1
STEPS=24
BOUND=30   # signal to the end of mpirun, seconds
COMMON=(--device cpu --model tiny --lr 3e-3 --warmup 3 --seed 7 --steps $STEPS --quiet)
# every step sleeps (it changes no number) so a signal lands mid-run
SLOW='sleep=0.15@step'

fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
losses() { sed -n 's/^{"step": \([0-9]*\), "loss": \([^,]*\), .*"grad_norm": \([^,]*\),.*/\1 \2 \3/p' "$1"; }
latest_step() { [ -f "$WORK/ck/latest" ] && sed -n 's/^step_0*\([0-9]*\)$/\1/p' "$WORK/ck/latest" || echo 0; }
# start SPEC ARGS...: the job in the background (MP: mpirun's pid), output in $WORK/out
start() {
  local spec=$1; shift
  ZEROC_FAULT=$spec $MPIRUN $FLAGS -x ZEROC_FAULT -np 2 "$ZEROC" train "${COMMON[@]}" "$@" \
    > "$WORK/out" 2>&1 &
  MP=$!
}
# the pid of world rank R of the job started last
rank_pid() {
  for p in $(pgrep -f -- "$WORK/"); do
    [ "$p" = "$MP" ] && continue
    tr '\0' '\n' 2> /dev/null < /proc/$p/environ | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}
# wait_lines FILE N: until FILE has N lines (at most 60 s)
wait_lines() {
  for _ in $(seq 600); do [ "$(wc -l < "$1" 2> /dev/null || echo 0)" -ge "$2" ] && return 0; sleep 0.1; done
  kill -9 $MP; cat "$WORK/out"; fail "no $2 metrics lines in 60 s"
}
# ends SIGNALLED_AT: waits for mpirun (at most BOUND s); sets RC, DT
ends() {
  for _ in $(seq $((10 * BOUND))); do kill -0 $MP 2> /dev/null || break; sleep 0.1; done
  DT=$(since "$1")
  if kill -0 $MP 2> /dev/null; then
    kill -9 $MP; cat "$WORK/out"; fail "mpirun still running $BOUND s after the signal"
  fi
  wait $MP; RC=$?
  for _ in $(seq 50); do pgrep -f -- "$WORK/" > /dev/null || break; sleep 0.1; done
  pgrep -f -- "$WORK/" > /dev/null && fail "processes left after the job ended"
  return 0
}
# stopped SIG RANK: the exit status and the one line of a stop with a checkpoint
stopped() {
  [ $RC = 75 ] || { cat "$WORK/out"; fail "exit $RC after $1, expected 75"; }
  K=$(latest_step)
  [ "$K" -gt 0 ] && [ "$K" -lt $STEPS ] || { cat "$WORK/out"; fail "latest is step $K after $1"; }
  local line; line=$(grep "^zeroc train: stopped by" "$WORK/out")
  [ "$(echo "$line" | wc -l)" = 1 ] || { cat "$WORK/out"; fail "not one stop line"; }
  echo "$line" | grep -Eq "^zeroc train: stopped by $1 \(rank $2\) after step $K of $STEPS: checkpoint '$WORK/ck/step_$(printf %08d "$K")' saved; resume with: mpirun -np 2 zeroc train .* --resume $WORK/ck$" \
    || { echo "$line"; fail "the stop line"; }
  [ "$(wc -l < "$WORK/m.jsonl")" = "$K" ] || fail "metrics lines: $(wc -l < "$WORK/m.jsonl"), the stop was after step $K"
  echo "$1 to rank $2: stopped after step $K in $DT s, exit 75: $line"
}
# the run resumed from the latest checkpoint to the end: bitwise the uninterrupted run
resume_same() {
  K=$(latest_step)
  $MPIRUN $FLAGS -np 2 "$ZEROC" train "${COMMON[@]}" --save "$WORK/ck" --resume "$WORK/ck" \
    --metrics "$WORK/m.jsonl" --export "$WORK/got.safetensors" > "$WORK/res.out" 2>&1 \
    || { cat "$WORK/res.out"; fail "resuming"; }
  losses "$WORK/ref.jsonl" > "$WORK/ref.txt"; losses "$WORK/m.jsonl" > "$WORK/got.txt"
  cmp -s "$WORK/ref.txt" "$WORK/got.txt" || { diff "$WORK/ref.txt" "$WORK/got.txt" | head; fail "losses differ from the uninterrupted run"; }
  cmp -s "$WORK/ref.safetensors" "$WORK/got.safetensors" || fail "the export differs from the uninterrupted run's"
  echo "resumed from step $K: losses of all $STEPS steps and the export bitwise equal to the uninterrupted run"
}
reference() {
  $MPIRUN $FLAGS -np 2 "$ZEROC" train "${COMMON[@]}" --metrics "$WORK/ref.jsonl" \
    --export "$WORK/ref.safetensors" > "$WORK/ref.out" 2>&1 || { cat "$WORK/ref.out"; fail "uninterrupted run"; }
}

case $NAME in
term_rank)
  # SIGTERM (Slurm's preemption) to rank 1 only: rank 0 learns of it at the boundary
  reference
  start "$SLOW" --save "$WORK/ck" --metrics "$WORK/m.jsonl"
  wait_lines "$WORK/m.jsonl" 5
  t0=$(now); kill -TERM "$(rank_pid 1)"; ends "$t0"
  stopped SIGTERM 1
  resume_same ;;
usr1_mpirun)
  # SIGUSR1 to mpirun (sbatch --signal=B:USR1@N and a forwarding script), with --save-every
  reference
  start "$SLOW" --save "$WORK/ck" --save-every 4 --metrics "$WORK/m.jsonl"
  wait_lines "$WORK/m.jsonl" 6
  t0=$(now); kill -USR1 $MP; ends "$t0"
  stopped SIGUSR1 1
  resume_same ;;
int_nosave)
  # SIGINT to rank 0 of a run without --save: the line says nothing was saved
  start "$SLOW" --metrics "$WORK/m.jsonl"
  wait_lines "$WORK/m.jsonl" 3
  t0=$(now); kill -INT "$(rank_pid 0)"; ends "$t0"
  [ $RC = 75 ] || { cat "$WORK/out"; fail "exit $RC, expected 75"; }
  grep -Eq "^zeroc train: stopped by SIGINT \(rank 0\) after step [0-9]+ of $STEPS: nothing was saved \(no --save\)" "$WORK/out" \
    || { cat "$WORK/out"; fail "no line saying nothing was saved"; }
  n=$(wc -l < "$WORK/m.jsonl")
  [ "$n" -lt $STEPS ] || fail "the run did not stop ($n steps)"
  echo "SIGINT without --save: $(grep '^zeroc train: stopped' "$WORK/out") ($DT s)" ;;
second_signal)
  # a first stop (SIGTERM) leaves step K; the run resumed from it is stopped
  # again and signalled a second time while that save is held open: it ends
  # at once, the latest is still step K, and resuming from it ends bitwise
  reference
  start "$SLOW" --save "$WORK/ck" --metrics "$WORK/m.jsonl"
  wait_lines "$WORK/m.jsonl" 4
  t0=$(now); kill -TERM "$(rank_pid 1)"; ends "$t0"
  stopped SIGTERM 1
  FIRST=$K
  # the resumed run's first save (the stop's) sleeps 20 s once staged
  start "$SLOW;sleep=20@ckpt.stage:hit=1" --save "$WORK/ck" --resume "$WORK/ck" --metrics "$WORK/m.jsonl"
  wait_lines "$WORK/m.jsonl" $((FIRST + 2))
  kill -TERM "$(rank_pid 1)"
  for _ in $(seq 300); do ls -d "$WORK"/ck/step_*.tmp > /dev/null 2>&1 && break; sleep 0.1; done
  ls -d "$WORK"/ck/step_*.tmp > /dev/null 2>&1 || { kill -9 $MP; cat "$WORK/out"; fail "the stop's save never started"; }
  t0=$(now); kill -TERM "$(rank_pid 1)"; ends "$t0"
  [ $RC != 0 ] && [ $RC != 75 ] || { cat "$WORK/out"; fail "exit $RC after a second signal, expected a failure"; }
  awk -v d="$DT" 'BEGIN { exit !(d < 15) }' || fail "the second signal took $DT s to end the job (the save sleeps 20 s)"
  grep -q "a second signal: stopping at once" "$WORK/out" || { cat "$WORK/out"; fail "no line about the second signal"; }
  [ "$(latest_step)" = "$FIRST" ] || fail "latest is step $(latest_step), expected the previous checkpoint $FIRST"
  echo "a second signal during the save: exit $RC after $DT s, latest still step $FIRST"
  # the resumed run's metrics were cut back to step FIRST again by the next resume
  resume_same ;;
save_limit)
  # --save-limit N keeps the newest N checkpoints, never the one latest names,
  # and deletes an old one only once the new one is complete
  ls_ck() { (cd "$WORK/$1" && ls -d step_* tables_step_* 2> /dev/null | tr '\n' ' '); }
  run2() { $MPIRUN $FLAGS -np 2 "$ZEROC" train "$@" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "run: $*"; }; }
  run2 "${COMMON[@]}" --steps 12 --save "$WORK/ck" --save-every 2 --save-limit 3
  [ "$(ls_ck ck)" = "step_00000008 step_00000010 step_00000012 " ] || fail "--save-limit 3 kept: $(ls_ck ck)"
  [ "$(latest_step)" = 12 ] || fail "latest is step $(latest_step)"
  # latest naming an older step than the newest: a run resumed from step 8 into
  # the same directory saves step 9 and dies in step 10; step 9 is kept (latest),
  # the newest two (10, 12) too, step 8 goes
  ZEROC_FAULT='kill@forward:rank=0:step=10' $MPIRUN $FLAGS -x ZEROC_FAULT -np 2 "$ZEROC" train \
    "${COMMON[@]}" --steps 12 --comm-timeout 5 --resume "$WORK/ck/step_00000008" --save "$WORK/ck" \
    --save-every 1 --save-limit 2 > "$WORK/out" 2>&1 && fail "the killed run exited 0"
  [ "$(latest_step)" = 9 ] || fail "latest is step $(latest_step), expected 9"
  [ "$(ls_ck ck)" = "step_00000009 step_00000010 step_00000012 " ] || fail "after the resume: $(ls_ck ck)"
  # a crash while step 6 is written (--save-limit 1): step 4 is still there and the latest
  rm -rf "$WORK/ck"
  ZEROC_FAULT='kill@ckpt.written:rank=1:step=6' $MPIRUN $FLAGS -x ZEROC_FAULT -np 2 "$ZEROC" train \
    "${COMMON[@]}" --steps 10 --comm-timeout 5 --save "$WORK/ck" --save-every 2 --save-limit 1 > "$WORK/out" 2>&1 \
    && fail "the killed run exited 0"
  [ "$(latest_step)" = 4 ] && [ -f "$WORK/ck/step_00000004/manifest.json" ] \
    || fail "after a crash in the save of step 6: latest $(latest_step), kept $(ls_ck ck)"
  run2 "${COMMON[@]}" --steps 10 --resume "$WORK/ck" --save "$WORK/ck" --save-limit 1
  [ "$(ls_ck ck)" = "step_00000010 " ] || fail "the resumed run's --save-limit 1 kept: $(ls_ck ck)"
  # DLRM: the tables saved beside each checkpoint go with it
  $MPIRUN $FLAGS -np 2 "$ZEROC" train --device cpu --model dlrm-tiny --steps 6 --quiet --save "$WORK/dk" \
    --save-every 2 --save-limit 1 > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "dlrm run"; }
  [ "$(ls_ck dk)" = "step_00000006 tables_step_00000006 " ] || fail "dlrm --save-limit 1 kept: $(ls_ck dk)"
  # range-checked, and only with --save
  for bad in "--save-limit 0|--save-limit '0': accepted an integer 1..1000000000" \
             "--save-limit -3|--save-limit '-3': accepted" "--save-limit 2x|--save-limit '2x'" \
             "--save-limit 2|--save-limit 2 needs --save DIR"; do
    args=${bad%%|*} want=${bad#*|}
    # shellcheck disable=SC2086
    out=$("$ZEROC" train --device cpu --model tiny $args 2>&1); rc=$?
    [ $rc = 2 ] && echo "$out" | grep -qF -- "$want" || fail "'$args': exit $rc, '$out'"
  done
  out=$("$ZEROC" train --device cpu --model dlrm-tiny --save-limit 2 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -qF -- "--save-limit needs --save DIR" || fail "dlrm --save-limit without --save: $rc $out"
  echo "--save-limit: the newest N kept, latest's kept, nothing removed before the new one is complete, tables too, range-checked" ;;
*) fail "unknown case $NAME" ;;
esac
echo "PASS $NAME"
