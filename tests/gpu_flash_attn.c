/* gpu_flash_attn.c — the fused (flash-style) attention of
 * ops/attention_fused.h against the CPU reference (ops/attention.h) and the
 * cuBLASLt path, for f32, f16 and bf16 storage.
 *
 * STATUS: written without a GPU; compiles, has NOT been run yet.
 *   run:  make -j2 ARCH=90 build/tests/gpu_flash_attn && build/tests/gpu_flash_attn
 *   time: CTRAIN_FLASH_BENCH=1 build/tests/gpu_flash_attn   (JSON lines, fused vs cublas)
 *
 * What it checks:
 *   - out against the CPU reference (relative norm, and element-wise at 8x
 *     the dtype tolerance, as tests/gpu_transformer_ops.c does), and against
 *     the cuBLASLt path's out; lse against a double-precision row
 *     log-sum-exp computed here;
 *   - dq, dk, dv (accum 0 and 1) against attention_backward_cpu on the CPU's
 *     P (same tolerances as the attention case in gpu_transformer_ops.c);
 *   - shapes B 2, H 2..4, T 1, 17, 64, 128, 130, Dh 32 / 64 / 128; masks:
 *     none, -10000 padding, -inf padding (rows with every key at -inf: out
 *     and gradients 0); dropout p 0 and 0.1;
 *   - dropout mask bit for bit: with v one-hot rows (T <= Dh) out[i][j] is
 *     Pd_ij, so out_ij != 0 must equal the Philox keep bit at
 *     idx = ((b H + h) T + i) T + j; and the rng_base device offset gives the
 *     same bits as the equivalent plain offset;
 *   - the tensor op with CTRAIN_ATTN=fused against CTRAIN_ATTN=cublas through
 *     autograd (f32 and bf16 autocast), and all memory returned.
 * Shape letters: B batch, H heads, T tokens, Dh head width.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "../engine/autograd.h"
#include "../engine/mem.h"
#include "../engine/philox.h"
#include "../ops/attention.h"
#include "../ops/attention_fused.h"
#include "../ops/dropout.h"
#include "../ops/ops.h"


enum { MASK_NONE, MASK_BIG, MASK_INF };
static const char *mask_name[3] = {"", " padded", " padded -inf"};

/* mask[b][t]: padding keys at the end, more of them for later b (batch 1
 * fully padded when T <= 28: the -inf case then has rows with no keys). */
static void make_mask(float *mask, size_t B, size_t T, int mode)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            mask[b * T + t] = t + 28 * b >= T ? (mode == MASK_INF ? -INFINITY : -10000.0f) : 0.0f;
}

/* lse[b,h,i] = log sum_j exp(scale q_i . k_j + mask[b,j]) in double; -inf for no keys */
static void lse_ref(float *lse, const float *q, const float *k, const float *mask, size_t B,
                    size_t H, size_t T, size_t Dh)
{
    const double scale = 1.0 / sqrt((double)Dh);
    double *s = (double *)malloc(T * sizeof(double));
    for (size_t bh = 0; bh < B * H; bh++)
        for (size_t i = 0; i < T; i++) {
            double m = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < T; j++) {
                double d = 0.0;
                for (size_t e = 0; e < Dh; e++)
                    d += (double)q[(bh * T + i) * Dh + e] * k[(bh * T + j) * Dh + e];
                s[j] = scale * d + (mask ? mask[(bh / H) * T + j] : 0.0);
                m = fmax(m, s[j]);
            }
            if (m == -INFINITY) { lse[bh * T + i] = -INFINITY; continue; }
            for (size_t j = 0; j < T; j++) sum += exp(s[j] - m);
            lse[bh * T + i] = (float)(m + log(sum));
        }
    free(s);
}

/* -inf entries equal in place, the rest close */
static void check_lse(const char *name, float *got, float *ref, size_t n)
{
    size_t bad_inf = 0;
    for (size_t i = 0; i < n; i++)
        if (isinf(ref[i]) || isinf(got[i])) {
            bad_inf += got[i] != ref[i];
            got[i] = ref[i] = 0.0f;
        }
    char nm[256];
    snprintf(nm, sizeof nm, "%s -inf rows", name);
    check_true(nm, bad_inf == 0, "%zu rows differ in being -inf", bad_inf);
    check_close(name, got, ref, n, 2e-4, 2e-4);
}

static void flash_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh, float p,
                       int mask_mode)
{
    char name[224], tag[128];
    snprintf(tag, sizeof tag, "%s (%zu,%zu,%zu,%zu) p %g%s", dtype_name(dt), B, H, T, Dh,
             (double)p, mask_name[mask_mode]);
    const size_t n = B * H * T * Dh, np = B * H * T * T, nr = B * H * T;
    const uint64_t seed = g->seed, offset = 98765;
    float *q = hrand(n, -2.0f, 2.0f, dt), *k = hrand(n, -2.0f, 2.0f, dt);
    float *v = hrand(n, -1.0f, 1.0f, dt), *mask = falloc(B * T);
    float *out = falloc(n), *oref = falloc(n), *Pref = falloc(np);
    float *lse = falloc(nr), *lref = falloc(nr);
    make_mask(mask, B, T, mask_mode);
    const float *m = mask_mode == MASK_NONE ? NULL : mask;
    attention_forward_cpu(oref, Pref, q, k, v, m, p, seed, offset, B, H, T, Dh);
    lse_ref(lref, q, k, m, B, H, T, Dh);

    void *d_q = gpu_upload(q, n, dt), *d_k = gpu_upload(k, n, dt), *d_v = gpu_upload(v, n, dt);
    float *d_mask = (float *)gpu_upload(mask, B * T, DT_F32);
    void *d_out = gpu_alloc_poison(n, dt);
    float *d_lse = (float *)gpu_alloc_poison(nr, DT_F32);
    sync_all();
    attention_fused_forward_cuda(g, d_out, d_lse, d_q, d_k, d_v, m ? d_mask : NULL, dt, p, seed,
                                 offset, B, H, T, Dh);
    gpu_download(out, d_out, n, dt);
    gpu_download(lse, d_lse, nr, DT_F32);
    snprintf(name, sizeof name, "gpu.flash.out (norm) %s", tag);
    check_rel_norm(name, out, oref, n, tol_norm(dt));
    snprintf(name, sizeof name, "gpu.flash.out %s", tag);
    check_close(name, out, oref, n, 8.0 * tol_rtol(dt) * maxabs(oref, n) + 1e-6,
                8.0 * tol_rtol(dt));
    snprintf(name, sizeof name, "gpu.flash.lse %s", tag);
    check_lse(name, lse, lref, nr);

    /* the cuBLASLt path on the same inputs (its own rounding of P) */
    {
        float *ob = falloc(n);
        void *d_ob = gpu_alloc_poison(n, dt), *d_P = gpu_alloc_poison(np, dt);
        sync_all();
        attention_forward_cuda(g, d_ob, d_P, d_q, d_k, d_v, m ? d_mask : NULL, dt, p, seed,
                               offset, B, H, T, Dh);
        gpu_download(ob, d_ob, n, dt);
        snprintf(name, sizeof name, "gpu.flash.out = cublas path's out (norm) %s", tag);
        check_rel_norm(name, out, ob, n, 2.0 * tol_norm(dt));
        dfree(d_ob); dfree(d_P); free(ob);
    }

    /* backward against the CPU on the CPU's P */
    float *dout = hrand(n, -1.0f, 1.0f, dt), *g0 = hrand(n, -0.5f, 0.5f, dt), *got = falloc(n);
    float *ref[3] = {falloc(n), falloc(n), falloc(n)};
    attention_backward_cpu(ref[0], ref[1], ref[2], dout, q, k, v, Pref, p, seed, offset, B, H,
                           T, Dh, 0, 0, 0);
    void *d_dout = gpu_upload(dout, n, dt);
    const char *gn[3] = {"dq", "dk", "dv"};
    for (int accum = 0; accum <= 1; accum++) {
        void *d_g[3];
        for (int i = 0; i < 3; i++) d_g[i] = accum ? gpu_upload(g0, n, dt) : gpu_alloc_poison(n, dt);
        sync_all();
        attention_fused_backward_cuda(g, d_g[0], d_g[1], d_g[2], d_dout, d_q, d_k, d_v, d_out,
                                      d_lse, m ? d_mask : NULL, dt, p, seed, offset, B, H, T,
                                      Dh, accum, accum, accum);
        for (int i = 0; i < 3; i++) {
            float *r = ref[i];
            if (accum) {
                r = falloc(n);
                for (size_t j = 0; j < n; j++) r[j] = ref[i][j] + g0[j];
            }
            gpu_download(got, d_g[i], n, dt);
            snprintf(name, sizeof name, "gpu.flash.%s (norm) %s accum %d", gn[i], tag, accum);
            check_rel_norm(name, got, r, n, tol_norm(dt));
            snprintf(name, sizeof name, "gpu.flash.%s %s accum %d", gn[i], tag, accum);
            check_close(name, got, r, n, 8.0 * tol_rtol(dt) * maxabs(r, n) + 1e-6,
                        8.0 * tol_rtol(dt));
            if (accum) free(r);
            dfree(d_g[i]);
        }
    }
    /* only dv wanted (dq, dk NULL): the same dv */
    {
        void *d_dv = gpu_alloc_poison(n, dt);
        sync_all();
        attention_fused_backward_cuda(g, NULL, NULL, d_dv, d_dout, d_q, d_k, d_v, d_out, d_lse,
                                      m ? d_mask : NULL, dt, p, seed, offset, B, H, T, Dh, 0, 0, 0);
        gpu_download(got, d_dv, n, dt);
        snprintf(name, sizeof name, "gpu.flash.dv alone (norm) %s", tag);
        check_rel_norm(name, got, ref[2], n, tol_norm(dt));
        dfree(d_dv);
    }
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_mask); dfree(d_out); dfree(d_lse); dfree(d_dout);
    free(q); free(k); free(v); free(mask); free(out); free(oref); free(Pref); free(lse);
    free(lref); free(dout); free(g0); free(got);
    for (int i = 0; i < 3; i++) free(ref[i]);
}

/* v one-hot (v[j][e] = e == j, T <= Dh): out[i][j] = Pd_ij = keep ? P s : 0.
 * The keep bit must be the Philox bit of the flat [B,H,T,T] index; and a
 * device base offset (rng_base, as inside a CUDA graph) must give the same
 * bits as the same total offset passed plainly. */
static void flash_dropout_bits_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh,
                                    float p)
{
    char name[224], tag[128];
    snprintf(tag, sizeof tag, "%s (%zu,%zu,%zu,%zu) p %g", dtype_name(dt), B, H, T, Dh,
             (double)p);
    const size_t n = B * H * T * Dh, np = B * H * T * T;
    const uint64_t seed = g->seed, offset = (1ull << 33) + 7, base = 1000003;
    float *q = hrand(n, -0.5f, 0.5f, dt), *k = hrand(n, -0.5f, 0.5f, dt), *v = falloc(n);
    float *out = falloc(n), *out2 = falloc(n), *oref = falloc(n), *Pref = falloc(np);
    for (size_t r = 0; r < B * H * T; r++)
        for (size_t e = 0; e < Dh; e++) v[r * Dh + e] = e == r % T ? 1.0f : 0.0f;
    attention_forward_cpu(oref, Pref, q, k, v, NULL, p, seed, offset, B, H, T, Dh);
    void *d_q = gpu_upload(q, n, dt), *d_k = gpu_upload(k, n, dt), *d_v = gpu_upload(v, n, dt);
    void *d_out = gpu_alloc_poison(n, dt), *d_out2 = gpu_alloc_poison(n, dt);
    float *d_lse = (float *)gpu_alloc_poison(B * H * T, DT_F32);
    sync_all();
    attention_fused_forward_cuda(g, d_out, d_lse, d_q, d_k, d_v, NULL, dt, p, seed, offset, B, H,
                                 T, Dh);
    gpu_download(out, d_out, n, dt);
    size_t bad = 0, checked = 0;
    for (size_t bh = 0; bh < B * H; bh++)
        for (size_t i = 0; i < T; i++)
            for (size_t j = 0; j < T; j++) {
                const size_t idx = (bh * T + i) * T + j;
                if (Pref[idx] < 1e-6f) continue;
                const int keep = philox_uniform(seed, offset, idx) >= p;
                bad += (out[(bh * T + i) * Dh + j] != 0.0f) != keep;
                checked++;
            }
    snprintf(name, sizeof name, "gpu.flash.dropout mask = Philox mask %s", tag);
    check_true(name, bad == 0 && checked > 0, "%zu of %zu keep bits differ", bad, checked);
    snprintf(name, sizeof name, "gpu.flash.dropout values %s", tag);
    check_close(name, out, oref, n, 8.0 * tol_atol(dt), 8.0 * tol_rtol(dt));

    uint64_t *d_base = (uint64_t *)gpu_upload_raw(&base, sizeof base);
    sync_all();
    const uint64_t *saved = g->rng_base;
    g->rng_base = d_base;
    attention_fused_forward_cuda(g, d_out2, d_lse, d_q, d_k, d_v, NULL, dt, p, seed,
                                 offset - base, B, H, T, Dh);
    g->rng_base = saved;
    gpu_download(out2, d_out2, n, dt);
    snprintf(name, sizeof name, "gpu.flash.rng_base + offset = plain offset, same bits %s", tag);
    check_true(name, memcmp(out, out2, n * sizeof(float)) == 0, "the outputs differ");
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_out); dfree(d_out2); dfree(d_lse); dfree(d_base);
    free(q); free(k); free(v); free(out); free(out2); free(oref); free(Pref);
}

/* ---- the op: CTRAIN_ATTN=fused against CTRAIN_ATTN=cublas through autograd ---- */

static void cmp_tensors(const char *name, Tensor *got, Tensor *ref, double norm_tol)
{
    if (got->numel != ref->numel) {
        check_true(name, 0, "sizes differ: %zu vs %zu", got->numel, ref->numel);
        return;
    }
    float *a = falloc(got->numel), *b = falloc(ref->numel);
    tensor_to_f32(a, got);
    tensor_to_f32(b, ref);
    check_rel_norm(name, a, b, got->numel, norm_tol);
    free(a); free(b);
}

/* y = attention(q, k, v, mask) under `path`, then loss = sum(y * w) backward */
static Tensor *op_run(Ctx *g, const char *path, Tensor *q, Tensor *k, Tensor *v, Tensor *m,
                      const float *w, float p)
{
    setenv("CTRAIN_ATTN", path, 1);
    g->rng_offset = 4242;
    Tensor *y = op_attention(g, q, k, v, m, p);
    Tensor *tw = tensor_from_f32(g, w, y->dtype, y->ndim, y->shape);
    Tensor *prod = op_mul(g, y, tw);
    Tensor *loss = op_sum(g, prod);
    tensor_release(prod);
    tensor_release(tw);
    ad_backward(g, loss, 1.0f);
    tensor_release(loss);
    unsetenv("CTRAIN_ATTN");
    return y;
}

static void flash_op_case(Ctx *g, int autocast_bf16)
{
    const int64_t qs[4] = {2, 3, 20, 32}, ms[2] = {2, 20};
    const size_t n = 2 * 3 * 20 * 32;
    float *a = falloc(n), *b = falloc(n), *c3 = falloc(n), *w = falloc(n), mask[40];
    check_fill(a, n, -2, 2);
    check_fill(b, n, -2, 2);
    check_fill(c3, n, -1, 1);
    check_fill(w, n, -1, 1);
    for (int i = 0; i < 40; i++) mask[i] = i >= 20 && i % 20 >= 13 ? -10000.0f : 0.0f;
    size_t base = g->mem.current;
    Tensor *t[2][4], *y[2];
    const char *path[2] = {"cublas", "fused"};
    g->autocast = autocast_bf16 ? DT_BF16 : DT_F32;
    for (int f = 0; f < 2; f++) {
        t[f][0] = tensor_from_f32(g, a, DT_F32, 4, qs);
        t[f][1] = tensor_from_f32(g, b, DT_F32, 4, qs);
        t[f][2] = tensor_from_f32(g, c3, DT_F32, 4, qs);
        t[f][3] = tensor_from_f32(g, mask, DT_F32, 2, ms);
        for (int i = 0; i < 3; i++) t[f][i]->requires_grad = 1;
        y[f] = op_run(g, path[f], t[f][0], t[f][1], t[f][2], t[f][3], w, 0.1f);
    }
    g->autocast = DT_F32;
    const double nt = autocast_bf16 ? 2e-2 : 1e-5;
    const char *sfx = autocast_bf16 ? " bf16 autocast" : " f32";
    char name[160];
    snprintf(name, sizeof name, "gpu.flash.op.out fused = cublas%s", sfx);
    cmp_tensors(name, y[1], y[0], nt);
    const char *gn[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "gpu.flash.op.%s fused = cublas%s", gn[i], sfx);
        if (!t[1][i]->grad || !t[0][i]->grad) check_true(name, 0, "no gradient");
        else cmp_tensors(name, t[1][i]->grad, t[0][i]->grad, nt);
    }
    for (int f = 0; f < 2; f++) {
        tensor_release(y[f]);
        for (int i = 0; i < 4; i++) tensor_release(t[f][i]);
    }
    ctx_sync(g);
    snprintf(name, sizeof name, "gpu.flash.op.all memory returned%s", sfx);
    check_true(name, g->mem.current == base, "%zu bytes held (base %zu)", g->mem.current, base);
    free(a); free(b); free(c3); free(w);
}

/* ---- optional timing (CTRAIN_FLASH_BENCH=1): fused vs cuBLASLt path ----
 * One JSON line per (path, pass, shape): forward and forward+backward, bf16,
 * mask on, p 0.1, 5 warm-up calls, median of 20, CUDA events on the
 * context's stream. Not a check: numbers for ops/NOTES.md. */
static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void flash_bench(Ctx *g, size_t B, size_t H, size_t T, size_t Dh)
{
    const DType dt = DT_BF16;
    const size_t n = B * H * T * Dh, np = B * H * T * T;
    float *h = hrand(n, -1.0f, 1.0f, dt), *mask = falloc(B * T);
    make_mask(mask, B, T, MASK_BIG);
    void *d_q = gpu_upload(h, n, dt), *d_k = gpu_upload(h, n, dt), *d_v = gpu_upload(h, n, dt);
    void *d_do = gpu_upload(h, n, dt), *d_out = gpu_alloc_poison(n, dt);
    void *d_dq = gpu_alloc_poison(n, dt), *d_dk = gpu_alloc_poison(n, dt), *d_dv = gpu_alloc_poison(n, dt);
    float *d_mask = (float *)gpu_upload(mask, B * T, DT_F32);
    float *d_lse = (float *)gpu_alloc_poison(B * H * T, DT_F32);
    void *d_P = gpu_alloc_poison(np, dt);
    sync_all();
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    for (int fused = 0; fused <= 1; fused++)
        for (int bwd = 0; bwd <= 1; bwd++) {
            float ms[20];
            for (int it = -5; it < 20; it++) {
                CUDA_CHECK(cudaEventRecord(e0, g->stream));
                if (fused) {
                    attention_fused_forward_cuda(g, d_out, d_lse, d_q, d_k, d_v, d_mask, dt, 0.1f,
                                                 1, 0, B, H, T, Dh);
                    if (bwd)
                        attention_fused_backward_cuda(g, d_dq, d_dk, d_dv, d_do, d_q, d_k, d_v,
                                                      d_out, d_lse, d_mask, dt, 0.1f, 1, 0, B, H,
                                                      T, Dh, 0, 0, 0);
                } else {
                    attention_forward_cuda(g, d_out, d_P, d_q, d_k, d_v, d_mask, dt, 0.1f, 1, 0,
                                           B, H, T, Dh);
                    if (bwd)
                        attention_backward_cuda(g, d_dq, d_dk, d_dv, d_do, d_q, d_k, d_v, d_P, dt,
                                                0.1f, 1, 0, B, H, T, Dh, 0, 0, 0);
                }
                CUDA_CHECK(cudaEventRecord(e1, g->stream));
                CUDA_CHECK(cudaEventSynchronize(e1));
                if (it >= 0) CUDA_CHECK(cudaEventElapsedTime(&ms[it], e0, e1));
            }
            qsort(ms, 20, sizeof ms[0], cmp_float);
            printf("{\"bench\":\"attention\",\"path\":\"%s\",\"pass\":\"%s\",\"dtype\":\"bf16\","
                   "\"B\":%zu,\"H\":%zu,\"T\":%zu,\"Dh\":%zu,\"p\":0.1,\"warmup\":5,\"iters\":20,"
                   "\"median_ms\":%.4f}\n",
                   fused ? "fused" : "cublas", bwd ? "fwd+bwd" : "fwd", B, H, T, Dh,
                   (double)(ms[9] + ms[10]) * 0.5);
        }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_do); dfree(d_out); dfree(d_dq); dfree(d_dk);
    dfree(d_dv); dfree(d_mask); dfree(d_lse); dfree(d_P);
    free(h); free(mask);
}

int main(void)
{
    gpu_require();
    check_seed(11);
    Ctx gpu;
    ctx_init(&gpu, DEV_CUDA, 0, 0x5eedULL);
    const size_t Ts[5] = {1, 17, 64, 128, 130};
    for (int t = 0; t < 3; t++) {
        const DType dt = gpu_float_types[t];
        for (int ti = 0; ti < 5; ti++) {
            const size_t T = Ts[ti], H = 2 + (size_t)ti % 3;
            flash_case(&gpu, dt, 2, H, T, 64, 0.0f, MASK_NONE);
            flash_case(&gpu, dt, 2, H, T, 64, 0.1f, MASK_BIG);
            flash_case(&gpu, dt, 2, H, T, 32, 0.1f, MASK_NONE);
            flash_case(&gpu, dt, 2, H, T, 32, 0.0f, MASK_BIG);
        }
        flash_case(&gpu, dt, 2, 2, 17, 64, 0.1f, MASK_INF);
        flash_case(&gpu, dt, 2, 3, 130, 64, 0.0f, MASK_INF);
        flash_case(&gpu, dt, 2, 2, 77, 128, 0.1f, MASK_BIG);
        flash_dropout_bits_case(&gpu, dt, 2, 3, 61, 64, 0.1f);
    }
    flash_dropout_bits_case(&gpu, DT_F32, 2, 2, 32, 32, 0.5f);
    /* BERT-base's shape */
    flash_case(&gpu, DT_BF16, 2, 12, 128, 64, 0.1f, MASK_BIG);
    flash_case(&gpu, DT_F16, 2, 12, 128, 64, 0.1f, MASK_BIG);
    flash_op_case(&gpu, 0);
    flash_op_case(&gpu, 1);
    if (getenv("CTRAIN_FLASH_BENCH")) {
        flash_bench(&gpu, 32, 12, 128, 64); /* BERT-base */
        flash_bench(&gpu, 8, 16, 512, 64);  /* BERT-large, seq 512 */
    }
    ctx_free(&gpu);
    return check_summary();
}
