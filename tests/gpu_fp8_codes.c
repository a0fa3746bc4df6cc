/* gpu_fp8_codes.c — the FP8 weight codes written by the optimizer
 * (ops/adamw_fp8.h, CTRAIN_FP8_WEIGHT_CODES):
 *   1. the job-table kernel against its CPU reference, bit for bit: p, m, v,
 *      the bf16 working copy, both codes of every fp8 job and their amaxes,
 *      over a table with plain gaps of odd lengths (a chunk boundary, the
 *      weight-decay boundary inside one), weights whose shapes are not
 *      multiples of the 64 x 64 tile, a NaN gradient (the exact conversion
 *      path), values past E4M3's range (saturation) and below its normal
 *      range (subnormals), an amax already above the weight's; then a
 *      skipped step (the grad scaler's flag) with a new scale: parameters
 *      and moments unchanged, the codes those of the new scale;
 *   2. BERT-tiny under --precision fp8 trains to the same losses, weights
 *      and FP8 scales bit for bit with the codes from the optimizer as with
 *      the forward's casts: eager, with accumulation 2 and recompute, in a
 *      CUDA graph, with an evaluation's forward (a shorter batch, no
 *      autograd) between replays and between eager steps, and across a
 *      resume; and the codes were used (every FP8 layer's codes written by
 *      the update, current at the end).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gpu_util.h"
#include "engine/mem.h"
#include "ops/adamw_fp8.h"
#include "ops/fp8.h"
#include "ops/fp8_recipe.h"
#include "train_run.h"

/* ---- 1. the kernel ---- */

typedef struct Layout {
    int64_t offset;
    int rows, cols;   /* rows 0: plain, cols elements */
    double wd;
    float scale, amax0;
} Layout;

enum { NJOBS = 9 };

/* plain 40 | W1 64 x 128 | plain 1768 + 3236 (the decay boundary at 10000) |
 * W2 48 x 100 | plain 4 | W3 208 x 36 | plain 3 */
static const Layout LAYOUT[NJOBS] = {
    {0, 0, 40, 0.01, 0, 0},
    {40, 64, 128, 0.01, 100.0f, 0.0f},
    {8232, 0, 1768, 0.01, 0, 0},
    {10000, 0, 3236, 0.0, 0, 0},
    {13236, 48, 100, 0.0, 500.0f, 5.0f},   /* saturates; amax stays 5 */
    {18036, 0, 4, 0.0, 0, 0},
    {18040, 208, 36, 0.0, 1.0f, 0.0f},     /* small values: subnormal codes */
    {25528, 0, 3, 0.0, 0, 0},
    {25531, 0, 0, 0.0, 0, 0},              /* an empty job */
};
enum { P = 25531 };

static size_t job_len(const Layout *l) { return l->rows ? (size_t)l->rows * l->cols : (size_t)l->cols; }

typedef struct Side {
    uint8_t *q[NJOBS], *qt[NJOBS];
    float scale[NJOBS], amax[NJOBS];
} Side;

/* The kernel's buffers on the device */
typedef struct Dev {
    float *p, *m, *v, *g, *scale, *amax, *lr;
    uint16_t *lowp;
    uint8_t *q[NJOBS], *qt[NJOBS];   /* NULL for plain jobs */
    AdamwJob *jobs;
    AdamStepState *st;
    int *skip;
} Dev;

static void dev_open(Dev *d)
{
    memset(d, 0, sizeof *d);
    float **f32[4] = {&d->p, &d->m, &d->v, &d->g};
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaMalloc((void **)f32[k], P * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&d->lowp, P * sizeof(uint16_t)));
    CUDA_CHECK(cudaMalloc((void **)&d->scale, NJOBS * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&d->amax, NJOBS * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&d->lr, sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&d->jobs, NJOBS * sizeof(AdamwJob)));
    CUDA_CHECK(cudaMalloc((void **)&d->st, sizeof(AdamStepState)));
    CUDA_CHECK(cudaMalloc((void **)&d->skip, sizeof(int)));
}

static void dev_close(Dev *d)
{
    for (int i = 0; i < NJOBS; i++) {
        if (d->q[i]) dfree(d->q[i]);
        if (d->qt[i]) dfree(d->qt[i]);
    }
    void *all[11] = {d->p, d->m, d->v, d->g, d->lowp, d->scale, d->amax, d->lr, d->jobs, d->st,
                     d->skip};
    for (int k = 0; k < 11; k++) dfree(all[k]);
}

static void fill_jobs(AdamwJob *jobs, uint8_t *const *q, uint8_t *const *qt, const float *scale,
                      float *amax)
{
    for (int i = 0; i < NJOBS; i++) {
        const Layout *l = &LAYOUT[i];
        jobs[i] = (AdamwJob){l->offset, (int64_t)job_len(l), l->rows, l->rows ? l->cols : 0,
                             l->wd, l->rows ? q[i] : NULL, l->rows ? qt[i] : NULL,
                             l->rows ? scale + i : NULL, l->rows ? amax + i : NULL, 0};
    }
}

/* a and b bit for bit, where a NaN equals any NaN (the CPU keeps an input
 * NaN's payload, the GPU writes its own) */
static size_t f32_differ(const float *a, const float *b, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += !(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return k;
}

/* One step on both sides from the same state; compares everything. */
static void step_both(const char *name, float *p, float *m, float *v, const float *g, Side *h,
                      const Dev *d, const AdamStepState *st, float lr, int skip)
{
    float *dp = d->p, *dm = d->m, *dv = d->v, *dg = d->g, *dscale = d->scale, *damax = d->amax;
    float *dlr = d->lr;
    uint16_t *dlowp = d->lowp;
    uint8_t *const *dq = d->q, *const *dqt = d->qt;
    AdamwJob *djobs = d->jobs;
    AdamStepState *dst = d->st;
    int *dskip = d->skip;
    AdamwJob jobs[NJOBS];
    fill_jobs(jobs, dq, dqt, dscale, damax);
    const int64_t blocks = adamw_jobs_layout(jobs, NJOBS);
    CUDA_CHECK(cudaMemcpy(djobs, jobs, sizeof jobs, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dp, p, P * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dm, m, P * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dv, v, P * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dg, g, P * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dscale, h->scale, sizeof h->scale, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(damax, h->amax, sizeof h->amax, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dlr, &lr, sizeof lr, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dst, st, sizeof *st, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dskip, &skip, sizeof skip, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dlowp, 0xFF, P * sizeof(uint16_t)));
    for (int i = 0; i < NJOBS; i++)
        if (LAYOUT[i].rows) {
            CUDA_CHECK(cudaMemset(dq[i], 0xAA, job_len(&LAYOUT[i])));
            CUDA_CHECK(cudaMemset(dqt[i], 0xAA, job_len(&LAYOUT[i])));
        }
    adamw_jobs_step_cuda(dp, dm, dv, dlowp, DT_BF16, dg, djobs, NJOBS, blocks, dlr, dst, 0.9,
                         0.999, 1e-6, dskip, 0);
    sync_all();
    /* the reference */
    float *p0 = hcopy(p, P);
    AdamwJob hj[NJOBS];
    fill_jobs(hj, h->q, h->qt, h->scale, h->amax);
    adamw_jobs_step_cpu(p, m, v, g, hj, NJOBS, lr, st, 0.9, 0.999, 1e-6, &skip);
    float *gp = hbuf(P), *gm = hbuf(P), *gv = hbuf(P);
    uint16_t *gl = (uint16_t *)malloc(P * sizeof(uint16_t));
    float gamax[NJOBS];
    CUDA_CHECK(cudaMemcpy(gp, dp, P * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gm, dm, P * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gv, dv, P * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gl, dlowp, P * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gamax, damax, sizeof gamax, cudaMemcpyDeviceToHost));
    char n[160];
    snprintf(n, sizeof n, "%s: p, m, v equal the CPU reference bit for bit", name);
    const size_t bad = f32_differ(gp, p, P) + f32_differ(gm, m, P) + f32_differ(gv, v, P);
    check_true(n, bad == 0, "%zu values differ", bad);
    size_t moved = 0, lowp_bad = 0;
    for (size_t i = 0; i < P; i++) {
        moved += memcmp(&p0[i], &p[i], sizeof(float)) != 0;
        const uint16_t want = f32_to_bf16(p[i]);
        const int nan = isnan(p[i]) && isnan(bf16_to_f32(gl[i]));
        lowp_bad += skip ? gl[i] != 0xFFFF : gl[i] != want && !nan;
    }
    snprintf(n, sizeof n, "%s: %s", name, skip ? "nothing moved, no working copy written"
                                               : "the weights moved");
    check_true(n, skip ? moved == 0 : moved > P / 2, "%zu of %d weights changed", moved, P);
    snprintf(n, sizeof n, "%s: the bf16 working copy", name);
    check_true(n, lowp_bad == 0, "%zu elements differ", lowp_bad);
    for (int i = 0; i < NJOBS; i++) {
        const Layout *l = &LAYOUT[i];
        if (!l->rows) continue;
        const size_t len = job_len(l);
        uint8_t *gq = (uint8_t *)malloc(len), *gqt = (uint8_t *)malloc(len);
        CUDA_CHECK(cudaMemcpy(gq, dq[i], len, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(gqt, dqt[i], len, cudaMemcpyDeviceToHost));
        snprintf(n, sizeof n, "%s: job %d (%d x %d) codes q and q^T bit for bit", name, i,
                 l->rows, l->cols);
        check_true(n, !memcmp(gq, h->q[i], len) && !memcmp(gqt, h->qt[i], len), "codes differ");
        snprintf(n, sizeof n, "%s: job %d amax %.9g", name, i, (double)h->amax[i]);
        check_true(n, !memcmp(&gamax[i], &h->amax[i], sizeof(float)), "GPU %.9g",
                   (double)gamax[i]);
        free(gq);
        free(gqt);
    }
    free(p0); free(gp); free(gm); free(gv); free(gl);
}

static void kernel_against_cpu(void)
{
    float *p = hrand(P, -2.0f, 2.0f, DT_F32), *g = hrand(P, -1.0f, 1.0f, DT_F32);
    float *m = hrand(P, -0.1f, 0.1f, DT_F32), *v = hrand(P, 0.0f, 0.01f, DT_F32);
    g[40 + 3 * 128 + 5] = NAN;   /* W1: a NaN weight after the step */
    for (size_t i = 18040; i < 18040 + 208 * 36; i++) {   /* W3: subnormal codes */
        p[i] *= 1e-3f;
        m[i] *= 1e-3f;
        g[i] *= 1e-3f;
    }
    Side h;
    Dev d;
    dev_open(&d);
    uint8_t **dq = d.q, **dqt = d.qt;
    for (int i = 0; i < NJOBS; i++) {
        h.scale[i] = LAYOUT[i].scale;
        h.amax[i] = LAYOUT[i].amax0;
        h.q[i] = h.qt[i] = NULL;
        if (!LAYOUT[i].rows) continue;
        const size_t len = job_len(&LAYOUT[i]);
        h.q[i] = (uint8_t *)malloc(len);
        h.qt[i] = (uint8_t *)malloc(len);
        CUDA_CHECK(cudaMalloc((void **)&dq[i], len));
        CUDA_CHECK(cudaMalloc((void **)&dqt[i], len));
    }
    check_true("table: every fp8 job fits the kernel",
               adamw_job_fp8_fits(40, 64, 128, dq[1], dqt[1]) &&
                   adamw_job_fp8_fits(13236, 48, 100, dq[4], dqt[4]) &&
                   adamw_job_fp8_fits(18040, 208, 36, dq[6], dqt[6]) &&
                   !adamw_job_fp8_fits(18041, 208, 36, dq[6], dqt[6]) &&
                   !adamw_job_fp8_fits(40, 56, 128, dq[1], dqt[1]),
               "the fit test disagrees with the kernel's needs");
    const AdamStepState st = adam_step_state(3, 0.9, 0.999, 1);
    step_both("adamw_jobs step", p, m, v, g, &h, &d, &st, 1e-2f, 0);
    int nan_code = 0, sat = 0, sub = 0;
    for (int r = 0; r < 64 * 128; r++) nan_code += h.q[1][r] == 0x7F;
    for (int r = 0; r < 48 * 100; r++) sat += (h.q[4][r] & 0x7F) == 0x7E;
    for (int r = 0; r < 208 * 36; r++) sub += (h.q[6][r] & 0x78) == 0 && (h.q[6][r] & 0x7) != 0;
    check_true("the case holds a NaN code, saturated codes and subnormal codes",
               nan_code >= 1 && sat > 100 && sub > 100, "NaN %d, saturated %d, subnormal %d",
               nan_code, sat, sub);
    h.scale[1] = 37.0f;   /* the recipe moved the scale; the step is skipped */
    h.amax[1] = 0.0f;
    step_both("skipped step, new scale", p, m, v, g, &h, &d, &st, 1e-2f, 1);
    for (int i = 0; i < NJOBS; i++) {
        free(h.q[i]);
        free(h.qt[i]);
    }
    dev_close(&d);
    free(p); free(g); free(m); free(v);
}

/* ---- 2. training ---- */

enum { STEPS = 12 };

typedef struct Outcome {
    float loss[STEPS];
    float *w;       /* final weights (ps->total) */
    float *fp8[2];  /* the recipe's blocks */
    size_t nw, nf[2], amax_at[2], n[2];   /* each block's amaxes: n at amax_at */
    int fused, layers, ready;
} Outcome;

static void outcome_free(Outcome *o)
{
    free(o->w);
    free(o->fp8[0]);
    free(o->fp8[1]);
}

static void outcome_take(Outcome *o, Run *r)
{
    ParamSet *ps = &r->m.params;
    o->nw = ps->total;
    o->w = (float *)malloc(ps->total * sizeof(float));
    mem_to_host(ps->ctx, o->w, ps->data, ps->total * sizeof(float));
    const Fp8Recipe *fr = r->m.fp8;
    for (int g = 0; g < 2; g++) {
        o->nf[g] = fr->block[g]->numel;
        o->n[g] = (size_t)fr->n[g];
        o->amax_at[g] = (size_t)fr->n[g] * (size_t)fr->len;
        o->fp8[g] = (float *)malloc(o->nf[g] * sizeof(float));
        tensor_to_host(o->fp8[g], fr->block[g]);
    }
    o->layers = 0;
    o->fused = 0;
    for (int i = 0; fr->codes && i < fr->layers; i++) {
        o->layers += fr->codes[i].w != NULL;
        o->fused += fr->codes[i].fused;
    }
    o->ready = fr->codes_ready;
}

/* steps 1 .. STEPS, or with resume_at > 0: resume_at steps, --save, a new run
 * resumed from it for the rest; with eval_at > 0, an evaluation's forward (3
 * rows fewer, no autograd) after step eval_at */
static void train(Ctx *c, const char *args, int codes, int resume_at, int eval_at, Outcome *o)
{
    setenv("CTRAIN_FP8_WEIGHT_CODES", codes ? "1" : "0", 1);
    char path[64];
    snprintf(path, sizeof path, "/tmp/gpu_fp8_codes_%d.ckpt", (int)getpid());
    Run r;
    run_open(&r, c, args, DEV_CUDA);
    int s = 0;
    for (; s < (resume_at ? resume_at : STEPS); s++) {
        trainer_step(&r.tr);
        o->loss[s] = trainer_loss_value(&r.tr);
        if (s + 1 == eval_at) eval_forward(c, &r, (int)r.o.batch - 3);
    }
    if (resume_at) {
        trainer_save(&r.tr, &r.o, path);
        run_close(&r, c);
        run_open(&r, c, args, DEV_CUDA);
        trainer_resume(&r.tr, &r.o, path);
        for (; s < STEPS; s++) {
            trainer_step(&r.tr);
            o->loss[s] = trainer_loss_value(&r.tr);
        }
        unlink(path);
    }
    outcome_take(o, &r);
    run_close(&r, c);
    unsetenv("CTRAIN_FP8_WEIGHT_CODES");
}

static void codes_equal_casts(Ctx *c, const char *name, const char *args, int resume_at,
                              int eval_at)
{
    Outcome a, b;
    train(c, args, 0, resume_at, eval_at, &a);
    train(c, args, 1, resume_at, eval_at, &b);
    check_losses_same(name, a.loss, b.loss, STEPS, "casts", "codes");
    char n[200];
    snprintf(n, sizeof n, "%s: final weights bit for bit", name);
    check_true(n, a.nw == b.nw && !memcmp(a.w, b.w, a.nw * sizeof(float)), "they differ");
    /* the amax histories and the scales; not this step's amaxes, which the
     * optimizer has raised already for the weights (the forward would next step) */
    int same = 1;
    for (int g = 0; g < 2; g++) {
        const size_t at = a.amax_at[g], after = at + a.n[g];
        same &= a.nf[g] == b.nf[g] && !memcmp(a.fp8[g], b.fp8[g], at * sizeof(float)) &&
                !memcmp(a.fp8[g] + after, b.fp8[g] + after, (a.nf[g] - after) * sizeof(float));
    }
    snprintf(n, sizeof n, "%s: FP8 amax histories and scales bit for bit", name);
    check_true(n, same, "they differ");
    snprintf(n, sizeof n, "%s: the optimizer wrote every layer's codes (%d of %d), current",
             name, b.fused, b.layers);
    check_true(n, b.layers > 0 && b.fused == b.layers && b.ready && a.layers == 0,
               "fused %d of %d bound, ready %d; without the switch %d bound", b.fused, b.layers,
               b.ready, a.layers);
    outcome_free(&a);
    outcome_free(&b);
}

int main(void)
{
    gpu_require();
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 42);
    kernel_against_cpu();
    if (!fp8_supported(&c)) {
        printf("SKIP training: the device has no FP8 GEMMs (sm_89 or later)\n");
    } else {
        const char *base = "--model bert-tiny --data synthetic --batch 8 --seq 32 --steps 12 "
                           "--optim adamw --lr 1e-3 --warmup 3 --precision fp8";
        char a[400];
        codes_equal_casts(&c, "bert-tiny fp8 eager", base, 0, 0);
        snprintf(a, sizeof a, "%s --accum 2 --recompute all", base);
        codes_equal_casts(&c, "bert-tiny fp8 accum 2 recompute", a, 0, 0);
        snprintf(a, sizeof a, "%s --graph --graph-warmup 2", base);
        codes_equal_casts(&c, "bert-tiny fp8 graph", a, 0, 0);
        codes_equal_casts(&c, "bert-tiny fp8 graph, an evaluation between replays", a, 0, 6);
        codes_equal_casts(&c, "bert-tiny fp8 eager, an evaluation after step 1", base, 0, 1);
        codes_equal_casts(&c, "bert-tiny fp8 resumed at step 5", base, 5, 0);
    }
    ctx_free(&c);
    return check_summary();
}
