/* sharding.c - placements and shard order: construction, normalization, validation (SPEC 3). */
#include <string.h>
#include "reshard/layout.h"
#include "core/mutant.h"

rs_placement rs_pl_replicate(void) { rs_placement p = {RS_REPLICATE, 0, 0}; return p; }
rs_placement rs_pl_shard(int dim) { rs_placement p = {RS_SHARD, (int8_t)dim, 0}; return p; }
rs_placement rs_pl_partial(rs_redop op) { rs_placement p = {RS_PARTIAL, 0, (int8_t)op}; return p; }

int rs_pl_equal(rs_placement a, rs_placement b) {
  if (a.kind != b.kind) return 0;
  if (a.kind == RS_SHARD) return a.dim == b.dim;
  if (a.kind == RS_PARTIAL) return a.op == b.op;
  return 1;
}

static rs_status normalize_dims(rs_sharding *s, int tensor_ndim) {
  for (int m = 0; m < s->mesh_ndim; ++m) {
    rs_placement *p = &s->p[m];
    if (p->kind == RS_SHARD) {
      int d = p->dim < 0 ? p->dim + tensor_ndim : p->dim;
      if (d < 0 || d >= tensor_ndim)
        return rs_fail(RS_ERR_INVALID, "placements[%d]: shard dim %d out of range for a %d-d tensor",
                       m, p->dim, tensor_ndim);
      p->dim = (int8_t)d;
    } else if (p->kind == RS_PARTIAL) {
      if (p->op < RS_SUM || p->op > RS_MAX)
        return rs_fail(RS_ERR_INVALID, "placements[%d]: unknown partial op", m);
    } else if (p->kind != RS_REPLICATE) {
      return rs_fail(RS_ERR_INVALID, "placements[%d]: unknown placement kind", m);
    }
  }
  return RS_OK;
}

rs_status rs_sharding_set_default_order(rs_sharding *s, int tensor_ndim) {
  rs_status st = normalize_dims(s, tensor_ndim);
  if (st) return st;
  memset(s->order_len, 0, sizeof s->order_len);
  memset(s->order, 0, sizeof s->order);
  for (int m = 0; m < s->mesh_ndim; ++m)
    if (s->p[m].kind == RS_SHARD) {
      int d = s->p[m].dim;
      s->order[d][s->order_len[d]++] = (int8_t)m;
    }
  return RS_OK;
}

int rs_sharding_is_default_order(const rs_sharding *s, int tensor_ndim) {
  /* Mutant 274: the last tensor dim's order is never looked at. */
  if (RS_MUTANT(274) && tensor_ndim > 1) tensor_ndim--;
  for (int d = 0; d < tensor_ndim; ++d)
    for (int k = 1; k < s->order_len[d]; ++k)
      if (s->order[d][k] < s->order[d][k - 1]) return 0;
  return 1;
}

int rs_sharding_equal(const rs_sharding *a, const rs_sharding *b, int tensor_ndim) {
  if (a->mesh_ndim != b->mesh_ndim) return 0;
  for (int m = 0; m < a->mesh_ndim; ++m)
    if (!rs_pl_equal(a->p[m], b->p[m])) return 0;
  for (int d = 0; d < tensor_ndim; ++d) {
    if (a->order_len[d] != b->order_len[d]) return 0;
    for (int k = 0; k < a->order_len[d]; ++k)
      if (a->order[d][k] != b->order[d][k]) return 0;
  }
  return 1;
}

int rs_sharding_equivalent(const rs_mesh *m, const rs_sharding *a, const rs_sharding *b, int tensor_ndim) {
  if (!m) return rs_sharding_equal(a, b, tensor_ndim);
  if (a->mesh_ndim != b->mesh_ndim) return 0;
  for (int i = 0; i < a->mesh_ndim; ++i)
    if (!rs_pl_equal(a->p[i], b->p[i])) return 0;
  for (int d = 0; d < tensor_ndim; ++d) {
    int i = 0, j = 0;
    for (;;) {
      while (i < a->order_len[d] && m->size[a->order[d][i]] == 1) ++i;
      while (j < b->order_len[d] && m->size[b->order[d][j]] == 1) ++j;
      if (i == a->order_len[d] || j == b->order_len[d]) {
        if (i != a->order_len[d] || j != b->order_len[d]) return 0;
        break;
      }
      if (a->order[d][i++] != b->order[d][j++]) return 0;
    }
  }
  return 1;
}

int rs_sharding_has_partial(const rs_sharding *s) {
  for (int m = 0; m < s->mesh_ndim; ++m)
    if (s->p[m].kind == RS_PARTIAL) return 1;
  return 0;
}

rs_status rs_sharding_validate(rs_sharding *s, const rs_mesh *m, const rs_tensor *t) {
  if (s->mesh_ndim != m->ndim)
    return rs_fail(RS_ERR_INVALID, "placements: %d placements for a %d-d mesh", s->mesh_ndim, m->ndim);
  rs_status st = normalize_dims(s, t->ndim);
  if (st) return st;
  int seen_ops = 0;
  for (int i = 0; i < m->ndim; ++i)
    if (s->p[i].kind == RS_PARTIAL) {
      if (!rs_dtype_reducible(t->dtype))
        return rs_fail(RS_ERR_INVALID, "placements[%d]: Partial on copy-only dtype %s", i,
                       rs_dtype_name(t->dtype));
      seen_ops |= 1 << s->p[i].op;
    }
  if (seen_ops & ~((1 << RS_SUM) | (1 << RS_AVG)) && (seen_ops & (seen_ops - 1)))
    return rs_fail(RS_ERR_INVALID, "placements: mixed Partial ops (only sum with avg may mix)");
  for (int d = t->ndim; d < RS_MAX_DIMS; ++d)
    if (s->order_len[d])
      return rs_fail(RS_ERR_INVALID, "shard_order: tensor dim %d out of range", d);
  for (int d = 0; d < t->ndim; ++d) {
    int count = 0;
    for (int i = 0; i < m->ndim; ++i)
      if (s->p[i].kind == RS_SHARD && s->p[i].dim == d) count++;
    if (s->order_len[d] == 0 && count) /* the order rs_parse_placements leaves empty (layout.h) */
      return rs_fail(RS_ERR_INVALID,
                     "shard_order: tensor dim %d lists 0 mesh dims but %d placements shard it (no shard order: "
                     "fill it with rs_sharding_set_default_order or rs_parse_order after rs_parse_placements)",
                     d, count);
    if (s->order_len[d] != count)
      return rs_fail(RS_ERR_INVALID,
                     "shard_order: tensor dim %d lists %d mesh dims but %d placements shard it", d,
                     s->order_len[d], count);
    for (int k = 0; k < s->order_len[d]; ++k) {
      int md = s->order[d][k];
      if (md < 0 || md >= m->ndim || s->p[md].kind != RS_SHARD || s->p[md].dim != d)
        return rs_fail(RS_ERR_INVALID, "shard_order: tensor dim %d lists mesh dim %d, which is not S(%d)",
                       d, md, d);
      for (int j = 0; j < k; ++j)
        if (s->order[d][j] == md)
          return rs_fail(RS_ERR_INVALID, "shard_order: tensor dim %d lists mesh dim %d twice", d, md);
    }
  }
  return RS_OK;
}
