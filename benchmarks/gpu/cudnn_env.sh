# benchmarks/gpu/cudnn_env.sh - sourced by run.sh and mfu.sh: puts cuDNN 9 on LD_LIBRARY_PATH
# for attention's fast path (kernels/attention_cudnn_cuda.c dlopens libcudnn.so.9), from
# PyTorch's wheel first (site-packages/nvidia/cudnn/lib), else /usr/local/cuda/lib64, and
# says which. The tests and the kernel benchmark print the version and file they loaded.
# ZEROC_CUDA_ATTENTION=auto is zeroc's default (cuDNN where it loads and takes the shape);
# cuDNN's workspace (the fast backward's fp32 dQ accumulator, B x T x C x 4 bytes, or with
# --deterministic the dP of about B x NH x T x T x 2) is sized by the formula the planner
# predicts, so no ZEROC_CUDA_SCRATCH_MB is needed for the prediction to hold.
if [ -z "${ZEROC_CUDNN_ENV_DONE:-}" ]; then
  export ZEROC_CUDNN_ENV_DONE=1
  export ZEROC_CUDA_ATTENTION=${ZEROC_CUDA_ATTENTION:-auto}
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
