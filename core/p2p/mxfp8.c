/* mxfp8.c - the plain reference of SPEC 10's MXFP8 transform (used by ref/p2p): per block of 32,
 * the smallest power-of-two scale 2^e with amax <= 448 * 2^e, then each element divided by it and
 * rounded to F8_E4M3 (ties to even, saturating at 448). Written for clarity with doubles; opt/ and
 * the oracle have their own versions. */
#include <math.h>
#include "core/p2p/p2p_internal.h"

rs_status rs_mxfp8_quantize_ref(const uint16_t *x, int64_t n, uint8_t *q, uint8_t *scale,
                                const char *what) {
  if (n % RS_MXFP8_BLOCK)
    return rs_fail(RS_ERR_INVALID, "%s: MXFP8 needs a multiple of 32 elements along the last dim", what);
  for (int64_t b = 0; b < n / RS_MXFP8_BLOCK; ++b) {
    const uint16_t *blk = x + b * RS_MXFP8_BLOCK;
    double amax = 0;
    for (int i = 0; i < RS_MXFP8_BLOCK; ++i) {
      double v = (double)rs_bf16_to_f32(blk[i]);
      if (!isfinite(v)) return rs_fail(RS_ERR_INVALID, "%s: block %lld holds a NaN or Inf", what, (long long)b);
      if (fabs(v) > amax) amax = fabs(v);
    }
    int e = 0;
    if (amax > 0) {
      e = -127;
      while (e < 127 && amax > ldexp(448.0, e)) e++;
    }
    scale[b] = (uint8_t)(e + 127);
    for (int i = 0; i < RS_MXFP8_BLOCK; ++i) {
      double v = ldexp((double)rs_bf16_to_f32(blk[i]), -e);
      if (v > 448) v = 448;
      if (v < -448) v = -448;
      /* v is a BF16 value times a power of two: exact in float unless far below E4M3's range */
      q[b * RS_MXFP8_BLOCK + i] = rs_f32_to_f8e4m3((float)v);
    }
  }
  return RS_OK;
}
