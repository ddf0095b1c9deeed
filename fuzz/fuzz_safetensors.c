/*
 * fuzz/fuzz_safetensors.c - the safetensors reader (io/safetensors.c) on
 * images held in memory. Properties: malformed images are rejected with a
 * message naming the input; an accepted image's tensors tile its data section
 * exactly (sorted, no gap, no overlap, bytes = numel x dtype size), each is
 * found by its name, and the fp32 conversions read only inside the image.
 */
#include "core/error.h"
#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  zeroc__st_t *st = NULL;
  zeroc_result_t r = zeroc__st_parse(data, size, "fuzz input", &st);
  if (r != ZEROC_OK) {
    FUZZ_REQUIRE(st == NULL, "a failed parse returned a handle");
    fuzz_check_rejection(r, zeroc__tls_error(), "fuzz input");
    return 0;
  }
  size_t n = zeroc__st_count(st);
  uint64_t hlen = 0;
  FUZZ_REQUIRE(size >= 8, "accepted %zu bytes", size);
  memcpy(&hlen, data, 8);
  uint64_t data_bytes = size - 8 - hlen, expect = 0;
  for (size_t i = 0; i < n; i++) {
    const zeroc__st_tensor_t *t = zeroc__st_tensor(st, i);
    size_t es = zeroc__st_dtype_size(t->dtype);
    FUZZ_REQUIRE(es > 0 && t->ndim >= 0 && t->ndim <= ZEROC_ST_MAX_DIMS,
                 "tensor %zu: dtype or rank", i);
    FUZZ_REQUIRE(t->begin == expect && t->end >= t->begin && t->end <= data_bytes,
                 "tensor '%s' [%llu, %llu) does not tile the %llu data bytes", t->name,
                 (unsigned long long)t->begin, (unsigned long long)t->end,
                 (unsigned long long)data_bytes);
    FUZZ_REQUIRE(t->numel * es == t->end - t->begin, "tensor '%s': numel x size != bytes", t->name);
    FUZZ_REQUIRE((const uint8_t *)t->data == data + 8 + hlen + t->begin,
                 "tensor '%s': data pointer", t->name);
    FUZZ_REQUIRE(zeroc__st_find(st, t->name) == t, "tensor '%s' not found by name", t->name);
    expect = t->end;
    float *out = malloc(t->numel * sizeof(float) + 1);
    FUZZ_REQUIRE(out != NULL, "allocation of %llu floats", (unsigned long long)t->numel);
    r = zeroc__st_read_f32(t, out, t->numel);
    if (t->dtype == ZEROC_ST_F32 || t->dtype == ZEROC_ST_BF16 || t->dtype == ZEROC_ST_F16)
      FUZZ_REQUIRE(r == ZEROC_OK, "read_f32 of '%s': %s", t->name, zeroc__tls_error());
    else
      fuzz_check_rejection(r, zeroc__tls_error(), t->name);
    if (t->numel) {
      r = zeroc__st_read_f32(t, out, t->numel - 1); /* a wrong count is refused */
      fuzz_check_rejection(r, zeroc__tls_error(), t->name);
    }
    free(out);
  }
  FUZZ_REQUIRE(expect == data_bytes, "the tensors cover %llu of %llu data bytes",
               (unsigned long long)expect, (unsigned long long)data_bytes);
  (void)zeroc__st_metadata(st, "format");
  zeroc__st_close(st);
  return 0;
}
