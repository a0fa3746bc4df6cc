/* adam.c — CPU reference of the AdamW and LAMB updates (contract and math in
 * ops/adam.h); ops/adam.cu does the same arithmetic, operation for operation.
 *
 * Shape letters: n parameters in one contiguous range; S segments (one per
 * parameter tensor) for LAMB.
 *
 *   AdamW:  p = p * (1 - lr wd);  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *           p = p - (lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps))
 *   LAMB:   m, v as above;  u = (m / bc1) / (sqrt(v / bc2) + eps) + wd p
 *           r = ||p|| / ||u|| (1 if a norm is 0 or the segment is not adaptive)
 *           p = p - (lr r) u
 *
 * One operation per statement, f32 (no compiler may fuse a multiply-add:
 * ISO C mode compiles with -ffp-contract=off), so the GPU, which rounds each
 * operation with __fmul_rn and friends, gives the same bits. The moment
 * update is one function (adam_moments) for both loops, as on the GPU. The
 * scalars formed once per step (1 - lr wd, lr / bc1, sqrt(bc2)) are computed
 * in double and rounded once, on both sides. LAMB's sums of squares run in
 * double, sequentially.
 */
#include "adam.h"

#include <math.h>

#include "engine/error.h"

/* beta^t by binary powering: multiplications only, so CPU and GPU (which
 * does the same loop with __dmul_rn) agree bit for bit. */
double adam_beta_pow(double beta, int64_t t)
{
    double r = 1.0;
    while (t > 0) {
        if (t & 1) r = r * beta;
        beta = beta * beta;
        t >>= 1;
    }
    return r;
}

AdamStepState adam_step_state(int64_t step, double beta1, double beta2, int bias_correction)
{
    AdamStepState s = {step, 1.0, 1.0};
    if (bias_correction) {
        s.bc1 = 1.0 - adam_beta_pow(beta1, step);
        s.bc2 = 1.0 - adam_beta_pow(beta2, step);
    }
    return s;
}

void adam_begin_cpu(AdamStepState *st, double beta1, double beta2, int bias_correction,
                    const int *skip)
{
    if (skip && *skip) return; /* a skipped step is not counted */
    *st = adam_step_state(st->step + 1, beta1, beta2, bias_correction);
}

/* the factors torch rounds from Python floats */
AdamFactors adam_factors(double beta1, double beta2, double eps)
{
    AdamFactors f;
    f.b1 = (float)beta1;
    f.omb1 = (float)(1.0 - beta1);
    f.b2 = (float)beta2;
    f.omb2 = (float)(1.0 - beta2);
    f.eps = (float)eps;
    return f;
}

/* m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2, one rounding per
 * operation: both loops' moments (adam_moments in ops/adam.cu). */
static inline void adam_moments(float *m, float *v, float g, const AdamFactors *f)
{
    float ma = f->b1 * *m;
    float mb = f->omb1 * g;
    *m = ma + mb;
    float gg = g * g;
    float va = f->b2 * *v;
    float vb = f->omb2 * gg;
    *v = va + vb;
}

void adamw_step_cpu(float *p, float *m, float *v, const float *g, size_t n, float lr,
                    const AdamStepState *st, double beta1, double beta2, double eps, double wd,
                    const int *skip)
{
    if (skip && *skip) return;
    const AdamFactors f = adam_factors(beta1, beta2, eps);
    const double lw = (double)lr * wd;
    const float keep = (float)(1.0 - lw);
    const float step_size = (float)((double)lr / st->bc1);
    const float bc2_sqrt = (float)sqrt(st->bc2);
#pragma omp parallel for if (n >= 65536)
    for (size_t i = 0; i < n; i++) {
        float pd = p[i] * keep;            /* decoupled weight decay */
        float mi = m[i], vi = v[i];
        adam_moments(&mi, &vi, g[i], &f);
        float sq = sqrtf(vi);
        float sc = sq / bc2_sqrt;
        float den = sc + f.eps;
        float q = mi / den;
        float up = step_size * q;
        m[i] = mi;
        v[i] = vi;
        p[i] = pd - up;
    }
}

int64_t lamb_chunks_build(OptChunk *chunk, OptSeg *seg, int nseg, int64_t chunk_len)
{
    CT_ASSERT(chunk_len > 0 && chunk_len <= INT32_MAX, "lamb_chunks_build: chunk_len %lld",
              (long long)chunk_len);
    int64_t c = 0;
    for (int s = 0; s < nseg; s++) {
        CT_ASSERT(seg[s].offset >= 0 && seg[s].numel >= 0,
                  "lamb_chunks_build: segment %d has offset %lld numel %lld", s,
                  (long long)seg[s].offset, (long long)seg[s].numel);
        seg[s].chunk0 = c;
        seg[s].nchunk = (seg[s].numel + chunk_len - 1) / chunk_len;
        for (int64_t k = 0; k < seg[s].nchunk; k++, c++) {
            if (!chunk) continue;
            int64_t first = k * chunk_len;
            int64_t len = seg[s].numel - first < chunk_len ? seg[s].numel - first : chunk_len;
            chunk[c].start = seg[s].offset + first;
            chunk[c].len = (int32_t)len;
            chunk[c].seg = s;
        }
    }
    return c;
}

/* u = (m / bc1) / (sqrt(v / bc2) + eps) + wd p, one rounding per operation. */
static inline float lamb_u(float mi, float vi, float pi, float bc1, float bc2, float eps,
                           float wd)
{
    float mh = mi / bc1;
    float vh = vi / bc2;
    float sq = sqrtf(vh);
    float den = sq + eps;
    float a = mh / den;
    float b = wd * pi;
    return a + b;
}

void lamb_step_cpu(float *p, float *m, float *v, float *ratio, const float *g,
                   const OptSeg *seg, int nseg, float lr, const AdamStepState *st,
                   double beta1, double beta2, double eps, const int *skip)
{
    if (skip && *skip) return;
    const AdamFactors f = adam_factors(beta1, beta2, eps);
    const float bc1 = (float)st->bc1, bc2 = (float)st->bc2;
#pragma omp parallel for schedule(dynamic, 1) if (nseg > 1)
    for (int s = 0; s < nseg; s++) {
        const size_t o = (size_t)seg[s].offset, n = (size_t)seg[s].numel;
        const float wd = seg[s].wd;
        double sp = 0.0, su = 0.0;
        for (size_t i = o; i < o + n; i++) {
            float mi = m[i], vi = v[i];
            adam_moments(&mi, &vi, g[i], &f);
            m[i] = mi;
            v[i] = vi;
            float u = lamb_u(mi, vi, p[i], bc1, bc2, f.eps, wd);
            sp += (double)p[i] * (double)p[i];
            su += (double)u * (double)u;
        }
        /* apex: ratio only when both norms are nonzero (NaN counts as nonzero) */
        float r = 1.0f;
        if (seg[s].adaptive && sp != 0.0 && su != 0.0) r = (float)(sqrt(sp) / sqrt(su));
        if (ratio) ratio[s] = r;
        const float lr_r = lr * r;
        for (size_t i = o; i < o + n; i++) {
            float u = lamb_u(m[i], v[i], p[i], bc1, bc2, f.eps, wd);
            float up = lr_r * u;
            p[i] = p[i] - up;
        }
    }
}
