/*
 * tests/test_tokenizer.c - the tokenizer: the built-in byte tokenizer (ids =
 * bytes, round trip, save/load), byte-level BPE equal token for token to
 * Hugging Face `tokenizers` on committed fixtures (tokenizer.json with string
 * merges and with pair merges, GPT-2's vocab.json + merges.txt; real text and
 * a tricky text), decode(encode(x)) == x, and each malformed file refused with
 * a message naming the problem.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "text/bpe_build.h" /* the merge table, for the reference merger */
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

/* A whole file, NUL-terminated (NULL when missing). */
static char *slurp(const char *dir, const char *name, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t got = fread(b, 1, (size_t)n, f);
  fclose(f);
  b[got] = 0;
  if (len) *len = got;
  return b;
}

static void put(const char *name, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  fputs(text, f);
  fclose(f);
}

static zeroc_tokenizer_t *load_fix(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", g_fix, name);
  zeroc_tokenizer_t *t = NULL;
  ZT_OK(zeroc_tokenizer_load(path, &t));
  CU_ASSERT_FATAL(t != NULL);
  return t;
}

/* ids of expected/<tok>.<text>.ids */
static int32_t *expected_ids(const char *tok, const char *text, size_t *n) {
  char name[256];
  snprintf(name, sizeof name, "expected/%s.%s.ids", tok, text);
  char *s = slurp(g_fix, name, NULL);
  ZT_ASSERT_MSG(s != NULL, "missing fixture %s/%s", g_fix, name);
  if (!s) return NULL;
  size_t cap = 1024, k = 0;
  int32_t *ids = malloc(cap * sizeof *ids);
  for (char *p = s, *e; *p; p = e) {
    long v = strtol(p, &e, 10);
    if (e == p) break;
    if (k == cap) ids = realloc(ids, (cap *= 2) * sizeof *ids);
    ids[k++] = (int32_t)v;
  }
  free(s);
  *n = k;
  return ids;
}

/* encode(text) equals what tokenizers gave, token for token. */
static void check_equal(const zeroc_tokenizer_t *t, const char *tok, const char *text,
                        int roundtrip_too) {
  char name[256];
  size_t len = 0, ne = 0, n = 0;
  snprintf(name, sizeof name, "%s.txt", text);
  char *s = slurp(g_fix, name, &len);
  int32_t *want = expected_ids(tok, text, &ne);
  CU_ASSERT_FATAL(s != NULL && want != NULL);
  int32_t *got = malloc((len + 1) * sizeof *got);
  ZT_OK(zeroc_tokenizer_encode(t, s, len, got, &n));
  size_t first = 0;
  while (first < n && first < ne && got[first] == want[first]) first++;
  ZT_ASSERT_MSG(n == ne && first == n,
                "%s on %s: %zu tokens, tokenizers %zu; first difference at %zu (%d vs %d)", tok,
                text, n, ne, first, first < n ? got[first] : -1, first < ne ? want[first] : -1);
  if (roundtrip_too) roundtrip(t, s, len);
  free(got);
  free(want);
  free(s);
}

static void check_fixture(const char *file, const char *tok, int roundtrip_too) {
  zeroc_tokenizer_t *t = load_fix(file);
  CU_ASSERT_STRING_EQUAL(zeroc_tokenizer_kind(t), "bpe");
  CU_ASSERT_EQUAL(zeroc_tokenizer_eot(t), 0); /* the trainer's first special token */
  check_equal(t, tok, "real", roundtrip_too);
  check_equal(t, tok, "tricky", roundtrip_too);
  /* saved as a tokenizer.json, it loads back to the same encoding */
  char path[1024];
  snprintf(path, sizeof path, "%s/saved-%s.json", g_dir, tok);
  ZT_OK(zeroc_tokenizer_save(t, path));
  zeroc_tokenizer_t *u = NULL;
  ZT_OK(zeroc_tokenizer_load(path, &u));
  CU_ASSERT_FATAL(u != NULL);
  CU_ASSERT_EQUAL(zeroc_tokenizer_vocab(u), zeroc_tokenizer_vocab(t));
  CU_ASSERT_EQUAL(zeroc_tokenizer_eot(u), zeroc_tokenizer_eot(t));
  check_equal(u, tok, "real", roundtrip_too);
  check_equal(u, tok, "tricky", roundtrip_too);
  zeroc_tokenizer_destroy(u);
  zeroc_tokenizer_destroy(t);
}

/* tokenizer.json as tokenizers wrote it before 0.20: merges "a b" */
static void test_string_merges(void) { check_fixture("bpe300.json", "bpe300", 1); }
/* add_prefix_space: a space before each piece; decode keeps it (as tokenizers does) */
static void test_prefix_space(void) { check_fixture("bpe300_prefix.json", "bpe300_prefix", 0); }
/* tokenizer.json as tokenizers writes it now: merges ["a", "b"], Split + ByteLevel */
static void test_pair_merges(void) { check_fixture("bpe1000.json", "bpe1000", 1); }
/* GPT-2's vocab.json + merges.txt */
static void test_vocab_merges(void) { check_fixture("bpe4096.vocab.json", "bpe4096", 1); }

/* Llama 3's and Qwen2's pre-tokenizers (make_llama_fixtures.py: their Split
 * patterns, Llama 3's TemplateProcessing post-processor): the ids of
 * tokenizers on real.txt and tricky.txt (case-insensitive contractions, digits
 * in runs of 3 or 1, CR LF, Unicode letters, digits and spaces), and saved and
 * loaded back to the same encoding. */
static void check_llama_style(const char *file, const char *tok, const char *sep) {
  zeroc_tokenizer_t *t = load_fix(file);
  CU_ASSERT_FATAL(t != NULL);
  check_equal(t, tok, "real", 1);
  check_equal(t, tok, "tricky", 1);
  /* the document separator: Llama 3's <|begin_of_text|>, Qwen2's <|endoftext|> */
  char buf[64];
  size_t n = 0;
  int32_t eot = zeroc_tokenizer_eot(t);
  CU_ASSERT(eot >= 0);
  ZT_OK(zeroc_tokenizer_decode(t, &eot, 1, buf, sizeof buf, &n));
  ZT_ASSERT_MSG(n == strlen(sep) && !memcmp(buf, sep, n), "%s: separator %.*s", tok, (int)n, buf);
  char path[1024];
  snprintf(path, sizeof path, "%s/saved-%s.json", g_dir, tok);
  ZT_OK(zeroc_tokenizer_save(t, path));
  zeroc_tokenizer_t *u = NULL;
  ZT_OK(zeroc_tokenizer_load(path, &u));
  CU_ASSERT_FATAL(u != NULL);
  check_equal(u, tok, "real", 0);
  check_equal(u, tok, "tricky", 0);
  zeroc_tokenizer_destroy(u);
  zeroc_tokenizer_destroy(t);
}

static void test_llama3_split(void) {
  check_llama_style("llama3_bpe.json", "llama3_bpe", "<|begin_of_text|>");
}

static void test_qwen2_split(void) {
  check_llama_style("qwen2_bpe.json", "qwen2_bpe", "<|endoftext|>");
}

/* Encodes s with t and decodes it again: equal to want. */
static void decodes_to(const zeroc_tokenizer_t *t, const char *s, const char *want) {
  size_t len = strlen(s), n = 0, m = 0;
  int32_t ids[64];
  char out[128];
  ZT_OK(zeroc_tokenizer_encode(t, s, len, ids, &n));
  ZT_OK(zeroc_tokenizer_decode(t, ids, n, out, sizeof out, &m));
  ZT_ASSERT_MSG(m == strlen(want) && !memcmp(out, want, m), "\"%s\" decoded to %zu bytes \"%.*s\"",
                s, m, (int)(m < sizeof out ? m : sizeof out), out);
}

/* Qwen2's NFC normalizer (make_llama_fixtures.py's qwen2_nfc.json): the ids of
 * tokenizers on real.txt, tricky.txt, nfc.txt (decomposed and composed forms,
 * Hangul jamo, the Angstrom sign, composition exclusions NFC lengthens, marks
 * to reorder, marks newer than tokenizers' Unicode tables, added tokens
 * matched before and after normalization) and nfc_all.txt (every character
 * with a canonical decomposition, as it is and decomposed); saved and loaded
 * back, and as a Sequence of NFC, the same ids. */
static void test_qwen2_nfc(void) {
  static const char *const texts[] = {"real", "tricky", "nfc", "nfc_all"};
  zeroc_tokenizer_t *t = load_fix("qwen2_nfc.json");
  for (int i = 0; i < 4; i++) check_equal(t, "qwen2_nfc", texts[i], 0);
  /* composed and decomposed encode alike; the special "<|e\u0301|>" (not
   * normalized) is matched only as written, "caf\u00e9" (normalized) either way */
  decodes_to(t, "Cafe\xcc\x81 \xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab", "Caf\xc3\xa9 \xed\x95\x9c");
  decodes_to(t, "<|e\xcc\x81|><|\xc3\xa9|>", "<|e\xcc\x81|><|\xc3\xa9|>");
  static const char spec_d[] = "<|e\xcc\x81|>", spec_c[] = "<|\xc3\xa9|>";
  static const char cafe_d[] = "cafe\xcc\x81", cafe_c[] = "caf\xc3\xa9";
  size_t n1 = 0, n2 = 0;
  int32_t a[16], b[16];
  ZT_OK(zeroc_tokenizer_encode(t, spec_d, strlen(spec_d), a, &n1));
  ZT_OK(zeroc_tokenizer_encode(t, spec_c, strlen(spec_c), b, &n2));
  ZT_ASSERT_MSG(n1 == 1 && n2 == 3, "the special token: %zu ids as written, %zu composed", n1, n2);
  ZT_OK(zeroc_tokenizer_encode(t, cafe_d, strlen(cafe_d), a, &n1));
  ZT_OK(zeroc_tokenizer_encode(t, cafe_c, strlen(cafe_c), b, &n2));
  CU_ASSERT(n1 == 1 && n2 == 1 && a[0] == b[0]);
  /* bytes that are not UTF-8 are kept; the valid text around them is
   * normalized, a mark after such a byte composes with nothing before it */
  decodes_to(t, "e\xff\xcc\x81", "e\xff\xcc\x81");
  decodes_to(t, "cafe\xcc\x81\xff\xcc", "caf\xc3\xa9\xff\xcc");
  decodes_to(t, "\xe1\x84\x80\xe1\x85\xa1\xed\xa0\x80\xe2\x84\xab\xc0",
             "\xea\xb0\x80\xed\xa0\x80\xc3\x85\xc0");
  char path[1024];
  snprintf(path, sizeof path, "%s/saved-qwen2_nfc.json", g_dir);
  ZT_OK(zeroc_tokenizer_save(t, path));
  zeroc_tokenizer_t *u = NULL;
  ZT_OK(zeroc_tokenizer_load(path, &u));
  CU_ASSERT_FATAL(u != NULL);
  for (int i = 0; i < 4; i++) check_equal(u, "qwen2_nfc", texts[i], 0);
  zeroc_tokenizer_destroy(u);
  zeroc_tokenizer_destroy(t);
  /* normalizers.Sequence([NFC()]) as tokenizers writes it: the same */
  char *json = slurp(g_fix, "qwen2_nfc.json", NULL);
  CU_ASSERT_FATAL(json != NULL);
  static const char nfc[] = "\"normalizer\": {\n    \"type\": \"NFC\"\n  }";
  char *at = strstr(json, nfc);
  CU_ASSERT_FATAL(at != NULL);
  size_t cap = strlen(json) + 128;
  char *seq = malloc(cap);
  snprintf(seq, cap,
           "%.*s\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": "
           "\"NFC\"}]}%s",
           (int)(at - json), json, at + strlen(nfc));
  put("seq-nfc.json", seq);
  snprintf(path, sizeof path, "%s/seq-nfc.json", g_dir);
  ZT_OK(zeroc_tokenizer_load(path, &u));
  CU_ASSERT_FATAL(u != NULL);
  check_equal(u, "qwen2_nfc", "nfc", 0);
  zeroc_tokenizer_destroy(u);
  free(seq);
  free(json);
}

/* Bytes that are not UTF-8 are kept: each is a token of its own byte. */
static void test_invalid_utf8(void) {
  zeroc_tokenizer_t *t = load_fix("bpe1000.json");
  static const char *cases[] = {"ab\xff"
                                "cd",
                                "\xc3", "caf\xc3\xa9\xe9t\xe9 \xed\xa0\x80x", "\xf0\x9f\x98",
                                " \x80\x80 \xc0\xaf<|endoftext|>\xfe"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    roundtrip(t, cases[i], strlen(cases[i]));
  int32_t id[4];
  size_t n = 0, len = 0;
  char out[4];
  ZT_OK(zeroc_tokenizer_encode(t, "\xff", 1, id, &n));
  CU_ASSERT_EQUAL(n, 1);
  ZT_OK(zeroc_tokenizer_decode(t, id, n, out, sizeof out, &len));
  CU_ASSERT(len == 1 && out[0] == '\xff');
  /* one word of 5000 letters takes the long-word merge path */
  char *w = malloc(5001);
  for (int i = 0; i < 5000; i++) w[i] = "thenisaor"[i % 9];
  roundtrip(t, w, 5000);
  free(w);
  zeroc_tokenizer_destroy(t);
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

/* Loading `text` (written as `name`) fails with `code` and a message holding `want`. */
static void refused(const char *name, const char *text, zeroc_result_t code, const char *want) {
  char path[1024];
  if (text) put(name, text);
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  zeroc_tokenizer_t *t = NULL;
  zeroc_result_t r = zeroc_tokenizer_load(path, &t);
  const char *msg = zeroc_last_error(NULL);
  ZT_ASSERT_MSG(r == code && t == NULL, "%s: %s, expected %s (%s)", name, zeroc_result_name(r),
                zeroc_result_name(code), msg);
  ZT_ASSERT_MSG(strstr(msg, want) && strstr(msg, name) && !strchr(msg, '\n'),
                "%s: message lacks \"%s\" or the file name: %s", name, want, msg);
  zeroc_tokenizer_destroy(t);
}

#define HF_HEAD  "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, "
#define HF_PRE   "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, "
#define HF_VOCAB "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}"

static void test_errors(void) {
  refused("bad.json", "{\"model\": {", ZEROC_ERR_CORRUPT, "JSON error at byte");
  refused("array.json", "[1, 2]", ZEROC_ERR_CORRUPT, "accepted");
  refused("nomodel.json", HF_HEAD HF_PRE "\"decoder\": null}", ZEROC_ERR_CORRUPT,
          "without \"model\"");
  refused("wordpiece.json", HF_HEAD HF_PRE "\"model\": {\"type\": \"WordPiece\", " HF_VOCAB "}}",
          ZEROC_ERR_UNSUPPORTED, "model type WordPiece is not supported (accepted: BPE)");
  refused("unknown_merge.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", " HF_VOCAB ", \"merges\": [\"a c\"]}}",
          ZEROC_ERR_CORRUPT, "merge 0 names \"c\", which is not in the vocab");
  refused("unmade_merge.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", " HF_VOCAB
                         ", \"merges\": [[\"b\", \"a\"]]}}",
          ZEROC_ERR_CORRUPT, "makes \"ba\", which is not in the vocab");
  refused("bad_merge.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", " HF_VOCAB ", \"merges\": [\"ab\"]}}",
          ZEROC_ERR_CORRUPT, "merge 0 \"ab\" is not two tokens");
  refused("negative.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}",
          ZEROC_ERR_CORRUPT, "has id -1 (accepted: an integer 0..");
  refused("fraction.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1.5}, \"merges\": []}}",
          ZEROC_ERR_CORRUPT, "(accepted: an integer 0..");
  refused("huge.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999999}, "
                         "\"merges\": []}}",
          ZEROC_ERR_CORRUPT, "(accepted: an integer 0..");
  refused("dup.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, "
                         "\"merges\": []}}",
          ZEROC_ERR_CORRUPT, "id 0 is given to both \"a\" and \"b\"");
  refused("whitespace.json",
          HF_HEAD
          "\"pre_tokenizer\": {\"type\": \"Whitespace\"}, \"model\": {\"type\": \"BPE\", " HF_VOCAB
          ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED, "pre_tokenizer Whitespace is not supported (accepted: ByteLevel");
  refused("nopre.json",
          HF_HEAD "\"pre_tokenizer\": null, \"model\": {\"type\": \"BPE\", " HF_VOCAB
                  ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED, "pre_tokenizer is null (accepted: ByteLevel");
  /* NFC is the one normalizer (test_qwen2_nfc); the others change text in ways
   * zeroc does not */
  refused("nfd.json",
          "{\"normalizer\": {\"type\": \"NFD\"}, " HF_PRE "\"model\": {\"type\": \"BPE\", " HF_VOCAB
          ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED,
          "normalizer NFD is not supported (accepted: null, NFC, a Sequence of NFC only)");
  refused("nfkc.json",
          "{\"normalizer\": {\"type\": \"NFKC\"}, " HF_PRE
          "\"model\": {\"type\": \"BPE\", " HF_VOCAB ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED, "normalizer NFKC is not supported (accepted: null, NFC,");
  refused("seqlower.json",
          "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
          "{\"type\": \"Lowercase\"}]}, " HF_PRE "\"model\": {\"type\": \"BPE\", " HF_VOCAB
          ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED,
          "normalizer Sequence [NFC, Lowercase] is not supported (accepted: null, NFC, a Sequence "
          "of NFC only)");
  /* a post-processor that would change plain text's ids (BERT's [CLS] ... [SEP]
   * pairs) is refused; TemplateProcessing, which adds specials only when asked
   * (Llama 3's), loads: test_llama3_split */
  refused("bert.json",
          "{\"post_processor\": {\"type\": \"BertProcessing\"}, " HF_PRE
          "\"model\": {\"type\": \"BPE\", " HF_VOCAB ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED, "post_processor BertProcessing is not supported");
  refused("seqbert.json",
          "{\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": "
          "\"ByteLevel\"}, {\"type\": \"RobertaProcessing\"}]}, " HF_PRE
          "\"model\": {\"type\": \"BPE\", " HF_VOCAB ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED, "post_processor Sequence is not supported");
  refused("dropout.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, " HF_VOCAB
                         ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED, "model.dropout is set");
  refused("lstrip.json",
          "{\"added_tokens\": [{\"id\": 3, \"content\": \"<m>\", \"lstrip\": true}], " HF_PRE
          "\"model\": {\"type\": \"BPE\", " HF_VOCAB ", \"merges\": []}}",
          ZEROC_ERR_UNSUPPORTED, "added token \"<m>\" has lstrip true (accepted: false)");
  /* GPT-2's two files */
  refused("lonely-vocab.json", "{\"a\": 0}", ZEROC_ERR_IO, "no merges file beside it");
  put("two-vocab.json", "{\"a\": 0, \"b\": 1, \"ab\": 2}");
  put("two-merges.txt", "#version: 0.2\na b\nab\n");
  refused("two-vocab.json", NULL, ZEROC_ERR_CORRUPT, "line 3 \"ab\" is not two tokens");
  refused("missing.json", NULL, ZEROC_ERR_IO, "missing.json");
  /* a bpe decode of an id outside the vocab names it */
  zeroc_tokenizer_t *t = load_fix("bpe300.json");
  int32_t bad[2] = {5, 300};
  char out[8];
  size_t len;
  CU_ASSERT_EQUAL(zeroc_tokenizer_decode(t, bad, 2, out, sizeof out, &len), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "id 300 at position 1"), "%s",
                zeroc_last_error(NULL));
  zeroc_tokenizer_destroy(t);
}

/* Ids above 65535 are a tokenizer's right (a caller storing uint16 checks vocab()). */
static void test_large_ids(void) {
  /* 70002 ids: the 256 bytes' tokens are not needed here, "a", "b", "ab" and filler */
  size_t cap = 70002 * 24 + 1024, w = 0;
  char *json = malloc(cap);
  w += (size_t)snprintf(json + w, cap - w,
                        HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, "
                                       "\"b\": 70000, \"ab\": 70001");
  for (int i = 1; i < 70000; i++) w += (size_t)snprintf(json + w, cap - w, ", \"t%d\": %d", i, i);
  snprintf(json + w, cap - w, "}, \"merges\": [\"a b\"]}}");
  put("large.json", json);
  free(json);
  char path[1024];
  snprintf(path, sizeof path, "%s/large.json", g_dir);
  zeroc_tokenizer_t *t = NULL;
  ZT_OK(zeroc_tokenizer_load(path, &t));
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(zeroc_tokenizer_vocab(t), 70002);
  CU_ASSERT_EQUAL(zeroc_tokenizer_eot(t), -1);
  int32_t ids[4];
  size_t n = 0;
  ZT_OK(zeroc_tokenizer_encode(t, "abba", 4, ids, &n));
  /* "abba" is one word: ab + b + a */
  CU_ASSERT(n == 3 && ids[0] == 70001 && ids[1] == 70000 && ids[2] == 0);
  char out[4];
  size_t len;
  int32_t top = 70001;
  ZT_OK(zeroc_tokenizer_decode(t, &top, 1, out, sizeof out, &len));
  CU_ASSERT(len == 2 && memcmp(out, "ab", 2) == 0);
  zeroc_tokenizer_destroy(t);
  /* a few tokens with huge ids: refused; a gap id is not in the vocab */
  refused("sparse.json",
          HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 9000000}, "
                         "\"merges\": []}}",
          ZEROC_ERR_CORRUPT, "ids reach 9000000 but only 2 tokens are defined");
  put("gap.json", HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": "
                                 "700}, \"merges\": []}}");
  snprintf(path, sizeof path, "%s/gap.json", g_dir);
  ZT_OK(zeroc_tokenizer_load(path, &t));
  CU_ASSERT_FATAL(t != NULL);
  int32_t gap = 5;
  CU_ASSERT_EQUAL(zeroc_tokenizer_decode(t, &gap, 1, out, sizeof out, &len), ZEROC_ERR_INVALID_ARG);
  zeroc_tokenizer_destroy(t);
}

/* BPE options, with the ids tokenizers 0.23.3 gives (checked by hand, see
 * docs/tokenizer.md): ignore_merges takes a word that is a token whole; a
 * byte without a token becomes unk_token (fused with fuse_unk) or is dropped;
 * a repeated merge takes its later rank. */
static void test_options(void) {
#define OPT_HEAD HF_HEAD HF_PRE "\"model\": {\"type\": \"BPE\", "
  static const struct {
    const char *name, *json, *text;
    int n;
    int32_t ids[8];
  } cases[] = {
      {"ignore.json",
       OPT_HEAD "\"ignore_merges\": true, \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, "
                "\"bc\": 4, \"abc\": 5}, \"merges\": [\"b c\", \"a b\"]}}",
       "abc abcab",
       4,
       {5, 0, 4, 3}},
      {"noignore.json",
       OPT_HEAD "\"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, \"bc\": 4, \"abc\": 5}, "
                "\"merges\": [\"b c\", \"a b\"]}}",
       "abc",
       2,
       {0, 4}},
      {"unk.json",
       OPT_HEAD "\"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2, \"ab\": "
                "3}, \"merges\": [\"a b\"]}}",
       "xxaby",
       4,
       {0, 0, 3, 0}},
      {"fuse.json",
       OPT_HEAD "\"unk_token\": \"<unk>\", \"fuse_unk\": true, \"vocab\": {\"<unk>\": 0, \"a\": "
                "1, \"b\": 2, \"ab\": 3}, \"merges\": [\"a b\"]}}",
       "xxaby",
       3,
       {0, 3, 0}},
      {"drop.json",
       OPT_HEAD "\"vocab\": {\"a\": 1, \"b\": 2, \"ab\": 3}, \"merges\": [\"a b\"]}}",
       "abbc",
       2,
       {3, 2}},
      {"dupmerge.json",
       OPT_HEAD "\"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, \"bc\": 4}, \"merges\": "
                "[\"a b\", \"b c\", \"a b\"]}}",
       "abc",
       2,
       {0, 4}},
  };
#undef OPT_HEAD
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[1024];
    put(cases[i].name, cases[i].json);
    snprintf(path, sizeof path, "%s/%s", g_dir, cases[i].name);
    zeroc_tokenizer_t *t = NULL;
    ZT_OK(zeroc_tokenizer_load(path, &t));
    if (!t) continue;
    int32_t ids[16];
    size_t n = 0;
    ZT_OK(zeroc_tokenizer_encode(t, cases[i].text, strlen(cases[i].text), ids, &n));
    ZT_ASSERT_MSG(n == (size_t)cases[i].n && !memcmp(ids, cases[i].ids, n * sizeof *ids),
                  "%s: %zu ids (first %d), tokenizers %d (first %d)", cases[i].name, n,
                  n ? ids[0] : -1, cases[i].n, cases[i].ids[0]);
    zeroc_tokenizer_destroy(t);
  }
}

typedef struct {
  const zeroc_tokenizer_t *t;
  const char *s;
  size_t len;
  int32_t *ids;
  size_t n;
} job_t;

static void *encode_job(void *arg) {
  job_t *j = arg;
  for (int r = 0; r < 3; r++)
    if (zeroc_tokenizer_encode(j->t, j->s, j->len, j->ids, &j->n) != ZEROC_OK) j->n = 0;
  return NULL;
}

/* Several threads encoding with one tokenizer get what one thread gets. */
static void test_threads(void) {
  zeroc_tokenizer_t *t = load_fix("bpe4096.vocab.json");
  size_t len = 0, ne = 0;
  char *s = slurp(g_fix, "real.txt", &len);
  int32_t *want = expected_ids("bpe4096", "real", &ne);
  job_t jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (job_t){t, s, len, malloc(len * sizeof(int32_t)), 0};
    CU_ASSERT_FATAL(pthread_create(&th[i], NULL, encode_job, &jobs[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CU_ASSERT(jobs[i].n == ne && memcmp(jobs[i].ids, want, ne * sizeof *want) == 0);
    free(jobs[i].ids);
  }
  free(want);
  free(s);
  zeroc_tokenizer_destroy(t);
}

/* The rank of pair (a, b) and its merged id, as the tokenizer's table holds it. */
static int32_t ref_rank(const zeroc_tokenizer_t *t, int32_t a, int32_t b, int32_t *id) {
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  for (uint64_t h = zeroc__pair_slot(key, t->pair_mask);; h = (h + 1) & t->pair_mask) {
    if (t->pairs[h].key == key) return *id = t->pairs[h].id, t->pairs[h].rank;
    if (t->pairs[h].key == ~0ull) return INT32_MAX;
  }
}

/* BPE as its definition says, in O(n^2): merge the lowest-ranked pair, the
 * leftmost of equals, until none has a rank. */
static size_t ref_merge(const zeroc_tokenizer_t *t, int32_t *s, size_t n) {
  for (;;) {
    size_t best = n;
    int32_t br = INT32_MAX, bid = 0, id;
    for (size_t i = 0; i + 1 < n; i++) {
      int32_t r = ref_rank(t, s[i], s[i + 1], &id);
      if (r < br) br = r, best = i, bid = id;
    }
    if (best == n) return n;
    s[best] = bid;
    memmove(s + best + 1, s + best + 2, (n - best - 2) * sizeof *s);
    n--;
  }
}

/* Words of thousands of bytes (a file of spaces is one word of megabytes) merge
 * rank by rank, not through the heap (issue 37, item 13): the same ids as the
 * definition, for runs of letters, of spaces and of mixed blanks at the end (no newline: Llama 3's
 * pattern cuts after one). */
static void test_long_words(void) {
  const char *files[] = {"bpe300.json", "bpe1000.json", "bpe4096.vocab.json", "llama3_bpe.json"};
  const size_t n = 9000;
  char *text = malloc(n);
  int32_t *ids = malloc(n * sizeof *ids), *ref = malloc(n * sizeof *ref);
  for (int f = 0; f < 4; f++) {
    zeroc_tokenizer_t *t = load_fix(files[f]);
    for (int kind = 0; kind < 3; kind++) {
      uint64_t x = 88172645463325252ull + (uint64_t)kind;
      for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        text[i] = kind == 0 ? "aeinorst"[x % 8] : kind == 1 ? ' ' : " \t \f"[x % 4];
      }
      if (kind == 2) text[0] = ' ', text[n - 1] = ' '; /* one run: \s+ to the end */
      size_t got = 0;
      ZT_OK(zeroc_tokenizer_encode(t, text, n, ids, &got));
      for (size_t i = 0; i < n; i++) ref[i] = t->byte_id[(unsigned char)text[i]];
      size_t want = ref_merge(t, ref, n);
      ZT_ASSERT_MSG(got == want && !memcmp(ids, ref, want * sizeof *ids),
                    "%s, word kind %d: %zu ids, the definition gives %zu", files[f], kind, got,
                    want);
    }
    zeroc_tokenizer_destroy(t);
  }
  free(text), free(ids), free(ref);
}

static const zt_test_t tests[] = {
    {"bytes", test_bytes},
    {"tokenizer.json, merges as strings", test_string_merges},
    {"tokenizer.json, add_prefix_space", test_prefix_space},
    {"tokenizer.json, merges as pairs, Split", test_pair_merges},
    {"vocab.json + merges.txt", test_vocab_merges},
    {"Llama 3's split pattern and post-processor", test_llama3_split},
    {"Qwen2's split pattern", test_qwen2_split},
    {"Qwen2's NFC normalizer", test_qwen2_nfc},
    {"invalid UTF-8 and long words", test_invalid_utf8},
    {"malformed files refused", test_errors},
    {"ids above 65535", test_large_ids},
    {"BPE options", test_options},
    {"threads", test_threads},
    {"long words merged rank by rank", test_long_words},
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
