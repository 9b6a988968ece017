/* traffic.c - box intersections and the traffic lower bound of SPEC 7. */
#include "reshard/plan.h"
#include "core/mutant.h"

int64_t rs_box_overlap(int ndim, const int64_t *a_start, const int64_t *a_size, const int64_t *b_start,
                       const int64_t *b_size) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    int64_t lo = a_start[d] > b_start[d] ? a_start[d] : b_start[d];
    int64_t ae = a_start[d] + a_size[d], be = b_start[d] + b_size[d];
    int64_t hi = ae < be ? ae : be;
    if (hi <= lo) return 0;
    n *= hi - lo;
  }
  return n;
}

rs_status rs_traffic_lower_bound(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                                 const rs_sharding *dst, int64_t *bytes) {
  if (rs_sharding_has_partial(src) || rs_sharding_has_partial(dst))
    return rs_fail(RS_ERR_INVALID, "traffic bound: defined for copy-only changes (no Partial)");
  int64_t total = 0;
  for (int pos = 0; pos < m->nranks; ++pos) {
    int64_t coord[RS_MAX_MESH_DIMS], ss[RS_MAX_DIMS], sz[RS_MAX_DIMS], ds[RS_MAX_DIMS], dz[RS_MAX_DIMS], n;
    rs_mesh_coord(m, pos, coord);
    rs_local_box(m, src, t, coord, ss, sz);
    rs_local_box(m, dst, t, coord, ds, dz);
    rs_status st = rs_shape_numel(t->ndim, dz, &n);
    if (st) return st;
    /* Mutant 275: the last rank's receives are left out of the bound. */
    if (RS_MUTANT(275) && pos == m->nranks - 1 && pos > 0) continue;
    total += n - rs_box_overlap(t->ndim, ss, sz, ds, dz);
  }
  *bytes = total * rs_dtype_size(t->dtype);
  return RS_OK;
}
