/* resample.c — the CPU implementation of resample.h's rule: a window of an
 * RGB u8 image onto S x S u8 pixels, antialiased, in two separable passes.
 *
 *   taps per axis: output k reads source pixels [j0_k, j0_k + n_k) (rs_span)
 *     with weights w_kj = rs_weight(c_k, r, j) / sum_j rs_weight(c_k, r, j)
 *   per output row ky:
 *   vertical:    t[x] = sum_j wy_ky,j src[j][x]  over the columns x the
 *                horizontal taps read (rs_window): contiguous, vectorisable
 *   horizontal:  out[ky][kx] = rs_round_u8(sum_i wx_kx',i t[i]), kx' = S-1-kx
 *                when flipped (column k takes the taps of S-1-k), else kx
 * Vertical first: the gathering (horizontal) pass then runs on S rows, not
 * on every source row of the window (fewer for any downscale; measured
 * 1.6x faster on RandomResizedCrop boxes of 460 x 375 images).
 * Weights are normalised per output pixel, so the two passes together give
 * sum_y sum_x wy wx src / (sum wy sum wx), resample.h's formula; all math in
 * float (the GPU kernel's precision; tests compare with a double evaluation
 * of the formula: at most 1 level apart).
 *
 * Shape letters: S output side, h w the window's rows and columns.
 *
 * Two builds of rs_resample_u8 on x86-64: the baseline's (SSE2, what the
 * portable binary assumes) and an AVX2 one, the loader picking the one the
 * CPU runs (GCC / clang function multiversioning: target_clones, an ifunc
 * resolved once; `flatten` puts the passes inside each build). The vector
 * loops are the same code at twice the width and no sum changes its order
 * (no float contraction in C11 mode), so both give the same bits: checked on
 * 6,006 resamples (RandomResizedCrop boxes with flips at S 224 and 37, an
 * upscale, resize + center crop). Measured on the 2-core CI machine: a
 * 460 x 375 RandomResizedCrop onto 224 took 0.305 ms, 0.215 ms with AVX2
 * (1.42x; the decode of the same JPEG 0.25 ms), 0.161 ms with the
 * horizontal pass on vectors of a pixel's channels. Left out under the
 * sanitizers (their runtime starts after ifunc resolvers run).
 */
#include "resample.h"

#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RS_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define RS_NO_CLONES 1
#endif
#endif
#ifndef RS_NO_CLONES
#define RS_CLONES __attribute__((target_clones("avx2", "default"), flatten))
#endif
#endif
#ifndef RS_CLONES
#define RS_CLONES
#endif

typedef struct {
    int *j0;         /* [S] first source pixel of output k */
    float *w;        /* [S * T] normalised weights, zero-padded */
    int T;           /* taps per output, the same for all (padding) */
} Taps;

static void taps_free(Taps *t)
{
    free(t->j0);
    free(t->w);
}

/* Output k's taps, padded with zero weights to one count T for the axis
 * (and shifted inside the window the axis reads), so the inner loops have
 * a fixed trip count; a zero term leaves every float sum unchanged. */
static void taps_make(Taps *t, RsAxis a, int S)
{
    const float r = rs_radius(a);
    const int bound = (int)ceilf(2.0f * r) + 2;  /* ceil(c + r) - floor(c - r) <= 2r + 2 */
    int wlo, whi;
    rs_window(&wlo, &whi, a, S);
    t->j0 = malloc(sizeof(int) * (size_t)S);
    t->w = calloc((size_t)S * (size_t)bound, sizeof(float));
    float *tmp = malloc(sizeof(float) * (size_t)bound);
    int *n = malloc(sizeof(int) * (size_t)S);
    if (!t->j0 || !t->w || !tmp || !n) ct_fatal("rs_resample_u8: out of memory (%d taps)", S);
    t->T = 1;
    for (int k = 0; k < S; k++) {
        float c;
        int j0, j1;
        rs_span(a, k, &c, &j0, &j1);
        n[k] = j1 - j0;
        t->j0[k] = j0;
        t->T = n[k] > t->T ? n[k] : t->T;
    }
    CT_ASSERT(t->T <= bound && t->T <= whi - wlo, "rs_resample_u8: %d taps, bound %d, window "
              "%d", t->T, bound, whi - wlo);
    for (int k = 0; k < S; k++) {
        float c;
        int j0, j1;
        rs_span(a, k, &c, &j0, &j1);
        float sum = 0.0f;
        for (int j = j0; j < j1; j++) sum += tmp[j - j0] = rs_weight(c, r, j);
        if (sum <= 0.0f) {  /* a center outside its window: rs_span gave the nearest pixel */
            for (int j = j0; j < j1; j++) tmp[j - j0] = 1.0f;
            sum = (float)(j1 - j0);
        }
        int p0 = j0 + t->T <= whi ? j0 : whi - t->T;  /* padded run [p0, p0 + T) */
        float *w = t->w + (size_t)k * t->T;
        for (int j = j0; j < j1; j++) w[j - p0] = tmp[j - j0] / sum;
        t->j0[k] = p0;
    }
    free(tmp);
    free(n);
}

/* t[x] = sum_j wk_j src[j * stride + x] for x < cols: taps outer, two rows
 * at a time, so t is read and written T / 2 times, not T. */
static void vpass(float *restrict t, const uint8_t *restrict src, const float *wk,
                  size_t stride, int cols, int T)
{
    int j;
    if (T >= 2) {
        const float w0 = wk[0], w1 = wk[1];
        const uint8_t *r0 = src, *r1 = src + stride;
        for (int k = 0; k < cols; k++) t[k] = w0 * r0[k] + w1 * r1[k];
        j = 2;
    } else {
        for (int k = 0; k < cols; k++) t[k] = wk[0] * src[k];
        j = 1;
    }
    for (; j + 1 < T; j += 2) {
        const float w0 = wk[j], w1 = wk[j + 1];
        const uint8_t *r0 = src + (size_t)j * stride, *r1 = r0 + stride;
        for (int k = 0; k < cols; k++) t[k] += w0 * r0[k] + w1 * r1[k];
    }
    if (j < T) {
        const float w0 = wk[j];
        const uint8_t *r0 = src + (size_t)j * stride;
        for (int k = 0; k < cols; k++) t[k] += w0 * r0[k];
    }
}

/* acc[kx] (3 channels) = sum_i wx_k,i t[j0_k + i], k the taps of column kx.
 * A pixel's three channels go as one 4-lane vector (GCC / clang vector
 * extensions): each tap one multiply and one add for all three, each
 * channel's sum in the same order as three scalar sums, so the same bits.
 * The fourth lane reads the next float (the next pixel's first channel, or
 * acc[0] just after t: zeroed at first, then a finite sum) and is written
 * over by the next pixel's store; acc has one float of room after its last
 * pixel. (The tree is GCC / clang C: engine/error.h's attributes,
 * target_clones above.) */
typedef float RsV4 __attribute__((vector_size(16)));

static inline void hpass(float *restrict acc, const float *restrict t, const Taps *tx, int x0,
                         int flip, int S, const int T)
{
    for (int kx = 0; kx < S; kx++) {
        const int k = flip ? S - 1 - kx : kx;
        const float *wx = tx->w + (size_t)k * T;
        const float *p = t + (size_t)(tx->j0[k] - x0) * 3;
        RsV4 a = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int i = 0; i < T; i++) {
            RsV4 v;
            memcpy(&v, p + 3 * i, sizeof v);
            a += wx[i] * v;
        }
        memcpy(acc + 3 * kx, &a, sizeof a);
    }
}

RS_CLONES void rs_resample_u8(uint8_t *out, const uint8_t *win, RsAxis ay, RsAxis ax, int flip,
                              int S, int y0, int x0, int h, int w)
{
    CT_ASSERT(out && win && S > 0 && h > 0 && w > 0, "rs_resample_u8: S %d window %d x %d",
              S, h, w);
    int ry0, ry1, rx0, rx1;
    rs_window(&ry0, &ry1, ay, S);
    rs_window(&rx0, &rx1, ax, S);
    CT_ASSERT(ry0 >= y0 && ry1 <= y0 + h && rx0 >= x0 && rx1 <= x0 + w,
              "rs_resample_u8: taps read rows [%d, %d) columns [%d, %d), the window holds "
              "rows [%d, %d) columns [%d, %d)", ry0, ry1, rx0, rx1, y0, y0 + h, x0, x0 + w);
    Taps ty, tx;
    taps_make(&ty, ay, S);
    taps_make(&tx, ax, S);
    const int cols = (rx1 - rx0) * 3;  /* the columns the horizontal taps read */
    /* t, then acc; zeroed: hpass's fourth lane reads the float after t (acc[0]) */
    float *t = calloc((size_t)cols + (size_t)S * 3 + 1, sizeof(float)), *acc = t + cols;
    if (!t) ct_fatal("rs_resample_u8: out of memory (%d columns)", cols);
    for (int ky = 0; ky < S; ky++) {
        /* vertical: t[x] = sum_j wy_j src[j][x], contiguous along x */
        const float *wk = ty.w + (size_t)ky * ty.T;
        const uint8_t *src = win + ((size_t)(ty.j0[ky] - y0) * w + (size_t)(rx0 - x0)) * 3;
        vpass(t, src, wk, (size_t)w * 3, cols, ty.T);
        /* horizontal, the taps of S-1-kx when flipped; a fixed T unrolls */
        switch (tx.T) {
        case 1: hpass(acc, t, &tx, rx0, flip, S, 1); break;
        case 2: hpass(acc, t, &tx, rx0, flip, S, 2); break;
        case 3: hpass(acc, t, &tx, rx0, flip, S, 3); break;
        case 4: hpass(acc, t, &tx, rx0, flip, S, 4); break;
        case 5: hpass(acc, t, &tx, rx0, flip, S, 5); break;
        case 6: hpass(acc, t, &tx, rx0, flip, S, 6); break;
        default: hpass(acc, t, &tx, rx0, flip, S, tx.T); break;
        }
        uint8_t *o = out + (size_t)ky * S * 3;  /* a separate loop: it vectorises */
        for (int k = 0; k < 3 * S; k++) o[k] = rs_round_u8(acc[k]);
    }
    free(t);
    taps_free(&ty);
    taps_free(&tx);
}
