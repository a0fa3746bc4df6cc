/* fp8_cvt.h — one value f32 <-> E4M3 / E5M2 in integer arithmetic, shared
 * by the CPU reference (ops/fp8.c) and the CUDA kernels (ops/fp8.cu), so the
 * two are bit-identical by construction (ops/fp8.h states the rules).
 *
 * Encoding, for a format with B exponent bias, M mantissa bits and
 * emin = 1 - B (the exponent of the smallest normal):
 *   f32 x = m * 2^(E - 23), m the 24-bit significand (implicit 1 set), E
 *   its unbiased exponent.
 *   normal target (E >= emin): keep the top M + 1 bits of m, round the
 *     23 - M dropped bits to nearest even; a carry out (m rounded up to
 *     2^(M+1)) moves to the next exponent. Code = (E + B) << M | mantissa.
 *   subnormal target (E < emin): the value in units of the smallest
 *     subnormal 2^(emin - M) is m >> (23 + emin - M - E), rounded the same
 *     way; a result of 2^M is the smallest normal's code, which is right.
 *   Then codes above the largest finite saturate to it (satfinite).
 * f32 subnormals (< 2^-126) are far below half of either format's smallest
 * subnormal and round to +-0.
 */
#ifndef CTRAIN_OPS_FP8_CVT_H
#define CTRAIN_OPS_FP8_CVT_H

#include <stdint.h>
#include <string.h>

#ifndef CT_HD
#if defined(__CUDACC__)
#define CT_HD __host__ __device__ __forceinline__
#else
#define CT_HD static inline
#endif
#endif

/* f = 0: E4M3 (bias 7, 3 mantissa bits, largest code 0x7E);
 * f = 1: E5M2 (bias 15, 2 mantissa bits, largest finite code 0x7B). */
CT_HD uint8_t fp8_cvt_from_f32(float x, int f)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t ef = (u >> 23) & 0xFFu, mf = u & 0x7FFFFFu;
    if (ef == 0xFFu && mf != 0) return 0x7F;          /* NaN */
    const int M = f ? 2 : 3, B = f ? 15 : 7, emin = 1 - B;
    const uint32_t maxcode = f ? 0x7Bu : 0x7Eu;
    if (ef == 0xFFu) return (uint8_t)(sign | maxcode); /* +-inf saturates */
    if (ef == 0) return (uint8_t)sign;                 /* +-0 and f32 subnormals */
    const int E = (int)ef - 127;
    const uint32_t m = mf | 0x800000u;
    int shift = E >= emin ? 23 - M : 23 + emin - M - E;
    if (shift > 25) return (uint8_t)sign;              /* below half the smallest subnormal */
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) r++;
    uint32_t code;
    if (E >= emin) {
        int e = E;
        if (r == (2u << M)) { r >>= 1; e++; }
        code = ((uint32_t)(e + B) << M) | (r - (1u << M));
    } else {
        code = r;
    }
    if (code > maxcode) code = maxcode;
    return (uint8_t)(sign | code);
}

CT_HD float fp8_cvt_to_f32(uint8_t q, int f)
{
    const int M = f ? 2 : 3, B = f ? 15 : 7;
    const uint32_t sign = (uint32_t)(q & 0x80u) << 24;
    const uint32_t e = (uint32_t)(q & 0x7Fu) >> M, m = q & ((1u << M) - 1u);
    const uint32_t emax = f ? 31u : 15u;
    uint32_t u;
    if (!f && (q & 0x7Fu) == 0x7Fu) u = 0x7FC00000u;                  /* E4M3 NaN */
    else if (f && e == emax) u = m ? 0x7FC00000u : (sign | 0x7F800000u); /* E5M2 NaN, inf */
    else if (e == 0) {
        /* subnormal: m * 2^(1 - B - M), exact in f32 */
        float v = (float)m;
        for (int i = 0; i < B - 1 + M; i++) v *= 0.5f;
        memcpy(&u, &v, 4);
        u |= sign;
    } else {
        u = sign | ((e - (uint32_t)B + 127u) << 23) | (m << (23 - M));
    }
    float out;
    memcpy(&out, &u, 4);
    return out;
}

#endif
