/* attention.c — CPU reference (f32 in and out) for scaled dot-product
 * attention with an additive key mask and dropout on the probabilities;
 * ops/attention.cu holds the CUDA version (contract and math in
 * attention.h).
 *
 * Shape letters: B batch, H heads, T tokens, Dh head width; bh = b H + h
 * indexes one [T, Dh] head, rows i are queries, j keys, e head features.
 *
 *   S = scale q k^T + mask[b],  P = softmax_j(S),  Pd = keep ? P s : 0,  out = Pd v
 *
 * Each head is independent (OpenMP over bh). Dot products, the softmax and
 * every sum run in double and are rounded once. Pd is formed in f32 from
 * the stored (f32) P with the dropout kernel's formula, so the mask and the
 * scaled values are the ones ops/dropout.c would produce from P.
 */
#include "attention.h"

#include <math.h>
#include <stdlib.h>

#include "engine/error.h"
#include "dropout_mask.h"
#include "dropout.h"

/* Pd[i, j] for a head, from its stored P: kept (ops/dropout_mask.h) and
 * scaled, or 0. */
static float attn_pd(const float *P, size_t idx, float p, float s, uint64_t seed,
                     uint64_t offset)
{
    if (p == 0.0f) return P[idx];
    return drop_keep_bit(seed, offset, idx, drop_threshold(p)) ? P[idx] * s : 0.0f;
}

void attention_forward_cpu(float *out, float *probs, const float *q, const float *k,
                           const float *v, const float *mask, float p, uint64_t seed,
                           uint64_t offset, size_t B, size_t H, size_t T, size_t Dh)
{
    const double scale = 1.0 / sqrt((double)Dh);
    const float s = drop_scale(p);
    const size_t BH = B * H;
#pragma omp parallel for if (BH * T * T * Dh >= 65536)
    for (size_t bh = 0; bh < BH; bh++) {
        const float *qh = q + bh * T * Dh, *kh = k + bh * T * Dh, *vh = v + bh * T * Dh;
        const float *mb = mask ? mask + (bh / H) * T : NULL;
        float *Ph = probs + bh * T * T, *oh = out + bh * T * Dh;
        double *row = (double *)malloc((T ? T : 1) * sizeof(double));
        double *acc = (double *)malloc((Dh ? Dh : 1) * sizeof(double));
        if (!row || !acc) ct_fatal("attention_forward_cpu: out of host memory");
        for (size_t i = 0; i < T; i++) {
            /* S[i, :] and its max */
            double m = -INFINITY;
            for (size_t j = 0; j < T; j++) {
                double d = 0.0;
                for (size_t e = 0; e < Dh; e++) d += (double)qh[i * Dh + e] * kh[j * Dh + e];
                row[j] = scale * d + (mb ? (double)mb[j] : 0.0);
                if (row[j] > m) m = row[j];
            }
            /* P[i, :] = softmax; a row of -inf only (every key masked out) is 0 */
            double sum = 0.0;
            for (size_t j = 0; j < T; j++) {
                row[j] = m == -INFINITY ? 0.0 : exp(row[j] - m);
                sum += row[j];
            }
            for (size_t j = 0; j < T; j++) Ph[i * T + j] = sum > 0.0 ? (float)(row[j] / sum) : 0.0f;
            /* out[i, :] = Pd[i, :] v */
            for (size_t e = 0; e < Dh; e++) acc[e] = 0.0;
            for (size_t j = 0; j < T; j++) {
                double pd = attn_pd(probs, (bh * T + i) * T + j, p, s, seed, offset);
                if (pd == 0.0) continue;
                for (size_t e = 0; e < Dh; e++) acc[e] += pd * vh[j * Dh + e];
            }
            for (size_t e = 0; e < Dh; e++) oh[i * Dh + e] = (float)acc[e];
        }
        free(row);
        free(acc);
    }
}

static void put(float *dst, double v, int accum) { *dst = accum ? (float)(*dst + v) : (float)v; }

/* forward: S = scale q k^T + mask,  P = softmax(S),  Pd = keep ? P s : 0,  out = Pd v
 *   so dv = Pd^T dout,  dPd = dout v^T,  dP = keep ? dPd s : 0,
 *      dS = P (dP - rowsum(dP P)) = P (dP - rowsum(dPd Pd)),
 *      dq = scale dS k,  dk = scale dS^T q */
void attention_backward_cpu(float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v,
                            const float *probs, float p, uint64_t seed, uint64_t offset,
                            size_t B, size_t H, size_t T, size_t Dh, int accum_q,
                            int accum_k, int accum_v)
{
    const double scale = 1.0 / sqrt((double)Dh);
    const float s = drop_scale(p);
    const size_t BH = B * H;
#pragma omp parallel for if (BH * T * T * Dh >= 65536)
    for (size_t bh = 0; bh < BH; bh++) {
        const size_t hd = bh * T * Dh, ht = bh * T * T;
        const float *qh = q + hd, *kh = k + hd, *vh = v + hd, *doh = dout + hd;
        const float *Ph = probs + ht;
        const size_t tt = T * T > 0 ? T * T : 1;
        double *pd = (double *)malloc(tt * sizeof(double));
        double *ds = (double *)malloc(tt * sizeof(double));
        if (!pd || !ds) ct_fatal("attention_backward_cpu: out of host memory");
        for (size_t ij = 0; ij < T * T; ij++) pd[ij] = attn_pd(probs, ht + ij, p, s, seed, offset);
        /* dv[j, e] = sum_i Pd[i, j] dout[i, e] */
        if (dv)
            for (size_t j = 0; j < T; j++)
                for (size_t e = 0; e < Dh; e++) {
                    double a = 0.0;
                    for (size_t i = 0; i < T; i++) a += pd[i * T + j] * doh[i * Dh + e];
                    put(&dv[hd + j * Dh + e], a, accum_v);
                }
        /* dS[i, j] = P (keep ? dPd s : 0) - P rowsum(dPd Pd),  dPd = dout v^T */
        for (size_t i = 0; i < T; i++) {
            double rs = 0.0;
            for (size_t j = 0; j < T; j++) {
                double a = 0.0;
                for (size_t e = 0; e < Dh; e++) a += (double)doh[i * Dh + e] * vh[j * Dh + e];
                ds[i * T + j] = a; /* dPd for now */
                rs += a * pd[i * T + j];
            }
            for (size_t j = 0; j < T; j++) {
                size_t ij = i * T + j;
                int keep = p == 0.0f || drop_keep_bit(seed, offset, ht + ij, drop_threshold(p));
                double dp = keep ? ds[ij] * (double)s : 0.0;
                ds[ij] = (double)Ph[ij] * (dp - rs);
            }
        }
        /* dq[i, e] = scale sum_j dS[i, j] k[j, e];  dk[j, e] = scale sum_i dS[i, j] q[i, e] */
        if (dq)
            for (size_t i = 0; i < T; i++)
                for (size_t e = 0; e < Dh; e++) {
                    double a = 0.0;
                    for (size_t j = 0; j < T; j++) a += ds[i * T + j] * kh[j * Dh + e];
                    put(&dq[hd + i * Dh + e], scale * a, accum_q);
                }
        if (dk)
            for (size_t j = 0; j < T; j++)
                for (size_t e = 0; e < Dh; e++) {
                    double a = 0.0;
                    for (size_t i = 0; i < T; i++) a += ds[i * T + j] * qh[i * Dh + e];
                    put(&dk[hd + j * Dh + e], scale * a, accum_k);
                }
        free(pd);
        free(ds);
    }
}
