#!/usr/bin/env bash
# tests/slurm.sh - zeroc under a real Slurm on this machine: munged, slurmctld
# and slurmd started here with a one-node configuration in a scratch
# directory (proctrack/linuxproc, task/none, no cgroups, the node's CPUs from
# nproc; --overcommit runs 4 tasks on 2 cores). Then:
#  (a) `srun -n 4 --mpi=pmix zeroc train` trains the tiny model to the end
#      (the uninterrupted run);
#  (b) an sbatch job (--requeue, --signal=B:USR1@N; the README's script: it
#      resumes from its checkpoint and requeues itself when zeroc exits 75) is
#      preempted three times: `scancel --signal=TERM` to its tasks, `scontrol
#      requeue` (Slurm ends the whole job and requeues it), and `scancel --batch
#      --signal=USR1` to its script (what --signal=B:USR1@N sends; the script
#      passes it to srun, which forwards it to every task). Each time every rank
#      stops at a step boundary with a checkpoint, the job is requeued and
#      resumes; its losses and its --export are bitwise those of run (a).
# Every daemon and job process started here is ended on exit. Exit 77 (skip)
# when Slurm or munge is not installed, or not root (slurmd runs as root);
# any other problem fails. Debian: apt-get install slurmctld slurmd slurm-client munge
# usage: slurm.sh ZEROC_BINARY
set -u
ZEROC=$(realpath "$1")
export PATH=$PATH:/usr/sbin:/sbin
for c in munged slurmctld slurmd srun sbatch scontrol scancel sinfo; do
  command -v $c > /dev/null || { echo "SKIP: $c is not installed (Debian: slurmctld slurmd slurm-client munge)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (slurmd starts the jobs as their users)"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-slurm-XXXXXX")
chmod 755 "$WORK"   # munged refuses a socket directory others cannot reach
export SLURM_CONF=$WORK/slurm.conf
STEPS=24
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc honours both
export ZEROC_BIND=0 OMP_NUM_THREADS=1
COMMON=(--device cpu --model tiny --lr 3e-3 --warmup 3 --seed 7 --steps $STEPS)
T0=$(date +%s.%N)

fail() {
  echo "FAIL: $*"
  for f in "$WORK"/job.out "$WORK"/slurmctld.log "$WORK"/slurmd.log "$WORK"/munged.log; do
    [ -f "$f" ] && { echo "---- $f (last 25 lines)"; tail -25 "$f"; }
  done
  exit 1
}
since() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%5.1f s", b - a }'; }
say() { echo "[$(since)] $*"; }
# the processes started here: their environment names this run's slurm.conf (the
# daemons, slurmstepd, srun, the job script and zeroc's ranks all inherit it)
ours() {
  grep -lzxF "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ 2> /dev/null | cut -d/ -f3 | grep -vx "$$"
}
cleanup() {
  trap - EXIT
  scancel --quiet --full --signal=KILL "${JOB:-0}" 2> /dev/null
  local pids; pids=$(ours)
  [ -n "$pids" ] && kill -TERM $pids 2> /dev/null
  for _ in $(seq 30); do [ -z "$(ours)" ] && break; sleep 0.1; done
  pids=$(ours)
  [ -n "$pids" ] && kill -KILL $pids 2> /dev/null
  [ -f "$WORK/munged.pid" ] && kill "$(cat "$WORK/munged.pid")" 2> /dev/null
  sleep 0.2
  rm -rf "$WORK"
  echo "[$(since)] cleaned up"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# two free TCP ports for slurmctld and slurmd (not Slurm's defaults, which a real
# installation may be using)
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 30000))
    ss -Htln "sport = :$p" 2> /dev/null | grep -q . || { echo $p; return; }
  done
  fail "no free port"
}
CTLD_PORT=$(free_port) SLURMD_PORT=$(free_port)
[ "$CTLD_PORT" != "$SLURMD_PORT" ] || SLURMD_PORT=$((CTLD_PORT + 1))

# ---- munge, with a key of its own ------------------------------------------------------
mkdir -p "$WORK/state" "$WORK/spool"
head -c 1024 /dev/urandom > "$WORK/munge.key" && chmod 400 "$WORK/munge.key"
munged --force --key-file="$WORK/munge.key" --socket="$WORK/munge.sock" \
  --pid-file="$WORK/munged.pid" --log-file="$WORK/munged.log" --seed-file="$WORK/munged.seed" \
  || fail "munged did not start"
for _ in $(seq 50); do [ -S "$WORK/munge.sock" ] && break; sleep 0.1; done
[ -S "$WORK/munge.sock" ] || fail "munged made no socket"

# ---- one node: this machine ------------------------------------------------------------
HOST=$(hostname -s)
# cred_expire: a requeued job may start again only after it (default 120 s)
# sched_interval: the main scheduling loop every second (default 60 s)
cat > "$SLURM_CONF" << EOF
ClusterName=zeroctest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$WORK/munge.sock,cred_expire=5
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=30
MailProg=/bin/true
InactiveLimit=0
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=zeroc Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF" -i || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start"
for _ in $(seq 300); do
  [ "$(sinfo -h -n "$HOST" -o %T 2> /dev/null)" = idle ] && break
  sleep 0.1
done
[ "$(sinfo -h -n "$HOST" -o %T 2> /dev/null)" = idle ] || fail "node $HOST is not idle after 30 s: $(sinfo 2>&1)"
srun --mpi=list 2>&1 | grep -qw pmix || fail "srun has no pmix plugin: $(srun --mpi=list 2>&1)"
say "slurmctld and slurmd up (ports $CTLD_PORT, $SLURMD_PORT), node $HOST idle with $CPUS CPUs"

# ---- (a) srun -n 4 --mpi=pmix: the uninterrupted run -----------------------------------
srun -n 4 --overcommit --mpi=pmix "$ZEROC" train "${COMMON[@]}" --metrics "$WORK/ref.jsonl" \
  --export "$WORK/ref.safetensors" > "$WORK/srun.out" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$WORK/srun.out"; fail "srun -n 4 zeroc train: exit $rc"; }
grep -q "^  4 ranks on cpu" "$WORK/srun.out" || { cat "$WORK/srun.out"; fail "srun did not make one job of 4 ranks"; }
grep -Eq "^step +$STEPS/$STEPS \| loss " "$WORK/srun.out" || { cat "$WORK/srun.out"; fail "no line of step $STEPS"; }
grep -q "^done: $STEPS steps" "$WORK/srun.out" || { cat "$WORK/srun.out"; fail "no summary line"; }
say "(a) srun -n 4 --mpi=pmix zeroc train: $STEPS steps, exit 0 ($(grep -o "start-up .*" "$WORK/srun.out")): $(grep "^done:" "$WORK/srun.out" | cut -c1-40)"

# ---- (b) sbatch, preempted twice, requeued, resumed to the end ---------------------------
# The job script: the README's template (section Slurm) on cpu
cat > "$WORK/job.sh" << EOF
#!/bin/bash
# resume when a checkpoint exists: a requeued run
R=(); [ -f "$WORK/ck/latest" ] && R=(--resume "$WORK/ck")
echo "job \$SLURM_JOB_ID run \${SLURM_RESTART_COUNT:-0} at \$(date +%T.%N | cut -c1-12): \${R[*]:-from the start}"
# --signal=B:USR1@N signals this script only: pass it to srun, which forwards it to every task
trap 'kill -USR1 \$pid' USR1
# every step sleeps (it changes no number) so the preemptions land mid-run
ZEROC_FAULT=sleep=0.15@step srun --mpi=pmix "$ZEROC" train ${COMMON[*]} \\
  --save "$WORK/ck" --save-every 4 --metrics "$WORK/m.jsonl" --export "$WORK/got.safetensors" "\${R[@]}" &
pid=\$!
wait \$pid; rc=\$?
while kill -0 \$pid 2> /dev/null; do wait \$pid; rc=\$?; done  # a trap interrupted the wait
echo "job \$SLURM_JOB_ID run \${SLURM_RESTART_COUNT:-0} at \$(date +%T.%N | cut -c1-12): zeroc exited \$rc"
# 75: stopped by a signal with a checkpoint saved: run again from it
[ \$rc = 75 ] && scontrol requeue \$SLURM_JOB_ID
exit \$rc
EOF
chmod +x "$WORK/job.sh"
JOB=$(sbatch --parsable -n 4 --overcommit --requeue --signal=B:USR1@30 --time=10 \
  --open-mode=append -o "$WORK/job.out" "$WORK/job.sh") || fail "sbatch: $JOB"
state() { scontrol show job "$JOB" 2> /dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
lines() { [ -f "$WORK/m.jsonl" ] && wc -l < "$WORK/m.jsonl" || echo 0; }
# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds
wait_for() {
  local what=$1 n=$(($2 * 10)); shift 2
  for _ in $(seq $n); do
    "$@" && return 0
    case $(state) in FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
      fail "$what: the job ended $(state)" ;;
    esac
    sleep 0.1
  done
  fail "$what: not within $((n / 10)) s (job $JOB $(state))"
}
running_past() { [ "$(state)" = RUNNING ] && [ "$(lines)" -ge "$1" ]; }
STOP="^zeroc train: stopped by SIG[A-Z0-9]* (rank [0-9]) after step [0-9]* of $STEPS: checkpoint '$WORK/ck/step_[0-9]*' saved; resume with: "
has_stops() { [ "$(grep -c "$STOP" "$WORK/job.out")" -ge "$1" ]; }
last_stop() { grep "$STOP" "$WORK/job.out" | tail -1; }
exited() { grep -q "run $1 at [0-9:.]*: zeroc exited $2" "$WORK/job.out"; }
# preempt N SIG EXIT75 HOW COMMAND...: run N of the job (0: the first), once 3 steps past
# where it resumed, gets COMMAND; its ranks stop at a step boundary with a checkpoint and
# SIG's line; with EXIT75=yes the script sees exit 75 (and requeues the job itself)
FROM=0
preempt() {
  local n=$1 sig=$2 exit75=$3 how=$4 k; shift 4
  wait_for "run $n of job $JOB past step $((FROM + 3))" 45 running_past $((FROM + 3))
  say "    run $n at step $(lines): $how"
  "$@" || fail "$*"
  wait_for "the stop line of run $n" 30 has_stops $((n + 1))
  last_stop | grep -q "stopped by $sig " || fail "run $n: $(last_stop), expected $sig"
  k=$(last_stop | sed -n 's/.* after step \([0-9]*\) of .*/\1/p')
  [ "$k" -gt "$FROM" ] && [ "$k" -lt $STEPS ] || fail "run $n (from step $FROM) stopped after step $k"
  [ $exit75 = no ] || wait_for "run $n's exit 75" 30 exited $n 75
  [ "$(lines)" = "$k" ] || fail "run $n stopped after step $k with $(lines) metrics lines"
  say "    $(last_stop | cut -c1-70)..."
  FROM=$k
}
say "(b) job $JOB: an sbatch job, preempted three times"
preempt 0 SIGTERM yes "scancel --signal=TERM (to its tasks)" scancel --signal=TERM "$JOB"
preempt 1 SIGTERM no "scontrol requeue (Slurm ends the job and requeues it)" scontrol requeue "$JOB"
preempt 2 SIGUSR1 yes "scancel --batch --signal=USR1 (to its script, as --signal=B:USR1@N)" \
  scancel --batch --signal=USR1 "$JOB"
completed() { [ "$(state)" = COMPLETED ]; }
wait_for "the job completed" 60 completed
restarts=$(scontrol show job "$JOB" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
[ "$restarts" = 3 ] || fail "the job ran $((restarts + 1)) times, expected 4"
exited 3 0 || fail "the last run did not exit 0"
grep -Eq "^step +$STEPS/$STEPS \| loss " "$WORK/job.out" || fail "no line of step $STEPS"
grep -q "^done: $((STEPS - FROM)) steps" "$WORK/job.out" || fail "no summary line of the last run ($((STEPS - FROM)) steps)"
say "    requeued, resumed from step $FROM, completed"

# bitwise the uninterrupted run: every step's loss and norm, and the export
losses() { sed -n 's/^{"step": \([0-9]*\), "loss": \([^,]*\), .*"grad_norm": \([^,]*\),.*/\1 \2 \3/p' "$1"; }
losses "$WORK/ref.jsonl" > "$WORK/ref.txt"; losses "$WORK/m.jsonl" > "$WORK/got.txt"
[ "$(wc -l < "$WORK/ref.txt")" = $STEPS ] || fail "the reference has $(wc -l < "$WORK/ref.txt") metrics lines"
cmp -s "$WORK/ref.txt" "$WORK/got.txt" || { diff "$WORK/ref.txt" "$WORK/got.txt" | head; fail "losses differ from the uninterrupted run"; }
cmp "$WORK/ref.safetensors" "$WORK/got.safetensors" || fail "the export differs from the uninterrupted run's"
grep "^job " "$WORK/job.out"
say "    4 runs: the losses of all $STEPS steps and the export bitwise the uninterrupted run's"
