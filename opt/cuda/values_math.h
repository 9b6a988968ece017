/* values_math.h - the SPEC 8 test-value generator as straight-line per-element math, for the device:
 * compiled by nvcc as __host__ __device__ (opt/cuda/values.cu: one thread per element, so a device
 * campaign fills its sources in GPU memory and nothing large crosses PCIe) and by the C compiler
 * (rs_dvals_fill_host, opt/cuda/values_params.c), where tests/test_device_values.c compares it bit
 * for bit with core/values.c, the generator every other path uses, over random cases, every value
 * mode and every rank's box. Everything a case decides once (mode, exact range, order bounds, the
 * Partial dims, the box) is precomputed on the host into rs_dvals (rs_dvals_make); the element
 * math here mirrors core/values.c step by step (same hash streams, same rounding). */
#ifndef RS_OPT_VALUES_MATH_H
#define RS_OPT_VALUES_MATH_H

#include <stdint.h>
#include "reshard/dtype.h"
#include "reshard/layout.h"
#include "reshard/status.h"

#ifdef __CUDACC__
#define RS_HD __host__ __device__
#else
#define RS_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum { RS_DV_BITS = 0, RS_DV_EXACT = 1, RS_DV_ORDER = 2 };

/* One rank's box of one case, as the value kernel needs it (plain data: copied to the device as a
 * kernel argument). */
typedef struct rs_dvals {
  uint64_t seed;
  int32_t dtype, esize, mode, partial; /* partial: the src layout has a Partial mesh dim */
  int32_t is_unsigned;                 /* U8 */
  int64_t unit, lo, hi;                /* exact: G = U * unit, U in [lo, hi] */
  int64_t ilo, ibound;                 /* order, integer dtypes: [ilo, ibound] */
  int32_t f16_ehi;                     /* order, F16: top binade */
  int32_t mutant;                      /* planted bug (ids 930-933) of the RS_MUTATION build, else 0 */
  int32_t nmesh;
  int32_t pop[RS_MAX_MESH_DIMS];       /* src Partial op per mesh dim, -1 when not Partial */
  int64_t msize[RS_MAX_MESH_DIMS], coord[RS_MAX_MESH_DIMS];
  int32_t ndim;
  int64_t start[RS_MAX_DIMS], size[RS_MAX_DIMS], gstride[RS_MAX_DIMS];
} rs_dvals;

RS_HD static inline uint64_t rs_dv_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
RS_HD static inline uint64_t rs_dv_hash3(uint64_t a, uint64_t b, uint64_t c) {
  return rs_dv_mix(a ^ rs_dv_mix(b ^ rs_dv_mix(c)));
}

/* F32 bits -> F16 bits, round to nearest even (NaN keeps its payload's top bits, overflow -> Inf):
 * integer operations only, so host and device agree without relying on float environments. */
RS_HD static inline uint16_t rs_dv_f16(uint32_t u) {
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((u >> 13) & 0x1FFu));
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to >= 65536: Inf */
  if (a >= 0x38800000u) {                                  /* normal in F16 */
    a += 0xFFFu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
  }
  uint32_t e = a >> 23; /* subnormal in F16: quanta of 2^-24 */
  if (e < 102) return sign;
  uint32_t m = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - e, q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}
RS_HD static inline uint16_t rs_dv_bf16(uint32_t u) {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* The bits of value v (in units) stored as the dtype (zero-extended to 64 bits). */
RS_HD static inline uint64_t rs_dv_store(const rs_dvals *p, int64_t v) {
  union { float f; uint32_t u; } f;
  union { double d; uint64_t u; } d;
  switch (p->dtype) {
    case RS_F64: d.d = (double)v; return d.u;
    case RS_F32: f.f = (float)v; return f.u;
    case RS_F16: f.f = (float)v; return rs_dv_f16(f.u);
    case RS_BF16: f.f = (float)v; return rs_dv_bf16(f.u);
    case RS_I64: return (uint64_t)v;
    case RS_I32: return (uint32_t)(int32_t)v;
    case RS_I16: return (uint16_t)(int16_t)v;
    case RS_I8: return (uint8_t)(int8_t)v;
    case RS_U8: return (uint8_t)v;
    default: return 0;
  }
}

/* Piece `coord` of v over a Partial dim of size n with op; key names the element and the path. */
RS_HD static inline int64_t rs_dv_piece_of(int64_t v, int op, int64_t n, int64_t coord, uint64_t key,
                                           int is_unsigned) {
  if (op == RS_MIN || op == RS_MAX) {
    int64_t keep = (int64_t)(rs_dv_mix(key) % (uint64_t)n);
    if (coord == keep) return v;
    int64_t k = (int64_t)(rs_dv_mix(key ^ (uint64_t)(coord + 1) * 0x9E37ull) % 3);
    if (op == RS_MIN) return v + k;
    if (is_unsigned && k > v) k = v;
    return v - k;
  }
  int64_t total = op == RS_AVG ? v * n : v;
  int64_t sign = total < 0 ? -1 : 1, rem = total < 0 ? -total : total;
  for (int64_t j = 0; j < n; ++j) {
    int64_t part;
    if (j == n - 1) {
      part = rem;
    } else {
      int64_t cap = 2 * rem / (n - j) + 1;
      part = (int64_t)(rs_dv_mix(key + (uint64_t)j * 0x632BE59BD9B4E019ull) % (uint64_t)cap);
      if (part > rem) part = rem;
    }
    if (j == coord) return sign * part;
    rem -= part;
  }
  return 0;
}

/* Order mode: an ordinary random finite value from the element's key h. */
RS_HD static inline uint64_t rs_dv_order(const rs_dvals *p, uint64_t h, int64_t idx) {
  uint64_t h2 = rs_dv_mix(h ^ 0xD1B54A32D192ED03ull);
  int zero = (h2 & 31) == 0 && idx != 0;
  uint64_t neg = (h2 >> 5) & 1;
  switch (p->dtype) {
    case RS_F64: {
      uint64_t e = (uint64_t)((int64_t)((h2 >> 8) % 25u) - 12 + 1023);
      return zero ? neg << 63 : neg << 63 | e << 52 | (h & 0xFFFFFFFFFFFFFull);
    }
    case RS_F32: {
      uint32_t e = (uint32_t)((int64_t)((h2 >> 8) % 25u) - 12 + 127);
      return zero ? (uint32_t)neg << 31 : (uint32_t)neg << 31 | e << 23 | (uint32_t)(h & 0x7FFFFFu);
    }
    case RS_BF16: {
      uint32_t e = (uint32_t)((int64_t)((h2 >> 8) % 17u) - 8 + 127);
      return (uint16_t)(zero ? neg << 15 : neg << 15 | e << 7 | (h & 0x7Fu));
    }
    case RS_F16: {
      /* RS_MUTANT 933: the F16 binades are counted from 14 (one too high), so sums of the
       * case's pieces can overflow to Inf */
      int ehi = p->f16_ehi + (p->mutant == 933), elo = ehi - 8;
      uint32_t e = (uint32_t)(elo + (int)((h2 >> 8) % (uint64_t)(ehi - elo + 1)) + 15);
      return (uint16_t)(zero ? neg << 15 : neg << 15 | e << 10 | (h & 0x3FFu));
    }
    default: {
      int64_t v = p->ilo + (int64_t)(h % (uint64_t)(p->ibound - p->ilo + 1));
      if (v == 0 && idx == 0) v = p->ibound;
      return rs_dv_store(p, v);
    }
  }
}

/* The bits of the element at global flat index idx of the piece at p->coord. */
RS_HD static inline uint64_t rs_dv_value(const rs_dvals *p, int64_t idx) {
  if (p->mode == RS_DV_ORDER) {
    uint64_t key = rs_dv_hash3(p->seed, 4, (uint64_t)idx);
    for (int m = 0; p->partial && m < p->nmesh; ++m)
      if (p->pop[m] >= 0) key = rs_dv_hash3(key, (uint64_t)m, (uint64_t)p->coord[m]);
    return rs_dv_order(p, key, idx);
  }
  if (p->mode == RS_DV_BITS) {
    uint64_t h = rs_dv_hash3(p->seed, 1, (uint64_t)idx);
    if (p->dtype == RS_BOOL) return h & 1;
    /* RS_MUTANT 931: a narrow element takes the hash's top bytes instead of its low ones */
    if (p->mutant == 931 && p->esize < 8) return h >> (64 - 8 * p->esize);
    return p->esize < 8 ? h & ((1ull << (8 * p->esize)) - 1) : h;
  }
  int64_t v = 0;
  if (p->hi >= 1) {
    uint64_t h = rs_dv_hash3(p->seed, 2, (uint64_t)idx);
    v = p->lo + (int64_t)(h % (uint64_t)(p->hi - p->lo + 1));
    if (v == 0 && idx == 0) v = p->hi;
  }
  if (p->partial) {
    uint64_t key = rs_dv_hash3(p->seed, 3, (uint64_t)idx);
    for (int m = 0; m < p->nmesh; ++m) {
      if (p->pop[m] < 0) continue;
      v = rs_dv_piece_of(v, p->pop[m], p->msize[m], p->coord[m], key, p->is_unsigned);
      /* RS_MUTANT 930: the key does not move on with the path, so the pieces of a second
       * Partial dim are split with the first dim's key (they still sum right per dim only
       * by chance) */
      if (p->mutant != 930) key = rs_dv_hash3(key, (uint64_t)m, (uint64_t)p->coord[m]);
    }
  }
  return rs_dv_store(p, v * p->unit);
}

/* The global flat index of the k-th element (row-major) of the box. */
RS_HD static inline int64_t rs_dv_flat(const rs_dvals *p, int64_t k) {
  int64_t flat = 0;
  for (int d = p->ndim - 1; d >= 0; --d) {
    int64_t q = k / p->size[d], i = k - q * p->size[d];
    /* RS_MUTANT 932: the box's own extent is taken as the tensor's row stride */
    flat += (p->start[d] + i) * (p->mutant == 932 && d + 1 < p->ndim ? p->size[d + 1] : p->gstride[d]);
    k = q;
  }
  return flat;
}

/* Host side (opt/cuda/values_params.c, every build). The case's decisions for the box start/size
 * of the rank at coord (src layout); RS_ERR_INVALID for a box that does not fit the tensor. */
struct rs_case;
rs_status rs_dvals_make(const struct rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], const int64_t *start,
                        const int64_t *size, rs_dvals *p);
int64_t rs_dvals_numel(const rs_dvals *p);
/* The box's elements into out (host memory), the same loop as the kernel's. */
void rs_dvals_fill_host(const rs_dvals *p, void *out);

#ifdef __cplusplus
}
#endif
#endif
