/* values.h - deterministic test values (SPEC 8) and the dtype arithmetic of reductions (SPEC 1, 5).
 *
 * Bits mode: every element is raw random bits from (seed, global index) - copy-only cases.
 * Exact mode: the logical global tensor G holds integers (times a unit, the mesh's rank count, so
 * that every partition division is exact); a source layout with Partial mesh dims holds, for each
 * coordinate on those dims, a piece whose canonical reduction is G. Pieces have one sign, so every
 * partial fold stays within the dtype's exact range whatever the order. A dtype too narrow for that
 * is refused (rs_case_check_values), never filled with zeros; element 0 is never zero.
 * Order mode: every piece is an independent ordinary random finite value (random mantissa, spread
 * exponents, a few signed zeros) small enough that no sum overflows; results depend on the event
 * sequence (SPEC 5). rs_value_global gives the value when src has no Partial. */
#ifndef RESHARD_VALUES_H
#define RESHARD_VALUES_H

#include "reshard/case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bound B of wrap values of integer dtype t: they lie in [-B - 1, B] (U8: [0, B]); 0 for a
 * dtype without wrap values (floats: wrap values are order values). */
int64_t rs_values_wrap_bound(rs_dtype t);

/* splitmix64's finalizer, and three words hashed into one; inline: the value generator calls them
 * several times per element. */
static inline uint64_t rs_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
static inline uint64_t rs_hash3(uint64_t a, uint64_t b, uint64_t c) {
  return rs_mix64(a ^ rs_mix64(b ^ rs_mix64(c)));
}

/* Element of the logical global tensor at row-major flat index `idx`, written to `out`. */
void rs_value_global(const rs_case *c, int64_t idx, void *out);
/* Element of the source piece held at partial coordinates `coord` (only the src layout's
 * Partial mesh dims are read) at flat index idx. Equals rs_value_global when src has no Partial. */
void rs_value_piece(const rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], int64_t idx,
                    void *out);
/* The same for the n consecutive flat indexes flat0.. into out (coord NULL: the logical global
 * tensor, as rs_value_global). The per-case choices are made once, not per element. */
void rs_value_range(const rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], int64_t flat0, int64_t n, void *out);
/* ... and for every element of the box start/size (row-major), into out: what a rank at `coord`
 * holds. */
void rs_value_pieces(const rs_case *c, const int64_t coord[RS_MAX_MESH_DIMS], const int64_t *start,
                     const int64_t *size, void *out);

/* Dtype arithmetic: acc = acc (op) x, elementwise over n elements, SPEC 1 rules
 * (F16/BF16 through F32 with rounding after every op; integers wrap). avg folds as sum. */
void rs_arith_fold(rs_dtype t, rs_redop op, void *acc, const void *x, int64_t n);
/* x = x / d elementwise (avg finish and R->P(sum) partition). Integers truncate. */
void rs_arith_div(rs_dtype t, void *x, int64_t d, int64_t n);
/* Bits of element i of buffer p, widened to 64 bits (for diff reports). */
uint64_t rs_elem_bits(rs_dtype t, const void *p, int64_t i);

#ifdef __cplusplus
}
#endif
#endif
