/* attention_fa_tc.cu — fused attention (FlashAttention-2 style) on tensor
 * cores for f16 / bf16 storage, head width Dh 32, 64 or 128, sm_80 and newer.
 * Contract and math: ops/attention_fused.h (the same as the f32 FMA kernels
 * of ops/attention_fused.cu, which stay the path for f32 and for pointers
 * that are not 16-byte aligned). Written with inline PTX (mma.sync,
 * ldmatrix, cp.async): no CUTLASS.
 *
 * Files: this one has the design (below), the forward kernel and
 * attention_fa_tc_supports / _forward_cuda; ops/attention_fa_tc_bwd.cu the
 * backward kernels; ops/attention_fa_tc.cuh what both use (tile sizes, PTX
 * wrappers, tile loads, dropout bits, dispatch).
 *
 * Shape letters: B batch, H heads, T tokens, Dh head width (DH, a template
 * argument); bh = b H + h indexes one [T, Dh] head; i query rows, j key rows,
 * e head features.
 *
 * ---- The tiling ----
 * Every kernel is a block of 4 warps. A block owns 64 rows of one head (16
 * per warp) and streams the other side through shared memory in tiles of 64
 * rows, double-buffered with cp.async (the copy of tile n+1 runs while tile
 * n is multiplied):
 *   forward   block owns 64 query rows; streams K and V tiles.
 *             S = Q K^T (16 x 64 per warp, registers), online softmax,
 *             O += P V. Writes out and lse.
 *   dq        block owns 64 query rows; streams K and V tiles (recomputes S
 *             and P from lse): dQ += dS K.
 *   dk / dv   block owns 64 key rows; streams Q and dO tiles with their lse
 *             and D: S^T = K Q^T, dP^T = V dO^T, dV += Pd^T dO,
 *             dK += dS^T Q.
 * dq and dk/dv are two kernels, so S and dP are computed twice (7 matrix
 * products in the backward instead of FlashAttention-2's 5), but no dQ is
 * accumulated with float atomics: the result is deterministic, bit for bit,
 * run to run (ctrain's rule for reductions, and graph replay = eager).
 * Shared-memory rows are padded to Dh + 8 elements (16 bytes): the 8 rows an
 * ldmatrix reads then start in 8 different 16-byte bank groups (no bank
 * conflicts; stride 144 B at Dh 64 is 9 units of 16 B, and 9 r mod 8 = r).
 * Rows past T are zero-filled by cp.async (source size 0) and masked by index.
 *
 * ---- The mma fragments relied on (PTX ISA, mma.m16n8k16, .f16/.bf16) ----
 * lane = 4 g + t (g = lane / 4 in 0..7, t = lane % 4 in 0..3).
 *   A (16 x 16, row-major), 4 registers of 2 elements (low half = lower column):
 *       a0 = A[g][2t, 2t+1]      a1 = A[g+8][2t, 2t+1]
 *       a2 = A[g][2t+8, 2t+9]    a3 = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, k x n), 2 registers:
 *       b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]
 *   C (16 x 8, f32), 4 registers:
 *       c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
 * Consequences used below:
 *   - ldmatrix.x4 (no .trans) of a 16 x 16 row-major block, lane l giving the
 *     address of row l % 16, column 8 (l / 16), yields a0..a3 exactly;
 *   - B from a matrix stored "n-major" (K[key][e] for S = Q K^T: n = key,
 *     k = e): b0 is two adjacent elements of one row, so plain ldmatrix
 *     gives it; ldmatrix.x4 covers two n-tiles of 8 and k 16;
 *   - B from a matrix stored "k-major" (V[key][e] for O = P V: k = key,
 *     n = e): ldmatrix.trans gives b0 = (V[2t][g], V[2t+1][g]);
 *   - the C fragments of two adjacent n-tiles of S (keys 16kk..16kk+15) are,
 *     after rounding pairs to f16 / bf16, the A fragment of P for the k-step
 *     kk of P V: a0 = C0[c0,c1], a1 = C0[c2,c3], a2 = C1[c0,c1],
 *     a3 = C1[c2,c3]. P never leaves registers. The same holds for dS
 *     (dQ += dS K) and, in the dk/dv kernel, for Pd^T and dS^T.
 * A thread holds two rows of each 16-row fragment (g and g + 8): per-row
 * values (max, sum, lse, D) are two registers, and a row's 64 scores are
 * spread over the 4 lanes of a quad (reduced with two xor shuffles).
 *
 * ---- Online softmax (forward) ----
 * Scores are kept in log2 units, t = log2(e) (scale q.k + mask - max mask),
 * so that exp is one ex2 instruction. Per query row, over key tiles:
 *   m'  = max(m, max_j t_j)
 *   c   = 2^(m - m')                 (0 on the first tile: m = -inf)
 *   l   = l c + sum_j 2^(t_j - m')   (before dropout, f32; per lane, summed
 *                                      over the quad once at the end)
 *   O   = O c + sum_j keep_ij 2^(t_j - m') v_j    (P rounded to dt here)
 * out = s_d O / l,  lse = ln 2 (m + log2 l). A row whose keys are all -inf so
 * far uses 0 as the shift (every term 0, no NaN). The mask row's maximum is
 * subtracted first (header: it makes f32 scores exact for a fully padded
 * batch, and a mask whose every key is -inf gives out = 0 and lse = -inf at
 * once: the block writes zeros and returns).
 *
 * ---- Dropout ----
 * keep_ij = drop_keep_bit(seed, offset, idx, thr) (ops/dropout_mask.h: 8 bits
 * of Philox an element, thr = ceil(p 2^8)) with idx = ((b H + h) T + i) T
 * + j. The bits are drawn in runs of 8 consecutive keys (one byte): one
 * Philox call per run, half of its counter group's sixteen (drop_keep8; two
 * calls when a run straddles a group, only when T % 8 != 0). (Before: 24 bits
 * an element, 2 calls a run; drawing the mask cost about as much as the
 * forward's products.)
 *   forward: for each 64 x 64 tile the block writes a bit matrix keep[64]
 *     (one 64-bit word per query row, bit = key column) to shared memory;
 *     the bits of tile n+1 are drawn while its cp.async copies are in flight.
 *   backward: one kernel draws the whole mask once into a workspace,
 *     keep[B H T][ceil(T/64)] 64-bit words (word w of row i: keys 64w ..
 *     64w+63), B H T^2 / 8 bytes (16 MiB at B 32, H 16, T 512); the dq and
 *     dk/dv kernels read their words from it instead of each drawing the
 *     mask again (with 24 bits a key Philox cost about as much as the matrix
 *     products here; at 16 bits, about half that; at 8 bits the same calls
 *     as at 16, half of each call's bits used).
 *   saved mask (keep_out / keep_in, the op under CTRAIN_ATTN_SAVE_MASK=1):
 *     the forward also writes the bits it draws to a global buffer in the
 *     backward's layout, and the backward reads that instead of drawing.
 *     Tile n's bits are in keep[] anyway and a warp already holds its rows'
 *     words in registers (kw): lane t = 0 of each quad stores words n of
 *     rows g and g + 8, one 64-bit store per query row per key tile (16 MiB
 *     a layer at T 512, next to the ~0.13 GB the forward moves). A block
 *     whose keys are all masked returns before streaming tiles; it draws
 *     its rows byte by byte (tc_keep_rows_store) so the buffer stays equal
 *     to the backward's own draw.
 */
#include "attention_fa_tc.cuh"

namespace {

/* Rows i0 .. i0+63 (< T) of the saved mask keep_out of head bh (all W words
 * of each), drawn byte by byte as the backward's tc_keep_bits_kernel draws
 * them: for a block that streams no tiles (every key masked). */
__device__ void tc_keep_rows_store(uint64_t *keep_out, uint64_t bhT, int i0, int T, int W,
                                   uint32_t thr, uint64_t seed, uint64_t offset)
{
    unsigned char *kb = reinterpret_cast<unsigned char *>(keep_out);
    const size_t rb = (size_t)W * 8; /* bytes per row */
    for (size_t x = threadIdx.x; x < TC_ROWS * rb; x += TC_THREADS) {
        const int i = i0 + (int)(x / rb), col = (int)(x % rb) * 8;
        if (i < T)
            kb[(bhT + (uint64_t)i) * rb + x % rb] =
                col < T ? (unsigned char)tc_keep8(bhT + (uint64_t)i, col, T, thr, seed, offset)
                        : 0;
    }
}

/* ---- forward ----
 * t = log2e (scale q k^T + mask - max mask);  online softmax over key tiles;
 * out = s_d (sum_j keep 2^(t - m) v_j) / l,  lse = ln2 (m + log2 l) */
/* Launch bounds: 3 blocks per SM up to Dh 64 (<= 168 registers; the
 * backward kernels then spill 12-24 bytes but ran 11% faster on fwd+bwd
 * than at 2 blocks with no spills, docs/kernels.md), 2 at Dh 128. */
template <typename E, int DH>
__global__ void __launch_bounds__(TC_THREADS, DH <= 64 ? 3 : 2)
    tc_fwd_kernel(E *out, float *lse, uint64_t *keep_out, const E *q, const E *k, const E *v,
                  const float *mask, float scale_log2, float sd, uint32_t thr, uint64_t seed,
                  uint64_t offset, const uint64_t *rng_base, int H, int T, int bthd)
{
    using C = TcCfg<DH>;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    E *qs = reinterpret_cast<E *>(tc_smem);
    E *ks = qs + C::TILE;     /* [2][TILE] */
    E *vs = ks + 2 * C::TILE; /* [2][TILE] */
    float *msk = reinterpret_cast<float *>(vs + 2 * C::TILE); /* [2][64] mask - max, log2 units */
    uint64_t *keep = reinterpret_cast<uint64_t *>(msk + 2 * 64); /* [2][64] */
    __shared__ float red[TC_WARPS];

    if (rng_base) offset += *rng_base; /* inside a CUDA graph (dropout.h) */
    const int bh = blockIdx.y, b = bh / H, i0 = blockIdx.x * TC_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const size_t hoff = tc_head_offset<DH>(bh, H, T, bthd);
    const int ld = tc_row_stride<DH>(H, bthd);
    q += hoff; k += hoff; v += hoff; out += hoff;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    /* the first tiles' copies go out before the mask's maximum is reduced
     * (a load and a block barrier): at T = 128 a block streams two tiles,
     * and its prologue's latency is a large part of its life */
    tc_load_tile<E, DH>(qs, q, i0, T, ld);
    tc_load_tile<E, DH>(ks, k, 0, T, ld);
    tc_load_tile<E, DH>(vs, v, 0, T, ld);
    cp_async_commit();
    const float mmax = mask_row_max<TC_THREADS>(mb, T, red);
    const int ntiles = (T + TC_ROWS - 1) / TC_ROWS; /* = W, words per row of keep_out */
    if (mmax == -INFINITY) { /* every key masked: no distribution, out 0 */
        cp_async_wait<0>();   /* no copy outlives the block */
        tc_zero_rows<E, DH>(out, i0, T, ld);
        if (threadIdx.x < TC_ROWS && i0 + (int)threadIdx.x < T)
            lse[(size_t)bh * T + i0 + threadIdx.x] = -INFINITY;
        /* the saved mask stays whole (the backward skips these rows, a
         * comparison with the backward's own draw does not) */
        if (keep_out)
            tc_keep_rows_store(keep_out, (uint64_t)bh * T, i0, T, ntiles, thr, seed, offset);
        return;
    }
    /* per key tile: the mask column (log2 units, -inf past T) and the keep bits */
    auto aux = [&](int j0, int buf) {
        if (threadIdx.x < TC_ROWS) {
            const int j = j0 + threadIdx.x;
            msk[buf * 64 + threadIdx.x] = tc_mask_log2(mb, mmax, j, T);
        }
        if (thr) tc_keep_tile(keep + buf * 64, (uint64_t)bh * T, i0, j0, T, thr, seed, offset);
    };

    aux(0, 0);

    uint32_t qf[C::KS][4];
    float acc[C::NT][4];
#pragma unroll
    for (int nt = 0; nt < C::NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};

    for (int n = 0; n < ntiles; n++) {
        const int buf = n & 1;
        if (n + 1 < ntiles) { /* prefetch tile n+1 into the other buffer */
            tc_load_tile<E, DH>(ks + (buf ^ 1) * C::TILE, k, (n + 1) * TC_ROWS, T, ld);
            tc_load_tile<E, DH>(vs + (buf ^ 1) * C::TILE, v, (n + 1) * TC_ROWS, T, ld);
            cp_async_commit();
            aux((n + 1) * TC_ROWS, buf ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); /* tile n (and on n = 0 the Q tile) visible to all */
        if (n == 0) {
#pragma unroll
            for (int kk = 0; kk < C::KS; kk++) ldsm_a<C::LDS>(qf[kk], qs, warp * 16, kk * 16, lane);
        }
        const E *kt = ks + buf * C::TILE, *vt = vs + buf * C::TILE;
        const float *mt = msk + buf * 64;

        /* S = Q K^T: 16 x 64 per warp, 8 n-tiles */
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < C::KS; kk++)
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t bf[4];
                ldsm_b_nmajor<C::LDS>(bf, kt, np * 16, kk * 16, lane);
                mma16816<E>(s[2 * np], qf[kk], bf[0], bf[1]);
                mma16816<E>(s[2 * np + 1], qf[kk], bf[2], bf[3]);
            }

        /* online softmax; element (nt, e): row g + 8 (e / 2), key 8 nt + 2t + e % 2 */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = nt * 8 + 2 * t + (e & 1);
                s[nt][e] = fmaf(s[nt][e], scale_log2, mt[col]);
                mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
            }
        float mu[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float corr = softmax_row_step(mrow[r], lrow[r], mx[r], mu[r]);
#pragma unroll
            for (int nt = 0; nt < C::NT; nt++) {
                acc[nt][2 * r] *= corr;
                acc[nt][2 * r + 1] *= corr;
            }
        }
        uint64_t kw[2] = {~0ull, ~0ull};
        if (thr) {
            kw[0] = keep[buf * 64 + warp * 16 + g];
            kw[1] = keep[buf * 64 + warp * 16 + g + 8];
            /* the saved mask: word n of rows g and g + 8, one store each (lane t 0) */
            if (keep_out && t == 0) {
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int i = i0 + warp * 16 + g + 8 * r;
                    if (i < T) keep_out[((size_t)bh * T + i) * ntiles + n] = kw[r];
                }
            }
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, col = nt * 8 + 2 * t + (e & 1);
                const float pv = ex2(s[nt][e] - mu[r]);
                lrow[r] += pv;
                s[nt][e] = (kw[r] >> col) & 1 ? pv : 0.0f;
            }

        /* O += P V: P from the registers (C -> A), V through ldmatrix.trans */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t a[4];
            c_to_a<E>(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < C::NT / 2; np++) {
                uint32_t bf[4];
                ldsm_b_kmajor<C::LDS>(bf, vt, kk * 16, np * 16, lane);
                mma16816<E>(acc[2 * np], a, bf[0], bf[1]);
                mma16816<E>(acc[2 * np + 1], a, bf[2], bf[3]);
            }
        }
        __syncthreads(); /* every warp is done with buffer buf before it is refilled */
    }

#pragma unroll
    for (int r = 0; r < 2; r++) {
        lrow[r] += __shfl_xor_sync(FULL_MASK, lrow[r], 1);
        lrow[r] += __shfl_xor_sync(FULL_MASK, lrow[r], 2);
        const int i = i0 + warp * 16 + g + 8 * r;
        if (i >= T) continue;
        const float inv = lrow[r] > 0.0f ? sd / lrow[r] : 0.0f;
#pragma unroll
        for (int nt = 0; nt < C::NT; nt++)
            store2<E>(out + (size_t)i * ld + nt * 8 + 2 * t, acc[nt][2 * r] * inv,
                      acc[nt][2 * r + 1] * inv, 0);
        if (t == 0)
            lse[(size_t)bh * T + i] =
                lrow[r] > 0.0f ? (mrow[r] + log2f(lrow[r])) * LN2_F32 : -INFINITY;
    }
}

} // namespace

/* The device facts the kernels depend on, asked once per device: this is
 * called for every attention op, forward and backward. 0 optin: sm < 80. */
static int tc_device_smem_optin(int device)
{
    static int cached[64];   /* optin + 1 per device; 0: not asked yet */
    const int memo = device >= 0 && device < 64;
    if (memo && cached[device]) return cached[device] - 1;
    int major = 0, optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (major < 8) optin = 0;
    if (memo) cached[device] = optin + 1;
    return optin;
}

extern "C" int attention_fa_tc_supports(const Ctx *c, DType dt, size_t Dh)
{
    if (dt != DT_F16 && dt != DT_BF16) return 0;
    if (Dh != 32 && Dh != 64 && Dh != 128) return 0;
    const int optin = tc_device_smem_optin(c->device_id);
    if (optin == 0) return 0;
    size_t need = 0;
    dispatch_head_dim(Dh, "attention_fa_tc_supports", [&](auto dh) {
        using C = TcCfg<decltype(dh)::value>;
        need = C::SMEM_FWD > C::SMEM_DQ ? C::SMEM_FWD : C::SMEM_DQ;
        if (C::SMEM_DKDV > need) need = C::SMEM_DKDV;
    });
    /* + the static red[] array and headroom */
    return need + 64 <= (size_t)optin;
}

extern "C" void attention_fa_tc_forward_cuda(Ctx *c, void *out, float *lse, uint64_t *keep_out,
                                             const void *q, const void *k, const void *v,
                                             const float *mask, DType dt, float p, uint64_t seed,
                                             uint64_t offset, size_t B, size_t H, size_t T,
                                             size_t Dh, int bthd)
{
    const size_t BH = B * H;
    if (BH == 0 || T == 0) return;
    tc_check_sizes(B, H, T, "attention_fa_tc_forward_cuda");
    const float scale_log2 = LOG2E_F32 / sqrtf((float)Dh), sd = drop_scale(p);
    const uint32_t thr = drop_threshold(p);
    if (!thr) keep_out = NULL; /* no dropout: no mask to save */
    CT_ASSERT(!keep_out || is_aligned(keep_out, 8),
              "attention_fa_tc_forward_cuda: keep_out %p is not 8-byte aligned", (void *)keep_out);
    dispatch_lowp(dt, "attention_fa_tc_forward_cuda", [&](auto tag) {
        using E = decltype(tag);
        dispatch_head_dim(Dh, "attention_fa_tc_forward_cuda", [&](auto dh) {
            constexpr int DH = decltype(dh)::value;
            const size_t smem = TcCfg<DH>::SMEM_FWD;
            smem_optin(tc_fwd_kernel<E, DH>, smem);
            const dim3 grid((unsigned)((T + TC_ROWS - 1) / TC_ROWS), (unsigned)BH);
            tc_fwd_kernel<E, DH><<<grid, TC_THREADS, smem, c->stream>>>(
                (E *)out, lse, keep_out, (const E *)q, (const E *)k, (const E *)v, mask,
                scale_log2, sd, thr, seed, offset, c->rng_base, (int)H, (int)T, bthd);
            CUDA_CHECK_LAUNCH();
        });
    });
}
