/* test_conform_exec.c - conform/exec.c against tiny shell and Python children: an answer comes
 * back, and a child that crashes, is killed by a signal, hangs, stops reading, writes a broken or
 * over-long line or floods stderr is reported as that fault within its timeout, and restarts. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "conform/exec.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Send one line, read one; returns the fault. */
static rs_exec_fault ask(rs_exec *x, const char *req, double timeout, const char **ans) {
  *ans = NULL;
  if (rs_exec_send(x, req, timeout)) return rs_exec_last_fault(x);
  if (rs_exec_recv(x, timeout, ans)) return rs_exec_last_fault(x);
  return RS_EXEC_FINE;
}

int main(void) {
  rs_exec *x;
  const char *a;

  /* an echoing child: several exchanges, a line split over two writes */
  CHECK(rs_exec_start("while read l; do printf '{\"got\":'; sleep 0.01; printf '%s}\\n' \"$l\"; done", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "1", 5, &a), RS_EXEC_FINE);
  CHECK(a && strcmp(a, "{\"got\":1}") == 0);
  CHECK_EQ_I(ask(x, "[2,3]", 5, &a), RS_EXEC_FINE);
  CHECK(a && strcmp(a, "{\"got\":[2,3]}") == 0);
  rs_exec_free(x, 2);

  /* crash with a status, and the stderr tail */
  CHECK(rs_exec_start("read l; echo 'first line' >&2; echo 'boom: bad rank' >&2; exit 3", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 5, &a), RS_EXEC_CRASHED);
  CHECK(strstr(rs_last_error(), "exited with status 3") != NULL);
  CHECK(strstr(rs_exec_stderr_tail(x), "boom: bad rank") != NULL);
  /* restart: a fresh child of the same command answers the same way */
  int pid0 = rs_exec_pid(x);
  CHECK(rs_exec_restart(x) == RS_OK);
  CHECK(rs_exec_pid(x) != pid0);
  CHECK_EQ_I(ask(x, "{}", 5, &a), RS_EXEC_CRASHED);
  rs_exec_free(x, 0);

  /* killed by a signal */
  CHECK(rs_exec_start("read l; kill -SEGV $$", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 5, &a), RS_EXEC_CRASHED);
  CHECK(strstr(rs_last_error(), "signal 11") != NULL);
  rs_exec_free(x, 0);

  /* a child that hangs: the timeout holds, stopping it is quick */
  CHECK(rs_exec_start("read l; sleep 30", 0, &x) == RS_OK);
  double t0 = now();
  CHECK_EQ_I(ask(x, "{}", 0.3, &a), RS_EXEC_TIMEOUT);
  CHECK(now() - t0 < 2.0);
  t0 = now();
  rs_exec_free(x, 0.2);
  CHECK(now() - t0 < 2.0);

  /* a child that never reads: a big request times out instead of blocking */
  size_t big = 4u << 20;
  char *req = malloc(big + 1);
  memset(req, 'x', big);
  req[big] = 0;
  CHECK(rs_exec_start("sleep 30", 0, &x) == RS_OK);
  t0 = now();
  CHECK(rs_exec_send(x, req, 0.3) != RS_OK);
  CHECK_EQ_I(rs_exec_last_fault(x), RS_EXEC_TIMEOUT);
  CHECK(now() - t0 < 2.0);
  rs_exec_free(x, 0);

  /* a child that exits without reading: EPIPE, not SIGPIPE */
  CHECK(rs_exec_start("exit 0", 0, &x) == RS_OK);
  nanosleep(&(struct timespec){0, 100000000}, NULL);
  CHECK(rs_exec_send(x, req, 2) != RS_OK);
  CHECK_EQ_I(rs_exec_last_fault(x), RS_EXEC_CRASHED);
  rs_exec_free(x, 0);

  /* a child that floods stderr before answering: no deadlock, the tail keeps the end */
  CHECK(rs_exec_start("read l; i=0; while [ $i -lt 3000 ]; do echo \"noise line $i of the child\" >&2; i=$((i+1)); done; echo '{\"ok\":true}'", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 20, &a), RS_EXEC_FINE);
  CHECK(a && strcmp(a, "{\"ok\":true}") == 0);
  CHECK(strstr(rs_exec_stderr_tail(x), "noise line 2999 of the child") != NULL);
  CHECK(strlen(rs_exec_stderr_tail(x)) <= 2048);
  rs_exec_free(x, 2);

  /* a big answer (4 MiB line) comes back whole */
  CHECK(rs_exec_start("read l; head -c 4194304 /dev/zero | tr '\\0' 'a'; echo", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 20, &a), RS_EXEC_FINE);
  CHECK(a && strlen(a) == big);
  rs_exec_free(x, 2);

  /* a line past max_line is garbage; a line cut by exit is a crash; a NUL byte is garbage */
  CHECK(rs_exec_start("read l; head -c 100000 /dev/zero | tr '\\0' 'a'; echo; sleep 5", 1000, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 5, &a), RS_EXEC_GARBAGE);
  rs_exec_free(x, 0);
  CHECK(rs_exec_start("read l; printf '{\"ok\":tr'", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 5, &a), RS_EXEC_CRASHED);
  CHECK(strstr(rs_last_error(), "middle of a line") != NULL);
  rs_exec_free(x, 0);
  CHECK(rs_exec_start("read l; printf 'a\\000b\\n'; sleep 5", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 5, &a), RS_EXEC_GARBAGE);
  rs_exec_free(x, 0);

  /* a command that does not exist: the shell exits 127 */
  CHECK(rs_exec_start("/nonexistent/backend --serve", 0, &x) == RS_OK);
  CHECK_EQ_I(ask(x, "{}", 5, &a), RS_EXEC_CRASHED);
  CHECK(strstr(rs_last_error(), "127") != NULL);
  CHECK(strstr(rs_exec_stderr_tail(x), "nonexistent") != NULL);
  rs_exec_free(x, 0);
  CHECK(rs_exec_start("", 0, &x) == RS_ERR_INVALID);

  /* a Python child, when there is a python3 */
  if (system("python3 -c 'pass' >/dev/null 2>&1") == 0) {
    CHECK(rs_exec_start("python3 -u -c 'import sys, json\nfor l in sys.stdin:\n    print(json.dumps({\"n\": json.loads(l)[\"n\"] + 1}), flush=True)'", 0, &x) == RS_OK);
    CHECK_EQ_I(ask(x, "{\"n\":41}", 20, &a), RS_EXEC_FINE);
    CHECK(a && strcmp(a, "{\"n\": 42}") == 0);
    t0 = now();
    rs_exec_free(x, 2); /* closes stdin: the loop ends, the child exits by itself */
    CHECK(now() - t0 < 2.0);
  }
  free(req);
  TEST_DONE();
}
