/* timeout.c - the progress timeout every transport's waits share (process-wide, as MPI is), and the
 * sticky failure that a wait which ran out of time (or saw a peer die) leaves behind: from then on
 * every wait of every transport fails at once with the same message instead of blocking on a peer
 * that will never answer, and the world skips the collective teardown (MPI_Finalize) that would. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <sched.h>
#include "comm/comm.h"

static double g_timeout = RS_COMM_DEFAULT_TIMEOUT;
static int g_failed;
static char g_msg[512];

void rs__comm_set_timeout(double seconds) { g_timeout = seconds > 0 ? seconds : RS_COMM_DEFAULT_TIMEOUT; }
double rs__comm_timeout(void) { return g_timeout; }
const char *rs__comm_failure(void) { return g_failed ? g_msg : NULL; }

rs_status rs__comm_fail(const char *fmt, ...) {
  if (!g_failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    g_failed = 1;
  }
  return rs_fail(RS_ERR_TIMEOUT, "%s", g_msg);
}

rs_status rs__comm_check(void) { return g_failed ? rs_fail(RS_ERR_TIMEOUT, "%s", g_msg) : RS_OK; }

double rs__comm_clock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rs__comm_backoff(double waited) {
  /* Spin for the first millisecond (latency); then yield, so that a rank waiting for a slow peer on
   * an oversubscribed node gives the core away, yet keeps calling into the transport (MPI moves
   * large messages only inside its calls); sleep only once nothing has completed for a second (a
   * stalled or dead peer), where waking 1,000 times a second costs nothing that matters. */
  if (waited < 1e-3) return;
  if (waited < 1.0) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}
