/* conv1x1_bn.cu — the 1 x 1 convolution with the batch norm around it (the
 * math, and when it runs: ops/conv1x1_bn.h; its host side: conv1x1_bn.c).
 *
 *   prologue  a[m, c] = E(relu(fma(y[m, c], s[c], b[c])))     (plain: y)
 *   GEMM      z[m, k] = E(sum_c a[m, c] w[k, c])               (mma.sync, f32)
 *   epilogue  part[tile][0][k] = sum of z[m, k], part[tile][1][k] = of z^2,
 *             over the tile's rows m < M, from z's stored values
 *   finish    sums[h][k] = part summed over tiles in two fixed-order passes
 *
 * A block: 8 warps as 4 (rows, 32 each) x 2 (channels, BN / 2 each) over a
 * tile of 128 rows x BN output channels; a warp holds 2 x (BN / 16) mma
 * accumulators. The grid is persistent (the blocks that fit, two an SM with
 * the largest shared-memory carveout): block i takes tiles i, i + grid, ...,
 * numbered with the channel slice fastest, so the blocks side by side read
 * the same rows of y (from L2 after the first). A tile is C / 64 chunks of
 * 64 input channels; the chunks of all of a block's tiles are one stream,
 * copied STAGES - 1 ahead with cp.async (y's 128 x 64 and w's BN x 64, each
 * row's 16-byte pieces at (piece ^ row % 8), so an ldmatrix's eight rows
 * fall in eight bank groups): the next tile's first chunks land while this
 * one's products and stores run. Rows past M are zero-filled, never stored
 * and left out of the sums. The prologue works on a's fragments after
 * ldmatrix (channels 2t, 2t + 1, 2t + 8, 2t + 9 of the k-step). z goes out
 * through a warp's 16 x 32 staging tile (rows 40 elements apart: the
 * fragments' 4-byte writes hit 32 banks), a row's 64 bytes as four 16-byte
 * stores. The sums: a lane's four rows, the eight lanes of a column by a
 * fixed butterfly, the four row warps in order.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_util.cuh"
#include "engine/error.h"
#include "mma_sm80.cuh"

namespace {

const int BM = 128;      /* rows a tile */
const int CK = 64;       /* input channels a chunk */
const int STAGES = 3;    /* chunks in flight */
const int THREADS = 256;
const int SP = 40;       /* staging tile row pitch (elements) */

template <int BN> constexpr int smem_bytes()
{
    return STAGES * (BM + BN) * CK * 2 + 4 * 2 * BN * 4 + 8 * 16 * SP * 2;
}

/* element (r, 8 p) of a swizzled 64-column tile */
__device__ __forceinline__ int swz(int r, int p) { return r * CK + ((p ^ (r & 7)) << 3); }

/* two elements of a (channels c, c + 1) through the prologue */
template <typename E> __device__ __forceinline__ uint32_t pro2(uint32_t w, float2 s, float2 b)
{
    const float2 f = unpack2<E>(w);
    return pack2<E>(fmaxf(__fmaf_rn(f.x, s.x, b.x), 0.0f), fmaxf(__fmaf_rn(f.y, s.y, b.y), 0.0f));
}

template <typename E, int BN>
__global__ void __launch_bounds__(THREADS, 2)
    conv1x1_bn_kernel(E *z, float *part, const E *y, const float *s, const float *b, const E *w,
                      int M, int C, int K)
{
    constexpr int WN = BN / 2, NT = WN / 8, MT = 2;
    extern __shared__ __align__(128) unsigned char smem[];
    E *As = reinterpret_cast<E *>(smem);
    E *Ws = As + STAGES * BM * CK;
    float *red = reinterpret_cast<float *>(Ws + STAGES * BN * CK); /* [4][2][BN] */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 3, wn = warp >> 2, g = lane >> 2, t = lane & 3;
    E *stg = reinterpret_cast<E *>(red + 4 * 2 * BN) + warp * 16 * SP;
    const int ntn = K / BN, tiles = (M + BM - 1) / BM * ntn, nck = C / CK;
    const int mine = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / gridDim.x + 1 : 0;
    const int total = mine * nck;
    const bool plain = s == nullptr;
    auto load = [&](int f) {
        const int tile = blockIdx.x + (f / nck) * gridDim.x, ck = f % nck;
        const int tm = tile / ntn, tn = tile % ntn;
        E *as = As + (f % STAGES) * BM * CK, *ws = Ws + (f % STAGES) * BN * CK;
#pragma unroll
        for (int q = 0; q < BM * 8 / THREADS; q++) {
            const int i = tid + q * THREADS, r = i >> 3, p = i & 7;
            const int row = tm * BM + r, ok = row < M;
            cp_async16(smem_u32(as + swz(r, p)), y + (size_t)(ok ? row : 0) * C + ck * CK + 8 * p,
                       ok);
        }
#pragma unroll
        for (int q = 0; q < BN * 8 / THREADS; q++) {
            const int i = tid + q * THREADS, r = i >> 3, p = i & 7;
            cp_async16(smem_u32(ws + swz(r, p)), w + (size_t)(tn * BN + r) * C + ck * CK + 8 * p,
                       true);
        }
    };
#pragma unroll
    for (int f = 0; f < STAGES - 1; f++) {
        if (f < total) load(f);
        cp_async_commit();
    }
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
    for (int f = 0; f < total; f++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); /* chunk f landed; stage (f - 1) % STAGES is read by every warp */
        if (f + STAGES - 1 < total) load(f + STAGES - 1);
        cp_async_commit();
        const E *as = As + (f % STAGES) * BM * CK, *ws = Ws + (f % STAGES) * BN * CK;
        const int ck = f % nck;
#pragma unroll
        for (int kk = 0; kk < CK; kk += 16) {
            uint32_t af[MT][4];
#pragma unroll
            for (int i = 0; i < MT; i++)
                ldsm_x4(af[i], smem_u32(as + swz(wm * 32 + 16 * i + (lane & 15),
                                                 (kk >> 3) + (lane >> 4))));
            if (!plain) {
                const int c = ck * CK + kk + 2 * t;
                const float2 s0 = __ldg(reinterpret_cast<const float2 *>(s + c));
                const float2 s1 = __ldg(reinterpret_cast<const float2 *>(s + c + 8));
                const float2 b0 = __ldg(reinterpret_cast<const float2 *>(b + c));
                const float2 b1 = __ldg(reinterpret_cast<const float2 *>(b + c + 8));
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    af[i][0] = pro2<E>(af[i][0], s0, b0);
                    af[i][1] = pro2<E>(af[i][1], s0, b0);
                    af[i][2] = pro2<E>(af[i][2], s1, b1);
                    af[i][3] = pro2<E>(af[i][3], s1, b1);
                }
            }
#pragma unroll
            for (int jj = 0; jj < NT / 2; jj++) {
                uint32_t bf[4];
                const int n = wn * WN + 16 * jj + (lane & 7) + ((lane >> 4) << 3);
                ldsm_x4(bf, smem_u32(ws + swz(n, (kk >> 3) + ((lane >> 3) & 1))));
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    mma16816<E>(acc[i][2 * jj], af[i], bf[0], bf[1]);
                    mma16816<E>(acc[i][2 * jj + 1], af[i], bf[2], bf[3]);
                }
            }
        }
        if (ck != nck - 1) continue;
        /* the tile's epilogue */
        const int tile = blockIdx.x + (f / nck) * gridDim.x, tm = tile / ntn, tn = tile % ntn;
#pragma unroll
        for (int h = 0; h < NT / 4; h++) {
            float sm[4][4] = {};
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const int row = tm * BM + wm * 32 + 16 * i;
                const bool lo_ok = row + g < M, hi_ok = row + g + 8 < M;
#pragma unroll
                for (int jl = 0; jl < 4; jl++) {
                    const int j = 4 * h + jl;
                    const uint32_t lo = pack2<E>(acc[i][j][0], acc[i][j][1]);
                    const uint32_t hi = pack2<E>(acc[i][j][2], acc[i][j][3]);
                    *reinterpret_cast<uint32_t *>(stg + g * SP + 8 * jl + 2 * t) = lo;
                    *reinterpret_cast<uint32_t *>(stg + (g + 8) * SP + 8 * jl + 2 * t) = hi;
                    const float2 f0 = lo_ok ? unpack2<E>(lo) : make_float2(0.0f, 0.0f);
                    const float2 f1 = hi_ok ? unpack2<E>(hi) : make_float2(0.0f, 0.0f);
                    sm[jl][0] += f0.x + f1.x;
                    sm[jl][1] += f0.y + f1.y;
                    sm[jl][2] += f0.x * f0.x + f1.x * f1.x;
                    sm[jl][3] += f0.y * f0.y + f1.y * f1.y;
                    acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;
                }
                __syncwarp();
                const int col = tn * BN + wn * WN + 32 * h;
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int e = lane + 32 * q, r = e >> 2, pc = e & 3;
                    if (row + r < M)
                        *reinterpret_cast<uint4 *>(z + (size_t)(row + r) * K + col + 8 * pc) =
                            *reinterpret_cast<const uint4 *>(stg + r * SP + 8 * pc);
                }
                __syncwarp();
            }
#pragma unroll
            for (int jl = 0; jl < 4; jl++) {
#pragma unroll
                for (int o = 4; o < 32; o <<= 1) /* over g: lanes t, t + 4, ..., t + 28 */
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        sm[jl][e] += __shfl_xor_sync(0xffffffffu, sm[jl][e], o);
                const int cl = wn * WN + 32 * h + 8 * jl + 2 * t;
                if (g == 0) {
                    red[(wm * 2 + 0) * BN + cl] = sm[jl][0];
                    red[(wm * 2 + 0) * BN + cl + 1] = sm[jl][1];
                    red[(wm * 2 + 1) * BN + cl] = sm[jl][2];
                    red[(wm * 2 + 1) * BN + cl + 1] = sm[jl][3];
                }
            }
        }
        __syncthreads(); /* red is whole (its next write comes after the loop's barrier) */
        for (int i = tid; i < 2 * BN; i += THREADS) {
            const int hh = i / BN, k = i % BN;
            float v = red[hh * BN + k];
            for (int q = 1; q < 4; q++) v += red[(q * 2 + hh) * BN + k];
            part[((size_t)tm * 2 + hh) * K + tn * BN + k] = v;
        }
    }
    cp_async_wait<0>();
}

/* out [P][2][K] = the sums of part [G][2][K] in P slices of rows: a block
 * 32 channels x 8 lanes of rows (lane l takes l, l + 8, ...), then the
 * lanes in order */
__global__ void conv1x1_bn_finish_kernel(float *out, const float *part, int G, int K)
{
    __shared__ float r[2][8][32];
    const int P = gridDim.y, p = blockIdx.y;
    const int lo = (int)((long long)G * p / P), hi = (int)((long long)G * (p + 1) / P);
    const int k = blockIdx.x * 32 + (threadIdx.x & 31), l = threadIdx.x >> 5;
    float s = 0.0f, q = 0.0f;
    if (k < K)
        for (int i = lo + l; i < hi; i += 8) {
            s += part[((size_t)i * 2) * K + k];
            q += part[((size_t)i * 2 + 1) * K + k];
        }
    r[0][l][threadIdx.x & 31] = s;
    r[1][l][threadIdx.x & 31] = q;
    __syncthreads();
    if (l < 2 && k < K) {
        float v = 0.0f;
        for (int i = 0; i < 8; i++) v += r[l][i][threadIdx.x & 31];
        out[((size_t)p * 2 + l) * K + k] = v;
    }
}

template <typename E, int BN>
void launch(void *z, float *part, const void *y, const float *s, const float *b, const void *w,
            int M, int C, int K, cudaStream_t st)
{
    auto kern = conv1x1_bn_kernel<E, BN>;
    /* the opt-in and the carveout are settings of the current device: made
     * once a device, with the grid they allow (blocks an SM x SMs) */
    static int grid_of[64];
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CT_ASSERT(dev >= 0 && dev < 64, "conv1x1_bn: device %d", dev);
    if (!grid_of[dev]) {
        smem_optin(kern, smem_bytes<BN>());
        CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared));
        int per_sm = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, THREADS,
                                                                 smem_bytes<BN>()));
        grid_of[dev] = (per_sm > 0 ? per_sm : 1) * sm_count();
    }
    const int tiles = (M + BM - 1) / BM * (K / BN);
    const int cap = grid_of[dev];
    conv1x1_bn_kernel<E, BN><<<tiles < cap ? tiles : cap, THREADS, smem_bytes<BN>(), st>>>(
        (E *)z, part, (const E *)y, s, b, (const E *)w, M, C, K);
    CUDA_CHECK_LAUNCH();
}

} // namespace

/* shared memory a block of the kernel takes at K output channels */
extern "C" size_t conv1x1_bn_smem(int K)
{
    return K % 128 == 0 ? (size_t)smem_bytes<128>() : (size_t)smem_bytes<64>();
}

/* partials a call needs, in floats: [G][2][K] then the finish's [64][2][K] */
extern "C" size_t conv1x1_bn_part_floats(size_t M, int K)
{
    return ((M + BM - 1) / BM + 64) * 2 * (size_t)K;
}

extern "C" void conv1x1_bn_finish(float *sums, float *part, size_t M, int K, void *stream);

extern "C" void conv1x1_bn_launch(void *z, float *sums, float *part, const void *y,
                                  const float *scale, const float *bias, const void *w, DType dt,
                                  size_t M, int C, int K, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    CT_ASSERT(M > 0 && M <= (size_t)1 << 30 && C % CK == 0 && K % 64 == 0 && K <= 2048,
              "conv1x1_bn: M %zu, C %d, K %d outside the kernel's shapes", M, C, K);
    const bool wide = K % 128 == 0;
    if (dt == DT_BF16) {
        if (wide) launch<__nv_bfloat16, 128>(z, part, y, scale, bias, w, (int)M, C, K, st);
        else launch<__nv_bfloat16, 64>(z, part, y, scale, bias, w, (int)M, C, K, st);
    } else if (dt == DT_F16) {
        if (wide) launch<__half, 128>(z, part, y, scale, bias, w, (int)M, C, K, st);
        else launch<__half, 64>(z, part, y, scale, bias, w, (int)M, C, K, st);
    } else {
        ct_fatal("conv1x1_bn: type %s (f16 or bf16)", dtype_name(dt));
    }
    if (sums) conv1x1_bn_finish(sums, part, M, K, stream);
}

extern "C" void conv1x1_bn_finish(float *sums, float *part, size_t M, int K, void *stream)
{
    cudaStream_t st = (cudaStream_t)stream;
    const int G = (int)((M + BM - 1) / BM), P = G < 64 * 16 ? (G + 15) / 16 : 64;
    float *mid = part + (size_t)G * 2 * K;
    conv1x1_bn_finish_kernel<<<dim3((K + 31) / 32, P), 256, 0, st>>>(mid, part, G, K);
    CUDA_CHECK_LAUNCH();
    conv1x1_bn_finish_kernel<<<dim3((K + 31) / 32, 1), 256, 0, st>>>(sums, mid, P, K);
    CUDA_CHECK_LAUNCH();
}
