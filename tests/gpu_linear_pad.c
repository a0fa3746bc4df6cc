/* gpu_linear_pad.c — op_linear_pad on CUDA (the Linear's rows padded to
 * `cols`: the forward and dx GEMMs over all cols outputs on a zero-padded
 * copy of w, dw's reading dy's first Out columns through a cuBLASLt leading
 * dimension) against op_linear on CUDA and op_linear_pad on the CPU.
 *
 *   y = [x w^T + b | pad]    x [R, In] or [B, T, In], w [Out, In], b [Out],
 *                            y [.., cols], pad every byte 0xF8
 *   (a) loss = sum(y * lw), lw's padding columns 3: dy = lw, so the padding
 *       columns of dy hold values the backward must not read:
 *       dx = dy[:, :Out] w,  dw = dy[:, :Out]^T x,  db = sum_r dy[r, :Out];
 *   (b) loss = cross_entropy(y, labels) against cross_entropy of op_linear's
 *       y: the padding must change neither the loss nor any gradient (its
 *       probability is exactly 0, so its dy is 0).
 *
 * Checks: the padding's bytes on the GPU; y[:, :Out], dx, dw, db against
 * op_linear on the GPU and against op_linear_pad on the CPU, within the
 * accumulation bounds of gpu_linear_epilogue (padded and packed run
 * different cuBLASLt kernels: other orders); the CPU's padding value; the
 * loss of (b); all device memory back. Shapes: Out even and odd, no bias,
 * 3-D x, one row (no epilogue: the padded bias add), a vocabulary-like
 * Out = 1001. The whole set runs twice: this process with the bias
 * gradient in a separate pass (the default), a child with
 * CTRAIN_LINEAR_BGRAD=1 (in the weight gradient's GEMM, through the same
 * leading dimension); the switch is read once per process.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "tensor_check.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/ops.h"
#include "ops/permute.h"
#include "ops/matmul.h"
#include "engine/settings.h"

/* acc: the parameters' gradients already hold w / 2 and b / 2 when the
 * backward runs (BERT's tied word embedding gets the decoder's gradient on
 * top of the lookup's): dw's GEMM with beta 1, db through a temporary. */
typedef struct {
    int ndim;
    int64_t x[3];
    int out, cols, bias, acc;
} Shape;

static const Shape shapes[] = {
    {2, {37, 64}, 30, 32, 1, 0},       /* Out even, R odd */
    {2, {64, 96}, 33, 40, 0, 0},       /* Out odd, no bias */
    {3, {3, 45, 72}, 100, 104, 1, 0},  /* 3-D x */
    {2, {1, 40}, 5, 8, 1, 0},          /* one row: no epilogue, the padded bias add */
    {2, {256, 128}, 1001, 1008, 1, 0}, /* a small vocabulary */
    {2, {256, 128}, 1001, 1008, 1, 1}, /* the same onto gradients already there */
};

typedef struct {
    float *y, *dx, *dw, *db, loss;
    unsigned char *raw;   /* y's bytes (GPU) */
} Result;

static void result_free(Result *r)
{
    free(r->y); free(r->dx); free(r->dw); free(r->db); free(r->raw);
}

/* One forward + backward. pad: op_linear_pad, else op_linear. ce: loss (b),
 * else (a). y comes back with its own row length (cols or Out). */
static Result run(Ctx *c, const GpuSetting *st, const Shape *sh, int pad, int ce, const float *x,
                  const float *w, const float *b, const float *lw, const int32_t *labels)
{
    const int64_t In = sh->x[sh->ndim - 1], ws[2] = {sh->out, In}, bs = sh->out;
    int64_t R = 1;
    for (int i = 0; i < sh->ndim - 1; i++) R *= sh->x[i];
    Tensor *tx = leaf_f32(c, x, sh->ndim, sh->x), *tw = leaf_f32(c, w, 2, ws);
    Tensor *tb = sh->bias ? leaf_f32(c, b, 1, &bs) : NULL;
    c->autocast = st->dt;
    c->allow_tf32 = st->tf32;
    Tensor *y = pad ? op_linear_pad(c, tx, tw, tb, sh->cols) : op_linear(c, tx, tw, tb);
    c->autocast = DT_F32;
    c->allow_tf32 = 0;
    const int64_t cols = y->shape[y->ndim - 1];
    if (sh->acc) {   /* the gradients hold w / 2 and b / 2 already */
        float *hw = hcopy(w, (size_t)(ws[0] * ws[1])), *hb = hcopy(b, (size_t)bs);
        for (int64_t i = 0; i < ws[0] * ws[1]; i++) hw[i] *= 0.5f;
        for (int64_t i = 0; i < bs; i++) hb[i] *= 0.5f;
        tw->grad = tensor_from_f32(c, hw, DT_F32, 2, ws);
        if (tb) tb->grad = tensor_from_f32(c, hb, DT_F32, 1, &bs);
        free(hw);
        free(hb);
    }
    Tensor *loss;
    if (ce) {
        Tensor *tl = tensor_from_host(c, labels, DT_I32, 1, &R);
        Tensor *y2 = op_reshape(c, y, 2, (int64_t[]){R, cols});
        loss = op_cross_entropy(c, y2, tl, -100, 0.0f);
        tensor_release(y2);
        tensor_release(tl);
    } else {   /* lw has cols columns; op_linear's y reads its first Out */
        float *l = falloc((size_t)(R * cols));
        for (int64_t r = 0; r < R; r++)
            memcpy(l + r * cols, lw + r * sh->cols, (size_t)cols * sizeof(float));
        Tensor *tl = tensor_from_f32(c, l, y->dtype, 2, (int64_t[]){R, cols});
        free(l);
        Tensor *y2 = op_reshape(c, y, 2, (int64_t[]){R, cols});
        Tensor *m = op_mul(c, y2, tl);
        loss = op_sum(c, m);
        tensor_release(m);
        tensor_release(y2);
        tensor_release(tl);
    }
    ad_backward(c, loss, 1.0f);
    Result r = {host_f32(y), host_f32(tx->grad), host_f32(tw->grad),
                tb ? host_f32(tb->grad) : NULL, 0.0f, NULL};
    tensor_to_f32(&r.loss, loss);
    if (c->device == DEV_CUDA) {
        r.raw = malloc(y->numel * dtype_size(y->dtype));
        tensor_to_host(r.raw, y);
    }
    tensor_release(loss);
    tensor_release(y);
    tensor_release(tx); tensor_release(tw); tensor_release(tb);
    return r;
}

static double acc_tol(const GpuSetting *st, size_t K, double amax, double bmax)
{
    return (st->tf32 ? 3e-3 : 1e-5) * sqrt((double)K) * amax * bmax;
}

/* got's first Out columns of each row (got_ld apart) against ref's (ref_ld) */
static void check_rows(const char *name, const float *got, size_t got_ld, const float *ref,
                       size_t ref_ld, size_t R, size_t Out, double atol, double rtol)
{
    float *g = falloc(R * Out), *f = falloc(R * Out);
    for (size_t r = 0; r < R; r++) {
        memcpy(g + r * Out, got + r * got_ld, Out * sizeof(float));
        memcpy(f + r * Out, ref + r * ref_ld, Out * sizeof(float));
    }
    check_close(name, g, f, R * Out, atol, rtol);
    free(g);
    free(f);
}

/* max |x w^T| (the bias may cancel the product: a rounding of the product
 * before the bias, as the CPU and the separate add make it, scales with it) */
static double product_max(const float *x, const float *w, size_t R, size_t In, size_t Out)
{
    double m = 0.0;
    for (size_t r = 0; r < R; r++)
        for (size_t o = 0; o < Out; o++) {
            double s = 0.0;
            for (size_t k = 0; k < In; k++) s += (double)x[r * In + k] * w[o * In + k];
            m = fmax(m, fabs(s));
        }
    return m;
}

static void compare(const char *tag, const char *what, const GpuSetting *st, const Shape *sh,
                    const Result *got, const Result *ref, size_t ref_ld, const float *x,
                    const float *w, const float *dy, size_t R, int ce, double pmax)
{
    const size_t In = (size_t)sh->x[sh->ndim - 1], Out = (size_t)sh->out;
    const double xmax = maxabs(x, R * In), wmax = maxabs(w, Out * In);
    /* cross entropy's dy: (softmax - onehot) / labelled rows, at most 1 / that */
    double dymax = ce ? 1.0 / (double)ce : 0.0;
    for (size_t r = 0; !ce && r < R; r++)   /* the real columns: the padding's 3 is not dy */
        dymax = fmax(dymax, maxabs(dy + r * (size_t)sh->cols, Out));
    char name[256];
    snprintf(name, sizeof name, "linear_pad.y %s %s", tag, what);
    check_rows(name, got->y, (size_t)sh->cols, ref->y, ref_ld, R, Out,
               acc_tol(st, In, xmax, wmax) + tol_atol(st->dt) + tol_rtol(st->dt) * pmax,
               tol_rtol(st->dt));
    snprintf(name, sizeof name, "linear_pad.dx %s %s", tag, what);
    check_close(name, got->dx, ref->dx, R * In,
                acc_tol(st, Out, dymax, wmax) + tol_atol(st->dt), tol_rtol(st->dt));
    /* cross entropy's dy is rounded to y's type from logits that two runs
     * round apart: each of its R terms may carry that type's relative error
     * (a random walk: sqrt(R)), on top of the accumulation order */
    const double grad_rtol = ce ? tol_rtol(st->dt) : tol_rtol(DT_F32);
    const double dy_err = ce ? tol_rtol(st->dt) * sqrt((double)R) * dymax : 0.0;
    snprintf(name, sizeof name, "linear_pad.dw %s %s", tag, what);
    check_close(name, got->dw, ref->dw, Out * In,
                acc_tol(st, R, dymax, xmax) + tol_atol(DT_F32) + dy_err * xmax, grad_rtol);
    if (sh->bias) {
        snprintf(name, sizeof name, "linear_pad.db %s %s", tag, what);
        check_close(name, got->db, ref->db, Out,
                    1e-5 * sqrt((double)R) * dymax + tol_atol(DT_F32) + dy_err, grad_rtol);
    }
    if (ce) {
        snprintf(name, sizeof name, "linear_pad.loss %s %s", tag, what);
        check_close(name, &got->loss, &ref->loss, 1, tol_atol(st->dt), tol_rtol(st->dt));
    }
}

static void one_case(Ctx *gpu, Ctx *cpu, const GpuSetting *st, const Shape *sh, int ce,
                     const char *mode)
{
    const size_t In = (size_t)sh->x[sh->ndim - 1], Out = (size_t)sh->out;
    const size_t cols = (size_t)sh->cols;
    size_t R = 1;
    for (int i = 0; i < sh->ndim - 1; i++) R *= (size_t)sh->x[i];
    char tag[160];
    snprintf(tag, sizeof tag, "%s R %zu In %zu Out %zu cols %zu%s %s [%s]", st->name, R, In, Out,
             cols, sh->bias ? "" : " no bias", ce ? "cross entropy" : "dy padding 3", mode);
    float *x = hrand(R * In, -1.0f, 1.0f, DT_F32), *w = hrand(Out * In, -0.5f, 0.5f, DT_F32);
    float *b = hrand(Out, -2.0f, 2.0f, DT_F32), *lw = hrand(R * cols, -1.0f, 1.0f, st->dt);
    for (size_t r = 0; r < R; r++)   /* must not reach dw or db; dx's GEMM meets it with the */
        for (size_t j = Out; j < cols; j++) lw[r * cols + j] = 3.0f;   /* weight's zero rows */
    int32_t *labels = malloc(R * sizeof(int32_t));
    for (size_t r = 0; r < R; r++) labels[r] = r % 7 == 3 ? -100 : (int32_t)((r * 131) % Out);

    const size_t base = gpu->mem.current;
    Result p = run(gpu, st, sh, 1, ce, x, w, b, lw, labels);
    Result q = run(gpu, st, sh, 0, ce, x, w, b, lw, labels);
    Result h = run(cpu, st, sh, 1, ce, x, w, b, lw, labels);
    ctx_sync(gpu);
    char name[224];
    snprintf(name, sizeof name, "linear_pad %s: memory returned", tag);
    check_true(name, gpu->mem.current == base, "%zu bytes held (base %zu)", gpu->mem.current,
               base);

    const size_t es = dtype_size(st->dt);
    size_t bad = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t k = Out * es; k < cols * es; k++) bad += p.raw[r * cols * es + k] != 0xF8;
    snprintf(name, sizeof name, "linear_pad %s: padding bytes 0xF8 on the GPU", tag);
    check_true(name, bad == 0, "%zu of %zu bytes differ", bad, R * (cols - Out) * es);
    double worst = -HUGE_VAL;
    for (size_t r = 0; r < R; r++)
        for (size_t j = Out; j < cols; j++) worst = fmax(worst, (double)h.y[r * cols + j]);
    /* 0xF8 bytes: f16 -40,704, bf16 and f32 about -4e34 */
    const double pad_lim = st->dt == DT_F16 ? -4e4 : -1e30;
    snprintf(name, sizeof name, "linear_pad %s: CPU padding below %g", tag, pad_lim);
    check_true(name, worst < pad_lim, "largest padding value %g", worst);

    const double pmax = product_max(x, w, R, In, Out);
    int labelled = 0;   /* compare's ce: cross entropy's labelled rows, 0 for (a) */
    for (size_t r = 0; ce && r < R; r++) labelled += labels[r] != -100;
    compare(tag, "vs op_linear (GPU)", st, sh, &p, &q, Out, x, w, lw, R, labelled, pmax);
    compare(tag, "vs CPU", st, sh, &p, &h, cols, x, w, lw, R, labelled, pmax);
    result_free(&p); result_free(&q); result_free(&h);
    free(x); free(w); free(b); free(lw); free(labels);
}

static void run_all(const char *mode)
{
    check_seed(20261205);
    Ctx gpu, cpu;
    ctx_init(&gpu, DEV_CUDA, 0, 0x5eedULL);
    ctx_init(&cpu, DEV_CPU, 0, 0x5eedULL);
    const int bgrad = setting_switch(SET_LINEAR_BGRAD);
    for (int s = 0; s < (int)(sizeof gpu_settings / sizeof gpu_settings[0]); s++) {
        int bias_before = 0, bgrad_before = 0, bias_plans = 0, bgrad_plans = 0;
        matmul_plan_cache_epilogues(matmul_plan_cache_get(&gpu), &bias_before, &bgrad_before);
        for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++)
            for (int ce = 0; ce < 2; ce++) one_case(&gpu, &cpu, &gpu_settings[s], &shapes[i], ce,
                                                    mode);
        matmul_plan_cache_epilogues(matmul_plan_cache_get(&gpu), &bias_plans, &bgrad_plans);
        /* the epilogues were taken (not only the fallbacks tested): the bias
         * one always; the bias-gradient one where it is asked (not TF32) */
        char name[160];
        snprintf(name, sizeof name, "linear_pad %s [%s]: bias epilogue plans made",
                 gpu_settings[s].name, mode);
        check_true(name, bias_plans > bias_before, "%d new", bias_plans - bias_before);
        if (bgrad && !gpu_settings[s].tf32) {
            snprintf(name, sizeof name, "linear_pad %s [%s]: bias-gradient epilogue plans made",
                     gpu_settings[s].name, mode);
            check_true(name, bgrad_plans > bgrad_before, "%d new", bgrad_plans - bgrad_before);
        }
    }
    ctx_free(&gpu);
    ctx_free(&cpu);
}

static void child_all(void *arg, void *payload)
{
    (void)arg, (void)payload;
    run_all("bias gradient in the GEMM");
}

int main(void)
{
    const int done = gpu_child_run("CTRAIN_LINEAR_BGRAD", "1", child_all, NULL, NULL, 0);
    setenv("CTRAIN_LINEAR_BGRAD", "0", 1);
    gpu_require();
    check_true("linear_pad: the CTRAIN_LINEAR_BGRAD=1 run finished", done, "it did not");
    run_all("bias gradient in its own pass");
    return check_summary();
}
