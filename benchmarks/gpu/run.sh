#!/usr/bin/env bash
# benchmarks/gpu/run.sh - everything the GPU path is checked and measured by, on a machine
# with a GPU: the GPU tests (kernels against their cpu twins, DLRM kernels, NCCL on one
# rank, fp32 training on the GPU against the CPU, with clipping, a skipped step and
# --max-skipped too, and where MPIRUN works the multi-rank
# layouts on one GPU against one rank), every cuda kernel timed at GPT-2 124M's shapes,
# then tokens/s, MFU and peak memory against PyTorch (mfu.sh). cuDNN (for attention) is put
# on LD_LIBRARY_PATH from PyTorch's wheel or /usr/local/cuda/lib64 when present.
#
#   run.sh [--bin DIR] [bench args...]
#
# Without --bin it configures a CUDA build (BUILD_DIR, default build-gpu) and builds it;
# with --bin DIR it runs prebuilt binaries from DIR (zeroc, test_kernels_cuda,
# test_kernels_cuda_engine, test_cuda_parallel, test_dlrm_cuda, test_comm_nccl,
# zeroc_kernels_bench), as on a GPU machine that cannot build zeroc, without CTest's
# absolute paths. Bench args go to zeroc_kernels_bench (--reps, --dtype, --bf16-tflops,
# --fp32-tflops). WHAT=tests|bench|mfu|all (default all)
# picks the parts; MFU_STEPS (default 30) the steps of each MFU run.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=""
if [ "${1:-}" = --bin ]; then
  bin=$(cd "${2:?run.sh: --bin needs a folder}" && pwd) || exit 2
  shift 2
fi
what=${WHAT:-all}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || {
  echo "run.sh: nvidia-smi found no GPU" >&2
  exit 1
}
. "$root/benchmarks/gpu/cudnn_env.sh" # cuDNN 9 on LD_LIBRARY_PATH for attention
if [ -n "$bin" ]; then
  zeroc=$bin/zeroc tests=$bin kbench=$bin/zeroc_kernels_bench
else
  build=${BUILD_DIR:-$root/build-gpu}
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROC_CUDA=ON || exit 1
  cmake --build "$build" -j"$(nproc)" || exit 1
  zeroc=$build/zeroc tests=$build/tests kbench=$build/benchmarks/zeroc_kernels_bench
fi
st=0
check() { # check NAME CMD...: runs it; 77 (skipped) on a GPU machine counts as a failure
  local name=$1
  shift
  echo "== $name"
  "$@"
  local r=$?
  echo "== $name: rc $r"
  [ $r = 0 ] || st=1
}
if [ "$what" = all ] || [ "$what" = tests ]; then
  check test_kernels_cuda "$tests/test_kernels_cuda"
  check test_kernels_cuda_engine "$tests/test_kernels_cuda_engine"
  check test_cuda_parallel "$tests/test_cuda_parallel"
  check test_dlrm_cuda "$tests/test_dlrm_cuda"
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
