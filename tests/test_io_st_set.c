/*
 * tests/test_io_st_set.c - a save_pretrained directory's tensors (io/st_set.c):
 * written as one model.safetensors under the shard size, else cut into shards as
 * transformers cuts them (a tensor larger than the size alone in its own) with an
 * index; read back through the directory, the index or one file, the same values;
 * indexes that lie, name paths outside their directory or lack a weight map, and
 * directories with no weights, refused naming the problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/files.h"
#include "io/st_set.h"
#include "testutil.h"

static char *g_dir;

/* entry i's values: 1000 i + j */
static zeroc_result_t fill(void *user, size_t i, float *out) {
  const zeroc__st_entry_t *e = user;
  uint64_t n = e[i].ndim == 2 ? e[i].shape[0] * e[i].shape[1] : e[i].shape[0];
  for (uint64_t j = 0; j < n; j++) out[j] = (float)(1000 * i + j);
  return ZEROC_OK;
}

/* Four tensors of 40, 12, 80 and 20 bytes. */
static void entries(zeroc__st_entry_t *e) {
  memset(e, 0, 4 * sizeof *e);
  const char *names[] = {"a.weight", "b.bias", "c.weight", "d.weight"};
  const uint64_t rows[] = {5, 3, 4, 5}, cols[] = {2, 1, 5, 1};
  for (int i = 0; i < 4; i++) {
    snprintf(e[i].name, sizeof e[i].name, "%s", names[i]);
    e[i].ndim = cols[i] > 1 ? 2 : 1;
    e[i].shape[0] = rows[i], e[i].shape[1] = cols[i];
  }
}

/* Every entry found in s with fill's values. */
static void check_values(const zeroc__st_set_t *s, const zeroc__st_entry_t *e) {
  float want[32], got[32];
  for (size_t i = 0; i < 4; i++) {
    const zeroc__st_tensor_t *t = zeroc__st_set_find(s, e[i].name);
    ZT_ASSERT_MSG(t != NULL, "%s not found", e[i].name);
    if (!t) continue;
    fill((void *)e, i, want);
    ZT_OK(zeroc__st_read_f32(t, got, t->numel));
    CU_ASSERT(!memcmp(want, got, t->numel * 4));
  }
  CU_ASSERT_PTR_NULL(zeroc__st_set_find(s, "missing.weight"));
}

static int exists(const char *dir, const char *name) {
  char p[600];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return !stat(p, &st);
}

static void test_shards(void) {
  zeroc__st_entry_t e[4];
  char dir[512], path[600];
  entries(e);
  snprintf(dir, sizeof dir, "%s/sharded", g_dir);
  ZT_OK(zeroc__mkdir_p(dir, 0755));
  /* 40 | 12 (40 + 12 > 50) | 80 (larger than 50: alone) | 20 */
  ZT_OK(zeroc__st_set_write(dir, 1, e, 4, 50, NULL, fill, e));
  for (int k = 1; k <= 4; k++) {
    snprintf(path, sizeof path, "model-%05d-of-00004.safetensors", k);
    ZT_ASSERT_MSG(exists(dir, path), "no %s", path);
  }
  CU_ASSERT(!exists(dir, "model.safetensors") && !exists(dir, "model-00005-of-00004.safetensors"));
  char *idx = NULL;
  size_t n;
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  ZT_OK(zeroc__file_read(path, 1 << 20, &idx, &n));
  CU_ASSERT(idx && strstr(idx, "\"total_size\": 152"));
  CU_ASSERT(idx && strstr(idx, "\"c.weight\": \"model-00003-of-00004.safetensors\""));
  free(idx);
  zeroc__st_set_t *s = NULL;
  ZT_OK(zeroc__st_set_open(dir, &s)); /* the directory: its index */
  CU_ASSERT(s && zeroc__st_set_files(s) == 4);
  if (s) check_values(s, e);
  zeroc__st_set_close(s);
  s = NULL;
  ZT_OK(zeroc__st_set_open(path, &s)); /* the index itself */
  if (s) check_values(s, e);
  zeroc__st_set_close(s);
}

static void test_one_file(void) {
  zeroc__st_entry_t e[4];
  char dir[512], path[600];
  const char *meta[] = {"format", "pt", NULL};
  entries(e);
  snprintf(dir, sizeof dir, "%s/whole", g_dir);
  ZT_OK(zeroc__mkdir_p(dir, 0755));
  ZT_OK(zeroc__st_set_write(dir, 1, e, 4, 152, meta, fill, e)); /* exactly the limit */
  CU_ASSERT(exists(dir, "model.safetensors") && !exists(dir, "model.safetensors.index.json"));
  zeroc__st_set_t *s = NULL;
  ZT_OK(zeroc__st_set_open(dir, &s));
  CU_ASSERT(s && zeroc__st_set_files(s) == 1);
  if (s) check_values(s, e);
  zeroc__st_set_close(s);
  /* dir 0: one file at the path, whatever the size */
  snprintf(path, sizeof path, "%s/one.safetensors", g_dir);
  ZT_OK(zeroc__st_set_write(path, 0, e, 4, 1, meta, fill, e));
  s = NULL;
  ZT_OK(zeroc__st_set_open(path, &s));
  if (s) check_values(s, e);
  zeroc__st_set_close(s);
}

/* The index `json` opened beside real shards: refused with `code` and `words`. */
static void refused(const char *json, zeroc_result_t code, const char *words) {
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/sharded", g_dir); /* beside test_shards' shards */
  snprintf(path, sizeof path, "%s/bad.index.json", dir);
  ZT_OK(zeroc__file_write_atomic(path, json, strlen(json)));
  zeroc__st_set_t *s = NULL;
  CU_ASSERT_EQUAL(zeroc__st_set_open(path, &s), code);
  CU_ASSERT_PTR_NULL(s);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), words), "'%s' not in: %s", words,
                zeroc_last_error(NULL));
  zeroc__st_set_close(s);
}

static void test_refused(void) {
  refused("{\"weight_map\": {\"a.weight\": \"../x.safetensors\"}}", ZEROC_ERR_CORRUPT,
          "tensor 'a.weight' maps to no plain file name beside the index");
  refused("{\"metadata\": {}}", ZEROC_ERR_CORRUPT, "has no \"weight_map\" object");
  refused("{\"weight_map\": {\"a.weight\": \"model-00002-of-00004.safetensors\"}}",
          ZEROC_ERR_CORRUPT,
          "maps tensor 'a.weight' to 'model-00002-of-00004.safetensors', which "
          "lacks it");
  refused("{\"weight_map\": {\"a.weight\": \"gone.safetensors\"}}", ZEROC_ERR_IO,
          "gone.safetensors");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/empty", g_dir);
  ZT_OK(zeroc__mkdir_p(dir, 0755));
  zeroc__st_set_t *s = NULL;
  CU_ASSERT_EQUAL(zeroc__st_set_open(dir, &s), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "has neither model.safetensors nor "
                                               "model.safetensors.index.json"),
                "message: %s", zeroc_last_error(NULL));
}

static const zt_test_t tests[] = {
    {"shards and their index", test_shards},
    {"one file under the shard size", test_one_file},
    {"indexes that lie or escape, empty directories", test_refused},
    ZT_END,
};

int main(void) {
  g_dir = zt_tempdir("zeroc-io-stset");
  if (!g_dir) {
    perror("mkdtemp");
    return 1;
  }
  int rc = zt_run("io_st_set", tests);
  zt_rmtree(g_dir);
  free(g_dir);
  return rc;
}
