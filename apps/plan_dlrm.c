/*
 * apps/plan_dlrm.c - `zeroc plan --model dlrm|dlrm-tiny|dlrm-mlperf`: per-rank
 * memory by tag of `zeroc train --model dlrm` (zeroc_plan_dlrm: the MLP shards
 * as the planner prices any sharded unit, the tables from the embedding
 * layer's cost model) and the tables' traffic per step, for every
 * --embedding-sharding side by side, or one with --embedding-sharding. No MPI.
 */
#include <stdio.h>
#include <string.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "apps/dlrm_cli.h"
#include "zeroc/zeroc.h"

#define MIB 1048576.0


typedef struct {
  zdlrm_shape_t sh;
  int gpus, zero, hsdp, prefetch, sharding, set_sharding;
  int rank, json;
  int64_t host_tables;
} opts_t;

void zplan_dlrm_usage(void) {
  printf("usage: zeroc plan --model dlrm|dlrm-tiny|dlrm-mlperf [flags]\n"
         "  Per-rank memory by tag of zeroc train --model dlrm (MLP shards, model buffers,\n"
         "  tables by the embedding cost model) and the tables' bytes per step, for each\n"
         "  --embedding-sharding side by side (the rank needing the most device memory).\n"
         "model:  --tables T --rows N|N1,..,NT --dim D --dense F --bottom W,..,D --top W,..,1\n"
         "        --batch B (samples per rank; default the preset's)\n"
         "layout: --gpus N (1) --zero 0|1|2|3 (3) --hsdp R (1) --prefetch K (2)\n"
         "        --embedding-sharding auto|table|column|row|data (default: all of them)\n"
         "        --host-tables BYTES  tables above this per rank in host memory (0: none)\n"
         "        --rank R             report rank R instead of the largest\n"
         "output: --json\n");
}

static int parse(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  o->gpus = 1, o->zero = 3, o->hsdp = 1, o->prefetch = 2, o->rank = -1;
  const zarg_t args[] = {
      ZDLRM_SHAPE_ARGS(&o->sh),
      {"--gpus", ARG_INT, &o->gpus, 1, 65536, 0, NULL, NULL},
      {"--zero", ARG_INT, &o->zero, ZARG_LIM_ZERO, 0, NULL, NULL},
      {"--hsdp", ARG_INT, &o->hsdp, ZARG_LIM_HSDP, 0, NULL, NULL},
      {"--prefetch", ARG_INT, &o->prefetch, ZARG_LIM_PREFETCH, 0, NULL, NULL},
      {"--embedding-sharding", ARG_CHOICE, &o->sharding, 0, 0, 0, zdlrm_shardings, &o->set_sharding},
      {"--host-tables", ARG_I64, &o->host_tables, 0, 1e18, 0, NULL, NULL},
      {"--rank", ARG_INT, &o->rank, 0, 65535, 0, NULL, NULL},
      {"--json", ARG_SWITCH, &o->json, 0, 0, 0, NULL, NULL},
  };
  return zarg_parse("plan", argc, argv, args, (int)(sizeof args / sizeof args[0]));
}

/* How many tables each sharding got: "20 table, 6 column". */
static void choice_text(const zeroc_plan_dlrm_result_t *r, int T, char *buf, size_t n) {
  int count[ZEROC_EMBED_SHARDING_COUNT] = {0};
  for (int t = 0; t < T; t++) count[r->sharding[t]]++;
  buf[0] = 0;
  for (int k = 1; k < ZEROC_EMBED_SHARDING_COUNT; k++)
    if (count[k])
      snprintf(buf + strlen(buf), n - strlen(buf), "%s%d %s", buf[0] ? ", " : "", count[k],
               zdlrm_shardings[k]);
}

static void print_header(const opts_t *o, const zeroc_plan_dlrm_config_t *pc,
                         const zeroc_plan_dlrm_result_t *r) {
  const zeroc_dlrm_config_t *m = &pc->model;
  double tp = (double)r->table_params;
  printf("zeroc plan: %s (%d tables, dim %d, %d dense), %.3gM MLP parameters, %.4g%s table "
         "parameters (%.4g GiB fp32)\n",
         zdlrm_models[o->sh.model], m->tables, m->dim, m->dense, r->mlp_params / 1e6,
         tp >= 1e9 ? tp / 1e9 : tp / 1e6, tp >= 1e9 ? "G" : "M", tp * 4.0 / (MIB * 1024));
  printf("  %d ranks (all data-parallel), ZeRO-%d on the MLPs%s, batch %d per rank; MiB per "
         "rank, bytes per step\n",
         pc->gpus, pc->zero, pc->hsdp > 1 ? " with HSDP" : "", m->batch);
  printf("%-8s %4s %10s %9s %9s %9s %9s %9s %10s %10s %11s %9s %9s %9s  %s\n", "tables", "rank",
         "params", "grads", "optimizer", "activat.", "buffers", "workspace", "total", "host",
         "all-to-all", "red-scat", "all-gath", "all-red", "per table");
}

static void print_row(const char *name, const zeroc_plan_dlrm_result_t *r, int T) {
  const zeroc_plan_memory_t *d = &r->device;
  const zeroc_embed_cost_t *e = &r->embed;
  char tabs[160];
  choice_text(r, T, tabs, sizeof tabs);
  printf("%-8s %4d %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %10.2f %11llu %9llu %9llu %9llu  "
         "%s\n",
         name, r->rank, d->params / MIB, d->grads / MIB, d->optimizer / MIB, d->activations / MIB,
         d->buffers / MIB, d->workspace / MIB, d->total / MIB, r->host_bytes / MIB,
         (unsigned long long)e->alltoall_bytes, (unsigned long long)e->reduce_scatter_bytes,
         (unsigned long long)e->allgather_bytes, (unsigned long long)e->allreduce_bytes, tabs);
}

static void json_row(const char *name, const zeroc_plan_dlrm_result_t *r, int last) {
  const zeroc_plan_memory_t *d = &r->device;
  const zeroc_embed_cost_t *e = &r->embed;
  printf("{\"sharding\": \"%s\", \"rank\": %d, \"device\": {\"params\": %.0f, \"grads\": %.0f, "
         "\"optimizer\": %.0f, \"activations\": %.0f, \"buffers\": %.0f, \"workspace\": %.0f, "
         "\"total\": %.0f}, \"host\": %.0f, \"mlp_device\": %.0f, \"tables_device\": %.0f, "
         "\"alltoall_bytes\": %llu, \"reduce_scatter_bytes\": %llu, \"allgather_bytes\": %llu, "
         "\"allreduce_bytes\": %llu}%s",
         name, r->rank, d->params, d->grads, d->optimizer, d->activations, d->buffers, d->workspace,
         d->total, r->host_bytes, r->mlp_device, r->tables_device,
         (unsigned long long)e->alltoall_bytes, (unsigned long long)e->reduce_scatter_bytes,
         (unsigned long long)e->allgather_bytes, (unsigned long long)e->allreduce_bytes,
         last ? "" : ", ");
}

int zplan_dlrm_run(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      zplan_dlrm_usage();
      return 0;
    }
  opts_t o;
  if (parse(argc, argv, &o)) return 2;
  zeroc_train_config_t tc = ZEROC_TRAIN_CONFIG_INIT;
  zdlrm_shape_apply(&o.sh, &tc);
  zeroc_plan_dlrm_config_t pc = ZEROC_PLAN_DLRM_CONFIG_INIT;
  if (zeroc_train_dlrm_shape(&tc, &pc.model))
    return zarg_fail("plan", "%s", zarg_user_msg(zeroc_last_error(NULL)));
  pc.gpus = o.gpus, pc.zero = o.zero, pc.hsdp = o.hsdp, pc.prefetch = o.prefetch;
  pc.host_threshold = (uint64_t)o.host_tables;
  pc.rank = o.rank;
  int first = o.set_sharding ? o.sharding : 0, last = o.set_sharding ? o.sharding : 4;
  zeroc_plan_dlrm_result_t r[ZEROC_EMBED_SHARDING_COUNT];
  for (int s = first; s <= last; s++) {
    pc.sharding = (zeroc_embed_sharding_t)s;
    if (zeroc_plan_dlrm(&pc, &r[s]))
      return zarg_fail("plan", "%s", zarg_user_msg(zeroc_last_error(NULL)));
  }
  if (o.json) {
    printf("{\"model\": \"%s\", \"tables\": %d, \"dim\": %d, \"batch\": %d, \"gpus\": %d, "
           "\"zero\": %d, \"mlp_params\": %llu, \"table_params\": %llu, \"layouts\": [",
           zdlrm_models[o.sh.model], pc.model.tables, pc.model.dim, pc.model.batch, pc.gpus, pc.zero,
           (unsigned long long)r[first].mlp_params, (unsigned long long)r[first].table_params);
    for (int s = first; s <= last; s++) json_row(zdlrm_shardings[s], &r[s], s == last);
    printf("]}\n");
    return 0;
  }
  print_header(&o, &pc, &r[first]);
  /* the explicit shardings first, auto (the cost model's pick per table) last */
  for (int s = first == 0 && last > 0 ? 1 : first; s <= last; s++)
    print_row(zdlrm_shardings[s], &r[s], pc.model.tables);
  if (first == 0 && last > 0) print_row("auto", &r[0], pc.model.tables);
  return 0;
}
