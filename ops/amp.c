/* amp.c — CPU reference of the grad scaler and clipping kernels (contract and
 * math in ops/amp.h); ops/amp.cu does the same arithmetic.
 *
 * Shape letters: n gradient elements.
 *
 *   unscale:  inv = (float)(1 / (double)scale);  g = g * inv;  found_inf |= !finite(g)
 *   update:   inf: scale *= backoff, tracker = 0, skipped++
 *             else: tracker++; at growth_interval: scale *= growth (if finite), tracker = 0
 *   clip:     norm = sqrt(sum g^2);  coef = max_norm / (norm + 1e-6);  g *= coef if coef < 1
 */
#include "amp.h"

#include <math.h>

void amp_unscale_check_cpu(float *g, int *found_inf, size_t n, const float *scale)
{
    const float inv = (float)(1.0 / (double)*scale);
    int bad = 0;
#pragma omp parallel for reduction(| : bad) if (n >= 65536)
    for (size_t i = 0; i < n; i++) {
        float r = inv == 1.0f ? g[i] : g[i] * inv;
        g[i] = r;
        bad |= !isfinite(r);
    }
    if (bad) *found_inf = 1;
}

void amp_scaler_update_cpu(float *scale, int *growth_tracker, int64_t *skipped,
                           const int *found_inf, double growth_factor, double backoff_factor,
                           int growth_interval)
{
    if (*found_inf) {
        *scale = (float)((double)*scale * backoff_factor);
        *growth_tracker = 0;
        if (skipped) *skipped += 1;
        return;
    }
    /* a successful step: count it before comparing to the interval */
    int successful = *growth_tracker + 1;
    if (successful == growth_interval) {
        float grown = (float)((double)*scale * growth_factor);
        if (isfinite(grown)) *scale = grown; /* never grow to inf */
        *growth_tracker = 0;
    } else {
        *growth_tracker = successful;
    }
}

void amp_clip_grad_norm_cpu(float *g, float *norm, size_t n, float max_norm,
                            const int *found_inf)
{
    if (found_inf && *found_inf) { /* the step is skipped: no pass over g */
        *norm = INFINITY;
        return;
    }
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
    const float nf = (float)sqrt(s);
    *norm = nf;
    if (max_norm <= 0.0f) return;
    const float t = nf + 1e-6f;
    const float coef = max_norm / t;
    if (coef >= 1.0f) return; /* torch multiplies by clamp(coef, max=1): 1 leaves g as is */
#pragma omp parallel for if (n >= 65536)
    for (size_t i = 0; i < n; i++) g[i] = g[i] * coef;
}
