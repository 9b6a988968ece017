/* mxfp8_math.h - opt's MXFP8 block quantizer (SPEC 10) in integer arithmetic, one definition shared
 * by the CPU path (mxfp8.c) and the CUDA kernel (opt/cuda/mxfp8.cu), so both give the same bits.
 *
 * Scale: amax is compared as bits (finite non-negative floats order like their bit patterns);
 * amax = f * 2^k with f in [1, 2) gives e = k - 8 + (f > 1.75), since 448 = 1.75 * 2^8; float
 * subnormal amax (below 2^-126) always clamps to -127. Element: the BF16 value M * 2^E divided by
 * 2^e, rounded in units of the E4M3 quantum at its magnitude (2^(floor(log2 v) - 3) for normals,
 * 2^-9 below 2^-6), ties to even, saturating at 448 (code 0x7E). */
#ifndef RS_OPT_MXFP8_MATH_H
#define RS_OPT_MXFP8_MATH_H

#include <stdint.h>

#ifdef __CUDACC__
#define RS_HD __host__ __device__
#else
#define RS_HD
#endif

RS_HD static inline int rs__mx_log2(uint32_t m) {
  int n = 0;
  while ((m >> n) > 1) n++;
  return n;
}

/* E4M3 code of bf16 b / 2^e. */
RS_HD static inline uint8_t rs__mx_elem(uint16_t b, int e, int half_up) {
  uint8_t sign = (uint8_t)((b >> 8) & 0x80);
  int ex = (b >> 7) & 0xFF;
  uint32_t M = ex ? (0x80u | (b & 0x7Fu)) : (b & 0x7Fu);
  int E = (ex ? ex : 1) - 127 - 7;
  if (!M) return sign;
  int lg = rs__mx_log2(M) + E - e; /* floor(log2 |v|) */
  int normal = lg >= -6;
  if (!normal && half_up == 3) return sign; /* planted bug: E4M3 subnormals flushed to zero */
  int ulp = normal ? lg - 3 : -9;
  int shift = E - e - ulp; /* |v| / 2^ulp = M * 2^shift */
  uint32_t r;
  if (shift >= 0) {
    r = shift > 8 ? 0x7FFu : M << shift; /* shift > 8 only far above 448: saturates below */
  } else {
    int s = -shift;
    if (s >= 16) {
      r = 0;
    } else {
      uint32_t rem = M & ((1u << s) - 1), half = 1u << (s - 1);
      r = M >> s;
      if (half_up == 1 ? rem >= half : (rem > half || (rem == half && (r & 1)))) r++;
    }
  }
  uint32_t code = normal ? (((uint32_t)(lg + 7) << 3) + r - 8) : r;
  if (code > 0x7E) code = 0x7E;
  return (uint8_t)(sign | code);
}

/* One block of 32: returns 1 when it holds a NaN/Inf (nothing written), else 0. */
/* half_up selects the planted bugs of the mutation self-test: 1 rounds ties away from zero,
 * 2 moves the 448 boundary of the scale (amax = 448 * 2^e takes the next exponent), 3 flushes
 * E4M3 subnormals to zero, 4 clamps the scale exponent at -126 (as if E8M0 code 0 were reserved). */
RS_HD static inline int rs__mx_block(const uint16_t *x, uint8_t *q, uint8_t *scale, int half_up) {
  uint32_t amax = 0;
  for (int i = 0; i < 32; ++i) {
    if ((x[i] & 0x7F80) == 0x7F80) return 1;
    uint32_t a = (uint32_t)(x[i] & 0x7FFF) << 16;
    if (a > amax) amax = a;
  }
  int e = 0;
  if (amax) {
    int k8 = (int)(amax >> 23);
    e = k8 ? k8 - 127 - 8 + (half_up == 2 ? (amax & 0x7FFFFFu) >= 0x600000u : (amax & 0x7FFFFFu) > 0x600000u) : -127;
    if (e < (half_up == 4 ? -126 : -127)) e = half_up == 4 ? -126 : -127; /* 4: planted clamp at -126 */
    if (e > 127) e = 127;
  }
  *scale = (uint8_t)(e + 127);
  for (int i = 0; i < 32; ++i) q[i] = rs__mx_elem(x[i], e, half_up);
  return 0;
}

#endif
