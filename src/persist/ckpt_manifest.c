/*
 * persist/ckpt_manifest.c - what writing and reading a checkpoint share: the
 * manifest's own checksum (sealed by ckpt_save.c, checked by ckpt_load.c),
 * its bounded integer reader, finding a checkpoint directory from DIR/latest,
 * and the resume check of the caller's own record in the manifest.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/crc32c.h"
#include "io/files.h"
#include "io/json.h"
#include "persist/ckpt.h"
#include "runtime/runtime.h"
#include "zeroc/ckpt.h"

/* ---- the manifest's own checksum ------------------------------------------------------- */

/* The manifest's last field, "manifest_crc32c", is the CRC-32C of every byte
 * before the comma that precedes its key: the file's own bytes, so no
 * re-serialisation has to agree between writer and reader, and a flipped
 * byte anywhere else (a step, a size, a file's CRC) is caught. */
#define CRC_KEY "\"manifest_crc32c\""

/* `text` (a JSON object) with the checksum field appended: *out malloc'd. */
zeroc_result_t zeroc__ckpt_seal_manifest(const char *text, size_t len, char **out,
                                         size_t *out_len) {
  size_t e = len;
  while (e && text[e - 1] != '}') e--;
  if (!e) return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "manifest text is not a JSON object");
  e--;
  while (e && (text[e - 1] == '\n' || text[e - 1] == ' ')) e--;
  uint32_t crc = zeroc__crc32c(0, text, e);
  size_t cap = e + 64;
  char *buf = malloc(cap);
  if (!buf) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "manifest of %zu bytes", cap);
  memcpy(buf, text, e);
  int n = snprintf(buf + e, cap - e, ",\n " CRC_KEY ": %" PRIu32 "\n}\n", crc);
  *out = buf;
  *out_len = e + (size_t)n;
  return ZEROC_OK;
}

/* Checks the manifest's checksum field when it has one; manifests written
 * before the field existed load without it (the shard files keep their own
 * CRC-32C either way). */
zeroc_result_t zeroc__ckpt_check_manifest_crc(const char *text, size_t len,
                                              const zeroc__json_t *root, const char *what) {
  if (!zeroc__json_get(root, "manifest_crc32c")) return ZEROC_OK;
  uint64_t want;
  ZEROC_CHECK(zeroc__ckpt_get_u64(root, "manifest_crc32c", what, UINT32_MAX, &want));
  size_t kl = strlen(CRC_KEY), at = SIZE_MAX;
  for (size_t i = 0; i + kl <= len; i++)
    if (!memcmp(text + i, CRC_KEY, kl)) at = i;
  size_t e = at == SIZE_MAX ? 0 : at;
  while (e &&
         (text[e - 1] == '\n' || text[e - 1] == ' ' || text[e - 1] == '\r' || text[e - 1] == '\t'))
    e--;
  /* after the key only its number and the closing brace may follow */
  const char *t = at == SIZE_MAX ? text : text + at + kl, *end = text + len;
  while (t < end && (*t == ' ' || *t == ':' || (*t >= '0' && *t <= '9') || *t == '\n' ||
                     *t == '}' || *t == '\r' || *t == '\t'))
    t++;
  if (!e || text[e - 1] != ',' || t != end)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: field 'manifest_crc32c' is not the manifest's last field", what);
  uint32_t got = zeroc__crc32c(0, text, e - 1);
  if (got != (uint32_t)want)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: fails its checksum (CRC-32C %08" PRIx32
                      " of its content, manifest_crc32c "
                      "%08" PRIx32 "): it was not used",
                      what, got, (uint32_t)want);
  return ZEROC_OK;
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/latest -> DIR/<name>, or `path` itself when it holds a manifest. */
zeroc_result_t zeroc__ckpt_resolve(const char *path, char *out, size_t n) {
  char probe[4400];
  snprintf(probe, sizeof probe, "%s/manifest.json", path);
  if (is_file(probe)) {
    snprintf(out, n, "%s", path);
    return ZEROC_OK;
  }
  snprintf(probe, sizeof probe, "%s/latest", path);
  char *text = NULL;
  size_t len = 0;
  zeroc_result_t r = zeroc__file_read(probe, 4096, &text, &len);
  struct stat st;
  if (r && lstat(probe, &st) == 0) return r; /* it is there but unreadable: say why (a fifo...) */
  if (r)
    return ZEROC_FAIL(ZEROC_ERR_IO,
                      "'%s' is not a checkpoint: it has neither manifest.json nor a readable "
                      "'latest' file",
                      path);
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' ')) text[--len] = 0;
  /* saves write step_<k>; anything but a plain name (a path, control or
   * non-ASCII bytes) is damage, quoted escaped (zeroc__fail escapes it) */
  int plain = len > 0 && len < 256 && strlen(text) == len && text[0] != '.';
  for (size_t i = 0; plain && i < len; i++) {
    char c = text[i];
    plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-' || c == '.';
  }
  if (!plain) {
    zeroc_result_t r2 = ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                                   "'%s' names no checkpoint directory: it holds '%.*s' (accepted: "
                                   "a name such as step_00000008)",
                                   probe, (int)(len < 256 ? len : 256), text);
    free(text);
    return r2;
  }
  snprintf(out, n, "%s/%s", path, text);
  free(text);
  return ZEROC_OK;
}

/* Reads integer field `key` of `o` into *v; it must lie in 0..max. Every
 * integer of a manifest goes through here: a value that would wrap an int or
 * overflow a size computed from it is refused by name, never cast. */
zeroc_result_t zeroc__ckpt_get_u64(const zeroc__json_t *o, const char *key, const char *what,
                                   uint64_t max, uint64_t *v) {
  const zeroc__json_t *x = zeroc__json_get(o, key);
  if (!x || x->type != ZEROC_JSON_NUMBER || !x->u.num.is_int || x->u.num.i < 0)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: field '%s' missing or not a non-negative integer",
                      what, key);
  if ((uint64_t)x->u.num.i > max)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: field '%s' %" PRIu64 " is out of range (accepted 0..%" PRIu64 ")", what,
                      key, (uint64_t)x->u.num.i, max);
  *v = (uint64_t)x->u.num.i;
  return ZEROC_OK;
}

/* ---- resuming: the caller's own record ----------------------------------------------- */

/* The value at dotted path `path` ("model.heads") of object `o`, or NULL. */
static const zeroc__json_t *get_path(const zeroc__json_t *o, const char *path) {
  char key[64];
  while (o && *path) {
    size_t n = strcspn(path, ".");
    if (n >= sizeof key) return NULL;
    memcpy(key, path, n);
    key[n] = 0;
    o = o->type == ZEROC_JSON_OBJECT ? zeroc__json_get(o, key) : NULL;
    path += n + (path[n] == '.');
  }
  return o;
}

/* A scalar as the message shows it. */
static const char *show(const zeroc__json_t *v, char *buf, size_t n) {
  if (!v)
    snprintf(buf, n, "missing");
  else if (v->type == ZEROC_JSON_NUMBER && v->u.num.is_u64)
    snprintf(buf, n, "%" PRIu64, v->u.num.u);
  else if (v->type == ZEROC_JSON_NUMBER && v->u.num.is_int)
    snprintf(buf, n, "%lld", (long long)v->u.num.i);
  else if (v->type == ZEROC_JSON_NUMBER)
    snprintf(buf, n, "%.9g", v->u.num.value);
  else if (v->type == ZEROC_JSON_STRING)
    snprintf(buf, n, "'%.64s'", v->u.str.s);
  else
    snprintf(buf, n, "not a number or string");
  return buf;
}

static int same_scalar(const zeroc__json_t *a, const zeroc__json_t *b) {
  if (!a || !b || a->type != b->type) return 0;
  if (a->type == ZEROC_JSON_STRING)
    return a->u.str.len == b->u.str.len && !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
  if (a->type != ZEROC_JSON_NUMBER || a->u.num.is_int != b->u.num.is_int ||
      a->u.num.is_u64 != b->u.num.is_u64)
    return 0;
  if (a->u.num.is_u64) return a->u.num.u == b->u.num.u; /* exact above 2^63 too */
  return a->u.num.is_int ? a->u.num.i == b->u.num.i : a->u.num.value == b->u.num.value;
}

static zeroc_result_t check_resume(const char *path, uint64_t step, uint64_t run_steps,
                                   const char *saved, const char *current,
                                   const char *const *fields) {
  zeroc_result_t res = ZEROC_OK;
  zeroc__json_doc_t *sd = NULL, *cd = NULL;
  char what[4200];
  snprintf(what, sizeof what, "resume from '%s'", path ? path : "");
  if (step > run_steps)
    return ZEROC_FAIL(
        ZEROC_ERR_INVALID_ARG,
        "--steps %" PRIu64 " is below the checkpoint's step %" PRIu64 " ('%s'): a run "
        "must end at or after the step it resumes from (accepted --steps %" PRIu64 " or more)",
        run_steps, step, path ? path : "", step);
  if (!fields || !*fields) return ZEROC_OK;
  if (!saved || !*saved)
    return ZEROC_FAIL(ZEROC_ERR_CORRUPT,
                      "%s: the manifest's 'app' object is missing or empty, so the model and data "
                      "it continues cannot be checked",
                      what);
  ZEROC_TRY(zeroc__json_parse(saved, strlen(saved), "the checkpoint's app object", &sd));
  ZEROC_TRY(zeroc__json_parse(current ? current : "{}", current ? strlen(current) : 2,
                              "this run's app object", &cd));
  for (const char *const *f = fields; *f && !res; f++) {
    const zeroc__json_t *a = get_path(zeroc__json_root(sd), *f),
                        *b = get_path(zeroc__json_root(cd), *f);
    char x[96], y[96];
    if (!a)
      res = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "%s: the manifest's app object has no '%s'", what, *f);
    else if (!same_scalar(a, b))
      res = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                       "%s: %s is %s in the checkpoint, %s in this run (accepted: the "
                       "checkpoint's value)",
                       what, *f, show(a, x, sizeof x), show(b, y, sizeof y));
  }
fail:
  zeroc__json_free(sd);
  zeroc__json_free(cd);
  return res;
}

zeroc_result_t zeroc_ckpt_check_resume(zeroc_ctx_t *ctx, const char *path, uint64_t step,
                                       uint64_t run_steps, const char *saved_app,
                                       const char *current_app, const char *const *fields) {
  return zeroc__ctx_ret(ctx, check_resume(path, step, run_steps, saved_app, current_app, fields));
}
