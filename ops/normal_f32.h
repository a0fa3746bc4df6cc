/* normal_f32.h — the standard normal CDF Phi(x) and density phi(x) in f32,
 * for the GELU kernels (ops/elementwise.cu, ops/fp8.cu), from one short formula:
 *
 *   GELU     y  = x Phi(x)
 *   backward dx = dy (Phi(x) + x phi(x))
 *
 *   Phi(x) = erfc(z) / 2 with z = -x / sqrt2;  phi(x) = exp(-z^2) / sqrt(2 pi)
 *   erfc(z), z >= 0:  t = 1 / (1 + 0.47 z),
 *                     erfc(z) / 2 = t 2^(P(t) - z^2 log2(e)),
 *                     P(t) = c0 + c1 t + ... + c7 t^7   (coefficients below)
 *   and erfc(-z) = 2 - erfc(z).
 * P is a minimax fit (weighted least squares, iterated) of log2(erfc(z)
 * e^(z^2) / t) - 1 over the t that matter, 0.187 <= t <= 1 (0 <= z <= 9.3:
 * x down to -13.2, where Phi reaches f32's smallest normal; beyond it the
 * result underflows whatever P gives); its error is 3.2e-7 in log2, so
 * Phi's relative error from the fit is 2.2e-7. The -1 (the erfc's 1/2), the
 * change to base 2 and 0.47 are folded into the coefficients and into w =
 * x sqrt(log2(e) / 2), whose square is z^2 log2(e): one reciprocal, seven
 * multiply-adds and one exponential for Phi, one more exponential for phi.
 * c0 and c1 are one ulp off the fit so that P(1) is exactly -1 in f32:
 * Phi(0) = 1/2 exactly, and GELU's output has the same bits as the exact
 * function's for every bf16 input (checked on the host, libm's exp2f in
 * place of the device's). The GELU kernels are bound by this arithmetic,
 * not by memory (docs/kernels.md: the FP8 GELU casts issue an instruction
 * every cycle they can, so each one an element counts), hence a fit of
 * degree 7 over the range in use rather than Numerical Recipes' degree-9
 * erfcc over all z (the form used here before, 1.2e-7; four instructions an
 * element more). The left tail stays accurate (no 1 + erf(...)
 * cancellation). On the device the exponentials are ex2.approx (a few ulp,
 * and the rounding of w^2 grows with |x|: ~1e-5 relative where Phi is
 * 1e-22; subnormal results flushed to 0) and the reciprocal the approximate
 * one; tests/test_elementwise.c bounds the host version's error against
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

NORMAL_F32_FN float normal_f32_exp2(float v)
{
#if defined(__CUDA_ARCH__)
    /* one MUFU.EX2 with subnormal results flushed to 0 (ftz), where the
     * build's default (no -ftz) wraps it in a range test and two rescalings.
     * Only results below 2^-126 differ (Phi under ~1e-38, x < -13), which
     * GELU's outputs cannot tell from 0. */
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#else
    return exp2f(v);
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
    const float w = x * -0.84932180028801904f;   /* z sqrt(log2 e) */
    const float ww = w * w;                      /* z^2 log2(e) */
    const float t = normal_f32_rcp(fmaf(fabsf(w), 0.39130067f, 1.0f));   /* 0.47 |z| */
    float p = -2.846374350e-01f;
    p = fmaf(p, t, 1.258544260e+00f);
    p = fmaf(p, t, -1.966994687e+00f);
    p = fmaf(p, t, 1.095572877e+00f);
    p = fmaf(p, t, -2.779520679e-01f);
    p = fmaf(p, t, 6.586957924e-01f);
    p = fmaf(p, t, 1.431220055e+00f);
    p = fmaf(p, t, -2.914448738e+00f);
    const float h = t * normal_f32_exp2(p - ww);   /* erfc(|z|) / 2 */
    if (pdf) *pdf = normal_f32_exp2(-1.32574806f - ww);   /* log2(1 / sqrt(2 pi)) */
    return w >= 0.0f ? h : 1.0f - h;
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
