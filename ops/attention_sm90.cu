/* attention_sm90.cu — fused attention on Hopper's wgmma (sm_90a), head width
 * 64, f16 / bf16: the forward (this file) and the backward
 * (ops/attention_sm90_bwd.cu). Contract and math: ops/attention_fused.h (lse
 * of the shifted scores, the dropout mask of ops/dropout_mask.h bit for bit,
 * the saved keep words); the calls: ops/attention_sm90.h. The PTX wrappers
 * and the layouts: ops/wgmma_sm90.cuh.
 *
 * Shape letters: B batch, H heads, T tokens (a multiple of 64), Dh = 64;
 * q, k, v, out are [B, T, H, 64] views with a token stride of their own
 * (ld_in for q, k, v: 3 H 64 when they are the thirds of one projection;
 * ld_out for out and dout), so BERT's fused q/k/v projection is read in place.
 *
 * ---- The forward ----
 * A block is two warpgroups (256 threads) and owns 128 query rows of one
 * head, 64 a warpgroup. It streams the head's keys in tiles of 64, K and V
 * in a ring of three buffers in shared memory (cp.async, 128-byte swizzle):
 * tile n + 1 is copied while tile n is used and tile n - 1's V may still be
 * read by the product issued last. Per tile n, each warpgroup:
 *   S  = Q K^T                  four wgmmas (k 16 each), Q and K from shared memory
 *   (while S and the previous tile's P V run: this tile's dropout bits and
 *   mask terms; then one wait for both)
 *   t  = log2e (scale S + mask - max mask)     online softmax: m' = max(m, max t),
 *   l  = l 2^(m - m') + sum 2^(t - m'),  O = O 2^(m - m')
 *                               (lazily: m' = m, nothing rescaled, while every row of
 *                               the warp has max t <= m + 8, so P <= 2^8)
 *   O += (keep 2^(t - m')) V    four wgmmas, P from registers, V read transposed,
 *                               left running into the next tile
 * and at the end out = s_d O / l, lse = ln2 (m + log2 l) (0 and -inf for a row
 * whose keys are all -inf). The dropout bits: sixteen keys a Philox call
 * (drop_keep16); the four lanes of a quad share two rows, so each lane draws
 * its 16-key group of both rows (two calls, a quarter of the quad's 128 bits)
 * and 4 shuffles give every lane both rows' 64 bits; the same words go to
 * keep_out and, in the backward's order, to bits_out.
 */
#include "attention_sm90.h"

#include "attention_sm90.cuh"

namespace {

/* NWG warpgroups a block, 64 query rows each: 2 (K and V shared by two, 2
 * blocks an SM) or 1 (no barrier between warpgroups; 3 blocks an SM, as the
 * ring's shared memory allows) */
template <typename E, int NWG>
__global__ void __launch_bounds__(128 * NWG, 4 / NWG)
    sm90_fwd_kernel(E *out, float *lse, uint64_t *keep_out, uint64_t *bits_out, const E *q,
                    const E *k, const E *v,
                    const float *mask, float scale_log2, float sd, uint32_t thr, uint64_t seed,
                    uint64_t offset, const uint64_t *rng_base, int H, int T, int ld_in,
                    int ld_out)
{
    extern __shared__ unsigned char sm90_smem[];
    constexpr int NT = 128 * NWG, ROWS = 64 * NWG;
    __shared__ float red[NT / 32];
    const uint32_t base = (smem_u32(sm90_smem) + 1023u) & ~1023u;
    const uint32_t sq = base, sk = base + NWG * SM90_TILE, sv = sk + SM90_FWD_BUFS * SM90_TILE;
    if (rng_base) offset += *rng_base;   /* inside a CUDA graph (dropout.h) */
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int bh = blockIdx.y, b = bh / H, h = bh - b * H, i0 = blockIdx.x * ROWS;
    const size_t hin = (size_t)b * T * ld_in + (size_t)h * 64;
    q += hin; k += hin; v += hin;
    out += (size_t)b * T * ld_out + (size_t)h * 64;
    const float *mb = mask ? mask + (size_t)b * T : NULL;
    const int ntiles = T / 64;

    wg_load_tile<ROWS, NT>(sq, q, i0, T, ld_in, tid);
    wg_load_tile<64, NT>(sk, k, 0, T, ld_in, tid);
    wg_load_tile<64, NT>(sv, v, 0, T, ld_in, tid);
    cp_async_commit();
    const float mmax = mask_row_max<NT>(mb, T, red);
    /* this thread's rows: r 0 and r 1 of the accumulator layout */
    const int row0 = i0 + wg * 64 + warp * 16 + g;
    const uint64_t rowg0 = (uint64_t)bh * T + (uint64_t)row0;
    if (mmax == -INFINITY) {   /* every key masked: no distribution, out 0 */
        cp_async_wait<0>();
        for (int n = 0; n < ntiles; n++) {
            uint64_t kw[2];
            if (keep_out) sm90_keep_rows(kw, rowg0, n * 64, T, thr, seed, offset, lane);
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int i = row0 + 8 * r;
                if (i >= T) continue;
                if (keep_out && t == r) keep_out[(rowg0 + 8 * r) * ntiles + n] = kw[r];
                if (n == 0) {
#pragma unroll
                    for (int c = 0; c < 8; c++)
                        st_pair(out + (size_t)i * ld_out + 8 * c + 2 * t, 0u);
                    if (t == 0) lse[rowg0 + 8 * r] = -INFINITY;
                }
            }
        }
        return;
    }

    /* O is not zeroed: the first tile's first product overwrites it (a zeroing
     * by ordinary instructions makes ptxas serialize the wgmmas, C7515) */
    float o[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const float nmm = sm90_mask_shift(mmax);
    const uint32_t sqw = sq + (uint32_t)wg * SM90_TILE;
    for (int n = 0, buf = 0; n < ntiles; n++, buf = sm90_fwd_next(buf)) {
        const int k0 = n * 64;
        sm90_ring_ready();
        if (n + 1 < ntiles) {
            const int nb = sm90_fwd_next(buf);
            wg_load_tile<64, NT>(sk + nb * SM90_TILE, k, k0 + 64, T, ld_in, tid);
            wg_load_tile<64, NT>(sv + nb * SM90_TILE, v, k0 + 64, T, ld_in, tid);
            cp_async_commit();
        }
        float s[32];
#pragma unroll
        for (int x = 0; x < 32; x++) s[x] = 0.0f;
        const uint32_t skb = sk + buf * SM90_TILE;
        wg_keep(s);
        wg_fence();
        sm90_abt<E>(s, sqw, skb);
        wg_commit();
        /* while S is computed: the keep bits and the mask terms of this tile */
        uint64_t kw[2] = {~0ull, ~0ull};
        if (thr) {
            sm90_keep_rows(kw, rowg0, k0, T, thr, seed, offset, lane);
            if (t < 2 && row0 + 8 * t < T) {
                const uint64_t w = t ? kw[1] : kw[0];
                if (keep_out) keep_out[(rowg0 + 8 * t) * ntiles + n] = w;
                if (bits_out) bits_out[((uint64_t)bh * ntiles + n) * T + row0 + 8 * t] = w;
            }
        }
        float mt[16];
        sm90_mask_terms(mt, mb, k0, nmm, t);
        wg_wait<0>();   /* S, and the previous tile's P V: O may be rescaled */
        wg_keep(s);
        wg_keep(o);
        /* online softmax; entry 4 c + e: row r = e / 2, key 8 c + 2 t + e % 2 */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int c = 0; c < 8; c++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[4 * c + e] = fmaf(s[4 * c + e], scale_log2, mt[2 * c + (e & 1)]);
                mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * c + e]);
            }
        /* the rows' maxima over the quad; the running max m moves only where
         * a row's new max passes it by more than SM90_LAZY (or m is -inf):
         * then the warp rescales, each row by its own factor, as the online
         * softmax always did. Otherwise P = 2^(t - m) stays below 2^SM90_LAZY,
         * and O and l keep their scale (out = O / l and lse = m + log2 l are
         * the same sums at another scale). */
        float mu[2];
        bool grow = false;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 2));
            grow |= !(mx[r] - m[r] <= SM90_LAZY);   /* NaN while m and mx are -inf */
        }
        if (__any_sync(FULL_MASK, grow)) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float mn = fmaxf(m[r], mx[r]);
                mu[r] = mn == -INFINITY ? 0.0f : mn;
                const float corr = ex2(m[r] - mu[r]);
                m[r] = mn;
                l[r] *= corr;
                if (n > 0)
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    o[4 * c + 2 * r] *= corr;
                    o[4 * c + 2 * r + 1] *= corr;
                }
            }
        } else {
            mu[0] = m[0];
            mu[1] = m[1];
        }
        const uint64_t ks[2] = {kw[0] >> (2 * t), kw[1] >> (2 * t)};
#pragma unroll
        for (int c = 0; c < 8; c++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1;
                const float pv = ex2(s[4 * c + e] - mu[r]);
                l[r] += pv;
                s[4 * c + e] = sm90_kept(ks[r], c, e & 1) ? pv : 0.0f;
            }
        uint32_t pa[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) wg_acc_to_a<E>(pa[j], s, j);
        const uint32_t svb = sv + buf * SM90_TILE;
        wg_keep(o);
        wg_fence();
        sm90_ab<E>(o, pa, svb, n == 0);
        wg_commit();
    }
    wg_wait<0>();
    wg_keep(o);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(FULL_MASK, l[r], 1);
        l[r] += __shfl_xor_sync(FULL_MASK, l[r], 2);
        const int i = row0 + 8 * r;
        if (i >= T) continue;
        const float inv = l[r] > 0.0f ? sd / l[r] : 0.0f;
#pragma unroll
        for (int c = 0; c < 8; c++)
            st_pair(out + (size_t)i * ld_out + 8 * c + 2 * t,
                    pack2<E>(o[4 * c + 2 * r] * inv, o[4 * c + 2 * r + 1] * inv));
        if (t == 0) lse[rowg0 + 8 * r] = l[r] > 0.0f ? (m[r] + log2f(l[r])) * LN2_F32 : -INFINITY;
    }
}

} // namespace

/* warpgroups a forward block (attention_sm90_tune) */
static int sm90_fwd_wgs = 2;

extern "C" void attention_sm90_tune(int fwd_wgs)
{
    CT_ASSERT(fwd_wgs == 1 || fwd_wgs == 2, "attention_sm90_tune: fwd_wgs %d (1 or 2)", fwd_wgs);
    sm90_fwd_wgs = fwd_wgs;
}

extern "C" int attention_sm90_supports(const Ctx *c, DType dt, size_t B, size_t H, size_t T,
                                       size_t Dh)
{
    static int cached[64];   /* 1 + (sm_90) per device; 0: not asked yet */
    const int dev = c->device_id;
    if (dev < 0) return 0;
    int ok = 0;
    if (dev < 64 && cached[dev]) {
        ok = cached[dev] - 1;
    } else {
        int major = 0, minor = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        ok = major == 9 && minor == 0;
        if (dev < 64) cached[dev] = ok + 1;
    }
#ifndef CTRAIN_SM90A
    ok = 0;   /* built without sm_90a code: the kernels would trap */
#endif
    return ok && (dt == DT_F16 || dt == DT_BF16) && Dh == 64 && T > 0 && T % 64 == 0 &&
           T <= 0x7fffffff / 64 && B * H > 0 && B * H <= 65535;
}

extern "C" void attention_sm90_forward(Ctx *c, void *out, float *lse, uint64_t *keep_out,
                                       uint64_t *bits_out, const void *q, const void *k,
                                       const void *v,
                                       const float *mask, DType dt, float p, uint64_t seed,
                                       uint64_t offset, size_t B, size_t H, size_t T,
                                       size_t ld_in, size_t ld_out)
{
    CT_ASSERT(attention_sm90_supports(c, dt, B, H, T, 64),
              "attention_sm90_forward: [B %zu, H %zu, T %zu] %s not supported here", B, H, T,
              dtype_name(dt));
    const float scale_log2 = LOG2E_F32 * 0.125f, sd = drop_scale(p);
    const uint32_t thr = drop_threshold(p);
    if (!thr) keep_out = bits_out = NULL;
    dispatch_lowp(dt, "attention_sm90_forward", [&](auto tag) {
        using E = decltype(tag);
        auto kern = sm90_fwd_wgs == 1 ? sm90_fwd_kernel<E, 1> : sm90_fwd_kernel<E, 2>;
        const size_t smem = sm90_smem_fwd(sm90_fwd_wgs);
        const unsigned rows = 64u * (unsigned)sm90_fwd_wgs;
        smem_optin(kern, smem);
        const dim3 grid((unsigned)((T + rows - 1) / rows), (unsigned)(B * H));
        kern<<<grid, 128 * sm90_fwd_wgs, smem, c->stream>>>(
            (E *)out, lse, keep_out, bits_out, (const E *)q, (const E *)k, (const E *)v, mask,
            scale_log2, sd, thr, seed, offset, c->rng_base, (int)H, (int)T, (int)ld_in,
            (int)ld_out);
        CUDA_CHECK_LAUNCH();
    });
}
