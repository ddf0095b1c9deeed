/*
 * train/export_path.c - what kind of export a path asks for, and its start-up
 * check (export_path.h).
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/files.h"
#include "train/export_path.h"

int zeroc__export_is_dir(const char *path) {
  size_t n = strlen(path), k = strlen(".safetensors");
  return !(n > k && !strcmp(path + n - k, ".safetensors"));
}

/* An existing directory is replaced whole by the export (staged, then swapped
 * in): it may hold only what an export writes, so that nothing else is lost (a
 * home directory, the transformers directory the run started from with its
 * tokenizer files). */
/* A shard of a sharded export: model-<k>-of-<n>.safetensors, k and n digits. */
static int is_shard(const char *name) {
  size_t n = strlen(name), k = strlen(".safetensors");
  if (strncmp(name, "model-", 6) || n <= 6 + k || strcmp(name + n - k, ".safetensors")) return 0;
  const char *p = name + 6, *end = name + n - k;
  size_t d1 = strspn(p, "0123456789");
  if (!d1 || strncmp(p + d1, "-of-", 4)) return 0;
  p += d1 + 4;
  size_t d2 = strspn(p, "0123456789");
  return d2 && p + d2 == end;
}

static zeroc_result_t only_export_files(const char *path) {
  static const char *const ours[] = {"config.json", "model.safetensors",
                                     "model.safetensors.index.json", NULL};
  DIR *d = opendir(path);
  if (!d) return ZEROC_FAIL(ZEROC_ERR_IO, "--export '%s': opendir: %s", path, strerror(errno));
  struct dirent *e;
  zeroc_result_t r = ZEROC_OK;
  while (!r && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    int known = 0;
    for (int k = 0; ours[k]; k++) known |= !strcmp(e->d_name, ours[k]);
    known |= is_shard(e->d_name);
    if (!known)
      r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "--export '%s' is a directory holding '%s', which the export would "
                     "replace; accepted a new or empty directory, or an earlier export "
                     "(config.json, model.safetensors or its shards and index), or a path "
                     "ending in .safetensors",
                     path, e->d_name);
  }
  closedir(d);
  return r;
}

zeroc_result_t zeroc__export_check(const zeroc_arch_t *arch, const char *path) {
  struct stat st;
  if (!zeroc__export_is_dir(path)) return zeroc__file_check_writable(path, "--export");
  if (!arch->hf_config_write || !arch->export_weights)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "--export '%s': a transformers directory needs a model with a transformers "
                      "class; %s has none (a path ending in .safetensors writes one file)",
                      path, arch->name);
  if (stat(path, &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "--export '%s' is a %s; accepted a directory (a transformers "
                        "save_pretrained one) or a path ending in .safetensors",
                        path, zeroc__file_kind(st.st_mode));
    ZEROC_CHECK(only_export_files(path));
    return zeroc__dir_check_writable(path, "--export");
  }
  /* a new directory: its parent must take it (as for a file of that name) */
  return zeroc__file_check_writable(path, "--export");
}

