/* normal_f32.h — the standard normal CDF Phi(x) and density phi(x) in f32,
 * for the GELU kernels (ops/elementwise.cu, ops/fp8.cu), from one short formula:
 *
 *   GELU     y  = x Phi(x)
 *   backward dx = dy (Phi(x) + x phi(x))
 *
 *   Phi(x) = erfc(z) / 2 with z = -x / sqrt2;  phi(x) = exp(-z^2) / sqrt(2 pi)
 *   erfc(z), z >= 0:  t = 1 / (1 + z/2),
 *                     erfc(z) = t exp(-z^2 - 1.26551223 + t (1.00002368 + t (0.37409196
 *                               + t (0.09678418 + t (-0.18628806 + t (0.27886807
 *                               + t (-1.13520398 + t (1.48851587 + t (-0.82215223
 *                               + t 0.17087277)))))))))
 *   and erfc(-z) = 2 - erfc(z).
 * This is the Chebyshev fit of Numerical Recipes' erfcc (fractional error
 * under 1.2e-7 for every z): one reciprocal, nine multiply-adds and two
 * exponentials for both Phi and phi, where the library's erfcf and expf
 * cost about twice the instructions. The GELU kernels are bound by that
 * arithmetic, not by memory (docs/kernels.md). The left tail stays accurate
 * (no 1 + erf(...) cancellation). On the device the exponentials are
 * __expf's ex2 (a few ulp, growing with |argument|: ~1e-5 relative where Phi
 * is 1e-22; subnormal results flushed to 0) and the reciprocal the
 * approximate one: the FP8 GELU casts issue an instruction every cycle they
 * can, so each one an element counts (docs/kernels.md);
 * tests/test_elementwise.c bounds the host version's error against
 * double-precision erfc, the CPU reference (ops/elementwise.c) stays in
 * double.
 */
#ifndef CTRAIN_OPS_NORMAL_F32_H
#define CTRAIN_OPS_NORMAL_F32_H

#include <math.h>

#if defined(__CUDACC__)
#define NORMAL_F32_FN __host__ __device__ __forceinline__ static
#else
#define NORMAL_F32_FN static inline
#endif

NORMAL_F32_FN float normal_f32_exp(float v)
{
#if defined(__CUDA_ARCH__)
    /* __expf's ex2 with subnormal results flushed to 0 (ftz): one MUFU.EX2
     * after the multiply, where the build's default (no -ftz) wraps it in a
     * range test and two rescalings. Only results below 2^-126 differ (Phi
     * under ~1e-38, x < -13), which GELU's outputs cannot tell from 0. */
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v * 1.44269504088896341f));
    return r;
#else
    return expf(v);
#endif
}

/* 1 / v for v >= 1 (the fit's t): on the device the approximate reciprocal,
 * one MUFU.RCP (within 1 ulp), where IEEE division adds a Newton step and a
 * range test; the fit's error (1.2e-7) stays the larger. rcp.approx.ftz, not
 * __fdividef(1, v): without -ftz the latter wraps the same MUFU.RCP in a
 * subnormal test, a select, a rescale and a multiply by the select (four
 * instructions an element more in the issue-bound FP8 GELU casts, by ncu's
 * SASS counts); v >= 1 is never subnormal, so the results are the same bits. */
NORMAL_F32_FN float normal_f32_rcp(float v)
{
#if defined(__CUDA_ARCH__)
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#else
    return 1.0f / v;
#endif
}

/* Phi(x); phi(x) into *pdf when pdf is not NULL. */
NORMAL_F32_FN float normal_f32_cdf(float x, float *pdf)
{
    const float z = x * -0.70710678118654752f, a = fabsf(z), zz = z * z;
    const float t = normal_f32_rcp(1.0f + 0.5f * a);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    const float e = t * normal_f32_exp(p - zz); /* erfc(|z|) */
    if (pdf) *pdf = 0.39894228040143268f * normal_f32_exp(-zz);
    return z >= 0.0f ? 0.5f * e : 1.0f - 0.5f * e;
}

/* GELU's forward, x Phi(x): the one expression every GELU kernel computes
 * (ops/elementwise.cu, and the FP8 cast that applies it on the way in,
 * ops/fp8.cu), so their results are the same bits. */
NORMAL_F32_FN float normal_f32_gelu(float x)
{
    return x * normal_f32_cdf(x, NULL);
}

/* GELU's backward, dx = dy (Phi(x) + x phi(x)), with its roundings pinned
 * (one fused multiply-add, then the product): the same bits in op_gelu's
 * backward (ops/elementwise.cu) and in the FP8 cast that applies it on the
 * way in (ops/fp8.cu), whatever the compiler would contract in each. */
NORMAL_F32_FN float normal_f32_gelu_grad(float dy, float x)
{
    float pdf;
    const float cdf = normal_f32_cdf(x, &pdf);
    return dy * fmaf(x, pdf, cdf);
}

#endif
