/* bench_jobs.c - `reshard bench jobs`: cases per wall second of each campaign verb with --jobs 1
 * against --jobs N (default 2), as ratios measured in one run: the two are run alternately, reps
 * times each, by this same reshard executable, and each ratio is the median over the pairs [min,
 * max]. The live PyTorch backend and the Python exec backend rows need a python (--python; torch
 * for the first). A verb that refuses --jobs prints "no --jobs" instead of a figure.
 *
 * The process backends' rows are long enough to be mostly cases: each child's start (hello) is paid
 * once per worker (about 2-3 s for torch, 35 ms for plain Python), and with --jobs N conform's own
 * child starts first, so a short row measures start-up rather than cases per second. The live
 * PyTorch row shrinks with --shrink-runs 1: PyTorch fails a case of seed 1, and its shrinking runs
 * in conform alone, the same serial seconds for both figures. After each of these rows a line gives
 * the wall time of a 1-case run with --jobs 1 and --jobs N: the fixed cost the ratio carries. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench.h"

#define MAXARG 40

typedef struct jb_row {
  const char *name;
  const char *argv[MAXARG]; /* after the executable; "@PY" is the python, "@SRC" the source tree */
  long long cases;
  int needs_python, needs_torch;
} jb_row;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Runs exe with args, output to /dev/null; *secs the wall time; returns the exit status (-1: could
 * not run or timed out). */
static int run_one(const char *exe, char **args, double timeout, double *secs) {
  double t0 = now_s();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int nul = open("/dev/null", O_WRONLY);
    if (nul >= 0) dup2(nul, 1), dup2(nul, 2);
    setpgid(0, 0);
    execv(exe, args);
    _exit(127);
  }
  int st = 0;
  for (;;) {
    pid_t p = waitpid(pid, &st, WNOHANG);
    if (p == pid) break;
    if (p < 0 && errno != EINTR) return -1;
    if (now_s() - t0 > timeout) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  *secs = now_s() - t0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* argv of one run: the row's words with @PY/@SRC/@CASES replaced, then --jobs N */
static int build_args(const jb_row *r, const char *exe, const char *py, const char *src, int jobs, char *store,
                      size_t cap, char **args) {
  int n = 0;
  size_t used = 0;
  args[n++] = (char *)exe;
  for (int i = 0; r->argv[i] && n < MAXARG - 4; i++) {
    char buf[1024];
    const char *w = r->argv[i];
    char cases[32];
    snprintf(cases, sizeof cases, "%lld", r->cases);
    /* substitute each placeholder in the word */
    size_t bl = 0;
    for (const char *p = w; *p && bl < sizeof buf - 1;) {
      const char *rep = NULL;
      size_t skip = 0;
      if (!strncmp(p, "@PY", 3)) rep = py, skip = 3;
      else if (!strncmp(p, "@SRC", 4)) rep = src, skip = 4;
      else if (!strncmp(p, "@CASES", 6)) rep = cases, skip = 6;
      if (rep) {
        int k = snprintf(buf + bl, sizeof buf - bl, "%s", rep);
        if (k < 0 || (size_t)k >= sizeof buf - bl) return -1;
        bl += (size_t)k;
        p += skip;
      } else {
        buf[bl++] = *p++;
      }
    }
    buf[bl] = 0;
    size_t l = strlen(buf) + 1;
    if (used + l > cap) return -1;
    memcpy(store + used, buf, l);
    args[n++] = store + used;
    used += l;
  }
  char jb[16];
  snprintf(jb, sizeof jb, "%d", jobs);
  const char *tail[] = {"--jobs", jb, NULL};
  for (int i = 0; tail[i]; i++) {
    size_t l = strlen(tail[i]) + 1;
    if (used + l > cap) return -1;
    memcpy(store + used, tail[i], l);
    args[n++] = store + used;
    used += l;
  }
  args[n] = NULL;
  return 0;
}

static int has_python(const char *py, const char *module) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "'%s' -c 'import %s' >/dev/null 2>&1", py, module);
  return system(cmd) == 0;
}

rs_status rs_bench_jobs(int argc, char **argv) {
  int jobs = 2, reps = 3, scale = 100;
  const char *py = NULL, *src = ".";
  for (int i = 2; i < argc; i++) {
    rs_status st;
    if (rs_bench_int_flag("bench jobs", argc, argv, &i, "--jobs", 2, 256, &jobs, &st) ||
        rs_bench_int_flag("bench jobs", argc, argv, &i, "--reps", 1, 100, &reps, &st) ||
        rs_bench_int_flag("bench jobs", argc, argv, &i, "--scale", 1, 10000, &scale, &st)) {
      if (st) return st;
    } else if (!strcmp(argv[i], "--python") && i + 1 < argc) py = argv[++i];
    else if (!strcmp(argv[i], "--src") && i + 1 < argc) src = argv[++i];
    else return rs_fail(RS_ERR_INVALID, "bench jobs: unknown option %s (--jobs N --reps R --scale PERCENT --python PY --src DIR)", argv[i]);
  }
  char exe[4096];
  ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (l <= 0) return rs_fail(RS_ERR_IO, "bench jobs: cannot find this executable (/proc/self/exe)");
  exe[l] = 0;
  int have_py = py && has_python(py, "json"), have_torch = py && has_python(py, "torch");
  jb_row rows[] = {
      {"check (ref)", {"check", "--seed", "1", "--cases", "@CASES", "--quiet", NULL}, 20000, 0, 0},
      {"p2p check (opt)", {"p2p", "check", "--impl", "opt", "--seed", "1", "--cases", "@CASES", "--quiet", NULL}, 4000, 0, 0},
      {"tp check (both)", {"tp", "check", "--impl", "both", "--seed", "1", "--cases", "@CASES", "--quiet", NULL}, 20000, 0, 0},
      {"ckpt check (ref)", {"ckpt", "check", "--seed", "1", "--cases", "@CASES", "--quiet", NULL}, 400, 0, 0},
      {"fuzz-planner (graph plug-in)",
       {"fuzz-planner", "--planner", "@SRC/build/tests/libplanner_graph.so", "--seed", "1", "--cases", "@CASES", "--quiet", NULL},
       3000, 0, 0},
      {"conform, Python exec backend",
       {"conform", "--backend", "exec:@PY @SRC/tests/conform_child.py", "--suite", "redistribute", "--fixtures", "none",
        "--seed", "1", "--cases", "@CASES", "--quiet", NULL},
       2000, 1, 0},
      {"conform, live PyTorch backend",
       {"conform", "--backend", "exec:@PY @SRC/tools/pytorch/backend.py --refusals-skip", "--suite", "redistribute",
        "--fixtures", "none", "--seed", "1", "--cases", "@CASES", "--timeout", "120", "--shrink-runs", "1", "--quiet", NULL},
       600, 1, 1},
  };
  int nrows = (int)(sizeof rows / sizeof rows[0]);
  printf("bench jobs: cases per wall second, --jobs 1 vs --jobs %d, %d alternating pairs each (median [min, max])\n", jobs,
         reps);
  printf("%-32s %8s %12s %12s   %s\n", "campaign", "cases", "jobs 1 c/s", "jobs N c/s", "ratio");
  for (int ri = 0; ri < nrows; ri++) {
    jb_row *r = &rows[ri];
    r->cases = r->cases * scale / 100;
    if (r->cases < 1) r->cases = 1;
    if ((r->needs_python && !have_py) || (r->needs_torch && !have_torch)) {
      printf("%-32s %8lld %12s %12s   skipped (%s)\n", r->name, r->cases, "-", "-",
             r->needs_torch ? "no --python with torch" : "no --python");
      continue;
    }
    double ratio[100], c1[100], cn[100];
    int ok = 1, refused = 0;
    for (int k = 0; k < reps && ok; k++) {
      for (int pass = 0; pass < 2 && ok; pass++) {
        /* alternate which goes first, so a drift of the machine's load favours neither */
        int j = (pass ^ (k & 1)) ? jobs : 1;
        char store[8192], *args[MAXARG];
        double secs = 0;
        if (build_args(r, exe, py ? py : "python3", src, j, store, sizeof store, args)) {
          ok = 0;
          break;
        }
        int rc = run_one(exe, args, 1800, &secs);
        if (rc == 2 && j > 1) refused = 1;
        if (rc != 0 && rc != 1) ok = 0; /* 1: a finding of the campaign still times it */
        if (j == 1) c1[k] = (double)r->cases / secs;
        else cn[k] = (double)r->cases / secs;
      }
      if (ok) ratio[k] = cn[k] / c1[k];
    }
    if (!ok) {
      printf("%-32s %8lld %12s %12s   %s\n", r->name, r->cases, "-", "-", refused ? "no --jobs" : "did not run (exit status)");
      continue;
    }
    double m1[3], mn[3], mr[3];
    rs_bench_mmm(c1, reps, m1);
    rs_bench_mmm(cn, reps, mn);
    rs_bench_mmm(ratio, reps, mr);
    printf("%-32s %8lld %12.1f %12.1f   %.2fx [%.2f, %.2f]\n", r->name, r->cases, m1[0], mn[0], mr[0], mr[1], mr[2]);
    if (r->needs_python) {
      /* the fixed part of such a run: the same campaign of one case (a start, a hello, a bye) */
      long long keep = r->cases;
      char store[8192], *args[MAXARG];
      double s1 = 0, s2 = 0;
      r->cases = 1;
      int bad = build_args(r, exe, py ? py : "python3", src, 1, store, sizeof store, args) ||
                run_one(exe, args, 1800, &s1) < 0 ||
                build_args(r, exe, py ? py : "python3", src, jobs, store, sizeof store, args) ||
                run_one(exe, args, 1800, &s2) < 0;
      r->cases = keep;
      if (!bad) printf("%-32s %8s   start-up: a 1-case run takes %.2f s with --jobs 1, %.2f s with --jobs %d\n", "", "", s1, s2, jobs);
    }
    fflush(stdout);
  }
  return RS_OK;
}
