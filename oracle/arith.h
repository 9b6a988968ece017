/* arith.h - the oracle's own dtype arithmetic, mesh coordinates and boxes (SPEC 1, 2, 4), written
 * independently of core/ (other formulations) so that a bug in core's conversions, folds or mesh
 * math shows as a disagreement between the oracle and ref/opt instead of being the same bug
 * everywhere. Internal to oracle/ (and its unit test); `rs__` prefix. */
#ifndef RS_ORACLE_ARITH_H
#define RS_ORACLE_ARITH_H

#include <stdint.h>
#include "reshard/layout.h"

/* F32 -> BF16 by double arithmetic (scale to the BF16 quantum, rint = nearest, ties to even). */
uint16_t rs__oracle_f32_to_bf16(float f);
/* F32 -> F16 by integer manipulation of the F32 fields (guard and sticky bits, ties to even). */
uint16_t rs__oracle_f32_to_f16(float f);
/* Exact decodings by field arithmetic. */
double rs__oracle_bf16_to_double(uint16_t b);
double rs__oracle_f16_to_double(uint16_t h);

/* One element: acc = acc (op) x with SPEC 1's arithmetic (avg folds as sum). */
void rs__oracle_op(rs_dtype t, rs_redop op, void *acc, const void *x);
/* One element: x = x / d (SPEC 1: floats through F32 for F16/BF16, integers truncate). */
void rs__oracle_div(rs_dtype t, void *x, int64_t d);
/* The same, element by element, over n consecutive elements. */
void rs__oracle_op_n(rs_dtype t, rs_redop op, void *acc, const void *x, int64_t n);
void rs__oracle_div_n(rs_dtype t, void *x, int64_t d, int64_t n);

/* SPEC 2: the coordinate of mesh position pos, by explicit row-major strides. */
void rs__oracle_coord(const rs_mesh *m, int64_t pos, int64_t coord[RS_MAX_MESH_DIMS]);
/* SPEC 4: a rank's box (start, size per tensor dim), nested torch.chunk splits in shard order. */
void rs__oracle_box(const rs_mesh *m, const rs_sharding *s, const rs_tensor *t,
                    const int64_t coord[RS_MAX_MESH_DIMS], int64_t start[RS_MAX_DIMS],
                    int64_t size[RS_MAX_DIMS]);

#endif
