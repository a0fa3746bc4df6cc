/* gpu_linear_epilogue.c — op_linear on CUDA with the bias added in the
 * GEMM's epilogue (CTRAIN_LINEAR_EPILOGUE=1) and the bias gradient summed
 * in the weight gradient's GEMM (CTRAIN_LINEAR_BGRAD=1) against the CPU
 * context and against both done separately (both switches 0).
 *
 *   y = x w^T + b        x [R, In] or [B, T, In] (R = B T), w [Out, In], b [Out]
 *   loss = sum(y * lw)   so  dy = lw,  dx = dy w,  dw = dy^T x,  db = sum_r dy
 *
 * The switches are read once per process, so the program forks before it
 * touches CUDA: the child runs every case with both switches 0 and
 * writes its GPU results to a file, then the parent runs the same cases
 * (same seed, same inputs) with =1 and compares. Both sides also check
 * against the CPU, and that all device memory comes back.
 * Settings: f32, f32 with TF32, f16 and bf16 autocast (the epilogue takes a
 * bias of y's type: the parameter's AMP working copy where the case gives it
 * one, else a cast). Shapes: R not a multiple of 8, Out odd, Out = 1 and
 * R = 1 (no epilogue there: the separate add), In odd, 3-D x, and an
 * aligned BERT-like shape where the epilogue must be taken, seen as one
 * device allocation fewer in the forward (no second [R, Out] tensor).
 *
 * Tolerances.
 *   - Forward. Accumulation order: (1e-5, TF32 3e-3) sqrt(In) |x|max |w|max,
 *     as in gpu_matmul. Rounding: the separate add (and the CPU) rounds
 *     x w^T to y's type, adds the bias and rounds again; the epilogue adds
 *     the bias in f32 and rounds once. They differ by up to one rounding of
 *     the product, which scales with |x w^T|, not with |y| (the bias may
 *     cancel the product): atol gets tol_rtol(dt) max|x w^T|, on top of the
 *     type's own tol_atol(dt) + tol_rtol(dt) |y|.
 *   - Backward vs the CPU: the same accumulation bound over Out (dx) and R
 *     (dw) terms plus the output's rounding (dx in y's type, dw and db in
 *     f32); db is a sum of R terms: 1e-5 sqrt(R) |dy|max.
 *   - Backward vs the separate passes: dx bit-identical (dy = lw does not
 *     depend on y, and dx's GEMM is the same call on the same shapes, types
 *     and 256-byte alignments, so the same cached algorithm); dw and db
 *     within the accumulation bound above (the bias-gradient GEMM may run
 *     another algorithm, and its sum another order).
 * At the end, the bias-gradient epilogue must have been taken for some
 * shape (the aligned BERT-like ones) in every setting.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gpu_util.h"
#include "tensor_check.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/matmul.h"
#include "ops/ops.h"


/* fuse: 1 the epilogue must be taken, -1 it must not (one row or column),
 * 0 either (cuBLASLt may have no epilogue algorithm for odd sizes). lowp:
 * the bias has an AMP working copy (16-bit settings). dbacc: 1 the bias
 * already holds a gradient (b_pre) when the backward runs, so db
 * accumulates; 2 the weight too (w_pre), so dw's GEMM runs with beta 1:
 * a parameter's case, whose gradients always accumulate. */
typedef struct {
    int ndim;
    int64_t x[3];
    int out, lowp, fuse, dbacc;
} Shape;

static const Shape shapes[] = {
    {2, {37, 64}, 48, 0, 0, 0},          /* R not a multiple of 8 */
    {2, {64, 96}, 33, 1, 0, 0},          /* Out odd */
    {2, {24, 40}, 1, 0, -1, 0},          /* Out = 1 */
    {2, {1, 40}, 24, 0, -1, 0},          /* R = 1 */
    {2, {40, 45}, 24, 1, 0, 1},          /* In odd; db accumulates */
    {3, {3, 45, 72}, 100, 1, 0, 0},      /* 3-D x, R = 135 */
    {3, {4, 128, 256}, 1024, 1, 1, 0},   /* aligned: working copy of the bias */
    {3, {4, 128, 256}, 1024, 0, 1, 0},   /* aligned: a cast of the bias */
    {3, {4, 128, 256}, 1024, 1, 1, 2},   /* aligned, db and dw accumulate */
};

/* The child's results on their way to the parent: written in case order by
 * the child, read back in the same order by the parent. */
typedef struct {
    FILE *f;
    int writing;
    int ok;          /* parent: every read so far was complete */
} Exchange;

static void exchange(Exchange *ex, float *p, size_t n)
{
    if (ex->writing) {
        fwrite(p, sizeof(float), n, ex->f);
        return;
    }
    if (ex->ok && fread(p, sizeof(float), n, ex->f) != n) ex->ok = 0;
}

/* One run of op_linear + backward on a context, its results as f32. */
typedef struct {
    float *y, *dx, *dw, *db;
    size_t allocs;   /* device allocations made by the forward */
} Result;

static void result_free(Result *r) { free(r->y); free(r->dx); free(r->dw); free(r->db); }

/* y = op_linear(x, w, b) under the setting, then loss = sum(y * lw) backward. */
static Result linear_run(Ctx *c, const GpuSetting *st, const Shape *sh, const float *x,
                         const float *w, const float *b, const float *lw)
{
    int64_t ws[2] = {sh->out, sh->x[sh->ndim - 1]}, bs = sh->out, ys[3];
    for (int i = 0; i < sh->ndim; i++) ys[i] = sh->x[i];
    ys[sh->ndim - 1] = sh->out;
    Tensor *tx = leaf_f32(c, x, sh->ndim, sh->x), *tw = leaf_f32(c, w, 2, ws);
    Tensor *tb = leaf_f32(c, b, 1, &bs);
    if (sh->lowp && st->dt != DT_F32 && c->device == DEV_CUDA)
        tb->lowp = tensor_from_f32(c, b, st->dt, 1, &bs);
    c->autocast = st->dt;
    c->allow_tf32 = st->tf32;
    size_t allocs = c->mem.n_allocs;
    Tensor *y = op_linear(c, tx, tw, tb);
    allocs = c->mem.n_allocs - allocs;
    c->autocast = DT_F32;
    c->allow_tf32 = 0;

    Tensor *tl = tensor_from_f32(c, lw, y->dtype, y->ndim, ys);
    Tensor *m = op_mul(c, y, tl);
    Tensor *loss = op_sum(c, m);
    if (sh->dbacc) { /* b's gradient already holds b_pre = b / 2 */
        float *pre = hcopy(b, (size_t)bs);
        for (int64_t i = 0; i < bs; i++) pre[i] *= 0.5f;
        tb->grad = tensor_from_f32(c, pre, DT_F32, 1, &bs);
        free(pre);
    }
    if (sh->dbacc == 2) { /* and w's holds w_pre = -w */
        size_t nw = (size_t)ws[0] * (size_t)ws[1];
        float *pre = hcopy(w, nw);
        for (size_t i = 0; i < nw; i++) pre[i] = -pre[i];
        tw->grad = tensor_from_f32(c, pre, DT_F32, 2, ws);
        free(pre);
    }
    ad_backward(c, loss, 1.0f);
    Result r = {host_f32(y), host_f32(tx->grad), host_f32(tw->grad), host_f32(tb->grad), allocs};
    tensor_release(loss); tensor_release(m); tensor_release(tl); tensor_release(y);
    tensor_release(tb->lowp);
    tb->lowp = NULL;
    tensor_release(tx); tensor_release(tw); tensor_release(tb);
    return r;
}

static double acc_tol(const GpuSetting *st, size_t K, double amax, double bmax)
{
    return (st->tf32 ? 3e-3 : 1e-5) * sqrt((double)K) * amax * bmax;
}

/* max |x w^T| over y, from a reference y and the bias it read (y's type). */
static double product_max(const float *yref, const float *b, DType dt, size_t R, size_t Out)
{
    float *bq = hcopy(b, Out);
    quantize(bq, Out, dt);
    double m = 0.0;
    for (size_t i = 0; i < R * Out; i++) m = fmax(m, fabs((double)yref[i] - bq[i % Out]));
    free(bq);
    return m;
}

/* got (a GPU run) against ref (the CPU, or the other GPU run). */
static void compare(const char *what, const char *tag, const GpuSetting *st, const Result *got,
                    const Result *ref, const float *x, const float *w, const float *b,
                    const float *lw, size_t R, size_t In, size_t Out, int grads_exact)
{
    char name[224];
    double xmax = maxabs(x, R * In), wmax = maxabs(w, Out * In), dymax = maxabs(lw, R * Out);
    double pmax = product_max(ref->y, b, st->dt, R, Out);
    double atol = acc_tol(st, In, xmax, wmax) + tol_atol(st->dt) + tol_rtol(st->dt) * pmax;
    snprintf(name, sizeof name, "linear.y %s %s", tag, what);
    check_close(name, got->y, ref->y, R * Out, atol, tol_rtol(st->dt));
    if (grads_exact) {
        snprintf(name, sizeof name, "linear.dx %s %s: same bits", tag, what);
        check_true(name, !memcmp(got->dx, ref->dx, R * In * sizeof(float)),
                   "dx changed with the bias paths");
    } else {
        snprintf(name, sizeof name, "linear.dx %s %s", tag, what);
        check_close(name, got->dx, ref->dx, R * In,
                    acc_tol(st, Out, dymax, wmax) + tol_atol(st->dt), tol_rtol(st->dt));
    }
    snprintf(name, sizeof name, "linear.dw %s %s", tag, what);
    check_close(name, got->dw, ref->dw, Out * In,
                acc_tol(st, R, dymax, xmax) + tol_atol(DT_F32), tol_rtol(DT_F32));
    snprintf(name, sizeof name, "linear.db %s %s", tag, what);
    check_close(name, got->db, ref->db, Out, 1e-5 * sqrt((double)R) * dymax + tol_atol(DT_F32),
                tol_rtol(DT_F32));
}

/* One case on both contexts; the child hands its GPU results over, the
 * parent compares with them. Returns 1 when the parent's forward took the
 * epilogue (one allocation fewer than the child's). */
static int linear_case(Ctx *gpu, Ctx *cpu, const GpuSetting *st, const Shape *sh, Exchange *ex)
{
    size_t In = (size_t)sh->x[sh->ndim - 1], Out = (size_t)sh->out, R = 1;
    for (int i = 0; i < sh->ndim - 1; i++) R *= (size_t)sh->x[i];
    char dims[48], tag[128];
    if (sh->ndim == 3)
        snprintf(dims, sizeof dims, "%zu,%zu,%zu", (size_t)sh->x[0], (size_t)sh->x[1], In);
    else
        snprintf(dims, sizeof dims, "%zu,%zu", R, In);
    snprintf(tag, sizeof tag, "%s x[%s] Out %zu%s%s%s", st->name, dims, Out,
             sh->lowp && st->dt != DT_F32 ? " bias copy" : "",
             sh->dbacc == 2 ? " db, dw accumulate" : sh->dbacc ? " db accumulates" : "",
             ex->writing ? " [separate add]" : "");
    float *x = hrand(R * In, -1.0f, 1.0f, DT_F32), *w = hrand(Out * In, -0.5f, 0.5f, DT_F32);
    float *b = hrand(Out, -2.0f, 2.0f, DT_F32), *lw = hrand(R * Out, -1.0f, 1.0f, st->dt);

    size_t base = gpu->mem.current;
    Result rg = linear_run(gpu, st, sh, x, w, b, lw), rc = linear_run(cpu, st, sh, x, w, b, lw);
    ctx_sync(gpu);
    char name[224];
    snprintf(name, sizeof name, "linear %s: memory returned", tag);
    check_true(name, gpu->mem.current == base, "%zu bytes held (base %zu)", gpu->mem.current, base);
    compare("vs CPU", tag, st, &rg, &rc, x, w, b, lw, R, In, Out, 0);

    Result off = {falloc(R * Out), falloc(R * In), falloc(Out * In), falloc(Out), 0};
    float allocs = (float)rg.allocs;
    if (ex->writing) {
        memcpy(off.y, rg.y, R * Out * sizeof(float));
        memcpy(off.dx, rg.dx, R * In * sizeof(float));
        memcpy(off.dw, rg.dw, Out * In * sizeof(float));
        memcpy(off.db, rg.db, Out * sizeof(float));
    }
    exchange(ex, off.y, R * Out);
    exchange(ex, off.dx, R * In);
    exchange(ex, off.dw, Out * In);
    exchange(ex, off.db, Out);
    exchange(ex, &allocs, 1);
    int fused = 0;
    if (!ex->writing && ex->ok) {
        compare("vs separate add", tag, st, &rg, &off, x, w, b, lw, R, In, Out, 1);
        fused = (float)rg.allocs + 1.0f == allocs;
        snprintf(name, sizeof name, "linear %s: epilogue %s", tag,
                 sh->fuse > 0 ? "taken" : sh->fuse < 0 ? "not taken" : "either");
        check_true(name, sh->fuse == 0 || fused == (sh->fuse > 0),
                   "forward allocations: %zu with the epilogue on, %.0f with it off", rg.allocs,
                   allocs);
    }
    result_free(&rg); result_free(&rc); result_free(&off);
    free(x); free(w); free(b); free(lw);
    return fused;
}

static void run_all(Exchange *ex)
{
    check_seed(20250117);
    Ctx gpu, cpu;
    ctx_init(&gpu, DEV_CUDA, 0, 0x5eedULL);
    ctx_init(&cpu, DEV_CPU, 0, 0x5eedULL);
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < (int)(sizeof gpu_settings / sizeof gpu_settings[0]); s++) {
        int fused = 0, bias_before = 0, bgrad_before = 0, bias_plans = 0, bgrad_plans = 0;
        matmul_plan_cache_epilogues(matmul_plan_cache_get(&gpu), &bias_before, &bgrad_before);
        for (int i = 0; i < nshapes; i++)
            fused += linear_case(&gpu, &cpu, &gpu_settings[s], &shapes[i], ex);
        matmul_plan_cache_epilogues(matmul_plan_cache_get(&gpu), &bias_plans, &bgrad_plans);
        const int taken = bgrad_plans - bgrad_before;
        if (!ex->writing) {
            printf("  %-9s epilogue taken in %d of %d shapes; %d bias-gradient plans\n",
                   gpu_settings[s].name, fused, nshapes, taken);
            char name[96];
            /* TF32 keeps the separate pass (ops/matmul_op.c, linear_dw) */
            snprintf(name, sizeof name, "linear %s: bias-gradient epilogue %s",
                     gpu_settings[s].name, gpu_settings[s].tf32 ? "not taken" : "taken");
            check_true(name, gpu_settings[s].tf32 ? taken == 0 : taken > 0,
                       "%d new bias-gradient plans", taken);
        } else {
            check_true("linear: no bias-gradient plan with CTRAIN_LINEAR_BGRAD=0", taken == 0,
                       "%d", taken);
        }
    }
    ctx_free(&gpu);
    ctx_free(&cpu);
}

/* The child: every case with the separate add, results into path. */
static void child_main(const char *path)
{
    int n = 0;
    setenv("CTRAIN_LINEAR_EPILOGUE", "0", 1);
    setenv("CTRAIN_LINEAR_BGRAD", "0", 1);
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) _exit(0); /* the parent says why */
    Exchange ex = {fopen(path, "wb"), 1, 1};
    if (!ex.f) _exit(1);
    run_all(&ex);
    int counts[2] = {check_passed_, check_failed_};
    fwrite(counts, sizeof counts, 1, ex.f);
    fclose(ex.f);
    fflush(stdout);
    _exit(0);
}

int main(void)
{
    char path[] = "/tmp/ctrain_linear_epilogue_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("gpu_linear_epilogue: mkstemp");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    close(fd);
    fflush(stdout);
    pid_t pid = fork();   /* before any CUDA call: the child starts its own */
    if (pid == 0) child_main(path);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    Exchange ex = {fopen(path, "rb"), 0, 1};
    unlink(path);   /* gone once closed, whatever happens next */
    ex.ok = ex.f != NULL;
    setenv("CTRAIN_LINEAR_EPILOGUE", "1", 1);
    setenv("CTRAIN_LINEAR_BGRAD", "1", 1);
    gpu_require();
    check_true("linear: the CTRAIN_LINEAR_EPILOGUE=0 run finished",
               pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "child status %d", status);

    run_all(&ex);
    int counts[2] = {0, 0};
    if (ex.ok && fread(counts, sizeof counts, 1, ex.f) != 1) ex.ok = 0;
    check_true("linear: the CTRAIN_LINEAR_EPILOGUE=0 results read back", ex.ok,
               "the file %s was short", path);
    check_passed_ += counts[0];   /* the child's own checks (its lines say [separate add]) */
    check_failed_ += counts[1];
    if (ex.f) fclose(ex.f);
    return check_summary();
}
