/* comm_nccl.c - the NCCL transport: one process per rank, device memory. A world communicator is
 * made once (unique id broadcast over MPI); each mesh gets its own communicator, split once from it
 * (ncclCommSplit, key = mesh position) and cached. run() packs every send view into one device
 * staging buffer (one kernel launch), issues all ncclSend/ncclRecv in one group, then unpacks all
 * receives (one launch). NCCL has no tags: sends and receives between a pair match in issue order,
 * so both sides issue them sorted by task id. */
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
  int32_t nranks;
  int32_t *ranks;  /* mesh position -> world rank */
  int32_t me;      /* this process's world rank */
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
  nccl_comm **mesh;
  int64_t nmesh, capmesh;
};

static rs_status nccl_err(ncclResult_t r, const char *what) {
  if (r == ncclSuccess) return RS_OK;
  return rs_fail(RS_ERR_TRANSPORT, "nccl: %s: %s", what, ncclGetErrorString(r));
}

int rs_nccl_available(void) { return 1; }

rs_status rs_nccl_world_create(int rank, int size, rs_nccl_world **out) {
  *out = NULL;
  int ndev = rs_cuda_device_count();
  if (ndev <= 0) return rs_fail(RS_ERR_UNSUPPORTED, "nccl: no CUDA device");
  if (cudaSetDevice(rank % ndev) != cudaSuccess) return rs_fail(RS_ERR_TRANSPORT, "nccl: cudaSetDevice failed");
  rs_nccl_world *w = calloc(1, sizeof *w);
  if (!w) return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
  w->rank = rank;
  w->size = size;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  rs_status st = RS_OK;
  if (rank == 0) st = nccl_err(ncclGetUniqueId(&id), "ncclGetUniqueId");
  int ok = !st, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!all) st = st ? st : rs_fail(RS_ERR_TRANSPORT, "nccl: rank 0 could not make a unique id");
  if (!st && MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    st = rs_fail(RS_ERR_TRANSPORT, "nccl: MPI_Bcast of the unique id failed");
  if (!st) st = nccl_err(ncclCommInitRank(&w->world, size, id, rank), "ncclCommInitRank");
  if (st) {
    free(w);
    return st;
  }
  *out = w;
  return RS_OK;
}

static void nccl_comm_free(nccl_comm *c) {
  if (!c) return;
  if (c->comm) ncclCommDestroy(c->comm);
  rs_cuda_free(c->sbuf);
  rs_cuda_free(c->rbuf);
  free(c->ranks);
  free(c->send);
  free(c->recv);
  free(c->pool);
  free(c);
}

void rs_nccl_world_destroy(rs_nccl_world *w) {
  if (!w) return;
  for (int64_t i = 0; i < w->nmesh; ++i) nccl_comm_free(w->mesh[i]);
  free(w->mesh);
  if (w->world) ncclCommDestroy(w->world);
  free(w);
}

static int32_t pos_of(const nccl_comm *c, int32_t world_rank) {
  for (int32_t i = 0; i < c->nranks; ++i)
    if (c->ranks[i] == world_rank) return i;
  return -1;
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

static rs_status n_run(rs_comm *b) {
  nccl_comm *c = (nccl_comm *)b;
  rs_status st = RS_OK;
  rs_view *sv = NULL, *rv = NULL;
  int64_t nsv = 0, nrv = 0;
  rs_status ge;
  cudaStream_t s = (cudaStream_t)rs_cuda_stream();
  if (c->nsend) qsort(c->send, (size_t)c->nsend, sizeof(npost), npost_cmp);
  if (c->nrecv) qsort(c->recv, (size_t)c->nrecv, sizeof(npost), npost_cmp);
  if (c->nsend + c->nrecv == 0) goto done;
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
  ge = nccl_err(ncclGroupEnd(), "ncclGroupEnd");
  if (!st) st = ge;
  if (!st && nrv) st = rs_cuda_unpack(rv, nrv, c->rbuf);
  if (!st) st = rs_cuda_sync();
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

/* The communicator over world ranks ranks[0..n) (position i = ranks[i]), cached per rank list;
 * pos is this process's position, -1 outside. Collective over the world for a new list. */
static rs_status comm_for_ranks(rs_nccl_world *w, int32_t n, const int32_t *ranks, int pos, rs_comm **out) {
  for (int64_t i = 0; i < w->nmesh; ++i) {
    nccl_comm *c = w->mesh[i];
    if (c->nranks == n && !memcmp(c->ranks, ranks, sizeof(int32_t) * (size_t)n)) {
      *out = &c->base;
      return RS_OK;
    }
  }
  for (int32_t i = 0; i < n; ++i)
    if (ranks[i] >= w->size)
      return rs_fail(RS_ERR_INVALID, "mesh.ranks: rank %d but the NCCL world has %d ranks", ranks[i], w->size);
  nccl_comm *c = calloc(1, sizeof *c);
  if (!c || !(c->ranks = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)))) {
    free(c);
    return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
  }
  c->base.ops = &nccl_ops;
  c->base.device = 1;
  c->nranks = n;
  c->me = w->rank;
  memcpy(c->ranks, ranks, sizeof(int32_t) * (size_t)n);
  /* collective over the world communicator: every process calls it for every new mesh */
  rs_status st = nccl_err(ncclCommSplit(w->world, pos >= 0 ? 0 : NCCL_SPLIT_NOCOLOR, pos >= 0 ? pos : 0,
                                        &c->comm, NULL), "ncclCommSplit");
  if (st) {
    c->comm = NULL;
    nccl_comm_free(c);
    return st;
  }
  if (w->nmesh == w->capmesh) {
    int64_t nc = w->capmesh ? w->capmesh * 2 : 8;
    nccl_comm **p = realloc(w->mesh, sizeof(*p) * (size_t)nc);
    if (!p) {
      nccl_comm_free(c);
      return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
    }
    w->mesh = p;
    w->capmesh = nc;
  }
  w->mesh[w->nmesh++] = c;
  *out = &c->base;
  return RS_OK;
}

rs_status rs_comm_nccl_for_mesh(rs_nccl_world *w, const rs_mesh *m, rs_comm **out) {
  return comm_for_ranks(w, m->nranks, m->ranks, rs_mesh_pos_of_rank(m, w->rank), out);
}

rs_status rs_comm_nccl_all(rs_nccl_world *w, rs_comm **out) {
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(w->size ? w->size : 1));
  if (!ids) return rs_fail(RS_ERR_NOMEM, "nccl: out of memory");
  for (int32_t i = 0; i < w->size; ++i) ids[i] = i;
  rs_status st = comm_for_ranks(w, w->size, ids, w->rank, out);
  free(ids);
  return st;
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
