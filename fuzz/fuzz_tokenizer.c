/*
 * fuzz/fuzz_tokenizer.c - the tokenizer (text/). The first byte picks:
 *   even: the rest is a tokenizer file (tokenizer.json or vocab.json) for
 *         zeroc__bpe_load; a rejection is a one-line message naming the file;
 *         an accepted tokenizer encodes a fixed text within the id bound
 *         (without add_prefix_space) and decodes every id it produced;
 *   odd:  the rest is text for a built-in byte-level BPE tokenizer (every
 *         byte, a few merges, <|endoftext|>): at most one id per byte, and
 *         decode(encode(text)) == text.
 */
#include "core/error.h"
#include "fuzz_util.h"
#include "text/tokenizer_internal.h"

static zeroc_tokenizer_t *g_tok;

/* {"model": {"type": "BPE", "vocab": {<the 256 byte tokens>, "th": 256, "the": 257,
 * "Ġt": 258, "Ġthe": 259}, "merges": ["t h", "th e", "Ġ t", ["Ġ", "the"]]},
 * "added_tokens": [<|endoftext|> 260], ...} */
static zeroc_tokenizer_t *builtin(void) {
  static char json[8192];
  size_t w = 0;
  w +=
      (size_t)snprintf(json + w, sizeof json - w,
                       "{\"added_tokens\": [{\"id\": 260, \"content\": \"<|endoftext|>\", "
                       "\"special\": true}], \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                       "\"add_prefix_space\": false}, \"model\": {\"type\": \"BPE\", \"vocab\": {");
  for (unsigned b = 0; b < 256; b++) {
    uint32_t cp = zeroc__byte_to_cp(b);
    if (cp == '"' || cp == '\\')
      w += (size_t)snprintf(json + w, sizeof json - w, "\"\\%c\": %u, ", (char)cp, b);
    else if (cp < 0x80)
      w += (size_t)snprintf(json + w, sizeof json - w, "\"%c\": %u, ", (char)cp, b);
    else
      w += (size_t)snprintf(json + w, sizeof json - w, "\"%c%c\": %u, ", (char)(0xC0 | (cp >> 6)),
                            (char)(0x80 | (cp & 0x3F)), b);
  }
  snprintf(json + w, sizeof json - w,
           "\"th\": 256, \"the\": 257, \"\xc4\xa0t\": 258, \"\xc4\xa0the\": 259}, \"merges\": "
           "[\"t h\", \"th e\", \"\xc4\xa0 t\", [\"\xc4\xa0\", \"the\"]]}}");
  zeroc_tokenizer_t *t = NULL;
  FUZZ_REQUIRE(zeroc__bpe_load("builtin", json, strlen(json), &t) == ZEROC_OK, "%s",
               zeroc__tls_error());
  return t;
}

static void roundtrip(const zeroc_tokenizer_t *t, const char *text, size_t len, int exact) {
  int32_t *ids = malloc((len + 1) * sizeof *ids);
  char *back = malloc(len + 1);
  size_t n = 0, m = 0;
  zeroc_result_t r = zeroc_tokenizer_encode(t, text, len, ids, &n);
  FUZZ_REQUIRE(r == ZEROC_OK || (!exact && t->add_prefix_space), "encode: %s", zeroc__tls_error());
  if (r == ZEROC_OK) {
    FUZZ_REQUIRE(n <= len, "%zu ids for %zu bytes", n, len);
    r = zeroc_tokenizer_decode(t, ids, n, back, len + 1, &m);
    FUZZ_REQUIRE(r == ZEROC_OK, "decode: %s", zeroc__tls_error());
    if (exact) FUZZ_REQUIRE(m == len && !memcmp(back, text, len), "round trip differs");
  }
  free(ids);
  free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (!g_tok) g_tok = builtin();
  if (data[0] & 1) {
    roundtrip(g_tok, (const char *)data + 1, size - 1, 1);
    return 0;
  }
  zeroc_tokenizer_t *t = NULL;
  zeroc_result_t r = zeroc__bpe_load("fuzz input", (const char *)data + 1, size - 1, &t);
  if (r != ZEROC_OK) {
    FUZZ_REQUIRE(t == NULL, "a failed load returned a tokenizer");
    if (r != ZEROC_ERR_UNSUPPORTED) fuzz_check_rejection(r, zeroc__tls_error(), "fuzz input");
    return 0;
  }
  static const char text[] = "Hello, the world's 123 <|endoftext|>  \xff\xc3 done\n";
  roundtrip(t, text, sizeof text - 1, 0);
  zeroc_tokenizer_destroy(t);
  return 0;
}
