/* conv2d_im2col.c — the host half of ops/conv2d_im2col.h: chunks of whole
 * images through the patch kernel and cuBLASLt (ops/matmul.h), the buffers
 * from the context's allocator. The math and the contract are in the
 * header.
 */
#include "conv2d_im2col.h"

#ifdef CTRAIN_CUDA
#include "engine/error.h"
#include "engine/kernels.h"
#include "engine/mem.h"
#include "matmul.h"

void conv_pad_cols_cuda(Ctx *c, void *dst, const void *src, size_t rows, int C, int Cp,
                        size_t es)
{
    CUDA_CHECK(cudaMemsetAsync(dst, 0, rows * (size_t)Cp * es, c->stream));
    CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)Cp * es, src, (size_t)C * es, (size_t)C * es, rows,
                                 cudaMemcpyDeviceToDevice, c->stream));
}

void conv_unpad_cols_cuda(Ctx *c, void *dst, const void *src, size_t rows, int C, int Cp,
                          size_t es)
{
    CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)C * es, src, (size_t)Cp * es, (size_t)C * es, rows,
                                 cudaMemcpyDeviceToDevice, c->stream));
}

int conv2d_im2col_applies(const Conv2dShape *s, DType dt)
{
    return (dt == DT_F16 || dt == DT_BF16 || dt == DT_F32) && s->C <= 4 &&
           (size_t)s->R * s->S * s->C <= 4096;
}

/* kp: the window rounded up to 16-byte rows */
static int im2col_kp(const Conv2dShape *s) { return (s->R * s->S * s->C + 7) / 8 * 8; }

static size_t chunk_bytes;   /* conv2d_im2col_set_chunk_bytes; 0: the default */

void conv2d_im2col_set_chunk_bytes(size_t bytes) { chunk_bytes = bytes; }

/* Images a chunk: cols of at most CONV_IM2COL_CHUNK_BYTES, at least one image. */
static int im2col_chunk(const Conv2dShape *s, DType dt, int kp)
{
    const size_t img = (size_t)s->P * s->Q * kp * dtype_size(dt);
    size_t nb = (chunk_bytes ? chunk_bytes : CONV_IM2COL_CHUNK_BYTES) / img;
    if (nb < 1) nb = 1;
    if (nb > (size_t)s->N) nb = (size_t)s->N;
    return (int)nb;
}

static void gemm(Ctx *c, void *C, DType tc, const void *A, const void *B, DType tab, int M, int N,
                 int K, int ta, int tb, float beta)
{
    matmul_cuda(c->lt, matmul_plan_cache_get(c), c->workspace, c->workspace_bytes, c->stream, C,
                tc, A, B, tab, M, N, K, ta, tb, 1.0f, beta, 1, 0, 0, 0, c->allow_tf32, NULL);
}

/* y[M, K] = cols[M, kp] wp[K, kp]^T, chunk by chunk of images */
void conv2d_im2col_forward(Ctx *c, void *y, const void *x, const void *w, DType dt,
                           const Conv2dShape *s)
{
    const int kp = im2col_kp(s), rsc = s->R * s->S * s->C, nb = im2col_chunk(s, dt, kp);
    const size_t es = dtype_size(dt), pq = (size_t)s->P * s->Q;
    const size_t wp_bytes = (size_t)s->K * kp * es, cols_bytes = (size_t)nb * pq * kp * es;
    void *wp = mem_alloc(c, wp_bytes), *cols = mem_alloc(c, cols_bytes);
    conv_pad_cols_cuda(c, wp, w, (size_t)s->K, rsc, kp, es);
    for (int n0 = 0; n0 < s->N; n0 += nb) {
        const int n = s->N - n0 < nb ? s->N - n0 : nb;
        conv_im2col_cuda(cols, x, dt, s, n0, n, kp, c->stream);
        gemm(c, (char *)y + (size_t)n0 * pq * s->K * es, dt, cols, wp, dt, (int)(n * pq), s->K,
             kp, 0, 1, 0.0f);
    }
    mem_free(c, cols, cols_bytes);
    mem_free(c, wp, wp_bytes);
}

/* g[K, kp] = sum over the chunks, in order, of dy[M, K]^T cols[M, kp] (f32);
 * then dw (+)= its first rsc columns (packed, then cast-added) */
void conv2d_im2col_backward_filter(Ctx *c, void *dw, DType tdw, const void *dy, const void *x,
                                   DType dt, const Conv2dShape *s, int accum)
{
    const int kp = im2col_kp(s), rsc = s->R * s->S * s->C, nb = im2col_chunk(s, dt, kp);
    const size_t es = dtype_size(dt), pq = (size_t)s->P * s->Q;
    const size_t g_bytes = (size_t)s->K * kp * sizeof(float), nw = (size_t)s->K * rsc;
    const size_t cols_bytes = (size_t)nb * pq * kp * es;
    float *g = (float *)mem_alloc(c, g_bytes);
    void *cols = mem_alloc(c, cols_bytes);
    for (int n0 = 0; n0 < s->N; n0 += nb) {
        const int n = s->N - n0 < nb ? s->N - n0 : nb;
        conv_im2col_cuda(cols, x, dt, s, n0, n, kp, c->stream);
        gemm(c, g, DT_F32, (const char *)dy + (size_t)n0 * pq * s->K * es, cols, dt, s->K, kp,
             (int)(n * pq), 1, 0, n0 > 0 ? 1.0f : 0.0f);
    }
    mem_free(c, cols, cols_bytes);
    float *gw = (float *)mem_alloc(c, nw * sizeof(float));
    conv_unpad_cols_cuda(c, gw, g, (size_t)s->K, rsc, kp, sizeof(float));
    cast_cuda(dw, tdw, gw, DT_F32, nw, accum, c->stream);
    mem_free(c, gw, nw * sizeof(float));
    mem_free(c, g, g_bytes);
}
#else
typedef int ct_conv2d_im2col_unused_; /* ISO C forbids an empty translation unit */
#endif
