/*
 * fuzz/fuzz_tokenizer.c - the tokenizer (text/). The first byte picks:
 *   even: the rest is a tokenizer file (tokenizer.json or vocab.json) for
 *         zeroc__bpe_load; a rejection is a one-line message naming the file;
 *         an accepted tokenizer encodes a fixed text within the id bound
 *         (without add_prefix_space) and decodes every id it produced;
 *   odd:  the rest is text for a built-in byte-level BPE tokenizer (every
 *         byte, a few merges, <|endoftext|>): at most one id per byte, and
 *         decode(encode(text)) == text; and for the same tokenizer with the
 *         NFC normalizer: at most 3 ids a byte, and decode(encode(text)) is
 *         the text's NFC (invalid bytes kept).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "fuzz_util.h"
#include "text/nfc.h"
#include "text/tokenizer_internal.h"

static zeroc_tokenizer_t *g_tok, *g_nfc;

/* {"model": {"type": "BPE", "vocab": {<the 256 byte tokens>, "th": 256, "the": 257,
 * "Ġt": 258, "Ġthe": 259}, "merges": ["t h", "th e", "Ġ t", ["Ġ", "the"]]},
 * "added_tokens": [<|endoftext|> 260], ...} */
static zeroc_tokenizer_t *builtin(int nfc) {
  static char json[8192];
  size_t w = 0;
  if (nfc) w += (size_t)snprintf(json, sizeof json, "{\"normalizer\": {\"type\": \"NFC\"}, ");
  w += (size_t)snprintf(json + w, sizeof json - w,
                        "%s\"added_tokens\": [{\"id\": 260, \"content\": \"<|endoftext|>\", "
                        "\"special\": true}], \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                        "\"add_prefix_space\": false}, \"model\": {\"type\": \"BPE\", \"vocab\": {",
                        nfc ? "" : "{");
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

/* With NFC: room for 3 ids a byte (NFC lengthens UTF-8 at most 3x) is enough,
 * and the ids decode to the text's NFC (when it holds no <|endoftext|>, which
 * is cut out first: a mark after it stays a mark, U+0338 after its ">" too). */
static void nfc_roundtrip(const zeroc_tokenizer_t *t, const char *text, size_t len) {
  size_t cap = zeroc__tok_max_ids(t, len), n = 0, m = 0, nl = len;
  int32_t *ids = malloc((cap + 1) * sizeof *ids);
  unsigned char *want = NULL;
  zeroc_result_t r = zeroc__tokenizer_encode_cap(t, text, len, ids, cap, &n, NULL);
  FUZZ_REQUIRE(r == ZEROC_OK, "encode with NFC: %s", zeroc__tls_error());
  r = zeroc__nfc((const unsigned char *)text, len, &want, &nl);
  FUZZ_REQUIRE(r == ZEROC_OK, "nfc: %s", zeroc__tls_error());
  char *back = malloc(3 * len + 1);
  r = zeroc_tokenizer_decode(t, ids, n, back, 3 * len + 1, &m);
  FUZZ_REQUIRE(r == ZEROC_OK, "decode: %s", zeroc__tls_error());
  FUZZ_REQUIRE(memmem(text, len, "<|endoftext|>", 13) ||
                   (m == nl && !memcmp(back, want ? (const char *)want : text, nl)),
               "decode(encode(text)) is not the text's NFC");
  free(want);
  free(back);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (!g_tok) g_tok = builtin(0);
  if (!g_nfc) g_nfc = builtin(1);
  if (data[0] & 1) {
    roundtrip(g_tok, (const char *)data + 1, size - 1, 1);
    nfc_roundtrip(g_nfc, (const char *)data + 1, size - 1);
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
