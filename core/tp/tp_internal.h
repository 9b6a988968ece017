/* tp_internal.h - what core/tp shares with ref/tp, opt/tp, oracle/tp and props: the style driver
 * (one walk of the module chain that decides every redistribution and every local compute, SPEC 12)
 * parameterized by an implementation's redistribute and Linear kernel, and small helpers. */
#ifndef RS_CORE_TP_INTERNAL_H
#define RS_CORE_TP_INTERNAL_H

#include "reshard/tp.h"

/* An implementation of the sharded forward: its redistribute (fills `issued` with the steps it
 * performed, from which the driver counts collectives) and its Linear kernel:
 * y[r, o] = (sum over k ascending of x[r, k] * w[o, k] in F32) + b[o] (b may be NULL). */
typedef struct rs__tp_ops {
  void *ctx;
  rs_status (*redistribute)(void *ctx, const rs_case *c, const rs_locals *in, rs_locals *out,
                            rs_plan *issued);
  rs_status (*linear)(void *ctx, const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                      const float *b, float *y);
} rs__tp_ops;

/* The forward. ops == NULL walks the layouts only (validation: no data, no result). */
rs_status rs__tp_forward(const rs__tp_ops *ops, const rs_tp_case *c, rs_tp_result *out);

/* The DP mesh dim (-1 on a 1-d mesh) and the TP size. */
int rs__tp_dp_dim(const rs_tp_case *c);
int64_t rs__tp_size(const rs_tp_case *c);
/* Normalize a layout for an activation of ndim dims (S(-1) -> S(ndim-1)); error when out of range. */
rs_status rs__tp_norm_layout(rs_placement *p, int ndim, const char *field);
/* The layout of an activation (or parameter) on the whole mesh: `tp` on the TP dim, `dp` on the
 * other one (validated, default shard order). */
rs_status rs__tp_sharding(const rs_tp_case *c, rs_placement tp, rs_placement dp, const rs_tensor *t,
                          rs_sharding *s);
/* Copy the box [start, start+size) of a row-major global tensor (ndim <= 3) into dst. */
void rs__tp_box_copy(const void *src, int ndim, const int64_t *gshape, const int64_t *start,
                     const int64_t *size, int es, void *dst);
/* Piece k (TP coordinate) of a Partial(sum) input at flat index idx whose sum over k is g. */
float rs__tp_partial_piece(const rs_tp_case *c, int64_t k, int64_t idx, float g);

#endif
