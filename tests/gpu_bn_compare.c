/* gpu_bn_compare.c — batch norm two ways: cuDNN's fused NHWC batch norm
 * (ops/batchnorm_cudnn.h) and our own kernels (ops/batchnorm.h), both
 * against the CPU reference, on ResNet-50's shapes; then a timing table of
 * the two for docs/kernels.md ("batch norm: own kernels vs cuDNN").
 *
 *   gpu_bn_compare [--quick] [--no-check] [--no-time]
 *     --quick     batch 16 instead of 256 on the ResNet shapes (smoke run)
 *     --no-check  skip the correctness pass on the ResNet shapes
 *     --no-time   skip the timing pass
 *
 * Shape letters: x [N, H, W, C], M = N*H*W rows, C channels.
 *
 * Forms (ResNet's three): bn (y = bn(x): the downsample branch), bn_relu
 * (y = relu(bn(x)): after conv1 and conv2 of a bottleneck), bn_add_relu
 * (y = relu(bn(x) + z): after conv3, z the shortcut).
 *
 * Correctness, ResNet-50 shapes (N = 256): 56x56x64, 56x56x256, 28x28x512,
 * 14x14x1024, 7x7x2048, and the BN + ReLU widths 56x56x128, 28x28x128,
 * 14x14x256, 7x7x512, in f32, f16 and bf16, each form, each
 * implementation, one training step:
 *   mean, invstd (cuDNN: saved mean / saved inverse variance), running
 *   mean and variance after the update   elementwise, f32-tight;
 *   y                                    elementwise, tol_atol/rtol(dt);
 *   dx, dz                               elementwise, tol(dt), with at most
 *                                        a handful of elements allowed out
 *                                        (see below), plus a relative norm;
 *   dgamma, dbeta (sums over M ~ 10^6)   relative norm per dtype.
 * The CPU backward reads the implementation's own y for the ReLU mask (as
 * tests/gpu_batchnorm.c does), so both sides mask the same elements — up
 * to cuDNN keeping its mask in the reserve space: an f16 pre-activation in
 * (0, 3e-8) rounds to y = 0 while cuDNN's mask says "positive", a few
 * elements in 10^8, hence the allowance; in f32 an element with y a hair
 * above 0 may be masked. For those elements (y or its reference in (0, 1e-5])
 * the reference follows the mask the implementation's dx shows, its sums
 * included (relu_mask_as_seen): at batch 16 four such elements moved dbeta
 * past the sums' tolerance.
 * Small shapes (M = 16 ... 392, C = 6 ... 64), cuDNN only: the running
 * variance is the UNBIASED one (M = 16 tells M/(M-1) apart), accumulation
 * (dx, dz, dgamma, dbeta with += in every mix) and outputs not wanted
 * (NULL), the eval forward, and the declines (z with C % 4 != 0, eval with
 * ReLU: nothing written, running stats untouched).
 * cuDNN declining a configuration is a note, not a failure — except in
 * f16 with C % 4 == 0, cuDNN's documented fast path, which must run.
 * Also noted (not checked): whether a second identical step gives the same
 * bits (statistics and parameter gradients) for each implementation.
 *
 * Timing: for each shape, dtype and form, the median of ITERS calls after
 * WARMUP, CUDA events between consecutive calls queued back to back on the
 * context's stream (the host runs ahead, so host-side call overhead is not
 * counted unless the GPU would wait for it). Forward = training forward
 * (ours: statistics + apply; cuDNN: one call). Backward = training
 * backward, writing (not accumulating) every gradient. GB/s count the
 * minimum bytes: forward reads x (+ z), writes y; backward reads dy, x
 * (+ y for the ReLU mask), writes dx (+ dz). floor = bytes / 4.3 TB/s (the
 * H200's device copy rate, docs/kernels.md). The table is printed as it goes,
 * then once more as JSON lines ({"bench":"bn_compare",...}). Timing is a
 * measurement, never a pass/fail; check_summary() counts correctness only.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ctx.h"
#include "engine/mem.h"
#include "ops/batchnorm.h"
#include "ops/batchnorm_cudnn.h"
#include "check.h"
#include "gpu_util.h"

#define EPS 1e-5f
#define MOM 0.1f
#define WARMUP 5
#define ITERS 20
#define FLOOR_BYTES_PER_S 4.3e12

typedef struct { int N, H, W, C; } Shape;
typedef struct { const char *name; int hz, relu; } Form;
static const Form forms[3] = {{"bn", 0, 0}, {"bn_relu", 0, 1}, {"bn_add_relu", 1, 1}};
enum { OWN = 0, CUDNN = 1 };
static const char *impl_names[2] = {"own", "cudnn"};

/* ---- small helpers ---- */

static void *dmalloc(size_t bytes)
{
    void *d = NULL;
    CUDA_CHECK(cudaMalloc(&d, bytes ? bytes : 1));
    return d;
}
static void poison(void *d, size_t bytes) { CUDA_CHECK(cudaMemset(d, 0xFF, bytes)); }
/* Setup (cudaMemset, cudaMemcpy) runs on the legacy default stream, which
 * does not order against the context's non-blocking stream: wait for it. */
static void settle(void) { CUDA_CHECK(cudaDeviceSynchronize()); }
static void h2d(void *d, const void *h, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
static void shape_tag(char *buf, size_t len, const Shape *s)
{
    snprintf(buf, len, "%dx%dx%dx%d", s->N, s->H, s->W, s->C);
}

static void expect(const char *name, const void *d, const float *ref, size_t n, DType dt,
                   double atol, double rtol)
{
    float *got = hbuf(n);
    gpu_download(got, d, n, dt);
    check_close(name, got, ref, n, atol, rtol);
    free(got);
}

/* relative-norm tolerance for the parameter gradients (sums over M rows) */
static double sums_rel(DType dt) { return dt == DT_F32 ? 3e-5 : 5e-4; }
/* relative-norm tolerance for dx / dz */
static double grad_rel(DType dt) { return dt == DT_F32 ? 1e-5 : dt == DT_F16 ? 1e-3 : 8e-3; }

/* ---- inputs ---- */

typedef struct Host {
    size_t M, C, n;
    float *x, *z, *dy, *g, *b, *rm0, *rv0; /* f32, not yet rounded to a dtype */
} Host;

/* x with a scale and offset per channel (every channel has its own
 * statistics), z and dy uniform; gamma with mixed signs. */
static Host host_make(const Shape *s)
{
    Host h;
    h.C = (size_t)s->C;
    h.M = (size_t)s->N * s->H * s->W;
    h.n = h.M * h.C;
    h.x = hbuf(h.n);
    h.z = hbuf(h.n);
    h.dy = hbuf(h.n);
    check_fill(h.x, h.n, -1, 1);
    check_fill(h.z, h.n, -1, 1);
    check_fill(h.dy, h.n, -1, 1);
    for (size_t m = 0; m < h.M; m++)
        for (size_t k = 0; k < h.C; k++)
            h.x[m * h.C + k] = h.x[m * h.C + k] * (1.0f + (float)(k % 7)) + 0.1f * (float)(k % 5);
    h.g = hbuf(h.C);
    h.b = hbuf(h.C);
    h.rm0 = hbuf(h.C);
    h.rv0 = hbuf(h.C);
    check_fill(h.g, h.C, 0.5f, 1.5f);
    for (size_t k = 0; k < h.C; k += 3) h.g[k] = -h.g[k];
    check_fill(h.b, h.C, -0.5f, 0.5f);
    check_fill(h.rm0, h.C, -0.5f, 0.5f);
    check_fill(h.rv0, h.C, 0.5f, 2.0f);
    return h;
}

static void host_free(Host *h)
{
    free(h->x); free(h->z); free(h->dy); free(h->g); free(h->b); free(h->rm0); free(h->rv0);
}

/* The activations rounded to dt (the values the GPU reads); f32: the same arrays. */
typedef struct Quant { const float *x, *z, *dy; float *own[3]; } Quant;

static Quant quant_make(const Host *h, DType dt)
{
    Quant q;
    memset(&q, 0, sizeof q);
    if (dt == DT_F32) {
        q.x = h->x; q.z = h->z; q.dy = h->dy;
        return q;
    }
    const float *src[3] = {h->x, h->z, h->dy};
    for (int i = 0; i < 3; i++) {
        q.own[i] = hcopy(src[i], h->n);
        quantize(q.own[i], h->n, dt);
    }
    q.x = q.own[0]; q.z = q.own[1]; q.dy = q.own[2];
    return q;
}

static void quant_free(Quant *q) { for (int i = 0; i < 3; i++) free(q->own[i]); }

/* ---- device buffers of one (shape, dtype) ---- */

typedef struct Dev {
    DType dt;
    size_t M, C, n, nbytes;
    void *x, *z, *dy, *y, *dx, *dz;
    float *gamma, *beta, *rm, *rv, *mean, *invstd, *dg, *db;
    void *scratch;
    size_t sbytes;
} Dev;

static Dev dev_make(const Host *h, const Quant *q, DType dt)
{
    Dev d;
    d.dt = dt;
    d.M = h->M; d.C = h->C; d.n = h->n;
    d.nbytes = d.n * dtype_size(dt);
    d.x = gpu_upload(q->x, d.n, dt);
    d.z = gpu_upload(q->z, d.n, dt);
    d.dy = gpu_upload(q->dy, d.n, dt);
    d.y = dmalloc(d.nbytes);
    d.dx = dmalloc(d.nbytes);
    d.dz = dmalloc(d.nbytes);
    d.gamma = gpu_upload(h->g, d.C, DT_F32);
    d.beta = gpu_upload(h->b, d.C, DT_F32);
    float **pc[6] = {&d.rm, &d.rv, &d.mean, &d.invstd, &d.dg, &d.db};
    for (int i = 0; i < 6; i++) *pc[i] = dmalloc(d.C * sizeof(float));
    d.sbytes = batchnorm_scratch_bytes(d.M, d.C);
    d.scratch = dmalloc(d.sbytes);
    return d;
}

static void dev_free(Dev *d)
{
    void *p[] = {d->x, d->z, d->dy, d->y, d->dx, d->dz, d->gamma, d->beta, d->rm, d->rv,
                 d->mean, d->invstd, d->dg, d->db, d->scratch};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) dfree(p[i]);
}

/* Fresh running statistics, every output poisoned (NaN). */
static void dev_reset(Dev *d, const Host *h)
{
    h2d(d->rm, h->rm0, d->C * sizeof(float));
    h2d(d->rv, h->rv0, d->C * sizeof(float));
    poison(d->y, d->nbytes);
    poison(d->dx, d->nbytes);
    poison(d->dz, d->nbytes);
    float *pc[4] = {d->mean, d->invstd, d->dg, d->db};
    for (int i = 0; i < 4; i++) poison(pc[i], d->C * sizeof(float));
    settle();
}

/* One (form) of cuDNN: its descriptors and the reserve its forward fills. */
typedef struct Plan {
    BnCudnn p;
    void *reserve;
} Plan;

static void plan_make(Plan *pl, Ctx *c, DType dt, const Shape *s, const Form *f)
{
    batchnorm_cudnn_init(&pl->p, c, dt, s->N, s->H, s->W, s->C, f->hz, f->relu);
    pl->reserve = pl->p.usable && pl->p.reserve_bytes ? dmalloc(pl->p.reserve_bytes) : NULL;
}

static void plan_free(Plan *pl)
{
    dfree(pl->reserve);
    batchnorm_cudnn_free(&pl->p);
}

/* One training forward: 1 when it ran (cuDNN may decline). */
static int run_fwd(Ctx *c, Dev *d, int impl, Plan *pl, const Form *f)
{
    const void *z = f->hz ? d->z : NULL;
    if (impl == OWN) {
        batchnorm_stats_cuda(d->mean, d->invstd, d->rm, d->rv, NULL, d->x, d->dt, MOM, EPS, d->M,
                             d->C, d->scratch, d->sbytes, c->stream);
        batchnorm_forward_cuda(d->y, d->x, z, d->mean, d->invstd, d->gamma, d->beta, d->dt,
                               f->relu, d->M, d->C, c->stream);
        return 1;
    }
    return batchnorm_cudnn_forward_train(c, &pl->p, d->y, d->mean, d->invstd, d->rm, d->rv, d->x,
                                         z, d->gamma, d->beta, MOM, EPS, pl->reserve);
}

/* The training backward of the last forward, writing every gradient. */
static int run_bwd(Ctx *c, Dev *d, int impl, Plan *pl, const Form *f)
{
    void *dz = f->hz ? d->dz : NULL;
    if (impl == OWN) {
        batchnorm_backward_cuda(d->dx, dz, d->dg, d->db, d->dy, d->x, f->relu ? d->y : NULL,
                                d->mean, d->invstd, d->gamma, NULL, d->dt, 1, f->relu, d->M, d->C,
                                0,
                                0, 0, d->scratch, d->sbytes, c->stream);
        return 1;
    }
    return batchnorm_cudnn_backward(c, &pl->p, d->dx, dz, d->dg, d->db, d->dy, d->x, d->y,
                                    d->gamma, d->beta, d->mean, d->invstd, EPS, pl->reserve, 0,
                                    0, 0);
}

/* ---- correctness on one (shape, dtype, form, implementation) ---- */

typedef struct Ref {
    float *mean, *invstd, *rm, *rv;       /* [C] */
    float *yref, *yh, *got, *dxr, *dzr;   /* [n] */
    float *dgr, *dbr;                     /* [C] */
} Ref;

static int det_cases[2], det_same[2];

/* Raw bytes of the four per-channel results (statistics and parameter
 * gradients), for the "same bits twice" note. */
static void *snap_channels(const Dev *d)
{
    size_t b = d->C * sizeof(float);
    char *h = malloc(4 * b);
    CUDA_CHECK(cudaDeviceSynchronize());
    const float *src[4] = {d->mean, d->invstd, d->dg, d->db};
    for (int i = 0; i < 4; i++)
        CUDA_CHECK(cudaMemcpy(h + i * b, src[i], b, cudaMemcpyDeviceToHost));
    return h;
}

/* ReLU forms: an implementation may take an element's ReLU mask apart from
 * the y it stored. In f32 cuDNN masks an element whose stored y is a hair
 * above 0 (its mask comes from its reserve space, rounded apart from y: 1
 * element of 2 x 10^8 at 256x56x56x256, H200, 2026-11-30); in f16 a
 * pre-activation in (0, 3e-8) rounds to y = 0 while cuDNN's mask passes it (a
 * few elements in 10^8: at batch 16 four of them moved dbeta of 16x14x14x1024
 * by 1.1e-3 relative, H100, 2026-12-07). The ambiguous elements: a stored y in
 * (0, 1e-5], or a stored y of 0 where the reference's y is in (0, 1e-5]. For
 * each, the reference takes the mask the implementation's dx shows (closer to
 * the reference with that element's mask flipped, or as it is), and is
 * recomputed with it, dgamma and dbeta included; every other element keeps
 * y > 0 as its mask. r->got holds the implementation's dx. */
static int relu_ambiguous(const Ref *r, size_t i)
{
    const float y = r->yh[i];
    return (y > 0.0f && y <= 1e-5f) || (y == 0.0f && r->yref[i] > 0.0f && r->yref[i] <= 1e-5f);
}

static void relu_mask_as_seen(Ref *r, const Quant *q, const Host *h, const Form *f, const Dev *d)
{
    const size_t n = d->n, C = d->C, M = d->M;
    size_t amb = 0;
    for (size_t i = 0; i < n; i++) amb += relu_ambiguous(r, i);
    if (!amb) return;
    float *ym = malloc(n * sizeof(float)), *dxm = malloc(n * sizeof(float));
    float *dzm = f->hz ? malloc(n * sizeof(float)) : NULL, *dg = hbuf(C), *db = hbuf(C);
    /* every ambiguous element's mask flipped: passed (y 1) where y is 0, else masked */
    for (size_t i = 0; i < n; i++)
        ym[i] = !relu_ambiguous(r, i) ? r->yh[i] : r->yh[i] > 0.0f ? 0.0f : 1.0f;
    batchnorm_backward_cpu(dxm, dzm, dg, db, q->dy, q->x, ym, r->mean, r->invstd, h->g, NULL, 1,
                           1, M, C,
                           0, 0, 0);
    size_t flipped = 0;
    for (size_t i = 0; i < n; i++) {
        if (!relu_ambiguous(r, i)) continue;
        const int as_flipped = fabsf(r->got[i] - dxm[i]) < fabsf(r->got[i] - r->dxr[i]);
        if (!as_flipped) ym[i] = r->yh[i];
        flipped += as_flipped;
    }
    if (flipped)
        batchnorm_backward_cpu(r->dxr, f->hz ? r->dzr : NULL, r->dgr, r->dbr, q->dy, q->x, ym,
                               r->mean, r->invstd, h->g, NULL, 1, 1, M, C, 0, 0, 0);
    printf("  note %s: %zu of %zu elements with the ReLU's mask ambiguous (y or its reference "
           "in (0, 1e-5]), %zu of them taken the other way by the implementation\n", f->name,
           amb, n, flipped);
    free(ym); free(dxm); free(dzm); free(dg); free(db);
}

static void check_impl(Ctx *c, Dev *d, const Host *h, const Quant *q, Ref *r, Plan *pl, int impl,
                       const Form *f, const char *tag, int bwd_ref_ready)
{
    char name[224];
    const DType dt = d->dt;
    const char *in = impl_names[impl];
    const size_t n = d->n, C = d->C, M = d->M;
    dev_reset(d, h);
    if (!run_fwd(c, d, impl, pl, f)) {
        int must = dt == DT_F16 && C % 4 == 0;
        snprintf(name, sizeof name, "bn_cmp.cudnn.runs.%s.%s", tag, f->name);
        if (must)
            check_true(name, 0, "cuDNN declined its documented f16 NHWC path: %s", pl->p.why);
        else
            printf("  note %s %s: cuDNN declined the forward (%s); our kernels would run\n", tag,
                   f->name, pl->p.why);
        return;
    }
    /* statistics: f32 sums over ~10^6 rows against the double reference */
    snprintf(name, sizeof name, "bn_cmp.%s.mean.%s.%s", in, tag, f->name);
    expect(name, d->mean, r->mean, C, DT_F32, 1e-4, 1e-5);
    snprintf(name, sizeof name, "bn_cmp.%s.invstd.%s.%s", in, tag, f->name);
    expect(name, d->invstd, r->invstd, C, DT_F32, 0, 1e-4);
    snprintf(name, sizeof name, "bn_cmp.%s.running_mean.%s.%s", in, tag, f->name);
    expect(name, d->rm, r->rm, C, DT_F32, 1e-5, 1e-4);
    snprintf(name, sizeof name, "bn_cmp.%s.running_var.%s.%s", in, tag, f->name);
    expect(name, d->rv, r->rv, C, DT_F32, 1e-6, 1e-4);
    /* y against the exact statistics; f32 allows the implementation's own
     * statistics error (~1e-6 relative) on |xhat gamma| up to ~4 */
    gpu_download(r->yh, d->y, n, dt);
    snprintf(name, sizeof name, "bn_cmp.%s.y.%s.%s", in, tag, f->name);
    check_close(name, r->yh, r->yref, n, tol_atol(dt) + (dt == DT_F32 ? 4e-5 : 0), tol_rtol(dt));

    /* backward reference: the exact statistics, this implementation's y for
     * the mask (the plain form does not read y: computed once) */
    if (!bwd_ref_ready || f->relu)
        batchnorm_backward_cpu(r->dxr, f->hz ? r->dzr : NULL, r->dgr, r->dbr, q->dy, q->x, r->yh,
                               r->mean, r->invstd, h->g, NULL, 1, f->relu, M, C, 0, 0, 0);
    if (!run_bwd(c, d, impl, pl, f)) {
        printf("  note %s %s: cuDNN declined the backward (%s)\n", tag, f->name, pl->p.why);
        return;
    }
    size_t allow = f->relu && dt == DT_F16 ? 8 + n / 20000000 : 0;
    gpu_download(r->got, d->dx, n, dt);
    if (f->relu) relu_mask_as_seen(r, q, h, f, d);
    snprintf(name, sizeof name, "bn_cmp.%s.dx.%s.%s", in, tag, f->name);
    check_close_most(name, r->got, r->dxr, n, tol_atol(dt), tol_rtol(dt), allow);
    snprintf(name, sizeof name, "bn_cmp.%s.dx_norm.%s.%s", in, tag, f->name);
    check_rel_norm(name, r->got, r->dxr, n, grad_rel(dt));
    if (f->hz) {
        gpu_download(r->got, d->dz, n, dt);
        snprintf(name, sizeof name, "bn_cmp.%s.dz.%s.%s", in, tag, f->name);
        check_close_most(name, r->got, r->dzr, n, tol_atol(dt), tol_rtol(dt), allow);
    }
    float *g = hbuf(C);
    gpu_download(g, d->dg, C, DT_F32);
    snprintf(name, sizeof name, "bn_cmp.%s.dgamma.%s.%s", in, tag, f->name);
    check_rel_norm(name, g, r->dgr, C, sums_rel(dt));
    gpu_download(g, d->db, C, DT_F32);
    snprintf(name, sizeof name, "bn_cmp.%s.dbeta.%s.%s", in, tag, f->name);
    check_rel_norm(name, g, r->dbr, C, sums_rel(dt));
    free(g);

    /* the same step again: same bits? (a note, not a check) */
    void *a = snap_channels(d);
    if (run_fwd(c, d, impl, pl, f) && run_bwd(c, d, impl, pl, f)) {
        void *b = snap_channels(d);
        det_cases[impl]++;
        int same = memcmp(a, b, 4 * C * sizeof(float)) == 0;
        det_same[impl] += same;
        if (!same) printf("  note %s %s %s: a second identical step gave different bits\n", in,
                          tag, f->name);
        free(b);
    }
    free(a);
}

static void correctness(Ctx *c, const Shape *s, const Host *h, DType dt, Dev *d, const Quant *q,
                        Plan pl[3])
{
    char tag[96], st[48];
    shape_tag(st, sizeof st, s);
    snprintf(tag, sizeof tag, "%s.%s", dtype_name(dt), st);
    const size_t n = h->n, C = h->C;
    Ref r;
    r.mean = hbuf(C); r.invstd = hbuf(C); r.rm = hcopy(h->rm0, C); r.rv = hcopy(h->rv0, C);
    r.dgr = hbuf(C); r.dbr = hbuf(C);
    r.yref = hbuf(n); r.yh = hbuf(n); r.got = hbuf(n); r.dxr = hbuf(n); r.dzr = hbuf(n);
    batchnorm_stats_cpu(r.mean, r.invstd, r.rm, r.rv, NULL, q->x, MOM, EPS, h->M, C);
    for (int fi = 0; fi < 3; fi++) {
        const Form *f = &forms[fi];
        batchnorm_forward_cpu(r.yref, q->x, f->hz ? q->z : NULL, r.mean, r.invstd, h->g, h->b,
                              f->relu, h->M, C);
        for (int impl = OWN; impl <= CUDNN; impl++)
            check_impl(c, d, h, q, &r, &pl[fi], impl, f, tag, impl == CUDNN);
    }
    free(r.mean); free(r.invstd); free(r.rm); free(r.rv); free(r.dgr); free(r.dbr);
    free(r.yref); free(r.yh); free(r.got); free(r.dxr); free(r.dzr);
}

/* ---- timing ---- */

typedef struct Row {
    Shape s;
    DType dt;
    int form;
    double fwd_bytes, bwd_bytes;
    double us[2][2]; /* [impl][0 fwd, 1 bwd], < 0 when declined */
} Row;

/* Median microseconds of ITERS calls after WARMUP, all queued back to back;
 * -1 when the implementation declined. */
static double median_us(Ctx *c, Dev *d, int impl, Plan *pl, const Form *f, int bwd)
{
    cudaEvent_t ev[ITERS + 1];
    for (int i = 0; i <= ITERS; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    /* the backward needs its own forward's y, statistics and reserve */
    int ok = bwd ? run_fwd(c, d, impl, pl, f) : 1;
    for (int i = 0; ok && i < WARMUP; i++)
        ok = bwd ? run_bwd(c, d, impl, pl, f) : run_fwd(c, d, impl, pl, f);
    for (int i = 0; ok && i < ITERS; i++) {
        CUDA_CHECK(cudaEventRecord(ev[i], c->stream));
        ok = bwd ? run_bwd(c, d, impl, pl, f) : run_fwd(c, d, impl, pl, f);
    }
    double med = -1.0;
    if (ok) {
        CUDA_CHECK(cudaEventRecord(ev[ITERS], c->stream));
        CUDA_CHECK(cudaEventSynchronize(ev[ITERS]));
        float t[ITERS];
        for (int i = 0; i < ITERS; i++) CUDA_CHECK(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]));
        qsort(t, ITERS, sizeof t[0], gpu_cmp_float);
        med = 1e3 * 0.5 * ((double)t[ITERS / 2 - 1] + (double)t[ITERS / 2]);
    }
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    for (int i = 0; i <= ITERS; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
    return med;
}

static void print_header(void)
{
    printf("\n%-16s %-4s %-11s | %-38s | %-38s\n", "shape NxHxWxC", "type", "form",
           "forward: floor  own (GB/s)  cudnn (GB/s)", "backward: floor  own (GB/s)  cudnn (GB/s)");
}

static void print_cell(double us, double bytes)
{
    if (us < 0) printf(" %8s %5s", "declined", "");
    else printf(" %8.1f %5.0f", us, bytes / (us * 1e-6) / 1e9);
}

static void print_row(const Row *w)
{
    char st[48];
    shape_tag(st, sizeof st, &w->s);
    printf("%-16s %-4s %-11s |", st, dtype_name(w->dt), forms[w->form].name);
    printf(" %7.1f", w->fwd_bytes / FLOOR_BYTES_PER_S * 1e6);
    print_cell(w->us[OWN][0], w->fwd_bytes);
    print_cell(w->us[CUDNN][0], w->fwd_bytes);
    printf(" | %7.1f", w->bwd_bytes / FLOOR_BYTES_PER_S * 1e6);
    print_cell(w->us[OWN][1], w->bwd_bytes);
    print_cell(w->us[CUDNN][1], w->bwd_bytes);
    printf("\n");
    fflush(stdout);
}

static void timing(Ctx *c, const Shape *s, DType dt, Dev *d, const Host *h, Plan pl[3], Row *rows,
                   int *nrows)
{
    dev_reset(d, h);
    for (int fi = 0; fi < 3; fi++) {
        const Form *f = &forms[fi];
        Row *w = &rows[(*nrows)++];
        w->s = *s;
        w->dt = dt;
        w->form = fi;
        double es = (double)dtype_size(dt), n = (double)d->n;
        w->fwd_bytes = n * es * (2 + f->hz);
        w->bwd_bytes = n * es * (3 + f->relu + f->hz);
        for (int impl = OWN; impl <= CUDNN; impl++)
            for (int bwd = 0; bwd < 2; bwd++)
                w->us[impl][bwd] = median_us(c, d, impl, &pl[fi], f, bwd);
        print_row(w);
    }
}

static void print_json(const Row *rows, int nrows, const char *device, size_t cudnn_version)
{
    printf("\n");
    for (int i = 0; i < nrows; i++) {
        const Row *w = &rows[i];
        printf("{\"bench\":\"bn_compare\",\"device\":\"%s\",\"cudnn\":%zu,\"N\":%d,\"H\":%d,"
               "\"W\":%d,\"C\":%d,\"dtype\":\"%s\",\"form\":\"%s\",\"warmup\":%d,\"iters\":%d,"
               "\"stat\":\"median\",\"fwd_bytes\":%.0f,\"bwd_bytes\":%.0f,\"floor_fwd_us\":%.2f,"
               "\"floor_bwd_us\":%.2f,\"own_fwd_us\":%.2f,\"cudnn_fwd_us\":%.2f,"
               "\"own_bwd_us\":%.2f,\"cudnn_bwd_us\":%.2f}\n",
               device, cudnn_version, w->s.N, w->s.H, w->s.W, w->s.C, dtype_name(w->dt),
               forms[w->form].name, WARMUP, ITERS, w->fwd_bytes, w->bwd_bytes,
               w->fwd_bytes / FLOOR_BYTES_PER_S * 1e6, w->bwd_bytes / FLOOR_BYTES_PER_S * 1e6,
               w->us[OWN][0], w->us[CUDNN][0], w->us[OWN][1], w->us[CUDNN][1]);
    }
}

/* ---- small shapes: cuDNN's semantics in detail ---- */

static void small_case(Ctx *c, DType dt, const Shape *s)
{
    char tag[96], st[48], name[224];
    shape_tag(st, sizeof st, s);
    snprintf(tag, sizeof tag, "%s.%s", dtype_name(dt), st);
    Host h = host_make(s);
    Quant q = quant_make(&h, dt);
    Dev d = dev_make(&h, &q, dt);
    const size_t n = h.n, C = h.C, M = h.M;
    float *mean = hbuf(C), *invstd = hbuf(C), *rm = hcopy(h.rm0, C), *rv = hcopy(h.rv0, C);
    batchnorm_stats_cpu(mean, invstd, rm, rv, NULL, q.x, MOM, EPS, M, C);
    float *yref = hbuf(n), *yh = hbuf(n);
    float *gx0 = hbuf(n), *gz0 = hbuf(n), *gg0 = hbuf(C), *gb0 = hbuf(C);
    check_fill(gx0, n, -1, 1);
    quantize(gx0, n, dt);
    check_fill(gz0, n, -1, 1);
    quantize(gz0, n, dt);
    check_fill(gg0, C, -1, 1);
    check_fill(gb0, C, -1, 1);

    for (int fi = 0; fi < 3; fi++) {
        const Form *f = &forms[fi];
        Plan pl;
        plan_make(&pl, c, dt, s, f);
        snprintf(name, sizeof name, "bn_cudnn.small.%s.%s", tag, f->name);
        if (f->hz && C % 4 != 0) {
            /* declined up front; nothing is written, running stats untouched */
            dev_reset(&d, &h);
            int ran = batchnorm_cudnn_forward_train(c, &pl.p, d.y, d.mean, d.invstd, d.rm, d.rv,
                                                    d.x, d.z, d.gamma, d.beta, MOM, EPS,
                                                    pl.reserve);
            check_true(name, !pl.p.usable && !ran, "z with C %% 4 != 0 should be declined");
            snprintf(name, sizeof name, "bn_cudnn.small.declined_untouched.%s.%s", tag, f->name);
            expect(name, d.rm, h.rm0, C, DT_F32, 0, 0);
            plan_free(&pl);
            continue;
        }
        dev_reset(&d, &h);
        if (!run_fwd(c, &d, CUDNN, &pl, f)) {
            if (dt == DT_F16 && C % 4 == 0)
                check_true(name, 0, "cuDNN declined its documented f16 NHWC path: %s", pl.p.why);
            else
                printf("  note small %s %s: cuDNN declined (%s)\n", tag, f->name, pl.p.why);
            plan_free(&pl);
            continue;
        }
        snprintf(name, sizeof name, "bn_cudnn.small.mean.%s.%s", tag, f->name);
        expect(name, d.mean, mean, C, DT_F32, 1e-5, 1e-5);
        snprintf(name, sizeof name, "bn_cudnn.small.invstd.%s.%s", tag, f->name);
        expect(name, d.invstd, invstd, C, DT_F32, 0, 1e-5);
        snprintf(name, sizeof name, "bn_cudnn.small.running_mean.%s.%s", tag, f->name);
        expect(name, d.rm, rm, C, DT_F32, 1e-6, 1e-5);
        /* the running variance: unbiased (var M/(M-1)), as PyTorch's */
        {
            float *got = hbuf(C);
            gpu_download(got, d.rv, C, DT_F32);
            double e_unb = 0, e_b = 0;
            for (size_t k = 0; k < C; k++) {
                double unb = (1.0 / ((double)invstd[k] * invstd[k]) - EPS) * M / (M - 1.0);
                double biased = unb * (M - 1.0) / M;
                double r_unb = (1 - MOM) * h.rv0[k] + MOM * unb;
                double r_b = (1 - MOM) * h.rv0[k] + MOM * biased;
                e_unb = fmax(e_unb, fabs(got[k] - r_unb) / r_unb);
                e_b = fmax(e_b, fabs(got[k] - r_b) / r_b);
            }
            snprintf(name, sizeof name, "bn_cudnn.small.running_var_unbiased.%s.%s", tag,
                     f->name);
            /* with M = 16 the two differ by ~0.6% of the update; tell them apart */
            if (M <= 64)
                check_true(name, e_unb < 3e-5 && e_b > 1e-3,
                           "max relative error %.3g against the unbiased update, %.3g against "
                           "the biased one", e_unb, e_b);
            else
                check_true(name, e_unb < 3e-5, "max relative error %.3g (unbiased update)",
                           e_unb);
            free(got);
        }
        batchnorm_forward_cpu(yref, q.x, f->hz ? q.z : NULL, mean, invstd, h.g, h.b, f->relu, M,
                              C);
        gpu_download(yh, d.y, n, dt);
        snprintf(name, sizeof name, "bn_cudnn.small.y.%s.%s", tag, f->name);
        check_close(name, yh, yref, n, tol_atol(dt), tol_rtol(dt));

        /* backward, accumulation mixes and NULL outputs:
         * {accum_x, accum_z, accum_p, dz wanted, dgamma wanted} */
        static const int mixes[5][5] = {
            {0, 0, 0, 1, 1}, {1, 1, 1, 1, 1}, {1, 0, 1, 1, 1}, {0, 1, 0, 1, 1}, {0, 0, 1, 0, 0}};
        for (int k = 0; k < 5; k++) {
            int ax = mixes[k][0], az = mixes[k][1], ap = mixes[k][2];
            int want_dz = f->hz && mixes[k][3], want_dg = mixes[k][4];
            float *rdx = hcopy(gx0, n), *rdz = hcopy(gz0, n);
            float *rdg = hcopy(gg0, C), *rdb = hcopy(gb0, C);
            batchnorm_backward_cpu(rdx, want_dz ? rdz : NULL, want_dg ? rdg : NULL, rdb, q.dy,
                                   q.x, yh, mean, invstd, h.g, NULL, 1, f->relu, M, C, ax, az, ap);
            void *ddx = ax ? gpu_upload(gx0, n, dt) : gpu_alloc_poison(n, dt);
            void *ddz = want_dz ? (az ? gpu_upload(gz0, n, dt) : gpu_alloc_poison(n, dt)) : NULL;
            float *ddg = want_dg ? (ap ? gpu_upload(gg0, C, DT_F32) : gpu_alloc_poison(C, DT_F32))
                                 : NULL;
            float *ddb = ap ? gpu_upload(gb0, C, DT_F32) : gpu_alloc_poison(C, DT_F32);
            settle();
            int ran = batchnorm_cudnn_backward(c, &pl.p, ddx, ddz, ddg, ddb, d.dy, d.x, d.y,
                                               d.gamma, d.beta, d.mean, d.invstd, EPS,
                                               pl.reserve, ax, az, ap);
            char cs[64];
            snprintf(cs, sizeof cs, "ax%d.az%d.ap%d%s%s", ax, az, ap, want_dz ? "" : ".no_dz",
                     want_dg ? "" : ".no_dgamma");
            snprintf(name, sizeof name, "bn_cudnn.small.bwd_ran.%s.%s.%s", cs, tag, f->name);
            if (!ran && !(dt == DT_F16 && C % 4 == 0))
                printf("  note small %s %s %s: cuDNN declined the backward (%s); ours would "
                       "run on cuDNN's saved statistics\n", tag, f->name, cs, pl.p.why);
            else if (check_true(name, ran, "cuDNN declined the backward: %s", pl.p.why)) {
                snprintf(name, sizeof name, "bn_cudnn.small.dx.%s.%s.%s", cs, tag, f->name);
                expect(name, ddx, rdx, n, dt, tol_atol(dt), tol_rtol(dt));
                if (want_dz) {
                    snprintf(name, sizeof name, "bn_cudnn.small.dz.%s.%s.%s", cs, tag, f->name);
                    expect(name, ddz, rdz, n, dt, tol_atol(dt), tol_rtol(dt));
                }
                if (want_dg) {
                    snprintf(name, sizeof name, "bn_cudnn.small.dgamma.%s.%s.%s", cs, tag,
                             f->name);
                    expect(name, ddg, rdg, C, DT_F32, 1e-5 * sqrt((double)M) + 1e-6, 1e-4);
                }
                snprintf(name, sizeof name, "bn_cudnn.small.dbeta.%s.%s.%s", cs, tag, f->name);
                expect(name, ddb, rdb, C, DT_F32, 1e-5 * sqrt((double)M) + 1e-6, 1e-4);
            }
            free(rdx); free(rdz); free(rdg); free(rdb);
            dfree(ddx); dfree(ddz); dfree(ddg); dfree(ddb);
        }
        if (pl.p.no_blend)
            printf("  note small %s %s: cuDNN refused beta = 1 (accumulating gradients); the "
                   "wrapper adds instead\n", tag, f->name);

        /* eval: plain BN through cuDNN's inference call; fused forms decline */
        {
            float *em = hbuf(C), *ei = hbuf(C);
            batchnorm_eval_stats_cpu(em, ei, h.rm0, h.rv0, EPS, C);
            batchnorm_forward_cpu(yref, q.x, NULL, em, ei, h.g, h.b, 0, M, C);
            h2d(d.rm, h.rm0, C * sizeof(float));
            h2d(d.rv, h.rv0, C * sizeof(float));
            poison(d.y, d.nbytes);
            settle();
            int ran = batchnorm_cudnn_forward_eval(c, &pl.p, d.y, d.x, d.gamma, d.beta, d.rm,
                                                   d.rv, EPS);
            snprintf(name, sizeof name, "bn_cudnn.small.eval.%s.%s", tag, f->name);
            if (f->hz || f->relu) {
                check_true(name, !ran, "the eval forward has no fused form: it must decline");
            } else if (check_true(name, ran, "cuDNN declined the eval forward: %s", pl.p.why)) {
                snprintf(name, sizeof name, "bn_cudnn.small.eval_y.%s.%s", tag, f->name);
                expect(name, d.y, yref, n, dt, tol_atol(dt), tol_rtol(dt));
            }
            free(em); free(ei);
        }
        plan_free(&pl);
    }
    free(mean); free(invstd); free(rm); free(rv); free(yref); free(yh);
    free(gx0); free(gz0); free(gg0); free(gb0);
    dev_free(&d);
    quant_free(&q);
    host_free(&h);
}

int main(int argc, char **argv)
{
    int quick = 0, do_check = 1, do_time = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--no-check") == 0) do_check = 0;
        else if (strcmp(argv[i], "--no-time") == 0) do_time = 0;
        else {
            fprintf(stderr, "usage: %s [--quick] [--no-check] [--no-time]\n", argv[0]);
            return 2;
        }
    }
    gpu_require();
    check_seed(20250);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int rt = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    size_t cudnn_version = cudnnGetVersion();
    printf("device %s (sm_%d%d), CUDA runtime %d, cuDNN %zu; eps %g, momentum %g\n", prop.name,
           prop.major, prop.minor, rt, cudnn_version, (double)EPS, (double)MOM);

    /* cuDNN's semantics on small shapes */
    static const Shape small[4] = {{4, 2, 2, 64}, {8, 7, 7, 64}, {2, 5, 5, 36}, {2, 3, 3, 6}};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 4; i++) small_case(&c, gpu_float_types[t], &small[i]);

    /* ResNet-50's batch norms (torchvision, batch 256): the first five after a block's
     * last convolution (BN + add + ReLU) and the downsample branch's, then the widths of a
     * block's first two (BN + ReLU; 56 x 56 x 128 is stage 2's first) */
    const int N = quick ? 16 : 256;
    enum { NSHAPES = 9 };
    const Shape resnet[NSHAPES] = {{N, 56, 56, 64},  {N, 56, 56, 256}, {N, 28, 28, 512},
                                   {N, 14, 14, 1024}, {N, 7, 7, 2048},  {N, 56, 56, 128},
                                   {N, 28, 28, 128},  {N, 14, 14, 256}, {N, 7, 7, 512}};
    Row rows[NSHAPES * 3 * 3];
    int nrows = 0;
    if (do_time) print_header();
    for (int si = 0; si < NSHAPES; si++) {
        const Shape *s = &resnet[si];
        Host h = host_make(s);
        for (int t = 0; t < 3; t++) {
            DType dt = gpu_float_types[t];
            Quant q = quant_make(&h, dt);
            Dev d = dev_make(&h, &q, dt);
            Plan pl[3];
            for (int fi = 0; fi < 3; fi++) plan_make(&pl[fi], &c, dt, s, &forms[fi]);
            if (do_check) correctness(&c, s, &h, dt, &d, &q, pl);
            if (do_time) timing(&c, s, dt, &d, &h, pl, rows, &nrows);
            for (int fi = 0; fi < 3; fi++) plan_free(&pl[fi]);
            dev_free(&d);
            quant_free(&q);
        }
        host_free(&h);
    }
    if (do_check)
        printf("\nsame bits on a second identical step (statistics, dgamma, dbeta): own %d/%d, "
               "cudnn %d/%d\n", det_same[OWN], det_cases[OWN], det_same[CUDNN],
               det_cases[CUDNN]);
    if (do_time) print_json(rows, nrows, prop.name, cudnn_version);
    ctx_free(&c);
    return check_summary();
}
