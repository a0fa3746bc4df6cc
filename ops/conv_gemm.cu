/* conv_gemm.cu — the strided copies around a 1 x 1 convolution's GEMMs
 * (ops/conv_gemm.h): the input pixels a stride-s filter visits gathered into
 * rows, and the data gradient's rows scattered back onto that grid.
 *
 *   gather    xs[n, p, q, :] = x[n, p sh, q sw, :]
 *   scatter   dx[n, h, w, :] = dxs[n, h / sh, w / sw, :]  if sh | h and sw | w, else 0
 *   add       dx[n, p sh, q sw, :] += dxs[n, p, q, :]     (other pixels untouched; dxs f32)
 *
 * A copy moves whole rows, so it goes in the widest unit (16, 8, 4 or 2
 * bytes) that divides a row and both pointers' alignment; grid-stride loops
 * over units, consecutive threads on consecutive units of a row (coalesced).
 * The add reads dxs in f32 (the GEMM's unrounded result), sums in f32 and
 * rounds once to the storage type.
 */
#include "conv_gemm.h"
#include "cuda_util.cuh"

namespace {

constexpr int THREADS = 256;
constexpr unsigned MAX_BLOCKS = 132 * 16;

/* Output pixel r = (n, p, q) of an [N, P, Q] grid -> its input pixel. */
__device__ __forceinline__ size_t input_row(size_t r, int H, int W, int P, int Q, int sh, int sw)
{
    const size_t pq = (size_t)P * Q, n = r / pq, rem = r - n * pq;
    const int p = (int)(rem / Q), q = (int)(rem - (size_t)p * Q);
    return (n * H + (size_t)p * sh) * W + (size_t)q * sw;
}

template <typename U>
__global__ void gather_kernel(U *xs, const U *x, size_t rows, int upr, int H, int W, int P, int Q,
                              int sh, int sw)
{
    const size_t n = rows * upr;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / upr, j = i - r * upr;
        xs[i] = x[input_row(r, H, W, P, Q, sh, sw) * upr + j];
    }
}

template <typename U>
__global__ void scatter_kernel(U *dx, const U *dxs, size_t rows, int upr, int H, int W, int P,
                               int Q, int sh, int sw)
{
    const size_t n = rows * upr, hw = (size_t)H * W;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / upr, j = i - r * upr, img = r / hw, rem = r - img * hw;
        const int h = (int)(rem / W), w = (int)(rem - (size_t)h * W);
        U v{};
        if (h % sh == 0 && w % sw == 0) v = dxs[((img * P + h / sh) * Q + w / sw) * upr + j];
        dx[i] = v;
    }
}

template <typename T>
__global__ void add_kernel(T *dx, const float *dxs, size_t rows, int C, int H, int W, int P, int Q,
                           int sh, int sw)
{
    const size_t n = rows * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / C, j = i - r * C;
        T *d = dx + input_row(r, H, W, P, Q, sh, sw) * C + j;
        *d = from_f32<T>(to_f32(*d) + dxs[i]);
    }
}

/* The widest unit of a row of `bytes` that both pointers are aligned to. */
size_t unit_bytes(size_t bytes, const void *a, const void *b)
{
    for (size_t u = 16; u > 1; u /= 2)
        if (bytes % u == 0 && is_aligned(a, u) && is_aligned(b, u)) return u;
    return 1;
}

template <typename U>
void copy_rows(bool scatter, void *dst, const void *src, size_t rows, int upr, int H, int W,
               int P, int Q, int sh, int sw, cudaStream_t st)
{
    const unsigned blocks = grid_for(rows * upr, THREADS, MAX_BLOCKS);
    if (scatter)
        scatter_kernel<U><<<blocks, THREADS, 0, st>>>((U *)dst, (const U *)src, rows, upr, H, W,
                                                      P, Q, sh, sw);
    else
        gather_kernel<U><<<blocks, THREADS, 0, st>>>((U *)dst, (const U *)src, rows, upr, H, W,
                                                     P, Q, sh, sw);
    CUDA_CHECK_LAUNCH();
}

/* rows: the destination's (gather: N P Q; scatter: N H W). */
void copy_dispatch(bool scatter, void *dst, const void *src, size_t row_bytes, size_t rows,
                   int H, int W, int P, int Q, int sh, int sw, cudaStream_t st)
{
    if (!rows || !row_bytes) return;
    const size_t u = unit_bytes(row_bytes, dst, src);
    const int upr = (int)(row_bytes / u);
    switch (u) {
    case 16: copy_rows<uint4>(scatter, dst, src, rows, upr, H, W, P, Q, sh, sw, st); break;
    case 8: copy_rows<uint2>(scatter, dst, src, rows, upr, H, W, P, Q, sh, sw, st); break;
    case 4: copy_rows<uint32_t>(scatter, dst, src, rows, upr, H, W, P, Q, sh, sw, st); break;
    case 2: copy_rows<uint16_t>(scatter, dst, src, rows, upr, H, W, P, Q, sh, sw, st); break;
    default: copy_rows<uint8_t>(scatter, dst, src, rows, upr, H, W, P, Q, sh, sw, st); break;
    }
}

} // namespace

extern "C" void conv_gemm_gather_launch(void *xs, const void *x, size_t es, int N, int H, int W,
                                        int C, int P, int Q, int sh, int sw, cudaStream_t st)
{
    copy_dispatch(false, xs, x, (size_t)C * es, (size_t)N * P * Q, H, W, P, Q, sh, sw, st);
}

extern "C" void conv_gemm_scatter_launch(void *dx, const void *dxs, DType dt, int N, int H, int W,
                                         int C, int P, int Q, int sh, int sw, int accum,
                                         cudaStream_t st)
{
    if (!accum) {
        copy_dispatch(true, dx, dxs, (size_t)C * dtype_size(dt), (size_t)N * H * W, H, W, P, Q,
                      sh, sw, st);
        return;
    }
    const size_t rows = (size_t)N * P * Q;
    if (!rows || !C) return;
    dispatch_float(dt, "conv_gemm_scatter_launch", [&](auto tag) {
        using T = decltype(tag);
        add_kernel<T><<<grid_for(rows * C, THREADS, MAX_BLOCKS), THREADS, 0, st>>>(
            (T *)dx, (const float *)dxs, rows, C, H, W, P, Q, sh, sw);
        CUDA_CHECK_LAUNCH();
    });
}
