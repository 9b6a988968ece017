/* arith.c - the dtype arithmetic of reductions (SPEC 1): F64/F32 native, F16/BF16 through F32 with
 * rounding after every op, integers wrapping (computed unsigned). */
#include <string.h>
#include "core/values.h"
#include "core/mutant.h"

/* acc[i] = acc[i] (op) x[i]; ADD is the dtype's sum (native, or wrapping through the unsigned type). */
#define FOLD(T, ACC, X, N, OP, ADD)                                     \
  do {                                                                  \
    T *a_ = (T *)(ACC);                                                 \
    const T *x_ = (const T *)(X);                                       \
    for (int64_t i_ = 0; i_ < (N); ++i_) {                              \
      T v_ = x_[i_];                                                    \
      switch (OP) {                                                     \
        case RS_MIN: if (v_ < a_[i_]) a_[i_] = v_; break;               \
        case RS_MAX: if (v_ > a_[i_]) a_[i_] = v_; break;               \
        default: a_[i_] = ADD(T, a_[i_], v_); break;                    \
      }                                                                 \
    }                                                                   \
  } while (0)
#define ADD_NATIVE(T, a, b) ((a) + (b))
#define ADD_WRAP_64(T, a, b) ((T)(uint64_t)((uint64_t)(a) + (uint64_t)(b)))
#define ADD_WRAP_32(T, a, b) ((T)(uint32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_WRAP_16(T, a, b) ((T)(uint16_t)((uint16_t)(a) + (uint16_t)(b)))
#define ADD_WRAP_8(T, a, b) ((T)(uint8_t)((uint8_t)(a) + (uint8_t)(b)))

static float half_op(float a, float b, rs_redop op) {
  switch (op) {
    case RS_MIN: return b < a ? b : a;
    case RS_MAX: return b > a ? b : a;
    default: return a + b;
  }
}

void rs_arith_fold(rs_dtype t, rs_redop op, void *acc, const void *x, int64_t n) {
  switch (t) {
    case RS_F64: FOLD(double, acc, x, n, op, ADD_NATIVE); break;
    case RS_F32: FOLD(float, acc, x, n, op, ADD_NATIVE); break;
    case RS_F16: {
      uint16_t *a = acc;
      const uint16_t *v = x;
      for (int64_t i = 0; i < n; ++i)
        a[i] = rs_f32_to_f16(half_op(rs_f16_to_f32(a[i]), rs_f16_to_f32(v[i]), op));
      break;
    }
    case RS_BF16: {
      uint16_t *a = acc;
      const uint16_t *v = x;
      for (int64_t i = 0; i < n; ++i)
        a[i] = rs_f32_to_bf16(half_op(rs_bf16_to_f32(a[i]), rs_bf16_to_f32(v[i]), op));
      break;
    }
    case RS_I64: FOLD(int64_t, acc, x, n, op, ADD_WRAP_64); break;
    case RS_I32: FOLD(int32_t, acc, x, n, op, ADD_WRAP_32); break;
    case RS_I16: FOLD(int16_t, acc, x, n, op, ADD_WRAP_16); break;
    case RS_I8: FOLD(int8_t, acc, x, n, op, ADD_WRAP_8); break;
    case RS_U8:
      /* Mutant 215: unsigned min/max folded with a signed comparison. */
      if (RS_MUTANT(215) && (op == RS_MIN || op == RS_MAX)) FOLD(int8_t, acc, x, n, op, ADD_WRAP_8);
      else FOLD(uint8_t, acc, x, n, op, ADD_WRAP_8);
      break;
    default: break; /* copy-only dtypes never reach a reduction (validated) */
  }
}

void rs_arith_div(rs_dtype t, void *x, int64_t d, int64_t n) {
  switch (t) {
    case RS_F64: { double *p = x; for (int64_t i = 0; i < n; ++i) p[i] = p[i] / (double)d; break; }
    case RS_F32: { float *p = x; for (int64_t i = 0; i < n; ++i) p[i] = p[i] / (float)d; break; }
    case RS_F16: {
      uint16_t *p = x;
      for (int64_t i = 0; i < n; ++i) p[i] = rs_f32_to_f16(rs_f16_to_f32(p[i]) / (float)d);
      break;
    }
    case RS_BF16: {
      uint16_t *p = x;
      for (int64_t i = 0; i < n; ++i) p[i] = rs_f32_to_bf16(rs_bf16_to_f32(p[i]) / (float)d);
      break;
    }
    case RS_I64: { int64_t *p = x; for (int64_t i = 0; i < n; ++i) p[i] = p[i] / d; break; }
    case RS_I32: { int32_t *p = x; for (int64_t i = 0; i < n; ++i) p[i] = (int32_t)(p[i] / d); break; }
    case RS_I16: { int16_t *p = x; for (int64_t i = 0; i < n; ++i) p[i] = (int16_t)(p[i] / d); break; }
    case RS_I8: { int8_t *p = x; for (int64_t i = 0; i < n; ++i) p[i] = (int8_t)(p[i] / d); break; }
    case RS_U8: { uint8_t *p = x; for (int64_t i = 0; i < n; ++i) p[i] = (uint8_t)(p[i] / d); break; }
    default: break;
  }
}

uint64_t rs_elem_bits(rs_dtype t, const void *p, int64_t i) {
  uint64_t v = 0;
  int es = rs_dtype_size(t);
  memcpy(&v, (const char *)p + i * es, (size_t)es);
  return v;
}
