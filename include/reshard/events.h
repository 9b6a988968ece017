/* events.h - the value-changing events of a redistribution (SPEC 5): reductions of Partial mesh
 * dims and partitions of replicated ones, in order. The result of a redistribution is defined by
 * its event sequence alone; the oracle takes it as an input. */
#ifndef RESHARD_EVENTS_H
#define RESHARD_EVENTS_H

#include "reshard/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RS_MAX_EVENTS RS_MAX_STEPS

typedef enum rs_event_kind {
  RS_EVENT_REDUCE = 0,   /* P(op) -> R or S on mesh_dim: left fold over coordinates 0..n-1 */
  RS_EVENT_PARTITION = 1 /* R (or S) -> P(op) on mesh_dim: sum divides by n, others keep */
} rs_event_kind;

typedef struct rs_event {
  int8_t kind;     /* rs_event_kind */
  int8_t mesh_dim;
  int8_t op;       /* rs_redop of the Partial reduced or created */
} rs_event;

typedef struct rs_events {
  int n;
  rs_event ev[RS_MAX_EVENTS];
} rs_events;

/* The events of a step plan, in step order. Steps on mesh dims of size 1 change no value and give
 * no event when m is given (m == NULL keeps them). */
rs_status rs_events_from_plan(const rs_mesh *m, const rs_plan *p, rs_events *out);
/* The canonical sequence of src -> dst (opt's own schedule): reductions of the mesh dims Partial in
 * src and not (with the same op) in dst, ascending; then partitions of the mesh dims Partial in dst
 * and not in src, ascending. Size-1 mesh dims are left out when m is given. */
rs_status rs_events_canonical(const rs_mesh *m, const rs_sharding *src, const rs_sharding *dst,
                              rs_events *out);
int rs_events_equal(const rs_events *a, const rs_events *b);
/* "reduce 1 P(sum), partition 3 P(sum)" ("none" when empty); returns the length written. */
int rs_events_format(const rs_events *e, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
