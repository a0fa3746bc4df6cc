/* jpeg_gpu.cu — the two kernels of the device image path (jpeg_gpu.h):
 * decoded RGB images resampled into the output rows, and CPU-resampled u8
 * rows normalised into theirs. Both end in the same normalise-and-store,
 * x = fmaf(u, a[c], b[c]) with u the rounded u8 value, so the two paths
 * agree bit for bit on equal pixels.
 *
 * Resample: one thread per output pixel (all three channels), a block of
 * 256 threads covering 256 consecutive pixels of one image's S x S output
 * (grid: ceil(S^2 / 256) x n images), so a warp reads neighbouring source
 * pixels of one or two source row spans. Each thread evaluates
 * data/resample.h's rule directly in 2D:
 *     v = sum_y w_y sum_x w_x src[y][x] / (sum_y w_y * sum_x w_x)
 * over its row span [y0, y1) and column span [x0, x1) (rs_span; taps per
 * axis about 2 max(step, 1) + 1), weights computed on the fly (rs_weight),
 * sums in f32, then rs_round_u8. Direct 2D rather than two separable
 * passes: with a triangle filter of radius r = step every source row
 * serves about two output rows, so the separable form saves only about
 * half the taps (2 S^2 s^2 against 4 S^2 s^2 for step s) while needing a
 * [rows, S, 3] f32 scratch per image (a 375-row crop at S 224: 1 MB; 256
 * images: 258 MB) and a second launch. An ImageNet-like batch (460x375
 * sources, RandomResizedCrop boxes, S 224) is 3-5 taps per axis; a
 * 4000x3000 photo cropped whole onto 224 is ~37 per axis, ~1,400 a pixel
 * (estimated tens of microseconds for that image; such images are rare).
 * Memory: the decoded images are read through the L1/texture path
 * (const __restrict__); the output is written once, 3 values a thread.
 *
 * Planes (jpeg_gpu_set_planes): the same thread layout on a 4:2:0 image's
 * Y, Cb and Cr planes: Y filtered with the image's axes, Cb and Cr with
 * the axes at half resolution (jpeg_chroma_axis: a chroma sample sits at
 * the centre of its 2 x 2 luma block, JPEG's centred siting), each value
 * rounded only once, after JFIF's full-range conversion
 *     R = Y + 1.402 (Cr - 128)
 *     G = Y - 0.344136 (Cb - 128) - 0.714136 (Cr - 128)
 *     B = Y + 1.772 (Cb - 128)
 * At step 1 this is libjpeg's fancy upsampling then its conversion, up to
 * libjpeg's integer roundings (within 1 level, mean ~0.3 in a simulation
 * on libjpeg's own planes). When downscaling, the chroma filter has its own
 * radius at half resolution, not the luma filter applied to upsampled
 * chroma: within a few levels, more at sharp colour edges.
 *
 * Normalise: one thread per pixel of a u8 row as well.
 */
#include <stdint.h>
#include <cuda_runtime.h>

#include "train/feed/jpeg_gpu.h"
#include "engine/cuda_base.cuh"

namespace {

struct Norm {
    float a[3], b[3];
};

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ void store_pixel(T *o, float u0, float u1, float u2, const Norm &nm)
{
    o[0] = from_f32<T>(__fmaf_rn(u0, nm.a[0], nm.b[0]));
    o[1] = from_f32<T>(__fmaf_rn(u1, nm.a[1], nm.b[1]));
    o[2] = from_f32<T>(__fmaf_rn(u2, nm.a[2], nm.b[2]));
}

/* resample.h's rule on one u8 plane (pitch bytes a row), output pixel
 * (oy, kx): the weighted mean of its span; the nearest pixel of the span
 * when every weight is zero. */
__device__ __forceinline__ float plane_filter(const uint8_t *__restrict__ base, size_t pitch,
                                              RsAxis ay, RsAxis ax, int oy, int kx)
{
    float cy, cx;
    int y0, y1, x0, x1;
    rs_span(ay, oy, &cy, &y0, &y1);
    rs_span(ax, kx, &cx, &x0, &x1);
    const float ry = rs_radius(ay), rx = rs_radius(ax);
    float wxs = 0.0f;
    for (int x = x0; x < x1; x++) wxs += rs_weight(cx, rx, x);
    float s = 0.0f, wys = 0.0f;
    for (int y = y0; y < y1; y++) {
        const float wy = rs_weight(cy, ry, y);
        if (wy == 0.0f) continue;
        const uint8_t *r = base + (size_t)y * pitch;
        float h = 0.0f;
        for (int x = x0; x < x1; x++) h += rs_weight(cx, rx, x) * (float)r[x];
        s += wy * h;
        wys += wy;
    }
    const float w = wys * wxs;
    return w > 0.0f ? s / w : (float)base[(size_t)y0 * pitch + x0];
}

/* One thread per output pixel of one image (blockIdx.y): interleaved RGB
 * (PLANES false) or 4:2:0 planes (PLANES true; the top of the file). */
template <typename T, bool PLANES>
__global__ void resample_kernel(T *out, int S, const uint8_t *__restrict__ src,
                                const JpegGpuImage *__restrict__ imgs, Norm nm)
{
    const JpegGpuImage im = imgs[blockIdx.y];
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= S * S) return;
    int oy = p / S, ox = p - oy * S;
    int kx = im.flip ? S - 1 - ox : ox;          /* a flip mirrors the output columns */
    if constexpr (PLANES) {
        const int cw = (im.w + 1) / 2, ch = (im.h + 1) / 2;
        size_t ocb, ocr;
        (void)jpeg_planes_layout(im.h, im.w, &ocb, &ocr);
        const uint8_t *yp = src + im.offset, *cb = yp + ocb, *cr = yp + ocr;
        const RsAxis cay = jpeg_chroma_axis(im.ay, ch), cax = jpeg_chroma_axis(im.ax, cw);
        const float lum = plane_filter(yp, (size_t)im.w, im.ay, im.ax, oy, kx);
        const float u = plane_filter(cb, (size_t)cw, cay, cax, oy, kx) - 128.0f;
        const float v = plane_filter(cr, (size_t)cw, cay, cax, oy, kx) - 128.0f;
        T *o = out + (((size_t)im.row * S + oy) * S + ox) * 3;
        store_pixel(o, (float)rs_round_u8(lum + 1.402f * v),
                    (float)rs_round_u8(lum - 0.344136f * u - 0.714136f * v),
                    (float)rs_round_u8(lum + 1.772f * u), nm);
    } else {
        float cy, cx;
        int y0, y1, x0, x1;
        rs_span(im.ay, oy, &cy, &y0, &y1);
        rs_span(im.ax, kx, &cx, &x0, &x1);
        float ry = rs_radius(im.ay), rx = rs_radius(im.ax);
        const uint8_t *base = src + im.offset;
        size_t pitch = (size_t)im.w * 3;
        float wxs = 0.0f;
        for (int x = x0; x < x1; x++) wxs += rs_weight(cx, rx, x);
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, wys = 0.0f;
        for (int y = y0; y < y1; y++) {
            float wy = rs_weight(cy, ry, y);
            if (wy == 0.0f) continue;
            const uint8_t *r = base + (size_t)y * pitch;
            float h0 = 0.0f, h1 = 0.0f, h2 = 0.0f;
            for (int x = x0; x < x1; x++) {
                float wx = rs_weight(cx, rx, x);
                const uint8_t *q = r + 3 * x;
                h0 += wx * (float)q[0];
                h1 += wx * (float)q[1];
                h2 += wx * (float)q[2];
            }
            s0 += wy * h0;
            s1 += wy * h1;
            s2 += wy * h2;
            wys += wy;
        }
        float inv = 1.0f / (wys * wxs);
        T *o = out + (((size_t)im.row * S + oy) * S + ox) * 3;
        store_pixel(o, (float)rs_round_u8(s0 * inv), (float)rs_round_u8(s1 * inv),
                    (float)rs_round_u8(s2 * inv), nm);
    }
}

template <typename T>
__global__ void normalize_kernel(T *out, int S, const uint8_t *__restrict__ src,
                                 const int32_t *__restrict__ rows, Norm nm)
{
    int k = blockIdx.y;
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= S * S) return;
    size_t row = rows ? (size_t)rows[k] : (size_t)k;
    const uint8_t *q = src + ((size_t)k * S * S + p) * 3;
    store_pixel(out + (row * S * S + p) * 3, (float)q[0], (float)q[1], (float)q[2], nm);
}

Norm make_norm(const float a[3], const float b[3])
{
    Norm nm;
    for (int c = 0; c < 3; c++) {
        nm.a[c] = a[c];
        nm.b[c] = b[c];
    }
    return nm;
}

} // namespace

/* Either resample kernel over n images (a thread per output pixel). */
static void launch_resample(int planes, void *out, DType dt, int S, const uint8_t *src,
                            const JpegGpuImage *img, int n, const float a[3], const float b[3],
                            cudaStream_t st)
{
    if (n <= 0 || S <= 0) return;
    Norm nm = make_norm(a, b);
    dim3 grid((unsigned)((S * S + kThreads - 1) / kThreads), (unsigned)n);
    dispatch_float(dt, "jpeg_gpu_resample_cuda", [&](auto tag) {
        using T = decltype(tag);
        if (planes)
            resample_kernel<T, true><<<grid, kThreads, 0, st>>>((T *)out, S, src, img, nm);
        else
            resample_kernel<T, false><<<grid, kThreads, 0, st>>>((T *)out, S, src, img, nm);
    });
    CUDA_CHECK_LAUNCH();
}

extern "C" void jpeg_gpu_resample_cuda(void *out, DType dt, int S, const uint8_t *src,
                                       const JpegGpuImage *img, int n, const float a[3],
                                       const float b[3], cudaStream_t st)
{
    launch_resample(0, out, dt, S, src, img, n, a, b, st);
}

extern "C" void jpeg_gpu_resample_planes_cuda(void *out, DType dt, int S, const uint8_t *src,
                                              const JpegGpuImage *img, int n, const float a[3],
                                              const float b[3], cudaStream_t st)
{
    launch_resample(1, out, dt, S, src, img, n, a, b, st);
}

extern "C" void jpeg_gpu_normalize_cuda(void *out, DType dt, int S, const uint8_t *src,
                                        const int32_t *rows, int n, const float a[3],
                                        const float b[3], cudaStream_t st)
{
    if (n <= 0 || S <= 0) return;
    Norm nm = make_norm(a, b);
    dim3 grid((unsigned)((S * S + kThreads - 1) / kThreads), (unsigned)n);
    dispatch_float(dt, "jpeg_gpu_normalize_cuda", [&](auto tag) {
        using T = decltype(tag);
        normalize_kernel<T><<<grid, kThreads, 0, st>>>((T *)out, S, src, rows, nm);
    });
    CUDA_CHECK_LAUNCH();
}
