/* gpu_flash_attn.c — the fused (flash-style) attention of
 * ops/attention_fused.h against the CPU reference (ops/attention.h) and the
 * cuBLASLt path, for f16 and bf16 storage (f32 attention has no fused
 * kernel: the op runs it on the cuBLASLt path), on both implementations:
 * the tensor-core kernels (ops/attention_fa_tc.cu: aligned pointers) and
 * the FMA kernels (ops/attention_fused.cu: the fallback, reached here by
 * passing pointers 1 element off a 16-byte boundary). Every check's name
 * says which kernel ran ("tc" / "fma").
 *
 *   run:  make -j2 ARCH=90 build/tests/gpu_flash_attn && build/tests/gpu_flash_attn
 *         (CHECK_VERBOSE=1 prints every check and each relative error)
 *   time: CTRAIN_FLASH_BENCH=1 build/tests/gpu_flash_attn   (JSON lines, fused vs cublas,
 *         fused with the saved dropout mask: "save_mask":1)
 *
 * What it checks:
 *   - out, dq, dk, dv element by element against the CPU reference (double
 *     sums, rounded once) with a tolerance from the rounding error analysis
 *     (see "Tolerances" below), and as a whole (relative norm); lse against
 *     a double-precision row log-sum-exp of the mask-shifted scores;
 *   - the fused out is no farther from the reference than the cuBLASLt
 *     path's out (plus the norm tolerance);
 *   - backward with accum 0 and 1, and with only some gradients wanted
 *     (dv alone, dq alone, dk alone; the others NULL);
 *   - shapes B 2, H 2..4, T 1, 17, 64, 128, 130, 512 (and 77, 200), Dh 32 /
 *     64 / 128; masks: none, -10000 padding (batch 1 fully padded when
 *     T <= 28), -inf padding (rows with no keys: out and gradients exactly
 *     0), -inf at the front (whole 64-key tiles without a key, then keys);
 *     dropout p 0 and 0.1;
 *   - dropout mask bit for bit: with v one-hot rows (T <= Dh) out[i][j] is
 *     Pd_ij, so out_ij != 0 must equal attention's keep bit (ops/dropout_mask.h)
 *     at idx = ((b H + h) T + i) T + j (T % 8 = 0 and != 0: the kernels share
 *     one Philox call between 8 keys when they can); the rng_base device
 *     offset gives the same bits as the equivalent plain offset;
 *   - determinism (two eager runs bit-identical) and CUDA graphs: forward +
 *     backward captured once with rng_base, replayed with two base values,
 *     equal bit for bit to eager runs at the matching offsets;
 *   - the tensor op on its flash path (CTRAIN_ATTN=flash) against CTRAIN_ATTN=cublas
 *     through autograd (bf16 and f16 autocast), and all memory returned;
 *   - the saved dropout mask (keep_out / keep_in): forward + backward with
 *     it = without it, bit for bit (out, lse, dq, dk, dv; T 17, 64, 130,
 *     512, Dh 64 / 128, p 0.1 and 0, padded masks, the FMA forward before
 *     either backward); the saved words = the backward's own draw = the
 *     host's Philox bits; p 0 leaves the buffer untouched; graph replay;
 *     the op with CTRAIN_ATTN_SAVE_MASK=1 (also inside a recomputed
 *     segment) = =0, bit for bit, holding exactly the mask's bytes more
 *     from forward to backward, and all memory returned.
 *
 * Tolerances. For a sum of products computed with rounded operands the
 * forward error is bounded by c u sum |a| |b| (u the unit roundoff), so each
 * output element gets a magnitude M (ref_mags) and passes when
 *     |got - ref| <= 8 u_eff M + 2 u_dt |ref| + floor,
 *   u_dt  = 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16): rounding of a stored value
 *           (P and dS before their products, out and the gradients at the
 *           end, out as read back for D);
 *   u_eff = u_dt + 2^-24 (T + Dh + Dh S_max): f32 accumulation over T keys
 *           and Dh features, and the error of a score (S_max = scale Dh
 *           max|q| max|k|) that exp turns into a relative error of P;
 *   M(out_ie) = sum_j Pd_ij |v_je|,  M(dv_je) = sum_i Pd_ij |dout_ie|,
 *   M(dq_ie)  = scale sum_j (|dS_ij| + P_ij Dm_i) |k_je|,
 *   M(dk_je)  = scale sum_i (|dS_ij| + P_ij Dm_i) |q_ie|,
 *   Dm_i = sum_e |dout_ie out_ie|: D = rowsum(dout * out) is formed from out
 *           as stored in dt, so D is off by up to u_dt Dm_i and dS = P (dP -
 *           D) by P u_dt Dm_i (the reason dq, dk are not exactly 0 at T = 1,
 *           where the exact gradient is 0; FlashAttention has the same);
 *   floor = T 2^-25 s_d max|operand| for f16 (P and dS below 2^-14 are
 *           subnormal: absolute error 2^-25 each), else 0 — so where the
 *           reference is exactly 0 with M = 0 (masked keys, rows with no
 *           keys), bf16 and f32 must give exactly 0.
 * The norm check: ||got - ref|| <= tol_norm(dt) ||ref|| + u_dt ||M||.
 * Shape letters: B batch, H heads, T tokens, Dh head width.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "tensor_check.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "engine/philox.h"
#include "ops/dropout_mask.h"
#include "engine/recompute.h"
#include "ops/attention.h"
#include "ops/attention_fused.h"
#include "ops/dropout.h"
#include "ops/ops.h"

/* the storage types the fused kernels run (f32 attention: the cuBLASLt path) */
static const DType half_types[2] = {DT_F16, DT_BF16};

enum { MASK_NONE, MASK_BIG, MASK_INF, MASK_INF_FRONT };
static const char *mask_name[4] = {"", " padded", " padded -inf", " front -inf"};

/* mask[b][t]. BIG / INF: padding keys at the end, more of them for later b
 * (batch 1 fully padded when T <= 28: with -inf, rows with no keys).
 * INF_FRONT: the first T (b + 1) / (B + 1) keys -inf (at T >= 128 whole
 * 64-key tiles hold no key before the first real one). */
static void make_mask(float *mask, size_t B, size_t T, int mode)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            float m = 0.0f;
            if ((mode == MASK_BIG || mode == MASK_INF) && t + 28 * b >= T)
                m = mode == MASK_INF ? -INFINITY : -10000.0f;
            if (mode == MASK_INF_FRONT && t < T * (b + 1) / (B + 1)) m = -INFINITY;
            mask[b * T + t] = m;
        }
}

/* the unit roundoff of a value stored in dt */
static double unit_roundoff(DType dt)
{
    return dt == DT_F32 ? ldexp(1.0, -24) : dt == DT_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
}

/* which fused kernel the dispatcher picks (mis: pointers off 16-byte alignment) */
static const char *kernel_of(Ctx *g, DType dt, size_t Dh, int mis)
{
    return !mis && attention_fa_tc_supports(g, dt, Dh) ? "tc" : "fma";
}

/* ---- device buffers, optionally one element off a 16-byte boundary ---- */

typedef struct DBuf {
    void *base, *p;
} DBuf;

static DBuf dbuf_up(const float *h, size_t n, DType dt, int mis)
{
    DBuf d;
    const size_t es = dtype_size(dt);
    float *tmp = falloc(n + 1);
    tmp[0] = 0.0f;
    memcpy(tmp + 1, h, n * sizeof(float));
    d.base = gpu_upload(mis ? tmp : h, n + (mis ? 1 : 0), dt);
    d.p = (char *)d.base + (mis ? es : 0);
    free(tmp);
    return d;
}
static DBuf dbuf_poison(size_t n, DType dt, int mis)
{
    DBuf d;
    d.base = gpu_alloc_poison(n + 1, dt);
    d.p = (char *)d.base + (mis ? dtype_size(dt) : 0);
    return d;
}
static void dbuf_down(float *h, DBuf d, size_t n, DType dt)
{
    float *tmp = falloc(n + 1);
    const size_t off = (size_t)((char *)d.p - (char *)d.base) / dtype_size(dt);
    gpu_download(tmp, d.base, n + off, dt);
    memcpy(h, tmp + off, n * sizeof(float));
    free(tmp);
}
static void dbuf_free(DBuf d)
{
    if (d.base) dfree(d.base);
}

/* ---- references ---- */

/* lse[b,h,i] = log sum_j exp(scale q_i . k_j + mask[b,j] - M_b) in double,
 * M_b = max_j mask[b,j] (the kernels' shift, ops/attention_fused.h); -inf
 * for a row without keys */
static void lse_ref(float *lse, const float *q, const float *k, const float *mask, size_t B,
                    size_t H, size_t T, size_t Dh)
{
    const double scale = 1.0 / sqrt((double)Dh);
    double *s = (double *)malloc(T * sizeof(double));
    for (size_t bh = 0; bh < B * H; bh++) {
        const float *mb = mask ? mask + (bh / H) * T : NULL;
        double mmax = mb ? -INFINITY : 0.0;
        for (size_t j = 0; mb && j < T; j++) mmax = fmax(mmax, mb[j]);
        for (size_t i = 0; i < T; i++) {
            if (mmax == -INFINITY) { lse[bh * T + i] = -INFINITY; continue; }
            double m = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < T; j++) {
                double d = 0.0;
                for (size_t e = 0; e < Dh; e++)
                    d += (double)q[(bh * T + i) * Dh + e] * k[(bh * T + j) * Dh + e];
                s[j] = scale * d + (mb ? (double)mb[j] - mmax : 0.0);
                m = fmax(m, s[j]);
            }
            for (size_t j = 0; j < T; j++) sum += exp(s[j] - m);
            lse[bh * T + i] = (float)(m + log(sum));
        }
    }
    free(s);
}

/* Error magnitudes M of out, dq, dk, dv (header comment), from the CPU's P
 * (pre-dropout) and out; any of the outputs may be NULL. */
static void ref_mags(float *m_out, float *m_dq, float *m_dk, float *m_dv, const float *q,
                     const float *k, const float *v, const float *dout, const float *out,
                     const float *P, float p, uint64_t seed, uint64_t offset, size_t B, size_t H,
                     size_t T, size_t Dh)
{
    const double scale = 1.0 / sqrt((double)Dh), sd = drop_scale(p);
    const size_t BH = B * H;
#pragma omp parallel for if (BH * T * T * Dh >= 65536)
    for (size_t bh = 0; bh < BH; bh++) {
        const size_t hd = bh * T * Dh, ht = bh * T * T;
        double *pd = (double *)malloc(T * T * sizeof(double));
        double *w = (double *)malloc(T * T * sizeof(double)); /* |dS| + P Dm */
        for (size_t ij = 0; ij < T * T; ij++)
            pd[ij] = p == 0.0f || drop_keep_bit(seed, offset, ht + ij, drop_threshold(p))
                         ? P[ht + ij] * sd
                         : 0.0;
        for (size_t i = 0; dout && i < T; i++) {
            double D = 0.0, Dm = 0.0;
            for (size_t e = 0; e < Dh; e++) Dm += fabs((double)dout[hd + i * Dh + e] * out[hd + i * Dh + e]);
            for (size_t j = 0; j < T; j++) {
                double a = 0.0;
                for (size_t e = 0; e < Dh; e++) a += (double)dout[hd + i * Dh + e] * v[hd + j * Dh + e];
                w[i * T + j] = a; /* dPd for now */
                D += a * pd[i * T + j];
            }
            for (size_t j = 0; j < T; j++) {
                const size_t ij = i * T + j;
                const double Pij = P[ht + ij];
                /* dP = keep s_d dPd (a dropped element has pd 0; where P is 0 too, dS is 0 anyway) */
                const double dP = pd[ij] != 0.0 ? w[ij] * sd : 0.0;
                w[ij] = fabs(Pij * (dP - D)) + Pij * Dm;
            }
        }
        for (size_t r = 0; r < T; r++)
            for (size_t e = 0; e < Dh; e++) {
                double mo = 0.0, mq = 0.0, mk = 0.0, mv = 0.0;
                for (size_t x = 0; x < T; x++) {
                    /* out, dq: r = i, x = j;  dk, dv: r = j, x = i */
                    mo += pd[r * T + x] * fabs(v[hd + x * Dh + e]);
                    if (dout) {
                        mq += w[r * T + x] * fabs(k[hd + x * Dh + e]);
                        mk += w[x * T + r] * fabs(q[hd + x * Dh + e]);
                        mv += pd[x * T + r] * fabs(dout[hd + x * Dh + e]);
                    }
                }
                const size_t at = hd + r * Dh + e;
                if (m_out) m_out[at] = (float)mo;
                if (m_dq) m_dq[at] = (float)(scale * mq);
                if (m_dk) m_dk[at] = (float)(scale * mk);
                if (m_dv) m_dv[at] = (float)mv;
            }
        free(pd);
        free(w);
    }
}

/* Tolerance parameters of one case (header comment) */
typedef struct Tol {
    double u_dt, u_eff, floor, norm;
} Tol;

static Tol tol_of(DType dt, size_t T, size_t Dh, float p, const float *q, const float *k,
                  const float *v, const float *dout, size_t n)
{
    Tol t;
    const double scale = 1.0 / sqrt((double)Dh);
    const double mq = maxabs(q, n), mk = maxabs(k, n), mv = maxabs(v, n), mo = maxabs(dout, n);
    const double smax = scale * (double)Dh * mq * mk;
    t.u_dt = unit_roundoff(dt);
    t.u_eff = t.u_dt + ldexp((double)T + (double)Dh + (double)Dh * smax, -24);
    t.floor = dt == DT_F16 ? (double)T * ldexp(1.0, -25) * drop_scale(p) *
                                 fmax(fmax(mq, mk), fmax(mv, mo))
                           : 0.0;
    t.norm = tol_norm(dt);
    return t;
}

/* Element-wise: |got - ref| <= 8 u_eff M + 2 u_dt |ref| + floor. On failure:
 * how many elements, and the worst one with its (b, h, row, feature). */
static int check_elems(const char *name, const float *got, const float *ref, const float *mag,
                       size_t n, size_t H, size_t T, size_t Dh, Tol t)
{
    size_t bad = 0, worst = 0;
    double wx = -INFINITY;
    for (size_t x = 0; x < n; x++) {
        const double tol = 8.0 * t.u_eff * mag[x] + 2.0 * t.u_dt * fabs((double)ref[x]) + t.floor;
        const double err = fabs((double)got[x] - ref[x]);
        const double ex = isnan(got[x]) || isnan(ref[x]) ? INFINITY : err - tol;
        if (ex > 0) bad++;
        if (ex > wx) { wx = ex; worst = x; }
    }
    const size_t e = worst % Dh, r = worst / Dh, i = r % T, bh = r / T;
    const double tol = 8.0 * t.u_eff * mag[worst] + 2.0 * t.u_dt * fabs((double)ref[worst]) + t.floor;
    return check_true(name, bad == 0,
                      "%zu of %zu elements out; worst [b %zu h %zu row %zu e %zu]: got %.8g ref "
                      "%.8g |diff| %.3g > tol %.3g (M %.3g, 8 u_eff %.3g, floor %.3g)",
                      bad, n, bh / H, bh % H, i, e, (double)got[worst], (double)ref[worst],
                      fabs((double)got[worst] - ref[worst]), tol, (double)mag[worst],
                      8.0 * t.u_eff, t.floor);
}

/* Whole array: ||got - ref|| <= tol_norm ||ref|| + u_dt ||M|| */
static int check_norm(const char *name, const float *got, const float *ref, const float *mag,
                      size_t n, Tol t)
{
    double num = 0.0, den = 0.0, mm = 0.0;
    for (size_t x = 0; x < n; x++) {
        const double d = (double)got[x] - ref[x];
        num += d * d;
        den += (double)ref[x] * ref[x];
        mm += (double)mag[x] * mag[x];
    }
    num = sqrt(num); den = sqrt(den); mm = sqrt(mm);
    const double lim = t.norm * den + t.u_dt * mm;
    if (getenv("CHECK_VERBOSE"))
        printf("       %s: ||diff|| %.3g, ||ref|| %.3g (relative %.3g), limit %.3g\n", name, num,
               den, den > 0 ? num / den : num, lim);
    return check_true(name, num <= lim, /* NaN fails */
                      "||got - ref|| = %.3g > %.3g = %.3g ||ref|| (%.3g) + u_dt ||M|| (%.3g); "
                      "relative %.3g",
                      num, lim, t.norm, den, t.u_dt * mm, den > 0 ? num / den : num);
}

/* -inf entries equal in place, the rest close */
static void check_lse(const char *name, float *got, float *ref, size_t n, size_t T)
{
    size_t bad_inf = 0, first = n;
    for (size_t x = 0; x < n; x++)
        if (isinf(ref[x]) || isinf(got[x])) {
            if (got[x] != ref[x] && first == n) first = x;
            bad_inf += got[x] != ref[x];
            got[x] = ref[x] = 0.0f;
        }
    char nm[300];
    snprintf(nm, sizeof nm, "%s -inf rows", name);
    check_true(nm, bad_inf == 0, "%zu rows differ in being -inf (first: head %zu row %zu)",
               bad_inf, first / T, first % T);
    check_close(name, got, ref, n, 2e-4, 2e-4);
}

static double dist(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t x = 0; x < n; x++) s += ((double)a[x] - b[x]) * ((double)a[x] - b[x]);
    return sqrt(s);
}

/* ---- one case: forward and backward against the CPU ---- */

static void flash_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh, float p,
                       int mask_mode, int mis)
{
    char name[256], tag[160];
    const char *kern = kernel_of(g, dt, Dh, mis);
    snprintf(tag, sizeof tag, "[%s] %s (%zu,%zu,%zu,%zu) p %g%s%s", kern, dtype_name(dt), B, H,
             T, Dh, (double)p, mask_name[mask_mode], mis ? " misaligned" : "");
    const size_t n = B * H * T * Dh, np = B * H * T * T, nr = B * H * T;
    const uint64_t seed = g->seed, offset = 98765;
    float *q = hrand(n, -2.0f, 2.0f, dt), *k = hrand(n, -2.0f, 2.0f, dt);
    float *v = hrand(n, -1.0f, 1.0f, dt), *mask = falloc(B * T);
    float *dout = hrand(n, -1.0f, 1.0f, dt), *g0 = hrand(n, -0.5f, 0.5f, dt);
    float *out = falloc(n), *oref = falloc(n), *Pref = falloc(np), *got = falloc(n);
    float *lse = falloc(nr), *lref = falloc(nr);
    float *ref[3] = {falloc(n), falloc(n), falloc(n)}, *mag[3] = {falloc(n), falloc(n), falloc(n)};
    float *m_out = falloc(n);
    make_mask(mask, B, T, mask_mode);
    const float *m = mask_mode == MASK_NONE ? NULL : mask;
    attention_forward_cpu(oref, Pref, q, k, v, m, p, seed, offset, B, H, T, Dh);
    attention_backward_cpu(ref[0], ref[1], ref[2], dout, q, k, v, Pref, p, seed, offset, B, H,
                           T, Dh, 0, 0, 0);
    lse_ref(lref, q, k, m, B, H, T, Dh);
    ref_mags(m_out, mag[0], mag[1], mag[2], q, k, v, dout, oref, Pref, p, seed, offset, B, H,
             T, Dh);
    const Tol tol = tol_of(dt, T, Dh, p, q, k, v, dout, n);

    DBuf d_q = dbuf_up(q, n, dt, mis), d_k = dbuf_up(k, n, dt, mis), d_v = dbuf_up(v, n, dt, mis);
    DBuf d_do = dbuf_up(dout, n, dt, mis), d_out = dbuf_poison(n, dt, mis);
    float *d_mask = (float *)gpu_upload(mask, B * T, DT_F32);
    float *d_lse = (float *)gpu_alloc_poison(nr, DT_F32);
    const float *dm = m ? d_mask : NULL;
    sync_all();
    attention_fused_forward_cuda(g, d_out.p, d_lse, NULL, d_q.p, d_k.p, d_v.p, dm, dt, p, seed,
                                 offset, B, H, T, Dh, 0);
    dbuf_down(out, d_out, n, dt);
    gpu_download(lse, d_lse, nr, DT_F32);
    snprintf(name, sizeof name, "gpu.flash.out (norm) %s", tag);
    check_norm(name, out, oref, m_out, n, tol);
    snprintf(name, sizeof name, "gpu.flash.out %s", tag);
    check_elems(name, out, oref, m_out, n, H, T, Dh, tol);
    snprintf(name, sizeof name, "gpu.flash.lse %s", tag);
    check_lse(name, lse, lref, nr, T);

    /* the cuBLASLt path on the same inputs (its own rounding of P): fused is
     * no farther from the reference than it, up to the norm tolerance */
    if (!mis) {
        float *ob = falloc(n);
        void *d_ob = gpu_alloc_poison(n, dt), *d_P = gpu_alloc_poison(np, dt);
        sync_all();
        attention_forward_cuda(g, d_ob, d_P, d_q.p, d_k.p, d_v.p, dm, dt, p, seed, offset, B, H,
                               T, Dh);
        gpu_download(ob, d_ob, n, dt);
        const double ef = dist(out, oref, n), eb = dist(ob, oref, n);
        double rn = 0.0;
        for (size_t x = 0; x < n; x++) rn += (double)oref[x] * oref[x];
        rn = sqrt(rn);
        snprintf(name, sizeof name, "gpu.flash.out as close to the reference as cublas's %s", tag);
        check_true(name, ef <= eb + tol.norm * rn,
                   "||fused - ref|| %.3g > ||cublas - ref|| %.3g + %.3g ||ref|| (%.3g); "
                   "||fused - cublas|| %.3g",
                   ef, eb, tol.norm, rn, dist(out, ob, n));
        dfree(d_ob); dfree(d_P); free(ob);
    }

    /* backward, accum 0 and 1 */
    const char *gn[3] = {"dq", "dk", "dv"};
    for (int accum = 0; accum <= 1; accum++) {
        DBuf d_g[3];
        for (int x = 0; x < 3; x++) d_g[x] = accum ? dbuf_up(g0, n, dt, mis) : dbuf_poison(n, dt, mis);
        sync_all();
        attention_fused_backward_cuda(g, d_g[0].p, d_g[1].p, d_g[2].p, d_do.p, d_q.p, d_k.p,
                                      d_v.p, d_out.p, d_lse, dm, NULL, dt, p, seed, offset, B, H,
                                      T, Dh, accum, accum, accum, 0);
        for (int x = 0; x < 3; x++) {
            float *r = ref_accum(ref[x], g0, n, accum);
            dbuf_down(got, d_g[x], n, dt);
            snprintf(name, sizeof name, "gpu.flash.%s (norm) %s accum %d", gn[x], tag, accum);
            check_norm(name, got, r, mag[x], n, tol);
            snprintf(name, sizeof name, "gpu.flash.%s %s accum %d", gn[x], tag, accum);
            check_elems(name, got, r, mag[x], n, H, T, Dh, tol);
            ref_accum_free(r, ref[x]);
            dbuf_free(d_g[x]);
        }
    }
    /* only some gradients wanted (the others NULL): the same values */
    for (int x = 0; x < 3; x++) {
        DBuf d_one = dbuf_poison(n, dt, mis);
        void *ptr[3] = {NULL, NULL, NULL};
        ptr[x] = d_one.p;
        sync_all();
        attention_fused_backward_cuda(g, ptr[0], ptr[1], ptr[2], d_do.p, d_q.p, d_k.p, d_v.p,
                                      d_out.p, d_lse, dm, NULL, dt, p, seed, offset, B, H, T, Dh,
                                      0, 0, 0, 0);
        dbuf_down(got, d_one, n, dt);
        snprintf(name, sizeof name, "gpu.flash.%s alone %s", gn[x], tag);
        check_elems(name, got, ref[x], mag[x], n, H, T, Dh, tol);
        dbuf_free(d_one);
    }
    dbuf_free(d_q); dbuf_free(d_k); dbuf_free(d_v); dbuf_free(d_do); dbuf_free(d_out);
    dfree(d_mask); dfree(d_lse);
    free(q); free(k); free(v); free(mask); free(dout); free(g0); free(out); free(oref);
    free(Pref); free(got); free(lse); free(lref); free(m_out);
    for (int x = 0; x < 3; x++) { free(ref[x]); free(mag[x]); }
}

/* v one-hot (v[j][e] = e == j, T <= Dh): out[i][j] = Pd_ij = keep ? P s : 0.
 * The keep bit must be the Philox bit of the flat [B,H,T,T] index; and a
 * device base offset (rng_base, as inside a CUDA graph) must give the same
 * bits as the same total offset passed plainly. */
static void flash_dropout_bits_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh,
                                    float p)
{
    char name[256], tag[160];
    snprintf(tag, sizeof tag, "[%s] %s (%zu,%zu,%zu,%zu) p %g", kernel_of(g, dt, Dh, 0),
             dtype_name(dt), B, H, T, Dh, (double)p);
    const size_t n = B * H * T * Dh, np = B * H * T * T;
    const uint64_t seed = g->seed, offset = (1ull << 33) + 7, base = 1000003;
    float *q = hrand(n, -0.5f, 0.5f, dt), *k = hrand(n, -0.5f, 0.5f, dt), *v = falloc(n);
    float *out = falloc(n), *out2 = falloc(n), *oref = falloc(n), *Pref = falloc(np);
    float *m_out = falloc(n);
    for (size_t r = 0; r < B * H * T; r++)
        for (size_t e = 0; e < Dh; e++) v[r * Dh + e] = e == r % T ? 1.0f : 0.0f;
    attention_forward_cpu(oref, Pref, q, k, v, NULL, p, seed, offset, B, H, T, Dh);
    ref_mags(m_out, NULL, NULL, NULL, q, k, v, NULL, oref, Pref, p, seed, offset, B, H, T, Dh);
    const Tol tol = tol_of(dt, T, Dh, p, q, k, v, v, n);
    void *d_q = gpu_upload(q, n, dt), *d_k = gpu_upload(k, n, dt), *d_v = gpu_upload(v, n, dt);
    void *d_out = gpu_alloc_poison(n, dt), *d_out2 = gpu_alloc_poison(n, dt);
    float *d_lse = (float *)gpu_alloc_poison(B * H * T, DT_F32);
    sync_all();
    attention_fused_forward_cuda(g, d_out, d_lse, NULL, d_q, d_k, d_v, NULL, dt, p, seed, offset,
                                 B, H, T, Dh, 0);
    gpu_download(out, d_out, n, dt);
    size_t bad = 0, checked = 0, first = np;
    for (size_t bh = 0; bh < B * H; bh++)
        for (size_t i = 0; i < T; i++)
            for (size_t j = 0; j < T; j++) {
                const size_t idx = (bh * T + i) * T + j;
                if (Pref[idx] < 1e-6f) continue;
                const int keep = drop_keep_bit(seed, offset, idx, drop_threshold(p));
                const int differs = (out[(bh * T + i) * Dh + j] != 0.0f) != keep;
                if (differs && first == np) first = idx;
                bad += differs;
                checked++;
            }
    snprintf(name, sizeof name, "gpu.flash.dropout mask = Philox mask %s", tag);
    check_true(name, bad == 0 && checked > 0,
               "%zu of %zu keep bits differ (first at flat index %zu: head %zu, query %zu, key %zu)",
               bad, checked, first, first / (T * T), first / T % T, first % T);
    snprintf(name, sizeof name, "gpu.flash.dropout values %s", tag);
    check_elems(name, out, oref, m_out, n, H, T, Dh, tol);

    uint64_t *d_base = (uint64_t *)gpu_upload_raw(&base, sizeof base);
    sync_all();
    const uint64_t *saved = g->rng_base;
    g->rng_base = d_base;
    attention_fused_forward_cuda(g, d_out2, d_lse, NULL, d_q, d_k, d_v, NULL, dt, p, seed,
                                 offset - base, B, H, T, Dh, 0);
    g->rng_base = saved;
    gpu_download(out2, d_out2, n, dt);
    snprintf(name, sizeof name, "gpu.flash.rng_base + offset = plain offset, same bits %s", tag);
    check_true(name, memcmp(out, out2, n * sizeof(float)) == 0, "the outputs differ");
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_out); dfree(d_out2); dfree(d_lse); dfree(d_base);
    free(q); free(k); free(v); free(out); free(out2); free(oref); free(Pref); free(m_out);
}

/* ---- determinism and CUDA graphs ---- */

typedef struct FbBufs {
    void *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *lse, *mask;
    uint64_t *keep; /* NULL, or the saved dropout mask: keep_out, then keep_in */
} FbBufs;

/* forward + backward on the context's stream (capturable: no host sync) */
static void fb_run(Ctx *g, FbBufs *b, DType dt, float p, uint64_t seed, uint64_t offset,
                   size_t B, size_t H, size_t T, size_t Dh)
{
    attention_fused_forward_cuda(g, b->out, b->lse, b->keep, b->q, b->k, b->v, b->mask, dt, p,
                                 seed, offset, B, H, T, Dh, 0);
    attention_fused_backward_cuda(g, b->dq, b->dk, b->dv, b->dout, b->q, b->k, b->v, b->out,
                                  b->lse, b->mask, b->keep, dt, p, seed, offset, B, H, T, Dh, 0,
                                  0, 0, 0);
}

/* the raw bytes of out, lse, dq, dk, dv, concatenated */
static unsigned char *fb_bytes(FbBufs *b, size_t n, size_t nr, DType dt, size_t *len)
{
    const size_t es = dtype_size(dt);
    *len = 4 * n * es + nr * 4;
    unsigned char *h = (unsigned char *)malloc(*len);
    CUDA_CHECK(cudaDeviceSynchronize());
    void *src[4] = {b->out, b->dq, b->dk, b->dv};
    for (int x = 0; x < 4; x++)
        CUDA_CHECK(cudaMemcpy(h + x * n * es, src[x], n * es, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(h + 4 * n * es, b->lse, nr * 4, cudaMemcpyDeviceToHost));
    return h;
}

static void flash_graph_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh, float p)
{
    char name[256], tag[160];
    snprintf(tag, sizeof tag, "[%s] %s (%zu,%zu,%zu,%zu) p %g", kernel_of(g, dt, Dh, 0),
             dtype_name(dt), B, H, T, Dh, (double)p);
    const size_t n = B * H * T * Dh, nr = B * H * T;
    const uint64_t seed = g->seed, offset = 5000, base1 = 77, base2 = 1234567;
    float *h = hrand(n, -2.0f, 2.0f, dt), *mask = falloc(B * T);
    make_mask(mask, B, T, MASK_BIG);
    FbBufs b;
    b.q = gpu_upload(h, n, dt);
    check_fill(h, n, -2, 2); quantize(h, n, dt);
    b.k = gpu_upload(h, n, dt);
    check_fill(h, n, -1, 1); quantize(h, n, dt);
    b.v = gpu_upload(h, n, dt);
    check_fill(h, n, -1, 1); quantize(h, n, dt);
    b.dout = gpu_upload(h, n, dt);
    b.out = gpu_alloc_poison(n, dt); b.dq = gpu_alloc_poison(n, dt);
    b.dk = gpu_alloc_poison(n, dt); b.dv = gpu_alloc_poison(n, dt);
    b.lse = (float *)gpu_alloc_poison(nr, DT_F32);
    b.mask = (float *)gpu_upload(mask, B * T, DT_F32);
    b.keep = NULL;
    uint64_t *d_base = (uint64_t *)gpu_upload_raw(&base1, sizeof base1);
    size_t len = 0;
    sync_all();

    /* eager twice at offset + base1, once at offset + base2 */
    fb_run(g, &b, dt, p, seed, offset + base1, B, H, T, Dh);
    unsigned char *e1 = fb_bytes(&b, n, nr, dt, &len);
    fb_run(g, &b, dt, p, seed, offset + base1, B, H, T, Dh);
    unsigned char *e1b = fb_bytes(&b, n, nr, dt, &len);
    fb_run(g, &b, dt, p, seed, offset + base2, B, H, T, Dh);
    unsigned char *e2 = fb_bytes(&b, n, nr, dt, &len);
    snprintf(name, sizeof name, "gpu.flash.deterministic (two runs bit-identical) %s", tag);
    check_true(name, memcmp(e1, e1b, len) == 0, "two eager runs differ");

    /* captured once with the device base, replayed with base1 and base2;
     * then again with the saved dropout mask (forward writes it, backward
     * reads it: the same bytes as the eager runs without it) */
    const size_t kw = attention_keep_words(B, H, T);
    uint64_t *d_keep = (uint64_t *)gpu_alloc_poison(kw, DT_I64);
    for (int save = 0; save <= 1; save++) {
        cudaGraph_t gr;
        cudaGraphExec_t ex;
        const uint64_t *saved = g->rng_base;
        b.keep = save ? d_keep : NULL;
        CUDA_CHECK(cudaMemcpy(d_base, &base1, sizeof base1, cudaMemcpyHostToDevice));
        g->rng_base = d_base;
        ctx_sync(g);
        CUDA_CHECK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeGlobal));
        fb_run(g, &b, dt, p, seed, offset, B, H, T, Dh);
        CUDA_CHECK(cudaStreamEndCapture(g->stream, &gr));
        g->rng_base = saved;
        CUDA_CHECK(cudaGraphInstantiate(&ex, gr, 0));
        CUDA_CHECK(cudaGraphLaunch(ex, g->stream));
        unsigned char *g1 = fb_bytes(&b, n, nr, dt, &len);
        CUDA_CHECK(cudaMemcpy(d_base, &base2, sizeof base2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaGraphLaunch(ex, g->stream));
        unsigned char *g2 = fb_bytes(&b, n, nr, dt, &len);
        CUDA_CHECK(cudaGraphExecDestroy(ex));
        CUDA_CHECK(cudaGraphDestroy(gr));
        const char *how = save ? " saved mask" : "";
        snprintf(name, sizeof name, "gpu.flash.graph replay = eager, rng_base 1%s %s", how, tag);
        check_true(name, memcmp(g1, e1, len) == 0, "replay differs from the eager run");
        snprintf(name, sizeof name, "gpu.flash.graph replay = eager, rng_base 2%s %s", how, tag);
        check_true(name, memcmp(g2, e2, len) == 0 && (p == 0.0f || memcmp(e1, e2, len) != 0),
                   "replay with the second base differs from its eager run, or p > 0 and both "
                   "bases gave the same mask");
        free(g1);
        free(g2);
    }
    dfree(b.q); dfree(b.k); dfree(b.v); dfree(b.dout); dfree(b.out); dfree(b.dq);
    dfree(b.dk); dfree(b.dv); dfree(b.lse); dfree(b.mask); dfree(d_base); dfree(d_keep);
    free(h); free(mask); free(e1); free(e1b); free(e2);
}

/* ---- the saved dropout mask (keep_out / keep_in) ---- */

/* The saved mask on the host: word w of flat query row r, bit y = the
 * Philox keep bit of key 64 w + y (0 past T), drawn as the CPU reference
 * draws it. */
static uint64_t *keep_words_ref(float p, uint64_t seed, uint64_t offset, size_t B, size_t H,
                                size_t T)
{
    const size_t W = (T + 63) / 64, rows = B * H * T;
    uint64_t *w = (uint64_t *)calloc(rows * W, sizeof(uint64_t));
#pragma omp parallel for if (rows * T >= 65536)
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < T; j++)
            if (drop_keep_bit(seed, offset, r * T + j, drop_threshold(p)))
                w[r * W + j / 64] |= 1ull << (j % 64);
    return w;
}

/* Forward + backward with the saved mask (forward writes keep_out, backward
 * reads it as keep_in) against both drawing their own bits: out, lse, dq,
 * dk, dv the same bytes; the saved mask = the backward's own draw
 * (attention_fa_tc_keep_bits_cuda) = the host's Philox bits; p 0: the
 * buffer untouched. mis: 0 every pointer aligned (tensor cores both ways),
 * 1 every pointer off (FMA both ways), 2 only out off (FMA forward, whose
 * keep_out comes from the bits kernel, then a tensor-core backward). */
static void flash_save_mask_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh,
                                 float p, int mask_mode, int mis)
{
    char name[384], tag[200];
    const char *kf = mis ? "fma" : kernel_of(g, dt, Dh, 0);
    const char *kb = kernel_of(g, dt, Dh, mis == 1);
    snprintf(tag, sizeof tag, "[%s fwd, %s bwd] %s (%zu,%zu,%zu,%zu) p %g%s", kf, kb,
             dtype_name(dt), B, H, T, Dh, (double)p, mask_name[mask_mode]);
    const size_t n = B * H * T * Dh, nr = B * H * T, nw = attention_keep_words(B, H, T);
    const uint64_t seed = g->seed, offset = 31337;
    float *q = hrand(n, -2.0f, 2.0f, dt), *k = hrand(n, -2.0f, 2.0f, dt);
    float *v = hrand(n, -1.0f, 1.0f, dt), *dout = hrand(n, -1.0f, 1.0f, dt);
    float *mask = falloc(B * T);
    make_mask(mask, B, T, mask_mode);
    const int off = mis == 1;
    DBuf d_q = dbuf_up(q, n, dt, off), d_k = dbuf_up(k, n, dt, off), d_v = dbuf_up(v, n, dt, off);
    DBuf d_do = dbuf_up(dout, n, dt, off), d_out = dbuf_poison(n, dt, mis != 0);
    DBuf d_dq = dbuf_poison(n, dt, off), d_dk = dbuf_poison(n, dt, off);
    DBuf d_dv = dbuf_poison(n, dt, off);
    float *d_mask = (float *)gpu_upload(mask, B * T, DT_F32);
    float *d_lse = (float *)gpu_alloc_poison(nr, DT_F32);
    uint64_t *d_keep = (uint64_t *)gpu_alloc_poison(nw, DT_I64);
    FbBufs b = {d_q.p, d_k.p, d_v.p, d_do.p, d_out.p, d_dq.p, d_dk.p, d_dv.p, d_lse,
                mask_mode == MASK_NONE ? NULL : d_mask, NULL};
    size_t len = 0;
    sync_all();
    fb_run(g, &b, dt, p, seed, offset, B, H, T, Dh);
    unsigned char *drawn = fb_bytes(&b, n, nr, dt, &len);
    b.keep = d_keep;
    fb_run(g, &b, dt, p, seed, offset, B, H, T, Dh);
    unsigned char *saved = fb_bytes(&b, n, nr, dt, &len);
    snprintf(name, sizeof name, "gpu.flash.save mask: out, lse, dq, dk, dv = drawing again %s",
             tag);
    check_true(name, memcmp(drawn, saved, len) == 0,
               "the results differ in some byte (the saved bits are not the ones drawn)");

    uint64_t *hk = (uint64_t *)malloc(nw * sizeof(uint64_t));
    CUDA_CHECK(cudaMemcpy(hk, d_keep, nw * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    if (p > 0.0f) {
        uint64_t *d_bits = (uint64_t *)gpu_alloc_poison(nw, DT_I64);
        uint64_t *hb = (uint64_t *)malloc(nw * sizeof(uint64_t));
        attention_fa_tc_keep_bits_cuda(g, d_bits, p, seed, offset, B, H, T);
        sync_all();
        CUDA_CHECK(cudaMemcpy(hb, d_bits, nw * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        uint64_t *ref = keep_words_ref(p, seed, offset, B, H, T);
        size_t bad_b = 0, bad_r = 0, first = nw;
        for (size_t x = 0; x < nw; x++) {
            bad_b += hk[x] != hb[x];
            bad_r += hk[x] != ref[x];
            if (hk[x] != ref[x] && first == nw) first = x;
        }
        const size_t W = (T + 63) / 64;
        snprintf(name, sizeof name, "gpu.flash.save mask: saved mask = the backward's draw %s",
                 tag);
        check_true(name, bad_b == 0, "%zu of %zu words differ", bad_b, nw);
        snprintf(name, sizeof name, "gpu.flash.save mask: saved mask = Philox bits (host) %s",
                 tag);
        check_true(name, bad_r == 0,
                   "%zu of %zu words differ; first: row %zu (head %zu, query %zu) word %zu: "
                   "got %016llx want %016llx",
                   bad_r, nw, first / W, first / W / T, first / W % T, first % W,
                   first < nw ? (unsigned long long)hk[first] : 0ull,
                   first < nw ? (unsigned long long)ref[first] : 0ull);
        dfree(d_bits);
        free(hb);
        free(ref);
    } else {
        size_t touched = 0;
        for (size_t x = 0; x < nw; x++) touched += hk[x] != ~0ull;
        snprintf(name, sizeof name, "gpu.flash.save mask: p 0 leaves keep_out untouched %s", tag);
        check_true(name, touched == 0, "%zu of %zu words written", touched, nw);
    }
    dbuf_free(d_q); dbuf_free(d_k); dbuf_free(d_v); dbuf_free(d_do); dbuf_free(d_out);
    dbuf_free(d_dq); dbuf_free(d_dk); dbuf_free(d_dv);
    dfree(d_mask); dfree(d_lse); dfree(d_keep);
    free(q); free(k); free(v); free(dout); free(mask); free(drawn); free(saved); free(hk);
}

/* ---- the op: its flash path against CTRAIN_ATTN=cublas through autograd ---- */

/* A recomputed segment: y = attention(x, k, v, mask) */
typedef struct AttnSeg {
    Tensor *k, *v, *mask;
    float p;
} AttnSeg;

static Tensor *attn_segment(Ctx *c, void *arg, Tensor *x)
{
    AttnSeg *s = (AttnSeg *)arg;
    return op_attention(c, x, s->k, s->v, s->mask, s->p);
}

/* y = attention(q, k, v, mask) under CTRAIN_ATTN=`path` (NULL: flash, the
 * fused kernels; as a recomputed segment when `recompute`), then
 * loss = sum(y * w) backward. *held (when not NULL): the bytes the forward
 * left allocated (out, the node's saved tensors). */
static Tensor *op_run(Ctx *g, const char *path, Tensor *q, Tensor *k, Tensor *v, Tensor *m,
                      const float *w, float p, int recompute, size_t *held)
{
    setenv("CTRAIN_ATTN", path ? path : "flash", 1);
    g->rng_offset = 4242;
    const size_t before = g->mem.current;
    AttnSeg seg = {k, v, m, p};
    Tensor *y = recompute ? recompute_segment(g, attn_segment, &seg, q)
                          : op_attention(g, q, k, v, m, p);
    if (held) *held = g->mem.current - before;
    backward_weighted(g, y, w);
    unsetenv("CTRAIN_ATTN");
    return y;
}

/* The op tests' inputs on the host: q, k, v, the loss weights w, and the
 * mask (batch 0 unpadded, the others padded over their last third). */
typedef struct OpIn {
    int64_t qs[4], ms[2];
    float *q, *k, *v, *w, *mask;
} OpIn;

static OpIn opin_make(size_t B, size_t H, size_t T, size_t Dh)
{
    OpIn in = {{(int64_t)B, (int64_t)H, (int64_t)T, (int64_t)Dh}, {(int64_t)B, (int64_t)T},
               NULL, NULL, NULL, NULL, NULL};
    const size_t n = B * H * T * Dh;
    in.q = falloc(n); in.k = falloc(n); in.v = falloc(n); in.w = falloc(n);
    in.mask = falloc(B * T);
    check_fill(in.q, n, -2, 2);
    check_fill(in.k, n, -2, 2);
    check_fill(in.v, n, -1, 1);
    check_fill(in.w, n, -1, 1);
    for (size_t i = 0; i < B * T; i++)
        in.mask[i] = i >= T && i % T >= 2 * T / 3 ? -10000.0f : 0.0f;
    return in;
}

/* t = fresh f32 tensors q, k, v (requiring grad) and mask */
static void opin_tensors(Ctx *g, const OpIn *in, Tensor *t[4])
{
    t[0] = tensor_from_f32(g, in->q, DT_F32, 4, in->qs);
    t[1] = tensor_from_f32(g, in->k, DT_F32, 4, in->qs);
    t[2] = tensor_from_f32(g, in->v, DT_F32, 4, in->qs);
    t[3] = tensor_from_f32(g, in->mask, DT_F32, 2, in->ms);
    for (int i = 0; i < 3; i++) t[i]->requires_grad = 1;
}

/* Releases the runs' outputs and inputs and the host inputs; the context
 * must then hold what it held at base. */
static void opin_done(Ctx *g, OpIn *in, Tensor **y, Tensor *(*t)[4], int runs, size_t base,
                      const char *name)
{
    for (int f = 0; f < runs; f++) {
        tensor_release(y[f]);
        for (int i = 0; i < 4; i++) tensor_release(t[f][i]);
    }
    ctx_sync(g);
    check_true(name, g->mem.current == base, "%zu bytes held (base %zu)", g->mem.current, base);
    free(in->q); free(in->k); free(in->v); free(in->w); free(in->mask);
}

/* autocast: DT_BF16 or DT_F16 (the flash path's types) */
static void flash_op_case(Ctx *g, DType autocast, size_t B, size_t H, size_t T, size_t Dh)
{
    OpIn in = opin_make(B, H, T, Dh);
    const size_t base = g->mem.current;
    Tensor *t[2][4], *y[2];
    const char *path[2] = {"cublas", NULL};   /* NULL: the default, the flash kernels */
    g->autocast = autocast;
    for (int f = 0; f < 2; f++) {
        opin_tensors(g, &in, t[f]);
        y[f] = op_run(g, path[f], t[f][0], t[f][1], t[f][2], t[f][3], in.w, 0.1f, 0, NULL);
    }
    g->autocast = DT_F32;
    /* both paths round to the compute type: their difference is within twice
     * each one's distance to the exact result */
    const double nt = 2.0 * tol_norm(autocast);
    char name[192], sfx[96];
    snprintf(sfx, sizeof sfx, " [%s] %s (%zu,%zu,%zu,%zu)", kernel_of(g, autocast, Dh, 0),
             dtype_name(autocast), B, H, T, Dh);
    snprintf(name, sizeof name, "gpu.flash.op.out fused = cublas%s", sfx);
    cmp_tensors(name, y[1], y[0], 0, 0, nt);
    const char *gn[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "gpu.flash.op.%s fused = cublas%s", gn[i], sfx);
        if (!t[1][i]->grad || !t[0][i]->grad) check_true(name, 0, "no gradient");
        else cmp_tensors(name, t[1][i]->grad, t[0][i]->grad, 0, 0, nt);
    }
    snprintf(name, sizeof name, "gpu.flash.op.all memory returned%s", sfx);
    opin_done(g, &in, y, t, 2, base, name);
}

/* t's bytes equal u's, as stored */
static void same_bytes(const char *name, Tensor *t, Tensor *u)
{
    if (!t || !u || t->numel != u->numel || t->dtype != u->dtype) {
        check_true(name, 0, "missing, or sizes / dtypes differ");
        return;
    }
    const size_t bytes = t->numel * dtype_size(t->dtype);
    unsigned char *a = (unsigned char *)malloc(bytes), *b = (unsigned char *)malloc(bytes);
    tensor_to_host(a, t);
    tensor_to_host(b, u);
    size_t first = bytes;
    for (size_t x = 0; x < bytes && first == bytes; x++)
        if (a[x] != b[x]) first = x;
    check_true(name, first == bytes, "first differing byte %zu of %zu", first, bytes);
    free(a);
    free(b);
}

/* The op (fused path) with CTRAIN_ATTN_SAVE_MASK=0, =1, and =1 inside a
 * recomputed segment: out, dq, dk, dv the same bytes; with p > 0 the
 * forward holds exactly the mask's bytes more (lse and the mask share one
 * buffer, ops/attention_op.c: lse rounded up to 256 bytes, then the words),
 * with p 0 nothing more; all memory returned. */
static void flash_op_save_mask_case(Ctx *g, DType autocast, size_t B, size_t H, size_t T,
                                    size_t Dh, float p)
{
    OpIn in = opin_make(B, H, T, Dh);
    const size_t nr = B * H * T, base = g->mem.current;
    Tensor *t[3][4], *y[3];
    size_t held[3];
    const char *runs[3] = {"=0", "=1", "=1 recomputed"};
    g->autocast = autocast;
    for (int f = 0; f < 3; f++) {
        setenv("CTRAIN_ATTN_SAVE_MASK", f ? "1" : "0", 1);
        attention_fused_save_mask_reread();
        opin_tensors(g, &in, t[f]);
        y[f] = op_run(g, NULL, t[f][0], t[f][1], t[f][2], t[f][3], in.w, p, f == 2, &held[f]);
    }
    unsetenv("CTRAIN_ATTN_SAVE_MASK");
    attention_fused_save_mask_reread();
    g->autocast = DT_F32;
    char name[192], sfx[128];
    snprintf(sfx, sizeof sfx, " [%s] %s (%zu,%zu,%zu,%zu) p %g", kernel_of(g, autocast, Dh, 0),
             dtype_name(autocast), B, H, T, Dh, (double)p);
    const char *gn[3] = {"dq", "dk", "dv"};
    for (int f = 1; f < 3; f++) {
        snprintf(name, sizeof name, "gpu.flash.op.out CTRAIN_ATTN_SAVE_MASK%s = =0%s", runs[f],
                 sfx);
        same_bytes(name, y[f], y[0]);
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "gpu.flash.op.%s CTRAIN_ATTN_SAVE_MASK%s = =0%s",
                     gn[i], runs[f], sfx);
            same_bytes(name, t[f][i]->grad, t[0][i]->grad);
        }
    }
    const size_t lse_b = nr * sizeof(float);
    const size_t more = p > 0.0f ? (lse_b + 255) / 256 * 256 - lse_b +
                                       attention_keep_words(B, H, T) * sizeof(uint64_t)
                                 : 0;
    snprintf(name, sizeof name, "gpu.flash.op.saved mask held from forward to backward%s", sfx);
    check_true(name, held[1] == held[0] + more,
               "forward held %zu bytes with CTRAIN_ATTN_SAVE_MASK=1, %zu with =0: want %zu more",
               held[1], held[0], more);
    snprintf(name, sizeof name, "gpu.flash.op.recomputed segment holds no mask after forward%s",
             sfx);
    check_true(name, held[2] < held[0], "held %zu bytes (=0, not recomputed: %zu)", held[2],
               held[0]);
    snprintf(name, sizeof name, "gpu.flash.op.save mask: all memory returned%s", sfx);
    opin_done(g, &in, y, t, 3, base, name);
}

/* [B, H, T, Dh] <-> [B, T, H, Dh] on the host (to: 1 from BHTD to BTHD) */
static void host_bthd(float *dst, const float *src, size_t B, size_t H, size_t T, size_t Dh,
                      int to)
{
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < T; i++) {
                const size_t bhtd = ((b * H + h) * T + i) * Dh, bthd = ((b * T + i) * H + h) * Dh;
                memcpy(dst + (to ? bthd : bhtd), src + (to ? bhtd : bthd), Dh * sizeof(float));
            }
}

/* op_attention_bthd on [B, T, H, Dh] tensors against op_attention on the
 * same values in [B, H, T, Dh], same Philox offset: out and dq, dk, dv
 * equal bit for bit once transposed (the tensor-core kernels read the
 * strided layout; f32 goes through transposes). shared: q = k = v, one
 * tensor, so its gradient accumulates three times (the accum stores). */
static void flash_op_bthd_case(Ctx *g, DType autocast, size_t B, size_t H, size_t T, size_t Dh,
                               float p, int shared)
{
    OpIn in = opin_make(B, H, T, Dh);
    const size_t n = B * H * T * Dh, base = g->mem.current;
    const int64_t bs[4] = {(int64_t)B, (int64_t)T, (int64_t)H, (int64_t)Dh};
    float *hq[3] = {in.q, in.k, in.v}, *tq[3], *tw = falloc(n);
    for (int i = 0; i < 3; i++) {
        tq[i] = falloc(n);
        host_bthd(tq[i], hq[i], B, H, T, Dh, 1);
    }
    host_bthd(tw, in.w, B, H, T, Dh, 1);
    Tensor *t[2][4], *y[2];
    g->autocast = autocast;
    for (int f = 0; f < 2; f++) {
        opin_tensors(g, &in, t[f]);
        if (f == 1)
            for (int i = 0; i < 3; i++) {
                tensor_release(t[f][i]);
                t[f][i] = tensor_from_f32(g, tq[shared ? 0 : i], DT_F32, 4, bs);
                t[f][i]->requires_grad = 1;
            }
        if (shared)
            for (int i = 1; i < 3; i++) {
                tensor_release(t[f][i]);
                tensor_retain(t[f][0]);
                t[f][i] = t[f][0];
            }
        g->rng_offset = 4242;
        y[f] = f ? op_attention_bthd(g, t[f][0], t[f][1], t[f][2], t[f][3], p)
                 : op_attention(g, t[f][0], t[f][1], t[f][2], t[f][3], p);
        backward_weighted(g, y[f], f ? tw : in.w);
    }
    g->autocast = DT_F32;
    char name[192], sfx[128];
    snprintf(sfx, sizeof sfx, " [%s] %s (%zu,%zu,%zu,%zu) p %g%s",
             autocast == DT_F32 ? "transposed" : kernel_of(g, autocast, Dh, 0),
             autocast == DT_F32 ? "f32" : dtype_name(autocast), B, H, T, Dh, (double)p,
             shared ? " q = k = v" : "");
    float *a = falloc(n), *b = falloc(n), *bt = falloc(n);
    const char *gn[4] = {"out", "dq", "dk", "dv"};
    for (int x = 0; x < (shared ? 2 : 4); x++) {
        Tensor *ra = x ? t[0][x - 1]->grad : y[0], *rb = x ? t[1][x - 1]->grad : y[1];
        snprintf(name, sizeof name, "gpu.flash.op.bthd %s = bhtd%s", x && shared ? "dx" : gn[x], sfx);
        if (!ra || !rb) { check_true(name, 0, "no gradient"); continue; }
        tensor_to_f32(a, ra);
        tensor_to_f32(bt, rb);
        host_bthd(b, bt, B, H, T, Dh, 0);
        check_close(name, b, a, n, 0, 0);
    }
    free(a); free(b); free(bt); free(tw);
    for (int i = 0; i < 3; i++) free(tq[i]);
    snprintf(name, sizeof name, "gpu.flash.op.bthd all memory returned%s", sfx);
    opin_done(g, &in, y, t, 2, base, name);
}

/* ---- optional timing (CTRAIN_FLASH_BENCH=1): fused vs cuBLASLt path ----
 * One JSON line per (path, save_mask, pass, dtype, p, shape): forward and
 * forward+backward, mask on (-10000 padding), 5 warm-up calls, median and
 * min of 20, CUDA events on the context's stream. save_mask 1 (fused, p >
 * 0): the forward writes the dropout mask to a preallocated buffer and the
 * backward reads it instead of drawing it (the op's allocation of it is
 * not timed). tflops counts the
 * FlashAttention convention (forward 4 B H T^2 Dh, backward 10 B H T^2 Dh:
 * 2 and 5 matrix products; the fused backward actually runs 7). Not a
 * check: numbers for docs/kernels.md. */
static void flash_bench(Ctx *g, DType dt, float p, size_t B, size_t H, size_t T, size_t Dh)
{
    const size_t n = B * H * T * Dh, np = B * H * T * T;
    float *h = hrand(n, -1.0f, 1.0f, dt), *mask = falloc(B * T);
    make_mask(mask, B, T, MASK_BIG);
    void *d_q = gpu_upload(h, n, dt), *d_k = gpu_upload(h, n, dt), *d_v = gpu_upload(h, n, dt);
    void *d_do = gpu_upload(h, n, dt), *d_out = gpu_alloc_poison(n, dt);
    void *d_dq = gpu_alloc_poison(n, dt), *d_dk = gpu_alloc_poison(n, dt), *d_dv = gpu_alloc_poison(n, dt);
    float *d_mask = (float *)gpu_upload(mask, B * T, DT_F32);
    float *d_lse = (float *)gpu_alloc_poison(B * H * T, DT_F32);
    void *d_P = gpu_alloc_poison(np, dt);
    uint64_t *d_keep = (uint64_t *)gpu_alloc_poison(attention_keep_words(B, H, T), DT_I64);
    sync_all();
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    const double f1 = 4.0 * (double)B * H * T * T * Dh;
    const int npath = p > 0.0f ? 3 : 2; /* cublas, fused, fused with the saved mask */
    for (int path = 0; path < npath; path++)
        for (int bwd = 0; bwd <= 1; bwd++) {
            const int fused = path >= 1, save = path == 2;
            uint64_t *keep = save ? d_keep : NULL;
            float ms[20];
            for (int it = -5; it < 20; it++) {
                CUDA_CHECK(cudaEventRecord(e0, g->stream));
                if (fused) {
                    attention_fused_forward_cuda(g, d_out, d_lse, keep, d_q, d_k, d_v, d_mask, dt,
                                                 p, 1, 0, B, H, T, Dh, 0);
                    if (bwd)
                        attention_fused_backward_cuda(g, d_dq, d_dk, d_dv, d_do, d_q, d_k, d_v,
                                                      d_out, d_lse, d_mask, keep, dt, p, 1, 0, B,
                                                      H, T, Dh, 0, 0, 0, 0);
                } else {
                    attention_forward_cuda(g, d_out, d_P, d_q, d_k, d_v, d_mask, dt, p, 1, 0,
                                           B, H, T, Dh);
                    if (bwd)
                        attention_backward_cuda(g, d_dq, d_dk, d_dv, d_do, d_q, d_k, d_v, d_P, dt,
                                                p, 1, 0, B, H, T, Dh, 0, 0, 0);
                }
                CUDA_CHECK(cudaEventRecord(e1, g->stream));
                CUDA_CHECK(cudaEventSynchronize(e1));
                if (it >= 0) CUDA_CHECK(cudaEventElapsedTime(&ms[it], e0, e1));
            }
            qsort(ms, 20, sizeof ms[0], gpu_cmp_float);
            const double med = (double)(ms[9] + ms[10]) * 0.5;
            printf("{\"bench\":\"attention\",\"device\":\"%s\",\"path\":\"%s\",\"kernel\":\"%s\","
                   "\"pass\":\"%s\",\"dtype\":\"%s\",\"B\":%zu,\"H\":%zu,\"T\":%zu,\"Dh\":%zu,"
                   "\"p\":%g,\"mask\":\"-10000 pad\",\"save_mask\":%d,\"warmup\":5,"
                   "\"iters\":20,\"median_ms\":%.4f,\"min_ms\":%.4f,\"tflops\":%.1f}\n",
                   ctx_device_name(g), fused ? "fused" : "cublas",
                   fused ? kernel_of(g, dt, Dh, 0) : "cublaslt", bwd ? "fwd+bwd" : "fwd",
                   dtype_name(dt), B, H, T, Dh, (double)p, save, med, (double)ms[0],
                   f1 * (bwd ? 3.5 : 1.0) / (med * 1e-3) * 1e-12);
            fflush(stdout);
        }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_do); dfree(d_out); dfree(d_dq); dfree(d_dk);
    dfree(d_dv); dfree(d_mask); dfree(d_lse); dfree(d_P); dfree(d_keep);
    free(h); free(mask);
}

int main(void)
{
    gpu_require();
    check_seed(11);
    Ctx gpu;
    ctx_init(&gpu, DEV_CUDA, 0, 0x5eedULL);
    printf("gpu_flash_attn on %s: tensor-core kernels %s (f16/bf16, Dh 64)\n",
           ctx_device_name(&gpu), attention_fa_tc_supports(&gpu, DT_BF16, 64) ? "on" : "OFF");
    if (!getenv("CTRAIN_FLASH_BENCH_ONLY")) { /* CTRAIN_FLASH_BENCH_ONLY=1: timings alone */
        const size_t Ts[6] = {1, 17, 64, 128, 130, 512};
        for (int t = 0; t < 2; t++) {
            const DType dt = half_types[t];
            for (int ti = 0; ti < 6; ti++) {
                const size_t T = Ts[ti], H = T >= 512 ? 2 : 2 + (size_t)ti % 3;
                flash_case(&gpu, dt, 2, H, T, 64, 0.0f, MASK_NONE, 0);
                flash_case(&gpu, dt, 2, H, T, 64, 0.1f, MASK_BIG, 0);
                flash_case(&gpu, dt, 2, H, T, 128, 0.1f, MASK_INF, 0);
                flash_case(&gpu, dt, 2, H, T, 128, 0.0f, MASK_BIG, 0);
                flash_case(&gpu, dt, 2, H, T, 32, 0.1f, MASK_NONE, 0);
                flash_case(&gpu, dt, 2, H, T, 32, 0.0f, MASK_BIG, 0);
            }
            flash_case(&gpu, dt, 2, 2, 17, 64, 0.1f, MASK_INF, 0);
            flash_case(&gpu, dt, 2, 3, 130, 64, 0.0f, MASK_INF, 0);
            flash_case(&gpu, dt, 2, 2, 77, 128, 0.1f, MASK_BIG, 0);
            flash_case(&gpu, dt, 2, 2, 130, 64, 0.1f, MASK_INF_FRONT, 0);
            flash_case(&gpu, dt, 2, 2, 200, 128, 0.0f, MASK_INF_FRONT, 0);
            /* the FMA fallback */
            flash_case(&gpu, dt, 2, 2, 17, 64, 0.1f, MASK_BIG, 1);
            flash_case(&gpu, dt, 2, 2, 130, 128, 0.0f, MASK_INF, 1);
            flash_case(&gpu, dt, 2, 3, 64, 32, 0.1f, MASK_NONE, 1);
            flash_dropout_bits_case(&gpu, dt, 2, 3, 61, 64, 0.1f);  /* T % 8 != 0 */
            flash_dropout_bits_case(&gpu, dt, 2, 3, 64, 64, 0.1f);  /* T % 8 == 0 */
            flash_dropout_bits_case(&gpu, dt, 1, 2, 128, 128, 0.3f); /* two key tiles */
        }
        /* BERT-base's shape */
        flash_case(&gpu, DT_BF16, 2, 12, 128, 64, 0.1f, MASK_BIG, 0);
        flash_case(&gpu, DT_F16, 2, 12, 128, 64, 0.1f, MASK_BIG, 0);
        /* determinism and CUDA graphs */
        flash_graph_case(&gpu, DT_BF16, 2, 3, 130, 64, 0.1f);
        flash_graph_case(&gpu, DT_F16, 2, 2, 200, 128, 0.1f);
        /* the op through autograd */
        flash_op_case(&gpu, DT_BF16, 2, 3, 20, 32);
        flash_op_case(&gpu, DT_BF16, 2, 4, 128, 64);
        flash_op_case(&gpu, DT_F16, 2, 4, 128, 64);
        flash_op_case(&gpu, DT_BF16, 2, 2, 130, 128);
        /* the saved dropout mask: kernels, then the op */
        const size_t Tm[4] = {17, 64, 130, 512};
        for (int t = 0; t < 2; t++) {
            const DType dt = half_types[t];
            for (int ti = 0; ti < 4; ti++)
                for (int dh = 64; dh <= 128; dh *= 2) {
                    const size_t T = Tm[ti], H = T >= 512 ? 2 : 3;
                    flash_save_mask_case(&gpu, dt, 2, H, T, (size_t)dh, 0.1f, MASK_BIG, 0);
                    flash_save_mask_case(&gpu, dt, 2, H, T, (size_t)dh, 0.0f, MASK_BIG, 0);
                    if (T <= 130)
                        flash_save_mask_case(&gpu, dt, 2, H, T, (size_t)dh, 0.1f, MASK_INF, 0);
                }
            flash_save_mask_case(&gpu, dt, 2, 2, 130, 64, 0.1f, MASK_INF_FRONT, 0);
            flash_save_mask_case(&gpu, dt, 2, 2, 17, 64, 0.1f, MASK_NONE, 0);
            /* FMA forward, then FMA or tensor-core backward */
            flash_save_mask_case(&gpu, dt, 2, 2, 130, 64, 0.1f, MASK_BIG, 1);
            flash_save_mask_case(&gpu, dt, 2, 2, 130, 64, 0.1f, MASK_INF, 2);
            flash_save_mask_case(&gpu, dt, 2, 2, 17, 128, 0.1f, MASK_BIG, 2);
        }
        /* [B, T, H, Dh] in and out (BERT's heads by a reshape alone) */
        flash_op_bthd_case(&gpu, DT_BF16, 2, 4, 128, 64, 0.1f, 0);
        flash_op_bthd_case(&gpu, DT_F16, 2, 3, 130, 64, 0.1f, 0);
        flash_op_bthd_case(&gpu, DT_BF16, 2, 2, 77, 128, 0.0f, 0);
        flash_op_bthd_case(&gpu, DT_BF16, 2, 3, 20, 32, 0.1f, 1);
        flash_op_bthd_case(&gpu, DT_F16, 3, 16, 64, 64, 0.1f, 1);
        flash_op_bthd_case(&gpu, DT_F32, 2, 3, 20, 32, 0.1f, 0);
        flash_op_save_mask_case(&gpu, DT_BF16, 2, 4, 128, 64, 0.1f);
        flash_op_save_mask_case(&gpu, DT_F16, 2, 2, 130, 128, 0.1f);
        flash_op_save_mask_case(&gpu, DT_BF16, 2, 3, 20, 32, 0.0f);
    }
    if (getenv("CTRAIN_FLASH_BENCH") || getenv("CTRAIN_FLASH_BENCH_ONLY")) {
        const DType dts[2] = {DT_BF16, DT_F16};
        for (int d = 0; d < 2; d++)
            for (int pi = 0; pi < 2; pi++) {
                const float p = pi ? 0.0f : 0.1f;
                flash_bench(&gpu, dts[d], p, 32, 12, 128, 64); /* BERT-base, seq 128 */
                flash_bench(&gpu, dts[d], p, 32, 16, 512, 64); /* BERT-large, seq 512 */
            }
    }
    ctx_free(&gpu);
    return check_summary();
}
