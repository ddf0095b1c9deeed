/*
 * fuzz/fuzz_shard.c - the llm.c token shard reader (io/data.c): the input is
 * written to a real file and opened as a data set, then every sequence of the
 * first steps is read (in file order and shuffled). Properties: a malformed
 * shard (header, count, size, tokens out of the vocabulary) is rejected with
 * a one-line message naming the file; an accepted one yields tokens inside
 * the vocabulary, with targets the inputs shifted by one.
 */
#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"
#include "fuzz_util.h"
#include "zeroc/data.h"

#define VOCAB 300

static char dir[64], path[256];

static void cleanup(void) {
  unlink(path);
  rmdir(dir);
}

static void write_input(const uint8_t *data, size_t size) {
  if (!path[0]) {
    snprintf(dir, sizeof dir, "%s", "/tmp/zeroc-fuzz-shard-XXXXXX");
    FUZZ_REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/train_000000.bin", dir);
    atexit(cleanup);
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  FUZZ_REQUIRE(fd >= 0, "open %s", path);
  for (size_t off = 0; off < size;) {
    ssize_t w = write(fd, data + off, size - off);
    FUZZ_REQUIRE(w > 0, "write %s", path);
    off += (size_t)w;
  }
  close(fd);
}

static void read_all(int seq, int shuffle) {
  zeroc_data_config_t cfg = ZEROC_DATA_CONFIG_INIT;
  cfg.source = path;
  cfg.vocab = VOCAB;
  cfg.seq = seq;
  cfg.global_batch = 2;
  cfg.seed = 3;
  cfg.shuffle = shuffle;
  zeroc_data_t *d = NULL;
  zeroc_result_t r = zeroc_data_create(&cfg, &d);
  if (r != ZEROC_OK) {
    FUZZ_REQUIRE(d == NULL, "a failed create returned a handle");
    fuzz_check_rejection(r, zeroc__tls_error(), path);
    return;
  }
  zeroc_data_info_t info;
  zeroc_data_info(d, &info);
  FUZZ_REQUIRE(info.num_files == 1 && info.steps_per_epoch >= 1 &&
                   info.num_sequences >= (uint64_t)cfg.global_batch,
               "accepted a data set with %llu sequences", (unsigned long long)info.num_sequences);
  zeroc_data_layout_t lay = {1, 0, 2, 1};
  int32_t in[2 * 64], tg[2 * 64];
  uint64_t steps = info.steps_per_epoch * 2 < 6 ? info.steps_per_epoch * 2 : 6;
  for (uint64_t s = 0; s < steps; s++) {
    r = zeroc_data_batch(d, &lay, s, 0, in, tg);
    if (r != ZEROC_OK) { /* tokens are checked as they are read */
      fuzz_check_rejection(r, zeroc__tls_error(), path);
      break;
    }
    for (int i = 0; i < 2 * seq; i++) {
      FUZZ_REQUIRE(in[i] >= 0 && in[i] < VOCAB && tg[i] >= 0 && tg[i] < VOCAB, "token %d / %d",
                   in[i], tg[i]);
      if (i % seq < seq - 1) FUZZ_REQUIRE(in[i + 1] == tg[i], "targets are not the shifted inputs");
    }
  }
  zeroc_data_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  write_input(data, size);
  read_all(3, 0);
  read_all(1, 1);
  read_all(64, 1);
  return 0;
}
