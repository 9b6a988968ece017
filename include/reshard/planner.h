/* planner.h - the planner plug-in ABI: a resharding planner written outside reshard, loaded with
 * dlopen and fuzzed by `reshard fuzz-planner` (docs/conformance.md, "Planner fuzzing").
 *
 * A planner fills any subset of two capabilities:
 *   - plan:     same-mesh redistribute. It gets the mesh (sizes and rank list), the tensor (shape
 *               and dtype), the source and destination shardings (placements and shard orders,
 *               SPEC 3) and the transition enumeration the harness checks against (SPEC 7), and
 *               returns a step plan: PyTorch's transform infos, one (mesh dim, from, to) per step.
 *   - plan_p2p: cross-config (SPEC 10). It gets a P2P model and returns a P2P plan (transfers with
 *               task ids, sender, receiver and a box in global coordinates).
 * Plan memory belongs to the plug-in: the harness copies what it gets and hands it back through
 * free_plan / free_p2p_plan, so a plug-in may allocate it with any allocator.
 *
 * A shared library is a planner plug-in when it exports
 *
 *   int rs_planner_abi_version(void);                    returns RS_PLANNER_ABI_VERSION
 *   int rs_planner_create(const rs_planner_vtable **vt, void **self);      0 on success
 *
 * Every call returns an rs_status: RS_OK; RS_ERR_UNSUPPORTED or RS_ERR_NOPATH when the planner
 * declines this case (counted as declined, never as passed); anything else is a failure of the
 * planner. The one-line reason of the last failed call comes from last_error(self).
 *
 * Growth: `size` is sizeof(rs_planner_vtable) as the plug-in was compiled. Members are only ever
 * added at the end; the harness reads a member only when `size` covers it, and treats a NULL
 * function pointer as a capability the plug-in lacks. rs_planner_problem grows the same way, in
 * the other direction (the harness sets its `size`). The types below are the public layout and
 * plan types of reshard/layout.h, reshard/plan.h and reshard/p2p.h; a plug-in calls no reshard
 * function (it may link the library if it wants reshard's own planners). */
#ifndef RESHARD_PLANNER_H
#define RESHARD_PLANNER_H

#include <stddef.h>
#include <stdint.h>
#include "reshard/layout.h"
#include "reshard/p2p.h"
#include "reshard/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_PLANNER_ABI_VERSION 1

/* One same-mesh planning problem. Shard dims are normalized (0 <= dim < tensor->ndim); the shard
 * orders are complete (every mesh dim with S(d) is listed in order[d]). */
typedef struct rs_planner_problem {
  uint32_t size; /* sizeof(rs_planner_problem) of the harness */
  const rs_mesh *mesh;
  const rs_tensor *tensor;
  const rs_sharding *src, *dst;
  int32_t enumeration; /* rs_enumeration: the transitions the plan is checked against */
} rs_planner_problem;

/* A step plan returned by a plug-in (its memory). Steps run in order; each changes one mesh dim's
 * placement and follows SPEC 6's shard-order bookkeeping. */
typedef struct rs_planner_steps {
  int32_t nsteps;
  rs_step *step;
} rs_planner_steps;

typedef struct rs_planner_vtable {
  uint32_t size;        /* sizeof(rs_planner_vtable) the plug-in was built with */
  uint32_t abi_version; /* RS_PLANNER_ABI_VERSION */
  const char *name;
  rs_status (*plan)(void *self, const rs_planner_problem *pb, rs_planner_steps **out);
  void (*free_plan)(void *self, rs_planner_steps *plan);
  /* out->x / out->coords as rs_p2p_plan_add would fill them; the byte counters are ignored (the
   * harness recomputes them). */
  rs_status (*plan_p2p)(void *self, const rs_p2p_model *model, rs_p2p_plan **out);
  void (*free_p2p_plan)(void *self, rs_p2p_plan *plan);
  const char *(*last_error)(void *self);
  void (*destroy)(void *self);
} rs_planner_vtable;

typedef int (*rs_planner_abi_version_fn)(void);
typedef int (*rs_planner_create_fn)(const rs_planner_vtable **vt, void **self);

#ifdef __cplusplus
}
#endif
#endif
