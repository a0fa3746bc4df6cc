/* conv2d_im2col.cu — the patch kernel of ops/conv2d_im2col.h (the math is
 * there): a chunk of images' patches written out for one GEMM (the weight's
 * padding and the gradient's unpadding are strided copies,
 * ops/conv2d_im2col.c).
 *
 * im2col: a thread per patch row m = (n, p, q), walking j = (r S + s) C + c
 * in order with (r, s, c) stepped (no division an element) and storing 16
 * bytes (V elements) at a time, zeros past RSC and outside the image.
 * Neighbouring threads (q, q + 1) read x windows sw C elements apart, so a
 * warp's loads of one (r, s, c) fall in a few sectors; its stores are
 * 16-byte pieces of rows kp apart, which L2 merges.
 */
#include <stdint.h>

#include "conv2d_im2col.h"
#include "cuda_util.cuh"
#include "engine/error.h"

namespace {

const int IM2COL_THREADS = 256;
const unsigned IM2COL_MAX_BLOCKS = 65535;

template <typename T>
__global__ void im2col_kernel(T *__restrict__ cols, const T *__restrict__ x, int H, int W, int C,
                              int R, int S, int P, int Q, int sh, int sw, int ph, int pw, int dh,
                              int dw, int n0, int rows, int kp)
{
    constexpr int V = 16 / sizeof(T);
    const int rsc = R * S * C;
    for (int m = blockIdx.x * blockDim.x + threadIdx.x; m < rows;
         m += gridDim.x * blockDim.x) {
        const int q = m % Q, t = m / Q, p = t % P, n = n0 + t / P;
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        const T *xn = x + (size_t)n * H * W * C;
        Vec<T, V> *out = reinterpret_cast<Vec<T, V> *>(cols + (size_t)m * kp);
        int r = 0, s = 0, c = 0;   /* (r, s, c) of column j, stepped, never divided */
        for (int o = 0; o < kp / V; o++) {
            Vec<T, V> buf;
#pragma unroll
            for (int k = 0; k < V; k++) {   /* a static index: buf stays in registers */
                T v = from_f32<T>(0.0f);
                if (o * V + k < rsc) {
                    const int h = h0 + r * dh, w = w0 + s * dw;
                    if (h >= 0 && h < H && w >= 0 && w < W) v = xn[((size_t)h * W + w) * C + c];
                    if (++c == C) {
                        c = 0;
                        if (++s == S) {
                            s = 0;
                            ++r;
                        }
                    }
                }
                buf.v[k] = v;
            }
            out[o] = buf;
        }
    }
}

} // namespace

extern "C" void conv_im2col_cuda(void *cols, const void *x, DType dt, const Conv2dShape *s,
                                 int n0, int nb, int kp, cudaStream_t st)
{
    const size_t rows = (size_t)nb * s->P * s->Q;
    CT_ASSERT(rows <= 0x7fffffff && (size_t)s->N * s->H * s->W * s->C > 0,
              "conv_im2col_cuda: %zu patch rows", rows);
    CT_ASSERT(kp % 8 == 0 && kp >= s->R * s->S * s->C, "conv_im2col_cuda: kp %d", kp);
    const unsigned blocks = grid_for(rows, IM2COL_THREADS, IM2COL_MAX_BLOCKS);
    dispatch_float(dt, "conv_im2col_cuda", [&](auto tag) {
        using T = decltype(tag);
        im2col_kernel<T><<<blocks, IM2COL_THREADS, 0, st>>>(
            (T *)cols, (const T *)x, s->H, s->W, s->C, s->R, s->S, s->P, s->Q, s->stride_h,
            s->stride_w, s->pad_h, s->pad_w, s->dil_h, s->dil_w, n0, (int)rows, kp);
    });
    CUDA_CHECK_LAUNCH();
}
