/* arith.c - the oracle's SPEC 1 arithmetic and SPEC 2/4 mesh math, formulated differently from
 * core/ on purpose: BF16 rounding by scaling in double and rint (core: an integer carry trick), F16
 * rounding by guard/sticky integer bits (core: frexp and floor in double), F32 sums and quotients
 * computed in double and rounded once to F32 (exact by the double-rounding theorem: 53 >= 2*24 + 2),
 * integers sign-extended into 64 bits and masked back (core: casts through the unsigned type),
 * coordinates by strides (core: repeated division from the last dim). Powers of two are doubles
 * built from their exponent field (pow2; every power used here is a normal double), which is what
 * ldexp would give without its call per element. */
#include <math.h>
#include <string.h>
#include "oracle/arith.h"
#include "core/mutant.h"

/* 2^k for -1022 <= k <= 1023 (a normal double: exponent field k + 1023, zero mantissa). */
static double pow2(int k) {
  uint64_t b = (uint64_t)(k + 1023) << 52;
  double d;
  memcpy(&d, &b, 8);
  return d;
}

uint16_t rs__oracle_f32_to_bf16(float f) {
  if (isnan(f)) return 0x7FC0; /* SPEC 1: as PyTorch */
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  if (isinf(a)) return sign | 0x7F80;
  if (a == 0) return sign;
  uint64_t ab;
  memcpy(&ab, &a, 8);
  int e = (int)(ab >> 52) - 1022; /* a in [2^(e-1), 2^e): a came from a float, a normal double */
  int lead = e - 1 < -126 ? -126 : e - 1;
  double q = pow2(lead - 7); /* BF16 keeps 8 significant bits; subnormals the -126 quantum */
  double r = RS_MUTANT(212) ? floor(a / q + 0.5) * q : rint(a / q) * q;
  if (r >= 0x1p128) return sign | 0x7F80;
  float rf = (float)r; /* exact: r has at most 8 significant bits */
  uint32_t u;
  memcpy(&u, &rf, 4);
  return (uint16_t)(sign | (u >> 16));
}

uint16_t rs__oracle_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t ex = (u >> 23) & 0xFFu, man = u & 0x7FFFFFu;
  if (ex == 0xFF) return man ? (uint16_t)(sign | 0x7E00u | (man >> 13)) : (uint16_t)(sign | 0x7C00u);
  if (ex == 0) return sign; /* below 2^-126: far under half the smallest F16 subnormal */
  int e = (int)ex - 127;
  uint64_t sig = man | 0x800000u; /* value = sig * 2^(e-23) */
  int qe = (e >= -14 ? e : -14) - 10; /* exponent of the F16 quantum at this magnitude */
  int rsh = qe - (e - 23);            /* >= 13 */
  uint64_t q, rem, half;
  if (rsh >= 40) return sign; /* even sig's top bit is below half a quantum */
  q = sig >> rsh;
  rem = sig & ((1ull << rsh) - 1);
  half = 1ull << (rsh - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  if (e < -14) return (uint16_t)(sign | q); /* subnormal; q == 1024 is the smallest normal */
  if (q == 2048) {
    q = 1024;
    e++;
  }
  if (e > 15) return sign | 0x7C00u;
  return (uint16_t)(sign | (uint32_t)(e + 15) << 10 | (uint32_t)(q & 0x3FF));
}

double rs__oracle_bf16_to_double(uint16_t b) {
  int ex = (b >> 7) & 0xFF, man = b & 0x7F;
  double s = (b & 0x8000) ? -1.0 : 1.0;
  if (ex == 0xFF) return man ? NAN : s * INFINITY;
  if (ex == 0) return s * (double)man * pow2(-133);
  return s * (double)(man + 128) * pow2(ex - 134);
}

double rs__oracle_f16_to_double(uint16_t h) {
  int ex = (h >> 10) & 0x1F, man = h & 0x3FF;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (ex == 0x1F && man) {
    /* a NaN keeps its sign and payload at the top of the mantissa, where F32 keeps it, so a sum
     * with a NaN operand comes back with the payload core's F32 arithmetic gives it */
    uint64_t b = (uint64_t)(h & 0x8000) << 48 | 0x7FF0000000000000ull | (uint64_t)man << 42;
    double d;
    memcpy(&d, &b, 8);
    return d;
  }
  if (ex == 0x1F) return s * INFINITY;
  if (ex == 0) return s * (double)man * pow2(-24);
  return s * (double)(man + 1024) * pow2(ex - 25);
}

/* ---- integers: 64-bit values, masked back to the dtype's width ---- */

static int int_bits(rs_dtype t) {
  switch (t) {
    case RS_I64: return 64;
    case RS_I32: return 32;
    case RS_I16: return 16;
    default: return 8;
  }
}

/* The little-endian bytes of one element (SPEC 1), zero-extended to 64 bits. */
static inline uint64_t load_raw(int bits, const void *p) {
  switch (bits) {
    case 64: { uint64_t w; memcpy(&w, p, 8); return w; }
    case 32: { uint32_t w; memcpy(&w, p, 4); return w; }
    case 16: { uint16_t w; memcpy(&w, p, 2); return w; }
    default: { uint8_t w; memcpy(&w, p, 1); return w; }
  }
}

static inline int64_t load_int(rs_dtype t, const void *p) {
  int bits = int_bits(t);
  uint64_t raw = load_raw(bits, p);
  if (t == RS_U8 || bits == 64) return (int64_t)raw;
  uint64_t top = 1ull << (bits - 1);
  return (int64_t)((raw ^ top) - top); /* sign extension */
}

/* The low bits of v, as the dtype's little-endian bytes. */
static inline void store_int(rs_dtype t, void *p, uint64_t v) {
  switch (int_bits(t)) {
    case 64: memcpy(p, &v, 8); break;
    case 32: { uint32_t w = (uint32_t)v; memcpy(p, &w, 4); break; }
    case 16: { uint16_t w = (uint16_t)v; memcpy(p, &w, 2); break; }
    default: { uint8_t w = (uint8_t)v; memcpy(p, &w, 1); break; }
  }
}

/* ---- floats through double ---- */

static inline double load_fp(rs_dtype t, const void *p) {
  switch (t) {
    case RS_F64: { double d; memcpy(&d, p, 8); return d; }
    case RS_F32: { float f; memcpy(&f, p, 4); return f; }
    case RS_F16: { uint16_t h; memcpy(&h, p, 2); return rs__oracle_f16_to_double(h); }
    default: { uint16_t h; memcpy(&h, p, 2); return rs__oracle_bf16_to_double(h); }
  }
}

/* Store a result computed in double, rounded to F32 once (the SPEC's F32 step), then to the dtype. */
static inline void store_fp(rs_dtype t, void *p, double v) {
  if (t == RS_F64) { memcpy(p, &v, 8); return; }
  float f = (float)v;
  uint16_t h;
  switch (t) {
    case RS_F32: memcpy(p, &f, 4); return;
    case RS_F16: h = rs__oracle_f32_to_f16(f); memcpy(p, &h, 2); return;
    default: h = rs__oracle_f32_to_bf16(f); memcpy(p, &h, 2); return;
  }
}

static inline void op_one(rs_dtype t, int es, rs_redop op, void *acc, const void *x) {
  if (rs_dtype_is_float(t)) {
    double a = load_fp(t, acc), b = load_fp(t, x);
    if (op == RS_MIN || op == RS_MAX) {
      /* the fold keeps its accumulator unless x is strictly better (so +0/-0 ties keep the first,
       * and a NaN accumulator stays) */
      if (op == RS_MIN ? b < a : b > a) memcpy(acc, x, (size_t)es);
      /* F16/BF16: the op ran in F32 and was rounded back; only a NaN changes on the way (BF16 to
       * 0x7FC0, SPEC 1; F16 quieted, sign and low payload bits kept) */
      uint16_t h;
      if (t == RS_BF16 && (memcpy(&h, acc, 2), (h & 0x7F80) == 0x7F80 && (h & 0x7F))) {
        h = 0x7FC0;
        memcpy(acc, &h, 2);
      } else if (t == RS_F16 && (memcpy(&h, acc, 2), (h & 0x7C00) == 0x7C00 && (h & 0x3FF))) {
        h = (uint16_t)((h & 0x8000) | 0x7E00 | (h & 0x1FF));
        memcpy(acc, &h, 2);
      }
      return;
    }
    store_fp(t, acc, a + b);
    return;
  }
  int64_t a = load_int(t, acc), b = load_int(t, x);
  if (op == RS_MIN || op == RS_MAX) {
    if (op == RS_MIN ? b < a : b > a) memcpy(acc, x, (size_t)es);
    return;
  }
  store_int(t, acc, (uint64_t)a + (uint64_t)b);
}

static inline void div_one(rs_dtype t, void *x, int64_t d) {
  if (rs_dtype_is_float(t)) {
    store_fp(t, x, load_fp(t, x) / (double)d);
    return;
  }
  int64_t a = load_int(t, x);
  uint64_t mag = a < 0 ? 0 - (uint64_t)a : (uint64_t)a;
  uint64_t q = mag / (uint64_t)d; /* truncation toward zero */
  store_int(t, x, a < 0 ? 0 - q : q);
}

void rs__oracle_op(rs_dtype t, rs_redop op, void *acc, const void *x) { op_one(t, rs_dtype_size(t), op, acc, x); }
void rs__oracle_div(rs_dtype t, void *x, int64_t d) { div_one(t, x, d); }

/* The same element by element over n elements (one call per block, not per element). */
void rs__oracle_op_n(rs_dtype t, rs_redop op, void *acc, const void *x, int64_t n) {
  const int es = rs_dtype_size(t);
  for (int64_t i = 0; i < n; ++i) op_one(t, es, op, (char *)acc + i * es, (const char *)x + i * es);
}

void rs__oracle_div_n(rs_dtype t, void *x, int64_t d, int64_t n) {
  const int es = rs_dtype_size(t);
  for (int64_t i = 0; i < n; ++i) div_one(t, (char *)x + i * es, d);
}

/* ---- mesh and boxes ---- */

void rs__oracle_coord(const rs_mesh *m, int64_t pos, int64_t coord[RS_MAX_MESH_DIMS]) {
  int64_t stride = 1;
  for (int i = 0; i < m->ndim; ++i) stride *= m->size[i];
  for (int i = 0; i < m->ndim; ++i) {
    stride /= m->size[i]; /* row-major: the last mesh dim varies fastest */
    coord[i] = (pos / stride) % m->size[i];
  }
}

void rs__oracle_box(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                    const int64_t coord[RS_MAX_MESH_DIMS], int64_t start[RS_MAX_DIMS],
                    int64_t size[RS_MAX_DIMS]) {
  for (int d = 0; d < t->ndim; ++d) {
    int64_t lo = 0, len = t->shape[d];
    for (int k = 0; k < s->order_len[d]; ++k) {
      int md = s->order[d][k];
      int64_t n = m->size[md], i = coord[md];
      /* torch.chunk: pieces of ceil(len/n) (exactly len/n when it divides), the tail short or empty */
      int64_t piece = len / n + (len % n != 0);
      int64_t a = piece * i, b = piece * (i + 1);
      if (a > len) a = len;
      if (b > len) b = len;
      lo += a;
      len = b - a;
    }
    start[d] = lo;
    size[d] = len;
  }
}
