/* plan.h - step plans (PyTorch transform infos), collectives, shard-order bookkeeping (SPEC 6-7). */
#ifndef RESHARD_PLAN_H
#define RESHARD_PLAN_H

#include "reshard/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_MAX_STEPS 64

typedef enum rs_collective {
  RS_COLL_NONE = 0, /* from == to, or a mesh dim of size 1 */
  RS_COLL_ALL_GATHER,
  RS_COLL_ALL_REDUCE,
  RS_COLL_REDUCE_SCATTER,
  RS_COLL_ALL_TO_ALL,
  RS_COLL_CHUNK,
  RS_COLL_PARTITION,
  RS_COLL_SHARD_TO_PARTIAL, /* S(d) -> P(sum) by zero-fill (pytorch enumeration only; no traffic) */
  RS_COLL_COUNT
} rs_collective;

typedef struct rs_step {
  int mesh_dim;
  rs_placement from, to;
} rs_step;

/* Which transitions a planner may use (SPEC 6-7). Under both, a step R -> P(op) is legal for every
 * op (a local partition: P(sum) divides, P(avg|min|max) keep the value) and the greedy planner
 * emits it directly where the destination asks for it (`plan --src R --dst 'P(max)' --planner
 * greedy`). `seed` is the contract's set: S -> P is an error, and the graph planner's search only
 * creates Partial as P(sum) (a destination P(avg|min|max) it cannot keep from the source has no
 * graph path). `pytorch` is current PyTorch's planner: the graph search also creates R -> P(op)
 * for every op in the source or destination, S(d) -> P(sum) by zero-fill toward a destination
 * P(sum) is a step, and the greedy planner makes no step for an equal 1-D redistribute. */
typedef enum rs_enumeration { RS_ENUM_SEED = 0, RS_ENUM_PYTORCH = 1 } rs_enumeration;
const char *rs_enumeration_name(rs_enumeration e);
rs_status rs_enumeration_parse(const char *text, rs_enumeration *out);

typedef struct rs_plan {
  int nsteps;
  rs_step step[RS_MAX_STEPS];
  rs_enumeration enumeration; /* the transition set the steps were planned under */
} rs_plan;

typedef enum rs_planner_kind { RS_PLANNER_AUTO = 0, RS_PLANNER_GREEDY, RS_PLANNER_GRAPH } rs_planner_kind;
typedef enum rs_cost_model { RS_COST_SEED = 0, RS_COST_PYTORCH } rs_cost_model;

const char *rs_collective_name(rs_collective c);
const char *rs_planner_name(rs_planner_kind k);
rs_status rs_planner_parse(const char *text, rs_planner_kind *out);
/* The collective a step performs (SPEC 6 table); S->P and P(x)->P(y) are RS_ERR_UNSUPPORTED. */
rs_status rs_step_collective(const rs_step *st, rs_collective *out);
/* The same under an enumeration: with RS_ENUM_PYTORCH, S(d) -> P(sum) is RS_COLL_SHARD_TO_PARTIAL. */
rs_status rs_step_collective_enum(const rs_step *st, rs_enumeration e, rs_collective *out);
/* Apply a step to a sharding: placement change plus shard-order bookkeeping. Checks legality:
 * `from` must be the current placement; S->R / S->S must take the last mesh dim of the list. */
rs_status rs_sharding_apply_step(rs_sharding *s, const rs_step *st, int tensor_ndim);
/* The same on a mesh: a step on a mesh dim of size 1 moves nothing, so its bookkeeping may take
 * that mesh dim from any position of the list (PyTorch's greedy planner emits such steps when
 * every sharding mesh dim has size 1). m == NULL is the strict rule above. */
rs_status rs_mesh_apply_step(const rs_mesh *m, rs_sharding *s, const rs_step *st, int tensor_ndim);
/* The same under an enumeration (a zero-fill step takes the mesh dim off its tensor dim's list). */
rs_status rs_mesh_apply_step_enum(const rs_mesh *m, rs_sharding *s, const rs_step *st, int tensor_ndim,
                                  rs_enumeration e);
/* PyTorch's stringify_transform_infos (_redistribute.py): "S(0)[0]S(0)[1]->S(0)R->RR". */
rs_status rs_plan_trace(const rs_mesh *m, const rs_sharding *src, int tensor_ndim, const rs_plan *p,
                        char *buf, size_t cap);
/* Run the bookkeeping of every step (rs_mesh_apply_step) and check the result equals dst. */
rs_status rs_plan_check(const rs_mesh *m, const rs_sharding *src, const rs_sharding *dst,
                        int tensor_ndim, const rs_plan *p);

/* Number of elements in the intersection of two boxes. */
int64_t rs_box_overlap(int ndim, const int64_t *a_start, const int64_t *a_size, const int64_t *b_start,
                       const int64_t *b_size);
/* SPEC 7 traffic lower bound of a copy-only change src -> dst on mesh m, in bytes: the sum over
 * ranks of |box_dst(r) minus box_src(r)| times the element size. */
rs_status rs_traffic_lower_bound(const rs_mesh *m, const rs_tensor *t, const rs_sharding *src,
                                 const rs_sharding *dst, int64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
