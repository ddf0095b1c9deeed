/*
 * tests/test_cuda_parallel.c - the cuda device where work runs side by side: the
 * caching memory pool and sumsq with several streams in flight, and the
 * vocabulary-parallel embedding backward (parallel over rows and channels, yet
 * the cpu twin's order) against the cpu. Exits 77 (skipped) when no GPU is visible.
 */
#include "kernels_cuda_test.h"

/* ---- streams -------------------------------------------------------------------------- */

/* The memory pool across streams: a block freed while one stream still has a write
 * queued on it is not handed to another stream before that write is done; once
 * every stream has passed the free, the block is reused. */
static void test_pool_streams(void) {
  /* a size no other test uses, so the pool has no other block of it cached */
  const size_t big = (size_t)256 << 20, bytes = (size_t)70 << 20;
  zeroc_stream_t *s1 = NULL, *s2 = NULL;
  ZT_OK(zeroc_stream_create(ctx, 0, &s1));
  ZT_OK(zeroc_stream_create(ctx, 0, &s2));
  void *slow = NULL, *a = NULL, *b = NULL, *c = NULL;
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, big, &slow));
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, bytes, &a));
  for (int i = 0; i < 400; i++) ZT_OK(zeroc_memset_async(s1, slow, i, big)); /* ~50 ms */
  ZT_OK(zeroc_memset_async(s1, a, 0x11, bytes));
  zeroc_mem_free(ctx, a); /* s1's write into it is still queued */
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, bytes, &b));
  ZT_OK(zeroc_memset_async(s2, b, 0x22, bytes));
  ZT_OK(zeroc_stream_sync(s2));
  ZT_OK(zeroc_stream_sync(s1));
  unsigned char *h = malloc(bytes);
  ZT_OK(zeroc_memcpy_async(s2, h, b, bytes));
  ZT_OK(zeroc_stream_sync(s2));
  size_t bad = 0;
  for (size_t i = 0; i < bytes; i++) bad += h[i] != 0x22;
  ZT_ASSERT_MSG(bad == 0, "pool: %zu of %zu bytes of a new block written by a stream that "
                "freed it earlier (%s)", bad, bytes, b == a ? "the same block" : "another block");
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, bytes, &c));
  ZT_ASSERT_MSG(c == a, "pool: a block every stream has passed the free of is not reused");
  zeroc_mem_free(ctx, b);
  zeroc_mem_free(ctx, c);
  zeroc_mem_free(ctx, slow);
  zeroc_stream_destroy(s1);
  zeroc_stream_destroy(s2);
  free(h);
}

/* sumsq on two streams at once, many times over: each sum equals the one computed
 * alone, bit for bit. With one partials buffer for both, a first pass on one stream
 * overwrites what the second pass on the other is about to read. */
static void test_sumsq_streams(void) {
  enum { R = 32 };
  const size_t n = (size_t)1 << 24;
  float *x = host_rand(ZEROC_FP32, n, 90, -1, 1), *y = host_rand(ZEROC_FP32, n, 91, -3, 3);
  float *dx = dev_from(ZEROC_FP32, x, n, 0), *dy = dev_from(ZEROC_FP32, y, n, 0);
  double *d = dev_alloc(ZEROC_FP64, 2 * R + 2, 0), h[2 * R + 2];
  ZT_OK(zeroc_memset_async(st, d, 0, sizeof h));
  ZT_OK(zeroc_k_sumsq(kf, st, d + 2 * R, dx, ZEROC_FP32, n)); /* alone */
  ZT_OK(zeroc_k_sumsq(kf, st, d + 2 * R + 1, dy, ZEROC_FP32, n));
  zeroc_stream_t *s2 = NULL;
  zeroc_event_t *ready = NULL, *done = NULL;
  ZT_OK(zeroc_stream_create(ctx, 0, &s2));
  ZT_OK(zeroc_event_create(ctx, &ready));
  ZT_OK(zeroc_event_create(ctx, &done));
  ZT_OK(zeroc_event_record(ready, st));
  ZT_OK(zeroc_stream_wait_event(s2, ready));
  for (int r = 0; r < R; r++) {
    ZT_OK(zeroc_k_sumsq(kf, st, d + r, dx, ZEROC_FP32, n));
    ZT_OK(zeroc_k_sumsq(kf, s2, d + R + r, dy, ZEROC_FP32, n));
  }
  ZT_OK(zeroc_event_record(done, s2));
  ZT_OK(zeroc_stream_wait_event(st, done));
  ZT_OK(zeroc_memcpy_async(st, h, d, sizeof h));
  ZT_OK(zeroc_stream_sync(st));
  int bad = 0;
  for (int r = 0; r < R; r++) bad += h[r] != h[2 * R] || h[R + r] != h[2 * R + 1];
  ZT_ASSERT_MSG(bad == 0, "sumsq on two streams: %d of %d sums differ from the sum alone (%.17g, %.17g)",
                bad, 2 * R, h[2 * R], h[2 * R + 1]);
  ZT_ASSERT_MSG(fabs(h[2 * R] - zeroc__cpu_sumsq(x, ZEROC_FP32, n)) <= 1e-12 * h[2 * R],
                "sumsq %.17g, cpu %.17g", h[2 * R], zeroc__cpu_sumsq(x, ZEROC_FP32, n));
  zeroc_event_destroy(ready);
  zeroc_event_destroy(done);
  zeroc_stream_destroy(s2);
  dev_free_all();
  free(x), free(y);
}

/* ---- vocabulary-parallel embedding backward ------------------------------------------ */

/* dwte of the vocabulary slice v0 .. v0+Vl-1 against the additions in (b,t) order, each
 * sum rounded to dt as it is stored (the cpu twin's walk; in fp32 the twin itself), bit
 * for bit, and the same bits on a repeat. A third of the tokens are 8 frequent ones, as
 * in text, so some rows get hundreds of additions. */
static void check_vocab_embed_backward(zeroc_dtype_t dt, int B, int T, int C, int V, int v0,
                                       int Vl) {
  zeroc_kernels_t *k = kern(dt);
  const size_t N = (size_t)B * T, nw = (size_t)Vl * C;
  int32_t *tok = malloc(N * sizeof *tok), *dtok = NULL;
  uint64_t rs = 5;
  for (size_t i = 0; i < N; i++)
    tok[i] = i % 3 == 0 ? v0 + (int32_t)(zt_rand_u64(&rs) % 8)
                        : (int32_t)(zt_rand_u64(&rs) % (uint64_t)V);
  ZT_OK(zeroc_mem_alloc(ctx, ZEROC_MEM_DEVICE, ZEROC_TAG_ACTIVATIONS, N * sizeof *tok,
                        (void **)&dtok));
  ZT_OK(zeroc_memcpy_async(st, dtok, tok, N * sizeof *tok));
  float *dout = host_rand(dt, N * C, 30, -1, 1), *w = host_rand(dt, nw, 31, -1, 1);
  void *dd = dev_from(dt, dout, N * C, 0), *dw = dev_from(dt, w, nw, 0);
  void *dw2 = dev_from(dt, w, nw, 0);
  ZT_OK(zeroc_k_vocab_embed_backward(k, st, dw, NULL, dd, dtok, B, T, C, v0, Vl));
  ZT_OK(zeroc_k_vocab_embed_backward(k, st, dw2, NULL, dd, dtok, B, T, C, v0, Vl));
  if (dt == ZEROC_FP32)
    zeroc__cpu_vocab_embed_backward(w, NULL, dout, tok, B, T, C, v0, Vl);
  else
    for (size_t bt = 0; bt < N; bt++) {
      const int id = tok[bt] - v0;
      if (id < 0 || id >= Vl) continue;
      for (int c = 0; c < C; c++) {
        float *p = w + (size_t)id * C + c;
        *p = zeroc_bf16_to_f32(zeroc_f32_to_bf16(*p + dout[bt * C + c]));
      }
    }
  float *got = malloc(nw * sizeof *got), *again = malloc(nw * sizeof *again);
  dev_get(dt, got, dw, nw);
  dev_get(dt, again, dw2, nw);
  size_t bad = 0;
  for (size_t i = 0; i < nw; i++) bad += got[i] != w[i];
  ZT_ASSERT_MSG(bad == 0, "vocab_embed_backward %s (B %d T %d C %d, slice %d+%d): %zu of %zu differ",
                zeroc_dtype_name(dt), B, T, C, v0, Vl, bad, nw);
  ZT_ASSERT_MSG(!memcmp(got, again, nw * sizeof *got), "vocab_embed_backward %s: a repeat differs",
                zeroc_dtype_name(dt));
  zeroc_mem_free(ctx, dtok);
  dev_free_all();
  free(tok), free(dout), free(w), free(got), free(again);
}

static void test_vocab_embed_backward(void) {
  for (int i = 0; i < 2; i++) {
    check_vocab_embed_backward(DTYPES[i], 8, 1024, 768, 50304, 25152, 25152); /* GPT-2, tp 2 */
    check_vocab_embed_backward(DTYPES[i], 3, 7, 50, 100, 0, 60); /* C % 8 != 0: element path */
  }
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"memory pool across streams", test_pool_streams},
      {"sumsq on two streams at once", test_sumsq_streams},
      {"vocabulary-parallel embedding backward", test_vocab_embed_backward},
      ZT_END,
  };
  return kc_main(argc, argv, "cuda_parallel", tests);
}
