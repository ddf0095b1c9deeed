/*
 * tests/test_reliability_fault.c - the test-only fault injector (ZEROC_FAULT):
 * its grammar and its one-line errors, the rank / step / hit filters, value
 * faults, and the process actions carried out in real forked children (killed
 * by SIGKILL, exited with status 3, stopped and continued, hung until killed).
 * Also: error messages that quote untrusted text stay one printable line.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/fault.h"
#include "testutil.h"

static void test_parse_valid(void) {
  zeroc__fault_t *f = (zeroc__fault_t *)1;
  ZT_OK(zeroc__fault_parse(NULL, &f));
  CU_ASSERT_PTR_NULL(f);
  ZT_OK(zeroc__fault_parse("", &f));
  CU_ASSERT_PTR_NULL(f);
  ZT_OK(zeroc__fault_parse(";;", &f));
  CU_ASSERT_PTR_NULL(f);
  ZT_OK(zeroc__fault_parse("kill@ckpt.shard:rank=2:step=8;nan@grad:rank=1:step=3-5:hit=2;"
                           "sleep=0.5@forward;set=-1e30@grad;inf@grad:hit=1;stop@step:rank=0;"
                           "hang@backward:step=1;exit@ckpt.latest",
                           &f));
  CU_ASSERT_EQUAL(zeroc__fault_count(f), 8);
  zeroc__fault_free(f);
}

static void expect_error(const char *spec, const char *words) {
  zeroc__fault_t *f = NULL;
  zeroc_result_t r = zeroc__fault_parse(spec, &f);
  ZT_ASSERT_MSG(r == ZEROC_ERR_INVALID_ARG && f == NULL, "'%s' was accepted", spec);
  const char *msg = zeroc__tls_error();
  ZT_ASSERT_MSG(strstr(msg, words) && !strchr(msg, '\n'), "'%s': message '%s' lacks '%s'", spec,
                msg, words);
  zeroc__fault_free(f);
}

static void test_parse_errors(void) {
  expect_error("kill", "expected ACTION@POINT");
  expect_error("boom@forward", "action 'boom'; accepted kill, stop, hang, exit, sleep=SECONDS");
  expect_error("kill@sideways", "point 'sideways'; accepted forward, backward, step, grad");
  expect_error("nan@forward", "nan, inf and set= act only at the point grad");
  expect_error("kill@forward:rank=x", "filter 'rank=x'");
  expect_error("kill@forward:rank=", "filter 'rank='");
  expect_error("kill@forward:step=5-3",
               "filter 'step=5-3'; accepted rank=R, step=K or step=K-L (K <= L)");
  expect_error("kill@forward:hit=0", "filter 'hit=0'");
  expect_error("kill@forward:when=now", "filter 'when=now'");
  expect_error("sleep=-1@forward", "action 'sleep=-1'");
  expect_error("set=abc@grad", "action 'set=abc'");
  expect_error("kill@forward;kill@nowhere", "point 'nowhere'");
  char many[2048] = "";
  for (int i = 0; i < 17; i++) strcat(many, "kill@forward;");
  expect_error(many, "more than 16 specs");
}

static void test_filters_and_values(void) {
  zeroc__fault_t *f = NULL;
  ZT_OK(zeroc__fault_parse("nan@grad:rank=1:step=3-4:hit=2;set=2.5@grad:rank=0", &f));
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  double v = 0;
  /* rank 1: calls at steps 3-4 count; only the second such call fires */
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 1, "grad", 2, &v), 0);
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 1, "grad", 3, &v), 0);    /* first matching call */
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 1, "forward", 3, &v), 0); /* another point */
  v = 0;
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 1, "grad", 4, &v), 1); /* the second */
  CU_ASSERT(isnan(v));
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 1, "grad", 4, &v), 0); /* the third */
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 2, "grad", 3, &v), 0); /* another rank */
  /* rank 0: every call at any step */
  for (int s = 1; s < 5; s++) {
    v = 0;
    CU_ASSERT_EQUAL(zeroc__fault_hit(f, 0, "grad", (uint64_t)s, &v), 1);
    CU_ASSERT_EQUAL(v, 2.5);
  }
  /* no value pointer: the spec cannot deliver and is ignored */
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 0, "grad", 1, NULL), 0);
  CU_ASSERT_EQUAL(zeroc__fault_hit(NULL, 0, "grad", 1, &v), 0);
  zeroc__fault_free(f);
}

static void test_sleep(void) {
  zeroc__fault_t *f = NULL;
  ZT_OK(zeroc__fault_parse("sleep=0.2@step:step=2", &f));
  double t0 = zeroc__now_s();
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 0, "step", 1, NULL), 0);
  double t1 = zeroc__now_s();
  CU_ASSERT_EQUAL(zeroc__fault_hit(f, 0, "step", 2, NULL), 0);
  double t2 = zeroc__now_s();
  ZT_ASSERT_MSG(t1 - t0 < 0.1 && t2 - t1 >= 0.2 && t2 - t1 < 5, "slept %.3f s and %.3f s", t1 - t0,
                t2 - t1);
  zeroc__fault_free(f);
}

/* Runs the spec in a child that reaches `point` at step 1, then exits 0. */
static pid_t child(const char *spec, const char *point) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    zeroc__fault_t *f = NULL;
    if (zeroc__fault_parse(spec, &f) != ZEROC_OK) _exit(10);
    zeroc__fault_hit(f, 0, point, 1, NULL);
    _exit(0);
  }
  return pid;
}

static int wait_for(pid_t pid, int options, double limit) {
  int st = 0;
  double t0 = zeroc__now_s();
  while (zeroc__now_s() - t0 < limit) {
    pid_t w = waitpid(pid, &st, WNOHANG | options);
    if (w == pid) return st;
    usleep(10000);
  }
  return -1;
}

static void test_process_actions(void) {
  pid_t p = child("kill@ckpt.shard", "ckpt.shard");
  int st = wait_for(p, 0, 30);
  ZT_ASSERT_MSG(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "kill: status 0x%x", st);

  p = child("exit@forward", "forward");
  st = wait_for(p, 0, 30);
  ZT_ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 3, "exit: status 0x%x", st);

  p = child("kill@forward:rank=3", "forward"); /* another rank's fault: nothing happens */
  st = wait_for(p, 0, 30);
  ZT_ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "other rank: status 0x%x", st);

  p = child("stop@backward", "backward");
  st = wait_for(p, WUNTRACED, 30);
  ZT_ASSERT_MSG(st != -1 && WIFSTOPPED(st), "stop: status 0x%x", st);
  kill(p, SIGCONT);
  st = wait_for(p, 0, 30);
  ZT_ASSERT_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "continued: status 0x%x", st);

  p = child("hang@step", "step");
  st = wait_for(p, 0, 0.5);
  ZT_ASSERT_MSG(st == -1, "hang: the child ended (status 0x%x)", st);
  kill(p, SIGKILL);
  st = wait_for(p, 0, 30);
  CU_ASSERT(st != -1 && WIFSIGNALED(st));
}

/* A message quoting file contents (a tensor name, a JSON key) with control
 * characters is escaped; the previous message may be an argument. */
static void test_messages_printable(void) {
  zeroc_result_t r = ZEROC_FAIL(ZEROC_ERR_CORRUPT, "tensor '%s' is odd", "a\nb\x1b[2Jc\t\x7f");
  CU_ASSERT_EQUAL(r, ZEROC_ERR_CORRUPT);
  const char *m = zeroc__tls_error();
  ZT_ASSERT_MSG(strstr(m, "tensor 'a\\nb\\x1b[2Jc\\t\\x7f' is odd") && !strchr(m, '\n'),
                "message: %s", m);
  ZEROC_FAIL(ZEROC_ERR_IO, "outer: %s", zeroc__tls_error());
  m = zeroc__tls_error();
  ZT_ASSERT_MSG(strstr(m, "outer: ") && strstr(m, "tensor 'a\\nb"), "message: %s", m);
  char longs[4000];
  memset(longs, '\n', sizeof longs - 1);
  longs[sizeof longs - 1] = 0;
  ZEROC_FAIL(ZEROC_ERR_IO, "%s", longs); /* escapes past the buffer are cut, not overrun */
  CU_ASSERT(strlen(zeroc__tls_error()) < ZEROC_ERRMSG_MAX);
}

int main(void) {
  static const zt_test_t tests[] = {
      {"valid specs", test_parse_valid},
      {"malformed specs: one line naming what is accepted", test_parse_errors},
      {"rank, step and hit filters; value faults", test_filters_and_values},
      {"sleep delays the point", test_sleep},
      {"kill, exit, stop and hang in real child processes", test_process_actions},
      {"error messages quoting input stay one printable line", test_messages_printable},
      ZT_END,
  };
  return zt_run("reliability_fault", tests);
}
