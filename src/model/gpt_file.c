/*
 * model/gpt_file.c - decoder weights read from safetensors files as Hugging
 * Face writes them (see gpt_file.h): the name layout, the tied LM head, a
 * longer position table, 16-bit values; every check names the tensor.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_file.h"

/* "(64)", "(768, 2304)", "()" for a scalar: a shape with its real rank, so
 * that a 1-D tensor and a (64, 1) one read differently in a message. */
static const char *dims_text(const uint64_t *shape, int ndim, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%" PRIu64, i ? ", " : "", shape[i]);
  if (k < n) snprintf(buf + k, n - k, ")");
  return buf;
}

/* The index of the first NaN or infinity of x[0..n), or n when all are finite. */
static uint64_t first_nonfinite(const float *x, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return i;
  return n;
}

/* lm_head.weight sits outside the base model in every layout: never prefixed. */
static const char *prefix_of(const zeroc__gpt_file_t *f, const char *name) {
  return strcmp(name, "lm_head.weight") ? f->prefix : "";
}

static const zeroc__st_tensor_t *find(const zeroc__gpt_file_t *f, const char *name) {
  char full[200];
  snprintf(full, sizeof full, "%s%s", prefix_of(f, name), name);
  return zeroc__st_set_find(f->st, full);
}

/* lm_head.weight, when the file has one, is the embedding `wte` itself: the
 * model ties the head to the embedding, so a different head would be silently
 * replaced. Equal bytes of one dtype are equal; otherwise compare the fp32
 * values bit for bit. */
static zeroc_result_t check_tied(zeroc__gpt_file_t *f, const zeroc__st_tensor_t *wte) {
  const zeroc__st_tensor_t *head = zeroc__st_set_find(f->st, "lm_head.weight");
  zeroc_result_t res = ZEROC_OK;
  if (!head) return ZEROC_OK;
  int same_shape = head->ndim == wte->ndim && head->numel == wte->numel &&
                   !memcmp(head->shape, wte->shape, sizeof(uint64_t) * (size_t)wte->ndim);
  if (same_shape && head->dtype == wte->dtype &&
      !memcmp(head->data, wte->data, (size_t)(wte->end - wte->begin)))
    return ZEROC_OK;
  uint64_t at = 0;
  float *a = NULL, *b = NULL;
  if (same_shape) {
    a = malloc(wte->numel * 4 + 4), b = malloc(wte->numel * 4 + 4);
    if (!a || !b) {
      res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "comparing lm_head.weight with wte.weight");
      goto fail;
    }
    ZEROC_TRY(zeroc__st_read_f32(wte, a, wte->numel));
    ZEROC_TRY(zeroc__st_read_f32(head, b, head->numel));
    while (at < wte->numel && !memcmp(&a[at], &b[at], 4)) at++;
    if (at == wte->numel) goto fail; /* equal: res is ZEROC_OK */
  }
  res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                   "'%s': lm_head.weight differs from %s (%s at index %" PRIu64
                   "): the LM head is untied, and this model ties it to the token embedding",
                   f->path, wte->name, same_shape ? "first difference" : "another shape", at);
fail:
  free(a);
  free(b);
  return res;
}

zeroc_result_t zeroc__gpt_check_layers(const zeroc__st_set_t *st, const char *path, int layers) {
  for (size_t i = 0; i < zeroc__st_set_count(st); i++) {
    const char *name = zeroc__st_set_tensor(st, i)->name, *at = name;
    /* the block index after "h." (GPT-2) or "layers." (Llama), any prefix before it */
    const char *h = strstr(at, "h."), *l = strstr(at, "layers.");
    if (h && (h == name || h[-1] == '.'))
      at = h + 2;
    else if (l && (l == name || l[-1] == '.'))
      at = l + 7;
    else
      continue;
    char *end;
    long k = strtol(at, &end, 10);
    if (end == at || *end != '.') continue;
    if (k >= layers)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "'%s': tensor '%s' is of block %ld, and this model has %d layers (blocks "
                        "0..%d): a file of another shape",
                        path, name, k, layers, layers - 1);
  }
  return ZEROC_OK;
}

zeroc_result_t zeroc__gpt_file_open_cfg(const char *path, const zeroc_gpt_config_t *cfg,
                                        zeroc__gpt_file_t *f) {
  int llama = cfg && cfg->family == ZEROC_GPT_FAMILY_LLAMA;
  const char *embed = llama ? "embed_tokens.weight" : "wte.weight";
  const char *outer = llama ? "model." : "transformer.",
             *full_name = llama ? "model.embed_tokens.weight" : "transformer.wte.weight";
  memset(f, 0, sizeof *f);
  f->path = path;
  f->kind = llama ? "Llama" : "GPT-2";
  CHK(zeroc__st_set_open(path, &f->st));
  f->prefix = "";
  const zeroc__st_tensor_t *wte = zeroc__st_set_find(f->st, embed);
  if (!wte && (wte = zeroc__st_set_find(f->st, full_name))) f->prefix = outer;
  zeroc_result_t res = ZEROC_OK;
  if (!wte)
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "'%s' has no tensor '%s' nor '%s' (a %s file has one of them)", path, embed,
                     full_name, f->kind);
  if (!res && !(llama && cfg->untied)) res = check_tied(f, wte);
  if (!res && cfg) res = zeroc__gpt_check_layers(f->st, path, cfg->layers);
  if (res) zeroc__gpt_file_close(f);
  return res;
}

zeroc_result_t zeroc__gpt_file_open(const char *path, zeroc__gpt_file_t *f) {
  return zeroc__gpt_file_open_cfg(path, NULL, f);
}

void zeroc__gpt_file_close(zeroc__gpt_file_t *f) {
  zeroc__st_set_close(f->st);
  f->st = NULL;
}

/* dst (c, r) = src (r, c)^T */
static void transpose(float *dst, const float *src, uint64_t r, uint64_t c) {
  for (uint64_t i = 0; i < r; i++)
    for (uint64_t j = 0; j < c; j++) dst[j * r + i] = src[i * c + j];
}

zeroc_result_t zeroc__gpt_file_read(zeroc__gpt_file_t *f, const char *name, int nd,
                                    const uint64_t *shape, int tr, float *out, float **tail,
                                    uint64_t *tail_rows) {
  zeroc_result_t res = ZEROC_OK;
  if (tail) *tail = NULL, *tail_rows = 0;
  const zeroc__st_tensor_t *t = find(f, name);
  if (!t)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "'%s' has no tensor '%s%s' (a %s file of this shape has)", f->path,
                      prefix_of(f, name), name, f->kind);
  uint64_t count = nd == 2 ? shape[0] * shape[1] : shape[0];
  int same = t->ndim == nd && t->shape[0] == shape[0] && (nd == 1 || t->shape[1] == shape[1]);
  /* a longer table (wpe of a file with more positions): the first rows */
  int longer =
      tail && !tr && nd == 2 && t->ndim == 2 && t->shape[1] == shape[1] && t->shape[0] > shape[0];
  if (!same && !longer) {
    char have[96], want[64];
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "'%s': tensor '%s%s' has shape %s, this model needs "
                      "%s%s",
                      f->path, prefix_of(f, name), name,
                      dims_text(t->shape, t->ndim, have, sizeof have),
                      dims_text(shape, nd, want, sizeof want), tail ? " or more rows" : "");
  }
  float *all = malloc(t->numel * 4 + 4);
  if (!all)
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "import buffer of '%s' (%" PRIu64 " floats)", name,
                      t->numel);
  ZEROC_TRY(zeroc__st_read_f32(t, all, t->numel));
  /* a NaN or infinity would make every step's gradients non-finite: each
   * step skipped, and the same weights exported again at the end */
  uint64_t bad = first_nonfinite(all, t->numel);
  if (bad < t->numel) {
    float v = all[bad];
    res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "'%s': tensor '%s%s' holds %s at index %" PRIu64 " of %" PRIu64
                     "; accepted finite weights only",
                     f->path, prefix_of(f, name), name,
                     isnan(v) ? "NaN"
                     : v > 0  ? "+inf"
                              : "-inf",
                     bad, t->numel);
    goto fail;
  }
  if (tr)
    transpose(out, all, shape[0], shape[1]);
  else
    memcpy(out, all, count * 4);
  if (longer) {
    *tail_rows = t->shape[0] - shape[0];
    memmove(all, all + count, (t->numel - count) * 4);
    *tail = all;
    all = NULL;
  }
fail:
  free(all);
  return res;
}
