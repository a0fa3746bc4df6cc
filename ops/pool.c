/* pool.c — CPU references (f32) for 2-D max pooling and global average
 * pooling over NHWC images; ops/pool.cu holds the CUDA kernels with the same
 * contract and ops/pool.h the math.
 *
 * Shape letters: x [N, H, W, C], max pool output [N, P, Q, C], kernel k,
 * stride s, padding pad; HW = H * W.
 *
 * Loops keep the channel innermost (contiguous in NHWC) and apply the window
 * order per channel, so the tie and NaN rules and the backward summation
 * order are exactly those of the CUDA kernels: f32 results agree bit for bit.
 */
#include "pool.h"

#include <math.h>
#include <stdlib.h>

#include "engine/error.h"

int pool_out_size(int H, int k, int s, int pad)
{
    int span = H + 2 * pad - k;
    return span < 0 || s < 1 ? 0 : span / s + 1;
}

int maxpool_code_bytes(int k)
{
    return k <= 16 ? 1 : 4;
}

/* the code at o: u8 (wide 0) or i32 (wide 1) */
static inline int code_at(const void *code, size_t o, int wide)
{
    return wide ? ((const int32_t *)code)[o] : ((const uint8_t *)code)[o];
}

static inline void code_put(void *code, size_t o, int wide, int v)
{
    if (wide)
        ((int32_t *)code)[o] = v;
    else
        ((uint8_t *)code)[o] = (uint8_t)v;
}

/* y = max over the window (first maximum in window order; NaN wins), code =
 * i k + j, the winner's place in the window */
void maxpool2d_forward_cpu(float *y, void *code, const float *x, int k, int s, int pad, int N,
                           int H, int W, int C)
{
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    const int wide = maxpool_code_bytes(k) == 4;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)N * P * Q * C > 65536)
    for (int n = 0; n < N; n++)
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++) {
                int h0 = p * s - pad, w0 = q * s - pad;
                int hs = h0 > 0 ? h0 : 0, he = h0 + k < H ? h0 + k : H;
                int ws = w0 > 0 ? w0 : 0, we = w0 + k < W ? w0 + k : W;
                size_t o = (((size_t)n * P + p) * Q + q) * C;
                float *yo = y + o;
                for (int c = 0; c < C; c++) yo[c] = -INFINITY;
                const int first = (hs - h0) * k + ws - w0;
                if (code)
                    for (int c = 0; c < C; c++) code_put(code, o + c, wide, first);
                for (int h = hs; h < he; h++)
                    for (int w = ws; w < we; w++) {
                        const float *xp = x + (((size_t)n * H + h) * W + w) * C;
                        for (int c = 0; c < C; c++) {
                            float v = xp[c];
                            if (v > yo[c] || isnan(v)) {
                                yo[c] = v;
                                if (code) code_put(code, o + c, wide, (h - h0) * k + w - w0);
                            }
                        }
                    }
            }
}

/* forward: y[n,p,q,c] = x[n, p s - pad + code / k, q s - pad + code % k, c]
 *   so dx[n,h,w,c] (+)= sum over windows holding (h, w) whose code names it
 *   of dy[n,p,q,c], gathered in p, then q order */
void maxpool2d_backward_cpu(float *dx, const float *dy, const void *code, int k, int s,
                            int pad, int N, int H, int W, int C, int accum)
{
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    const int wide = maxpool_code_bytes(k) == 4;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)N * H * W * C > 65536)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                /* windows p with p s - pad <= h <= p s - pad + k - 1 */
                int p0 = h + pad < k ? 0 : (h + pad - k) / s + 1;
                int p1 = (h + pad) / s < P - 1 ? (h + pad) / s : P - 1;
                int q0 = w + pad < k ? 0 : (w + pad - k) / s + 1;
                int q1 = (w + pad) / s < Q - 1 ? (w + pad) / s : Q - 1;
                float *dxp = dx + (((size_t)n * H + h) * W + w) * C;
                for (int c = 0; c < C; c++) {
                    float sum = 0.0f;
                    for (int p = p0; p <= p1; p++)
                        for (int q = q0; q <= q1; q++) {
                            size_t o = (((size_t)n * P + p) * Q + q) * C + c;
                            int self = (h - (p * s - pad)) * k + w - (q * s - pad);
                            if (code_at(code, o, wide) == self) sum += dy[o];
                        }
                    dxp[c] = accum ? dxp[c] + sum : sum;
                }
            }
}

/* y[n,c] = (1/HW) sum_r x[n,r,c], summed in double */
void avgpool_global_forward_cpu(float *y, const float *x, int N, int HW, int C)
{
    double *acc = malloc(((size_t)C ? (size_t)C : 1) * sizeof(double));
    if (!acc) ct_fatal("out of host memory for average pooling");
    for (int n = 0; n < N; n++) {
        for (int c = 0; c < C; c++) acc[c] = 0.0;
        for (int r = 0; r < HW; r++) {
            const float *xr = x + ((size_t)n * HW + r) * C;
            for (int c = 0; c < C; c++) acc[c] += xr[c];
        }
        for (int c = 0; c < C; c++) y[(size_t)n * C + c] = (float)(acc[c] / HW);
    }
    free(acc);
}

/* forward: y[n,c] = (1/HW) sum_r x[n,r,c]   so   dx[n,r,c] (+)= dy[n,c] / HW */
void avgpool_global_backward_cpu(float *dx, const float *dy, int N, int HW, int C, int accum)
{
    float fhw = (float)HW;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)N * HW * C > 65536)
    for (int n = 0; n < N; n++)
        for (int r = 0; r < HW; r++) {
            float *dxr = dx + ((size_t)n * HW + r) * C;
            const float *dyn = dy + (size_t)n * C;
            for (int c = 0; c < C; c++) {
                float v = dyn[c] / fhw;
                dxr[c] = accum ? dxr[c] + v : v;
            }
        }
}
