/* partial_sum.c - sums of Partial(sum) pieces over chosen mesh dims (see partial_sum.h). */
#include <stdlib.h>
#include <string.h>
#include "oracle/partial_sum.h"
#include "reshard/oracle.h"
#include "reshard/plan.h"
#include "core/values.h"
#include "core/mutant.h"

unsigned rs__plan_zero_fill_dims(const rs_case *c, const rs_plan *p) {
  unsigned mask = 0;
  for (int i = 0; i < p->nsteps; ++i) {
    rs_collective k;
    if (rs_step_collective_enum(&p->step[i], p->enumeration, &k) == RS_OK && k == RS_COLL_SHARD_TO_PARTIAL)
      mask |= 1u << p->step[i].mesh_dim;
  }
  for (int m = 0; m < c->mesh.ndim; ++m)
    if (c->dst.p[m].kind != RS_PARTIAL || c->dst.p[m].op != RS_SUM) mask &= ~(1u << m);
  return mask;
}

rs_status rs__oracle_sum_over(const rs_case *c, unsigned mesh_mask, rs_locals *io) {
  const rs_mesh *m = &c->mesh;
  int es = rs_dtype_size(c->tensor.dtype);
  int64_t stride[RS_MAX_MESH_DIMS], s = 1;
  for (int d = m->ndim - 1; d >= 0; --d) {
    stride[d] = s;
    s *= m->size[d];
  }
  int64_t group = 1;
  for (int d = 0; d < m->ndim; ++d)
    if (mesh_mask >> d & 1) group *= m->size[d];
  if (group <= 1) return RS_OK;
  int *member = malloc(sizeof(int) * (size_t)group);
  if (!member) return rs_fail(RS_ERR_NOMEM, "oracle: out of memory");
  rs_status st = RS_OK;
  for (int pos = 0; pos < m->nranks && !st; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS];
    rs_mesh_coord(m, pos, coord);
    int leader = 1;
    for (int d = 0; d < m->ndim; ++d)
      if ((mesh_mask >> d & 1) && coord[d] != 0) leader = 0;
    if (!leader) continue;
    /* the group's members in row-major order of their masked coordinates */
    for (int64_t g = 0; g < group; ++g) {
      int64_t rest = g, q = pos;
      for (int d = m->ndim - 1; d >= 0; --d) {
        if (!(mesh_mask >> d & 1)) continue;
        q += (rest % m->size[d]) * stride[d];
        rest /= m->size[d];
      }
      member[g] = (int)q;
    }
    rs_local *acc = &io->r[member[0]];
    for (int64_t g = 1; g < group - (RS_MUTANT(244) ? 1 : 0); ++g) { /* planted: the last piece is left out */
      const rs_local *x = &io->r[member[g]];
      if (x->nbytes != acc->nbytes) {
        st = rs_fail(RS_ERR_MISMATCH, "oracle: ranks %d and %d of one Partial(sum) group hold %lld and %lld bytes",
                     m->ranks[member[0]], m->ranks[member[g]], (long long)acc->nbytes, (long long)x->nbytes);
        break;
      }
      rs_arith_fold(c->tensor.dtype, RS_SUM, acc->data, x->data, acc->nbytes / es);
    }
    for (int64_t g = 1; g < group && !st; ++g)
      if (acc->nbytes) memcpy(io->r[member[g]].data, acc->data, (size_t)acc->nbytes);
  }
  free(member);
  return st;
}

rs_status rs__oracle_expected_summed(const rs_case *c, const rs_plan *p, unsigned mesh_mask,
                                     rs_sharding *layout_out, rs_locals *out) {
  *layout_out = c->dst;
  for (int m = 0; m < c->mesh.ndim; ++m)
    if (mesh_mask >> m & 1) layout_out->p[m] = rs_pl_replicate();
  if (!p) return rs_oracle_expected(c, layout_out, out);
  /* the plan's value-changing events (SPEC 5) without its zero-fill steps: those add zeros only */
  rs_plan q = *p;
  q.nsteps = 0;
  for (int i = 0; i < p->nsteps; ++i) {
    rs_collective k;
    if (rs_step_collective_enum(&p->step[i], p->enumeration, &k) == RS_OK && k == RS_COLL_SHARD_TO_PARTIAL) continue;
    q.step[q.nsteps++] = p->step[i];
  }
  rs_events ev;
  rs_status st = rs_events_from_plan(&c->mesh, &q, &ev);
  if (st) return st;
  return rs_oracle_expected_events(c, layout_out, &ev, out);
}

/* x + (+0) is x for every x but -0, which becomes +0: an element of a zero-filled group of 2+
 * pieces sums its owner's value with at least one filled +0. */
static void negative_zero_to_plus(rs_dtype t, rs_locals *l) {
  int es = rs_dtype_size(t);
  if (!rs_dtype_is_float(t) || es < 2) return;
  for (int r = 0; r < l->n; ++r) {
    unsigned char *d = l->r[r].data;
    for (int64_t i = 0; i + es <= l->r[r].nbytes; i += es) {
      int neg0 = d[i + es - 1] == 0x80; /* little-endian: the sign byte last, all else zero */
      for (int b = 0; b < es - 1 && neg0; ++b) neg0 = d[i + b] == 0;
      if (neg0) d[i + es - 1] = 0;
    }
  }
}

int rs__oracle_compare_zero_fill(const rs_case *c, const rs_plan *p, unsigned mesh_mask, rs_locals *act,
                                 rs_diff *diff, rs_status *st) {
  rs_locals exp = {0};
  rs_sharding layout;
  if ((*st = rs__oracle_sum_over(c, mesh_mask, act)) != RS_OK ||
      (*st = rs__oracle_expected_summed(c, p, mesh_mask, &layout, &exp)) != RS_OK) {
    rs_locals_free(&exp);
    return -1;
  }
  int64_t group = 1;
  for (int m = 0; m < c->mesh.ndim; ++m)
    if (mesh_mask >> m & 1) group *= c->mesh.size[m];
  if (group > 1) negative_zero_to_plus(c->tensor.dtype, &exp);
  int bad = rs_oracle_compare(c, &layout, &exp, act, diff);
  rs_locals_free(&exp);
  return bad;
}
