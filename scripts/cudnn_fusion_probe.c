/* cudnn_fusion_probe.c — which fused convolution graphs of a ResNet50
 * training step cuDNN runs on this card, how fast, and whether they compute
 * what they should. A measurement for docs/kernels.md, not a test.
 *
 *   make build/cudnn_fusion_probe   (CUDA builds; `make` builds it too)
 *   build/cudnn_fusion_probe [N] [--dtype bf16|f16|f32|both|all] [--shapes 1,2,..] [--candidates K]
 *
 * Batch N (default 256), NHWC, each ResNet50 convolution shape below, in
 * bf16 and f16 ("both", the default), or f32 storage with TF32 tensor-core
 * engines allowed (ctrain's tf32 precision, where the batch norms are ~47%
 * of the step: docs/kernels.md), or all three. BN(x) here is the batch
 * norm's apply step x*s + b with per-channel s, b (what the statistics of
 * the previous layer give), z the pre-ReLU value of the forward:
 *   fprop          y = conv(x, w)                            baseline
 *   dgrad          dx = conv^T(dy, w)                        baseline
 *   wgrad          dw = corr(x, dy)                          baseline
 *   fprop+genstats y, and sum[k], sqsum[k] of y (GenStats: the BN statistics
 *                  of the conv's output, for the next batch norm)
 *   fprop+reduce   the same with two reductions of the f32 result (sum of y,
 *                  sum of y*y): GenStats is documented for f16/f32 only
 *   bnrelu+fprop   y = conv(relu(x*s + b), w)                BN apply + ReLU as
 *                  the conv's prologue: the normalised activation is never stored
 *   bnrelu+fprop+reduce   both
 *   bnrelu+wgrad   dw = corr(relu(x*s + b), dy)
 *   dgrad+drelu    dx = conv^T(dy, w) where z > 0, else 0; db = sum of dx per
 *                  channel (the batch norm's bias gradient)
 * Per pattern one line: whether cuDNN took the operations and the graph (else
 * the status), the candidates that ran (runtime-compiled engines allowed, at
 * most K, default 4, each compiled then timed 1 + 3 runs), the fastest
 * time, and the check against the baselines on the same inputs (relative
 * norm of the difference; the sums against the host's sums of the
 * downloaded y). Each fused line also prints what it replaces: its
 * baseline's time plus the separate pass it removes at this card's copy
 * bandwidth (measured here with a device-to-device copy).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "ops/cudnn_graph.h"
#include "probe_util.h"

typedef struct {
    const char *name;
    int H, W, C, K, R, S, stride, pad;
} Shape;

static const Shape shapes[] = {
    {"1x1 256->64 56x56", 56, 56, 256, 64, 1, 1, 1, 0},
    {"3x3 64->64 56x56", 56, 56, 64, 64, 3, 3, 1, 1},
    {"1x1 64->256 56x56", 56, 56, 64, 256, 1, 1, 1, 0},
    {"3x3 256->256 14x14", 14, 14, 256, 256, 3, 3, 1, 1},
    {"1x1 1024->256 14x14", 14, 14, 1024, 256, 1, 1, 1, 0},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

enum { U_X = 1, U_W, U_Y, U_SUM, U_SQ, U_S, U_B, U_DY, U_DW, U_DX, U_Z, U_DB, U_V = 100 };

/* ---- graphs ---- */

/* The descriptors of one graph being built; the first refusal is kept. */
typedef struct {
    CgDesc keep[40];
    int nkeep;
    CgDesc ops[12];
    int nops;
    const char *refused;
} Build;

static CgDesc keep(Build *b, CgDesc d, const char *what)
{
    if (!d) {
        if (!b->refused) b->refused = what;
        return NULL;
    }
    b->keep[b->nkeep++] = d;
    return d;
}

static void op(Build *b, CgDesc d, const char *what)
{
    if (keep(b, d, what)) b->ops[b->nops++] = d;
}

static void build_free(Build *b)
{
    for (int i = b->nkeep - 1; i >= 0; i--) cg_destroy(b->keep[i]);
    memset(b, 0, sizeof *b);
}

/* An NHWC tensor [n, c, h, w] of type t (cuDNN's dims order). */
static CgDesc nhwc(Build *b, int64_t uid, cudnnDataType_t t, int n, int c, int h, int w, int virt)
{
    const int64_t d[4] = {n, c, h, w}, s[4] = {(int64_t)h * w * c, 1, (int64_t)w * c, c};
    return keep(b, cg_tensor_try(uid, t, 4, d, s, 16, virt), "a tensor");
}

/* A per-channel f32 vector [1, c, 1, 1]. */
static CgDesc chan(Build *b, int64_t uid, int c)
{
    const int64_t d[4] = {1, c, 1, 1}, s[4] = {c, 1, c, c};
    return keep(b, cg_tensor_try(uid, CUDNN_DATA_FLOAT, 4, d, s, 16, 0), "a channel vector");
}

/* relu(x * s + b) as virtual tensors, ending in a virtual tensor of type t
 * (the convolution's input). */
static CgDesc bn_relu(Build *b, CgDesc x, int C, int H, int W, int N, cudnnDataType_t t)
{
    CgDesc s = chan(b, U_S, C), bb = chan(b, U_B, C), pw;
    CgDesc v1 = nhwc(b, U_V + 1, CUDNN_DATA_FLOAT, N, C, H, W, 1);
    CgDesc v2 = nhwc(b, U_V + 2, CUDNN_DATA_FLOAT, N, C, H, W, 1);
    /* the activation the conv reads stays f32: fused prologues known to run
     * keep it so (a conv whose virtual input has the storage type is a
     * separate question) */
    CgDesc v3 = nhwc(b, U_V + 3, CUDNN_DATA_FLOAT, N, C, H, W, 1);
    (void)t;
    op(b, cg_pointwise_op(CUDNN_POINTWISE_MUL, x, s, v1, &pw), "pointwise mul (scale)");
    keep(b, pw, "a pointwise descriptor");
    op(b, cg_pointwise_op(CUDNN_POINTWISE_ADD, v1, bb, v2, &pw), "pointwise add (bias)");
    keep(b, pw, "a pointwise descriptor");
    op(b, cg_pointwise_op(CUDNN_POINTWISE_RELU_FWD, v2, NULL, v3, &pw), "pointwise relu");
    keep(b, pw, "a pointwise descriptor");
    return v3;
}

/* ---- the run ---- */

typedef struct {
    Ctx *c;
    const Shape *sh;
    int N, P, Q, ncand;
    DType dt;
    cudnnDataType_t ct;
    double gbps;   /* this card's device copy bandwidth, GB/s of bytes moved (read + write) */
    /* device buffers, by uid */
    void *x, *w, *y, *sum, *sq, *s, *b, *dy, *dw, *dx, *z, *db;
    float base_ms[3];   /* fprop, dgrad, wgrad */
    float *y_base, *dx_base, *dw_base, *dw_bn_base, *y_bn_base;
} Probe;

static void *ptr_of(Probe *p, int64_t uid)
{
    switch (uid) {
    case U_X: return p->x;   case U_W: return p->w;   case U_Y: return p->y;
    case U_SUM: return p->sum; case U_SQ: return p->sq; case U_S: return p->s;
    case U_B: return p->b;   case U_DY: return p->dy; case U_DW: return p->dw;
    case U_DX: return p->dx; case U_Z: return p->z;   case U_DB: return p->db;
    default: return NULL;
    }
}

/* Build the graph of b, search it, run the winner once more; prints the
 * line's head. Returns the time (ms) or -1. */
static float search(Probe *p, Build *b, const char *name, const int64_t *uids, int nu)
{
    printf("  %-22s ", name);
    if (b->refused) {
        printf("refused: cuDNN took no %s\n", b->refused);
        return -1.0f;
    }
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    CgDesc g = cg_graph(p->c->cudnn, b->ops, b->nops, &st);
    if (!g) {
        printf("graph declined: %s\n", cudnnGetErrorString(st));
        return -1.0f;
    }
    CgRule rule = {0};
    rule.runtime_compile = 1;
    rule.max_candidates = p->ncand;
    rule.ws_limit = (size_t)2 << 30;
    /* ctrain's rule first (no reduced-precision reduction, deterministic),
     * then, when nothing passes, non-deterministic engines too */
    rule.forbid_notes = CG_NOTE(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) |
                        CG_NOTE(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    void *ptrs[16];
    for (int i = 0; i < nu; i++) ptrs[i] = ptr_of(p, uids[i]);
    CgPlan plan;
    int ok = cg_search(p->c, g, &rule, uids, ptrs, nu, &plan), tried_det = plan.tried, nondet = 0;
    if (!ok) {
        rule.forbid_notes = CG_NOTE(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION);
        ok = cg_search(p->c, g, &rule, uids, ptrs, nu, &plan);
        nondet = ok;
    }
    if (!ok) {
        printf("no engine ran (%d deterministic candidates, %d in all)\n", tried_det, plan.tried);
        cg_destroy(g);
        return -1.0f;
    }
    /* the reductions' outputs zeroed on the plan's stream first: whether
     * they overwrite or add, the run checked below starts from zero */
    CUDA_CHECK(cudaMemsetAsync(p->sum, 0, (size_t)p->sh->K * 4, p->c->stream));
    CUDA_CHECK(cudaMemsetAsync(p->sq, 0, (size_t)p->sh->K * 4, p->c->stream));
    CUDA_CHECK(cudaMemsetAsync(p->db, 0, (size_t)p->sh->C * 4, p->c->stream));
    cg_execute(p->c, &plan, uids, ptrs, nu);
    CUDA_CHECK(cudaStreamSynchronize(p->c->stream));
    printf("%8.3f ms  engine %3lld, %d candidates%s", (double)plan.ms, (long long)plan.engine,
           plan.tried, nondet ? ", NON-DETERMINISTIC only" : "");
    float ms = plan.ms;
    cg_plan_free(&plan);
    cg_destroy(g);
    return ms;
}

/* The time a separate pass over `bytes` (read + write) takes at the copy rate. */
static double pass_ms(const Probe *p, double bytes) { return bytes / (p->gbps * 1e6); }

static void conv_op(Build *b, int dir, CgDesc x, CgDesc w, CgDesc y, const Shape *sh)
{
    const int64_t pad[2] = {sh->pad, sh->pad}, str[2] = {sh->stride, sh->stride}, dil[2] = {1, 1};
    CgDesc cd = keep(b, cg_conv_desc(2, pad, str, dil), "convolution descriptor");
    if (b->refused) return;
    op(b, cg_conv_op_try(dir, cd, x, w, y, 1.0f, 0.0f), "convolution");
}

/* y = conv(x, w) kept as an f32 virtual result, stored as y (the type t)
 * and reduced twice: sum[k] of y and sq[k] of y*y (reductions asked to be
 * deterministic when det). */
static void fprop_reduce(Build *b, CgDesc x, CgDesc w, CgDesc sum, CgDesc sq, const Shape *sh,
                         int N, int K, int P, int Q, cudnnDataType_t t, int det)
{
    CgDesc acc = nhwc(b, U_V + 10, CUDNN_DATA_FLOAT, N, K, P, Q, 1);
    CgDesc yd = nhwc(b, U_Y, t, N, K, P, Q, 0);
    CgDesc sqv = nhwc(b, U_V + 11, CUDNN_DATA_FLOAT, N, K, P, Q, 1), pw, red;
    conv_op(b, CG_FPROP, x, w, acc, sh);
    op(b, cg_pointwise_op(CUDNN_POINTWISE_IDENTITY, acc, NULL, yd, &pw), "identity (store y)");
    keep(b, pw, "a pointwise descriptor");
    op(b, cg_reduction_op(acc, sum, det, &red), "reduction (sum)");
    keep(b, red, "a reduction descriptor");
    op(b, cg_pointwise_op(CUDNN_POINTWISE_MUL, acc, acc, sqv, &pw), "pointwise mul (square)");
    keep(b, pw, "a pointwise descriptor");
    op(b, cg_reduction_op(sqv, sq, det, &red), "reduction (sum of squares)");
    keep(b, red, "a reduction descriptor");
}

static void run_shape(Probe *p)
{
    const Shape *sh = p->sh;
    const int N = p->N, C = sh->C, K = sh->K, H = sh->H, W = sh->W, P = p->P, Q = p->Q;
    const size_t nx = (size_t)N * H * W * C, ny = (size_t)N * P * Q * K, nw = (size_t)K * sh->R * sh->S * C;
    const size_t es = dtype_size(p->dt);
    const cudnnDataType_t t = p->ct;
    Build b = {0};

    /* baselines */
    CgDesc x0 = nhwc(&b, U_X, t, N, C, H, W, 0);
    const int64_t wd[4] = {K, C, sh->R, sh->S}, wst[4] = {(int64_t)sh->R * sh->S * C, 1, (int64_t)sh->S * C, C};
    CgDesc wdesc = keep(&b, cg_tensor_try(U_W, t, 4, wd, wst, 16, 0), "the filter");
    conv_op(&b, CG_FPROP, x0, wdesc, nhwc(&b, U_Y, t, N, K, P, Q, 0), sh);
    p->base_ms[0] = search(p, &b, "fprop", (const int64_t[]){U_X, U_W, U_Y}, 3);
    if (p->base_ms[0] >= 0) { p->y_base = download(p->y, ny, p->dt); printf("\n"); }
    build_free(&b);

    CgDesc dxd = nhwc(&b, U_DX, t, N, C, H, W, 0);
    wdesc = keep(&b, cg_tensor_try(U_W, t, 4, wd, wst, 16, 0), "the filter");
    conv_op(&b, CG_DGRAD, dxd, wdesc, nhwc(&b, U_DY, t, N, K, P, Q, 0), sh);
    p->base_ms[1] = search(p, &b, "dgrad", (const int64_t[]){U_DX, U_W, U_DY}, 3);
    if (p->base_ms[1] >= 0) { p->dx_base = download(p->dx, nx, p->dt); printf("\n"); }
    build_free(&b);

    CgDesc xd = nhwc(&b, U_X, t, N, C, H, W, 0);
    CgDesc dwd = keep(&b, cg_tensor_try(U_DW, t, 4, wd, wst, 16, 0), "the filter gradient");
    conv_op(&b, CG_WGRAD, xd, dwd, nhwc(&b, U_DY, t, N, K, P, Q, 0), sh);
    p->base_ms[2] = search(p, &b, "wgrad", (const int64_t[]){U_X, U_DW, U_DY}, 3);
    if (p->base_ms[2] >= 0) { p->dw_base = download(p->dw, nw, p->dt); printf("\n"); }
    build_free(&b);

    const double stats_ms = pass_ms(p, (double)ny * es);        /* a pass reading y */
    const double apply_ms = pass_ms(p, 2.0 * (double)nx * es);  /* read x, write relu(bn(x)) */

    /* fprop + GenStats, and fprop + two reductions on the f32 result (asked
     * to be deterministic, then not) */
    for (int variant = 0; variant < 3; variant++) {
        xd = nhwc(&b, U_X, t, N, C, H, W, 0);
        wdesc = keep(&b, cg_tensor_try(U_W, t, 4, wd, wst, 16, 0), "the filter");
        CgDesc sum = chan(&b, U_SUM, K), sq = chan(&b, U_SQ, K);
        if (variant == 0) {
            CgDesc yd = nhwc(&b, U_Y, t, N, K, P, Q, 0);
            conv_op(&b, CG_FPROP, xd, wdesc, yd, sh);
            op(&b, cg_genstats_op(yd, sum, sq), "GenStats operation");
        } else {
            fprop_reduce(&b, xd, wdesc, sum, sq, sh, N, K, P, Q, t, variant == 1);
        }
        static const char *const names[3] = {"fprop+genstats", "fprop+reduce",
                                             "fprop+reduce (any)"};
        float ms = search(p, &b, names[variant], (const int64_t[]){U_X, U_W, U_Y, U_SUM, U_SQ}, 5);
        if (ms >= 0) {
            float *y = download(p->y, ny, p->dt), *s = download(p->sum, K, DT_F32),
                  *q = download(p->sq, K, DT_F32);
            double *hs = calloc((size_t)K, sizeof(double)), *hq = calloc((size_t)K, sizeof(double));
            for (size_t i = 0; i < ny; i++) { hs[i % K] += y[i]; hq[i % K] += (double)y[i] * y[i]; }
            double es_ = 0, eq = 0, rs = 0, rq = 0;
            for (int k = 0; k < K; k++) {
                es_ += (s[k] - hs[k]) * (s[k] - hs[k]); rs += hs[k] * hs[k];
                eq += (q[k] - hq[k]) * (q[k] - hq[k]); rq += hq[k] * hq[k];
            }
            printf("  y vs fprop %.1e, sum %.1e, sqsum %.1e; replaces %.3f + %.3f ms\n",
                   p->y_base ? rel_norm(y, p->y_base, ny) : -1.0, sqrt(es_ / (rs + 1e-30)),
                   sqrt(eq / (rq + 1e-30)), (double)p->base_ms[0], stats_ms);
            free(y); free(s); free(q); free(hs); free(hq);
        }
        build_free(&b);
    }

    /* the prologue's reference input: relu(x * s + b) rounded to the type */
    float *hx = download(p->x, nx, p->dt), *hs = download(p->s, C, DT_F32), *hb = download(p->b, C, DT_F32);
    for (size_t i = 0; i < nx; i++) {
        float v = hx[i] * hs[i % C] + hb[i % C];
        hx[i] = v > 0 ? v : 0;
    }
    void *xbn = upload(hx, nx, p->dt);
    CUDA_CHECK(cudaDeviceSynchronize()); /* the upload before c->stream reads it */
    free(hx);
    {   /* references on xbn with the baseline graphs (fprop, wgrad) */
        void *x0 = p->x;
        p->x = xbn;
        xd = nhwc(&b, U_X, t, N, C, H, W, 0);
        wdesc = keep(&b, cg_tensor_try(U_W, t, 4, wd, wst, 16, 0), "the filter");
        conv_op(&b, CG_FPROP, xd, wdesc, nhwc(&b, U_Y, t, N, K, P, Q, 0), sh);
        if (search(p, &b, "(fprop on bn(x))", (const int64_t[]){U_X, U_W, U_Y}, 3) >= 0) {
            p->y_bn_base = download(p->y, ny, p->dt);
            printf("\n");
        }
        build_free(&b);
        xd = nhwc(&b, U_X, t, N, C, H, W, 0);
        dwd = keep(&b, cg_tensor_try(U_DW, t, 4, wd, wst, 16, 0), "the filter gradient");
        conv_op(&b, CG_WGRAD, xd, dwd, nhwc(&b, U_DY, t, N, K, P, Q, 0), sh);
        if (search(p, &b, "(wgrad on bn(x))", (const int64_t[]){U_X, U_DW, U_DY}, 3) >= 0) {
            p->dw_bn_base = download(p->dw, nw, p->dt);
            printf("\n");
        }
        build_free(&b);
        p->x = x0;
    }

    /* BN apply + ReLU as the prologue of fprop (with and without the statistics) */
    for (int stats = 0; stats < 2; stats++) {
        xd = nhwc(&b, U_X, t, N, C, H, W, 0);
        CgDesc xin = bn_relu(&b, xd, C, H, W, N, t);
        wdesc = keep(&b, cg_tensor_try(U_W, t, 4, wd, wst, 16, 0), "the filter");
        if (!stats) {
            conv_op(&b, CG_FPROP, xin, wdesc, nhwc(&b, U_Y, t, N, K, P, Q, 0), sh);
        } else {
            fprop_reduce(&b, xin, wdesc, chan(&b, U_SUM, K), chan(&b, U_SQ, K), sh, N, K, P, Q, t,
                         1);
        }
        float ms = stats ? search(p, &b, "bnrelu+fprop+reduce",
                                  (const int64_t[]){U_X, U_S, U_B, U_W, U_Y, U_SUM, U_SQ}, 7)
                         : search(p, &b, "bnrelu+fprop", (const int64_t[]){U_X, U_S, U_B, U_W, U_Y}, 5);
        if (ms >= 0) {
            float *y = download(p->y, ny, p->dt);
            printf("  y vs fprop on bn(x) %.1e; replaces %.3f + %.3f ms\n",
                   p->y_bn_base ? rel_norm(y, p->y_bn_base, ny) : -1.0, (double)p->base_ms[0],
                   apply_ms + (stats ? stats_ms : 0.0));
            free(y);
        }
        build_free(&b);
    }

    /* BN apply + ReLU as the prologue of wgrad */
    xd = nhwc(&b, U_X, t, N, C, H, W, 0);
    {
        CgDesc xin = bn_relu(&b, xd, C, H, W, N, t);
        dwd = keep(&b, cg_tensor_try(U_DW, t, 4, wd, wst, 16, 0), "the filter gradient");
        conv_op(&b, CG_WGRAD, xin, dwd, nhwc(&b, U_DY, t, N, K, P, Q, 0), sh);
        float ms = search(p, &b, "bnrelu+wgrad", (const int64_t[]){U_X, U_S, U_B, U_DW, U_DY}, 5);
        if (ms >= 0) {
            float *dw = download(p->dw, nw, p->dt);
            printf("  dw vs wgrad on bn(x) %.1e; replaces %.3f + %.3f ms\n",
                   p->dw_bn_base ? rel_norm(dw, p->dw_bn_base, nw) : -1.0, (double)p->base_ms[2],
                   apply_ms);
            free(dw);
        }
        build_free(&b);
    }

    /* dgrad + ReLU backward + the bias gradient of the batch norm before it */
    {
        CgDesc acc = nhwc(&b, U_V + 20, CUDNN_DATA_FLOAT, N, C, H, W, 1);
        wdesc = keep(&b, cg_tensor_try(U_W, t, 4, wd, wst, 16, 0), "the filter");
        conv_op(&b, CG_DGRAD, acc, wdesc, nhwc(&b, U_DY, t, N, K, P, Q, 0), sh);
        CgDesc zd = nhwc(&b, U_Z, t, N, C, H, W, 0);
        CgDesc dxv = nhwc(&b, U_V + 21, CUDNN_DATA_FLOAT, N, C, H, W, 1);
        CgDesc dxd2 = nhwc(&b, U_DX, t, N, C, H, W, 0), pw, red;
        op(&b, cg_relu_bwd_op(acc, zd, dxv, &pw), "pointwise relu backward");
        keep(&b, pw, "a pointwise descriptor");
        op(&b, cg_pointwise_op(CUDNN_POINTWISE_IDENTITY, dxv, NULL, dxd2, &pw), "identity (store dx)");
        keep(&b, pw, "a pointwise descriptor");
        op(&b, cg_reduction_op(dxv, chan(&b, U_DB, C), 1, &red), "reduction (bias gradient)");
        keep(&b, red, "a reduction descriptor");
        float ms = search(p, &b, "dgrad+drelu+dbias",
                          (const int64_t[]){U_W, U_DY, U_Z, U_DX, U_DB}, 5);
        if (ms >= 0 && !p->dx_base) printf("  (no dgrad baseline to check against)\n");
        if (ms >= 0 && p->dx_base) {
            float *dx = download(p->dx, nx, p->dt), *hz = download(p->z, nx, p->dt);
            float *db = download(p->db, C, DT_F32), *ref = malloc(nx * sizeof(float));
            double *hdb = calloc((size_t)C, sizeof(double));
            for (size_t i = 0; i < nx; i++) {
                ref[i] = hz[i] > 0 ? p->dx_base[i] : 0.0f;
                hdb[i % C] += ref[i];
            }
            double e = 0, r = 0;
            for (int c = 0; c < C; c++) { e += (db[c] - hdb[c]) * (db[c] - hdb[c]); r += hdb[c] * hdb[c]; }
            printf("  dx vs dgrad masked %.1e, db %.1e; replaces %.3f + %.3f ms\n",
                   rel_norm(dx, ref, nx), sqrt(e / (r + 1e-30)), (double)p->base_ms[1],
                   pass_ms(p, 3.0 * (double)nx * es));
            free(dx); free(hz); free(db); free(ref); free(hdb);
        }
        build_free(&b);
    }
    CUDA_CHECK(cudaFree(xbn));
    free(p->y_base); free(p->dx_base); free(p->dw_base); free(p->dw_bn_base); free(p->y_bn_base);
    p->y_base = p->dx_base = p->dw_base = p->dw_bn_base = p->y_bn_base = NULL;
}

int main(int argc, char **argv)
{
    int N = 256, ncand = 4, use[NSHAPES], dts = 3;
    for (int i = 0; i < NSHAPES; i++) use[i] = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *v = argv[++i];
            dts = !strcmp(v, "bf16") ? 1 : !strcmp(v, "f16") ? 2 : !strcmp(v, "f32") ? 4
                  : !strcmp(v, "all") ? 7 : 3;
        } else if (!strcmp(argv[i], "--candidates") && i + 1 < argc) {
            ncand = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
            for (int k = 0; k < NSHAPES; k++) use[k] = 0;
            for (char *q = argv[++i]; *q;) {
                int k = (int)strtol(q, &q, 10) - 1;
                if (k >= 0 && k < NSHAPES) use[k] = 1;
                if (*q == ',') q++;
                else if (*q) break;
            }
        } else if (argv[i][0] != '-') {
            N = atoi(argv[i]);
        } else {
            fprintf(stderr, "usage: cudnn_fusion_probe [N] [--dtype bf16|f16|f32|both|all] "
                            "[--shapes 1,2,..] "
                            "[--candidates K]\n");
            return 2;
        }
    }
    if (N < 1 || ncand < 1) {
        fprintf(stderr, "cudnn_fusion_probe: N and K must be positive\n");
        return 2;
    }
    Ctx c;
    struct cudaDeviceProp prop;
    probe_start(&c, &prop);
    Probe p;
    memset(&p, 0, sizeof p);
    p.c = &c;
    p.N = N;
    p.ncand = ncand;
    p.gbps = copy_gbps();
    printf("cudnn_fusion_probe: %s (sm_%d%d), cuDNN %zu, batch %d, device copy %.0f GB/s "
           "(read + write), at most %d candidates a graph\n", prop.name, prop.major, prop.minor,
           cudnnGetVersion(), N, p.gbps, ncand);
    for (int d = 0; d < 3; d++) {
        if (!(dts & (1 << d))) continue;
        /* f32: the search's rule forbids no tensor-core note, so TF32 engines run */
        p.dt = d == 0 ? DT_BF16 : d == 1 ? DT_F16 : DT_F32;
        p.ct = d == 0 ? CUDNN_DATA_BFLOAT16 : d == 1 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
        for (int i = 0; i < NSHAPES; i++) {
            if (!use[i]) continue;
            const Shape *sh = &shapes[i];
            p.sh = sh;
            p.P = (sh->H + 2 * sh->pad - sh->R) / sh->stride + 1;
            p.Q = (sh->W + 2 * sh->pad - sh->S) / sh->stride + 1;
            const size_t nx = (size_t)N * sh->H * sh->W * sh->C, ny = (size_t)N * p.P * p.Q * sh->K;
            const size_t nw = (size_t)sh->K * sh->R * sh->S * sh->C;
            unsigned seed = 12345u + (unsigned)i;
            float *hx = host_rand(nx, -1, 1, &seed), *hw = host_rand(nw, -0.1f, 0.1f, &seed);
            float *hdy = host_rand(ny, -1, 1, &seed), *hz = host_rand(nx, -1, 1, &seed);
            float *hs = host_rand((size_t)sh->C, 0.5f, 1.5f, &seed), *hb = host_rand((size_t)sh->C, -0.5f, 0.5f, &seed);
            p.x = upload(hx, nx, p.dt); p.w = upload(hw, nw, p.dt); p.dy = upload(hdy, ny, p.dt);
            p.z = upload(hz, nx, p.dt); p.s = upload(hs, (size_t)sh->C, DT_F32);
            p.b = upload(hb, (size_t)sh->C, DT_F32);
            free(hx); free(hw); free(hdy); free(hz); free(hs); free(hb);
            CUDA_CHECK(cudaMalloc(&p.y, ny * dtype_size(p.dt)));
            CUDA_CHECK(cudaMalloc(&p.dx, nx * dtype_size(p.dt)));
            CUDA_CHECK(cudaMalloc(&p.dw, nw * dtype_size(p.dt)));
            CUDA_CHECK(cudaMalloc(&p.sum, (size_t)sh->K * 4));
            CUDA_CHECK(cudaMalloc(&p.sq, (size_t)sh->K * 4));
            CUDA_CHECK(cudaMalloc(&p.db, (size_t)sh->C * 4));
            CUDA_CHECK(cudaDeviceSynchronize()); /* uploads done before c.stream's work */
            printf("%s, %s, N %d:\n", sh->name, dtype_name(p.dt), N);
            fflush(stdout);
            run_shape(&p);
            fflush(stdout);
            void *bufs[] = {p.x, p.w, p.y, p.sum, p.sq, p.s, p.b, p.dy, p.dw, p.dx, p.z, p.db};
            for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) CUDA_CHECK(cudaFree(bufs[k]));
        }
    }
    ctx_free(&c);
    return 0;
}
