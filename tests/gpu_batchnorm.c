/* gpu_batchnorm.c — the CUDA batch norm launchers (ops/batchnorm.h) against
 * their CPU references, for f32, f16 and bf16 activations, and the tensor op
 * on a CUDA context against the same op on the CPU (in training the CUDA op
 * runs cuDNN unless CTRAIN_BN=own; tests/gpu_bn_op_cudnn.c compares the two
 * paths directly).
 *
 * Each case: random inputs rounded to the storage dtype (quantize), with a
 * per-channel scale and offset so every channel has its own statistics;
 * outputs poisoned with NaN (gpu_alloc_poison), scratch too (it must not be
 * assumed zero). Compared:
 *   statistics (f32):  mean, invstd, running mean / var — tight (f32 sums in
 *                      a different order than the double reference);
 *   num_batches_tracked — exact (incremented on the device);
 *   y, dx, dz (dt):    tol_atol(dt) + tol_rtol(dt) |ref|;
 *   dgamma, dbeta:     sums over M rows: atol grows like sqrt(M).
 * The backward on both sides reads the same y (the GPU's forward output) and
 * the same mean / invstd, so the ReLU mask is identical. Running the whole
 * step twice must give the same bits (no atomics).
 *
 * Shapes: ResNet's (2,7,7,64), (8,56,56,64), (4,14,14,1024), (4,7,7,2048);
 * 256 rows of C = 3; a million rows of C = 3; C = 33 (a partial channel
 * strip); M = 2; a large common offset (variance without cancellation); and
 * unaligned pointers (the scalar path with C a multiple of the vector width).
 *
 * Shape letters: x [N, H, W, C], M = N*H*W rows, C channels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/batchnorm.h"
#include "ops/ops.h"
#include "check.h"
#include "gpu_util.h"

#define EPS 1e-5f
#define MOM 0.1f

static void expect(const char *name, const void *d, const float *ref, size_t n, DType dt,
                   double atol, double rtol)
{
    float *got = hbuf(n);
    gpu_download(got, d, n, dt);
    check_close(name, got, ref, n, atol, rtol);
    free(got);
}

/* Raw bytes of a device buffer (for the bit-for-bit determinism check). */
static void *dbytes(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

typedef struct Step {
    void *y, *dx, *dz;
    float *mean, *invstd, *rm, *rv, *dgamma, *dbeta;
    int64_t *nbt;
} Step;

/* One training step on the GPU: stats (+ running update), forward, backward
 * (relu, with z). Buffers are freshly poisoned; the running stats start from
 * rm0 / rv0. */
static Step gpu_step(DType dt, const void *dx_in, const void *dz_in, const void *ddy,
                     const float *dgm, const float *dbt, const float *rm0, const float *rv0,
                     size_t M, size_t C)
{
    Step s;
    size_t n = M * C, sb = batchnorm_scratch_bytes(M, C);
    int64_t five = 5;
    void *scratch = gpu_alloc_poison(sb / 4, DT_F32);
    s.y = gpu_alloc_poison(n, dt);
    s.dx = gpu_alloc_poison(n, dt);
    s.dz = gpu_alloc_poison(n, dt);
    s.mean = gpu_alloc_poison(C, DT_F32);
    s.invstd = gpu_alloc_poison(C, DT_F32);
    s.dgamma = gpu_alloc_poison(C, DT_F32);
    s.dbeta = gpu_alloc_poison(C, DT_F32);
    s.rm = gpu_upload(rm0, C, DT_F32);
    s.rv = gpu_upload(rv0, C, DT_F32);
    s.nbt = gpu_upload_raw(&five, sizeof five);
    batchnorm_stats_cuda(s.mean, s.invstd, s.rm, s.rv, s.nbt, dx_in, dt, MOM, EPS, M, C, scratch,
                         sb, 0);
    batchnorm_forward_cuda(s.y, dx_in, dz_in, s.mean, s.invstd, dgm, dbt, dt, 1, M, C, 0);
    batchnorm_backward_cuda(s.dx, s.dz, s.dgamma, s.dbeta, ddy, dx_in, s.y, s.mean, s.invstd, dgm,
                            NULL,
                            dt, 1, 1, M, C, 0, 0, 0, scratch, sb, 0);
    dfree(scratch);
    return s;
}

static void step_free(Step *s)
{
    dfree(s->y); dfree(s->dx); dfree(s->dz); dfree(s->mean); dfree(s->invstd);
    dfree(s->dgamma); dfree(s->dbeta); dfree(s->rm); dfree(s->rv); dfree(s->nbt);
}

/* Sum tolerance for dgamma / dbeta: f32 rounding of an M-term sum. */
static double sum_atol(size_t M) { return 1e-5 * sqrt((double)M) + 1e-6; }

static void test_case(DType dt, int N, int H, int W, int C, float offset, int unaligned,
                      int determinism)
{
    char name[192], tag[80];
    size_t M = (size_t)N * H * W, n = M * C, off = unaligned ? 1 : 0;
    size_t esz = dtype_size(dt), sb = batchnorm_scratch_bytes(M, C);
    snprintf(tag, sizeof tag, "%s.%dx%dx%dx%d%s%s", dtype_name(dt), N, H, W, C,
             offset != 0.0f ? ".offset" : "", unaligned ? ".unaligned" : "");

    /* inputs: x with a per-channel scale and offset, z, dy, and f32 params */
    float *x = hrand(n + off, -1, 1, DT_F32);
    for (size_t m = 0; m < M; m++)
        for (int k = 0; k < C; k++)
            x[off + m * C + k] = offset + x[off + m * C + k] * (1.0f + (float)(k % 7)) + 0.1f * (k % 5);
    quantize(x, n + off, dt);
    float *z = hrand(n + off, -1, 1, dt), *dy = hrand(n + off, -1, 1, dt);
    float *gm = hrand(C, 0.5f, 1.5f, DT_F32), *bt = hrand(C, -0.5f, 0.5f, DT_F32);
    for (int k = 0; k < C; k += 3) gm[k] = -gm[k];
    float *rm0 = hrand(C, -0.5f, 0.5f, DT_F32), *rv0 = hrand(C, 0.5f, 2.0f, DT_F32);
    const float *xh = x + off, *zh = z + off, *dyh = dy + off;

    void *dxin = gpu_upload(x, n + off, dt), *dzin = gpu_upload(z, n + off, dt);
    void *ddy = gpu_upload(dy, n + off, dt);
    float *dgm = gpu_upload(gm, C, DT_F32), *dbt = gpu_upload(bt, C, DT_F32);
    const void *X = (char *)dxin + off * esz, *Z = (char *)dzin + off * esz;
    const void *DY = (char *)ddy + off * esz;

    /* ---- training statistics and running update ---- */
    float *mean = hbuf(C), *invstd = hbuf(C), *rm = hcopy(rm0, C), *rv = hcopy(rv0, C);
    int64_t nbt = 5, gnbt = 0;
    batchnorm_stats_cpu(mean, invstd, rm, rv, &nbt, xh, MOM, EPS, M, C);
    void *scratch = gpu_alloc_poison(sb / 4, DT_F32);
    float *gmean = gpu_alloc_poison(C, DT_F32), *ginv = gpu_alloc_poison(C, DT_F32);
    float *grm = gpu_upload(rm0, C, DT_F32), *grv = gpu_upload(rv0, C, DT_F32);
    int64_t five = 5;
    int64_t *gn = gpu_upload_raw(&five, sizeof five);
    batchnorm_stats_cuda(gmean, ginv, grm, grv, gn, X, dt, MOM, EPS, M, C, scratch, sb, 0);
    snprintf(name, sizeof name, "bn.stats.mean.%s", tag);
    expect(name, gmean, mean, C, DT_F32, 2e-6 * (1.0 + fabs(offset)), 1e-5);
    snprintf(name, sizeof name, "bn.stats.invstd.%s", tag);
    expect(name, ginv, invstd, C, DT_F32, 0, 1e-5);
    snprintf(name, sizeof name, "bn.stats.running_mean.%s", tag);
    expect(name, grm, rm, C, DT_F32, 1e-6 * (1.0 + fabs(offset)), 1e-5);
    snprintf(name, sizeof name, "bn.stats.running_var.%s", tag);
    expect(name, grv, rv, C, DT_F32, 1e-6, 1e-5);
    CUDA_CHECK(cudaMemcpy(&gnbt, gn, sizeof gnbt, cudaMemcpyDeviceToHost));
    snprintf(name, sizeof name, "bn.stats.num_batches_tracked.%s", tag);
    check_true(name, gnbt == 6 && nbt == 6, "gpu %lld cpu %lld, want 6", (long long)gnbt,
               (long long)nbt);

    /* ---- forward: the three ResNet forms, batch statistics ---- */
    /* both sides normalise with the CPU's statistics, so only the apply
     * kernel is compared here */
    float *dmean = gpu_upload(mean, C, DT_F32), *dinv = gpu_upload(invstd, C, DT_F32);
    float *yref = hbuf(n), *ygpu = hbuf(n);
    void *dyout = gpu_alloc_poison(n + off, dt);
    void *Y = (char *)dyout + off * esz;
    static const int forms[3][2] = {{0, 0}, {1, 0}, {1, 1}}; /* (relu, z) */
    for (int f = 0; f < 3; f++) {
        int relu = forms[f][0], hz = forms[f][1];
        batchnorm_forward_cpu(yref, xh, hz ? zh : NULL, mean, invstd, gm, bt, relu, M, C);
        batchnorm_forward_cuda(Y, X, hz ? Z : NULL, dmean, dinv, dgm, dbt, dt, relu, M, C, 0);
        float *got = hbuf(n + off);
        gpu_download(got, dyout, n + off, dt);
        snprintf(name, sizeof name, "bn.fwd.relu%d.z%d.%s", relu, hz, tag);
        check_close(name, got + off, yref, n, tol_atol(dt), tol_rtol(dt));
        if (f == 2) memcpy(ygpu, got + off, n * sizeof(float)); /* y for the backward */
        free(got);
    }

    /* ---- eval statistics ---- */
    {
        float *em = hbuf(C), *ei = hbuf(C);
        batchnorm_eval_stats_cpu(em, ei, rm0, rv0, EPS, C);
        float *drm0 = gpu_upload(rm0, C, DT_F32), *drv0 = gpu_upload(rv0, C, DT_F32);
        float *gem = gpu_alloc_poison(C, DT_F32), *gei = gpu_alloc_poison(C, DT_F32);
        batchnorm_eval_stats_cuda(gem, gei, drm0, drv0, EPS, C, 0);
        snprintf(name, sizeof name, "bn.eval_stats.%s", tag);
        expect(name, gem, em, C, DT_F32, 0, 0);
        snprintf(name, sizeof name, "bn.eval_invstd.%s", tag);
        expect(name, gei, ei, C, DT_F32, 0, 1e-6);
        free(em); free(ei);
        dfree(drm0); dfree(drv0); dfree(gem); dfree(gei);
    }

    /* ---- backward: (training, relu, z, accum) ---- */
    void *dyv = gpu_upload(ygpu, n, dt); /* the same y on both sides */
    static const int cases[4][4] = {{1, 1, 1, 0}, {1, 0, 0, 1}, {0, 1, 1, 1}, {0, 0, 0, 0}};
    float *gx0 = hrand(n, -1, 1, dt), *gz0 = hrand(n, -1, 1, dt);
    float *gg0 = hrand(C, -1, 1, DT_F32), *gb0 = hrand(C, -1, 1, DT_F32);
    for (int k = 0; k < 4; k++) {
        int training = cases[k][0], relu = cases[k][1], hz = cases[k][2], acc = cases[k][3];
        float *rdx = hcopy(gx0, n), *rdz = hcopy(gz0, n), *rdg = hcopy(gg0, C), *rdb = hcopy(gb0,
                           C);
        batchnorm_backward_cpu(rdx, hz ? rdz : NULL, rdg, rdb, dyh, xh, ygpu, mean, invstd, gm,
                               NULL,
                               training, relu, M, C, acc, acc, acc);
        void *ddx = acc ? gpu_upload(gx0, n, dt) : gpu_alloc_poison(n, dt);
        void *ddz = hz ? (acc ? gpu_upload(gz0, n, dt) : gpu_alloc_poison(n, dt)) : NULL;
        float *ddg = acc ? gpu_upload(gg0, C, DT_F32) : gpu_alloc_poison(C, DT_F32);
        float *ddb = acc ? gpu_upload(gb0, C, DT_F32) : gpu_alloc_poison(C, DT_F32);
        batchnorm_backward_cuda(ddx, ddz, ddg, ddb, DY, X, dyv, dmean, dinv, dgm, NULL, dt,
                                training,
                                relu, M, C, acc, acc, acc, scratch, sb, 0);
        char cs[48];
        snprintf(cs, sizeof cs, "train%d.relu%d.z%d.acc%d", training, relu, hz, acc);
        snprintf(name, sizeof name, "bn.bwd.dx.%s.%s", cs, tag);
        expect(name, ddx, rdx, n, dt, tol_atol(dt), tol_rtol(dt));
        if (hz) {
            snprintf(name, sizeof name, "bn.bwd.dz.%s.%s", cs, tag);
            expect(name, ddz, rdz, n, dt, tol_atol(dt), tol_rtol(dt));
        }
        snprintf(name, sizeof name, "bn.bwd.dgamma.%s.%s", cs, tag);
        expect(name, ddg, rdg, C, DT_F32, sum_atol(M), 1e-4);
        snprintf(name, sizeof name, "bn.bwd.dbeta.%s.%s", cs, tag);
        expect(name, ddb, rdb, C, DT_F32, sum_atol(M), 1e-4);
        free(rdx); free(rdz); free(rdg); free(rdb);
        dfree(ddx); if (ddz) dfree(ddz); dfree(ddg); dfree(ddb);
    }

    /* ---- determinism: the whole step twice, bit for bit ---- */
    if (determinism) {
        Step a = gpu_step(dt, X, Z, DY, dgm, dbt, rm0, rv0, M, C);
        Step b = gpu_step(dt, X, Z, DY, dgm, dbt, rm0, rv0, M, C);
        struct { const void *p, *q; size_t bytes; } bufs[] = {
            {a.y, b.y, n * esz}, {a.dx, b.dx, n * esz}, {a.dz, b.dz, n * esz},
            {a.mean, b.mean, C * 4}, {a.invstd, b.invstd, C * 4}, {a.rm, b.rm, C * 4},
            {a.rv, b.rv, C * 4}, {a.dgamma, b.dgamma, C * 4}, {a.dbeta, b.dbeta, C * 4}};
        int same = 1;
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
            void *p = dbytes(bufs[i].p, bufs[i].bytes), *q = dbytes(bufs[i].q, bufs[i].bytes);
            if (memcmp(p, q, bufs[i].bytes) != 0) same = 0;
            free(p); free(q);
        }
        snprintf(name, sizeof name, "bn.deterministic.%s", tag);
        check_true(name, same, "two runs of the same step differ");
        step_free(&a);
        step_free(&b);
    }

    free(x); free(z); free(dy); free(gm); free(bt); free(rm0); free(rv0);
    free(mean); free(invstd); free(rm); free(rv); free(yref); free(ygpu);
    free(gx0); free(gz0); free(gg0); free(gb0);
    dfree(dxin); dfree(dzin); dfree(ddy); dfree(dgm); dfree(dbt); dfree(scratch);
    dfree(gmean); dfree(ginv); dfree(grm); dfree(grv); dfree(gn); dfree(dmean); dfree(dinv);
    dfree(dyout); dfree(dyv);
}

/* ---- the tensor op on CUDA against the tensor op on the CPU ---- */

typedef struct OpOut {
    float *y, *dx, *dz, *dg, *db, *rm, *rv;
    int64_t nbt;
} OpOut;

static OpOut op_run(Ctx *c, DType dt, const float *x, const float *z, const float *w,
                    const float *gm, const float *bt, const float *rm0, const float *rv0,
                    int64_t *shape, int training, int relu, size_t base_check)
{
    OpOut o;
    size_t C = (size_t)shape[3], n = (size_t)(shape[0] * shape[1] * shape[2]) * C;
    size_t base = c->mem.current;
    int64_t five = 5;
    Tensor *tx = tensor_from_f32(c, x, dt, 4, shape), *tz = tensor_from_f32(c, z, dt, 4, shape);
    Tensor *tw = tensor_from_f32(c, w, dt, 4, shape);
    Tensor *tg = tensor_from_f32(c, gm, DT_F32, 1, shape + 3);
    Tensor *tb = tensor_from_f32(c, bt, DT_F32, 1, shape + 3);
    Tensor *trm = tensor_from_f32(c, rm0, DT_F32, 1, shape + 3);
    Tensor *trv = tensor_from_f32(c, rv0, DT_F32, 1, shape + 3);
    Tensor *tn = tensor_from_host(c, &five, DT_I64, 1, (int64_t[]){1});
    tx->requires_grad = tz->requires_grad = tg->requires_grad = tb->requires_grad = 1;
    Tensor *ty = op_batchnorm(c, tx, tg, tb, trm, trv, tn, training, MOM, EPS, tz, relu);
    Tensor *tp = op_mul(c, ty, tw), *loss = op_sum(c, tp);
    ad_backward(c, loss, 1.0f);
    o.y = hbuf(n); o.dx = hbuf(n); o.dz = hbuf(n);
    o.dg = hbuf(C); o.db = hbuf(C); o.rm = hbuf(C); o.rv = hbuf(C);
    tensor_to_f32(o.y, ty);
    tensor_to_f32(o.dx, tx->grad);
    tensor_to_f32(o.dz, tz->grad);
    tensor_to_f32(o.dg, tg->grad);
    tensor_to_f32(o.db, tb->grad);
    tensor_to_f32(o.rm, trm);
    tensor_to_f32(o.rv, trv);
    tensor_to_host(&o.nbt, tn);
    tensor_release(ty); tensor_release(tp); tensor_release(loss);
    tensor_release(tx); tensor_release(tz); tensor_release(tw); tensor_release(tg);
    tensor_release(tb); tensor_release(trm); tensor_release(trv); tensor_release(tn);
    if (base_check)
        check_true("bn.op.cuda.no_leak", c->mem.current == base, "%zu bytes held, base %zu",
                   c->mem.current, base);
    return o;
}

static void op_free(OpOut *o)
{
    free(o->y); free(o->dx); free(o->dz); free(o->dg); free(o->db); free(o->rm); free(o->rv);
}

static void test_op(Ctx *cpu, Ctx *gpu, DType dt, int training)
{
    char name[96];
    int64_t shape[4] = {2, 5, 5, 16};
    size_t C = 16, M = 50, n = M * C;
    float *x = hrand(n, -2, 2, dt), *z = hrand(n, -1, 1, dt), *w = hrand(n, -1, 1, dt);
    float *gm = hrand(C, 0.5f, 1.5f, DT_F32), *bt = hrand(C, -0.5f, 0.5f, DT_F32);
    float *rm0 = hrand(C, -0.5f, 0.5f, DT_F32), *rv0 = hrand(C, 0.5f, 2.0f, DT_F32);
    OpOut a = op_run(cpu, dt, x, z, w, gm, bt, rm0, rv0, shape, training, 1, 0);
    OpOut b = op_run(gpu, dt, x, z, w, gm, bt, rm0, rv0, shape, training, 1, 1);
    const char *mode = training ? "train" : "eval";
    double at = tol_atol(dt), rt = tol_rtol(dt);
    /* the GPU's own y decides its ReLU mask: compare gradients where both
     * forward passes agree clearly on the sign (no element within 1e-2 of 0
     * is expected at these sizes, but rounding in f16 could flip one) */
    snprintf(name, sizeof name, "bn.op.cuda.y.%s.%s", mode, dtype_name(dt));
    check_close(name, b.y, a.y, n, at, rt);
    snprintf(name, sizeof name, "bn.op.cuda.dx.%s.%s", mode, dtype_name(dt));
    check_rel_norm(name, b.dx, a.dx, n, dt == DT_F32 ? 1e-5 : dt == DT_F16 ? 3e-3 : 2e-2);
    snprintf(name, sizeof name, "bn.op.cuda.dz.%s.%s", mode, dtype_name(dt));
    check_rel_norm(name, b.dz, a.dz, n, dt == DT_F32 ? 1e-6 : 1e-3);
    snprintf(name, sizeof name, "bn.op.cuda.dgamma.%s.%s", mode, dtype_name(dt));
    check_close(name, b.dg, a.dg, C, dt == DT_F32 ? 1e-4 : 2e-2, dt == DT_F32 ? 1e-4 : 2e-2);
    snprintf(name, sizeof name, "bn.op.cuda.dbeta.%s.%s", mode, dtype_name(dt));
    check_close(name, b.db, a.db, C, dt == DT_F32 ? 1e-4 : 2e-2, dt == DT_F32 ? 1e-4 : 2e-2);
    snprintf(name, sizeof name, "bn.op.cuda.running.%s.%s", mode, dtype_name(dt));
    check_close(name, b.rm, a.rm, C, 1e-6, 1e-5);
    check_close(name, b.rv, a.rv, C, 1e-6, 1e-5);
    snprintf(name, sizeof name, "bn.op.cuda.nbt.%s.%s", mode, dtype_name(dt));
    check_true(name, a.nbt == b.nbt && b.nbt == (training ? 6 : 5), "cpu %lld gpu %lld",
               (long long)a.nbt, (long long)b.nbt);
    op_free(&a); op_free(&b);
    free(x); free(z); free(w); free(gm); free(bt); free(rm0); free(rv0);
}

/* The backward's sums (dgamma, dbeta) keep their bits when dy and x sit one
 * element off 16-byte alignment: the reduction's layout, so its order,
 * follows from C alone (misaligned pointers get element loads in the same
 * layout, not another kernel shape). relu mode 2 (the unit's), training. */
static void test_sums_alignment(DType dt, size_t M, size_t C)
{
    char name[96];
    size_t n = M * C, es = dtype_size(dt), sb = batchnorm_scratch_bytes(M, C);
    float *x = hrand(n, -2, 2, dt), *dy = hrand(n, -1, 1, dt);
    float *gm = hrand(C, 0.5f, 1.5f, DT_F32), *bt = hrand(C, -0.5f, 0.5f, DT_F32);
    float *mean = hrand(C, -0.1f, 0.1f, DT_F32), *inv = hrand(C, 0.5f, 1.5f, DT_F32);
    /* each activation uploaded twice in one buffer: at 0 and one element on */
    char *dx2 = gpu_alloc_poison(2 * n + 1, dt), *ddy2 = gpu_alloc_poison(2 * n + 1, dt);
    void *hx = malloc(n * es), *hdy = malloc(n * es);
    dtype_convert(hx, dt, x, DT_F32, n);
    dtype_convert(hdy, dt, dy, DT_F32, n);
    CUDA_CHECK(cudaMemcpy(dx2, hx, n * es, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dx2 + (n + 1) * es, hx, n * es, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(ddy2, hdy, n * es, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(ddy2 + (n + 1) * es, hdy, n * es, cudaMemcpyHostToDevice));
    float *dgm = gpu_upload(gm, C, DT_F32), *dbt = gpu_upload(bt, C, DT_F32);
    float *dmean = gpu_upload(mean, C, DT_F32), *dinv = gpu_upload(inv, C, DT_F32);
    float *g[2], *b[2];
    void *scratch = NULL;
    CUDA_CHECK(cudaMalloc(&scratch, sb));
    for (int k = 0; k < 2; k++) {
        size_t off = k ? (n + 1) * es : 0;
        float *dg = gpu_alloc_poison(C, DT_F32), *db = gpu_alloc_poison(C, DT_F32);
        batchnorm_backward_cuda(NULL, NULL, dg, db, ddy2 + off, dx2 + off, NULL, dmean, dinv,
                                dgm, dbt, dt, 1, 2, M, C, 0, 0, 0, scratch, sb, 0);
        g[k] = hbuf(C);
        b[k] = hbuf(C);
        gpu_download(g[k], dg, C, DT_F32);
        gpu_download(b[k], db, C, DT_F32);
        dfree(dg);
        dfree(db);
    }
    snprintf(name, sizeof name, "bn.sums_same_bits_misaligned.%s.C%zu", dtype_name(dt), C);
    check_true(name, !memcmp(g[0], g[1], C * 4) && !memcmp(b[0], b[1], C * 4),
               "dgamma or dbeta differ between aligned and misaligned dy, x");
    for (int k = 0; k < 2; k++) {
        free(g[k]);
        free(b[k]);
    }
    dfree(scratch);
    dfree(dx2); dfree(ddy2); dfree(dgm); dfree(dbt); dfree(dmean); dfree(dinv);
    free(hx); free(hdy); free(x); free(dy); free(gm); free(bt); free(mean); free(inv);
}

int main(void)
{
    gpu_require();
    check_seed(4242);
    for (int t = 0; t < 3; t++) {
        DType dt = gpu_float_types[t];
        test_case(dt, 2, 7, 7, 64, 0.0f, 0, 1);
        test_case(dt, 8, 56, 56, 64, 0.0f, 0, dt == DT_F16);
        test_case(dt, 4, 14, 14, 1024, 0.0f, 0, 0);
        test_case(dt, 4, 7, 7, 2048, 0.0f, 0, 0);
        test_case(dt, 1, 16, 16, 3, 0.0f, 0, 1);
        test_case(dt, 2, 5, 5, 33, 0.0f, 0, 0);
        test_case(dt, 1, 1, 2, 5, 0.0f, 0, 0);
        test_case(dt, 2, 7, 7, 64, 0.0f, 1, 0);
    }
    test_case(DT_F32, 1, 1000003, 1, 3, 0.0f, 0, 1);
    test_case(DT_F32, 4, 28, 28, 128, 50.0f, 0, 0);
    test_case(DT_F16, 4, 28, 28, 128, 50.0f, 0, 0);
    for (int t = 0; t < 3; t++) {
        test_sums_alignment(gpu_float_types[t], 4 * 28 * 28, 64);
        test_sums_alignment(gpu_float_types[t], 999, 16);
    }

    Ctx cpu, gpu;
    ctx_init(&cpu, DEV_CPU, 0, 1);
    ctx_init(&gpu, DEV_CUDA, 0, 1);
    for (int t = 0; t < 3; t++) {
        test_op(&cpu, &gpu, gpu_float_types[t], 1);
        test_op(&cpu, &gpu, gpu_float_types[t], 0);
    }
    ctx_free(&gpu);
    ctx_free(&cpu);
    return check_summary();
}
