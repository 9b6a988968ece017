/* ref.h - the reference implementation: PyTorch's planners and a plain step executor,
 * every rank simulated in one process. */
#ifndef RESHARD_REF_H
#define RESHARD_REF_H

#include "reshard/case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's generate_greedy_transform_infos, reference version (SPEC 7). */
rs_status rs_ref_plan_greedy(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                             const rs_sharding *dst, rs_plan *out);
/* PyTorch's reference graph planner (Dijkstra over DistStates) with the given cost model. */
rs_status rs_ref_plan_graph(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                            const rs_sharding *dst, rs_cost_model cost, rs_plan *out);
/* The planners with a transition enumeration beside the cost model (RS_ENUM_SEED is the two
 * above; RS_ENUM_PYTORCH is current PyTorch's planner, see rs_enumeration). */
rs_status rs_ref_plan_graph_enum(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                                 const rs_sharding *dst, rs_cost_model cost, rs_enumeration e,
                                 rs_plan *out);
rs_status rs_ref_plan_greedy_enum(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                                  const rs_sharding *dst, rs_enumeration e, rs_plan *out);
/* What the graph planner's cost model charges for a plan: the sum of its steps' edge costs, each
 * priced from the state the step leaves (seed: the constant weights; pytorch: bytes and topology). */
rs_status rs_ref_plan_cost(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                           const rs_plan *p, rs_cost_model cost, double *out);
/* The planner the case names (AUTO resolved as SPEC 7 says). */
rs_status rs_ref_plan(const rs_case *c, rs_plan *out);

/* Execute a step plan on all ranks: `in` holds the locals of c->src (by mesh position); `out`
 * receives the locals of the final layout. Each step is checked for legality. */
rs_status rs_ref_execute(const rs_case *c, const rs_plan *p, const rs_locals *in, rs_locals *out);
/* Plan with rs_ref_plan and execute; plan_out may be NULL. */
rs_status rs_ref_redistribute(const rs_case *c, const rs_locals *in, rs_locals *out,
                              rs_plan *plan_out);

/* Bytes a step plan moves between distinct ranks when each collective sends only what its
 * definition needs (no padding): for every step and group, rank j sends rank i the part of its
 * box before the step that i's box after the step contains. Copy-only plans (gather, all-to-all,
 * chunk); steps with reductions are counted the same way. */
rs_status rs_ref_plan_traffic(const rs_case *c, const rs_plan *p, int64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
