/* comm_mpi.c - the MPI transport: one process per world rank, host memory. A send packs its views
 * into a staging buffer (or sends a single contiguous view in place) and posts MPI_Isend with the
 * task id as tag; a receive posts MPI_Irecv; run() waits for all and unpacks. Staging buffers are
 * kept between runs so that repeated exchanges do not fault in fresh pages. Messages above 1 GiB
 * travel as several same-tag pieces, which MPI's non-overtaking order keeps matched. */
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "core/mutant.h"

#ifdef RS_OPT_MPI
#include <mpi.h>

#define PIECE ((int64_t)1 << 30)

typedef struct mpi_post {
  int is_recv;
  int32_t peer;
  int64_t bytes;
  char *buf;     /* where the bytes go on the wire */
  int staged;    /* buf is a staging buffer */
  int32_t first, nv;
  int32_t req0, nreq;
} mpi_post;

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
  int64_t *stage_cap;
  int64_t nstage, capstage, used_stage;
} mpi_comm;

int rs_mpi_available(void) { return 1; }

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
  return RS_OK;
}

void rs_mpi_stop(int owned) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (owned && !fin) MPI_Finalize();
}

rs_status rs_mpi_allreduce_or(int *flag) {
  int v = *flag ? 1 : 0, r = 0;
  if (MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD) != MPI_SUCCESS)
    return rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Allreduce failed");
  *flag = r;
  return RS_OK;
}

rs_status rs_mpi_barrier(void) {
  return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? RS_OK
                                                    : rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Barrier failed");
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

static rs_status post(mpi_comm *m, int is_recv, int32_t peer, int64_t task, const rs_view *v, int nv) {
  rs_status st;
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
  p->staged = !single_contig(v, nv);
  if (p->staged) {
    p->buf = take_stage(m, p->bytes);
    if (!p->buf) return rs_fail(RS_ERR_NOMEM, "mpi transport: out of memory");
    if (!is_recv) rs_views_pack(p->buf, v, nv);
  } else {
    p->buf = v->base;
  }
  int64_t pieces = p->bytes ? (p->bytes + PIECE - 1) / PIECE : 1;
  if ((st = grow((void **)&m->req, &m->capreq, m->nreq + pieces, sizeof(MPI_Request)))) return st;
  p->req0 = (int32_t)m->nreq;
  p->nreq = (int32_t)pieces;
  int tag = (int)(task % (m->tag_ub + 1));
  for (int64_t k = 0; k < pieces; ++k) {
    int64_t off = k * PIECE, len = p->bytes - off < PIECE ? p->bytes - off : PIECE;
    int rc = is_recv ? MPI_Irecv(p->buf + off, (int)len, MPI_BYTE, peer, tag, m->comm, &m->req[m->nreq])
                     : MPI_Isend(p->buf + off, (int)len, MPI_BYTE, peer, tag, m->comm, &m->req[m->nreq]);
    if (rc != MPI_SUCCESS) return rs_fail(RS_ERR_TRANSPORT, "mpi: posting task %lld failed", (long long)task);
    m->nreq++;
  }
  return RS_OK;
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

static rs_status mpi_run(rs_comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  rs_status st = RS_OK;
  if (m->nreq && MPI_Waitall((int)m->nreq, m->req, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
    st = rs_fail(RS_ERR_TRANSPORT, "mpi: MPI_Waitall failed");
  for (int64_t i = 0; i < m->npost && !st; ++i) {
    mpi_post *p = &m->post[i];
    /* Mutant 267: a staged receive of several views never unpacks its last view. */
    int nv = RS_MUTANT(267) && p->nv > 1 ? p->nv - 1 : p->nv;
    if (p->is_recv && p->staged) rs_views_unpack(&m->pool[p->first], nv, p->buf);
  }
  m->npost = m->npool = m->nreq = m->used_stage = 0;
  return st;
}

static void mpi_destroy(rs_comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  if (!m) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Comm_free(&m->comm);
  for (int64_t i = 0; i < m->nstage; ++i) free(m->stage[i]);
  free(m->stage);
  free(m->stage_cap);
  free(m->post);
  free(m->pool);
  free(m->req);
  free(m);
}

static const rs_comm_ops mpi_ops = {"mpi", mpi_send, mpi_recv, mpi_run, mpi_destroy};

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
  *out = &m->base;
  return RS_OK;
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
rs_status rs_comm_mpi_create(rs_comm **out) { *out = NULL; return no_mpi(); }

#endif
