#!/usr/bin/env bash
# benchmarks/gpu/run.sh - on a machine with a GPU, nvcc and CMake: configures zeroc with
# the CUDA backend, builds, runs the GPU tests (ctest -L gpu) and times every cuda
# kernel at GPT-2 124M shapes. Arguments go to zeroc_kernels_bench (--reps, --dtype,
# --bf16-tflops, --fp32-tflops). BUILD_DIR picks the build folder (default build-gpu).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || {
  echo "run.sh: nvidia-smi found no GPU" >&2
  exit 1
}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROC_CUDA=ON
cmake --build "$build" -j"$(nproc)"
out=$(cd "$build" && ctest -L gpu --output-on-failure 2>&1) || {
  echo "$out"
  exit 1
}
echo "$out"
# a skipped gpu test on a GPU machine means the device was not usable: say so loudly
if grep -q "Skipped" <<<"$out"; then
  echo "run.sh: the gpu tests were skipped although nvidia-smi sees a GPU" >&2
  exit 1
fi
"$build/benchmarks/zeroc_kernels_bench" "$@"
# whole-model figures: tokens/s, MFU and peak memory, against PyTorch where installed
"$root/benchmarks/gpu/mfu.sh" "$build/zeroc"
