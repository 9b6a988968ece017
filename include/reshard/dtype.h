/* dtype.h - element types (safetensors names), sizes and the float conversions of SPEC 1. */
#ifndef RESHARD_DTYPE_H
#define RESHARD_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "reshard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_dtype {
  RS_F64 = 0, RS_F32, RS_F16, RS_BF16, RS_F8_E4M3, RS_F8_E5M2,
  RS_I64, RS_I32, RS_I16, RS_I8, RS_U8, RS_BOOL,
  RS_DTYPE_COUNT
} rs_dtype;

int rs_dtype_size(rs_dtype t);
const char *rs_dtype_name(rs_dtype t);
rs_status rs_dtype_parse(const char *name, rs_dtype *out);
int rs_dtype_is_float(rs_dtype t);
/* Reducible dtypes may carry Partial placements; F8 and BOOL are copy-only. */
int rs_dtype_reducible(rs_dtype t);

/* Conversions: to narrow formats round to nearest, ties to even. */
uint16_t rs_f32_to_f16(float f);
float rs_f16_to_f32(uint16_t h);
uint16_t rs_f32_to_bf16(float f);
float rs_bf16_to_f32(uint16_t b);
uint8_t rs_f32_to_f8e4m3(float f);
float rs_f8e4m3_to_f32(uint8_t v);
uint8_t rs_f32_to_f8e5m2(float f);
float rs_f8e5m2_to_f32(uint8_t v);

#ifdef __cplusplus
}
#endif
#endif
