/*
 * tests/cuda_emu/include/cuda_runtime.h - a CPU emulation of the part of the CUDA
 * runtime and device language the kernels of src/kernels/cuda use, so their logic (tile
 * indices, masks, barriers, shuffles, reductions) runs where no GPU is: one block at a
 * time, each CUDA thread a fiber switched at barriers (a block barrier for __syncthreads,
 * a warp barrier around each shuffle); shared memory is a static (one block runs
 * at a time) and dynamic shared memory starts as NaN so a read before a write shows. It says
 * nothing about speed, the memory model or the real compiler: the gpu tests do.
 */
#ifndef ZEROC_CUDA_EMU_RUNTIME_H
#define ZEROC_CUDA_EMU_RUNTIME_H
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define CUDART_CB

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
  unsigned x, y, z;
};
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
typedef void *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
inline const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
inline const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
  memmove(d, s, n);
  return cudaSuccess;
}
/* Hopper's largest dynamic shared memory per block. */
template <typename F> cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int v) {
  return v <= 227 * 1024 ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

namespace emu {

/*
 * Each CUDA thread of a block is a fiber (ucontext) with its own stack; one OS thread
 * runs them round robin, switching only at barriers, so a block of 1024 threads costs
 * 1024 cheap user-space switches per barrier. A barrier counts arrivals; the last to
 * arrive opens it; a thread that returns stops being waited for, as an exited CUDA
 * thread does.
 */
struct Barrier {
  unsigned expected = 0, arrived = 0;
  uint64_t gen = 0;
};

struct Block {
  unsigned nt = 0;
  std::vector<ucontext_t> ctx;
  std::vector<char> done;
  Barrier block;
  std::vector<Barrier> warp;
  std::vector<uint64_t> xchg; /* shuffle slots, one per thread */
  std::vector<float> smem;    /* dynamic shared memory */
  ucontext_t sched;
  unsigned current = 0;
  dim3 g, b;
  uint3 bid;
  const std::function<void(unsigned)> *job = nullptr;
};
inline Block *cur;
inline float *dyn_smem() { return cur->smem.data(); }
inline unsigned tid() { return cur->current; }

/* Fiber stacks, reused by every block (pages are touched only as far as used). */
constexpr size_t kStack = 128 * 1024;
inline char *stacks(unsigned n) {
  static std::unique_ptr<char[]> s;
  static unsigned have = 0;
  if (have < n) {
    s.reset(new char[(size_t)n * kStack]);
    have = n;
  }
  return s.get();
}

inline void set_indices(Block *blk, unsigned t) {
  threadIdx = {t % blk->b.x, (t / blk->b.x) % blk->b.y, t / (blk->b.x * blk->b.y)};
  blockIdx = blk->bid;
  blockDim = blk->b;
  gridDim = blk->g;
}

/* Back to the scheduler; it resumes the next unfinished fiber. */
inline void yield() { swapcontext(&cur->ctx[cur->current], &cur->sched); }

inline void release_if_full(Barrier &b) {
  if (b.arrived > 0 && b.arrived == b.expected) {
    b.arrived = 0;
    b.gen++;
  }
}

inline void wait(Barrier &b) {
  const uint64_t gen = b.gen;
  b.arrived++;
  release_if_full(b);
  while (b.gen == gen) yield();
}

inline void drop(Barrier &b) {
  b.expected--;
  release_if_full(b);
}

/* A fiber's first function: the scheduler has set cur->current to its thread. */
inline void fiber_entry() {
  Block *blk = cur;
  const unsigned t = blk->current;
  (*blk->job)(t);
  blk->done[t] = 1;
  drop(blk->warp[t / 32]);
  drop(blk->block);
  /* returning resumes uc_link: the scheduler */
}

/* kernel<<<g, b, smem>>>(args) as launch(g, b, smem, kernel)(args): runs the grid's
 * blocks one after another, each block's threads as fibers. */
template <typename... P> struct Launch {
  void (*fn)(P...);
  dim3 g, b;
  size_t smem;
  template <typename... A> void operator()(A... args) {
    const unsigned nt = b.x * b.y * b.z;
    if (nt % 32 || nt > 1024) {
      fprintf(stderr, "emu: block of %u threads\n", nt);
      abort();
    }
    char *stk = stacks(nt);
    std::function<void(unsigned)> job = [&](unsigned) { fn(args...); };
    for (unsigned bz = 0; bz < g.z; bz++)
      for (unsigned by = 0; by < g.y; by++)
        for (unsigned bx = 0; bx < g.x; bx++) {
          Block blk;
          blk.nt = nt;
          blk.g = g, blk.b = b, blk.bid = {bx, by, bz};
          blk.job = &job;
          blk.ctx.resize(nt);
          blk.done.assign(nt, 0);
          blk.block.expected = nt;
          blk.warp.resize(nt / 32);
          for (auto &w : blk.warp) w.expected = 32;
          blk.xchg.assign(nt, 0);
          blk.smem.assign(smem / 4 + 1, std::nanf("")); /* poison: a read before a write shows */
          cur = &blk;
          for (unsigned t = 0; t < nt; t++) {
            getcontext(&blk.ctx[t]);
            blk.ctx[t].uc_stack.ss_sp = &stk[(size_t)t * kStack];
            blk.ctx[t].uc_stack.ss_size = kStack;
            blk.ctx[t].uc_link = &blk.sched;
            makecontext(&blk.ctx[t], fiber_entry, 0);
          }
          for (unsigned left = nt; left > 0;) {
            left = 0;
            for (unsigned t = 0; t < nt; t++) {
              if (blk.done[t]) continue;
              blk.current = t;
              set_indices(&blk, t);
              swapcontext(&blk.sched, &blk.ctx[t]);
              left += !blk.done[t];
            }
          }
          cur = nullptr;
        }
  }
};
template <typename... P>
Launch<P...> launch(dim3 g, dim3 b, size_t smem, cudaStream_t, void (*fn)(P...)) {
  return Launch<P...>{fn, g, b, smem};
}
template <typename... P> Launch<P...> launch(dim3 g, dim3 b, size_t smem, void (*fn)(P...)) {
  return Launch<P...>{fn, g, b, smem};
}
template <typename... P> Launch<P...> launch(dim3 g, dim3 b, void (*fn)(P...)) {
  return Launch<P...>{fn, g, b, 0};
}
} // namespace emu

/* One OS thread runs the fibers and switches only at barriers: a plain read-modify-write. */
inline float atomicAdd(float *p, float v) {
  float old = *p;
  *p = old + v;
  return old;
}
inline void __syncthreads() {
  emu::wait(emu::cur->block);
  emu::set_indices(emu::cur, emu::cur->current);
}
/* Every lane of the warp must call it (as the kernels do: full-warp shuffles only). */
template <typename V> V __shfl_xor_sync(unsigned, V v, int o) {
  static_assert(sizeof(V) <= 8, "shuffle width");
  emu::Block *blk = emu::cur;
  const unsigned t = blk->current, lane = t & 31, base = t - lane;
  uint64_t u = 0;
  memcpy(&u, &v, sizeof v);
  blk->xchg[t] = u;
  emu::wait(blk->warp[t / 32]);
  u = blk->xchg[base + (lane ^ (unsigned)o)];
  emu::wait(blk->warp[t / 32]); /* nobody overwrites a slot before every lane has read */
  emu::set_indices(blk, t);
  V r;
  memcpy(&r, &u, sizeof r);
  return r;
}

inline cudaError_t cudaGetDevice(int *d) {
  *d = 0;
  return cudaSuccess;
}
/* Two multiprocessors, so grid-striding loops take several turns; Hopper's opt-in limit. */
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrMultiProcessorCount ? 2 : 227 * 1024;
  return cudaSuccess;
}

#endif
