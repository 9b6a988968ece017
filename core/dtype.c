/* dtype.c - dtype names, sizes and the round-to-nearest-even conversions of SPEC 1. */
#include <math.h>
#include <string.h>
#include "core/mutant.h"
#include "reshard/dtype.h"

static const char *const rs_dtype_names[RS_DTYPE_COUNT] = {
    "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I64", "I32", "I16", "I8", "U8", "BOOL"};
static const int rs_dtype_sizes[RS_DTYPE_COUNT] = {8, 4, 2, 2, 1, 1, 8, 4, 2, 1, 1, 1};

int rs_dtype_size(rs_dtype t) { return (unsigned)t < RS_DTYPE_COUNT ? rs_dtype_sizes[t] : 0; }

const char *rs_dtype_name(rs_dtype t) {
  return (unsigned)t < RS_DTYPE_COUNT ? rs_dtype_names[t] : "?";
}

rs_status rs_dtype_parse(const char *name, rs_dtype *out) {
  if (!name) return rs_fail(RS_ERR_INVALID, "dtype: missing");
  for (int i = 0; i < RS_DTYPE_COUNT; ++i)
    if (strcmp(name, rs_dtype_names[i]) == 0) {
      *out = (rs_dtype)i;
      return RS_OK;
    }
  return rs_fail(RS_ERR_INVALID, "dtype: unknown dtype '%s' (expected one of F64 F32 F16 BF16 "
                 "F8_E4M3 F8_E5M2 I64 I32 I16 I8 U8 BOOL)", name);
}

int rs_dtype_is_float(rs_dtype t) { return t <= RS_F8_E5M2; }

int rs_dtype_reducible(rs_dtype t) {
  return t != RS_F8_E4M3 && t != RS_F8_E5M2 && t != RS_BOOL && (unsigned)t < RS_DTYPE_COUNT;
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t rs_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0; /* NaN, as PyTorch */
  /* Mutant 209: ties round up (away from zero) instead of to even. */
  if (RS_MUTANT(209)) return (uint16_t)((u + 0x8000u) >> 16);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float rs_bf16_to_f32(uint16_t b) { return u2f((uint32_t)b << 16); }

/* Generic F32 -> small float with `mbits` mantissa bits and exponent bias `bias`, round to nearest
 * even, result in sign|exp|mantissa layout. `emax_field` is the largest finite exponent field. The
 * caller handles Inf/NaN/overflow policy. Returns the magnitude bits; *overflow set when the rounded
 * value exceeds the largest finite magnitude `maxbits`. */
static uint32_t round_to_small(float a, int mbits, int bias, uint32_t maxbits, int *overflow) {
  /* a is finite and >= 0 */
  *overflow = 0;
  if (a == 0.0f) return 0;
  /* a = 1.f * 2^exp_unb, read from the exponent field (no frexp/ldexp per element); a subnormal F32
   * lies below the normals of every small format, where only exp_unb < min_exp matters */
  uint32_t ef32 = f2u(a) >> 23;
  int exp_unb = ef32 ? (int)ef32 - 127 : -127;
  int min_exp = 1 - bias;  /* smallest normal exponent */
  /* quantum: 2^(exp - mbits) for normals, 2^(min_exp - mbits) for subnormals */
  int qexp = (exp_unb < min_exp ? min_exp : exp_unb) - mbits;
  /* scaled = a / 2^qexp is exact in double (a has 24 bits; 2^-qexp is a normal double built from
   * its exponent field, -qexp in [-125, 24]) */
  uint64_t p2 = (uint64_t)(1023 - qexp) << 52;
  double scale;
  memcpy(&scale, &p2, 8);
  double scaled = (double)a * scale;
  uint64_t q = (uint64_t)scaled; /* floor: scaled >= 0 */
  double rem = scaled - (double)q;
  /* Mutant 210: ties round away from zero (F16/F8) instead of to even. */
  if (rem > 0.5 || (rem == 0.5 && ((q & 1) || RS_MUTANT(210)))) q++;
  /* Mutant 276: F16 values in [1024, 2048) lose their last mantissa bit (odd integers there). */
  if (RS_MUTANT(276) && mbits == 10 && exp_unb == 10) q &= ~1ull;
  /* value = q * 2^qexp; encode */
  uint32_t bits;
  if (exp_unb < min_exp) {
    /* subnormal range: q counts quanta of 2^(min_exp-mbits); q == 2^mbits means smallest normal */
    bits = (uint32_t)q; /* exponent field 0 + mantissa, or carries into exponent field 1 */
  } else {
    if (q == (1ull << (mbits + 1))) { /* rounding carried into the next binade */
      q >>= 1;
      exp_unb++;
    }
    uint32_t ef = (uint32_t)(exp_unb + bias);
    bits = (ef << mbits) | ((uint32_t)q & ((1u << mbits) - 1));
  }
  if (bits > maxbits) *overflow = 1;
  return bits;
}

uint16_t rs_f32_to_f16(float f) {
  uint32_t u = f2u(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((u >> 13) & 0x1FFu));
  if ((u & 0x7FFFFFFFu) == 0x7F800000u) return (uint16_t)(sign | 0x7C00u);
  int ov;
  uint32_t bits = round_to_small(fabsf(f), 10, 15, 0x7BFFu, &ov);
  if (ov) return (uint16_t)(sign | 0x7C00u);
  return (uint16_t)(sign | bits);
}

float rs_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return u2f(sign | 0x7F800000u | (m << 13));
  if (e) return u2f(sign | (e + 112u) << 23 | m << 13); /* a normal F16 is a normal F32: rebias */
  float v = (float)m * 0x1p-24f;                          /* subnormal: m quanta of 2^-24, exact */
  return sign ? -v : v;
}

/* F8_E4M3 "fn": no Inf; NaN = S.1111.111; max 448. Overflow and Inf saturate to NaN as the
 * OCP/PyTorch conversion does for out-of-range values. */
uint8_t rs_f32_to_f8e4m3(float f) {
  uint32_t u = f2u(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if ((u & 0x7FFFFFFFu) >= 0x7F800000u) return (uint8_t)(sign | 0x7Fu);
  int ov;
  uint32_t bits = round_to_small(fabsf(f), 3, 7, 0x7Eu, &ov);
  if (ov) return (uint8_t)(sign | 0x7Fu);
  return (uint8_t)(sign | bits);
}

float rs_f8e4m3_to_f32(uint8_t v) {
  uint32_t e = (v >> 3) & 0xFu, m = v & 7u;
  float r;
  if (e == 0xF && m == 7) return u2f(((uint32_t)(v & 0x80u) << 24) | 0x7FC00000u);
  r = e ? ldexpf((float)(m | 8u), (int)e - 10) : ldexpf((float)m, -9);
  return (v & 0x80u) ? -r : r;
}

uint8_t rs_f32_to_f8e5m2(float f) {
  uint32_t u = f2u(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint8_t)(sign | 0x7Fu);
  if ((u & 0x7FFFFFFFu) == 0x7F800000u) return (uint8_t)(sign | 0x7Cu);
  int ov;
  uint32_t bits = round_to_small(fabsf(f), 2, 15, 0x7Bu, &ov);
  if (ov) return (uint8_t)(sign | 0x7Cu);
  return (uint8_t)(sign | bits);
}

float rs_f8e5m2_to_f32(uint8_t v) {
  uint32_t e = (v >> 2) & 0x1Fu, m = v & 3u;
  if (e == 0x1F) return u2f(((uint32_t)(v & 0x80u) << 24) | 0x7F800000u | (m << 21));
  float r = e ? ldexpf((float)(m | 4u), (int)e - 17) : ldexpf((float)m, -16);
  return (v & 0x80u) ? -r : r;
}
