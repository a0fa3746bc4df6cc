/* gpu_optim_amp.c — the CUDA AdamW, LAMB, grad-scaler and clipping kernels
 * (ops/adam.cu, ops/amp.cu) against the CPU references (ops/adam.c,
 * ops/amp.c), and the whole AMP step captured in a CUDA graph against eager
 * execution.
 *
 * What is exact and what is close:
 *   bit for bit  step count and bias corrections; AdamW p, m, v (one rounding
 *                per operation on both sides, no FMA); LAMB m, v; unscaled
 *                gradients; the scaler state; clipped gradients given the
 *                same norm; skipped steps (nothing written); graph vs eager;
 *                two runs of any norm; p_lowp = RNE(p).
 *   close        the norms (double sums in a different order: rtol 1e-6
 *                after rounding to f32), hence LAMB's r and p (rtol 1e-6).
 * Outputs start poisoned (NaN) where the kernel must write them.
 * Shape letters: n elements; S segments (parameter tensors).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/ctx.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "ops/adam.h"
#include "ops/amp.h"
#include "train/optim/adamw.h"
#include "train/loop/grad_scaler.h"
#include "train/optim/lamb.h"
#include "check.h"
#include "gpu_util.h"

static void upload_to(void *d, const void *h, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}

static void download_raw(void *h, const void *d, size_t bytes)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* Elements of the low-precision copy that are not RNE(p) (written) or not
 * NaN (untouched poison); prints nothing, returns the count and the first. */
static size_t lowp_mismatches(const float *lg, const float *p, size_t n, DType t,
                              size_t written_from, int written, size_t *first)
{
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        int w = written && i >= written_from;
        float want = t == DT_F16 ? f16_to_f32(f32_to_f16(p[i])) : bf16_to_f32(f32_to_bf16(p[i]));
        int ok = w ? lg[i] == want : isnan(lg[i]);
        if (!ok && wrong++ == 0) *first = i;
    }
    return wrong;
}

/* ---- step count and bias corrections ---- */

static void gpu_adam_begin(void)
{
    AdamStepState cpu, got;
    memset(&cpu, 0, sizeof cpu);
    AdamStepState *d_st = (AdamStepState *)gpu_upload_raw(&cpu, sizeof cpu);
    const int one = 1;
    int *d_one = (int *)gpu_upload_raw(&one, sizeof one);
    int ok = 1;
    for (int t = 1; t <= 300; t++) {
        int skip = t % 7 == 0;
        adam_begin_cpu(&cpu, 0.9, 0.999, 1, skip ? &one : NULL);
        adam_begin_cuda(d_st, 0.9, 0.999, 1, skip ? d_one : NULL, 0);
        download_raw(&got, d_st, sizeof got);
        ok &= !memcmp(&got, &cpu, sizeof got);
    }
    check_true("gpu.adam_begin step count and bias corrections bit for bit (skips every 7th)",
               ok && got.step == 300 - 300 / 7, "step %lld bc1 %.17g bc2 %.17g",
               (long long)got.step, got.bc1, got.bc2);
    cpu.step = 99999; /* 0.9999^100000 = 4.5e-5: a correction that still matters */
    upload_to(d_st, &cpu, sizeof cpu);
    adam_begin_cpu(&cpu, 0.9, 0.9999, 1, NULL);
    adam_begin_cuda(d_st, 0.9, 0.9999, 1, NULL, 0);
    download_raw(&got, d_st, sizeof got);
    check_true("gpu.adam_begin at large t bit for bit", !memcmp(&got, &cpu, sizeof got),
               "bc2 %.17g vs %.17g", got.bc2, cpu.bc2);
    CUDA_CHECK(cudaFree(d_st));
    CUDA_CHECK(cudaFree(d_one));
}

/* ---- AdamW ---- */

/* Three steps on n parameters starting `off` floats into the buffers (off 1:
 * the scalar path); skip_val < 0 passes skip = NULL. */
static void gpu_adamw_case(size_t n, size_t off, DType lowp_t, double wd, int skip_val)
{
    char name[192], tag[128];
    snprintf(tag, sizeof tag, "n %zu off %zu lowp %s wd %g skip %s", n, off,
             lowp_t == DT_F32 ? "none" : dtype_name(lowp_t), wd,
             skip_val < 0 ? "NULL" : skip_val ? "1" : "0");
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const size_t nt = n + off;
    float *p = falloc(nt), *m = falloc(nt), *v = falloc(nt), *g = falloc(nt);
    float *p0 = falloc(nt), *m0 = falloc(nt), *v0 = falloc(nt);
    float *pg = falloc(nt), *mg = falloc(nt), *vg = falloc(nt);
    check_fill(p, nt, -1.0f, 1.0f);
    check_fill(m, nt, -0.1f, 0.1f);
    check_fill(v, nt, 0.0f, 0.01f);
    memcpy(p0, p, nt * 4); memcpy(m0, m, nt * 4); memcpy(v0, v, nt * 4);
    AdamStepState st;
    memset(&st, 0, sizeof st);
    st.step = 41; /* resume mid-run */
    float *d_p = (float *)gpu_upload(p, nt, DT_F32), *d_m = (float *)gpu_upload(m, nt, DT_F32);
    float *d_v = (float *)gpu_upload(v, nt, DT_F32), *d_g = (float *)gpu_alloc_poison(nt, DT_F32);
    float *d_lr = (float *)gpu_alloc_poison(1, DT_F32);
    AdamStepState *d_st = (AdamStepState *)gpu_upload_raw(&st, sizeof st);
    int *d_skip = skip_val >= 0 ? (int *)gpu_upload_raw(&skip_val, sizeof skip_val) : NULL;
    void *d_lowp = lowp_t == DT_F32 ? NULL : gpu_alloc_poison(nt, lowp_t);
    void *lowp_at = d_lowp ? (char *)d_lowp + off * 2 : NULL;
    for (int t = 0; t < 3; t++) {
        const float lr = 1e-3f * (float)(3 - t);
        check_fill(g, nt, -1.0f, 1.0f);
        adam_begin_cpu(&st, b1, b2, 1, skip_val > 0 ? &skip_val : NULL);
        adamw_step_cpu(p + off, m + off, v + off, g + off, n, lr, &st, b1, b2, eps, wd,
                       skip_val > 0 ? &skip_val : NULL);
        upload_to(d_g, g, nt * 4);
        upload_to(d_lr, &lr, sizeof lr);
        adam_begin_cuda(d_st, b1, b2, 1, d_skip, 0);
        adamw_step_cuda(d_p + off, d_m + off, d_v + off, lowp_at, lowp_t, d_g + off, n, d_lr, d_st,
                        b1, b2, eps, wd, d_skip, 0);
    }
    gpu_download(pg, d_p, nt, DT_F32);
    gpu_download(mg, d_m, nt, DT_F32);
    gpu_download(vg, d_v, nt, DT_F32);
    AdamStepState stg;
    download_raw(&stg, d_st, sizeof stg);
    if (skip_val > 0) {
        snprintf(name, sizeof name, "gpu.adamw skipped steps leave p, m, v, t bit for bit %s", tag);
        check_true(name, !memcmp(pg, p0, nt * 4) && !memcmp(mg, m0, nt * 4) &&
                             !memcmp(vg, v0, nt * 4) && stg.step == 41,
                   "state changed (step %lld)", (long long)stg.step);
    } else {
        snprintf(name, sizeof name, "gpu.adamw.p %s", tag);
        check_close(name, pg, p, nt, 1e-7, 1e-6);
        snprintf(name, sizeof name, "gpu.adamw.m %s", tag);
        check_close(name, mg, m, nt, 1e-9, 1e-6);
        snprintf(name, sizeof name, "gpu.adamw.v %s", tag);
        check_close(name, vg, v, nt, 1e-12, 1e-6);
        snprintf(name, sizeof name, "gpu.adamw p, m, v, t bit for bit with the CPU %s", tag);
        check_true(name, !memcmp(pg, p, nt * 4) && !memcmp(mg, m, nt * 4) &&
                             !memcmp(vg, v, nt * 4) && !memcmp(&stg, &st, sizeof st),
                   "differs (the kernels and ops/adam.c must round each operation the same way)");
    }
    if (d_lowp) {
        float *lg = falloc(nt);
        size_t first = 0;
        gpu_download(lg, d_lowp, nt, lowp_t);
        size_t wrong = lowp_mismatches(lg, pg, nt, lowp_t, off, skip_val <= 0, &first);
        snprintf(name, sizeof name, "gpu.adamw.p_lowp = RNE(p) %s", tag);
        check_true(name, wrong == 0, "%zu elements wrong; first [%zu]: got %g p %g", wrong,
                   first, wrong ? (double)lg[first] : 0.0, wrong ? (double)pg[first] : 0.0);
        free(lg);
        CUDA_CHECK(cudaFree(d_lowp));
    }
    CUDA_CHECK(cudaFree(d_p)); CUDA_CHECK(cudaFree(d_m)); CUDA_CHECK(cudaFree(d_v));
    CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_lr)); CUDA_CHECK(cudaFree(d_st));
    if (d_skip) CUDA_CHECK(cudaFree(d_skip));
    free(p); free(m); free(v); free(g); free(p0); free(m0); free(v0);
    free(pg); free(mg); free(vg);
}

/* ---- LAMB ---- */

#define GL_MAXSEG 64

/* Assorted tensors: big multi-chunk ones, tiny ones, empty, zero weights. */
static int gpu_lamb_segments(OptSeg *seg, size_t *n, int nvlamb)
{
    int S = 0;
    int64_t off = 0;
    const int64_t big[] = {100000, 16384, 16385, 0, 1, 3, 4096, 50001};
    for (int i = 0; i < 8; i++) {
        memset(&seg[S], 0, sizeof seg[S]);
        seg[S].offset = off;
        seg[S].numel = big[i];
        seg[S].wd = i % 2 ? 0.0f : 0.01f;
        seg[S].adaptive = nvlamb || seg[S].wd != 0.0f;
        off += big[i];
        S++;
    }
    while (S < 40) {
        memset(&seg[S], 0, sizeof seg[S]);
        seg[S].offset = off;
        seg[S].numel = 1 + (int64_t)(check_uniform(0.0f, 1.0f) * 3000.0f);
        seg[S].wd = S % 3 ? 0.01f : 0.0f;
        seg[S].adaptive = nvlamb || seg[S].wd != 0.0f;
        off += seg[S].numel;
        S++;
    }
    *n = (size_t)off;
    return S;
}

typedef struct LambDev {
    float *p, *m, *v, *g, *lr, *ratio;
    double *partial;
    OptSeg *seg;
    OptChunk *chunk;
    AdamStepState *st;
    void *lowp;
} LambDev;

static void lamb_dev_step(LambDev *d, int S, int64_t nchunk, DType lowp_t, int bc,
                          const int *d_skip)
{
    adam_begin_cuda(d->st, 0.9, 0.999, bc, d_skip, 0);
    lamb_step_cuda(d->p, d->m, d->v, d->lowp, lowp_t, d->ratio, d->partial, d->g, d->seg, S,
                   d->chunk, nchunk, d->lr, d->st, 0.9, 0.999, 1e-6, d_skip, 0);
}

static void gpu_lamb_case(DType lowp_t, int bc, int nvlamb)
{
    char name[192], tag[96];
    snprintf(tag, sizeof tag, "lowp %s bias_correction %d nvlamb %d",
             lowp_t == DT_F32 ? "none" : dtype_name(lowp_t), bc, nvlamb);
    OptSeg seg[GL_MAXSEG];
    size_t n;
    int S = gpu_lamb_segments(seg, &n, nvlamb);
    int64_t nchunk = lamb_chunks_build(NULL, seg, S, LAMB_CHUNK);
    OptChunk *chunk = (OptChunk *)malloc((size_t)nchunk * sizeof(OptChunk));
    lamb_chunks_build(chunk, seg, S, LAMB_CHUNK);
    float *p = falloc(n), *m = falloc(n), *v = falloc(n), *g = falloc(n);
    float *pg = falloc(n), *mg = falloc(n), *vg = falloc(n), ratio[GL_MAXSEG], rg[GL_MAXSEG];
    check_fill(p, n, -0.5f, 0.5f);
    memset(p + seg[4].offset, 0, (size_t)seg[4].numel * 4); /* ||p|| = 0 on step 1 */
    memset(m, 0, n * 4);
    memset(v, 0, n * 4);
    AdamStepState st;
    memset(&st, 0, sizeof st);

    LambDev d;
    d.p = (float *)gpu_upload(p, n, DT_F32);
    d.m = (float *)gpu_upload(m, n, DT_F32);
    d.v = (float *)gpu_upload(v, n, DT_F32);
    d.g = (float *)gpu_alloc_poison(n, DT_F32);
    d.lr = (float *)gpu_alloc_poison(1, DT_F32);
    d.ratio = (float *)gpu_alloc_poison((size_t)S, DT_F32);
    d.partial = (double *)gpu_alloc_poison(2 * (size_t)nchunk, DT_I64);
    d.seg = (OptSeg *)gpu_upload_raw(seg, (size_t)S * sizeof(OptSeg));
    d.chunk = (OptChunk *)gpu_upload_raw(chunk, (size_t)nchunk * sizeof(OptChunk));
    d.st = (AdamStepState *)gpu_upload_raw(&st, sizeof st);
    d.lowp = lowp_t == DT_F32 ? NULL : gpu_alloc_poison(n, lowp_t);
    for (int t = 1; t <= 3; t++) {
        const float lr = 1e-2f / (float)t;
        check_fill(g, n, -1.0f, 1.0f);
        adam_begin_cpu(&st, 0.9, 0.999, bc, NULL);
        lamb_step_cpu(p, m, v, ratio, g, seg, S, lr, &st, 0.9, 0.999, 1e-6, NULL);
        upload_to(d.g, g, n * 4);
        upload_to(d.lr, &lr, sizeof lr);
        lamb_dev_step(&d, S, nchunk, lowp_t, bc, NULL);
        gpu_download(rg, d.ratio, (size_t)S, DT_F32);
        snprintf(name, sizeof name, "gpu.lamb.ratio step %d %s", t, tag);
        check_close(name, rg, ratio, (size_t)S, 0.0, 1e-6);
    }
    gpu_download(pg, d.p, n, DT_F32);
    gpu_download(mg, d.m, n, DT_F32);
    gpu_download(vg, d.v, n, DT_F32);
    snprintf(name, sizeof name, "gpu.lamb.p %s", tag);
    check_close(name, pg, p, n, 1e-7, 1e-6);
    snprintf(name, sizeof name, "gpu.lamb m, v bit for bit with the CPU %s", tag);
    check_true(name, !memcmp(mg, m, n * 4) && !memcmp(vg, v, n * 4), "differ");
    if (d.lowp) {
        float *lg = falloc(n);
        size_t first = 0;
        gpu_download(lg, d.lowp, n, lowp_t);
        size_t wrong = lowp_mismatches(lg, pg, n, lowp_t, 0, 1, &first);
        snprintf(name, sizeof name, "gpu.lamb.p_lowp = RNE(p) %s", tag);
        check_true(name, wrong == 0, "%zu elements wrong; first [%zu]", wrong, first);
        free(lg);
    }

    /* determinism: the same step from the same state, twice */
    float *d_p2 = NULL, *d_m2 = NULL, *d_v2 = NULL;
    AdamStepState st_now;
    download_raw(&st_now, d.st, sizeof st_now);
    CUDA_CHECK(cudaMalloc((void **)&d_p2, n * 4));
    CUDA_CHECK(cudaMalloc((void **)&d_m2, n * 4));
    CUDA_CHECK(cudaMalloc((void **)&d_v2, n * 4));
    CUDA_CHECK(cudaMemcpy(d_p2, d.p, n * 4, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(d_m2, d.m, n * 4, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaMemcpy(d_v2, d.v, n * 4, cudaMemcpyDeviceToDevice));
    check_fill(g, n, -1.0f, 1.0f);
    upload_to(d.g, g, n * 4);
    float *pa = falloc(n), *pb = falloc(n), ra[GL_MAXSEG], rb[GL_MAXSEG];
    lamb_dev_step(&d, S, nchunk, lowp_t, bc, NULL);
    gpu_download(pa, d.p, n, DT_F32);
    gpu_download(ra, d.ratio, (size_t)S, DT_F32);
    LambDev d2 = d;
    d2.p = d_p2; d2.m = d_m2; d2.v = d_v2;
    upload_to(d.st, &st_now, sizeof st_now);
    lamb_dev_step(&d2, S, nchunk, lowp_t, bc, NULL);
    gpu_download(pb, d2.p, n, DT_F32);
    gpu_download(rb, d2.ratio, (size_t)S, DT_F32);
    snprintf(name, sizeof name, "gpu.lamb two runs bit for bit (ratios and p) %s", tag);
    check_true(name, !memcmp(pa, pb, n * 4) && !memcmp(ra, rb, (size_t)S * 4), "differ");

    /* skip: nothing written (p, m, v, ratios, lowp, step) */
    const int one = 1;
    int *d_one = (int *)gpu_upload_raw(&one, sizeof one);
    float *mb = falloc(n), *vb = falloc(n), *pc = falloc(n), *mc = falloc(n), *vc = falloc(n);
    float *lb = falloc(n), *lc = falloc(n), rc[GL_MAXSEG];
    AdamStepState sb, sc;
    gpu_download(mb, d2.m, n, DT_F32);
    gpu_download(vb, d2.v, n, DT_F32);
    download_raw(&sb, d2.st, sizeof sb);
    if (d.lowp) gpu_download(lb, d.lowp, n, lowp_t);
    g[17] = NAN;
    upload_to(d.g, g, n * 4);
    lamb_dev_step(&d2, S, nchunk, lowp_t, bc, d_one);
    gpu_download(pc, d2.p, n, DT_F32);
    gpu_download(mc, d2.m, n, DT_F32);
    gpu_download(vc, d2.v, n, DT_F32);
    gpu_download(rc, d2.ratio, (size_t)S, DT_F32);
    download_raw(&sc, d2.st, sizeof sc);
    if (d.lowp) gpu_download(lc, d.lowp, n, lowp_t);
    snprintf(name, sizeof name, "gpu.lamb skipped step writes nothing %s", tag);
    check_true(name,
               !memcmp(pc, pb, n * 4) && !memcmp(mc, mb, n * 4) && !memcmp(vc, vb, n * 4) &&
                   !memcmp(rc, rb, (size_t)S * 4) && !memcmp(&sc, &sb, sizeof sc) &&
                   (!d.lowp || !memcmp(lc, lb, n * 4)),
               "state changed");
    CUDA_CHECK(cudaFree(d_one));
    free(mb); free(vb); free(pc); free(mc); free(vc); free(lb); free(lc);

    CUDA_CHECK(cudaFree(d.p)); CUDA_CHECK(cudaFree(d.m)); CUDA_CHECK(cudaFree(d.v));
    CUDA_CHECK(cudaFree(d.g)); CUDA_CHECK(cudaFree(d.lr)); CUDA_CHECK(cudaFree(d.ratio));
    CUDA_CHECK(cudaFree(d.partial)); CUDA_CHECK(cudaFree(d.seg)); CUDA_CHECK(cudaFree(d.chunk));
    CUDA_CHECK(cudaFree(d.st));
    if (d.lowp) CUDA_CHECK(cudaFree(d.lowp));
    CUDA_CHECK(cudaFree(d_p2)); CUDA_CHECK(cudaFree(d_m2)); CUDA_CHECK(cudaFree(d_v2));
    free(chunk); free(p); free(m); free(v); free(g); free(pg); free(mg); free(vg);
    free(pa); free(pb);
}

/* ---- global norm and clipping ---- */

static void gpu_clip_case(size_t n, size_t off)
{
    char name[160], tag[64];
    snprintf(tag, sizeof tag, "n %zu off %zu", n, off);
    const size_t nt = n + off;
    float *g0 = falloc(nt), *g = falloc(nt), *ref = falloc(nt);
    check_fill(g0, nt, -1.0f, 1.0f);
    float *d_g = (float *)gpu_upload(g0, nt, DT_F32);
    float *d_norm = (float *)gpu_alloc_poison(1, DT_F32);
    double *d_part = (double *)gpu_alloc_poison(AMP_NORM_PARTIALS, DT_I64);
    const int zero = 0, one = 1;
    int *d_fi = (int *)gpu_upload_raw(&zero, sizeof zero);
    float norm_ref, norm, norm2;

    /* norm only */
    memcpy(g, g0, nt * 4);
    amp_clip_grad_norm_cpu(g + off, &norm_ref, n, 0.0f, NULL);
    amp_clip_grad_norm_cuda(d_g + off, d_norm, d_part, n, 0.0f, d_fi, 0);
    gpu_download(&norm, d_norm, 1, DT_F32);
    snprintf(name, sizeof name, "gpu.clip.norm vs CPU %s", tag);
    check_close(name, &norm, &norm_ref, 1, 0.0, 1e-6);
    amp_clip_grad_norm_cuda(d_g + off, d_norm, d_part, n, 0.0f, NULL, 0);
    gpu_download(&norm2, d_norm, 1, DT_F32);
    snprintf(name, sizeof name, "gpu.clip.norm two runs bit for bit %s", tag);
    check_true(name, !memcmp(&norm, &norm2, 4), "%.9g vs %.9g", norm, norm2);

    /* above max_norm: scaled by max / (norm + 1e-6) */
    const float max_norm = n > 0 ? 0.25f * norm : 1.0f;
    amp_clip_grad_norm_cuda(d_g + off, d_norm, d_part, n, max_norm, d_fi, 0);
    gpu_download(g, d_g, nt, DT_F32);
    const float coef = max_norm / (norm + 1e-6f);
    memcpy(ref, g0, nt * 4);
    for (size_t i = off; i < nt; i++) ref[i] = g0[i] * coef;
    snprintf(name, sizeof name, "gpu.clip.g scaled, bit for bit given the norm %s", tag);
    check_true(name, !memcmp(g, ref, nt * 4), "differs");
    memcpy(ref, g0, nt * 4);
    amp_clip_grad_norm_cpu(ref + off, &norm_ref, n, max_norm, NULL);
    snprintf(name, sizeof name, "gpu.clip.g vs the CPU clip %s", tag);
    check_close(name, g, ref, nt, 1e-7, 2e-6);

    /* below max_norm: untouched */
    upload_to(d_g, g0, nt * 4);
    amp_clip_grad_norm_cuda(d_g + off, d_norm, d_part, n, 2.0f * norm + 1.0f, d_fi, 0);
    gpu_download(g, d_g, nt, DT_F32);
    gpu_download(&norm2, d_norm, 1, DT_F32);
    snprintf(name, sizeof name, "gpu.clip.below max_norm: g bit for bit %s", tag);
    check_true(name, !memcmp(g, g0, nt * 4) && !memcmp(&norm, &norm2, 4), "changed");

    /* found_inf: no work, norm +inf */
    upload_to(d_fi, &one, sizeof one);
    amp_clip_grad_norm_cuda(d_g + off, d_norm, d_part, n, 1e-3f, d_fi, 0);
    gpu_download(g, d_g, nt, DT_F32);
    gpu_download(&norm2, d_norm, 1, DT_F32);
    snprintf(name, sizeof name, "gpu.clip.found_inf: g bit for bit, norm inf %s", tag);
    check_true(name, !memcmp(g, g0, nt * 4) && isinf(norm2) && norm2 > 0, "norm %g", norm2);

    CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_norm)); CUDA_CHECK(cudaFree(d_part));
    CUDA_CHECK(cudaFree(d_fi));
    free(g0); free(g); free(ref);
}

/* The norm's order depends on n only: the same values at another address
 * give the same bits. */
static void gpu_norm_alignment(void)
{
    const size_t n = 3000017;
    float *h = falloc(n);
    check_fill(h, n, -2.0f, 2.0f);
    float *d_a = (float *)gpu_upload(h, n, DT_F32);
    float *d_b = (float *)gpu_alloc_poison(n + 3, DT_F32);
    upload_to(d_b + 3, h, n * 4);
    float *d_norm = (float *)gpu_alloc_poison(2, DT_F32);
    double *d_part = (double *)gpu_alloc_poison(AMP_NORM_PARTIALS, DT_I64);
    amp_clip_grad_norm_cuda(d_a, d_norm, d_part, n, 0.0f, NULL, 0);
    amp_clip_grad_norm_cuda(d_b + 3, d_norm + 1, d_part, n, 0.0f, NULL, 0);
    float nn[2];
    gpu_download(nn, d_norm, 2, DT_F32);
    check_true("gpu.clip.norm independent of alignment", !memcmp(&nn[0], &nn[1], 4),
               "%.9g vs %.9g", nn[0], nn[1]);
    CUDA_CHECK(cudaFree(d_a)); CUDA_CHECK(cudaFree(d_b)); CUDA_CHECK(cudaFree(d_norm));
    CUDA_CHECK(cudaFree(d_part));
    free(h);
}

/* ---- unscale + check ---- */

static void gpu_unscale_case(size_t n, size_t off)
{
    char name[160], tag[64];
    snprintf(tag, sizeof tag, "n %zu off %zu", n, off);
    const size_t nt = n + off;
    float *gt = falloc(nt), *gs = falloc(nt), *g = falloc(nt), *ref = falloc(nt);
    check_fill(gt, nt, -1.0f, 1.0f);
    const float scale = 65536.0f, half = 0.5f;
    for (size_t i = 0; i < nt; i++) gs[i] = gt[i] * scale;
    float *d_g = (float *)gpu_upload(gs, nt, DT_F32);
    float *d_scale = (float *)gpu_upload_raw(&scale, sizeof scale);
    float *d_half = (float *)gpu_upload_raw(&half, sizeof half);
    const int zero = 0, one = 1;
    int *d_fi = (int *)gpu_upload_raw(&zero, sizeof zero);
    int fi = -1;

    amp_unscale_check_cuda(d_g + off, d_fi, n, d_scale, 0);
    gpu_download(g, d_g, nt, DT_F32);
    download_raw(&fi, d_fi, sizeof fi);
    memcpy(ref, gs, off * 4);
    memcpy(ref + off, gt + off, n * 4);
    snprintf(name, sizeof name, "gpu.unscale clean: g / scale bit for bit, found_inf 0 %s", tag);
    check_true(name, !memcmp(g, ref, nt * 4) && fi == 0, "found_inf %d", fi);

    /* a bad value in the vector body, one in the tail, a NaN */
    const size_t where[3] = {off + n / 3, nt - 1, off};
    const float what[3] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 3; k++) {
        memcpy(g, gs, nt * 4);
        g[where[k]] = what[k];
        upload_to(d_g, g, nt * 4);
        upload_to(d_fi, &zero, sizeof zero);
        amp_unscale_check_cuda(d_g + off, d_fi, n, d_scale, 0);
        memcpy(ref, g, nt * 4);
        int fr = 0;
        amp_unscale_check_cpu(ref + off, &fr, n, &scale);
        gpu_download(g, d_g, nt, DT_F32);
        download_raw(&fi, d_fi, sizeof fi);
        snprintf(name, sizeof name, "gpu.unscale %g at [%zu] sets found_inf, g as the CPU %s",
                 (double)what[k], where[k], tag);
        int same = 1;
        for (size_t i = 0; i < nt; i++) same &= (isnan(g[i]) && isnan(ref[i])) || g[i] == ref[i];
        check_true(name, fi == 1 && fr == 1 && same, "found_inf %d (CPU %d), same %d", fi, fr, same);
    }
    /* overflow made by the unscale (scale 0.5) */
    memcpy(g, gt, nt * 4);
    g[off + n / 2] = 3e38f;
    upload_to(d_g, g, nt * 4);
    upload_to(d_fi, &zero, sizeof zero);
    amp_unscale_check_cuda(d_g + off, d_fi, n, d_half, 0);
    download_raw(&fi, d_fi, sizeof fi);
    snprintf(name, sizeof name, "gpu.unscale overflow by 1/scale sets found_inf %s", tag);
    check_true(name, fi == 1, "found_inf %d", fi);
    /* never cleared by a clean pass */
    upload_to(d_g, gs, nt * 4);
    upload_to(d_fi, &one, sizeof one);
    amp_unscale_check_cuda(d_g + off, d_fi, n, d_scale, 0);
    download_raw(&fi, d_fi, sizeof fi);
    snprintf(name, sizeof name, "gpu.unscale never clears found_inf %s", tag);
    check_true(name, fi == 1, "found_inf %d", fi);

    CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_scale)); CUDA_CHECK(cudaFree(d_half));
    CUDA_CHECK(cudaFree(d_fi));
    free(gt); free(gs); free(g); free(ref);
}

/* ---- scale update ---- */

typedef struct UpdState {
    float scale;
    int tracker, found_inf, pad_;
    int64_t skipped;
} UpdState;

static void gpu_scaler_update_script(int interval, int steps, const int *overflow, int nover,
                                     const char *what)
{
    UpdState c, g;
    memset(&c, 0, sizeof c);
    c.scale = 65536.0f;
    g = c;
    UpdState *d = (UpdState *)gpu_upload_raw(&c, sizeof c);
    int ok = 1, first = -1;
    for (int t = 1; t <= steps; t++) {
        int fi = 0;
        for (int k = 0; k < nover; k++) fi |= overflow[k] == t;
        c.found_inf = fi;
        upload_to(&d->found_inf, &fi, sizeof fi);
        amp_scaler_update_cpu(&c.scale, &c.tracker, &c.skipped, &c.found_inf, 2.0, 0.5, interval);
        amp_scaler_update_cuda(&d->scale, &d->tracker, &d->skipped, &d->found_inf, 2.0, 0.5,
                               interval, 0);
        if (steps <= 100 || fi || t % 1000 == 0 || t == steps) {
            download_raw(&g, d, sizeof g);
            if (memcmp(&g, &c, sizeof g) && first < 0) first = t;
            ok &= !memcmp(&g, &c, sizeof g);
        }
    }
    check_true(what, ok, "first differing step %d: scale %g vs %g", first, g.scale, c.scale);
    CUDA_CHECK(cudaFree(d));
}

/* ---- the AMP step in a CUDA graph vs eager ---- */

typedef enum { OPT_ADAMW = 0, OPT_LAMB } OptKind;

typedef struct Run {
    ParamSet ps;
    GradScaler sc;
    AdamW adamw;
    Lamb lamb;
    void *lowp;          /* bf16 working copy */
} Run;

static void run_init(Run *r, Ctx *c, OptKind k)
{
    memset(r, 0, sizeof *r);
    params_init(&r->ps);
    params_add(&r->ps, "w1", 2, (int64_t[]){512, 300}, INIT_UNIFORM, 0.05f, 1);
    params_add(&r->ps, "b1", 1, (int64_t[]){512}, INIT_UNIFORM, 0.05f, 0);
    params_add(&r->ps, "w2", 2, (int64_t[]){10, 512}, INIT_UNIFORM, 0.05f, 1);
    params_add(&r->ps, "ln", 1, (int64_t[]){10}, INIT_ONE, 0.0f, 0);
    params_alloc(&r->ps, c, 77);
    scaler_init_ex(&r->sc, c, 1, 65536.0f, 2.0, 0.5, 3);
    if (k == OPT_ADAMW) adamw_init(&r->adamw, &r->ps, 0.9, 0.999, 1e-8, 0.01);
    else lamb_init(&r->lamb, &r->ps, 0.9, 0.999, 1e-6, 0.01, 1, 0);
    r->lowp = mem_alloc(c, r->ps.total * 2);
    mem_zero(c, r->lowp, r->ps.total * 2);
}

static void run_free(Run *r, Ctx *c, OptKind k)
{
    mem_free(c, r->lowp, r->ps.total * 2);
    if (k == OPT_ADAMW) adamw_free(&r->adamw, &r->ps);
    else lamb_free(&r->lamb, &r->ps);
    scaler_free(&r->sc);
    params_free(&r->ps);
}

/* unscale + check -> clip -> optimizer (lr from the device) -> scaler update */
static void run_step(Run *r, OptKind k, const float *d_lr)
{
    const size_t n = r->ps.total;
    scaler_unscale(&r->sc, r->ps.grad, n);
    scaler_clip(&r->sc, r->ps.grad, n, 1.0f);
    if (k == OPT_ADAMW)
        adamw_step_lr(&r->adamw, &r->ps, d_lr, scaler_found_inf(&r->sc), r->lowp, DT_BF16);
    else
        lamb_step_lr(&r->lamb, &r->ps, d_lr, scaler_found_inf(&r->sc), r->lowp, DT_BF16);
    scaler_update(&r->sc);
}

static void gpu_graph_case(OptKind k)
{
    const char *kn = k == OPT_ADAMW ? "adamw" : "lamb";
    char name[160];
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    Run eager, graph;
    run_init(&eager, &c, k);
    run_init(&graph, &c, k);
    const size_t n = eager.ps.total;
    float *d_lr = (float *)mem_alloc(&c, sizeof(float));
    float *h = falloc(n), *h2 = falloc(n), *h0 = falloc(n);
    params_to_host(&eager.ps, h);
    params_to_host(&graph.ps, h2);
    memcpy(h0, h, n * 4);
    snprintf(name, sizeof name, "gpu.graph.%s both runs start equal", kn);
    check_true(name, !memcmp(h, h2, n * 4), "different initial weights");

    /* capture once (lr is read from d_lr at replay) */
    cudaGraph_t gr;
    cudaGraphExec_t ex;
    CUDA_CHECK(cudaStreamSynchronize(c.stream));
    CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
    run_step(&graph, k, d_lr);
    CUDA_CHECK(cudaStreamEndCapture(c.stream, &gr));
    CUDA_CHECK(cudaGraphInstantiate(&ex, gr, 0));

    const float want[12] = {65536, 65536, 32768, 32768, 32768, 65536,
                            32768, 32768, 32768, 65536, 65536, 65536};
    int traj_ok = 1, same_ok = 1, first = -1;
    float *gt = falloc(n), *gs = falloc(n);
    for (int t = 1; t <= 12; t++) {
        ScalerState se, sg;
        scaler_read(&eager.sc, &se, NULL);
        check_fill(gt, n, -0.05f, 0.05f);
        for (size_t i = 0; i < n; i++) gs[i] = gt[i] * se.scale; /* the scaled backward */
        if (t == 3) gs[n / 2] = INFINITY;
        if (t == 7) gs[n - 1] = NAN;
        const float lr = 1e-3f * (1.0f + (float)t); /* a schedule: must be read at replay */
        mem_to_device(&c, d_lr, &lr, sizeof lr);
        mem_to_device(&c, eager.ps.grad, gs, n * 4);
        mem_to_device(&c, graph.ps.grad, gs, n * 4);
        run_step(&eager, k, d_lr);
        CUDA_CHECK(cudaGraphLaunch(ex, c.stream));
        float ne, ng;
        scaler_read(&eager.sc, &se, &ne);
        scaler_read(&graph.sc, &sg, &ng);
        if ((se.scale != want[t - 1] || sg.scale != want[t - 1]) && first < 0) first = t;
        traj_ok &= se.scale == want[t - 1] && sg.scale == want[t - 1];
        same_ok &= !memcmp(&se, &sg, sizeof se) && !memcmp(&ne, &ng, 4);
    }
    snprintf(name, sizeof name, "gpu.graph.%s scale trajectory (overflow at 3, 7) eager and replay", kn);
    check_true(name, traj_ok, "first differing step %d", first);
    snprintf(name, sizeof name, "gpu.graph.%s scaler state and norms: replay = eager", kn);
    check_true(name, same_ok, "differ");

    params_to_host(&eager.ps, h);
    params_to_host(&graph.ps, h2);
    int64_t te = k == OPT_ADAMW ? adamw_steps(&eager.adamw, &eager.ps) : lamb_steps(&eager.lamb, &eager.ps);
    int64_t tg = k == OPT_ADAMW ? adamw_steps(&graph.adamw, &graph.ps) : lamb_steps(&graph.lamb, &graph.ps);
    const float *me = k == OPT_ADAMW ? eager.adamw.m : eager.lamb.m;
    const float *mg = k == OPT_ADAMW ? graph.adamw.m : graph.lamb.m;
    float *hm = falloc(n), *hm2 = falloc(n);
    mem_to_host(&c, hm, me, n * 4);
    mem_to_host(&c, hm2, mg, n * 4);
    uint16_t *le = (uint16_t *)malloc(n * 2), *lg = (uint16_t *)malloc(n * 2);
    mem_to_host(&c, le, eager.lowp, n * 2);
    mem_to_host(&c, lg, graph.lowp, n * 2);
    snprintf(name, sizeof name, "gpu.graph.%s p, m, bf16 copy: replay = eager bit for bit", kn);
    check_true(name, !memcmp(h, h2, n * 4) && !memcmp(hm, hm2, n * 4) && !memcmp(le, lg, n * 2),
               "differ");
    snprintf(name, sizeof name, "gpu.graph.%s step count 10 (two skipped)", kn);
    check_true(name, te == 10 && tg == 10, "eager %lld replay %lld", (long long)te, (long long)tg);
    size_t moved = 0;
    for (size_t i = 0; i < n; i++) moved += h[i] != h0[i];
    snprintf(name, sizeof name, "gpu.graph.%s the weights moved", kn);
    check_true(name, moved > n / 2, "only %zu of %zu changed", moved, n);

    CUDA_CHECK(cudaGraphExecDestroy(ex));
    CUDA_CHECK(cudaGraphDestroy(gr));
    mem_free(&c, d_lr, sizeof(float));
    run_free(&eager, &c, k);
    run_free(&graph, &c, k);
    ctx_free(&c);
    free(h); free(h2); free(h0); free(gt); free(gs); free(hm); free(hm2); free(le); free(lg);
}

int main(void)
{
    gpu_require();
    check_seed(41);
    gpu_adam_begin();

    const DType lowps[3] = {DT_F32 /* none */, DT_F16, DT_BF16};
    for (int l = 0; l < 3; l++)
        for (size_t off = 0; off <= 1; off++) gpu_adamw_case(1000003, off, lowps[l], 0.01, -1);
    gpu_adamw_case(4099, 0, DT_F32, 0.0, 0);
    gpu_adamw_case(4099, 0, DT_BF16, 0.01, 1);
    gpu_adamw_case(4099, 1, DT_F16, 0.0, 1);
    gpu_adamw_case(3, 0, DT_F16, 0.01, -1); /* tail only */

    for (int l = 0; l < 3; l++)
        for (int bc = 0; bc <= 1; bc++) gpu_lamb_case(lowps[l], bc, l == 2);

    const size_t clip_n[] = {1, 1000, 16385, 1000003, 10000019};
    for (size_t i = 0; i < sizeof clip_n / sizeof clip_n[0]; i++)
        for (size_t off = 0; off <= 1; off++) gpu_clip_case(clip_n[i], off);
    gpu_norm_alignment();
    {
        float *d_norm = (float *)gpu_alloc_poison(1, DT_F32), norm = -1.0f;
        amp_clip_grad_norm_cuda(NULL, d_norm, NULL, 0, 1.0f, NULL, 0);
        gpu_download(&norm, d_norm, 1, DT_F32);
        check_true("gpu.clip n = 0: norm 0", norm == 0.0f, "norm %g", norm);
        CUDA_CHECK(cudaFree(d_norm));
    }

    gpu_unscale_case(1000003, 0);
    gpu_unscale_case(1000003, 1);
    gpu_unscale_case(5, 0);

    const int over_a[2] = {3, 7};
    gpu_scaler_update_script(3, 12, over_a, 2,
                             "gpu.scaler update = CPU, interval 3, overflow at 3 and 7");
    const int over_b[1] = {2500};
    gpu_scaler_update_script(2000, 6000, over_b, 1,
                             "gpu.scaler update = CPU, interval 2000, overflow at 2500");

    gpu_graph_case(OPT_ADAMW);
    gpu_graph_case(OPT_LAMB);
    return check_summary();
}
