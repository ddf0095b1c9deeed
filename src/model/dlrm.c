/*
 * model/dlrm.c - the DLRM's dense half as zeroc layers (zeroc/dlrm.h): one
 * unit per MLP layer, so each is gathered, reduce-scattered and stepped by the
 * shard engine like any GPT unit. The first top unit also runs the pairwise
 * interaction with the pooled embeddings the batch carries (and writes their
 * gradient back into it); the last top unit computes the binary cross-entropy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/dlrm_kernels.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "zeroc/device.h"
#include "zeroc/dlrm.h"

#define MAXU (2 * ZEROC_DLRM_MAX_LAYERS)

/* one unit: Linear (OC, C) [+ ReLU], maybe the interaction before, maybe the loss after */
typedef struct unit {
  int C, OC, relu, interact, loss;
  zeroc_param_desc_t p[2];
  float *out;            /* (B, OC) activations: after the ReLU where there is one */
  float *din;            /* (B, C) gradient of the input, handed down */
  float *inter, *dinter; /* first top unit: (B, D + P) interaction and its gradient */
} unit_t;

struct zeroc_dlrm {
  zeroc_ctx_t *ctx;
  zeroc_kernels_t *k;
  zeroc_dlrm_config_t c;
  int Bmax, nu;
  unit_t u[MAXU];
  zeroc_layer_t layers[MAXU];
  float *dpre;             /* (B, max OC) scratch: gradient before the ReLU */
  float *losses, *dlogits; /* (B) */
  float *losses_host;      /* (B) host */
  void *allocs[4 * MAXU + 8];
  int nallocs;
};

static zeroc_result_t dalloc(zeroc_dlrm_t *d, zeroc_memtag_t tag, size_t n, float **p) {
  CHK(zeroc_mem_alloc(d->ctx, ZEROC_MEM_DEVICE, tag, n * sizeof(float), (void **)p));
  d->allocs[d->nallocs++] = *p;
  return ZEROC_OK;
}

static const zeroc_dlrm_batch_t *batch_of(const zeroc_layer_io_t *io, const zeroc_dlrm_t *d) {
  const zeroc_dlrm_batch_t *b = io->batch;
  return b && b->B >= 1 && b->B <= d->Bmax ? b : NULL;
}

#define BATCH(b, io, d)                                                                            \
  const zeroc_dlrm_batch_t *b = batch_of(io, d);                                                   \
  if (!b) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "dlrm: no batch, or B outside 1..%d", d->Bmax)

/* ---- the units' callbacks ------------------------------------------------------------------ */

// in (B,C) [or interaction of in (B,D) and pooled (B,T,D)] -> out (B,OC) [-> loss]
static zeroc_result_t unit_forward(zeroc_layer_io_t *io) {
  zeroc_dlrm_t *d = io->user;
  unit_t *u = &d->u[io->unit];
  zeroc_stream_t *s = io->stream;
  BATCH(b, io, d);
  int B = b->B, D = d->c.dim, T = d->c.tables;
  const float *in = io->unit == 0 ? b->dense : io->in;
  if (u->interact) {
    CHK(zeroc_k_interact_forward(d->k, s, u->inter, in, b->pooled, B, T, D));
    in = u->inter;
  }
  CHK(zeroc_k_matmul_forward(d->k, s, u->out, in, io->params[0], io->params[1], B, u->C, u->OC));
  if (u->relu) CHK(zeroc_k_relu_forward(d->k, s, u->out, u->out, (size_t)B * u->OC));
  io->out = u->out;
  if (!u->loss) return ZEROC_OK;
  io->out = NULL;
  *io->loss = 0;
  if (!b->labels) return ZEROC_OK; /* logits only */
  /* the mean over the B samples: each logit's gradient is grad_scale / B */
  float *dl = io->eval ? NULL : d->dlogits;
  CHK(zeroc_k_bce_forward_backward(d->k, s, d->losses, dl, u->out, b->labels, B,
                                   io->grad_scale / (float)B));
  /* on the device when the engine offers an accumulator: no host wait per micro-step */
  if (io->loss_acc) return zeroc_k_mean_add(d->k, s, io->loss_acc, d->losses, (size_t)B, (double)B);
  CHK(zeroc__memcpy_sync(s, d->losses_host, d->losses, sizeof(float) * (size_t)B));
  double sum = 0;
  for (int i = 0; i < B; i++) sum += d->losses_host[i];
  *io->loss = (float)(sum / B);
  return ZEROC_OK;
}

static zeroc_result_t unit_backward(zeroc_layer_io_t *io) {
  zeroc_dlrm_t *d = io->user;
  unit_t *u = &d->u[io->unit];
  zeroc_stream_t *s = io->stream;
  BATCH(b, io, d);
  int B = b->B, D = d->c.dim, T = d->c.tables;
  const float *dout = u->loss ? d->dlogits : io->dout;
  if (!dout || !b->labels) return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "dlrm backward: no gradient");
  const float *g = dout;
  if (u->relu) {
    CHK(zeroc_memset_async(s, d->dpre, 0, sizeof(float) * (size_t)B * u->OC));
    CHK(zeroc_k_relu_backward(d->k, s, d->dpre, u->out, dout, (size_t)B * u->OC));
    g = d->dpre;
  }
  const float *in = io->unit == 0 ? b->dense : u->interact ? u->inter : io->in;
  float *din = io->unit == 0 ? NULL : u->interact ? u->dinter : u->din;
  if (din) CHK(zeroc_memset_async(s, din, 0, sizeof(float) * (size_t)B * u->C));
  CHK(zeroc_k_matmul_backward(d->k, s, din, io->grads[0], io->grads[1], g, in, io->params[0], B,
                              u->C, u->OC));
  io->din = din;
  if (u->interact) {
    /* the bottom output's gradient goes down; the tables' goes to the batch */
    CHK(zeroc_memset_async(s, u->din, 0, sizeof(float) * (size_t)B * D));
    CHK(zeroc_memset_async(s, b->dpooled, 0, sizeof(float) * (size_t)B * T * D));
    CHK(zeroc_k_interact_backward(d->k, s, u->din, b->dpooled, u->dinter, io->in, b->pooled, B, T,
                                  D));
    /* the tables take the gradient of this rank's own mean loss (zeroc/dlrm.h), not of
     * its 1 / (micro-steps x dp) share in the global mean */
    CHK(zeroc_k_scale(d->k, s, b->dpooled, (size_t)B * T * D, 1.0f / io->grad_scale));
    io->din = u->din;
  }
  return ZEROC_OK;
}

/* ---- building ------------------------------------------------------------------------------ */

static void linear_params(unit_t *u, int index) {
  /* N(0, 2 / (fan_in + fan_out)) weights as the DLRM reference, zero biases; the
   * streams name the layer, so every layout draws the same values */
  zeroc_param_desc_t w = {0}, bias = {0};
  w.name = "weight";
  w.ndim = 2;
  w.shape[0] = u->OC, w.shape[1] = u->C;
  w.init = ZEROC_INIT_NORMAL;
  w.init_scale = sqrtf(2.0f / (float)(u->C + u->OC));
  w.init_stream = 1000 + 2 * (uint64_t)index;
  bias.name = "bias";
  bias.ndim = 1;
  bias.shape[0] = u->OC;
  bias.init = ZEROC_INIT_ZEROS;
  bias.flags = ZEROC_PARAM_NO_DECAY;
  bias.init_stream = 1001 + 2 * (uint64_t)index;
  u->p[0] = w, u->p[1] = bias;
}

static const char *const UNIT_NAMES[MAXU] = {
    "bottom.0", "bottom.1", "bottom.2", "bottom.3", "bottom.4", "bottom.5", "bottom.6", "bottom.7",
    "top.0",    "top.1",    "top.2",    "top.3",    "top.4",    "top.5",    "top.6",    "top.7"};

static zeroc_result_t wire(zeroc_dlrm_t *d) {
  const zeroc_dlrm_config_t *c = &d->c;
  int B = d->Bmax, maxoc = 1, in = c->dense;
  d->nu = c->nbottom + c->ntop;
  for (int i = 0; i < d->nu; i++) {
    unit_t *u = &d->u[i];
    int top = i >= c->nbottom, j = top ? i - c->nbottom : i;
    u->interact = top && j == 0;
    u->loss = i == d->nu - 1;
    u->relu = !u->loss;
    u->C = u->interact ? zeroc_dlrm_interaction_width(c) : in;
    u->OC = top ? c->top[j] : c->bottom[j];
    in = u->OC;
    if (u->OC > maxoc) maxoc = u->OC;
    linear_params(u, i);
    CHK(dalloc(d, ZEROC_TAG_ACTIVATIONS, (size_t)B * u->OC, &u->out));
    if (i > 0)
      CHK(dalloc(d, ZEROC_TAG_WORKSPACE, (size_t)B * (u->interact ? c->dim : u->C), &u->din));
    if (u->interact) {
      CHK(dalloc(d, ZEROC_TAG_ACTIVATIONS, (size_t)B * u->C, &u->inter));
      CHK(dalloc(d, ZEROC_TAG_WORKSPACE, (size_t)B * u->C, &u->dinter));
    }
    d->layers[i] = (zeroc_layer_t){.name = UNIT_NAMES[top ? 8 + j : j],
                                   .nparams = 2,
                                   .params = u->p,
                                   .shares = -1,
                                   .forward = unit_forward,
                                   .backward = unit_backward,
                                   .user = d,
                                   .callbacks = ZEROC_CALLBACKS_DEVICE};
  }
  CHK(dalloc(d, ZEROC_TAG_WORKSPACE, (size_t)B * maxoc, &d->dpre));
  CHK(dalloc(d, ZEROC_TAG_ACTIVATIONS, (size_t)B, &d->losses));
  CHK(dalloc(d, ZEROC_TAG_WORKSPACE, (size_t)B, &d->dlogits));
  d->losses_host = malloc(sizeof(float) * (size_t)B);
  if (!d->losses_host) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "dlrm losses (%d floats)", B);
  return ZEROC_OK;
}

zeroc_result_t zeroc_dlrm_create(zeroc_ctx_t *ctx, const zeroc_dlrm_config_t *c, int batch,
                                 zeroc_dlrm_t **out) {
  if (!ctx || !c || !out)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "zeroc_dlrm_create: NULL argument");
  *out = NULL;
  CHK(zeroc_dlrm_config_check(c));
  if (batch < 1)
    return ZEROC_FAIL(ZEROC_ERR_INVALID_ARG, "dlrm micro-batch %d: must be >= 1", batch);
  zeroc_dlrm_t *d = calloc(1, sizeof *d);
  if (!d) return ZEROC_FAIL(ZEROC_ERR_NOMEM, "dlrm struct");
  d->ctx = ctx;
  d->c = *c;
  d->Bmax = batch;
  zeroc_result_t r = zeroc_kernels_create(zeroc__ctx_devmem(ctx), zeroc_ctx_compute_stream(ctx),
                                          ZEROC_FP32, &d->k);
  if (!r) r = wire(d);
  if (r) {
    zeroc_dlrm_destroy(d);
    return r;
  }
  *out = d;
  return ZEROC_OK;
}

void zeroc_dlrm_destroy(zeroc_dlrm_t *d) {
  if (!d) return;
  for (int i = 0; i < d->nallocs; i++) zeroc_mem_free(d->ctx, d->allocs[i]);
  free(d->losses_host);
  zeroc_kernels_destroy(d->k);
  free(d);
}

const zeroc_layer_t *zeroc_dlrm_layers(const zeroc_dlrm_t *d, int *n) {
  *n = d->nu;
  return d->layers;
}

const float *zeroc_dlrm_logits(const zeroc_dlrm_t *d) { return d->u[d->nu - 1].out; }
