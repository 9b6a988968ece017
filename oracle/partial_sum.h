/* partial_sum.h - the oracle's view of a layout up to how Partial(sum) pieces are split: used
 * where two correct executions may put different pieces on the ranks of a Partial(sum) mesh dim
 * (PyTorch's Shard -> Partial(sum) zero-fill against the contract's partition by 1/n). */
#ifndef RESHARD_ORACLE_PARTIAL_SUM_H
#define RESHARD_ORACLE_PARTIAL_SUM_H

#include "reshard/case.h"
#include "reshard/plan.h"
#include "reshard/oracle.h"

/* Replace every rank's local by the sum of the locals of its group along the mesh dims in
 * mesh_mask (bit m = mesh dim m; each must be Partial(sum) in the layout, so the group shares one
 * box), folded left in coordinate order. RS_ERR_MISMATCH when the group's shapes differ. */
rs_status rs__oracle_sum_over(const rs_case *c, unsigned mesh_mask, rs_locals *io);

/* The oracle's answer for plan p's result once its pieces on the mesh dims in mesh_mask (Partial(sum)
 * made by zero-fill, rs__plan_zero_fill_dims) have been summed: the expected locals of layout dst
 * with those dims Replicate, which is the value before any partition there (a zero-filled sum adds
 * zeros only, so no division and no rounding enters, in every value mode). *layout_out is that
 * layout. */
rs_status rs__oracle_expected_summed(const rs_case *c, const rs_plan *p, unsigned mesh_mask,
                                     rs_sharding *layout_out, rs_locals *out);

/* Compares plan p's result `act` (summed in place over mesh_mask first) with
 * rs__oracle_expected_summed. Returns the number of ranks that differ (diff filled), or -1 with
 * *st set when the oracle or the sum failed. */
int rs__oracle_compare_zero_fill(const rs_case *c, const rs_plan *p, unsigned mesh_mask, rs_locals *act,
                                 rs_diff *diff, rs_status *st);

/* The mesh dims a plan turns into Partial(sum) by zero-fill (RS_COLL_SHARD_TO_PARTIAL steps) and
 * that are still Partial(sum) in the case's dst. */
unsigned rs__plan_zero_fill_dims(const rs_case *c, const rs_plan *p);

#endif
