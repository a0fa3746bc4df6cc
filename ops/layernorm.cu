/* layernorm.cu — CUDA LayerNorm over the last dim (contract and math in
 * ops/layernorm.h; ops/layernorm.c is the CPU reference).
 *
 * Shape letters: R rows, D the normalized width. Storage dt in {f32, f16,
 * bf16} for x, y, dy, dx; gamma, beta, dgamma, dbeta, mean, invstd are f32.
 * All math in f32; stores round to nearest even.
 *
 * Forward: one warp per row (8 rows per 256-thread block). Two passes over
 * the row for mean and variance (the row is in L1 after the first), a third
 * to write y. Warp sums use an xor butterfly, so every lane holds the same
 * bits and the result does not depend on scheduling.
 *
 * Backward: a block owns a chunk of consecutive rows; for each row it forms
 * the two row sums sum(g) and sum(g * xhat) (g = dy * gamma) with a fixed
 * block tree and writes dx; meanwhile each thread adds dy * xhat and dy into
 * the per-block column partials of the columns it owns (thread t owns
 * columns t, t + blockDim, ...: no two threads touch the same partial, no
 * atomics). The partials live in shared memory when 2 D floats fit (D <=
 * 6112), else in the block's slice of the global scratch. A second kernel
 * adds the chunk partials per column in chunk order. The chunking depends
 * only on (R, D), so dgamma/dbeta are bit-reproducible run to run.
 *
 * Vector kernels (CTRAIN_LN_KERNELS=vec, or auto from 16,384 rows a call;
 * layernorm_cuda_set_kernels). The
 * kernels above read one element per lane per access, 2 bytes in bf16: the
 * BERT-large timeline had LayerNorm at ~5x its memory floor (2.4 ms of a
 * 25.5 ms step; docs/kernels.md). These read and write 16-byte vectors (V
 * = 8 bf16/f16 or 4 f32 elements) and hold a row in registers, so x and dy
 * are read once:
 *   forward   one warp per row; lane l holds vectors l, l + 32, ... (NV of
 *             them, D <= 32 V NV, NV in 1, 2, 4, 8); mean, then the
 *             squared deviations from the registers, then y.
 *   backward  a block of LN_BWD_WARPS warps per chunk of rows (the same
 *             chunking as above); warp w takes rows w, w + 8, ... of the
 *             chunk; per row one read of x and dy, the two row sums by
 *             warp butterflies, dx written; the dgamma/dbeta partials of
 *             a lane's columns stay in its registers over all its rows, then
 *             the block's warps add theirs in warp order through shared
 *             memory, and the finish kernel adds the chunks as before. The
 *             assignment of rows to warps and columns to lanes depends only
 *             on (R, D), so the results are bit-reproducible run to run
 *             (not bit-equal to the row kernels': other summation orders;
 *             and which kernels a call takes depends on its pointers'
 *             alignment too, which the memory pool keeps from run to run).
 * They take rows whose D is a multiple of V with every row pointer 16-byte
 * aligned (D <= 32 V 8 forward, 32 V 4 backward, the registers' budget);
 * other shapes run the row kernels.
 *
 * Split backward (CTRAIN_LN_KERNELS=split; the forward as vec): the vector
 * backward's partials cost it registers (one block an SM at D = 1024), so
 * here dx comes from a warp-a-row kernel without them (the same dx bits as
 * the vector kernel's) and dgamma / dbeta from a second pass over x and dy
 * with V columns a thread, D / V threads a row, into the same chunk partials
 * and finish. It takes the rows the vector backward takes (D / V <= 128),
 * not the fused dropout's (the vector backward runs those).
 */
#include <stdint.h>

#include <type_traits>

#include "engine/error.h"
#include "engine/settings.h"
#include "cuda_util.cuh"
#include "dropout.h"
#include "fp8_device.cuh"
#include "layernorm.h"

namespace {

/* Two block-wide sums at once (blockDim.x a multiple of 32); every thread
 * gets both results; the trailing barrier lets red be reused. */
__device__ __forceinline__ void block_sum2(float &a, float &b, float *red)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    a = warp_sum(a);
    b = warp_sum(b);
    if (lane == 0) {
        red[w] = a;
        red[32 + w] = b;
    }
    __syncthreads();
    a = warp_sum(lane < nw ? red[lane] : 0.0f);
    b = warp_sum(lane < nw ? red[32 + lane] : 0.0f);
    __syncthreads();
}

constexpr int LN_FWD_WARPS = 8;
/* The backward's chunks: about this many blocks, each walking its rows one
 * after another. A row costs the row kernel a few memory round trips and
 * two barriers (~3.6 us on an H100 at D 1024: 229 us for 64 rows a block
 * at 512 blocks, BERT-large bs 256), so the time is rows a block x that
 * latency while the grid leaves half the SMs' thread slots empty: 1024
 * blocks halve the rows a block (dgamma/dbeta partials 8 MB at D 1024). */
constexpr size_t LN_BWD_TARGET_BLOCKS = 1024;
constexpr size_t LN_BWD_MIN_ROWS = 4;
constexpr size_t LN_SHARED_LIMIT = 48 * 1024; /* no opt-in needed below this */

/* forward: one warp per row */
template <typename T>
__global__ void __launch_bounds__(LN_FWD_WARPS * 32)
    ln_fwd_kernel(T *y, float *mean, float *invstd, const T *x, const float *gamma,
                  const float *beta, float eps, size_t R, int D)
{
    const size_t r = (size_t)blockIdx.x * LN_FWD_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= R) return; /* the whole warp */
    const T *xr = x + r * (size_t)D;
    T *yr = y + r * (size_t)D;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) s += to_f32(xr[d]);
    const float mu = warp_sum(s) / (float)D;
    float q = 0.0f;
    for (int d = lane; d < D; d += 32) {
        const float t = to_f32(xr[d]) - mu;
        q += t * t;
    }
    const float is = 1.0f / sqrtf(warp_sum(q) / (float)D + eps);
    for (int d = lane; d < D; d += 32)
        yr[d] = from_f32<T>((to_f32(xr[d]) - mu) * is * gamma[d] + beta[d]);
    if (lane == 0) {
        mean[r] = mu;
        invstd[r] = is;
    }
}

/* forward: y = (x - mean) * invstd * gamma + beta
 *   so dx = invstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma,
 *      dgamma += sum_r dy * xhat,  dbeta += sum_r dy
 * part: [gridDim.x][2][D] chunk partials (dgamma's, then dbeta's), or NULL. */
template <typename T>
__global__ void __launch_bounds__(256)
    ln_bwd_kernel(T *dx, float *part, const T *dy, const T *x, const float *mean,
                  const float *invstd, const float *gamma, size_t R, int D,
                  size_t rows_per_chunk, int accum_x, int acc_in_shared)
{
    extern __shared__ float sh[];
    float *red = sh; /* 64 floats for block_sum2 */
    float *acc = part ? (acc_in_shared ? sh + 64 : part + (size_t)blockIdx.x * 2 * D) : NULL;
    const int tid = threadIdx.x, bd = blockDim.x;
    if (acc)
        for (int d = tid; d < D; d += bd) {
            acc[d] = 0.0f;
            acc[D + d] = 0.0f;
        }
    const size_t r0 = (size_t)blockIdx.x * rows_per_chunk;
    const size_t r1 = r0 + rows_per_chunk < R ? r0 + rows_per_chunk : R;
    for (size_t r = r0; r < r1; r++) {
        const T *xr = x + r * (size_t)D, *dyr = dy + r * (size_t)D;
        const float mu = mean[r], is = invstd[r];
        float s1 = 0.0f, s2 = 0.0f;
        for (int d = tid; d < D; d += bd) {
            const float xh = (to_f32(xr[d]) - mu) * is, dyv = to_f32(dyr[d]);
            const float g = dyv * gamma[d];
            s1 += g;
            s2 += g * xh;
            if (acc) {
                acc[d] += dyv * xh;
                acc[D + d] += dyv;
            }
        }
        if (!dx) continue; /* uniform over the block */
        block_sum2(s1, s2, red);
        const float m1 = s1 / (float)D, m2 = s2 / (float)D;
        T *dxr = dx + r * (size_t)D;
        for (int d = tid; d < D; d += bd) {
            const float xh = (to_f32(xr[d]) - mu) * is;
            float v = is * (to_f32(dyr[d]) * gamma[d] - m1 - xh * m2);
            if (accum_x) v += to_f32(dxr[d]);
            dxr[d] = from_f32<T>(v);
        }
    }
    if (acc && acc_in_shared) {
        float *out = part + (size_t)blockIdx.x * 2 * D;
        for (int d = tid; d < D; d += bd) {
            out[d] = acc[d];
            out[D + d] = acc[D + d];
        }
    }
}

/* dgamma[d] (+)= sum_g part[g][0][d],  dbeta[d] (+)= sum_g part[g][1][d].
 * A block per tile of FIN_COLS columns; slice y of FIN_SLICES adds chunks
 * y, y + FIN_SLICES, ... in order, then the slice sums are added in slice
 * order: a fixed order, so reruns agree bit for bit. (One thread per
 * column walking all G chunks took 33 us at BERT-large's G 512, D 1024:
 * 1.6 ms of a 28 ms step; docs/kernels.md, "BERT-large, one GPU".) */
constexpr int FIN_COLS = 32, FIN_SLICES = 16;

__global__ void __launch_bounds__(FIN_COLS *FIN_SLICES)
    ln_bwd_finish_kernel(float *dgamma, float *dbeta, const float *part, size_t G, int D,
                         int accum_gamma, int accum_beta)
{
    __shared__ float sg[FIN_SLICES][FIN_COLS + 1], sb[FIN_SLICES][FIN_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, d = blockIdx.x * FIN_COLS + tx;
    float a = 0.0f, b = 0.0f;
    if (d < D)
        for (size_t g = ty; g < G; g += FIN_SLICES) {
            a += part[g * 2 * D + d];
            b += part[g * 2 * D + D + d];
        }
    sg[ty][tx] = a;
    sb[ty][tx] = b;
    __syncthreads();
    if (ty != 0 || d >= D) return;
    a = 0.0f;
    b = 0.0f;
    for (int y = 0; y < FIN_SLICES; y++) {
        a += sg[y][tx];
        b += sb[y][tx];
    }
    if (dgamma) dgamma[d] = accum_gamma ? dgamma[d] + a : a;
    if (dbeta) dbeta[d] = accum_beta ? dbeta[d] + b : b;
}

/* ---- vector kernels ---- */

/* gamma (or beta) of a lane's V columns c V .. c V + V - 1, as V / 4
 * 16-byte loads (p 16-byte aligned: ln_vec_nv checks). Loaded a float at a
 * time, the 32 lanes of a warp, V floats apart, each used 4 bytes of a
 * 32-byte sector: ncu counted 78% of the backward's sectors excess and put
 * its L1 at 66% busy on these loads alone (docs/kernels.md). The values
 * are the same, so are the bits. */
template <int V>
__device__ __forceinline__ void ln_params(float v[V], const float *__restrict__ p, int c)
{
    const float4 *q = reinterpret_cast<const float4 *>(p + (size_t)c * V);
#pragma unroll
    for (int i = 0; i < V / 4; i++) {
        const float4 t = __ldg(q + i);
        v[4 * i] = t.x;
        v[4 * i + 1] = t.y;
        v[4 * i + 2] = t.z;
        v[4 * i + 3] = t.w;
    }
}

/* The vector backward's per-element arithmetic, every rounding pinned so
 * that the kernels that share it (ln_bwd_vec_kernel, ln_bwd_dx_vec_kernel)
 * give the same bits whatever the compiler contracts:
 *   xhat = (x - mean) invstd;   g = dy gamma;   s1 += g;   s2 += g xhat
 *   ds = invstd ((g - s1 / D) - xhat (s2 / D)) */
__device__ __forceinline__ float ln_xhat(float x, float mu, float is)
{
    return __fmul_rn(__fsub_rn(x, mu), is);
}

__device__ __forceinline__ void ln_row_sums(float &s1, float &s2, float dv, float gm, float xh)
{
    const float g = __fmul_rn(dv, gm);
    s1 = __fadd_rn(s1, g);
    s2 = __fmaf_rn(g, xh, s2);
}

__device__ __forceinline__ float ln_ds(float dv, float gm, float xh, float m1, float m2, float is)
{
    return __fmul_rn(is, __fsub_rn(__fsub_rn(__fmul_rn(dv, gm), m1), __fmul_rn(xh, m2)));
}

constexpr int LN_BWD_WARPS = 8;
static_assert(LN_BWD_WARPS * 32 == FP8_THREADS,
              "the codes form's block_amax_atomic reduces FP8_THREADS threads a block");

/* The dropout and residual add fused in front of LayerNorm (add_norm_*_cuda,
 * FUSED kernels): forward s = x + dropout(z), each step rounded to T as the
 * separate ops round, s saved for the backward; backward the rounded ds into
 * dx (the residual's gradient) and dropout's backward of it into dz. The
 * mask is dropout.cu's (ops/dropout_mask.h): element i keeps when byte i % 16
 * of Philox(offset + i / 16) is at least thr. The forward may also write the
 * mask as keep bits (one byte a 16-byte vector: bit k of byte i / V is element
 * i's, i % V = k), which the backward then reads instead of drawing Philox
 * again. */
struct LnDrop {
    const void *z;           /* forward: dropout's input */
    void *s_out;             /* forward: x + dropout(z) */
    uint8_t *bits_out;       /* forward: the keep bits, or NULL */
    void *dz;                /* backward: dropout input's gradient, or NULL */
    const uint8_t *bits;     /* backward: the forward's keep bits, or NULL (drawn again) */
    int accum_z;
    uint32_t thr;            /* ops/dropout_mask.h: drop_threshold(p) */
    float scale;             /* drop_scale(p) */
    uint64_t seed, offset;
    const uint64_t *base;    /* inside a CUDA graph: the step's Philox base */
    /* backward, the codes form (CODES kernels, add_norm_backward_codes_cuda): dz's
     * E5M2 codes instead of dz, as the FP8 Linear's cast would make them */
    uint8_t *q;              /* the codes [R, D] */
    float *amax;             /* the running amax, raised to max |dz| */
    const float *qscale;     /* the cast's scale (device) */
    float *zpart;            /* the column partials of dz [G, D], one row a chunk */
};

/* keep[k] for the V elements from i0 (a multiple of V, V <= 16, so within
 * one sixteen-element group): its Philox call's bits, shifted to i0 */
template <int V>
__device__ __forceinline__ void ln_keep(bool keep[V], const LnDrop &d, uint64_t offset,
                                        size_t i0)
{
    const unsigned kb = drop_keep16(d.seed, offset, i0 >> 4, d.thr) >> (i0 & 15);
#pragma unroll
    for (int k = 0; k < V; k++) keep[k] = (kb >> k) & 1u;
}

/* One row r of the vector forward (a warp; lane l holds vectors l, l + 32,
 * ...): with FUSED, s = x + dropout(z) first (saved, the keep bits too); y
 * written, and out(c, o) called with each vector c of y as stored, for a
 * kernel that also makes something of y (the codes form below); mean and
 * invstd by lane 0. */
template <typename T, int NV, bool FUSED, typename Out>
__device__ __forceinline__ void ln_fwd_vec_row(T *y, float *mean, float *invstd, const T *x,
                                               const float *gamma, const float *beta, float eps,
                                               size_t r, int lane, int D, const LnDrop &drop,
                                               uint64_t offset, Out out)
{
    constexpr int V = 16 / (int)sizeof(T);
    const int nvec = D / V;
    const Vec<T, V> *xr = reinterpret_cast<const Vec<T, V> *>(x + r * (size_t)D);
    float v[NV][V];
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int c = lane + 32 * j;
        Vec<T, V> a;
        if (c < nvec) a = xr[c];
        if constexpr (FUSED) { /* a = round(x + round(keep ? z * scale : 0)), saved */
            if (c < nvec) {
                const Vec<T, V> b = reinterpret_cast<const Vec<T, V> *>(
                    (const T *)drop.z + r * (size_t)D)[c];
                bool keep[V];
                ln_keep<V>(keep, drop, offset, r * (size_t)D + (size_t)c * V);
                if (drop.bits_out) {
                    unsigned kb = 0;
#pragma unroll
                    for (int k = 0; k < V; k++) kb |= (unsigned)keep[k] << k;
                    drop.bits_out[r * (size_t)nvec + c] = (uint8_t)kb;
                }
#pragma unroll
                for (int k = 0; k < V; k++) {
                    /* __fmul_rn / __fadd_rn: never contracted into one FMA, as the
                     * separate kernels cannot be */
                    const float d =
                        keep[k] ? to_f32(from_f32<T>(__fmul_rn(to_f32(b.v[k]), drop.scale)))
                                : 0.0f;
                    a.v[k] = from_f32<T>(__fadd_rn(to_f32(a.v[k]), d));
                }
                reinterpret_cast<Vec<T, V> *>((T *)drop.s_out + r * (size_t)D)[c] = a;
            }
        }
#pragma unroll
        for (int k = 0; k < V; k++) {
            v[j][k] = c < nvec ? to_f32(a.v[k]) : 0.0f;
            s += v[j][k];
        }
    }
    const float mu = warp_sum(s) / (float)D;
    float q = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++)
        if (lane + 32 * j < nvec)
#pragma unroll
            for (int k = 0; k < V; k++) {
                const float t = v[j][k] - mu;
                q += t * t;
            }
    const float is = 1.0f / sqrtf(warp_sum(q) / (float)D + eps);
    Vec<T, V> *yr = reinterpret_cast<Vec<T, V> *>(y + r * (size_t)D);
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int c = lane + 32 * j;
        if (c >= nvec) continue;
        Vec<T, V> o;
        float gm[V], bt[V];
        ln_params<V>(gm, gamma, c);
        ln_params<V>(bt, beta, c);
#pragma unroll
        for (int k = 0; k < V; k++) o.v[k] = from_f32<T>((v[j][k] - mu) * is * gm[k] + bt[k]);
        yr[c] = o;
        out(c, o);
    }
    if (lane == 0) {
        mean[r] = mu;
        invstd[r] = is;
    }
}

template <typename T, int NV, bool FUSED>
__global__ void __launch_bounds__(LN_FWD_WARPS * 32)
    ln_fwd_vec_kernel(T *y, float *mean, float *invstd, const T *x, const float *gamma,
                      const float *beta, float eps, size_t R, int D, LnDrop drop)
{
    const size_t r = (size_t)blockIdx.x * LN_FWD_WARPS + (threadIdx.x >> 5);
    if (r >= R) return; /* the whole warp */
    uint64_t offset = drop.offset;
    if (FUSED && drop.base) offset += *drop.base;
    ln_fwd_vec_row<T, NV, FUSED>(y, mean, invstd, x, gamma, beta, eps, r, threadIdx.x & 31, D,
                                 drop, offset, [](int, const Vec<T, (int)(16 / sizeof(T))> &) {});
}

/* The fused forward that also writes y's E4M3 codes for the FP8 Linear that
 * reads y (add_norm_forward_codes_cuda): LN_CODES_ROWS rows a block,
 * LN_CODES_ROWS / LN_FWD_WARPS a warp one after another, D = 32 NV V (the
 * straight-line width). Each vector of y, as stored, gives its codes at
 * *scale by the cast's rule (fp8_codes_vec: the same codes and amax as
 * fp8_cast_transpose_cuda reading y), written row-major into q and into the
 * block's tile in shared memory; once the block's rows are done the tile
 * goes out along its columns into qt [D, R]: a thread two columns apart
 * from the next pair, 16 rows of one column (16 bytes; a pair of threads a
 * 32-byte sector), and the block's max |y| is raised into *amax (NULL: not
 * recorded). 32 rows a block keep the grid in about two full waves at
 * BERT-large's 32,768 rows (four blocks an SM: at most 64 registers). */
constexpr int LN_CODES_ROWS = 32;
static_assert(LN_FWD_WARPS * 32 == FP8_THREADS,
              "the codes form's amax takes FP8_THREADS threads a block");

template <typename T, int NV>
__global__ void __launch_bounds__(LN_FWD_WARPS * 32, 4)
    ln_fwd_codes_kernel(T *y, float *mean, float *invstd, const T *x, const float *gamma,
                        const float *beta, float eps, size_t R, LnDrop drop, uint8_t *q,
                        uint8_t *qt, float *amax, const float *scale)
{
    constexpr int V = 16 / (int)sizeof(T), D = 32 * NV * V, PITCH = D + 4;
    __shared__ __align__(16) uint8_t tile[LN_CODES_ROWS][PITCH];
    const float sc = *scale;
    const bool s_ok = isfinite(sc) && sc != 0.0f;   /* as the cast: else the exact path */
    uint64_t offset = drop.offset;
    if (drop.base) offset += *drop.base;
    const size_t r0 = (size_t)blockIdx.x * LN_CODES_ROWS;
    const int lane = threadIdx.x & 31;
    float m = 0.0f;
    for (int i = threadIdx.x >> 5; i < LN_CODES_ROWS; i += LN_FWD_WARPS) {
        const size_t r = r0 + (size_t)i;
        ln_fwd_vec_row<T, NV, true>(
            y, mean, invstd, x, gamma, beta, eps, r, lane, D, drop, offset,
            [&](int c, const Vec<T, V> &o) {
                float v[V], vmax = 0.0f;
#pragma unroll
                for (int k = 0; k < V; k++) {
                    v[k] = to_f32(o.v[k]);
                    vmax = max_nan(vmax, fabsf(v[k]));
                }
                union { uint16_t h[V / 2]; uint32_t w[V / 4]; } code;
                fp8_codes_vec<0, V>(code.h, &m, v, vmax, sc, s_ok);
                uint8_t *qr = q + r * (size_t)D + (size_t)c * V;
#pragma unroll
                for (int k = 0; k < V / 4; k++) *(uint32_t *)&tile[i][c * V + 4 * k] = code.w[k];
                if constexpr (V == 8)
                    *(uint2 *)qr = make_uint2(code.w[0], code.w[1]);
                else
                    *(uint32_t *)qr = code.w[0];
            });
    }
    __syncthreads();
    static_assert(LN_CODES_ROWS == 32, "a column's 32 rows: two threads of 16");
    const int seg = threadIdx.x & 1;
#pragma unroll 1
    for (int c = threadIdx.x >> 1; c < D; c += LN_FWD_WARPS * 16) {
        union { uint8_t b[16]; uint4 u; } out;
#pragma unroll
        for (int k = 0; k < 16; k++) out.b[k] = tile[16 * seg + k][c];
        *(uint4 *)(qt + (size_t)c * R + r0 + 16 * (size_t)seg) = out.u;
    }
    if (amax) block_amax_atomic(m, amax);
}

/* part: [gridDim.x][2][D] chunk partials (dgamma's, then dbeta's), or NULL;
 * shared memory LN_BWD_WARPS x 2 D floats when part (ln_bwd_vec_smem).
 *
 * Registers: a lane holds its row as the raw 16-byte vectors of x and dy
 * (2 NV of them) and makes xhat and dy in f32 again for the second pass;
 * its dgamma / dbeta partials live in its warp's slice of shared memory,
 * [2][V][D / V], where only it touches its columns: column c V + k at
 * k (D / V) + c, so a warp's 32 lanes (32 consecutive c) hit 32 banks (laid
 * out as the columns, lanes V floats apart made each access 8-way
 * conflicted). Kept in registers instead
 * (the first version) they took 216 registers at D = 1024 in bf16 (one block
 * an SM, 12.5% occupancy) and the kernel ran at a fifth of the bandwidth;
 * now 128, no spills, two blocks an SM (64 KiB of shared memory each).
 * The sums are the same in the same order (each warp its rows in turn, then
 * the warps' slices in warp order), so the bits are the first version's.
 *
 * FULL: the row exactly 32 NV vectors (no lane past its end: D 256, 512 or
 * 1,024 in f16 / bf16, BERT-large's 1,024 among them; 128, 256 or 512 in
 * f32), the partials wanted, and (FUSED) the forward's keep bits read rather
 * than Philox drawn, compiled as straight-line code. BERT-base's 768 (96
 * vectors on 4 a lane) keeps the general form, which tests each vector
 * against the row's end and each element for the partials and the mask's
 * source; those branches cut the code into small blocks the scheduler
 * cannot interleave. Same arithmetic, same order: the same bits. */
constexpr size_t ln_bwd_vec_smem(int D, bool codes = false)
{
    return (size_t)LN_BWD_WARPS * (codes ? 3 : 2) * D * sizeof(float);
}

/* CODES (with FUSED and FULL): dz as the FP8 Linear behind it would cast it
 * for its backward (ops/linear_fp8.h, "The gradient's codes"): each value
 * rounded to T as dz would be stored, its E5M2 code at drop.qscale into
 * drop.q (row-major, 16 / sizeof(T) codes a vector: the bits the separate
 * cast writes), the block's max |dz| raised into drop.amax, and dz's column
 * sums as partials beside dgamma's and dbeta's (a third [D] slice a warp:
 * 96 KiB at D = 1,024, still two blocks an SM), added in the same order:
 * each warp its rows, then the warps in order, one row a chunk in
 * drop.zpart for the finish. dz itself is never written. */
template <typename T, int NV, bool FUSED, bool FULL, bool CODES = false>
__global__ void __launch_bounds__(LN_BWD_WARPS * 32, 2)
    ln_bwd_vec_kernel(T *dx, float *part, const T *dy, const T *x, const float *mean,
                      const float *invstd, const float *gamma, size_t R, int D,
                      size_t rows_per_chunk, int accum_x, LnDrop drop)
{
    static_assert(!CODES || (FUSED && FULL), "the codes form is the fused FULL kernel's");
    constexpr int V = 16 / (int)sizeof(T), NA = CODES ? 3 : 2;
    extern __shared__ float sh[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nvec = FULL ? 32 * NV : D / V;
    const bool has_part = FULL || part != nullptr;
    const bool want_dz = CODES || (FUSED && drop.dz != nullptr);
    const auto in_row = [nvec](int c) { return FULL || c < nvec; };   /* vector c inside */
    const uint8_t *bits = FUSED ? drop.bits : nullptr;
    /* this warp's [NA][D]: dgamma's, dbeta's (and dz's column sums) */
    float *acc = sh + (size_t)w * NA * D;
    float qs = 0.0f, qm = 0.0f;   /* CODES: the scale, this thread's max |dz| */
    bool qs_ok = false;
    if constexpr (CODES) {
        qs = *drop.qscale;
        qs_ok = isfinite(qs) && qs != 0.0f;
    }
    if (has_part)
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int c = lane + 32 * j;
            if (in_row(c))
#pragma unroll
                for (int k = 0; k < V; k++) {
                    acc[k * nvec + c] = acc[D + k * nvec + c] = 0.0f;
                    if constexpr (CODES) acc[2 * D + k * nvec + c] = 0.0f;
                }
        }
    const size_t r0 = (size_t)blockIdx.x * rows_per_chunk;
    const size_t r1 = r0 + rows_per_chunk < R ? r0 + rows_per_chunk : R;
    for (size_t r = r0 + w; r < r1; r += LN_BWD_WARPS) {
        const Vec<T, V> *xr = reinterpret_cast<const Vec<T, V> *>(x + r * (size_t)D);
        const Vec<T, V> *dyr = reinterpret_cast<const Vec<T, V> *>(dy + r * (size_t)D);
        const float mu = mean[r], is = invstd[r];
        Vec<T, V> xa[NV], da[NV];
        unsigned kb[NV];   /* FUSED with saved bits: the forward's keep bits */
        float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int c = lane + 32 * j;
            if (in_row(c)) {
                xa[j] = xr[c];
                da[j] = dyr[c];
                if (FUSED && (FULL || bits) && want_dz) kb[j] = bits[r * (size_t)nvec + c];
            }
        }
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int c = lane + 32 * j;
            const bool in = in_row(c);
            float gm[V] = {};
            if (in) ln_params<V>(gm, gamma, c);
#pragma unroll
            for (int k = 0; k < V; k++) {
                const float xh = in ? ln_xhat(to_f32(xa[j].v[k]), mu, is) : 0.0f;
                const float dv = in ? to_f32(da[j].v[k]) : 0.0f;
                ln_row_sums(s1, s2, dv, gm[k], xh);
                if (has_part && in) {
                    float *g = acc + k * nvec + c;   /* lanes side by side: no bank conflict */
                    g[0] += dv * xh;
                    g[D] += dv;
                }
            }
        }
        if (!dx && !want_dz) continue; /* uniform over the block */
        const float m1 = warp_sum(s1) / (float)D, m2 = warp_sum(s2) / (float)D;
        Vec<T, V> *dxr = dx ? reinterpret_cast<Vec<T, V> *>(dx + r * (size_t)D) : nullptr;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int c = lane + 32 * j;
            if (!in_row(c)) continue;
            Vec<T, V> o, old;
            if (dx && accum_x) old = dxr[c];
            float ds[V], gm[V];
            ln_params<V>(gm, gamma, c);
#pragma unroll
            for (int k = 0; k < V; k++) {
                const float xh = ln_xhat(to_f32(xa[j].v[k]), mu, is);
                ds[k] = ln_ds(to_f32(da[j].v[k]), gm[k], xh, m1, m2, is);
                float val = ds[k];
                if constexpr (FUSED) {
                    /* as the separate ops store ds, then add it (no FMA across) */
                    ds[k] = to_f32(from_f32<T>(ds[k]));
                    val = dx && accum_x ? __fadd_rn(ds[k], to_f32(old.v[k])) : ds[k];
                } else if (dx && accum_x) {
                    val = __fadd_rn(val, to_f32(old.v[k]));
                }
                o.v[k] = from_f32<T>(val);
            }
            if (dx) dxr[c] = o;
            if constexpr (FUSED) { /* dz (+)= keep ? ds * scale : 0 */
                if (want_dz) {
                    Vec<T, V> *dzr = CODES ? nullptr
                                           : reinterpret_cast<Vec<T, V> *>((T *)drop.dz +
                                                                           r * (size_t)D);
                    Vec<T, V> zo, zold;
                    if (!CODES && drop.accum_z) zold = dzr[c];
                    bool keep[V];
                    if (FULL || bits) {
#pragma unroll
                        for (int k = 0; k < V; k++) keep[k] = (kb[j] >> k) & 1u;
                    } else {
                        uint64_t offset = drop.offset;
                        if (drop.base) offset += *drop.base;
                        ln_keep<V>(keep, drop, offset, r * (size_t)D + (size_t)c * V);
                    }
#pragma unroll
                    for (int k = 0; k < V; k++) {
                        float val = keep[k] ? __fmul_rn(ds[k], drop.scale) : 0.0f;
                        if (!CODES && drop.accum_z) val = __fadd_rn(val, to_f32(zold.v[k]));
                        zo.v[k] = from_f32<T>(val);
                    }
                    if constexpr (CODES) {
                        /* the codes of dz's stored values, as the cast reads them */
                        float v[V], vmax = 0.0f;
#pragma unroll
                        for (int k = 0; k < V; k++) {
                            v[k] = to_f32(zo.v[k]);
                            vmax = max_nan(vmax, fabsf(v[k]));
                            acc[2 * D + k * nvec + c] += v[k];
                        }
                        union { uint16_t h[V / 2]; uint32_t w[V / 4]; } code;
                        fp8_codes_vec<1, V>(code.h, &qm, v, vmax, qs, qs_ok);
                        uint8_t *qr = drop.q + r * (size_t)D + (size_t)c * V;
                        if constexpr (V == 8)
                            *(uint2 *)qr = make_uint2(code.w[0], code.w[1]);
                        else
                            *(uint32_t *)qr = code.w[0];
                    } else {
                        dzr[c] = zo;
                    }
                }
            }
        }
    }
    if constexpr (CODES) block_amax_atomic(qm, drop.amax);   /* every thread: FULL */
    if (!has_part) return;
    /* the warps' slices added in warp order, column by column */
    __syncthreads();
    float *out = part + (size_t)blockIdx.x * 2 * D;
    for (int i = threadIdx.x; i < NA * D; i += blockDim.x) {   /* i: a slice position */
        float v = sh[i];
        for (int step = 1; step < LN_BWD_WARPS; step++) v = v + sh[(size_t)step * NA * D + i];
        const int h = i / D, p = i - h * D, k = p / nvec, c = p - k * nvec;
        if (CODES && h == 2)
            drop.zpart[(size_t)blockIdx.x * D + c * V + k] = v;
        else
            out[h * D + c * V + k] = v;   /* column c V + k */
    }
}

/* Launches ln_bwd_vec_kernel with sm bytes of shared memory (smem_optin
 * above the 48 KiB default). */
template <typename T, int NV, bool FUSED, bool FULL, bool CODES = false>
static void ln_bwd_vec_launch_as(unsigned G, size_t sm, cudaStream_t s, T *dx, float *part,
                                 const T *dy, const T *x, const float *mean,
                                 const float *invstd, const float *gamma, size_t R, int D,
                                 size_t rows_per_chunk, int accum_x, const LnDrop &drop)
{
    smem_optin(ln_bwd_vec_kernel<T, NV, FUSED, FULL, CODES>, sm);
    ln_bwd_vec_kernel<T, NV, FUSED, FULL, CODES><<<G, LN_BWD_WARPS * 32, sm, s>>>(
        dx, part, dy, x, mean, invstd, gamma, R, D, rows_per_chunk, accum_x, drop);
    CUDA_CHECK_LAUNCH();
}

/* The FULL form where the call is that shape (the kernel's comment), else
 * the general one. */
template <typename T, int NV, bool FUSED>
static void ln_bwd_vec_launch(unsigned G, size_t sm, cudaStream_t s, T *dx, float *part,
                              const T *dy, const T *x, const float *mean, const float *invstd,
                              const float *gamma, size_t R, int D, size_t rows_per_chunk,
                              int accum_x, const LnDrop &drop)
{
    constexpr int V = 16 / (int)sizeof(T);
    const bool full = D == 32 * NV * V && part && (!FUSED || !drop.dz || drop.bits);
    if (full)
        ln_bwd_vec_launch_as<T, NV, FUSED, true>(G, sm, s, dx, part, dy, x, mean, invstd, gamma,
                                                 R, D, rows_per_chunk, accum_x, drop);
    else
        ln_bwd_vec_launch_as<T, NV, FUSED, false>(G, sm, s, dx, part, dy, x, mean, invstd,
                                                  gamma, R, D, rows_per_chunk, accum_x, drop);
}

/* ---- split backward (CTRAIN_LN_KERNELS=split) ----
 * The vector backward above keeps a lane's dgamma/dbeta partials (2 NV V
 * floats) in registers beside the row: 186 registers at D = 1024 in bf16,
 * one block an SM. Split, the row kernel only makes dx (the row held as
 * raw 16-byte vectors, xhat and dy made again for the second pass), and a
 * second kernel reads x and dy again for the column sums with V columns a
 * thread: more bytes (x and dy twice), far fewer registers a thread. */

constexpr int LN_DX_WARPS = 4;

/* dx (+)= invstd (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)), a
 * warp a row: the vector kernel's dx, the same sums in the same order. */
template <typename T, int NV>
__global__ void __launch_bounds__(LN_DX_WARPS * 32)
    ln_bwd_dx_vec_kernel(T *dx, const T *dy, const T *x, const float *mean, const float *invstd,
                         const float *gamma, size_t R, int D, int accum_x)
{
    constexpr int V = 16 / (int)sizeof(T);
    const int lane = threadIdx.x & 31, nvec = D / V;
    const size_t r = (size_t)blockIdx.x * LN_DX_WARPS + (threadIdx.x >> 5);
    if (r >= R) return;
    const Vec<T, V> *xr = reinterpret_cast<const Vec<T, V> *>(x + r * (size_t)D);
    const Vec<T, V> *dyr = reinterpret_cast<const Vec<T, V> *>(dy + r * (size_t)D);
    const float mu = mean[r], is = invstd[r];
    Vec<T, V> a[NV], b[NV];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int c = lane + 32 * j;
        if (c < nvec) {
            a[j] = xr[c];
            b[j] = dyr[c];
        }
        float gm[V] = {};
        if (c < nvec) ln_params<V>(gm, gamma, c);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const float xh = c < nvec ? ln_xhat(to_f32(a[j].v[k]), mu, is) : 0.0f;
            ln_row_sums(s1, s2, c < nvec ? to_f32(b[j].v[k]) : 0.0f, gm[k], xh);
        }
    }
    const float m1 = warp_sum(s1) / (float)D, m2 = warp_sum(s2) / (float)D;
    Vec<T, V> *dxr = reinterpret_cast<Vec<T, V> *>(dx + r * (size_t)D);
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int c = lane + 32 * j;
        if (c >= nvec) continue;
        Vec<T, V> o, old;
        if (accum_x) old = dxr[c];
        float gm[V];
        ln_params<V>(gm, gamma, c);
#pragma unroll
        for (int k = 0; k < V; k++) {
            const float xh = ln_xhat(to_f32(a[j].v[k]), mu, is);
            float val = ln_ds(to_f32(b[j].v[k]), gm[k], xh, m1, m2, is);
            if (accum_x) val = __fadd_rn(val, to_f32(old.v[k]));
            o.v[k] = from_f32<T>(val);
        }
        dxr[c] = o;
    }
}

/* The column partials of chunk blockIdx.x: part[g][0][d] = sum dy xhat,
 * part[g][1][d] = sum dy over its rows (the layout ln_bwd_finish_kernel
 * adds). A thread owns V columns (vector cv); nvec = D / V <= 256 threads
 * cover a row (the caller sends at most 128), 256 / nvec rows at a time;
 * the row lanes are added by a fixed tree. */
template <typename T>
__global__ void __launch_bounds__(256)
    ln_param_partial_kernel(float *part, const T *dy, const T *x, const float *mean,
                            const float *invstd, size_t R, int D, size_t rows_per_chunk)
{
    constexpr int V = 16 / (int)sizeof(T);
    __shared__ float sg[256 * V], sb[256 * V];
    const unsigned nvec = (unsigned)D / V, lanes = 256 / nvec, t = threadIdx.x;
    const unsigned cv = t % nvec, lane = t / nvec;
    float pg[V], pb[V];
#pragma unroll
    for (int k = 0; k < V; k++) pg[k] = pb[k] = 0.0f;
    const size_t r0 = (size_t)blockIdx.x * rows_per_chunk;
    const size_t r1 = r0 + rows_per_chunk < R ? r0 + rows_per_chunk : R;
    if (lane < lanes) {
        const Vec<T, V> *xv = reinterpret_cast<const Vec<T, V> *>(x);
        const Vec<T, V> *dv = reinterpret_cast<const Vec<T, V> *>(dy);
#pragma unroll 2
        for (size_t r = r0 + lane; r < r1; r += lanes) {
            const Vec<T, V> a = xv[r * nvec + cv], b = dv[r * nvec + cv];
            const float mu = mean[r], is = invstd[r];
#pragma unroll
            for (int k = 0; k < V; k++) {
                const float xh = (to_f32(a.v[k]) - mu) * is, d = to_f32(b.v[k]);
                pg[k] += d * xh;
                pb[k] += d;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < V; k++) {
        sg[t * V + k] = pg[k];
        sb[t * V + k] = pb[k];
    }
    __syncthreads();
    unsigned top = 1;
    while (top < lanes) top <<= 1;
    for (unsigned h = top >> 1; h > 0; h >>= 1) {
        if (lane < h && lane + h < lanes) {
            const unsigned o = (t + h * nvec) * V;
#pragma unroll
            for (int k = 0; k < V; k++) {
                sg[t * V + k] += sg[o + k];
                sb[t * V + k] += sb[o + k];
            }
        }
        __syncthreads();
    }
    if (lane != 0) return;
    float *out = part + (size_t)blockIdx.x * 2 * D;
#pragma unroll
    for (int k = 0; k < V; k++) {
        out[cv * V + k] = sg[t * V + k];
        out[D + cv * V + k] = sb[t * V + k];
    }
}

/* The vector kernels serve these rows: D a multiple of V within the
 * register budget, every row pointer and gamma, beta 16-byte aligned. */
static int ln_vec_nv(DType dt, size_t D, int max_nv, const void *const *ptrs, int n)
{
    const size_t V = 16 / dtype_size(dt), nvec = D / V;
    if (D % V != 0 || nvec == 0) return 0;
    for (int i = 0; i < n; i++)
        if (ptrs[i] && ((uintptr_t)ptrs[i] & 15u) != 0) return 0;
    const size_t per_lane = (nvec + 31) / 32;
    for (int nv = 1; nv <= max_nv; nv *= 2)
        if (per_lane <= (size_t)nv) return nv;
    return 0;
}

/* f(std::integral_constant<int, NV>) for NV in 1, 2, 4 (and 8 when MAX is). */
template <int MAX, typename F> void dispatch_nv(int nv, F f)
{
    switch (nv) {
    case 1: f(std::integral_constant<int, 1>()); break;
    case 2: f(std::integral_constant<int, 2>()); break;
    case 4: f(std::integral_constant<int, 4>()); break;
    default:
        if constexpr (MAX >= 8) f(std::integral_constant<int, 8>());
        else ct_fatal("layernorm: %d vectors a lane, more than the kernels' %d", nv, MAX);
        break;
    }
}

/* CTRAIN_LN_KERNELS: 0 row, 1 vec, 2 auto (vec from LN_VEC_AUTO_ROWS rows up),
 * 3 split (the forward vec, the backward split where it fits); -1: not read
 * yet. */
int ln_kernels_vec = -1;

/* auto's threshold. The vector kernels hold a row a warp (the backward's
 * block of 8 warps took 186 registers a lane at D = 1024 in bf16 when this
 * was measured: one block an SM; 128 and two blocks since), so a call needs
 * many rows before enough warps are in flight to cover memory latency:
 * BERT-large bf16 at 4,096 rows a call (bs 32, seq 128) ran 6% slower on
 * them, at 32,768 (bs 256) 5% faster (docs/kernels.md).
 * 16,384 rows (bs 32 at seq 512, bs 128 at seq 128) is the midpoint, not yet
 * a measured crossover. */
constexpr size_t LN_VEC_AUTO_ROWS = LAYERNORM_VEC_MIN_ROWS;

int ln_use_vec(size_t R)
{
    if (ln_kernels_vec < 0) ln_kernels_vec = setting_choice(SET_LN_KERNELS);
    return ln_kernels_vec == 1 || ln_kernels_vec == 3 ||
           (ln_kernels_vec == 2 && R >= LN_VEC_AUTO_ROWS);
}

} // namespace

extern "C" void layernorm_cuda_set_kernels(int vec) { ln_kernels_vec = vec >= 0 && vec <= 3 ? vec : 1; }

/* The forward; drop non-NULL: the fused add + dropout (vector kernels
 * only: returns 0, nothing done, when the rows do not suit them). */
static int ln_forward(void *y, float *mean, float *invstd, const void *x, const float *gamma,
                      const float *beta, DType dt, float eps, size_t R, size_t D,
                      const LnDrop *drop, cudaStream_t s)
{
    if (R == 0) return 1;
    CT_ASSERT(D > 0 && D <= 0x7fffffff, "layernorm_forward_cuda: D = %zu out of range", D);
    size_t blocks = (R + LN_FWD_WARPS - 1) / LN_FWD_WARPS;
    CT_ASSERT(blocks <= 0x7fffffffu, "layernorm_forward_cuda: R = %zu rows is too many", R);
    const void *ptrs[6] = {x, y, drop ? drop->z : NULL, drop ? drop->s_out : NULL, gamma, beta};
    /* fused: only rows its backward takes too (at most 4 vectors a lane) */
    const int nv = drop || ln_use_vec(R) ? ln_vec_nv(dt, D, drop ? 4 : 8, ptrs, 6) : 0;
    if (nv) {
        dispatch_float(dt, "layernorm_forward_cuda", [&](auto tag) {
            using T = decltype(tag);
            dispatch_nv<8>(nv, [&](auto nvc) {
                constexpr int NVC = decltype(nvc)::value;
                if (drop)
                    ln_fwd_vec_kernel<T, NVC, true><<<(unsigned)blocks, LN_FWD_WARPS * 32, 0, s>>>(
                        (T *)y, mean, invstd, (const T *)x, gamma, beta, eps, R, (int)D, *drop);
                else
                    ln_fwd_vec_kernel<T, NVC, false><<<(unsigned)blocks, LN_FWD_WARPS * 32, 0, s>>>(
                        (T *)y, mean, invstd, (const T *)x, gamma, beta, eps, R, (int)D, LnDrop{});
                CUDA_CHECK_LAUNCH();
            });
        });
        return 1;
    }
    if (drop) return 0;
    dispatch_float(dt, "layernorm_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        ln_fwd_kernel<T><<<(unsigned)blocks, LN_FWD_WARPS * 32, 0, s>>>(
            (T *)y, mean, invstd, (const T *)x, gamma, beta, eps, R, (int)D);
        CUDA_CHECK_LAUNCH();
    });
    return 1;
}

/* The backward's chunks of rows: about LN_BWD_TARGET_BLOCKS of them for the
 * row kernel, CTRAIN_LN_BWD_CHUNKS for the vector kernels (vec), at least
 * LN_BWD_MIN_ROWS rows each; returns how many (G), *rows_per_chunk. */
static size_t ln_bwd_chunks(size_t R, bool vec, size_t *rows_per_chunk)
{
    static size_t vec_target = 0;   /* read once */
    if (!vec_target) vec_target = (size_t)setting_int(SET_LN_BWD_CHUNKS);
    const size_t target = vec ? vec_target : LN_BWD_TARGET_BLOCKS;
    size_t k = (R + target - 1) / target;
    if (k < LN_BWD_MIN_ROWS) k = LN_BWD_MIN_ROWS;
    *rows_per_chunk = k;
    return (R + k - 1) / k;
}

/* The backward; drop non-NULL: the fused add + dropout's (vector kernels
 * only: returns 0, nothing done, when the rows do not suit them). */
static int ln_backward(void *dx, float *dgamma, float *dbeta, const void *dy, const void *x,
                       const float *mean, const float *invstd, const float *gamma, DType dt,
                       size_t R, size_t D, int accum_x, int accum_gamma, int accum_beta,
                       const LnDrop *drop, cudaStream_t s)
{
    if (D == 0) return 1;
    CT_ASSERT(D <= 0x7fffffff, "layernorm_backward_cuda: D = %zu out of range", D);
    const int want_params = dgamma != NULL || dbeta != NULL;
    const void *ptrs[5] = {dx, dy, x, drop ? drop->dz : NULL, gamma};
    const int nv = drop || ln_use_vec(R) ? ln_vec_nv(dt, D, 4, ptrs, 5) : 0;
    if (drop && !nv) return 0;
    /* the codes form: only the fused FULL kernel's shape (its comment) */
    const bool codes = drop && drop->q;
    const size_t row_full = 32 * (size_t)nv * (16 / dtype_size(dt));
    if (codes && !(want_params && drop->bits && R > 0 && D == row_full)) return 0;
    if (R == 0) {
        if (dgamma && !accum_gamma) CUDA_CHECK(cudaMemsetAsync(dgamma, 0, D * sizeof(float), s));
        if (dbeta && !accum_beta) CUDA_CHECK(cudaMemsetAsync(dbeta, 0, D * sizeof(float), s));
        return 1;
    }
    if (!dx && !want_params && !(drop && drop->dz)) return 1;
    size_t rows_per_chunk;
    const int split = nv && !drop && ln_kernels_vec == 3;   /* nv: D / V <= 128 */
    const size_t G = ln_bwd_chunks(R, nv && !split, &rows_per_chunk);
    const int threads = threads_for(D, 256);
    const size_t acc_bytes = 2 * D * sizeof(float), red_bytes = 64 * sizeof(float);
    const int acc_in_shared = want_params && red_bytes + acc_bytes <= LN_SHARED_LIMIT;
    const size_t smem = red_bytes + (acc_in_shared ? acc_bytes : 0);
    float *part = NULL;
    if (want_params) CUDA_CHECK(cudaMallocAsync((void **)&part, G * acc_bytes, s));
    if (split) {
        dispatch_float(dt, "layernorm_backward_cuda", [&](auto tag) {
            using T = decltype(tag);
            if (dx)
                dispatch_nv<4>(nv, [&](auto nvc) {
                    constexpr int NVC = decltype(nvc)::value;
                    const size_t blocks = (R + LN_DX_WARPS - 1) / LN_DX_WARPS;
                    CT_ASSERT(blocks <= 0x7fffffffu, "layernorm_backward_cuda: R = %zu rows", R);
                    ln_bwd_dx_vec_kernel<T, NVC><<<(unsigned)blocks, LN_DX_WARPS * 32, 0, s>>>(
                        (T *)dx, (const T *)dy, (const T *)x, mean, invstd, gamma, R, (int)D,
                        accum_x);
                    CUDA_CHECK_LAUNCH();
                });
            if (want_params) {
                ln_param_partial_kernel<T><<<(unsigned)G, 256, 0, s>>>(
                    part, (const T *)dy, (const T *)x, mean, invstd, R, (int)D, rows_per_chunk);
                CUDA_CHECK_LAUNCH();
            }
        });
    } else if (nv) {
        dispatch_float(dt, "layernorm_backward_cuda", [&](auto tag) {
            using T = decltype(tag);
            dispatch_nv<4>(nv, [&](auto nvc) {
                constexpr int NVC = decltype(nvc)::value;
                const size_t sm = want_params ? ln_bwd_vec_smem((int)D, codes) : 0;
                if (codes)
                    ln_bwd_vec_launch_as<T, NVC, true, true, true>(
                        (unsigned)G, sm, s, (T *)dx, part, (const T *)dy, (const T *)x, mean,
                        invstd, gamma, R, (int)D, rows_per_chunk, accum_x, *drop);
                else if (drop)
                    ln_bwd_vec_launch<T, NVC, true>((unsigned)G, sm, s, (T *)dx, part,
                                                    (const T *)dy, (const T *)x, mean, invstd,
                                                    gamma, R, (int)D, rows_per_chunk, accum_x,
                                                    *drop);
                else
                    ln_bwd_vec_launch<T, NVC, false>((unsigned)G, sm, s, (T *)dx, part,
                                                     (const T *)dy, (const T *)x, mean, invstd,
                                                     gamma, R, (int)D, rows_per_chunk, accum_x,
                                                     LnDrop{});
            });
        });
    } else {
        dispatch_float(dt, "layernorm_backward_cuda", [&](auto tag) {
            using T = decltype(tag);
            ln_bwd_kernel<T><<<(unsigned)G, threads, smem, s>>>(
                (T *)dx, part, (const T *)dy, (const T *)x, mean, invstd, gamma, R, (int)D,
                rows_per_chunk, accum_x, acc_in_shared);
            CUDA_CHECK_LAUNCH();
        });
    }
    if (want_params) {
        ln_bwd_finish_kernel<<<(unsigned)((D + FIN_COLS - 1) / FIN_COLS),
                               dim3(FIN_COLS, FIN_SLICES), 0, s>>>(dgamma, dbeta, part, G,
                                                                    (int)D, accum_gamma,
                                                                    accum_beta);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaFreeAsync(part, s));
    }
    return 1;
}

extern "C" void layernorm_forward_cuda(void *y, float *mean, float *invstd, const void *x,
                                       const float *gamma, const float *beta, DType dt,
                                       float eps, size_t R, size_t D, cudaStream_t s)
{
    (void)ln_forward(y, mean, invstd, x, gamma, beta, dt, eps, R, D, NULL, s);
}

extern "C" void layernorm_backward_cuda(void *dx, float *dgamma, float *dbeta, const void *dy,
                                        const void *x, const float *mean,
                                        const float *invstd, const float *gamma, DType dt,
                                        size_t R, size_t D, int accum_x, int accum_gamma,
                                        int accum_beta, cudaStream_t s)
{
    (void)ln_backward(dx, dgamma, dbeta, dy, x, mean, invstd, gamma, dt, R, D, accum_x,
                      accum_gamma, accum_beta, NULL, s);
}

static LnDrop make_drop(float p, uint64_t seed, uint64_t offset, const uint64_t *base)
{
    LnDrop d;
    memset(&d, 0, sizeof d);
    d.thr = drop_threshold(p);
    d.scale = drop_scale(p);
    d.seed = seed;
    d.offset = offset;
    d.base = base;
    return d;
}

extern "C" int add_norm_forward_cuda(void *y, void *s_out, float *mean, float *invstd,
                                     const void *x, const void *z, const float *gamma,
                                     const float *beta, DType dt, float eps, float p,
                                     uint64_t seed, uint64_t offset, const uint64_t *base,
                                     void *bits, size_t R, size_t D, cudaStream_t s)
{
    LnDrop d = make_drop(p, seed, offset, base);
    d.z = z;
    d.s_out = s_out;
    d.bits_out = p > 0.0f ? (uint8_t *)bits : NULL;
    return ln_forward(y, mean, invstd, x, gamma, beta, dt, eps, R, D, &d, s);
}

extern "C" int add_norm_backward_cuda(void *dx, void *dz, float *dgamma, float *dbeta,
                                      const void *dy, const void *s_saved, const float *mean,
                                      const float *invstd, const float *gamma, DType dt, float p,
                                      uint64_t seed, uint64_t offset, const uint64_t *base,
                                      const void *bits, size_t R, size_t D, int accum_x,
                                      int accum_z, int accum_gamma, int accum_beta,
                                      cudaStream_t s)
{
    LnDrop d = make_drop(p, seed, offset, base);
    d.dz = dz;
    d.bits = p > 0.0f ? (const uint8_t *)bits : NULL;
    d.accum_z = accum_z;
    return ln_backward(dx, dgamma, dbeta, dy, s_saved, mean, invstd, gamma, dt, R, D, accum_x,
                       accum_gamma, accum_beta, &d, s);
}

extern "C" int add_norm_forward_codes_fits(DType dt, size_t R, size_t D)
{
    const size_t V = 16 / dtype_size(dt);
    return dt == DT_BF16 && R > 0 && R % LN_CODES_ROWS == 0 &&
           (D == 32 * V || D == 64 * V || D == 128 * V);
}

extern "C" int add_norm_forward_codes_cuda(void *y, void *s_out, float *mean, float *invstd,
                                           const void *x, const void *z, const float *gamma,
                                           const float *beta, DType dt, float eps, float p,
                                           uint64_t seed, uint64_t offset, const uint64_t *base,
                                           void *bits, uint8_t *q, uint8_t *qt, float *amax,
                                           const float *scale, size_t R, size_t D,
                                           cudaStream_t s)
{
    if (!add_norm_forward_codes_fits(dt, R, D)) return 0;
    const size_t nv = D / (16 / dtype_size(dt)) / 32;   /* 1, 2 or 4: the fit's widths */
    const void *ptrs[8] = {x, y, z, s_out, gamma, beta, q, qt};
    if (ln_vec_nv(dt, D, 4, ptrs, 8) != (int)nv) return 0;   /* a pointer not 16-byte aligned */
    CT_ASSERT(R / LN_CODES_ROWS <= 0x7fffffffu, "add_norm_forward_codes_cuda: R = %zu rows", R);
    LnDrop d = make_drop(p, seed, offset, base);
    d.z = z;
    d.s_out = s_out;
    d.bits_out = p > 0.0f ? (uint8_t *)bits : NULL;
    dispatch_nv<4>((int)nv, [&](auto nvc) {
        constexpr int NVC = decltype(nvc)::value;
        ln_fwd_codes_kernel<__nv_bfloat16, NVC>
            <<<(unsigned)(R / LN_CODES_ROWS), LN_FWD_WARPS * 32, 0, s>>>(
                (__nv_bfloat16 *)y, mean, invstd, (const __nv_bfloat16 *)x, gamma, beta, eps, R,
                d, q, qt, amax, scale);
        CUDA_CHECK_LAUNCH();
    });
    return 1;
}

extern "C" size_t add_norm_codes_partials(size_t R, size_t D)
{
    size_t k;
    return ln_bwd_chunks(R, true, &k) * D;   /* the codes form: the vector kernel */
}

extern "C" int add_norm_backward_codes_cuda(void *dx, uint8_t *q, float *amax,
                                            const float *qscale, float *zpart, float *dgamma,
                                            float *dbeta, const void *dy, const void *s_saved,
                                            const float *mean, const float *invstd,
                                            const float *gamma, DType dt, float p, uint64_t seed,
                                            uint64_t offset, const uint64_t *base,
                                            const void *bits, size_t R, size_t D, int accum_x,
                                            int accum_gamma, int accum_beta, cudaStream_t s)
{
    if (!(p > 0.0f) || !bits || !dgamma || !dbeta) return 0;   /* the FULL form's needs */
    LnDrop d = make_drop(p, seed, offset, base);
    d.bits = (const uint8_t *)bits;
    d.q = q;
    d.amax = amax;
    d.qscale = qscale;
    d.zpart = zpart;
    return ln_backward(dx, dgamma, dbeta, dy, s_saved, mean, invstd, gamma, dt, R, D, accum_x,
                       accum_gamma, accum_beta, &d, s);
}
