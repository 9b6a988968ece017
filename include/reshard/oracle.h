/* oracle.h - the plan-free truth: expected locals computed from the global tensor, bitwise
 * comparison, and a diff report. */
#ifndef RESHARD_ORACLE_H
#define RESHARD_ORACLE_H

#include "reshard/case.h"
#include "reshard/events.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Expected local tensors of every mesh rank for layout `dst` of case c when the source pieces of
 * c->src go through the value-changing events `ev` in order (SPEC 5): a reduction folds left over
 * its mesh dim's coordinates with SPEC 1 arithmetic (avg: one division by n), a partition of sum
 * divides by n. The events must take src's Partial dims to dst's (else RS_ERR_INVALID naming the
 * event). The oracle's arithmetic, mesh coordinates and boxes are its own, not core's. */
rs_status rs_oracle_expected_events(const rs_case *c, const rs_sharding *dst, const rs_events *ev,
                                    rs_locals *out);
/* The same with the canonical sequence of (c->src, dst) (rs_events_canonical): what opt's own
 * schedule must give. A step plan's result is rs_oracle_expected_events with rs_events_from_plan. */
rs_status rs_oracle_expected(const rs_case *c, const rs_sharding *dst, rs_locals *out);

typedef struct rs_diff {
  int nbad_ranks;       /* ranks whose bits differ */
  int64_t nbad_elems;   /* elements that differ, over all ranks */
  /* the first difference */
  int pos, world_rank;
  int64_t coord[RS_MAX_MESH_DIMS];
  int64_t index[RS_MAX_DIMS];
  uint64_t expected_bits, actual_bits;
  int shape_mismatch;
  char text[2048]; /* a report of the first differences, one per line */
} rs_diff;

/* Compare bit for bit. Returns 0 when equal, else the number of ranks that differ (diff filled). */
int rs_oracle_compare(const rs_case *c, const rs_sharding *layout, const rs_locals *expected,
                      const rs_locals *actual, rs_diff *diff);

#ifdef __cplusplus
}
#endif
#endif
