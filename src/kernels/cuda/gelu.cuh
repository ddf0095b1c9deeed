/*
 * kernels/cuda/gelu.cuh - GPT-2's tanh GELU and its derivative in fp32, for the
 * elementwise kernels (elementwise.cu) and the fused GELU backward with the bias
 * gradient's column sums (matmul.cu): one definition, so both give the same bits.
 */
#ifndef ZEROC_KERNELS_CUDA_GELU_CUH
#define ZEROC_KERNELS_CUDA_GELU_CUH

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBE  0.044715f

__device__ __forceinline__ float gelu(float x) {
  float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

/* d gelu / dx = 0.5 (1 + tanh u) + 0.5 x sech^2(u) du/dx */
__device__ __forceinline__ float gelu_grad(float x) {
  float x2 = x * x;
  float u = GELU_SCALE * (x + GELU_CUBE * x2 * x);
  float t = tanhf(u);
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x2);
}

#endif
