/* test_optim_amp.c — the CPU references of ops/adam.c and ops/amp.c and the
 * host sides in train/ (adamw, lamb, grad_scaler) against double-precision
 * re-implementations of what they claim to be:
 *   AdamW      torch.optim.AdamW (decoupled decay, bias correction), several steps
 *   LAMB       apex FusedLAMB (per-tensor trust ratio, zero-norm cases, multi-chunk
 *              tensors, bias correction on and off, nvlamb on and off)
 *   clipping   torch.nn.utils.clip_grad_norm_ (applied only above max_norm)
 *   scaler     torch.amp.GradScaler's scale trajectory on scripted overflows
 *              (growth_interval 3 and the default 2000), unscale + inf/nan check
 *   pipeline   unscale -> clip -> AdamW / LAMB -> update on a CPU context: a
 *              skipped step leaves parameters and optimizer state bit for bit
 *              and does not advance the step count; the clean steps match the
 *              double reference.
 * Shape letters: n parameters; S segments (parameter tensors).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/ctx.h"
#include "engine/params.h"
#include "ops/adam.h"
#include "ops/amp.h"
#include "train/optim/adamw.h"
#include "train/loop/grad_scaler.h"
#include "train/optim/lamb.h"
#include "check.h"

static float *falloc(size_t n)
{
    float *p = (float *)malloc((n ? n : 1) * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static double *dalloc(size_t n)
{
    double *p = (double *)calloc(n ? n : 1, sizeof(double));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static void to_f32(float *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

/* ---- double references ---- */

/* torch.optim.AdamW, one step on one range, in double (t counted by the caller). */
static void adamw_ref_d(double *p, double *m, double *v, const float *g, size_t n, double lr,
                        double b1, double b2, double eps, double wd, long t)
{
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    for (size_t i = 0; i < n; i++) {
        p[i] *= 1.0 - lr * wd;
        m[i] = b1 * m[i] + (1.0 - b1) * g[i];
        v[i] = b2 * v[i] + (1.0 - b2) * (double)g[i] * g[i];
        p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

/* apex FusedLAMB, one step over S segments, in double; ratio[s] out. */
static void lamb_ref_d(double *p, double *m, double *v, double *ratio, const float *g,
                       const OptSeg *seg, int S, double lr, double b1, double b2, double eps,
                       int bias_correction, long t)
{
    double bc1 = bias_correction ? 1.0 - pow(b1, (double)t) : 1.0;
    double bc2 = bias_correction ? 1.0 - pow(b2, (double)t) : 1.0;
    for (int s = 0; s < S; s++) {
        size_t o = (size_t)seg[s].offset, n = (size_t)seg[s].numel;
        double wd = seg[s].wd, sp = 0.0, su = 0.0;
        double *u = dalloc(n);
        for (size_t i = 0; i < n; i++) {
            size_t j = o + i;
            m[j] = b1 * m[j] + (1.0 - b1) * g[j];
            v[j] = b2 * v[j] + (1.0 - b2) * (double)g[j] * g[j];
            u[i] = (m[j] / bc1) / (sqrt(v[j] / bc2) + eps) + wd * p[j];
            sp += p[j] * p[j];
            su += u[i] * u[i];
        }
        double r = (seg[s].adaptive && sp > 0.0 && su > 0.0) ? sqrt(sp) / sqrt(su) : 1.0;
        ratio[s] = r;
        for (size_t i = 0; i < n; i++) p[o + i] -= lr * r * u[i];
        free(u);
    }
}

/* ---- AdamW ---- */

static void test_adam_begin(void)
{
    AdamStepState st;
    memset(&st, 0, sizeof st);
    const double b1 = 0.9, b2 = 0.999;
    double worst = 0.0;
    for (long t = 1; t <= 3000; t++) {
        adam_begin_cpu(&st, b1, b2, 1, NULL);
        worst = fmax(worst, fabs(st.bc1 - (1.0 - pow(b1, (double)t))) / (1.0 - pow(b1, (double)t)));
        worst = fmax(worst, fabs(st.bc2 - (1.0 - pow(b2, (double)t))) / (1.0 - pow(b2, (double)t)));
    }
    check_true("adam.begin counts steps and bias corrections match 1 - beta^t",
               st.step == 3000 && worst < 1e-11, "step %lld, worst relative error %.3g",
               (long long)st.step, worst);
    int one = 1, zero = 0;
    AdamStepState before = st;
    adam_begin_cpu(&st, b1, b2, 1, &one);
    check_true("adam.begin with skip set changes nothing",
               memcmp(&before, &st, sizeof st) == 0, "state changed");
    adam_begin_cpu(&st, b1, b2, 1, &zero);
    check_true("adam.begin with skip 0 counts", st.step == 3001, "step %lld", (long long)st.step);
    st.step = 999999;
    adam_begin_cpu(&st, b1, b2, 1, NULL);
    check_true("adam.begin at t = 10^6: beta^t underflows, bc = 1",
               st.bc1 == 1.0 && st.bc2 == 1.0, "bc1 %.17g bc2 %.17g",
               st.bc1, st.bc2);
    memset(&st, 0, sizeof st);
    adam_begin_cpu(&st, b1, b2, 0, NULL);
    check_true("adam.begin without bias correction: bc = 1",
               st.step == 1 && st.bc1 == 1.0 && st.bc2 == 1.0, "bc1 %g bc2 %g", st.bc1, st.bc2);
}

/* Two ranges (decay, no decay), several steps with fresh gradients and a
 * changing lr, against torch.optim.AdamW in double. */
static void test_adamw_vs_torch(void)
{
    const size_t n1 = 1537, n2 = 211, n = n1 + n2;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    float *p = falloc(n), *m = falloc(n), *v = falloc(n), *g = falloc(n), *tmp = falloc(n);
    double *pd = dalloc(n), *md = dalloc(n), *vd = dalloc(n);
    check_fill(p, n, -1.0f, 1.0f);
    memset(m, 0, n * sizeof(float));
    memset(v, 0, n * sizeof(float));
    for (size_t i = 0; i < n; i++) pd[i] = p[i];
    AdamStepState st;
    memset(&st, 0, sizeof st);
    for (long t = 1; t <= 8; t++) {
        float lr = 1e-2f * (float)(9 - t) / 8.0f; /* a decaying schedule */
        /* gradients of varying size, some much smaller than eps-relevant scales */
        float gs = t % 3 == 0 ? 1e-3f : 1.0f;
        check_fill(g, n, -gs, gs);
        adam_begin_cpu(&st, b1, b2, 1, NULL);
        adamw_step_cpu(p, m, v, g, n1, lr, &st, b1, b2, eps, wd, NULL);
        adamw_step_cpu(p + n1, m + n1, v + n1, g + n1, n2, lr, &st, b1, b2, eps, 0.0, NULL);
        adamw_ref_d(pd, md, vd, g, n1, (double)lr, b1, b2, eps, wd, t);
        adamw_ref_d(pd + n1, md + n1, vd + n1, g + n1, n2, (double)lr, b1, b2, eps, 0.0, t);
    }
    to_f32(tmp, pd, n);
    check_close("adamw.p vs torch.optim.AdamW (8 steps, wd 0.1 and 0)", p, tmp, n, 1e-6, 1e-5);
    to_f32(tmp, md, n);
    check_close("adamw.m vs torch", m, tmp, n, 1e-7, 1e-5); /* cancellation: |m| << |g| */
    to_f32(tmp, vd, n);
    check_close("adamw.v vs torch", v, tmp, n, 1e-12, 1e-5);
    check_true("adamw.step count", st.step == 8, "step %lld", (long long)st.step);

    /* skip: nothing written */
    float *p0 = falloc(n), *m0 = falloc(n), *v0 = falloc(n);
    memcpy(p0, p, n * sizeof(float));
    memcpy(m0, m, n * sizeof(float));
    memcpy(v0, v, n * sizeof(float));
    int one = 1;
    g[3] = INFINITY;
    adam_begin_cpu(&st, b1, b2, 1, &one);
    adamw_step_cpu(p, m, v, g, n, 1e-2f, &st, b1, b2, eps, wd, &one);
    check_true("adamw skipped step leaves p, m, v and the step count bit for bit",
               !memcmp(p0, p, n * sizeof(float)) && !memcmp(m0, m, n * sizeof(float)) &&
                   !memcmp(v0, v, n * sizeof(float)) && st.step == 8,
               "state changed");
    free(p0); free(m0); free(v0);
    free(p); free(m); free(v); free(g); free(tmp); free(pd); free(md); free(vd);
}

/* ---- LAMB ---- */

/* Segments of assorted sizes: multi-chunk, one element, empty, zero weights,
 * zero update, with and without decay. Returns S; fills total n. */
static int lamb_segments(OptSeg *seg, size_t *n, int nvlamb)
{
    const int64_t sizes[] = {1000, 1, 0, 3000, 17, 40000, 500, 200, 33};
    const int wdk[] = {1, 0, 1, 1, 0, 1, 1, 0, 0};
    int S = (int)(sizeof sizes / sizeof sizes[0]);
    int64_t off = 0;
    for (int s = 0; s < S; s++) {
        memset(&seg[s], 0, sizeof seg[s]);
        seg[s].offset = off;
        seg[s].numel = sizes[s];
        seg[s].wd = wdk[s] ? 0.01f : 0.0f;
        seg[s].adaptive = nvlamb || seg[s].wd != 0.0f;
        off += sizes[s];
    }
    *n = (size_t)off;
    return S;
}
#define LAMB_ZERO_P 6  /* weights start at 0: ||p|| = 0 on step 1 */
#define LAMB_ZERO_U 7  /* g = 0, no decay: u = 0 always */

static void test_lamb_vs_apex(int bias_correction, int nvlamb)
{
    char name[160], tag[64];
    snprintf(tag, sizeof tag, "bias_correction %d nvlamb %d", bias_correction, nvlamb);
    OptSeg seg[16];
    size_t n;
    int S = lamb_segments(seg, &n, nvlamb);
    int64_t nchunk = lamb_chunks_build(NULL, seg, S, LAMB_CHUNK);
    OptChunk *chunk = (OptChunk *)malloc((size_t)nchunk * sizeof(OptChunk));
    lamb_chunks_build(chunk, seg, S, LAMB_CHUNK);
    int64_t covered = 0, ok_tab = nchunk == 1 + 1 + 1 + 1 + 3 + 1 + 1 + 1;
    for (int64_t c = 0; c < nchunk; c++) {
        const OptSeg *sg = &seg[chunk[c].seg];
        ok_tab &= chunk[c].start >= sg->offset && chunk[c].len >= 1 &&
                  chunk[c].start + chunk[c].len <= sg->offset + sg->numel &&
                  c >= sg->chunk0 && c < sg->chunk0 + sg->nchunk;
        covered += chunk[c].len;
    }
    snprintf(name, sizeof name, "lamb.chunks cover every element once %s", tag);
    check_true(name, ok_tab && covered == (int64_t)n, "%lld chunks cover %lld of %zu",
               (long long)nchunk, (long long)covered, n);
    free(chunk);

    const double b1 = 0.9, b2 = 0.999, eps = 1e-6;
    float *p = falloc(n), *m = falloc(n), *v = falloc(n), *g = falloc(n), *tmp = falloc(n);
    double *pd = dalloc(n), *md = dalloc(n), *vd = dalloc(n), *rd = dalloc(S);
    float ratio[16], rtmp[16];
    check_fill(p, n, -0.5f, 0.5f);
    const OptSeg *z = &seg[LAMB_ZERO_P];
    memset(p + z->offset, 0, (size_t)z->numel * sizeof(float));
    memset(m, 0, n * sizeof(float));
    memset(v, 0, n * sizeof(float));
    for (size_t i = 0; i < n; i++) pd[i] = p[i];
    AdamStepState st;
    memset(&st, 0, sizeof st);
    const OptSeg *zu = &seg[LAMB_ZERO_U];
    float *pzu = falloc((size_t)zu->numel);
    memcpy(pzu, p + zu->offset, (size_t)zu->numel * sizeof(float));
    for (long t = 1; t <= 4; t++) {
        float lr = 2e-3f * (float)t;
        check_fill(g, n, -1.0f, 1.0f);
        memset(g + zu->offset, 0, (size_t)zu->numel * sizeof(float));
        adam_begin_cpu(&st, b1, b2, bias_correction, NULL);
        lamb_step_cpu(p, m, v, ratio, g, seg, S, lr, &st, b1, b2, eps, NULL);
        lamb_ref_d(pd, md, vd, rd, g, seg, S, (double)lr, b1, b2, eps, bias_correction, t);
        to_f32(rtmp, rd, (size_t)S);
        snprintf(name, sizeof name, "lamb.ratio step %ld vs apex %s", t, tag);
        check_close(name, ratio, rtmp, (size_t)S, 0.0, 1e-6);
        if (t == 1) {
            snprintf(name, sizeof name, "lamb.ratio = 1 where ||p|| = 0, ||u|| = 0 %s", tag);
            check_true(name, ratio[LAMB_ZERO_P] == 1.0f && ratio[LAMB_ZERO_U] == 1.0f,
                       "ratios %g %g", ratio[LAMB_ZERO_P], ratio[LAMB_ZERO_U]);
        }
    }
    int adaptive_nodecay = 0;
    for (int s = 0; s < S; s++)
        if (seg[s].wd == 0.0f && seg[s].numel > 0 && s != LAMB_ZERO_U)
            adaptive_nodecay |= ratio[s] != 1.0f;
    snprintf(name, sizeof name, "lamb.no-decay tensors get a trust ratio iff nvlamb %s", tag);
    check_true(name, adaptive_nodecay == nvlamb, "adaptive %d", adaptive_nodecay);
    to_f32(tmp, pd, n);
    snprintf(name, sizeof name, "lamb.p vs apex FusedLAMB (4 steps) %s", tag);
    check_close(name, p, tmp, n, 1e-6, 1e-5);
    to_f32(tmp, md, n);
    snprintf(name, sizeof name, "lamb.m vs apex %s", tag);
    check_close(name, m, tmp, n, 1e-7, 1e-5);
    to_f32(tmp, vd, n);
    snprintf(name, sizeof name, "lamb.v vs apex %s", tag);
    check_close(name, v, tmp, n, 1e-12, 1e-5);
    snprintf(name, sizeof name, "lamb.zero update leaves the tensor unchanged %s", tag);
    check_true(name, !memcmp(pzu, p + zu->offset, (size_t)zu->numel * sizeof(float)),
               "weights moved");

    /* skip: nothing written, not even the ratios */
    float *p0 = falloc(n), *m0 = falloc(n), *v0 = falloc(n), r0[16];
    memcpy(p0, p, n * sizeof(float));
    memcpy(m0, m, n * sizeof(float));
    memcpy(v0, v, n * sizeof(float));
    memcpy(r0, ratio, sizeof ratio);
    int one = 1;
    g[0] = NAN;
    adam_begin_cpu(&st, b1, b2, bias_correction, &one);
    lamb_step_cpu(p, m, v, ratio, g, seg, S, 1e-3f, &st, b1, b2, eps, &one);
    snprintf(name, sizeof name, "lamb skipped step leaves everything bit for bit %s", tag);
    check_true(name,
               !memcmp(p0, p, n * sizeof(float)) && !memcmp(m0, m, n * sizeof(float)) &&
                   !memcmp(v0, v, n * sizeof(float)) && !memcmp(r0, ratio, sizeof ratio) &&
                   st.step == 4,
               "state changed");
    free(p0); free(m0); free(v0); free(pzu);
    free(p); free(m); free(v); free(g); free(tmp); free(pd); free(md); free(vd); free(rd);
}

/* ---- clipping ---- */

static void test_clip(void)
{
    const size_t n = 5003;
    float *g = falloc(n), *g0 = falloc(n), *ref = falloc(n), norm = -1.0f;
    check_fill(g0, n, -1.0f, 1.0f);
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g0[i] * g0[i];
    const double normd = sqrt(s);

    memcpy(g, g0, n * sizeof(float));
    amp_clip_grad_norm_cpu(g, &norm, n, 1.0f, NULL);
    float nref = (float)normd;
    check_close("clip.norm = sqrt(sum g^2)", &norm, &nref, 1, 0.0, 1e-7);
    double coef = 1.0 / (normd + 1e-6);
    for (size_t i = 0; i < n; i++) ref[i] = (float)(g0[i] * coef);
    check_close("clip.g scaled to max_norm 1 (norm ~41)", g, ref, n, 0.0, 1e-6);
    amp_clip_grad_norm_cpu(g, &norm, n, 0.0f, NULL);
    check_true("clip.after clipping the norm is max_norm", fabs(norm - 1.0f) < 1e-5,
               "norm %.9g", norm);

    memcpy(g, g0, n * sizeof(float));
    amp_clip_grad_norm_cpu(g, &norm, n, 100.0f, NULL);
    check_true("clip.below max_norm: g bit for bit, norm reported",
               !memcmp(g, g0, n * sizeof(float)) && norm == nref, "g changed or norm %g",
               norm);
    amp_clip_grad_norm_cpu(g, &norm, n, 0.0f, NULL);
    check_true("clip.max_norm 0: norm only", !memcmp(g, g0, n * sizeof(float)) && norm == nref,
               "g changed");

    int fi = 1;
    amp_clip_grad_norm_cpu(g, &norm, n, 1.0f, &fi);
    check_true("clip.found_inf: no work, g bit for bit, norm inf",
               !memcmp(g, g0, n * sizeof(float)) && isinf(norm), "norm %g", norm);
    fi = 0;
    amp_clip_grad_norm_cpu(g, &norm, 0, 1.0f, &fi);
    check_true("clip.n = 0: norm 0", norm == 0.0f, "norm %g", norm);

    /* torch: a NaN norm makes clamp(coef) NaN and poisons g; so do we */
    memcpy(g, g0, n * sizeof(float));
    g[7] = NAN;
    amp_clip_grad_norm_cpu(g, &norm, n, 1.0f, NULL);
    check_true("clip.NaN gradient: norm NaN and g NaN, as torch", isnan(norm) && isnan(g[0]),
               "norm %g g[0] %g", norm, g[0]);
    free(g); free(g0); free(ref);
}

/* ---- grad scaler kernels ---- */

static void test_unscale(void)
{
    const size_t n = 4099;
    float *g = falloc(n), *gt = falloc(n);
    check_fill(gt, n, -1.0f, 1.0f);
    float scale = 65536.0f;
    for (size_t i = 0; i < n; i++) g[i] = gt[i] * scale;
    int fi = 0;
    amp_unscale_check_cpu(g, &fi, n, &scale);
    check_true("unscale.clean: g / scale exactly, found_inf 0",
               !memcmp(g, gt, n * sizeof(float)) && fi == 0, "found_inf %d", fi);

    const float bad[3] = {INFINITY, -INFINITY, NAN};
    const char *bn[3] = {"+inf", "-inf", "nan"};
    for (int b = 0; b < 3; b++) {
        for (size_t i = 0; i < n; i++) g[i] = gt[i] * scale;
        g[n / 2 + (size_t)b] = bad[b];
        fi = 0;
        amp_unscale_check_cpu(g, &fi, n, &scale);
        char name[96];
        snprintf(name, sizeof name, "unscale.%s sets found_inf, the rest is unscaled", bn[b]);
        int rest = 1;
        for (size_t i = 0; i < n; i++)
            if (i != n / 2 + (size_t)b) rest &= g[i] == gt[i];
        check_true(name, fi == 1 && rest, "found_inf %d", fi);
    }
    /* scale < 1: a finite gradient that overflows when unscaled */
    float half = 0.5f;
    for (size_t i = 0; i < n; i++) g[i] = gt[i];
    g[5] = 3e38f;
    fi = 0;
    amp_unscale_check_cpu(g, &fi, n, &half);
    check_true("unscale.overflow by the unscale itself sets found_inf", fi == 1 && isinf(g[5]),
               "found_inf %d g %g", fi, g[5]);
    /* the flag is only ever set, never cleared by a clean pass */
    fi = 1;
    for (size_t i = 0; i < n; i++) g[i] = gt[i];
    amp_unscale_check_cpu(g, &fi, n, &scale);
    check_true("unscale.never clears found_inf", fi == 1, "found_inf %d", fi);
    free(g); free(gt);
}

/* GradScaler's trajectory: overflow at steps 3 and 7, growth_interval 3. */
static void test_scaler_update(void)
{
    /* what torch.amp.GradScaler(init_scale=65536, growth_interval=3) reports
     * from get_scale() after each update() */
    const float want[12] = {65536, 65536, 32768, 32768, 32768, 65536,
                            32768, 32768, 32768, 65536, 65536, 65536};
    float scale = 65536.0f;
    int tracker = 0, fi = 0, ok = 1, first = -1;
    int64_t skipped = 0;
    for (int t = 1; t <= 12; t++) {
        fi = (t == 3 || t == 7);
        amp_scaler_update_cpu(&scale, &tracker, &skipped, &fi, 2.0, 0.5, 3);
        if (scale != want[t - 1] && first < 0) first = t;
        ok &= scale == want[t - 1];
    }
    check_true("scaler.trajectory with overflows at 3 and 7, interval 3", ok && skipped == 2,
               "first differing step %d, skipped %lld", first, (long long)skipped);
    fi = 1;
    amp_scaler_update_cpu(&scale, &tracker, &skipped, &fi, 2.0, 0.5, 3);
    check_true("scaler.update leaves found_inf set for the host to read", fi == 1,
               "found_inf %d", fi);

    /* the default interval: grows at 2000 clean steps, an overflow resets the count */
    scale = 65536.0f;
    tracker = 0;
    skipped = 0;
    ok = 1;
    for (int t = 1; t <= 6000; t++) {
        fi = t == 2500;
        amp_scaler_update_cpu(&scale, &tracker, &skipped, &fi, 2.0, 0.5, 2000);
        float w = t < 2000 ? 65536.0f : t < 2500 ? 131072.0f : t < 4500 ? 65536.0f : 131072.0f;
        if (scale != w && ok) {
            ok = 0;
            first = t;
        }
    }
    check_true("scaler.default interval 2000: x2 at 2000, x0.5 at 2500, x2 at 4500",
               ok && skipped == 1 && tracker == 1500, "first differing step %d, tracker %d",
               first, tracker);

    /* never grows to inf */
    scale = 0x1p127f;
    tracker = 0;
    fi = 0;
    amp_scaler_update_cpu(&scale, &tracker, &skipped, &fi, 2.0, 0.5, 1);
    check_true("scaler.growth that would overflow keeps the scale", scale == 0x1p127f &&
               tracker == 0, "scale %g tracker %d", scale, tracker);
}

/* ---- the whole AMP step on a CPU context ---- */

typedef struct Model {
    Ctx c;
    ParamSet ps;
} Model;

static void model_init(Model *md)
{
    ctx_init(&md->c, DEV_CPU, 0, 1);
    params_init(&md->ps);
    params_add(&md->ps, "w1", 2, (int64_t[]){24, 16}, INIT_UNIFORM, 0.3f, 1);
    params_add(&md->ps, "b1", 1, (int64_t[]){24}, INIT_UNIFORM, 0.1f, 0);
    params_add(&md->ps, "w2", 2, (int64_t[]){7, 24}, INIT_UNIFORM, 0.3f, 1);
    params_add(&md->ps, "ln", 1, (int64_t[]){7}, INIT_ONE, 0.0f, 0);
    params_alloc(&md->ps, &md->c, 5);
}

static void model_free(Model *md)
{
    params_free(&md->ps);
    ctx_free(&md->c);
}

/* Steps 1..T with overflows (inf at 3, nan at 7) and max_norm clipping:
 * scale trajectory, bit-identical skipped steps, step count, and the final
 * weights against the double AdamW run on the clean steps only. */
static void test_pipeline_adamw(void)
{
    Model md;
    model_init(&md);
    ParamSet *ps = &md.ps;
    const size_t n = ps->total, nd = ps->n_decay;
    const double b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.05;
    const float max_norm = 6.0f;
    GradScaler sc;
    scaler_init_ex(&sc, &md.c, 1, 65536.0f, 2.0, 0.5, 3);
    AdamW opt;
    adamw_init(&opt, ps, b1, b2, eps, wd);

    double *pd = dalloc(n), *mdd = dalloc(n), *vd = dalloc(n);
    for (size_t i = 0; i < n; i++) pd[i] = ps->data[i];
    float *gt = falloc(n), *gc = falloc(n), *snap = falloc(3 * n), *tmp = falloc(n);
    const float want[10] = {65536, 65536, 32768, 32768, 32768, 65536, 32768, 32768, 32768, 65536};
    int traj_ok = 1, skip_ok = 1, first = -1;
    long t_ref = 0;
    int clipped = 0, unclipped = 0;
    for (int t = 1; t <= 10; t++) {
        float lr = 0.01f;
        check_fill(gt, n, t % 2 ? -0.5f : -0.1f, t % 2 ? 0.5f : 0.1f);
        ScalerState s;
        scaler_read(&sc, &s, NULL);
        for (size_t i = 0; i < n; i++) ps->grad[i] = gt[i] * s.scale; /* scaled backward */
        if (t == 3) ps->grad[n - 2] = INFINITY;
        if (t == 7) ps->grad[1] = NAN;
        memcpy(snap, ps->data, n * sizeof(float));
        memcpy(snap + n, opt.m, n * sizeof(float));
        memcpy(snap + 2 * n, opt.v, n * sizeof(float));
        int64_t steps_before = adamw_steps(&opt, ps);

        scaler_unscale(&sc, ps->grad, n);
        scaler_clip(&sc, ps->grad, n, max_norm);
        adamw_step(&opt, ps, lr, scaler_found_inf(&sc), NULL, DT_F32);
        scaler_update(&sc);

        float norm;
        scaler_read(&sc, &s, &norm);
        if (s.scale != want[t - 1] && first < 0) first = t;
        traj_ok &= s.scale == want[t - 1];
        int overflow = t == 3 || t == 7;
        if (overflow) {
            skip_ok &= s.found_inf == 1 && isinf(norm) && !memcmp(snap, ps->data, n * 4) &&
                       !memcmp(snap + n, opt.m, n * 4) && !memcmp(snap + 2 * n, opt.v, n * 4) &&
                       adamw_steps(&opt, ps) == steps_before;
        } else {
            skip_ok &= s.found_inf == 0 && adamw_steps(&opt, ps) == steps_before + 1;
            /* reference: torch's clip_grad_norm_ then AdamW on the true gradients */
            double ss = 0.0;
            for (size_t i = 0; i < n; i++) ss += (double)gt[i] * gt[i];
            double coef = max_norm / (sqrt(ss) + 1e-6);
            if (coef < 1.0) clipped++; else unclipped++;
            for (size_t i = 0; i < n; i++) gc[i] = coef < 1.0 ? (float)(gt[i] * coef) : gt[i];
            t_ref++;
            adamw_ref_d(pd, mdd, vd, gc, nd, lr, b1, b2, eps, wd, t_ref);
            adamw_ref_d(pd + nd, mdd + nd, vd + nd, gc + nd, n - nd, lr, b1, b2, eps, 0.0, t_ref);
        }
    }
    check_true("pipeline.adamw scale trajectory = GradScaler's (overflow at 3, 7)", traj_ok,
               "first differing step %d", first);
    check_true("pipeline.adamw skipped steps leave p, m, v bit for bit, step count frozen",
               skip_ok, "a skipped step changed state or a clean step was not counted");
    ScalerState s;
    scaler_read(&sc, &s, NULL);
    check_true("pipeline.adamw skipped count 2, Adam step count 8",
               s.skipped == 2 && adamw_steps(&opt, ps) == 8, "skipped %lld steps %lld",
               (long long)s.skipped, (long long)adamw_steps(&opt, ps));
    check_true("pipeline.adamw exercised clipped and unclipped steps", clipped && unclipped,
               "clipped %d unclipped %d", clipped, unclipped);
    to_f32(tmp, pd, n);
    check_close("pipeline.adamw p vs double clip + AdamW on the clean steps", ps->data, tmp, n,
                1e-6, 1e-5);
    adamw_free(&opt, ps);
    scaler_free(&sc);
    free(pd); free(mdd); free(vd); free(gt); free(gc); free(snap); free(tmp);
    model_free(&md);
}

/* LAMB through the host side: the registry's segments, a skipped step, and
 * the default (apex) rule that only decayed tensors get a trust ratio. */
static void test_pipeline_lamb(void)
{
    Model md;
    model_init(&md);
    ParamSet *ps = &md.ps;
    const size_t n = ps->total;
    GradScaler sc;
    scaler_init(&sc, &md.c, 1);
    Lamb opt;
    lamb_init(&opt, ps, 0.9, 0.999, 1e-6, 0.01, 1, 0);
    check_true("pipeline.lamb one segment per parameter", opt.nseg == ps->n && opt.nchunk == ps->n,
               "nseg %d nchunk %lld", opt.nseg, (long long)opt.nchunk);
    double *pd = dalloc(n), *mdd = dalloc(n), *vd = dalloc(n), rd[8];
    for (size_t i = 0; i < n; i++) pd[i] = ps->data[i];
    float *gt = falloc(n), *snap = falloc(3 * n), *tmp = falloc(n), ratio[8];
    int skip_ok = 1;
    long t_ref = 0;
    for (int t = 1; t <= 4; t++) {
        check_fill(gt, n, -1.0f, 1.0f);
        ScalerState s;
        scaler_read(&sc, &s, NULL);
        for (size_t i = 0; i < n; i++) ps->grad[i] = gt[i] * s.scale;
        if (t == 2) ps->grad[0] = INFINITY;
        memcpy(snap, ps->data, n * 4);
        memcpy(snap + n, opt.m, n * 4);
        memcpy(snap + 2 * n, opt.v, n * 4);
        int64_t before = lamb_steps(&opt, ps);
        scaler_unscale(&sc, ps->grad, n);
        lamb_step(&opt, ps, 1e-2f, scaler_found_inf(&sc), NULL, DT_F32);
        scaler_update(&sc);
        if (t == 2) {
            skip_ok &= !memcmp(snap, ps->data, n * 4) && !memcmp(snap + n, opt.m, n * 4) &&
                       !memcmp(snap + 2 * n, opt.v, n * 4) && lamb_steps(&opt, ps) == before;
        } else {
            skip_ok &= lamb_steps(&opt, ps) == before + 1;
            t_ref++;
            lamb_ref_d(pd, mdd, vd, rd, gt, opt.seg, opt.nseg, 1e-2, 0.9, 0.999, 1e-6, 1, t_ref);
        }
    }
    check_true("pipeline.lamb skipped step bit for bit, step count frozen", skip_ok,
               "state changed");
    lamb_read_ratios(&opt, ps, ratio);
    int rule = 1;
    for (int i = 0; i < ps->n; i++) rule &= ps->p[i].decay ? ratio[i] != 1.0f : ratio[i] == 1.0f;
    check_true("pipeline.lamb trust ratio on decayed tensors only (apex default)", rule,
               "ratios %g %g %g %g", ratio[0], ratio[1], ratio[2], ratio[3]);
    to_f32(tmp, pd, n);
    check_close("pipeline.lamb p vs double apex on the clean steps", ps->data, tmp, n, 1e-6,
                1e-5);
    lamb_free(&opt, ps);
    scaler_free(&sc);
    free(pd); free(mdd); free(vd); free(gt); free(snap); free(tmp);
    model_free(&md);
}

/* bf16 / f32 modes: the scaler does nothing at all. */
static void test_scaler_disabled(void)
{
    Model md;
    model_init(&md);
    ParamSet *ps = &md.ps;
    GradScaler sc;
    scaler_init_for(&sc, &md.c, DT_BF16);
    const size_t n = ps->total;
    float *g0 = falloc(n);
    check_fill(g0, n, -1.0f, 1.0f);
    g0[3] = INFINITY;
    memcpy(ps->grad, g0, n * 4);
    scaler_unscale(&sc, ps->grad, n);
    scaler_update(&sc);
    ScalerState s;
    scaler_read(&sc, &s, NULL);
    check_true("scaler.disabled: no flag, scale 1, grads untouched, state still",
               !sc.enabled && scaler_found_inf(&sc) == NULL && *scaler_scale(&sc) == 1.0f &&
                   !memcmp(ps->grad, g0, n * 4) && s.scale == 1.0f && s.found_inf == 0 &&
                   s.growth_tracker == 0 && s.skipped == 0,
               "enabled %d scale %g", sc.enabled, s.scale);
    float norm;
    g0[3] = 0.5f;
    memcpy(ps->grad, g0, n * 4);
    scaler_clip(&sc, ps->grad, n, 1e9f);
    scaler_read(&sc, &s, &norm);
    check_true("scaler.disabled: clipping still computes the norm", norm > 0.0f &&
               isfinite(norm), "norm %g", norm);
    scaler_free(&sc);
    scaler_init_for(&sc, &md.c, DT_F16);
    check_true("scaler.f16 enables it at 65536", sc.enabled && *scaler_scale(&sc) == 65536.0f,
               "enabled %d", sc.enabled);
    scaler_free(&sc);
    free(g0);
    model_free(&md);
}

int main(void)
{
    check_seed(31);
    test_adam_begin();
    test_adamw_vs_torch();
    for (int bc = 0; bc <= 1; bc++)
        for (int nv = 0; nv <= 1; nv++) test_lamb_vs_apex(bc, nv);
    test_clip();
    test_unscale();
    test_scaler_update();
    test_pipeline_adamw();
    test_pipeline_lamb();
    test_scaler_disabled();
    return check_summary();
}
