/* fp8.c — the CPU reference of ops/fp8.h: E4M3 / E5M2 casts (the bit
 * arithmetic of ops/fp8_cvt.h), the scaled cast with its amax, and the
 * delayed-scaling update.
 *
 *   forward of a scaled cast:  q = fp8(x * s), amax = max |x|
 *   dequantize:                x ~ q * s_inv, s_inv = 1 / s
 *   after the step:            history[t mod L] = amax_t
 *                              s = fmt_max / max(history) / 2^margin
 */
#include "fp8.h"

#include <math.h>

#include "engine/error.h"
#include "fp8_cvt.h"

float fp8_max(Fp8Format f) { return f == FP8_E5M2 ? FP8_E5M2_MAX : FP8_E4M3_MAX; }

const char *fp8_name(Fp8Format f) { return f == FP8_E5M2 ? "e5m2" : "e4m3"; }

uint8_t fp8_from_f32(float x, Fp8Format f) { return fp8_cvt_from_f32(x, (int)f); }

float fp8_to_f32(uint8_t q, Fp8Format f) { return fp8_cvt_to_f32(q, (int)f); }

void fp8_cast_cpu(uint8_t *q, float *amax, const float *x, size_t n, float scale, Fp8Format f)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        q[i] = fp8_cvt_from_f32(x[i] * scale, (int)f);
        m = fmaxf(m, fabsf(x[i]));
    }
    if (amax) *amax = m;
}

void fp8_dequant_cpu(float *x, const uint8_t *q, size_t n, float scale_inv, Fp8Format f)
{
    for (size_t i = 0; i < n; i++) x[i] = fp8_cvt_to_f32(q[i], (int)f) * scale_inv;
}

int fp8_scale_update_cpu(float *history, int len, long step, float amax, Fp8Format f,
                         int margin, float *scale, float *scale_inv)
{
    CT_ASSERT(len > 0 && step >= 0 && margin >= 0 && margin < 64,
              "fp8_scale_update_cpu: history length %d, step %ld, margin %d", len, step, margin);
    const int overflow = !isfinite(amax);
    history[step % len] = overflow ? 0.0f : amax;
    float m = 0.0f;
    for (int i = 0; i < len; i++) m = fmaxf(m, history[i]);
    if (m > 0.0f) {
        const float s = fp8_max(f) / m / ldexpf(1.0f, margin);
        if (isfinite(s) && s > 0.0f) *scale = s;
    }
    *scale_inv = 1.0f / *scale;
    return overflow;
}
