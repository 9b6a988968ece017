/* expected.c - the oracle's expected locals: computed from the global tensor (and the source
 * pieces of Partial dims) with no planner at all. */
#include <stdlib.h>
#include <string.h>
#include "reshard/oracle.h"
#include "core/values.h"

/* The logical tensor family member seen by ranks whose kept-Partial coordinates are `coord`:
 * reduce the source pieces over the dims Partial only in src, then partition over dims Partial
 * only in dst. Written into buf (numel elements). */
static rs_status family_tensor(const rs_case *c, const rs_sharding *dst, const int64_t *coord_in,
                               int64_t numel, char *buf) {
  int es = rs_dtype_size(c->tensor.dtype);
  int red[RS_MAX_MESH_DIMS], nred = 0;
  int64_t ncombo = 1;
  for (int m = 0; m < c->mesh.ndim; ++m) {
    rs_placement a = c->src.p[m], b = dst->p[m];
    if (a.kind == RS_PARTIAL && !(b.kind == RS_PARTIAL && b.op == a.op)) {
      red[nred++] = m;
      ncombo *= c->mesh.size[m];
    }
  }
  int64_t coord[RS_MAX_MESH_DIMS];
  memcpy(coord, coord_in, sizeof coord);
  char *tmp = NULL;
  if (ncombo > 1 && !(tmp = malloc((size_t)(numel * es > 0 ? numel * es : 1))))
    return rs_fail(RS_ERR_NOMEM, "oracle: out of memory");
  rs_redop op = RS_SUM;
  for (int64_t k = 0; k < ncombo; ++k) {
    int64_t rest = k;
    for (int j = nred - 1; j >= 0; --j) {
      coord[red[j]] = rest % c->mesh.size[red[j]];
      rest /= c->mesh.size[red[j]];
      op = (rs_redop)c->src.p[red[j]].op;
    }
    char *target = k == 0 ? buf : tmp;
    for (int64_t i = 0; i < numel; ++i) rs_value_piece(c, coord, i, target + i * es);
    if (k > 0) rs_arith_fold(c->tensor.dtype, op == RS_AVG ? RS_SUM : op, buf, tmp, numel);
  }
  free(tmp);
  for (int j = 0; j < nred; ++j)
    if (c->src.p[red[j]].op == RS_AVG) rs_arith_div(c->tensor.dtype, buf, c->mesh.size[red[j]], numel);
  for (int m = 0; m < c->mesh.ndim; ++m) {
    rs_placement a = c->src.p[m], b = dst->p[m];
    if (b.kind == RS_PARTIAL && !(a.kind == RS_PARTIAL && a.op == b.op) && b.op == RS_SUM)
      rs_arith_div(c->tensor.dtype, buf, c->mesh.size[m], numel);
  }
  return RS_OK;
}

/* Copy box [start, start+size) of a row-major global tensor into a contiguous local. */
static void copy_box(const rs_tensor *t, const char *global, const int64_t *start,
                     const int64_t *size, char *out) {
  int es = rs_dtype_size(t->dtype), nd = t->ndim;
  int64_t numel = 1, stride[RS_MAX_DIMS], idx[RS_MAX_DIMS] = {0};
  for (int d = 0; d < nd; ++d) numel *= size[d];
  if (numel == 0) return;
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    stride[d] = s;
    s *= t->shape[d];
  }
  /* copy contiguous runs along the last dim */
  int64_t run = nd ? size[nd - 1] : 1;
  for (int64_t k = 0; k < numel; k += run) {
    int64_t flat = 0;
    for (int d = 0; d < nd; ++d) flat += (start[d] + idx[d]) * stride[d];
    memcpy(out + k * es, global + flat * es, (size_t)(run * es));
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < size[d]) break;
      idx[d] = 0;
    }
  }
}

rs_status rs_oracle_expected(const rs_case *c, const rs_sharding *dst, rs_locals *out) {
  rs_status st = rs_locals_for_layout(out, c, dst);
  if (st) return st;
  int es = rs_dtype_size(c->tensor.dtype);
  int64_t numel;
  if ((st = rs_shape_numel(c->tensor.ndim, c->tensor.shape, &numel))) return st;
  /* family members are indexed by the coordinates on dims Partial (same op) in both layouts */
  int keep[RS_MAX_MESH_DIMS], nkeep = 0;
  int64_t nfam = 1;
  for (int m = 0; m < c->mesh.ndim; ++m)
    if (c->src.p[m].kind == RS_PARTIAL && dst->p[m].kind == RS_PARTIAL && c->src.p[m].op == dst->p[m].op) {
      keep[nkeep++] = m;
      nfam *= c->mesh.size[m];
    }
  char *fam = malloc((size_t)(numel * es > 0 ? numel * es : 1));
  if (!fam) {
    rs_locals_free(out);
    return rs_fail(RS_ERR_NOMEM, "oracle: out of memory");
  }
  for (int64_t f = 0; f < nfam; ++f) {
    int64_t coord[RS_MAX_MESH_DIMS] = {0}, rest = f;
    for (int j = nkeep - 1; j >= 0; --j) {
      coord[keep[j]] = rest % c->mesh.size[keep[j]];
      rest /= c->mesh.size[keep[j]];
    }
    if ((st = family_tensor(c, dst, coord, numel, fam))) break;
    for (int pos = 0; pos < c->mesh.nranks; ++pos) {
      int64_t rc[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS];
      rs_mesh_coord(&c->mesh, pos, rc);
      int match = 1;
      for (int j = 0; j < nkeep; ++j) match &= rc[keep[j]] == coord[keep[j]];
      if (!match) continue;
      rs_local_box(&c->mesh, dst, &c->tensor, rc, start, size);
      copy_box(&c->tensor, fam, start, size, out->r[pos].data);
    }
  }
  free(fam);
  if (st) rs_locals_free(out);
  return st;
}
