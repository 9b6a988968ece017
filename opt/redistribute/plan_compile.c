/* plan_compile.c - the schedule compiler: for (src layout, dst layout) on one mesh, which box moves
 * from which rank to which, in one round (copy) or two (ordered reduce, then distribute).
 *
 * Copy: every destination box is cut along the source tiles it overlaps; a piece the destination
 * already holds is a local copy, any other piece comes from exactly one of its holders (the least
 * loaded, ties broken by rotating from the replica aligned with the destination). So the bytes sent
 * between distinct ranks are exactly the lower bound of SPEC 7.
 * Reduce (dims Partial in src only): each (dst tile x src tile) atom is split among the ranks that
 * need it; each part's reducer gathers every contribution (locally when it holds one), folds them in
 * canonical order, and sends the result to the other ranks that need the part. */
#include <stdlib.h>
#include <string.h>
#include "opt_internal.h"
#include "core/mutant.h"

/* Tiles of one tensor dim under one sharding: the nested splits of its shard order, listed with the
 * first mesh dim of the order most significant (so starts ascend). */
typedef struct dim_tiles {
  int n;
  int64_t *start, *size;
} dim_tiles;

typedef struct ctx {
  const rs_mesh *m;
  const rs_tensor *t;
  const rs_sharding *src, *dst;
  int nd, nm, es;
  int64_t pstride[RS_MAX_MESH_DIMS]; /* position stride of each mesh dim */
  dim_tiles ts[RS_MAX_DIMS], td[RS_MAX_DIMS];
  int64_t *coord;        /* [pos * nm + m] */
  int32_t *stile;        /* [pos * nd + d]: the src tile index of pos on dim d */
  int64_t *send_load, *red_load;
  /* segments of each round */
  rs_seg *seg[2];
  int64_t nseg[2], cap[2];
  rs_job *job;
  int64_t njob, capjob;
} ctx;

static rs_status tiles_make(ctx *c, const rs_sharding *s, int d, dim_tiles *out) {
  int n = 1;
  for (int k = 0; k < s->order_len[d]; ++k) n *= (int)c->m->size[s->order[d][k]];
  out->n = n;
  out->start = malloc(sizeof(int64_t) * (size_t)n * 2);
  if (!out->start) return rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
  out->size = out->start + n;
  for (int i = 0; i < n; ++i) {
    int64_t st = 0, sz = c->t->shape[d], rest = i, div = n;
    for (int k = 0; k < s->order_len[d]; ++k) {
      int64_t ms = c->m->size[s->order[d][k]];
      div /= ms;
      int64_t ci = rest / div;
      rest %= div;
      int64_t len, off;
      rs_split(sz, ms, ci, &len, &off);
      st += off;
      sz = len;
    }
    out->start[i] = st;
    out->size[i] = sz;
  }
  return RS_OK;
}

/* Tile index of position pos on tensor dim d under sharding s. */
static int tile_of(const ctx *c, const rs_sharding *s, int pos, int d) {
  int idx = 0;
  for (int k = 0; k < s->order_len[d]; ++k) {
    int md = s->order[d][k];
    idx = idx * (int)c->m->size[md] + (int)c->coord[(int64_t)pos * c->nm + md];
  }
  return idx;
}

/* Write the mesh coords a tile combo fixes (one tile index per tensor dim) into coord. */
static void tile_coords(const ctx *c, const rs_sharding *s, const int *tidx, int64_t *coord) {
  for (int d = 0; d < c->nd; ++d) {
    int rest = tidx[d];
    for (int k = s->order_len[d] - 1; k >= 0; --k) {
      int md = s->order[d][k];
      coord[md] = rest % c->m->size[md];
      rest /= (int)c->m->size[md];
    }
  }
}

static int64_t pos_of(const ctx *c, const int64_t *coord) {
  int64_t p = 0;
  for (int m = 0; m < c->nm; ++m) p += coord[m] * c->pstride[m];
  return p;
}

/* The ranks that vary only on the `free` mesh dims from base position `base`. */
typedef struct group {
  int nfree;
  int free[RS_MAX_MESH_DIMS];
  int64_t count;
  int64_t base;
} group;

static int64_t group_member(const ctx *c, const group *g, int64_t k) {
  int64_t p = g->base;
  for (int j = g->nfree - 1; j >= 0; --j) {
    int md = g->free[j];
    p += (k % c->m->size[md]) * c->pstride[md];
    k /= c->m->size[md];
  }
  return p;
}

/* Index within group g of the member whose free coords equal those of position pos. */
static int64_t group_aligned(const ctx *c, const group *g, int64_t pos) {
  int64_t k = 0;
  for (int j = 0; j < g->nfree; ++j) {
    int md = g->free[j];
    k = k * c->m->size[md] + c->coord[pos * c->nm + md];
  }
  return k;
}

static void group_init(const ctx *c, group *g, const int64_t *coord, const int *isfree) {
  int64_t cc[RS_MAX_MESH_DIMS];
  g->nfree = 0;
  g->count = 1;
  for (int m = 0; m < c->nm; ++m) {
    cc[m] = coord[m];
    if (isfree[m]) {
      g->free[g->nfree++] = m;
      g->count *= c->m->size[m];
      cc[m] = 0;
    }
  }
  g->base = pos_of(c, cc);
}

/* The least loaded member, scanning from the one aligned with `near`. */
static int64_t pick_sender(ctx *c, const group *g, int64_t near) {
  int64_t a = group_aligned(c, g, near), best = -1, bestload = 0;
  for (int64_t k = 0; k < g->count; ++k) {
    int64_t p = group_member(c, g, (a + k) % g->count);
    if (best < 0 || c->send_load[p] < bestload) {
      best = p;
      bestload = c->send_load[p];
    }
  }
  return best;
}

static rs_status push_seg(ctx *c, int round, int32_t src, int32_t dst, int sbuf, int dbuf,
                          int32_t job, int32_t contrib, const rs_box *box) {
  if (c->nseg[round] == c->cap[round]) {
    int64_t nc = c->cap[round] ? c->cap[round] * 2 : 64;
    rs_seg *p = realloc(c->seg[round], sizeof(rs_seg) * (size_t)nc);
    if (!p) return rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
    c->seg[round] = p;
    c->cap[round] = nc;
  }
  rs_seg *s = &c->seg[round][c->nseg[round]++];
  s->src = src;
  s->dst = dst;
  s->sbuf = (int8_t)sbuf;
  s->dbuf = (int8_t)dbuf;
  s->job = job;
  s->contrib = contrib;
  s->box = *box;
  if (src != dst) c->send_load[src] += rs_box_numel(c->nd, box);
  return RS_OK;
}

/* Per tensor dim, the indices of the src tiles (non-empty) that overlap [lo, lo+len). */
typedef struct overlap {
  int n[RS_MAX_DIMS];
  int *idx[RS_MAX_DIMS];
} overlap;

static void overlap_find(const ctx *c, const rs_box *b, overlap *o, int *scratch) {
  int off = 0;
  for (int d = 0; d < c->nd; ++d) {
    const dim_tiles *t = &c->ts[d];
    o->idx[d] = scratch + off;
    o->n[d] = 0;
    int64_t lo = b->start[d], hi = b->start[d] + b->size[d];
    for (int i = 0; i < t->n; ++i) {
      if (t->size[i] == 0) continue;
      int64_t a = t->start[i], e = a + t->size[i];
      if (a < hi && e > lo) o->idx[d][o->n[d]++] = i;
    }
    off += t->n;
  }
}

/* Advance a mixed-radix counter over the overlap lists; returns 0 when done. */
static int combo_next(const ctx *c, const overlap *o, int *k) {
  for (int d = c->nd - 1; d >= 0; --d) {
    if (++k[d] < o->n[d]) return 1;
    k[d] = 0;
  }
  return 0;
}

static int overlap_empty(const ctx *c, const overlap *o) {
  for (int d = 0; d < c->nd; ++d)
    if (o->n[d] == 0) return 1;
  return 0;
}

static void tile_box(const ctx *c, const dim_tiles *t, const int *tidx, rs_box *b) {
  for (int d = 0; d < c->nd; ++d) {
    b->start[d] = t[d].start[tidx[d]];
    b->size[d] = t[d].size[tidx[d]];
  }
}

/* Mesh-dim roles. */
typedef struct roles {
  int keep[RS_MAX_MESH_DIMS]; /* Partial in both */
  int red[RS_MAX_MESH_DIMS];  /* Partial in src only */
  int src_free[RS_MAX_MESH_DIMS], dst_free[RS_MAX_MESH_DIMS];
  int nred;
  int64_t ncontrib;
} roles;

static rs_status compile_copy(ctx *c, const roles *r, int *scratch) {
  for (int q = 0; q < c->m->nranks; ++q) {
    int64_t qc[RS_MAX_MESH_DIMS];
    memcpy(qc, &c->coord[(int64_t)q * c->nm], sizeof(int64_t) * (size_t)c->nm);
    int64_t ds[RS_MAX_DIMS], dz[RS_MAX_DIMS];
    rs_local_box(c->m, c->dst, c->t, qc, ds, dz);
    rs_box ob;
    memcpy(ob.start, ds, sizeof ds);
    memcpy(ob.size, dz, sizeof dz);
    if (rs_box_numel(c->nd, &ob) == 0) continue;
    overlap o;
    overlap_find(c, &ob, &o, scratch);
    if (overlap_empty(c, &o)) continue;
    int k[RS_MAX_DIMS] = {0};
    do {
      int tidx[RS_MAX_DIMS];
      int mine = 1;
      for (int d = 0; d < c->nd; ++d) {
        tidx[d] = o.idx[d][k[d]];
        mine &= tidx[d] == c->stile[(int64_t)q * c->nd + d];
      }
      rs_box tb, region;
      tile_box(c, c->ts, tidx, &tb);
      rs_box_intersect(c->nd, &tb, &ob, &region);
      rs_status st;
      if (mine) {
        /* Mutant 105: the piece a rank already holds is never copied into its output. */
        if (RS_MUTANT(105)) continue;
        st = push_seg(c, 0, q, q, RS_BUF_IN, RS_BUF_OUT, -1, 0, &region);
      } else {
        int64_t hc[RS_MAX_MESH_DIMS];
        memcpy(hc, qc, sizeof hc); /* kept-Partial coords stay the destination's */
        tile_coords(c, c->src, tidx, hc);
        group g;
        group_init(c, &g, hc, r->src_free);
        int64_t p = pick_sender(c, &g, q);
        st = push_seg(c, 0, (int32_t)p, q, RS_BUF_IN, RS_BUF_OUT, -1, 0, &region);
      }
      if (st) return st;
    } while (combo_next(c, &o, k));
  }
  return RS_OK;
}

static rs_status push_job(ctx *c, int32_t reducer, const rs_box *b, int32_t *id) {
  if (c->njob == c->capjob) {
    int64_t nc = c->capjob ? c->capjob * 2 : 32;
    rs_job *p = realloc(c->job, sizeof(rs_job) * (size_t)nc);
    if (!p) return rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
    c->job = p;
    c->capjob = nc;
  }
  rs_job *j = &c->job[c->njob];
  j->reducer = reducer;
  j->box = *b;
  j->numel = rs_box_numel(c->nd, b);
  j->ws_off = 0;
  *id = (int32_t)c->njob++;
  return RS_OK;
}

/* One atom (a dst tile's piece of one src tile) for kept-Partial coords g: split, reduce,
 * distribute. */
static rs_status reduce_atom(ctx *c, const roles *r, const rs_box *atom, const int *stidx,
                             const group *dg, const int64_t *gcoord) {
  /* split the atom among the ranks that need it, along the first dim long enough */
  int64_t parts = dg->count;
  int sd = -1;
  for (int d = 0; d < c->nd; ++d)
    if (atom->size[d] >= parts) {
      sd = d;
      break;
    }
  if (sd < 0) {
    int64_t best = 1;
    for (int d = 0; d < c->nd; ++d)
      if (atom->size[d] > best) {
        best = atom->size[d];
        sd = d;
      }
    parts = sd < 0 ? 1 : best;
  }
  for (int64_t j = 0; j < parts; ++j) {
    rs_box part = *atom;
    if (sd >= 0) {
      int64_t len = atom->size[sd];
      int64_t a = len * j / parts, b = len * (j + 1) / parts;
      part.start[sd] = atom->start[sd] + a;
      part.size[sd] = b - a;
    }
    int64_t numel = rs_box_numel(c->nd, &part);
    if (numel == 0) continue;
    /* reducer: the least loaded rank that needs the part, scanning from member j */
    int64_t rho = -1, rl = 0;
    for (int64_t k = 0; k < dg->count; ++k) {
      int64_t p = group_member(c, dg, (j + k) % dg->count);
      if (rho < 0 || c->red_load[p] < rl) {
        rho = p;
        rl = c->red_load[p];
      }
    }
    c->red_load[rho] += numel;
    int32_t jid = -1;
    rs_status st = push_job(c, (int32_t)rho, &part, &jid);
    if (st) return st;
    int rho_mine = 1;
    for (int d = 0; d < c->nd; ++d) rho_mine &= stidx[d] == c->stile[rho * c->nd + d];
    for (int64_t k = 0; k < r->ncontrib; ++k) {
      int64_t hc[RS_MAX_MESH_DIMS];
      memcpy(hc, gcoord, sizeof hc);
      tile_coords(c, c->src, stidx, hc);
      /* Mutant 102: the last contribution is fetched from the holders of the first piece. */
      int64_t kk = RS_MUTANT(102) && k + 1 == r->ncontrib ? 0 : k, rest = kk;
      int holds = rho_mine;
      for (int i = 0; i < r->nred; ++i) {
        int md = r->red[i];
        hc[md] = rest % c->m->size[md];
        rest /= c->m->size[md];
        holds &= hc[md] == c->coord[rho * c->nm + md];
      }
      if (holds) {
        st = push_seg(c, 0, (int32_t)rho, (int32_t)rho, RS_BUF_IN, RS_BUF_SLOT, jid, (int32_t)k, &part);
      } else {
        group g;
        group_init(c, &g, hc, r->src_free);
        int64_t p = pick_sender(c, &g, rho);
        st = push_seg(c, 0, (int32_t)p, (int32_t)rho, RS_BUF_IN, RS_BUF_SLOT, jid, (int32_t)k, &part);
      }
      if (st) return st;
    }
    for (int64_t k = 0; k < dg->count; ++k) {
      int64_t q = group_member(c, dg, k);
      st = push_seg(c, 1, (int32_t)rho, (int32_t)q, RS_BUF_RES, RS_BUF_OUT, jid, 0, &part);
      if (st) return st;
    }
  }
  return RS_OK;
}

static rs_status compile_reduce(ctx *c, const roles *r, int *scratch) {
  int kdims[RS_MAX_MESH_DIMS], nk = 0;
  int64_t ngroups = 1;
  for (int m = 0; m < c->nm; ++m)
    if (r->keep[m]) {
      kdims[nk++] = m;
      ngroups *= c->m->size[m];
    }
  int64_t ndt = 1;
  for (int d = 0; d < c->nd; ++d) ndt *= c->td[d].n;
  for (int64_t g = 0; g < ngroups; ++g) {
    int64_t gcoord[RS_MAX_MESH_DIMS] = {0}, rest = g;
    for (int i = nk - 1; i >= 0; --i) {
      gcoord[kdims[i]] = rest % c->m->size[kdims[i]];
      rest /= c->m->size[kdims[i]];
    }
    for (int64_t t = 0; t < ndt; ++t) {
      int didx[RS_MAX_DIMS];
      int64_t tr = t;
      int empty = 0;
      for (int d = c->nd - 1; d >= 0; --d) {
        didx[d] = (int)(tr % c->td[d].n);
        tr /= c->td[d].n;
        empty |= c->td[d].size[didx[d]] == 0;
      }
      if (empty) continue;
      rs_box db;
      tile_box(c, c->td, didx, &db);
      int64_t dc[RS_MAX_MESH_DIMS];
      memcpy(dc, gcoord, sizeof dc);
      tile_coords(c, c->dst, didx, dc);
      group dg;
      group_init(c, &dg, dc, r->dst_free);
      overlap o;
      overlap_find(c, &db, &o, scratch);
      if (overlap_empty(c, &o)) continue;
      int k[RS_MAX_DIMS] = {0};
      do {
        int sidx[RS_MAX_DIMS];
        for (int d = 0; d < c->nd; ++d) sidx[d] = o.idx[d][k[d]];
        rs_box sb, atom;
        tile_box(c, c->ts, sidx, &sb);
        rs_box_intersect(c->nd, &sb, &db, &atom);
        rs_status st = reduce_atom(c, r, &atom, sidx, &dg, gcoord);
        if (st) return st;
      } while (combo_next(c, &o, k));
    }
  }
  return RS_OK;
}

static int seg_cmp(const void *a, const void *b) {
  const rs_seg *x = a, *y = b;
  int lx = x->src == x->dst, ly = y->src == y->dst;
  if (lx != ly) return lx - ly;
  if (x->src != y->src) return x->src < y->src ? -1 : 1;
  if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
  return 0;
}

/* qsort is not stable: keep generation order within a pair by sorting (key, index) pairs. */
typedef struct keyed {
  rs_seg s;
  int64_t i;
} keyed;

static int keyed_cmp(const void *a, const void *b) {
  int r = seg_cmp(&((const keyed *)a)->s, &((const keyed *)b)->s);
  if (r) return r;
  int64_t x = ((const keyed *)a)->i, y = ((const keyed *)b)->i;
  return x < y ? -1 : x > y;
}

static rs_status finish_round(ctx *c, rs_sched *s, int round, int64_t *task) {
  rs_round *rd = &s->round[round];
  int64_t n = c->nseg[round];
  keyed *k = malloc(sizeof(keyed) * (size_t)(n ? n : 1));
  if (!k) return rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
  for (int64_t i = 0; i < n; ++i) {
    k[i].s = c->seg[round][i];
    k[i].i = i;
  }
  qsort(k, (size_t)n, sizeof *k, keyed_cmp);
  rd->seg = c->seg[round];
  c->seg[round] = NULL;
  for (int64_t i = 0; i < n; ++i) rd->seg[i] = k[i].s;
  free(k);
  rd->nseg = (int32_t)n;
  int64_t nmsg = 0, local0 = n;
  for (int64_t i = 0; i < n; ++i) {
    const rs_seg *x = &rd->seg[i];
    if (x->src == x->dst) {
      local0 = i;
      break;
    }
    if (i == 0 || x->src != rd->seg[i - 1].src || x->dst != rd->seg[i - 1].dst) nmsg++;
  }
  rd->local0 = (int32_t)local0;
  rd->nlocal = (int32_t)(n - local0);
  rd->nmsg = (int32_t)nmsg;
  rd->msg = calloc((size_t)(nmsg ? nmsg : 1), sizeof(rs_msg));
  if (!rd->msg) return rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
  int64_t mi = -1;
  for (int64_t i = 0; i < local0; ++i) {
    const rs_seg *x = &rd->seg[i];
    int64_t bytes = rs_box_numel(c->nd, &x->box) * c->es;
    if (i == 0 || x->src != rd->seg[i - 1].src || x->dst != rd->seg[i - 1].dst) {
      rs_msg *m = &rd->msg[++mi];
      m->src = x->src;
      m->dst = x->dst;
      m->task = (*task)++;
      m->first = (int32_t)i;
      m->count = 0;
      m->bytes = 0;
    }
    rd->msg[mi].count++;
    /* Mutant 280: a message's byte count leaves out its third and later segments (the schedule's
     * count lies; the data still moves). */
    if (!(RS_MUTANT(280) && rd->msg[mi].count >= 3)) rd->msg[mi].bytes += bytes;
    s->bytes_sent += bytes;
  }
  for (int64_t i = local0; i < n; ++i) s->bytes_local += rs_box_numel(c->nd, &rd->seg[i].box) * c->es;
  s->messages += nmsg;
  return RS_OK;
}

void rs_sched_free(rs_sched *s) {
  if (!s) return;
  for (int r = 0; r < 2; ++r) {
    free(s->round[r].seg);
    free(s->round[r].msg);
  }
  free(s->job);
  free(s->in_box);
  free(s->ws_bytes);
  free(s);
}

static void ctx_free(ctx *c) {
  for (int d = 0; d < RS_MAX_DIMS; ++d) {
    free(c->ts[d].start);
    free(c->td[d].start);
  }
  free(c->coord);
  free(c->stile);
  free(c->send_load);
  free(c->seg[0]);
  free(c->seg[1]);
  free(c->job);
}


/* Every segment lies inside the buffers it reads and writes. The schedule intersects opt's own
 * tile grid with core's SPEC 4 boxes; if the two ever disagree (a bug in either), the copy would
 * run outside a buffer, so the compiler refuses the schedule instead. */
static int box_inside(int nd, const rs_box *in, const rs_box *buf) {
  int64_t n = 1;
  for (int d = 0; d < nd; ++d) n *= in->size[d];
  if (n == 0) return 1;
  for (int d = 0; d < nd; ++d)
    if (in->start[d] < buf->start[d] || in->start[d] + in->size[d] > buf->start[d] + buf->size[d]) return 0;
  return 1;
}

static const rs_box *seg_buf(const rs_sched *s, const rs_seg *g, int end) {
  int buf = end ? g->dbuf : g->sbuf, pos = end ? g->dst : g->src;
  if (buf == RS_BUF_IN) return &s->in_box[pos];
  if (buf == RS_BUF_OUT) return &s->out_box[pos];
  return g->job >= 0 && g->job < s->njob ? &s->job[g->job].box : NULL;
}

static rs_status check_bounds(const rs_sched *s) {
  for (int rd = 0; rd < s->nrounds; ++rd)
    for (int32_t i = 0; i < s->round[rd].nseg; ++i) {
      const rs_seg *g = &s->round[rd].seg[i];
      for (int end = 0; end < 2; ++end) {
        const rs_box *b = seg_buf(s, g, end);
        if (!b || !box_inside(s->ndim, &g->box, b))
          return rs_fail(RS_ERR_ILLEGAL, "opt plan: a segment of round %d lies outside the %s buffer of mesh position %d "
                         "(opt's tiles and SPEC 4's boxes disagree)", rd, end ? "receiving" : "sending",
                         (int)(end ? g->dst : g->src));
      }
    }
  return RS_OK;
}

rs_status rs_sched_compile(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                           const rs_sharding *dst, rs_sched **out) {
  *out = NULL;
  /* A whole-layout change has a meaning whenever the oracle gives it one: S -> P is reachable
   * legally (S -> R -> P) and means a partition; only P(x) -> P(y) on one mesh dim has none. */
  for (int i = 0; i < m->ndim; ++i)
    if (src->p[i].kind == RS_PARTIAL && dst->p[i].kind == RS_PARTIAL && src->p[i].op != dst->p[i].op)
      return rs_fail(RS_ERR_UNSUPPORTED, "dst.placements[%d]: Partial op differs from src's (P(x) -> P(y))", i);
  ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.t = t;
  c.src = src;
  c.dst = dst;
  c.nd = t->ndim;
  c.nm = m->ndim;
  c.es = rs_dtype_size(t->dtype);
  int n = m->nranks;
  rs_sched *s = calloc(1, sizeof *s);
  rs_status st = RS_OK;
  int *scratch = NULL;
  int ntiles = 0;
  int64_t task = 0;
  if (!s) return rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
  s->ndim = c.nd;
  s->esize = c.es;
  s->nranks = n;
  s->dtype = t->dtype;
  /* position strides from core's one definition of SPEC 2 (rs_mesh_pos is linear in the
   * coordinates), so the positions computed here and the coordinates of rs_mesh_coord below cannot
   * disagree (a disagreement sent pieces into buffers sized for other ranks) */
  for (int i = 0; i < c.nm; ++i) {
    int64_t unit[RS_MAX_MESH_DIMS] = {0};
    unit[i] = 1;
    c.pstride[i] = rs_mesh_pos(m, unit);
  }
  c.coord = malloc(sizeof(int64_t) * (size_t)n * (size_t)(c.nm ? c.nm : 1));
  c.stile = malloc(sizeof(int32_t) * (size_t)n * (size_t)(c.nd ? c.nd : 1));
  c.send_load = calloc((size_t)n * 2, sizeof(int64_t));
  s->in_box = malloc(sizeof(rs_box) * (size_t)n * 2);
  s->ws_bytes = calloc((size_t)n, sizeof(int64_t));
  if (!c.coord || !c.stile || !c.send_load || !s->in_box || !s->ws_bytes) {
    st = rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
    goto done;
  }
  c.red_load = c.send_load + n;
  s->out_box = s->in_box + n;
  for (int d = 0; d < c.nd; ++d) {
    if ((st = tiles_make(&c, src, d, &c.ts[d])) || (st = tiles_make(&c, dst, d, &c.td[d])))
      goto done;
    ntiles += c.ts[d].n;
  }
  scratch = malloc(sizeof(int) * (size_t)(ntiles ? ntiles : 1));
  if (!scratch) {
    st = rs_fail(RS_ERR_NOMEM, "opt plan: out of memory");
    goto done;
  }
  for (int p = 0; p < n; ++p) {
    rs_mesh_coord(m, p, &c.coord[(int64_t)p * c.nm]);
    for (int d = 0; d < c.nd; ++d) c.stile[(int64_t)p * c.nd + d] = tile_of(&c, src, p, d);
    rs_local_box(m, src, t, &c.coord[(int64_t)p * c.nm], s->in_box[p].start, s->in_box[p].size);
    rs_local_box(m, dst, t, &c.coord[(int64_t)p * c.nm], s->out_box[p].start, s->out_box[p].size);
  }
  roles r;
  memset(&r, 0, sizeof r);
  r.ncontrib = 1;
  for (int i = 0; i < c.nm; ++i) {
    int sp = src->p[i].kind == RS_PARTIAL, dp = dst->p[i].kind == RS_PARTIAL;
    r.keep[i] = sp && dp;
    r.src_free[i] = src->p[i].kind == RS_REPLICATE;
    r.dst_free[i] = dst->p[i].kind == RS_REPLICATE || (dp && !sp);
    if (sp && !dp) {
      r.red[r.nred++] = i;
      r.ncontrib *= m->size[i];
      s->level_n[s->nlevel] = m->size[i];
      s->level_op[s->nlevel++] = src->p[i].op;
    }
    if (dp && !sp && dst->p[i].op == RS_SUM) s->div[s->ndiv++] = m->size[i];
  }
  s->ncontrib = (int32_t)r.ncontrib;
  if (r.nred == 0) {
    s->nrounds = 1;
    st = compile_copy(&c, &r, scratch);
  } else {
    s->nrounds = 2;
    st = compile_reduce(&c, &r, scratch);
  }
  if (st) goto done;
  for (int rd = 0; rd < s->nrounds; ++rd)
    if ((st = finish_round(&c, s, rd, &task))) goto done;
  s->job = c.job;
  s->njob = (int32_t)c.njob;
  c.job = NULL;
  for (int32_t j = 0; j < s->njob; ++j) {
    rs_job *jb = &s->job[j];
    jb->ws_off = s->ws_bytes[jb->reducer];
    s->ws_bytes[jb->reducer] += jb->numel * c.es * s->ncontrib;
  }
  st = check_bounds(s);
done:
  free(scratch);
  ctx_free(&c);
  if (st) {
    rs_sched_free(s);
    return st;
  }
  *out = s;
  return RS_OK;
}
