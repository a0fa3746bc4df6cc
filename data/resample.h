/* resample.h — the one resampling rule both image paths use: a source
 * window of a decoded u8 image onto S x S output pixels, with antialiasing
 * (a triangle filter widened by the downscale factor, as PIL's bilinear
 * resize does). The CPU decoder (data/image_decode.h) and the GPU decoder
 * (train/feed/jpeg_gpu.cu) compute the same taps from these functions, so a
 * sample's crop is the same on both paths; only the decoders' pixels differ.
 *
 * One axis (rows or columns) is an RsAxis {start, step, lo, hi}:
 *   output pixel k (0 <= k < S) has its center at source coordinate
 *       c_k = start + (k + 0.5) * step            (pixel j covers [j, j+1))
 *   and its value is the weighted mean of source pixels j in [lo, hi):
 *       v_k = sum_j w(j) src[j] / sum_j w(j),
 *       w(j) = max(0, 1 - |j + 0.5 - c_k| / r),   r = max(step, 1)
 *   over j in [max(lo, floor(c_k - r)), min(hi, ceil(c_k + r))).
 * For step <= 1 (upscaling) this is plain bilinear interpolation with
 * half-pixel centers; for step > 1 the filter's radius grows with the
 * downscale factor, so every source pixel in the window contributes (no
 * aliasing). Pixels outside [lo, hi) never contribute: the weights are
 * renormalised at the window's edges (PIL's convention; PyTorch's repeats
 * the edge pixel instead, a difference confined to the outermost pixel).
 * Both axes are separable: v = sum_y w_y sum_x w_x src[y][x].
 *
 * The transforms as axes (H x W source, integer crop box from augment.h):
 *   RandomResizedCrop box (top, left, h, w), rows: start = top, step = h / S,
 *     [lo, hi) = [top, top + h)  (the window is the crop: clamped to it)
 *   Resize(R) + CenterCrop(S), rows: the image scaled to H' (shorter side
 *     R), window top t = round((H' - S) / 2): start = t H / H', step = H / H',
 *     [lo, hi) = [0, H)
 *   A source decoded at 1/d (JPEG DCT scaling, H_d = ceil(H / d) pixels,
 *     decoded pixel j covering source pixels [j d, j d + d); the last block
 *     is padded by the encoder): every coordinate times 1 / d (not H_d / H,
 *     which drifts by up to half a decoded pixel at the far edge), lo
 *     rounded down and hi up, both clamped to [0, H_d) (rs_axis_scaled).
 * A horizontal flip mirrors the output: column k takes the taps of S-1-k.
 * The result is rounded to u8 (as PIL's resize does), and normalisation,
 *   x = (v / 255 - mean[c]) / std[c],
 * happens after, on the device, for both paths.
 *
 * Everything here is static inline and usable from CUDA (RS_FN adds
 * __host__ __device__), so the kernel and the C code share one definition;
 * the CPU resampler built from them, rs_resample_u8, is in resample.c.
 */
#ifndef CTRAIN_DATA_RESAMPLE_H
#define CTRAIN_DATA_RESAMPLE_H

#include <math.h>

#ifdef __CUDACC__
#define RS_FN __host__ __device__ static inline
#else
#define RS_FN static inline
#endif

typedef struct {
    float start;  /* source coordinate of output pixel 0's left (top) edge */
    float step;   /* source pixels per output pixel */
    int lo, hi;   /* source pixels [lo, hi) may contribute */
} RsAxis;

/* The axis of a RandomResizedCrop box side: box [b0, b0 + len) onto S. */
RS_FN RsAxis rs_axis_box(int b0, int len, int S)
{
    RsAxis a;
    a.start = (float)b0;
    a.step = (float)len / (float)S;
    a.lo = b0;
    a.hi = b0 + len;
    return a;
}

/* The axis of Resize + CenterCrop: a source side n scaled to n2, output
 * window [t, t + S) of the scaled side; every source pixel may contribute. */
RS_FN RsAxis rs_axis_resized(int n, int n2, int t)
{
    RsAxis a;
    a.step = (float)n / (float)n2;
    a.start = (float)t * a.step;
    a.lo = 0;
    a.hi = n;
    return a;
}

/* The same axis on the source decoded at 1/d, nd = ceil(n / d) pixels. */
RS_FN RsAxis rs_axis_scaled(RsAxis a, int d, int nd)
{
    float f = 1.0f / (float)d;
    RsAxis s;
    s.start = a.start * f;
    s.step = a.step * f;
    s.lo = (int)floorf((float)a.lo * f);
    s.hi = (int)ceilf((float)a.hi * f);
    if (s.lo < 0) s.lo = 0;
    if (s.hi > nd) s.hi = nd;
    if (s.hi <= s.lo) {        /* a window thinner than one reduced pixel */
        s.hi = s.lo + 1 <= nd ? s.lo + 1 : nd;
        s.lo = s.hi - 1;
    }
    return s;
}

/* Filter radius in source pixels. */
RS_FN float rs_radius(RsAxis a) { return a.step > 1.0f ? a.step : 1.0f; }

/* Output pixel k: its center *c and the source pixels [*j0, *j1) it reads. */
RS_FN void rs_span(RsAxis a, int k, float *c, int *j0, int *j1)
{
    float r = rs_radius(a);
    float ck = a.start + ((float)k + 0.5f) * a.step;
    int lo = (int)floorf(ck - r), hi = (int)ceilf(ck + r);
    if (lo < a.lo) lo = a.lo;
    if (hi > a.hi) hi = a.hi;
    if (hi <= lo) {            /* a center outside the window: its nearest pixel */
        lo = ck < (float)a.lo ? a.lo : a.hi - 1;
        hi = lo + 1;
    }
    *c = ck;
    *j0 = lo;
    *j1 = hi;
}

/* Unnormalised weight of source pixel j for center c and radius r. Every
 * center the transforms above make lies inside its window, so the weights
 * of a span never all vanish (the pixel holding c has weight >= 1/2). */
RS_FN float rs_weight(float c, float r, int j)
{
    float t = fabsf((float)j + 0.5f - c) / r;
    return t < 1.0f ? 1.0f - t : 0.0f;
}

/* The source pixels [*j0, *j1) that the S output pixels of axis a read:
 * the union of their spans (what a decoder must produce of that axis). */
RS_FN void rs_window(int *j0, int *j1, RsAxis a, int S)
{
    float c;
    int lo, hi, l, h;
    rs_span(a, 0, &c, &lo, &hi);
    for (int k = 1; k < S; k++) {  /* spans move monotonically; min/max anyway */
        rs_span(a, k, &c, &l, &h);
        lo = l < lo ? l : lo;
        hi = h > hi ? h : hi;
    }
    *j0 = lo;
    *j1 = hi;
}

/* A resampled value in [0, 255] rounded to u8 (half up). */
RS_FN unsigned char rs_round_u8(float v)
{
    v = v > 0.0f ? v : 0.0f;  /* two selects: maxss / minss, no branch */
    v = v < 255.0f ? v : 255.0f;
    return (unsigned char)(int)(v + 0.5f);  /* via int: vectorises */
}

#ifndef __CUDACC__
#include <stdint.h>

/* The CPU resampler (resample.c): out u8 [S, S, 3] from a window of an RGB
 * u8 source through axes ay (rows) and ax (columns), mirrored when flip.
 * win holds source rows [y0, y0 + h) and columns [x0, x0 + w) of the image
 * the axes address (row stride 3 w; the whole image: y0 = x0 = 0), and must
 * cover every tap (rs_window says which pixels those are). Separable:
 * normalised taps per axis, a horizontal pass over the needed rows, then a
 * vertical pass, in float; rs_round_u8 at the end. */
void rs_resample_u8(uint8_t *out, const uint8_t *win, RsAxis ay, RsAxis ax, int flip, int S,
                    int y0, int x0, int h, int w);

#endif

#endif
