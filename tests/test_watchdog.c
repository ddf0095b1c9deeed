/*
 * tests/test_watchdog.c - a collective never hangs: a peer that does not join
 * makes the others fail with ZEROC_ERR_TIMEOUT after the configured bound,
 * naming the peer and what it is doing; a stopped peer is detected within
 * about a second (ZEROC_ERR_REMOTE) without waiting for the timeout.
 */
#include <mpi.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/clock.h"
#include "runtime/runtime.h"
#include "testutil.h"

static zeroc_ctx_t *ctx_with_timeout(double t) {
  zeroc_ctx_config_t cfg = ZEROC_CTX_CONFIG_INIT;
  cfg.device = ZEROC_DEVICE_CPU;
  cfg.comm_timeout_s = t;
  cfg.threads = 1;
  zeroc_ctx_t *c = NULL;
  ZT_OK(zeroc_ctx_create(&c, &cfg));
  return c;
}

static void test_timeout_names_the_late_rank(void) {
  const double T = 2.0;
  zeroc_ctx_t *c = ctx_with_timeout(T);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  zeroc_stream_t *s;
  ZT_OK(zeroc_stream_create(c, 0, &s));
  zeroc_group_t *g = zeroc__ctx_group(c, ZEROC_GROUP_WORLD);
  float x[16] = {1};
  if (zt_rank() == 1) {
    zeroc__watchdog_phase(c, "sleeping on purpose");
    sleep((unsigned)(T + 3));
    ZT_OK(zeroc__allreduce(g, s, x, x, 16, ZEROC_FP32, ZEROC_SUM));
    ZT_OK(zeroc_stream_sync(s)); /* completes: the others' requests are still live */
  } else {
    double t0 = zeroc__now_s();
    ZT_OK(zeroc__allreduce(g, s, x, x, 16, ZEROC_FP32, ZEROC_SUM));
    zeroc_result_t r = zeroc_stream_sync(s);
    double dt = zeroc__now_s() - t0;
    CU_ASSERT_EQUAL(r, ZEROC_ERR_TIMEOUT);
    const char *msg = zeroc_last_error(NULL);
    ZT_ASSERT_MSG(strstr(msg, "allreduce") && strstr(msg, "group world") &&
                      strstr(msg, "rank 1 is not in a collective on world ('sleeping on purpose'"),
                  "message: %s", msg);
    ZT_ASSERT_MSG(dt >= T && dt < T + 30, "failed after %.1f s with a %.0f s bound", dt, T);
  }
  MPI_Barrier(MPI_COMM_WORLD); /* progresses the late collective everywhere */
  zeroc_stream_destroy(s);
  zeroc_ctx_destroy(c);
}

static void test_stopped_peer_detected(void) {
  zeroc_ctx_t *c = ctx_with_timeout(120);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  zeroc_stream_t *s;
  ZT_OK(zeroc_stream_create(c, 0, &s));
  zeroc_group_t *g = zeroc__ctx_group(c, ZEROC_GROUP_WORLD);
  int pid = getpid(), pid1 = 0;
  if (zt_rank() == 1) pid1 = pid;
  MPI_Allreduce(MPI_IN_PLACE, &pid1, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  float x[16] = {1};
  if (zt_rank() == 1) {
    zeroc__watchdog_phase(c, "about to stop");
    raise(SIGSTOP); /* rank 0 continues us once it has noticed */
    ZT_OK(zeroc__allreduce(g, s, x, x, 16, ZEROC_FP32, ZEROC_SUM));
    ZT_OK(zeroc_stream_sync(s));
  } else {
    double t0 = zeroc__now_s();
    ZT_OK(zeroc__allreduce(g, s, x, x, 16, ZEROC_FP32, ZEROC_SUM));
    zeroc_result_t r = zeroc_stream_sync(s);
    double dt = zeroc__now_s() - t0;
    const char *msg = zeroc_last_error(NULL);
    if (zt_rank() == 0) {
      CU_ASSERT_EQUAL(r, ZEROC_ERR_REMOTE);
      ZT_ASSERT_MSG(strstr(msg, "rank 1") && strstr(msg, "is stopped"), "message: %s", msg);
      ZT_ASSERT_MSG(dt < 60, "stopped peer noticed after %.1f s", dt);
      kill(pid1, SIGCONT);
    } else {
      /* ranks 2, 3 may notice, or see the collective finish after rank 0 woke rank 1 */
      ZT_ASSERT_MSG(r == ZEROC_OK || r == ZEROC_ERR_REMOTE, "%s: %s", zeroc_result_name(r), msg);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  zeroc_stream_destroy(s);
  zeroc_ctx_destroy(c);
}

int main(int argc, char **argv) {
  static const zt_test_t tests[] = {
      {"a late rank: timeout names it", test_timeout_names_the_late_rank},
      {"a stopped rank is detected before the timeout", test_stopped_peer_detected},
      ZT_END,
  };
  return zt_run_mpi(argc, argv, "watchdog", tests, 2, 0);
}
