/*
 * kernels/cuda/init.cu - creates and destroys the per-kernels cuda state (k->cuda):
 * the cuBLASLt handle and workspace, the reduction scratch, the sumsq partials.
 * Knobs: ZEROC_CUDA_TF32=1 lets fp32 GEMMs use TF32 tensor cores (default exact fp32),
 * ZEROC_CUDA_SCRATCH_MB sizes the reduction scratch (default 64), ZEROC_CUDA_FLASH=0 keeps
 * bf16 attention on the SIMT kernels (default 1: tensor cores, attention_mma.cu),
 * ZEROC_CUDA_LT_EPILOGUE=0 keeps GELU and the bias gradients out of the cuBLASLt epilogues
 * (default 1: fused where cuBLASLt offers an algorithm, GELU in bf16 only; 2: GELU in fp32
 * too, to test the epilogue's GELU at fp32 precision; matmul.cu). kernels/kernels.c reads
 * them from the environment (zeroc_kernels_create) and hands them in. ZEROC_CUDA_ATTENTION
 * (auto, cudnn, zeroc: cuDNN's flash attention in front of these kernels) is read beside
 * them, at zeroc_kernels_create, by kernels/attention_cudnn_cuda.c, which is C and loads
 * cuDNN with dlopen (no .cu file, so the cpu emulation of these kernels does not see it).
 */
#include <stdlib.h>

#include "kernels/cuda/common.cuh"

extern "C" zeroc_result_t zeroc_i_cuda_kernels_init(zeroc_kernels_t *k,
                                                    const zeroc_i_cuda_knobs_t *knobs) {
  zeroc_result_t res = ZEROC_OK;
  int dev = 0, sms = 0, optin = 0;
  const int64_t scratch_mb = knobs->scratch_mb, tf32 = knobs->tf32, flash = knobs->flash,
                lt_epi = knobs->lt_epilogue;
  zc_state_t *st = (zc_state_t *)calloc(1, sizeof *st);
  if (!st) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "cuda kernels state (%zu bytes)", sizeof *st);
  k->cuda = st;
  pthread_mutex_init(&st->sumsq_mu, NULL);
  if (scratch_mb < 1 || scratch_mb > 65536) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "ZEROC_CUDA_SCRATCH_MB=%lld: accepted 1 to 65536",
                     (long long)scratch_mb);
    goto fail;
  }
  {
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess) {
      res = ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaGetDevice/cudaDeviceGetAttribute (device %d): %s", dev,
                       cudaGetErrorString(e));
      goto fail;
    }
  }
  st->sms = sms > 0 ? sms : 1;
  st->smem_optin = (size_t)optin;
  st->tf32 = tf32 != 0;
  st->flash = flash != 0;
  st->lt_epilogues = lt_epi <= 0 ? 0 : lt_epi >= 2 ? 2 : 1;
  {
    cublasStatus_t s = cublasLtCreate(&st->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
      st->lt = NULL;
      res = ZEROC_FAIL(ZEROC_ERR_CUDA, "cublasLtCreate failed: %s", cublasLtGetStatusString(s));
      goto fail;
    }
  }
  st->lt_ws_bytes = ZEROC_K_LT_WORKSPACE_BYTES;
  st->scratch_bytes = (size_t)scratch_mb << 20;
  ZEROC_TRY(zeroc_i_device_alloc(k->mem, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, st->lt_ws_bytes,
                                 &st->lt_ws));
  ZEROC_TRY(zeroc_i_device_alloc(k->mem, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE, st->scratch_bytes,
                                 &st->scratch));
  ZEROC_TRY(zeroc_i_device_alloc(k->mem, ZEROC_MEM_DEVICE, ZEROC_TAG_WORKSPACE,
                                 (size_t)ZC_SUMSQ_STREAMS * ZC_SUMSQ_BLOCKS * sizeof(double),
                                 (void **)&st->sumsq_part));
  return ZEROC_OK;
fail:
  zeroc_i_cuda_kernels_fini(k);
  return res;
}

extern "C" void zeroc_i_cuda_scratch(zeroc_kernels_t *k, void **p, size_t *bytes) {
  zc_state_t *st = zc_state(k);
  *p = st ? st->scratch : NULL;
  *bytes = st ? st->scratch_bytes : 0;
}

extern "C" void zeroc_i_cuda_kernels_fini(zeroc_kernels_t *k) {
  zc_state_t *st = zc_state(k);
  if (!st) return;
  /* Work still queued may use the buffers, and the pool would hand them out again. */
  cudaDeviceSynchronize();
  zc_lt_cache_free(st->lt_cache); /* its descriptors belong to the handle */
  st->lt_cache = NULL;
  if (st->lt) cublasLtDestroy(st->lt);
  zeroc_i_device_free(k->mem, st->lt_ws);
  zeroc_i_device_free(k->mem, st->scratch);
  zeroc_i_device_free(k->mem, st->sumsq_part);
  pthread_mutex_destroy(&st->sumsq_mu);
  free(st);
  k->cuda = NULL;
}
