/* comm_nccl.c - the NCCL transport: one process per rank, device memory. One communicator over the
 * world (unique id broadcast over MPI, device chosen by the node-local rank); every mesh's transfers
 * are point-to-point on it, peers named by world rank, so no mesh needs a communicator of its own
 * (nothing here is a collective). run() packs every send view into one device staging buffer (one
 * kernel launch), issues all ncclSend/ncclRecv inside one ncclGroupStart/End, then unpacks all
 * receives (one launch). NCCL has no tags: sends and receives between a pair match in issue order,
 * so both sides issue them sorted by task id.
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): every NCCL call returns at once and
 * run() polls the stream and ncclCommGetAsyncError against the progress timeout (timeout.c); when
 * nothing finishes in time, or NCCL reports an asynchronous error (a peer died), it aborts the
 * communicator (ncclCommAbort) and fails naming the peers it waited for, instead of hanging. */
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "cuda/cuda_api.h"

#if defined(RS_OPT_NCCL) && defined(RS_OPT_MPI)
#include <mpi.h>
#include <nccl.h>
#include <cuda_runtime.h>

typedef struct npost {
  int32_t peer; /* mesh position */
  int64_t task, bytes, off;
  int32_t first, nv;
} npost;

typedef struct nccl_comm {
  rs_comm base;
  ncclComm_t comm; /* NULL when this process is outside the mesh */
  int32_t nranks;  /* the world's size */
  int32_t me;      /* this process's world rank */
  ncclComm_t *world_comm; /* the world's handle, cleared with ours when we abort */
  npost *send, *recv;
  int64_t nsend, nrecv, capsend, caprecv;
  rs_view *pool;
  int64_t npool, cappool;
  char *sbuf, *rbuf;
  int64_t scap, rcap;
} nccl_comm;

struct rs_nccl_world {
  int rank, size;
  ncclComm_t world;
  nccl_comm *all; /* the copy service over the world communicator (peers are world ranks) */
};

static rs_status nccl_err(ncclResult_t r, const char *what) {
  if (r == ncclSuccess) return RS_OK;
  return rs_fail(RS_ERR_TRANSPORT, "nccl: %s: %s", what, ncclGetErrorString(r));
}

int rs_nccl_available(void) { return 1; }

/* Wait until the non-blocking communicator c has finished its last call (ncclInProgress gone),
 * within the timeout; on failure abort it. */
static rs_status wait_comm(ncclComm_t c, const char *what, int me) {
  double t0 = rs__comm_clock(), limit = rs__comm_timeout();
  for (;;) {
    ncclResult_t r = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(c, &r);
    if (q != ncclSuccess) r = q;
    if (r == ncclSuccess) return RS_OK;
    double now = rs__comm_clock();
    if (r != ncclInProgress || now - t0 > limit) {
      ncclCommAbort(c);
      if (r != ncclInProgress)
        return rs__comm_fail("nccl: rank %d: %s failed: %s (a peer died or the network broke)", me, what,
                             ncclGetErrorString(r));
      return rs__comm_fail("nccl: rank %d waited %g s in %s: a peer is stalled or dead (--timeout)", me, limit,
                           what);
    }
    rs__comm_backoff(now - t0);
  }
}

/* The rank among the processes of this node (MPI_COMM_TYPE_SHARED) picks the device. */
static int node_local_rank(int rank) {
  MPI_Comm node;
  int lr = rank;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_rank(node, &lr);
    MPI_Comm_free(&node);
  }
  return lr;
}

static rs_status make_all(rs_nccl_world *w);

rs_status rs_nccl_world_create(int rank, int size, rs_nccl_world **out) {
  *out = NULL;
  int ndev = rs_cuda_device_count();
  if (ndev <= 0) return rs_fail(RS_ERR_UNSUPPORTED, "nccl: no CUDA device");
  int dev = node_local_rank(rank) % ndev;
  cudaError_t ce = cudaSetDevice(dev);
  if (ce != cudaSuccess)
    return rs_fail(RS_ERR_TRANSPORT, "nccl: rank %d: cudaSetDevice(%d): %s", rank, dev, cudaGetErrorString(ce));
  rs_nccl_world *w = calloc(1, sizeof *w);
  if (!w) return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
  w->rank = rank;
  w->size = size;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  rs_status st = RS_OK;
  if (rank == 0) st = nccl_err(ncclGetUniqueId(&id), "ncclGetUniqueId");
  int bad = st != RS_OK;
  rs_status ast = rs_mpi_allreduce_or(&bad);
  if (!st && ast) st = ast;
  if (!st && bad) st = rs_fail(RS_ERR_TRANSPORT, "nccl: rank 0 could not make a unique id");
  if (!st) st = rs_mpi_bcast(&id, (int)sizeof id, 0);
  if (!st) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&w->world, size, id, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) st = nccl_err(r, "ncclCommInitRankConfig");
    else st = wait_comm(w->world, "ncclCommInitRankConfig", rank);
    if (st) w->world = NULL; /* aborted */
  }
  if (!st) st = make_all(w);
  if (st) {
    rs_nccl_world_destroy(w);
    return st;
  }
  *out = w;
  return RS_OK;
}

static void nccl_comm_free(nccl_comm *c) {
  if (!c) return;
  rs_cuda_free(c->sbuf);
  rs_cuda_free(c->rbuf);
  free(c->send);
  free(c->recv);
  free(c->pool);
  free(c);
}

void rs_nccl_world_destroy(rs_nccl_world *w) {
  if (!w) return;
  nccl_comm_free(w->all);
  /* after a peer failure the communicator was aborted (or must be: destroy would wait) */
  if (w->world) {
    if (rs__comm_failure()) ncclCommAbort(w->world);
    else ncclCommDestroy(w->world);
  }
  free(w);
}

/* peers are world ranks on the world communicator */
static int32_t pos_of(const nccl_comm *c, int32_t world_rank) {
  return world_rank >= 0 && world_rank < c->nranks ? world_rank : -1;
}

static rs_status add(nccl_comm *c, npost **arr, int64_t *n, int64_t *cap, int32_t peer, int64_t task,
                     const rs_view *v, int nv) {
  if (*n == *cap) {
    int64_t nc = *cap ? *cap * 2 : 64;
    npost *p = realloc(*arr, sizeof(npost) * (size_t)nc);
    if (!p) return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
    *arr = p;
    *cap = nc;
  }
  if (c->npool + nv > c->cappool) {
    int64_t nc = c->cappool ? c->cappool * 2 : 256;
    while (nc < c->npool + nv) nc *= 2;
    rs_view *p = realloc(c->pool, sizeof(rs_view) * (size_t)nc);
    if (!p) return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
    c->pool = p;
    c->cappool = nc;
  }
  npost *p = &(*arr)[(*n)++];
  p->peer = peer;
  p->task = task;
  p->first = (int32_t)c->npool;
  p->nv = nv;
  p->bytes = 0;
  for (int i = 0; i < nv; ++i) {
    c->pool[c->npool++] = v[i];
    p->bytes += rs_view_bytes(&v[i]);
  }
  return RS_OK;
}

static rs_status n_send(rs_comm *b, int32_t from, int32_t to, int64_t task, const rs_view *v, int nv) {
  nccl_comm *c = (nccl_comm *)b;
  int32_t peer = pos_of(c, to);
  if (from != c->me || peer < 0)
    return rs_fail(RS_ERR_TRANSPORT, "nccl: send %d -> %d is not this rank's (%d)", from, to, c->me);
  return add(c, &c->send, &c->nsend, &c->capsend, peer, task, v, nv);
}

static rs_status n_recv(rs_comm *b, int32_t to, int32_t from, int64_t task, const rs_view *v, int nv) {
  nccl_comm *c = (nccl_comm *)b;
  int32_t peer = pos_of(c, from);
  if (to != c->me || peer < 0)
    return rs_fail(RS_ERR_TRANSPORT, "nccl: receive %d <- %d is not this rank's (%d)", to, from, c->me);
  return add(c, &c->recv, &c->nrecv, &c->caprecv, peer, task, v, nv);
}

static int npost_cmp(const void *a, const void *b) {
  const npost *x = a, *y = b;
  if (x->peer != y->peer) return x->peer < y->peer ? -1 : 1;
  return x->task < y->task ? -1 : x->task > y->task;
}

/* Lay the posts out back to back in one staging buffer and gather their views in that order. */
static rs_status stage(nccl_comm *c, npost *p, int64_t n, char **buf, int64_t *cap, rs_view **views,
                       int64_t *nviews) {
  int64_t total = 0, nv = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[i].off = total;
    total += p[i].bytes;
    nv += p[i].nv;
  }
  if (total > *cap) {
    rs_cuda_free(*buf);
    *buf = NULL;
    *cap = 0;
    rs_status st = rs_cuda_malloc((void **)buf, total);
    if (st) return st;
    *cap = total;
  }
  rs_view *v = malloc(sizeof(rs_view) * (size_t)(nv ? nv : 1));
  if (!v) return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < p[i].nv; ++j) v[k++] = c->pool[p[i].first + j];
  *views = v;
  *nviews = nv;
  return RS_OK;
}

/* The sends and receives of the group finish on stream s; poll it with the async error. */
static rs_status wait_stream(nccl_comm *c, cudaStream_t s) {
  double t0 = rs__comm_clock(), limit = rs__comm_timeout();
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return RS_OK;
    if (e != cudaErrorNotReady) return rs_fail(RS_ERR_TRANSPORT, "nccl: %s", cudaGetErrorString(e));
    ncclResult_t r = ncclSuccess;
    ncclCommGetAsyncError(c->comm, &r);
    double now = rs__comm_clock();
    if ((r != ncclSuccess && r != ncclInProgress) || now - t0 > limit) {
      int32_t peer = c->nrecv ? c->recv[0].peer : c->nsend ? c->send[0].peer : -1;
      ncclCommAbort(c->comm);
      c->comm = NULL;
      *c->world_comm = NULL;
      if (r != ncclSuccess && r != ncclInProgress)
        return rs__comm_fail("nccl: rank %d: the exchange with rank %d failed: %s (a peer died)", c->me, peer,
                             ncclGetErrorString(r));
      return rs__comm_fail("nccl: rank %d waited %g s for rank %d (%lld receives, %lld sends open): the peer is "
                           "stalled or dead (--timeout)", c->me, limit, peer, (long long)c->nrecv,
                           (long long)c->nsend);
    }
    rs__comm_backoff(now - t0);
  }
}

static rs_status n_run(rs_comm *b) {
  nccl_comm *c = (nccl_comm *)b;
  rs_status st = RS_OK;
  rs_view *sv = NULL, *rv = NULL;
  int64_t nsv = 0, nrv = 0;
  ncclResult_t ge;
  cudaStream_t s = (cudaStream_t)rs_cuda_stream();
  if ((st = rs__comm_check())) goto done;
  if (c->nsend) qsort(c->send, (size_t)c->nsend, sizeof(npost), npost_cmp);
  if (c->nrecv) qsort(c->recv, (size_t)c->nrecv, sizeof(npost), npost_cmp);
  if (c->nsend + c->nrecv == 0) goto done;
  if (!s) { /* NCCL on the legacy stream would race opt's non-blocking one */
    st = rs_fail(RS_ERR_TRANSPORT, "nccl: rank %d has no CUDA stream", c->me);
    goto done;
  }
  if (!c->comm) {
    st = rs_fail(RS_ERR_TRANSPORT, "nccl: rank %d is outside the mesh", c->me);
    goto done;
  }
  if ((st = stage(c, c->send, c->nsend, &c->sbuf, &c->scap, &sv, &nsv)) ||
      (st = stage(c, c->recv, c->nrecv, &c->rbuf, &c->rcap, &rv, &nrv)))
    goto done;
  if (nsv && (st = rs_cuda_pack(c->sbuf, sv, nsv))) goto done;
  if ((st = nccl_err(ncclGroupStart(), "ncclGroupStart"))) goto done;
  for (int64_t i = 0; i < c->nsend && !st; ++i)
    st = nccl_err(ncclSend(c->sbuf + c->send[i].off, (size_t)c->send[i].bytes, ncclUint8, c->send[i].peer,
                           c->comm, s), "ncclSend");
  for (int64_t i = 0; i < c->nrecv && !st; ++i)
    st = nccl_err(ncclRecv(c->rbuf + c->recv[i].off, (size_t)c->recv[i].bytes, ncclUint8, c->recv[i].peer,
                           c->comm, s), "ncclRecv");
  ge = ncclGroupEnd();
  if (!st && ge != ncclSuccess && ge != ncclInProgress) st = nccl_err(ge, "ncclGroupEnd");
  if (!st) st = wait_comm(c->comm, "ncclGroupEnd", c->me);
  if (!st && nrv) st = rs_cuda_unpack(rv, nrv, c->rbuf);
  if (!st) st = wait_stream(c, s);
done:
  free(sv);
  free(rv);
  c->nsend = c->nrecv = c->npool = 0;
  return st;
}

static void n_destroy(rs_comm *b) {
  (void)b; /* owned by the world's mesh cache */
}

static const rs_comm_ops nccl_ops = {"nccl", n_send, n_recv, n_run, n_destroy};

static rs_status make_all(rs_nccl_world *w) {
  nccl_comm *c = calloc(1, sizeof *c);
  if (!c) return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
  c->base.ops = &nccl_ops;
  c->base.device = 1;
  c->nranks = w->size;
  c->me = w->rank;
  c->comm = w->world;
  c->world_comm = &w->world;
  w->all = c;
  return RS_OK;
}

rs_status rs_comm_nccl_for_mesh(rs_nccl_world *w, const rs_mesh *m, rs_comm **out) {
  for (int32_t i = 0; i < m->nranks; ++i)
    if (m->ranks[i] >= w->size)
      return rs_fail(RS_ERR_INVALID, "mesh.ranks: rank %d but the NCCL world has %d ranks", m->ranks[i], w->size);
  *out = &w->all->base;
  return RS_OK;
}

rs_status rs_comm_nccl_all(rs_nccl_world *w, rs_comm **out) {
  *out = &w->all->base;
  return RS_OK;
}

#else /* no NCCL in this build */

int rs_nccl_available(void) { return 0; }
rs_status rs_nccl_world_create(int rank, int size, rs_nccl_world **out) {
  (void)rank;
  (void)size;
  *out = NULL;
  return rs_fail(RS_ERR_UNSUPPORTED, "transport: this build has no NCCL");
}
void rs_nccl_world_destroy(rs_nccl_world *w) { (void)w; }
rs_status rs_comm_nccl_for_mesh(rs_nccl_world *w, const rs_mesh *m, rs_comm **out) {
  (void)w;
  (void)m;
  *out = NULL;
  return rs_fail(RS_ERR_UNSUPPORTED, "transport: this build has no NCCL");
}
rs_status rs_comm_nccl_all(rs_nccl_world *w, rs_comm **out) {
  (void)w;
  *out = NULL;
  return rs_fail(RS_ERR_UNSUPPORTED, "transport: this build has no NCCL");
}

#endif
