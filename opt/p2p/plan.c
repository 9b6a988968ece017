/* plan.c - opt's P2P planner (SPEC 10): minimal traffic and balanced senders, deterministic, fast.
 *
 * Per parameter, the source layout tiles each tensor dim into 1-D intervals (one per coordinate
 * tuple of the mesh dims that split it, in shard order); a source chunk is one interval per dim and
 * its holders are the positions with those coordinates on the sharding mesh dims (any coordinate on
 * the replicated ones). For each destination rank the chunks that meet its box are found by binary
 * search per dim; the rank's own chunk (if it holds the parameter in the source) is a local copy, so
 * traffic is exactly SPEC 7's bound, and every other chunk is sent by the least-loaded of a window
 * of its holders (a cursor per chunk rotates through the replicas), with per-rank byte counts shared
 * across parameters. Same inputs, same plan: no hashing of pointers, no threads. */
#include <stdlib.h>
#include <string.h>
#include "core/box.h"
#include "core/mutant.h"
#include "p2p/opt_p2p.h"

#define WINDOW 4

typedef struct ivl {
  int64_t start, size;
  int64_t tuple; /* row-major index of the coordinate tuple on the dim's shard order */
} ivl;

typedef struct dim_tiling {
  int nmd;                        /* mesh dims splitting this tensor dim, in shard order */
  int md[RS_MAX_MESH_DIMS];
  int64_t n;                      /* intervals */
  ivl *v;
} dim_tiling;

/* 1-D tiling of extent len split by mesh dims md[0..nmd) of sizes msz, nested in order. */
static rs_status tile_dim(int64_t len, int nmd, const int *md, const int64_t *msz, dim_tiling *out) {
  out->nmd = nmd;
  memcpy(out->md, md, (size_t)nmd * sizeof(int));
  int64_t n = 1;
  for (int k = 0; k < nmd; ++k) n *= msz[md[k]];
  out->n = n;
  out->v = malloc((size_t)n * sizeof(ivl));
  if (!out->v) return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = j, c[RS_MAX_MESH_DIMS];
    for (int k = nmd - 1; k >= 0; --k) {
      c[k] = rem % msz[md[k]];
      rem /= msz[md[k]];
    }
    int64_t st = 0, sz = len;
    for (int k = 0; k < nmd; ++k) {
      int64_t l, o;
      rs_split(sz, msz[md[k]], c[k], &l, &o);
      st += o;
      sz = l;
    }
    out->v[j].start = st;
    out->v[j].size = sz;
    out->v[j].tuple = j;
  }
  return RS_OK;
}

/* First interval whose end is past x (intervals are ordered by start, tuple order = offset order). */
static int64_t first_past(const dim_tiling *t, int64_t x) {
  int64_t lo = 0, hi = t->n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (t->v[mid].start + t->v[mid].size > x) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

typedef struct pctx {
  const rs_p2p_model *m;
  int64_t p;
  const rs_p2p_mesh *sm;
  const rs_sharding *ss;
  const rs_tensor *t;
  dim_tiling tile[RS_MAX_DIMS];
  int64_t stride[RS_MAX_MESH_DIMS]; /* position strides of the source mesh */
  int nrep_dims;
  int rep_dim[RS_MAX_MESH_DIMS];
  int64_t nrep;
  int64_t *rep_off;                 /* position offset of each replica index */
  int64_t nchunk;
  int64_t *cursor;                  /* per chunk (row-major over the dims' tuples) */
} pctx;

static void pctx_free(pctx *c) {
  for (int d = 0; d < RS_MAX_DIMS; ++d) free(c->tile[d].v);
  free(c->rep_off);
  free(c->cursor);
}

static rs_status pctx_init(pctx *c, const rs_p2p_model *m, int64_t p) {
  memset(c, 0, sizeof *c);
  c->m = m;
  c->p = p;
  const rs_p2p_config *sc = &m->cfg[RS_P2P_SRC];
  c->sm = &sc->mesh[sc->place[p].mesh];
  c->ss = &sc->place[p].s;
  c->t = &m->param[p].t;
  rs_status st;
  int sharding[RS_MAX_MESH_DIMS] = {0};
  c->nchunk = 1;
  for (int d = 0; d < c->t->ndim; ++d) {
    int md[RS_MAX_MESH_DIMS];
    for (int k = 0; k < c->ss->order_len[d]; ++k) {
      md[k] = c->ss->order[d][k];
      sharding[md[k]] = 1;
    }
    if ((st = tile_dim(c->t->shape[d], c->ss->order_len[d], md, c->sm->size, &c->tile[d]))) return st;
    c->nchunk *= c->tile[d].n;
  }
  int64_t s = 1;
  for (int i = c->sm->ndim - 1; i >= 0; --i) {
    c->stride[i] = s;
    s *= c->sm->size[i];
  }
  c->nrep = 1;
  for (int i = 0; i < c->sm->ndim; ++i)
    if (!sharding[i]) {
      c->rep_dim[c->nrep_dims++] = i;
      c->nrep *= c->sm->size[i];
    }
  c->rep_off = malloc((size_t)c->nrep * sizeof(int64_t));
  c->cursor = calloc((size_t)(c->nchunk ? c->nchunk : 1), sizeof(int64_t));
  if (!c->rep_off || !c->cursor) return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  for (int64_t j = 0; j < c->nrep; ++j) {
    int64_t rem = j, off = 0;
    for (int k = c->nrep_dims - 1; k >= 0; --k) {
      int md = c->rep_dim[k];
      off += (rem % c->sm->size[md]) * c->stride[md];
      rem /= c->sm->size[md];
    }
    c->rep_off[j] = off;
  }
  return RS_OK;
}

/* Chunk of source position sp: its interval index per dim. */
static void chunk_of_pos(const pctx *c, int64_t sp, int64_t *iv) {
  int64_t coord[RS_MAX_MESH_DIMS];
  rs_coord_of_pos(c->sm->ndim, c->sm->size, sp, coord);
  for (int d = 0; d < c->t->ndim; ++d) {
    int64_t j = 0;
    for (int k = 0; k < c->tile[d].nmd; ++k) j = j * c->sm->size[c->tile[d].md[k]] + coord[c->tile[d].md[k]];
    iv[d] = j; /* tuple index == interval index */
  }
}

/* Position of replica 0 of the chunk with tuples tup[d]. */
static int64_t chunk_base(const pctx *c, const int64_t *tup) {
  int64_t pos = 0;
  for (int d = 0; d < c->t->ndim; ++d) {
    int64_t rem = tup[d];
    for (int k = c->tile[d].nmd - 1; k >= 0; --k) {
      int md = c->tile[d].md[k];
      pos += (rem % c->sm->size[md]) * c->stride[md];
      rem /= c->sm->size[md];
    }
  }
  return pos;
}

rs_status rs__p2p_opt_plan(const rs_p2p_model *m, rs_p2p_plan *out) {
  memset(out, 0, sizeof *out);
  int64_t *load = calloc((size_t)(m->world ? m->world : 1), sizeof *load);
  if (!load) return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  rs_status st = RS_OK;
  int64_t task = 0;
  for (int64_t p = 0; p < m->nparams && !st; ++p) {
    pctx c;
    if ((st = pctx_init(&c, m, p))) {
      pctx_free(&c);
      break;
    }
    const rs_tensor *t = c.t;
    int nd = t->ndim, es = rs_dtype_size(t->dtype);
    const rs_p2p_config *dc = &m->cfg[RS_P2P_DST];
    const rs_p2p_mesh *dm = &dc->mesh[dc->place[p].mesh];
    for (int64_t q = 0; q < dm->nranks && !st; ++q) {
      int32_t r = dm->ranks[q];
      int64_t bs[RS_MAX_DIMS], bz[RS_MAX_DIMS], lo[RS_MAX_DIMS], hi[RS_MAX_DIMS], mine[RS_MAX_DIMS];
      rs_p2p_box(m, RS_P2P_DST, p, q, bs, bz);
      int empty = 0;
      for (int d = 0; d < nd && !empty; ++d) {
        if (!bz[d]) empty = 1;
        lo[d] = first_past(&c.tile[d], bs[d]);
        hi[d] = lo[d];
        while (hi[d] < c.tile[d].n && c.tile[d].v[hi[d]].start < bs[d] + bz[d]) hi[d]++;
      }
      if (empty) continue;
      int64_t sp = c.sm->pos_of[r];
      if (sp >= 0) chunk_of_pos(&c, sp, mine);
      /* walk the product of the per-dim interval ranges */
      int64_t cur[RS_MAX_DIMS];
      for (int d = 0; d < nd; ++d) cur[d] = lo[d];
      for (;;) {
        int64_t is[RS_MAX_DIMS], iz[RS_MAX_DIMS], n = 1;
        int local = sp >= 0 && !RS_MUTANT(407); /* 407: never copy locally */
        for (int d = 0; d < nd; ++d) {
          const ivl *v = &c.tile[d].v[cur[d]];
          int64_t a = v->start > bs[d] ? v->start : bs[d];
          int64_t b = v->start + v->size < bs[d] + bz[d] ? v->start + v->size : bs[d] + bz[d];
          if (RS_MUTANT(400)) b++; /* off-by-one intersection */
          is[d] = a;
          iz[d] = b > a ? b - a : 0;
          n *= iz[d];
          if (cur[d] != mine[d]) local = 0;
        }
        if (n > 0) {
          int32_t from;
          if (local) {
            from = r;
          } else {
            int64_t tup[RS_MAX_DIMS], chunk = 0;
            for (int d = 0; d < nd; ++d) {
              tup[d] = c.tile[d].v[cur[d]].tuple;
              chunk = chunk * c.tile[d].n + cur[d];
            }
            int64_t base = chunk_base(&c, tup), k0 = c.cursor[chunk], best = k0 % c.nrep;
            int64_t w = c.nrep < WINDOW ? c.nrep : WINDOW;
            for (int64_t k = 1; k < w; ++k) {
              int64_t j = (k0 + k) % c.nrep;
              if (load[c.sm->ranks[base + c.rep_off[j]]] < load[c.sm->ranks[base + c.rep_off[best]]]) best = j;
            }
            c.cursor[chunk] = best + 1;
            from = c.sm->ranks[base + c.rep_off[best]];
            if (RS_MUTANT(401)) from = c.sm->ranks[(base + c.rep_off[best] + 1) % c.sm->nranks]; /* not a holder */
            load[from] += n * es;
          }
          int64_t id = task++;
          st = rs_p2p_plan_add(out, id, (int32_t)p, from, r, nd, is, iz);
          if (st) break;
        }
        int d = nd - 1;
        for (; d >= 0; --d) {
          if (++cur[d] < hi[d]) break;
          cur[d] = lo[d];
        }
        if (d < 0) break;
      }
    }
    pctx_free(&c);
  }
  free(load);
  if (!st) st = rs_p2p_plan_stats(m, out);
  if (st) rs_p2p_plan_free(out);
  return st;
}
