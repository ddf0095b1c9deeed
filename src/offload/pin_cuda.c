/*
 * offload/pin_cuda.c - page-locking pool buffers for the GPU (compiled only
 * with CUDA): registered host memory copies to and from the device by DMA at
 * full PCIe/NVLink speed and can be the source of asynchronous copies.
 */
#include <cuda_runtime.h>

#include "core/error.h"
#include "offload/offload.h"

zeroc_result_t zeroc__offload_cuda_register(void *p, size_t bytes) {
  /* Portable: the buffer is pinned for every device of the process, since a
   * pool outlives any one stream or device choice. */
  cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ZEROC_FAIL(ZEROC_ERR_CUDA, "cudaHostRegister(%p, %zu bytes, portable) failed: %s (%s)",
                      p, bytes, cudaGetErrorString(e), cudaGetErrorName(e));
  }
  return ZEROC_OK;
}

void zeroc__offload_cuda_unregister(void *p) {
  if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}
