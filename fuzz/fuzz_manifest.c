/*
 * fuzz/fuzz_manifest.c - loading a checkpoint (persist/) end to end: the
 * manifest parser and its layout checks, the file list, the size and CRC-32C
 * checks of the shard files and the re-cut onto another shard count, against
 * a real (one-rank) model on a real context.
 *
 * Input: manifest.json bytes, a NUL byte, then up to 4 shard files, each a
 * 4-byte little-endian length and that many bytes, written as
 * pp00_tp00_shard0000<i>.bin beside the manifest; DIR/latest names the
 * checkpoint. Properties: a rejected checkpoint gets a one-line message
 * naming the checkpoint's path and leaves the model's state bitwise as it
 * was; an accepted one reports a step at least its optimizer steps.
 *
 * ZEROC_FUZZ_MAKE_SEEDS=DIR (under mpirun -np 1 or 2) writes a valid input
 * saved on that many ranks to DIR/valid_np<N> and exits; ZEROC_FUZZ_VERBOSE=1
 * prints each load's result.
 */
#include <dirent.h>
#include <mpi.h>
#include <unistd.h>

#include "core/error.h"
#include "fuzz_util.h"
#include "io/files.h"
#include "zeroc/ckpt.h"
#include "zeroc/zeroc.h"

static zeroc_result_t nop(zeroc_layer_io_t *io) {
  io->out = (void *)io->in;
  io->din = (void *)io->dout;
  return ZEROC_OK;
}

static const zeroc_param_desc_t P0[] = {
    {.name = "w0", .ndim = 1, .shape = {301}, .init = ZEROC_INIT_NORMAL, .init_scale = 0.5f}};
static const zeroc_param_desc_t P1[] = {
    {.name = "w1", .ndim = 2, .shape = {97, 3}, .init = ZEROC_INIT_NORMAL, .init_scale = 0.5f},
    {.name = "b1",
     .ndim = 1,
     .shape = {5},
     .init = ZEROC_INIT_ZEROS,
     .flags = ZEROC_PARAM_NO_DECAY}};
static const zeroc_layer_t LAYERS[] = {
    {.name = "u0", .nparams = 1, .params = P0, .shares = -1, .forward = nop, .backward = nop},
    {.name = "u1", .nparams = 2, .params = P1, .shares = -1, .forward = nop, .backward = nop}};

static zeroc_ctx_t *ctx;
static zeroc_model_t *model;
static char root[64], ckdir[128];

static void cleanup(void) {
  if (zeroc_ctx_mesh(ctx)->rank == 0) zeroc__rmtree(root);
  zeroc_model_destroy(model);
  zeroc_ctx_finalize(ctx);
}

static void put_u32(FILE *f, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  fwrite(b, 1, 4, f);
}

/* Packs DIR/step_<k> into the input format (the seed corpus). */
static void make_seed(const char *out_dir, int world) {
  FUZZ_REQUIRE(zeroc_ckpt_save(model, root, 3, "{\"note\": \"seed\"}") == ZEROC_OK, "save: %s",
               zeroc_last_error(ctx));
  if (zeroc_ctx_mesh(ctx)->rank != 0) return;
  char path[512], out[512];
  snprintf(out, sizeof out, "%s/valid_np%d", out_dir, world);
  FILE *f = fopen(out, "wb");
  FUZZ_REQUIRE(f != NULL, "cannot write %s", out);
  char *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/step_00000003/manifest.json", root);
  FUZZ_REQUIRE(zeroc__file_read(path, 1 << 20, &text, &len) == ZEROC_OK, "read %s", path);
  fwrite(text, 1, len, f);
  fputc(0, f);
  free(text);
  for (int i = 0; i < world; i++) {
    snprintf(path, sizeof path, "%s/step_00000003/pp00_tp00_shard%05d.bin", root, i);
    FUZZ_REQUIRE(zeroc__file_read(path, 1 << 20, &text, &len) == ZEROC_OK, "read %s", path);
    put_u32(f, (uint32_t)len);
    fwrite(text, 1, len, f);
    free(text);
  }
  fclose(f);
  printf("wrote %s\n", out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU;
  cc.threads = 1;
  cc.bind = 0;
  cc.comm_timeout_s = 60;
  FUZZ_REQUIRE(zeroc_ctx_create(&ctx, &cc) == ZEROC_OK, "context: %s", zeroc_last_error(NULL));
  zeroc_shard_config_t sc = ZEROC_SHARD_CONFIG_INIT;
  sc.seed = 9;
  FUZZ_REQUIRE(zeroc_shard(ctx, LAYERS, 2, &sc, &model) == ZEROC_OK, "model: %s",
               zeroc_last_error(ctx));
  zeroc_model_set_steps(model, 2);
  snprintf(root, sizeof root, "/tmp/zeroc-fuzz-ckpt-%d", (int)getpid());
  /* every rank uses rank 0's directory */
  MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (zeroc_ctx_mesh(ctx)->rank == 0)
    FUZZ_REQUIRE(zeroc__mkdir_p(root, 0755) == ZEROC_OK, "mkdir %s", root);
  if (getenv("ZEROC_FUZZ_MAKE_SEEDS")) {
    make_seed(getenv("ZEROC_FUZZ_MAKE_SEEDS"), zeroc_ctx_mesh(ctx)->world);
    cleanup();
    exit(0);
  }
  snprintf(ckdir, sizeof ckdir, "%s/case", root);
  char latest[128];
  snprintf(latest, sizeof latest, "%s/latest", root);
  FUZZ_REQUIRE(zeroc__file_write_atomic(latest, "case\n", 5) == ZEROC_OK, "latest");
  atexit(cleanup);
  return 0;
}

static void write_file(const char *name, const uint8_t *p, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", ckdir, name);
  FILE *f = fopen(path, "wb");
  FUZZ_REQUIRE(f != NULL, "cannot write %s", path);
  if (n) fwrite(p, 1, n, f);
  fclose(f);
}

typedef struct {
  float *s[2][3];
} snap_t;

static void snapshot(snap_t *sn) {
  for (int u = 0; u < 2; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(model, u, &ui);
    for (int k = 0; k < 3; k++) {
      sn->s[u][k] = malloc(ui.shard_numel * 4);
      FUZZ_REQUIRE(zeroc_model_get_shard(model, u, (zeroc_state_kind_t)k, sn->s[u][k]) == ZEROC_OK,
                   "get");
    }
  }
}

static int unchanged(snap_t *sn) {
  int same = 1;
  for (int u = 0; u < 2; u++) {
    zeroc_unit_info_t ui;
    zeroc_model_unit_info(model, u, &ui);
    float *now = malloc(ui.shard_numel * 4);
    for (int k = 0; k < 3; k++) {
      zeroc_model_get_shard(model, u, (zeroc_state_kind_t)k, now);
      same &= !memcmp(now, sn->s[u][k], ui.shard_numel * 4);
      free(sn->s[u][k]);
    }
    free(now);
  }
  return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a fresh checkpoint directory holding exactly this input's files */
  zeroc__rmtree(ckdir);
  FUZZ_REQUIRE(zeroc__mkdir_p(ckdir, 0755) == ZEROC_OK, "mkdir %s", ckdir);
  const uint8_t *nul = memchr(data, 0, size);
  size_t mlen = nul ? (size_t)(nul - data) : size;
  write_file("manifest.json", data, mlen);
  const uint8_t *p = nul ? nul + 1 : data + size, *end = data + size;
  for (int i = 0; i < 4 && end - p >= 4; i++) {
    uint32_t n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    p += 4;
    if (n > (size_t)(end - p)) n = (uint32_t)(end - p);
    char name[64];
    snprintf(name, sizeof name, "pp00_tp00_shard%05d.bin", i);
    write_file(name, p, n);
    p += n;
  }

  snap_t sn;
  snapshot(&sn);
  uint64_t steps_before = zeroc_model_steps(model), step = 0;
  char *app = NULL;
  zeroc_result_t r = zeroc_ckpt_load(model, root, &step, &app);
  if (getenv("ZEROC_FUZZ_VERBOSE"))
    fprintf(stderr, "load: %s %s\n", zeroc_result_name(r), r ? zeroc_last_error(ctx) : "");
  if (r != ZEROC_OK) {
    fuzz_check_rejection(r, zeroc_last_error(ctx), root);
    FUZZ_REQUIRE(unchanged(&sn), "a rejected checkpoint changed the model: %s",
                 zeroc_last_error(ctx));
    FUZZ_REQUIRE(zeroc_model_steps(model) == steps_before,
                 "a rejected checkpoint changed the step count");
    FUZZ_REQUIRE(app == NULL, "app object returned on failure");
  } else {
    (void)unchanged(&sn); /* frees the snapshot */
    FUZZ_REQUIRE(zeroc_model_steps(model) <= step, "optimizer steps %llu above step %llu",
                 (unsigned long long)zeroc_model_steps(model), (unsigned long long)step);
    free(app);
  }
  return 0;
}
