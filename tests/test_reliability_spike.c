/*
 * tests/test_reliability_spike.c - the loss / grad-norm spike detector of
 * the trainer (src/train/spike.c): z-scores against a double-precision reference
 * computed here, warm-up, upward-only flags, the window sliding, non-finite
 * values ignored, and no false alarm on noisy or flat series.
 */
#include <math.h>

#include "train/spike.h"
#include "testutil.h"

/* The reference: z of x against vals[0..n) with the same spread floor. */
static double ref_z(const double *vals, int n, double x) {
  double mean = 0, var = 0;
  for (int i = 0; i < n; i++) mean += vals[i];
  mean /= n;
  for (int i = 0; i < n; i++) var += (vals[i] - mean) * (vals[i] - mean);
  double sd = sqrt(var / (n - 1)), fl = fmax(1e-3 * fabs(mean), 1e-12);
  return (x - mean) / fmax(sd, fl);
}

static void test_matches_reference(void) {
  zeroc__spike_t s;
  zeroc__spike_init(&s, 20, 4.0);
  double hist[400];
  float noise[400];
  zt_fill_normal(noise, 400, 3, 1.0f);
  for (int i = 0; i < 400; i++) {
    double x = 3.0 * exp(-i / 150.0) + 0.05 * noise[i]; /* a falling, noisy loss */
    double z;
    int flag = zeroc__spike_push(&s, x, &z);
    if (i < 8) {
      CU_ASSERT(isnan(z)); /* warm-up: min(window, 8) values first */
      CU_ASSERT_EQUAL(flag, 0);
    } else {
      int n = i < 20 ? i : 20;
      double r = ref_z(hist + i - n, n, x);
      ZT_ASSERT_MSG(fabs(z - r) <= 1e-9 * fmax(1, fabs(r)), "step %d: z %.12g, reference %.12g", i,
                    z, r);
      CU_ASSERT_EQUAL(flag, r > 4.0);
    }
    hist[i] = x;
  }
}

static void test_flags_spikes_upward_only(void) {
  zeroc__spike_t s;
  zeroc__spike_init(&s, 50, 6.0);
  float noise[300];
  zt_fill_normal(noise, 300, 11, 1.0f);
  int flags = 0, flagged_at = -1;
  for (int i = 0; i < 300; i++) {
    double x = 2.0 + 0.02 * noise[i];
    if (i == 200) x = 2.5; /* +25 sigma: a spike */
    if (i == 250) x = 1.5; /* -25 sigma: a drop is not a spike */
    double z;
    if (zeroc__spike_push(&s, x, &z)) flags++, flagged_at = i;
    if (i == 250) CU_ASSERT(z < -6);
  }
  CU_ASSERT_EQUAL(flags, 1);
  CU_ASSERT_EQUAL(flagged_at, 200);
}

static void test_nonfinite_ignored(void) {
  zeroc__spike_t s;
  zeroc__spike_init(&s, 10, 3.0);
  double z;
  for (int i = 0; i < 10; i++) zeroc__spike_push(&s, 1.0 + 0.01 * (i % 3), &z);
  CU_ASSERT_EQUAL(zeroc__spike_push(&s, NAN, &z), 0);
  CU_ASSERT(isnan(z));
  CU_ASSERT_EQUAL(zeroc__spike_push(&s, INFINITY, &z), 0);
  CU_ASSERT_EQUAL(s.n, 10);
  /* the window is as before: the next ordinary value scores normally */
  CU_ASSERT_EQUAL(zeroc__spike_push(&s, 1.01, &z), 0);
  CU_ASSERT(isfinite(z) && fabs(z) < 3);
}

/* A flat series: rounding-sized wiggles are no spike, a real jump is. */
static void test_flat_series(void) {
  zeroc__spike_t s;
  zeroc__spike_init(&s, 16, 6.0);
  double z;
  for (int i = 0; i < 40; i++) CU_ASSERT_EQUAL(zeroc__spike_push(&s, 4.0 + 1e-9 * (i % 2), &z), 0);
  CU_ASSERT_EQUAL(zeroc__spike_push(&s, 4.0 + 1e-6, &z), 0);
  CU_ASSERT_EQUAL(zeroc__spike_push(&s, 4.1, &z), 1); /* 0.1 / (1e-3 x 4) = 25 sigma */
}

/* The window slides: after `window` values at a new level it is the norm. */
static void test_window_slides(void) {
  zeroc__spike_t s;
  zeroc__spike_init(&s, 12, 5.0);
  double z;
  float noise[100];
  zt_fill_normal(noise, 100, 5, 1.0f);
  for (int i = 0; i < 30; i++) zeroc__spike_push(&s, 1.0 + 0.01 * noise[i], &z);
  CU_ASSERT_EQUAL(zeroc__spike_push(&s, 2.0, &z), 1);
  for (int i = 0; i < 12; i++) zeroc__spike_push(&s, 2.0 + 0.01 * noise[30 + i], &z);
  CU_ASSERT_EQUAL(zeroc__spike_push(&s, 2.0 + 0.01 * noise[50], &z), 0);
  CU_ASSERT(fabs(z) < 5);
  zeroc__spike_init(&s, 100000, 5.0);
  CU_ASSERT_EQUAL(s.window, ZEROC_SPIKE_MAX_WINDOW);
  zeroc__spike_init(&s, 0, 5.0);
  CU_ASSERT_EQUAL(s.window, 2);
}

int main(void) {
  static const zt_test_t tests[] = {
      {"z-scores match a double-precision reference", test_matches_reference},
      {"an upward spike is flagged once, a drop never", test_flags_spikes_upward_only},
      {"non-finite values are neither scored nor kept", test_nonfinite_ignored},
      {"flat series: no false alarm from rounding", test_flat_series},
      {"the window slides to a new level", test_window_slides},
      ZT_END,
  };
  return zt_run("reliability_spike", tests);
}
