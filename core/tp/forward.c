/* forward.c - the style driver (SPEC 12): walks the module chain once, deciding for every module
 * where its parameters live (core/tp_style.c), which redistributions its input and output need
 * (the styles of PyTorch's torch/distributed/tensor/parallel/style.py) and how each rank computes
 * locally. ref/tp and opt/tp run it with their own redistribute and Linear kernel; with no
 * implementation it only walks the layouts, which is how a case is validated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "core/mutant.h"
#include "core/tp/tp_internal.h"
#include "core/tp_style.h"

int rs__tp_dp_dim(const rs_tp_case *c) { return c->mesh.ndim == 2 ? 1 - c->tp_dim : -1; }
int64_t rs__tp_size(const rs_tp_case *c) { return c->mesh.size[c->tp_dim]; }

int64_t rs__tp_tp_len(const rs_tp_case *c, int dim, int64_t len) {
  int dpd = rs__tp_dp_dim(c);
  if (dim != 0 || dpd < 0 || c->dp_layout.kind != RS_SHARD || c->mesh.size[dpd] <= 1) return len;
  int64_t n = c->mesh.size[dpd];
  return len % n == 0 ? len / n : (len + n - 1) / n; /* torch.chunk's largest piece */
}

rs_status rs__tp_norm_layout(rs_placement *p, int ndim, const char *field) {
  if (p->kind != RS_SHARD) return RS_OK;
  int d = p->dim < 0 ? p->dim + ndim : p->dim;
  if (d < 0 || d >= ndim)
    return rs_fail(RS_ERR_INVALID, "%s: S(%d) is out of range for a %d-d activation", field, p->dim, ndim);
  p->dim = (int8_t)d;
  return RS_OK;
}

rs_status rs__tp_sharding(const rs_tp_case *c, rs_placement tp, rs_placement dp, const rs_tensor *t,
                          rs_sharding *s) {
  memset(s, 0, sizeof *s);
  s->mesh_ndim = c->mesh.ndim;
  s->p[c->tp_dim] = tp;
  int dpd = rs__tp_dp_dim(c);
  if (dpd >= 0) s->p[dpd] = dp;
  rs_status st = rs_sharding_set_default_order(s, t->ndim);
  /* S(d) on both mesh dims: DP splits first (its groups each hold a slice of the batch), TP splits
   * each DP group's slice again, as parallelize_module on the TP submesh does (planted bug: the
   * other way round) */
  if (st == RS_OK && dpd >= 0 && tp.kind == RS_SHARD && dp.kind == RS_SHARD && s->p[dpd].dim == s->p[c->tp_dim].dim &&
      !RS_MUTANT(860)) {
    int d = s->p[dpd].dim;
    s->order_len[d] = 2;
    s->order[d][0] = (int8_t)dpd;
    s->order[d][1] = (int8_t)c->tp_dim;
  }
  if (st == RS_OK) st = rs_sharding_validate(s, &c->mesh, t);
  return st;
}

void rs__tp_box_copy(const void *src, int ndim, const int64_t *g, const int64_t *start,
                     const int64_t *size, int es, void *dst) {
  int64_t s0 = ndim > 0 ? size[0] : 1, s1 = ndim > 1 ? size[1] : 1, s2 = ndim > 2 ? size[2] : 1;
  int64_t g1 = ndim > 1 ? g[1] : 1, g2 = ndim > 2 ? g[2] : 1;
  int64_t o0 = ndim > 0 ? start[0] : 0, o1 = ndim > 1 ? start[1] : 0, o2 = ndim > 2 ? start[2] : 0;
  if (s0 == 0 || s1 == 0 || s2 == 0) return;
  char *d = dst;
  const char *sp = src;
  for (int64_t i = 0; i < s0; i++)
    for (int64_t j = 0; j < s1; j++) {
      memcpy(d, sp + (((o0 + i) * g1 + o1 + j) * g2 + o2) * es, (size_t)(s2 * es));
      d += s2 * es;
    }
}

/* ---- activations ---- */

typedef struct act {
  rs_tensor t;
  rs_placement tp; /* on the TP mesh dim, normalized */
  rs_sharding s;
  int is_local;
  int param; /* a parameter (R on the DP dim), not an activation */
  rs_locals l;
} act;

typedef struct walk {
  const rs__tp_ops *ops;
  int played; /* the mesh position this process computes; -1: every one */
  const rs_tp_case *c;
  rs_tp_result *r;
  int64_t coord[RS_MAX_RANKS][RS_MAX_MESH_DIMS];
} walk;

static int plays(const walk *w, int pos) { return w->played < 0 || w->played == pos; }

static rs_status set_layout(walk *w, act *a, rs_placement tp, const char *path, const char *field) {
  const rs_tp_case *c = w->c;
  rs_placement dp = a->param ? rs_pl_replicate() : c->dp_layout;
  rs_status st = rs__tp_sharding(c, tp, dp, &a->t, &a->s);
  if (st) {
    char pre[160];
    snprintf(pre, sizeof pre, "%s: %s: ", path, field);
    return rs_fail_prefix(st, pre);
  }
  a->tp = tp;
  return RS_OK;
}

static rs_status count_plan(walk *w, int mi, const rs_plan *p, rs_enumeration e) {
  for (int i = 0; i < p->nsteps; i++) {
    rs_collective k;
    rs_status st = rs_step_collective_enum(&p->step[i], e, &k);
    if (st) return st;
    if (w->c->mesh.size[p->step[i].mesh_dim] <= 1) continue;
    if (k == RS_COLL_ALL_GATHER || k == RS_COLL_ALL_REDUCE || k == RS_COLL_REDUCE_SCATTER ||
        k == RS_COLL_ALL_TO_ALL) {
      w->r->comm[k]++;
      w->r->mod_comm[mi][k]++;
    }
  }
  return RS_OK;
}

/* The locals of b (a Partial on the TP dim) from a's (a Shard there): every rank's box of b, zeros
 * except where its box of a lies. */
static rs_status zero_fill(walk *w, const act *a, act *b) {
  const rs_tp_case *c = w->c;
  rs_status st = rs_locals_alloc(&b->l, c->mesh.nranks);
  int es = rs_dtype_size(a->t.dtype);
  for (int pos = 0; st == RS_OK && pos < c->mesh.nranks; pos++) {
    if (!plays(w, pos)) continue; /* another process computes it */
    int64_t as[RS_MAX_DIMS], az[RS_MAX_DIMS], bs[RS_MAX_DIMS], bz[RS_MAX_DIMS], off[RS_MAX_DIMS];
    rs_local_box(&c->mesh, &a->s, &a->t, w->coord[pos], as, az);
    rs_local_box(&c->mesh, &b->s, &b->t, w->coord[pos], bs, bz);
    if ((st = rs_local_resize(&b->l.r[pos], b->t.ndim, bz, es))) break;
    memset(b->l.r[pos].data, 0, (size_t)b->l.r[pos].nbytes);
    /* planted bug 861: every shard zero-filled at the start of the whole tensor, not at its offset */
    for (int d = 0; d < a->t.ndim; d++) off[d] = RS_MUTANT(861) ? 0 : as[d] - bs[d];
    /* copy a's local (shape az) into b's local at off: box_copy reads a box from a larger tensor,
     * so copy row by row the other way round */
    int64_t s0 = a->t.ndim > 0 ? az[0] : 1, s1 = a->t.ndim > 1 ? az[1] : 1, s2 = a->t.ndim > 2 ? az[2] : 1;
    int64_t g1 = b->t.ndim > 1 ? bz[1] : 1, g2 = b->t.ndim > 2 ? bz[2] : 1;
    int64_t o0 = off[0], o1 = a->t.ndim > 1 ? off[1] : 0, o2 = a->t.ndim > 2 ? off[2] : 0;
    if (s0 == 0 || s1 == 0 || s2 == 0) continue;
    const char *src = a->l.r[pos].data;
    char *dst = b->l.r[pos].data;
    for (int64_t i = 0; i < s0; i++)
      for (int64_t j = 0; j < s1; j++)
        memcpy(dst + (((o0 + i) * g1 + o1 + j) * g2 + o2) * es, src + ((i * s1 + j) * s2) * es, (size_t)(s2 * es));
  }
  if (st) rs_locals_free(&b->l);
  return st;
}

/* Move activation a to layout `to` on the TP dim (through the implementation's redistribute). */
static rs_status redist(walk *w, int mi, act *a, rs_placement to, const char *field) {
  const char *path = w->c->mod[mi].path;
  rs_status st = rs__tp_norm_layout(&to, a->t.ndim, field);
  if (st) {
    char pre[96];
    snprintf(pre, sizeof pre, "%s: ", path);
    return rs_fail_prefix(st, pre);
  }
  if (rs_pl_equal(a->tp, to)) return RS_OK;
  /* PyTorch makes a Partial only from a Shard, by zero-filling (each rank's shard in a zero tensor
   * of the whole shape); from Replicate it raises "Can not redistribute from R to P(sum)" */
  if (to.kind == RS_PARTIAL && a->tp.kind != RS_SHARD && !a->param) {
    char x[32];
    rs_format_placement(a->tp, x, sizeof x);
    return rs_fail(RS_ERR_INVALID, "%s: %s: %s -> P(sum): PyTorch redistributes only a Shard to Partial(sum)",
                   path, field, x);
  }
  act b = *a;
  if ((st = set_layout(w, &b, to, path, field))) return st;
  if (w->ops && to.kind == RS_PARTIAL && a->tp.kind == RS_SHARD) {
    /* PyTorch's Shard -> Partial(sum): each rank's shard in a zero tensor of the whole (TP) shape;
     * local, nothing sent */
    if ((st = zero_fill(w, a, &b))) {
      char pre[160];
      snprintf(pre, sizeof pre, "%s: %s: ", path, field);
      return rs_fail_prefix(st, pre);
    }
  } else if (w->ops) {
    rs_case *rc = calloc(1, sizeof *rc);
    if (!rc) return rs_fail(RS_ERR_NOMEM, "%s: out of memory", path);
    snprintf(rc->name, sizeof rc->name, "%s.%s", path, field);
    rc->mesh = w->c->mesh;
    rc->tensor = a->t;
    rc->src = a->s;
    rc->dst = b.s;
    rc->values = RS_VALUES_EXACT;
    rc->enumeration = RS_ENUM_SEED;
    rs_enumeration en = rc->enumeration;
    rs_locals out = {0, NULL};
    rs_plan plan;
    memset(&plan, 0, sizeof plan);
    st = rs_case_validate(rc);
    int64_t traffic[2] = {-1, -1};
    if (st == RS_OK) st = w->ops->redistribute(w->ops->ctx, rc, &a->l, &out, &plan, traffic);
    if (st == RS_OK && traffic[0] >= 0) {
      w->r->mod_bytes[mi] = (w->r->mod_bytes[mi] < 0 ? 0 : w->r->mod_bytes[mi]) + traffic[0];
      w->r->mod_pairs[mi] = (w->r->mod_pairs[mi] < 0 ? 0 : w->r->mod_pairs[mi]) + traffic[1];
    }
    free(rc);
    if (st == RS_OK) st = count_plan(w, mi, &plan, en);
    if (st) {
      rs_locals_free(&out);
      char pre[160];
      snprintf(pre, sizeof pre, "%s: %s: ", path, field);
      return rs_fail_prefix(st, pre);
    }
    rs_locals_free(&a->l);
    b.l = out;
  }
  if (w->ops && to.kind == RS_PARTIAL && a->tp.kind == RS_SHARD) rs_locals_free(&a->l);
  *a = b;
  return RS_OK;
}

/* A local tensor whose layout is declared by a style must be the layout the chain produced:
 * PyTorch would silently reinterpret the local shards (from_local), reshard refuses. */
static rs_status expect(walk *w, int mi, const act *a, rs_placement declared, const char *field) {
  rs_status st = rs__tp_norm_layout(&declared, a->t.ndim, field);
  if (st) {
    char pre[96];
    snprintf(pre, sizeof pre, "%s: ", w->c->mod[mi].path);
    return rs_fail_prefix(st, pre);
  }
  if (rs_pl_equal(a->tp, declared)) return RS_OK;
  char x[32], y[32];
  rs_format_placement(declared, x, sizeof x);
  rs_format_placement(a->tp, y, sizeof y);
  return rs_fail(RS_ERR_INVALID, "%s: %s declares %s, but its input is %s", w->c->mod[mi].path, field,
                 x, y);
}

/* ---- parameters ---- */

typedef struct param {
  rs_tensor t;
  rs_placement tp;
  rs_sharding s;
  float *global;
} param;

static rs_status load_param(walk *w, int mi, rs_tp_param_kind pk, param *p) {
  const rs_tp_case *c = w->c;
  const rs_tp_module *m = &c->mod[mi];
  rs_status st = rs_tp_param_placement(m->style.kind, m->kind, pk, &p->tp);
  if (st) {
    char pre[96];
    snprintf(pre, sizeof pre, "%s: ", m->path);
    return rs_fail_prefix(st, pre);
  }
  p->global = NULL;
  rs_placement rep = rs_pl_replicate();
  if (!w->ops) { /* shapes only */
    memset(&p->t, 0, sizeof p->t);
    return RS_OK;
  }
  if ((st = rs_tp_global_param(c, mi, pk, &p->t, &p->global))) return st;
  if ((st = rs__tp_sharding(c, p->tp, rep, &p->t, &p->s))) {
    free(p->global);
    p->global = NULL;
    char pre[96];
    snprintf(pre, sizeof pre, "%s.%s: ", m->path, pk == RS_TP_BIAS ? "bias" : "weight");
    return rs_fail_prefix(st, pre);
  }
  w->r->param_tp[mi][pk] = p->tp;
  return RS_OK;
}

/* The rank's box of a parameter, and a copy of its local values (malloc'd). */
static rs_status param_local(walk *w, const param *p, int pos, int64_t *start, int64_t *size,
                             float **out) {
  rs_local_box(&w->c->mesh, &p->s, &p->t, w->coord[pos], start, size);
  int64_t n, bytes;
  if (!rs__numel_ok(size, p->t.ndim, &n) || !rs__mul_ok(n, 4, &bytes))
    return rs_fail(RS_ERR_OVERFLOW, "parameter: size overflows");
  *out = malloc((size_t)(bytes ? bytes : 4));
  if (!*out) return rs_fail(RS_ERR_NOMEM, "parameter: out of memory");
  rs__tp_box_copy(p->global, p->t.ndim, p->t.shape, start, size, 4, *out);
  return RS_OK;
}

/* ---- local compute ---- */

static rs_status alloc_out(walk *w, act *o, int pos) {
  int64_t st_[RS_MAX_DIMS], sz[RS_MAX_DIMS];
  rs_local_box(&w->c->mesh, &o->s, &o->t, w->coord[pos], st_, sz);
  return rs_local_resize(&o->l.r[pos], o->t.ndim, sz, 4);
}

/* The rank's box of the output on `dim` must be where its parameter slice (or input slice) says:
 * a style whose parameter split and activation split disagree is caught here, not hidden. */
static rs_status check_dim(walk *w, const act *o, int pos, int dim, int64_t off, int64_t len,
                           const char *path) {
  int64_t st_[RS_MAX_DIMS], sz[RS_MAX_DIMS];
  rs_local_box(&w->c->mesh, &o->s, &o->t, w->coord[pos], st_, sz);
  if (sz[dim] != len || (len > 0 && st_[dim] != off))
    return rs_fail(RS_ERR_MISMATCH,
                   "%s: rank %d computes [%lld, +%lld) of dim %d, its output box holds [%lld, +%lld)",
                   path, pos, (long long)off, (long long)len, dim, (long long)st_[dim], (long long)sz[dim]);
  return RS_OK;
}

static rs_status linear(walk *w, int mi, act *x, act *o) {
  const rs_tp_case *c = w->c;
  const rs_tp_module *m = &c->mod[mi];
  const rs_tp_style *sty = &m->style;
  param pw, pb;
  rs_status st = load_param(w, mi, RS_TP_WEIGHT, &pw);
  if (st) return st;
  memset(&pb, 0, sizeof pb);
  if (m->bias && (st = load_param(w, mi, RS_TP_BIAS, &pb))) {
    free(pw.global);
    return st;
  }
  int64_t n = rs__tp_size(c);
  /* SequenceParallel on a batch or sequence dim shorter than the TP size: PyTorch's strategies never
   * shard a dim shorter than the mesh dim (is_tensor_shardable), so F.linear gathers the input first
   * and its output is R (planted bug: the Shard kept, with empty shards) */
  if (st == RS_OK && sty->kind == RS_TP_SEQUENCE && x->tp.kind == RS_SHARD && x->tp.dim < 2 && n > 1 &&
      rs__tp_tp_len(c, x->tp.dim, x->t.shape[x->tp.dim]) < n && !RS_MUTANT(864))
    st = redist(w, mi, x, rs_pl_replicate(), "input");
  if (st) {
    free(pw.global);
    free(pb.global);
    return st;
  }
  o->t = x->t;
  o->t.shape[2] = m->out;
  o->is_local = x->is_local;
  rs_placement ot;
  /* SequenceParallel with the features as its sequence dim: the DTensor input is split on the
   * contracted dim and the weight replicated, so (as PyTorch's sharding propagation does) each rank
   * multiplies by its columns of the weight and the output is P(sum); the bias then enters as its
   * P(sum) piece, as under RowwiseParallel. */
  int contracted = sty->kind == RS_TP_SEQUENCE && x->tp.kind == RS_SHARD && x->tp.dim == 2;
  int pbias = sty->kind == RS_TP_ROWWISE || contracted;
  if (sty->kind == RS_TP_COLWISE) {
    if (x->tp.kind != RS_REPLICATE) st = rs_fail(RS_ERR_INVALID, "%s: column-parallel input is not R", m->path);
    /* planted bug: a column-parallel Linear refuses an input that was Partial before its
     * all_reduce (a validation bug the old generator, which validated through this driver, turned
     * into skipped cases) */
    if (RS_MUTANT(868) && sty->input_layout.kind == RS_PARTIAL)
      st = rs_fail(RS_ERR_INVALID, "%s: column-parallel input is Partial", m->path);
    ot = rs_pl_shard(2);
  } else if (sty->kind == RS_TP_ROWWISE) {
    if (!(x->tp.kind == RS_SHARD && x->tp.dim == 2))
      st = rs_fail(RS_ERR_INVALID, "%s: row-parallel input is not S(-1)", m->path);
    ot = rs_pl_partial(RS_SUM);
  } else if (contracted) {
    ot = rs_pl_partial(RS_SUM);
  } else {
    /* plain parameters: each rank computes on what it holds. A Partial input stays a valid set of
     * pieces without a bias; PyTorch adds the bias on every rank, so the pieces sum to
     * y + (n-1) b: not the right tensor, refused (docs/tp.md, deviations). On one rank every
     * layout is the whole tensor (planted bug 863: TP size 1 refused as before). */
    int one = n == 1 && !RS_MUTANT(863);
    if (x->tp.kind == RS_SHARD && x->tp.dim == 2 && !one)
      st = rs_fail(RS_ERR_INVALID, "%s: a Linear with plain parameters receives a slice of its input features",
                   m->path);
    else if (x->tp.kind == RS_PARTIAL && m->bias && !one && !RS_MUTANT(862))
      st = rs_fail(RS_ERR_INVALID,
                   "%s: a Linear with plain parameters and a bias receives a Partial input: PyTorch adds the "
                   "bias on every rank, so the pieces would sum to y + (n-1) bias",
                   m->path);
    else if (x->tp.kind == RS_PARTIAL && RS_MUTANT(863) && n == 1)
      st = rs_fail(RS_ERR_INVALID, "%s: a replicated Linear needs its input reduced", m->path);
    ot = x->tp;
  }
  if (st == RS_OK) st = set_layout(w, o, ot, m->path, "output");
  /* RowwiseParallel's bias: PyTorch's addmm strategy makes the Replicate bias Partial(sum)
   * (a partition: bias / n on every rank) and adds it to each rank's partial product. */
  act bias;
  memset(&bias, 0, sizeof bias);
  if (st == RS_OK && m->bias && pbias && w->ops) {
    bias.t = pb.t;
    bias.param = 1;
    if ((st = set_layout(w, &bias, pb.tp, m->path, "bias")) == RS_OK &&
        (st = rs_locals_alloc(&bias.l, c->mesh.nranks)) == RS_OK) {
      for (int pos = 0; pos < c->mesh.nranks && st == RS_OK; pos++) {
        if (!plays(w, pos)) continue; /* another process computes it */
        int64_t s0[RS_MAX_DIMS], z0[RS_MAX_DIMS];
        rs_local_box(&c->mesh, &bias.s, &bias.t, w->coord[pos], s0, z0);
        if ((st = rs_local_resize(&bias.l.r[pos], 1, z0, 4)) == RS_OK)
          rs__tp_box_copy(pb.global, 1, pb.t.shape, s0, z0, 4, bias.l.r[pos].data);
      }
      /* planted bug: the whole bias added on every rank (it then enters the sum n times) */
      if (st == RS_OK && !RS_MUTANT(505)) st = redist(w, mi, &bias, rs_pl_partial(RS_SUM), "bias");
    }
  }
  if (st == RS_OK && w->ops) st = rs_locals_alloc(&o->l, c->mesh.nranks);
  for (int pos = 0; w->ops && st == RS_OK && pos < c->mesh.nranks; pos++) {
    if (!plays(w, pos)) continue; /* another process computes it */
    int64_t ws[RS_MAX_DIMS], wz[RS_MAX_DIMS], bs[RS_MAX_DIMS], bz[RS_MAX_DIMS];
    int64_t xs[RS_MAX_DIMS], xz[RS_MAX_DIMS];
    float *wl = NULL, *bl = NULL;
    if ((st = param_local(w, &pw, pos, ws, wz, &wl))) break;
    if (m->bias && !pbias) st = param_local(w, &pb, pos, bs, bz, &bl);
    rs_local_box(&c->mesh, &x->s, &x->t, w->coord[pos], xs, xz);
    if (st == RS_OK && contracted) { /* this rank's columns of the replicated weight */
      int64_t n2, bytes, cs[2] = {0, xs[2]}, cz[2] = {wz[0], xz[2]};
      float *cols = NULL;
      if (!rs__mul_ok(wz[0], xz[2], &n2) || !rs__mul_ok(n2, 4, &bytes))
        st = rs_fail(RS_ERR_OVERFLOW, "%s: weight slice overflows", m->path);
      else if (!(cols = malloc((size_t)(bytes ? bytes : 4))))
        st = rs_fail(RS_ERR_NOMEM, "%s: out of memory", m->path);
      else {
        rs__tp_box_copy(wl, 2, wz, cs, cz, 4, cols);
        free(wl);
        wl = cols;
        ws[1] = xs[2];
        wz[1] = xz[2];
      }
    }
    if (st == RS_OK) st = alloc_out(w, o, pos);
    if (st == RS_OK && xz[2] != wz[1]) /* the input's features and the weight's columns must match */
      st = rs_fail(RS_ERR_MISMATCH, "%s: rank %d: input holds %lld features at %lld, weight %lld at %lld",
                   m->path, pos, (long long)xz[2], (long long)xs[2], (long long)wz[1], (long long)ws[1]);
    if (st == RS_OK && xz[2] > 0 && xs[2] != ws[1])
      st = rs_fail(RS_ERR_MISMATCH, "%s: rank %d: input features start at %lld, weight columns at %lld",
                   m->path, pos, (long long)xs[2], (long long)ws[1]);
    if (st == RS_OK) st = check_dim(w, o, pos, 2, ws[0], wz[0], m->path);
    const float *b = bl;
    if (st == RS_OK && m->bias && pbias) {
      if (bias.l.r[pos].shape[0] != wz[0])
        st = rs_fail(RS_ERR_MISMATCH, "%s: rank %d: bias holds %lld of %lld outputs", m->path, pos,
                     (long long)bias.l.r[pos].shape[0], (long long)wz[0]);
      b = bias.l.r[pos].data;
    }
    if (st == RS_OK)
      st = w->ops->linear(w->ops->ctx, x->l.r[pos].data, xz[0] * xz[1], xz[2], wl, wz[0], b,
                          o->l.r[pos].data);
    free(wl);
    free(bl);
  }
  rs_locals_free(&bias.l);
  free(pw.global);
  free(pb.global);
  return st;
}

static rs_status embedding(walk *w, int mi, act *x, act *o) {
  const rs_tp_case *c = w->c;
  const rs_tp_module *m = &c->mod[mi];
  const rs_tp_style *sty = &m->style;
  param pw;
  rs_status st = load_param(w, mi, RS_TP_WEIGHT, &pw);
  if (st) return st;
  o->t = x->t;
  o->t.dtype = RS_F32;
  o->t.ndim = 3;
  o->t.shape[2] = m->out;
  o->is_local = x->is_local;
  rs_placement ot = x->tp;
  if (x->tp.kind == RS_PARTIAL) st = rs_fail(RS_ERR_INVALID, "%s: token ids cannot be Partial", m->path);
  else if (sty->kind == RS_TP_COLWISE || sty->kind == RS_TP_ROWWISE) {
    if (x->tp.kind != RS_REPLICATE) st = rs_fail(RS_ERR_INVALID, "%s: the ids are not R", m->path);
    ot = sty->kind == RS_TP_COLWISE ? rs_pl_shard(2) : rs_pl_partial(RS_SUM);
  }
  if (st == RS_OK) st = set_layout(w, o, ot, m->path, "output");
  if (st == RS_OK && w->ops) st = rs_locals_alloc(&o->l, c->mesh.nranks);
  for (int pos = 0; w->ops && st == RS_OK && pos < c->mesh.nranks; pos++) {
    if (!plays(w, pos)) continue; /* another process computes it */
    int64_t ws[RS_MAX_DIMS], wz[RS_MAX_DIMS];
    float *wl = NULL;
    if ((st = param_local(w, &pw, pos, ws, wz, &wl))) break;
    if ((st = alloc_out(w, o, pos)) == RS_OK) st = check_dim(w, o, pos, 2, ws[1], wz[1], m->path);
    if (st == RS_OK) {
      const int64_t *ids = x->l.r[pos].data;
      float *y = o->l.r[pos].data;
      int64_t n = x->l.r[pos].shape[0] * x->l.r[pos].shape[1], d = wz[1];
      for (int64_t i = 0; i < n; i++) {
        int64_t row = ids[i] - ws[0];
        if (row >= 0 && row < wz[0]) memcpy(y + i * d, wl + row * d, (size_t)d * 4);
        else if (sty->kind == RS_TP_ROWWISE) memset(y + i * d, 0, (size_t)d * 4); /* not my vocab */
        else st = rs_fail(RS_ERR_INVALID, "%s: id %lld outside the vocabulary", m->path, (long long)ids[i]);
      }
    }
    free(wl);
  }
  free(pw.global);
  return st;
}

static rs_status norm(walk *w, int mi, act *x, act *o) {
  const rs_tp_case *c = w->c;
  const rs_tp_module *m = &c->mod[mi];
  param pw;
  rs_status st = load_param(w, mi, RS_TP_WEIGHT, &pw);
  if (st) return st;
  *o = *x;
  memset(&o->l, 0, sizeof o->l);
  /* x * w on a Partial input: each rank's piece times w is still a set of pieces of the output */
  if (st == RS_OK && w->ops) st = rs_locals_alloc(&o->l, c->mesh.nranks);
  for (int pos = 0; w->ops && st == RS_OK && pos < c->mesh.nranks; pos++) {
    if (!plays(w, pos)) continue; /* another process computes it */
    int64_t ws[RS_MAX_DIMS], wz[RS_MAX_DIMS], xs[RS_MAX_DIMS], xz[RS_MAX_DIMS];
    float *wl = NULL;
    if ((st = param_local(w, &pw, pos, ws, wz, &wl))) break;
    rs_local_box(&c->mesh, &x->s, &x->t, w->coord[pos], xs, xz);
    /* the weight slice that meets this rank's features (all of them unless the input is S(-1)) */
    if (xs[2] + xz[2] > wz[0] + ws[0] || (xz[2] > 0 && xs[2] < ws[0]))
      st = rs_fail(RS_ERR_MISMATCH, "%s: rank %d: features beyond the norm weight it holds", m->path, pos);
    if (st == RS_OK) st = alloc_out(w, o, pos);
    if (st == RS_OK) {
      const float *xv = x->l.r[pos].data;
      float *y = o->l.r[pos].data;
      int64_t rows = xz[0] * xz[1], d = xz[2];
      const float *wv = wl + (d > 0 ? xs[2] - ws[0] : 0);
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < d; j++) y[i * d + j] = xv[i * d + j] * wv[j];
    }
    free(wl);
  }
  free(pw.global);
  return st;
}

/* nn.LayerNorm / nn.RMSNorm over the last dim, one row at a time in F32: sums in increasing index
 * order, mean = sum / d, LayerNorm var = sum((x - mean)^2) / d (biased), y = (x - mean) *
 * (1 / sqrtf(var + eps)) * w + b; RMSNorm y = x * (1 / sqrtf(sum(x^2) / d + eps)) * w. A row is
 * whole on every rank that holds it, so the sharded forward computes each row exactly as the
 * unsharded one does. Not PyTorch's vectorized reduction order: values agree with PyTorch to
 * rounding, not bit for bit (docs/tp.md). */
static void real_norm_rows(rs_tp_module_kind k, const float *x, int64_t rows, int64_t d, const float *wt,
                           const float *b, float *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    float *yr = y + r * d;
    if (k == RS_TP_LAYERNORM) {
      float sum = 0.0f, var = 0.0f;
      for (int64_t j = 0; j < d; j++) sum += xr[j];
      float mean = sum / (float)d;
      for (int64_t j = 0; j < d; j++) var += (xr[j] - mean) * (xr[j] - mean);
      float rstd = 1.0f / sqrtf(var / (float)d + RS_TP_LAYERNORM_EPS);
      for (int64_t j = 0; j < d; j++) yr[j] = (xr[j] - mean) * rstd * wt[j] + (b ? b[j] : 0.0f);
    } else {
      float ss = 0.0f;
      for (int64_t j = 0; j < d; j++) ss += xr[j] * xr[j];
      float rstd = 1.0f / sqrtf(ss / (float)d + RS_TP_RMSNORM_EPS);
      for (int64_t j = 0; j < d; j++) yr[j] = xr[j] * rstd * wt[j];
    }
  }
}

static rs_status real_norm(walk *w, int mi, act *x, act *o) {
  const rs_tp_case *c = w->c;
  const rs_tp_module *m = &c->mod[mi];
  int one = rs__tp_size(c) == 1;
  rs_status st = RS_OK;
  if (x->tp.kind == RS_PARTIAL && !one)
    return rs_fail(RS_ERR_INVALID,
                   "%s: a %s receives a Partial input: PyTorch normalizes each rank's piece, which is not "
                   "the norm of their sum",
                   m->path, rs_tp_module_name(m->kind));
  if (x->tp.kind == RS_SHARD && x->tp.dim == 2 && !one) {
    if (m->style.kind != RS_TP_SEQUENCE)
      return rs_fail(RS_ERR_INVALID, "%s: the %s's weight is whole, but its local input holds a slice of the features",
                     m->path, rs_tp_module_name(m->kind));
    if (m->kind == RS_TP_RMSNORM && !RS_MUTANT(867)) /* planted bug: gathered like a LayerNorm */
      return rs_fail(RS_ERR_INVALID,
                     "%s: sequence_dim: an RMSNorm split on its features: PyTorch's mean over the split dim is "
                     "Partial(avg), and the in-place add of eps on it fails",
                     m->path);
    /* LayerNorm's strategy needs the normalized dim whole: all-gather, the output is R (planted
     * bug 866: each rank normalizes its own slice) */
    if (!RS_MUTANT(866) && (st = redist(w, mi, x, rs_pl_replicate(), "input"))) return st;
  }
  param pw, pb;
  if ((st = load_param(w, mi, RS_TP_WEIGHT, &pw))) return st;
  memset(&pb, 0, sizeof pb);
  if (m->bias && (st = load_param(w, mi, RS_TP_BIAS, &pb))) {
    free(pw.global);
    return st;
  }
  *o = *x;
  memset(&o->l, 0, sizeof o->l);
  if (w->ops) st = rs_locals_alloc(&o->l, c->mesh.nranks);
  for (int pos = 0; w->ops && st == RS_OK && pos < c->mesh.nranks; pos++) {
    if (!plays(w, pos)) continue; /* another process computes it */
    int64_t ws[RS_MAX_DIMS], wz[RS_MAX_DIMS], xs[RS_MAX_DIMS], xz[RS_MAX_DIMS];
    float *wl = NULL, *bl = NULL;
    if ((st = param_local(w, &pw, pos, ws, wz, &wl))) break;
    if (m->bias) st = param_local(w, &pb, pos, xs, xz, &bl);
    rs_local_box(&c->mesh, &x->s, &x->t, w->coord[pos], xs, xz);
    if (st == RS_OK && xz[2] != wz[0] && xz[0] * xz[1] > 0)
      st = rs_fail(RS_ERR_MISMATCH, "%s: rank %d: %lld features, the weight has %lld", m->path, pos,
                   (long long)xz[2], (long long)wz[0]);
    if (st == RS_OK) st = alloc_out(w, o, pos);
    if (st == RS_OK)
      real_norm_rows(m->kind, x->l.r[pos].data, xz[0] * xz[1], xz[2], wl, bl, o->l.r[pos].data);
    free(wl);
    free(bl);
  }
  free(pw.global);
  free(pb.global);
  return st;
}

/* ---- one module ---- */

static rs_status module(walk *w, int mi, act *a) {
  const rs_tp_module *m = &w->c->mod[mi];
  const rs_tp_style *s = &m->style;
  rs_status st = RS_OK;
  /* input */
  switch (s->kind) {
  case RS_TP_COLWISE:
  case RS_TP_ROWWISE: {
    if ((st = expect(w, mi, a, s->input_layout, "input_layouts"))) return st;
    rs_placement want = s->kind == RS_TP_COLWISE || m->kind == RS_TP_EMBEDDING ? rs_pl_replicate()
                                                                                : rs_pl_shard(-1);
    if ((st = redist(w, mi, a, want, "input"))) return st;
    a->is_local = 0;
    break;
  }
  case RS_TP_SEQUENCE: {
    rs_placement want = rs_pl_shard(s->sequence_dim + (RS_MUTANT(503) ? 1 : 0));
    if (a->is_local && (st = expect(w, mi, a, want, "sequence_dim"))) return st;
    if ((st = redist(w, mi, a, want, "input"))) return st;
    a->is_local = 0;
    break;
  }
  case RS_TP_PREPARE_INPUT:
    /* input_layouts None (PyTorch's default): the input passes untouched (planted bug 865: the
     * default read as R, as before) */
    if ((s->omitted & RS_TP_ARG_INPUT) && !RS_MUTANT(865)) break;
    if ((st = expect(w, mi, a, s->input_layout, "input_layouts"))) return st;
    if ((st = redist(w, mi, a, s->desired_input, "desired_input_layouts"))) return st;
    a->is_local = s->use_local_output;
    break;
  default:
    break;
  }
  /* A style that leaves the parameters plain tensors (none, PrepareModuleInput/Output) runs the
   * module on what it receives as PyTorch does: a DTensor there meets plain parameters, which
   * PyTorch refuses (mixed torch.Tensor and DTensor), and a norm's whole weight cannot meet a local
   * slice of the features (a shape mismatch in PyTorch). reshard refuses both the same way. */
  if (s->kind == RS_TP_REPLICATE || s->kind == RS_TP_PREPARE_INPUT || s->kind == RS_TP_PREPARE_OUTPUT) {
    if (!a->is_local)
      return rs_fail(RS_ERR_INVALID,
                     "%s: %s leaves the parameters plain tensors, but the module receives a DTensor "
                     "(PyTorch refuses mixed Tensor and DTensor operands)",
                     m->path, rs_tp_style_name(s->kind));
    /* a norm's whole weight meeting a local slice of the features: PyTorch broadcasts a 1-wide
     * slice against the whole weight (each rank then holds x[..., k] * w, not a slice of the
     * output) and raises on other widths; on one rank, or with one feature, the slice is right */
    if (rs__tp_is_norm(m->kind) && a->tp.kind == RS_SHARD && a->tp.dim == a->t.ndim - 1 &&
        rs__tp_size(w->c) > 1 && !(m->kind == RS_TP_NORM && m->in == 1))
      return rs_fail(RS_ERR_INVALID,
                     "%s: the norm's weight is whole, but its local input holds a slice of the features "
                     "(PyTorch broadcasts a 1-wide slice against the whole weight, or raises)",
                     m->path);
  }
  /* local compute */
  act o;
  memset(&o, 0, sizeof o);
  if (m->kind == RS_TP_LINEAR) st = linear(w, mi, a, &o);
  else if (m->kind == RS_TP_EMBEDDING) st = embedding(w, mi, a, &o);
  else if (rs__tp_is_real_norm(m->kind)) st = real_norm(w, mi, a, &o);
  else st = norm(w, mi, a, &o);
  rs_locals_free(&a->l);
  *a = o;
  if (st) return st;
  /* output */
  switch (s->kind) {
  case RS_TP_COLWISE:
  case RS_TP_ROWWISE:
    /* planted bug: the row-parallel output is labelled with its target layout but never reduced */
    if (RS_MUTANT(502) && s->kind == RS_TP_ROWWISE) {
      rs_placement to = s->output_layout;
      if ((st = rs__tp_norm_layout(&to, a->t.ndim, "output_layouts"))) return st;
      if (to.kind == RS_REPLICATE) {
        a->tp = to;
        if ((st = rs__tp_sharding(w->c, to, w->c->dp_layout, &a->t, &a->s))) return st;
      }
    }
    /* A row-parallel Embedding's output is PyTorch's MaskPartial, which PyTorch 2.15 redistributes
     * to R or a Shard but refuses to turn into Partial(sum) ("Can not redistribute from MaskP(sum
     * ...) to P(sum), only Shard to Partial(sum) redistribution is supported"): refused the same
     * (docs/tp.md, "PyTorch decides"). */
    if (s->kind == RS_TP_ROWWISE && w->c->mod[mi].kind == RS_TP_EMBEDDING && s->output_layout.kind == RS_PARTIAL)
      return rs_fail(RS_ERR_INVALID,
                     "%s: output_layouts: RowwiseParallel on an Embedding makes a MaskPartial, which PyTorch "
                     "redistributes only to R or a Shard, not to P(sum)", w->c->mod[mi].path);
    if ((st = redist(w, mi, a, s->output_layout, "output_layouts"))) return st;
    a->is_local = s->use_local_output;
    break;
  case RS_TP_SEQUENCE:
    a->is_local = s->use_local_output;
    break;
  case RS_TP_PREPARE_OUTPUT:
    if ((st = expect(w, mi, a, s->output_layout, "output_layouts"))) return st;
    if ((st = redist(w, mi, a, s->desired_output, "desired_output_layouts"))) return st;
    a->is_local = s->use_local_output;
    break;
  default:
    break;
  }
  w->r->mod_out_tp[mi] = a->tp;
  w->r->mod_out_local[mi] = a->is_local;
  return RS_OK;
}

/* The input's local tensors: the global input restricted to each rank's box; under a Partial
 * layout every rank of a TP group holds a piece, and the pieces sum to the input. */
static rs_status make_input(walk *w, act *a) {
  const rs_tp_case *c = w->c;
  void *g = NULL;
  rs_status st = rs_tp_global_input(c, &a->t, &g);
  if (st) return st;
  int es = rs_dtype_size(a->t.dtype);
  if ((st = rs_locals_alloc(&a->l, c->mesh.nranks))) {
    free(g);
    return st;
  }
  for (int pos = 0; pos < c->mesh.nranks && st == RS_OK; pos++) {
    if (!plays(w, pos)) continue; /* another process computes it */
    int64_t s0[RS_MAX_DIMS], z0[RS_MAX_DIMS];
    rs_local_box(&c->mesh, &a->s, &a->t, w->coord[pos], s0, z0);
    if ((st = rs_local_resize(&a->l.r[pos], a->t.ndim, z0, es))) break;
    rs__tp_box_copy(g, a->t.ndim, a->t.shape, s0, z0, es, a->l.r[pos].data);
    if (a->tp.kind == RS_PARTIAL) {
      float *p = a->l.r[pos].data;
      int64_t k = w->coord[pos][c->tp_dim], i = 0;
      for (int64_t b = 0; b < z0[0]; b++)
        for (int64_t s = 0; s < z0[1]; s++)
          for (int64_t h = 0; h < z0[2]; h++, i++) {
            int64_t idx = ((s0[0] + b) * a->t.shape[1] + s0[1] + s) * a->t.shape[2] + s0[2] + h;
            p[i] = rs__tp_partial_piece(c, k, idx, p[i]);
          }
    }
  }
  free(g);
  return st;
}

rs_status rs__tp_forward(const rs__tp_ops *ops, const rs_tp_case *c, rs_tp_result *out) {
  walk *w = calloc(1, sizeof *w);
  rs_tp_result *scratch = NULL;
  if (!w) return rs_fail(RS_ERR_NOMEM, "tp: out of memory");
  if (!out) out = scratch = calloc(1, sizeof *scratch);
  if (!out) {
    free(w);
    return rs_fail(RS_ERR_NOMEM, "tp: out of memory");
  }
  memset(out, 0, sizeof *out);
  w->ops = ops;
  w->c = c;
  w->r = out;
  w->played = ops && ops->distributed ? ops->played : -1;
  if (w->played >= c->mesh.nranks) {
    free(w);
    free(scratch);
    return rs_fail(RS_ERR_INVALID, "tp: this process plays mesh position %d of a %d-rank mesh", ops->played,
                   (int)c->mesh.nranks);
  }
  for (int i = 0; i < RS_TP_MAX_MODULES; i++) out->mod_bytes[i] = out->mod_pairs[i] = -1;
  for (int pos = 0; pos < c->mesh.nranks; pos++) rs_mesh_coord(&c->mesh, pos, w->coord[pos]);
  act a;
  memset(&a, 0, sizeof a);
  rs_status st = RS_OK;
  a.t.dtype = c->mod[0].kind == RS_TP_EMBEDDING ? RS_I64 : RS_F32;
  a.t.ndim = c->mod[0].kind == RS_TP_EMBEDDING ? 2 : 3;
  a.t.shape[0] = c->batch;
  a.t.shape[1] = c->seq;
  a.t.shape[2] = c->mod[0].in;
  rs_placement in = c->input_layout;
  if ((st = rs__tp_norm_layout(&in, a.t.ndim, "input_layout")) == RS_OK) {
    if (in.kind == RS_PARTIAL && (a.t.dtype != RS_F32 || in.op != RS_SUM))
      st = rs_fail(RS_ERR_INVALID, "input_layout: Partial must be P(sum) on hidden states");
    else st = set_layout(w, &a, in, "input", "input_layout");
  }
  a.is_local = 1;
  if (st == RS_OK && ops) st = make_input(w, &a);
  for (int mi = 0; st == RS_OK && mi < c->nmod; mi++) st = module(w, mi, &a);
  /* the output in the case's dtype: every value is an exact integer of it (or, after a real norm,
   * rounded once to nearest even, as PyTorch's reduced-precision norms round their F32 result) */
  rs_dtype dt = rs_tp_dtype_of(c->dtype);
  for (int pos = 0; st == RS_OK && ops && dt != RS_F32 && pos < a.l.n; pos++) {
    if (!plays(w, pos)) continue; /* another process computes it */
    rs_local *l = &a.l.r[pos];
    int64_t cnt = l->nbytes / 4;
    uint16_t *h = malloc((size_t)(cnt ? cnt : 1) * 2);
    if (!h) {
      st = rs_fail(RS_ERR_NOMEM, "tp: out of memory");
      break;
    }
    for (int64_t i = 0; i < cnt; i++) {
      float f = ((const float *)l->data)[i];
      h[i] = dt == RS_BF16 ? rs_f32_to_bf16(f) : rs_f32_to_f16(f);
    }
    free(l->data);
    l->data = h;
    l->nbytes = cnt * 2;
  }
  if (st == RS_OK) a.t.dtype = dt;
  if (st == RS_OK) {
    out->out_tensor = a.t;
    out->out_layout = a.s;
    out->out_is_local = a.is_local;
    out->out = a.l;
  } else {
    rs_locals_free(&a.l);
  }
  free(w);
  free(scratch);
  return st;
}

void rs_tp_result_free(rs_tp_result *r) {
  if (!r) return;
  rs_locals_free(&r->out);
}
