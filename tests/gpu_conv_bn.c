/* gpu_conv_bn.c — the conv + batch-norm unit (ops/conv_bn.h) on CUDA:
 *   - against the composition on the same context with our batch-norm
 *     kernels (CTRAIN_BN=own through batchnorm_cudnn_use): the same kernels
 *     in the same order, so z, the gradients of y, gamma, beta and w, the
 *     running statistics, the batch counter and the statistics handed on
 *     are equal bit for bit; also with every gradient added into
 *     (CB_ACCUM: a second backward, a fresh dbeta beside an accumulating
 *     dgamma);
 *   - against the composition with cuDNN's batch norm (the default), and
 *     against the unit on the CPU, within each type's tolerance (most
 *     elements, and the relative norm: a value next to the ReLU's kink may
 *     fall on the other side when the statistics differ in their last bit);
 *   - the batch-norm backward's relu mode 2 (the mask recomputed from x)
 *     against mode 1 (the forward's output read) bit for bit, per type, on
 *     the scalar and the vector path, with and without gamma and beta;
 *   - the fused data gradient's tail without cuDNN: sums taken on the host,
 *     batchnorm_backward_sums_cuda + the dx pass against batch norm's own
 *     backward, training and eval, written and added into;
 *   - the forward keeps one activation of y's size less (plans searched
 *     before it is measured);
 *   - ResNet-50 (narrow): a training step built from the unit and one from
 *     the separate ops with our batch-norm kernels give the same loss,
 *     gradients, running statistics and eval logits bit for bit: f32, with
 *     recompute segments, and bf16 under autocast.
 *   - the fused convolution + statistics (ops/conv_bn_cudnn.h, forced where
 *     cuDNN takes the graph) against the convolution and the moments pass,
 *     bf16 and f16, five ResNet50 shapes (batch 8, the last 4), and three
 *     with outputs of a large mean: y within the type's tolerance, mean and
 *     m2 within y's rounding (fused_case), two runs bit for bit; a refused
 *     shape equal to the separate way; the unit with its prologue, filter
 *     gradient and data gradient (ReLU mask and batch norm's sums in its
 *     epilogue) fused against the unit on its own kernels (gradients added
 *     into); a ResNet-50 bf16 step fused against unfused; each graph form
 *     alone (f16 0-2, bf16 0-1 and GenStats) on a ResNet shape; a second
 *     context takes the first one's kept verdict (the plan store) and
 *     gives the same bits.
 *   - our 1 x 1 kernel with the batch norm around it (ops/conv1x1_bn.h,
 *     forced) against the separate way, as the fused graphs are checked,
 *     with rows that are not a multiple of its tile; in the unit (its
 *     prologue, and the data gradient's twin with the mask and the sums),
 *     and in a ResNet-50 bf16 step (test_own1x1).
 * Shapes: ResNet's 3x3 at 14x14 x 64 channels, its strided 3x3 (28x28 ->
 * 14x14), a 1x1 256 -> 64, and a small odd one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conv_bn_case.h"
#include "engine/mem.h"
#include "gpu_util.h"
#include "models/resnet.h"
#include "ops/batchnorm_cudnn.h"
#include "ops/conv1x1_bn.h"
#include "ops/conv_bn_cudnn.h"

/* appended to the fused cases' tags while test_forms runs one graph form */
static char g_form_tag[16] = "";

static void bits(const char *tag, const char *what, const float *a, const float *b, size_t n)
{
    char name[192];
    snprintf(name, sizeof name, "gpu_conv_bn.%s.%s_bits", tag, what);
    size_t first = n;
    for (size_t i = 0; i < n && a && b; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) { first = i; break; }
    check_true(name, a && b && first == n, "first difference at [%zu] of %zu: %.9g vs %.9g",
               first, n, first < n && a && b ? a[first] : 0.0,
               first < n && a && b ? b[first] : 0.0);
}

/* values within the type's tolerance: activations' gradients allow a few
 * elements out (a ReLU flip) and are held by their norm; sums by norm. z's
 * absolute tolerance scales with its largest value: a convolution's sum
 * in another order differs by about eps sqrt(K) times its partial sums,
 * whose size z's largest values show, so an output that cancels to near 0
 * keeps that error (f32, 3x3x64 taps: ~3e-5 against partial sums of ~7,
 * seen on an H200 in the eval cases: 21 of 50,176 values out). */
static void near(const char *tag, const CbShape *s, const CbOut *u, const CbOut *r, DType dt)
{
    char name[192];
    size_t allow = 8 + u->ny / 20000;
    double atol = tol_atol(dt), rtol = tol_rtol(dt), rel = dt == DT_F32 ? 1e-4 : 2e-2;
    double zmax = 1.0;
    for (size_t i = 0; i < u->nz; i++) zmax = fmax(zmax, fabs((double)r->z[i]));
    snprintf(name, sizeof name, "gpu_conv_bn.%s.z", tag);
    check_close_most(name, u->z, r->z, u->nz, atol * zmax, rtol, allow);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.dy", tag);
    check_close_most(name, u->dy, r->dy, u->ny, atol, rtol, allow);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.dy_norm", tag);
    check_rel_norm(name, u->dy, r->dy, u->ny, rel);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.dw_norm", tag);
    check_rel_norm(name, u->dw, r->dw, u->nw, rel);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.dgamma_norm", tag);
    check_rel_norm(name, u->dgamma, r->dgamma, (size_t)s->C, rel);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.dbeta_norm", tag);
    check_rel_norm(name, u->dbeta, r->dbeta, (size_t)s->C, rel);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.running_mean", tag);
    check_close(name, u->rm, r->rm, (size_t)s->C, 1e-5, 1e-4);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.running_var", tag);
    check_close(name, u->rv, r->rv, (size_t)s->C, 1e-5, 1e-4);
}

static void test_unit(Ctx *g, Ctx *h)
{
    const CbShape shapes[] = {
        {4, 14, 14, 64, 64, 3, 1, 1},
        {4, 28, 28, 64, 64, 3, 2, 1},
        {4, 14, 14, 256, 64, 1, 1, 0},
        {3, 5, 7, 24, 16, 3, 1, 1},
    };
    const DType dts[3] = {DT_F32, DT_F16, DT_BF16};
    static const char *const modes[4] = {"train_given", "train_own", "eval", "train_accum"};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const CbShape *s = &shapes[k];
        for (int d = 0; d < 3; d++) {
            DType dt = dts[d];
            /* the convolution plans of this shape and type searched first,
             * so the workspace they grow is not charged to what is measured */
            batchnorm_cudnn_use(g, 0);
            CbOut warm = cb_run(g, s, dt, 0, 0, 1, 0);
            cb_free(&warm);
            for (int mode = 0; mode < 4; mode++) {
                int training = mode != 2, given = mode == 0 || mode == 3;
                int flags = mode == 3 ? CB_ACCUM : 0;
                char tag[128], name[192];
                snprintf(tag, sizeof tag, "%s.%s.%dx%dx%dx%d_k%d_r%d_s%d", dtype_name(dt),
                         modes[mode], s->N, s->H, s->W, s->C, s->K, s->R, s->stride);
                batchnorm_cudnn_use(g, 0);
                CbOut u = cb_run(g, s, dt, 1, given, training, flags);
                CbOut r = cb_run(g, s, dt, 0, 0, training, flags);
                bits(tag, "z", u.z, r.z, u.nz);
                bits(tag, "dy", u.dy, r.dy, u.ny);
                bits(tag, "dw", u.dw, r.dw, u.nw);
                bits(tag, "dgamma", u.dgamma, r.dgamma, (size_t)s->C);
                bits(tag, "dbeta", u.dbeta, r.dbeta, (size_t)s->C);
                bits(tag, "running_mean", u.rm, r.rm, (size_t)s->C);
                bits(tag, "running_var", u.rv, r.rv, (size_t)s->C);
                snprintf(name, sizeof name, "gpu_conv_bn.%s.nbt", tag);
                check_true(name, u.nbt == r.nbt, "%lld vs %lld", (long long)u.nbt,
                           (long long)r.nbt);
                if (training) bits(tag, "stats_out", u.stats_out, r.stats_out, 2 * (size_t)s->K);
                if (mode == 0) {
                    size_t a_bytes = u.ny * dtype_size(dt);
                    snprintf(name, sizeof name, "gpu_conv_bn.%s.keeps_less", tag);
                    check_true(name, u.held_after_forward + a_bytes <= r.held_after_forward,
                               "unit holds %zu bytes after its forward, composition %zu (a is "
                               "%zu)", u.held_after_forward, r.held_after_forward, a_bytes);
                }
                cb_free(&r);
                if (mode != 3) {
                    /* the composition with cuDNN's batch norm (eval: ours
                     * either way) */
                    char t2[160];
                    batchnorm_cudnn_use(g, 1);
                    long f0, b0, f1, b1;
                    batchnorm_cudnn_runs(g, &f0, &b0);
                    r = cb_run(g, s, dt, 0, 0, training, 0);
                    batchnorm_cudnn_runs(g, &f1, &b1);
                    snprintf(t2, sizeof t2, "%s.vs_cudnn_bn", tag);
                    if (training) {
                        snprintf(name, sizeof name, "gpu_conv_bn.%s.cudnn_ran", t2);
                        check_true(name, f1 > f0 && b1 > b0, "cuDNN's batch norm did not run "
                                   "(forwards %ld -> %ld, backwards %ld -> %ld)", f0, f1, b0, b1);
                    }
                    near(t2, s, &u, &r, dt);
                    cb_free(&r);
                    /* the unit on the CPU */
                    r = cb_run(h, s, dt, 1, given, training, 0);
                    snprintf(t2, sizeof t2, "%s.vs_cpu", tag);
                    near(t2, s, &u, &r, dt);
                    cb_free(&r);
                }
                cb_free(&u);
            }
        }
    }
    batchnorm_cudnn_use(g, -1);
}

static void test_resnet(Ctx *g)
{
    batchnorm_cudnn_use(g, 0);
    for (int v = 0; v < 3; v++) {
        /* 0: f32, 1: f32 with recompute segments, 2: bf16 under autocast */
        static const char *const tags[3] = {"f32", "f32_recompute", "bf16_autocast"};
        g->autocast = v == 2 ? DT_BF16 : DT_F32;
        CbNet u = cb_net_step(g, 50, 16, 64, 1, v == 1), r = cb_net_step(g, 50, 16, 64, 0, v == 1);
        char tag[64], name[128];
        snprintf(tag, sizeof tag, "resnet50.%s", tags[v]);
        snprintf(name, sizeof name, "gpu_conv_bn.%s.loss_bits", tag);
        check_true(name, memcmp(&u.loss, &r.loss, sizeof u.loss) == 0,
                   "loss %.9g (unit) vs %.9g (separate)", u.loss, r.loss);
        bits(tag, "grads", u.grad, r.grad, r.n);
        bits(tag, "running_stats", u.bufs, r.bufs, r.nb);
        bits(tag, "eval_logits", u.logits, r.logits, r.nl);
        cb_net_free(&u);
        cb_net_free(&r);
    }
    g->autocast = DT_F32;
    batchnorm_cudnn_use(g, -1);
}

/* The fused data gradient's tail without cuDNN: g = da masked (the mask of
 * the forward's output), its sums sg = sum g and sgx = sum g xhat taken on
 * the host, then batchnorm_backward_sums_cuda + batchnorm_backward_dx_cuda
 * (relu 0) against batch norm's own backward (relu 2) on the same da:
 * training and eval, written and added into */
static void test_sums_tail(void)
{
    const size_t M = 777, C = 40, n = M * C;
    const DType dt = DT_BF16;
    float *xh = cb_fill(71, n, -1.0f, 1.5f), *dah = cb_fill(72, n, -1.0f, 1.0f);
    float *gh = cb_fill(73, C, 0.5f, 1.5f), *bh = cb_fill(74, C, -0.4f, 0.4f);
    quantize(xh, n, dt);
    quantize(dah, n, dt);
    void *x = gpu_upload(xh, n, dt), *da = gpu_upload(dah, n, dt), *a = gpu_alloc_poison(n, dt);
    float *gm = gpu_upload(gh, C, DT_F32), *bt = gpu_upload(bh, C, DT_F32);
    float *st = gpu_alloc_poison(2 * C, DT_F32);
    size_t sb = batchnorm_scratch_bytes(M, C);
    void *scr = gpu_alloc_poison(sb / 4 + 1, DT_F32);
    batchnorm_stats_cuda(st, st + C, NULL, NULL, NULL, x, dt, 0.1f, 1e-5f, M, C, scr, sb, 0);
    batchnorm_forward_cuda(a, x, NULL, st, st + C, gm, bt, dt, 1, M, C, 0);
    float *ah = hbuf(n), *sth = hbuf(2 * C), *g = hbuf(n);
    gpu_download(ah, a, n, dt);
    gpu_download(sth, st, 2 * C, DT_F32);
    double *sg = calloc(C, sizeof(double)), *sgx = calloc(C, sizeof(double));
    for (size_t m = 0; m < M; m++)
        for (size_t c = 0; c < C; c++) {
            size_t i = m * C + c;
            g[i] = ah[i] > 0.0f ? dah[i] : 0.0f;
            sg[c] += g[i];
            sgx[c] += (double)g[i] * ((double)xh[i] - sth[c]) * sth[C + c];
        }
    float *sums = hbuf(2 * C);
    for (size_t c = 0; c < C; c++) {
        sums[c] = (float)sg[c];
        sums[C + c] = (float)sgx[c];
    }
    void *gd = gpu_upload(g, n, dt);
    float *sd = gpu_upload(sums, 2 * C, DT_F32);
    for (int training = 0; training < 2; training++)
        for (int acc = 0; acc < 2; acc++) {
            /* dgamma and dbeta start from gamma and beta: added into with acc */
            float *p1 = gpu_upload(gh, C, DT_F32), *p1b = gpu_upload(bh, C, DT_F32);
            float *p2 = gpu_upload(gh, C, DT_F32), *p2b = gpu_upload(bh, C, DT_F32);
            void *dx1 = gpu_upload(dah, n, dt), *dx2 = gpu_upload(dah, n, dt);
            float *mm = gpu_alloc_poison(2 * C, DT_F32);
            batchnorm_backward_cuda(dx1, NULL, p1, p1b, da, x, NULL, st, st + C, gm, bt, dt,
                                    training, 2, M, C, acc, 0, acc, scr, sb, 0);
            batchnorm_backward_sums_cuda(mm, mm + C, p2, p2b, sd, sd + C, M, C, acc, 0);
            batchnorm_backward_dx_cuda(dx2, NULL, gd, x, NULL, st, st + C, gm, NULL, mm, mm + C,
                                       dt, training, 0, M, C, acc, 0, 0);
            float *r1 = hbuf(n), *r2 = hbuf(n), *q1 = hbuf(2 * C), *q2 = hbuf(2 * C);
            gpu_download(r1, dx1, n, dt);
            gpu_download(r2, dx2, n, dt);
            gpu_download(q1, p1, C, DT_F32);
            gpu_download(q1 + C, p1b, C, DT_F32);
            gpu_download(q2, p2, C, DT_F32);
            gpu_download(q2 + C, p2b, C, DT_F32);
            char name[96];
            snprintf(name, sizeof name, "gpu_conv_bn.sums_tail.%s%s.dx",
                     training ? "train" : "eval", acc ? ".accum" : "");
            check_close_most(name, r2, r1, n, tol_atol(dt), tol_rtol(dt), 2 + n / 20000);
            snprintf(name, sizeof name, "gpu_conv_bn.sums_tail.%s%s.dgamma_dbeta",
                     training ? "train" : "eval", acc ? ".accum" : "");
            check_close(name, q2, q1, 2 * C, 1e-3, 1e-3);
            free(r1); free(r2); free(q1); free(q2);
            void *all[] = {p1, p1b, p2, p2b, dx1, dx2, mm};
            for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) CUDA_CHECK(cudaFree(all[k]));
        }
    void *all[] = {x, da, a, gm, bt, st, scr, gd, sd};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) CUDA_CHECK(cudaFree(all[k]));
    free(xh); free(dah); free(gh); free(bh); free(ah); free(sth); free(g); free(sg); free(sgx);
    free(sums);
}

/* ---- the fused convolution + statistics (ops/conv_bn_cudnn.h) ---- */

/* op_conv2d_stats with the fused graph forced (where cuDNN takes it) against
 * the convolution and the moments pass. y within the type's tolerance (the
 * two may run different engines). The statistics: the fused sums are of the
 * f32 result (or of the stored y), the separate moments of the stored y, so
 * they differ by y's rounding, u = the type's half ulp, relative: per
 * channel, with r = mean^2 / var and M rows,
 *   |d mean| <= 2 u (|mean| + sd) / sqrt(M) + 1e-4 sd
 *   |d m2| / m2 <= 2e-4 + u^2 (1 + r) + 2 u sqrt(1 + r) / sqrt(M)
 * (the rounding's bias and its noise). positive: x in [0, 1) and w >= 0,
 * outputs of mean ~30 sd: the sum of squares' cancellation. Two forced
 * runs give the same bits (deterministic reductions). */
/* own: our 1 x 1 kernel (ops/conv1x1_bn.h) in place of cuDNN's fused graph */
static void fused_case_by(Ctx *g, const CbShape *s, DType dt, int positive, int own)
{
    char tag[128], name[192];
    snprintf(tag, sizeof tag, "%s%s.%dx%dx%dx%d_k%d_r%d_s%d%s%s", own ? "own1x1." : "",
             dtype_name(dt), s->N, s->H, s->W, s->C, s->K, s->R, s->stride,
             positive ? ".large_mean" : "", g_form_tag);
    size_t nx = (size_t)s->N * s->H * s->W * s->C, nw = (size_t)s->K * s->R * s->R * s->C;
    float *xh = cb_fill(41, nx, positive ? 0.0f : -1.0f, 1.0f);
    float *wh = cb_fill(42, nw, positive ? 0.0f : -0.2f, positive ? 0.2f : 0.25f);
    Tensor *x = tensor_from_f32(g, xh, dt, 4, (int64_t[]){s->N, s->H, s->W, s->C});
    Tensor *w = tensor_from_f32(g, wh, dt, 4, (int64_t[]){s->K, s->R, s->R, s->C});
    int f0, s0, f1, s1;
    conv_bn_cudnn_counts(g, &f0, &s0, NULL);
    long r0 = conv1x1_bn_runs(CONV1X1_FWD);
    Tensor *st[3] = {NULL, NULL, NULL}, *y[3];
    for (int k = 0; k < 3; k++) {   /* fused, fused again, separate: the other way off */
        conv1x1_bn_use(own && k < 2);
        conv_bn_cudnn_use(g, !own && k < 2);
        y[k] = op_conv2d_stats(g, x, w, s->stride, s->pad, &st[k]);
    }
    conv_bn_cudnn_use(g, -1);
    conv1x1_bn_use(0);
    conv_bn_cudnn_counts(g, &f1, &s1, NULL);
    int fused = own ? conv1x1_bn_runs(CONV1X1_FWD) > r0 : f1 > f0;
    printf("  %s: %s\n", tag, fused ? "fused kernel ran" : own ? "not taken: the shape does not "
           "fit the 1 x 1 kernel (the separate way ran)" : "SKIP: cuDNN took no fused graph (the "
           "separate way ran; CTRAIN_LOG=info says why)");
    if (own) {   /* every shape test_own1x1 gives it fits */
        snprintf(name, sizeof name, "gpu_conv_bn.fused.%s.taken", tag);
        check_true(name, fused, "the 1 x 1 kernel did not run for a shape it fits");
    }
    float *yf = cb_read(y[0]), *yf2 = cb_read(y[1]), *yr = cb_read(y[2]);
    float *sf = cb_read(st[0]), *sf2 = cb_read(st[1]), *sr = cb_read(st[2]);
    size_t ny = y[0]->numel, K = (size_t)s->K, M = ny / K;
    snprintf(name, sizeof name, "gpu_conv_bn.fused.%s.y", tag);
    check_close_most(name, yf, yr, ny, tol_atol(dt), tol_rtol(dt), 0);
    size_t dy_bits = 0, ds_bits = 0, first_s = 2 * K;
    for (size_t i = 0; i < ny; i++) dy_bits += memcmp(&yf[i], &yf2[i], 4) != 0;
    for (size_t i = 0; i < 2 * K; i++)
        if (memcmp(&sf[i], &sf2[i], 4) != 0 && ds_bits++ == 0) first_s = i;
    snprintf(name, sizeof name, "gpu_conv_bn.fused.%s.same_bits_twice", tag);
    check_true(name, dy_bits == 0 && ds_bits == 0,
               "two runs of the fused graph differ: %zu of %zu y values, %zu of %zu statistics "
               "(first: %s %zu, %.9g then %.9g)", dy_bits, ny, ds_bits, 2 * K,
               first_s < K ? "mean" : "m2", first_s % (K ? K : 1),
               first_s < 2 * K ? sf[first_s] : 0.0, first_s < 2 * K ? sf2[first_s] : 0.0);
    const double u = dt == DT_BF16 ? 1.0 / 256 : 1.0 / 2048;
    size_t bad_mean = K, bad_m2 = K;
    for (size_t k = 0; k < K; k++) {
        double mean = sr[k], m2 = sr[K + k], sd = sqrt(m2 / (double)M);
        double r = m2 > 0 ? mean * mean / (m2 / (double)M) : 0.0, sq = sqrt((double)M);
        double tm = 2 * u * (fabs(mean) + sd) / sq + 1e-4 * sd + 1e-6;
        double t2 = (2e-4 + u * u * (1 + r) + 2 * u * sqrt(1 + r) / sq) * m2 + 1e-6;
        if (!(fabs(sf[k] - mean) <= tm) && bad_mean == K) bad_mean = k;
        if (!(fabs(sf[K + k] - m2) <= t2) && bad_m2 == K) bad_m2 = k;
    }
    snprintf(name, sizeof name, "gpu_conv_bn.fused.%s.mean", tag);
    check_true(name, bad_mean == K, "channel %zu: mean %.8g fused, %.8g separate (m2 %.8g)",
               bad_mean, bad_mean < K ? sf[bad_mean] : 0.0, bad_mean < K ? sr[bad_mean] : 0.0,
               bad_mean < K ? sr[K + bad_mean] : 0.0);
    snprintf(name, sizeof name, "gpu_conv_bn.fused.%s.m2", tag);
    check_true(name, bad_m2 == K, "channel %zu: m2 %.8g fused, %.8g separate (mean %.8g)", bad_m2,
               bad_m2 < K ? sf[K + bad_m2] : 0.0, bad_m2 < K ? sr[K + bad_m2] : 0.0,
               bad_m2 < K ? sr[bad_m2] : 0.0);
    if (!fused) {
        snprintf(name, sizeof name, "gpu_conv_bn.fused.%s.refused_is_separate", tag);
        check_true(name, memcmp(yf, yr, ny * 4) == 0 && memcmp(sf, sr, 2 * K * 4) == 0,
                   "a shape cuDNN refused gave other values than the separate way");
    }
    free(yf); free(yf2); free(yr); free(sf); free(sf2); free(sr); free(xh); free(wh);
    for (int k = 0; k < 3; k++) {
        tensor_release(y[k]);
        tensor_release(st[k]);
    }
    tensor_release(x);
    tensor_release(w);
}

static void fused_case(Ctx *g, const CbShape *s, DType dt, int positive)
{
    fused_case_by(g, s, dt, positive, 0);
}

/* The unit with its convolution's prologue and its filter gradient fused
 * (forced where cuDNN takes the graphs) against the unit on its own
 * kernels: the forward's activation is y s + b in f32 there, (y - mean)
 * gamma invstd + beta rounded to the storage type here, so values move by
 * the type's rounding and a few ReLU decisions at the kink may flip */
static void fused_unit_case_by(Ctx *g, const CbShape *s, DType dt, int own)
{
    char tag[128], name[192];
    snprintf(tag, sizeof tag, "%s.%s.%dx%dx%dx%d_k%d_r%d_s%d%s", own ? "own1x1_unit" : "fused_unit",
             dtype_name(dt), s->N, s->H, s->W, s->C, s->K, s->R, s->stride, g_form_tag);
    batchnorm_cudnn_use(g, 0);
    int k0[CONV_BN_KINDS], k1[CONV_BN_KINDS];
    conv_bn_cudnn_counts(g, NULL, NULL, k0);
    long r0 = conv1x1_bn_runs(CONV1X1_FWD), d0 = conv1x1_bn_runs(CONV1X1_DGRAD);
    long w0 = conv1x1_bn_runs(CONV1X1_WGRAD);
    conv1x1_bn_use(own);
    conv_bn_cudnn_use(g, !own);
    CbOut f = cb_run(g, s, dt, 1, 1, 1, CB_ACCUM);
    conv1x1_bn_use(0);
    conv_bn_cudnn_use(g, 0);
    CbOut u = cb_run(g, s, dt, 1, 1, 1, CB_ACCUM);
    conv_bn_cudnn_use(g, -1);
    batchnorm_cudnn_use(g, -1);
    conv_bn_cudnn_counts(g, NULL, NULL, k1);
    int fp = own ? conv1x1_bn_runs(CONV1X1_FWD) > r0
                 : k1[CONV_BN_BNRELU_FPROP_STATS] - k0[CONV_BN_BNRELU_FPROP_STATS];
    int fw = own ? conv1x1_bn_runs(CONV1X1_WGRAD) > w0
                 : k1[CONV_BN_BNRELU_WGRAD] - k0[CONV_BN_BNRELU_WGRAD];
    int fd = own ? conv1x1_bn_runs(CONV1X1_DGRAD) > d0
                 : k1[CONV_BN_DGRAD_RELU] - k0[CONV_BN_DGRAD_RELU];
    if (own) {
        /* every kernel runs where the shape fits (the filter gradient's
         * needs K a multiple of 128) */
        int want_w = s->K % 128 == 0;
        snprintf(name, sizeof name, "gpu_conv_bn.%s.taken", tag);
        check_true(name, fp && fd && fw == want_w, "a 1 x 1 kernel did not run as the shape "
                   "asks (forward %d, data gradient %d, filter gradient %d of %d)", fp, fd, fw,
                   want_w);
        if (!fw) bits(tag, "dw", f.dw, u.dw, u.nw);   /* the unit's own either way */
    }
    printf("  %s: forward %s, filter gradient %s, data gradient %s\n", tag,
           fp ? "fused" : "SKIP (not fused)", fw ? "fused" : "SKIP (not fused)",
           fd ? "fused" : "SKIP (not fused)");
    near(tag, s, &f, &u, dt);
    if (!fd) {
        /* the data gradient then does not read the activation, and the
         * mask is recomputed from y either way: the same bits */
        bits(tag, "dy", f.dy, u.dy, u.ny);
        bits(tag, "dgamma", f.dgamma, u.dgamma, (size_t)s->C);
        bits(tag, "dbeta", f.dbeta, u.dbeta, (size_t)s->C);
    }
    bits(tag, "running_mean", f.rm, u.rm, (size_t)s->C);
    bits(tag, "running_var", f.rv, u.rv, (size_t)s->C);
    size_t K = (size_t)s->K;
    double rel = dt == DT_F32 ? 1e-4 : 2e-2;
    snprintf(name, sizeof name, "gpu_conv_bn.%s.stats_out_mean", tag);
    check_rel_norm(name, f.stats_out, u.stats_out, K, rel);
    snprintf(name, sizeof name, "gpu_conv_bn.%s.stats_out_m2", tag);
    check_rel_norm(name, f.stats_out + K, u.stats_out + K, K, rel);
    cb_free(&f);
    cb_free(&u);
}

static void fused_unit_case(Ctx *g, const CbShape *s, DType dt)
{
    fused_unit_case_by(g, s, dt, 0);
}

/* ||a - b|| / ||b|| */
static double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Our 1 x 1 kernel with the batch norm around it (ops/conv1x1_bn.h),
 * forced, against the separate way: the convolution + statistics as
 * fused_case checks cuDNN's graph (y within the type's tolerance, mean and
 * m2 within y's rounding, two runs bit for bit), rows that are not a
 * multiple of the kernel's 128 and both channel slices (K 64 and 128);
 * the unit with the prologue and the data gradient's twin (z, the
 * statistics handed on and the data gradients near, the filter gradient's
 * bits equal); a strided 1 x 1 not taken; a ResNet-50 bf16 step
 * with it against without (both the unit on our batch-norm kernels) */
static void test_own1x1(Ctx *g)
{
    const CbShape shapes[] = {
        {8, 56, 56, 256, 64, 1, 1, 0},  /* layer1's 1x1 in: M 25,088 */
        {8, 56, 56, 64, 256, 1, 1, 0},  /* its 1x1 out */
        {8, 28, 28, 512, 128, 1, 1, 0},
        {3, 7, 7, 64, 256, 1, 1, 0},    /* M 147: a tile's tail */
        {2, 5, 5, 128, 64, 1, 1, 0},    /* M 50: less than one tile */
        {4, 7, 7, 2048, 512, 1, 1, 0},  /* stage 4 (forced: C past 512) */
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        fused_case_by(g, &shapes[k], DT_BF16, 0, 1);
        fused_case_by(g, &shapes[k], DT_F16, 0, 1);
    }
    fused_case_by(g, &shapes[0], DT_BF16, 1, 1);
    fused_case_by(g, &shapes[3], DT_F16, 1, 1);
    for (int k = 0; k < 5; k++) {
        fused_unit_case_by(g, &shapes[k], DT_BF16, 1);
        fused_unit_case_by(g, &shapes[k], DT_F16, 1);
    }
    /* a strided 1 x 1 (the downsample's) does not fit: not taken */
    const CbShape strided = {4, 14, 14, 64, 128, 1, 2, 0};
    long r0 = conv1x1_bn_runs(CONV1X1_FWD), d0 = conv1x1_bn_runs(CONV1X1_DGRAD);
    long w0 = conv1x1_bn_runs(CONV1X1_WGRAD);
    conv1x1_bn_use(1);
    CbOut o = cb_run(g, &strided, DT_BF16, 1, 1, 1, 0);
    conv1x1_bn_use(0);
    check_true("gpu_conv_bn.own1x1.strided_not_taken",
               conv1x1_bn_runs(CONV1X1_FWD) == r0 && conv1x1_bn_runs(CONV1X1_DGRAD) == d0 &&
                   conv1x1_bn_runs(CONV1X1_WGRAD) == w0,
               "a 1 x 1 kernel ran for a stride-2 convolution");
    cb_free(&o);
    /* a ResNet-50 bf16 step, both the unit on our batch-norm kernels, each
     * against the same step in f32: at this net's small batch norms (16 rows
     * a channel at stage 4) bf16's roundings move the gradients by tens of
     * percent whichever way they are taken, so ours must be as close to f32
     * as the library's way is */
    batchnorm_cudnn_use(g, 0);
    conv_bn_cudnn_use(g, 0);
    CbNet r = cb_net_step(g, 50, 16, 64, 1, 0);
    g->autocast = DT_BF16;
    r0 = conv1x1_bn_runs(CONV1X1_FWD);
    d0 = conv1x1_bn_runs(CONV1X1_DGRAD);
    w0 = conv1x1_bn_runs(CONV1X1_WGRAD);
    conv1x1_bn_use(1);
    CbNet f = cb_net_step(g, 50, 16, 64, 1, 0);
    long ran = conv1x1_bn_runs(CONV1X1_FWD) - r0, dran = conv1x1_bn_runs(CONV1X1_DGRAD) - d0;
    long wran = conv1x1_bn_runs(CONV1X1_WGRAD) - w0;
    conv1x1_bn_use(0);
    CbNet u = cb_net_step(g, 50, 16, 64, 1, 0);
    conv_bn_cudnn_use(g, -1);
    batchnorm_cudnn_use(g, -1);
    g->autocast = DT_F32;
    check_true("gpu_conv_bn.own1x1.resnet50_bf16.taken", ran > 0 && dran > 0 && wran > 0,
               "a 1 x 1 kernel never ran in a ResNet-50 step (forward %ld, data gradient %ld, "
               "filter gradient %ld)", ran, dran, wran);
    check_close("gpu_conv_bn.own1x1.resnet50_bf16.loss", &f.loss, &u.loss, 1, 1e-3, 1e-2);
    double eo = rel_err(f.grad, r.grad, r.n), el = rel_err(u.grad, r.grad, r.n);
    check_true("gpu_conv_bn.own1x1.resnet50_bf16.grads", eo <= 1.5 * el + 0.01,
               "gradients %.3g from f32's, the library's way %.3g", eo, el);
    check_rel_norm("gpu_conv_bn.own1x1.resnet50_bf16.running_stats", f.bufs, u.bufs, u.nb, 1e-2);
    check_rel_norm("gpu_conv_bn.own1x1.resnet50_bf16.eval_logits", f.logits, u.logits, u.nl,
                   5e-2);
    printf("  own 1 x 1: %ld forward, %ld data-gradient, %ld filter-gradient runs in the "
           "ResNet-50 step; its gradients %.3g from f32's (relative norm), the library's "
           "%.3g, each other's %.3g\n", ran, dran, wran, eo, el, rel_err(f.grad, u.grad, u.n));
    cb_net_free(&r);
    cb_net_free(&f);
    cb_net_free(&u);
}

/* relu mode 2 of the batch-norm backward kernels (the mask recomputed from
 * x) against mode 1 (read from the forward's y), bit for bit: f32, f16,
 * bf16; C = 33 (the scalar path) and 64 (the vector path); with and
 * without gamma and beta; training and eval */
static void test_relu_mode2(void)
{
    const DType dts[3] = {DT_F32, DT_F16, DT_BF16};
    const size_t Cs[2] = {33, 64}, M = 517;
    for (int d = 0; d < 3; d++)
        for (int ci = 0; ci < 2; ci++)
            for (int affine = 0; affine < 2; affine++) {
                DType dt = dts[d];
                size_t C = Cs[ci], n = M * C;
                float *xh = cb_fill(51, n, -1.0f, 1.3f), *dyh = cb_fill(52, n, -1.0f, 1.0f);
                float *gh = cb_fill(53, C, 0.5f, 1.5f), *bh = cb_fill(54, C, -0.4f, 0.4f);
                quantize(xh, n, dt);
                quantize(dyh, n, dt);
                void *x = gpu_upload(xh, n, dt), *dy = gpu_upload(dyh, n, dt);
                void *y = gpu_alloc_poison(n, dt), *dx1 = gpu_alloc_poison(n, dt);
                void *dx2 = gpu_alloc_poison(n, dt);
                float *gm = affine ? gpu_upload(gh, C, DT_F32) : NULL;
                float *bt = affine ? gpu_upload(bh, C, DT_F32) : NULL;
                float *st = gpu_alloc_poison(2 * C, DT_F32), *p1 = gpu_alloc_poison(2 * C, DT_F32),
                      *p2 = gpu_alloc_poison(2 * C, DT_F32);
                size_t sb = batchnorm_scratch_bytes(M, C);
                void *scr = gpu_alloc_poison(sb / 4 + 1, DT_F32);
                batchnorm_stats_cuda(st, st + C, NULL, NULL, NULL, x, dt, 0.1f, 1e-5f, M, C, scr,
                                     sb, 0);
                batchnorm_forward_cuda(y, x, NULL, st, st + C, gm, bt, dt, 1, M, C, 0);
                for (int training = 0; training < 2; training++) {
                    batchnorm_backward_cuda(dx1, NULL, p1, p1 + C, dy, x, y, st, st + C, gm, NULL,
                                            dt, training, 1, M, C, 0, 0, 0, scr, sb, 0);
                    batchnorm_backward_cuda(dx2, NULL, p2, p2 + C, dy, x, NULL, st, st + C, gm,
                                            bt, dt, training, 2, M, C, 0, 0, 0, scr, sb, 0);
                    float *a1 = hbuf(n), *a2 = hbuf(n), *q1 = hbuf(2 * C), *q2 = hbuf(2 * C);
                    gpu_download(a1, dx1, n, dt);
                    gpu_download(a2, dx2, n, dt);
                    gpu_download(q1, p1, 2 * C, DT_F32);
                    gpu_download(q2, p2, 2 * C, DT_F32);
                    char tag[96];
                    snprintf(tag, sizeof tag, "relu_mode2.%s.C%zu%s.%s", dtype_name(dt), C,
                             affine ? "" : ".no_affine", training ? "train" : "eval");
                    bits(tag, "dx", a1, a2, n);
                    bits(tag, "dgamma_dbeta", q1, q2, 2 * C);
                    free(a1); free(a2); free(q1); free(q2);
                }
                void *all[] = {x, dy, y, dx1, dx2, gm, bt, st, p1, p2, scr};
                for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
                    if (all[k]) CUDA_CHECK(cudaFree(all[k]));
                free(xh); free(dyh); free(gh); free(bh);
            }
}

static void test_fused(Ctx *g)
{
    const CbShape shapes[] = {
        {8, 56, 56, 256, 64, 1, 1, 0},   /* ResNet50 layer1's 1x1 in */
        {8, 56, 56, 64, 64, 3, 1, 1},    /* its 3x3 */
        {8, 28, 28, 512, 128, 1, 1, 0},
        {8, 28, 28, 128, 128, 3, 2, 1},  /* a strided 3x3 */
        {4, 7, 7, 2048, 512, 1, 1, 0},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        fused_case(g, &shapes[k], DT_BF16, 0);
        fused_case(g, &shapes[k], DT_F16, 0);
    }
    fused_case(g, &shapes[1], DT_BF16, 1);
    fused_case(g, &shapes[4], DT_BF16, 1);
    fused_case(g, &shapes[1], DT_F16, 1);
    for (int k = 0; k < 4; k++) {
        fused_unit_case(g, &shapes[k], DT_BF16);
        fused_unit_case(g, &shapes[k], DT_F16);
    }
    /* a ResNet-50 bf16 step: fused (forced) against the unit's own kernels */
    g->autocast = DT_BF16;
    conv_bn_cudnn_use(g, 1);
    CbNet f = cb_net_step(g, 50, 16, 64, 1, 0);
    conv_bn_cudnn_use(g, 0);
    CbNet u = cb_net_step(g, 50, 16, 64, 1, 0);
    conv_bn_cudnn_use(g, -1);
    g->autocast = DT_F32;
    check_close("gpu_conv_bn.fused.resnet50_bf16.loss", &f.loss, &u.loss, 1, 1e-3, 1e-2);
    check_rel_norm("gpu_conv_bn.fused.resnet50_bf16.grads", f.grad, u.grad, u.n, 5e-2);
    check_rel_norm("gpu_conv_bn.fused.resnet50_bf16.running_stats", f.bufs, u.bufs, u.nb, 1e-2);
    cb_net_free(&f);
    cb_net_free(&u);
    int nf, ns;
    conv_bn_cudnn_counts(g, &nf, &ns, NULL);
    printf("  fused convolution + statistics: %d shapes fused, %d separate on this card%s\n", nf,
           ns, nf ? "" : " (SKIP: nothing fused was tested)");
}

/* Each graph form alone (conv_bn_cudnn_only_form), whatever wins on the
 * card: the convolution + statistics and the whole unit, f16 (forms 0-2)
 * and bf16 (0-1; 2 for the statistics' GenStats), against the separate
 * way with the same tolerances; which kinds each form fused is printed */
static void test_forms(Ctx *g)
{
    const CbShape s = {8, 14, 14, 64, 64, 3, 1, 1};
    const DType dts[2] = {DT_F16, DT_BF16};
    for (int d = 0; d < 2; d++)
        for (int form = 0; form < 3; form++) {
            snprintf(g_form_tag, sizeof g_form_tag, ".form%d", form);
            conv_bn_cudnn_only_form(g, form);
            fused_case(g, &s, dts[d], 0);
            if (dts[d] == DT_F16 || form < 2) fused_unit_case(g, &s, dts[d]);
            printf("  %s form %d: fused as form %d: conv+stats, %d: forward+stats, %d: filter "
                   "gradient, %d: data gradient (-1: not fused)\n", dtype_name(dts[d]), form,
                   conv_bn_cudnn_last_form(g, CONV_BN_CONV_STATS),
                   conv_bn_cudnn_last_form(g, CONV_BN_BNRELU_FPROP_STATS),
                   conv_bn_cudnn_last_form(g, CONV_BN_BNRELU_WGRAD),
                   conv_bn_cudnn_last_form(g, CONV_BN_DGRAD_RELU));
        }
    conv_bn_cudnn_only_form(g, -1);
    g_form_tag[0] = 0;
}

/* The verdicts kept on disk (family "convbn"): a second context on the
 * same card takes every one of the first one's verdicts without searching
 * (a convolution + statistics, and a whole f16 unit: its forward with
 * statistics and its filter gradient, form 2 among the candidates) and
 * gives the same bits; the file holds the fused verdicts */
static void test_fused_store(void)
{
    char dir[] = "/tmp/ctrain_convbn_XXXXXX";
    if (!mkdtemp(dir)) {
        check_true("gpu_conv_bn.store.tmpdir", 0, "mkdtemp failed");
        return;
    }
    const char *prev = getenv("CTRAIN_PLAN_CACHE");
    char *saved = prev ? strdup(prev) : NULL;
    setenv("CTRAIN_PLAN_CACHE", dir, 1);
    const CbShape sh = {8, 28, 28, 512, 128, 1, 1, 0}, su = {8, 14, 14, 64, 64, 3, 1, 1};
    size_t nx = (size_t)sh.N * sh.H * sh.W * sh.C, nw = (size_t)sh.K * sh.C;
    float *xh = cb_fill(61, nx, -1.0f, 1.0f), *wh = cb_fill(62, nw, -0.2f, 0.25f);
    float *out[2] = {NULL, NULL};
    CbOut unit[2];
    int fused[2] = {0, 0}, searched[2] = {0, 0}, loaded[2] = {0, 0};
    size_t ny = 0;
    for (int k = 0; k < 2; k++) {
        Ctx c;
        ctx_init(&c, DEV_CUDA, 0, 1);
        conv_bn_cudnn_use(&c, 1);
        batchnorm_cudnn_use(&c, 0);
        Tensor *x = tensor_from_f32(&c, xh, DT_BF16, 4, (int64_t[]){sh.N, sh.H, sh.W, sh.C});
        Tensor *w = tensor_from_f32(&c, wh, DT_BF16, 4, (int64_t[]){sh.K, 1, 1, sh.C});
        Tensor *st = NULL;
        Tensor *y = op_conv2d_stats(&c, x, w, 1, 0, &st);
        ny = y->numel;
        out[k] = malloc((ny + 2 * (size_t)sh.K) * sizeof(float));
        tensor_to_f32(out[k], y);
        tensor_to_f32(out[k] + ny, st);
        Tensor *all[4] = {x, w, y, st};
        for (int i = 0; i < 4; i++) tensor_release(all[i]);
        unit[k] = cb_run(&c, &su, DT_F16, 1, 1, 1, 0);
        conv_bn_cudnn_counts(&c, &fused[k], NULL, NULL);
        conv_bn_cudnn_origins(&c, &searched[k], &loaded[k]);
        ctx_free(&c);
    }
    printf("  store: first context %d searched (%d fused), second %d searched, %d taken "
           "from the store%s\n", searched[0], fused[0], searched[1], loaded[1],
           fused[0] ? "" : " (SKIP: nothing fused to keep)");
    check_true("gpu_conv_bn.store.nothing_searched_again",
               searched[0] > 0 && searched[1] == 0 && loaded[1] == searched[0],
               "second context: %d searched, %d loaded (the first searched %d)", searched[1],
               loaded[1], searched[0]);
    check_true("gpu_conv_bn.store.same_verdicts", fused[0] == fused[1],
               "first context fused %d, the second %d", fused[0], fused[1]);
    check_true("gpu_conv_bn.store.same_bits",
               memcmp(out[0], out[1], (ny + 2 * (size_t)sh.K) * sizeof(float)) == 0,
               "the kept plan gave other values than the searched one");
    bits("store.unit", "z", unit[0].z, unit[1].z, unit[0].nz);
    bits("store.unit", "dw", unit[0].dw, unit[1].dw, unit[0].nw);
    bits("store.unit", "stats_out", unit[0].stats_out, unit[1].stats_out, 2 * (size_t)su.K);
    char cmd[256], line[256] = "";
    snprintf(cmd, sizeof cmd, "cat %s/convbn-*.txt 2>/dev/null | grep -c 'fused form='", dir);
    FILE *f = popen(cmd, "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        pclose(f);
    }
    check_true("gpu_conv_bn.store.file", atoi(line) == fused[0],
               "%d fused verdicts in %s/convbn-*.txt, %d fused", atoi(line), dir, fused[0]);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", dir);
    if (saved) {
        setenv("CTRAIN_PLAN_CACHE", saved, 1);
        free(saved);
    } else {
        unsetenv("CTRAIN_PLAN_CACHE");
    }
    cb_free(&unit[0]);
    cb_free(&unit[1]);
    free(out[0]); free(out[1]); free(xh); free(wh);
}

/* `gpu_conv_bn own1x1` runs test_own1x1 alone (seconds, where the whole
 * program compiles cuDNN's fused engines for minutes) */
int main(int argc, char **argv)
{
    gpu_require();
    Ctx g, h;
    ctx_init(&g, DEV_CUDA, 0, 1);
    ctx_init(&h, DEV_CPU, 0, 1);
    g.allow_tf32 = 0;
    conv1x1_bn_use(0);   /* our 1 x 1 kernel only where a test asks for it */
    if (argc > 1 && strcmp(argv[1], "own1x1") == 0) {
        test_own1x1(&g);
        ctx_free(&h);
        ctx_free(&g);
        return check_summary();
    }
    test_relu_mode2();
    test_sums_tail();
    test_unit(&g, &h);
    test_resnet(&g);
    test_fused(&g);
    test_own1x1(&g);
    test_forms(&g);
    test_fused_store();
    ctx_free(&h);
    ctx_free(&g);
    return check_summary();
}
