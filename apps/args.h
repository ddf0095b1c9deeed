/*
 * apps/args.h - table-driven command-line flags: every bad value gets one line
 * naming the flag and what is accepted (printed once per job, by the launch's
 * rank 0), and the caller exits with status 2 having written nothing.
 */
#ifndef ZEROC_APPS_ARGS_H
#define ZEROC_APPS_ARGS_H

#include <stdint.h>

typedef enum { ARG_INT, ARG_I64, ARG_DOUBLE, ARG_CHOICE, ARG_STRING, ARG_SWITCH } zarg_kind_t;

typedef struct zarg {
  const char *name;             /* "--steps" */
  zarg_kind_t kind;
  void *dst;                    /* int*, int64_t*, double*, int* (choice index), const char**, int* */
  double lo, hi;                /* numeric range; lo excluded when lo_open */
  int lo_open;
  const char *const *choices;   /* ARG_CHOICE: NULL-terminated names, index stored in *dst */
  int *set;                     /* optional: set to 1 when the flag is given */
} zarg_t;

/* The flags zeroc train, plan and bench share take the same values: one table
 * of limits (lo, hi for a zarg_t or plan's number table) and of names, so a
 * value one command accepts is never refused by another. */
#define ZARG_LIM_LAYERS       1, 10000
#define ZARG_LIM_HIDDEN       1, 1 << 16
#define ZARG_LIM_HEADS        1, 1 << 12
#define ZARG_LIM_VOCAB        2, ZEROC_GPT_VOCAB_MAX /* above 65536 shards store uint32 */
#define ZARG_LIM_SEQ          1, 1 << 20
#define ZARG_LIM_BATCH        1, 1 << 16
#define ZARG_LIM_ZERO         0, 3
#define ZARG_LIM_TP           1, 1 << 12
#define ZARG_LIM_PP           1, 1 << 12
#define ZARG_LIM_HSDP         1, 1 << 20
#define ZARG_LIM_MICROBATCHES 1, 1 << 16
#define ZARG_LIM_VPP          1, 64
#define ZARG_LIM_PREFETCH     0, 64
/* NULL-terminated; the index is what the commands store. */
extern const char *const zarg_devices[];    /* auto, cpu, cuda */
/* --model's names for the architecture `arch` (zeroc/arch.h's registry: "gpt2"'s
 * presets, then custom), NULL-terminated; NULL for an architecture not built in. */
const char *const *zarg_arch_models(const char *arch);
/* The decoders' names (GPT-2's presets and custom, then the Llama family's presets):
 * train, plan, bench, sample. */
const char *const *zarg_lm_models(void);
#define zarg_models       zarg_lm_models()
#define ZARG_LIM_KV_HEADS 1, 1 << 12
#define ZARG_LIM_FFN      1, 1 << 20
/* 1 when zarg_models' index `model` is "custom" (every size given by flag). */
int zarg_model_is_custom(int model);
/* The architecture --model names in argv ("gpt2" without --model, or when the
 * name is not registered: the GPT's flags then refuse it with their list). */
const char *zarg_model_arch(int argc, char **argv);
/* Refuses (the one-line error, returns 2) a --model in argv that no registered
 * architecture answers to, listing every registered name; 0 otherwise. */
int zarg_check_model(const char *cmd, int argc, char **argv);
extern const char *const zarg_dtypes[];     /* auto, fp32, bf16 */
extern const char *const zarg_grad_reduce_dtypes[]; /* fp32, bf16 (--grad-reduce-dtype) */
extern const char *const zarg_recomputes[]; /* none, full */
extern const char *const zarg_offloads[];   /* none, cpu, nvme */

/* Parses argv against the table. Returns 0, or 2 after printing the error.
 * Accepts "--flag value" and "--flag=value". */
int zarg_parse(const char *cmd, int argc, char **argv, const zarg_t *args, int nargs);

/* Prints "zeroc <cmd>: <message>" once per job (launch rank 0, or a plain
 * process) and returns 2. */
int zarg_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What a path that is not a directory is, for messages: "file", "fifo", ... (st_mode). */
const char *zarg_file_kind(unsigned mode);

/* A library error message (zeroc_last_error) for a user. The library's
 * messages name no source file (its TRACE log does); this still drops any
 * "file.c:LINE: " origin a message would hold, which would name our sources,
 * not the user's input. Returns a static buffer (one thread). */
const char *zarg_user_msg(const char *e);

/* --model (an index into zarg_models) and the size overrides --layers
 * --hidden --heads --vocab --seq (size[], and set[] whether each was given):
 * the preset, or with custom every size, then the overrides. Returns 0, or 2
 * after the one-line error. */
struct zeroc_gpt_config;
int zarg_model_shape(const char *cmd, int model, const int size[5], const int set[5],
                     struct zeroc_gpt_config *gc);

/* 1 when this process is rank 0 of its launch (from OMPI/PMI/Slurm variables),
 * or not launched by MPI at all. Usable before MPI is initialised. */
int zarg_launch_rank0(void);

#endif
