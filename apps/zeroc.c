/*
 * apps/zeroc.c - the zeroc command: dispatches to train, plan, bench, data, sample and info.
 */
#include <stdio.h>
#include <string.h>

#include "apps/args.h"
#include "apps/cli.h"
#include "apps/dlrm_cli.h"
#include "apps/train_dlrm.h"
#include "zeroc/version.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: zeroc <command> [flags]\n"
          "  train    train the built-in GPT (run under mpirun -np N)\n"
          "  plan     what fits: parameters, FLOPs and per-rank memory per layout\n"
          "  bench    sweep ZeRO stages and PTD layouts, write a table and a plot\n"
          "  data     text files to llm.c token shards (train/val) with a tokenizer\n"
          "  sample   generate text from a trained model (--init FILE or --resume DIR)\n"
          "  info     the build, the mesh, each rank's cores, a bandwidth check\n"
          "  version  print the version\n"
          "zeroc <command> --help shows the command's flags.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
    printf("zeroc %s\n", ZEROC_VERSION_STRING);
    return 0;
  }
  if (!strcmp(argv[1], "info")) return zeroc_cmd_info(argc - 2, argv + 2);
  /* --model: a name of the registry (zeroc/arch.h); dlrm*: the DLRM's own plan
   * and bench (apps/plan_dlrm.c, bench_dlrm.c) */
  int known = !strcmp(argv[1], "train") || !strcmp(argv[1], "plan") || !strcmp(argv[1], "bench");
  if (known && zarg_check_model(argv[1], argc - 2, argv + 2)) return 2;
  int dlrm = ztrain_is_dlrm(argc - 2, argv + 2);
  if (!strcmp(argv[1], "plan"))
    return dlrm ? zplan_dlrm_run(argc - 2, argv + 2) : zeroc_cmd_plan(argc - 2, argv + 2);
  if (!strcmp(argv[1], "train")) return zeroc_cmd_train(argc - 2, argv + 2);
  if (!strcmp(argv[1], "bench"))
    return dlrm ? zbench_dlrm_run(argc - 2, argv + 2) : zeroc_cmd_bench(argc - 2, argv + 2);
  if (!strcmp(argv[1], "sample")) return zeroc_cmd_sample(argc - 2, argv + 2);
  if (!strcmp(argv[1], "data")) return zeroc_cmd_data(argc - 2, argv + 2);
  fprintf(stderr, "zeroc: unknown command '%s'; accepted: train, plan, bench, data, sample, info, version\n",
          argv[1]);
  return 2;
}
