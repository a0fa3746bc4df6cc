/* attention_sm90_bwd.cu — the backward of the sm_90 attention
 * (ops/attention_sm90.h: the contract; ops/attention_fused.h: the math):
 *
 *   P_ij  = 2^(t_ij - lse2_i),   t = log2e (scale q_i . k_j + mask_j - max mask)
 *   D_i   = rowsum(dout_i * out_i)   (the dq or clustered dkdv kernel's first step,
 *                                      or sm90_d_kernel)
 *   dP_ij = keep_ij s_d dout_i . v_j,   dS_ij = P_ij (dP_ij - D_i)
 *   dq_i  = scale sum_j dS_ij k_j                            (sm90_dq_kernel)
 *   dv_j  = sum_i keep_ij s_d P_ij dout_i,  dk_j = scale sum_i dS_ij q_i   (sm90_dkdv_kernel)
 *
 * The dropout's scale s_d is taken out of the sums: the kernels keep D' = D / s_d
 * (1 / s_d = (256 - thr) / 256, exact), form dS / s_d = P (keep dout . v - D'), and
 * multiply dq and dk once at the end by scale s_d (dv's P stays scaled before
 * its product: kept at the end, the clusters' form spills). No dropout:
 * s_d = 1, the same bits as without the factoring.
 *
 * Both product kernels are one warpgroup (128 threads), 64 rows a block,
 * the other side streamed in 64-row tiles by cp.async into the 128-byte
 * swizzle (ops/wgmma_sm90.cuh), through a ring of three buffers as the
 * forward's: a tile's last products (dQ += dS K; dV and dK) are left running
 * into the next tile, whose first product is queued behind them, so the
 * tensor cores do not wait for the barrier and the copies between tiles (the
 * clusters' form, which waits for its dQ share inside a tile, keeps two). In the dkdv kernel the
 * accumulators are transposed (rows are keys, columns queries): lse, D and
 * the dropout bits are per column there, read from shared memory where they
 * arrive with the Q and dO tiles. The dq kernel draws the bits as the
 * forward does and writes them, a 64-bit word per (query row, key tile), in
 * the order [B H][T / 64][T] so that a query tile's 64 words are contiguous
 * for the dkdv kernel, which runs second.
 */
#include "attention_sm90.cuh"

#include "engine/mem.h"
#include "engine/settings.h"

namespace {

constexpr int BW_THREADS = 128;
/* the streamed tiles' buffers: the forward's ring of three (SM90_FWD_BUFS),
 * two in the clusters' form; bw_next steps through them */
__host__ __device__ constexpr int bw_bufs(bool dq_in_kernel)
{
    return dq_in_kernel ? 2 : SM90_FWD_BUFS;
}
__device__ __forceinline__ int bw_next(int buf, int nbufs)
{
    return buf + 1 == nbufs ? 0 : buf + 1;
}
constexpr size_t BW_SMEM = (2 + 2 * bw_bufs(false)) * SM90_TILE + 1024;   /* dq: Q, dO, K, V ring */
constexpr size_t BW_AUX = 64 * 4 * 2 + 64 * 8;               /* lse, D, bits of a tile */
/* dkdv: K, V, then Q, dO and the aux of a tile in nb buffers each */
constexpr size_t bw_smem_kv(int nb)
{
    return (2 + 2 * (size_t)nb) * SM90_TILE + (size_t)nb * BW_AUX + 1024;
}
constexpr int BW_PART_LD = 72;   /* floats a row of the dQ partial: float2 stores conflict-free */
constexpr size_t BW_SMEM_KV = bw_smem_kv(bw_bufs(false));
constexpr size_t BW_SMEM_KVQ = bw_smem_kv(bw_bufs(true)) + 64 * BW_PART_LD * 4;   /* + dS^T */
static_assert(3 * (BW_SMEM + 1024) <= 228 * 1024 && 3 * (BW_SMEM_KV + 1024) <= 228 * 1024,
              "three blocks an SM (__launch_bounds__)");
static_assert(64 * BW_PART_LD * 4 >= SM90_TILE, "the partial's room holds dS^T");

/* One eighth of D_i: dout . out over the 8 elements at a and o (16 bytes each,
 * values as stored), summed in element order; bw_sum8 adds the eight lanes of
 * a row (aligned groups of 8) in a fixed butterfly. The D kernel and the dq
 * kernel both sum this way, so D has the same bits from either. */
template <typename E>
__device__ __forceinline__ float bw_dot8(const E *a, const E *o)
{
    const uint4 x = *reinterpret_cast<const uint4 *>(a);
    const uint4 y = *reinterpret_cast<const uint4 *>(o);
    const uint32_t av[4] = {x.x, x.y, x.z, x.w}, ov[4] = {y.x, y.y, y.z, y.w};
    float acc = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const float2 u = unpack2<E>(av[e]), w = unpack2<E>(ov[e]);
        acc = fmaf(u.x, w.x, acc);
        acc = fmaf(u.y, w.y, acc);
    }
    return acc;
}

__device__ __forceinline__ float bw_sum8(float acc)
{
    acc += __shfl_xor_sync(FULL_MASK, acc, 1);
    acc += __shfl_xor_sync(FULL_MASK, acc, 2);
    acc += __shfl_xor_sync(FULL_MASK, acc, 4);
    return acc;
}

/* D'_i = sdi sum_e dout_ie out_ie in f32 (sdi = 1 / s_d), rows in [B H T] order; 8 lanes a row, 16
 * bytes each. Used where the dq kernel does not run (its clusters' form, or
 * no dq asked for); the dq kernel otherwise makes D for its rows itself. */
template <typename E>
__global__ void __launch_bounds__(256)
    sm90_d_kernel(float *D, const E *dout, const E *out, float sdi, int H, int T, int ld,
                  size_t rows)
{
    const size_t z = ((size_t)blockIdx.x * 256 + threadIdx.x) >> 3;
    const int part = threadIdx.x & 7;
    float acc = 0.0f;
    if (z < rows) {
        const size_t bh = z / (size_t)T, i = z % (size_t)T, b = bh / H, h = bh % H;
        const size_t off = (b * T + i) * (size_t)ld + h * 64 + part * 8;
        acc = bw_dot8<E>(dout + off, out + off);
    }
    acc = bw_sum8(acc);
    if (z < rows && part == 0) D[z] = acc * sdi;
}

/* D' of one head's query rows i0 .. i0 + 63 into Dh (the head's [T] row of D')
 * and, when dsh is given, into dsh [64]: a block of BW_THREADS threads, 8
 * lanes a row, four rows' eighths a thread; dout and out point at the head's
 * first token. The sums of sm90_d_kernel, so the same bits. */
template <typename E>
__device__ __forceinline__ void bw_make_d(float *Dh, float *dsh, const E *dout, const E *out,
                                          float sdi, int i0, int ld_out, int tid)
{
    float d[4];   /* the four rows' sums first, then their stores: the loads all in flight */
#pragma unroll
    for (int it = 0; it < 4; it++) {
        const int x = tid + BW_THREADS * it, row = x >> 3, part = x & 7;
        const size_t off = (size_t)(i0 + row) * ld_out + part * 8;
        d[it] = bw_sum8(bw_dot8<E>(dout + off, out + off)) * sdi;
    }
#pragma unroll
    for (int it = 0; it < 4; it++) {
        const int x = tid + BW_THREADS * it, row = x >> 3;
        if ((x & 7) == 0) {
            if (dsh) dsh[row] = d[it];
            Dh[i0 + row] = d[it];
        }
    }
}

/* s = A0 B0^T and dp = A1 B1^T over K = 64 (tiles at shared addresses a0, b0,
 * a1, b1), issued and committed, not waited for. Both kernels' first two
 * products of a tile: S and dP (dq), S^T and dP^T (dkdv). */
template <typename E>
__device__ __forceinline__ void bw_issue_pair(float (&s)[32], float (&dp)[32], uint32_t a0,
                                              uint32_t b0, uint32_t a1, uint32_t b1)
{
#pragma unroll
    for (int x = 0; x < 32; x++) s[x] = dp[x] = 0.0f;
    wg_fence();
    sm90_abt<E>(s, a0, b0);
    sm90_abt<E>(dp, a1, b1);
    wg_commit();
}

/* The same two products issued one after the other for the dkdv kernel's
 * ring: s's group first, then a wait for all but it (the tile before's dV and
 * dK products, and with them the registers of their accumulators' A
 * fragments), then dp's. Issued together behind dV and dK, the four products'
 * registers outgrow the kernel's (ptxas serializes every wgmma, C7512); so
 * the tensor cores run dV, dK, then S^T while dP^T is issued. */
template <typename E>
__device__ __forceinline__ void bw_issue_split(float (&s)[32], float (&dp)[32],
                                               float (&adk)[32], float (&adv)[32], uint32_t a0,
                                               uint32_t b0, uint32_t a1, uint32_t b1)
{
#pragma unroll
    for (int x = 0; x < 32; x++) s[x] = 0.0f;
    wg_fence();
    sm90_abt<E>(s, a0, b0);
    wg_commit();
    wg_wait<1>();
    wg_keep(adk);
    wg_keep(adv);
#pragma unroll
    for (int x = 0; x < 32; x++) dp[x] = 0.0f;
    wg_fence();
    sm90_abt<E>(dp, a1, b1);
    wg_commit();
}

/* dq (and the dropout bits). A block owns query rows i0 .. i0 + 63 of head bh.
 * With out given it first makes D for its rows (for itself, and into D for
 * the dkdv kernel); with out NULL it reads D, made by the D kernel. */
template <typename E>
__global__ void __launch_bounds__(BW_THREADS, 3)
    sm90_dq_kernel(E *dq, uint64_t *bits, const uint64_t *bits_in, const E *q, const E *k,
                   const E *v, const E *dout, const E *out,
                   const float *lse, float *D, const float *mask, float scale_log2,
                   float gscale, float sdi, uint32_t thr, uint64_t seed, uint64_t offset,
                   const uint64_t *rng_base, int H, int T, int ld_in, int ld_out)
{
    extern __shared__ unsigned char sm90_smem[];
    __shared__ float red[BW_THREADS / 32];
    __shared__ float dsh[64];   /* D of the block's rows, when it makes them */
    const uint32_t base = (smem_u32(sm90_smem) + 1023u) & ~1023u;
    const uint32_t sq = base, sdo = base + SM90_TILE, sk = base + 2 * SM90_TILE,
                   sv = sk + bw_bufs(false) * SM90_TILE;
    if (rng_base) offset += *rng_base;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int bh = blockIdx.y, b = bh / H, h = bh - b * H, i0 = blockIdx.x * 64;
    const size_t hin = (size_t)b * T * ld_in + (size_t)h * 64;
    const size_t hout = (size_t)b * T * ld_out + (size_t)h * 64;
    q += hin; k += hin; v += hin;
    if (dq) dq += hin;
    dout += hout;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    const int ntiles = T / 64;

    wg_load_tile<64, BW_THREADS>(sq, q, i0, T, ld_in, tid);
    wg_load_tile<64, BW_THREADS>(sdo, dout, i0, T, ld_out, tid);
    wg_load_tile<64, BW_THREADS>(sk, k, 0, T, ld_in, tid);
    wg_load_tile<64, BW_THREADS>(sv, v, 0, T, ld_in, tid);
    cp_async_commit();
    if (out) {   /* D of rows i0 .. i0 + 63, for this block and the dkdv kernel */
        bw_make_d<E>(D + (size_t)bh * T, dsh, dout, out + hout, sdi, i0, ld_out, tid);
        __syncthreads();
    }
    const float mmax = mask_row_max<BW_THREADS>(mb, T, red);
    const int row0 = i0 + warp * 16 + g;
    const uint64_t rowg0 = (uint64_t)bh * T + (uint64_t)row0;
    if (mmax == -INFINITY) {   /* every key masked: the gradients are 0 */
        cp_async_wait<0>();
        if (dq)
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int c = 0; c < 8; c++)
                    st_pair(dq + (size_t)(row0 + 8 * r) * ld_in + 8 * c + 2 * t, 0u);
        return;
    }
    const float nmm = sm90_mask_shift(mmax);
    float L[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        L[r] = lse[rowg0 + 8 * r] * LOG2E_F32;
        Dr[r] = out ? dsh[row0 - i0 + 8 * r] : D[rowg0 + 8 * r];
    }
    float acc[32];   /* not zeroed: the first product overwrites it (C7515) */
    for (int n = 0, buf = 0; n < ntiles; n++, buf = bw_next(buf, bw_bufs(false))) {
        const int k0 = n * 64;
        /* tile n is here; tile n - 2's buffers are free (its dQ product was
         * waited for with tile n - 1's first two), tile n - 1's may still be read */
        sm90_ring_ready();
        if (n + 1 < ntiles) {
            const int nb = bw_next(buf, bw_bufs(false));
            wg_load_tile<64, BW_THREADS>(sk + nb * SM90_TILE, k, k0 + 64, T, ld_in, tid);
            wg_load_tile<64, BW_THREADS>(sv + nb * SM90_TILE, v, k0 + 64, T, ld_in, tid);
            cp_async_commit();
        }
        const uint32_t skb = sk + buf * SM90_TILE, svb = sv + buf * SM90_TILE;
        float s[32], dp[32];
        bw_issue_pair<E>(s, dp, sq, skb, sdo, svb);
        uint64_t kw[2] = {~0ull, ~0ull};
        if (bits_in) {
            const uint64_t *w = bits_in + ((uint64_t)bh * ntiles + n) * T + row0;
            kw[0] = w[0];
            kw[1] = w[8];
        } else if (thr) {
            sm90_keep_rows(kw, rowg0, k0, T, thr, seed, offset, lane);
            if (bits && t < 2)
                bits[((uint64_t)bh * ntiles + n) * T + row0 + 8 * t] = t ? kw[1] : kw[0];
        }
        float mt[16];
        sm90_mask_terms(mt, mb, k0, nmm, t);
        wg_wait<0>();   /* S and dP, and tile n - 1's dQ product before them */
        wg_keep(s);
        wg_keep(dp);
        wg_keep(acc);
        const uint64_t ks[2] = {kw[0] >> (2 * t), kw[1] >> (2 * t)};
#pragma unroll
        for (int c = 0; c < 8; c++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, x = 4 * c + e;
                const float pv = ex2(fmaf(s[x], scale_log2, mt[2 * c + (e & 1)]) - L[r]);
                const float dpv = sm90_kept(ks[r], c, e & 1) ? dp[x] : 0.0f;
                s[x] = pv * (dpv - Dr[r]);
            }
        uint32_t a[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) wg_acc_to_a<E>(a[j], s, j);
        wg_fence();
        sm90_ab<E>(acc, a, skb, n == 0);
        wg_commit();
    }
    wg_wait<0>();
    wg_keep(acc);
    if (!dq) return;
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int c = 0; c < 8; c++)
            st_pair(dq + (size_t)(row0 + 8 * r) * ld_in + 8 * c + 2 * t,
                    pack2<E>(acc[4 * c + 2 * r] * gscale, acc[4 * c + 2 * r + 1] * gscale));
}

/* Rows q0 .. q0 + 63 of lse and D, and the 64 bit words of key tile m for
 * them, into the aux area at shared address dst (threads 0 .. 63) */
__device__ __forceinline__ void bw_load_aux(uint32_t dst, const float *lse_h, const float *D_h,
                                            const uint64_t *bits_t, int q0, int tid)
{
    if (tid < 16) cp_async16(dst + tid * 16, lse_h + q0 + tid * 4, true);
    else if (tid < 32) cp_async16(dst + 256 + (tid - 16) * 16, D_h + q0 + (tid - 16) * 4, true);
    else if (tid < 64 && bits_t)
        cp_async16(dst + 512 + (tid - 32) * 16, bits_t + q0 + (tid - 32) * 2, true);
}

/* dq's 4 elements at float4 x (row x / 16, columns 4 (x % 16) ..) of query
 * tile n, as one 8-byte store */
template <typename E>
__device__ __forceinline__ uint2 *bw_dq_at(E *dq, int n, int x, int ld)
{
    return reinterpret_cast<uint2 *>(dq + (size_t)(n * 64 + (x >> 4)) * ld + 4 * (x & 15));
}

/* DQ: block rank's share of query tile n's dQ, the float4s f4_lo .. f4_hi - 1
 * of the tile's 1,024, summed over the cluster's nb partials (at shared
 * address sp in each block) in rank order (0 + the first, + the second, ...),
 * scaled and written; four blocks' loads in flight before their adds. */
template <typename E>
__device__ __forceinline__ void bw_dq_reduce(E *dq, uint32_t sp, int n, int nb, int f4_lo,
                                             int f4_hi, float scale, int ld, int tid)
{
    for (int x = f4_lo + tid; x < f4_hi; x += BW_THREADS) {
        const uint32_t off = sp + (uint32_t)(((x >> 4) * BW_PART_LD + 4 * (x & 15)) * 4);
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int r0 = 0; r0 < 8; r0 += 4) {   /* four loads in flight, then their adds */
            float4 u[4];
#pragma unroll
            for (int r = 0; r < 4; r++)
                if (r0 + r < nb) u[r] = ld_cluster_f4(cluster_map(off, (uint32_t)(r0 + r)));
#pragma unroll
            for (int r = 0; r < 4; r++)
                if (r0 + r < nb) {
                    a.x += u[r].x; a.y += u[r].y; a.z += u[r].z; a.w += u[r].w;
                }
        }
        *bw_dq_at(dq, n, x, ld) =
            make_uint2(pack2<E>(a.x * scale, a.y * scale), pack2<E>(a.z * scale, a.w * scale));
    }
}

/* dk and dv (DQ false), or dk, dv and dq (DQ true). A block owns key rows
 * j0 .. j0 + 63 of head bh. With DQ the T / 64 blocks of a head are one
 * cluster: at query tile n each block's dS^T goes to shared memory as
 * wgmma's A (read transposed) for its share dQ_n^(j) = dS_nj K_j (f32),
 * which lands in a partial in the block's own shared memory (where dS^T
 * was); the block arrives at a cluster barrier. Early in tile n + 1 (its
 * first two products issued, so the wait and the remote loads run beside
 * them) it waits there, sums its 1 / (T / 64) of tile n over the blocks'
 * partials in rank order (fixed: the same bits every run), writes it and
 * arrives at a second barrier, waited for before its next dS^T store. */
template <typename E, bool DQ>
__global__ void __launch_bounds__(BW_THREADS, 3)
    sm90_dkdv_kernel(E *dk, E *dv, E *dq, const uint64_t *bits, const E *q, const E *k,
                     const E *v, const E *dout, const E *out, const float *lse, float *D,
                     const float *mask, float scale_log2, float gscale, float sd, float sdi,
                     int H, int T,
                     int ld_in, int ld_out)
{
    extern __shared__ unsigned char sm90_smem[];
    __shared__ float red[BW_THREADS / 32];
    const uint32_t base = (smem_u32(sm90_smem) + 1023u) & ~1023u;
    constexpr int NB = bw_bufs(DQ);
    const uint32_t sk = base, sv = base + SM90_TILE, sq = base + 2 * SM90_TILE,
                   sdo = sq + NB * SM90_TILE, sa = sdo + NB * SM90_TILE;
    const uint32_t sp = sa + NB * (uint32_t)BW_AUX;   /* DQ: dS^T, then the partial */
    unsigned char *abase = sm90_smem + (sa - smem_u32(sm90_smem));
    unsigned char *pbase = sm90_smem + (sp - smem_u32(sm90_smem));
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int bh = blockIdx.y, b = bh / H, h = bh - b * H, j0 = blockIdx.x * 64;
    const int ntiles = T / 64;
    const size_t hin = (size_t)b * T * ld_in + (size_t)h * 64;
    q += hin; k += hin; v += hin; dk += hin; dv += hin;
    if (DQ) dq += hin;
    const size_t hout = (size_t)b * T * ld_out + (size_t)h * 64;
    dout += hout;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    const float *lse_h = lse + (size_t)bh * T, *D_h = D + (size_t)bh * T;
    const uint64_t *bits_t = bits ? bits + ((size_t)bh * ntiles + blockIdx.x) * T : NULL;
    /* DQ: this block's share of a tile's 1,024 float4s of dQ */
    const int rank = DQ ? (int)cluster_rank() : 0;
    const int f4_lo = rank * 1024 / ntiles, f4_hi = (rank + 1) * 1024 / ntiles;

    wg_load_tile<64, BW_THREADS>(sk, k, j0, T, ld_in, tid);
    wg_load_tile<64, BW_THREADS>(sv, v, j0, T, ld_in, tid);
    wg_load_tile<64, BW_THREADS>(sq, q, 0, T, ld_in, tid);
    wg_load_tile<64, BW_THREADS>(sdo, dout, 0, T, ld_out, tid);
    if (DQ) {   /* no D kernel ran: block rank makes D of query tile rank for the cluster,
                 * the barrier's release and acquire make it visible before any block
                 * loads it (the tiles above load meanwhile, the mask's max between) */
        bw_make_d<E>(D + (size_t)bh * T, NULL, dout, out + hout, sdi, rank * 64, ld_out, tid);
        cluster_arrive();
    }
    const float mmax = mask_row_max<BW_THREADS>(mb, T, red);
    if (DQ) cluster_wait();
    bw_load_aux(sa, lse_h, D_h, bits_t, 0, tid);
    cp_async_commit();
    const int key0 = j0 + warp * 16 + g;
    if (mmax == -INFINITY) {   /* every block of the cluster is here: no barrier */
        cp_async_wait<0>();
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int c = 0; c < 8; c++) {
                const size_t o = (size_t)(key0 + 8 * r) * ld_in + 8 * c + 2 * t;
                st_pair(dk + o, 0u);
                st_pair(dv + o, 0u);
            }
        if (DQ)
            for (int n = 0; n < ntiles; n++)
                for (int x = f4_lo + tid; x < f4_hi; x += BW_THREADS)
                    *bw_dq_at(dq, n, x, ld_in) = make_uint2(0u, 0u);
        return;
    }
    float km[2];
#pragma unroll
    for (int r = 0; r < 2; r++)
        km[r] = mb ? fmaf(mb[key0 + 8 * r], LOG2E_F32, sm90_mask_shift(mmax)) : 0.0f;
    float adk[32], adv[32];   /* not zeroed: the first products overwrite them (C7515) */
    for (int n = 0, buf = 0; n < ntiles; n++, buf = bw_next(buf, NB)) {
        /* the ring: tile n - 2's products were waited for with tile n - 1's
         * first two; the clusters' form has waited for all of its own */
        if (DQ) sm90_tile_ready();
        else sm90_ring_ready();
        if (n + 1 < ntiles) {
            const int q1 = (n + 1) * 64, nb = bw_next(buf, NB);
            wg_load_tile<64, BW_THREADS>(sq + nb * SM90_TILE, q, q1, T, ld_in, tid);
            wg_load_tile<64, BW_THREADS>(sdo + nb * SM90_TILE, dout, q1, T, ld_out, tid);
            bw_load_aux(sa + nb * (uint32_t)BW_AUX, lse_h, D_h, bits_t, q1, tid);
            cp_async_commit();
        }
        const uint32_t sqb = sq + buf * SM90_TILE, sdob = sdo + buf * SM90_TILE;
        float s[32], dp[32];
        if (DQ) bw_issue_pair<E>(s, dp, sk, sqb, sv, sdob);
        else bw_issue_split<E>(s, dp, adk, adv, sk, sqb, sv, sdob);
        if (DQ && n > 0) {
            cluster_wait();   /* every block's share of tile n - 1 is in place */
            bw_dq_reduce<E>(dq, sp, n - 1, ntiles, f4_lo, f4_hi, gscale, ld_in, tid);
            cluster_arrive();
        }
        const unsigned char *ab = abase + buf * BW_AUX;
        const float *al = reinterpret_cast<const float *>(ab);
        const float *aD = reinterpret_cast<const float *>(ab + 256);
        const uint64_t *aw = reinterpret_cast<const uint64_t *>(ab + 512);
        wg_wait<0>();   /* S^T and dP^T, and tile n - 1's dV and dK products before them */
        wg_keep(s);
        wg_keep(dp);
        wg_keep(adk);
        wg_keep(adv);
        /* entry 4 c + 2 r + e: key row 16 warp + g + 8 r, query column 8 c + 2 t + e */
#pragma unroll
        for (int c = 0; c < 8; c++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int col = 8 * c + 2 * t + e;
                const float Lq = al[col] * LOG2E_F32, Dq = aD[col];
                /* the key rows' bits: 16 warp + g and + 8 of the column's word */
                const uint32_t wb = bits_t ? (uint32_t)(aw[col] >> (warp * 16 + g)) : ~0u;
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int x = 4 * c + 2 * r + e;
                    const bool keep = (wb >> (8 * r)) & 1u;
                    const float pv = ex2(fmaf(s[x], scale_log2, km[r]) - Lq);
                    const float dpv = keep ? dp[x] : 0.0f;
                    s[x] = keep ? pv * sd : 0.0f;
                    dp[x] = pv * (dpv - Dq);
                }
            }
        uint32_t pa[4][4], da[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            wg_acc_to_a<E>(pa[j], s, j);
            wg_acc_to_a<E>(da[j], dp, j);
        }
        if (DQ) {
            if (n > 0) cluster_wait();   /* every block has read the last partials */
            /* dS^T as stored: da[j][i] is key row 16 warp + g + 8 (i & 1), query
             * columns 8 (2 j + i / 2) + 2 t, + 1 */
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    st_pair(pbase + sw128_off(16 * warp + g + 8 * (i & 1),
                                              16 * j + 8 * (i >> 1) + 2 * t),
                            da[j][i]);
            fence_proxy_async();
            __syncthreads();
        }
        wg_fence();
        sm90_ab<E>(adv, pa, sdob, n == 0);
        sm90_ab<E>(adk, da, sqb, n == 0);
        if (DQ) {
            float dqa[32];
#pragma unroll
            for (int j = 0; j < 4; j++)
                wg_mma_ss<E, 1, 1>(dqa, wg_desc(sp, j, true), wg_desc(sk, j, true), j > 0);
            wg_commit();
            wg_wait<0>();
            wg_keep(dqa);
            /* this block's dQ_n: query row 16 warp + g + 8 r, columns 8 c + 2 t, + 1 */
            float *part = reinterpret_cast<float *>(pbase);
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int c = 0; c < 8; c++)
                    *reinterpret_cast<float2 *>(part + (16 * warp + g + 8 * r) * BW_PART_LD +
                                                8 * c + 2 * t) =
                        make_float2(dqa[4 * c + 2 * r], dqa[4 * c + 2 * r + 1]);
            cluster_arrive();
        } else {
            wg_commit();
        }
    }
    wg_wait<0>();
    wg_keep(adk);
    wg_keep(adv);
    if (DQ) {   /* the last tile; no block leaves while its shared memory may be read */
        cluster_wait();
        bw_dq_reduce<E>(dq, sp, ntiles - 1, ntiles, f4_lo, f4_hi, gscale, ld_in, tid);
        cluster_arrive();
        cluster_wait();
    }
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
        for (int c = 0; c < 8; c++) {
            const size_t o = (size_t)(key0 + 8 * r) * ld_in + 8 * c + 2 * t;
            st_pair(dv + o, pack2<E>(adv[4 * c + 2 * r], adv[4 * c + 2 * r + 1]));
            st_pair(dk + o,
                    pack2<E>(adk[4 * c + 2 * r] * gscale, adk[4 * c + 2 * r + 1] * gscale));
        }
}

} // namespace

/* where dq is made: -1 the setting (CTRAIN_ATTN_SM90_DQ), 0 the dq kernel, 1
 * the dkdv kernel's clusters (attention_sm90_tune_dq) */
static int sm90_dq_mode = -1;

extern "C" void attention_sm90_tune_dq(int mode)
{
    CT_ASSERT(mode >= -1 && mode <= 1, "attention_sm90_tune_dq: %d (-1, 0 or 1)", mode);
    sm90_dq_mode = mode;
}

/* the dkdv kernel with dq, in clusters of T / 64 blocks */
template <typename E, typename... A>
static void launch_clusters(Ctx *c, dim3 grid, size_t smem, A... args)
{
    auto kern = sm90_dkdv_kernel<E, true>;
    smem_optin(kern, smem);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = grid.x;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(BW_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern, args...));
}

extern "C" void attention_sm90_backward(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                                        const void *q, const void *k, const void *v,
                                        const void *out, const float *lse, const float *mask,
                                        DType dt, float p, uint64_t seed, uint64_t offset,
                                        size_t B, size_t H, size_t T, size_t ld_in,
                                        size_t ld_out, const uint64_t *bits_in)
{
    CT_ASSERT(attention_sm90_supports(c, dt, B, H, T, 64),
              "attention_sm90_backward: [B %zu, H %zu, T %zu] %s not supported here", B, H, T,
              dtype_name(dt));
    CT_ASSERT((dk == NULL) == (dv == NULL), "attention_sm90_backward: dk and dv go together");
    if (!dq && !dk) return;
    const float scale = 0.125f, scale_log2 = LOG2E_F32 * scale, sd = drop_scale(p);
    const uint32_t thr = drop_threshold(p);
    /* the gradients' factors: s_d out of the sums (the header), 1 / s_d exact */
    const float gscale = scale * sd, sdi = (float)(256u - thr) / 256.0f;
    if (!thr) bits_in = NULL;
    /* dq in the clusters: all three gradients wanted, the mask's bits at hand
     * (kept by the forward, or no dropout), a head's key tiles one cluster;
     * CTRAIN_ATTN_SM90_DQ: kernel 0, cluster 1, auto 2 = clusters of at most
     * two blocks (T <= 128), where they measured faster than the dq kernel */
    const int choice = sm90_dq_mode >= 0 ? sm90_dq_mode : setting_choice(SET_ATTN_SM90_DQ);
    const int want = choice == 2 ? T <= 128 : choice;
    const int fused = want && dq && dk && (!thr || bits_in) && T / 64 <= 8;
    /* the bits for the dkdv kernel: the forward's, or drawn by the dq kernel */
    const size_t rows = B * H * T, dbytes = rows * 4;
    const size_t bbytes = thr && dk && !bits_in ? rows * (T / 64) * 8 : 0;
    float *D = (float *)mem_alloc(c, dbytes);
    uint64_t *bits = bbytes ? (uint64_t *)mem_alloc(c, bbytes) : NULL;
    const dim3 grid((unsigned)(T / 64), (unsigned)(B * H));
    /* D from the dq kernel where it runs (it reads dO's rows anyway), or from the
     * clusters' blocks, else from its own kernel */
    const int dq_kernel = !fused && (dq || bits);
    dispatch_lowp(dt, "attention_sm90_backward", [&](auto tag) {
        using E = decltype(tag);
        if (!dq_kernel && !fused) {
            sm90_d_kernel<E><<<grid_for(rows * 8, 256, 1u << 30), 256, 0, c->stream>>>(
                D, (const E *)dout, (const E *)out, sdi, (int)H, (int)T, (int)ld_out, rows);
            CUDA_CHECK_LAUNCH();
        }
        if (fused) {
            launch_clusters<E>(c, grid, BW_SMEM_KVQ, (E *)dk, (E *)dv, (E *)dq, bits_in,
                               (const E *)q, (const E *)k, (const E *)v, (const E *)dout,
                               (const E *)out, lse, D, mask, scale_log2, gscale, sd, sdi, (int)H,
                               (int)T, (int)ld_in, (int)ld_out);
            return;
        }
        if (dq_kernel) {
            smem_optin(sm90_dq_kernel<E>, BW_SMEM);
            sm90_dq_kernel<E><<<grid, BW_THREADS, BW_SMEM, c->stream>>>(
                (E *)dq, bits, bits_in, (const E *)q, (const E *)k, (const E *)v, (const E *)dout,
                (const E *)out, lse, D, mask, scale_log2, gscale, sdi, thr, seed, offset,
                c->rng_base, (int)H, (int)T, (int)ld_in, (int)ld_out);
            CUDA_CHECK_LAUNCH();
        }
        if (dk) {
            smem_optin(sm90_dkdv_kernel<E, false>, BW_SMEM_KV);
            sm90_dkdv_kernel<E, false><<<grid, BW_THREADS, BW_SMEM_KV, c->stream>>>(
                (E *)dk, (E *)dv, NULL, bits_in ? bits_in : bits, (const E *)q, (const E *)k,
                (const E *)v, (const E *)dout, (const E *)NULL, lse, D, mask, scale_log2, gscale,
                sd, sdi, (int)H, (int)T, (int)ld_in, (int)ld_out);
            CUDA_CHECK_LAUNCH();
        }
    });
    if (bits) mem_free(c, bits, bbytes);
    mem_free(c, D, dbytes);
}
