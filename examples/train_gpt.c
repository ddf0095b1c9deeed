/*
 * examples/train_gpt.c - the built-in GPT trained through zeroc/train.h: a
 * context, a trainer from a config, one call per optimizer step (with a
 * held-out evaluation every 10 steps), a checkpoint.
 *   mpirun -np 2 ./train_gpt [CHECKPOINT_DIR]   (exits 1 if the loss did not fall)
 */
#include <stdio.h>
#include <zeroc/zeroc.h>

int main(int argc, char **argv) {
  zeroc_ctx_config_t cc = ZEROC_CTX_CONFIG_INIT;
  cc.device = ZEROC_DEVICE_CPU; /* the mesh: every rank data-parallel, ZeRO-3 */
  zeroc_ctx_t *ctx;
  if (zeroc_ctx_create(&ctx, &cc)) {
    fprintf(stderr, "%s\n", zeroc_last_error(NULL));
    return 1;
  }
  int rank = zeroc_ctx_mesh(ctx)->rank;

  zeroc_train_config_t cfg = ZEROC_TRAIN_CONFIG_INIT; /* unset fields: the library's defaults */
  cfg.model = "tiny"; /* the synthetic Markov corpus is the default data */
  cfg.steps = 30;
  cfg.lr = 3e-3;
  cfg.warmup = 3;
  cfg.save = argc > 1 ? argv[1] : NULL;
  cfg.val_data = "synthetic"; /* held-out sequences, evaluated every 10 steps */
  cfg.val_every = 10;
  cfg.val_tokens = 4096;
  zeroc_trainer_t *tr;
  if (zeroc_trainer_create(ctx, &cfg, &tr)) { /* agreed on by every rank */
    if (rank == 0)
      fprintf(stderr, "setup (%s): %s\n", zeroc_trainer_create_phase(), zeroc_last_error(ctx));
    zeroc_ctx_finalize(ctx);
    return 1;
  }
  zeroc_train_info_t info;
  zeroc_trainer_info(tr, &info);
  if (rank == 0)
    printf("%.2fM parameters, %d sequences per step, loss floor %.3f\n", info.params / 1e6,
           info.global_batch, info.data.loss_floor);

  zeroc_train_metrics_t m;
  double first = 0, last = 0;
  do {
    if (zeroc_trainer_step(tr, &m)) { /* maybe this rank's failure alone: stop the job */
      fprintf(stderr, "rank %d: %s\n", rank, zeroc_last_error(ctx));
      zeroc_ctx_abort(ctx, 1, "training failed");
    }
    if (m.step == 1) first = m.loss;
    last = m.loss;
    if (rank == 0 && (m.step % 5 == 0 || m.spike))
      printf("step %2d  loss %.4f  grad norm %.3f  lr %.2e  %.0f tok/s%s\n", m.step, m.loss,
             m.grad_norm, m.lr, m.tokens_per_s, m.spike ? "  (spike)" : "");
    if (rank == 0 && m.evaluated) printf("step %2d  val loss %.4f\n", m.step, m.val_loss);
  } while (!m.done);

  if (cfg.save && zeroc_trainer_save(tr, cfg.save)) {
    fprintf(stderr, "rank %d: %s\n", rank, zeroc_last_error(ctx));
    zeroc_ctx_abort(ctx, 1, "checkpoint failed");
  }
  if (rank == 0) printf("loss %.4f -> %.4f\n", first, last);
  zeroc_trainer_destroy(tr);
  zeroc_ctx_finalize(ctx);
  return last < first - 0.5 ? 0 : 1;
}
