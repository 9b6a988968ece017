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
  /* traffic[0..1]: bytes sent between distinct ranks and (sender, receiver) pairs that sent, as
   * counted by the implementation's transport; left at -1 when it has none to ask */
  rs_status (*redistribute)(void *ctx, const rs_case *c, const rs_locals *in, rs_locals *out,
                            rs_plan *issued, int64_t *traffic);
  rs_status (*linear)(void *ctx, const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                      const float *b, float *y);
  /* one process per rank (MPI): this process computes only mesh position `played`, and the
   * redistribute fills only that position's locals; 0: every position in this process */
  int distributed, played;
} rs__tp_ops;

/* The forward. ops == NULL walks the layouts only (validation: no data, no result). */
rs_status rs__tp_forward(const rs__tp_ops *ops, const rs_tp_case *c, rs_tp_result *out);

/* A case's fields, sizes, style arguments and exactness bound, without walking the layouts (what a
 * generator may use without asking the style driver it tests). Normalizes like rs_tp_case_validate. */
rs_status rs__tp_case_check_static(rs_tp_case *c);
/* A case from JSON with only those static checks (a recorded case PyTorch refused may be one the
 * driver refuses too). */
rs_status rs__tp_case_parse(const char *text, rs_tp_case *out);
/* The RS_TP_ARG_* a style takes. */
unsigned rs__tp_style_args(rs_tp_style_kind k);
int rs__tp_is_norm(rs_tp_module_kind k);      /* norm, layernorm, rmsnorm */
int rs__tp_is_real_norm(rs_tp_module_kind k); /* layernorm, rmsnorm */
/* The real norms' epsilon (PyTorch's defaults: LayerNorm 1e-5, RMSNorm the F32 machine epsilon). */
#define RS_TP_LAYERNORM_EPS 1e-5f
#define RS_TP_RMSNORM_EPS 1.1920928955078125e-07f

/* The DP mesh dim (-1 on a 1-d mesh) and the TP size. */
int rs__tp_dp_dim(const rs_tp_case *c);
int64_t rs__tp_size(const rs_tp_case *c);
/* The length a TP group sees of activation dim `dim` of global length len: DP's piece of the batch
 * when DP splits it (torch.chunk's largest), else len. */
int64_t rs__tp_tp_len(const rs_tp_case *c, int dim, int64_t len);
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
