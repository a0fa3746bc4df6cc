/* pool.cu — CUDA 2-D max pooling and global average pooling over NHWC
 * images (the contract and the math are in pool.h, the reference in pool.c).
 *
 * Shape letters: x [N, H, W, C], max pool output [N, P, Q, C], kernel k,
 * stride s, padding pad; HW = H * W.
 *
 * Every kernel is one thread per output element of its pass (max pool: per
 * V channels of one, 16-byte accesses, where C and the pointers allow),
 * channel fastest, so a warp reads and writes consecutive addresses:
 *   max forward   thread per (n, p, q, c): scans its window in row order,
 *                 strict > (first maximum wins), NaN wins; writes y and the
 *                 winner's code i k + j (u8 for k <= 16, else i32: CT).
 *   max backward  thread per (n, h, w, c): gathers dy from the windows that
 *                 hold (h, w) and chose it, p then q ascending: no atomics,
 *                 deterministic, right for overlapping windows. ResNet's
 *                 stem pool (k 3, s 2, pad 1) takes a 2 x 2 patch of (h, w)
 *                 a thread, the same sums in the same order.
 *   avg forward   thread per (n, c): sums its HW values in order (f32).
 *   avg backward  thread per (n, h, w, c): dy[n, c] / HW.
 * Index arithmetic runs in 32 bits when every index fits (the common case;
 * 64-bit division is several times slower), else in 64 bits.
 */
#include <stdint.h>

#include "engine/error.h"
#include "cuda_util.cuh"
#include "pool.h"

namespace {

const int POOL_THREADS = 256;
const unsigned POOL_MAX_BLOCKS = 65535;
/* 32-bit indices when every flat index (and index + grid stride) stays
 * below 2^31 */
const size_t POOL_I32_LIMIT = (size_t)1 << 31;

/* ---- max pool ---- */

/* V channels a thread (16-byte accesses of x, y, dy, dx and V codes when
 * C is a multiple of V = 16 / sizeof(T) and the pointers allow; V = 1
 * otherwise): the window's index arithmetic, ~half a thread's instructions
 * at V = 1, is shared by V channels. Cv = C / V channel groups. CT is the
 * code's type (uint8_t or int32_t). */
template <typename T, typename CT, typename I, int V>
__global__ void maxpool_forward_kernel(T *y, CT *code, const T *x, int k, int s, int pad,
                                       I H, I W, I C, I P, I Q, I total_v)
{
    const I Cv = C / V;
    I stride = (I)gridDim.x * blockDim.x;
    for (I o = (I)blockIdx.x * blockDim.x + threadIdx.x; o < total_v; o += stride) {
        I c = (o % Cv) * V, pix = o / Cv;
        I q = pix % Q, t = pix / Q;
        I p = t % P, n = t / P;
        int h0 = (int)p * s - pad, w0 = (int)q * s - pad;
        int hs = h0 > 0 ? h0 : 0, he = h0 + k < (int)H ? h0 + k : (int)H;
        int ws = w0 > 0 ? w0 : 0, we = w0 + k < (int)W ? w0 + k : (int)W;
        float best[V];
        Vec<CT, V> bi;
#pragma unroll
        for (int j = 0; j < V; j++) {
            best[j] = -INFINITY;
            bi.v[j] = (CT)((hs - h0) * k + ws - w0);
        }
        for (int h = hs; h < he; h++) {
            const T *xr = x + ((n * H + (I)h) * W) * C + c;
            const int rk = (h - h0) * k - w0;
            for (int w = ws; w < we; w++) {
                Vec<T, V> xv = *reinterpret_cast<const Vec<T, V> *>(xr + (I)w * C);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    float v = to_f32(xv.v[j]);
                    if (v > best[j] || isnan(v)) {
                        best[j] = v;
                        bi.v[j] = (CT)(rk + w);
                    }
                }
            }
        }
        Vec<T, V> yv;
#pragma unroll
        for (int j = 0; j < V; j++) yv.v[j] = from_f32<T>(best[j]);
        reinterpret_cast<Vec<T, V> *>(y)[o] = yv;
        if (code) reinterpret_cast<Vec<CT, V> *>(code)[o] = bi;
    }
}

/* forward: y[n,p,q,c] = x[n, p s - pad + code / k, q s - pad + code % k, c]
 *   so   dx[n,h,w,c] (+)= sum of dy[n,p,q,c] over the windows holding (h, w)
 *   whose code is (h - p s + pad) k + w - q s + pad */
template <typename T, typename CT, typename I, int V>
__global__ void maxpool_backward_kernel(T *dx, const T *dy, const CT *code, int k, int s,
                                        int pad, I H, I W, I C, I P, I Q, I total_v, int accum)
{
    const I Cv = C / V;
    I stride = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total_v; i += stride) {
        I c = (i % Cv) * V, pix = i / Cv;
        I w = pix % W, t = pix / W;
        I h = t % H, n = t / H;
        int hh = (int)h, ww = (int)w;
        int p0 = hh + pad < k ? 0 : (hh + pad - k) / s + 1;
        int p1 = (hh + pad) / s < (int)P - 1 ? (hh + pad) / s : (int)P - 1;
        int q0 = ww + pad < k ? 0 : (ww + pad - k) / s + 1;
        int q1 = (ww + pad) / s < (int)Q - 1 ? (ww + pad) / s : (int)Q - 1;
        float sum[V];
#pragma unroll
        for (int j = 0; j < V; j++) sum[j] = 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++) {
                I o = (((n * P + (I)p) * Q + (I)q) * C + c) / V;
                const int self = (hh - p * s + pad) * k + ww - q * s + pad;
                Vec<CT, V> iv = reinterpret_cast<const Vec<CT, V> *>(code)[o];
                Vec<T, V> dv = reinterpret_cast<const Vec<T, V> *>(dy)[o];
#pragma unroll
                for (int j = 0; j < V; j++)
                    if ((int)iv.v[j] == self) sum[j] += to_f32(dv.v[j]);
            }
        Vec<T, V> o;
        if (accum) o = reinterpret_cast<const Vec<T, V> *>(dx)[i];
#pragma unroll
        for (int j = 0; j < V; j++) o.v[j] = from_f32<T>(accum ? to_f32(o.v[j]) + sum[j] : sum[j]);
        reinterpret_cast<Vec<T, V> *>(dx)[i] = o;
    }
}

/* The backward of ResNet's stem pool (k 3, s 2, pad 1) a 2 x 2 patch of
 * input pixels a thread: rows 2 m, 2 m + 1 and columns 2 j, 2 j + 1 (those
 * inside x). With these numbers an even input row lies in output row m's
 * window alone, an odd one in rows m and m + 1 (the same for columns), so
 * the patch's four pixels read the four outputs (m | m + 1, j | j + 1)
 * once between them, where a thread a pixel reads 2.25 on average, each
 * output's dy and V codes fetched by the 9 pixels of its window: ~2.8 GB
 * of L2 reads at ResNet-50 bs 256 in bf16 with i32 indices, which is what
 * held the general kernel at 1.8x its DRAM floor (docs/kernels.md). Pixel
 * (2 m + r, 2 j + u) sits in output (m + a, j + b)'s window at row
 * r - 2 a + 1, column u - 2 b + 1: its code there is a constant of the
 * unrolled loops. Each pixel adds its outputs in the general kernel's order
 * (p, then q ascending): the same bits. total_v = N ceil(H / 2) ceil(W / 2)
 * Cv patches. */
template <typename T, typename I, int V>
__global__ void maxpool_backward_s2k3_kernel(T *dx, const T *dy, const uint8_t *code, I H, I W,
                                             I C, I P, I Q, I total_v, int accum)
{
    const I Cv = C / V, H2 = (H + 1) / 2, W2 = (W + 1) / 2;
    I stride = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total_v; i += stride) {
        const I cv = i % Cv, pix = i / Cv;
        const I j = pix % W2, t = pix / W2;
        const I m = t % H2, n = t / H2;
        /* the four outputs (a = m, m + 1; b = j, j + 1), those that exist */
        Vec<uint8_t, V> iv[2][2];
        Vec<T, V> dv[2][2];
        bool has[2][2];
#pragma unroll
        for (int a = 0; a < 2; a++)
#pragma unroll
            for (int b = 0; b < 2; b++) {
                const I p = m + a, q = j + b;
                has[a][b] = p < P && q < Q;
                if (has[a][b]) {
                    const I o = ((n * P + p) * Q + q) * Cv + cv;
                    iv[a][b] = reinterpret_cast<const Vec<uint8_t, V> *>(code)[o];
                    dv[a][b] = reinterpret_cast<const Vec<T, V> *>(dy)[o];
                }
            }
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const I h = 2 * m + r, w = 2 * j + u;
                if (h >= H || w >= W) continue;
                float sum[V];
#pragma unroll
                for (int e = 0; e < V; e++) sum[e] = 0.0f;
                /* row r = 0 lies in output row m alone, r = 1 in m and m + 1 */
#pragma unroll
                for (int a = 0; a <= r; a++)
#pragma unroll
                    for (int b = 0; b <= u; b++) {
                        if (!has[a][b]) continue;
                        const int self = (r - 2 * a + 1) * 3 + u - 2 * b + 1;
#pragma unroll
                        for (int e = 0; e < V; e++)
                            if (iv[a][b].v[e] == self) sum[e] += to_f32(dv[a][b].v[e]);
                    }
                const I d = ((n * H + h) * W + w) * Cv + cv;
                Vec<T, V> o;
                if (accum) o = reinterpret_cast<const Vec<T, V> *>(dx)[d];
#pragma unroll
                for (int e = 0; e < V; e++)
                    o.v[e] = from_f32<T>(accum ? to_f32(o.v[e]) + sum[e] : sum[e]);
                reinterpret_cast<Vec<T, V> *>(dx)[d] = o;
            }
    }
}

/* ---- global average pool ---- */

template <typename T, typename I>
__global__ void avgpool_forward_kernel(T *y, const T *x, I HW, I C, I total)
{
    I stride = (I)gridDim.x * blockDim.x;
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += stride) {
        I c = j % C, n = j / C;
        const T *xp = x + n * HW * C + c;
        float acc = 0.0f;
        I r = 0;
        /* four loads in flight, added in row order */
        for (; r + 3 < HW; r += 4) {
            float v0 = to_f32(xp[r * C]), v1 = to_f32(xp[(r + 1) * C]);
            float v2 = to_f32(xp[(r + 2) * C]), v3 = to_f32(xp[(r + 3) * C]);
            acc += v0;
            acc += v1;
            acc += v2;
            acc += v3;
        }
        for (; r < HW; r++) acc += to_f32(xp[r * C]);
        y[j] = from_f32<T>(acc / (float)HW);
    }
}

/* forward: y[n,c] = (1/HW) sum_r x[n,r,c]   so   dx[n,r,c] (+)= dy[n,c] / HW */
template <typename T, typename I>
__global__ void avgpool_backward_kernel(T *dx, const T *dy, I HW, I C, I total, int accum)
{
    I stride = (I)gridDim.x * blockDim.x;
    float fhw = (float)HW;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        I c = i % C, n = i / (HW * C);
        float v = to_f32(dy[n * C + c]) / fhw;
        dx[i] = from_f32<T>(accum ? to_f32(dx[i]) + v : v);
    }
}

/* f with a value of the code's type for kernel size k (ops/pool.h:
 * maxpool_code_bytes) */
template <typename F> void dispatch_code(int k, F f)
{
    if (maxpool_code_bytes(k) == 1)
        f(uint8_t{});
    else
        f(int32_t{});
}

} /* namespace */

extern "C" void maxpool2d_forward_cuda(void *y, void *code, const void *x, DType dt, int k,
                                       int s, int pad, int N, int H, int W, int C,
                                       cudaStream_t st)
{
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    size_t total = (size_t)N * P * Q * C, in_total = (size_t)N * H * W * C;
    if (total == 0) return;
    bool small = total < POOL_I32_LIMIT && in_total < POOL_I32_LIMIT;
    dispatch_float(dt, "maxpool2d_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = 16 / sizeof(T);
        dispatch_code(k, [&](auto ctag) {
            using CT = decltype(ctag);
            CT *cp = (CT *)code;
            bool vec = C % V == 0 && is_aligned(y, 16) && is_aligned(x, 16) &&
                       (!cp || is_aligned(cp, V * sizeof(CT)));
            size_t tv = vec ? total / V : total;
            const unsigned blocks = grid_for(tv, POOL_THREADS, POOL_MAX_BLOCKS);
            if (vec && small)
                maxpool_forward_kernel<T, CT, uint32_t, V><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)y, cp, (const T *)x, k, s, pad, H, W, C, P, Q, (uint32_t)tv);
            else if (vec)
                maxpool_forward_kernel<T, CT, size_t, V><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)y, cp, (const T *)x, k, s, pad, H, W, C, P, Q, tv);
            else if (small)
                maxpool_forward_kernel<T, CT, uint32_t, 1><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)y, cp, (const T *)x, k, s, pad, H, W, C, P, Q, (uint32_t)tv);
            else
                maxpool_forward_kernel<T, CT, size_t, 1><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)y, cp, (const T *)x, k, s, pad, H, W, C, P, Q, tv);
            CUDA_CHECK_LAUNCH();
        });
    });
}

extern "C" void maxpool2d_backward_cuda(void *dx, const void *dy, const void *code, DType dt,
                                        int k, int s, int pad, int N, int H, int W, int C,
                                        int accum, cudaStream_t st)
{
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    size_t total = (size_t)N * H * W * C, out_total = (size_t)N * P * Q * C;
    if (total == 0) return;
    bool small = total < POOL_I32_LIMIT && out_total < POOL_I32_LIMIT;
    dispatch_float(dt, "maxpool2d_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = 16 / sizeof(T);
        dispatch_code(k, [&](auto ctag) {
            using CT = decltype(ctag);
            const CT *cp = (const CT *)code;
            bool vec = C % V == 0 && is_aligned(dx, 16) && is_aligned(dy, 16) &&
                       is_aligned(cp, V * sizeof(CT));
            size_t tv = vec ? total / V : total;
            if (vec && k == 3 && s == 2 && pad == 1) {   /* k 3: u8 codes */
                const uint8_t *c8 = (const uint8_t *)code;
                const size_t patches = (size_t)N * ((H + 1) / 2) * ((W + 1) / 2) * (C / V);
                const unsigned pb = grid_for(patches, POOL_THREADS, POOL_MAX_BLOCKS);
                if (small)
                    maxpool_backward_s2k3_kernel<T, uint32_t, V><<<pb, POOL_THREADS, 0, st>>>(
                        (T *)dx, (const T *)dy, c8, H, W, C, P, Q, (uint32_t)patches, accum);
                else
                    maxpool_backward_s2k3_kernel<T, size_t, V><<<pb, POOL_THREADS, 0, st>>>(
                        (T *)dx, (const T *)dy, c8, H, W, C, P, Q, patches, accum);
                CUDA_CHECK_LAUNCH();
                return;
            }
            const unsigned blocks = grid_for(tv, POOL_THREADS, POOL_MAX_BLOCKS);
            if (vec && small)
                maxpool_backward_kernel<T, CT, uint32_t, V><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)dx, (const T *)dy, cp, k, s, pad, H, W, C, P, Q, (uint32_t)tv, accum);
            else if (vec)
                maxpool_backward_kernel<T, CT, size_t, V><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)dx, (const T *)dy, cp, k, s, pad, H, W, C, P, Q, tv, accum);
            else if (small)
                maxpool_backward_kernel<T, CT, uint32_t, 1><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)dx, (const T *)dy, cp, k, s, pad, H, W, C, P, Q, (uint32_t)tv, accum);
            else
                maxpool_backward_kernel<T, CT, size_t, 1><<<blocks, POOL_THREADS, 0, st>>>(
                    (T *)dx, (const T *)dy, cp, k, s, pad, H, W, C, P, Q, tv, accum);
            CUDA_CHECK_LAUNCH();
        });
    });
}

extern "C" void avgpool_global_forward_cuda(void *y, const void *x, DType dt, int N, int HW,
                                            int C, cudaStream_t st)
{
    size_t total = (size_t)N * C, in_total = (size_t)N * HW * C;
    if (total == 0) return;
    CT_ASSERT(HW > 0, "avgpool_global_forward_cuda: empty image (H * W = 0)");
    bool small = in_total < POOL_I32_LIMIT;
    const unsigned blocks = grid_for(total, POOL_THREADS, POOL_MAX_BLOCKS);
    dispatch_float(dt, "avgpool_global_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        if (small)
            avgpool_forward_kernel<T, uint32_t><<<blocks, POOL_THREADS, 0, st>>>(
                (T *)y, (const T *)x, (uint32_t)HW, (uint32_t)C, (uint32_t)total);
        else
            avgpool_forward_kernel<T, size_t><<<blocks, POOL_THREADS, 0, st>>>(
                (T *)y, (const T *)x, (size_t)HW, (size_t)C, total);
        CUDA_CHECK_LAUNCH();
    });
}

extern "C" void avgpool_global_backward_cuda(void *dx, const void *dy, DType dt, int N, int HW,
                                             int C, int accum, cudaStream_t st)
{
    size_t total = (size_t)N * HW * C;
    if (total == 0) return;
    bool small = total < POOL_I32_LIMIT;
    const unsigned blocks = grid_for(total, POOL_THREADS, POOL_MAX_BLOCKS);
    dispatch_float(dt, "avgpool_global_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        if (small)
            avgpool_backward_kernel<T, uint32_t><<<blocks, POOL_THREADS, 0, st>>>(
                (T *)dx, (const T *)dy, (uint32_t)HW, (uint32_t)C, (uint32_t)total, accum);
        else
            avgpool_backward_kernel<T, size_t><<<blocks, POOL_THREADS, 0, st>>>(
                (T *)dx, (const T *)dy, (size_t)HW, (size_t)C, total, accum);
        CUDA_CHECK_LAUNCH();
    });
}
