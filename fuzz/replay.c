/*
 * fuzz/replay.c - runs a fuzz harness over stored inputs without libFuzzer:
 * the seeds and every crashing or slow input found so far
 * (tests/fuzz_corpus/<target>/), as a regression test of the default suite.
 * usage: fuzz_replay_<target> DIR|FILE...   (missing directories are skipped)
 * Fails when an input takes longer than 5 s, or when no input was found.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!buf || got != (size_t)n) {
    free(buf);
    fprintf(stderr, "replay: cannot read %s\n", path);
    return -1;
  }
  double t0 = now();
  LLVMFuzzerTestOneInput(buf, got);
  double dt = now() - t0;
  free(buf);
  if (dt > 5.0) {
    fprintf(stderr, "replay: %s took %.1f s (limit 5 s): a slow input\n", path, dt);
    return -1;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int total = 0, bad = 0;
  for (int a = 1; a < argc; a++) {
    struct stat st;
    if (stat(argv[a], &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      int r = replay_file(argv[a]);
      if (r < 0)
        bad++;
      else
        total += r;
      continue;
    }
    DIR *d = opendir(argv[a]);
    if (!d) continue;
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
      if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md")) continue;
      names = realloc(names, (n + 1) * sizeof *names);
      names[n] = malloc(strlen(argv[a]) + strlen(e->d_name) + 2);
      sprintf(names[n++], "%s/%s", argv[a], e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    for (size_t i = 0; i < n; i++) {
      int r = replay_file(names[i]);
      if (r < 0)
        bad++;
      else
        total += r;
      free(names[i]);
    }
    free(names);
  }
  printf("replayed %d inputs, %d failed\n", total, bad);
  return bad || total == 0 ? 1 : 0;
}
