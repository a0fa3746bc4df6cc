/* dtype.c — element sizes, names and host conversions (round to nearest even). */
#include "dtype.h"

#include <math.h>
#include <string.h>

static const size_t dt_sizes[DT_COUNT] = {4, 2, 2, 4, 8, 1};
static const char *dt_names[DT_COUNT] = {"f32", "f16", "bf16", "i32", "i64", "u8"};

size_t dtype_size(DType t) { return (t >= 0 && t < DT_COUNT) ? dt_sizes[t] : 0; }
const char *dtype_name(DType t) { return (t >= 0 && t < DT_COUNT) ? dt_names[t] : "?"; }
int dtype_is_float(DType t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16; }

int dtype_parse(const char *s)
{
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(s, dt_names[i]) == 0) return i;
    return -1;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    /* round to nearest even: add 0x7fff plus the lowest kept bit */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);       /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);      /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                                        /* f16 subnormal or zero */
        /* value = a_float; subnormal unit is 2^-24: round(a * 2^24) with RNE */
        float af = bits_f32(a);
        float scaled = af * 16777216.0f;                          /* exact: power of two */
        float r = nearbyintf(scaled);                             /* default mode is RNE */
        return (uint16_t)(sign | (uint32_t)r);
    }
    uint32_t exp = ((a >> 23) - 127 + 15) << 10;
    uint32_t mant = a & 0x7fffffu;
    uint32_t h = exp | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;     /* carry may bump exponent: correct */
    return (uint16_t)(sign | h);
}

float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        float v = (float)mant * (1.0f / 16777216.0f);             /* mant * 2^-24, exact */
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

static double load_elem(const void *p, DType t, size_t i)
{
    switch (t) {
    case DT_F32: return ((const float *)p)[i];
    case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return (double)((const int64_t *)p)[i];
    case DT_U8: return ((const uint8_t *)p)[i];
    default: return 0;
    }
}

static void store_elem(void *p, DType t, size_t i, double v)
{
    switch (t) {
    case DT_F32: ((float *)p)[i] = (float)v; break;
    case DT_F16: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
    case DT_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case DT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case DT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case DT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: break;
    }
}

void dtype_convert(void *dst, DType tdst, const void *src, DType tsrc, size_t n)
{
    if (tdst == tsrc) { memmove(dst, src, n * dtype_size(tdst)); return; }
    if (tsrc == DT_F32 && tdst == DT_F16) {
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = f32_to_f16(((const float *)src)[i]);
        return;
    }
    if (tsrc == DT_F32 && tdst == DT_BF16) {
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = f32_to_bf16(((const float *)src)[i]);
        return;
    }
    /* general path: through double (exact for every pair of types used here,
     * f32 -> double -> f16 included, since f32 -> double is exact) */
    for (size_t i = 0; i < n; i++) store_elem(dst, tdst, i, load_elem(src, tsrc, i));
}
