/*
 * tests/test_plan_attention.c - cuDNN attention's workspace as one formula
 * (kernels/attention_cudnn_ws.c): the formula by hand at a few shapes, the planner's
 * prediction with cuDNN's attention (fast and deterministic backward) exactly the
 * formula's bytes beyond the kernel scratch, the knobs' parsing (ZEROC_CUDA_ATTENTION,
 * ZEROC_CUDA_DETERMINISTIC), and with --cli PATH `zeroc plan --attention/--deterministic`.
 * No GPU: the runtime's side of the same formula runs in test_kernels_cuda.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kernels/attention_cudnn.h"
#include "testutil.h"
#include "zeroc/plan.h"

#define MIB 1048576.0

/* ---- the formula ------------------------------------------------------------------ */

static void expect_ws(int B, int T, int C, int NH, int det, size_t dsum, size_t dqacc,
                      size_t bwd_plan) {
  zeroc__cudnn_ws_t w;
  zeroc__cudnn_ws(B, T, C, NH, det, &w);
  const size_t bwd = dsum + dqacc + bwd_plan;
  ZT_ASSERT_MSG(
      w.fwd == ZEROC__CUDNN_PLAN_RESERVE && w.dsum == dsum && w.dqacc == dqacc &&
          w.bwd_plan == bwd_plan && w.bwd == bwd && w.total == (bwd > w.fwd ? bwd : w.fwd),
      "B %d T %d C %d NH %d det %d: fwd %zu dsum %zu dqacc %zu plan %zu bwd %zu total "
      "%zu; by hand dsum %zu dqacc %zu plan %zu",
      B, T, C, NH, det, w.fwd, w.dsum, w.dqacc, w.bwd_plan, w.bwd, w.total, dsum, dqacc, bwd_plan);
}

static void test_formula_by_hand(void) {
  const size_t R = 4u << 20; /* the plans' reserve */
  /* the 1.3B GPT's attention (B4 T2048 C2048 NH16): sum(dO*O) 4 x 16 x 2048 fp32; fast: the
   * dQ accumulator 4 x 2048 x 2048 fp32 = 64 MiB; deterministic: dP 4 x 16 x 2048^2 bf16 */
  expect_ws(4, 2048, 2048, 16, 0, 524288, 67108864, R);
  expect_ws(4, 2048, 2048, 16, 1, 524288, 0, R + 536870912);
  /* T 300, not a tile multiple: dP on 384 x 384; the row sums (3600 bytes) to 256 */
  expect_ws(1, 300, 384, 3, 1, 3840, 0, R + 3 * 384 * 384 * 2);
  expect_ws(1, 300, 384, 3, 0, 3840, 460800, R);
  /* one token: every part rounded up to 256 */
  expect_ws(1, 1, 8, 1, 0, 256, 256, R);
  /* where it goes: the kernel scratch (64 MiB by default) when it holds the total */
  zeroc__cudnn_ws_t w;
  zeroc__cudnn_ws(4, 1024, 768, 12, 0, &w); /* gpt2-124m's batch 4: 16.2 MiB */
  CU_ASSERT_EQUAL(w.total, 196608 + 12582912 + R);
  CU_ASSERT_EQUAL(zeroc__cudnn_ws_own(w.total, 64u << 20), 0);
  zeroc__cudnn_ws(4, 2048, 2048, 16, 0, &w);
  CU_ASSERT_EQUAL(zeroc__cudnn_ws_own(w.total, 64u << 20), 71827456);
  CU_ASSERT_EQUAL(zeroc__cudnn_ws_own(w.total, 1024u << 20), 0);
  CU_ASSERT_EQUAL(zeroc__cudnn_ws_own(w.total, w.total), 0);
  /* the head sizes cuDNN's SDPA takes */
  CU_ASSERT(zeroc__cudnn_takes(768, 12) && zeroc__cudnn_takes(2048, 16) &&
            zeroc__cudnn_takes(8, 1));
  CU_ASSERT(!zeroc__cudnn_takes(8, 2) && !zeroc__cudnn_takes(2048, 8) && /* HS 4, 256 */
            !zeroc__cudnn_takes(100, 5) && !zeroc__cudnn_takes(10, 3) && !zeroc__cudnn_takes(8, 0));
}

/* ---- the planner ---------------------------------------------------------------------- */

static zeroc_plan_config_t gpt13b(void) {
  zeroc_plan_config_t c = ZEROC_PLAN_CONFIG_INIT;
  c.model = (zeroc_gpt_config_t){
      .layers = 24, .hidden = 2048, .heads = 16, .vocab = 50257, .seq = 2048, .batch = 4};
  return c;
}

/* The workspace of `c` with cuDNN's attention minus the same with zeroc's flash kernels. */
static double cudnn_extra(zeroc_plan_config_t c) {
  zeroc_plan_result_t rc, rf;
  c.flash_attention = ZEROC_ATTENTION_CUDNN;
  ZT_OK(zeroc_plan_compute(&c, &rc));
  c.flash_attention = ZEROC_ATTENTION_FLASH;
  ZT_OK(zeroc_plan_compute(&c, &rf));
  ZT_ASSERT_MSG(
      rc.device.params == rf.device.params && rc.device.activations == rf.device.activations &&
          rc.device.buffers == rf.device.buffers &&
          rc.device.total - rc.device.workspace == rf.device.total - rf.device.workspace,
      "only the workspace may differ: total %.0f / %.0f", rc.device.total, rf.device.total);
  return rc.device.workspace - rf.device.workspace;
}

/* The formula's bytes beyond the scratch for one shape. */
static double formula_own(int B, int T, int C, int NH, int det, int backward) {
  zeroc__cudnn_ws_t w;
  zeroc__cudnn_ws(B, T, C, NH, det, &w);
  return (double)zeroc__cudnn_ws_own(backward ? w.total : w.fwd, 64u << 20);
}

static void expect_extra(const char *what, zeroc_plan_config_t c, double want) {
  double got = cudnn_extra(c);
  ZT_ASSERT_MSG(got == want, "%s: the planner counts %.0f bytes for cuDNN, the formula %.0f", what,
                got, want);
}

static void test_planner_prediction(void) {
  unsetenv("ZEROC_CUDA_SCRATCH_MB");
  zeroc_plan_config_t c = gpt13b();
  /* the defaults: cuDNN's attention, fast backward */
  zeroc_plan_result_t r;
  ZT_OK(zeroc_plan_compute(&c, &r));
  CU_ASSERT(r.cfg.flash_attention == ZEROC_ATTENTION_CUDNN && r.cfg.deterministic == 0);
  expect_extra("1.3B, fast", c, formula_own(4, 2048, 2048, 16, 0, 1));
  CU_ASSERT_EQUAL(cudnn_extra(c), 71827456); /* 64.5 MiB of tensors + the reserve */
  c.deterministic = 1;
  expect_extra("1.3B, deterministic", c, formula_own(4, 2048, 2048, 16, 1, 1));
  CU_ASSERT_EQUAL(cudnn_extra(c), 541589504);
  /* tp 2: each rank's 8 heads of width 1024; the fast total fits the scratch */
  c.gpus = c.tp = 2;
  expect_extra("1.3B tp 2, deterministic", c, formula_own(4, 2048, 1024, 8, 1, 1));
  CU_ASSERT(cudnn_extra(c) > 0);
  c.deterministic = 0;
  expect_extra("1.3B tp 2, fast", c, 0);
  /* context parallelism: the ring's blocks are zeroc's; Ulysses' forward is cuDNN's (on
   * T with heads / (tp cp)), its backward zeroc's: the plan's reserve, inside the scratch */
  c.gpus = 2, c.tp = 1, c.cp = 2, c.deterministic = 1;
  c.cp_mode = ZEROC_CP_MODE_RING;
  expect_extra("cp 2 ring", c, 0);
  c.cp_mode = ZEROC_CP_MODE_ULYSSES;
  expect_extra("cp 2 Ulysses", c, formula_own(4, 2048, 1024, 8, 1, 0));
  /* fp32: cuDNN's path is bf16 only */
  c = gpt13b();
  c.param_bytes = 4;
  c.deterministic = 1;
  expect_extra("fp32", c, 0);
  /* a head size cuDNN does not take (256) */
  c = gpt13b();
  c.model.heads = 8;
  c.deterministic = 1;
  expect_extra("head size 256", c, 0);
  /* a larger kernel scratch holds it: nothing of its own (both sides read the knob) */
  c = gpt13b();
  c.deterministic = 1;
  setenv("ZEROC_CUDA_SCRATCH_MB", "1024", 1);
  expect_extra("1.3B deterministic, 1 GiB scratch", c, 0);
  unsetenv("ZEROC_CUDA_SCRATCH_MB");
  /* bad values of the new fields */
  c.flash_attention = 3;
  CU_ASSERT_EQUAL(zeroc_plan_compute(&c, &r), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "flash_attention 3"), "%s", zeroc_last_error(NULL));
  c.flash_attention = ZEROC_ATTENTION_CUDNN;
  c.deterministic = 2;
  CU_ASSERT_EQUAL(zeroc_plan_compute(&c, &r), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "deterministic 2"), "%s", zeroc_last_error(NULL));
}

/* ---- the knobs ---------------------------------------------------------------------- */

static void test_knobs(void) {
  zeroc__cudnn_mode_t m = ZEROC__CUDNN_OFF;
  ZT_OK(zeroc__cudnn_mode_parse(NULL, &m));
  CU_ASSERT_EQUAL(m, ZEROC__CUDNN_AUTO); /* the default: auto */
  m = ZEROC__CUDNN_OFF;
  ZT_OK(zeroc__cudnn_mode_parse("", &m));
  CU_ASSERT_EQUAL(m, ZEROC__CUDNN_AUTO);
  ZT_OK(zeroc__cudnn_mode_parse("cudnn", &m));
  CU_ASSERT_EQUAL(m, ZEROC__CUDNN_REQUIRED);
  ZT_OK(zeroc__cudnn_mode_parse("zeroc", &m));
  CU_ASSERT_EQUAL(m, ZEROC__CUDNN_OFF);
  ZT_OK(zeroc__cudnn_mode_parse("auto", &m));
  CU_ASSERT_EQUAL(m, ZEROC__CUDNN_AUTO);
  CU_ASSERT_EQUAL(zeroc__cudnn_mode_parse("flash", &m), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "'flash'") &&
                    strstr(zeroc_last_error(NULL), "accepted auto"),
                "%s", zeroc_last_error(NULL));
  int det = -1;
  unsetenv("ZEROC_CUDA_DETERMINISTIC");
  ZT_OK(zeroc__cudnn_deterministic_knob(&det));
  CU_ASSERT_EQUAL(det, 0);
  setenv("ZEROC_CUDA_DETERMINISTIC", "1", 1);
  ZT_OK(zeroc__cudnn_deterministic_knob(&det));
  CU_ASSERT_EQUAL(det, 1);
  setenv("ZEROC_CUDA_DETERMINISTIC", "2", 1);
  CU_ASSERT_EQUAL(zeroc__cudnn_deterministic_knob(&det), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "ZEROC_CUDA_DETERMINISTIC='2'") &&
                    strstr(zeroc_last_error(NULL), "accepted"),
                "%s", zeroc_last_error(NULL));
  setenv("ZEROC_CUDA_DETERMINISTIC", "yes", 1);
  CU_ASSERT(zeroc__cudnn_deterministic_knob(&det) != ZEROC_OK);
  unsetenv("ZEROC_CUDA_DETERMINISTIC");
  /* no bf16 cuda kernels object in this process: train's prediction assumes zeroc's */
  CU_ASSERT_EQUAL(zeroc__cudnn_attention_loaded(), 0);
}

/* ---- zeroc plan ----------------------------------------------------------------------- */

static const char *g_zeroc;
static char g_out[1 << 16];

/* Runs `zeroc plan ARGS` (stderr with stdout), its output into g_out; the exit status. */
static int plan(const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' plan %s 2>&1", g_zeroc, args);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  size_t n = fread(g_out, 1, sizeof g_out - 1, f);
  g_out[n] = 0;
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The number after "key": in g_out, or -1. */
static double json_num(const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *p = strstr(g_out, k);
  return p ? strtod(p + strlen(k), NULL) : -1;
}

static void test_cli(void) {
  const char *shape = "--layers 24 --hidden 2048 --heads 16 --seq 2048 --batch 4";
  char a[512];
  double ws[3];
  const char *modes[3] = {"--attention flash", "", "--attention cudnn --deterministic"};
  for (int i = 0; i < 3; i++) {
    snprintf(a, sizeof a, "%s %s --json", shape, modes[i]);
    int rc = plan(a);
    ZT_ASSERT_MSG(rc == 0, "zeroc plan %s: exit %d\n%s", a, rc, g_out);
    ws[i] = json_num("workspace");
    const char *want = i == 0   ? "\"attention\": \"flash\", \"deterministic\": false"
                       : i == 1 ? "\"attention\": \"cudnn\", \"deterministic\": false"
                                : "\"attention\": \"cudnn\", \"deterministic\": true";
    ZT_ASSERT_MSG(strstr(g_out, want), "zeroc plan %s: no '%s' in\n%s", a, want, g_out);
  }
  ZT_ASSERT_MSG(ws[1] - ws[0] == formula_own(4, 2048, 2048, 16, 0, 1) &&
                    ws[2] - ws[0] == formula_own(4, 2048, 2048, 16, 1, 1),
                "workspace flash %.0f, cudnn %.0f, deterministic %.0f", ws[0], ws[1], ws[2]);
  /* the text says what it assumed */
  snprintf(a, sizeof a, "%s", shape);
  ZT_ASSERT_MSG(plan(a) == 0 && strstr(g_out, "cuDNN's flash attention, fast backward") &&
                    strstr(g_out, "assumed"),
                "%s", g_out);
  ZT_ASSERT_MSG(plan("--attention flash") == 0 && strstr(g_out, "zeroc's own flash kernels"), "%s",
                g_out);
  /* bad values: exit 2, the flag named, nothing else */
  const char *bad[][2] = {{"--attention sdpa", "--attention"},
                          {"--deterministic=1", "--deterministic"}};
  for (int i = 0; i < 2; i++) {
    int rc = plan(bad[i][0]);
    ZT_ASSERT_MSG(rc == 2 && strstr(g_out, bad[i][1]) && strstr(g_out, "accepted"),
                  "zeroc plan %s: exit %d, %s", bad[i][0], rc, g_out);
  }
  ZT_ASSERT_MSG(plan("--attention sdpa") == 2 && strstr(g_out, "naive, flash, cudnn"), "%s", g_out);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--cli")) {
    g_zeroc = argv[2];
    static const zt_test_t cli[] = {{"zeroc plan --attention, --deterministic", test_cli}, ZT_END};
    return zt_run("zeroc plan attention", cli);
  }
  static const zt_test_t tests[] = {
      {"the workspace formula by hand", test_formula_by_hand},
      {"the planner predicts the formula's bytes", test_planner_prediction},
      {"ZEROC_CUDA_ATTENTION, ZEROC_CUDA_DETERMINISTIC", test_knobs},
      ZT_END};
  return zt_run("plan attention", tests);
}
