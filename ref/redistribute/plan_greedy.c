/* plan_greedy.c - greedy redistribute planner of PyTorch's generate_greedy_transform_infos.
 *
 * It looks only at placements, never at shard orders: a 1-D mesh gets one direct step; otherwise a
 * pass from the last mesh dim to the first replicates every mesh dim whose target Shard would sit
 * on a differently-nested split of its tensor dim, then a pass from the first mesh dim to the last
 * moves every remaining mesh dim to its target. Logical shapes are not recorded: the reference
 * executor simulates all ranks and knows every box exactly. */
#include <string.h>

#include "core/mutant.h"
#include "reshard/ref.h"

static rs_placement norm_pl(rs_placement p, int ndim) {
  if (p.kind == RS_SHARD && p.dim < 0) p.dim = (int8_t)(p.dim + ndim);
  return p;
}

static int is_shard_of(rs_placement p, int d) { return p.kind == RS_SHARD && p.dim == d; }

static rs_status push_step(rs_plan *out, int mesh_dim, rs_placement from, rs_placement to) {
  if (out->nsteps >= RS_MAX_STEPS)
    return rs_fail(RS_ERR_INVALID, "plan: more than %d steps", RS_MAX_STEPS);
  rs_step *st = &out->step[out->nsteps++];
  st->mesh_dim = mesh_dim;
  st->from = from;
  st->to = to;
  return RS_OK;
}

rs_status rs_ref_plan_greedy(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                             const rs_sharding *dst, rs_plan *out) {
  return rs_ref_plan_greedy_enum(m, t, src, dst, RS_ENUM_SEED, out);
}

rs_status rs_ref_plan_greedy_enum(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                                  const rs_sharding *dst, rs_enumeration e, rs_plan *out) {
  if (!m || !t || !src || !dst || !out)
    return rs_fail(RS_ERR_INVALID, "plan_greedy: NULL argument");
  if (src->mesh_ndim != m->ndim || dst->mesh_ndim != m->ndim)
    return rs_fail(RS_ERR_INVALID, "plan_greedy: placements count (%d, %d) != mesh ndim %d",
                   src->mesh_ndim, dst->mesh_ndim, m->ndim);
  memset(out, 0, sizeof *out);
  out->enumeration = e;
  const int nd = m->ndim;
  rs_placement cur[RS_MAX_MESH_DIMS], tgt[RS_MAX_MESH_DIMS];
  for (int i = 0; i < nd; i++) {
    cur[i] = norm_pl(src->p[i], t->ndim);
    tgt[i] = norm_pl(dst->p[i], t->ndim);
  }

  /* The reference planner emits the direct step on a 1-D mesh even when both sides are equal;
   * current PyTorch emits none. */
  if (nd == 1) {
    if (e == RS_ENUM_PYTORCH && rs_pl_equal(cur[0], tgt[0]) && !RS_MUTANT(242)) return RS_OK;
    return push_step(out, 0, cur[0], tgt[0]);
  }

  int64_t num_shards = 1;
  for (int i = 0; i < nd; i++)
    if (cur[i].kind == RS_SHARD) num_shards *= m->size[i];

  rs_status st;
  if (num_shards > 1) {
    for (int md = nd - 1; md >= 0; md--) {
      rs_placement target = tgt[md];
      if (target.kind == RS_SHARD && !RS_MUTANT(9)) {
        /* The mesh dims before md that split the same tensor dim must be the same list on both
         * sides, else md's Shard is nested differently and has to be rebuilt from Replicate. */
        int d = target.dim, same = 1;
        int ci = 0, ti = 0;
        int cl[RS_MAX_MESH_DIMS], tl[RS_MAX_MESH_DIMS];
        for (int i = 0; i < md; i++) {
          if (is_shard_of(cur[i], d)) cl[ci++] = i;
          if (is_shard_of(tgt[i], d)) tl[ti++] = i;
        }
        if (ci != ti) same = 0;
        for (int k = 0; same && k < ci; k++)
          if (cl[k] != tl[k]) same = 0;
        if (!same) target = rs_pl_replicate();
      }
      if (!rs_pl_equal(cur[md], target)) {
        if ((st = push_step(out, md, cur[md], target)) != RS_OK) return st;
        cur[md] = target;
      }
    }
  }
  for (int md = 0; md < nd; md++) {
    if (!rs_pl_equal(cur[md], tgt[md])) {
      if ((st = push_step(out, md, cur[md], tgt[md])) != RS_OK) return st;
      cur[md] = tgt[md];
    }
  }
  return RS_OK;
}
