/*
 * apps/bench_dlrm.c - `zeroc bench --model dlrm|dlrm-tiny|dlrm-mlperf`: the
 * same DLRM, data and global batch trained under each table sharding (table-,
 * column-, row-wise, data-parallel, auto) with the tables in device memory, and
 * the model-parallel ones again with every table in host memory (fetched and
 * written back per batch), a few steps each in this process; one table with
 * samples/s (median step after warm-up), the bytes the tables send by
 * all-to-all per step (the cost model's, which test_embed holds the counters
 * to), every collective byte this rank sent per step (measured), the peak and
 * the last loss (the same math in every row).
 *   mpirun -np N zeroc bench --model dlrm [--steps 20] [--out DIR]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "apps/dlrm_cli.h"
#include "zeroc/zeroc.h"

static const char *const NAMES[] = {"auto", "table", "column", "row", "data"};

typedef struct {
  zdlrm_shape_t sh;
  int steps, warmup, zero, device, no_host;
  double lr;
  const char *out;
} opts_t;

typedef struct {
  int sharding, host;
  double ms, samples_s, comm_mb, a2a_mb, other_mb, peak_mib, loss;
  int status; /* 0 ok, else the trainer's error */
} row_t;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int parse(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  o->steps = 20, o->warmup = 3, o->zero = 3, o->lr = 0.01, o->device = 1; /* cpu */
  const zarg_t args[] = {
      ZDLRM_SHAPE_ARGS(&o->sh),
      {"--steps", ARG_INT, &o->steps, 2, 4096, 0, NULL, NULL},
      {"--warmup-steps", ARG_INT, &o->warmup, 0, 4000, 0, NULL, NULL},
      {"--zero", ARG_INT, &o->zero, ZARG_LIM_ZERO, 0, NULL, NULL},
      {"--lr", ARG_DOUBLE, &o->lr, 0, 10, 0, NULL, NULL},
      {"--device", ARG_CHOICE, &o->device, 0, 0, 0, zarg_devices, NULL},
      {"--no-host", ARG_SWITCH, &o->no_host, 0, 0, 0, NULL, NULL},
      {"--out", ARG_STRING, &o->out, 0, 0, 0, NULL, NULL},
  };
  if (zarg_parse("bench", argc, argv, args, (int)(sizeof args / sizeof args[0]))) return 2;
  if (o->warmup >= o->steps)
    return zarg_fail("bench", "--warmup-steps %d: accepted fewer than --steps %d", o->warmup,
                     o->steps);
  return 0;
}

/* One layout: train o->steps steps, the figures of those after warm-up. */
static void run_row(zeroc_ctx_t *ctx, const opts_t *o, row_t *r) {
  zeroc_train_config_t c = ZEROC_TRAIN_CONFIG_INIT;
  zdlrm_shape_apply(&o->sh, &c);
  c.steps = o->steps, c.lr = o->lr, c.zero = o->zero, c.seed = 1;
  c.embedding_sharding = r->sharding;
  c.val_tokens = 1, c.val_every = 0;
  /* every table in host memory: any table is above one byte on a rank */
  setenv("ZEROC_DLRM_HOST_TABLES", r->host ? "1" : "0", 1);
  zeroc_trainer_t *tr = NULL;
  r->status = zeroc_trainer_create(ctx, &c, &tr);
  if (r->status) return;
  zeroc_train_info_t in;
  zeroc_trainer_info(tr, &in);
  double ms[4096], cb[4096];
  int n = 0;
  zeroc_train_metrics_t m;
  do {
    r->status = zeroc_trainer_step(tr, &m);
    if (r->status) break;
    if (m.step > o->warmup && n < 4096) ms[n] = m.step_ms, cb[n] = (double)m.comm_bytes, n++;
    r->loss = m.loss;
    if ((double)m.peak_device_max / 1048576.0 > r->peak_mib)
      r->peak_mib = (double)m.peak_device_max / 1048576.0;
  } while (!m.done);
  r->ms = median(ms, n);
  r->samples_s = in.global_batch * 1000.0 / r->ms;
  r->comm_mb = median(cb, n) / 1048576.0;
  /* the cost model's all-to-all payload of this rank (rank 0) */
  zeroc_plan_dlrm_config_t pc = ZEROC_PLAN_DLRM_CONFIG_INIT;
  zeroc_plan_dlrm_result_t pr;
  pc.model = in.dlrm_model, pc.model.batch = in.config.batch;
  pc.gpus = zeroc_ctx_mesh(ctx)->dp, pc.zero = o->zero, pc.rank = 0;
  pc.sharding = (zeroc_embed_sharding_t)r->sharding, pc.host_threshold = r->host;
  int bad = zeroc_plan_dlrm(&pc, &pr) != ZEROC_OK;
  const zeroc_embed_cost_t *e = &pr.embed;
  r->a2a_mb = bad ? NAN : e->alltoall_bytes / 1048576.0;
  r->other_mb =
      bad ? NAN : (e->reduce_scatter_bytes + e->allgather_bytes + e->allreduce_bytes) / 1048576.0;
  zeroc_trainer_destroy(tr);
}

static void print_rows(FILE *f, const row_t *rows, int n, int md) {
  /* tables' bytes: the cost model's payload per step (rank 0; test_embed holds the comm
   * counters to it); MLP bytes: measured, the shard engine's collectives */
  const char *h = md ? "| tables | memory | samples/s | step ms | tables all-to-all MB | tables "
                       "rs+ag+ar MB | MLP comm MB | peak MiB | last loss |\n"
                       "|---|---|---|---|---|---|---|---|---|\n"
                     : "tables   memory   samples/s    step ms  tables a2a MB  tables rs+ag+ar MB "
                       " MLP comm MB  peak MiB  last loss\n";
  fputs(h, f);
  for (int i = 0; i < n; i++) {
    const row_t *r = &rows[i];
    const char *mem = r->host ? "host" : "device";
    if (r->status) {
      fprintf(f, md ? "| %s | %s | failed (%d) ||||||\n" : "%-8s %-8s failed (%d)\n",
              NAMES[r->sharding], mem, r->status);
      continue;
    }
    fprintf(f,
            md ? "| %s | %s | %.0f | %.2f | %.4f | %.4f | %.4f | %.2f | %.6f |\n"
               : "%-8s %-8s %9.0f %10.2f %14.4f %18.4f %12.4f %9.2f %10.6f\n",
            NAMES[r->sharding], mem, r->samples_s, r->ms, r->a2a_mb, r->other_mb, r->comm_mb,
            r->peak_mib, r->loss);
  }
}

static void usage(void) {
  printf("usage: mpirun -np N zeroc bench --model dlrm|dlrm-tiny|dlrm-mlperf [flags]\n"
         "  Trains the same DLRM under table-, column-, row-wise, data-parallel and auto\n"
         "  tables in device memory, then the model-parallel ones with the tables in host\n"
         "  memory; prints samples/s, all-to-all and collective bytes per step, peak, loss.\n"
         "model:  --tables --rows --dim --dense --bottom --top --batch (as zeroc train)\n"
         "run:    --steps N (20) --warmup-steps W (3) --zero 0..3 (3) --lr --device cpu|cuda\n"
         "        --no-host (device tables only)\n"
         "output: --out DIR (writes DIR/bench_dlrm.md)\n");
}

int zbench_dlrm_run(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage();
      return 0;
    }
  opts_t o;
  if (parse(argc, argv, &o)) return 2;
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = (zeroc_device_kind_t)o.device;
  zeroc_ctx_t *ctx = NULL;
  if (zeroc_ctx_create(&ctx, &cc))
    return zarg_fail("bench", "%s", zarg_user_msg(zeroc_last_error(NULL)));
  int root = zeroc_ctx_mesh(ctx)->rank == 0, n = 0, rc = 0;
  row_t rows[16];
  /* device tables: the four schemes and the cost model's pick; then host tables */
  const int order[] = {1, 2, 3, 4, 0};
  for (int k = 0; k < 5; k++) rows[n++] = (row_t){order[k], 0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int k = 0; k < 5 && !o.no_host; k++)
    if (order[k] != 4) rows[n++] = (row_t){order[k], 1, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; i++) {
    run_row(ctx, &o, &rows[i]);
    if (rows[i].status && root)
      fprintf(stderr, "zeroc bench: %s tables in %s memory: %s\n", NAMES[rows[i].sharding],
              rows[i].host ? "host" : "device", zarg_user_msg(zeroc_last_error(ctx)));
    rc |= rows[i].status != 0;
  }
  unsetenv("ZEROC_DLRM_HOST_TABLES");
  if (root) {
    const zeroc_mesh_info_t *mesh = zeroc_ctx_mesh(ctx);
    printf("zeroc bench: %s on %d ranks (%s), ZeRO-%d on the MLPs, %d steps (median after %d)\n",
           zdlrm_models[o.sh.model], mesh->world, zarg_devices[o.device], o.zero, o.steps, o.warmup);
    print_rows(stdout, rows, n, 0);
    FILE *f = NULL;
    if (o.out) {
      char path[4096];
      snprintf(path, sizeof path, "%s/bench_dlrm.md", o.out);
      f = fopen(path, "w");
      if (!f) fprintf(stderr, "zeroc bench: --out '%s': cannot write %s\n", o.out, path), rc = 1;
    }
    if (f) {
      fprintf(f, "%s on %d ranks (%s), ZeRO-%d, %d steps, median after %d\n\n",
              zdlrm_models[o.sh.model], mesh->world, zarg_devices[o.device], o.zero, o.steps,
              o.warmup);
      print_rows(f, rows, n, 1);
      fclose(f);
    }
  }
  zeroc_ctx_finalize(ctx);
  return rc;
}
