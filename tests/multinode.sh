#!/usr/bin/env bash
# tests/multinode.sh - failures across nodes, on two "hosts" made of network
# namespaces on this machine: each namespace has its own hostname (unshare
# --uts), a veth end with an address of 10.213.50.0/24, and its own Open MPI
# daemon, launched the way a cluster launches: mpirun (in the first host) with
# a hostfile naming both hosts and an rsh agent that runs the daemon's
# command in the namespace instead of ssh; MPI over TCP on the veth subnet.
# 2 hosts x 2 ranks train the tiny model, checkpointing every 2 steps; after a
# few steps one fault hits the second host: its rank 3 killed, its rank 2 (the
# node leader) stopped, every process of the host killed, or its link cut.
# Every rank and mpirun must end within BOUND seconds (far below
# --comm-timeout) with a message naming the rank or host, no process may be
# left in either namespace, and the run resumed from the last checkpoint must
# reproduce the uninterrupted run's losses bit for bit.
# usage: multinode.sh ZEROC_BINARY MPIRUN "MPIRUN_FLAGS"   (exit 77: skipped)
# MULTINODE_CASES="kill stop cut host" (the default) picks the faults.
set -u
ZEROC=$1 MPIRUN=$2 FLAGS=$3
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for ip netns"; exit 77; }
command -v ip > /dev/null && command -v unshare > /dev/null || { echo "SKIP: no ip or unshare"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-mn-XXXXXX")
TAG=zmn$$                     # namespace, host and link names unique to this run
A=${TAG}a B=${TAG}b           # the hosts (namespace = hostname)
NET=10.213.50                 # only inside the namespaces made here
T=60                          # --comm-timeout: what would end the job without detection
BOUND=12                      # fault to the end of every process, seconds
STEPS=16

cleanup() {
  for ns in $A $B; do
    for p in $(ip netns pids $ns 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
  done
  sleep 0.2
  ip netns del $A 2> /dev/null; ip netns del $B 2> /dev/null
  ip link del ${TAG}va 2> /dev/null   # only if it never moved into its namespace
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

ip netns add $A 2> /dev/null && ip netns add $B 2> /dev/null || { echo "SKIP: ip netns add failed"; exit 77; }
# the wire between the hosts: a veth pair, one end in each
mklink() {
  ip link add ${TAG}va type veth peer name ${TAG}vb 2> /dev/null || return 77
  ip link set ${TAG}va netns $A && ip link set ${TAG}vb netns $B || fail "moving the veth ends"
  ip -n $A addr add $NET.1/24 dev ${TAG}va && ip -n $B addr add $NET.2/24 dev ${TAG}vb || fail "addresses"
  for h in a b; do
    ip -n $TAG$h link set lo up && ip -n $TAG$h link set ${TAG}v$h up || fail "links up"
  done
}
mklink || { echo "SKIP: no veth"; exit 77; }

# The rsh agent: "agent HOST COMMAND..." runs COMMAND in HOST's namespace,
# under HOST's own hostname, as ssh would run it on HOST.
cat > "$WORK/agent" << 'EOF'
#!/bin/sh
h=$1; shift
exec ip netns exec "$h" unshare --uts sh -c "hostname $h && $*"
EOF
chmod +x "$WORK/agent"
printf '%s slots=2\n%s slots=2\n' $A $B > "$WORK/hosts"
# Open MPI's own daemons talk over TCP: over a cut link, mpirun and the far
# daemon learn of it only when TCP gives up (15 retransmissions, minutes, by
# default). The hosts here give up after about 3 s, as a cluster that wants
# fast teardown would configure; zeroc's ranks do not depend on it.
for ns in $A $B; do ip netns exec $ns sysctl -qw net.ipv4.tcp_retries2=3 || fail "sysctl in $ns"; done
MPI=(--mca oob_tcp_keepalive_time 1 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 2
     --hostfile "$WORK/hosts" --mca plm_rsh_agent "$WORK/agent" --mca btl tcp,self
     --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 -np 4)
# every step sleeps 0.3 s (it changes no number) so the faults land mid-run
COMMON=(--device cpu --model tiny --lr 3e-3 --warmup 3 --seed 7 --steps $STEPS --comm-timeout $T
        --save "$WORK/ck" --save-every 2)
# mpirun runs in host A, as it would on a cluster's first node
launch() {
  exec ip netns exec $A unshare --uts sh -c "hostname $A && ZEROC_FAULT='sleep=0.3@step' exec $MPIRUN $FLAGS \
    ${MPI[*]} -x ZEROC_FAULT $ZEROC train --quiet $*"
}
losses() { sed -n 's/^{"step": \([0-9]*\), "loss": \([^,]*\), .*"grad_norm": \([^,]*\),.*/\1 \2 \3/p' "$1"; }
latest_step() { [ -f "$WORK/ck/latest" ] && sed -n 's/^step_0*\([0-9]*\)$/\1/p' "$WORK/ck/latest" || echo 0; }
# the pid of world rank R in namespace NS
rank_pid() {
  for p in $(ip netns pids "$1"); do
    tr '\0' '\n' 2> /dev/null < /proc/$p/environ | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}
# No process may stay in either host: waits up to 5 s, then kills and fails.
no_leftovers() {
  for _ in $(seq 50); do
    [ -z "$(ip netns pids $A)$(ip netns pids $B)" ] && return 0
    sleep 0.1
  done
  local left; left=$(for p in $(ip netns pids $A) $(ip netns pids $B); do tr '\0' ' ' < /proc/$p/cmdline | cut -c1-60; echo; done)
  for ns in $A $B; do for p in $(ip netns pids $ns); do kill -9 "$p" 2> /dev/null; done; done
  fail "$1: processes left behind: $left"
}

# The layout is what a cluster gives: one node per host, two ranks each.
out=$(launch --device cpu --model tiny --steps 1 --print-topology 2>&1) || { echo "$out"; fail "topology run"; }
echo "$out" | grep -E "^rank +[0-9]" || { echo "$out"; fail "no topology lines"; }
for r in 0 1; do echo "$out" | grep -Eq "^rank +$r  $A  local $r/2" || fail "rank $r is not on $A"; done
for r in 2 3; do echo "$out" | grep -Eq "^rank +$r  $B  local $((r - 2))/2" || fail "rank $r is not on $B"; done
rm -rf "$WORK/ck"

t0=$(now)
(launch "${COMMON[@]}" --metrics "$WORK/ref.jsonl") > "$WORK/ref.out" 2>&1 || { cat "$WORK/ref.out"; fail "uninterrupted run"; }
echo "uninterrupted run: $STEPS steps in $(since "$t0") s"
no_leftovers "uninterrupted run"

# fault CASE: runs the job, strikes host B after step 6 was saved, and
# checks the end: every process gone within BOUND, a message naming it.
fault() {
  local case=$1 pid rc t1 left
  rm -rf "$WORK/ck" "$WORK/m.jsonl"
  launch "${COMMON[@]}" --metrics "$WORK/m.jsonl" > "$WORK/out" 2>&1 &
  local mp=$!
  for _ in $(seq 600); do [ "$(latest_step)" -ge 6 ] && break; sleep 0.1; done
  [ "$(latest_step)" -ge 6 ] || { kill -9 $mp; cat "$WORK/out"; fail "$case: no checkpoint of step 6 in 60 s"; }
  SAVED=$(latest_step)
  case $case in
  kill) pid=$(rank_pid $B 3); t1=$(now); kill -KILL "$pid" ;;
  stop) pid=$(rank_pid $B 2); t1=$(now); kill -STOP "$pid" ;;
  # a host gone from the network (as at a power cut): its link deleted, so
  # nothing reaches A, not even a reset (killing its processes instead would
  # kill the rsh agent's side too, which mpirun notices at once as a failed
  # daemon launch, unlike a real ssh to a dead host)
  host) t1=$(now); ip -n $B link del ${TAG}vb ;;
  cut) t1=$(now); ip -n $B link set ${TAG}vb down ;;
  esac
  # mpirun must end, and so must every rank of host B on its own (mpirun may
  # not reach it), then every process of B; waits up to 3 x BOUND
  DT_MPIRUN= DT_RANKS= DT_B=
  for _ in $(seq $((30 * BOUND))); do
    [ -z "$DT_MPIRUN" ] && ! kill -0 $mp 2> /dev/null && DT_MPIRUN=$(since "$t1")
    [ -z "$DT_RANKS" ] && [ -z "$(rank_pid $B 2)$(rank_pid $B 3)" ] && DT_RANKS=$(since "$t1")
    [ -z "$DT_B" ] && [ -z "$(ip netns pids $B)" ] && DT_B=$(since "$t1")
    [ -n "$DT_MPIRUN" ] && [ -n "$DT_B" ] && break
    sleep 0.1
  done
  if [ -z "$DT_MPIRUN" ]; then
    kill -9 $mp; grep -v ZEROC_FAULT "$WORK/out" | tail -30
    fail "$case: mpirun still running $((3 * BOUND)) s after the fault"
  fi
  wait $mp; rc=$?
  no_leftovers "$case"
  [ $rc -ne 0 ] || fail "$case: mpirun exited 0"
  awk -v d="$DT_MPIRUN" -v e="$DT_B" -v b=$BOUND 'BEGIN { exit !(d != "" && e != "" && d <= b && e <= b) }' \
    || { cat "$WORK/out"; fail "$case: the job took $DT_MPIRUN s (mpirun) / $DT_B s (host B), bound $BOUND s"; }
  [ "$case" = cut ] && ip -n $B link set ${TAG}vb up
  [ "$case" = host ] && mklink
  return 0
}

# resumed: the job from the last checkpoint to the end, losses as uninterrupted
resumed() {
  (launch "${COMMON[@]}" --resume "$WORK/ck" --metrics "$WORK/m.jsonl") > "$WORK/res.out" 2>&1 \
    || { cat "$WORK/res.out"; fail "$1: resuming from step $SAVED"; }
  no_leftovers "$1: resumed run"
  losses "$WORK/ref.jsonl" > "$WORK/ref.txt"; losses "$WORK/m.jsonl" > "$WORK/got.txt"
  awk -v n=$STEPS 'NR == FNR { ref[$1] = $2 " " $3; next }
       { seen[$1] = 1; if (ref[$1] != $2 " " $3) { print "step " $1 ": " $2 " " $3 " vs " ref[$1]; bad = 1 } }
       END { for (s = 1; s <= n; s++) if (!seen[s]) { print "step " s " never ran"; bad = 1 } exit bad }' \
    "$WORK/ref.txt" "$WORK/got.txt" || fail "$1: losses differ from the uninterrupted run"
}

want() { case " ${MULTINODE_CASES:-kill stop cut host} " in *" $1 "*) return 0 ;; esac; return 1; }
expect() { grep -Eq "$2" "$WORK/out" || { cat "$WORK/out"; fail "$1: no message matching '$2'"; }; }
report() {
  printf '%-5s after the fault: ranks of B gone %4s s, mpirun ended %4s s, B empty %4s s; resumed from step %s bitwise; %s\n' \
    "$1" "$DT_RANKS" "$DT_MPIRUN" "$DT_B" "$SAVED" "$(grep -Eo "$2" "$WORK/out" | head -1)"
}

if want kill; then
fault kill
M_KILL="rank 3 \(pid [0-9]+\) has exited on host $B|process rank 3 with PID [0-9]+ on node $B"
expect kill "$M_KILL"; resumed kill; report kill "$M_KILL"
fi

if want stop; then
fault stop
M_STOP="rank 2 \(pid [0-9]+\) is stopped \(signal or debugger\) on host $B|host $B \(ranks 2,3\) lost[^;]*"
expect stop "$M_STOP"; resumed stop; report stop "$M_STOP"
fi

if want cut; then
fault cut
M_CUT="host $B \(ranks 2,3\) lost: no heartbeat[^;]*"
expect cut "$M_CUT"; resumed cut; report cut "$M_CUT"
fi
if want host; then
fault host
M_HOST="host $B \(ranks 2,3\) lost: no heartbeat[^;]*"
expect host "$M_HOST"
resumed host; report host "$M_HOST"
fi

echo "every fault ended every rank and mpirun within $BOUND s (--comm-timeout $T)"
