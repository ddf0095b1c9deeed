#!/usr/bin/env bash
# tests/gpu_layouts.sh - several ranks sharing one GPU through the staged comm
# (ZEROC_COMM=mpi: MPI on pinned host copies of device memory; NCCL refuses a
# shared GPU). fp32, 10 steps, the same global batch of 8 sequences in every
# layout: ZeRO-1, ZeRO-2, ZeRO-3 (2 and 4 ranks), HSDP (4 ranks, --hsdp 2),
# TP 2 and PP 2 (1f1b) against the 1-rank CUDA run; each layout's largest
# relative loss difference must be <= 1e-5. Exits 77 without a GPU.
# usage: gpu_layouts.sh ZEROC_BINARY [MPIRUN]
#   MPIRUN (argument, else the environment's MPIRUN, else `mpirun`): the launcher,
#     an Open MPI mpirun (the GPU machine carries one in a bundle whose env sets
#     OPAL_PREFIX); it gets --allow-run-as-root --oversubscribe when run as root,
#     or MPIRUN_FLAGS from the environment when set.
#   ZEROC_LAYOUTS_DEVICE=cpu runs the same comparisons on the cpu device with
#     ZEROC_COMM=staged (the same staging code with plain copies), so a machine
#     without a GPU checks the script and the staging; there each layout also
#     runs with ZEROC_COMM=mpi (no staging), and losses and gradient norms must
#     be bitwise the same: staging moves bytes, it must not change one.
set -u
ZEROC=$1
MPIRUN=${2:-${MPIRUN:-mpirun}}
DEVICE=${ZEROC_LAYOUTS_DEVICE:-cuda}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-layouts-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if [ "$DEVICE" = cuda ]; then
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no GPU: skipped"; exit 77
  fi
  export ZEROC_COMM=mpi MODEL=${MODEL:-small}
  # a staged collective holds its stream in a device-side wait: one hardware queue
  # per stream (default 8 queues), so no other stream's work queues behind it
  export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
elif [ "$DEVICE" = cpu ]; then
  export ZEROC_COMM=staged MODEL=${MODEL:-tiny}
else
  fail "ZEROC_LAYOUTS_DEVICE='$DEVICE': accepted cuda (default) or cpu"
fi
if [ -z "${MPIRUN_FLAGS+x}" ]; then
  MPIRUN_FLAGS=""
  [ "$(id -u)" = 0 ] && MPIRUN_FLAGS="--allow-run-as-root --oversubscribe"
fi
# 8 sequences per step in every layout: batch x grad-accum (or micro-batches) x dp
COMMON=(--model "$MODEL" --device "$DEVICE" --dtype fp32 --steps 10 --lr 1e-3 --seed 5 --quiet)
run() { # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  $MPIRUN $MPIRUN_FLAGS -x ZEROC_COMM ${CUDA_DEVICE_MAX_CONNECTIONS:+-x CUDA_DEVICE_MAX_CONNECTIONS} -np "$np" "$ZEROC" train "${COMMON[@]}" "$@" \
    --metrics "$WORK/$name.jsonl" > "$WORK/$name.log" 2>&1 \
    || { tail -20 "$WORK/$name.log"; fail "$name ($np ranks: $*) exited non-zero"; }
}
field() { sed -n "s/.*\"${2:-loss}\": \([^,}]*\).*/\1/p" "$1"; }
# compare NAME: NAME's losses against the reference's, 10 steps, <= 1e-5 relative
compare() {
  field "$WORK/ref.jsonl" > "$WORK/a"; field "$WORK/$1.jsonl" > "$WORK/b"
  [ "$(wc -l < "$WORK/b")" = 10 ] || fail "$1: expected 10 losses, got $(wc -l < "$WORK/b")"
  paste "$WORK/a" "$WORK/b" | awk -v n="$1" '
    { d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > m) m = r; if (!(r <= 1e-5)) bad++ }
    END { printf "%-10s max relative loss difference %.2e\n", n, m; exit bad > 0 }' \
    || { paste "$WORK/a" "$WORK/b"; fail "$1: losses differ from the 1-rank run by more than 1e-5"; }
}

if [ "$DEVICE" = cpu ]; then
  # refusals: one line naming the variable, exit 2, on every rank count
  for v in bogus nccl; do
    out=$(ZEROC_COMM=$v $MPIRUN $MPIRUN_FLAGS -x ZEROC_COMM -np 2 "$ZEROC" train "${COMMON[@]}" --steps 1 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "ZEROC_COMM=$v exited $rc, want 2: $out"
    [ "$(echo "$out" | grep -c "zeroc train")" = 1 ] || fail "ZEROC_COMM=$v: want one line: $out"
    echo "$out" | grep -q "ZEROC_COMM.*accepted" || fail "ZEROC_COMM=$v: the line names no accepted values: $out"
  done
  echo "ZEROC_COMM=bogus and =nccl (on cpu) refused: $(echo "$out" | grep "zeroc train")"
fi

# the reference: one rank (its groups have one rank: no collective is staged)
run ref 1 --batch 2 --grad-accum 4
run zero1_np2 2 --zero 1 --batch 2 --grad-accum 2
run zero2_np2 2 --zero 2 --batch 2 --grad-accum 2
run zero3_np2 2 --zero 3 --batch 2 --grad-accum 2
run zero3_np4 4 --zero 3 --batch 2
run hsdp_np4 4 --zero 3 --hsdp 2 --batch 2
run tp2 2 --tp 2 --batch 2 --grad-accum 4
run pp2 2 --pp 2 --pp-schedule 1f1b --batch 2 --microbatches 4
LAYOUTS="zero1_np2 zero2_np2 zero3_np2 zero3_np4 hsdp_np4 tp2 pp2"
for n in $LAYOUTS; do compare "$n"; done
if [ "$DEVICE" = cpu ]; then
  ZEROC_COMM=mpi
  run zero3_np4_mpi 4 --zero 3 --batch 2
  run hsdp_np4_mpi 4 --zero 3 --hsdp 2 --batch 2
  run tp2_mpi 2 --tp 2 --batch 2 --grad-accum 4
  run pp2_mpi 2 --pp 2 --pp-schedule 1f1b --batch 2 --microbatches 4
  for n in zero3_np4 hsdp_np4 tp2 pp2; do
    for k in loss grad_norm; do
      [ -n "$(field "$WORK/$n.jsonl" $k)" ] || fail "$n: no $k logged"
      cmp -s <(field "$WORK/$n.jsonl" $k) <(field "$WORK/${n}_mpi.jsonl" $k) \
        || { paste <(field "$WORK/$n.jsonl" $k) <(field "$WORK/${n}_mpi.jsonl" $k); fail "$n: $k staged differs from plain mpi"; }
    done
  done
  echo "staged and plain mpi: bitwise the same losses and gradient norms (4 layouts)"
  ZEROC_COMM=staged
fi
echo "7 layouts on one $DEVICE device (ZEROC_COMM=$ZEROC_COMM) match the 1-rank run to 1e-5"
