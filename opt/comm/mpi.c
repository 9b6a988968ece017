/* comm_mpi.c - the MPI transport: one process per world rank, host memory. A receive posts MPI_Irecv
 * at submit (into its single contiguous view in place, else into a staging buffer); a send is only
 * recorded until the next receive is submitted (or run()): then every recorded staged send is packed
 * in one batch copy (rs_views_copy_batch: the pieces that several messages take from the same source
 * rows are read in one pass, front to back, not once per peer) and all are posted with MPI_Isend,
 * the task id as tag. run() waits, unpacking each staged
 * receive as soon as its requests complete. A single contiguous
 * view travels in place. Staging buffers are kept between runs so that repeated exchanges do not
 * fault in fresh pages. Messages above 1 GiB travel as several same-tag pieces, which MPI's
 * non-overtaking order keeps matched. (MPI derived datatypes instead of packing measured 3-10x
 * slower at 16-64 MiB with Open MPI 4.1's shared memory: a strided message loses the single-copy
 * CMA path and goes through 32 KiB fragments; `reshard bench mpi` shows it as its a2aw column.)
 * Between processes of one node a message of RS_MPI_CMA_MIN bytes or more instead travels by
 * cross-memory attach (cma.c, the `cma` posts below; RS_MPI_CMA=0|1|auto, agreed at start).
 * Nothing here blocks in MPI: run() and the agreement poll their requests against the progress
 * timeout (timeout.c) and, when no request completes for that long, fail naming the peer they
 * waited for. The agreement is a dissemination OR over point-to-point messages on a communicator
 * of its own, so that a stalled rank is named, not just "the allreduce did not finish".
 * The rank waited for may itself be waiting for another (a chain behind one stalled rank): every
 * waiting rank answers progress queries on a third communicator (whom it waits for, since when),
 * and a rank that times out follows the chain before it fails, so that its message ends with the
 * rank that stopped answering: the one that stalled or died, whichever rank's message survives the
 * launcher ending the job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "core/mutant.h"
#include "reshard/opt.h"

#ifdef RS_OPT_MPI
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "comm/cma.h"

#define PIECE ((int64_t)1 << 30)

typedef struct mpi_post {
  int is_recv;
  int32_t peer;
  int64_t bytes;
  char *buf;     /* where the bytes go on the wire */
  int staged;    /* buf is a staging buffer */
  int32_t first, nv;
  int32_t req0, nreq;
  int32_t open;  /* requests not yet completed (a staged receive is unpacked when it reaches 0) */
  int tag;
  int started;   /* its requests are posted */
  int cma;       /* the single-copy path: descriptors, one process_vm_readv/writev, an ack */
  char *desc;    /* cma: this side's descriptor (cma_head, then the views past the head's) */
  char *pdesc;   /* cma: the peer's descriptor (its head; once a tail is due, every view) */
  int64_t pnv;   /* cma: the peer's view count (-1 until its descriptor is complete) */
} mpi_post;

/* The single-copy path (cma.c): between processes on this node, sender and receiver each send the
 * other a descriptor of their views (addresses in their own process) instead of the bytes. Then
 * the receiver reads with process_vm_readv when the sender's list is coarse (runs of CMA_FINE bytes
 * or more on average), else the sender writes with process_vm_writev when the receiver's is, else
 * the sender packs and the receiver reads the packed copy: the remote list, whose every iovec costs
 * the kernel a page-pinning walk, is never a fine one (a strided source read remotely row by row
 * measured 2-4x slower than the same rows as the local list). The copier then sends an empty ack, and the other side's post completes on it: its views stay untouched
 * until then. CMA_K views travel in the head message; more follow in a tail message of the same
 * tag. Sender-to-receiver messages travel on comm, receiver-to-sender ones on back, so that
 * (a -> b, task) and (b -> a, task) never match each other's. */
#define CMA_K 8
typedef struct cma_head {
  int64_t nv;
  rs_view v[CMA_K];
} cma_head;
enum { CMA_MYHEAD, CMA_MYTAIL, CMA_PEERHEAD, CMA_PEERTAIL, CMA_PACKED, CMA_ACK, CMA_NREQ };
/* Runs shorter than this on average make a list "fine": a remote list must not be fine (one
 * page-pinning walk per iovec); when both are, the sender packs and the receiver reads the packed
 * copy (the pack path's two copies, without MPI's fragments). */
#define CMA_FINE 8192

typedef struct mpi_comm {
  rs_comm base;
  MPI_Comm comm;
  int rank;
  int64_t tag_ub;
  mpi_post *post;
  int64_t npost, cappost;
  rs_view *pool;
  int64_t npool, cappool;
  MPI_Request *req;
  int64_t nreq, capreq;
  char **stage;          /* stage[i]: staging buffer of the i-th staged post of a run */
  rs_view *pk_d, *pk_s;  /* the pack batch of the sends: staging views <- source views */
  int64_t cappk_d, cappk_s;
  int64_t sends_from;    /* posts before this index are started (or receives) */
  int64_t *stage_cap;
  int64_t nstage, capstage, used_stage;
  MPI_Comm back;         /* the single-copy path's receiver-to-sender messages */
  int cma_on;            /* every rank agreed that process_vm_readv works between node peers */
  int64_t cma_min;       /* messages of fewer bytes travel as data */
  int32_t *pid;          /* pid[q]: world rank q's process id when it shares this node, else 0 */
} mpi_comm;

static int64_t g_cma_reads, g_cma_writes, g_cma_bytes; /* copies by receivers, by senders */
static int64_t g_cma_packed;                           /* sends packed for a read (both lists fine) */
static double g_cma_secs;                              /* inside the kernel copies */
static char g_cma_state[160] = "off (the MPI transport is not started)";

static MPI_Comm g_agree = MPI_COMM_NULL; /* the agreement's own communicator */
static int g_rank, g_size;

/* ---- the wait chain: progress queries between waiting ranks ----
 * g_probe carries queries (tag Q_TAG, one int, the asker's rank) and answers (tag A_TAG: whom the
 * answering rank waits for, -1 when none, the ms since its last completed transfer, and the longest
 * gap in ms between two turns of its own wait loop since then: a rank that was stopped (SIGSTOP, a
 * debugger) or starved of CPU and runs again, e.g. when the launcher sends SIGCONT before ending the
 * job, knows it did not run, and says so instead of passing the blame on). Each rank keeps one
 * receive for a query posted; wait loops serve it (answer, post the next). */
enum { Q_TAG = 1, A_TAG = 2 };
static MPI_Comm g_probe = MPI_COMM_NULL;
static MPI_Request g_q_req = MPI_REQUEST_NULL;
static int g_q_buf;
static int32_t (*g_answer)[3];        /* g_answer[q]: the answer last sent to rank q (kept for its send) */
static int32_t g_waits_for = -1;      /* the rank this process waits for now (-1: not in a wait) */
static double g_progress = 0;         /* the clock of this process's last completed transfer */
static double g_gap = 0;              /* the longest gap between two turns of the wait loop since then */

static void serve_queries(void) {
  if (g_q_req == MPI_REQUEST_NULL) return;
  for (int k = 0; k < 64; ++k) { /* at most a few asks are ever queued; bounded all the same */
    int got = 0;
    MPI_Status stt;
    if (MPI_Test(&g_q_req, &got, &stt) != MPI_SUCCESS || !got) return;
    int q = stt.MPI_SOURCE;
    if (q >= 0 && q < g_size && g_answer) {
      double ms = (rs__comm_clock() - g_progress) * 1e3;
      g_answer[q][0] = g_waits_for;
      g_answer[q][1] = (int32_t)(ms > 2e9 ? 2e9 : ms);
      g_answer[q][2] = (int32_t)(g_gap * 1e3 > 2e9 ? 2e9 : g_gap * 1e3);
      MPI_Request r;
      if (MPI_Isend(g_answer[q], 3, MPI_INT32_T, q, A_TAG, g_probe, &r) == MPI_SUCCESS) MPI_Request_free(&r);
    }
    if (MPI_Irecv(&g_q_buf, 1, MPI_INT, MPI_ANY_SOURCE, Q_TAG, g_probe, &g_q_req) != MPI_SUCCESS) {
      g_q_req = MPI_REQUEST_NULL;
      return;
    }
  }
}

/* Ask rank `peer` whom it waits for, for at most `limit` s (serving queries meanwhile). 1 with
 * ans[0] (-1: none), ans[1] (ms since its last progress) and ans[2] (its longest gap between two
 * turns of its wait loop, ms), 0 when it did not answer. */
static int ask_peer(int peer, double limit, int32_t ans[3]) {
  static int32_t in[3];        /* static: an unanswered receive is left posted (the process fails) */
  static int me;
  MPI_Request rq, sq;
  me = g_rank;
  if (MPI_Irecv(in, 3, MPI_INT32_T, peer, A_TAG, g_probe, &rq) != MPI_SUCCESS) return 0;
  if (MPI_Isend(&me, 1, MPI_INT, peer, Q_TAG, g_probe, &sq) != MPI_SUCCESS) return 0;
  MPI_Request_free(&sq);
  double t0 = rs__comm_clock();
  for (;;) {
    int got = 0;
    if (MPI_Test(&rq, &got, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
    if (got) {
      ans[0] = in[0], ans[1] = in[1], ans[2] = in[2];
      return 1;
    }
    serve_queries();
    double now = rs__comm_clock();
    if (now - t0 > limit) return 0;
    rs__comm_backoff(now - t0 < 1e-3 ? 0 : 1.5); /* sleep 1 ms between tests */
  }
}

/* Follow the chain of waits from `peer` (the rank this one timed out on) and write where it ends:
 * "; rank 2 waits for rank 1 (3.1 s); rank 1 does not answer: the stalled or dead rank is 1". */
static void wait_chain(int peer, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  if (g_probe == MPI_COMM_NULL || peer < 0 || peer >= g_size) return;
  double limit = rs__comm_timeout() / 2;
  if (limit > 2) limit = 2;
  if (limit < 0.25) limit = 0.25;
  int seen[64], nseen = 0;
  seen[nseen++] = g_rank;
  for (int hop = 0; hop < 64 && n < cap; ++hop) {
    int32_t ans[3];
    if (!ask_peer(peer, limit, ans)) {
      snprintf(out + n, cap - n, "; rank %d does not answer a progress query in %g s: the stalled or dead rank is %d",
               peer, limit, peer);
      return;
    }
    if (ans[2] > 1000 * limit) { /* it did not run for longer than a query's wait: it was stopped */
      snprintf(out + n, cap - n, "; rank %d did not run for %.1f s itself (stopped, or starved of CPU): the stalled "
               "or dead rank is %d", peer, ans[2] / 1e3, peer);
      return;
    }
    if (ans[0] < 0) {
      snprintf(out + n, cap - n, "; rank %d answers and waits for nobody (last progress %.1f s ago): it is busy, "
               "not stalled", peer, ans[1] / 1e3);
      return;
    }
    n += (size_t)snprintf(out + n, cap - n, "; rank %d waits for rank %d (%.1f s)", peer, (int)ans[0], ans[1] / 1e3);
    for (int i = 0; i < nseen; ++i)
      if (seen[i] == ans[0]) {
        if (n < cap) snprintf(out + n, cap - n, ": a cycle of waits (a deadlock), no rank stalled");
        return;
      }
    if (nseen < 64) seen[nseen++] = peer;
    peer = ans[0];
    if (peer < 0 || peer >= g_size) return;
  }
}

int rs_mpi_available(void) { return 1; }

static const char *mpi_errstr(int rc, char *buf) {
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, 64, "MPI error %d", rc);
  return buf;
}

/* Poll reqs[0..n) until all complete. A request that errs, or no completion for the timeout, fails
 * with RS_ERR_TIMEOUT; peer_of(i) names the rank request i waits on, is_recv_of(i) its direction. */
typedef struct wait_ctx {
  const char *what; /* "exchange", "agreement" */
  int32_t (*peer_of)(void *, int);
  int (*is_recv_of)(void *, int);
  void *self;
  rs_status (*done)(void *, int); /* request i completed (NULL: nothing to do); may post requests
                                   * into slots of req that were MPI_REQUEST_NULL */
} wait_ctx;

static rs_status wait_requests(MPI_Request *req, int n, const wait_ctx *w) {
  if (!n) return RS_OK;
  rs_status st = rs__comm_check();
  if (st) return st;
  int *idx = malloc(sizeof(int) * (size_t)n);
  MPI_Status *sts = malloc(sizeof(MPI_Status) * (size_t)n);
  if (!idx || !sts) {
    free(idx);
    free(sts);
    return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
  }
  double limit = rs__comm_timeout(), last = rs__comm_clock();
  int left = n;
  char eb[MPI_MAX_ERROR_STRING + 64];
  g_progress = last;
  g_gap = 0;
  double turn = last;
  while (left > 0) {
    int done = 0;
    int rc = MPI_Testsome(n, req, &done, idx, sts);
    if (rc != MPI_SUCCESS) {
      int bad = -1;
      for (int k = 0; rc == MPI_ERR_IN_STATUS && k < done && bad < 0; ++k)
        if (sts[k].MPI_ERROR != MPI_SUCCESS) bad = k;
      int32_t peer = bad >= 0 ? w->peer_of(w->self, idx[bad]) : -1;
      st = rs__comm_fail("mpi: rank %d: the %s with rank %d failed (%s): a peer died or the network broke",
                         g_rank, w->what, peer, mpi_errstr(bad >= 0 ? sts[bad].MPI_ERROR : rc, eb));
      break;
    }
    if (done == MPI_UNDEFINED) break;
    double now = rs__comm_clock();
    if (now - turn > g_gap) g_gap = now - turn;
    turn = now;
    if (done > 0) {
      for (int k = 0; w->done && k < done && !st; ++k) st = w->done(w->self, idx[k]);
      if (st) break;
      left -= done;
      last = g_progress = now;
      g_gap = 0;
      continue;
    }
    /* name a receive still open (the peer whose data never came), else a send */
    int pick = -1;
    for (int i = 0; i < n && pick < 0; ++i)
      if (req[i] != MPI_REQUEST_NULL && w->is_recv_of(w->self, i)) pick = i;
    for (int i = 0; i < n && pick < 0; ++i)
      if (req[i] != MPI_REQUEST_NULL) pick = i;
    g_waits_for = pick >= 0 ? w->peer_of(w->self, pick) : -1;
    if (now - last > 0.05) serve_queries(); /* only once a wait is slow: no cost on the fast path */
    if (now - last > limit && !RS_MUTANT(902)) { /* 902: the progress timeout is never checked */
      char chain[400];
      if (RS_MUTANT(904)) chain[0] = 0; /* 904: the chain of waits is not followed */
      else wait_chain(g_waits_for, chain, sizeof chain);
      st = rs__comm_fail("mpi: rank %d waited %g s for rank %d (%s %s it, %d of %d transfers open)%s%s (--timeout)",
                         g_rank, limit, g_waits_for, w->what,
                         pick >= 0 && w->is_recv_of(w->self, pick) ? "receiving from" : "sending to", left, n,
                         chain, chain[0] ? "" : ": the peer is stalled or dead");
      break;
    }
    rs__comm_backoff(now - last);
  }
  g_waits_for = -1;
  free(idx);
  free(sts);
  return st;
}

typedef struct bcast_ctx { const int32_t *peer; int recv; } bcast_ctx;
static int32_t bcast_peer(void *self, int i) { return ((bcast_ctx *)self)->peer[i]; }
static int bcast_is_recv(void *self, int i) { (void)i; return ((bcast_ctx *)self)->recv; }

/* The agreement's requests: [0] the receive from `from`, [1] the send to `to`. */
typedef struct agree_pair { int32_t from, to; } agree_pair;
static int32_t agree_peer(void *self, int i) { agree_pair *p = self; return i == 0 ? p->from : p->to; }
static int agree_is_recv(void *self, int i) { (void)self; return i == 0; }

/* Dissemination: in round k every rank sends what it knows to rank + 2^k and ORs in what rank - 2^k
 * sends; after ceil(log2 size) rounds every rank holds the OR of all. The OR is bitwise, so one
 * agreement carries several flags as bits (a 0/1 flag stays 0/1). */
static rs_status agree_or(int *flag) {
  /* static: a round abandoned on a timeout leaves its requests pointing here, not at a dead frame */
  static int in[32], out[32];
  rs_status st = rs__comm_check();
  if (st) return st;
  int v = *flag;
  for (int k = 1, round = 0; k < g_size; k <<= 1, ++round) {
    agree_pair p = {(int32_t)((g_rank - k + g_size) % g_size), (int32_t)((g_rank + k) % g_size)};
    in[round] = 0;
    out[round] = v;
    MPI_Request r[2];
    if (MPI_Irecv(&in[round], 1, MPI_INT, p.from, round, g_agree, &r[0]) != MPI_SUCCESS ||
        MPI_Isend(&out[round], 1, MPI_INT, p.to, round, g_agree, &r[1]) != MPI_SUCCESS)
      return rs__comm_fail("mpi: rank %d: posting the agreement failed", g_rank);
    wait_ctx w = {"agreement", agree_peer, agree_is_recv, &p, NULL};
    if ((st = wait_requests(r, 2, &w))) return st;
    v |= in[round];
  }
  *flag = v;
  return RS_OK;
}

rs_status rs_mpi_start(int *argc, char ***argv, int *rank, int *size, int *owned) {
  int inited = 0;
  *owned = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      return rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Init failed");
    *owned = 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  g_rank = *rank;
  g_size = *size;
  if (g_agree == MPI_COMM_NULL) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &g_agree) != MPI_SUCCESS)
      return rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(g_agree, MPI_ERRORS_RETURN);
  }
  if (g_probe == MPI_COMM_NULL) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &g_probe) != MPI_SUCCESS)
      return rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(g_probe, MPI_ERRORS_RETURN);
    g_answer = calloc((size_t)g_size, sizeof *g_answer);
    if (!g_answer) return rs_fail(RS_ERR_NOMEM, "mpi: out of memory");
    if (MPI_Irecv(&g_q_buf, 1, MPI_INT, MPI_ANY_SOURCE, Q_TAG, g_probe, &g_q_req) != MPI_SUCCESS)
      g_q_req = MPI_REQUEST_NULL;
    g_progress = rs__comm_clock();
  }
  return RS_OK;
}

void rs_mpi_stop(int owned) {
  int fin = 0;
  MPI_Finalized(&fin);
  /* after a peer failure MPI_Finalize would wait for that peer: leave it to process exit */
  if (fin || rs__comm_failure()) return;
  if (g_agree != MPI_COMM_NULL) MPI_Comm_free(&g_agree);
  if (g_q_req != MPI_REQUEST_NULL) {
    MPI_Cancel(&g_q_req);
    MPI_Wait(&g_q_req, MPI_STATUS_IGNORE);
  }
  if (g_probe != MPI_COMM_NULL) MPI_Comm_free(&g_probe);
  free(g_answer);
  g_answer = NULL;
  if (owned) MPI_Finalize();
}

rs_status rs_mpi_allreduce_or(int *flag) {
  if (g_agree == MPI_COMM_NULL) return rs_fail(RS_ERR_TRANSPORT, "mpi: the world is not started");
  return agree_or(flag);
}

rs_status rs_mpi_barrier(void) {
  int f = 0;
  return rs_mpi_allreduce_or(&f);
}

rs_status rs_mpi_bcast(void *buf, int bytes, int root) {
  if (g_agree == MPI_COMM_NULL) return rs_fail(RS_ERR_TRANSPORT, "mpi: the world is not started");
  if (rs__comm_check()) return RS_ERR_TIMEOUT;
  int n = g_rank == root ? g_size - 1 : 1, k = 0;
  MPI_Request *r = malloc(sizeof(MPI_Request) * (size_t)(n ? n : 1));
  int32_t *peer = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  if (!r || !peer) {
    free(r);
    free(peer);
    return rs_fail(RS_ERR_NOMEM, "mpi: out of memory");
  }
  int rc = MPI_SUCCESS;
  if (g_rank != root) {
    peer[k] = root;
    rc = MPI_Irecv(buf, bytes, MPI_BYTE, root, 1 << 14, g_agree, &r[k++]);
  } else {
    for (int q = 0; q < g_size && rc == MPI_SUCCESS; ++q)
      if (q != root) {
        peer[k] = q;
        rc = MPI_Isend(buf, bytes, MPI_BYTE, q, 1 << 14, g_agree, &r[k++]);
      }
  }
  bcast_ctx x = {peer, g_rank != root};
  wait_ctx w = {"broadcast", bcast_peer, bcast_is_recv, &x, NULL};
  rs_status st = rc != MPI_SUCCESS ? rs__comm_fail("mpi: rank %d: posting a broadcast failed", g_rank)
                                   : wait_requests(r, k, &w);
  free(r);
  free(peer);
  return st;
}

static rs_status grow(void **p, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return RS_OK;
  int64_t nc = *cap ? *cap * 2 : 64;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, elem * (size_t)nc);
  if (!q) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
  *p = q;
  *cap = nc;
  return RS_OK;
}

static char *take_stage(mpi_comm *m, int64_t bytes) {
  int64_t i = m->used_stage++;
  if (i >= m->nstage) {
    if (i >= m->capstage) {
      int64_t nc = m->capstage ? m->capstage * 2 : 64;
      char **s = realloc(m->stage, sizeof(char *) * (size_t)nc);
      if (!s) return NULL;
      m->stage = s;
      int64_t *c = realloc(m->stage_cap, sizeof(int64_t) * (size_t)nc);
      if (!c) return NULL;
      m->stage_cap = c;
      m->capstage = nc;
    }
    m->stage[i] = NULL;
    m->stage_cap[i] = 0;
    m->nstage = i + 1;
  }
  if (m->stage_cap[i] < bytes) {
    free(m->stage[i]);
    m->stage[i] = malloc((size_t)(bytes ? bytes : 1));
    m->stage_cap[i] = m->stage[i] ? bytes : 0;
  }
  return m->stage[i];
}

static int single_contig(const rs_view *v, int nv) {
  if (nv != 1) return 0;
  int64_t s = v->esize;
  for (int d = v->ndim - 1; d >= 0; --d) {
    if (v->size[d] != 1 && v->stride[d] != s) return 0;
    s *= v->size[d];
  }
  return 1;
}

/* Post p's MPI requests: its bytes in pieces of at most PIECE. */
static rs_status start(mpi_comm *m, mpi_post *p) {
  p->started = 1;
  if (p->cma) {
    MPI_Request *r = &m->req[p->req0];
    MPI_Comm out = p->is_recv ? m->back : m->comm, in = p->is_recv ? m->comm : m->back;
    int rc = MPI_Irecv(p->pdesc, (int)sizeof(cma_head), MPI_BYTE, p->peer, p->tag, in, &r[CMA_PEERHEAD]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(p->desc, (int)sizeof(cma_head), MPI_BYTE, p->peer, p->tag, out, &r[CMA_MYHEAD]);
    if (rc == MPI_SUCCESS && p->nv > CMA_K)
      rc = MPI_Isend(p->desc + sizeof(cma_head), (int)(sizeof(rs_view) * (size_t)(p->nv - CMA_K)), MPI_BYTE,
                     p->peer, p->tag, out, &r[CMA_MYTAIL]);
    if (rc != MPI_SUCCESS) return rs_fail(RS_ERR_TRANSPORT, "mpi: posting tag %d to rank %d failed", p->tag, p->peer);
    return RS_OK;
  }
  for (int32_t k = 0; k < p->nreq; ++k) {
    int64_t off = k * PIECE, len = p->bytes - off < PIECE ? p->bytes - off : PIECE;
    MPI_Request *r = &m->req[p->req0 + k];
    int rc = p->is_recv ? MPI_Irecv(p->buf + off, (int)len, MPI_BYTE, p->peer, p->tag, m->comm, r)
                        : MPI_Isend(p->buf + off, (int)len, MPI_BYTE, p->peer, p->tag, m->comm, r);
    if (rc != MPI_SUCCESS) return rs_fail(RS_ERR_TRANSPORT, "mpi: posting tag %d to rank %d failed", p->tag, p->peer);
  }
  return RS_OK;
}

/* Start the sends recorded since the last flush: pack the staged ones in one batch copy, then post
 * them all. */
static rs_status flush_sends(mpi_comm *m) {
  int64_t n = 0;
  for (int64_t i = m->sends_from; i < m->npost; ++i)
    if (!m->post[i].is_recv && m->post[i].staged && !m->post[i].cma) n += m->post[i].nv;
  rs_status st = RS_OK;
  if (n && ((st = grow((void **)&m->pk_d, &m->cappk_d, n, sizeof(rs_view))) ||
            (st = grow((void **)&m->pk_s, &m->cappk_s, n, sizeof(rs_view)))))
    return st;
  int64_t k = 0;
  for (int64_t i = m->sends_from; i < m->npost; ++i) {
    const mpi_post *p = &m->post[i];
    if (p->is_recv || !p->staged || p->cma) continue;
    int64_t off = 0;
    for (int32_t j = 0; j < p->nv; ++j, ++k) {
      const rs_view *v = &m->pool[p->first + j];
      rs_view_packed(&m->pk_d[k], p->buf + off, v->esize, v->ndim, v->size);
      m->pk_s[k] = *v;
      off += rs_view_bytes(v);
    }
  }
  if (n && (st = rs_views_copy_batch(m->pk_d, m->pk_s, n))) return st;
  for (int64_t i = m->sends_from; i < m->npost && !st; ++i)
    if (!m->post[i].started) st = start(m, &m->post[i]);
  m->sends_from = m->npost;
  return st;
}

static rs_status post(mpi_comm *m, int is_recv, int32_t peer, int64_t task, const rs_view *v, int nv) {
  /* after a peer failure no MPI call is made again (MPI would progress the abandoned requests) */
  rs_status st = rs__comm_check();
  if (st) return st;
  if ((st = grow((void **)&m->post, &m->cappost, m->npost + 1, sizeof(mpi_post))) ||
      (st = grow((void **)&m->pool, &m->cappool, m->npool + nv, sizeof(rs_view))))
    return st;
  mpi_post *p = &m->post[m->npost++];
  p->is_recv = is_recv;
  p->peer = peer;
  p->first = (int32_t)m->npool;
  p->nv = nv;
  p->bytes = 0;
  for (int i = 0; i < nv; ++i) {
    m->pool[m->npool++] = v[i];
    p->bytes += rs_view_bytes(&v[i]);
  }
  p->cma = m->cma_on && m->pid[peer] && p->bytes >= m->cma_min && p->bytes > 0;
  p->staged = !p->cma && !single_contig(v, nv);
  p->desc = NULL;
  if (p->cma) {
    /* this side's descriptor: its views (addresses in this process); room for the peer's head */
    size_t dbytes = sizeof(cma_head) + (nv <= CMA_K ? 0 : sizeof(rs_view) * (size_t)(nv - CMA_K));
    p->desc = take_stage(m, (int64_t)dbytes);
    p->pdesc = take_stage(m, (int64_t)sizeof(cma_head));
    if (!p->desc || !p->pdesc) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
    p->buf = NULL;
    p->pnv = -1;
    cma_head *h = (cma_head *)p->desc;
    memset(h, 0, sizeof *h);
    h->nv = nv;
    memcpy(h->v, v, sizeof(rs_view) * (size_t)(nv < CMA_K ? nv : CMA_K));
    if (nv > CMA_K) memcpy(p->desc + sizeof(cma_head), v + CMA_K, sizeof(rs_view) * (size_t)(nv - CMA_K));
  } else if (p->staged) {
    p->buf = take_stage(m, p->bytes);
    if (!p->buf) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
  } else {
    p->buf = v->base;
  }
  int64_t pieces = p->cma ? CMA_NREQ : p->bytes ? (p->bytes + PIECE - 1) / PIECE : 1;
  if ((st = grow((void **)&m->req, &m->capreq, m->nreq + pieces, sizeof(MPI_Request)))) return st;
  p->req0 = (int32_t)m->nreq;
  p->nreq = p->open = (int32_t)pieces;
  p->tag = (int)(task % (m->tag_ub + 1));
  for (int64_t k = 0; k < pieces; ++k) m->req[m->nreq++] = MPI_REQUEST_NULL;
  p->started = 0;
  if (!is_recv) return RS_OK;
  /* the first receive after a run of sends starts them (after posting itself): a caller that
   * submits its sends, then its receives, then copies locally (exec.c) has every message on the
   * wire before its local work, so its peers can pull from it meanwhile */
  st = start(m, p);
  return st ? st : flush_sends(m);
}

static rs_status mpi_send(rs_comm *c, int32_t from, int32_t to, int64_t task, const rs_view *v, int nv) {
  mpi_comm *m = (mpi_comm *)c;
  if (from != m->rank)
    return rs_fail(RS_ERR_TRANSPORT, "mpi transport: rank %d cannot send for rank %d", m->rank, from);
  return post(m, 0, to, task, v, nv);
}

static rs_status mpi_recv(rs_comm *c, int32_t to, int32_t from, int64_t task, const rs_view *v, int nv) {
  mpi_comm *m = (mpi_comm *)c;
  if (to != m->rank)
    return rs_fail(RS_ERR_TRANSPORT, "mpi transport: rank %d cannot receive for rank %d", m->rank, to);
  return post(m, 1, from, task, v, nv);
}

/* request i of a run -> its post (posts hold consecutive request ranges) */
static const mpi_post *post_of_req(const mpi_comm *m, int i) {
  int64_t lo = 0, hi = m->npost - 1;
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) / 2;
    if (m->post[mid].req0 <= i) lo = mid;
    else hi = mid - 1;
  }
  return &m->post[lo];
}
static int32_t run_peer(void *self, int i) { return post_of_req(self, i)->peer; }
static int run_is_recv(void *self, int i) { return post_of_req(self, i)->is_recv; }

/* A single-copy post's step: when the peer's head arrives, post the receive of its tail (a
 * descriptor of more than CMA_K views) or decide; when the tail arrives, decide. The side with more
 * runs copies straight between its views and the peer's, then acks; the other waits for the ack. */
static rs_status cma_step(mpi_comm *m, mpi_post *p, int slot) {
  if (slot == CMA_MYHEAD || slot == CMA_MYTAIL || slot == CMA_ACK || (slot == CMA_PACKED && !p->is_recv))
    return RS_OK; /* own descriptor sent, or the ack */
  MPI_Comm out = p->is_recv ? m->back : m->comm, in = p->is_recv ? m->comm : m->back;
  cma_head *h = (cma_head *)p->pdesc;
  if (slot == CMA_PEERHEAD && h->nv > CMA_K) {
    if (h->nv > INT32_MAX / (int64_t)sizeof(rs_view))
      return rs__comm_fail("mpi: rank %d: a descriptor of %lld views from rank %d", g_rank, (long long)h->nv, p->peer);
    char *all = take_stage(m, (int64_t)sizeof(rs_view) * h->nv);
    if (!all) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
    memcpy(all, h->v, sizeof h->v);
    p->pnv = h->nv;
    p->pdesc = all; /* from now on every view, the head's first */
    int rc = MPI_Irecv(all + sizeof h->v, (int)(sizeof(rs_view) * (size_t)(h->nv - CMA_K)), MPI_BYTE, p->peer,
                       p->tag, in, &m->req[p->req0 + CMA_PEERTAIL]);
    if (rc != MPI_SUCCESS) return rs__comm_fail("mpi: rank %d: posting tag %d from rank %d failed", g_rank, p->tag, p->peer);
    return RS_OK;
  }
  /* the peer's head (or the packed copy's), or with a tail every view */
  const rs_view *pv = slot == CMA_PEERTAIL ? (const rs_view *)p->pdesc : h->v;
  int64_t np = slot == CMA_PEERTAIL ? p->pnv : h->nv, pb = 0;
  for (int64_t k = 0; k < np; ++k) pb += rs_view_bytes(&pv[k]);
  if (np < 0 || pb != p->bytes)
    return rs__comm_fail("mpi: rank %d: rank %d describes %lld bytes for tag %d, this side holds %lld",
                         g_rank, p->peer, (long long)pb, p->tag, (long long)p->bytes);
  const rs_view *mine = &m->pool[p->first];
  MPI_Request *ack = &m->req[p->req0 + CMA_ACK];
  /* the copier: the receiver when the sender's list is coarse (or sent packed), else the sender */
  int copier = 1;
  if (slot != CMA_PACKED) { /* else the receiver of a packed copy: read it */
    int64_t rm = rs__cma_runs(mine, p->nv), rp = rs__cma_runs(pv, np);
    int64_t rs_ = p->is_recv ? rp : rm, rr = p->is_recv ? rm : rp;
    int fine_s = rs_ * CMA_FINE > p->bytes, fine_r = rr * CMA_FINE > p->bytes;
    copier = p->is_recv ? !fine_s : fine_s;
    if (fine_s && fine_r) {
      MPI_Request *pk = &m->req[p->req0 + CMA_PACKED];
      char *d = take_stage(m, (int64_t)sizeof(cma_head));
      if (!d) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
      p->pdesc = d;
      int rc;
      if (p->is_recv) {
        rc = MPI_Irecv(d, (int)sizeof(cma_head), MPI_BYTE, p->peer, p->tag, in, pk);
      } else {
        char *buf = take_stage(m, p->bytes);
        if (!buf) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
        rs_views_pack(buf, mine, p->nv);
        cma_head *ph = (cma_head *)d;
        memset(ph, 0, sizeof *ph);
        ph->nv = 1;
        rs_view_packed(&ph->v[0], buf, 1, 1, &p->bytes);
        rc = MPI_Isend(d, (int)sizeof(cma_head), MPI_BYTE, p->peer, p->tag, out, pk);
        if (rc == MPI_SUCCESS) rc = MPI_Irecv(NULL, 0, MPI_BYTE, p->peer, p->tag, in, ack);
        ++g_cma_packed;
      }
      if (rc != MPI_SUCCESS) return rs__comm_fail("mpi: rank %d: posting tag %d with rank %d failed", g_rank, p->tag, p->peer);
      return RS_OK;
    }
  }
  if (!copier) {
    if (MPI_Irecv(NULL, 0, MPI_BYTE, p->peer, p->tag, in, ack) != MPI_SUCCESS)
      return rs__comm_fail("mpi: rank %d: posting an ack from rank %d failed", g_rank, p->peer);
    return RS_OK;
  }
  double t0 = rs__comm_clock();
  int e = rs__cma_copy((pid_t)m->pid[p->peer], !p->is_recv, mine, p->nv, pv, np);
  g_cma_secs += rs__comm_clock() - t0;
  if (e)
    return rs__comm_fail("mpi: rank %d: %s rank %d's memory (process_vm_%s, pid %d) failed: %s", g_rank,
                         p->is_recv ? "reading" : "writing", p->peer, p->is_recv ? "readv" : "writev",
                         (int)m->pid[p->peer], strerror(e));
  ++*(p->is_recv ? &g_cma_reads : &g_cma_writes);
  g_cma_bytes += p->bytes;
  if (MPI_Isend(NULL, 0, MPI_BYTE, p->peer, p->tag, out, ack) != MPI_SUCCESS)
    return rs__comm_fail("mpi: rank %d: posting an ack to rank %d failed", g_rank, p->peer);
  return RS_OK;
}

/* A staged receive is unpacked as soon as its last request completes, while the others are still
 * in flight, not after all of them. */
static rs_status run_done(void *self, int i) {
  mpi_post *p = (mpi_post *)post_of_req(self, i);
  if (p->cma) return cma_step((mpi_comm *)self, p, i - p->req0);
  if (--p->open > 0 || !p->is_recv || !p->staged) return RS_OK;
  /* Mutant 267: a staged receive of several views never unpacks its last view. */
  int nv = RS_MUTANT(267) && p->nv > 1 ? p->nv - 1 : p->nv;
  rs_views_unpack(&((mpi_comm *)self)->pool[p->first], nv, p->buf);
  return RS_OK;
}

static rs_status mpi_run(rs_comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  wait_ctx w = {"exchange", run_peer, run_is_recv, m, run_done};
  rs_status st = m->nreq ? rs__comm_check() : RS_OK;
  if (!st) st = flush_sends(m);
  if (!st) st = wait_requests(m->req, (int)m->nreq, &w);
  m->npost = m->npool = m->nreq = m->used_stage = m->sends_from = 0;
  return st;
}

static void mpi_destroy(rs_comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  if (!m) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && !rs__comm_failure()) {
    MPI_Comm_free(&m->comm);
    if (m->back != MPI_COMM_NULL) MPI_Comm_free(&m->back);
  }
  const char *v = getenv("RS_MPI_CMA_VERBOSE");
  if (v && *v && strcmp(v, "0"))
    fprintf(stderr, "mpi: rank %d: single-copy path %s: %lld reads, %lld writes, %lld bytes in %.3f s; "
            "%lld sends packed for the receiver's read\n", m->rank, g_cma_state, (long long)g_cma_reads,
            (long long)g_cma_writes, (long long)g_cma_bytes, g_cma_secs, (long long)g_cma_packed);
  free(m->pid);
  for (int64_t i = 0; i < m->nstage; ++i) free(m->stage[i]);
  free(m->stage);
  free(m->stage_cap);
  free(m->pk_d);
  free(m->pk_s);
  free(m->post);
  free(m->pool);
  free(m->req);
  free(m);
}

static const rs_comm_ops mpi_ops = {"mpi", mpi_send, mpi_recv, mpi_run, mpi_destroy};

/* What every rank tells every other at start: where to find it for the single-copy path. */
typedef struct cma_card {
  uint64_t token, addr; /* a word at addr of process pid holds token (the probe reads it back) */
  int32_t pid, pad;
  char node[96];        /* boot id and host name: equal on ranks that share a kernel */
} cma_card;
static volatile uint64_t g_cma_token;

static void node_key(char *out, size_t n) {
  char boot[48] = "", host[48] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = 0;
  if (gethostname(host, sizeof host - 1)) host[0] = 0;
  snprintf(out, n, "%s/%s", boot, host);
}

/* The single-copy path's start (collective): RS_MPI_CMA (0, 1, auto) and RS_MPI_CMA_MIN (bytes),
 * the cards swapped point to point under the progress timeout, every node peer probed, and the
 * world agrees: the path is on only where every rank's probes passed (else the pack path runs
 * everywhere, g_cma_state saying why). */
static rs_status cma_start(mpi_comm *m) {
  const char *mode = getenv("RS_MPI_CMA"), *mins = getenv("RS_MPI_CMA_MIN");
  int want = 2; /* 0 off, 1 required, 2 auto */
  if (mode && *mode) {
    if (!strcmp(mode, "0")) want = 0;
    else if (!strcmp(mode, "1")) want = 1;
    else if (strcmp(mode, "auto"))
      return rs_fail(RS_ERR_INVALID, "RS_MPI_CMA: '%s', expected 0, 1 or auto", mode);
  }
  m->cma_min = (int64_t)8 << 20; /* measured: smaller messages were faster packed (docs/opt-datapath.md) */
  if (mins && *mins) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(mins, &end, 10);
    if (errno || end == mins || *end || v < 0)
      return rs_fail(RS_ERR_INVALID, "RS_MPI_CMA_MIN: '%s', expected a byte count >= 0", mins);
    m->cma_min = v;
  }
  int n = g_size;
  cma_card *cards = calloc((size_t)n, sizeof *cards);
  MPI_Request *r = malloc(sizeof(MPI_Request) * (size_t)(2 * n));
  int32_t *peer = malloc(sizeof(int32_t) * (size_t)(2 * n));
  m->pid = calloc((size_t)n, sizeof(int32_t));
  if (!cards || !r || !peer || !m->pid) {
    free(cards);
    free(r);
    free(peer);
    return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
  }
  g_cma_token = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15ull;
  cma_card *me = &cards[g_rank];
  me->token = g_cma_token;
  me->addr = (uint64_t)(uintptr_t)&g_cma_token;
  me->pid = (int32_t)getpid();
  node_key(me->node, sizeof me->node);
  int k = 0, rc = MPI_SUCCESS;
  for (int q = 0; q < n && rc == MPI_SUCCESS; ++q) {
    if (q == g_rank) continue;
    peer[k] = q;
    rc = MPI_Irecv(&cards[q], (int)sizeof *cards, MPI_BYTE, q, (1 << 14) + 1, g_agree, &r[k++]);
  }
  for (int q = 0; q < n && rc == MPI_SUCCESS; ++q) {
    if (q == g_rank) continue;
    peer[k] = q;
    rc = MPI_Isend(me, (int)sizeof *me, MPI_BYTE, q, (1 << 14) + 1, g_agree, &r[k++]);
  }
  bcast_ctx x = {peer, 1};
  wait_ctx w = {"start-up exchange", bcast_peer, bcast_is_recv, &x, NULL};
  rs_status st = rc != MPI_SUCCESS ? rs__comm_fail("mpi: rank %d: posting the start-up exchange failed", g_rank)
                                   : wait_requests(r, k, &w);
  int fail = want == 0, peers = 0;
  char why[128] = "";
  if (want == 0) snprintf(why, sizeof why, "RS_MPI_CMA=0");
  for (int q = 0; q < n && !st && !fail; ++q) {
    if (q == g_rank || strcmp(cards[q].node, me->node)) continue;
    uint64_t got = 0;
    int e = rs__cma_probe((pid_t)cards[q].pid, &got, (const void *)(uintptr_t)cards[q].addr, sizeof got);
    if (!e && got != cards[q].token) e = EFAULT;
    if (e) {
      fail = 1;
      snprintf(why, sizeof why, "rank %d cannot read rank %d (pid %d): %s", g_rank, q, (int)cards[q].pid, strerror(e));
    } else {
      m->pid[q] = cards[q].pid;
      ++peers;
    }
  }
  int mine = fail;
  if (!st) st = agree_or(&fail);
  free(cards);
  free(r);
  free(peer);
  if (st) return st;
  m->cma_on = !fail;
  if (!fail) snprintf(g_cma_state, sizeof g_cma_state, "on (%d node peers, messages >= %lld bytes)", peers,
                      (long long)m->cma_min);
  else if (mine) snprintf(g_cma_state, sizeof g_cma_state, "off (%s)", why);
  else snprintf(g_cma_state, sizeof g_cma_state, "off (another rank set RS_MPI_CMA=0 or failed its probe)");
  if (fail) memset(m->pid, 0, sizeof(int32_t) * (size_t)n);
  if (fail && want == 1)
    return rs_fail(RS_ERR_TRANSPORT, "RS_MPI_CMA=1: the single-copy path is %s", g_cma_state);
  return RS_OK;
}

rs_status rs_comm_mpi_create(rs_comm **out) {
  mpi_comm *m = calloc(1, sizeof *m);
  if (!m) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
  m->base.ops = &mpi_ops;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &m->comm) != MPI_SUCCESS) {
    free(m);
    return rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Comm_dup failed");
  }
  /* errors come back as codes (reported as RS_ERR_TRANSPORT) instead of aborting the job */
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m->comm, &m->rank);
  void *ub = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  m->tag_ub = flag && ub ? *(int *)ub : 32767;
  m->back = MPI_COMM_NULL;
  rs_status st = MPI_Comm_dup(MPI_COMM_WORLD, &m->back) != MPI_SUCCESS
                     ? rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Comm_dup failed")
                     : cma_start(m);
  if (st) {
    mpi_destroy(&m->base);
    return st;
  }
  MPI_Comm_set_errhandler(m->back, MPI_ERRORS_RETURN);
  *out = &m->base;
  return RS_OK;
}

const char *rs_opt_mpi_cma(int64_t *reads, int64_t *bytes) {
  if (reads) *reads = g_cma_reads + g_cma_writes;
  if (bytes) *bytes = g_cma_bytes;
  return g_cma_state;
}

#else /* built without MPI */

static rs_status no_mpi(void) {
  return rs_fail(RS_ERR_UNSUPPORTED, "transport: this build has no MPI");
}
int rs_mpi_available(void) { return 0; }
rs_status rs_mpi_start(int *argc, char ***argv, int *rank, int *size, int *owned) {
  (void)argc; (void)argv;
  *rank = 0;
  *size = 1;
  *owned = 0;
  return no_mpi();
}
void rs_mpi_stop(int owned) { (void)owned; }
rs_status rs_mpi_allreduce_or(int *flag) { (void)flag; return RS_OK; }
rs_status rs_mpi_barrier(void) { return RS_OK; }
rs_status rs_mpi_bcast(void *buf, int bytes, int root) {
  (void)buf; (void)bytes; (void)root;
  return no_mpi();
}
rs_status rs_comm_mpi_create(rs_comm **out) { *out = NULL; return no_mpi(); }
const char *rs_opt_mpi_cma(int64_t *reads, int64_t *bytes) {
  if (reads) *reads = 0;
  if (bytes) *bytes = 0;
  return "off (this build has no MPI)";
}

#endif
