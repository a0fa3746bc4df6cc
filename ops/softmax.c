/* softmax.c — CPU references (f32 in and out) for softmax over the last dim
 * and for fused log-softmax + cross-entropy. ops/softmax.cu holds the CUDA
 * kernels with the same contract (ops/softmax.h).
 *
 * Shapes: R rows, C classes (the last dim); row r is x[r*C .. r*C + C).
 *
 * softmax:  y[r,c] = exp(x[r,c] - m_r) / sum_j exp(x[r,j] - m_r),  m_r = max_j x[r,j]
 * cross-entropy (PyTorch semantics, mean over the rows that are not ignored):
 *   lse_r = m_r + log sum_j exp(x[r,j] - m_r)            (max subtracted: no overflow)
 *   q_r = (1 - eps) onehot(t_r) + eps / C
 *   loss_r = -sum_c q_r[c] (x[r,c] - lse_r)
 *          = (1 - eps) (lse_r - x[r,t_r]) + (eps / C) sum_c (lse_r - x[r,c])
 *   loss = sum_r loss_r / nvalid            (0 when nvalid == 0)
 *
 * Sums run in double so the reference is exact to f32 output rounding.
 * lse[r] of an ignored row is written as 0: it is never read (the backward
 * writes 0 there) and the CUDA forward skips those rows entirely (in masked
 * language modelling most rows are ignored), so both sides agree.
 * A target outside [0, C) that is not ignore_index is a caller error: fatal.
 */
#include "softmax.h"

#include <math.h>
#include <stdio.h>

#include "engine/error.h"

/* m_r and log sum_j exp(x[r,j] - m_r) of one row, in double. A row of all
 * -inf gives NaN, as PyTorch does. */
static void row_stats(const float *xr, size_t C, double *m, double *logsum)
{
    double mx = -INFINITY, s = 0.0;
    for (size_t c = 0; c < C; c++)
        if (xr[c] > mx) mx = xr[c];
    for (size_t c = 0; c < C; c++) s += exp((double)xr[c] - mx);
    *m = mx;
    *logsum = log(s);
}

void softmax_forward_cpu(float *y, const float *x, size_t R, size_t C)
{
    for (size_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        double m, ls;
        row_stats(xr, C, &m, &ls);
        double lse = m + ls;
        for (size_t c = 0; c < C; c++) yr[c] = (float)exp((double)xr[c] - lse);
    }
}

/* forward: y[r,c] = exp(x[r,c]) / sum_j exp(x[r,j])
 *   so dy/dx is diag(y) - y y^T per row, and
 *   dx[r,c] = y[r,c] * (dy[r,c] - sum_j dy[r,j] y[r,j]) */
void softmax_backward_cpu(float *dx, const float *dy, const float *y, size_t R,
                          size_t C, int accum)
{
    for (size_t r = 0; r < R; r++) {
        const float *dyr = dy + r * C, *yr = y + r * C;
        float *dxr = dx + r * C;
        double dot = 0.0;
        for (size_t c = 0; c < C; c++) dot += (double)dyr[c] * yr[c];
        for (size_t c = 0; c < C; c++) {
            double g = (double)yr[c] * ((double)dyr[c] - dot);
            dxr[c] = accum ? (float)(dxr[c] + g) : (float)g;
        }
    }
}

/* Fatal error for a target the kernels cannot use. */
static void bad_target(const char *fn, size_t r, int t, size_t C, int ignore_index)
{
    char hint[256];
    snprintf(hint, sizeof hint,
             "targets must be class indices in [0, %zu) or ignore_index (%d); "
             "check that the dataset's labels match the model's number of classes",
             C, ignore_index);
    ct_fatal_hint(hint, "%s: row %zu has target %d, outside [0, C) with C = %zu", fn, r,
                  t, C);
}

void cross_entropy_forward_cpu(float *loss, float *lse, float *nvalid,
                               const float *x, const int32_t *t, size_t R, size_t C,
                               int ignore_index, float smoothing)
{
    double total = 0.0, eps = smoothing;
    size_t valid = 0;
    for (size_t r = 0; r < R; r++) {
        int tr = t[r];
        if (tr == ignore_index) { lse[r] = 0.0f; continue; }
        if (tr < 0 || (size_t)tr >= C)
            bad_target("cross_entropy_forward_cpu", r, tr, C, ignore_index);
        const float *xr = x + r * C;
        double m, ls;
        row_stats(xr, C, &m, &ls);
        double l = m + ls;
        lse[r] = (float)l;
        double nll = l - xr[tr]; /* -logp[r, t_r] */
        double smooth = 0.0;     /* sum_c -logp[r, c] */
        if (eps != 0.0)
            for (size_t c = 0; c < C; c++) smooth += l - xr[c];
        total += (1.0 - eps) * nll + eps / (double)C * smooth;
        valid++;
    }
    *loss = valid ? (float)(total / (double)valid) : 0.0f;
    *nvalid = (float)valid;
}

/* forward: loss = sum_r -sum_c q_r[c] (x[r,c] - lse_r) / nvalid,  sum_c q_r[c] = 1
 *   and d lse_r / d x[r,c] = softmax(x)[r,c], so
 *   dx[r,c] = dloss * (softmax(x)[r,c] - q_r[c]) / nvalid   (0 for ignored rows) */
void cross_entropy_backward_cpu(float *dx, const float *dloss, const float *x,
                                const float *lse, const float *nvalid,
                                const int32_t *t, size_t R, size_t C,
                                int ignore_index, float smoothing, int accum)
{
    double nv = *nvalid;
    double g = nv > 0.0 ? (double)*dloss / nv : 0.0;
    double eps = smoothing, qoff = eps / (double)C, qon = (1.0 - eps) + qoff;
    for (size_t r = 0; r < R; r++) {
        int tr = t[r];
        float *dxr = dx + r * C;
        if (tr == ignore_index) {
            if (!accum)
                for (size_t c = 0; c < C; c++) dxr[c] = 0.0f;
            continue;
        }
        if (tr < 0 || (size_t)tr >= C)
            bad_target("cross_entropy_backward_cpu", r, tr, C, ignore_index);
        const float *xr = x + r * C;
        double l = lse[r];
        for (size_t c = 0; c < C; c++) {
            double p = exp((double)xr[c] - l);
            double v = g * (p - ((size_t)tr == c ? qon : qoff));
            dxr[c] = accum ? (float)(dxr[c] + v) : (float)v;
        }
    }
}
