/* values.c - the test values of TP cases (SPEC 8 exact): small integers, so every F32 product and
 * partial sum of the forward is an integer below 2^24 whatever the order (rs_tp_case_validate
 * checks the bound); no value is -0.0 (Linear accumulators start at +0.0, norm weights are
 * positive), so the sign of a zero never depends on the order either; biases are multiples of the TP size, so RowwiseParallel's bias / n (the
 * bias enters the Partial output partitioned, as PyTorch's addmm strategy does) stays exact. */
#include <stdlib.h>
#include <string.h>
#include "core/checked.h"
#include "core/tp/tp_internal.h"
#include "core/values.h"

/* tensor streams: the input, module i's weight and bias, then the Partial pieces by TP coordinate */
enum { T_INPUT = 0, T_PARAM = 2, T_PIECE = 1 << 20 };

static int64_t draw(uint64_t seed, uint64_t tensor, uint64_t idx, int64_t lo, int64_t hi) {
  uint64_t h = rs_hash3(seed, tensor, idx);
  return lo + (int64_t)(h % (uint64_t)(hi - lo + 1));
}

rs_status rs_tp_global_input(const rs_tp_case *c, rs_tensor *t, void **data) {
  const rs_tp_module *m0 = &c->mod[0];
  memset(t, 0, sizeof *t);
  int ids = m0->kind == RS_TP_EMBEDDING;
  t->dtype = ids ? RS_I64 : RS_F32;
  t->ndim = ids ? 2 : 3;
  t->shape[0] = c->batch;
  t->shape[1] = c->seq;
  t->shape[2] = m0->in;
  int64_t n, bytes;
  if (!rs__numel_ok(t->shape, t->ndim, &n) || !rs__mul_ok(n, 8, &bytes))
    return rs_fail(RS_ERR_OVERFLOW, "input: element count overflows");
  void *p = malloc((size_t)(bytes ? bytes : 1));
  if (!p) return rs_fail(RS_ERR_NOMEM, "input: out of memory");
  for (int64_t i = 0; i < n; i++) {
    if (ids) ((int64_t *)p)[i] = draw(c->seed, T_INPUT, (uint64_t)i, 0, m0->in - 1);
    else ((float *)p)[i] = (float)draw(c->seed, T_INPUT, (uint64_t)i, -c->vmax, c->vmax);
  }
  *data = p;
  return RS_OK;
}

rs_status rs_tp_global_param(const rs_tp_case *c, int i, rs_tp_param_kind pk, rs_tensor *t,
                             float **data) {
  const rs_tp_module *m = &c->mod[i];
  memset(t, 0, sizeof *t);
  t->dtype = RS_F32;
  if (pk == RS_TP_BIAS) {
    if ((m->kind != RS_TP_LINEAR && m->kind != RS_TP_LAYERNORM) || !m->bias)
      return rs_fail(RS_ERR_INVALID, "%s: no bias", m->path);
    t->ndim = 1;
    t->shape[0] = m->out;
  } else if (rs__tp_is_norm(m->kind)) {
    t->ndim = 1;
    t->shape[0] = m->in;
  } else {
    t->ndim = 2;
    t->shape[0] = m->kind == RS_TP_LINEAR ? m->out : m->in; /* Linear [out, in]; Embedding [vocab, dim] */
    t->shape[1] = m->kind == RS_TP_LINEAR ? m->in : m->out;
  }
  int64_t n, bytes;
  if (!rs__numel_ok(t->shape, t->ndim, &n) || !rs__mul_ok(n, 4, &bytes))
    return rs_fail(RS_ERR_OVERFLOW, "%s: parameter size overflows", m->path);
  float *p = malloc((size_t)(bytes ? bytes : 1));
  if (!p) return rs_fail(RS_ERR_NOMEM, "%s: out of memory", m->path);
  int64_t unit = pk == RS_TP_BIAS && m->kind == RS_TP_LINEAR ? rs__tp_size(c) : 1;
  /* norm weights are positive (as trained ones are, near 1): x * w then never makes a -0.0 */
  int64_t lo = rs__tp_is_norm(m->kind) && pk == RS_TP_WEIGHT ? 1 : -c->vmax;
  uint64_t tensor = T_PARAM + 2 * (uint64_t)i + (uint64_t)pk;
  for (int64_t k = 0; k < n; k++) p[k] = (float)(unit * draw(c->seed, tensor, (uint64_t)k, lo, c->vmax));
  *data = p;
  return RS_OK;
}

float rs__tp_partial_piece(const rs_tp_case *c, int64_t k, int64_t idx, float g) {
  int64_t n = rs__tp_size(c);
  if (k < n - 1) return (float)draw(c->seed, T_PIECE + (uint64_t)k, (uint64_t)idx, -c->vmax, c->vmax);
  float rest = g;
  for (int64_t j = 0; j < n - 1; j++)
    rest -= (float)draw(c->seed, T_PIECE + (uint64_t)j, (uint64_t)idx, -c->vmax, c->vmax);
  return rest;
}
