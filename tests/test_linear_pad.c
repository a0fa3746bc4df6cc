/* test_linear_pad.c — op_linear_pad (ops/ops.h: the Linear's rows padded
 * to `cols`) on the CPU against op_linear, through autograd:
 *
 *   y = [x w^T + b | pad]     pad: every byte 0xF8 in y's type (f32, bf16
 *                             about -4.0e34, f16 -40,704)
 *   (a) loss = sum(y * G), G's padding columns 3: the padding has no
 *       gradient, so dx = G[:, :Out] w, dw = G[:, :Out]^T x, db = sum_r G
 *       whatever G holds past Out;
 *   (b) loss = cross_entropy(y, labels): the padding's probability is
 *       exactly 0, so the loss and every gradient are those of the packed
 *       logits.
 *
 * The CPU op runs op_linear's functions on a packed copy, so y[:, :Out] and
 * the gradients of (a) must equal op_linear's bit for bit; (b) adds zeros
 * to the softmax's sums, so its loss and gradients are compared within
 * f32 rounding. Cases: 2-D and 3-D x, no bias, cols = Out (op_linear
 * itself), bf16 autocast, and the error for cols < Out. The CUDA path
 * (leading dimensions in cuBLASLt) is checked against this in
 * tests/gpu_linear_pad.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/autograd.h"
#include "ops/ops.h"
#include "ops/permute.h"

typedef struct {
    int ndim;
    int64_t xs[3];   /* x's shape; the last is In */
    int out, cols, bias;
    DType autocast;  /* DT_F32: off */
} Case;

typedef struct {
    float *y, *dx, *dw, *db, loss;
    unsigned char *raw;   /* y's bytes in its own type */
    size_t es;
} Run;

static Tensor *mk(Ctx *c, const float *h, int ndim, const int64_t *shape)
{
    Tensor *t = tensor_from_f32(c, h, DT_F32, ndim, shape);
    t->requires_grad = 1;
    return t;
}

static float *host(Tensor *t)
{
    float *h = malloc(t->numel * sizeof(float));
    tensor_to_f32(h, t);
    return h;
}

/* pad 1: op_linear_pad, else op_linear. ce: loss (b), else (a) with G
 * [R, cols] (op_linear's y reads its first Out columns of each row). */
static Run run(Ctx *c, const Case *k, int pad, int ce, const float *x, const float *w,
               const float *b, const float *G, const int32_t *labels)
{
    const int64_t In = k->xs[k->ndim - 1], ws[2] = {k->out, In}, bs = k->out;
    int64_t R = 1;
    for (int i = 0; i < k->ndim - 1; i++) R *= k->xs[i];
    Tensor *tx = mk(c, x, k->ndim, k->xs), *tw = mk(c, w, 2, ws);
    Tensor *tb = k->bias ? mk(c, b, 1, &bs) : NULL;
    c->autocast = k->autocast;
    Tensor *y = pad ? op_linear_pad(c, tx, tw, tb, k->cols) : op_linear(c, tx, tw, tb);
    c->autocast = DT_F32;
    const int64_t cols = y->shape[y->ndim - 1];
    Tensor *y2 = op_reshape(c, y, 2, (int64_t[]){R, cols}), *loss;
    if (ce) {
        Tensor *tl = tensor_from_host(c, labels, DT_I32, 1, &R);
        loss = op_cross_entropy(c, y2, tl, -100, 0.0f);
        tensor_release(tl);
    } else {
        float *g = malloc((size_t)(R * cols) * sizeof(float));
        for (int64_t r = 0; r < R; r++)
            memcpy(g + r * cols, G + r * k->cols, (size_t)cols * sizeof(float));
        Tensor *tg = tensor_from_f32(c, g, y->dtype, 2, (int64_t[]){R, cols});
        free(g);
        Tensor *m = op_mul(c, y2, tg);
        loss = op_sum(c, m);
        tensor_release(m);
        tensor_release(tg);
    }
    ad_backward(c, loss, 1.0f);
    Run out = {host(y), host(tx->grad), host(tw->grad), tb ? host(tb->grad) : NULL, 0.0f,
               malloc(y->numel * dtype_size(y->dtype)), dtype_size(y->dtype)};
    tensor_to_host(out.raw, y);
    tensor_to_f32(&out.loss, loss);
    tensor_release(loss);
    tensor_release(y2);
    tensor_release(y);
    tensor_release(tx); tensor_release(tw); tensor_release(tb);
    return out;
}

static void run_free(Run *r)
{
    free(r->y); free(r->dx); free(r->dw); free(r->db); free(r->raw);
}

static void same(const char *name, const float *a, const float *b, size_t n, int exact)
{
    if (exact) check_true(name, memcmp(a, b, n * sizeof(float)) == 0, "the bits differ");
    else check_close(name, a, b, n, 1e-6, 1e-5);
}

static void one(Ctx *c, const Case *k, int ce)
{
    const size_t In = (size_t)k->xs[k->ndim - 1], Out = (size_t)k->out, cols = (size_t)k->cols;
    size_t R = 1;
    for (int i = 0; i < k->ndim - 1; i++) R *= (size_t)k->xs[i];
    float *x = malloc(R * In * sizeof(float)), *w = malloc(Out * In * sizeof(float));
    float *b = malloc(Out * sizeof(float)), *G = malloc(R * cols * sizeof(float));
    int32_t *labels = malloc(R * sizeof(int32_t));
    check_fill(x, R * In, -1.0f, 1.0f);
    check_fill(w, Out * In, -0.5f, 0.5f);
    check_fill(b, Out, -2.0f, 2.0f);
    check_fill(G, R * cols, -1.0f, 1.0f);
    for (size_t r = 0; r < R; r++) {
        for (size_t j = Out; j < cols; j++) G[r * cols + j] = 3.0f;
        labels[r] = r % 5 == 2 ? -100 : (int32_t)((r * 37) % Out);
    }
    Run p = run(c, k, 1, ce, x, w, b, G, labels), q = run(c, k, 0, ce, x, w, b, G, labels);
    char tag[128], name[192];
    snprintf(tag, sizeof tag, "x %dD R %zu In %zu Out %zu cols %zu%s%s, %s", k->ndim, R, In, Out,
             cols, k->bias ? "" : " no bias", k->autocast == DT_BF16 ? " bf16" : "",
             ce ? "cross entropy" : "sum(y G)");
    float *yp = malloc(R * Out * sizeof(float));
    size_t bad = 0;
    for (size_t r = 0; r < R; r++) {
        memcpy(yp + r * Out, p.y + r * cols, Out * sizeof(float));
        for (size_t k = Out * p.es; k < cols * p.es; k++) bad += p.raw[r * cols * p.es + k] != 0xF8;
    }
    snprintf(name, sizeof name, "linear_pad %s: y[:, :Out] is op_linear's", tag);
    same(name, yp, q.y, R * Out, 1);
    snprintf(name, sizeof name, "linear_pad %s: padding bytes 0xF8 in y's type", tag);
    check_true(name, bad == 0, "%zu padding bytes are not", bad);
    snprintf(name, sizeof name, "linear_pad %s: dx", tag);
    same(name, p.dx, q.dx, R * In, !ce);
    snprintf(name, sizeof name, "linear_pad %s: dw", tag);
    same(name, p.dw, q.dw, Out * In, !ce);
    if (k->bias) {
        snprintf(name, sizeof name, "linear_pad %s: db", tag);
        same(name, p.db, q.db, Out, !ce);
    }
    if (ce) {
        snprintf(name, sizeof name, "linear_pad %s: loss", tag);
        same(name, &p.loss, &q.loss, 1, 0);
    }
    free(yp);
    run_free(&p); run_free(&q);
    free(x); free(w); free(b); free(G); free(labels);
}

static void too_narrow(void *arg)
{
    Ctx *c = arg;
    Tensor *x = tensor_new(c, DT_F32, 2, (int64_t[]){2, 4});
    Tensor *w = tensor_new(c, DT_F32, 2, (int64_t[]){6, 4});
    tensor_zero(x);
    tensor_zero(w);
    op_linear_pad(c, x, w, NULL, 5);
}

int main(void)
{
    check_seed(20261205);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    static const Case cases[] = {
        {2, {9, 16}, 30, 32, 1, DT_F32},
        {2, {7, 12}, 13, 16, 0, DT_F32},
        {3, {2, 5, 24}, 21, 24, 1, DT_F32},
        {2, {6, 8}, 10, 10, 1, DT_F32},       /* cols = Out: op_linear itself */
        {3, {2, 4, 16}, 11, 16, 1, DT_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int ce = 0; ce < 2; ce++) one(&c, &cases[i], ce);
    char msg[512];
    int st = check_run_child(too_narrow, &c, msg, sizeof msg);
    check_true("linear_pad: 5 columns for 6 outputs is an error that says so",
               st == 1 && strstr(msg, "cannot hold") != NULL, "status %d, message: %s", st, msg);
    ctx_free(&c);
    return check_summary();
}
