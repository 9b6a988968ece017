/* case.c - validation of a whole case and the defaults derived from it. */
#include <string.h>
#include "reshard/case.h"

rs_value_mode rs_case_default_values(const rs_case *c) {
  return (rs_sharding_has_partial(&c->src) || rs_sharding_has_partial(&c->dst)) ? RS_VALUES_EXACT
                                                                                 : RS_VALUES_BITS;
}

rs_planner_kind rs_case_resolve_planner(const rs_case *c) {
  if (c->planner != RS_PLANNER_AUTO) return c->planner;
  if (!rs_sharding_is_default_order(&c->src, c->tensor.ndim) ||
      !rs_sharding_is_default_order(&c->dst, c->tensor.ndim))
    return RS_PLANNER_GRAPH;
  return RS_PLANNER_GREEDY;
}

static int ops_mask(const rs_sharding *s) {
  int mask = 0;
  for (int m = 0; m < s->mesh_ndim; ++m)
    if (s->p[m].kind == RS_PARTIAL) mask |= 1 << s->p[m].op;
  return mask;
}

rs_status rs_case_validate_layout(rs_case *c) {
  rs_status st;
  if (c->tensor.ndim < 0 || c->tensor.ndim > RS_MAX_DIMS)
    return rs_fail(RS_ERR_INVALID, "tensor.shape: %d dims, expected 0..%d", c->tensor.ndim, RS_MAX_DIMS);
  if ((unsigned)c->tensor.dtype >= RS_DTYPE_COUNT) return rs_fail(RS_ERR_INVALID, "tensor.dtype: invalid");
  int64_t nbytes;
  if ((st = rs_tensor_nbytes(&c->tensor, &nbytes))) return st;
  if (c->mesh.ndim < 1 || c->mesh.ndim > RS_MAX_MESH_DIMS)
    return rs_fail(RS_ERR_INVALID, "mesh.shape: %d dims, expected 1..%d", c->mesh.ndim, RS_MAX_MESH_DIMS);
  {
    rs_mesh tmp;
    if ((st = rs_mesh_init(&tmp, c->mesh.ndim, c->mesh.size, c->mesh.ranks))) return st;
  }
  if ((st = rs_sharding_validate(&c->src, &c->mesh, &c->tensor)))
    return rs_fail_prefix(st, "src.");
  if ((st = rs_sharding_validate(&c->dst, &c->mesh, &c->tensor)))
    return rs_fail_prefix(st, "dst.");
  int mask = ops_mask(&c->src) | ops_mask(&c->dst);
  if ((mask & ~((1 << RS_SUM) | (1 << RS_AVG))) && (mask & (mask - 1)))
    return rs_fail(RS_ERR_UNSUPPORTED, "dst: Partial ops of src and dst mix (only sum with avg may mix)");
  for (int m = 0; m < c->mesh.ndim; ++m) {
    rs_placement a = c->src.p[m], b = c->dst.p[m];
    /* S -> P is an error of the seed contract; current PyTorch makes P(sum) from S by zero-fill */
    if (b.kind == RS_PARTIAL && a.kind == RS_SHARD && (c->enumeration != RS_ENUM_PYTORCH || b.op != RS_SUM))
      return rs_fail(RS_ERR_UNSUPPORTED, "dst.placements[%d]: Shard -> Partial%s is not supported%s", m,
                     c->enumeration == RS_ENUM_PYTORCH ? " other than P(sum)" : "",
                     c->enumeration == RS_ENUM_PYTORCH ? "" : " (the pytorch enumeration allows S -> P(sum))");
    if (b.kind == RS_PARTIAL && a.kind == RS_PARTIAL && a.op != b.op)
      return rs_fail(RS_ERR_UNSUPPORTED, "dst.placements[%d]: Partial op change is not supported", m);
  }
  if (c->planner < RS_PLANNER_AUTO || c->planner > RS_PLANNER_GRAPH)
    return rs_fail(RS_ERR_INVALID, "planner: invalid");
  if (c->cost < RS_COST_SEED || c->cost > RS_COST_PYTORCH) return rs_fail(RS_ERR_INVALID, "cost: invalid");
  if (c->enumeration != RS_ENUM_SEED && c->enumeration != RS_ENUM_PYTORCH)
    return rs_fail(RS_ERR_INVALID, "enumeration: invalid");
  return RS_OK;
}

rs_status rs_case_validate(rs_case *c) {
  rs_status st = rs_case_validate_layout(c);
  if (st) return st;
  if (c->values == RS_VALUES_BITS && (rs_sharding_has_partial(&c->src) || rs_sharding_has_partial(&c->dst)))
    return rs_fail(RS_ERR_INVALID, "values: bits mode cannot carry Partial placements (use exact or order)");
  if ((unsigned)c->values > RS_VALUES_WRAP) return rs_fail(RS_ERR_INVALID, "values: invalid mode");
  return rs_case_check_values(c);
}
