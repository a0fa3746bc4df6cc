/* conv2d.c — the CPU reference of conv2d.h: im2col + one matmul per chunk.
 *
 * Shape letters: N batch, H W input size, C input channels, K filters,
 * R S filter size, P Q output size.
 *
 * im2col lays out, for every output pixel (n, p, q), the R*S*C input values
 * its filter window covers as one row of `cols` (zeros where the window
 * hangs over the padding). Column (r, s, c) of that row matches element
 * [k, r, s, c] of the OHWI weight, so the whole convolution is one matmul:
 *
 *   forward:          y[NPQ, K]     = cols[NPQ, RSC] @ w[K, RSC]^T
 *   backward filter:  dw[K, RSC]   += dy[NPQ, K]^T  @ cols[NPQ, RSC]
 *   backward data:    dcols[NPQ, RSC] = dy[NPQ, K] @ w[K, RSC]
 *                     dx = col2im(dcols): every input pixel sums the dcols
 *                     entries of the windows that read it.
 * col2im is written as a gather (each input pixel collects from the output
 * pixels whose window covers it), so it parallelises over input pixels with
 * no two threads writing the same element.
 *
 * A 1x1, stride-1, unpadded convolution (ResNet's bottleneck ends) is
 * already a matmul of x [NHW, C] itself: no im2col, no col2im.
 * Other shapes go through the batch in chunks of whole images, so the
 * cols buffer stays at most CONV2D_CPU_COL_BYTES (one image, if larger).
 */
#include "conv2d.h"

#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "matmul.h"

/* Below this many elements the OpenMP fork costs more than the loop. */
#define CONV_OMP_MIN ((long long)1 << 15)

Conv2dShape conv2d_shape(int N, int H, int W, int C, int K, int R, int S, int stride_h,
                         int stride_w, int pad_h, int pad_w, int dil_h, int dil_w)
{
    if (N < 1 || H < 1 || W < 1 || C < 1 || K < 1 || R < 1 || S < 1)
        ct_fatal("conv2d: sizes must be positive: input [%d, %d, %d, %d], filter [%d, %d, %d, %d]",
                 N, H, W, C, K, R, S, C);
    if (stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 || pad_h < 0 || pad_w < 0)
        ct_fatal("conv2d: stride %dx%d and dilation %dx%d must be >= 1, padding %dx%d >= 0",
                 stride_h, stride_w, dil_h, dil_w, pad_h, pad_w);
    long long eh = (long long)dil_h * (R - 1) + 1, ew = (long long)dil_w * (S - 1) + 1;
    long long hp = (long long)H + 2LL * pad_h, wp = (long long)W + 2LL * pad_w;
    if (hp < eh || wp < ew)
        ct_fatal_hint("use larger input images (every stride-2 stage halves them) or more padding",
                      "conv2d: a %dx%d filter (dilation %dx%d, spanning %lldx%lld) does not fit "
                      "the %dx%d input padded by %dx%d: the output would be empty",
                      R, S, dil_h, dil_w, eh, ew, H, W, pad_h, pad_w);
    Conv2dShape s = {N, H, W, C, K, R, S, 0, 0, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w};
    s.P = (int)((hp - eh) / stride_h + 1);
    s.Q = (int)((wp - ew) / stride_w + 1);
    if ((long long)N * s.P * s.Q > 0x7fffffffLL || (long long)N * H * W > 0x7fffffffLL)
        ct_fatal_hint("use a smaller batch", "conv2d: batch %d of %dx%d images is too large "
                      "(more than 2^31 pixels)", N, H, W);
    return s;
}

/* 1x1, stride 1, no padding: cols would equal x. */
static int conv_is_pointwise(const Conv2dShape *s)
{
    return s->R == 1 && s->S == 1 && s->stride_h == 1 && s->stride_w == 1 && s->pad_h == 0 &&
           s->pad_w == 0;
}

/* Whole images per chunk so that the cols buffer fits the budget. */
static int conv_chunk_images(const Conv2dShape *s)
{
    size_t per_image = (size_t)s->P * s->Q * s->R * s->S * s->C * sizeof(float);
    size_t nb = CONV2D_CPU_COL_BYTES / per_image;
    if (nb < 1) nb = 1;
    if (nb > (size_t)s->N) nb = (size_t)s->N;
    return (int)nb;
}

static float *conv_cols_alloc(const Conv2dShape *s, int nb)
{
    size_t n = (size_t)nb * s->P * s->Q * s->R * s->S * s->C;
    float *p = (float *)malloc(n * sizeof(float));
    if (!p) ct_fatal("conv2d: out of host memory for a %zu-byte im2col buffer", n * sizeof(float));
    return p;
}

/* cols[(i*P + p)*Q + q, (r*S + s)*C + c] = x[n0 + i, h, w, c] with
 * h = p*stride_h - pad_h + r*dil_h, w likewise (0 outside the image). */
static void conv_im2col(float *cols, const float *x, const Conv2dShape *s, int n0, int nb)
{
    const int P = s->P, Q = s->Q, C = s->C;
    const size_t RSC = (size_t)s->R * s->S * C;
    const long long rows = (long long)nb * P * Q;
#pragma omp parallel for if (rows * (long long)RSC >= CONV_OMP_MIN)
    for (long long row = 0; row < rows; row++) {
        int q = (int)(row % Q), p = (int)((row / Q) % P);
        long long n = n0 + row / ((long long)P * Q);
        float *dst = cols + (size_t)row * RSC;
        for (int r = 0; r < s->R; r++) {
            int h = p * s->stride_h - s->pad_h + r * s->dil_h;
            for (int t = 0; t < s->S; t++) {
                int w = q * s->stride_w - s->pad_w + t * s->dil_w;
                float *d = dst + ((size_t)r * s->S + t) * C;
                if (h < 0 || h >= s->H || w < 0 || w >= s->W)
                    memset(d, 0, (size_t)C * sizeof(float));
                else
                    memcpy(d, x + (((size_t)n * s->H + h) * s->W + w) * C,
                           (size_t)C * sizeof(float));
            }
        }
    }
}

/* dx[n0 + i, h, w, c] (+)= sum over the windows covering (h, w) of
 * dcols[(i*P + p)*Q + q, (r*S + s)*C + c], where h = p*stride_h - pad_h +
 * r*dil_h, i.e. p = (h + pad_h - r*dil_h) / stride_h when that divides. */
static void conv_col2im(float *dx, const float *dcols, const Conv2dShape *s, int n0, int nb,
                        int accum)
{
    const int H = s->H, W = s->W, C = s->C, P = s->P, Q = s->Q;
    const size_t RSC = (size_t)s->R * s->S * C;
    const long long nh = (long long)nb * H;
#pragma omp parallel for if (nh * W * C >= CONV_OMP_MIN)
    for (long long ih = 0; ih < nh; ih++) {
        int i = (int)(ih / H), h = (int)(ih % H);
        for (int w = 0; w < W; w++) {
            float *d = dx + (((size_t)(n0 + i) * H + h) * W + w) * C;
            if (!accum) memset(d, 0, (size_t)C * sizeof(float));
            for (int r = 0; r < s->R; r++) {
                int hp = h + s->pad_h - r * s->dil_h;
                if (hp < 0 || hp % s->stride_h) continue;
                int p = hp / s->stride_h;
                if (p >= P) continue;
                for (int t = 0; t < s->S; t++) {
                    int wp = w + s->pad_w - t * s->dil_w;
                    if (wp < 0 || wp % s->stride_w) continue;
                    int q = wp / s->stride_w;
                    if (q >= Q) continue;
                    const float *src = dcols + (((size_t)i * P + p) * Q + q) * RSC +
                                       ((size_t)r * s->S + t) * C;
                    for (int c = 0; c < C; c++) d[c] += src[c];
                }
            }
        }
    }
}

/* forward: y[NPQ, K] = cols[NPQ, RSC] @ w[K, RSC]^T */
void conv2d_forward_cpu(float *y, const float *x, const float *w, const Conv2dShape *s)
{
    const int PQ = s->P * s->Q, RSC = s->R * s->S * s->C;
    if (conv_is_pointwise(s)) {
        matmul_cpu(y, x, w, s->N * PQ, s->K, s->C, 0, 1, 1.0f, 0.0f, 1, 0, 0, 0);
        return;
    }
    int nb = conv_chunk_images(s);
    float *cols = conv_cols_alloc(s, nb);
    for (int n0 = 0; n0 < s->N; n0 += nb) {
        int m = s->N - n0 < nb ? s->N - n0 : nb;
        conv_im2col(cols, x, s, n0, m);
        matmul_cpu(y + (size_t)n0 * PQ * s->K, cols, w, m * PQ, s->K, RSC, 0, 1, 1.0f, 0.0f, 1,
                   0, 0, 0);
    }
    free(cols);
}

/* forward: y = cols(x) @ w^T   so   dcols = dy @ w,   dx (+)= col2im(dcols) */
void conv2d_backward_data_cpu(float *dx, const float *dy, const float *w,
                              const Conv2dShape *s, int accum)
{
    const int PQ = s->P * s->Q, RSC = s->R * s->S * s->C;
    if (conv_is_pointwise(s)) {
        matmul_cpu(dx, dy, w, s->N * PQ, s->C, s->K, 0, 0, 1.0f, accum ? 1.0f : 0.0f, 1, 0, 0,
                   0);
        return;
    }
    int nb = conv_chunk_images(s);
    float *dcols = conv_cols_alloc(s, nb);
    for (int n0 = 0; n0 < s->N; n0 += nb) {
        int m = s->N - n0 < nb ? s->N - n0 : nb;
        matmul_cpu(dcols, dy + (size_t)n0 * PQ * s->K, w, m * PQ, RSC, s->K, 0, 0, 1.0f, 0.0f,
                   1, 0, 0, 0);
        conv_col2im(dx, dcols, s, n0, m, accum);
    }
    free(dcols);
}

/* forward: y = cols(x) @ w^T   so   dw (+)= dy^T @ cols(x), summed over chunks */
void conv2d_backward_filter_cpu(float *dw, const float *dy, const float *x,
                                const Conv2dShape *s, int accum)
{
    const int PQ = s->P * s->Q, RSC = s->R * s->S * s->C;
    if (conv_is_pointwise(s)) {
        matmul_cpu(dw, dy, x, s->K, s->C, s->N * PQ, 1, 0, 1.0f, accum ? 1.0f : 0.0f, 1, 0, 0,
                   0);
        return;
    }
    if (s->N == 0) {   /* an empty batch: dw written as zeros, or left as it is */
        if (!accum) memset(dw, 0, (size_t)s->K * RSC * sizeof(float));
        return;
    }
    int nb = conv_chunk_images(s);
    float *cols = conv_cols_alloc(s, nb);
    for (int n0 = 0; n0 < s->N; n0 += nb) {
        int m = s->N - n0 < nb ? s->N - n0 : nb;
        conv_im2col(cols, x, s, n0, m);
        matmul_cpu(dw, dy + (size_t)n0 * PQ * s->K, cols, s->K, RSC, m * PQ, 1, 0, 1.0f,
                   (accum || n0 > 0) ? 1.0f : 0.0f, 1, 0, 0, 0);
    }
    free(cols);
}
