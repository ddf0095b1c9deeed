/*
 * tests/test_plan.c - the planner against published figures (the ZeRO paper's
 * memory table, the Megatron-LM paper's parameter counts), hand-computed FLOPs
 * and activation formulas, sanity of the memory and time model, the --all
 * search, and (with --cli PATH) the `zeroc plan` command's output and errors.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "zeroc/pipeline.h"
#include "zeroc/plan.h"

/* |x - printed| within half a unit of the printed figure's last digit. */
static int matches_printed(double x, double printed, double unit) {
  return fabs(x - printed) <= unit / 2 + 1e-12;
}

static zeroc_plan_config_t gpt(int layers, int hidden, int heads, int vocab, int seq, int batch) {
  zeroc_plan_config_t c = ZEROC_PLAN_CONFIG_INIT;
  zeroc_gpt_config_t m = {.layers = layers,
                          .hidden = hidden,
                          .heads = heads,
                          .vocab = vocab,
                          .seq = seq,
                          .batch = batch};
  c.model = m;
  return c;
}

/* ---- published figures ----------------------------------------------------------- */

/* ZeRO paper (Rajbhandari et al. 2020), Table 1: Psi = 7.5B, Nd = 64, GB = 1e9:
 * baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.88 GB. */
static void test_zero_paper_table(void) {
  const double printed[4] = {120, 31.4, 16.6, 1.88}, unit[4] = {1, 0.1, 0.1, 0.01};
  for (int z = 0; z < 4; z++) {
    zeroc_plan_memory_t m;
    ZT_OK(zeroc_plan_model_states(7.5e9, z, 64, 2, &m));
    ZT_ASSERT_MSG(matches_printed(m.total / 1e9, printed[z], unit[z]),
                  "ZeRO-%d: %.4f GB, the paper prints %g", z, m.total / 1e9, printed[z]);
    ZT_ASSERT_MSG(m.activations == 0 && m.buffers == 0 && m.workspace == 0,
                  "model states only: activations %g buffers %g workspace %g", m.activations,
                  m.buffers, m.workspace);
  }
  /* The split of the baseline: 2 Psi params, 2 Psi grads, 12 Psi optimizer. */
  zeroc_plan_memory_t m;
  ZT_OK(zeroc_plan_model_states(7.5e9, 0, 64, 2, &m));
  ZT_ASSERT_MSG(m.params == 15e9 && m.grads == 15e9 && m.optimizer == 90e9,
                "baseline split %g %g %g, expected 15e9 15e9 90e9", m.params, m.grads, m.optimizer);
  /* fp32 training: 4-byte params and grads, which are their own master: an 8-byte optimizer. */
  ZT_OK(zeroc_plan_model_states(1000, 3, 4, 4, &m));
  ZT_ASSERT_MSG(m.total == 16.0 * 1000 / 4 && m.optimizer == 8.0 * 1000 / 4,
                "fp32 ZeRO-3 over 4: total %g optimizer %g, expected 4000 and 2000", m.total,
                m.optimizer);
  CU_ASSERT(zeroc_plan_model_states(1, 4, 1, 2, &m) == ZEROC_ERR_INVALID_ARG);
  CU_ASSERT(zeroc_plan_model_states(1, 1, 0, 2, &m) == ZEROC_ERR_INVALID_ARG);
  CU_ASSERT(zeroc_plan_model_states(1, 1, 1, 3, &m) == ZEROC_ERR_INVALID_ARG);
}

/* zeroc_plan_compute gives the same model states for a real GPT (tp = pp = 1:
 * one rank holds every parameter before ZeRO): the paper's with 16-bit
 * gradients (--grad-reduce-dtype bf16), and with the default fp32 reduction
 * 4-byte gradients instead: 18 bytes a parameter in all. */
static void test_compute_uses_zero_formulas(void) {
  const double k16[4][2] = {{16, 0}, {4, 12}, {2, 14}, {0, 16}}; /* a Psi + b Psi / Nd */
  const double k32[4][2] = {{18, 0}, {6, 12}, {2, 16}, {0, 18}};
  for (int i = 0; i < 8; i++) {
    int z = i % 4, gb = i < 4 ? 2 : 4;
    const double *k = gb == 2 ? k16[z] : k32[z];
    zeroc_plan_config_t c = gpt(36, 4096, 32, 51200, 2048, 1);
    zeroc_plan_result_t r;
    c.gpus = 64;
    c.zero = z;
    c.grad_bytes = gb;
    ZT_OK(zeroc_plan_compute(&c, &r));
    double psi = (double)zeroc_gpt_num_params(&c.model), nd = z ? 64 : 1;
    double states = r.device.params + r.device.grads + r.device.optimizer;
    double want = k[0] * psi + k[1] * psi / nd;
    ZT_ASSERT_MSG(r.params_rank == psi, "params_rank %g, model %g", r.params_rank, psi);
    ZT_ASSERT_MSG(fabs(states - want) <= 1e-9 * want,
                  "ZeRO-%d, %d-byte grads: states %.6e, expected %.6e", z, gb, states, want);
  }
}

/* Megatron-LM (Narayanan et al. 2021) Table 1: parameters in billions from
 * (layers, hidden, heads), vocab 51200, seq 2048. */
static void test_megatron_param_counts(void) {
  static const struct {
    double billions;
    int layers, hidden, heads;
  } t[] = {{1.7, 24, 2304, 24},      {3.6, 30, 3072, 32},     {7.5, 36, 4096, 32},
           {18.4, 40, 6144, 48},     {39.1, 48, 8192, 64},    {76.1, 60, 10240, 80},
           {145.6, 80, 12288, 96},   {310.1, 96, 16384, 128}, {529.6, 105, 20480, 128},
           {1008.0, 128, 25600, 160}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    zeroc_plan_config_t c = gpt(t[i].layers, t[i].hidden, t[i].heads, 51200, 2048, 1);
    zeroc_plan_result_t r;
    ZT_OK(zeroc_plan_compute(&c, &r));
    double b = (double)r.params / 1e9;
    ZT_ASSERT_MSG(matches_printed(b, t[i].billions, 0.1), "(%d, %d, %d): %.4fB, paper %.1fB",
                  t[i].layers, t[i].hidden, t[i].heads, b, t[i].billions);
  }
}

/* ---- hand-computed formulas ---------------------------------------------------- */

/* B 2, s 12, l 3, h 8, V 64:
 *   96 B s l h^2 = 96*2*12*3*64 = 442368; x s/(6h) = 1/4 -> 110592;
 *   x V/(16 l h) = 64/384 = 1/6 -> 73728; sum 626688.
 *   72 B s l h^2 = 331776; x 1/4 -> 82944; x V/(12 l h) = 64/288 -> 73728; sum 488448. */
static void test_flops_hand(void) {
  zeroc_gpt_config_t m = {.layers = 3, .hidden = 8, .heads = 2, .vocab = 64, .seq = 12, .batch = 1};
  double full = zeroc_plan_flops_megatron(&m, 2, ZEROC_RECOMPUTE_FULL);
  double none = zeroc_plan_flops_megatron(&m, 2, ZEROC_RECOMPUTE_NONE);
  ZT_ASSERT_MSG(full == 626688.0, "recompute: %.1f, hand 626688", full);
  ZT_ASSERT_MSG(none == 488448.0, "no recompute: %.1f, hand 488448", none);
  /* A paper-sized case against the bracketed form, in long double. */
  zeroc_gpt_config_t g = {
      .layers = 96, .hidden = 12288, .heads = 96, .vocab = 51200, .seq = 2048, .batch = 1};
  long double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  long double ref = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  double got = zeroc_plan_flops_megatron(&g, 1536, ZEROC_RECOMPUTE_FULL);
  ZT_ASSERT_MSG(fabsl(got - ref) / ref < 1e-12, "175B-class: %.6e vs %.6Le", got, ref);
  ref = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  got = zeroc_plan_flops_megatron(&g, 1536, ZEROC_RECOMPUTE_NONE);
  ZT_ASSERT_MSG(fabsl(got - ref) / ref < 1e-12, "no recompute: %.6e vs %.6Le", got, ref);
  CU_ASSERT(strstr(zeroc_plan_flops_formula(ZEROC_RECOMPUTE_FULL), "96") != NULL);
  CU_ASSERT(strstr(zeroc_plan_flops_formula(ZEROC_RECOMPUTE_NONE), "72") != NULL);

  /* compute() uses the global batch: batch 3 x micro-batches 2 x dp 4 = 24. */
  zeroc_plan_config_t c = gpt(3, 8, 2, 64, 12, 3);
  zeroc_plan_result_t r;
  c.gpus = 8;
  c.tp = 2;
  c.microbatches = 2;
  ZT_OK(zeroc_plan_compute(&c, &r));
  CU_ASSERT_EQUAL(r.global_batch, 24);
  CU_ASSERT_EQUAL(r.tokens_per_step, 24 * 12);
  ZT_ASSERT_MSG(r.flops_per_step == 488448.0 * 12, "per step %.1f, expected %.1f", r.flops_per_step,
                488448.0 * 12);
  ZT_ASSERT_MSG(r.flops_per_token == r.flops_per_step / (24 * 12), "per token %g",
                r.flops_per_token);
}

/* Korthikanti et al. with s 4, b 2, h 8, a 2 (s b h = 64, 5 a s / h = 5):
 *   tp 1: 64 (34 + 5) = 2496; tp 2: 64 (10 + 12 + 2.5) = 1568;
 *   tp 2 + sequence parallel: 64 (17 + 2.5) = 1248; full recompute: 2 * 64 = 128,
 *   with sequence parallel over 2: 64. */
static void test_act_megatron_hand(void) {
  struct {
    int t, sp;
    zeroc_recompute_t rc;
    double want;
  } t[] = {{1, 0, ZEROC_RECOMPUTE_NONE, 2496}, {2, 0, ZEROC_RECOMPUTE_NONE, 1568},
           {2, 1, ZEROC_RECOMPUTE_NONE, 1248}, {1, 0, ZEROC_RECOMPUTE_FULL, 128},
           {2, 1, ZEROC_RECOMPUTE_FULL, 64},   {1, 1, ZEROC_RECOMPUTE_NONE, 2496}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    double got = zeroc_plan_act_megatron(4, 2, 8, 2, t[i].t, t[i].sp, t[i].rc);
    ZT_ASSERT_MSG(got == t[i].want, "case %zu (t %d sp %d rc %d): %g, hand %g", i, t[i].t, t[i].sp,
                  (int)t[i].rc, got, t[i].want);
  }
  /* At scale, GPT-3 175B (s 2048, b 1, h 12288, a 96) on tp 8:
   * 5 a s / (h t) = 10 and 24 / t = 3, so s b h (10 + 3 + 10). */
  double sbh = 2048.0 * 12288;
  double got = zeroc_plan_act_megatron(2048, 1, 12288, 96, 8, 0, ZEROC_RECOMPUTE_NONE);
  ZT_ASSERT_MSG(fabs(got - sbh * (10 + 3 + 10)) < 1, "175B tp 8: %g, expected %g", got, sbh * 23);
}

/* zeroc's model, s 4, b 2, h 8, a 2 (N = 8 tokens), e = 2 bytes:
 *   t 1: 4*2*8*8 = 512 (LayerNorm in/out) + 12*2*64 = 1536 (qkv, atty, fch, gelu)
 *        + 16*8 = 128 (mean, rstd) + lse 4*2*2*4 = 64 -> 2240; naive attention
 *        instead of lse: 2*2*2*16 = 128 -> 2304;
 *   t 2: 512 + 768 + 128 + 32 = 1440; with sequence parallel 256 + 768 + 64 + 32 = 1120;
 *   full recompute: 2*8*8 = 128 (equal to Korthikanti's 2 s b h); fp32: 256. */
static void test_act_zeroc_hand(void) {
  struct {
    int t, sp, e, flash;
    zeroc_recompute_t rc;
    double want;
  } t[] = {{1, 0, 2, 1, ZEROC_RECOMPUTE_NONE, 2240}, {1, 0, 2, 0, ZEROC_RECOMPUTE_NONE, 2304},
           {2, 0, 2, 1, ZEROC_RECOMPUTE_NONE, 1440}, {2, 1, 2, 1, ZEROC_RECOMPUTE_NONE, 1120},
           {1, 0, 2, 1, ZEROC_RECOMPUTE_FULL, 128},  {1, 0, 4, 1, ZEROC_RECOMPUTE_FULL, 256}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    double got = zeroc_plan_act_zeroc(4, 2, 8, 2, t[i].t, t[i].sp, t[i].rc, t[i].e, t[i].flash);
    ZT_ASSERT_MSG(got == t[i].want, "case %zu: %g, hand %g", i, got, t[i].want);
  }
  CU_ASSERT(zeroc_plan_act_zeroc(4, 2, 8, 2, 1, 0, ZEROC_RECOMPUTE_FULL, 2, 1) ==
            zeroc_plan_act_megatron(4, 2, 8, 2, 1, 0, ZEROC_RECOMPUTE_FULL));
}

/* The parameters the engine holds: wte has the vocabulary padded to a
 * multiple of 64 (its padding rows are zero). */
static double psi_padded(const zeroc_gpt_config_t *m) {
  double Vp = ceil(m->vocab / 64.0) * 64.0;
  return (double)zeroc_gpt_num_params(m) + (Vp - m->vocab) * m->hidden;
}

/* Parameters per rank with TP and PP, by hand for C 8, T 16, V 50, L 4:
 * block 12*64 + 13*8 = 872; tp 2: (768 + 56)/2 + 48 = 460. The vocabulary is
 * padded to a multiple of 64 x tp, so V 50 gives 64 rows per rank at tp 1 and 2.
 *   tp 1: 64*8 + 16*8 + 4*872 + 16 = 4144 (the unpadded count 4032 + 14*8)
 *   tp 2, pp 1: 64*8 + 16*8 + 4*460 + 16 = 2496
 *   tp 2, pp 2: first 64*8 + 128 + 2*460 = 1560; last 2*460 + 64*8 + 16 = 1448 */
static void test_params_per_rank_hand(void) {
  zeroc_plan_config_t c = gpt(4, 8, 2, 50, 16, 1);
  zeroc_plan_result_t r;
  c.gpus = 4;
  c.tp = 2;
  c.zero = 0;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(r.params_rank == 2496, "tp 2: %g, hand 2496", r.params_rank);
  ZT_ASSERT_MSG(r.device.params == 2496 * 2, "bf16 params bytes %g", r.device.params);
  c.tp = 1;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(r.params_rank == 4144 && psi_padded(&c.model) == 4144, "tp 1: %g, hand 4144",
                r.params_rank);
  c.tp = 2;
  c.pp = 2;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG((r.stage == 0 && r.params_rank == 1560) || (r.stage == 1 && r.params_rank == 1448),
                "tp 2 pp 2: stage %d params %g, hand 1560 (first) or 1448 (last)", r.stage,
                r.params_rank);
}

/* Uneven pipeline stages, as zeroc train runs them: pp 3 over the 6 units of
 * the same shape (embedding 640, four blocks of 872, head 64*8 + 16 = 528 at
 * tp 1) is planned with the runtime's cut (zeroc_pipeline_partition): the
 * stage the plan reports holds exactly its units' parameters, and no stage
 * count beyond the units is accepted. */
static void test_uneven_stages(void) {
  zeroc_plan_config_t c = gpt(4, 8, 2, 50, 16, 1);
  zeroc_plan_result_t r;
  c.gpus = 3;
  c.pp = 3;
  c.zero = 0;
  ZT_OK(zeroc_plan_compute(&c, &r));
  double cost[6], size[6] = {640, 872, 872, 872, 872, 528};
  int bounds[4];
  zeroc_gpt_unit_costs(&c.model, cost);
  ZT_OK(zeroc_pipeline_partition(cost, 6, 3, bounds));
  double held = 0;
  for (int u = bounds[r.stage]; u < bounds[r.stage + 1]; u++) held += size[u];
  ZT_ASSERT_MSG(r.params_rank == held && r.device.total > 0,
                "pp 3: stage %d (units %d..%d) params %g, the runtime's cut holds %g; total %g",
                r.stage, bounds[r.stage], bounds[r.stage + 1] - 1, r.params_rank, held,
                r.device.total);
  c.pp = 7;
  c.gpus = 7;
  CU_ASSERT(zeroc_plan_compute(&c, &r) == ZEROC_ERR_INVALID_ARG);
  c.pp = 3;
  c.gpus = 3;
  c.vpp = 2;
  c.microbatches = 3;
  ZT_OK(zeroc_plan_compute(&c, &r)); /* 6 stages, one unit each */
  c.vpp = 3;
  CU_ASSERT(zeroc_plan_compute(&c, &r) == ZEROC_ERR_INVALID_ARG); /* 9 stages, 6 units */
}

/* Buffers and workspace by hand, same shape, tp 1, 2 GPUs, bf16, following the
 * engine's policy: the embedding (64*8 + 16*8 = 640, tied to the head) is
 * pinned with its own gather and gradient buffers; the pools are sized for the
 * largest other unit, a block of 872, among 6 units.
 *   ZeRO-3 prefetch 2: 3 gather slots + 2 grad slots + pinned gather + grads
 *     = 3*872*2 + 2*872*2 + 640*2 + 640*2 = 11280
 *   ZeRO-3 prefetch 0: 1*872*2 + 2*872*2 + 2*640*2 = 7792
 *   ZeRO-2: 2 grad slots + pinned grads = 2*872*2 + 640*2 = 4768
 *   ZeRO-1: none, the reduce-scatter sums in place into the rank's block of the
 *     full gradients = 0
 * Workspace, micro-batch 3 (N = 48 tokens): the backward scratch 2 * 48 * (4*8 + 8 + 2*8)
 * = 5376 (dfch, dln, the two residual gradients), plus
 * the optimizer step's 32 bytes of device accumulators (4 doubles: the gradient
 * norm's sum of squares, the step's loss, an evaluation's loss, the clipping
 * multiplier a one-rank step decides on the device), plus AdamW's fp32
 * copy of the largest bf16 gradient shard, 4 * 872 / nd (nd = 2; 1 at ZeRO-0),
 * plus the fixed workspace of zeroc's cuda kernels: two kernels objects (the model's
 * and the engine's), each a 32 MiB cuBLASLt workspace, the 64 MiB scratch and
 * 8 x 1024 doubles of sumsq partials. */
#define KERNELS_WS (2 * (32 * 1048576.0 + 64 * 1048576.0 + 8 * 1024 * 8))
static void test_buffers_hand(void) {
  zeroc_plan_config_t c = gpt(4, 8, 2, 50, 16, 3);
  zeroc_plan_result_t r;
  const struct {
    int zero, prefetch;
    double want;
  } t[] = {{3, 2, 11280}, {3, 0, 7792}, {2, 2, 4768}, {1, 2, 0}, {0, 2, 0}};
  c.gpus = 2;
  c.grad_bytes = 2; /* --grad-reduce-dtype bf16: the figures above */
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    c.zero = t[i].zero;
    c.prefetch = t[i].prefetch;
    ZT_OK(zeroc_plan_compute(&c, &r));
    ZT_ASSERT_MSG(r.device.buffers == t[i].want, "ZeRO-%d prefetch %d: buffers %g, hand %g",
                  t[i].zero, t[i].prefetch, r.device.buffers, t[i].want);
    double ws = 5376 + 32 + 4 * 872 / (t[i].zero ? 2 : 1) + KERNELS_WS;
    ZT_ASSERT_MSG(r.device.workspace == ws, "ZeRO-%d: workspace %.0f, hand %.0f", t[i].zero,
                  r.device.workspace, ws);
  }
  /* Kernels computing in fp32 on bf16 parameters (cpu): fp32 activations and
   * scratch (2 * 5376), and fp32 views of the gathered parameters and their
   * gradients, shared by the unpinned units (2 * 4 * 872) and owned by the
   * pinned one (2 * 4 * 640). */
  c.zero = 3;
  c.compute_bytes = 4;
  ZT_OK(zeroc_plan_compute(&c, &r));
  double ws = 2 * 5376 + 32 + 4 * 872 / 2 + 2 * 4 * 872 + 2 * 4 * 640 + KERNELS_WS;
  ZT_ASSERT_MSG(r.device.workspace == ws, "fp32 compute: workspace %.0f, hand %.0f",
                r.device.workspace, ws);
  /* The default fp32 reduction: 4-byte gradient slots (ZeRO-3 prefetch 2:
   * 3*872*2 + 2*872*4 + 640*2 + 640*4 = 16048; ZeRO-2: 2*872*4 + 640*4 = 9536), no
   * fp32 copy of the gradient shard for AdamW; bf16 kernels (cuda) write bf16
   * gradients that are accumulated into the fp32 ones: a bf16 gradient copy
   * (2*872 shared, 2*640 pinned). On the cpu the kernels' fp32 gradients are the
   * reduced ones: only the parameters' fp32 view (4*872 + 4*640). */
  c.grad_bytes = ZEROC_UNSET; /* the default, 4 */
  c.compute_bytes = 0;
  const double fp32_buffers[][2] = {{3, 16048}, {2, 9536}, {1, 0}, {0, 0}};
  for (int i = 0; i < 4; i++) {
    c.zero = (int)fp32_buffers[i][0];
    c.prefetch = 2;
    ZT_OK(zeroc_plan_compute(&c, &r));
    CU_ASSERT_EQUAL(r.cfg.grad_bytes, 4);
    ZT_ASSERT_MSG(r.device.buffers == fp32_buffers[i][1],
                  "fp32 reduction, ZeRO-%d: buffers %g, hand %g", c.zero, r.device.buffers,
                  fp32_buffers[i][1]);
    ws = 5376 + 32 + 2 * 872 + 2 * 640 + KERNELS_WS;
    ZT_ASSERT_MSG(r.device.workspace == ws, "fp32 reduction, ZeRO-%d: workspace %.0f, hand %.0f",
                  c.zero, r.device.workspace, ws);
  }
  c.zero = 3;
  c.compute_bytes = 4;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ws = 2 * 5376 + 32 + 4 * 872 + 4 * 640 + KERNELS_WS;
  ZT_ASSERT_MSG(r.device.workspace == ws, "fp32 reduction, fp32 compute: workspace %.0f, hand %.0f",
                r.device.workspace, ws);
  c.grad_bytes = 3;
  CU_ASSERT_EQUAL(zeroc_plan_compute(&c, &r), ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "grad_bytes 3: accepted 4"), "%s",
                zeroc_last_error(NULL));
}

/* NCCL's buffers, the documented estimate (docs/plan.md, "Fits"): 4 MiB x 16 channels
 * per peer of each communicator a step uses, outside the total and the fit. */
static void test_nccl_estimate(void) {
  zeroc_plan_config_t c = gpt(4, 8, 2, 50, 16, 3);
  zeroc_plan_result_t r;
  const double per_peer = 4.0 * 1024 * 1024 * 16;
  const struct {
    int gpus, tp, pp, zero, peers;
  } t[] = {{1, 1, 1, 3, 0},  /* alone: no communicator */
           {2, 1, 1, 3, 4},  /* the shard group's gather and reduce */
           {2, 1, 1, 0, 2},  /* dp's reduce */
           {4, 2, 1, 3, 6},  /* + tp */
           {4, 1, 2, 1, 8}}; /* ZeRO-1 shards over dp 2, + the pipeline's four streams */
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    c.gpus = t[i].gpus, c.tp = t[i].tp, c.pp = t[i].pp, c.zero = t[i].zero;
    ZT_OK(zeroc_plan_compute(&c, &r));
    ZT_ASSERT_MSG(r.nccl_bytes == per_peer * t[i].peers, "case %zu: nccl %.0f, hand %.0f", i,
                  r.nccl_bytes, per_peer * t[i].peers);
    CU_ASSERT(r.device.total == r.device.params + r.device.grads + r.device.optimizer +
                                    r.device.activations + r.device.buffers + r.device.workspace);
  }
}

/* ---- sanity of the model --------------------------------------------------------- */

/* For random shapes and layouts: model states never grow from ZeRO-0 to 3.
 * Nor does the whole per-rank total when dp >= 8 and no unit (flat
 * parameter) is more than 1/8 of the model; otherwise ZeRO-3's gather buffers,
 * (prefetch + 2) units, can outweigh what sharding saves, which is real. */
static void test_monotone_zero(void) {
  uint64_t st = 12345;
  for (int it = 0; it < 300; it++) {
    int heads = 1 << (zt_rand_u64(&st) % 6);
    int hidden = heads * 64 * (int)(1 + zt_rand_u64(&st) % 8);
    int layers = 1 + (int)(zt_rand_u64(&st) % 64);
    zeroc_plan_config_t c = gpt(layers, hidden, heads, 1000 + (int)(zt_rand_u64(&st) % 60000),
                                128 << (zt_rand_u64(&st) % 5), 1 + (int)(zt_rand_u64(&st) % 8));
    c.gpus = 1 << (zt_rand_u64(&st) % 10);
    c.tp = 1 << (zt_rand_u64(&st) % 4);
    if (c.tp > c.gpus || heads % c.tp) c.tp = 1;
    c.param_bytes = zt_rand_u64(&st) % 2 ? 2 : 4;
    c.recompute = zt_rand_u64(&st) % 2 ? ZEROC_RECOMPUTE_FULL : ZEROC_RECOMPUTE_NONE;
    zeroc_plan_result_t r[4];
    for (int z = 0; z < 4; z++) {
      c.zero = z;
      ZT_OK(zeroc_plan_compute(&c, &r[z]));
    }
    for (int z = 1; z < 4; z++) {
      double a = r[z].device.params + r[z].device.grads + r[z].device.optimizer;
      double b = r[z - 1].device.params + r[z - 1].device.grads + r[z - 1].device.optimizer;
      ZT_ASSERT_MSG(a <= b, "model states ZeRO-%d %g > ZeRO-%d %g (L %d C %d gpus %d tp %d)", z, a,
                    z - 1, b, layers, hidden, c.gpus, c.tp);
      double C = hidden, unit = fmax((c.model.vocab + c.model.seq) * C, 12 * C * C + 13 * C);
      if (r[z].dp >= 8 && 8 * unit <= (double)r[z].params)
        ZT_ASSERT_MSG(r[z].device.total <= r[z - 1].device.total,
                      "total ZeRO-%d %g > ZeRO-%d %g (L %d C %d gpus %d tp %d)", z,
                      r[z].device.total, z - 1, r[z - 1].device.total, layers, hidden, c.gpus,
                      c.tp);
    }
  }
}

/* More TP or PP never increases the parameter memory per rank (Megatron's
 * weak-scaling shapes on 512 GPUs, ZeRO-1). */
static void test_monotone_tp_pp(void) {
  static const int shapes[][3] = {{24, 2304, 24}, {40, 6144, 48}, {48, 8192, 64}, {96, 16384, 128}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    double prev_tp[65] = {0};
    for (int tp = 1; tp <= 8; tp *= 2) {
      double prev_pp = 0;
      for (int pp = 1; pp <= 64; pp++) {
        if (shapes[i][0] % pp || 512 % (tp * pp)) continue;
        zeroc_plan_config_t c = gpt(shapes[i][0], shapes[i][1], shapes[i][2], 51200, 2048, 1);
        zeroc_plan_result_t r;
        c.gpus = 512;
        c.tp = tp;
        c.pp = pp;
        c.zero = 1;
        ZT_OK(zeroc_plan_compute(&c, &r));
        if (prev_pp > 0)
          ZT_ASSERT_MSG(r.device.params <= prev_pp, "L %d: pp %d tp %d params %g > smaller pp %g",
                        shapes[i][0], pp, tp, r.device.params, prev_pp);
        if (prev_tp[pp] > 0)
          ZT_ASSERT_MSG(r.device.params <= prev_tp[pp], "L %d: tp %d pp %d params %g > tp/2 %g",
                        shapes[i][0], tp, pp, r.device.params, prev_tp[pp]);
        prev_pp = r.device.params;
        prev_tp[pp] = r.device.params;
      }
    }
  }
}

/* HSDP shards over dp / R; offload moves the optimizer (and ZeRO-3's
 * parameter shard) off the device into host or NVMe bytes. */
static void test_hsdp_offload(void) {
  zeroc_plan_config_t c = gpt(24, 2048, 16, 50257, 1024, 2);
  zeroc_plan_result_t r, base;
  c.gpus = 32;
  c.zero = 3;
  ZT_OK(zeroc_plan_compute(&c, &base));
  double psi = psi_padded(&c.model);
  ZT_ASSERT_MSG(base.shard == 32 && fabs(base.device.optimizer - 12 * psi / 32) < 1,
                "ZeRO-3 over 32: shard %d optimizer %g", base.shard, base.device.optimizer);
  c.hsdp = 4;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(r.shard == 8 && fabs(r.device.optimizer - 12 * psi / 8) < 1,
                "hsdp 4: shard %d optimizer %g, expected %g", r.shard, r.device.optimizer,
                12 * psi / 8);
  c.hsdp = 1;
  c.offload_optimizer = ZEROC_OFFLOAD_CPU;
  ZT_OK(zeroc_plan_compute(&c, &r));
  CU_ASSERT(r.device.optimizer == 0);
  CU_ASSERT(r.host_bytes == base.device.optimizer && r.nvme_bytes == 0);
  CU_ASSERT(r.time.offload > 0);
  c.offload_optimizer = ZEROC_OFFLOAD_NVME;
  c.offload_params = ZEROC_OFFLOAD_CPU;
  ZT_OK(zeroc_plan_compute(&c, &r));
  CU_ASSERT(r.device.optimizer == 0 && r.device.params == 0);
  CU_ASSERT(r.nvme_bytes == base.device.optimizer && r.host_bytes == base.device.params);
  CU_ASSERT(r.device.total < base.device.total);
  /* fp32 parameters on the device are their own master (8 bytes of optimizer);
   * offloaded, the optimizer keeps its own fp32 master again (12) */
  c.param_bytes = c.act_bytes = 4;
  c.offload_optimizer = c.offload_params = ZEROC_OFFLOAD_NONE;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(fabs(r.device.optimizer - 8 * psi / 32) < 1 && r.host_bytes == 0,
                "fp32 ZeRO-3 over 32: optimizer %g, expected %g", r.device.optimizer, 8 * psi / 32);
  c.offload_optimizer = ZEROC_OFFLOAD_CPU;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(r.device.optimizer == 0 && fabs(r.host_bytes - 12 * psi / 32) < 1,
                "fp32, optimizer offloaded: device %g host %g, expected 0 and %g",
                r.device.optimizer, r.host_bytes, 12 * psi / 32);
  c.param_bytes = c.act_bytes = 2;
  c.offload_params = ZEROC_OFFLOAD_CPU;
  c.zero = 2;
  CU_ASSERT(zeroc_plan_compute(&c, &r) == ZEROC_ERR_INVALID_ARG);
  ZT_ASSERT_MSG(strstr(zeroc_last_error(NULL), "offload_params") != NULL, "message: %s",
                zeroc_last_error(NULL));
}

/* Activations in the plan: pp = 1 holds every layer of one micro-batch plus
 * the output layer; recompute keeps the layer inputs plus one rebuilt layer;
 * the first 1F1B stage holds min(m, p) micro-batches of its layers and output. */
static void test_plan_activations(void) {
  zeroc_plan_config_t c = gpt(8, 256, 4, 1000, 128, 2);
  zeroc_plan_result_t r;
  c.zero = 0;
  ZT_OK(zeroc_plan_compute(&c, &r));
  double n = 128 * 2,
         layer = zeroc_plan_act_zeroc(128, 2, 256, 4, 1, 0, ZEROC_RECOMPUTE_NONE, 2, 1);
  double out = 2.0 * 2 * n * 256 + 8 * n + 2 * n * 1024 + 4 * n; /* logits: V padded to 1024 */
  ZT_ASSERT_MSG(fabs(r.device.activations - (8 * layer + out)) < 1e-6, "pp 1: %g, expected %g",
                r.device.activations, 8 * layer + out);
  c.recompute = ZEROC_RECOMPUTE_FULL;
  ZT_OK(zeroc_plan_compute(&c, &r));
  double in = 2.0 * n * 256;
  /* the rebuilt layer's input is one of the 8 layer inputs */
  ZT_ASSERT_MSG(fabs(r.device.activations - (8 * in + (layer - in) + out)) < 1e-6,
                "recompute: %g, expected %g", r.device.activations, 8 * in + (layer - in) + out);
  c.recompute = ZEROC_RECOMPUTE_NONE;
  c.gpus = 4;
  c.pp = 4;
  c.microbatches = 8;
  ZT_OK(zeroc_plan_compute(&c, &r));
  /* per micro-batch in flight: 2 layers and the stage's output, kept for the send */
  double x = 2.0 * n * 256;
  ZT_ASSERT_MSG(
      r.stage == 0 && fabs(r.device.activations - 4 * (2 * layer + x)) < 1e-6,
      "pp 4, m 8: stage %d activations %g, expected %g (4 in flight x (2 layers + output))",
      r.stage, r.device.activations, 4 * (2 * layer + x));
  c.act_model = ZEROC_ACT_MEGATRON;
  c.pp = 1;
  c.gpus = 1;
  c.microbatches = 1;
  ZT_OK(zeroc_plan_compute(&c, &r));
  double mg = zeroc_plan_act_megatron(128, 2, 256, 4, 1, 0, ZEROC_RECOMPUTE_NONE);
  ZT_ASSERT_MSG(fabs(r.device.activations - (8 * mg + out)) < 1e-6, "megatron: %g, expected %g",
                r.device.activations, 8 * mg + out);
}

/* The step-time model by hand: compute = FLOPs / (N mfu peak); the bubble is
 * (p-1)/m of it; ZeRO-1 over 2 ranks inside a node with no latency, with
 * compute far too fast to hide anything, is a reduce-scatter plus an
 * all-gather: 2 x (1/2) x 2 Psi / bw with bf16 reduction, (1/2) x (4 + 2) Psi / bw
 * with the default fp32 one. */
static void test_step_time_hand(void) {
  zeroc_plan_config_t c = gpt(4, 64, 4, 100, 32, 1);
  zeroc_plan_result_t r;
  c.gpus = 2;
  c.zero = 1;
  c.peak_tflops = 1e6;
  c.lat_intra_us = 0;
  c.bw_intra_gbs = 100;
  ZT_OK(zeroc_plan_compute(&c, &r));
  double psi = psi_padded(&c.model);
  double rs = 0.5 * 4 * psi / 100e9, ag = 0.5 * 2 * psi / 100e9;
  ZT_ASSERT_MSG(fabs(r.time.compute - r.flops_per_step / (2 * 0.5 * 1e18)) < 1e-18, "compute %g",
                r.time.compute);
  double expect_dp = fmax(0, rs - r.time.compute * 2 / 3) + ag;
  ZT_ASSERT_MSG(fabs(r.time.dp - expect_dp) < 1e-15, "dp %g, hand %g", r.time.dp, expect_dp);
  c.grad_bytes = 2;
  ZT_OK(zeroc_plan_compute(&c, &r));
  expect_dp = fmax(0, 0.5 * 2 * psi / 100e9 - r.time.compute * 2 / 3) + 0.5 * 2 * psi / 100e9;
  ZT_ASSERT_MSG(fabs(r.time.dp - expect_dp) < 1e-15, "bf16 reduction: dp %g, hand %g", r.time.dp,
                expect_dp);
  c.grad_bytes = 4;
  CU_ASSERT(r.time.tp == 0 && r.time.pp == 0 && r.time.bubble == 0 && r.time.offload == 0);
  CU_ASSERT(fabs(r.time.total - (r.time.compute + r.time.dp)) < 1e-15);
  c.gpus = 4;
  c.pp = 4;
  c.microbatches = 6;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(fabs(r.time.bubble - r.time.compute * 3 / 6) < 1e-18, "bubble %g compute %g",
                r.time.bubble, r.time.compute);
  CU_ASSERT(r.time.pp > 0 && r.time.dp == 0);
  /* TP 2 on 2 GPUs: per layer and micro-batch 4 all-reduces of one (B,T,C)
   * bf16 activation x = 32*1*64*2 bytes, each 2 x (1/2) x / bw; 6 with recompute. */
  c.pp = 1;
  c.gpus = 2;
  c.tp = 2;
  c.microbatches = 3;
  ZT_OK(zeroc_plan_compute(&c, &r));
  double x = 32.0 * 1 * 64 * 2;
  ZT_ASSERT_MSG(fabs(r.time.tp - 3 * 4 * 4 * x / 100e9) < 1e-18, "tp %g, hand %g", r.time.tp,
                3 * 4 * 4 * x / 100e9);
  c.recompute = ZEROC_RECOMPUTE_FULL;
  ZT_OK(zeroc_plan_compute(&c, &r));
  ZT_ASSERT_MSG(fabs(r.time.tp - 3 * 4 * 6 * x / 100e9) < 1e-18, "tp recompute %g, hand %g",
                r.time.tp, 3 * 4 * 6 * x / 100e9);
}

/* ---- the search ------------------------------------------------------------------ */

static void check_list(const zeroc_plan_config_t *c, int64_t G, const zeroc_plan_result_t *v,
                       size_t n) {
  for (size_t i = 0; i < n; i++) {
    const zeroc_plan_result_t *r = &v[i];
    /* the device size as the library resolved it (the caller's field may be unset) */
    ZT_ASSERT_MSG(r->fits && r->device.total <= r->cfg.gpu_mem_gib * 1073741824.0 &&
                      r->cfg.gpu_mem_gib == 80.0,
                  "#%zu does not fit: %g bytes", i, r->device.total);
    ZT_ASSERT_MSG(i == 0 || v[i - 1].time.total <= r->time.total, "#%zu slower than #%zu", i - 1,
                  i);
    ZT_ASSERT_MSG(r->cfg.tp * r->cfg.pp * r->dp == c->gpus && r->dp % r->cfg.hsdp == 0 &&
                      r->global_batch == G && (r->cfg.pp == 1 || r->cfg.zero <= 1) &&
                      r->cfg.tp <= 8 && c->model.layers % r->cfg.pp == 0,
                  "#%zu: tp %d pp %d dp %d hsdp %d zero %d batch %lld", i, r->cfg.tp, r->cfg.pp,
                  r->dp, r->cfg.hsdp, r->cfg.zero, (long long)r->global_batch);
    /* The search plans exactly as zeroc_plan_compute does. */
    zeroc_plan_result_t again;
    ZT_OK(zeroc_plan_compute(&r->cfg, &again));
    ZT_ASSERT_MSG(again.device.total == r->device.total && again.time.total == r->time.total,
                  "#%zu: compute gives %g B / %g s, search %g B / %g s", i, again.device.total,
                  again.time.total, r->device.total, r->time.total);
  }
}

static void test_search(void) {
  zeroc_plan_config_t c = gpt(32, 4096, 32, 50257, 2048, 4);
  zeroc_plan_result_t *v = NULL;
  size_t n = 0;
  c.gpus = 64;
  c.gpu_mem_gib = 80;
  ZT_OK(zeroc_plan_search(&c, 0, &v, &n));
  ZT_ASSERT_MSG(n >= 10, "7B on 64 x 80 GiB: only %zu layouts fit", n);
  check_list(&c, 4 * 64, v, n);
  int tp8 = 0, pp = 0, z3 = 0, hsdp = 0;
  for (size_t i = 0; i < n; i++) {
    tp8 |= v[i].cfg.tp == 8;
    pp |= v[i].cfg.pp > 1;
    z3 |= v[i].cfg.zero == 3;
    hsdp |= v[i].cfg.hsdp > 1;
  }
  ZT_ASSERT_MSG(tp8 && pp && z3 && hsdp, "the search covers tp 8 %d, pp %d, ZeRO-3 %d, hsdp %d",
                tp8, pp, z3, hsdp);
  zeroc_plan_free(v);

  /* 65B-class on 64 GPUs with 80 GiB, global batch 512. */
  c = gpt(80, 8192, 64, 50257, 2048, 1);
  c.gpus = 64;
  c.gpu_mem_gib = 80;
  c.recompute = ZEROC_RECOMPUTE_FULL;
  ZT_OK(zeroc_plan_search(&c, 512, &v, &n));
  ZT_ASSERT_MSG(n >= 1, "70B-class with recompute on 64 x 80 GiB: nothing fits");
  check_list(&c, 512, v, n);
  zeroc_plan_free(v);

  /* Nothing fits: 65B on 8 GPUs of 16 GiB. */
  c.gpus = 8;
  c.gpu_mem_gib = 16;
  ZT_OK(zeroc_plan_search(&c, 8, &v, &n));
  CU_ASSERT(n == 0 && v == NULL);
  zeroc_plan_free(v);
  /* With offload of the params only ZeRO-3 layouts come back. */
  c = gpt(12, 768, 12, 50257, 1024, 4);
  c.gpus = 8;
  c.offload_params = ZEROC_OFFLOAD_CPU;
  ZT_OK(zeroc_plan_search(&c, 0, &v, &n));
  CU_ASSERT(n > 0);
  for (size_t i = 0; i < n; i++) CU_ASSERT(v[i].cfg.zero == 3 && v[i].cfg.pp == 1);
  check_list(&c, 32, v, n);
  zeroc_plan_free(v);
  CU_ASSERT(zeroc_plan_search(&c, -1, &v, &n) == ZEROC_ERR_INVALID_ARG);
}

/* ---- the config ------------------------------------------------------------------ */

static void expect_invalid(const zeroc_plan_config_t *c, const char *field) {
  zeroc_plan_result_t r;
  zeroc_result_t res = zeroc_plan_compute(c, &r);
  ZT_ASSERT_MSG(res == ZEROC_ERR_INVALID_ARG && strstr(zeroc_last_error(NULL), field),
                "expected INVALID_ARG naming '%s', got %s: %s", field, zeroc_result_name(res),
                zeroc_last_error(NULL));
}

static void test_config_checks(void) {
  zeroc_plan_config_t c;
  memset(&c, 0, sizeof c);
  expect_invalid(&c, "ZEROC_PLAN_CONFIG_INIT");
  /* An older caller's smaller struct: the fields it lacks take the defaults. */
  zeroc_plan_config_t old = ZEROC_PLAN_CONFIG_INIT;
  zeroc_plan_result_t r;
  old.size = offsetof(zeroc_plan_config_t, gpus);
  old.gpus = 999; /* beyond the old size: ignored */
  ZT_OK(zeroc_plan_compute(&old, &r));
  CU_ASSERT(r.cfg.gpus == 1 && r.cfg.size == sizeof(zeroc_plan_config_t));
  /* Unset fields take the library's defaults (plan.h), the same as setting them. */
  zeroc_plan_config_t unset = ZEROC_PLAN_CONFIG_INIT, set = ZEROC_PLAN_CONFIG_INIT;
  zeroc_plan_result_t ru, rs;
  ZT_OK(zeroc_plan_compute(&unset, &ru));
  CU_ASSERT(unset.gpus == ZEROC_UNSET && unset.gpu_mem_gib == (double)ZEROC_UNSET);
  CU_ASSERT(ru.cfg.model.layers == 12 && ru.cfg.model.hidden == 768 &&
            ru.cfg.model.vocab == 50257 && ru.cfg.model.batch == 4 && ru.cfg.gpus == 1 &&
            ru.cfg.zero == 3 && ru.cfg.tp == 1 && ru.cfg.pp == 1 && ru.cfg.hsdp == 1 &&
            ru.cfg.param_bytes == 2 && ru.cfg.act_bytes == 2 && ru.cfg.prefetch == 2 &&
            ru.cfg.flash_attention == ZEROC_ATTENTION_CUDNN && ru.cfg.deterministic == 0 &&
            ru.cfg.gpu_mem_gib == 80.0 && ru.cfg.workspace_mib == KERNELS_WS / 1048576.0 &&
            ru.cfg.gpus_per_node == 8 && ru.cfg.peak_tflops == 989.0 && ru.cfg.mfu == 0.5 &&
            ru.cfg.bw_nvme_gbs == 3.0 && ru.cfg.vpp == 1);
  set.model = (zeroc_gpt_config_t){
      .layers = 12, .hidden = 768, .heads = 12, .vocab = 50257, .seq = 1024, .batch = 4};
  set.gpus = 1, set.zero = 3, set.tp = set.pp = set.hsdp = 1, set.param_bytes = 2;
  set.prefetch = 2, set.flash_attention = ZEROC_ATTENTION_CUDNN, set.deterministic = 0;
  set.gpu_mem_gib = 80, set.workspace_mib = KERNELS_WS / 1048576.0;
  set.gpus_per_node = 8, set.peak_tflops = 989, set.mfu = 0.5, set.vpp = 1;
  ZT_OK(zeroc_plan_compute(&set, &rs));
  CU_ASSERT(ru.device.total == rs.device.total && ru.time.total == rs.time.total);
  c = gpt(12, 768, 12, 50257, 1024, 4);
  c.gpus = 8;
  c.zero = 4;
  expect_invalid(&c, "zero");
  c.zero = 3;
  c.tp = 3;
  expect_invalid(&c, "tp 3");
  c.tp = 1;
  c.pp = 15; /* more stages than the 14 units (embedding, 12 layers, head) */
  c.gpus = 15;
  expect_invalid(&c, "pp 15");
  c.pp = 1;
  c.gpus = 8;
  c.hsdp = 3;
  expect_invalid(&c, "hsdp 3");
  c.hsdp = 2;
  c.zero = 0;
  expect_invalid(&c, "hsdp 2");
  c.hsdp = 1;
  c.zero = 2;
  c.pp = 2;
  expect_invalid(&c, "zero 2");
  c.pp = 1;
  c.model.heads = 7;
  expect_invalid(&c, "heads 7");
  c.model.heads = 12;
  c.tp = 8;
  expect_invalid(&c, "tp 8"); /* 12 heads do not split 8 ways */
  c.tp = 1;
  c.param_bytes = 3;
  expect_invalid(&c, "param_bytes");
  c.param_bytes = 2;
  c.mfu = 1.5;
  expect_invalid(&c, "mfu");
  c.mfu = 0.5;
  c.gpus = 0;
  expect_invalid(&c, "gpus");
}

/* ---- the command (run with --cli PATH) ------------------------------------------- */

static const char *g_zeroc;

/* Runs `zeroc plan args...`; returns the exit status, fills out and err. */
static int run_plan(const char *const *args, char *out, size_t out_n, char *err, size_t err_n) {
  char *dir = zt_tempdir("zeroc_plan");
  char po[512], pe[512];
  snprintf(po, sizeof po, "%s/out", dir);
  snprintf(pe, sizeof pe, "%s/err", dir);
  const char *argv[64] = {g_zeroc, "plan"};
  int n = 2;
  for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid == 0) {
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fo < 0 || fe < 0) _exit(126);
    dup2(fo, 1);
    dup2(fe, 2);
    execv(g_zeroc, (char *const *)argv);
    _exit(127);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  const char *paths[2] = {po, pe};
  char *bufs[2] = {out, err};
  size_t ns[2] = {out_n, err_n};
  for (int k = 0; k < 2; k++) {
    bufs[k][0] = 0;
    FILE *f = fopen(paths[k], "r");
    if (!f) continue;
    size_t got = fread(bufs[k], 1, ns[k] - 1, f);
    bufs[k][got] = 0;
    fclose(f);
  }
  zt_rmtree(dir);
  free(dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char g_out[1 << 20], g_err[1 << 16];

static void test_cli_good(void) {
  const char *a[] = {"--model", "gpt2-124m", "--gpus", "8", "--zero", "3", NULL};
  int rc = run_plan(a, g_out, sizeof g_out, g_err, sizeof g_err);
  ZT_ASSERT_MSG(rc == 0 && !g_err[0], "exit %d, stderr: %s", rc, g_err);
  ZT_ASSERT_MSG(strstr(g_out, "124.4M parameters") && strstr(g_out, "ZeRO-3") &&
                    strstr(g_out, "optimizer") && strstr(g_out, "activations") &&
                    strstr(g_out, ": fits") && strstr(g_out, "per token"),
                "output:\n%s", g_out);
  const char *j[] = {"--model", "gpt2-124m", "--gpus", "8", "--json", NULL};
  rc = run_plan(j, g_out, sizeof g_out, g_err, sizeof g_err);
  size_t len = strlen(g_out);
  ZT_ASSERT_MSG(rc == 0 && len > 2 && g_out[0] == '{' && !strcmp(g_out + len - 2, "}\n"),
                "json exit %d:\n%s", rc, g_out);
  ZT_ASSERT_MSG(strstr(g_out, "\"params\": 124439808") && strstr(g_out, "\"fits\": true"),
                "json:\n%s", g_out);
  const char *all[] = {"--layers",  "32",    "--hidden", "4096",   "--heads", "32",
                       "--vocab",   "50257", "--seq",    "2048",   "--gpus",  "64",
                       "--gpu-mem", "80",    "--all",    "--json", NULL};
  rc = run_plan(all, g_out, sizeof g_out, g_err, sizeof g_err);
  int depth = 0, min_depth = 0, objects = 0;
  for (const char *p = g_out; *p; p++) {
    depth += *p == '{' || *p == '[';
    depth -= *p == '}' || *p == ']';
    objects += *p == '{';
    if (depth < min_depth) min_depth = depth;
  }
  ZT_ASSERT_MSG(rc == 0 && depth == 0 && min_depth == 0 && objects > 10 &&
                    strstr(g_out, "\"layouts\": ["),
                "--all --json exit %d, depth %d, objects %d", rc, depth, objects);
}

static void test_cli_bad_values(void) {
  static const struct {
    const char *args[12];
    const char *flag;
  } t[] = {
      {{"--zero", "4"}, "--zero"},
      {{"--zero", "x"}, "--zero"},
      {{"--gpus", "8", "--tp", "3"}, "--tp"},
      {{"--gpus", "0"}, "--gpus"},
      {{"--pp", "5", "--gpus", "5"}, "--pp"}, /* tiny has 4 units: embedding, 2 layers, head */
      {{"--gpus", "8", "--hsdp", "3"}, "--hsdp"},
      {{"--gpus", "8", "--hsdp", "2", "--zero", "0"}, "--hsdp"},
      {{"--gpus", "4", "--pp", "2", "--zero", "2"}, "--zero"},
      {{"--dtype", "fp16"}, "--dtype"},
      {{"--recompute", "some"}, "--recompute"},
      {{"--offload-optimizer", "disk"}, "--offload-optimizer"},
      {{"--offload-params", "cpu", "--zero", "2"}, "--offload-params"},
      {{"--gpu-mem", "-1"}, "--gpu-mem"},
      {{"--gpu-mem", "lots"}, "--gpu-mem"},
      {{"--model", "gpt5"}, "--model"},
      {{"--heads", "5"}, "--heads"},
      {{"--mfu", "1.5"}, "--mfu"},
      {{"--layers", "0"}, "--layers"},
      {{"--batch"}, "--batch"},
      {{"--all", "--tp", "2"}, "--tp"},
      {{"--global-batch", "64"}, "--global-batch"},
      {{"--frobnicate", "1"}, "--frobnicate"},
      {{"--json=yes"}, "--json"},
      {{"--microbatches", "0"}, "--microbatches"},
      {{"--act-model", "mine"}, "--act-model"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    int rc = run_plan(t[i].args, g_out, sizeof g_out, g_err, sizeof g_err);
    char *nl = strchr(g_err, '\n');
    ZT_ASSERT_MSG(rc == 2 && !g_out[0] && strstr(g_err, t[i].flag) && nl && !nl[1],
                  "case %zu (%s): exit %d, stdout '%s', stderr '%s'", i, t[i].flag, rc, g_out,
                  g_err);
  }
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--cli")) {
    g_zeroc = argv[2];
    if (access(g_zeroc, X_OK)) {
      fprintf(stderr, "test_plan: %s is not an executable\n", g_zeroc);
      return 1;
    }
    static const zt_test_t cli[] = {{"good invocations", test_cli_good},
                                    {"bad values: exit 2, flag named", test_cli_bad_values},
                                    ZT_END};
    return zt_run("zeroc plan command", cli);
  }
  static const zt_test_t tests[] = {
      {"ZeRO paper Table 1 (7.5B, Nd 64)", test_zero_paper_table},
      {"compute uses the ZeRO formulas", test_compute_uses_zero_formulas},
      {"Megatron-LM Table 1 parameter counts", test_megatron_param_counts},
      {"Megatron FLOPs by hand", test_flops_hand},
      {"Korthikanti activations by hand", test_act_megatron_hand},
      {"zeroc activations by hand", test_act_zeroc_hand},
      {"parameters per rank with TP and PP", test_params_per_rank_hand},
      {"uneven pipeline stages, the runtime's cut", test_uneven_stages},
      {"buffers and workspace by hand", test_buffers_hand},
      {"ZeRO stages never grow memory", test_monotone_zero},
      {"more TP or PP never grows params", test_monotone_tp_pp},
      {"HSDP and offload", test_hsdp_offload},
      {"activations in a plan", test_plan_activations},
      {"step time by hand", test_step_time_hand},
      {"--all search", test_search},
      {"config checks", test_config_checks},
      {"NCCL buffers, the estimate", test_nccl_estimate},
      ZT_END};
  return zt_run("plan", tests);
}
