/* opt.c - the rs_opt handle (schedule cache, scratch memory) and the public entry points:
 * redistribute with opt's own schedule, execute a given step plan step by step, plan statistics
 * and the schedule's bytes per rank pair (SPEC 7's lower bound lives in core/traffic.c). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include "redistribute/exec.h"
#include "comm/world.h"
#include "cuda/cuda_api.h"
#include "core/values.h"

#define KEYLEN 168
#define CACHE_MAX 4096

typedef struct entry {
  uint64_t h;
  int64_t key[KEYLEN];
  rs_sched *s;
} entry;

struct rs_opt {
  entry *tab;
  int64_t cap, n;
  char *scratch;
  int64_t scratch_cap;
  char *dev;       /* device worlds: pooled device memory (staging and workspace), grow-only */
  int64_t dev_cap;
  rs_comm *local; /* the in-process transport of world-less calls, kept so its arrays are reused */
};

rs_status rs_opt_create(rs_opt **out) {
  rs_opt *o = calloc(1, sizeof *o);
  if (!o) return rs_fail(RS_ERR_NOMEM, "opt: out of memory");
  *out = o;
  return RS_OK;
}

static void cache_clear(rs_opt *o) {
  for (int64_t i = 0; i < o->cap; ++i) rs_sched_free(o->tab[i].s);
  free(o->tab);
  o->tab = NULL;
  o->cap = o->n = 0;
}

void rs_opt_destroy(rs_opt *o) {
  if (!o) return;
  cache_clear(o);
  free(o->scratch);
  rs_cuda_free(o->dev);
  if (o->local) o->local->ops->destroy(o->local);
  free(o);
}

/* bytes of pooled device memory: grown (never shrunk) across calls, so a campaign allocates once;
 * no kernel is in flight here (every run ends with rs_cuda_sync) */
static rs_status dev_pool(rs_opt *o, int64_t bytes, char **out) {
  if (bytes > o->dev_cap || !o->dev) {
    rs_cuda_free(o->dev);
    o->dev = NULL;
    o->dev_cap = 0;
    int64_t n = bytes + bytes / 4;
    rs_status st = rs_cuda_malloc((void **)&o->dev, n);
    if (st) return st;
    o->dev_cap = n;
  }
  *out = o->dev;
  return RS_OK;
}

static int64_t up256(int64_t n) { return (n + 255) & ~(int64_t)255; }

void *rs_opt_scratch(rs_opt *o, int64_t bytes, int *fresh) {
  *fresh = 0;
  if (bytes > o->scratch_cap) {
    free(o->scratch);
    o->scratch = malloc((size_t)bytes);
    o->scratch_cap = o->scratch ? bytes : 0;
    *fresh = 1;
  }
  return o->scratch ? o->scratch : (void *)o; /* non-NULL even for 0 bytes */
}

static int shard_key(int64_t *k, const rs_sharding *s, int nd) {
  int n = 0;
  for (int m = 0; m < RS_MAX_MESH_DIMS; ++m) {
    int on = m < s->mesh_ndim;
    int kind = on ? s->p[m].kind : -1;
    k[n++] = kind;
    k[n++] = kind == RS_SHARD ? s->p[m].dim : 0;
    k[n++] = kind == RS_PARTIAL ? s->p[m].op : 0;
  }
  for (int d = 0; d < RS_MAX_DIMS; ++d) {
    int len = d < nd ? s->order_len[d] : 0;
    k[n++] = len;
    for (int j = 0; j < RS_MAX_MESH_DIMS; ++j) k[n++] = j < len ? s->order[d][j] : -1;
  }
  return n;
}

static void make_key(int64_t *k, const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                     const rs_sharding *dst) {
  memset(k, 0, sizeof(int64_t) * KEYLEN);
  int n = 0;
  k[n++] = m->ndim;
  for (int i = 0; i < RS_MAX_MESH_DIMS; ++i) k[n++] = i < m->ndim ? m->size[i] : 0;
  k[n++] = t->dtype;
  k[n++] = t->ndim;
  for (int d = 0; d < RS_MAX_DIMS; ++d) k[n++] = d < t->ndim ? t->shape[d] : 0;
  n += shard_key(k + n, src, t->ndim);
  shard_key(k + n, dst, t->ndim);
}

static rs_status cache_insert(rs_opt *o, uint64_t h, const int64_t *key, rs_sched *s) {
  if (o->n >= CACHE_MAX) cache_clear(o);
  if ((o->n + 1) * 2 > o->cap) {
    int64_t nc = o->cap ? o->cap * 2 : 64;
    entry *t = calloc((size_t)nc, sizeof *t);
    if (!t) return rs_fail(RS_ERR_NOMEM, "opt cache: out of memory");
    for (int64_t i = 0; i < o->cap; ++i) {
      if (!o->tab[i].s) continue;
      int64_t j = (int64_t)(o->tab[i].h & (uint64_t)(nc - 1));
      while (t[j].s) j = (j + 1) & (nc - 1);
      t[j] = o->tab[i];
    }
    free(o->tab);
    o->tab = t;
    o->cap = nc;
  }
  int64_t j = (int64_t)(h & (uint64_t)(o->cap - 1));
  while (o->tab[j].s) j = (j + 1) & (o->cap - 1);
  o->tab[j].h = h;
  memcpy(o->tab[j].key, key, sizeof(int64_t) * KEYLEN);
  o->tab[j].s = s;
  o->n++;
  return RS_OK;
}

rs_status rs_opt_get_sched(rs_opt *o, const rs_mesh *m, const rs_tensor *t,
                           const rs_sharding *src, const rs_sharding *dst, rs_sched **out,
                           int *hit) {
  int64_t key[KEYLEN];
  make_key(key, m, t, src, dst);
  uint64_t h = XXH3_64bits(key, sizeof key);
  *hit = 0;
  if (o->cap) {
    int64_t j = (int64_t)(h & (uint64_t)(o->cap - 1));
    for (; o->tab[j].s; j = (j + 1) & (o->cap - 1))
      if (o->tab[j].h == h && !memcmp(o->tab[j].key, key, sizeof key)) {
        *out = o->tab[j].s;
        *hit = 1;
        return RS_OK;
      }
  }
  rs_sched *s;
  rs_status st = rs_sched_compile(m, t, src, dst, &s);
  if (st) return st;
  if ((st = cache_insert(o, h, key, s))) {
    rs_sched_free(s);
    return st;
  }
  *out = s;
  return RS_OK;
}

/* ---- running one schedule on host locals ---- */

static rs_status check_in(const rs_sched *s, const char *played, const rs_locals *in) {
  if (!in || !in->r || in->n != s->nranks)
    return rs_fail(RS_ERR_INVALID, "in: expected locals for %d mesh ranks", s->nranks);
  for (int p = 0; p < s->nranks; ++p) {
    if (!played[p]) continue;
    int64_t need = rs_box_numel(s->ndim, &s->in_box[p]) * s->esize;
    if (in->r[p].nbytes != need || (need && !in->r[p].data))
      return rs_fail(RS_ERR_INVALID, "in: mesh position %d holds %lld bytes, its box needs %lld", p,
                     (long long)in->r[p].nbytes, (long long)need);
  }
  return RS_OK;
}

static rs_status alloc_out(const rs_sched *s, const char *played, rs_locals *out) {
  rs_status st;
  if (!out->r || out->n != s->nranks) {
    if (out->r) rs_locals_free(out);
    if ((st = rs_locals_alloc(out, s->nranks))) return st;
  }
  for (int p = 0; p < s->nranks; ++p) {
    if (!played[p]) continue;
    if ((st = rs_local_resize(&out->r[p], s->ndim, s->out_box[p].size, s->esize))) return st;
  }
  return RS_OK;
}

/* Device worlds. With the caller's device pointers (din/dout) only the workspace comes from the
 * pool; with host locals, inputs, outputs and workspace are slices of the pooled device memory
 * (one allocation the first time, none after), inputs go up and outputs come down on opt's stream. */
static rs_status run_device(rs_opt *o, const rs_sched *s, rs_exec_bufs *b, const rs_mesh *m, rs_comm *comm,
                            const rs_locals *in, rs_locals *out, void *const *din, void *const *dout) {
  int n = s->nranks;
  int64_t total = 0;
  for (int p = 0; p < n; ++p)
    if (b->played[p]) total += up256(s->ws_bytes[p]) + (din ? 0 : up256(in->r[p].nbytes) + up256(out->r[p].nbytes));
  char *pool = NULL;
  rs_status st = dev_pool(o, total, &pool);
  for (int p = 0; p < n && !st; ++p) {
    if (!b->played[p]) continue;
    b->ws[p] = pool;
    pool += up256(s->ws_bytes[p]);
    if (din) {
      b->in[p] = din[p];
      b->out[p] = dout[p];
      continue;
    }
    b->in[p] = pool;
    pool += up256(in->r[p].nbytes);
    b->out[p] = pool;
    pool += up256(out->r[p].nbytes);
    st = rs_cuda_h2d(b->in[p], in->r[p].data, in->r[p].nbytes);
  }
  if (!st) st = rs_exec_sched(s, b, m, comm, 0);
  for (int p = 0; p < n && !st && !din; ++p)
    if (b->played[p]) st = rs_cuda_d2h(out->r[p].data, b->out[p], out->r[p].nbytes);
  return st;
}

static rs_status run_sched(rs_opt *o, rs_world *w, const rs_mesh *m, const rs_sched *s,
                           const rs_locals *in, rs_locals *out, void *const *din, void *const *dout) {
  int n = s->nranks;
  char *played = calloc((size_t)n, 1);
  char **ptr = calloc((size_t)n * 3, sizeof(char *));
  rs_status st = RS_OK;
  /* before the first goto: done: destroys it (a goto over its initialisation left it undefined) */
  rs_comm *comm = NULL;
  int any = 0;
  if (!played || !ptr) {
    st = rs_fail(RS_ERR_NOMEM, "opt: out of memory");
    goto done;
  }
  if (rs_world_is_local(w)) {
    memset(played, 1, (size_t)n);
    any = 1;
  } else {
    int pos = rs_mesh_pos_of_rank(m, rs_world_rank(w));
    if (pos >= 0) played[pos] = any = 1;
  }
  /* the comm first: making an NCCL mesh communicator is collective over the whole world */
  if (w) {
    if ((st = rs_world_comm(w, m, &comm))) goto done;
  } else {
    if (!o->local && (st = rs_comm_local_create(0, &o->local))) goto done;
    comm = o->local;
  }
  if (!any) goto done; /* a rank outside the mesh takes part in nothing */
  if (!din && ((st = check_in(s, played, in)) || (st = alloc_out(s, played, out)))) goto done;
  rs_exec_bufs b;
  b.device = rs_world_uses_device(w);
  b.played = played;
  b.in = ptr;
  b.out = ptr + n;
  b.ws = ptr + 2 * n;
  if (b.device) {
    st = run_device(o, s, &b, m, comm, in, out, din, dout);
  } else {
    int64_t total = 0;
    for (int p = 0; p < n; ++p)
      if (played[p]) total += s->ws_bytes[p];
    int fresh = 1;
    char *ws = total ? rs_opt_scratch(o, total, &fresh) : NULL;
    if (total && !ws) {
      st = rs_fail(RS_ERR_NOMEM, "opt: cannot allocate %lld bytes of workspace", (long long)total);
    } else {
      int64_t off = 0;
      for (int p = 0; p < n; ++p) {
        if (!played[p]) continue;
        b.in[p] = in->r[p].data;
        b.out[p] = out->r[p].data;
        b.ws[p] = ws ? ws + off : NULL;
        off += s->ws_bytes[p];
      }
      st = rs_exec_sched(s, &b, m, comm, !fresh);
    }
  }
done:
  if (st && !w && o->local) { /* a failed run may leave posts behind: start the next one afresh */
    o->local->ops->destroy(o->local);
    o->local = NULL;
  }
  free(played);
  free(ptr);
  return st;
}

static void add_stats(rs_opt_stats *st, const rs_sched *s, int hit) {
  if (!st) return;
  st->bytes_sent += s->bytes_sent;
  st->bytes_local += s->bytes_local;
  st->messages += s->messages;
  st->cache_hit = hit;
}

/* Validate a copy of the case and fetch (or compile) its schedule. */
static rs_status case_sched(rs_opt *o, const rs_case *c, rs_case *cc, rs_sched **s, int *hit) {
  *cc = *c;
  rs_status st = rs_case_validate(cc);
  if (st) return st;
  return rs_opt_get_sched(o, &cc->mesh, &cc->tensor, &cc->src, &cc->dst, s, hit);
}

/* host locals (in/out) or, on a device world, the caller's device pointers (din/dout) */
static rs_status redistribute(rs_opt *o, rs_world *w, const rs_case *c, const rs_locals *in, rs_locals *out,
                              void *const *din, void *const *dout, rs_opt_stats *stats) {
  if (stats) memset(stats, 0, sizeof *stats);
  rs_case cc;
  rs_sched *s;
  int hit;
  rs_status st = case_sched(o, c, &cc, &s, &hit);
  if (st) return st;
  if ((st = run_sched(o, w, &cc.mesh, s, in, out, din, dout))) return st;
  add_stats(stats, s, hit);
  return RS_OK;
}

rs_status rs_opt_redistribute(rs_opt *o, rs_world *w, const rs_case *c, const rs_locals *in,
                              rs_locals *out, rs_opt_stats *stats) {
  if (!o || !c || !in || !out) return rs_fail(RS_ERR_INVALID, "opt: NULL argument");
  return redistribute(o, w, c, in, out, NULL, NULL, stats);
}

rs_status rs_opt_redistribute_device(rs_opt *o, rs_world *w, const rs_case *c, void *const *in_dev,
                                     void *const *out_dev, rs_opt_stats *stats) {
  if (!o || !c || !in_dev || !out_dev) return rs_fail(RS_ERR_INVALID, "opt: NULL argument");
  if (!rs_world_uses_device(w))
    return rs_fail(RS_ERR_INVALID, "transport: device pointers need a device world (local-device, nccl)");
  return redistribute(o, w, c, NULL, NULL, in_dev, out_dev, stats);
}

rs_status rs_opt_plan_stats(rs_opt *o, const rs_case *c, rs_opt_stats *stats) {
  if (!o || !c || !stats) return rs_fail(RS_ERR_INVALID, "opt: NULL argument");
  memset(stats, 0, sizeof *stats);
  rs_case cc;
  rs_sched *s;
  int hit;
  rs_status st = case_sched(o, c, &cc, &s, &hit);
  if (st) return st;
  add_stats(stats, s, hit);
  return RS_OK;
}

rs_status rs_opt_execute_plan(rs_opt *o, rs_world *w, const rs_case *c, const rs_plan *p,
                              const rs_locals *in, rs_locals *out, rs_opt_stats *stats) {
  if (!o || !c || !p || !in || !out) return rs_fail(RS_ERR_INVALID, "opt: NULL argument");
  if (stats) memset(stats, 0, sizeof *stats);
  rs_case cc = *c;
  rs_status st = rs_case_validate(&cc);
  if (st) return st;
  if (p->nsteps < 0 || p->nsteps > RS_MAX_STEPS)
    return rs_fail(RS_ERR_INVALID, "plan.nsteps: %d out of range", p->nsteps);
  rs_sharding cur = cc.src;
  rs_locals a = {0, NULL}, b = {0, NULL};
  const rs_locals *src = in;
  int nd = cc.tensor.ndim;
  for (int i = 0; i < p->nsteps; ++i) {
    rs_sharding next = cur;
    if ((st = rs_mesh_apply_step(&cc.mesh, &next, &p->step[i], nd))) break;
    rs_sched *s;
    int hit;
    if ((st = rs_opt_get_sched(o, &cc.mesh, &cc.tensor, &cur, &next, &s, &hit))) break;
    rs_locals *dst = i == p->nsteps - 1 ? out : (src == &a ? &b : &a);
    if ((st = run_sched(o, w, &cc.mesh, s, src, dst, NULL, NULL))) break;
    add_stats(stats, s, hit);
    src = dst;
    cur = next;
  }
  if (!st && p->nsteps == 0) {
    /* an empty plan still hands back a copy of the input */
    rs_sched *s;
    int hit;
    if (!(st = rs_opt_get_sched(o, &cc.mesh, &cc.tensor, &cur, &cur, &s, &hit)))
      st = run_sched(o, w, &cc.mesh, s, in, out, NULL, NULL);
  }
  if (!st && !rs_sharding_equivalent(&cc.mesh, &cur, &cc.dst, nd))
    st = rs_fail(RS_ERR_ILLEGAL, "plan: ends in a layout other than the case's dst");
  rs_locals_free(&a);
  rs_locals_free(&b);
  return st;
}

rs_status rs_opt_sched_pairs(rs_opt *o, const rs_case *c, rs_posted **out, int64_t *n) {
  if (!o || !c || !out || !n) return rs_fail(RS_ERR_INVALID, "opt: NULL argument");
  *out = NULL;
  *n = 0;
  rs_case cc;
  rs_sched *s;
  int hit;
  rs_status st = case_sched(o, c, &cc, &s, &hit);
  if (st) return st;
  int64_t cap = 0;
  for (int r = 0; r < s->nrounds; ++r) cap += s->round[r].nmsg;
  rs_posted *a = malloc(sizeof *a * (size_t)(cap ? cap : 1));
  if (!a) return rs_fail(RS_ERR_NOMEM, "opt: out of memory");
  int64_t k = 0;
  /* Few messages per case: a linear merge of equal pairs across the rounds is enough. */
  for (int r = 0; r < s->nrounds; ++r)
    for (int32_t i = 0; i < s->round[r].nmsg; ++i) {
      const rs_msg *m = &s->round[r].msg[i];
      int32_t from = cc.mesh.ranks[m->src], to = cc.mesh.ranks[m->dst];
      int64_t j = 0;
      while (j < k && !(a[j].from == from && a[j].to == to)) ++j;
      if (j == k) {
        a[k].from = from;
        a[k].to = to;
        a[k].sent = a[k].recvd = 0;
        ++k;
      }
      a[j].sent += m->bytes;
      a[j].recvd += m->bytes;
    }
  *out = a;
  *n = k;
  return RS_OK;
}
