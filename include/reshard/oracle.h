/* oracle.h - the plan-free truth: expected locals computed from the global tensor, bitwise
 * comparison, and a diff report. */
#ifndef RESHARD_ORACLE_H
#define RESHARD_ORACLE_H

#include "reshard/case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Expected local tensors of every mesh rank for layout `dst` of case c (whose data comes from
 * c->src: Partial dims in both keep their pieces, dims Partial only in src are reduced, dims
 * Partial only in dst are partitioned). */
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
