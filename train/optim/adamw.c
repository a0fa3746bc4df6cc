/* adamw.c — the AdamW optimizer's host side: state allocation, the step's
 * begin (count and bias corrections) and its per-range updates (kernels and
 * math in ops/adam.h). A whole step and the overlapped update's ranges
 * (adamw_step_range) go through the same range function. */
#include "adamw.h"

#include <stdlib.h>
#include <string.h>
#include "adam_state.h"
#include "engine/error.h"
#include "engine/mem.h"
#include "ops/adamw_fp8.h"
#include "ops/fp8_recipe.h"

void adamw_init(AdamW *o, ParamSet *ps, double beta1, double beta2, double eps,
                double weight_decay)
{
    memset(o, 0, sizeof *o);
    adam_state_check("AdamW", beta1, beta2, eps, weight_decay);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    adam_state_alloc(ps, &o->m, &o->v, &o->st, &o->lr_dev);
}

void adamw_step_begin(AdamW *o, ParamSet *ps, const int *skip)
{
    if (ps->ctx->device == DEV_CPU) {
        adam_begin_cpu(o->st, o->beta1, o->beta2, 1, skip);
        return;
    }
#ifdef CTRAIN_CUDA
    adam_begin_cuda(o->st, o->beta1, o->beta2, 1, skip, ps->ctx->stream);
#endif
}

/* Elements [begin, end) with weight decay wd. p_lowp: NULL or the working
 * copy of all ps->total weights; stream: a cudaStream_t (ignored on the CPU). */
static void adamw_range(AdamW *o, ParamSet *ps, size_t begin, size_t end, double wd,
                        const float *lr_dev, const int *skip, void *p_lowp, DType lowp_t,
                        void *stream)
{
    float *p = ps->data + begin, *g = ps->grad + begin;
    if (ps->ctx->device == DEV_CPU) {
        adamw_step_cpu(p, o->m + begin, o->v + begin, g, end - begin, *lr_dev, o->st, o->beta1,
                       o->beta2, o->eps, wd, skip);
        return;
    }
#ifdef CTRAIN_CUDA
    adamw_step_cuda(p, o->m + begin, o->v + begin,
                    p_lowp ? (char *)p_lowp + begin * dtype_size(lowp_t) : NULL, lowp_t, g,
                    end - begin, lr_dev, o->st, o->beta1, o->beta2, o->eps, wd, skip,
                    (cudaStream_t)stream);
#else
    (void)p_lowp; (void)lowp_t; (void)stream;
#endif
}

/* ---- the FP8 weight codes (ops/adamw_fp8.h) ---- */

void adamw_write_fp8_codes(AdamW *o, struct Fp8Recipe *r) { o->fp8 = r; }

#ifdef CTRAIN_CUDA
/* Plain jobs over [a, b), one a weight-decay group: [a, cut) with decay,
 * [cut, b) without, cut = n_decay clamped into [a, b]. */
static int add_plain(AdamwJob *jobs, int n, const AdamW *o, const ParamSet *ps, size_t a,
                     size_t b)
{
    const size_t mid = ps->n_decay < a ? a : ps->n_decay > b ? b : ps->n_decay;
    const size_t cut[3] = {a, mid, b};
    for (int k = 0; k < 2; k++)
        if (cut[k + 1] > cut[k])
            jobs[n++] = (AdamwJob){(int64_t)cut[k], (int64_t)(cut[k + 1] - cut[k]), 0, 0,
                                   cut[k] < ps->n_decay ? o->weight_decay : 0.0,
                                   NULL, NULL, NULL, NULL, 0};
    return n;
}

/* Layer i's weight as an fp8 job at *off, when the kernel can take it: inside
 * the buffer and one weight-decay group, its shape and place as
 * adamw_job_fp8_fits asks. */
static int fp8_job_fits(const ParamSet *ps, const Fp8WeightCodes *k, size_t *off)
{
    if (!k->w) return 0;
    const uintptr_t base = (uintptr_t)ps->data, at = (uintptr_t)k->w;
    const size_t n = (size_t)k->rows * (size_t)k->cols;
    if (at < base || (at - base) % sizeof(float)) return 0;
    *off = (at - base) / sizeof(float);
    if (*off + n > ps->total || (*off < ps->n_decay && *off + n > ps->n_decay)) return 0;
    return adamw_job_fp8_fits((int64_t)*off, k->rows, k->cols, k->q->data, k->qt->data);
}

/* The table over the whole buffer: the weights the step's forwards used, as
 * fp8 jobs where the kernel takes them (their `fused` set), in order of
 * place, the ranges between them as plain jobs; on the device. Only the
 * used ones: the optimizer records their amaxes for the next step, as that
 * step's forwards would, so a layer no forward ran does not get one (the
 * same scales as the forward's casts while every step runs the same
 * layers, as BERT's training does). */
static void jobs_build(AdamW *o, ParamSet *ps, Fp8Recipe *r)
{
    Ctx *c = ps->ctx;
    const int L = r->layers;
    int *order = (int *)malloc((size_t)L * sizeof(int));
    size_t *off = (size_t *)malloc((size_t)L * sizeof(size_t));
    AdamwJob *jobs = (AdamwJob *)malloc((size_t)(3 * L + 2) * sizeof(AdamwJob));
    if (!order || !off || !jobs) ct_fatal("out of host memory");
    int nf = 0;
    for (int i = 0; i < L; i++) {
        r->codes[i].fused = 0;
        r->codes[i].tabled = r->codes[i].used;
        if (!r->codes[i].used || !fp8_job_fits(ps, &r->codes[i], &off[i])) continue;
        int at = nf++;   /* insertion by place */
        while (at > 0 && off[order[at - 1]] > off[i]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = i;
    }
    int n = 0;
    size_t pos = 0;
    for (int f = 0; f < nf; f++) {
        Fp8WeightCodes *k = &r->codes[order[f]];
        const size_t a = off[order[f]], len = (size_t)k->rows * (size_t)k->cols;
        if (a < pos) continue;   /* overlaps the one before: the forward casts it */
        n = add_plain(jobs, n, o, ps, pos, a);
        float *blk = (float *)r->block[0]->data;
        jobs[n++] = (AdamwJob){(int64_t)a, (int64_t)len, k->rows, k->cols,
                               a < ps->n_decay ? o->weight_decay : 0.0, (uint8_t *)k->q->data,
                               (uint8_t *)k->qt->data,
                               fp8_scale_of(r, blk, 0) + 2 * order[f] + 1,
                               fp8_amax_of(r, blk, 0) + 2 * order[f] + 1, 0};
        k->fused = 1;
        pos = a + len;
    }
    n = add_plain(jobs, n, o, ps, pos, ps->total);
    const int64_t blocks = adamw_jobs_layout(jobs, n);
    if (o->jobs) mem_free(c, o->jobs, (size_t)o->njobs * sizeof(AdamwJob));
    o->jobs = (AdamwJob *)mem_alloc(c, (size_t)n * sizeof(AdamwJob));
    mem_to_device(c, o->jobs, jobs, (size_t)n * sizeof(AdamwJob));
    o->njobs = n;
    o->nblocks = blocks;
    o->jobs_version = r->codes_version;
    free(order);
    free(off);
    free(jobs);
}

#endif

/* The whole step with the FP8 weight codes; 0 where it does not apply
 * (the caller runs the plain step): no recipe, the CPU. Inside a capture
 * the table of the eager steps before is kept: its layers' codes stay
 * current whatever the captured forward used (a layer outside it casts). */
static int step_codes(AdamW *o, ParamSet *ps, const float *lr_dev, const int *skip,
                      void *p_lowp, DType lowp_t)
{
    Fp8Recipe *r = o->fp8;
    Ctx *c = ps->ctx;
    if (!r || !r->codes || c->device != DEV_CUDA) return 0;
#ifdef CTRAIN_CUDA
    /* current: built for today's bindings; same: and for this step's layers */
    int current = o->jobs && o->jobs_version == r->codes_version, same = current;
    for (int i = 0; same && i < r->layers; i++) same = r->codes[i].used == r->codes[i].tabled;
    if (!same && !c->capturing) {   /* a capture keeps the table of the eager steps before */
        jobs_build(o, ps, r);
        current = 1;
    }
    if (!current) {   /* bindings move only outside captures, where the table follows */
        r->codes_ready = 0;
        return 0;
    }
    for (int i = 0; i < r->layers; i++) r->codes[i].used = 0;
    adamw_step_begin(o, ps, skip);
    adamw_jobs_step_cuda(ps->data, o->m, o->v, p_lowp, lowp_t, ps->grad, o->jobs, o->njobs,
                         o->nblocks, lr_dev, o->st, o->beta1, o->beta2, o->eps, skip,
                         c->stream);
    r->codes_ready = 1;
    return 1;
#else
    (void)lr_dev; (void)skip; (void)p_lowp; (void)lowp_t;
    return 0;
#endif
}

void adamw_step_lr(AdamW *o, ParamSet *ps, const float *lr_dev, const int *skip, void *p_lowp,
                   DType lowp_t)
{
    Ctx *c = ps->ctx;
    if (step_codes(o, ps, lr_dev, skip, p_lowp, lowp_t)) return;
    CT_ASSERT(c->device != DEV_CPU || !p_lowp, "adamw_step: the low-precision copy is a CUDA feature");
#ifdef CTRAIN_CUDA
    void *stream = (void *)c->stream;
#else
    void *stream = NULL;
#endif
    adamw_step_begin(o, ps, skip);
    /* group ranges: [0, n_decay) with weight decay, [n_decay, total) without */
    adamw_range(o, ps, 0, ps->n_decay, o->weight_decay, lr_dev, skip, p_lowp, lowp_t, stream);
    adamw_range(o, ps, ps->n_decay, ps->total, 0.0, lr_dev, skip, p_lowp, lowp_t, stream);
}

void adamw_step(AdamW *o, ParamSet *ps, float lr, const int *skip, void *p_lowp, DType lowp_t)
{
    mem_set_f32(ps->ctx, o->lr_dev, lr);
    adamw_step_lr(o, ps, o->lr_dev, skip, p_lowp, lowp_t);
}

void adamw_step_range(AdamW *o, ParamSet *ps, size_t begin, size_t end, void *stream)
{
    adamw_range(o, ps, begin, end, end <= ps->n_decay ? o->weight_decay : 0.0, o->lr_dev, NULL,
                ps->lowp, ps->lowp ? ps->lowp_dt : DT_F32, stream);
}

int64_t adamw_steps(const AdamW *o, ParamSet *ps) { return adam_state_steps(ps, o->st); }

void adamw_set_steps(AdamW *o, ParamSet *ps, int64_t step)
{
    adam_state_set_steps(ps, o->st, step, o->beta1, o->beta2, 1);
}

void adamw_free(AdamW *o, ParamSet *ps)
{
    if (o->jobs) mem_free(ps->ctx, o->jobs, (size_t)o->njobs * sizeof(AdamwJob));
    adam_state_free(ps, o->m, o->v, o->st, o->lr_dev);
    memset(o, 0, sizeof *o);
}
