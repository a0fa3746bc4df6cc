/* gpu_attention_sm90.c — the wgmma attention kernels (ops/attention_sm90.h)
 * against a double-precision reference on the host and against the
 * tensor-core kernels of ops/attention_fa_tc.cu (checked to their rounding
 * bound by tests/gpu_flash_attn), on an sm_90 device (elsewhere: SKIP).
 *
 *   run:   make -j2 ARCH=90 build/tests/gpu_attention_sm90 && build/tests/gpu_attention_sm90
 *   time:  build/tests/gpu_attention_sm90 --bench   (sm90 at p 0.1 drawing the mask in the
 *          backward and reading the forward's, that with dq in the dkdv kernel's clusters,
 *          the forward with one warpgroup a block, sm90
 *          at p 0, fa_tc and cuDNN at p 0.1, BERT-large's shapes, ms a call, median of 9; --bench sm90: sm90 at
 *          seq 512 alone, for a profiler)
 *
 * Checks, per dtype (bf16, f16), T 64, 192, 512, p 0 and 0.1, masks none,
 * -10000 padding, -inf (batch 1 with no key at all, batch 0 a last tile with
 * none), -inf on the first 64 keys (the running max starts at -inf) and a
 * rising mask, 4 more each tile of 64 keys (the forward's running max both
 * kept while a tile's max stays within 2^8 of it and moved past that):
 *   - out, lse, dq, dk, dv against the reference: the relative norm error and
 *     the largest error each within 2x fa_tc's on the same inputs (+ a floor
 *     of 1e-3 relative), and lse within 1e-3 (exactly -inf for rows with no
 *     key; their out and gradients exactly 0);
 *   - the saved dropout mask: keep_out byte for byte fa_tc's;
 *   - q, k, v read in place from one [B, T, 3, H, 64] projection (ld_in 3 H 64)
 *     and the gradients written into one: bit for bit the separate tensors'
 *     results; two runs bit-identical; *rng_base added to the offset; the
 *     forward's bits saved for the backward (bits_out / bits_in) give the same
 *     bits as the backward's own draw; one warpgroup a forward block
 *     (attention_sm90_tune) the same bits as two;
 *   - dq in the dkdv kernel's clusters (attention_sm90_tune_dq(1), the
 *     forward's bits): dq against the reference as above, dk and dv bit for
 *     bit the dkdv kernel's, two runs and the projection's layout the same
 *     bits.
 * Reference: s_ij = scale q_i.k_j + mask_j - max mask, P = softmax, lse of
 * the shifted scores, Pd = keep s_d P, out = Pd V; dP = keep s_d dout V^T,
 * D = rowsum(dout * out), dS = P (dP - D), dq = scale dS K, dk = scale dS^T
 * Q, dv = Pd^T dout (ops/attention_fused.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "engine/ctx.h"
#include "ops/attention_cudnn.h"
#include "ops/attention_fused.h"
#include "ops/attention_sm90.h"
#include "ops/dropout_mask.h"

enum { DH = 64 };

typedef struct {
    size_t B, H, T;
    DType dt;
    float p;
    int mask;   /* 0 none, 1 -10000 padding, 2 -inf, 3 -inf on the first 64 keys,
                 * 4 rising: 4 (j / 64) */
} Case;

/* element (b, t, h, e) of a [B, T, H, 64] array with token stride ld */
static size_t at(const Case *k, size_t ld, size_t b, size_t t, size_t h, size_t e)
{
    return (b * k->T + t) * ld + h * DH + e;
}

typedef struct {
    double *out, *lse, *dq, *dk, *dv;   /* out, grads [B, T, H, 64]; lse [B, H, T] */
} Ref;

static void reference(const Case *k, const float *q, const float *kk, const float *v,
                      const float *dout, const float *mask, uint64_t seed, uint64_t offset,
                      Ref *r)
{
    const size_t B = k->B, H = k->H, T = k->T, D = H * DH, n = B * T * D;
    r->out = calloc(n, sizeof(double));
    r->dq = calloc(n, sizeof(double));
    r->dk = calloc(n, sizeof(double));
    r->dv = calloc(n, sizeof(double));
    r->lse = calloc(B * H * T, sizeof(double));
    const uint32_t thr = drop_threshold(k->p);
    const double sd = (double)drop_scale(k->p), scale = 0.125;
    double *P = malloc(T * T * sizeof(double)), *dS = malloc(T * T * sizeof(double));
    unsigned char *keep = malloc(T * T);
    for (size_t b = 0; b < B; b++) {
        double mmax = mask ? -INFINITY : 0.0;
        if (mask)
            for (size_t j = 0; j < T; j++) mmax = fmax(mmax, mask[b * T + j]);
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h;
            if (mmax == -INFINITY) {
                for (size_t i = 0; i < T; i++) r->lse[bh * T + i] = -INFINITY;
                continue;   /* out and the gradients stay 0 */
            }
            for (size_t i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0.0;
                for (size_t j = 0; j < T; j++) {
                    double s = 0.0;
                    for (size_t e = 0; e < DH; e++)
                        s += (double)q[at(k, D, b, i, h, e)] * kk[at(k, D, b, j, h, e)];
                    s = s * scale + (mask ? mask[b * T + j] - mmax : 0.0);
                    P[i * T + j] = s;
                    mx = fmax(mx, s);
                    keep[i * T + j] =
                        thr ? (unsigned char)drop_keep_bit(seed, offset, (bh * T + i) * T + j, thr)
                            : 1;
                }
                for (size_t j = 0; j < T; j++) sum += (P[i * T + j] = exp(P[i * T + j] - mx));
                for (size_t j = 0; j < T; j++) P[i * T + j] /= sum;
                r->lse[bh * T + i] = mx + log(sum);
                for (size_t e = 0; e < DH; e++) {
                    double o = 0.0;
                    for (size_t j = 0; j < T; j++)
                        o += (keep[i * T + j] ? sd * P[i * T + j] : 0.0) * v[at(k, D, b, j, h, e)];
                    r->out[at(k, D, b, i, h, e)] = o;
                }
            }
            for (size_t i = 0; i < T; i++) {
                double Di = 0.0;
                for (size_t e = 0; e < DH; e++)
                    Di += (double)dout[at(k, D, b, i, h, e)] * r->out[at(k, D, b, i, h, e)];
                for (size_t j = 0; j < T; j++) {
                    double dp = 0.0;
                    for (size_t e = 0; e < DH; e++)
                        dp += (double)dout[at(k, D, b, i, h, e)] * v[at(k, D, b, j, h, e)];
                    dp = keep[i * T + j] ? dp * sd : 0.0;
                    dS[i * T + j] = P[i * T + j] * (dp - Di);
                }
            }
            for (size_t i = 0; i < T; i++)
                for (size_t e = 0; e < DH; e++) {
                    double a = 0.0;
                    for (size_t j = 0; j < T; j++) a += dS[i * T + j] * kk[at(k, D, b, j, h, e)];
                    r->dq[at(k, D, b, i, h, e)] = scale * a;
                }
            for (size_t j = 0; j < T; j++)
                for (size_t e = 0; e < DH; e++) {
                    double a = 0.0, c = 0.0;
                    for (size_t i = 0; i < T; i++) {
                        a += dS[i * T + j] * q[at(k, D, b, i, h, e)];
                        c += (keep[i * T + j] ? sd * P[i * T + j] : 0.0) *
                             dout[at(k, D, b, i, h, e)];
                    }
                    r->dk[at(k, D, b, j, h, e)] = scale * a;
                    r->dv[at(k, D, b, j, h, e)] = c;
                }
        }
    }
    free(P);
    free(dS);
    free(keep);
}

static void ref_free(Ref *r)
{
    free(r->out); free(r->lse); free(r->dq); free(r->dk); free(r->dv);
}

/* ||got - ref|| / ||ref|| and max |got - ref| / max |ref| (0 / 0 = 0) */
static void errs(const float *got, const double *ref, size_t n, double *rel, double *mx)
{
    double num = 0.0, den = 0.0, emax = 0.0, rmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        emax = fmax(emax, isnan(got[i]) ? INFINITY : fabs(d));
        rmax = fmax(rmax, fabs(ref[i]));
    }
    *rel = den > 0 ? sqrt(num / den) : sqrt(num);
    *mx = rmax > 0 ? emax / rmax : emax;
}

static void check_vs(const char *name, const float *sm, const float *fa, const double *ref,
                     size_t n)
{
    double r1, m1, r2, m2;
    errs(sm, ref, n, &r1, &m1);
    errs(fa, ref, n, &r2, &m2);
    check_true(name, r1 <= 2 * r2 + 1e-3 && m1 <= 2 * m2 + 1e-3,
               "sm90 rel %.3g max %.3g, fa_tc rel %.3g max %.3g", r1, m1, r2, m2);
    if (getenv("CHECK_VERBOSE"))
        printf("    %s: sm90 rel %.3g max %.3g | fa_tc rel %.3g max %.3g\n", name, r1, m1, r2, m2);
}

/* the [B, T, H, 64] part of a [B, T, 3, H, 64] projection (third w) */
static void split(const Case *k, float *dst, const float *qkv, int w)
{
    const size_t D = k->H * DH;
    for (size_t bt = 0; bt < k->B * k->T; bt++)
        memcpy(dst + bt * D, qkv + bt * 3 * D + w * D, D * sizeof(float));
}

/* dq inside the dkdv kernel's clusters (attention_sm90_tune_dq(1)), reading
 * the forward's bits sb (p > 0): dk and dv bit for bit the dkdv kernel's (gk1,
 * gv1), dq against the reference as fa_tc's (fa_dq) is, two runs and the
 * projection's layout the same bits, rows without keys exactly 0. u: dout, q,
 * k, v, out, lse, gk1, gv1, the projection, its out and lse. */
static void cluster_dq(Ctx *c, const Case *k, const char *tag, const Ref *ref,
                       const float *fa_dq, const float *dmask, uint64_t seed, uint64_t offset,
                       const uint64_t *sb, const void *const u[11])
{
    const size_t B = k->B, H = k->H, T = k->T, D = H * DH, n = B * T * D;
    const DType dt = k->dt;
    const size_t es = dtype_size(dt);
    const uint64_t *bits = k->p > 0 ? sb : NULL;
    char name[160];
    void *gq[2], *gk = gpu_alloc_poison(n, dt), *gv = gpu_alloc_poison(n, dt);
    void *g3 = gpu_alloc_poison(3 * n, dt);
    attention_sm90_tune_dq(1);
    for (int r = 0; r < 2; r++) {
        gq[r] = gpu_alloc_poison(n, dt);
        attention_sm90_backward(c, gq[r], gk, gv, u[0], u[1], u[2], u[3], u[4], u[5], dmask, dt,
                                k->p, seed, offset, B, H, T, D, D, bits);
    }
    const char *x = u[8];
    char *g = g3;
    attention_sm90_backward(c, g, g + D * es, g + 2 * D * es, u[0], x, x + D * es,
                            x + 2 * D * es, u[9], u[10], dmask, dt, k->p, seed, offset, B, H, T,
                            3 * D, D, bits);
    attention_sm90_tune_dq(-1);
    CUDA_CHECK(cudaDeviceSynchronize());
    float *a = falloc(n), *b = falloc(n), *ga = falloc(3 * n);
    gpu_download(a, gq[0], n, dt);
    snprintf(name, sizeof name, "%s.cluster.dq", tag);
    check_vs(name, a, fa_dq, ref->dq, n);
    snprintf(name, sizeof name, "%s.cluster.dk_dv_same_bits", tag);
    check_true(name, gpu_same_bytes(gk, u[6], n * es) && gpu_same_bytes(gv, u[7], n * es),
               "dk or dv differs from the dkdv kernel's");
    snprintf(name, sizeof name, "%s.cluster.rerun_same_bits", tag);
    check_true(name, gpu_same_bytes(gq[0], gq[1], n * es), "dq differs between two runs");
    gpu_download(ga, g3, 3 * n, dt);
    split(k, b, ga, 0);
    int same = memcmp(a, b, n * sizeof(float)) == 0;
    gpu_download(a, gk, n, dt);
    split(k, b, ga, 1);
    same &= memcmp(a, b, n * sizeof(float)) == 0;
    snprintf(name, sizeof name, "%s.cluster.projection_layout_same_bits", tag);
    check_true(name, same, "ld_in 3 H 64 differs from separate tensors");
    if (k->mask == 2) {   /* batch 1 has no key: its dq exactly 0 */
        gpu_download(a, gq[0], n, dt);
        int zero = 1;
        for (size_t i = n / 2; i < n; i++) zero &= a[i] == 0.0f;
        snprintf(name, sizeof name, "%s.cluster.no_key_rows_exactly_0", tag);
        check_true(name, zero, "a row without keys has a nonzero dq");
    }
    free(a); free(b); free(ga);
    dfree(gq[0]); dfree(gq[1]); dfree(gk); dfree(gv); dfree(g3);
}

static void one_case(Ctx *c, const Case *k)
{
    const size_t B = k->B, H = k->H, T = k->T, D = H * DH, n = B * T * D, rows = B * H * T;
    const DType dt = k->dt;
    const size_t es = dtype_size(dt);
    const uint64_t seed = 0x1234abcdULL, offset = 977;
    char tag[96], name[160];
    snprintf(tag, sizeof tag, "sm90.%s.T%zu.p%g.mask%d", dtype_name(dt), T, (double)k->p, k->mask);
    float *hqkv = hrand(3 * n, -2.0f, 2.0f, dt), *hdo = hrand(n, -1.0f, 1.0f, dt);
    float *hq = falloc(n), *hk = falloc(n), *hv = falloc(n), *hmask = NULL;
    split(k, hq, hqkv, 0);
    split(k, hk, hqkv, 1);
    split(k, hv, hqkv, 2);
    if (k->mask) {
        hmask = hbuf(B * T);
        for (size_t j = 0; j < T; j++) {
            if (k->mask == 1) hmask[T + j] = j >= T / 2 + 5 ? -10000.0f : 0.0f;
            else if (k->mask == 3) hmask[j] = hmask[T + j] = j < 64 ? -INFINITY : 0.0f;
            else if (k->mask == 4) hmask[j] = hmask[T + j] = 4.0f * (float)(j / 64);
            else {
                hmask[j] = j >= T - 64 && T > 64 ? -INFINITY : 0.0f;
                hmask[T + j] = -INFINITY;
            }
        }
    }
    Ref ref;
    reference(k, hq, hk, hv, hdo, hmask, seed, offset, &ref);
    void *dqkv = gpu_upload(hqkv, 3 * n, dt), *dq = gpu_upload(hq, n, dt);
    void *dk = gpu_upload(hk, n, dt), *dv = gpu_upload(hv, n, dt), *ddo = gpu_upload(hdo, n, dt);
    float *dmask = hmask ? gpu_upload(hmask, B * T, DT_F32) : NULL;
    const size_t kw = attention_keep_words(B, H, T);
    void *o1 = gpu_alloc_poison(n, dt), *o2 = gpu_alloc_poison(n, dt), *o3 = gpu_alloc_poison(n, dt);
    float *l1 = gpu_alloc_poison(rows, DT_F32), *l2 = gpu_alloc_poison(rows, DT_F32),
          *l3 = gpu_alloc_poison(rows, DT_F32);
    uint64_t *k1, *k2;
    CUDA_CHECK(cudaMalloc((void **)&k1, kw * 8));
    CUDA_CHECK(cudaMalloc((void **)&k2, kw * 8));
    CUDA_CHECK(cudaMemset(k1, 0, kw * 8));
    CUDA_CHECK(cudaMemset(k2, 0, kw * 8));
    void *gq1 = gpu_alloc_poison(n, dt), *gk1 = gpu_alloc_poison(n, dt),
         *gv1 = gpu_alloc_poison(n, dt);
    void *gq2 = gpu_alloc_poison(n, dt), *gk2 = gpu_alloc_poison(n, dt),
         *gv2 = gpu_alloc_poison(n, dt);
    void *g3 = gpu_alloc_poison(3 * n, dt);
    sync_all();
    attention_sm90_tune_dq(0);   /* the dq kernel here; its cluster form below */
    /* sm90 on separate tensors, fa_tc on the same, sm90 on the projection */
    attention_sm90_forward(c, o1, l1, k1, NULL, dq, dk, dv, dmask, dt, k->p, seed, offset, B, H, T, D, D);
    attention_sm90_backward(c, gq1, gk1, gv1, ddo, dq, dk, dv, o1, l1, dmask, dt, k->p, seed,
                            offset, B, H, T, D, D, NULL);
    attention_fa_tc_forward_cuda(c, o2, l2, k2, dq, dk, dv, dmask, dt, k->p, seed, offset, B, H,
                                 T, DH, 1);
    attention_fused_backward_cuda(c, gq2, gk2, gv2, ddo, dq, dk, dv, o2, l2, dmask, NULL, dt,
                                  k->p, seed, offset, B, H, T, DH, 0, 0, 0, 1);
    const char *x = (const char *)dqkv;
    char *g = (char *)g3;
    attention_sm90_forward(c, o3, l3, NULL, NULL, x, x + D * es, x + 2 * D * es, dmask, dt, k->p, seed,
                           offset, B, H, T, 3 * D, D);
    attention_sm90_backward(c, g, g + D * es, g + 2 * D * es, ddo, x, x + D * es, x + 2 * D * es,
                            o3, l3, dmask, dt, k->p, seed, offset, B, H, T, 3 * D, D, NULL);
    CUDA_CHECK(cudaDeviceSynchronize());
    float *a = falloc(n), *b = falloc(n), *hl1 = falloc(rows), *fa_dq = falloc(n);
    const void *pairs[4][2] = {{o1, o2}, {gq1, gq2}, {gk1, gk2}, {gv1, gv2}};
    const double *refs[4] = {ref.out, ref.dq, ref.dk, ref.dv};
    const char *what[4] = {"out", "dq", "dk", "dv"};
    for (int w = 0; w < 4; w++) {
        gpu_download(a, pairs[w][0], n, dt);
        gpu_download(b, pairs[w][1], n, dt);
        snprintf(name, sizeof name, "%s.%s", tag, what[w]);
        check_vs(name, a, b, refs[w], n);
        if (w == 1) memcpy(fa_dq, b, n * sizeof(float));
    }
    if (k->mask == 2) {   /* batch 1 has no key: out and the gradients exactly 0 */
        const void *z[4] = {o1, gq1, gk1, gv1};
        int zero = 1;
        for (int w = 0; w < 4; w++) {
            gpu_download(a, z[w], n, dt);
            for (size_t i = n / 2; i < n; i++) zero &= a[i] == 0.0f;
        }
        snprintf(name, sizeof name, "%s.no_key_rows_exactly_0", tag);
        check_true(name, zero, "a row without keys has a nonzero out or gradient");
    }
    gpu_download(hl1, l1, rows, DT_F32);
    double lerr = 0.0;
    int inf_ok = 1;
    for (size_t i = 0; i < rows; i++) {
        if (isinf(ref.lse[i])) inf_ok &= isinf(hl1[i]) && hl1[i] < 0;
        else {
            const double e = fabs(hl1[i] - ref.lse[i]);
            lerr = fmax(lerr, isnan(e) ? INFINITY : e);
        }
    }
    snprintf(name, sizeof name, "%s.lse", tag);
    check_true(name, lerr <= 1e-3 && inf_ok, "max |lse - ref| %.3g, -inf rows %s", lerr,
               inf_ok ? "right" : "wrong");
    if (k->p > 0) {
        snprintf(name, sizeof name, "%s.keep_out_is_fa_tc", tag);
        check_true(name, gpu_same_bytes(k1, k2, kw * 8), "the saved masks differ");
    }
    /* one warpgroup a block: the same bits (each row's sums are a warpgroup's own) */
    attention_sm90_tune(1);
    attention_sm90_forward(c, o2, l2, NULL, NULL, dq, dk, dv, dmask, dt, k->p, seed, offset, B, H,
                           T, D, D);
    attention_sm90_tune(2);
    snprintf(name, sizeof name, "%s.one_warpgroup_same_bits", tag);
    check_true(name, gpu_same_bytes(o1, o2, n * es) && gpu_same_bytes(l1, l2, rows * 4),
               "out or lse differs from two warpgroups a block");
    /* the projection's layout: the same bits */
    int same = gpu_same_bytes(o1, o3, n * es);
    float *ga = falloc(3 * n);
    gpu_download(ga, g3, 3 * n, dt);
    const void *gs[3] = {gq1, gk1, gv1};
    for (int w = 0; w < 3; w++) {
        gpu_download(a, gs[w], n, dt);
        split(k, b, ga, w);
        same &= memcmp(a, b, n * sizeof(float)) == 0;
    }
    snprintf(name, sizeof name, "%s.projection_layout_same_bits", tag);
    check_true(name, same, "ld_in 3 H 64 differs from separate tensors");
    /* again: the same bits; then with *rng_base = 5000 and offset - 5000 */
    uint64_t *base;
    const uint64_t hb = 5000;
    CUDA_CHECK(cudaMalloc((void **)&base, 8));
    CUDA_CHECK(cudaMemcpy(base, &hb, 8, cudaMemcpyHostToDevice));
    uint64_t *sb;   /* the forward's bits for the backward (rep 2) */
    CUDA_CHECK(cudaMalloc((void **)&sb, kw * 8));
    for (int rep = 0; rep < 3; rep++) {
        if (rep == 1) c->rng_base = base;
        const uint64_t off = rep == 1 ? offset - hb : offset;
        attention_sm90_forward(c, o2, l2, NULL, rep == 2 ? sb : NULL, dq, dk, dv, dmask, dt, k->p, seed, off, B, H, T,
                               D, D);
        attention_sm90_backward(c, gq2, gk2, gv2, ddo, dq, dk, dv, o2, l2, dmask, dt, k->p, seed,
                                off, B, H, T, D, D, rep == 2 ? sb : NULL);
        c->rng_base = NULL;
        static const char *what_rep[3] = {"rerun_same_bits", "rng_base", "saved_bits_same_bits"};
        snprintf(name, sizeof name, "%s.%s", tag, what_rep[rep]);
        check_true(name,
                   gpu_same_bytes(o1, o2, n * es) && gpu_same_bytes(l1, l2, rows * 4) &&
                       gpu_same_bytes(gq1, gq2, n * es) && gpu_same_bytes(gk1, gk2, n * es) &&
                       gpu_same_bytes(gv1, gv2, n * es),
                   "out, lse or a gradient differs");
    }
    cluster_dq(c, k, tag, &ref, fa_dq, dmask, seed, offset, sb,
               (const void *[]){ddo, dq, dk, dv, o2, l2, gk1, gv1, dqkv, o3, l3});
    dfree(base);
    dfree(sb);
    ref_free(&ref);
    free(a); free(b); free(hl1); free(ga); free(fa_dq);
    free(hqkv); free(hdo); free(hq); free(hk); free(hv); free(hmask);
    void *ds[] = {dqkv, dq, dk, dv, ddo, o1, o2, o3, l1, l2, l3, k1, k2,
                  gq1, gk1, gv1, gq2, gk2, gv2, g3};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) dfree(ds[i]);
    if (dmask) dfree(dmask);
}

/* ---- timing (--bench) ---- */

typedef void (*RunFn)(Ctx *c, void **bufs, size_t B, size_t H, size_t T, int pass);

/* median ms of 9 calls of pass 0 (forward) or 1 (backward) */
static float time_it(Ctx *c, RunFn f, void **bufs, size_t B, size_t H, size_t T, int pass)
{
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    f(c, bufs, B, H, T, 0);   /* warm-up; the forward the backward reads */
    if (pass) f(c, bufs, B, H, T, 1);
    float ms[9];
    for (int r = 0; r < 9; r++) {
        CUDA_CHECK(cudaEventRecord(e0, c->stream));
        f(c, bufs, B, H, T, pass);
        CUDA_CHECK(cudaEventRecord(e1, c->stream));
        CUDA_CHECK(cudaEventSynchronize(e1));
        CUDA_CHECK(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    qsort(ms, 9, sizeof(float), gpu_cmp_float);
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    return ms[4];
}

/* bufs: qkv, out, lse (f32 B H T), dout, dqkv; q, k, v in place (ld 3 D) */
static float bench_p = 0.1f;   /* the dropout of the sm90 rows */
static uint64_t *bench_bits;   /* the forward's bits for the backward, or NULL */
static void run_sm90(Ctx *c, void **u, size_t B, size_t H, size_t T, int pass)
{
    const size_t D = H * DH;
    const char *x = u[0];
    char *g = u[4];
    if (!pass)
        attention_sm90_forward(c, u[1], u[2], NULL, bench_bits, x, x + 2 * D, x + 4 * D, NULL, DT_BF16,
                               bench_p, 7, 0, B, H, T, 3 * D, D);
    else
        attention_sm90_backward(c, g, g + 2 * D, g + 4 * D, u[3], x, x + 2 * D, x + 4 * D, u[1],
                                u[2], NULL, DT_BF16, bench_p, 7, 0, B, H, T, 3 * D, D,
                                bench_bits);
}
static void run_cudnn(Ctx *c, void **u, size_t B, size_t H, size_t T, int pass)
{
    const size_t D = H * DH;
    const char *x = u[0];
    char *g = u[4];
    if (!pass)
        attention_cudnn_forward(c, u[1], u[2], x, x + 2 * D, x + 4 * D, NULL, DT_BF16, 0.1f, 7, 0,
                                B, H, T, DH, 1, 3 * D);
    else
        attention_cudnn_backward(c, g, g + 2 * D, g + 4 * D, u[3], x, x + 2 * D, x + 4 * D, u[1],
                                 u[2], NULL, DT_BF16, 0.1f, 7, 0, B, H, T, DH, 0, 0, 0, 1, 3 * D);
}
/* fa_tc takes separate [B, T, H, 64] tensors: q, k, v at u[5..7], grads u[8..10] */
static void run_fa(Ctx *c, void **u, size_t B, size_t H, size_t T, int pass)
{
    if (!pass)
        attention_fa_tc_forward_cuda(c, u[1], u[2], NULL, u[5], u[6], u[7], NULL, DT_BF16, 0.1f,
                                     7, 0, B, H, T, DH, 1);
    else
        attention_fused_backward_cuda(c, u[8], u[9], u[10], u[3], u[5], u[6], u[7], u[1], u[2],
                                      NULL, NULL, DT_BF16, 0.1f, 7, 0, B, H, T, DH, 0, 0, 0, 1);
}

/* only_sm90: the sm90 rows at seq 512 alone (for a profiler) */
static void bench(Ctx *c, int only_sm90)
{
    const size_t shapes[2][3] = {{32, 16, 512}, {256, 16, 128}};
    for (int s = 0; s < (only_sm90 ? 1 : 2); s++) {
        const size_t B = shapes[s][0], H = shapes[s][1], T = shapes[s][2], n = B * T * H * DH;
        void *u[11];
        float *h = hrand(3 * n, -2.0f, 2.0f, DT_BF16);
        u[0] = gpu_upload(h, 3 * n, DT_BF16);
        u[3] = gpu_upload(h, n, DT_BF16);
        u[1] = gpu_alloc_poison(n, DT_BF16);
        u[2] = gpu_alloc_poison(B * H * T, DT_F32);
        u[4] = gpu_alloc_poison(3 * n, DT_BF16);
        for (int i = 5; i < 8; i++) u[i] = gpu_upload(h + (i - 5) * n, n, DT_BF16);
        for (int i = 8; i < 11; i++) u[i] = gpu_alloc_poison(n, DT_BF16);
        sync_all();
        const double ff = 4.0 * B * H * (double)T * T * DH, fb = 2.5 * ff;
        const int cudnn = !only_sm90 && attention_cudnn_ready(c, DT_BF16, B, H, T, DH, 1,
                                                              3 * H * DH, 0, 0.1f);
        RunFn fs[7] = {run_sm90, run_sm90, run_sm90, run_sm90, run_sm90, run_fa, run_cudnn};
        const char *names[7] = {"sm90", "sm90_saved_bits", "sm90_saved_bits_cluster_dq",
                                "sm90_fwd_1wg", "sm90", "fa_tc", "cudnn"};
        CUDA_CHECK(cudaMalloc((void **)&bench_bits, attention_keep_words(B, H, T) * 8));
        for (int f = 0; f < (only_sm90 ? 4 : cudnn ? 7 : 6); f++) {
            bench_p = f == 4 ? 0.0f : 0.1f;
            attention_sm90_tune(f == 3 ? 1 : 2);
            attention_sm90_tune_dq(f == 2 ? 1 : 0);
            uint64_t *bb = bench_bits;
            if (f != 1 && f != 2) bench_bits = NULL;
            const float tf = time_it(c, fs[f], u, B, H, T, 0);
            const float tb = time_it(c, fs[f], u, B, H, T, 1);
            printf("{\"kernel\":\"%s\",\"B\":%zu,\"H\":%zu,\"T\":%zu,\"p\":%g,\"fwd_ms\":%.4f,"
                   "\"bwd_ms\":%.4f,\"fwd_tflops\":%.1f,\"bwd_tflops\":%.1f}\n",
                   names[f], B, H, T, (double)bench_p, tf, tb, ff / tf * 1e-9, fb / tb * 1e-9);
            bench_bits = bb;
        }
        attention_sm90_tune(2);
        attention_sm90_tune_dq(-1);
        dfree(bench_bits);
        bench_bits = NULL;
        for (int i = 0; i < 11; i++) dfree(u[i]);
        free(h);
    }
}

int main(int argc, char **argv)
{
    gpu_require();
    check_seed(20261207);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 0x5eedULL);
    if (!attention_sm90_supports(&c, DT_BF16, 2, 3, 64, 64)) {
        printf("SKIP: the sm_90 attention kernels need an sm_90 device and a build with 90 in "
               "ARCH\n");
        ctx_free(&c);
        return check_summary();
    }
    check_true("sm90.refuses_dh_32", !attention_sm90_supports(&c, DT_BF16, 2, 3, 64, 32), "taken");
    check_true("sm90.refuses_t_100", !attention_sm90_supports(&c, DT_BF16, 2, 3, 100, 64),
               "taken");
    check_true("sm90.refuses_f32", !attention_sm90_supports(&c, DT_F32, 2, 3, 64, 64), "taken");
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        bench(&c, argc > 2 && strcmp(argv[2], "sm90") == 0);
        ctx_free(&c);
        return check_summary();
    }
    const DType dts[2] = {DT_BF16, DT_F16};
    const size_t Ts[3] = {64, 192, 512};
    for (int d = 0; d < 2; d++)
        for (int t = 0; t < 3; t++)
            for (int pi = 0; pi < 2; pi++)
                for (int m = 0; m < 5; m++) {
                    if (Ts[t] == 512 && (m != 1 || d == 1)) continue;   /* the host reference's time */
                    if (m == 3 && Ts[t] == 64) continue;   /* no key left */
                    const Case k = {2, 3, Ts[t], dts[d], pi ? 0.1f : 0.0f, m};
                    one_case(&c, &k);
                }
    ctx_free(&c);
    return check_summary();
}
