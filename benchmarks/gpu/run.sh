#!/usr/bin/env bash
# benchmarks/gpu/run.sh - everything the GPU path is checked and measured by, on a machine
# with a GPU: the GPU tests (kernels against their cpu twins, DLRM kernels, NCCL on one
# rank, fp32 training on the GPU against the CPU, with clipping, a skipped step and
# --max-skipped too, and where MPIRUN works the multi-rank
# layouts on one GPU against one rank), every cuda kernel timed at GPT-2 124M's shapes,
# then tokens/s, MFU and peak memory against PyTorch (mfu.sh). cuDNN (for attention) is put
# on LD_LIBRARY_PATH from PyTorch's wheel or /usr/local/cuda/lib64 when present.
#
#   run.sh [--lease] [--logs DIR] [--bin DIR] [bench args...]
#
# Without --bin it configures a CUDA build (BUILD_DIR, default build-gpu) and builds it;
# with --bin DIR it runs prebuilt binaries from DIR (zeroc, test_kernels_cuda,
# test_kernels_cuda_engine, test_cuda_parallel, test_dlrm_cuda, test_comm_nccl,
# zeroc_kernels_bench), as on a GPU machine that cannot build zeroc, without CTest's
# absolute paths. Bench args go to zeroc_kernels_bench (--reps, --dtype, --bf16-tflops,
# --fp32-tflops). WHAT=tests|bench|mfu|all (default all)
# picks the parts; MFU_STEPS (default 30) the steps of each MFU run.
#
# --lease: the run for a short GPU lease (about 6 minutes of command time on an H100): the
# stages below, most valuable first, each under its own `timeout` (a slow stage cannot eat
# the next), each printing its wall time, its output written to DIR/<stage>.log as it goes
# (--logs DIR, default $OUT when set, else ./gpu-logs), the per-run training logs packed
# into DIR/runs.tgz after each MFU stage. A failed stage fails the script (exit 1) but the
# later stages still run; a failed zeroc run fails its MFU stage (mfu.sh exits 1). Without a
# GPU it stops at once (exit 1). Stage limits (seconds) are LEASE_<STAGE>_S; their estimates
# come from benchmarks/RESULTS.md (H100, 2026-11-24; step times and start-up measured, the
# tests' own times not recorded there, so theirs is a guess):
#   tests    180 s limit: the GPU tests as WHAT=tests runs them; the single-GPU programs
#            first (test_kernels_cuda with cuDNN's attention at T up to 2048 against the cpu
#            reference, gpu_train, gpu_clip_skip), then the staged multi-rank layouts with
#            MPIRUN. Estimate 90-150 s.
#   bench     30 s: zeroc_kernels_bench --reps 10 --dtype bf16 (124M shapes: each kernel
#            well under 2 ms; start-up and cuBLASLt plans dominate). Estimate 10-20 s.
#   mfu      150 s: mfu.sh, gpt-1.3b (24 x 2048, B 4, seq 2048), llama3.2-1b (B 2, seq 2048:
#            issue 39's row, the Llama family's first GPU run; its GQA goes through the
#            multi-head kernels, kv heads repeated) and gpt2-124m, 20 steps,
#            ZEROC_CUDA_ATTENTION=auto (cuDNN SDPA), against PyTorch eager. zeroc 1.3B:
#            9 s start-up + 20 x 182 ms; eager 1.3B: 20 x 165 ms + model build and import
#            ~15 s; 124m: 20 x 43 ms (zeroc), 54 ms (eager), + start-ups; llama3.2-1b not
#            yet measured (~ the 1.3B's). Estimate 80-115 s.
#   mfu_own   40 s: the same two models on zeroc's own attention (ZEROC_CUDA_ATTENTION=zeroc),
#            zeroc only: the A/B against cuDNN in the same run. Estimate 15-25 s.
#   nccl_self 30 s: the 1.3B with ZEROC_NCCL_SELF=1 (NCCL's kernels in the step, not the
#            one-rank copies), zeroc only. Estimate 15-20 s.
#   offload   60 s: the 1.3B with parameters and optimizer state in host memory
#            (--offload-params cpu --offload-optimizer cpu), 10 steps. Estimate 25-40 s.
#   compile  110 s, optional (LEASE_COMPILE=0 skips it), after the others: torch.compile
#            rows for the two models (zeroc and eager rerun beside them for the ratios).
#            On an H200 (2026-11-28) the stage took about 110 s.
#   largest  300 s, only when named in LEASE_STAGES: benchmarks/gpu/largest.sh, the
#            deepest 4096-wide GPT the planner fits on the GPU, without offload and with
#            the optimizer in host memory, 3 steps each (each start draws ~9e9 parameters
#            on the host: about 40 s). Estimate 150-250 s: a call of its own.
# The stages run are LEASE_STAGES (default "tests bench mfu mfu_own nccl_self offload
# compile"). On an H200 the default took 309 s (tests 61, bench 12, mfu 79, mfu_own 12,
# nccl_self 12, offload 21, compile about 110): one call, with room for a rerun or
# `LEASE_STAGES=largest` in a second. The stages' "attention:" lines (the backend really used) are
# printed at the end: a "cuDNN" stage that did not run cuDNN fails the script.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
self="$root/benchmarks/gpu/run.sh"
bin="" lease=0 logs=""
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$(cd "${2:?run.sh: --bin needs a folder}" && pwd) || exit 2; shift 2 ;;
    --lease) lease=1; shift ;;
    --logs) logs=${2:?run.sh: --logs needs a folder}; shift 2 ;;
    *) break ;;
  esac
done
what=${WHAT:-all}
# the GPU first: without one every stage would fail slowly
if ! timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; then
  echo "run.sh: nvidia-smi found no GPU: nothing run" >&2
  exit 1
fi
. "$root/benchmarks/gpu/cudnn_env.sh" # cuDNN 9 on LD_LIBRARY_PATH for attention
if [ -n "$bin" ]; then
  zeroc=$bin/zeroc tests=$bin kbench=$bin/zeroc_kernels_bench
else
  build=${BUILD_DIR:-$root/build-gpu}
  if [ -z "${RUN_SH_BUILT:-}" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROC_CUDA=ON || exit 1
    cmake --build "$build" -j"$(nproc)" || exit 1
    export RUN_SH_BUILT=1 BUILD_DIR=$build # the lease's stages reuse this build
  fi
  zeroc=$build/zeroc tests=$build/tests kbench=$build/benchmarks/zeroc_kernels_bench
fi

if [ $lease = 1 ]; then
  logs=${logs:-${OUT:-$PWD/gpu-logs}}
  mkdir -p "$logs" || exit 2
  logs=$(cd "$logs" && pwd)
  runs=$(mktemp -d "${TMPDIR:-/tmp}/zeroc-lease-XXXXXX") # per-run training logs
  binarg=(); [ -n "$bin" ] && binarg=(--bin "$bin")
  t0=$(date +%s) st=0 failed=""
  stage() { # stage NAME LIMIT_S CMD...: runs CMD under timeout, tee'd into $logs/NAME.log
    local name=$1 lim=$2; shift 2
    local s0; s0=$(date +%s)
    echo "=== lease stage $name (limit $lim s) at +$((s0 - t0)) s"
    timeout -k 10 "$lim" "$@" 2>&1 | tee "$logs/$name.log"
    local r=${PIPESTATUS[0]} w=$(($(date +%s) - s0))
    [ "$r" = 124 ] || [ "$r" = 137 ] && echo "=== $name: stopped at its limit of $lim s" | tee -a "$logs/$name.log"
    echo "=== lease stage $name: rc $r, wall $w s (elapsed +$(($(date +%s) - t0)) s)" | tee -a "$logs/$name.log"
    [ "$r" = 0 ] || { st=1; failed="$failed $name"; }
  }
  pack() { tar -C "$runs" -czf "$logs/runs.tgz" . 2>/dev/null; }
  steps=${MFU_STEPS:-20}
  stages=" ${LEASE_STAGES:-tests bench mfu mfu_own nccl_self offload compile} "
  for s_ in $stages; do
    case " tests bench mfu mfu_own nccl_self offload compile largest " in *" $s_ "*) ;;
      *) echo "run.sh: LEASE_STAGES names '$s_': accepted tests bench mfu mfu_own nccl_self offload compile largest" >&2; exit 2 ;;
    esac
  done
  want() { case $stages in *" $1 "*) return 0 ;; esac; echo "=== lease stage $1: not in LEASE_STAGES"; return 1; }
  want tests && stage tests "${LEASE_TESTS_S:-180}" env WHAT=tests "$self" "${binarg[@]}"
  want bench && stage bench "${LEASE_BENCH_S:-30}" env WHAT=bench "$self" "${binarg[@]}" --reps 10 --dtype bf16
  want mfu && stage mfu "${LEASE_MFU_S:-150}" env ZEROC_CUDA_ATTENTION=auto LOGDIR="$runs/cudnn" \
    MODELS="gpt-1.3b llama3.2-1b gpt2-124m" TORCH=eager "$root/benchmarks/gpu/mfu.sh" "$zeroc" "$steps"
  pack
  want mfu_own && stage mfu_own "${LEASE_MFU_OWN_S:-40}" env ZEROC_CUDA_ATTENTION=zeroc \
    LOGDIR="$runs/own" MODELS="gpt-1.3b gpt2-124m" TORCH=none "$root/benchmarks/gpu/mfu.sh" "$zeroc" "$steps"
  pack
  # did the cuDNN stage really run cuDNN? (the header's line, and the first step's if it changed)
  echo "=== attention backend of each MFU run"
  for f in "$runs"/*/*.zeroc.log; do
    [ -e "$f" ] || continue
    a=$(grep -h "^  attention" "$f" | tail -1) # the first step's line where it changed
    echo "${f#"$runs"/}: ${a:-no attention line (the run failed before its header?)}"
    case $f in */cudnn/*)
      case $a in *"cuDNN SDPA forward and"*) ;;
        *) echo "NOT ON cuDNN: ${f#"$runs"/} was to run cuDNN's attention and did not" ;; esac ;;
    esac
  done | tee "$logs/attention.log"
  grep -q "^NOT ON cuDNN" "$logs/attention.log" && { st=1; failed="$failed attention"; }
  # issue 40's hazard 6 (real NCCL kernels in the step) and its offload row, zeroc only
  want nccl_self && stage nccl_self "${LEASE_NCCL_SELF_S:-30}" env ZEROC_NCCL_SELF=1 ZEROC_CUDA_ATTENTION=auto \
    LOGDIR="$runs/ncclself" MODELS="gpt-1.3b" TORCH=none "$root/benchmarks/gpu/mfu.sh" "$zeroc" "$steps"
  want offload && stage offload "${LEASE_OFFLOAD_S:-60}" env ZEROC_CUDA_ATTENTION=auto LOGDIR="$runs/offload" \
    ZEROC_FLAGS="--offload-optimizer cpu --offload-params cpu" MODELS="gpt-1.3b" TORCH=none \
    "$root/benchmarks/gpu/mfu.sh" "$zeroc" 10
  pack
  if [ "${LEASE_COMPILE:-1}" != 0 ] && want compile; then
    stage compile "${LEASE_COMPILE_S:-110}" env ZEROC_CUDA_ATTENTION=auto LOGDIR="$runs/compile" \
      MODELS="gpt-1.3b gpt2-124m" TORCH=eager,compile "$root/benchmarks/gpu/mfu.sh" "$zeroc" "$steps"
    pack
  else
    echo "=== lease stage compile: skipped (LEASE_COMPILE=0 or not in LEASE_STAGES)"
  fi
  want largest && stage largest "${LEASE_LARGEST_S:-300}" "$root/benchmarks/gpu/largest.sh" "$zeroc"
  rm -rf "$runs"
  verdict="every stage passed"; [ -n "$failed" ] && verdict="FAILED:$failed"
  echo "=== lease done in $(($(date +%s) - t0)) s: $verdict; logs in $logs"
  exit $st
fi

st=0
check() { # check NAME CMD...: runs it; 77 (skipped) on a GPU machine counts as a failure
  local name=$1
  shift
  echo "== $name"
  local s0; s0=$(date +%s)
  "$@"
  local r=$?
  echo "== $name: rc $r, $(($(date +%s) - s0)) s"
  [ $r = 0 ] || st=1
}
if [ "$what" = all ] || [ "$what" = tests ]; then
  check test_kernels_cuda "$tests/test_kernels_cuda"
  check test_kernels_cuda_engine "$tests/test_kernels_cuda_engine"
  check test_cuda_parallel "$tests/test_cuda_parallel"
  check test_dlrm_cuda "$tests/test_dlrm_cuda"
  # the Llama kernels' cuda twins against the cpu ones (issue 39; never run on a GPU yet)
  if [ -x "$tests/test_kernels_cuda_llama" ]; then
    check test_kernels_cuda_llama "$tests/test_kernels_cuda_llama"
  else
    echo "== run.sh: $tests/test_kernels_cuda_llama missing: the Llama kernels were not checked" >&2
  fi
  check test_comm_nccl "$tests/test_comm_nccl"
  check gpu_train_matches_cpu "$root/tests/gpu_train.sh" "$zeroc"
  check gpu_clip_skip_matches_cpu "$root/tests/gpu_clip_skip.sh" "$zeroc" "${MPIRUN:-mpirun}"
  # several ranks on one GPU through the staged comm (MPIRUN: the launcher, default mpirun)
  mpirun=${MPIRUN:-mpirun}
  if command -v "$mpirun" >/dev/null; then
    flags=(); [ "$(id -u)" = 0 ] && flags=(--allow-run-as-root --oversubscribe)
    for np in 2 4; do
      check "test_comm_nccl staged np $np" env ZEROC_COMM=mpi "$mpirun" "${flags[@]}" -x ZEROC_COMM -np $np "$tests/test_comm_nccl"
    done
    check gpu_layouts "$root/tests/gpu_layouts.sh" "$zeroc" "$mpirun"
  else
    echo "== run.sh: no $mpirun: the multi-rank checks on one GPU were not run" >&2
    st=1
  fi
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  check zeroc_kernels_bench "$kbench" "$@"
fi
if [ "$what" = all ] || [ "$what" = mfu ]; then
  # whole-model figures: tokens/s, MFU and peak memory, against PyTorch where installed
  check mfu "$root/benchmarks/gpu/mfu.sh" "$zeroc" "${MFU_STEPS:-30}"
fi
exit $st
