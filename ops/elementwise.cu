/* elementwise.cu — CUDA kernels for add, mul, bias-add, relu, gelu and tanh
 * (the contract and the math are in elementwise.h / elementwise.c; scale,
 * cast and fill, which the engine launches itself, are in engine/kernels.cu).
 *
 * Shape letters: n elements; R rows, C columns (the last dim).
 *
 * Every kernel loads its storage type T (f32, f16 or bf16), computes in f32,
 * and stores with round-to-nearest-even (__float2half_rn / __float2bfloat16_rn).
 * With `accum` the old output is added in f32 before the one rounding.
 *
 * Most ops are one template, map_kernel (engine/map_kernel.cuh, shared with
 * the engine's own kernels): y (+)= f(x0, x1) with a small functor f. It
 * moves 16 bytes per access when every pointer allows it (V elements,
 * V = 16 / sizeof(T)) and falls back to one element per access otherwise; a
 * grid-stride loop with size_t indices covers any n. bias_backward sums
 * columns in a fixed order (no atomics), so it is deterministic per (R, C);
 * its vector form (the end of the file) also runs after an activation's
 * backward in the same pass (act_backward_colsum: op_linear_act's bias
 * gradient).
 */
#include <stdint.h>

#include "engine/error.h"
#include "engine/map_kernel.cuh"
#include "colsum_finish.cuh"
#include "cuda_util.cuh"
#include "elementwise.h"
#include "normal_f32.h"

struct AddF {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct MulF {
    __device__ float operator()(float a, float b) const { return a * b; }
};

/* Phi(x) and phi(x) from one short formula (ops/normal_f32.h: erfc's
 * Chebyshev fit, accurate in the left tail, about half the instructions of
 * erfcf + expf; GELU is bound by this arithmetic). */

template <ActKind K> struct ActFwdF {
    __device__ float operator()(float x, float) const
    {
        if constexpr (K == ACT_RELU) return x > 0.0f ? x : 0.0f;
        else if constexpr (K == ACT_GELU) return normal_f32_gelu(x);
        else return tanhf(x);
    }
};

/* v is x for relu and gelu, y for tanh. */
template <ActKind K> struct ActBwdF {
    __device__ float operator()(float dy, float v) const
    {
        /* forward: y = x > 0 ? x : 0   so   dx = x > 0 ? dy : 0 */
        if constexpr (K == ACT_RELU) return v > 0.0f ? dy : 0.0f;
        /* forward: y = x * Phi(x)   so   dx = dy * (Phi(x) + x * phi(x)) */
        else if constexpr (K == ACT_GELU) return normal_f32_gelu_grad(dy, v);
        /* forward: y = tanh(x)   so   dx = dy * (1 - y^2) */
        else return dy * (1.0f - v * v);
    }
};

extern "C" void add_forward_cuda(void *y, const void *a, const void *b, DType dt, size_t n,
                                 cudaStream_t s)
{
    dispatch_float(dt, "add_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        launch_map<T, T, 2>(y, a, b, n, 0, AddF{}, s);
    });
}

extern "C" void mul_forward_cuda(void *y, const void *a, const void *b, DType dt, size_t n,
                                 cudaStream_t s)
{
    dispatch_float(dt, "mul_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        launch_map<T, T, 2>(y, a, b, n, 0, MulF{}, s);
    });
}

/* forward: y = a * b   so   da (+)= dy * b,  db (+)= dy * a (two passes; dy is
 * read twice, which keeps one kernel shape for everything here). */
extern "C" void mul_backward_cuda(void *da, void *db, const void *dy, const void *a,
                                  const void *b, DType dt, size_t n, int accum_a, int accum_b,
                                  cudaStream_t s)
{
    dispatch_float(dt, "mul_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        if (da) launch_map<T, T, 2>(da, dy, b, n, accum_a, MulF{}, s);
        if (db) launch_map<T, T, 2>(db, dy, a, n, accum_b, MulF{}, s);
    });
}

extern "C" void act_forward_cuda(ActKind k, void *y, const void *x, DType dt, size_t n,
                                 cudaStream_t s)
{
    dispatch_float(dt, "act_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        switch (k) {
        case ACT_RELU: launch_map<T, T, 1>(y, x, nullptr, n, 0, ActFwdF<ACT_RELU>{}, s); break;
        case ACT_GELU: launch_map<T, T, 1>(y, x, nullptr, n, 0, ActFwdF<ACT_GELU>{}, s); break;
        case ACT_TANH: launch_map<T, T, 1>(y, x, nullptr, n, 0, ActFwdF<ACT_TANH>{}, s); break;
        default: ct_fatal("act_forward_cuda: unknown activation kind %d", (int)k);
        }
    });
}

extern "C" void act_backward_cuda(ActKind k, void *dx, const void *dy, const void *x,
                                  const void *y, DType dt, size_t n, int accum, cudaStream_t s)
{
    if (k == ACT_TANH)
        CT_ASSERT(n == 0 || y != NULL, "act_backward_cuda: tanh backward reads y, got NULL");
    else
        CT_ASSERT(n == 0 || x != NULL, "act_backward_cuda: relu/gelu backward reads x, got NULL");
    dispatch_float(dt, "act_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        switch (k) {
        case ACT_RELU: launch_map<T, T, 2>(dx, dy, x, n, accum, ActBwdF<ACT_RELU>{}, s); break;
        case ACT_GELU: launch_map<T, T, 2>(dx, dy, x, n, accum, ActBwdF<ACT_GELU>{}, s); break;
        case ACT_TANH: launch_map<T, T, 2>(dx, dy, y, n, accum, ActBwdF<ACT_TANH>{}, s); break;
        default: ct_fatal("act_backward_cuda: unknown activation kind %d", (int)k);
        }
    });
}

/* ---- bias-add ---- */

/* y[r,c] = x[r,c] + b[c] over the flat index; V elements per access when y and
 * x allow it. The column is computed once per vector and then stepped, so C
 * need not be a multiple of V; b is small and read through the cache. */
template <typename T, int V>
__global__ void bias_add_kernel(T *y, const T *x, const T *b, size_t n, size_t C)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t nv = n / V;
    for (size_t i = tid; i < nv; i += stride) {
        Vec<T, V> v = reinterpret_cast<const Vec<T, V> *>(x)[i];
        size_t c = (i * V) % C;
#pragma unroll
        for (int k = 0; k < V; k++) {
            v.v[k] = from_f32<T>(to_f32(v.v[k]) + to_f32(b[c]));
            if (++c == C) c = 0;
        }
        reinterpret_cast<Vec<T, V> *>(y)[i] = v;
    }
    for (size_t i = nv * V + tid; i < n; i += stride)
        y[i] = from_f32<T>(to_f32(x[i]) + to_f32(b[i % C]));
}

extern "C" void bias_add_forward_cuda(void *y, const void *x, const void *b, DType dt,
                                      size_t R, size_t C, cudaStream_t s)
{
    size_t n = R * C;
    if (n == 0) return;
    dispatch_float(dt, "bias_add_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        constexpr int V = 16 / sizeof(T);
        const bool vec = is_aligned(y, 16) && is_aligned(x, 16);
        const unsigned blocks = grid_for(vec ? (n + V - 1) / V : n, EW_THREADS, EW_MAX_BLOCKS);
        if (vec)
            bias_add_kernel<T, V><<<blocks, EW_THREADS, 0, s>>>(
                (T *)y, (const T *)x, (const T *)b, n, C);
        else
            bias_add_kernel<T, 1><<<blocks, EW_THREADS, 0, s>>>(
                (T *)y, (const T *)x, (const T *)b, n, C);
        CUDA_CHECK_LAUNCH();
    });
}

/* ---- bias backward: db[c] (+)= sum_r dy[r,c], deterministic ----
 *
 * forward: y[r,c] = x[r,c] + b[c]   so   db[c] (+)= sum_r dy[r,c]
 *
 * Pass 1: a block of BB_COLS x BB_ROWS threads owns a strip of BB_COLS columns
 * and a chunk of rows; thread (tx, ty) sums rows ty, ty + BB_ROWS, ... of its
 * column in order (a warp reads BB_COLS consecutive elements of one row), then
 * a fixed shared-memory tree adds the BB_ROWS partial sums. With one chunk the
 * block writes db directly; with G chunks it writes partial[g, c] and pass 2
 * adds the G partials of each column in order g = 0..G-1. G depends only on
 * (R, C), so the order of every addition is fixed by the shape. */
static const int BB_COLS = 32;
static const int BB_ROWS = 16;
/* Aim for about this many blocks so every SM has work... */
static const size_t BB_TARGET_BLOCKS = 512;
/* ...but never split rows into chunks shorter than this (16 rows a thread). */
static const size_t BB_MIN_CHUNK = 256;

template <typename T>
__global__ void bias_backward_partial_kernel(float *out, const T *dy, size_t R, size_t C,
                                             size_t rows_per_chunk, int accum)
{
    __shared__ float part[BB_ROWS][BB_COLS + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    size_t c = (size_t)blockIdx.x * BB_COLS + tx;
    size_t r0 = (size_t)blockIdx.y * rows_per_chunk;
    size_t r1 = r0 + rows_per_chunk < R ? r0 + rows_per_chunk : R;
    float acc = 0.0f;
    if (c < C) {
        size_t r = r0 + ty;
        /* four loads in flight, added in row order */
        for (; r + 3 * BB_ROWS < r1; r += 4 * BB_ROWS) {
            float v0 = to_f32(dy[r * C + c]);
            float v1 = to_f32(dy[(r + BB_ROWS) * C + c]);
            float v2 = to_f32(dy[(r + 2 * BB_ROWS) * C + c]);
            float v3 = to_f32(dy[(r + 3 * BB_ROWS) * C + c]);
            acc += v0;
            acc += v1;
            acc += v2;
            acc += v3;
        }
        for (; r < r1; r += BB_ROWS) acc += to_f32(dy[r * C + c]);
    }
    part[ty][tx] = acc;
    __syncthreads();
    for (int h = BB_ROWS / 2; h > 0; h >>= 1) {
        if (ty < h) part[ty][tx] += part[ty + h][tx];
        __syncthreads();
    }
    if (ty == 0 && c < C) {
        float sum = part[0][tx];
        if (gridDim.y == 1) out[c] = accum ? out[c] + sum : sum;
        else out[(size_t)blockIdx.y * C + c] = sum;
    }
}

/* db[c] (+)= sum_g partial[g, c], g in order. */
__global__ void bias_backward_finish_kernel(float *db, const float *partial, size_t G,
                                            size_t C, int accum)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += stride) {
        float sum = 0.0f;
        for (size_t g = 0; g < G; g++) sum += partial[g * C + c];
        db[c] = accum ? db[c] + sum : sum;
    }
}

static int colsum_vec(ActKind k, void *dh, float *db, int accum, const void *dy,
                      const void *h, DType dt, size_t R, size_t C, cudaStream_t s);

extern "C" void bias_backward_cuda(float *db, const void *dy, DType dt, size_t R, size_t C,
                                   int accum, cudaStream_t s)
{
    if (C == 0) return;
    if (R == 0) {
        if (!accum) CUDA_CHECK(cudaMemsetAsync(db, 0, C * sizeof(float), s));
        return;
    }
    if (colsum_vec(ACT_NONE, NULL, db, accum, dy, NULL, dt, R, C, s)) return;
    size_t col_blocks = (C + BB_COLS - 1) / BB_COLS;
    size_t G = (BB_TARGET_BLOCKS + col_blocks - 1) / col_blocks;
    size_t max_chunks = (R + BB_MIN_CHUNK - 1) / BB_MIN_CHUNK;
    if (G > max_chunks) G = max_chunks;
    if (G < 1) G = 1;
    size_t rows_per_chunk = (R + G - 1) / G;
    G = (R + rows_per_chunk - 1) / rows_per_chunk; /* no empty chunk at the end */

    if (col_blocks > 0x7fffffffu)
        ct_fatal("bias_backward_cuda: C = %zu columns is more than one grid can cover", C);
    float *partial = NULL;
    if (G > 1) CUDA_CHECK(cudaMallocAsync((void **)&partial, G * C * sizeof(float), s));
    dispatch_float(dt, "bias_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        dim3 grid((unsigned)col_blocks, (unsigned)G), block(BB_COLS, BB_ROWS);
        bias_backward_partial_kernel<T><<<grid, block, 0, s>>>(
            G > 1 ? partial : db, (const T *)dy, R, C, rows_per_chunk, accum);
        CUDA_CHECK_LAUNCH();
    });
    if (G > 1) {
        bias_backward_finish_kernel<<<grid_for(C, EW_THREADS, EW_MAX_BLOCKS), EW_THREADS, 0, s>>>(
            db, partial, G, C, accum);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaFreeAsync(partial, s));
    }
}

/* ---- column sums on 16-byte vectors, alone or after an activation's backward ----
 *
 * bias_backward's vector path, and the backward of y = act(h) for the
 * Linear that made h (op_linear_act) with its bias gradient in the same pass:
 *   plain:  db[c] (+)= sum_r dy[r,c]
 *   act:    dh[r,c] = dy[r,c] act'(h[r,c])   (act_backward_cuda's bits: the
 *                                             same functor, one rounding)
 *           db[c] (+)= sum_r dh[r,c]          (f32, of the rounded dh)
 * A block: 32 lanes across (V columns each, V = 16 / sizeof(T): 32 V
 * columns) x CS_LANES row lanes, over a chunk of rows; lane (tx, ty) adds
 * rows ty, ty + CS_LANES, ... of its columns in order, the row lanes of a
 * column are added in lane order into partial[chunk, c], then
 * colsum_finish (ops/colsum_finish.cuh: 16 slices of chunks a column, each
 * in order, then the slices in order) adds the chunks. The chunking
 * depends on (R, C) alone, so the order is fixed (deterministic), and
 * it is the same for both forms: the act form's db equals bias_backward of
 * its dh bit for bit. Taken when C % V == 0 and the pointers are 16-byte
 * aligned; bias_backward_partial_kernel (above) takes the rest. One read
 * of dy a pass with ~8 blocks an SM in flight, where the kernel above
 * moves 2 bytes a load (BERT-large: ~1.4 TB/s on an H100). */
static const int CS_LANES = 8;
static const int CS_THREADS = 32 * CS_LANES;
static const size_t CS_TARGET_BLOCKS = 1024;   /* ~8 blocks an SM on a 132-SM card */
static const size_t CS_MIN_ROWS = 64;          /* a chunk's rows at least: 8 a lane */

template <typename T, ActKind K>
__global__ void __launch_bounds__(CS_THREADS)
    colsum_vec_kernel(T *dh, float *partial, const T *dy, const T *h, size_t R, size_t C,
                      size_t rows_per_chunk)
{
    constexpr int V = 16 / sizeof(T);
    __shared__ float lane_sum[CS_LANES][32 * V];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const size_t c0 = (size_t)blockIdx.x * 32 * V, c = c0 + (size_t)tx * V;
    const size_t r0 = (size_t)blockIdx.y * rows_per_chunk;
    const size_t r1 = r0 + rows_per_chunk < R ? r0 + rows_per_chunk : R;
    float sum[V];
#pragma unroll
    for (int k = 0; k < V; k++) sum[k] = 0.0f;
    /* row r into the sums (and dh): the one order, whichever loop calls it */
    auto add_row = [&](size_t r, const Vec<T, V> &a, const Vec<T, V> &b) {
        if constexpr (K == ACT_NONE) {
#pragma unroll
            for (int k = 0; k < V; k++) sum[k] += to_f32(a.v[k]);
        } else {
            Vec<T, V> o;
#pragma unroll
            for (int k = 0; k < V; k++) {
                o.v[k] = from_f32<T>(ActBwdF<K>{}(to_f32(a.v[k]), to_f32(b.v[k])));
                sum[k] += to_f32(o.v[k]);
            }
            *reinterpret_cast<Vec<T, V> *>(dh + r * C + c) = o;
        }
    };
    /* rows a lane has in flight: 4, of dy alone or of (dy, h) (GELU's in bf16: 64 registers,
     * four blocks an SM, 69 and three in f16; with 2 rows, 50 registers and still four blocks,
     * ncu found the bf16 kernel waiting on its loads at 43% of its issue slots and 66% of
     * DRAM bandwidth) */
    constexpr int CS_UNROLL = 4;
    if (c < C) {   /* C % V == 0: a vector is wholly inside or outside */
        size_t r = r0 + ty;
        /* CS_UNROLL rows' loads issued before any is added: a lane walks its
         * chunk's rows one after another (16 at C 1024, 64 at 4096 in BERT),
         * and one load in flight at a time left it waiting on each */
        for (; r + (CS_UNROLL - 1) * CS_LANES < r1; r += CS_UNROLL * CS_LANES) {
            Vec<T, V> a[CS_UNROLL], b[CS_UNROLL];
#pragma unroll
            for (int u = 0; u < CS_UNROLL; u++) {
                const size_t ru = r + (size_t)u * CS_LANES;
                a[u] = *reinterpret_cast<const Vec<T, V> *>(dy + ru * C + c);
                if constexpr (K != ACT_NONE)
                    b[u] = *reinterpret_cast<const Vec<T, V> *>(h + ru * C + c);
            }
#pragma unroll
            for (int u = 0; u < CS_UNROLL; u++) add_row(r + (size_t)u * CS_LANES, a[u], b[u]);
        }
        for (; r < r1; r += CS_LANES) {
            Vec<T, V> a, b;
            a = *reinterpret_cast<const Vec<T, V> *>(dy + r * C + c);
            if constexpr (K != ACT_NONE) b = *reinterpret_cast<const Vec<T, V> *>(h + r * C + c);
            add_row(r, a, b);
        }
    }
#pragma unroll
    for (int k = 0; k < V; k++) lane_sum[ty][tx * V + k] = sum[k];
    __syncthreads();
    for (int col = threadIdx.x; col < 32 * V; col += CS_THREADS) {
        if (c0 + col >= C) continue;
        float p = lane_sum[0][col];
        for (int l = 1; l < CS_LANES; l++) p += lane_sum[l][col];
        partial[(size_t)blockIdx.y * C + c0 + col] = p;
    }
}

/* The vector form of a column sum (k ACT_NONE: of dy) or of an activation's
 * backward (k ACT_RELU / ACT_GELU: dh written, summed): 1 when done, 0 when
 * the shape or alignment is not the vector kernel's (nothing launched). */
static int colsum_vec(ActKind k, void *dh, float *db, int accum, const void *dy,
                      const void *h, DType dt, size_t R, size_t C, cudaStream_t s)
{
    const size_t V = 16 / dtype_size(dt);
    if (R == 0 || C == 0 || C % V || !is_aligned(dy, 16) ||
        (k != ACT_NONE && (!is_aligned(dh, 16) || !is_aligned(h, 16))))
        return 0;
    const size_t col_blocks = (C + 32 * V - 1) / (32 * V);
    size_t G = (CS_TARGET_BLOCKS + col_blocks - 1) / col_blocks;
    const size_t max_chunks = (R + CS_MIN_ROWS - 1) / CS_MIN_ROWS;
    if (G > max_chunks) G = max_chunks;
    if (G < 1) G = 1;
    const size_t rows_per_chunk = (R + G - 1) / G;
    G = (R + rows_per_chunk - 1) / rows_per_chunk;   /* no empty chunk at the end */
    if (col_blocks > 0x7fffffffu || G > 65535) return 0;
    float *partial = NULL;
    CUDA_CHECK(cudaMallocAsync((void **)&partial, G * C * sizeof(float), s));
    dispatch_float(dt, "column sums", [&](auto tag) {
        using T = decltype(tag);
        const dim3 grid((unsigned)col_blocks, (unsigned)G);
        T *o = (T *)dh;
        const T *a = (const T *)dy, *b = (const T *)h;
        switch (k) {
        case ACT_NONE: colsum_vec_kernel<T, ACT_NONE><<<grid, CS_THREADS, 0, s>>>(o, partial, a, b, R, C, rows_per_chunk); break;
        case ACT_RELU: colsum_vec_kernel<T, ACT_RELU><<<grid, CS_THREADS, 0, s>>>(o, partial, a, b, R, C, rows_per_chunk); break;
        case ACT_GELU: colsum_vec_kernel<T, ACT_GELU><<<grid, CS_THREADS, 0, s>>>(o, partial, a, b, R, C, rows_per_chunk); break;
        default: ct_fatal("column sums: activation kind %d has no fused backward", (int)k);
        }
        CUDA_CHECK_LAUNCH();
    });
    colsum_finish(db, accum, partial, G, C, s);
    CUDA_CHECK(cudaFreeAsync(partial, s));
    return 1;
}

extern "C" void act_backward_colsum_cuda(ActKind k, void *dh, float *db, int accum_b,
                                         const void *dy, const void *h, DType dt, size_t R,
                                         size_t C, cudaStream_t s)
{
    CT_ASSERT(k == ACT_RELU || k == ACT_GELU,
              "act_backward_colsum_cuda: relu or gelu (their backward reads h), got kind %d",
              (int)k);
    if (db && colsum_vec(k, dh, db, accum_b, dy, h, dt, R, C, s)) return;
    act_backward_cuda(k, dh, dy, h, NULL, dt, R * C, 0, s);   /* the two passes */
    if (db) bias_backward_cuda(db, dh, dt, R, C, accum_b, s);
}
