/* forward.c - ref's sharded TP forward: the style driver (core/tp) with ref's redistribute (its
 * planners and step executor; the plan it runs is what the collectives are counted from) and the
 * plainest Linear: one F32 accumulator per output element over the reduction index in ascending
 * order, then the bias. */
#include "core/tp/tp_internal.h"
#include "reshard/ref.h"

static rs_status redistribute(void *ctx, const rs_case *c, const rs_locals *in, rs_locals *out,
                              rs_plan *issued, int64_t *traffic) {
  (void)ctx;
  (void)traffic; /* ref has no transport: its collectives are the steps of the plan it executes */
  return rs_ref_redistribute(c, in, out, issued);
}

static rs_status linear(void *ctx, const float *x, int64_t rows, int64_t k, const float *w, int64_t n,
                        const float *b, float *y) {
  (void)ctx;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < n; o++) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; i++) acc += x[r * k + i] * w[o * k + i];
      y[r * n + o] = b ? acc + b[o] : acc;
    }
  return RS_OK;
}

rs_status rs_tp_ref_forward(const rs_tp_case *c, rs_tp_result *out) {
  rs__tp_ops ops = {NULL, redistribute, linear, 0, -1};
  return rs__tp_forward(&ops, c, out);
}
