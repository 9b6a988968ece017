/* runner.c - the one campaign runner (runner.h): which indices run, in this process or in forked
 * workers, and the records added up in index order.
 *
 * Workers (--jobs N > 1) are forked after the verb set everything up, so each holds a copy of the
 * campaign (generator options, properties, a plug-in it loaded). They take indices from a counter in
 * shared memory and send one record per case over their own pipe; the parent keeps records that
 * arrive early until every lower index arrived, then adds them in order. A stop (--seconds, a
 * failure count, an error, out of memory, a crash, a hang) is a cut at an index: the parent lowers
 * the shared limit so no worker takes an index past it, waits for the workers to finish the case
 * they hold and kills those that do not (--seconds: after one second; otherwise after the case
 * timeout). Every worker dies with the parent (PR_SET_PDEATHSIG) and is reaped before rs_run
 * returns. */
#define _GNU_SOURCE
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "core/last_status.h"
#include "core/mutant.h"
#include <time.h>
#include "core/numflag.h"
#include "props/props.h"
#include "report.h"
#include "runner_int.h"

#define NOLIMIT INT64_MAX

int64_t rs_run_index(const rs_run_opts *o, int64_t j) {
  /* RS_MUTANT 992: shard K takes i % N == K instead of K - 1 (shard N/N repeats shard 1's cases) */
  if (o->shard_n > 1) return (int64_t)(o->shard_k - !RS_MUTANT(992)) % o->shard_n + j * (int64_t)o->shard_n;
  return j;
}

/* cases of this shard when the campaign has o->cases cases (NOLIMIT for a timed campaign) */
static int64_t shard_cases(const rs_run_opts *o) {
  if (o->cases <= 0) return NOLIMIT;
  if (o->shard_n <= 1) return o->cases;
  int64_t first = o->shard_k - 1;
  return o->cases > first ? (o->cases - first + o->shard_n - 1) / o->shard_n : 0;
}

int rs_run_cores(void) {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n > RS_RUN_MAX_JOBS ? RS_RUN_MAX_JOBS : n;
  }
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > RS_RUN_MAX_JOBS ? RS_RUN_MAX_JOBS : (int)n;
}

rs_status rs_run_parse_jobs(const char *s, int *out) {
  if (s && strcmp(s, "auto") == 0) {
    *out = rs_run_cores();
    return RS_OK;
  }
  long long n;
  if (!s || rs__flag_int(s, 1, RS_RUN_MAX_JOBS, &n) != 0)
    return rs_fail(RS_ERR_INVALID, "--jobs: '%s', expected auto or 1..%d", s ? s : "", RS_RUN_MAX_JOBS);
  *out = (int)n;
  return RS_OK;
}

rs_status rs_run_parse_shard(const char *s, int *k, int *n) {
  const char *slash = s ? strchr(s, '/') : NULL;
  char a[24], b[24];
  long long kk, nn;
  size_t la = slash ? (size_t)(slash - s) : 0;
  if (!slash || la == 0 || la >= sizeof a || strlen(slash + 1) >= sizeof b)
    return rs_fail(RS_ERR_INVALID, "--shard: '%s', expected K/N (1 <= K <= N <= 100000)", s ? s : "");
  memcpy(a, s, la);
  a[la] = 0;
  snprintf(b, sizeof b, "%s", slash + 1);
  if (rs__flag_int(b, 1, 100000, &nn) != 0 || rs__flag_int(a, 1, nn, &kk) != 0)
    return rs_fail(RS_ERR_INVALID, "--shard: '%s', expected K/N (1 <= K <= N <= 100000)", s);
  *k = (int)kk;
  *n = (int)nn;
  return RS_OK;
}

/* ---- adding records up in index order ---- */

typedef struct agg {
  const rs_run_opts *o;
  const rs_run_ops *ops;
  rs_run_result *r;
  int64_t base;        /* the next j to add */
  int64_t cut;         /* j >= cut are not added (NOLIMIT: no cut yet) */
  rs_status st;        /* the stop's status (RS_OK: none, or a clean stop) */
  char err[1024];
} agg;

static void cut_at(agg *a, int64_t j, rs_status st, const char *msg) {
  if (j >= a->cut) return;
  a->cut = j;
  a->st = st;
  snprintf(a->err, sizeof a->err, "%.1000s", msg ? msg : "");
}

/* Adds the record of the j-th case (j == a->base). */
static void add_case(agg *a, int64_t j, const rs_run_case *rc, rs_status st, const char *errmsg) {
  rs_run_result *r = a->r;
  const rs_run_ops *ops = a->ops;
  if (j >= a->cut) return;
  int64_t index = rs_run_index(a->o, j);
  if (st != RS_OK) {
    char m[1024];
    snprintf(m, sizeof m, "%s", errmsg ? errmsg : "");
    cut_at(a, j, st, m);
    return;
  }
  if (rc->oom > 0 && rc->oom <= ops->nprops) {
    char m[1024];
    snprintf(m, sizeof m, "out of memory at case %lld (no verdict: not shrunk, nothing saved): %.900s",
             (long long)index + 1, rc->msg[rc->oom - 1]);
    r->oom_prop = rc->oom - 1;
    r->oom_index = index;
    snprintf(r->oom_msg, sizeof r->oom_msg, "%s", rc->msg[rc->oom - 1]);
    cut_at(a, j, RS_ERR_NOMEM, m);
    return;
  }
  for (int p = 0; p < ops->nprops; p++) {
    switch (rc->out[p]) {
    case RS_RUN_PASS: r->pass[p]++; break;
    case RS_RUN_SKIP: r->skip[p]++; break;
    case RS_RUN_FAIL:
      if (!r->fail[p]++) {
        r->first_fail[p] = index;
        snprintf(r->first_msg[p], sizeof r->first_msg[p], "%s", rc->msg[p]);
        r->failed_props++;
        if (r->first_failure < 0) r->first_failure = index;
      }
      break;
    default: break;
    }
  }
  for (int f = 0; f < ops->nfeatures; f++) r->feature[f] += rc->feature[f];
  for (int c = 0; c < ops->ncounters; c++) r->counter[c] += rc->counter[c];
  r->cases++;
  r->end_index = index + 1;
  if (ops->add) ops->add(ops->ctx, index, rc);
  if (a->o->max_failures > 0 && r->failed_props >= a->o->max_failures) cut_at(a, j + 1, RS_OK, NULL);
}

static void result_init(rs_run_result *r) {
  memset(r, 0, sizeof *r);
  for (int p = 0; p < RS_RUN_PROPS; p++) r->first_fail[p] = -1;
  r->first_failure = -1;
  r->crash_index = -1;
  r->oom_prop = -1;
  r->oom_index = -1;
}

static rs_status finish(agg *a, double t0) {
  a->r->seconds = rs_now() - t0;
  if (a->st != RS_OK) return rs_fail(a->st, "%s", a->err);
  return RS_OK;
}

/* ---- one process ---- */

static rs_status run_here(const rs_run_opts *o, const rs_run_ops *ops, agg *a, rs_progress *prog, double t0) {
  rs_run_case *rc = malloc(sizeof *rc);
  if (!rc) return rs_fail(RS_ERR_NOMEM, "%s: out of memory", o->verb);
  int64_t n = shard_cases(o);
  a->r->jobs = 1;
  for (int64_t j = 0; j < n && j < a->cut; j++) {
    if (o->cases <= 0) {
      int up = rs_now() - t0 >= o->seconds;
      if (o->agree_stop) up = o->agree_stop(o->stop_ctx, up);
      if (up) break;
    }
    const char *stop = o->stop ? o->stop(o->stop_ctx) : NULL;
    if (stop) {
      cut_at(a, j, RS_ERR_TIMEOUT, stop);
      break;
    }
    memset(rc, 0, sizeof *rc);
    rc->index = rs_run_index(o, j);
    rs_clear_error();
    rs_status st = ops->eval(ops->ctx, rc->index, rc);
    add_case(a, j, rc, st, st ? rs_last_error() : NULL);
    a->base = j + 1;
    if (o->progress) rs_progress_update(prog, a->r->cases, rs_now() - t0, a->r->failed_props, 0);
  }
  free(rc);
  return RS_OK;
}

/* ---- forked workers ---- */

enum { REC_CASE = 1, REC_ERROR = 2, REC_DONE = 3 };
#define REC_MAGIC 0x52535255u

typedef struct rec_head {
  uint32_t magic, kind;
  int64_t j;
  int32_t status;
  uint32_t len; /* payload bytes */
} rec_head;

typedef struct shared {
  _Atomic int64_t next, limit;
  struct {
    _Atomic int64_t j;   /* the case in progress, -1: none */
    _Atomic int64_t t0_ms;
  } slot[RS_RUN_MAX_JOBS];
} shared;

static int64_t now_ms(void) { return (int64_t)(rs_now() * 1000.0); }

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* A case record's payload: outcomes, features, counters, oom, then each failing property's message
 * (u16 length + bytes), then the verb's extra bytes (u32 length + bytes). */
static size_t pack_case(const rs_run_ops *ops, const rs_run_case *rc, char *buf) {
  size_t n = 0;
  memcpy(buf + n, rc->out, (size_t)ops->nprops), n += (size_t)ops->nprops;
  memcpy(buf + n, rc->feature, sizeof(uint16_t) * (size_t)ops->nfeatures), n += sizeof(uint16_t) * (size_t)ops->nfeatures;
  memcpy(buf + n, rc->counter, sizeof(int64_t) * (size_t)ops->ncounters), n += sizeof(int64_t) * (size_t)ops->ncounters;
  int32_t oom = rc->oom;
  memcpy(buf + n, &oom, sizeof oom), n += sizeof oom;
  for (int p = 0; p < ops->nprops; p++) {
    if (rc->out[p] != RS_RUN_FAIL && rc->oom != p + 1) continue;
    size_t l = strnlen(rc->msg[p], RS_RUN_MSG - 1);
    uint16_t l16 = (uint16_t)l;
    memcpy(buf + n, &l16, sizeof l16), n += sizeof l16;
    memcpy(buf + n, rc->msg[p], l), n += l;
  }
  uint32_t el = rc->extra_len <= RS_RUN_EXTRA ? rc->extra_len : RS_RUN_EXTRA;
  memcpy(buf + n, &el, sizeof el), n += sizeof el;
  memcpy(buf + n, rc->extra, el), n += el;
  return n;
}

static int unpack_case(const rs_run_ops *ops, const char *buf, size_t len, rs_run_case *rc) {
  size_t n = 0, fixed = (size_t)ops->nprops + sizeof(uint16_t) * (size_t)ops->nfeatures +
                        sizeof(int64_t) * (size_t)ops->ncounters + sizeof(int32_t);
  if (len < fixed) return -1;
  memset(rc, 0, sizeof *rc);
  memcpy(rc->out, buf, (size_t)ops->nprops), n += (size_t)ops->nprops;
  memcpy(rc->feature, buf + n, sizeof(uint16_t) * (size_t)ops->nfeatures), n += sizeof(uint16_t) * (size_t)ops->nfeatures;
  memcpy(rc->counter, buf + n, sizeof(int64_t) * (size_t)ops->ncounters), n += sizeof(int64_t) * (size_t)ops->ncounters;
  int32_t oom;
  memcpy(&oom, buf + n, sizeof oom), n += sizeof oom;
  rc->oom = oom;
  for (int p = 0; p < ops->nprops; p++) {
    if (rc->out[p] != RS_RUN_FAIL && rc->oom != p + 1) continue;
    uint16_t l16;
    if (n + sizeof l16 > len) return -1;
    memcpy(&l16, buf + n, sizeof l16), n += sizeof l16;
    if (l16 >= RS_RUN_MSG || n + l16 > len) return -1;
    memcpy(rc->msg[p], buf + n, l16), n += l16;
    rc->msg[p][l16] = 0;
  }
  uint32_t el;
  if (n + sizeof el > len) return -1;
  memcpy(&el, buf + n, sizeof el), n += sizeof el;
  if (el > RS_RUN_EXTRA || n + el > len) return -1;
  memcpy(rc->extra, buf + n, el), n += el;
  rc->extra_len = el;
  return n == len ? 0 : -1;
}

/* One record, header and payload in one writev when the pipe takes it whole (it has room: the
 * parent reads in batches, see run_workers), else the rest written in pieces. */
static int send_rec(int fd, uint32_t kind, int64_t j, rs_status st, const char *payload, size_t len) {
  rec_head h = {REC_MAGIC, kind, j, (int32_t)st, (uint32_t)len};
  struct iovec iv[2] = {{&h, sizeof h}, {(void *)payload, len}};
  ssize_t w;
  do w = writev(fd, iv, len ? 2 : 1);
  while (w < 0 && errno == EINTR);
  if (w < 0) return -1;
  size_t done = (size_t)w;
  if (done < sizeof h) {
    if (write_all(fd, (const char *)&h + done, sizeof h - done)) return -1;
    done = sizeof h;
  }
  done -= sizeof h;
  return done < len ? write_all(fd, payload + done, len - done) : 0;
}

/* A worker leaves with _exit (its parent's atexit handlers and buffers are not its own), which
 * skips gcov's exit handler: a coverage build writes the worker's counts first. */
#ifdef RS_COVERAGE
void __gcov_dump(void);
static void worker_flush_coverage(void) { __gcov_dump(); }
#else
static void worker_flush_coverage(void) {}
#endif

static void worker_main(const rs_run_opts *o, const rs_run_ops *ops, shared *sh, int w, int fd) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  /* the parent prints; a worker's stdout would interleave with it */
  int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (nul >= 0) dup2(nul, 1), close(nul);
  size_t cap = sizeof(rs_run_case) + 64;
  char *buf = malloc(cap);
  rs_run_case *rc = malloc(sizeof *rc);
  if (!buf || !rc) {
    send_rec(fd, REC_ERROR, -1, RS_ERR_NOMEM, "worker: out of memory", 21);
    _exit(3);
  }
  rs_clear_error();
  if (ops->worker_init && ops->worker_init(ops->ctx, w) != RS_OK) {
    const char *e = rs_last_error();
    send_rec(fd, REC_ERROR, -1, rs__last_status() ? rs__last_status() : RS_ERR_TRANSPORT, e, strlen(e));
    _exit(1);
  }
  int64_t n = shard_cases(o);
  for (;;) {
    int64_t j = atomic_fetch_add(&sh->next, 1);
    if (j >= n || j >= atomic_load(&sh->limit)) break;
    atomic_store(&sh->slot[w].t0_ms, now_ms());
    atomic_store(&sh->slot[w].j, j);
    memset(rc, 0, sizeof *rc);
    rc->index = rs_run_index(o, j);
    rs_clear_error();
    rs_status st = ops->eval(ops->ctx, rc->index, rc);
    int bad;
    if (st != RS_OK) {
      const char *e = rs_last_error();
      bad = send_rec(fd, REC_ERROR, j, st, e, strnlen(e, 1000));
    } else {
      size_t len = pack_case(ops, rc, buf);
      bad = send_rec(fd, REC_CASE, j, RS_OK, buf, len);
    }
    atomic_store(&sh->slot[w].j, -1);
    if (bad) _exit(1); /* the parent went away */
  }
  if (ops->worker_exit) ops->worker_exit(ops->ctx);
  worker_flush_coverage();
  send_rec(fd, REC_DONE, -1, RS_OK, NULL, 0);
  _exit(0);
}

typedef struct worker {
  pid_t pid;
  int fd;            /* read end, -1 once closed */
  int done;          /* sent REC_DONE */
  int reaped, status;
  char *buf;
  size_t n, cap;
} worker;

/* records that arrived before a lower index: kept until their turn */
typedef struct pending {
  int64_t j;
  uint32_t kind;
  int32_t status;
  char *payload;
  size_t len;
} pending;

typedef struct pend_set {
  pending *v;
  size_t n, cap;
} pend_set;

static int pend_put(pend_set *s, int64_t j, uint32_t kind, int32_t st, const char *p, size_t len) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? 2 * s->cap : 64;
    pending *nv = realloc(s->v, nc * sizeof *nv);
    if (!nv) return -1;
    s->v = nv;
    s->cap = nc;
  }
  char *copy = malloc(len ? len : 1);
  if (!copy) return -1;
  memcpy(copy, p, len);
  s->v[s->n++] = (pending){j, kind, st, copy, len};
  return 0;
}

/* index in s of the record for j, -1 */
static long pend_find(const pend_set *s, int64_t j) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i].j == j) return (long)i;
  return -1;
}

static void pend_drop(pend_set *s, size_t i) {
  free(s->v[i].payload);
  s->v[i] = s->v[--s->n];
}

/* Adds every record from a->base on that has arrived. */
static int drain(agg *a, pend_set *ps, rs_run_case *scratch, const rs_run_ops *ops) {
  long i;
  /* RS_MUTANT 991: records are added as they arrive, not in index order (the first failure then
   * depends on which worker was faster) */
  while (a->base < a->cut && (i = RS_MUTANT(991) ? (ps->n ? 0 : -1) : pend_find(ps, a->base)) >= 0) {
    pending *p = &ps->v[i];
    if (p->kind == REC_ERROR) {
      char m[1024];
      snprintf(m, sizeof m, "%.*s", (int)(p->len < 1000 ? p->len : 1000), p->payload);
      add_case(a, p->j, NULL, p->status ? p->status : RS_ERR_TRANSPORT, m);
    } else if (unpack_case(ops, p->payload, p->len, scratch) != 0) {
      add_case(a, p->j, NULL, RS_ERR_TRANSPORT, "a worker sent a malformed record");
    } else {
      add_case(a, p->j, scratch, RS_OK, NULL);
    }
    pend_drop(ps, (size_t)i);
    a->base++;
  }
  return 0;
}

/* Parses the complete records in w's buffer. */
static int take_records(worker *w, int wi, agg *a, pend_set *ps) {
  size_t off = 0;
  while (w->n - off >= sizeof(rec_head)) {
    rec_head h;
    memcpy(&h, w->buf + off, sizeof h);
    if (h.magic != REC_MAGIC || h.len > (1u << 26)) {
      cut_at(a, a->base, RS_ERR_TRANSPORT, "a worker sent a malformed record");
      return -1;
    }
    if (w->n - off < sizeof h + h.len) break;
    const char *pl = w->buf + off + sizeof h;
    if (h.kind == REC_DONE) {
      w->done = 1;
    } else if (h.j < 0) { /* worker_init failed */
      char m[1100];
      snprintf(m, sizeof m, "worker %d could not start: %.*s", wi + 1, (int)(h.len < 1000 ? h.len : 1000), pl);
      cut_at(a, a->base, h.status ? h.status : RS_ERR_TRANSPORT, m);
    } else if (h.j >= a->base && h.j < a->cut) {
      if (pend_put(ps, h.j, h.kind, h.status, pl, h.len)) {
        cut_at(a, a->base, RS_ERR_NOMEM, "out of memory keeping worker records");
        return -1;
      }
    }
    off += sizeof h + h.len;
  }
  memmove(w->buf, w->buf + off, w->n - off);
  w->n -= off;
  return 0;
}

static void describe_exit(int status, char *out, size_t cap) {
  if (WIFSIGNALED(status)) {
    int s = WTERMSIG(status);
    snprintf(out, cap, "killed by signal %d (%s)%s", s, strsignal(s),
             s == SIGKILL ? "; the kernel's out-of-memory killer sends this one" : "");
  } else if (WIFEXITED(status)) {
    snprintf(out, cap, "exited with status %d without its report", WEXITSTATUS(status));
  } else {
    snprintf(out, cap, "stopped (status %d)", status);
  }
}

static void reap(worker *w, int block) {
  if (w->reaped) return;
  int st;
  pid_t p;
  do p = waitpid(w->pid, &st, block ? 0 : WNOHANG);
  while (p < 0 && errno == EINTR);
  if (p == w->pid) {
    w->reaped = 1;
    w->status = st;
  } else if (p < 0) {
    w->reaped = 1;
    w->status = 0;
  }
}

static rs_status run_workers(const rs_run_opts *o, const rs_run_ops *ops, agg *a, rs_progress *prog, double t0) {
  int jobs = o->jobs;
  double case_timeout = o->case_timeout > 0 ? o->case_timeout : 600;
  shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  worker *ws = calloc((size_t)jobs, sizeof *ws);
  struct pollfd *pf = calloc((size_t)jobs, sizeof *pf);
  rs_run_case *scratch = malloc(sizeof *scratch);
  pend_set ps = {0};
  rs_status st = RS_OK;
  if (sh == MAP_FAILED || !ws || !pf || !scratch) {
    if (sh != MAP_FAILED) munmap(sh, sizeof *sh);
    free(ws), free(pf), free(scratch);
    return rs_fail(RS_ERR_NOMEM, "%s: out of memory starting %d workers", o->verb, jobs);
  }
  atomic_store(&sh->next, 0);
  atomic_store(&sh->limit, NOLIMIT);
  for (int w = 0; w < jobs; w++) atomic_store(&sh->slot[w].j, -1);
  fflush(stdout);
  fflush(stderr);
  int started = 0;
  for (int w = 0; w < jobs; w++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      st = rs_fail(RS_ERR_IO, "%s: cannot start worker %d: pipe: %s", o->verb, w + 1, strerror(errno));
      break;
    }
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]), close(p[1]);
      st = rs_fail(RS_ERR_IO, "%s: cannot start worker %d: fork: %s", o->verb, w + 1, strerror(errno));
      break;
    }
    if (pid == 0) {
      close(p[0]);
      for (int v = 0; v < w; v++)
        if (ws[v].fd >= 0) close(ws[v].fd);
      worker_main(o, ops, sh, w, p[1]);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
#ifdef F_SETPIPE_SZ
    fcntl(p[0], F_SETPIPE_SZ, 1 << 20); /* room for the records of the parent's naps (best effort) */
#endif
    ws[w] = (worker){.pid = pid, .fd = p[0]};
    started++;
  }
  a->r->jobs = started;
  if (st != RS_OK) cut_at(a, 0, st, rs_last_error());
  int64_t n = shard_cases(o);
  double stop_at = -1; /* when the workers were told to stop: the grace period counts from it */
  int nap_pending = 0;  /* napped after the last poll: read now */
  for (;;) {
    double now = rs_now();
    /* decide the cut */
    if (o->cases <= 0 && now - t0 >= o->seconds && a->cut == NOLIMIT) cut_at(a, a->base, RS_OK, NULL);
    if (o->stop && a->cut == NOLIMIT) {
      const char *m = o->stop(o->stop_ctx);
      if (m) cut_at(a, a->base, RS_ERR_TIMEOUT, m);
    }
    int64_t want = a->cut < n ? a->cut : n;
    if (a->cut != NOLIMIT) {
      atomic_store(&sh->limit, a->cut);
      if (stop_at < 0) stop_at = now;
    }
    /* hangs: a worker on one case past the case timeout */
    for (int w = 0; w < started; w++) {
      int64_t j = atomic_load(&sh->slot[w].j);
      if (j < 0 || ws[w].reaped || j >= a->cut) continue;
      double ran = (double)(now_ms() - atomic_load(&sh->slot[w].t0_ms)) / 1000.0;
      if (ran > case_timeout) {
        char m[300];
        snprintf(m, sizeof m, "worker %d hung: case %lld ran for %.0f s (the case timeout; --case-timeout sets it)", w + 1,
                 (long long)rs_run_index(o, j) + 1, ran);
        kill(ws[w].pid, SIGKILL);
        cut_at(a, j, RS_ERR_TIMEOUT, m);
      }
    }
    if (a->base >= want) break; /* every case up to the cut was added */
    int live = 0;
    for (int w = 0; w < started; w++) {
      pf[w].fd = ws[w].fd;
      pf[w].events = POLLIN;
      pf[w].revents = 0;
      live += ws[w].fd >= 0;
    }
    if (!live) {
      /* every worker left and the cases below the cut are not all here: a worker lost some */
      cut_at(a, a->base, RS_ERR_TRANSPORT, "the workers stopped before every case was run");
      break;
    }
    int pr = poll(pf, (nfds_t)started, 100);
    if (pr < 0 && errno != EINTR) {
      cut_at(a, a->base, RS_ERR_IO, "poll failed");
      break;
    }
    if (pr > 0 && !nap_pending) {
      /* records are arriving: nap 2 ms and read what came meanwhile in one go. Waking on every
       * record (up to 20,000 a second from two workers of tp check) cost the parent about 1 s of
       * system time per 100,000 cases, on the cores the workers need; the records wait in the pipe,
       * which outlives a worker that crashes meanwhile. */
      struct timespec nap = {0, 2 * 1000 * 1000};
      nanosleep(&nap, NULL);
      nap_pending = 1;
      continue;
    }
    nap_pending = 0;
    for (int w = 0; w < started; w++) {
      worker *wk = &ws[w];
      if (wk->fd < 0 || !(pf[w].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      for (;;) {
        if (wk->cap - wk->n < 65536) {
          size_t nc = wk->cap ? wk->cap * 2 : 1 << 17;
          char *nb = realloc(wk->buf, nc);
          if (!nb) {
            cut_at(a, a->base, RS_ERR_NOMEM, "out of memory reading worker records");
            break;
          }
          wk->buf = nb;
          wk->cap = nc;
        }
        ssize_t got = read(wk->fd, wk->buf + wk->n, wk->cap - wk->n);
        if (got > 0) {
          wk->n += (size_t)got;
          continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EAGAIN) break;
        /* end of file: the worker left */
        take_records(wk, w, a, &ps);
        close(wk->fd);
        wk->fd = -1;
        reap(wk, 1);
        if (!wk->done) {
          int64_t j = atomic_load(&sh->slot[w].j);
          if (j >= 0 && j < a->cut) {
            char why[160];
            describe_exit(wk->status, why, sizeof why);
            snprintf(a->r->crash_msg, sizeof a->r->crash_msg, "worker %d %s while it ran case %lld", w + 1, why,
                     (long long)rs_run_index(o, j) + 1);
            /* a crash is the case's outcome: what ran before it counts, the campaign stops there */
            if (j < a->cut) {
              a->r->crashed = 1;
              a->r->crash_index = rs_run_index(o, j);
              cut_at(a, j, RS_OK, NULL);
            }
          } else if (j < 0 && a->cut == NOLIMIT && a->base < n) {
            char why[160];
            describe_exit(wk->status, why, sizeof why);
            char m[300];
            snprintf(m, sizeof m, "worker %d %s between cases", w + 1, why);
            cut_at(a, a->base, RS_ERR_TRANSPORT, m);
          }
        }
        break;
      }
      if (wk->fd >= 0) take_records(wk, w, a, &ps);
    }
    drain(a, &ps, scratch, ops);
    if (o->progress) rs_progress_update(prog, a->r->cases, rs_now() - t0, a->r->failed_props, 0);
  }
  /* stop: nobody takes another index; workers finish the case they hold (a timed campaign waits
   * one second for them, others the case timeout), then are killed and reaped */
  atomic_store(&sh->limit, 0);
  double grace = o->cases <= 0 ? 1.0 : case_timeout, t_stop = rs_now();
  for (;;) {
    int live = 0;
    for (int w = 0; w < started; w++) {
      if (ws[w].fd < 0) continue;
      char tmp[4096];
      ssize_t got;
      while ((got = read(ws[w].fd, tmp, sizeof tmp)) > 0) {
      }
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        close(ws[w].fd);
        ws[w].fd = -1;
        continue;
      }
      live++;
    }
    if (!live) break;
    if (rs_now() - t_stop > grace) {
      for (int w = 0; w < started; w++)
        if (ws[w].fd >= 0) kill(ws[w].pid, SIGKILL);
      grace = 1e9;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  for (int w = 0; w < started; w++) reap(&ws[w], 1);
  for (int w = 0; w < started; w++) free(ws[w].buf);
  for (size_t i = 0; i < ps.n; i++) free(ps.v[i].payload);
  free(ps.v);
  munmap(sh, sizeof *sh);
  free(ws), free(pf), free(scratch);
  return RS_OK;
}

rs_status rs_run(const rs_run_opts *o, const rs_run_ops *ops, rs_run_result *r) {
  result_init(r);
  if (ops->nprops > RS_RUN_PROPS || ops->nfeatures > RS_RUN_FEATURES || ops->ncounters > RS_RUN_COUNTERS)
    return rs_fail(RS_ERR_TRANSPORT, "%s: more properties, features or counters than the runner holds", o->verb);
  if (o->cases <= 0 && !rs__seconds_ok(o->seconds))
    return rs_fail(RS_ERR_INVALID, "seconds: %g, expected 0 < T <= %.0f (or a case count)", o->seconds, RS_MAX_SECONDS);
  if (o->shard_n > 1 && (o->shard_k < 1 || o->shard_k > o->shard_n))
    return rs_fail(RS_ERR_INVALID, "--shard: %d/%d, expected K/N with 1 <= K <= N", o->shard_k, o->shard_n);
  agg a = {.o = o, .ops = ops, .r = r, .cut = NOLIMIT};
  rs_progress prog;
  rs_progress_init(&prog, o->progress);
  double t0 = rs_now();
  rs_status st = o->dist && rs_run_dist_size(o->dist) > 1 ? rs__run_dist(o, ops, &a, &prog, t0)
                 : o->jobs > 1 ? run_workers(o, ops, &a, &prog, t0) : run_here(o, ops, &a, &prog, t0);
  if (o->progress) rs_progress_update(&prog, r->cases, rs_now() - t0, r->failed_props, 1);
  rs_progress_end(&prog);
  if (st != RS_OK) return st;
  return finish(&a, t0);
}

int rs_run_next_failure(const rs_run_result *r, int nprops, const int *done) {
  int best = -1;
  for (int p = 0; p < nprops; p++)
    if (r->fail[p] && !done[p] && (best < 0 || r->first_fail[p] < r->first_fail[best])) best = p;
  return best;
}

void rs_run_print_crash(const rs_run_result *r, unsigned long long seed) {
  if (!r->crashed) return;
  printf("FAIL crash: %s (case %lld of seed %llu: replay it alone with --jobs 1)\n", r->crash_msg,
         (long long)r->crash_index + 1, seed);
  fflush(stdout);
}

/* ---- --distribute's reach into the runner (runner_int.h; the run itself is in runner_dist.c):
 * an MPI rank's records are added through the forked workers' path ---- */

int64_t rs__run_shard_cases(const rs_run_opts *o) { return shard_cases(o); }
_Static_assert((int)RS__REC_CASE == (int)REC_CASE && (int)RS__REC_ERROR == (int)REC_ERROR, "runner_int.h's record kinds");
size_t rs__run_record_cap(const rs_run_ops *ops) { return (void)ops, sizeof(rs_run_case) + 64; }
size_t rs__run_pack_case(const rs_run_ops *ops, const rs_run_case *rc, char *buf) { return pack_case(ops, rc, buf); }
rs_run_result *rs__run_result(agg *a) { return a->r; }
int64_t rs__run_base(const agg *a) { return a->base; }
int64_t rs__run_cut(const agg *a) { return a->cut; }
void rs__run_cut_at(agg *a, int64_t j, rs_status st, const char *msg) { cut_at(a, j, st, msg); }

struct rs__run_sink {
  agg *a;
  pend_set ps;
  rs_run_case *scratch;
};

rs__run_sink *rs__run_sink_new(agg *a) {
  rs__run_sink *s = calloc(1, sizeof *s);
  if (s && !(s->scratch = malloc(sizeof *s->scratch))) free(s), s = NULL;
  if (s) s->a = a;
  return s;
}

void rs__run_sink_free(rs__run_sink *s) {
  if (!s) return;
  for (size_t i = 0; i < s->ps.n; i++) free(s->ps.v[i].payload);
  free(s->ps.v);
  free(s->scratch);
  free(s);
}

void rs__run_sink_put(rs__run_sink *s, int64_t j, int kind, rs_status st, const char *payload, size_t len) {
  agg *a = s->a;
  if (j < a->base || j >= a->cut || pend_find(&s->ps, j) >= 0) return;
  if (pend_put(&s->ps, j, (uint32_t)kind, (int32_t)st, payload, len)) {
    cut_at(a, a->base, RS_ERR_NOMEM, "out of memory keeping the ranks' records");
    return;
  }
  drain(a, &s->ps, s->scratch, a->ops);
}
