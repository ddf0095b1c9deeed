/*
 * tests/cuda_emu/include/cub/device/device_radix_sort.cuh - the CPU emulation's stand-in
 * for CUB's radix sort: the same contract (stable, keys ascending, temporary storage
 * queried with a NULL pointer) through std::stable_sort.
 */
#ifndef ZEROC_CUDA_EMU_CUB_SORT_H
#define ZEROC_CUDA_EMU_CUB_SORT_H
#include "cuda_runtime.h"
#include <algorithm>
#include <numeric>
#include <vector>
namespace cub {
struct DeviceRadixSort {
  template <class K, class V>
  static cudaError_t SortPairs(void *temp, size_t &bytes, const K *kin, K *kout, const V *vin,
                               V *vout, int n, int = 0, int = 32, cudaStream_t = 0) {
    if (!temp) {
      bytes = 4096;
      return cudaSuccess;
    }
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return kin[a] < kin[b]; });
    std::vector<K> k2(n);
    std::vector<V> v2(n);
    for (int i = 0; i < n; i++) {
      k2[i] = kin[idx[i]];
      v2[i] = vin[idx[i]];
    }
    std::copy(k2.begin(), k2.end(), kout);
    std::copy(v2.begin(), v2.end(), vout);
    return cudaSuccess;
  }
};
} // namespace cub
#endif
