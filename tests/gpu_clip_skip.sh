#!/usr/bin/env bash
# tests/gpu_clip_skip.sh - the optimizer step's device-side figures on the GPU
# against the CPU (fp32, world 1): with clipping active on every step and one
# NaN gradient injected at step 3 (ZEROC_FAULT, the test-only injector), the
# losses, the gradient norms and the skipped flags agree (1e-5 relative), the
# held-out loss of an evaluation too; a NaN at every step from step 5 stops the
# GPU run at --max-skipped with the CPU's message and flags. The loss and the
# norm come back from the device once per step (src/shard/step.c), so this
# checks that read and the accumulation of micro-step losses on the device
# (--grad-accum 2). Then the same with 2 ranks sharing the GPU (ZeRO-3 and
# ZeRO-1 through the staged comm, ZEROC_COMM=mpi) against 2 cpu ranks: there
# the ranks' partial sums of squares meet in a device all-reduce before the
# device decides. Exits 77 without a GPU.
# usage: gpu_clip_skip.sh ZEROC_BINARY [MPIRUN]
#   MPIRUN (argument, else the environment's MPIRUN, else `mpirun`): the launcher;
#     --allow-run-as-root --oversubscribe as root, or MPIRUN_FLAGS when set. Without
#     a launcher the 2-rank part fails (run.sh and CTest always pass one).
set -u
ZEROC=$1
MPIRUN=${2:-${MPIRUN:-mpirun}}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-gpu-clip-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU: skipped"; exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
# --clip 0.05: far below the norms of a fresh model, so every step is clipped
COMMON=(--model small --steps 8 --zero 3 --dtype fp32 --lr 1e-3 --seed 5 --grad-accum 2 --clip 0.05
        --val-data synthetic --val-every 4 --val-tokens 2048 --quiet)
field() { sed -n "s/.*\"$2\": \\([^,}]*\\).*/\\1/p" "$1"; }
# close A B: the numbers of two columns agree to 1e-5 relative ("null" only with "null")
close() {
  paste <(field "$1" "$3") <(field "$2" "$3") | awk -v what="$3" '
    $1 == "null" || $2 == "null" { if ($1 != $2) bad++; print; next }
    { d = $1 - $2; if (d < 0) d = -d; r = $2 != 0 ? d / ($2 < 0 ? -$2 : $2) : d; if (r > m) m = r; if (r > 1e-5) bad++; print }
    END { printf "%s: max relative difference %.2e\n", what, m; exit bad > 0 }'
}

for dev in cuda cpu; do
  ZEROC_FAULT="nan@grad:step=3:hit=1" "$ZEROC" train "${COMMON[@]}" --device $dev \
    --metrics "$WORK/$dev.jsonl" 2> "$WORK/$dev.err" || { cat "$WORK/$dev.err"; fail "$dev run"; }
  grep -q "step 3 skipped: gradient norm is nan" "$WORK/$dev.err" || { cat "$WORK/$dev.err"; fail "$dev: no skip warning"; }
done
[ "$(field "$WORK/cuda.jsonl" skipped | tr -d '\n')" = 00100000 ] || fail "gpu skipped flags: $(field "$WORK/cuda.jsonl" skipped | tr '\n' ' ')"
[ "$(field "$WORK/cpu.jsonl" skipped | tr -d '\n')" = 00100000 ] || fail "cpu skipped flags: $(field "$WORK/cpu.jsonl" skipped | tr '\n' ' ')"
# clipping is active: every finite norm is above the threshold
field "$WORK/cpu.jsonl" grad_norm | awk '$1 != "null" && $1 <= 0.05 { exit 1 }' || fail "a norm is below --clip 0.05: clipping not exercised"
close "$WORK/cuda.jsonl" "$WORK/cpu.jsonl" loss || fail "losses differ by more than 1e-5"
close "$WORK/cuda.jsonl" "$WORK/cpu.jsonl" grad_norm || fail "gradient norms differ by more than 1e-5"
close "$WORK/cuda.jsonl" "$WORK/cpu.jsonl" val_loss || fail "held-out losses differ by more than 1e-5"
[ "$(field "$WORK/cuda.jsonl" val_loss | grep -c .)" = 2 ] || fail "gpu: $(field "$WORK/cuda.jsonl" val_loss | grep -c .) held-out losses, want 2"

# --max-skipped: a NaN at every step from step 5 stops both at the third skip
for dev in cuda cpu; do
  out=$(ZEROC_FAULT="nan@grad:step=5-99" "$ZEROC" train "${COMMON[@]}" --device $dev --max-skipped 2 \
        --metrics "$WORK/stop_$dev.jsonl" 2>&1); rc=$?
  [ $rc = 1 ] || { echo "$out"; fail "$dev: exit $rc with --max-skipped, want 1"; }
  echo "$out" | grep -q "3 consecutive steps had a non-finite gradient norm (limit 2): stopping" || { echo "$out"; fail "$dev: no clear message"; }
  [ "$(field "$WORK/stop_$dev.jsonl" skipped | tr -d '\n')" = 0000111 ] || fail "$dev: skipped flags $(field "$WORK/stop_$dev.jsonl" skipped | tr '\n' ' ')"
done
close "$WORK/stop_cuda.jsonl" "$WORK/stop_cpu.jsonl" loss || fail "losses before the stop differ"
echo "1 rank: clipping, a skipped step, held-out loss and --max-skipped agree between GPU and CPU"

# 2 ranks on the one GPU: the device all-reduces the sums of squares, then decides
command -v "$MPIRUN" >/dev/null || fail "no launcher '$MPIRUN' for the 2-rank part"
if [ -z "${MPIRUN_FLAGS+x}" ]; then
  MPIRUN_FLAGS=""
  [ "$(id -u)" = 0 ] && MPIRUN_FLAGS="--allow-run-as-root --oversubscribe"
fi
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32} # see gpu_layouts.sh
for zero in 3 1; do
  for dev in cuda cpu; do
    # ZEROC_COMM=mpi: on cuda the staged comm (NCCL refuses two ranks on one GPU)
    # shellcheck disable=SC2086
    ZEROC_COMM=mpi ZEROC_FAULT="nan@grad:step=3:hit=1" $MPIRUN $MPIRUN_FLAGS -x ZEROC_COMM \
      -x ZEROC_FAULT -x CUDA_DEVICE_MAX_CONNECTIONS -np 2 "$ZEROC" train "${COMMON[@]}" \
      --zero $zero --device $dev --metrics "$WORK/np2_$dev.jsonl" > "$WORK/np2_$dev.err" 2>&1 \
      || { tail -20 "$WORK/np2_$dev.err"; fail "2 ranks, ZeRO-$zero, $dev"; }
    [ "$(field "$WORK/np2_$dev.jsonl" skipped | tr -d '\n')" = 00100000 ] \
      || fail "2 ranks, ZeRO-$zero, $dev: skipped flags $(field "$WORK/np2_$dev.jsonl" skipped | tr '\n' ' ')"
    [ "$(grep -c "step 3 skipped: gradient norm is nan" "$WORK/np2_$dev.err")" = 1 ] \
      || { cat "$WORK/np2_$dev.err"; fail "2 ranks, ZeRO-$zero, $dev: want one skip warning per job"; }
  done
  for what in loss grad_norm val_loss; do
    close "$WORK/np2_cuda.jsonl" "$WORK/np2_cpu.jsonl" $what || fail "2 ranks, ZeRO-$zero: $what differs by more than 1e-5"
  done
done
echo "2 ranks on one GPU (ZeRO-3, ZeRO-1): the device-decided clipping and skip agree with the CPU"
