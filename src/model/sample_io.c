/*
 * persist/sample_io.c - a sampler's weights from a safetensors file, read as
 * zeroc_gpt_import reads them (model/gpt_file.h): the first seq rows of a
 * longer position table, a tied lm_head, 16-bit values.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/gpt_file.h"
#include "model/sample.h"

/* Parameter p of global unit gu: its Hugging Face name, and whether the file
 * stores it transposed (GPT-2's Conv1D weights are (in, out)). */
static void file_name(int gu, int p, int L, char *name, size_t n, int *tr) {
  static const char *const EMBED[2] = {"wte.weight", "wpe.weight"};
  static const char *const HEAD[2] = {"ln_f.weight", "ln_f.bias"};
  *tr = 0;
  if (gu == 0)
    snprintf(name, n, "%s", EMBED[p]);
  else if (gu == L + 1)
    snprintf(name, n, "%s", HEAD[p]);
  else
    snprintf(name, n, "h.%d.%s", gu - 1, zeroc__sampler_block_name(p));
  *tr = gu > 0 && gu <= L && (p == 2 || p == 4 || p == 8 || p == 10);
}

static zeroc_result_t load(const char *path, const zeroc_gpt_config_t *cfg, zeroc_sampler_t **out) {
  zeroc_result_t res = ZEROC_OK;
  zeroc_sampler_t *s = NULL;
  zeroc__gpt_file_t f = {0};
  float *tail = NULL;
  uint64_t tail_rows = 0;
  *out = NULL;
  CHK(zeroc__sampler_create(cfg, &s));
  ZEROC_TRY(zeroc__gpt_file_open(path, &f));
  int L = cfg->layers;
  ZEROC_TRY(zeroc__gpt_check_layers(f.st, path, L));
  for (int gu = 0; gu < L + 2; gu++) {
    int np = gu > 0 && gu <= L ? 12 : 2;
    for (int p = 0; p < np; p++) {
      char name[128];
      int tr;
      uint64_t rows, cols;
      float *dst = zeroc__sampler_param(s, gu, p, &rows, &cols);
      file_name(gu, p, L, name, sizeof name, &tr);
      uint64_t shape[2] = {tr ? cols : rows, tr ? rows : cols};
      int wpe = gu == 0 && p == 1;
      /* a longer position table: the first seq rows (the sampler's window) */
      ZEROC_TRY(zeroc__gpt_file_read(&f, name, cols ? 2 : 1, shape, tr, dst, wpe ? &tail : NULL,
                                     &tail_rows));
      free(tail);
      tail = NULL;
    }
  }
  *out = s;
  s = NULL;
fail:
  zeroc__gpt_file_close(&f);
  zeroc_sampler_destroy(s);
  return res;
}

zeroc_result_t zeroc_sampler_load(const char *path, const zeroc_gpt_config_t *cfg,
                                  zeroc_sampler_t **out) {
  if (!path || !cfg || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_sampler_load: NULL argument");
  if (cfg->family == ZEROC_GPT_FAMILY_LLAMA) return zeroc__sampler_load_llama(path, cfg, out);
  return load(path, cfg, out);
}
