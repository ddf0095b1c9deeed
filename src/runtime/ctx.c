/*
 * runtime/ctx.c - creating and tearing down a context: MPI (thread level
 * MULTIPLE), the mesh and its groups, hwloc binding and thread counts, the
 * device and its compute stream, the watchdog board and the heartbeat.
 *
 * The context is the composition root: it assembles core, device, comm and
 * offload, and hands each only the handles it needs (ctx->place,
 * ctx->devmem, ctx->comm_env, ctx->pool_env). Its queries and the public
 * functions that unpack it live in runtime/query.c and runtime/device_api.c.
 */
#include <cblas.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/context.h"
#include "runtime/groups.h"

/* Copies a caller's versioned config over the defaults: an older, smaller
 * struct keeps the defaults for the fields it lacks; a struct that was not
 * initialised with ZEROC_CTX_CONFIG_INIT is rejected. */
static zeroc_result_t read_ctx_config(const zeroc_ctx_config_t *in, zeroc_ctx_config_t *out) {
  const zeroc_ctx_config_t dflt = ZEROC_CTX_CONFIG_INIT;
  *out = dflt;
  if (in && (in->magic != ZEROC_CONFIG_MAGIC || in->size < offsetof(zeroc_ctx_config_t, device) ||
             in->size > 65536))
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_ctx_config_t was not initialised with ZEROC_CTX_CONFIG_INIT "
                      "(size %zu, magic 0x%x)",
                      in->size, in->magic);
  /* NULL: every field unset, as ZEROC_CTX_CONFIG_INIT */
  if (in) memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
  out->size = sizeof *out;
  if (out->tp == 0) out->tp = 1;
  if (out->pp == 0) out->pp = 1;
  if (out->hsdp == 0) out->hsdp = 1;
  if (out->cp == 0) out->cp = 1;
  if ((unsigned)out->device > ZEROC_DEVICE_CUDA)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "device %d: accepted auto (0), cpu (1), cuda (2)",
                      (int)out->device);
  if (out->comm_timeout_s < 0)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "comm_timeout_s %g: must be > 0 (0 = default)",
                      out->comm_timeout_s);
  return ZEROC_OK;
}

/* Every rank learns whether any rank failed; the lowest failing rank's message
 * is broadcast so that every rank can print the same cause. Collective over
 * MPI_COMM_WORLD, blocking (used only while groups do not exist yet). */
static zeroc_result_t agree_world(MPI_Comm comm, int rank, zeroc_result_t r) {
  int world;
  MPI_Comm_size(comm, &world);
  int mine = r != ZEROC_OK ? rank : world, first = world;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == world) return ZEROC_OK;
  struct {
    int code;
    char msg[ZEROC_ERRMSG_MAX];
  } m = {(int)r, {0}};
  if (rank == first) snprintf(m.msg, sizeof m.msg, "%s", zeroc__tls_error());
  MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, first, comm);
  if (r != ZEROC_OK) return r;
  return ZEROC_FAIL(ZEROC_ERR_REMOTE, "rank %d failed: %s", first, m.msg);
}

/* ZEROC_FAULT: a set variable that arms nothing, or a spec for a rank the job
 * does not have, is a mistake that would otherwise test nothing, silently. */
static zeroc_result_t fault_setup(zeroc_ctx_t *ctx) {
  const char *spec = zeroc__env_str("ZEROC_FAULT", NULL);
  ZEROC_CHECK(zeroc__fault_parse(spec, &ctx->fault));
  if (spec && !ctx->fault)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "ZEROC_FAULT='%.64s' holds no spec; accepted "
                      "ACTION@POINT[:rank=R][:step=K|K-L][:hit=N] separated by ';'",
                      spec);
  return zeroc__fault_check_ranks(ctx->fault, ctx->mesh.world);
}

/* The device chosen before MPI_Init (zeroc__ctx_select_gpu_before_mpi), for the process:
 * MPI starts once. ordinal -1: none was (cpu, MPI already up, no launcher
 * variable). */
static struct {
  int ordinal, local;
  const char *var;
} pre_mpi = {-1, -1, NULL};

void zeroc__ctx_select_gpu_before_mpi(const zeroc_ctx_config_t *in) {
  int inited = 0;
  MPI_Initialized(&inited);
  zeroc_ctx_config_t c;
  if (inited || pre_mpi.ordinal >= 0 || read_ctx_config(in, &c) != ZEROC_OK ||
      c.device == ZEROC_DEVICE_CPU)
    return;
  const char *var = NULL;
  int local = zeroc__topo_launcher_local_rank(&var);
  if (c.gpu < 0 && local < 0) return; /* chosen after MPI_Init, from MPI's local rank */
  int n = zeroc__cuda_device_count();
  if (n <= 0) return;
  int ord = c.gpu >= 0 ? c.gpu : local % n;
  if (zeroc__cuda_select(ord) == 0) pre_mpi.ordinal = ord, pre_mpi.local = local, pre_mpi.var = var;
}

/* The device kind the context will open (setup_device's rule for auto). */
static zeroc_device_kind_t device_kind(const zeroc_ctx_t *ctx) {
  zeroc_device_kind_t kind = ctx->cfg.device;
  if (kind == ZEROC_DEVICE_AUTO)
    kind = zeroc__cuda_device_count() > 0 ? ZEROC_DEVICE_CUDA : ZEROC_DEVICE_CPU;
  return kind;
}

/* The cuda ordinal of node-local rank q (setup_device's rule). */
static int gpu_of(const zeroc_ctx_t *ctx, int q, int ngpu) {
  if (q == ctx->local_rank && pre_mpi.ordinal >= 0) return pre_mpi.ordinal;
  return ctx->cfg.gpu >= 0 ? ctx->cfg.gpu : q % ngpu;
}

/* Open MPI binds every rank to one core by default when it starts two or fewer
 * (to a package above), without being asked: zeroc's own plan, which gives a
 * rank its share of the node, replaces that. A binding asked for
 * (--bind-to, its MCA parameter) or made by another launcher (srun) stays. */
static int binding_asked_of_launcher(void) {
  if (!getenv("OMPI_COMM_WORLD_SIZE")) return 1;
  const char *p = getenv("OMPI_MCA_hwloc_base_binding_policy");
  return p && *p;
}

/* The node-local ranks bound to the same PUs as this one (>= 1). Collective
 * over the node. */
static int same_binding(zeroc_ctx_t *ctx, hwloc_const_bitmap_t set) {
  char mine[256] = {0};
  hwloc_bitmap_list_snprintf(mine, sizeof mine, set);
  char *all = malloc(sizeof mine * (size_t)ctx->local_size);
  int n = 1;
  if (all && MPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR,
                           ctx->node_comm) == MPI_SUCCESS) {
    n = 0;
    for (int q = 0; q < ctx->local_size; q++) n += !strcmp(all + (size_t)q * sizeof mine, mine);
  }
  free(all);
  return n > 0 ? n : 1;
}

/* zeroc's plan for this rank: its share of the cores near its GPU (their NUMA
 * node, hwloc) on cuda, of the node's cores otherwise. */
static zeroc_result_t plan_binding(zeroc_ctx_t *ctx, hwloc_bitmap_t set) {
  int L = ctx->local_size, ngpu = zeroc__cuda_device_count();
  if (device_kind(ctx) != ZEROC_DEVICE_CUDA || ngpu <= 0)
    return zeroc__topo_plan(ctx->topo, ctx->local_rank, L, &ctx->binding, set);
  hwloc_bitmap_t *sets = calloc((size_t)L, sizeof *sets);
  hwloc_const_bitmap_t *near = calloc((size_t)L, sizeof *near);
  zeroc_result_t r = ZEROC_OK;
  if (!sets || !near) r = ZEROC_FAIL(ZEROC_ERR_NOMEM, "GPU locality table of %d ranks", L);
  for (int q = 0; r == ZEROC_OK && q < L; q++) {
    sets[q] = hwloc_bitmap_alloc();
    if (sets[q] && zeroc__cuda_near_cpuset(ctx->topo, gpu_of(ctx, q, ngpu), sets[q]) == 0)
      near[q] = sets[q];
  }
  if (r == ZEROC_OK)
    r = zeroc__topo_plan_near(ctx->topo, ctx->local_rank, L, near, &ctx->binding, set);
  for (int q = 0; sets && q < L; q++) hwloc_bitmap_free(sets[q]);
  free(sets);
  free((void *)near);
  return r;
}

static zeroc_result_t setup_topology(zeroc_ctx_t *ctx) {
  if (hwloc_topology_init(&ctx->topo) || hwloc_topology_load(ctx->topo)) {
    ctx->topo = NULL;
    return ZEROC_FAIL(ZEROC_ERR_INTERNAL, "hwloc_topology_init/load failed");
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc(), cur = hwloc_bitmap_alloc();
  /* the knobs were range-checked by zeroc__env_check_all in zeroc_ctx_create */
  int64_t bind = ctx->cfg.bind, threads = ctx->cfg.threads;
  if (bind < 0) zeroc__env_i64("ZEROC_BIND", 1, &bind);
  /* a launcher's binding (narrower than what the process may use) is left alone;
   * every rank of the node takes part in counting who shares it */
  int bound = hwloc_get_cpubind(ctx->topo, cur, HWLOC_CPUBIND_PROCESS) == 0 &&
              zeroc__topo_launcher_bound(cur, hwloc_topology_get_allowed_cpuset(ctx->topo));
  int keep = bind && bound && binding_asked_of_launcher();
  int sharers = same_binding(ctx, cur);
  zeroc_result_t r = ZEROC_OK;
  if (keep)
    zeroc__topo_describe(ctx->topo, cur, sharers, &ctx->binding);
  else
    r = plan_binding(ctx, set);
  if (r == ZEROC_OK) {
    if (bind && !keep && hwloc_set_cpubind(ctx->topo, set, HWLOC_CPUBIND_PROCESS) != 0) {
      ZWARN(TOPO, "could not bind to cores %s; running unbound", ctx->binding.cores);
      bind = 0;
    }
    if (!bind) snprintf(ctx->binding.cores, sizeof ctx->binding.cores, "unbound");
    if (threads <= 0) zeroc__env_i64("ZEROC_THREADS", ctx->binding.threads, &threads);
    if (threads < 1) threads = 1;
    ctx->binding.threads = (int)threads;
    omp_set_num_threads((int)threads);
    openblas_set_num_threads((int)threads);
    ZINFO(TOPO, "local rank %d/%d bound to cores %s (NUMA %d) by %s, %d threads%s", ctx->local_rank,
          ctx->local_size, ctx->binding.cores, ctx->binding.numa, keep ? "the launcher" : "zeroc",
          (int)threads, ctx->binding.shared ? ", sharing its core with other ranks" : "");
  }
  hwloc_bitmap_free(cur);
  hwloc_bitmap_free(set);
  return r;
}

#ifdef ZEROC_HAVE_CUDA
int zeroc__nccl_async_error(struct zeroc_group *g, char *why, size_t n);
void zeroc__nccl_abort(struct zeroc_group *g);

static int ctx_comm_health(void *arg, char *why, size_t n) {
  zeroc_ctx_t *ctx = arg;
  for (int k = 0; k < ZEROC_GROUP_COUNT; k++)
    if (ctx->groups[k] && zeroc__nccl_async_error(ctx->groups[k], why, n)) return 1;
  return 0;
}

static void ctx_comm_abort(void *arg) {
  zeroc_ctx_t *ctx = arg;
  for (int k = 0; k < ZEROC_GROUP_COUNT; k++)
    if (ctx->groups[k]) zeroc__nccl_abort(ctx->groups[k]);
}
#endif

/* ZEROC_COMM picks the collectives: auto (nccl on cuda, mpi on cpu), nccl,
 * mpi (on cuda: staged through pinned host memory, as MPI here cannot read
 * device memory) or staged (the staged path on either device, so that CI
 * without a GPU runs it). Staging lets several ranks share one GPU (tests),
 * which NCCL refuses. */
static zeroc_result_t comm_choice(zeroc_device_kind_t kind, const zeroc_comm_ops_t **ops) {
  const char *v = zeroc__env_str("ZEROC_COMM", "auto");
  int cuda = kind == ZEROC_DEVICE_CUDA;
  if (!strcmp(v, "auto") || !strcmp(v, "mpi") || !strcmp(v, "nccl") || !strcmp(v, "staged")) {
    if (!strcmp(v, "nccl") && !cuda)
      return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "ZEROC_COMM=nccl needs the cuda device (this run uses cpu); accepted "
                        "there: auto, mpi, staged");
    *ops = &zeroc__mpi_comm_ops;
    if (!strcmp(v, "staged") || (cuda && !strcmp(v, "mpi"))) *ops = &zeroc__staged_comm_ops;
#ifdef ZEROC_HAVE_CUDA
    if (cuda && (!strcmp(v, "auto") || !strcmp(v, "nccl"))) *ops = &zeroc__nccl_comm_ops;
#endif
    return ZEROC_OK;
  }
  return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                    "ZEROC_COMM='%.64s': accepted auto (nccl on cuda, mpi on cpu), nccl (cuda "
                    "only), mpi (on cuda staged through pinned host memory: several ranks may "
                    "share a GPU) or staged (that staging on either device)",
                    v);
}

static zeroc_result_t setup_device(zeroc_ctx_t *ctx) {
  zeroc_device_kind_t kind = ctx->cfg.device;
  int ngpu = zeroc__cuda_device_count();
  if (kind == ZEROC_DEVICE_AUTO) kind = ngpu > 0 ? ZEROC_DEVICE_CUDA : ZEROC_DEVICE_CPU;
  ZEROC_CHECK(comm_choice(kind, &ctx->comm_ops));
  if (kind == ZEROC_DEVICE_CUDA) {
#ifdef ZEROC_HAVE_CUDA
    if (ngpu <= 0)
      return ZEROC_FAIL(ZEROC_ERR_NODEVICE, "device cuda asked for, but no GPU is visible on %s",
                        ctx->host);
    ctx->dev.ops = &zeroc__cuda_device_ops;
    /* ranks beyond the GPU count share them round robin (all on device 0 with
     * one GPU): only the staged comm allows that, NCCL refuses it. The device
     * chosen before MPI_Init stays (MPI may hold a context on it). */
    int ord = gpu_of(ctx, ctx->local_rank, ngpu);
    if (pre_mpi.ordinal >= 0)
      ZINFO(INIT, "cuda device %d chosen before MPI_Init from %s=%d (MPI's local rank %d)", ord,
            pre_mpi.var ? pre_mpi.var : "the config's gpu", pre_mpi.local, ctx->local_rank);
    else
      ZINFO(INIT,
            "cuda device %d chosen after MPI_Init (MPI was up already, or no launcher's "
            "local rank in the environment): a CUDA-aware MPI may hold a context on "
            "device 0",
            ord);
    ZEROC_CHECK(ctx->dev.ops->open(&ctx->dev, ord));
    ctx->dev.sync_timeout = ctx->comm_timeout;
    ctx->dev.health = ctx_comm_health;
    ctx->dev.abort_comms = ctx_comm_abort;
    ctx->dev.hook_arg = ctx;
#else
    return ZEROC_FAIL(ZEROC_ERR_NODEVICE,
                      "device cuda asked for, but this zeroc was built without CUDA "
                      "(configure with -DZEROC_CUDA=ON where the toolkit is installed)");
#endif
  } else {
    ctx->dev.ops = &zeroc__cpu_device_ops;
    ZEROC_CHECK(ctx->dev.ops->open(&ctx->dev, 0));
  }
  /* The compute stream owns channel 0: inline on cpu, a high-priority stream on cuda. */
  return zeroc__stream_create(&ctx->dev, 1, 1, &ctx->compute);
}

/* NCCL refuses two ranks of a communicator on one GPU with "duplicate GPU"
 * deep inside the first collective; this says so at start-up, with the way
 * out. Collective over the node's ranks (device UUIDs; zero on cpu). */
static zeroc_result_t check_shared_gpu(zeroc_ctx_t *ctx) {
  size_t n = sizeof ctx->dev.uuid;
  unsigned char *all = malloc(n * (size_t)ctx->local_size);
  if (!all) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "device UUID table");
  int e = MPI_Allgather(ctx->dev.uuid, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, ctx->node_comm);
  zeroc_result_t r = ZEROC_OK;
  if (e != MPI_SUCCESS) r = ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Allgather of device UUIDs: error %d", e);
  static const unsigned char zero[16];
  int nccl = strcmp(ctx->comm_ops->name, "nccl") == 0;
  for (int q = 0; r == ZEROC_OK && nccl && q < ctx->local_size; q++)
    if (q != ctx->local_rank && memcmp(all + (size_t)q * n, zero, n) &&
        !memcmp(all + (size_t)q * n, ctx->dev.uuid, n))
      r = ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                     "local ranks %d and %d on %s share cuda device %d (%s): NCCL refuses "
                     "several ranks on one GPU; run at most one rank per GPU, or set "
                     "ZEROC_COMM=mpi to stage collectives through host memory (slow; for tests)",
                     ctx->local_rank < q ? ctx->local_rank : q,
                     ctx->local_rank < q ? q : ctx->local_rank, ctx->host, ctx->dev.ordinal,
                     ctx->dev.name);
  free(all);
  return r;
}

static void ctx_free(zeroc_ctx_t *ctx, int collective);

/* MPI as the contexts use it: `owned` when zeroc initialised it (then the
 * finalize of the last live context finalizes it, as nothing of zeroc uses it
 * after that), `live` the contexts alive. A create that fails leaves MPI up,
 * so that the program may try again: `at_exit` then finalizes it when the
 * program ends without a context (every rank failed that create together).
 * Contexts are created and finalized from one thread. */
static struct { int owned, live, at_exit, registered; } mpi_use;

static void finalize_at_exit(void) {
  int fin = 1;
  MPI_Finalized(&fin);
  if (mpi_use.at_exit && mpi_use.live == 0 && !fin) MPI_Finalize();
}

/* After a failed create: MPI stays up for another attempt. */
static void leave_mpi_up(void) {
  if (!mpi_use.owned || mpi_use.live) return;
  mpi_use.at_exit = 1;
  if (!mpi_use.registered) mpi_use.registered = atexit(finalize_at_exit) == 0;
}

static zeroc_result_t start_mpi(int *provided) {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (fin)
    return ZEROC_FAIL(ZEROC_ERR_MPI,
                      "zeroc_ctx_create: MPI is already finalized (by the program, or by "
                      "zeroc_ctx_finalize of the last context when zeroc had initialised it); "
                      "create every context before finalizing the last one");
  if (inited) {
    MPI_Query_thread(provided);
    return ZEROC_OK;
  }
  int e = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
  if (e != MPI_SUCCESS) return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Init_thread failed with error %d", e);
  mpi_use.owned = 1;
  return ZEROC_OK;
}

zeroc_result_t zeroc_ctx_create(zeroc_ctx_t **out, const zeroc_ctx_config_t *cfg) {
  zeroc_result_t res = ZEROC_OK;
  if (!out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                      "zeroc_ctx_create: the output pointer is NULL (pass the address of a "
                      "zeroc_ctx_t *)");
  *out = NULL;
  zeroc__log_init();
  zeroc__ctx_select_gpu_before_mpi(cfg);
  int provided = 0;
  ZEROC_CHECK(start_mpi(&provided));
  zeroc_ctx_t *ctx = calloc(1, sizeof *ctx);
  if (!ctx) {
    leave_mpi_up();
    return ZEROC_FAIL(ZEROC_ERR_NOMEM, "context struct");
  }
  ctx->node_comm = MPI_COMM_NULL;
  ctx->wcomm = MPI_COMM_NULL;
  int mem_ok = 0;
  /* The caller's communicator is read before the config is validated, so
   * that every rank of it takes part in the agreements below. */
  MPI_Comm base = MPI_COMM_WORLD;
  if (cfg && cfg->magic == ZEROC_CONFIG_MAGIC && cfg->size >= offsetof(zeroc_ctx_config_t, mpi_comm) + sizeof(void *) &&
      cfg->mpi_comm)
    base = *(const MPI_Comm *)cfg->mpi_comm;
  if (MPI_Comm_dup(base, &ctx->wcomm) != MPI_SUCCESS) {
    leave_mpi_up();
    free(ctx);
    return ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Comm_dup of the context's communicator failed");
  }
  MPI_Comm_rank(ctx->wcomm, &ctx->mesh.rank);
  MPI_Comm_size(ctx->wcomm, &ctx->mesh.world);
  zeroc__log_set_rank(ctx->mesh.rank);
  gethostname(ctx->host, sizeof ctx->host - 1);

  /* Steps that can fail on one rank alone end in an agreement, so every rank
   * returns an error together instead of some waiting in the next collective. */
  res = ZEROC_OK;
  if (provided < MPI_THREAD_MULTIPLE)
    res = ZEROC_FAIL(ZEROC_ERR_MPI,
                     "MPI provides thread level %d; zeroc needs MPI_THREAD_MULTIPLE (%d) for its "
                     "communication threads (initialise MPI with MPI_Init_thread)",
                     provided, MPI_THREAD_MULTIPLE);
  if (res == ZEROC_OK) res = read_ctx_config(cfg, &ctx->cfg);
  if (res == ZEROC_OK)
    res = zeroc_mesh_layout_cp(ctx->mesh.world, ctx->cfg.tp, ctx->cfg.cp, ctx->cfg.pp,
                               ctx->cfg.hsdp, ctx->mesh.rank, &ctx->mesh);
  /* every knob judged here, so a bad value fails every rank's create at once
   * rather than one module's first use later */
  if (res == ZEROC_OK) res = zeroc__env_check_all();
  if (res == ZEROC_OK) {
    ctx->comm_timeout = ctx->cfg.comm_timeout_s;
    if (ctx->comm_timeout <= 0) res = zeroc__env_f64("ZEROC_COMM_TIMEOUT", 300.0, &ctx->comm_timeout);
    if (res == ZEROC_OK) res = zeroc__heartbeat_knob(&ctx->hb_timeout);
    if (res == ZEROC_OK) res = zeroc__mem_init(&ctx->mem);
    mem_ok = res == ZEROC_OK;
    /* A cap on device memory, to try what fits on a smaller device (and to
     * measure offload) on the machine at hand. */
    int64_t lim = 0;
    zeroc__env_i64("ZEROC_DEVICE_MEM_LIMIT", 0, &lim);
    ctx->device_limit = lim > 0 ? (uint64_t)lim : 0;
  }
  /* test-only fault injection (core/fault.h): a bad spec fails every rank's create */
  if (res == ZEROC_OK) res = fault_setup(ctx);
  ZEROC_TRY(agree_world(ctx->wcomm, ctx->mesh.rank, res));

  /* Node-local ranks and the world -> local map (for the watchdog). */
  if (MPI_Comm_split_type(ctx->wcomm, MPI_COMM_TYPE_SHARED, ctx->mesh.rank, MPI_INFO_NULL,
                          &ctx->node_comm) != MPI_SUCCESS) {
    res = ZEROC_FAIL(ZEROC_ERR_MPI, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
    goto fail;
  }
  MPI_Comm_rank(ctx->node_comm, &ctx->local_rank);
  MPI_Comm_size(ctx->node_comm, &ctx->local_size);
  ctx->local_of_world = malloc(sizeof(int) * (size_t)ctx->mesh.world);
  int *node_world = malloc(sizeof(int) * (size_t)ctx->local_size);
  if (!ctx->local_of_world || !node_world) {
    free(node_world);
    res = ZEROC_FAIL(ZEROC_ERR_NOMEM, "rank tables");
    goto fail;
  }
  MPI_Allgather(&ctx->mesh.rank, 1, MPI_INT, node_world, 1, MPI_INT, ctx->node_comm);
  for (int i = 0; i < ctx->mesh.world; i++) ctx->local_of_world[i] = -1;
  for (int i = 0; i < ctx->local_size; i++) ctx->local_of_world[node_world[i]] = i;
  free(node_world);
  ctx->place = (zeroc__place_t){.world_comm = ctx->wcomm,
                                .node_comm = ctx->node_comm,
                                .world_rank = ctx->mesh.rank,
                                .world_size = ctx->mesh.world,
                                .local_rank = ctx->local_rank,
                                .local_size = ctx->local_size,
                                .local_of_world = ctx->local_of_world,
                                .host = ctx->host};

  res = setup_topology(ctx);
  if (res == ZEROC_OK) res = setup_device(ctx);
  ZEROC_TRY(agree_world(ctx->wcomm, ctx->mesh.rank, res));
  ZEROC_TRY(agree_world(ctx->wcomm, ctx->mesh.rank, check_shared_gpu(ctx)));
  ctx->devmem = (zeroc__devmem_t){&ctx->dev, &ctx->mem, ctx->device_limit};
  ctx->pool_env = (zeroc__pool_env_t){&ctx->mem, ctx->topo, ctx->binding.numa, ctx->dev.kind};
  /* the board first: every group's collectives report to it */
  ZEROC_TRY(zeroc__watchdog_create(&ctx->place, &ctx->wd));
  ctx->comm_env = (zeroc__comm_env_t){ctx->comm_ops, ctx->mesh.rank, ctx->comm_timeout, ctx->wd,
                                      ctx->dev.huge_pages};
  ZEROC_TRY(zeroc__mesh_create_groups(ctx));
  ZEROC_TRY(zeroc__heartbeat_start(&ctx->place, ctx->hb_timeout, ctx->wd, &ctx->hb));
  ZINFO(INIT, "context ready: %d ranks, device %s (%s), comm %s, timeout %.0f s", ctx->mesh.world,
        ctx->dev.ops->name, ctx->dev.name, ctx->comm_ops->name, ctx->comm_timeout);
  ctx->magic = ZEROC__CTX_MAGIC;
  mpi_use.live++;
  mpi_use.at_exit = 0; /* this context's finalize (or the program) takes MPI down */
  *out = ctx;
  return ZEROC_OK;

fail:
  /* MPI stays up: a second attempt may follow (every rank got here through
   * an agreement, so every rank leaves it up alike). */
  leave_mpi_up();
  if (!mem_ok) { /* nothing but MPI was set up */
    MPI_Comm_free(&ctx->wcomm);
    free(ctx);
    return res;
  }
  {
    char msg[ZEROC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", zeroc__tls_error());
    zeroc__watchdog_fini(ctx->wd, 1, msg);
    ctx_free(ctx, 0);
    zeroc__tls_error_set(msg);
  }
  return res;
}

/* `collective`: every node-local rank is here too (finalize), so the
 * watchdog's shared window can be freed; otherwise MPI_Finalize frees it. */
static void ctx_free(zeroc_ctx_t *ctx, int collective) {
  ctx->magic = 0; /* a later use of the handle is caught while the memory is unchanged */
  zeroc__heartbeat_stop(ctx->hb, collective); /* before the board it posts to goes */
  ctx->hb = NULL;
  zeroc__watchdog_free(ctx->wd, collective);
  ctx->wd = NULL;
  for (int k = 0; k < ZEROC_GROUP_COUNT; k++) zeroc__group_destroy(ctx->groups[k]);
  if (ctx->compute) zeroc_stream_destroy(ctx->compute);
  if (ctx->dev.ops) ctx->dev.ops->close(&ctx->dev);
  if (ctx->node_comm != MPI_COMM_NULL) MPI_Comm_free(&ctx->node_comm);
  if (ctx->wcomm != MPI_COMM_NULL) MPI_Comm_free(&ctx->wcomm);
  if (ctx->topo) hwloc_topology_destroy(ctx->topo);
  free(ctx->local_of_world);
  zeroc__fault_free(ctx->fault);
  if (ctx->mem.tab) {
    if (ctx->mem.st.allocations)
      ZINFO(MEM, "%llu allocations still live at context destruction",
            (unsigned long long)ctx->mem.st.allocations);
    zeroc__mem_fini(&ctx->mem);
  }
  zeroc__handle_retire(ctx); /* its cleared magic catches a later use */
}

void zeroc_ctx_destroy(zeroc_ctx_t *ctx) {
  if (!ctx) return;
  if (zeroc__ctx_check(ctx, "zeroc_ctx_destroy")) return; /* destroyed twice: said, not freed */
  zeroc__watchdog_fini(ctx->wd, 1, zeroc_last_error(ctx));
  mpi_use.live--;
  if (ctx->live_models > 0) {
    /* the models still free their buffers through it: the last one frees it */
    ZWARN(INIT,
          "zeroc_ctx_destroy: %d model(s) built on this context are still alive; the context "
          "is freed when the last of them is destroyed",
          ctx->live_models);
    ctx->doomed = 1;
    return;
  }
  ctx_free(ctx, 0);
}

void zeroc__ctx_models(zeroc_ctx_t *ctx, int delta) {
  if (!ctx) return;
  ctx->live_models += delta;
  if (ctx->doomed && ctx->live_models <= 0) {
    ctx->doomed = 0;
    ctx_free(ctx, 0);
  }
}

zeroc_result_t zeroc_ctx_finalize(zeroc_ctx_t *ctx) {
  if (!ctx) return ZEROC_OK;
  ZEROC_CHECK(zeroc__ctx_check(ctx, "zeroc_ctx_finalize"));
  /* test-only: a rank arriving late (a slow file system closing its files) */
  ZEROC_FAULT_AT(ctx, "finalize", 0, NULL);
  /* Peers that arrive first wait for this one in the final collective; the
   * board says they are finalizing, not finished, so they do not count each
   * other as lost. Finished is set only once that collective completed. */
  zeroc__watchdog_finalizing(ctx->wd);
  /* Wait for every rank, with the timeout, before freeing communicators. The
   * maxima say whether a model is still alive on any rank (and the last rank
   * holding one): then every rank refuses alike and the context stays as it
   * was. */
  int live[2] = {ctx->live_models, ctx->live_models > 0 ? ctx->mesh.rank + 1 : 0};
  zeroc_result_t r =
      zeroc__allreduce_host(ctx->groups[ZEROC_GROUP_WORLD], live, 2, ZEROC_INT32, ZEROC_MAX);
  if (r == ZEROC_OK && live[0] > 0) {
    zeroc__watchdog_running(ctx->wd);
    return zeroc__ctx_ret(
        ctx, ZEROC_FAIL(ZEROC_ERR_INVALID_ARG,
                        "zeroc_ctx_finalize: %d model(s) built on this context are still alive "
                        "on this rank (up to %d on one rank; rank %d holds some): destroy them "
                        "first (zeroc_model_destroy, or the destroy of the GPT, DLRM or pipeline "
                        "holding them); the context is unchanged",
                        ctx->live_models, live[0], live[1] - 1));
  }
  if (r != ZEROC_OK) zeroc__ctx_ret(ctx, r);
  zeroc__watchdog_fini(ctx->wd, r != ZEROC_OK, zeroc_last_error(ctx));
  mpi_use.live--;
  if (r != ZEROC_OK && ctx->live_models > 0) {
    ctx->doomed = 1; /* as zeroc_ctx_destroy: its models still free through it */
    return r;
  }
  ctx_free(ctx, r == ZEROC_OK);
  /* zeroc started MPI and no context is left to use it */
  if (r == ZEROC_OK && mpi_use.owned && mpi_use.live == 0) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
  }
  return r;
}

void zeroc_ctx_abort(zeroc_ctx_t *ctx, int code, const char *why) {
  if (ctx && ctx->magic != ZEROC__CTX_MAGIC) ctx = NULL; /* a dead handle: the world's abort */
  int rank = ctx ? ctx->mesh.rank : -1;
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  fprintf(stderr, "zeroc: rank %d (%s:%d) aborting the job: %s\n", rank, host, (int)getpid(),
          why ? why : "");
  fflush(stderr);
  if (ctx) zeroc__watchdog_fini(ctx->wd, 1, zeroc_last_error(ctx));
  /* MPI_Abort waits on the launcher; on a node cut off from it, it may wait
   * for ever: SIGALRM's default action ends the process then. */
  alarm(5);
  MPI_Abort(ctx ? ctx->wcomm : MPI_COMM_WORLD, code ? code : 1);
  _exit(code ? code : 1);
}
