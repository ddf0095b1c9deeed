# benchmarks/gpu/cudnn_env.sh - sourced by run.sh and mfu.sh: puts cuDNN 9 on LD_LIBRARY_PATH
# for attention's fast path (kernels/attention_cudnn_cuda.c dlopens libcudnn.so.9), from
# PyTorch's wheel first (site-packages/nvidia/cudnn/lib), else /usr/local/cuda/lib64, and
# says which. The tests and the kernel benchmark print the version and file they loaded;
# zeroc's default is still its own kernels (ZEROC_CUDA_ATTENTION=zeroc) until the planner
# counts cuDNN's workspace (the path passed on an H200, 2026-11-28); these scripts ask for
# auto unless told otherwise.
if [ -z "${ZEROC_CUDNN_ENV_DONE:-}" ]; then
  export ZEROC_CUDNN_ENV_DONE=1
  export ZEROC_CUDA_ATTENTION=${ZEROC_CUDA_ATTENTION:-auto}
  # cuDNN's attention takes its workspace from the kernel scratch (64 MiB by default), or
  # allocates one of its own sized to the plan: the fast backward's fp32 dQ accumulator is
  # B x T x C x 4 bytes (128 MiB at the 1.3B model's B4 T2048), the deterministic one's
  # (--deterministic) about B x NH x T x T x 2 (512 MiB there). A scratch that holds it
  # keeps the planner's prediction whole (it counts the scratch, not the extra buffer).
  [ "$ZEROC_CUDA_ATTENTION" = zeroc ] || export ZEROC_CUDA_SCRATCH_MB=${ZEROC_CUDA_SCRATCH_MB:-1024}
  echo "ZEROC_CUDA_ATTENTION=$ZEROC_CUDA_ATTENTION ZEROC_CUDA_SCRATCH_MB=${ZEROC_CUDA_SCRATCH_MB:-64}"
  cudnn_dir=$(python3 -c 'import nvidia.cudnn as c, os; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)
  [ -n "$cudnn_dir" ] && [ -e "$cudnn_dir/libcudnn.so.9" ] || cudnn_dir=/usr/local/cuda/lib64
  if [ -e "$cudnn_dir/libcudnn.so.9" ]; then
    export LD_LIBRARY_PATH=$cudnn_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "cuDNN for attention: $cudnn_dir ($(basename "$(readlink -f "$cudnn_dir/libcudnn.so.9")"))"
  else
    echo "cuDNN for attention: no libcudnn.so.9 (PyTorch wheel, /usr/local/cuda/lib64): zeroc's kernels" >&2
  fi
fi
