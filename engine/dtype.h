/* dtype.h — element types and host-side conversions.
 *
 * f16 is IEEE binary16; bf16 is the top half of an IEEE binary32. Both
 * conversions from f32 round to nearest, ties to even, as the GPU's
 * __float2half_rn / __float2bfloat16_rn do, so CPU and GPU agree bit for bit.
 * NaN stays NaN (quiet), overflow goes to infinity.
 */
#ifndef CTRAIN_DTYPE_H
#define CTRAIN_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DT_F32 = 0, DT_F16, DT_BF16, DT_I32, DT_I64, DT_U8, DT_COUNT } DType;

size_t dtype_size(DType t);
const char *dtype_name(DType t);
/* Parse "f32", "f16", "bf16", ...; returns -1 when unknown. */
int dtype_parse(const char *s);
/* Floating types a kernel may compute in (f32, f16, bf16). */
int dtype_is_float(DType t);

uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

/* Convert n elements between any two floating (or integer) types on the host. */
void dtype_convert(void *dst, DType tdst, const void *src, DType tsrc, size_t n);

#ifdef __cplusplus
}
#endif
#endif
