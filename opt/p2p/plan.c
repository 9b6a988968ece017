/* plan.c - opt's P2P planner (SPEC 10): minimal traffic and balanced senders, deterministic, fast.
 *
 * Per parameter, each configuration tiles each tensor dim into 1-D intervals (one per coordinate
 * tuple of the mesh dims that split it, in shard order); a chunk is one interval per dim and its
 * holders are the positions with those coordinates on the sharding mesh dims (any coordinate on the
 * replicated ones). The work is done once per destination chunk, not once per destination rank: the
 * source chunks that meet it are found by binary search per dim (the pieces), then every replica of
 * the destination chunk takes each piece either by a local copy (it holds that source chunk itself,
 * so traffic is exactly SPEC 7's bound) or from the least-loaded of a window of the piece's holders
 * (a cursor per source chunk rotates through the replicas), with per-rank byte counts shared across
 * parameters. This keeps planning linear in the number of transfers with a small constant (a
 * 100-layer template on 4,096 ranks is 1.2 M transfers): per transfer, one comparison of chunk
 * numbers decides a local copy (the destination replica's own source chunk is computed once per
 * replica), the window is walked without division, and the transfer's box is not copied (every
 * replica of a destination chunk takes the same pieces, so their transfers share one box in
 * plan->coords). Same inputs, same plan: no hashing of pointers, no threads. */
#include <stdlib.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#include <string.h>
#include "core/box.h"
#include "core/checked.h"
#include "core/mutant.h"
#include "p2p/opt_p2p.h"

#define WINDOW 4

typedef struct ivl {
  int64_t start, size;
} ivl;

typedef struct dim_tiling {
  int nmd; /* mesh dims splitting this tensor dim, in shard order */
  int md[RS_MAX_MESH_DIMS];
  int64_t n; /* intervals; interval j is coordinate tuple j (row-major over md), in offset order */
  ivl *v;
} dim_tiling;

/* One configuration of one parameter, tiled. */
typedef struct side {
  const rs_p2p_mesh *mesh;
  int ndim;
  dim_tiling tile[RS_MAX_DIMS];
  int64_t stride[RS_MAX_MESH_DIMS]; /* position strides of the mesh */
  int64_t nrep;
  int64_t *rep_off; /* position offset of each replica index, ascending */
} side;

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
  }
  return RS_OK;
}

/* First interval whose end is past x. */
static int64_t first_past(const dim_tiling *t, int64_t x) {
  int64_t lo = 0, hi = t->n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (t->v[mid].start + t->v[mid].size > x) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

static void side_free(side *c) {
  for (int d = 0; d < RS_MAX_DIMS; ++d) free(c->tile[d].v);
  free(c->rep_off);
}

static rs_status side_init(side *c, const rs_p2p_model *m, int which, int64_t p) {
  memset(c, 0, sizeof *c);
  const rs_p2p_config *cf = &m->cfg[which];
  const rs_sharding *s = &cf->place[p].s;
  const rs_tensor *t = &m->param[p].t;
  c->mesh = &cf->mesh[cf->place[p].mesh];
  c->ndim = t->ndim;
  rs_status st;
  int sharding[RS_MAX_MESH_DIMS] = {0};
  for (int d = 0; d < t->ndim; ++d) {
    int md[RS_MAX_MESH_DIMS];
    for (int k = 0; k < s->order_len[d]; ++k) {
      md[k] = s->order[d][k];
      sharding[md[k]] = 1;
    }
    if ((st = tile_dim(t->shape[d], s->order_len[d], md, c->mesh->size, &c->tile[d]))) return st;
  }
  int64_t str = 1;
  for (int i = c->mesh->ndim - 1; i >= 0; --i) {
    c->stride[i] = str;
    str *= c->mesh->size[i];
  }
  int nrd = 0, rd[RS_MAX_MESH_DIMS];
  c->nrep = 1;
  for (int i = 0; i < c->mesh->ndim; ++i)
    if (!sharding[i]) {
      rd[nrd++] = i;
      c->nrep *= c->mesh->size[i];
    }
  c->rep_off = malloc((size_t)c->nrep * sizeof(int64_t));
  if (!c->rep_off) return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  /* replica j is coordinate tuple j row-major over rd: an odometer, no division per replica */
  int64_t co[RS_MAX_MESH_DIMS] = {0}, off = 0;
  for (int64_t j = 0; j < c->nrep; ++j) {
    c->rep_off[j] = off;
    for (int k = nrd - 1; k >= 0; --k) {
      off += c->stride[rd[k]];
      if (++co[k] < c->mesh->size[rd[k]]) break;
      off -= co[k] * c->stride[rd[k]];
      co[k] = 0;
    }
  }
  return RS_OK;
}

/* Position of replica 0 of the chunk whose interval index per dim is iv[d]. */
static int64_t chunk_base(const side *c, const int64_t *iv) {
  int64_t pos = 0;
  for (int d = 0; d < c->ndim; ++d) {
    int64_t rem = iv[d];
    for (int k = c->tile[d].nmd - 1; k >= 0; --k) {
      int md = c->tile[d].md[k];
      pos += (rem % c->mesh->size[md]) * c->stride[md];
      rem /= c->mesh->size[md];
    }
  }
  return pos;
}

/* The chunk position pos holds: its coordinates on the mesh dims splitting each tensor dim give the
 * interval index per dim (row-major over those mesh dims), combined row-major over the dims like
 * pieces_of's chunk numbers. One pass per destination replica; each piece then compares numbers. */
static int64_t chunk_at(const side *c, int64_t pos) {
  int64_t chunk = 0;
  for (int d = 0; d < c->ndim; ++d) {
    int64_t iv = 0;
    for (int k = 0; k < c->tile[d].nmd; ++k) {
      int md = c->tile[d].md[k];
      iv = iv * c->mesh->size[md] + (pos / c->stride[md]) % c->mesh->size[md];
    }
    chunk = chunk * c->tile[d].n + iv;
  }
  return chunk;
}

/* Does the source position whose chunk is `at` (chunk_at) hold source chunk `chunk`? */
static int holds(int64_t at, int64_t chunk) {
  if (RS_MUTANT(411)) return 1; /* any holder of the parameter copies locally, whatever chunk it holds */
  return at == chunk;
}

/* A source chunk's part of one destination chunk. */
typedef struct piece {
  int64_t start[RS_MAX_DIMS], size[RS_MAX_DIMS];
  int64_t chunk, base, bytes;
} piece;

typedef struct planner {
  const rs_p2p_model *m;
  rs_p2p_plan *out;
  int32_t only;        /* >= 0: keep only the transfers this rank sends or receives */
  int64_t bytes_local; /* all local copies, kept or not */
  int64_t *load, task;
  int64_t *sent;       /* bytes each rank sends to another (the plan's figures, kept or not) */
  piece *pc;
  int64_t npc, cappc;
} planner;

/* The pieces of the destination box (bs, bz): one per source chunk meeting it with elements. */
static rs_status pieces_of(planner *P, const side *S, int es, const int64_t *bs, const int64_t *bz) {
  int nd = S->ndim;
  int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS], cur[RS_MAX_DIMS];
  P->npc = 0;
  for (int d = 0; d < nd; ++d) {
    lo[d] = first_past(&S->tile[d], bs[d]);
    hi[d] = lo[d];
    while (hi[d] < S->tile[d].n && S->tile[d].v[hi[d]].start < bs[d] + bz[d]) hi[d]++;
    if (hi[d] == lo[d]) return RS_OK;
    cur[d] = lo[d];
  }
  for (;;) {
    if (P->npc == P->cappc) {
      int64_t nc = P->cappc ? 2 * P->cappc : 16;
      piece *np = realloc(P->pc, (size_t)nc * sizeof *np);
      if (!np) return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
      P->pc = np;
      P->cappc = nc;
    }
    piece *x = &P->pc[P->npc];
    int64_t n = 1, chunk = 0;
    for (int d = 0; d < nd; ++d) {
      const ivl *v = &S->tile[d].v[cur[d]];
      int64_t a = v->start > bs[d] ? v->start : bs[d];
      int64_t b = v->start + v->size < bs[d] + bz[d] ? v->start + v->size : bs[d] + bz[d];
      if (RS_MUTANT(400)) b++; /* off-by-one intersection */
      x->start[d] = a;
      x->size[d] = b > a ? b - a : 0;
      n *= x->size[d];
      chunk = chunk * S->tile[d].n + cur[d];
    }
    if (n > 0) {
      x->chunk = chunk;
      x->base = chunk_base(S, cur);
      x->bytes = n * es;
      P->npc++;
    }
    int d = nd - 1;
    for (; d >= 0; --d) {
      if (++cur[d] < hi[d]) break;
      cur[d] = lo[d];
    }
    if (d < 0) return RS_OK;
  }
}

/* Room for `more` transfers and `morec` coordinates, so the appends below never reallocate one by one. */
static rs_status reserve(rs_p2p_plan *p, int64_t more, int64_t morec) {
  if (p->n + more > p->cap) {
    int64_t nc = p->cap ? p->cap : 1024;
    while (nc < p->n + more) nc *= 2;
    rs_p2p_xfer *x = realloc(p->x, (size_t)nc * sizeof *x);
    if (!x) return rs_fail(RS_ERR_NOMEM, "plan: out of memory");
    p->x = x;
    p->cap = nc;
  }
  int64_t need = p->ncoords + morec;
  if (need > p->capcoords) {
    int64_t nc = p->capcoords ? p->capcoords : 4096;
    while (nc < need) nc *= 2;
    int64_t *c = realloc(p->coords, (size_t)nc * sizeof *c);
    if (!c) return rs_fail(RS_ERR_NOMEM, "plan: out of memory");
    p->coords = c;
    p->capcoords = nc;
  }
  return RS_OK;
}

/* Large plans go on transparent huge pages where the kernel offers them on request: a 4,096-rank
 * template's plan is ~80 MB, and faulting it in 4 KiB pages costs as much as planning it. */
static void *big_alloc(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const size_t huge = (size_t)2 << 20;
  if (bytes >= 4 * huge) {
    void *p = NULL;
    if (posix_memalign(&p, huge, (bytes + huge - 1) / huge * huge)) return NULL;
    madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
    return p;
  }
#endif
  return malloc(bytes ? bytes : 1);
}

static rs_status plan_alloc(rs_p2p_plan *p, int64_t n, int64_t ncoords) {
  int64_t bx, bc;
  if (!rs__mul_ok(n, (int64_t)sizeof *p->x, &bx) || !rs__mul_ok(ncoords, (int64_t)sizeof *p->coords, &bc))
    return rs_fail(RS_ERR_OVERFLOW, "opt p2p: %lld transfers overflow the plan's size", (long long)n);
  p->x = big_alloc((size_t)n * sizeof *p->x);
  p->coords = big_alloc((size_t)ncoords * sizeof *p->coords);
  if (!p->x || !p->coords) return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory (%lld transfers)", (long long)n);
  p->cap = n;
  p->capcoords = ncoords;
  return RS_OK;
}

/* count != NULL: only add the number of transfers of parameter p to count[0] and of coordinates
 * to count[1] (the sizing pass). Every replica of a destination chunk takes the same pieces, so a
 * piece's box is written once and its transfers share it (x->box points at the same coordinates). */
static rs_status plan_param(planner *P, int64_t p, int64_t *count) {
  const rs_p2p_model *m = P->m;
  const rs_tensor *t = &m->param[p].t;
  int nd = t->ndim, es = rs_dtype_size(t->dtype);
  side S, D;
  memset(&D, 0, sizeof D);
  rs_status st = side_init(&S, m, RS_P2P_SRC, p);
  if (!st) st = side_init(&D, m, RS_P2P_DST, p);
  int64_t nchunk = 1;
  for (int d = 0; d < nd; ++d) nchunk *= S.tile[d].n;
  int64_t *cursor = st || count ? NULL : calloc((size_t)nchunk, sizeof *cursor);
  if (!st && !count && !cursor) st = rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  int64_t dcur[RS_MAX_DIMS] = {0}; /* the destination chunk: interval index per dim */
  int64_t win = S.nrep < WINDOW ? S.nrep : WINDOW;
  while (!st) {
    int64_t bs[RS_MAX_DIMS], bz[RS_MAX_DIMS];
    int empty = 0;
    for (int d = 0; d < nd; ++d) {
      bs[d] = D.tile[d].v[dcur[d]].start;
      bz[d] = D.tile[d].v[dcur[d]].size;
      if (!bz[d]) empty = 1;
    }
    if (!empty && !(st = pieces_of(P, &S, es, bs, bz)) && count) {
      count[0] += P->npc * D.nrep;
      count[1] += P->npc * 2 * nd;
    } else if (!empty && !st && P->npc && !(st = reserve(P->out, P->npc * D.nrep, P->npc * 2 * nd))) {
      int64_t dbase = chunk_base(&D, dcur);
      rs_p2p_plan *o = P->out;
      int64_t coff = -1; /* where this chunk's piece boxes start in o->coords; -1: not written yet */
      for (int64_t j = 0; j < D.nrep; ++j) {
        int32_t r = D.mesh->ranks[dbase + D.rep_off[j]];
        int64_t sp = S.mesh->pos_of[r];
        int64_t at = sp >= 0 && !RS_MUTANT(407) ? chunk_at(&S, sp) : -1; /* 407: never copy locally */
        for (int64_t k = 0; k < P->npc; ++k) {
          const piece *x = &P->pc[k];
          int32_t from;
          if (at >= 0 && holds(at, x->chunk)) {
            from = r;
          } else {
            int64_t best = cursor[x->chunk] < S.nrep ? cursor[x->chunk] : 0, jj = best; /* no division */
            int32_t bestr = S.mesh->ranks[x->base + S.rep_off[best]];
            for (int64_t i = 1; i < win; ++i) {
              if (++jj == S.nrep) jj = 0;
              int32_t cand = S.mesh->ranks[x->base + S.rep_off[jj]];
              if (P->load[cand] < P->load[bestr]) best = jj, bestr = cand;
            }
            cursor[x->chunk] = best + 1;
            from = bestr;
            if (RS_MUTANT(401)) /* not a holder */
              from = S.mesh->ranks[(x->base + S.rep_off[best] + 1) % S.mesh->nranks];
            P->load[from] += x->bytes;
          }
          if (from == r) P->bytes_local += x->bytes;
          else P->sent[from] += x->bytes;
          if (P->only >= 0 && from != P->only && r != P->only) {
            P->task++; /* task ids stay those of the whole plan */
            continue;
          }
          if (coff < 0) {
            coff = o->ncoords;
            for (int64_t q = 0; q < P->npc && nd; ++q) {
              memcpy(o->coords + coff + 2 * nd * q, P->pc[q].start, (size_t)nd * sizeof(int64_t));
              memcpy(o->coords + coff + 2 * nd * q + nd, P->pc[q].size, (size_t)nd * sizeof(int64_t));
            }
            o->ncoords += 2 * nd * P->npc;
          }
          rs_p2p_xfer *y = &o->x[o->n++];
          y->task = P->task++;
          y->param = (int32_t)p;
          y->src = from;
          y->dst = r;
          y->box = coff + 2 * nd * k;
        }
      }
    }
    int d = nd - 1;
    for (; d >= 0; --d) {
      if (++dcur[d] < D.tile[d].n) break;
      dcur[d] = 0;
    }
    if (d < 0) break;
  }
  free(cursor);
  side_free(&S);
  side_free(&D);
  return st;
}

rs_status rs__p2p_opt_plan(const rs_p2p_model *m, int32_t only, rs_p2p_plan *out) {
  memset(out, 0, sizeof *out);
  planner P;
  memset(&P, 0, sizeof P);
  P.m = m;
  P.out = out;
  P.only = only;
  P.load = calloc((size_t)(m->world ? m->world : 1), sizeof *P.load);
  P.sent = calloc((size_t)(m->world ? m->world : 1), sizeof *P.sent);
  if (!P.load || !P.sent) {
    free(P.load);
    free(P.sent);
    return rs_fail(RS_ERR_NOMEM, "opt p2p: out of memory");
  }
  rs_status st = RS_OK;
  if (only < 0) {
    /* size the whole plan exactly first: one allocation instead of a doubling chain of copies */
    int64_t k[2] = {0, 0};
    for (int64_t p = 0; p < m->nparams && !st; ++p) st = plan_param(&P, p, k);
    if (!st) st = plan_alloc(out, k[0], k[1]);
  }
  for (int64_t p = 0; p < m->nparams && !st; ++p) st = plan_param(&P, p, NULL);
  if (!st) {
    /* the whole plan's figures from the planner's own accounting, made as it went (a rank's own
     * plan keeps few of the transfers; the whole plan need not be walked a second time) */
    out->bytes_local = P.bytes_local;
    for (int32_t r = 0; r < m->world; ++r) {
      out->bytes_sent += P.sent[r];
      if (P.sent[r] > out->max_sender_bytes) out->max_sender_bytes = P.sent[r];
      if (P.sent[r]) out->senders++;
    }
  }
  free(P.load);
  free(P.sent);
  free(P.pc);
  if (st) rs_p2p_plan_free(out);
  return st;
}
