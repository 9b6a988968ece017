/* plan.c - the reference's entry points that pick a planner for a case (SPEC 7) and chain
 * planning with execution. */
#include "reshard/ref.h"

rs_status rs_ref_plan(const rs_case *c, rs_plan *out) {
  if (!c || !out) return rs_fail(RS_ERR_INVALID, "ref plan: NULL argument");
  switch (rs_case_resolve_planner(c)) {
  case RS_PLANNER_GREEDY:
    return rs_ref_plan_greedy_enum(&c->mesh, &c->tensor, &c->src, &c->dst, c->enumeration, out);
  case RS_PLANNER_GRAPH:
    return rs_ref_plan_graph_enum(&c->mesh, &c->tensor, &c->src, &c->dst, c->cost, c->enumeration, out);
  default:
    return rs_fail(RS_ERR_INVALID, "planner: unknown planner %d", (int)c->planner);
  }
}

rs_status rs_ref_redistribute(const rs_case *c, const rs_locals *in, rs_locals *out,
                              rs_plan *plan_out) {
  rs_plan local_plan;
  rs_plan *p = plan_out ? plan_out : &local_plan;
  rs_status st = rs_ref_plan(c, p);
  if (st != RS_OK) return st;
  return rs_ref_execute(c, p, in, out);
}
