/* comm_local.c - the in-process transport: every rank lives in this process, so a matched send and
 * receive become one direct strided copy from the sender's buffer to the receiver's (no staging),
 * batched per run(): on the host, or for device memory as one CUDA launch. On the host the round's
 * local copies join the same batch (rs__comm_local_defer), so that the batch copy reads each source
 * once in order across every destination, its own included. A send and receive whose views are cut
 * differently (same bytes) go through a packed buffer: host memory, or a pooled device buffer. */
#include <stdlib.h>
#include <string.h>
#include "comm/comm.h"
#include "cuda/cuda_api.h"
#include "core/mutant.h"

typedef struct post {
  int32_t from, to;
  int64_t task;
  int32_t first, nv; /* into the view pool */
  int64_t bytes;
} post;

typedef struct local_comm {
  rs_comm base;
  post *send, *recv;
  int64_t nsend, nrecv, capsend, caprecv;
  rs_view *pool;
  int64_t npool, cappool;
  /* device batches */
  rs_view *bd, *bs;
  int64_t nb, capb;
  char *dstage; /* device restaging, grow-only (copy_restaged_device) */
  int64_t dstage_cap;
} local_comm;

static rs_status add_post(local_comm *l, post **arr, int64_t *n, int64_t *cap, int32_t from,
                          int32_t to, int64_t task, const rs_view *v, int nv) {
  if (*n == *cap) {
    int64_t nc = *cap ? *cap * 2 : 64;
    post *p = realloc(*arr, sizeof(post) * (size_t)nc);
    if (!p) return rs_fail(RS_ERR_NOMEM, "local transport: out of memory");
    *arr = p;
    *cap = nc;
  }
  if (l->npool + nv > l->cappool) {
    int64_t nc = l->cappool ? l->cappool * 2 : 256;
    while (nc < l->npool + nv) nc *= 2;
    rs_view *p = realloc(l->pool, sizeof(rs_view) * (size_t)nc);
    if (!p) return rs_fail(RS_ERR_NOMEM, "local transport: out of memory");
    l->pool = p;
    l->cappool = nc;
  }
  post *p = &(*arr)[(*n)++];
  p->from = from;
  p->to = to;
  p->task = task;
  p->first = (int32_t)l->npool;
  p->nv = nv;
  p->bytes = 0;
  for (int i = 0; i < nv; ++i) {
    l->pool[l->npool++] = v[i];
    p->bytes += rs_view_bytes(&v[i]);
  }
  return RS_OK;
}

static rs_status local_send(rs_comm *c, int32_t from, int32_t to, int64_t task, const rs_view *v,
                            int nv) {
  local_comm *l = (local_comm *)c;
  return add_post(l, &l->send, &l->nsend, &l->capsend, from, to, task, v, nv);
}

static rs_status local_recv(rs_comm *c, int32_t to, int32_t from, int64_t task, const rs_view *v,
                            int nv) {
  local_comm *l = (local_comm *)c;
  return add_post(l, &l->recv, &l->nrecv, &l->caprecv, from, to, task, v, nv);
}

static int post_cmp(const void *a, const void *b) {
  const post *x = a, *y = b;
  if (x->to != y->to) return x->to < y->to ? -1 : 1;
  if (x->from != y->from) return x->from < y->from ? -1 : 1;
  if (x->task != y->task) return x->task < y->task ? -1 : 1;
  return 0;
}

/* Posts in (receiver, sender, task) order: a short run (a compiled schedule's usual few dozen
 * messages) by insertion, which needs no allocation and does a fraction of qsort's work, else qsort. */
static void sort_posts(post *p, int64_t n) {
  if (n > 64) {
    qsort(p, (size_t)n, sizeof(post), post_cmp);
    return;
  }
  for (int64_t i = 1; i < n; ++i) {
    post x = p[i];
    int64_t j = i;
    for (; j > 0 && post_cmp(&p[j - 1], &x) > 0; --j) p[j] = p[j - 1];
    p[j] = x;
  }
}

static int views_same(const rs_view *a, const rs_view *b, int n) {
  for (int i = 0; i < n; ++i) {
    if (a[i].ndim != b[i].ndim || a[i].esize != b[i].esize) return 0;
    for (int d = 0; d < a[i].ndim; ++d)
      if (a[i].size[d] != b[i].size[d]) return 0;
  }
  return 1;
}

static rs_status add_batch(local_comm *l, const rs_view *d, const rs_view *s) {
  if (l->nb == l->capb) {
    int64_t nc = l->capb ? l->capb * 2 : 64;
    rs_view *a = realloc(l->bd, sizeof(rs_view) * (size_t)nc);
    if (!a) return rs_fail(RS_ERR_NOMEM, "local transport: out of memory");
    l->bd = a;
    rs_view *b = realloc(l->bs, sizeof(rs_view) * (size_t)nc);
    if (!b) return rs_fail(RS_ERR_NOMEM, "local transport: out of memory");
    l->bs = b;
    l->capb = nc;
  }
  l->bd[l->nb] = *d;
  l->bs[l->nb++] = *s;
  return RS_OK;
}

/* Copy between posts whose views are segmented differently: stage through a packed buffer. */
static rs_status copy_restaged(const rs_view *dv, int nd, const rs_view *sv, int ns, int64_t bytes) {
  char *tmp = malloc((size_t)(bytes ? bytes : 1));
  if (!tmp) return rs_fail(RS_ERR_NOMEM, "local transport: out of memory");
  rs_views_pack(tmp, sv, ns);
  rs_views_unpack(dv, nd, tmp);
  free(tmp);
  return RS_OK;
}

/* The same on device memory: packed into a pooled device buffer and unpacked from it by one launch
 * each on opt's stream, whose order keeps the next message's pack behind this one's unpack, so one
 * buffer serves every message of a run. */
static rs_status copy_restaged_device(local_comm *l, const rs_view *dv, int nd, const rs_view *sv, int ns,
                                      int64_t bytes) {
  rs_status st = RS_OK;
  if (bytes <= 0) return RS_OK;
  if (bytes > l->dstage_cap) {
    if ((st = rs_cuda_sync())) return st; /* an earlier restage may still read the old buffer */
    rs_cuda_free(l->dstage);
    l->dstage = NULL;
    l->dstage_cap = 0;
    if ((st = rs_cuda_malloc((void **)&l->dstage, bytes))) return st;
    l->dstage_cap = bytes;
  }
  if (!(st = rs_cuda_pack(l->dstage, sv, ns))) st = rs_cuda_unpack(dv, nd, l->dstage);
  return st;
}

static rs_status local_run(rs_comm *c) {
  local_comm *l = (local_comm *)c;
  rs_status st = RS_OK;
  sort_posts(l->send, l->nsend);
  sort_posts(l->recv, l->nrecv);
  int64_t i = 0, j = 0; /* the batch may already hold local copies (rs__comm_local_defer) */
  while (!st && (i < l->nsend || j < l->nrecv)) {
    int cmp = i >= l->nsend ? 1 : j >= l->nrecv ? -1 : post_cmp(&l->send[i], &l->recv[j]);
    if (cmp != 0) {
      const post *p = cmp < 0 ? &l->send[i] : &l->recv[j];
      st = rs_fail(RS_ERR_TRANSPORT, "local transport: %s from rank %d to rank %d, task %lld, has no match",
                   cmp < 0 ? "send" : "receive", p->from, p->to, (long long)p->task);
      break;
    }
    const post *s = &l->send[i++], *r = &l->recv[j++];
    /* Mutant 265: in a run of more than 40 messages the last one is dropped (never copied). */
    if (RS_MUTANT(265) && l->nsend > 40 && i == l->nsend) continue;
    /* Mutant 266: a message whose receiver also got the previous message, with as many bytes,
     * is delivered from the previous message's sender (misrouted, the other one duplicated). */
    if (RS_MUTANT(266) && i >= 2 && l->send[i - 2].to == s->to && l->send[i - 2].bytes == s->bytes &&
        l->send[i - 2].nv == s->nv)
      s = &l->send[i - 2];
    if (s->bytes != r->bytes) {
      st = rs_fail(RS_ERR_TRANSPORT, "local transport: task %lld from rank %d to rank %d sends %lld bytes into %lld",
                   (long long)s->task, s->from, s->to, (long long)s->bytes, (long long)r->bytes);
      break;
    }
    const rs_view *sv = &l->pool[s->first], *rv = &l->pool[r->first];
    if (s->nv == r->nv && views_same(sv, rv, s->nv)) {
      for (int k = 0; k < s->nv && !st; ++k) st = add_batch(l, &rv[k], &sv[k]);
    } else if (c->device) {
      st = copy_restaged_device(l, rv, r->nv, sv, s->nv, s->bytes);
    } else {
      st = copy_restaged(rv, r->nv, sv, s->nv, s->bytes);
    }
  }
  if (!st && l->nb) st = c->device ? rs_cuda_copy_views(l->bd, l->bs, l->nb) : rs_views_copy_batch(l->bd, l->bs, l->nb);
  l->nsend = l->nrecv = l->npool = l->nb = 0;
  return st;
}

static void local_destroy(rs_comm *c) {
  local_comm *l = (local_comm *)c;
  if (!l) return;
  free(l->send);
  free(l->recv);
  free(l->pool);
  free(l->bd);
  free(l->bs);
  rs_cuda_free(l->dstage);
  free(l);
}

static const rs_comm_ops local_ops = {"local", local_send, local_recv, local_run, local_destroy};

int rs__comm_local_defer(rs_comm *c, const rs_view *dst, const rs_view *src, int64_t n) {
  c = rs__comm_count_inner(c);
  if (!c || c->ops != &local_ops || c->device) return 0;
  local_comm *l = (local_comm *)c;
  for (int64_t i = 0; i < n; ++i)
    if (add_batch(l, &dst[i], &src[i])) {
      l->nb = 0; /* out of memory: none queued, the caller copies them itself */
      return 0;
    }
  return 1;
}

rs_status rs_comm_local_create(int device, rs_comm **out) {
  local_comm *l = calloc(1, sizeof *l);
  if (!l) return rs_fail(RS_ERR_NOMEM, "local transport: out of memory");
  l->base.ops = &local_ops;
  l->base.device = device;
  *out = &l->base;
  return RS_OK;
}
