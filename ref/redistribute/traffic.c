/* traffic.c - the bytes a ref step plan moves between distinct ranks (for the traffic benchmark). */
#include "reshard/ref.h"

rs_status rs_ref_plan_traffic(const rs_case *c, const rs_plan *p, int64_t *bytes) {
  const rs_mesh *m = &c->mesh;
  const rs_tensor *t = &c->tensor;
  rs_sharding cur = c->src;
  int64_t total = 0;
  for (int k = 0; k < p->nsteps; ++k) {
    rs_sharding next = cur;
    rs_status st = rs_mesh_apply_step(m, &next, &p->step[k], t->ndim);
    if (st) return st;
    rs_collective coll;
    if ((st = rs_step_collective(&p->step[k], &coll))) return st;
    int md = p->step[k].mesh_dim;
    if (coll != RS_COLL_NONE && coll != RS_COLL_CHUNK && coll != RS_COLL_PARTITION && m->size[md] > 1) {
      for (int pos = 0; pos < m->nranks; ++pos) {
        int64_t ci[RS_MAX_MESH_DIMS], cj[RS_MAX_MESH_DIMS];
        int64_t as[RS_MAX_DIMS], az[RS_MAX_DIMS], bs[RS_MAX_DIMS], bz[RS_MAX_DIMS];
        rs_mesh_coord(m, pos, ci);
        rs_local_box(m, &next, t, ci, as, az);
        for (int64_t j = 0; j < m->size[md]; ++j) {
          if (j == ci[md]) continue;
          for (int d = 0; d < m->ndim; ++d) cj[d] = ci[d];
          cj[md] = j;
          rs_local_box(m, &cur, t, cj, bs, bz);
          total += rs_box_overlap(t->ndim, as, az, bs, bz);
        }
      }
    }
    cur = next;
  }
  *bytes = total * rs_dtype_size(t->dtype);
  return RS_OK;
}
