/* attention_fa_tc_bwd.cu — the backward of the tensor-core fused attention:
 * the dropout mask drawn once into a bit workspace (or the forward's saved
 * copy of it, keep_in), the dq kernel (a block owns 64 query rows) and the
 * dk/dv kernel (a block owns 64 key rows).
 * Design, fragments and dropout: the top of ops/attention_fa_tc.cu;
 * contract: ops/attention_fused.h. */
#include "attention_fa_tc.cuh"

namespace {

/* The backward's mask: keep[r][w] bit y = keep bit of (flat row r, key 64 w + y),
 * r < rows = B H T, w < W = ceil(T / 64); one byte (8 keys) per thread. */
__global__ void __launch_bounds__(256)
    tc_keep_bits_kernel(uint64_t *keep, uint32_t thr, uint64_t seed, uint64_t offset,
                        const uint64_t *rng_base, size_t rows, int T, int W)
{
    if (rng_base) offset += *rng_base;
    unsigned char *kb = reinterpret_cast<unsigned char *>(keep);
    const size_t rb = (size_t)W * 8, nbytes = rows * rb;
    for (size_t z = (size_t)blockIdx.x * blockDim.x + threadIdx.x; z < nbytes;
         z += (size_t)gridDim.x * blockDim.x) {
        const int col = (int)(z % rb) * 8;
        kb[z] = col < T ? (unsigned char)tc_keep8(z / rb, col, T, thr, seed, offset) : 0;
    }
}

/* ---- backward ---- */

/* lse of row i in log2 units for P = 2^(t - lse2); +inf (P = 0) past T or
 * for a row without keys */
__device__ __forceinline__ float tc_lse2(const float *lse_h, int i, int T)
{
    if (i >= T) return INFINITY;
    const float l = lse_h[i];
    return l == -INFINITY ? INFINITY : l * LOG2E_F32;
}

/* dq_i = scale sum_j dS_ij k_j,  dS_ij = P_ij (keep s_d dO_i . v_j - D_i),
 * P_ij = 2^(t_ij - lse2_i). A block owns 64 query rows; K, V tiles stream. */
template <typename E, int DH>
__global__ void __launch_bounds__(TC_THREADS, DH <= 64 ? 3 : 2)
    tc_bwd_dq_kernel(E *dq, const E *q, const E *k, const E *v, const E *dout,
                     const float *lse, const float *D, const float *mask, float scale_log2,
                     float scale, float sd, const uint64_t *keepg, int W, int H, int T,
                     int bthd, int accum)
{
    using C = TcCfg<DH>;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    E *qs = reinterpret_cast<E *>(tc_smem);
    E *dos = qs + C::TILE;
    E *ks = dos + C::TILE;    /* [2][TILE] */
    E *vs = ks + 2 * C::TILE; /* [2][TILE] */
    float *msk = reinterpret_cast<float *>(vs + 2 * C::TILE);
    __shared__ float red[TC_WARPS];

    const int bh = blockIdx.y, b = bh / H, i0 = blockIdx.x * TC_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const size_t hoff = tc_head_offset<DH>(bh, H, T, bthd);
    const int ld = tc_row_stride<DH>(H, bthd);
    q += hoff; k += hoff; v += hoff; dout += hoff; dq += hoff;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    /* the first tiles' copies before the mask's maximum (tc_fwd_kernel) */
    tc_load_tile<E, DH>(qs, q, i0, T, ld);
    tc_load_tile<E, DH>(dos, dout, i0, T, ld);
    tc_load_tile<E, DH>(ks, k, 0, T, ld);
    tc_load_tile<E, DH>(vs, v, 0, T, ld);
    cp_async_commit();
    const float mmax = mask_row_max<TC_THREADS>(mb, T, red);
    if (mmax == -INFINITY) {
        cp_async_wait<0>();   /* no copy outlives the block */
        if (!accum) tc_zero_rows<E, DH>(dq, i0, T, ld);
        return;
    }
    auto aux = [&](int j0, int buf) {
        if (threadIdx.x < TC_ROWS) {
            const int j = j0 + threadIdx.x;
            msk[buf * 64 + threadIdx.x] = tc_mask_log2(mb, mmax, j, T);
        }
    };
    /* this thread's rows of the keep mask (word n = key tile n), NULL: no dropout */
    const uint64_t *kw_row[2] = {NULL, NULL};
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = i0 + warp * 16 + g + 8 * r;
        if (keepg && i < T) kw_row[r] = keepg + ((size_t)bh * T + i) * W;
    }

    const int ntiles = (T + TC_ROWS - 1) / TC_ROWS;
    aux(0, 0);

    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = i0 + warp * 16 + g + 8 * r;
        lse2[r] = tc_lse2(lse + (size_t)bh * T, i, T);
        Dr[r] = i < T ? D[(size_t)bh * T + i] : 0.0f;
    }
    uint32_t qf[C::KS][4], df[C::KS][4];
    float acc[C::NT][4];
#pragma unroll
    for (int nt = 0; nt < C::NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;

    for (int n = 0; n < ntiles; n++) {
        const int buf = n & 1;
        if (n + 1 < ntiles) {
            tc_load_tile<E, DH>(ks + (buf ^ 1) * C::TILE, k, (n + 1) * TC_ROWS, T, ld);
            tc_load_tile<E, DH>(vs + (buf ^ 1) * C::TILE, v, (n + 1) * TC_ROWS, T, ld);
            cp_async_commit();
            aux((n + 1) * TC_ROWS, buf ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (n == 0) {
#pragma unroll
            for (int kk = 0; kk < C::KS; kk++) {
                ldsm_a<C::LDS>(qf[kk], qs, warp * 16, kk * 16, lane);
                ldsm_a<C::LDS>(df[kk], dos, warp * 16, kk * 16, lane);
            }
        }
        const E *kt = ks + buf * C::TILE, *vt = vs + buf * C::TILE;
        const float *mt = msk + buf * 64;
        uint64_t kw[2] = {~0ull, ~0ull};
        if (keepg) {
            kw[0] = kw_row[0] ? __ldg(kw_row[0] + n) : 0ull;
            kw[1] = kw_row[1] ? __ldg(kw_row[1] + n) : 0ull;
        }
        /* two chunks of 32 keys (fewer live registers) */
#pragma unroll
        for (int c = 0; c < 2; c++) {
            float s[4][4], dp[4][4];
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[nt][e] = dp[nt][e] = 0.0f;
            /* S = Q K^T and dPd = dO V^T for keys 32c .. 32c+31 */
#pragma unroll
            for (int kk = 0; kk < C::KS; kk++)
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    uint32_t bk[4], bv[4];
                    ldsm_b_nmajor<C::LDS>(bk, kt, c * 32 + np * 16, kk * 16, lane);
                    mma16816<E>(s[2 * np], qf[kk], bk[0], bk[1]);
                    mma16816<E>(s[2 * np + 1], qf[kk], bk[2], bk[3]);
                    ldsm_b_nmajor<C::LDS>(bv, vt, c * 32 + np * 16, kk * 16, lane);
                    mma16816<E>(dp[2 * np], df[kk], bv[0], bv[1]);
                    mma16816<E>(dp[2 * np + 1], df[kk], bv[2], bv[3]);
                }
            /* forward: Pd = keep s_d P  so  dP = keep s_d dPd,  dS = P (dP - D) */
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = e >> 1, col = c * 32 + nt * 8 + 2 * t + (e & 1);
                    const float P = ex2(fmaf(s[nt][e], scale_log2, mt[col]) - lse2[r]);
                    const float dPv = (kw[r] >> col) & 1 ? dp[nt][e] * sd : 0.0f;
                    s[nt][e] = P * (dPv - Dr[r]);
                }
            /* dQ += dS K (K through ldmatrix.trans: k = key, n = feature) */
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {
                uint32_t a[4];
                c_to_a<E>(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
                for (int np = 0; np < C::NT / 2; np++) {
                    uint32_t bk[4];
                    ldsm_b_kmajor<C::LDS>(bk, kt, c * 32 + kk * 16, np * 16, lane);
                    mma16816<E>(acc[2 * np], a, bk[0], bk[1]);
                    mma16816<E>(acc[2 * np + 1], a, bk[2], bk[3]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = i0 + warp * 16 + g + 8 * r;
        if (i >= T) continue;
#pragma unroll
        for (int nt = 0; nt < C::NT; nt++)
            store2<E>(dq + (size_t)i * ld + nt * 8 + 2 * t, scale * acc[nt][2 * r],
                      scale * acc[nt][2 * r + 1], accum);
    }
}

/* dv_j = s_d sum_i keep_ij P_ij dO_i,  dk_j = scale sum_i dS_ij q_i.
 * A block owns 64 key rows; Q and dO tiles (with lse and D) stream. The
 * warp's fragments are transposed: rows = its 16 keys, columns = queries. */
template <typename E, int DH>
__global__ void __launch_bounds__(TC_THREADS, DH <= 64 ? 3 : 2)
    tc_bwd_dkdv_kernel(E *dk, E *dv, const E *q, const E *k, const E *v, const E *dout,
                       const float *lse, const float *D, const float *mask, float scale_log2,
                       float scale, float sd, const uint64_t *keepg, int W, int H, int T,
                       int bthd, int accum_k, int accum_v)
{
    using C = TcCfg<DH>;
    /* K and V A-fragments stay in registers up to Dh 64; at 128 they are
     * re-read from shared memory (register budget: dK and dV take 128) */
    constexpr bool KV_REGS = DH <= 64;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    E *ks = reinterpret_cast<E *>(tc_smem);
    E *vs = ks + C::TILE;
    E *qs = vs + C::TILE;      /* [2][TILE] */
    E *dos = qs + 2 * C::TILE; /* [2][TILE] */
    float *lse_s = reinterpret_cast<float *>(dos + 2 * C::TILE); /* [2][64], log2 units */
    float *D_s = lse_s + 2 * 64;                                 /* [2][64] */
    uint64_t *keep = reinterpret_cast<uint64_t *>(D_s + 2 * 64); /* [2][64]: query x key bits */
    __shared__ float red[TC_WARPS];

    const int bh = blockIdx.y, b = bh / H, j0 = blockIdx.x * TC_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const size_t hoff = tc_head_offset<DH>(bh, H, T, bthd);
    const int ld = tc_row_stride<DH>(H, bthd);
    q += hoff; k += hoff; v += hoff; dout += hoff;
    if (dk) dk += hoff;
    if (dv) dv += hoff;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    /* the first tiles' copies before the mask's maximum (tc_fwd_kernel) */
    tc_load_tile<E, DH>(ks, k, j0, T, ld);
    tc_load_tile<E, DH>(vs, v, j0, T, ld);
    tc_load_tile<E, DH>(qs, q, 0, T, ld);
    tc_load_tile<E, DH>(dos, dout, 0, T, ld);
    cp_async_commit();
    const float mmax = mask_row_max<TC_THREADS>(mb, T, red);
    if (mmax == -INFINITY) {
        cp_async_wait<0>();   /* no copy outlives the block */
        if (!accum_k) tc_zero_rows<E, DH>(dk, j0, T, ld);
        if (!accum_v) tc_zero_rows<E, DH>(dv, j0, T, ld);
        return;
    }
    const float *lse_h = lse + (size_t)bh * T, *D_h = D + (size_t)bh * T;
    auto aux = [&](int i0, int buf) {
        if (threadIdx.x < TC_ROWS) {
            const int i = i0 + threadIdx.x;
            lse_s[buf * 64 + threadIdx.x] = tc_lse2(lse_h, i, T);
            D_s[buf * 64 + threadIdx.x] = i < T ? D_h[i] : 0.0f;
            /* word j0 / 64 of query row i: this block's 64 keys */
            if (keepg)
                keep[buf * 64 + threadIdx.x] =
                    i < T ? __ldg(keepg + ((size_t)bh * T + i) * W + j0 / TC_ROWS) : 0ull;
        }
    };
    /* the mask of this warp's key rows g and g + 8 (log2 units; -inf past T) */
    float mrow[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int j = j0 + warp * 16 + g + 8 * r;
        mrow[r] = tc_mask_log2(mb, mmax, j, T);
    }
    const bool want_k = dk != NULL, want_v = dv != NULL;

    const int ntiles = (T + TC_ROWS - 1) / TC_ROWS;
    aux(0, 0);

    uint32_t kf[KV_REGS ? C::KS : 1][4], vf[KV_REGS ? C::KS : 1][4];
    float dka[C::NT][4], dva[C::NT][4];
#pragma unroll
    for (int nt = 0; nt < C::NT; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[nt][e] = dva[nt][e] = 0.0f;
    const int kbit0 = warp * 16 + g; /* key bit of row g in the keep words */

    for (int n = 0; n < ntiles; n++) {
        const int buf = n & 1;
        if (n + 1 < ntiles) {
            tc_load_tile<E, DH>(qs + (buf ^ 1) * C::TILE, q, (n + 1) * TC_ROWS, T, ld);
            tc_load_tile<E, DH>(dos + (buf ^ 1) * C::TILE, dout, (n + 1) * TC_ROWS, T, ld);
            cp_async_commit();
            aux((n + 1) * TC_ROWS, buf ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if constexpr (KV_REGS) {
            if (n == 0) {
#pragma unroll
                for (int kk = 0; kk < C::KS; kk++) {
                    ldsm_a<C::LDS>(kf[kk], ks, warp * 16, kk * 16, lane);
                    ldsm_a<C::LDS>(vf[kk], vs, warp * 16, kk * 16, lane);
                }
            }
        }
        const E *qt = qs + buf * C::TILE, *dot = dos + buf * C::TILE;
        const float *ls = lse_s + buf * 64, *Ds = D_s + buf * 64;
        const uint64_t *kp = keep + buf * 64;
#pragma unroll
        for (int c = 0; c < 2; c++) { /* two chunks of 32 queries */
            float s[4][4], dp[4][4];
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[nt][e] = dp[nt][e] = 0.0f;
            /* S^T = K Q^T and dPd^T = V dO^T for queries 32c .. 32c+31 */
#pragma unroll
            for (int kk = 0; kk < C::KS; kk++) {
                uint32_t ka[4], va[4];
                if constexpr (KV_REGS) {
#pragma unroll
                    for (int x = 0; x < 4; x++) { ka[x] = kf[kk][x]; va[x] = vf[kk][x]; }
                } else {
                    ldsm_a<C::LDS>(ka, ks, warp * 16, kk * 16, lane);
                    if (want_k) ldsm_a<C::LDS>(va, vs, warp * 16, kk * 16, lane);
                }
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    uint32_t bq[4];
                    ldsm_b_nmajor<C::LDS>(bq, qt, c * 32 + np * 16, kk * 16, lane);
                    mma16816<E>(s[2 * np], ka, bq[0], bq[1]);
                    mma16816<E>(s[2 * np + 1], ka, bq[2], bq[3]);
                    if (want_k) {
                        uint32_t bo[4];
                        ldsm_b_nmajor<C::LDS>(bo, dot, c * 32 + np * 16, kk * 16, lane);
                        mma16816<E>(dp[2 * np], va, bo[0], bo[1]);
                        mma16816<E>(dp[2 * np + 1], va, bo[2], bo[3]);
                    }
                }
            }
            /* element (nt, e): key row g + 8 (e / 2), query column 8 nt + 2t + e % 2
             *   P = 2^(t - lse2_i),  s <- keep P (for dV),  dp <- dS = P (keep s_d dPd - D_i) */
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e1 = 0; e1 < 2; e1++) {
                    const int ql = c * 32 + nt * 8 + 2 * t + e1;
                    const float l2 = ls[ql], Di = Ds[ql];
                    const uint64_t w = keepg ? kp[ql] : ~0ull;
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int e = 2 * r + e1;
                        const float P = ex2(fmaf(s[nt][e], scale_log2, mrow[r]) - l2);
                        const bool kept = (w >> (kbit0 + 8 * r)) & 1;
                        s[nt][e] = kept ? P : 0.0f;
                        dp[nt][e] = P * ((kept ? dp[nt][e] * sd : 0.0f) - Di);
                    }
                }
            /* dV += (keep P)^T dO and dK += dS^T Q: A from the registers, B =
             * dO / Q tiles through ldmatrix.trans (k = query, n = feature) */
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {
                uint32_t ap[4], ad[4];
                c_to_a<E>(ap, s[2 * kk], s[2 * kk + 1]);
                c_to_a<E>(ad, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
                for (int np = 0; np < C::NT / 2; np++) {
                    if (want_v) {
                        uint32_t bo[4];
                        ldsm_b_kmajor<C::LDS>(bo, dot, c * 32 + kk * 16, np * 16, lane);
                        mma16816<E>(dva[2 * np], ap, bo[0], bo[1]);
                        mma16816<E>(dva[2 * np + 1], ap, bo[2], bo[3]);
                    }
                    if (want_k) {
                        uint32_t bq[4];
                        ldsm_b_kmajor<C::LDS>(bq, qt, c * 32 + kk * 16, np * 16, lane);
                        mma16816<E>(dka[2 * np], ad, bq[0], bq[1]);
                        mma16816<E>(dka[2 * np + 1], ad, bq[2], bq[3]);
                    }
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int j = j0 + warp * 16 + g + 8 * r;
        if (j >= T) continue;
#pragma unroll
        for (int nt = 0; nt < C::NT; nt++) {
            const size_t at = (size_t)j * ld + nt * 8 + 2 * t;
            if (want_k)
                store2<E>(dk + at, scale * dka[nt][2 * r], scale * dka[nt][2 * r + 1], accum_k);
            if (want_v)
                store2<E>(dv + at, sd * dva[nt][2 * r], sd * dva[nt][2 * r + 1], accum_v);
        }
    }
}

} // namespace

extern "C" void attention_fa_tc_backward_cuda(Ctx *c, void *dq, void *dk, void *dv,
                                              const void *dout, const void *q, const void *k,
                                              const void *v, const float *lse, const float *D,
                                              const float *mask, const uint64_t *keep_in,
                                              DType dt, float p, uint64_t seed, uint64_t offset,
                                              size_t B, size_t H, size_t T, size_t Dh,
                                              int accum_q, int accum_k, int accum_v, int bthd)
{
    const size_t BH = B * H;
    if (BH == 0 || T == 0 || (!dq && !dk && !dv)) return;
    tc_check_sizes(B, H, T, "attention_fa_tc_backward_cuda");
    const float scale = 1.0f / sqrtf((float)Dh), scale_log2 = LOG2E_F32 * scale;
    const float sd = drop_scale(p);
    const uint32_t thr = drop_threshold(p);
    /* the dropout mask for both kernels (header comment): the forward's saved
     * one when given, else drawn once here into a workspace */
    const int W = (int)((T + TC_ROWS - 1) / TC_ROWS);
    const size_t kbytes = attention_keep_words(B, H, T) * 8;
    uint64_t *drawn = thr && !keep_in ? (uint64_t *)mem_alloc(c, kbytes) : NULL;
    if (drawn) attention_fa_tc_keep_bits_cuda(c, drawn, p, seed, offset, B, H, T);
    const uint64_t *keepg = !thr ? NULL : keep_in ? keep_in : drawn;
    CT_ASSERT(!keepg || is_aligned(keepg, 8),
              "attention_fa_tc_backward_cuda: keep_in %p is not 8-byte aligned",
              (const void *)keepg);
    dispatch_lowp(dt, "attention_fa_tc_backward_cuda", [&](auto tag) {
        using E = decltype(tag);
        dispatch_head_dim(Dh, "attention_fa_tc_backward_cuda", [&](auto dh) {
            constexpr int DH = decltype(dh)::value;
            const dim3 grid((unsigned)((T + TC_ROWS - 1) / TC_ROWS), (unsigned)BH);
            if (dk || dv) {
                const size_t smem = TcCfg<DH>::SMEM_DKDV;
                smem_optin(tc_bwd_dkdv_kernel<E, DH>, smem);
                tc_bwd_dkdv_kernel<E, DH><<<grid, TC_THREADS, smem, c->stream>>>(
                    (E *)dk, (E *)dv, (const E *)q, (const E *)k, (const E *)v,
                    (const E *)dout, lse, D, mask, scale_log2, scale, sd, keepg, W, (int)H,
                    (int)T, bthd, accum_k, accum_v);
                CUDA_CHECK_LAUNCH();
            }
            if (dq) {
                const size_t smem = TcCfg<DH>::SMEM_DQ;
                smem_optin(tc_bwd_dq_kernel<E, DH>, smem);
                tc_bwd_dq_kernel<E, DH><<<grid, TC_THREADS, smem, c->stream>>>(
                    (E *)dq, (const E *)q, (const E *)k, (const E *)v, (const E *)dout, lse, D,
                    mask, scale_log2, scale, sd, keepg, W, (int)H, (int)T, bthd, accum_q);
                CUDA_CHECK_LAUNCH();
            }
        });
    });
    if (drawn) mem_free(c, drawn, kbytes);
}

extern "C" void attention_fa_tc_keep_bits_cuda(Ctx *c, uint64_t *keep, float p, uint64_t seed,
                                               uint64_t offset, size_t B, size_t H, size_t T)
{
    const uint32_t thr = drop_threshold(p);
    const size_t rows = B * H * T, kbytes = attention_keep_words(B, H, T) * 8;
    if (!thr || rows == 0) return;
    CT_ASSERT(T <= 0x7fffffff, "attention_fa_tc_keep_bits_cuda: T = %zu out of range", T);
    tc_keep_bits_kernel<<<grid_for(kbytes, 256, 1u << 20), 256, 0, c->stream>>>(
        keep, thr, seed, offset, c->rng_base, rows, (int)T, (int)((T + TC_ROWS - 1) / TC_ROWS));
    CUDA_CHECK_LAUNCH();
}
