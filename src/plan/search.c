/*
 * plan/search.c - `zeroc plan --all`: every sensible layout of a cluster for a
 * fixed global batch, the fastest micro-batch count of each, those that fit,
 * fastest first.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "plan/plan_internal.h"
#include "zeroc/plan.h"

/* A growing array of results. */
typedef struct list {
  zeroc_plan_result_t *v;
  size_t n, cap;
} list_t;

static zeroc_result_t push(list_t *l, const zeroc_plan_result_t *r) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    zeroc_plan_result_t *v = realloc(l->v, cap * sizeof *v);
    if (!v)
      return ZEROC_FAIL(ZEROC_ERR_NOMEM, "zeroc_plan_search: realloc of %zu results failed", cap);
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = *r;
  return ZEROC_OK;
}

static int by_time(const void *pa, const void *pb) {
  const zeroc_plan_result_t *a = pa, *b = pb;
  if (a->time.total != b->time.total) return a->time.total < b->time.total ? -1 : 1;
  if (a->device.total != b->device.total) return a->device.total < b->device.total ? -1 : 1;
  return 0;
}

/* Of the micro-batch counts m dividing `per_rank` (sequences per dp rank per
 * step), the one whose step is shortest among those that fit; ties go to the
 * smaller m (larger micro-batches keep a GPU busier than this model says). */
static zeroc_result_t best_microbatches(zeroc_plan_config_t *c, int64_t per_rank,
                                        zeroc_plan_result_t *best, int *found) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_plan_result_t r;
  *found = 0;
  /* Divisors in pairs (d, per_rank / d): sqrt(per_rank) steps. */
  for (int64_t d = 1; d * d <= per_rank; d++) {
    if (per_rank % d) continue;
    int64_t pair[2] = {d, per_rank / d};
    for (int k = 0; k < (pair[0] == pair[1] ? 1 : 2); k++) {
      int64_t m = pair[k];
      c->microbatches = (int)m;
      c->model.batch = (int)(per_rank / m);
      ZEROC_TRY(zeroc__plan_check_layout(c));
      ZEROC_TRY(zeroc__plan_layout(c, &r));
      if (r.fits && (!*found || r.time.total < best->time.total ||
                     (r.time.total == best->time.total && m < best->cfg.microbatches))) {
        *best = r;
        *found = 1;
      }
    }
  }
fail:
  return res;
}

/* The ZeRO stages and replica counts of one tp x pp x cp (set in c): the
 * fastest micro-batch count of each, when one fits. */
static zeroc_result_t search_dp(zeroc_plan_config_t *c, int64_t G, list_t *l) {
  zeroc_result_t res = ZEROC_OK;
  int dp = c->gpus / (c->tp * c->pp * c->cp), p = c->pp;
  if (G % dp) return ZEROC_OK;
  for (int z = 0; z <= 3; z++) {
    if (p > 1 && z > 1) continue; /* with PP, grads are reduced once per step */
    if (c->offload_params != ZEROC_OFFLOAD_NONE && z != 3) continue;
    /* With one rank to shard over every stage holds the same; keep stage 0
     * (or 3 when the params are offloaded, which needs it). */
    if (dp * c->cp == 1 && z > 0 && c->offload_params == ZEROC_OFFLOAD_NONE) continue;
    for (int R = 1; R <= dp; R++) {
      /* R = dp without cp would shard over one rank: that is ZeRO-0's memory. */
      if (dp % R || (R > 1 && (z == 0 || (R == dp && c->cp == 1)))) continue;
      zeroc_plan_result_t best;
      int found;
      c->zero = z;
      c->hsdp = R;
      ZEROC_TRY(best_microbatches(c, G / dp, &best, &found));
      if (found) ZEROC_TRY(push(l, &best));
    }
  }
fail:
  return res;
}

zeroc_result_t zeroc_plan_search(const zeroc_plan_config_t *cfg, int64_t global_batch,
                                 zeroc_plan_result_t **list, size_t *count) {
  zeroc_result_t res = ZEROC_OK;
  list_t l = {NULL, 0, 0};
  zeroc_plan_config_t c;
  if (!list || !count)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_plan_search: list (%p) and count (%p) must "
                      "not be NULL",
                      (void *)list, (void *)count);
  *list = NULL;
  *count = 0;
  ZEROC_TRY(zeroc_plan_config_resolve(cfg, &c));
  ZEROC_TRY(zeroc__plan_check_common(&c));
  c.vpp = 1; /* the search covers 1F1B pipelines */
  /* cp: the largest context-parallel size to try (1 when unset); cp_mode: the
   * one mode to try, both when unset */
  int cp_max = c.cp, mode_lo = ZEROC_CP_MODE_RING, mode_hi = ZEROC_CP_MODE_ULYSSES;
  if (cfg->size >= offsetof(zeroc_plan_config_t, cp_mode) + sizeof cfg->cp_mode &&
      cfg->cp_mode != ZEROC_CP_MODE_DEFAULT)
    mode_lo = mode_hi = c.cp_mode;
  if (cp_max < 1 || mode_lo < ZEROC_CP_MODE_RING || mode_hi > ZEROC_CP_MODE_ULYSSES) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "zeroc_plan_search: cp %d, cp_mode %d: accepted cp >= 1 (the largest to "
                     "try), cp_mode ring, ulysses or DEFAULT (both)",
                     cp_max, (int)c.cp_mode);
    goto fail;
  }
  int64_t G = global_batch ? global_batch : (int64_t)c.model.batch * c.gpus;
  if (G < 1 || G > ((int64_t)1 << 24)) {
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "zeroc_plan_search: global batch %lld: accepted 1 .. 2^24 sequences "
                     "(0: batch x gpus)",
                     (long long)G);
    goto fail;
  }
  int N = c.gpus, gpn = c.gpus_per_node;
  for (int t = 1; t <= 8 && t <= gpn; t++) {
    /* TP stays inside a node (the Megatron paper's advice) and splits heads. */
    if (gpn % t || N % t || c.model.heads % t) continue;
    for (int p = 1; p <= c.model.layers && p <= N / t; p++) {
      if (c.model.layers % p || (N / t) % p) continue;
      for (int cp = 1; cp <= cp_max && cp <= N / (t * p); cp *= 2)
        for (int mode = mode_lo; mode <= (cp > 1 ? mode_hi : mode_lo); mode++) {
          c.tp = t;
          c.pp = p;
          c.cp = cp;
          c.cp_mode = (zeroc_cp_mode_t)mode;
          /* as zeroc__plan_check_cp, without leaving its message behind */
          if ((N / (t * p)) % cp || c.model.seq % (2 * cp) ||
              (mode == ZEROC_CP_MODE_ULYSSES && (c.model.heads / t) % cp))
            continue;
          ZEROC_TRY(search_dp(&c, G, &l));
        }
    }
  }
  if (l.n) qsort(l.v, l.n, sizeof *l.v, by_time);
  *list = l.v;
  *count = l.n;
  return ZEROC_OK;
fail:
  free(l.v);
  return res;
}

void zeroc_plan_free(zeroc_plan_result_t *list) { free(list); }
