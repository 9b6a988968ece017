/* runner_dist.c - --distribute: the MPI ranks of an mpirun (or srun) share one campaign's case range
 * (runner.h, runner_int.h).
 *
 * Every rank runs the same verb with the same flags, so each holds the same campaign. Rank 0 hands
 * out case positions j (of the shard, rs_run_index) from one counter: a rank asks for as many as it
 * runs in WANT_S plus two of rank 0's cases, and asks again while it still holds that much, so it
 * does not wait for rank 0, which answers between its own cases (it runs cases too, one position at
 * a time). Each rank sends one record per case as soon as the case ran (the forked workers' record,
 * runner_int.h); rank 0 adds them in index order through the runner's own path, so a stop
 * (--max-failures, an error, out of memory, a lost rank) is the same cut at an index as with --jobs
 * (--seconds: see time_cut). Grants from rank 0 rather than the static split j % P == r: the case
 * cost varies and ranks on other machines, or sharing cores, run at other rates; with the static
 * split a fixed-count campaign waits for its slowest rank's whole share. On the loaded 2-core
 * machine the two measured within noise of each other (docs/campaigns.md).
 *
 * Nothing waits on a peer without a deadline: every MPI call that involves one is nonblocking and
 * polled against the silence limit (--timeout, the transports' progress timeout; --case-timeout when
 * it is shorter), apart from MPI_Init itself. A rank that sends nothing for that long, or whose
 * process is gone (ranks on rank 0's host are looked up in /proc every half second), is named, the
 * campaign is cut at the case it held and rs_run returns RS_ERR_TIMEOUT (exit 4); a rank that does
 * not hear from rank 0 for that long fails the same way naming rank 0. Between two campaigns and
 * until rs_run_dist_close, rank 0 shrinks and writes reports without talking to the others: a
 * thread sends them a beat meanwhile (MPI_THREAD_SERIALIZED: the main thread makes no MPI call
 * then), so that they can tell a rank 0 at work from a dead one. MPI_Finalize runs only after every
 * rank acknowledged the end (and under an alarm); after a lost rank the others leave without it, as
 * opt's transports do, since it would wait for the dead peer. */
#define _GNU_SOURCE
#include "runner_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef RS_RUN_MPI

struct rs_run_dist {
  int rank, size;
};

rs_status rs_run_dist_open(rs_run_dist **out) {
  *out = NULL;
  return rs_fail(RS_ERR_UNSUPPORTED, "this reshard was built without MPI (build it where CMake finds an MPI "
                 "library, e.g. Open MPI, with RS_WITH_MPI=ON)");
}

void rs_run_dist_close(rs_run_dist *d) { (void)d; }
int rs_run_dist_rank(const rs_run_dist *d) { return d ? d->rank : 0; }
int rs_run_dist_size(const rs_run_dist *d) { return d ? d->size : 1; }

rs_status rs__run_dist(const rs_run_opts *o, const rs_run_ops *ops, struct agg *a, rs_progress *prog, double t0) {
  (void)o, (void)ops, (void)a, (void)prog, (void)t0;
  return rs_fail(RS_ERR_UNSUPPORTED, "--distribute: this reshard was built without MPI");
}

#else

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>

double rs__comm_timeout(void); /* opt/comm/timeout.c: --timeout, every transport's progress timeout */

#define NOLIMIT INT64_MAX
#define NSEND 16      /* rank 0's messages in flight to one rank */
#define NUP 64        /* a rank's records in flight to rank 0 (one per case: rank 0 takes them
                         between its own cases) */
#define NRANGE 8      /* grants a rank holds at most */
#define WANT_S 0.1    /* a grant is about this much of the asking rank's work */
#define WANT_MAX 1024

enum { TAG_HELLO = 7101, TAG_UP = 7102, TAG_DOWN = 7103 };
/* rank 0 -> a rank */
enum { DOWN_GRANT = 1, DOWN_STOP, DOWN_BYE, DOWN_BEAT, DOWN_FIN };
/* a rank -> rank 0: items of a batch (RS__REC_CASE and RS__REC_ERROR are records) */
enum { UP_WANT = 10, UP_DONE, UP_PING, UP_ACK };

typedef struct hello {
  int32_t pid;
  char host[64];
} hello;

typedef struct down_msg {
  int32_t kind, flag; /* BYE: flag 1 = a clean end */
  int64_t a, b;       /* GRANT: positions [a, b); STOP: no position >= a runs */
  int64_t seq;        /* the campaign (rs_run call) it belongs to */
} down_msg;

typedef struct up_head {
  uint32_t kind;
  int32_t status;
  int64_t j;          /* a record's position; UP_WANT: how many positions */
  uint32_t len;       /* payload bytes */
  uint32_t seq;
} up_head;

/* a batch of records on its way to rank 0 */
typedef struct up_slot {
  char *buf;
  size_t cap;
  MPI_Request req;
} up_slot;

struct rs_run_dist {
  int rank, size;
  int owned;          /* open called MPI_Init */
  int threads;        /* MPI lets another thread call it (MPI_THREAD_SERIALIZED) */
  MPI_Comm comm;
  hello *peer;        /* rank 0: every rank's; another rank: [0] is rank 0's */
  char host[64];
  int broken;         /* a rank died or stalled, or a campaign did not end cleanly: no MPI_Finalize */
  int64_t seq;        /* campaigns run so far */
  double heard0;      /* a rank other than 0: when rank 0 was last heard from */
  MPI_Request rreq;   /* a rank other than 0: the posted receive of rank 0's next message */
  down_msg rbuf;
  up_slot slot[NUP];  /* a rank other than 0: batches in flight (kept from one campaign to the next:
                         rank 0 takes the last ones in its next campaign or at the end) */
  down_msg (*dmsg)[NSEND];   /* rank 0: messages in flight to each rank */
  MPI_Request (*dreq)[NSEND];
  pthread_t beat;            /* rank 0: the beat between campaigns */
  int beating;
  atomic_int beat_stop;
};

/* the silence limit: --timeout, or --case-timeout when that is shorter */
static double silence(const rs_run_opts *o) {
  double t = rs__comm_timeout();
  if (o && o->case_timeout > 0 && o->case_timeout < t) t = o->case_timeout;
  return t;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(void) {
  struct timespec ts = {0, 300 * 1000};
  nanosleep(&ts, NULL);
}

/* Waits for n requests against a deadline (seconds from now); 0 when all completed. */
static int wait_all(MPI_Request *rq, int n, double limit) {
  double t0 = now_s();
  for (;;) {
    int done = 0;
    if (MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) return -1;
    if (done) return 0;
    if (now_s() - t0 > limit) return -1;
    nap();
  }
}

/* What /proc says of rank q's process when it runs on this host: 'X' gone or a zombie, 'T' stopped,
 * another state letter, or '?' (another host, or unknown). */
static char proc_state(const rs_run_dist *d, int q) {
  if (!d->peer || strcmp(d->peer[q].host, d->host) != 0 || d->peer[q].pid <= 0) return '?';
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)d->peer[q].pid);
  FILE *f = fopen(path, "r");
  if (!f) return errno == ENOENT ? 'X' : '?';
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = 0;
  const char *p = strrchr(line, ')');
  if (!p || p[1] != ' ' || !p[2]) return '?';
  char s = p[2];
  return s == 'Z' || s == 'X' ? 'X' : s == 't' ? 'T' : s;
}

/* "rank 2 (pid 123 on node1) died" / "is stopped (SIGSTOP or a debugger) and sent nothing for 3 s"
 * / "sent nothing for 3 s" */
static void describe(const rs_run_dist *d, int q, char st, double quiet, char *out, size_t cap) {
  int n = snprintf(out, cap, "rank %d", q);
  if (d->peer && d->peer[q].pid > 0 && n >= 0 && (size_t)n < cap)
    n += snprintf(out + n, cap - (size_t)n, " (pid %d on %s)", (int)d->peer[q].pid, d->peer[q].host);
  if (n < 0 || (size_t)n >= cap) return;
  if (st == 'X') snprintf(out + n, cap - (size_t)n, " died");
  else if (st == 'T')
    snprintf(out + n, cap - (size_t)n, " is stopped (SIGSTOP or a debugger) and sent nothing for %.1f s", quiet);
  else snprintf(out + n, cap - (size_t)n, " sent nothing for %.1f s", quiet);
}

/* ---- opening and closing the world ---- */

static rs_status hello_all(rs_run_dist *d, double limit) {
  int P = d->size;
  MPI_Request *rq = calloc((size_t)(2 * P), sizeof *rq);
  d->peer = calloc((size_t)P, sizeof *d->peer);
  if (!rq || !d->peer) {
    free(rq);
    return rs_fail(RS_ERR_NOMEM, "--distribute: out of memory");
  }
  hello me = {(int32_t)getpid(), {0}};
  snprintf(me.host, sizeof me.host, "%s", d->host);
  d->peer[d->rank] = me;
  int n = 0;
  for (int q = 0; q < P; q++) {
    if (q == d->rank || (d->rank != 0 && q != 0)) continue;
    MPI_Irecv(&d->peer[q], (int)sizeof(hello), MPI_BYTE, q, TAG_HELLO, d->comm, &rq[n++]);
    MPI_Isend(&me, (int)sizeof(hello), MPI_BYTE, q, TAG_HELLO, d->comm, &rq[n++]);
  }
  int bad = wait_all(rq, n, limit);
  free(rq);
  if (bad)
    return rs_fail(RS_ERR_TIMEOUT, "--distribute: rank %d: the %d ranks did not all answer within %g s (--timeout)",
                   d->rank, P, limit);
  return RS_OK;
}

rs_status rs_run_dist_open(rs_run_dist **out) {
  *out = NULL;
  rs_run_dist *d = calloc(1, sizeof *d);
  if (!d) return rs_fail(RS_ERR_NOMEM, "out of memory");
  d->comm = MPI_COMM_NULL;
  d->rreq = MPI_REQUEST_NULL;
  for (int k = 0; k < NUP; k++) d->slot[k].req = MPI_REQUEST_NULL;
  int inited = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      free(d);
      return rs_fail(RS_ERR_TRANSPORT, "MPI_Init failed");
    }
    d->owned = 1;
  } else {
    MPI_Query_thread(&provided);
  }
  d->threads = provided >= MPI_THREAD_SERIALIZED;
  MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &d->size);
  if (gethostname(d->host, sizeof d->host - 1) != 0) snprintf(d->host, sizeof d->host, "?");
  double limit = silence(NULL);
  /* a communicator of the campaign's own (its messages never meet another library's), made
   * without a blocking collective */
  MPI_Request rq = MPI_REQUEST_NULL;
  rs_status st = RS_OK;
  if (MPI_Comm_idup(MPI_COMM_WORLD, &d->comm, &rq) != MPI_SUCCESS || wait_all(&rq, 1, limit) != 0) {
    st = rs_fail(RS_ERR_TIMEOUT, "--distribute: rank %d: the %d ranks did not all join within %g s (--timeout)",
                 d->rank, d->size, limit);
  } else {
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    if (d->size > 1) st = hello_all(d, limit);
  }
  if (st == RS_OK && d->rank == 0 && d->size > 1) {
    d->dmsg = calloc((size_t)d->size, sizeof *d->dmsg);
    d->dreq = malloc((size_t)d->size * sizeof *d->dreq);
    if (!d->dmsg || !d->dreq) st = rs_fail(RS_ERR_NOMEM, "--distribute: out of memory");
    else
      for (int q = 0; q < d->size; q++)
        for (int k = 0; k < NSEND; k++) d->dreq[q][k] = MPI_REQUEST_NULL;
  }
  if (st == RS_OK && d->rank != 0 &&
      MPI_Irecv(&d->rbuf, (int)sizeof d->rbuf, MPI_BYTE, 0, TAG_DOWN, d->comm, &d->rreq) != MPI_SUCCESS)
    st = rs_fail(RS_ERR_TRANSPORT, "--distribute: rank %d: MPI_Irecv failed", d->rank);
  if (st != RS_OK) {
    /* a peer that does not answer: MPI_Finalize would wait for it; the process leaves without it */
    free(d->peer), free(d->dmsg), free(d->dreq), free(d);
    return st;
  }
  d->heard0 = now_s();
  *out = d;
  return RS_OK;
}

int rs_run_dist_rank(const rs_run_dist *d) { return d ? d->rank : 0; }
int rs_run_dist_size(const rs_run_dist *d) { return d ? d->size : 1; }

/* ---- rank 0's messages to the others ---- */

/* 0 once sent (in flight), -1 when rank q's last NSEND messages did not leave within limit s */
static int down_send(rs_run_dist *d, int q, int kind, int flag, int64_t a, int64_t b, double limit) {
  double t0 = now_s();
  for (;;) {
    for (int k = 0; k < NSEND; k++) {
      int done = 1;
      if (d->dreq[q][k] != MPI_REQUEST_NULL && MPI_Test(&d->dreq[q][k], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -1;
      if (!done) continue;
      d->dmsg[q][k] = (down_msg){kind, flag, a, b, d->seq};
      return MPI_Isend(&d->dmsg[q][k], (int)sizeof(down_msg), MPI_BYTE, q, TAG_DOWN, d->comm, &d->dreq[q][k]) ==
                     MPI_SUCCESS ? 0 : -1;
    }
    if (limit <= 0 || now_s() - t0 > limit) return -1;
    nap();
  }
}

static void *beat_main(void *v) {
  rs_run_dist *d = v;
  double period = silence(NULL) / 4;
  if (period > 1) period = 1;
  while (!atomic_load(&d->beat_stop)) {
    for (int q = 1; q < d->size; q++) down_send(d, q, DOWN_BEAT, 0, 0, 0, 0); /* none free: skip one beat */
    for (double t0 = now_s(); now_s() - t0 < period && !atomic_load(&d->beat_stop);) {
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void beat_start(rs_run_dist *d) {
  if (!d->threads || d->beating) return;
  atomic_store(&d->beat_stop, 0);
  d->beating = pthread_create(&d->beat, NULL, beat_main, d) == 0;
}

static void beat_end(rs_run_dist *d) {
  if (!d->beating) return;
  atomic_store(&d->beat_stop, 1);
  pthread_join(d->beat, NULL);
  d->beating = 0;
}

/* ---- rank 0: hands out positions, runs cases, adds every rank's records ---- */

typedef struct fol {
  double heard, looked;   /* last message from it; last /proc look */
  int done, gone;         /* sent DONE; reported dead or stalled */
  int64_t want;           /* positions it asked for and did not get yet (0: none) */
  int64_t stop_sent;      /* the last STOP it was sent (NOLIMIT: none) */
  int64_t ra[NRANGE], rb[NRANGE]; /* its grants, the positions whose records have not arrived */
  int nr;
} fol;

typedef struct lead {
  rs_run_dist *d;
  const rs_run_opts *o;
  const rs_run_ops *ops;
  struct agg *a;
  rs__run_sink *sink;
  fol *f;
  double limit;
  int64_t next, n;        /* the next position to hand out; positions of the shard */
  double own_t;           /* rank 0's time per case (moving average) */
  int64_t sa, sb;         /* positions rank 0 took back from a rank (steal) */
  char *rbuf;             /* a batch as it arrives */
  size_t rcap;
} lead;

/* a record of position j from rank q arrived: it runs its grants in order, so what it holds starts
 * after j */
static void got_record(fol *f, int64_t j) {
  while (f->nr && f->rb[0] <= j + 1) {
    memmove(f->ra, f->ra + 1, sizeof(int64_t) * (size_t)(f->nr - 1));
    memmove(f->rb, f->rb + 1, sizeof(int64_t) * (size_t)(f->nr - 1));
    f->nr--;
  }
  if (f->nr && f->ra[0] <= j) f->ra[0] = j + 1;
}

/* the grants of a rank told to stop at `end`: positions from end on never come */
static void trim(fol *f, int64_t end) {
  int k = 0;
  for (int i = 0; i < f->nr; i++) {
    int64_t b = f->rb[i] < end ? f->rb[i] : end;
    if (f->ra[i] < b) f->ra[k] = f->ra[i], f->rb[k] = b, k++;
  }
  f->nr = k;
}

/* rank q stalled or died: cut at the case it holds (or at the lowest missing one) */
static void lose(lead *L, int q, char st, double quiet) {
  fol *f = &L->f[q];
  char who[200], m[600];
  describe(L->d, q, st, quiet, who, sizeof who);
  int64_t j = f->nr ? f->ra[0] : rs__run_base(L->a);
  if (j < rs__run_cut(L->a) && j < L->n)
    snprintf(m, sizeof m, "--distribute: %s while it held case %lld; the campaign stops there (the cases before it "
             "count): the stalled or dead rank is %d", who, (long long)rs_run_index(L->o, j) + 1, q);
  else
    snprintf(m, sizeof m, "--distribute: %s: the stalled or dead rank is %d", who, q);
  f->gone = 1;
  L->d->broken = 1;
  if (j < rs__run_cut(L->a)) rs__run_cut_at(L->a, j, RS_ERR_TIMEOUT, m);
  else fprintf(stderr, "reshard %s: %s (after the campaign's last case: the result stands)\n", L->o->verb, m);
}

static void parse_batch(lead *L, int q, const char *p, size_t len) {
  fol *f = &L->f[q];
  size_t off = 0;
  while (len - off >= sizeof(up_head)) {
    up_head h;
    memcpy(&h, p + off, sizeof h);
    off += sizeof h;
    if (h.len > len - off) break;
    const char *pl = p + off;
    off += h.len;
    if (h.seq != (uint32_t)L->d->seq) continue;
    switch (h.kind) {
    case RS__REC_CASE:
    case RS__REC_ERROR:
      got_record(f, h.j);
      rs__run_sink_put(L->sink, h.j, (int)h.kind, h.status, pl, h.len);
      break;
    case UP_WANT: f->want = h.j > 0 ? h.j : 1; break;
    case UP_DONE: f->done = 1; break;
    default: break;
    }
  }
}

/* Takes every batch that arrived. */
static void serve(lead *L) {
  rs_run_dist *d = L->d;
  for (int k = 0; k < 4 * d->size; k++) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status s;
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_UP, d->comm, &flag, &msg, &s) != MPI_SUCCESS || !flag) return;
    int q = s.MPI_SOURCE, cnt = 0;
    MPI_Get_count(&s, MPI_BYTE, &cnt);
    if (cnt < 0) cnt = 0;
    if ((size_t)cnt > L->rcap) {
      char *nb = realloc(L->rbuf, (size_t)cnt);
      if (!nb) {
        rs__run_cut_at(L->a, rs__run_base(L->a), RS_ERR_NOMEM, "--distribute: out of memory receiving records");
        return;
      }
      L->rbuf = nb, L->rcap = (size_t)cnt;
    }
    MPI_Request rq;
    if (MPI_Imrecv(L->rbuf, cnt, MPI_BYTE, &msg, &rq) != MPI_SUCCESS || wait_all(&rq, 1, L->limit) != 0) {
      if (q > 0 && q < d->size && !L->f[q].gone) lose(L, q, proc_state(d, q), L->limit);
      return;
    }
    if (q <= 0 || q >= d->size) continue;
    L->f[q].heard = now_s();
    parse_batch(L, q, L->rbuf, (size_t)cnt);
  }
}

static void grant(lead *L, int q, int64_t end) {
  fol *f = &L->f[q];
  if (!f->want || f->gone || f->nr >= NRANGE || L->next >= end) return;
  int64_t avail = end - L->next, c = f->want;
  if (L->n != NOLIMIT) { /* the tail spread over every rank */
    int64_t fair = avail / L->d->size;
    if (c > fair) c = fair > 0 ? fair : 1;
  }
  if (c > avail) c = avail;
  double us = L->own_t * 1e6; /* rank 0's case time: the asking rank holds enough to outlast one */
  if (down_send(L->d, q, DOWN_GRANT, us > 1e9 ? 1000000000 : (int)us, L->next, L->next + c, L->limit) != 0) {
    lose(L, q, proc_state(L->d, q), L->limit);
    return;
  }
  f->ra[f->nr] = L->next, f->rb[f->nr] = L->next + c, f->nr++;
  L->next += c;
  f->want = 0;
}

/* Nothing left to hand out: rank 0 takes half of what the rank holding the most still has to run
 * (the end of its last grant; the rank is told to stop below it) and runs it, so that the
 * campaign's end does not wait for the slowest rank's grants. A rank that ran a taken case already
 * sends a record rank 0 no longer needs. -1: nothing to take. */
static int64_t steal(lead *L) {
  if (L->sa < L->sb) return L->sa++;
  int best = -1;
  int64_t most = 1; /* the case a rank runs now stays its own */
  for (int q = 1; q < L->d->size; q++) {
    const fol *f = &L->f[q];
    int64_t held = 0;
    for (int i = 0; i < f->nr; i++) held += f->rb[i] - f->ra[i];
    if (!f->gone && held > most) best = q, most = held;
  }
  if (best < 0) return -1;
  fol *f = &L->f[best];
  int last = f->nr - 1;
  int64_t k = most / 2, room = f->rb[last] - f->ra[last] - (last == 0);
  if (k > room) k = room;
  if (k < 1) return -1;
  int64_t x = f->rb[last] - k;
  if (down_send(L->d, best, DOWN_STOP, 0, x, 0, L->limit) != 0) {
    lose(L, best, proc_state(L->d, best), L->limit);
    return -1;
  }
  L->sa = x, L->sb = f->rb[last];
  f->stop_sent = x;
  trim(f, x);
  return L->sa++;
}

/* A timed campaign's cut when the time is up: below the first position nobody runs yet (a grant
 * held in reserve, or rank 0's next), so that the cases in progress still count. Cutting at the
 * lowest missing record instead, as the forked workers do, would drop every rank's grant in
 * progress but the lowest one's (measured on 3 ranks sharing 2 cores: about a third of the
 * cases of a 3-second campaign). Half a second later the cut falls to the lowest missing record
 * all the same. */
static int64_t time_cut(const lead *L) {
  int64_t c = L->next;
  for (int q = 1; q < L->d->size; q++) {
    const fol *f = &L->f[q];
    if (!f->gone && f->nr >= 2 && f->ra[1] < c) c = f->ra[1];
  }
  int64_t base = rs__run_base(L->a);
  return c > base ? c : base;
}

static rs_status lead_run(lead *L, rs_progress *prog, double t0) {
  rs_run_dist *d = L->d;
  const rs_run_opts *o = L->o;
  const rs_run_ops *ops = L->ops;
  rs_run_result *r = rs__run_result(L->a);
  char *buf = malloc(rs__run_record_cap(ops));
  rs_run_case *rc = malloc(sizeof *rc);
  if (!buf || !rc) {
    free(buf), free(rc);
    return rs_fail(RS_ERR_NOMEM, "%s: out of memory", o->verb);
  }
  for (int q = 1; q < d->size; q++) L->f[q] = (fol){.heard = now_s(), .stop_sent = NOLIMIT};
  double beat = L->limit / 4 > 1 ? 1 : L->limit / 4, beat_at = now_s();
  int64_t tcut = -1; /* the cut the time made */
  double own_end = -1; /* the end of rank 0's last case when it runs one after the other */
  double complete = -1; /* when every record up to the cut was in */
  for (;;) {
    double now = now_s();
    if (now - beat_at > beat) { /* a rank that waits for the others' last cases hears that rank 0 lives */
      beat_at = now;
      for (int q = 1; q < d->size; q++)
        if (!L->f[q].gone) down_send(d, q, DOWN_BEAT, 0, 0, 0, 0);
    }
    if (o->cases <= 0 && now - t0 >= o->seconds && rs__run_cut(L->a) == NOLIMIT)
      rs__run_cut_at(L->a, tcut = time_cut(L), RS_OK, NULL);
    /* the grants in progress had their half second */
    if (tcut >= 0 && rs__run_cut(L->a) == tcut && now - t0 >= o->seconds + 0.5)
      rs__run_cut_at(L->a, tcut = rs__run_base(L->a), RS_OK, NULL);
    if (o->stop && rs__run_cut(L->a) == NOLIMIT) {
      const char *m = o->stop(o->stop_ctx);
      if (m) rs__run_cut_at(L->a, rs__run_base(L->a), RS_ERR_TIMEOUT, m);
    }
    serve(L);
    int64_t cut = rs__run_cut(L->a), end = cut < L->n ? cut : L->n;
    int open = 0;
    now = now_s();
    for (int q = 1; q < d->size; q++) {
      fol *f = &L->f[q];
      if (f->gone) continue;
      grant(L, q, end);
      if (!f->gone && L->next >= end && f->stop_sent > end && !f->done) { /* nothing left to hand out */
        if (down_send(d, q, DOWN_STOP, 0, end, 0, L->limit) != 0) lose(L, q, proc_state(d, q), L->limit);
        f->stop_sent = end;
        trim(f, end);
      }
      if (f->gone || f->done) continue;
      open++;
      char st = '?';
      if (now - f->looked > 0.5) f->looked = now, st = proc_state(d, q);
      if (st == 'X' || now - f->heard > L->limit) lose(L, q, st == '?' ? proc_state(d, q) : st, now - f->heard);
    }
    cut = rs__run_cut(L->a), end = cut < L->n ? cut : L->n;
    /* every record up to the cut is in: the others say goodbye, or get half a second to (a rank
     * that gets no CPU must not hold the campaign's end; it hears BYE when it runs again) */
    if (rs__run_base(L->a) >= end && complete < 0) complete = now_s();
    if (complete >= 0 && (!open || now_s() - complete > 0.5)) break;
    int64_t j = -1;
    if (L->next < end) j = L->next++; /* a case of rank 0's own */
    else if (rs__run_base(L->a) < end) j = steal(L);
    if (j >= 0) {
      memset(rc, 0, sizeof *rc);
      rc->index = rs_run_index(o, j);
      rs_clear_error();
      double c0 = own_end >= 0 ? own_end : now_s(); /* from one answer of the others to the next */
      rs_status st = ops->eval(ops->ctx, rc->index, rc);
      if (st != RS_OK) {
        const char *e = rs_last_error();
        rs__run_sink_put(L->sink, j, RS__REC_ERROR, st, e, strnlen(e, 1000));
      } else {
        rs__run_sink_put(L->sink, j, RS__REC_CASE, RS_OK, buf, rs__run_pack_case(ops, rc, buf));
      }
      own_end = now_s();
      L->own_t = L->own_t > 0 ? 0.8 * L->own_t + 0.2 * (own_end - c0) : own_end - c0;
    } else {
      own_end = -1;
      nap(); /* the others' records, or their goodbyes */
    }
    if (o->progress) rs_progress_update(prog, r->cases, now_s() - t0, r->failed_props, 0);
  }
  /* the end of this campaign: every rank that is left hears whether it ended cleanly */
  int clean = !d->broken;
  for (int q = 1; q < d->size; q++)
    if (!L->f[q].gone && down_send(d, q, DOWN_BYE, clean, 0, 0, L->limit) != 0) d->broken = 1;
  for (int q = 1; q < d->size && !d->broken; q++)
    if (wait_all(d->dreq[q], NSEND, L->limit) != 0) d->broken = 1;
  free(buf), free(rc);
  return RS_OK;
}

/* ---- another rank: runs what it is given, sends the records ---- */

typedef struct follow {
  rs_run_dist *d;
  double limit;
  char *cur;              /* the batch being filled */
  size_t n, cap;
  up_slot *slot;          /* d->slot */
  double last_sent;
} follow;

static int up_add(follow *F, uint32_t kind, int32_t status, int64_t j, const char *p, size_t len) {
  size_t need = F->n + sizeof(up_head) + len;
  if (need > F->cap) {
    size_t nc = F->cap ? F->cap : 1 << 16;
    while (nc < need) nc *= 2;
    char *nb = realloc(F->cur, nc);
    if (!nb) return -1;
    F->cur = nb, F->cap = nc;
  }
  up_head h = {kind, status, j, (uint32_t)len, (uint32_t)F->d->seq};
  memcpy(F->cur + F->n, &h, sizeof h);
  if (len) memcpy(F->cur + F->n + sizeof h, p, len);
  F->n = need;
  return 0;
}

/* rank 0's silence: the error of a rank other than 0 */
static rs_status lost_lead(follow *F, char st) {
  char who[200];
  describe(F->d, 0, st, now_s() - F->d->heard0, who, sizeof who);
  F->d->broken = 1;
  return rs_fail(RS_ERR_TIMEOUT, "--distribute: rank %d: %s: the stalled or dead rank is 0", F->d->rank, who);
}

/* completes finished sends; 1 when one did (rank 0 took a batch: it is alive) */
static int up_reap(follow *F) {
  int any = 0;
  for (int k = 0; k < NUP; k++) {
    int done = 0;
    if (F->slot[k].req == MPI_REQUEST_NULL) continue;
    if (MPI_Test(&F->slot[k].req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) any = 1;
  }
  if (any) F->d->heard0 = now_s();
  return any;
}

/* Sends the batch (waiting for a free slot against the silence limit). */
static rs_status up_flush(follow *F) {
  if (!F->n) return RS_OK;
  for (;;) {
    up_reap(F);
    for (int k = 0; k < NUP; k++) {
      up_slot *s = &F->slot[k];
      if (s->req != MPI_REQUEST_NULL) continue;
      char *b = s->buf;
      size_t c = s->cap;
      s->buf = F->cur, s->cap = F->cap;
      F->cur = b, F->cap = c;
      if (MPI_Isend(s->buf, (int)F->n, MPI_BYTE, 0, TAG_UP, F->d->comm, &s->req) != MPI_SUCCESS)
        return rs_fail(RS_ERR_TRANSPORT, "--distribute: rank %d: MPI_Isend failed", F->d->rank);
      F->n = 0;
      F->last_sent = now_s();
      return RS_OK;
    }
    if (now_s() - F->d->heard0 > F->limit) return lost_lead(F, proc_state(F->d, 0));
    nap();
  }
}

/* rank 0's next message, when one arrived (1) */
static int down_take(rs_run_dist *d, down_msg *m) {
  int got = 0;
  if (d->rreq == MPI_REQUEST_NULL || MPI_Test(&d->rreq, &got, MPI_STATUS_IGNORE) != MPI_SUCCESS || !got) return 0;
  *m = d->rbuf;
  d->heard0 = now_s();
  if (MPI_Irecv(&d->rbuf, (int)sizeof d->rbuf, MPI_BYTE, 0, TAG_DOWN, d->comm, &d->rreq) != MPI_SUCCESS)
    d->rreq = MPI_REQUEST_NULL;
  return 1;
}

static rs_status follow_run(follow *F, const rs_run_opts *o, const rs_run_ops *ops, rs_run_result *r) {
  rs_run_dist *d = F->d;
  int64_t ra[NRANGE], rb[NRANGE], stop_at = NOLIMIT, want = 1;
  int nr = 0, asked = 0, stopped = 0, done_sent = 0, bye = -1;
  double per_case = 0, lead_t = 0, last_end = -1, looked = 0, beat = F->limit / 4 > 1 ? 1 : F->limit / 4;
  char *buf = malloc(rs__run_record_cap(ops));
  rs_run_case *rc = malloc(sizeof *rc);
  rs_status st = RS_OK;
  if (!buf || !rc) {
    st = rs_fail(RS_ERR_NOMEM, "%s: out of memory", o->verb);
    goto out;
  }
  F->last_sent = now_s();
  while (bye < 0) {
    down_msg m;
    while (down_take(d, &m)) {
      if (m.kind == DOWN_FIN) {
        d->broken = 1;
        st = rs_fail(RS_ERR_TRANSPORT, "--distribute: rank %d: rank 0 ended before this rank's campaign %lld "
                     "(the ranks ran different campaigns)", d->rank, (long long)d->seq + 1);
        goto out;
      }
      if (m.seq != d->seq) continue;
      if (m.kind == DOWN_GRANT && nr < NRANGE) ra[nr] = m.a, rb[nr] = m.b, nr++, asked = 0, lead_t = m.flag / 1e6;
      else if (m.kind == DOWN_STOP) stop_at = m.a < stop_at ? m.a : stop_at, stopped = 1;
      else if (m.kind == DOWN_BYE) {
        bye = m.flag;
        break; /* what follows belongs to the next campaign or the end */
      }
    }
    if (bye >= 0) break;
    up_reap(F);
    /* the next position it holds below the stop */
    while (nr && (ra[0] >= rb[0] || ra[0] >= stop_at)) {
      memmove(ra, ra + 1, sizeof(int64_t) * (size_t)(nr - 1));
      memmove(rb, rb + 1, sizeof(int64_t) * (size_t)(nr - 1));
      nr--;
    }
    int64_t held = 0;
    for (int i = 0; i < nr; i++) held += rb[i] - ra[i];
    if (!stopped && !asked && held <= want && nr < NRANGE - 1) { /* one grant in reserve */
      if (up_add(F, UP_WANT, 0, want, NULL, 0)) goto nomem;
      asked = 1;
      if ((st = up_flush(F)) != RS_OK) goto out;
    }
    if (nr) {
      int64_t j = ra[0]++;
      double c0 = last_end >= 0 ? last_end : now_s(); /* wall time per case, messages and all */
      memset(rc, 0, sizeof *rc);
      rc->index = rs_run_index(o, j);
      rs_clear_error();
      rs_status es = ops->eval(ops->ctx, rc->index, rc);
      int bad;
      if (es != RS_OK) {
        const char *e = rs_last_error();
        bad = up_add(F, RS__REC_ERROR, es, j, e, strnlen(e, 1000));
      } else {
        bad = up_add(F, RS__REC_CASE, RS_OK, j, buf, rs__run_pack_case(ops, rc, buf));
      }
      if (bad) goto nomem;
      /* each record leaves at once: rank 0 then knows the case a rank holds when it falls silent
       * (measured: no slower than 20 ms batches at 4,000 cases/s of check on 2 ranks) */
      if ((st = up_flush(F)) != RS_OK) goto out;
      last_end = now_s();
      double dt = last_end - c0;
      per_case = per_case > 0 ? 0.8 * per_case + 0.2 * dt : dt;
      /* enough for WANT_S, and to outlast two of rank 0's cases (it answers between them) */
      want = per_case > 0 ? (int64_t)((WANT_S + 2 * lead_t) / per_case) + 1 : WANT_MAX;
      want = want < 1 ? 1 : want > WANT_MAX ? WANT_MAX : want;
      continue;
    }
    last_end = -1;
    /* nothing to run: everything goes out, and rank 0 hears from this rank now and then */
    if (stopped && !done_sent) {
      if (up_add(F, UP_DONE, 0, 0, NULL, 0)) goto nomem;
      done_sent = 1;
    }
    double now = now_s();
    if (!done_sent && !F->n && now - F->last_sent > beat && up_add(F, UP_PING, 0, 0, NULL, 0)) goto nomem;
    if ((st = up_flush(F)) != RS_OK) goto out;
    char ps = '?';
    if (now - looked > 0.5) looked = now, ps = proc_state(d, 0);
    if (ps == 'X' || now - d->heard0 > F->limit) {
      st = lost_lead(F, ps == '?' ? proc_state(d, 0) : ps);
      goto out;
    }
    nap();
  }
  /* batches still in flight stay so: rank 0, past this campaign, takes them in its next one or at
   * the end (a large one cannot leave before it does) */
  if (!bye) d->broken = 1; /* rank 0 lost another rank: it reports, this one leaves quietly */
  r->follower = 1;
  goto out;
nomem:
  st = rs_fail(RS_ERR_NOMEM, "%s: rank %d: out of memory", o->verb, d->rank);
out:
  free(buf), free(rc);
  return st;
}

rs_status rs__run_dist(const rs_run_opts *o, const rs_run_ops *ops, struct agg *a, rs_progress *prog, double t0) {
  rs_run_dist *d = o->dist;
  rs_run_result *r = rs__run_result(a);
  r->jobs = d->size;
  if (d->broken)
    return rs_fail(RS_ERR_TIMEOUT, "--distribute: rank %d: an earlier campaign lost a rank; this one does not start",
                   d->rank);
  d->seq++;
  rs_status st;
  if (d->rank == 0) {
    beat_end(d);
    lead L = {.d = d, .o = o, .ops = ops, .a = a, .limit = silence(o), .n = rs__run_shard_cases(o)};
    L.sink = rs__run_sink_new(a);
    L.f = calloc((size_t)d->size, sizeof *L.f);
    if (!L.sink || !L.f) st = rs_fail(RS_ERR_NOMEM, "%s: out of memory", o->verb);
    else st = lead_run(&L, prog, t0);
    rs__run_sink_free(L.sink);
    free(L.f);
    free(L.rbuf);
    if (!d->broken) beat_start(d);
  } else {
    prog->on = 0; /* rank 0 shows the one progress line */
    follow F = {.d = d, .limit = silence(o)};
    F.slot = d->slot;
    d->heard0 = now_s();
    st = follow_run(&F, o, ops, r);
    free(F.cur);
    r->follower = 1;
  }
  return st;
}

/* ---- the end ---- */

static void finalize_alarm(int sig) {
  (void)sig;
  static const char m[] = "reshard: --distribute: MPI_Finalize did not return in time (a rank died after the "
                          "campaign): leaving without it\n";
  ssize_t w = write(2, m, sizeof m - 1);
  (void)w;
  _exit(4);
}

/* the ends of the campaign: every rank acknowledges rank 0's FIN, then all finalize */
static void lead_close(rs_run_dist *d) {
  double limit = silence(NULL);
  beat_end(d);
  for (int q = 1; q < d->size && !d->broken; q++)
    if (down_send(d, q, DOWN_FIN, 0, 0, 0, limit) != 0) d->broken = 1;
  int acked = 1, left = d->size - 1;
  char *buf = NULL;
  size_t cap = 0;
  for (double t0 = now_s(); !d->broken && left > 0;) {
    int flag = 0, cnt = 0;
    MPI_Message msg;
    MPI_Status s;
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_UP, d->comm, &flag, &msg, &s) != MPI_SUCCESS) break;
    if (!flag) {
      if (now_s() - t0 > limit) break;
      nap();
      continue;
    }
    MPI_Get_count(&s, MPI_BYTE, &cnt);
    if ((size_t)cnt > cap) {
      char *nb = realloc(buf, (size_t)cnt);
      if (!nb) break;
      buf = nb, cap = (size_t)cnt;
    }
    MPI_Request rq;
    if (MPI_Imrecv(buf, cnt, MPI_BYTE, &msg, &rq) != MPI_SUCCESS || wait_all(&rq, 1, limit) != 0) break;
    for (size_t off = 0; off + sizeof(up_head) <= (size_t)cnt;) {
      up_head h;
      memcpy(&h, buf + off, sizeof h);
      off += sizeof h + h.len;
      if (h.kind == UP_ACK) left--;
    }
  }
  free(buf);
  if (left > 0) acked = 0;
  for (int q = 1; q < d->size && !d->broken && acked; q++)
    if (wait_all(d->dreq[q], NSEND, limit) != 0) acked = 0;
  if (!d->broken && !acked) {
    fprintf(stderr, "reshard: --distribute: %d rank(s) did not acknowledge the end within %g s: leaving without "
            "MPI_Finalize\n", left, limit);
    d->broken = 1;
  }
}

static void follow_close(rs_run_dist *d) {
  double limit = silence(NULL), looked = 0;
  while (!d->broken) {
    down_msg m;
    if (down_take(d, &m)) {
      if (m.kind != DOWN_FIN) continue; /* beats */
      /* the acknowledgement, after the last batches (rank 0 takes everything until it has every
       * rank's) */
      up_head h = {UP_ACK, 0, 0, 0, (uint32_t)d->seq};
      MPI_Request rq[NUP + 1];
      for (int k = 0; k < NUP; k++) rq[k] = d->slot[k].req;
      if (MPI_Isend(&h, (int)sizeof h, MPI_BYTE, 0, TAG_UP, d->comm, &rq[NUP]) != MPI_SUCCESS ||
          wait_all(rq, NUP + 1, limit) != 0)
        d->broken = 1;
      for (int k = 0; k < NUP; k++) d->slot[k].req = rq[k];
      return;
    }
    double now = now_s();
    char st = '?';
    if (now - looked > 0.5) looked = now, st = proc_state(d, 0);
    if (now - d->heard0 > limit || st == 'X') {
      char who[200];
      describe(d, 0, st == '?' ? proc_state(d, 0) : st, now - d->heard0, who, sizeof who);
      fprintf(stderr, "reshard: --distribute: rank %d: %s after the campaign: leaving without MPI_Finalize\n", d->rank,
              who);
      d->broken = 1;
      return;
    }
    nap();
  }
}

void rs_run_dist_close(rs_run_dist *d) {
  if (!d) return;
  if (d->size > 1) {
    if (d->rank == 0) lead_close(d);
    else follow_close(d);
  }
  if (!d->broken) {
    if (d->rreq != MPI_REQUEST_NULL) {
      MPI_Cancel(&d->rreq);
      wait_all(&d->rreq, 1, 1.0);
    }
    MPI_Comm_free(&d->comm);
    if (d->owned) {
      /* every rank acknowledged the end a moment ago; should one die now all the same, the alarm
       * ends this process instead of MPI_Finalize's wait for it */
      struct sigaction sa, old;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = finalize_alarm;
      sigaction(SIGALRM, &sa, &old);
      double t = silence(NULL) + 5;
      alarm(t > 3600 ? 3600 : (unsigned)t);
      MPI_Finalize();
      alarm(0);
      sigaction(SIGALRM, &old, NULL);
    }
  }
  if (!d->broken) /* a batch still in flight keeps its buffer (the process leaves without MPI) */
    for (int k = 0; k < NUP; k++) free(d->slot[k].buf);
  free(d->peer);
  free(d->dmsg);
  free(d->dreq);
  free(d);
}

#endif
