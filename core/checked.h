/* checked.h - int64 size arithmetic that reports overflow instead of wrapping (SPEC 9: sizes whose
 * element or byte count overflows int64 are bad input). Every count * count and count * elem_size
 * in reshard goes through these before any allocation or loop. */
#ifndef RS_CORE_CHECKED_H
#define RS_CORE_CHECKED_H

#include <stdint.h>
#include "core/mutant.h"

/* 1 and *out = a * b when it fits in int64 (a, b >= 0), else 0. */
static inline int rs__mul_ok(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return 0;
  if (RS_MUTANT(233)) { /* planted: the product wraps unnoticed */
    *out = (int64_t)((uint64_t)a * (uint64_t)b);
    return 1;
  }
  return !__builtin_mul_overflow(a, b, out);
}
static inline int rs__add_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
/* Product of n sizes (each >= 0) into *out. Returns 0 when a size is negative or when the product
 * of the non-zero sizes overflows: a shape such as [0, 1e18, 1e18] has no elements, yet its strides
 * overflow, so it is refused like any other overflowing shape. */
static inline int rs__numel_ok(const int64_t *sz, int n, int64_t *out) {
  int64_t p = 1, nz = 1;
  for (int i = 0; i < n; ++i) {
    if (sz[i] < 0) return 0;
    if (sz[i] == 0) p = 0;
    else if (!rs__mul_ok(nz, sz[i], &nz)) return 0;
  }
  *out = p ? nz : 0;
  return 1;
}

#endif
