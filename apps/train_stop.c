/*
 * apps/train_stop.c - `zeroc train` stopped at a step boundary by a signal
 * (what and why: apps/train_stop.h).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/train_stop.h"

static const int SIGS[] = {SIGTERM, SIGINT, SIGUSR1};
#define NSIGS 3

/* the first signal caught; set only by the handler, read at step boundaries */
static volatile sig_atomic_t g_stop;
static struct sigaction g_old[NSIGS];
static int g_armed;

/* Async-signal-safe: sets the flag, or ends the process on a second signal. */
static void on_signal(int sig) {
  if (!g_stop) {
    g_stop = sig;
    return;
  }
  /* a second signal: the user (or the scheduler) will not wait; a save in
   * flight is staged apart and never becomes the latest half-written */
  static const char msg[] = "zeroc train: a second signal: stopping at once; the checkpoint being "
                            "written (if any) is dropped, the previous one stays the latest\n";
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)w;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
  raise(sig);
}

void ztrain_stop_arm(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  /* I/O in flight goes on: the flag is read at the next step boundary */
  sa.sa_flags = SA_RESTART;
  for (int k = 0; k < NSIGS; k++) sigaction(SIGS[k], &sa, &g_old[k]);
  g_stop = 0;
  g_armed = 1;
}

void ztrain_stop_disarm(void) {
  if (!g_armed) return;
  for (int k = 0; k < NSIGS; k++) sigaction(SIGS[k], &g_old[k], NULL);
  g_armed = 0;
}

int ztrain_stop_agree(zeroc_ctx_t *ctx, int *rank, zeroc_result_t *r) {
  /* the signal above the rank: the largest pair names a signal and a rank that got it */
  int sig = g_stop, me = zeroc_ctx_mesh(ctx)->rank;
  int64_t v = sig ? ((int64_t)sig << 32) | me : 0;
  *r = zeroc_ctx_max_i64(ctx, &v);
  if (*r != ZEROC_OK) return 0;
  *rank = (int)(v & 0xffffffff);
  return (int)(v >> 32);
}

static const char *sig_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "?";
}

/* Appends `a` to buf (of n) as one shell word. */
static void append_word(char *buf, size_t n, const char *a) {
  size_t len = strlen(buf);
  int plain = *a != 0;
  for (const char *p = a; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%", *p))
      plain = 0;
  if (plain) {
    snprintf(buf + len, n - len, " %s", a);
    return;
  }
  snprintf(buf + len, n - len, " '");
  for (const char *p = a; *p; p++) {
    len = strlen(buf);
    if (*p == '\'')
      snprintf(buf + len, n - len, "'\\''");
    else
      snprintf(buf + len, n - len, "%c", *p);
  }
  len = strlen(buf);
  snprintf(buf + len, n - len, "'");
}

/* The command that goes on: train's flags, --resume DIR instead of any given. */
static void resume_command(char *buf, size_t n, const char *dir, int argc, char **argv, int world) {
  buf[0] = 0;
  if (world > 1)
    snprintf(buf, n, "%s %d zeroc train",
             getenv("SLURM_JOB_ID") && !getenv("OMPI_COMM_WORLD_SIZE") ? "srun -n" : "mpirun -np",
             world);
  else
    snprintf(buf, n, "zeroc train");
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--resume")) {
      i++;
      continue;
    }
    if (!strncmp(argv[i], "--resume=", 9)) continue;
    append_word(buf, n, argv[i]);
  }
  append_word(buf, n, "--resume");
  append_word(buf, n, dir);
}

void ztrain_stop_report(int sig, int rank, int step, int steps, const char *save, int saved,
                        const char *resume, int argc, char **argv, int world) {
  char cmd[8192];
  if (saved) {
    resume_command(cmd, sizeof cmd, save, argc, argv, world);
    fprintf(stderr,
            "zeroc train: stopped by %s (rank %d) after step %d of %d: checkpoint '%s/step_%08d' "
            "saved; resume with: %s\n",
            sig_name(sig), rank, step, steps, save, step, cmd);
  } else if (resume) {
    /* no step since the start: the checkpoint resumed from is still where to go on */
    resume_command(cmd, sizeof cmd, resume, argc, argv, world);
    fprintf(stderr,
            "zeroc train: stopped by %s (rank %d) after step %d of %d: no step trained since "
            "the start, nothing was saved; resume with: %s\n",
            sig_name(sig), rank, step, steps, cmd);
  } else {
    fprintf(stderr,
            "zeroc train: stopped by %s (rank %d) after step %d of %d: nothing was saved (%s); "
            "the run starts over with the same command\n",
            sig_name(sig), rank, step, steps,
            save ? "no step trained since the start" : "no --save");
  }
  fflush(stderr);
}
