/* test_transformer_ops.c — the BERT ops on the CPU backend, through the
 * tensor ops and autograd (op -> weighted sum -> op_sum -> backward):
 *   - layernorm: y, mean, invstd against double math; dx, dgamma, dbeta
 *     against central finite differences of a double re-implementation;
 *   - embedding: lookup exact; dtable (repeated ids accumulate, unused rows
 *     0) against finite differences; autocast output type; a bad id is
 *     fatal and names the id;
 *   - dropout: the mask is drop_keep_bit(seed, offset, i, thr) exactly (the
 *     mask of ops/dropout_mask.h, itself checked against its definition in
 *     test_drop_mask), reproducible from (seed, offset), different for another
 *     offset, rate ~thr / 256, kept values scaled by drop_scale(p), backward
 *     uses the same mask, p = 0 is the identity, the context's offset
 *     advances by drop_blocks(n);
 *   - attention with a padding mask: forward against double math; dq, dk, dv
 *     against finite differences (dropout 0); with dropout p > 0 the forward
 *     equals the formula with attention's mask (ops/dropout_mask.h: 8
 *     Philox bits an element, checked against its definition and for the
 *     kept fraction), the backward equals finite differences of the same
 *     formula with that mask held fixed, and the context's offset advances
 *     by drop_blocks(B H T T); a key row fully masked with -inf gives
 *     zeros, not NaN.
 * Shapes are small (2 cores): R rows, D width; V vocab; B, H, T, Dh.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "engine/autograd.h"
#include "engine/philox.h"
#include "ops/dropout_mask.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/ops.h"

static const double FD_H = 1e-4;

static Tensor *mk(Ctx *c, const float *h, int ndim, const int64_t *shape, int requires_grad)
{
    Tensor *t = tensor_from_f32(c, h, DT_F32, ndim, shape);
    t->requires_grad = requires_grad;
    return t;
}

/* loss = sum(y * w): its gradient with respect to y is w */
static Tensor *weighted_sum(Ctx *c, Tensor *y, Tensor *w)
{
    Tensor *m = op_mul(c, y, w);
    Tensor *s = op_sum(c, m);
    tensor_release(m);
    return s;
}

static double *dalloc(size_t n) { return (double *)calloc(n ? n : 1, sizeof(double)); }
static float *falloc(size_t n) { return (float *)calloc(n ? n : 1, sizeof(float)); }

/* ---- layernorm ---- */

/* sum_{r,d} w[r,d] y[r,d] in double; y (optional) gets the outputs */
static double ln_loss_d(const double *x, const double *g, const double *b, const float *w,
                        size_t R, size_t D, double eps, double *y, double *mean, double *invstd)
{
    double L = 0.0;
    for (size_t r = 0; r < R; r++) {
        double mu = 0.0, var = 0.0;
        for (size_t d = 0; d < D; d++) mu += x[r * D + d];
        mu /= (double)D;
        for (size_t d = 0; d < D; d++) var += (x[r * D + d] - mu) * (x[r * D + d] - mu);
        var /= (double)D;
        double is = 1.0 / sqrt(var + eps);
        if (mean) { mean[r] = mu; invstd[r] = is; }
        for (size_t d = 0; d < D; d++) {
            double v = (x[r * D + d] - mu) * is * g[d] + b[d];
            if (y) y[r * D + d] = v;
            L += w[r * D + d] * v;
        }
    }
    return L;
}

/* central differences of ln_loss_d with respect to every element of p[0..n) */
static void ln_fd(double *out, double *p, size_t n, const double *x, const double *g,
                  const double *b, const float *w, size_t R, size_t D, double eps)
{
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double lp = ln_loss_d(x, g, b, w, R, D, eps, NULL, NULL, NULL);
        p[i] = keep - FD_H;
        double lm = ln_loss_d(x, g, b, w, R, D, eps, NULL, NULL, NULL);
        p[i] = keep;
        out[i] = (lp - lm) / (2.0 * FD_H);
    }
}

static void test_layernorm(Ctx *c, float eps)
{
    char name[128];
    const size_t R = 6, D = 10, n = R * D;
    int64_t xs[3] = {2, 3, (int64_t)D}, ds = (int64_t)D;
    float *x = falloc(n), *w = falloc(n), *g = falloc(D), *b = falloc(D);
    check_fill(x, n, -2.0f, 2.0f);
    check_fill(w, n, -1.0f, 1.0f);
    check_fill(g, D, 0.5f, 1.5f);
    check_fill(b, D, -0.5f, 0.5f);
    double *xd = dalloc(n), *gd = dalloc(D), *bd = dalloc(D), *yd = dalloc(n);
    double *md = dalloc(R), *isd = dalloc(R);
    for (size_t i = 0; i < n; i++) xd[i] = x[i];
    for (size_t i = 0; i < D; i++) { gd[i] = g[i]; bd[i] = b[i]; }
    ln_loss_d(xd, gd, bd, w, R, D, eps, yd, md, isd);

    Tensor *tx = mk(c, x, 3, xs, 1), *tg = mk(c, g, 1, &ds, 1), *tb = mk(c, b, 1, &ds, 1);
    Tensor *tw = mk(c, w, 3, xs, 0);
    Tensor *y = op_layernorm(c, tx, tg, tb, eps);
    float *yref = falloc(n);
    for (size_t i = 0; i < n; i++) yref[i] = (float)yd[i];
    snprintf(name, sizeof name, "layernorm.y (%zu,%zu) eps %g", R, D, eps);
    check_close(name, (float *)y->data, yref, n, 1e-6, 1e-6);
    Tensor *loss = weighted_sum(c, y, tw);
    tensor_release(y);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);

    double *ana = dalloc(n), *fd = dalloc(n);
    for (size_t i = 0; i < n; i++) ana[i] = ((float *)tx->grad->data)[i];
    ln_fd(fd, xd, n, xd, gd, bd, w, R, D, eps);
    snprintf(name, sizeof name, "layernorm.dx vs finite differences eps %g", eps);
    check_close_f64(name, ana, fd, n, 1e-5, 1e-4);
    for (size_t i = 0; i < D; i++) ana[i] = ((float *)tg->grad->data)[i];
    ln_fd(fd, gd, D, xd, gd, bd, w, R, D, eps);
    snprintf(name, sizeof name, "layernorm.dgamma vs finite differences eps %g", eps);
    check_close_f64(name, ana, fd, D, 1e-5, 1e-4);
    for (size_t i = 0; i < D; i++) ana[i] = ((float *)tb->grad->data)[i];
    ln_fd(fd, bd, D, xd, gd, bd, w, R, D, eps);
    snprintf(name, sizeof name, "layernorm.dbeta vs finite differences eps %g", eps);
    check_close_f64(name, ana, fd, D, 1e-5, 1e-4);

    /* kernel level: saved statistics, and accum adds */
    float *y2 = falloc(n), *mean = falloc(R), *invstd = falloc(R), *mref = falloc(R), *iref = falloc(R);
    layernorm_forward_cpu(y2, mean, invstd, x, g, b, eps, R, D);
    for (size_t r = 0; r < R; r++) { mref[r] = (float)md[r]; iref[r] = (float)isd[r]; }
    check_close("layernorm.mean", mean, mref, R, 1e-7, 1e-6);
    check_close("layernorm.invstd", invstd, iref, R, 1e-7, 1e-6);
    float *dx = falloc(n), *dg = falloc(D), *db = falloc(D);
    float *dx2 = falloc(n), *dg2 = falloc(D), *db2 = falloc(D);
    layernorm_backward_cpu(dx, dg, db, w, x, mean, invstd, g, R, D, 0, 0, 0);
    memcpy(dx2, dx, n * sizeof(float)); memcpy(dg2, dg, D * sizeof(float)); memcpy(db2, db, D * sizeof(float));
    layernorm_backward_cpu(dx2, dg2, db2, w, x, mean, invstd, g, R, D, 1, 1, 1);
    for (size_t i = 0; i < n; i++) dx[i] *= 2.0f;
    for (size_t i = 0; i < D; i++) { dg[i] *= 2.0f; db[i] *= 2.0f; }
    check_close("layernorm.accum dx", dx2, dx, n, 1e-6, 1e-6);
    check_close("layernorm.accum dgamma,dbeta", dg2, dg, D, 1e-6, 1e-6);
    check_close("layernorm.accum dbeta", db2, db, D, 1e-6, 1e-6);

    tensor_release(tx); tensor_release(tg); tensor_release(tb); tensor_release(tw);
    free(x); free(w); free(g); free(b); free(xd); free(gd); free(bd); free(yd); free(md);
    free(isd); free(yref); free(ana); free(fd); free(y2); free(mean); free(invstd);
    free(mref); free(iref); free(dx); free(dg); free(db); free(dx2); free(dg2); free(db2);
}

/* f16 / bf16 storage on the CPU backend: f32 math on the rounded input, output rounded */
static void test_layernorm_lowp(Ctx *c)
{
    const size_t R = 4, D = 12, n = R * D;
    int64_t xs[2] = {(int64_t)R, (int64_t)D}, ds = (int64_t)D;
    float x[48], g[12], b[12], xq[48], ref[48], got[48], mean[4], invstd[4];
    check_fill(x, n, -3.0f, 3.0f);
    check_fill(g, D, 0.5f, 1.5f);
    check_fill(b, D, -0.5f, 0.5f);
    DType types[2] = {DT_F16, DT_BF16};
    for (int k = 0; k < 2; k++) {
        Tensor *tx = tensor_from_f32(c, x, types[k], 2, xs);
        Tensor *tg = mk(c, g, 1, &ds, 0), *tb = mk(c, b, 1, &ds, 0);
        tensor_to_f32(xq, tx);
        layernorm_forward_cpu(ref, mean, invstd, xq, g, b, 1e-12f, R, D);
        Tensor *y = op_layernorm(c, tx, tg, tb, 1e-12f);
        tensor_to_f32(got, y);
        check_true("layernorm.lowp keeps the input type", y->dtype == types[k], "got %s",
                   dtype_name(y->dtype));
        check_close(types[k] == DT_F16 ? "layernorm.f16 = rounded f32" : "layernorm.bf16 = rounded f32",
                    got, ref, n, 1e-6, types[k] == DT_F16 ? 1.0 / 1024 : 1.0 / 128);
        tensor_release(y); tensor_release(tx); tensor_release(tg); tensor_release(tb);
    }
}

/* ---- embedding ---- */

static double emb_loss_d(const double *table, const int32_t *ids, const float *w, size_t N,
                         size_t D)
{
    double L = 0.0;
    for (size_t n = 0; n < N; n++)
        for (size_t d = 0; d < D; d++) L += w[n * D + d] * table[(size_t)ids[n] * D + d];
    return L;
}

static void test_embedding(Ctx *c)
{
    const size_t V = 7, D = 5, N = 8;
    int32_t ids[8] = {3, 1, 3, 0, 6, 3, 1, 2}; /* 3 three times, 1 twice, 4 and 5 unused */
    int64_t ts[2] = {(int64_t)V, (int64_t)D}, is[2] = {2, 4}, os[3] = {2, 4, (int64_t)D};
    float table[35], w[40], ref[40];
    check_fill(table, V * D, -1.0f, 1.0f);
    check_fill(w, N * D, -1.0f, 1.0f);
    Tensor *tt = mk(c, table, 2, ts, 1), *ti = tensor_from_host(c, ids, DT_I32, 2, is);
    Tensor *tw = mk(c, w, 3, os, 0);
    Tensor *out = op_embedding(c, tt, ti);
    check_true("embedding.shape", out->ndim == 3 && out->shape[0] == 2 && out->shape[1] == 4 &&
               out->shape[2] == (int64_t)D && out->dtype == DT_F32,
               "got ndim %d, last dim %lld, %s", out->ndim, (long long)out->shape[out->ndim - 1],
               dtype_name(out->dtype));
    for (size_t n = 0; n < N; n++) memcpy(ref + n * D, table + ids[n] * D, D * sizeof(float));
    check_close("embedding.out = table[ids]", (float *)out->data, ref, N * D, 0.0, 0.0);
    Tensor *loss = weighted_sum(c, out, tw);
    tensor_release(out);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);

    double td[35], ana[35], fd[35];
    for (size_t i = 0; i < V * D; i++) { td[i] = table[i]; ana[i] = ((float *)tt->grad->data)[i]; }
    for (size_t i = 0; i < V * D; i++) {
        double keep = td[i];
        td[i] = keep + FD_H;
        double lp = emb_loss_d(td, ids, w, N, D);
        td[i] = keep - FD_H;
        double lm = emb_loss_d(td, ids, w, N, D);
        td[i] = keep;
        fd[i] = (lp - lm) / (2.0 * FD_H);
    }
    check_close_f64("embedding.dtable vs finite differences (repeated ids add up)", ana, fd,
                    V * D, 1e-6, 1e-5);
    int zero = 1;
    for (size_t d = 0; d < D; d++) zero &= ana[4 * D + d] == 0.0 && ana[5 * D + d] == 0.0;
    check_true("embedding.unused rows get 0", zero, "rows 4 and 5 are not 0");

    /* a second backward adds into the existing gradient (accumulation) */
    out = op_embedding(c, tt, ti);
    loss = weighted_sum(c, out, tw);
    tensor_release(out);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);
    for (size_t i = 0; i < V * D; i++) {
        ana[i] = ((float *)tt->grad->data)[i];
        fd[i] *= 2.0;
    }
    check_close_f64("embedding.dtable accumulates across backward calls", ana, fd, V * D, 1e-6,
                    1e-5);

    /* autocast: the output is in the autocast type, rounded from the f32 table */
    c->autocast = DT_BF16;
    out = op_embedding(c, tt, ti);
    c->autocast = DT_F32;
    float got[40];
    tensor_to_f32(got, out);
    check_true("embedding.autocast output type", out->dtype == DT_BF16, "got %s",
               dtype_name(out->dtype));
    check_close("embedding.autocast values", got, ref, N * D, 0.0, 1.0 / 128);
    ad_tape_clear(c);
    tensor_release(out);
    tensor_release(tt); tensor_release(ti); tensor_release(tw);
}

static void child_bad_id(void *arg)
{
    (void)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    float table[12] = {0};
    int32_t ids[4] = {0, 2, 9, 1};
    Tensor *t = tensor_from_f32(&c, table, DT_F32, 2, (int64_t[]){3, 4});
    Tensor *i = tensor_from_host(&c, ids, DT_I32, 1, (int64_t[]){4});
    op_embedding(&c, t, i);
}

static void test_embedding_bad_id(void)
{
    char buf[2048];
    int st = check_run_child(child_bad_id, NULL, buf, sizeof buf);
    check_true("embedding.bad id is fatal and named",
               st == 1 && strstr(buf, "position 2 has id 9") && strstr(buf, "3 rows") &&
                   strstr(buf, "hint:"),
               "status %d, message: %s", st, buf);
}

/* ---- dropout ---- */

static void test_dropout(Ctx *c)
{
    const size_t n = 100003; /* not a multiple of 16 */
    const float p = 0.1f, s = drop_scale(p);
    const uint32_t thr = drop_threshold(p);
    int64_t shape = (int64_t)n;
    float *x = falloc(n), *w = falloc(n), *ref = falloc(n);
    check_fill(x, n, 0.5f, 1.5f); /* never 0: y == 0 exactly when dropped */
    check_fill(w, n, -1.0f, 1.0f);
    Tensor *tx = mk(c, x, 1, &shape, 1), *tw = mk(c, w, 1, &shape, 0);

    uint64_t off0 = c->rng_offset;
    Tensor *y = op_dropout(c, tx, p);
    check_true("dropout.takes drop_blocks(n) from the context",
               c->rng_offset == off0 + drop_blocks(n), "offset %llu -> %llu",
               (unsigned long long)off0, (unsigned long long)c->rng_offset);
    const float *yv = (const float *)y->data;
    size_t dropped = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        int keep = drop_keep_bit(c->seed, off0, i, thr);
        ref[i] = keep ? x[i] * s : 0.0f;
        dropped += !keep;
        bad += memcmp(&ref[i], &yv[i], sizeof(float)) != 0;
    }
    check_true("dropout.y = keep(seed, offset, i) * x * 256 / (256 - thr), bit for bit",
               bad == 0, "%zu of %zu elements differ", bad, n);
    const double q = (double)thr / 256.0;
    double rate = (double)dropped / (double)n, sigma = sqrt(q * (1.0 - q) / (double)n);
    check_true("dropout.rate ~ thr / 256 (p 0.1: 26 / 256)", fabs(rate - q) < 5.0 * sigma,
               "dropped %.5f, thr / 256 %.5f", rate, q);

    /* the same (seed, offset) gives the same mask; the next offset another one */
    Tensor *y2 = op_dropout_at(c, tx, p, c->seed, off0);
    check_true("dropout.reproducible from (seed, offset)",
               memcmp(y2->data, y->data, n * sizeof(float)) == 0, "the masks differ");
    Tensor *y3 = op_dropout(c, tx, p);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += (((float *)y3->data)[i] == 0.0f) != (yv[i] == 0.0f);
    double expect = 2.0 * q * (1.0 - q) * (double)n;
    check_true("dropout.another offset, another mask", differ > expect / 2 && differ < 2 * expect,
               "%zu of %zu mask bits differ (expected about %.0f)", differ, n, expect);
    tensor_release(y);
    tensor_release(y2);
    tensor_release(y3);
    ad_tape_clear(c);

    /* backward: dx = keep ? w s : 0 with the forward's mask */
    y = op_dropout_at(c, tx, p, c->seed, off0);
    Tensor *loss = weighted_sum(c, y, tw);
    tensor_release(y);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);
    for (size_t i = 0; i < n; i++) ref[i] = drop_keep_bit(c->seed, off0, i, thr) ? w[i] * s : 0.0f;
    check_close("dropout.dx = mask * dy * s", (float *)tx->grad->data, ref, n, 0.0, 0.0);

    /* p = 0: x itself, no draw; p = 1: zeros; no-grad mode still drops */
    off0 = c->rng_offset;
    y = op_dropout(c, tx, 0.0f);
    check_true("dropout.p = 0 is the identity", y == tx && c->rng_offset == off0,
               "got a new tensor or a draw");
    tensor_release(y);
    y = op_dropout(c, tx, 1.0f);
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += ((float *)y->data)[i] != 0.0f;
    check_true("dropout.p = 1 gives 0", nonzero == 0, "%zu nonzero", nonzero);
    tensor_release(y);
    ad_tape_clear(c);
    int g = ad_set_grad(c, 0);
    off0 = c->rng_offset;
    y = op_dropout(c, tx, p);
    ad_set_grad(c, g);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float r = drop_keep_bit(c->seed, off0, i, thr) ? x[i] * s : 0.0f;
        bad += r != ((float *)y->data)[i];
    }
    check_true("dropout.no-grad mode drops the same way (recompute's first forward)", bad == 0,
               "%zu elements differ", bad);
    tensor_release(y);
    tensor_release(tx); tensor_release(tw);
    free(x); free(w); free(ref);
}

/* ---- attention ---- */

typedef struct AttnCase {
    size_t B, H, T, Dh;
    const float *mask;
    float p;
    uint64_t seed, offset;
    const float *w; /* loss weights on out */
} AttnCase;

/* sum(w * out) in double, the keep mask from Philox; out (optional) gets the outputs */
static double attn_loss_d(const AttnCase *a, const double *q, const double *k, const double *v,
                          double *out)
{
    const size_t T = a->T, Dh = a->Dh;
    const double scale = 1.0 / sqrt((double)Dh), s = (double)drop_scale(a->p);
    double L = 0.0, S[16];
    for (size_t bh = 0; bh < a->B * a->H; bh++) {
        const float *mb = a->mask ? a->mask + (bh / a->H) * T : NULL;
        for (size_t i = 0; i < T; i++) {
            double m = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < T; j++) {
                double d = 0.0;
                for (size_t e = 0; e < Dh; e++) d += q[(bh * T + i) * Dh + e] * k[(bh * T + j) * Dh + e];
                S[j] = scale * d + (mb ? mb[j] : 0.0);
                m = fmax(m, S[j]);
            }
            for (size_t j = 0; j < T; j++) {
                S[j] = m == -INFINITY ? 0.0 : exp(S[j] - m);
                sum += S[j];
            }
            for (size_t j = 0; j < T; j++) {
                double P = sum > 0 ? S[j] / sum : 0.0;
                int keep = a->p == 0.0f || drop_keep_bit(a->seed, a->offset, (bh * T + i) * T + j,
                                                     drop_threshold(a->p));
                S[j] = keep ? P * s : 0.0;
            }
            for (size_t e = 0; e < Dh; e++) {
                double o = 0.0;
                for (size_t j = 0; j < T; j++) o += S[j] * v[(bh * T + j) * Dh + e];
                if (out) out[(bh * T + i) * Dh + e] = o;
                L += a->w[(bh * T + i) * Dh + e] * o;
            }
        }
    }
    return L;
}

static void attn_fd(const AttnCase *a, double *fd, double *p, size_t n, const double *q,
                    const double *k, const double *v)
{
    const double h = 1e-5;
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + h;
        double lp = attn_loss_d(a, q, k, v, NULL);
        p[i] = keep - h;
        double lm = attn_loss_d(a, q, k, v, NULL);
        p[i] = keep;
        fd[i] = (lp - lm) / (2.0 * h);
    }
}

static int all_finite(const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 0;
    return 1;
}

/* mask_kind: 0 no mask, 1 padding with -10000, 2 padding with -inf, 3 batch 1 all -inf */
static void test_attention(Ctx *c, int mask_kind, float p)
{
    char name[160], tag[96];
    const char *kinds[] = {"no mask", "pad -10000", "pad -inf", "batch 1 all -inf"};
    snprintf(tag, sizeof tag, "(%s, p %g)", kinds[mask_kind], (double)p);
    const size_t B = 2, H = 2, T = 5, Dh = 4, n = B * H * T * Dh;
    int64_t qs[4] = {(int64_t)B, (int64_t)H, (int64_t)T, (int64_t)Dh}, ms[2] = {(int64_t)B, (int64_t)T};
    float q[80], k[80], v[80], w[80], mask[10], ref[80];
    check_fill(q, n, -1.5f, 1.5f);
    check_fill(k, n, -1.5f, 1.5f);
    check_fill(v, n, -1.0f, 1.0f);
    check_fill(w, n, -1.0f, 1.0f);
    float neg = mask_kind == 1 ? -10000.0f : -INFINITY;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            mask[b * T + t] = b == 1 && (mask_kind == 3 || (mask_kind && t >= 3)) ? neg : 0.0f;

    size_t base = c->mem.current;
    Tensor *tq = mk(c, q, 4, qs, 1), *tk = mk(c, k, 4, qs, 1), *tv = mk(c, v, 4, qs, 1);
    Tensor *tw = mk(c, w, 4, qs, 0), *tm = mask_kind ? mk(c, mask, 2, ms, 0) : NULL;
    uint64_t off0 = c->rng_offset;
    Tensor *out = op_attention(c, tq, tk, tv, tm, p);
    AttnCase a = {B, H, T, Dh, mask_kind ? mask : NULL, p, c->seed, off0, w};
    if (p > 0.0f) {
        snprintf(name, sizeof name, "attention.takes drop_blocks(B H T T) %s", tag);
        check_true(name, c->rng_offset == off0 + drop_blocks(B * H * T * T),
                   "offset advanced by %llu", (unsigned long long)(c->rng_offset - off0));
    }
    double qd[80], kd[80], vd[80], od[80], ana[80], fd[80];
    for (size_t i = 0; i < n; i++) { qd[i] = q[i]; kd[i] = k[i]; vd[i] = v[i]; }
    attn_loss_d(&a, qd, kd, vd, od);
    for (size_t i = 0; i < n; i++) ref[i] = (float)od[i];
    float got[80];
    memcpy(got, out->data, n * sizeof(float));
    snprintf(name, sizeof name, "attention.out vs double math %s", tag);
    check_close(name, got, ref, n, 1e-6, 1e-5);

    Tensor *loss = weighted_sum(c, out, tw);
    tensor_release(out);
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);
    Tensor *grads[3] = {tq->grad, tk->grad, tv->grad};
    double *params[3] = {qd, kd, vd};
    const char *gn[3] = {"dq", "dk", "dv"};
    for (int g = 0; g < 3; g++) {
        const float *gv = (const float *)grads[g]->data;
        for (size_t i = 0; i < n; i++) ana[i] = gv[i];
        attn_fd(&a, fd, params[g], n, qd, kd, vd);
        snprintf(name, sizeof name, "attention.%s vs finite differences %s%s", gn[g], tag,
                 p > 0 ? " (mask held fixed)" : "");
        check_close_f64(name, ana, fd, n, 1e-6, 1e-5);
    }
    if (mask_kind == 3) {
        const float *o = got + n / 2; /* batch 1 */
        int zero = 1;
        for (size_t i = 0; i < n / 2; i++) zero &= o[i] == 0.0f;
        const float *dq = (const float *)tq->grad->data;
        check_true("attention.fully masked rows give 0, not NaN",
                   zero && all_finite(dq, n) && all_finite((float *)tv->grad->data, n),
                   "NaN or nonzero output in the masked batch");
    }
    tensor_release(tq); tensor_release(tk); tensor_release(tv); tensor_release(tw);
    tensor_release(tm);
    snprintf(name, sizeof name, "attention.frees everything after backward %s", tag);
    check_true(name, c->mem.current == base, "%zu bytes held (base %zu)", c->mem.current, base);
}

/* op_attention_at replays the mask; the kernel-level output matches the op's */
static void test_attention_replay(Ctx *c)
{
    const size_t B = 1, H = 2, T = 6, Dh = 3, n = B * H * T * Dh;
    int64_t qs[4] = {1, 2, 6, 3};
    float q[36], k[36], v[36], out[36], probs[72];
    check_fill(q, n, -1, 1);
    check_fill(k, n, -1, 1);
    check_fill(v, n, -1, 1);
    Tensor *tq = mk(c, q, 4, qs, 0), *tk = mk(c, k, 4, qs, 0), *tv = mk(c, v, 4, qs, 0);
    uint64_t off = c->rng_offset;
    Tensor *o1 = op_attention(c, tq, tk, tv, NULL, 0.3f);
    Tensor *o2 = op_attention_at(c, tq, tk, tv, NULL, 0.3f, c->seed, off);
    attention_forward_cpu(out, probs, q, k, v, NULL, 0.3f, c->seed, off, B, H, T, Dh);
    check_true("attention.replay from (seed, offset) is bit-identical",
               memcmp(o1->data, o2->data, n * sizeof(float)) == 0 &&
                   memcmp(o1->data, out, n * sizeof(float)) == 0,
               "outputs differ");
    double rowsum_err = 0.0;
    for (size_t r = 0; r < B * H * T; r++) {
        double s = 0.0;
        for (size_t j = 0; j < T; j++) s += probs[r * T + j];
        rowsum_err = fmax(rowsum_err, fabs(s - 1.0));
    }
    check_true("attention.saved probabilities sum to 1 (pre-dropout)", rowsum_err < 1e-6,
               "worst row sum error %.3g", rowsum_err);
    tensor_release(o1); tensor_release(o2);
    tensor_release(tq); tensor_release(tk); tensor_release(tv);
}

/* op_attention_bthd on [B, T, H, Dh] = op_attention on the transposed
 * tensors, same Philox offset: out and every gradient bit for bit. */
static void test_attention_bthd(Ctx *c)
{
    const size_t B = 2, H = 3, T = 5, Dh = 4, n = B * H * T * Dh;
    int64_t hs[4] = {2, 3, 5, 4}, ts[4] = {2, 5, 3, 4}, ms[2] = {2, 5};
    float h[3][120], t[3][120], w[120], wt[120], mask[10] = {0, 0, 0, 0, 0, 0, 0, 0, -10000, -10000};
    for (int x = 0; x < 3; x++) check_fill(h[x], n, -1, 1);
    check_fill(w, n, -1, 1);
    for (size_t b = 0; b < B; b++)
        for (size_t hh = 0; hh < H; hh++)
            for (size_t i = 0; i < T; i++)
                for (size_t e = 0; e < Dh; e++) {
                    const size_t a = ((b * H + hh) * T + i) * Dh + e, z = ((b * T + i) * H + hh) * Dh + e;
                    for (int x = 0; x < 3; x++) t[x][z] = h[x][a];
                    wt[z] = w[a];
                }
    Tensor *th[3], *tt[3], *tm = mk(c, mask, 2, ms, 0);
    for (int x = 0; x < 3; x++) {
        th[x] = mk(c, h[x], 4, hs, 1);
        tt[x] = mk(c, t[x], 4, ts, 1);
    }
    Tensor *tw = mk(c, w, 4, hs, 0), *twt = mk(c, wt, 4, ts, 0);
    c->rng_offset = 777;
    Tensor *oh = op_attention(c, th[0], th[1], th[2], tm, 0.3f);
    Tensor *lh = weighted_sum(c, oh, tw);
    ad_backward(c, lh, 1.0f);   /* one tape at a time */
    c->rng_offset = 777;
    Tensor *ot = op_attention_bthd(c, tt[0], tt[1], tt[2], tm, 0.3f);
    Tensor *lt = weighted_sum(c, ot, twt);
    ad_backward(c, lt, 1.0f);
    const float *src[4] = {(const float *)ot->data, NULL, NULL, NULL};
    const float *ref[4] = {(const float *)oh->data, NULL, NULL, NULL};
    for (int x = 0; x < 3; x++) {
        src[x + 1] = (const float *)tt[x]->grad->data;
        ref[x + 1] = (const float *)th[x]->grad->data;
    }
    const char *names[4] = {"out", "dq", "dk", "dv"};
    for (int y = 0; y < 4; y++) {
        float back[120];
        for (size_t b = 0; b < B; b++)
            for (size_t hh = 0; hh < H; hh++)
                for (size_t i = 0; i < T; i++)
                    for (size_t e = 0; e < Dh; e++)
                        back[((b * H + hh) * T + i) * Dh + e] = src[y][((b * T + i) * H + hh) * Dh + e];
        char name[96];
        snprintf(name, sizeof name, "attention.bthd %s = transposed op_attention, bit for bit", names[y]);
        check_true(name, memcmp(back, ref[y], n * sizeof(float)) == 0, "values differ");
    }
    tensor_release(lh); tensor_release(lt); tensor_release(oh); tensor_release(ot);
    tensor_release(tw); tensor_release(twt); tensor_release(tm);
    for (int x = 0; x < 3; x++) { tensor_release(th[x]); tensor_release(tt[x]); }
}

/* op_attention_qkv on one projection [B, T, 3 H Dh] = op_attention_bthd on
 * q, k, v copied out of it, same Philox offset: out bit for bit, and dqkv
 * holds dq, dk, dv at q, k, v's places bit for bit. Run twice with qkv used
 * by a second op too (its gradient then adds: the accumulate path). */
static void test_attention_qkv(Ctx *c, int twice)
{
    enum { B = 2, T = 5, H = 3, Dh = 4, D = H * Dh, N = B * T * D };
    int64_t xs[3] = {B, T, 3 * D}, ts[4] = {B, T, H, Dh}, ms[2] = {B, T};
    float x[3 * N], part[3][N], w[N], mask[B * T] = {0, 0, 0, 0, 0, 0, 0, -10000, -10000, 0};
    check_fill(x, 3 * N, -1, 1);
    check_fill(w, N, -1, 1);
    for (int r = 0; r < B * T; r++)
        for (int j = 0; j < 3; j++)
            memcpy(part[j] + r * D, x + r * 3 * D + j * D, D * sizeof(float));
    Tensor *tx = mk(c, x, 3, xs, 1), *tm = mk(c, mask, 2, ms, 0), *tw = mk(c, w, 4, ts, 0);
    Tensor *tp[3];
    for (int j = 0; j < 3; j++) tp[j] = mk(c, part[j], 4, ts, 1);
    c->rng_offset = 555;
    Tensor *o = op_attention_qkv(c, tx, H, tm, 0.25f);
    Tensor *l = weighted_sum(c, o, tw);
    if (twice) {   /* qkv read by a second op: its gradient adds to the attention's */
        Tensor *s = op_sum(c, tx), *l2 = op_add(c, l, s);
        tensor_release(s);
        tensor_release(l);
        l = l2;
    }
    ad_backward(c, l, 1.0f);
    c->rng_offset = 555;
    Tensor *ob = op_attention_bthd(c, tp[0], tp[1], tp[2], tm, 0.25f);
    Tensor *lb = weighted_sum(c, ob, tw);
    ad_backward(c, lb, 1.0f);
    char name[96];
    snprintf(name, sizeof name, "attention.qkv%s out = op_attention_bthd's, bit for bit",
             twice ? " (used twice)" : "");
    check_true(name, memcmp(o->data, ob->data, N * sizeof(float)) == 0, "values differ");
    float want[3 * N];
    for (int r = 0; r < B * T; r++)
        for (int j = 0; j < 3; j++)
            for (int e = 0; e < D; e++)
                want[r * 3 * D + j * D + e] =
                    ((const float *)tp[j]->grad->data)[r * D + e] + (twice ? 1.0f : 0.0f);
    snprintf(name, sizeof name, "attention.qkv%s dqkv = dq | dk | dv in place, bit for bit",
             twice ? " (used twice)" : "");
    check_true(name, memcmp(tx->grad->data, want, sizeof want) == 0, "values differ");
    tensor_release(l); tensor_release(lb); tensor_release(o); tensor_release(ob);
    tensor_release(tx); tensor_release(tm); tensor_release(tw);
    for (int j = 0; j < 3; j++) tensor_release(tp[j]);
}

/* q = k = v one tensor: its gradient is dq + dk + dv of three separate
 * tensors holding the same values (the shared buffer is zeroed and every
 * output adds into it: attn_grads_shared), in both layouts. */
static void test_attention_shared(Ctx *c)
{
    const size_t n = 2 * 3 * 5 * 4;
    int64_t qs[4] = {2, 3, 5, 4};
    float x[120], w[120], sum[120];
    check_fill(x, n, -1, 1);
    check_fill(w, n, -1, 1);
    for (int bthd = 0; bthd < 2; bthd++) {
        Tensor *tw = mk(c, w, 4, qs, 0), *t[3];
        for (int i = 0; i < 3; i++) t[i] = mk(c, x, 4, qs, 1);
        c->rng_offset = 99;
        Tensor *o = bthd ? op_attention_bthd(c, t[0], t[1], t[2], NULL, 0.2f)
                         : op_attention(c, t[0], t[1], t[2], NULL, 0.2f);
        Tensor *l = weighted_sum(c, o, tw);
        ad_backward(c, l, 1.0f);
        for (size_t e = 0; e < n; e++)
            sum[e] = ((float *)t[0]->grad->data)[e] + ((float *)t[1]->grad->data)[e] +
                     ((float *)t[2]->grad->data)[e];
        tensor_release(l); tensor_release(o);
        for (int i = 0; i < 3; i++) tensor_release(t[i]);
        Tensor *s1 = mk(c, x, 4, qs, 1);
        c->rng_offset = 99;
        o = bthd ? op_attention_bthd(c, s1, s1, s1, NULL, 0.2f) : op_attention(c, s1, s1, s1, NULL, 0.2f);
        l = weighted_sum(c, o, tw);
        ad_backward(c, l, 1.0f);
        check_close(bthd ? "attention.bthd q = k = v: dx = dq + dk + dv"
                         : "attention q = k = v: dx = dq + dk + dv",
                    (float *)s1->grad->data, sum, n, 1e-6, 1e-5);
        tensor_release(l); tensor_release(o); tensor_release(s1); tensor_release(tw);
    }
}

/* The dropout mask (ops/dropout_mask.h: every dropout's, attention's
 * included) from its definition: element idx
 * keeps iff byte idx % 4 of word (idx % 16) / 4 of Philox4x32-7 at counter
 * offset + idx / 16 is >= ceil(p 2^8), for p 0.1, 0.5, 1/3; the fraction
 * kept over 2^20 elements within 5 standard deviations of 1 - thr / 256;
 * p = 0 keeps all, p = 1 none; the counter crosses 2^32 inside the draw; the
 * scale is 256 / (256 - thr); drop_keep8 is drop_keep16's halves. */
static void test_drop_mask(void)
{
    const float ps[3] = {0.1f, 0.5f, 1.0f / 3.0f};
    const uint32_t thrs[3] = {26, 128, 86};
    /* the counter crosses 2^32 inside the draw: its high word is used too */
    const uint64_t seed = 0x1234567890abcdefull, offset = (1ull << 32) - 1000;
    for (int k = 0; k < 3; k++) {
        const float p = ps[k];
        const uint32_t thr = drop_threshold(p);
        const size_t n = (size_t)1 << 20;
        size_t kept = 0, bad = 0;
        for (size_t idx = 0; idx < n; idx++) {
            uint32_t r[4];
            const uint64_t ctr = offset + idx / 16;
            philox4x32_7(r, (uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0, (uint32_t)seed,
                         (uint32_t)(seed >> 32));
            const uint32_t u = (r[(idx % 16) / 4] >> (8 * (idx % 4))) & 0xFFu;
            const int want = u >= thrs[k];
            const int got = drop_keep_bit(seed, offset, idx, thr);
            bad += got != want ||
                   (int)((drop_keep8(seed, offset, idx / 8, thr) >> (idx % 8)) & 1u) != got ||
                   (int)((drop_keep16(seed, offset, idx / 16, thr) >> (idx % 16)) & 1u) != got;
            kept += (size_t)got;
        }
        const double q = (double)thrs[k] / 256.0;
        const double frac = (double)kept / (double)n, sd = sqrt(q * (1.0 - q) / (double)n);
        char name[96];
        snprintf(name, sizeof name, "dropout.mask p %.3f: threshold %u, the definition, "
                 "bit for bit", (double)p, thrs[k]);
        check_true(name, thr == thrs[k] && bad == 0, "threshold %u; %zu of %zu bits differ",
                   thr, bad, n);
        snprintf(name, sizeof name, "dropout.mask p %.3f: kept fraction", (double)p);
        check_true(name, fabs(frac - (1.0 - q)) <= 5.0 * sd, "kept %.6f, expected %.6f", frac,
                   1.0 - q);
        snprintf(name, sizeof name, "dropout.mask p %.3f: scale 256 / (256 - thr)", (double)p);
        check_true(name, drop_scale(p) == 256.0f / (float)(256 - thrs[k]), "scale %.9g",
                   (double)drop_scale(p));
    }
    int all = 1, none = 1;
    for (size_t idx = 0; idx < 4096; idx++) {
        all = all && drop_keep_bit(seed, offset, idx, drop_threshold(0.0f));
        none = none && !drop_keep_bit(seed, offset, idx, drop_threshold(1.0f));
    }
    check_true("dropout.mask p 0 keeps every element, p 1 none", all && none,
               "p 0 dropped one: %d; p 1 kept one: %d", !all, !none);
    check_true("dropout.mask: p 1e-4 drops at 1/256, p 0.999 drops all (scale 0)",
               drop_threshold(1e-4f) == 1 && drop_threshold(0.999f) == 256 &&
                   drop_scale(0.999f) == 0.0f && drop_threshold(-0.5f) == 0,
               "thresholds %u, %u", drop_threshold(1e-4f), drop_threshold(0.999f));
    /* the four-byte comparison against the bytes one by one: every threshold
     * 1 .. 255, words with each byte at every value near it and at random */
    size_t wrong = 0, words = 0;
    uint32_t z = 0x9e3779b9u;
    for (uint32_t t = 1; t < 256; t++)
        for (int i = 0; i < 512; i++) {
            z = z * 1664525u + 1013904223u;
            uint32_t x = z;
            if (i < 256) /* byte i % 4 at t - 2 .. t + 1, the others random */
                x = (x & ~(0xFFu << (8 * (i % 4)))) |
                    (((t + (uint32_t)(i / 4 % 4) + 254u) & 0xFFu) << (8 * (i % 4)));
            unsigned want = 0;
            for (int e = 0; e < 4; e++) want |= (((x >> (8 * e)) & 0xFFu) >= t ? 1u : 0u) << e;
            wrong += drop_keep_word(x, t) != want;
            words++;
        }
    check_true("dropout.mask: the word's four comparisons equal the bytes' one by one",
               wrong == 0, "%zu of %zu words differ", wrong, words);
}

int main(void)
{
    check_seed(42);
    test_drop_mask();
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 20240601);
    c.rng_offset = 1000;
    test_layernorm(&c, 1e-12f);
    test_layernorm(&c, 1e-5f);
    test_layernorm_lowp(&c);
    test_embedding(&c);
    test_embedding_bad_id();
    test_dropout(&c);
    test_attention(&c, 0, 0.0f);
    test_attention(&c, 1, 0.0f);
    test_attention(&c, 2, 0.0f);
    test_attention(&c, 3, 0.0f);
    test_attention(&c, 1, 0.2f);
    test_attention(&c, 2, 0.5f);
    test_attention_replay(&c);
    test_attention_bthd(&c);
    test_attention_shared(&c);
    test_attention_qkv(&c, 0);
    test_attention_qkv(&c, 1);
    ctx_free(&c);
    return check_summary();
}
