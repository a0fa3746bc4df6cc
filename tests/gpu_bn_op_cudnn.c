/* gpu_bn_op_cudnn.c — the tensor op batch norm on CUDA two ways, through
 * autograd, on the same inputs: cuDNN's fused batch norm (CTRAIN_BN=cudnn,
 * the default) against our kernels (CTRAIN_BN=own). The switch is set per
 * context (batchnorm_cudnn_use), so one process runs both.
 *
 * Shape letters: x [N, H, W, C], M = N*H*W rows, C channels.
 *
 * Each case runs op_batchnorm, then loss = sum(y * w) (+ extra terms that
 * make gradients accumulate), then the backward, and compares
 *   y, dx, dz            elementwise with tol(dt), a handful of elements
 *                        allowed out (a ReLU mask may flip where the two
 *                        implementations round a pre-activation near 0
 *                        differently: cuDNN keeps its mask in the reserve
 *                        space, ours reads y > 0), plus a relative norm;
 *   dgamma, dbeta        sums over M rows: atol ~ sqrt(M);
 *   running mean / var   f32-tight; num_batches_tracked exactly (and its
 *                        expected value: +1 when training, unchanged
 *                        otherwise);
 *   memory               every byte the step took is back (the reserve
 *                        space lives on the node and goes with it).
 * Cases: f32, f16, bf16; x [4,7,7,64] (C % 4 == 0), [2,5,5,6] and [3,4,5,33]
 * (C % 4 != 0), and a 2-D x [64, 8] (the op treats it as [64,1,1,8]); forms
 * bn, bn_relu, bn_add_relu and bn_add (z without ReLU: cuDNN has no such
 * form, our kernels must run); modes train, eval (running statistics: ours
 * on both sides, so bit-identical) and batch (no running statistics: batch
 * statistics in eval, cuDNN given NULL running pointers); gradients fresh,
 * all accumulating (dx and dz have a second consumer, gamma and beta are
 * parameters with a gradient already there), and mixed (gamma accumulates,
 * beta fresh, z needs no gradient).
 * Recompute: training with c->recomputing = 1 (a checkpointed segment
 * re-running its forward) leaves running mean, variance and
 * num_batches_tracked untouched on both paths and gives the gradients of
 * the plain training step.
 * Which path ran is checked too (batchnorm_cudnn_runs): never cuDNN with
 * CTRAIN_BN=own, in eval, or for bn_add / z with C % 4 != 0; always cuDNN
 * (forward and backward) for f16 NHWC with C % 4 == 0, its documented fast
 * path; other forms cuDNN may decline (printed as a note, not a failure).
 * Last, CUDA graphs: a training forward + backward captured on the
 * context's stream (cudaStreamCaptureModeGlobal, after an eager warm-up)
 * and replayed once gives the eager results, on both paths — no host sync,
 * no cudaMalloc inside.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/batchnorm.h"
#include "ops/batchnorm_cudnn.h"
#include "ops/ops.h"
#include "check.h"
#include "gpu_util.h"

#define EPS 1e-5f
#define MOM 0.1f
#define NBT0 5

enum { MODE_TRAIN = 0, MODE_EVAL = 1, MODE_BATCH = 2 };
static const char *mode_names[3] = {"train", "eval", "batch"};
enum { ACC_FRESH = 0, ACC_ALL = 1, ACC_MIXED = 2 };
static const char *acc_names[3] = {"fresh", "accum", "mixed"};

typedef struct { const char *name; int hz, relu; } Form;
static const Form forms[4] = {{"bn", 0, 0}, {"bn_relu", 0, 1}, {"bn_add_relu", 1, 1},
                              {"bn_add", 1, 0}};

typedef struct Shape { int ndim; int64_t d[4]; } Shape;

typedef struct Case {
    DType dt;
    Shape s;
    const Form *f;
    int mode, acc, recompute;
} Case;

/* Host inputs, f32, already rounded to the case's dtype where they are
 * stored in it. */
typedef struct Inputs {
    size_t M, C, n;
    float *x, *z, *w, *wx, *wz, *g, *b, *rm0, *rv0, *dg0, *db0;
} Inputs;

/* What one run hands back (host copies). */
typedef struct Out {
    float *y, *dx, *dz, *dg, *db, *rm, *rv;
    int64_t nbt;
    long fwd_cudnn, bwd_cudnn; /* cuDNN calls this run made */
} Out;

static size_t shape_numel(const Shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= (size_t)s->d[i];
    return n;
}

static void case_tag(char *buf, size_t len, const Case *k)
{
    char sh[48];
    if (k->s.ndim == 4)
        snprintf(sh, sizeof sh, "%lldx%lldx%lldx%lld", (long long)k->s.d[0],
                 (long long)k->s.d[1], (long long)k->s.d[2], (long long)k->s.d[3]);
    else
        snprintf(sh, sizeof sh, "%lldx%lld", (long long)k->s.d[0], (long long)k->s.d[1]);
    snprintf(buf, len, "%s.%s.%s.%s.%s%s", dtype_name(k->dt), sh, k->f->name,
             mode_names[k->mode], acc_names[k->acc], k->recompute ? ".recompute" : "");
}

static Inputs inputs_make(DType dt, const Shape *s)
{
    Inputs in;
    in.n = shape_numel(s);
    in.C = (size_t)s->d[s->ndim - 1];
    in.M = in.n / in.C;
    /* x: a scale and offset per channel, so each channel has its own
     * statistics */
    in.x = hrand(in.n, -1, 1, DT_F32);
    for (size_t m = 0; m < in.M; m++)
        for (size_t k = 0; k < in.C; k++) {
            float *v = &in.x[m * in.C + k];
            *v = *v * (1.0f + (float)(k % 7)) + 0.2f * (float)(k % 5);
        }
    quantize(in.x, in.n, dt);
    in.z = hrand(in.n, -1, 1, dt);
    in.w = hrand(in.n, -1, 1, dt);
    in.wx = hrand(in.n, -1, 1, dt);
    in.wz = hrand(in.n, -1, 1, dt);
    in.g = hrand(in.C, 0.5f, 1.5f, DT_F32);
    for (size_t k = 0; k < in.C; k += 3) in.g[k] = -in.g[k];
    in.b = hrand(in.C, -0.5f, 0.5f, DT_F32);
    in.rm0 = hrand(in.C, -0.5f, 0.5f, DT_F32);
    in.rv0 = hrand(in.C, 0.5f, 2.0f, DT_F32);
    in.dg0 = hrand(in.C, -1, 1, DT_F32);
    in.db0 = hrand(in.C, -1, 1, DT_F32);
    return in;
}

static void inputs_free(Inputs *in)
{
    free(in->x); free(in->z); free(in->w); free(in->wx); free(in->wz); free(in->g);
    free(in->b); free(in->rm0); free(in->rv0); free(in->dg0); free(in->db0);
}

static Tensor *vec(Ctx *c, const float *h, size_t C)
{
    int64_t cs = (int64_t)C;
    return tensor_from_f32(c, h, DT_F32, 1, &cs);
}

/* A parameter-like tensor: its gradient already holds g0 and accumulates. */
static void make_param(Ctx *c, Tensor *t, const float *g0, size_t C)
{
    t->is_param = 1;
    t->grad = vec(c, g0, C);
}

static Tensor *add_term(Ctx *c, Tensor *loss, Tensor *a, Tensor *w)
{
    Tensor *p = op_mul(c, a, w), *s = op_sum(c, p), *l = op_add(c, loss, s);
    tensor_release(p); tensor_release(s); tensor_release(loss);
    return l;
}

static float *to_host(const Tensor *t, size_t n)
{
    float *h = hbuf(n);
    if (t) tensor_to_f32(h, t);
    return h;
}

/* One forward + backward of the op with the path chosen by use_cudnn. */
static Out run(Ctx *c, const Case *k, const Inputs *in, int use_cudnn)
{
    char name[192], tag[128];
    case_tag(tag, sizeof tag, k);
    batchnorm_cudnn_use(c, use_cudnn);
    size_t base = c->mem.current, ws0 = c->workspace_bytes;
    long f0, b0, f1, b1;
    batchnorm_cudnn_runs(c, &f0, &b0);
    const int hz = k->f->hz, relu = k->f->relu, running = k->mode != MODE_BATCH;
    int64_t nbt0 = NBT0;
    Tensor *tx = tensor_from_f32(c, in->x, k->dt, k->s.ndim, k->s.d);
    Tensor *tz = hz ? tensor_from_f32(c, in->z, k->dt, k->s.ndim, k->s.d) : NULL;
    Tensor *tw = tensor_from_f32(c, in->w, k->dt, k->s.ndim, k->s.d);
    Tensor *twx = tensor_from_f32(c, in->wx, k->dt, k->s.ndim, k->s.d);
    Tensor *twz = tensor_from_f32(c, in->wz, k->dt, k->s.ndim, k->s.d);
    Tensor *tg = vec(c, in->g, in->C), *tb = vec(c, in->b, in->C);
    Tensor *trm = running ? vec(c, in->rm0, in->C) : NULL;
    Tensor *trv = running ? vec(c, in->rv0, in->C) : NULL;
    Tensor *tn = running ? tensor_from_host(c, &nbt0, DT_I64, 1, (int64_t[]){1}) : NULL;
    tx->requires_grad = tg->requires_grad = tb->requires_grad = 1;
    if (tz) tz->requires_grad = k->acc != ACC_MIXED;
    if (k->acc == ACC_ALL) make_param(c, tb, in->db0, in->C);
    if (k->acc != ACC_FRESH) make_param(c, tg, in->dg0, in->C);

    c->recomputing = k->recompute;
    Tensor *ty = op_batchnorm(c, tx, tg, tb, trm, trv, tn, k->mode == MODE_TRAIN, MOM, EPS, tz,
                              relu);
    c->recomputing = 0;
    Tensor *p = op_mul(c, ty, tw), *loss = op_sum(c, p);
    tensor_release(p);
    /* consumers recorded after the batch norm run first in the backward:
     * they write dx and dz, the batch norm then adds into them */
    if (k->acc == ACC_ALL) {
        loss = add_term(c, loss, tx, twx);
        if (tz) loss = add_term(c, loss, tz, twz);
    }
    ad_backward(c, loss, 1.0f);
    tensor_release(loss);

    Out o;
    o.y = to_host(ty, in->n);
    o.dx = to_host(tx->grad, in->n);
    o.dz = to_host(tz ? tz->grad : NULL, in->n);
    o.dg = to_host(tg->grad, in->C);
    o.db = to_host(tb->grad, in->C);
    o.rm = running ? to_host(trm, in->C) : hcopy(in->rm0, in->C);
    o.rv = running ? to_host(trv, in->C) : hcopy(in->rv0, in->C);
    o.nbt = NBT0;
    if (tn) tensor_to_host(&o.nbt, tn);
    batchnorm_cudnn_runs(c, &f1, &b1);
    o.fwd_cudnn = f1 - f0;
    o.bwd_cudnn = b1 - b0;

    Tensor *all[] = {ty, tx, tz, tw, twx, twz, tg, tb, trm, trv, tn};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tensor_release(all[i]);
    /* a form built on first use may grow the shared workspace: not a leak */
    size_t want = base + (c->workspace_bytes - ws0);
    snprintf(name, sizeof name, "bn.cudnn_op.no_leak.%s.%s", use_cudnn ? "cudnn" : "own", tag);
    check_true(name, c->mem.current == want, "%zu bytes held, expected %zu", c->mem.current,
               want);
    return o;
}

static void out_free(Out *o)
{
    free(o->y); free(o->dx); free(o->dz); free(o->dg); free(o->db); free(o->rm); free(o->rv);
}

static double grad_rel(DType dt) { return dt == DT_F32 ? 1e-5 : dt == DT_F16 ? 3e-3 : 2e-2; }
static double sum_atol(size_t M) { return 1e-4 * sqrt((double)M) + 1e-5; }
static double sum_rtol(DType dt) { return dt == DT_F32 ? 1e-4 : 2e-3; }

/* a against b (cuDNN against ours, a graph replay against eager, ...);
 * running: also the running statistics and the counter */
static void compare(const char *what, const Case *k, const Inputs *in, const Out *a,
                    const Out *b, int running)
{
    char name[224], tag[128];
    case_tag(tag, sizeof tag, k);
    const size_t n = in->n, C = in->C, allow = 2 + n / 1000;
    const double at = tol_atol(k->dt), rt = tol_rtol(k->dt);
#define NAME(part) (snprintf(name, sizeof name, "bn.%s.%s.%s", what, part, tag), name)
    check_close_most(NAME("y"), a->y, b->y, n, at, rt, allow);
    check_close_most(NAME("dx"), a->dx, b->dx, n, at, rt, allow);
    check_rel_norm(NAME("dx_norm"), a->dx, b->dx, n, grad_rel(k->dt));
    if (k->f->hz && k->acc != ACC_MIXED) {
        check_close_most(NAME("dz"), a->dz, b->dz, n, at, rt, allow);
        check_rel_norm(NAME("dz_norm"), a->dz, b->dz, n, grad_rel(k->dt));
    }
    check_close(NAME("dgamma"), a->dg, b->dg, C, sum_atol(in->M), sum_rtol(k->dt));
    check_close(NAME("dbeta"), a->db, b->db, C, sum_atol(in->M), sum_rtol(k->dt));
    if (running) {
        check_close(NAME("running_mean"), a->rm, b->rm, C, 1e-6, 1e-5);
        check_close(NAME("running_var"), a->rv, b->rv, C, 1e-6, 1e-5);
        check_true(NAME("num_batches_tracked"), a->nbt == b->nbt, "%lld vs %lld",
                   (long long)a->nbt, (long long)b->nbt);
    }
#undef NAME
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Whether the op may hand the case to cuDNN at all: batch statistics, and
 * a form cuDNN has (z only with ReLU and C % 4 == 0). */
static int cudnn_may_take(const Case *k)
{
    const int C = (int)k->s.d[k->s.ndim - 1];
    return k->mode != MODE_EVAL && !(k->f->hz && (!k->f->relu || C % 4 != 0));
}

/* The path checks for one run; returns 1 when cuDNN ran both ways. */
static int check_path(const Case *k, const Out *o, int use_cudnn, int *noted)
{
    char name[224], tag[128];
    case_tag(tag, sizeof tag, k);
    const int C = (int)k->s.d[k->s.ndim - 1];
    const int never = !use_cudnn || !cudnn_may_take(k);
    const int must = !never && k->dt == DT_F16 && C % 4 == 0 && k->s.ndim == 4;
    snprintf(name, sizeof name, "bn.cudnn_op.path.%s.%s", use_cudnn ? "cudnn" : "own", tag);
    if (never)
        check_true(name, o->fwd_cudnn == 0 && o->bwd_cudnn == 0,
                   "cuDNN ran (%ld forward, %ld backward) where our kernels must", o->fwd_cudnn,
                   o->bwd_cudnn);
    else if (must)
        check_true(name, o->fwd_cudnn == 1 && o->bwd_cudnn == 1,
                   "cuDNN ran %ld forward and %ld backward calls, expected 1 and 1 (f16 NHWC, "
                   "C %% 4 == 0 is its fast path)", o->fwd_cudnn, o->bwd_cudnn);
    else {
        check_true(name, o->fwd_cudnn <= 1 && o->bwd_cudnn <= o->fwd_cudnn,
                   "%ld forward, %ld backward cuDNN calls", o->fwd_cudnn, o->bwd_cudnn);
        if ((o->fwd_cudnn == 0 || o->bwd_cudnn == 0) && !*noted) {
            printf("  note: cuDNN declined %s (forward %s, backward %s); our kernels ran it\n",
                   tag, o->fwd_cudnn ? "ran" : "declined", o->bwd_cudnn ? "ran" : "declined");
            *noted = 1;
        }
    }
    return o->fwd_cudnn == 1 && o->bwd_cudnn == 1;
}

static void test_case(Ctx *c, DType dt, const Shape *s, const Form *f, long *ran, long *eligible)
{
    char name[224], tag[128];
    Inputs in = inputs_make(dt, s);
    Out train_cudnn = {0}, train_own = {0};
    int noted = 0;
    for (int mode = 0; mode < 3; mode++)
        for (int acc = 0; acc < 3; acc++) {
            Case k = {dt, *s, f, mode, acc, 0};
            case_tag(tag, sizeof tag, &k);
            Out a = run(c, &k, &in, 1), b = run(c, &k, &in, 0);
            compare("cudnn_vs_own", &k, &in, &a, &b, 1);
            check_path(&k, &b, 0, &noted);
            *eligible += cudnn_may_take(&k);
            *ran += check_path(&k, &a, 1, &noted);
            int64_t want = mode == MODE_TRAIN ? NBT0 + 1 : NBT0;
            snprintf(name, sizeof name, "bn.cudnn_op.num_batches_tracked_value.%s", tag);
            check_true(name, a.nbt == want && b.nbt == want, "cudnn %lld own %lld, want %lld",
                       (long long)a.nbt, (long long)b.nbt, (long long)want);
            if (mode == MODE_EVAL) {
                /* ours on both sides: nothing may differ */
                snprintf(name, sizeof name, "bn.cudnn_op.eval_same_bits.%s", tag);
                check_true(name, same_bits(a.y, b.y, in.n) && same_bits(a.dx, b.dx, in.n) &&
                                     same_bits(a.dz, b.dz, in.n) && same_bits(a.dg, b.dg, in.C) &&
                                     same_bits(a.db, b.db, in.C),
                           "eval differs between CTRAIN_BN=cudnn and own");
            }
            if (mode == MODE_TRAIN && acc == ACC_FRESH) {
                train_cudnn = a;
                train_own = b;
            } else {
                out_free(&a);
                out_free(&b);
            }
        }

    /* a recompute segment re-running its forward: running statistics and
     * the counter untouched, gradients those of the plain training step */
    Case k = {dt, *s, f, MODE_TRAIN, ACC_FRESH, 1};
    case_tag(tag, sizeof tag, &k);
    Out a = run(c, &k, &in, 1), b = run(c, &k, &in, 0);
    compare("cudnn_vs_own", &k, &in, &a, &b, 1);
    check_path(&k, &a, 1, &noted);
    check_path(&k, &b, 0, &noted);
    compare("recompute_vs_train.cudnn", &k, &in, &a, &train_cudnn, 0);
    compare("recompute_vs_train.own", &k, &in, &b, &train_own, 0);
    snprintf(name, sizeof name, "bn.cudnn_op.recompute_running_untouched.%s", tag);
    check_true(name, same_bits(a.rm, in.rm0, in.C) && same_bits(a.rv, in.rv0, in.C) &&
                         same_bits(b.rm, in.rm0, in.C) && same_bits(b.rv, in.rv0, in.C) &&
                         a.nbt == NBT0 && b.nbt == NBT0,
               "running statistics or num_batches_tracked changed (nbt cudnn %lld own %lld)",
               (long long)a.nbt, (long long)b.nbt);
    out_free(&a); out_free(&b); out_free(&train_cudnn); out_free(&train_own);
    inputs_free(&in);
}

/* ---- CUDA graph capture of a training step ---- */

typedef struct Step {
    Tensor *tx, *tz, *tw, *tg, *tb, *trm, *trv, *tn, *ty;
} Step;

static void step_inputs(Ctx *c, Step *st, DType dt, const Shape *s, const Inputs *in, int hz)
{
    int64_t nbt0 = NBT0;
    memset(st, 0, sizeof *st);
    st->tx = tensor_from_f32(c, in->x, dt, s->ndim, s->d);
    st->tz = hz ? tensor_from_f32(c, in->z, dt, s->ndim, s->d) : NULL;
    st->tw = tensor_from_f32(c, in->w, dt, s->ndim, s->d);
    st->tg = vec(c, in->g, in->C);
    st->tb = vec(c, in->b, in->C);
    st->trm = vec(c, in->rm0, in->C);
    st->trv = vec(c, in->rv0, in->C);
    st->tn = tensor_from_host(c, &nbt0, DT_I64, 1, (int64_t[]){1});
    st->tx->requires_grad = st->tg->requires_grad = st->tb->requires_grad = 1;
    if (st->tz) st->tz->requires_grad = 1;
}

/* forward + backward: everything queued on c->stream */
static void step_run(Ctx *c, Step *st, int relu)
{
    st->ty = op_batchnorm(c, st->tx, st->tg, st->tb, st->trm, st->trv, st->tn, 1, MOM, EPS,
                          st->tz, relu);
    Tensor *p = op_mul(c, st->ty, st->tw), *loss = op_sum(c, p);
    ad_backward(c, loss, 1.0f);
    tensor_release(p);
    tensor_release(loss);
}

static Out step_out(const Step *st, const Inputs *in)
{
    Out o;
    o.y = to_host(st->ty, in->n);
    o.dx = to_host(st->tx->grad, in->n);
    o.dz = to_host(st->tz ? st->tz->grad : NULL, in->n);
    o.dg = to_host(st->tg->grad, in->C);
    o.db = to_host(st->tb->grad, in->C);
    o.rm = to_host(st->trm, in->C);
    o.rv = to_host(st->trv, in->C);
    tensor_to_host(&o.nbt, st->tn);
    o.fwd_cudnn = o.bwd_cudnn = 0;
    return o;
}

static void step_free(Step *st)
{
    Tensor *all[] = {st->ty, st->tx, st->tz, st->tw, st->tg, st->tb, st->trm, st->trv, st->tn};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tensor_release(all[i]);
}

static void test_graph(Ctx *c, DType dt, const Shape *s, const Form *f, int use_cudnn)
{
    char what[64];
    Inputs in = inputs_make(dt, s);
    Case k = {dt, *s, f, MODE_TRAIN, ACC_FRESH, 0};
    batchnorm_cudnn_use(c, use_cudnn);
    Step e, g;
    /* eager: also the warm-up that builds the cuDNN form */
    step_inputs(c, &e, dt, s, &in, f->hz);
    step_run(c, &e, f->relu);
    Out oe = step_out(&e, &in);
    step_free(&e);

    step_inputs(c, &g, dt, s, &in, f->hz);
    ctx_sync(c);
    cudaGraph_t gr;
    cudaGraphExec_t ex;
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
    step_run(c, &g, f->relu);
    CUDA_CHECK(cudaStreamEndCapture(c->stream, &gr));
    CUDA_CHECK(cudaGraphInstantiate(&ex, gr, 0));
    CUDA_CHECK(cudaGraphLaunch(ex, c->stream));
    ctx_sync(c);
    Out og = step_out(&g, &in);
    /* the graph's allocations that outlive it (y, the gradients) are freed
     * in stream order after the launch */
    step_free(&g);
    ctx_sync(c);
    CUDA_CHECK(cudaGraphExecDestroy(ex));
    CUDA_CHECK(cudaGraphDestroy(gr));
    snprintf(what, sizeof what, "graph_vs_eager.%s", use_cudnn ? "cudnn" : "own");
    compare(what, &k, &in, &og, &oe, 1);
    out_free(&oe);
    out_free(&og);
    inputs_free(&in);
}

/* CTRAIN_BN_PAIR: BN + add + ReLU's forward as ours, writing the ReLU's mask in
 * cuDNN's reserve layout, before cuDNN's backward. The form's first call checks
 * our mask against cuDNN's own forward (the verdict must be "pairs"); every
 * output of two paired runs (the second on the checked form) against the
 * cuDNN-only path at the cuDNN-vs-ours tolerances. */
static void test_pair(Ctx *c, DType dt, const Shape *s)
{
    char name[224], tag[128];
    Inputs in = inputs_make(dt, s);
    Case k = {dt, *s, &forms[2], MODE_TRAIN, ACC_FRESH, 0};
    case_tag(tag, sizeof tag, &k);
    const char *was = getenv("CTRAIN_BN_PAIR");
    char *saved = was ? strdup(was) : NULL;
    setenv("CTRAIN_BN_PAIR", "off", 1);
    Out a = run(c, &k, &in, 1);
    BnCudnn *p0 = batchnorm_cudnn_get(c, dt, (int)s->d[0], (int)s->d[1], (int)s->d[2],
                                      (int)s->d[3], 1, 1);
    /* unchecked unless a run under CTRAIN_BN_PAIR set outside took the form before */
    const long checks = p0 && p0->pair < 0, pruns0 = p0 ? p0->pair_runs : 0;
    setenv("CTRAIN_BN_PAIR", "add_relu", 1);
    Out b = run(c, &k, &in, 1), b2 = run(c, &k, &in, 1);
    BnCudnn *p = batchnorm_cudnn_get(c, dt, (int)s->d[0], (int)s->d[1], (int)s->d[2],
                                     (int)s->d[3], 1, 1);
    snprintf(name, sizeof name, "bn.pair.verdict.%s", tag);
    check_true(name, p && p->pair == 1 && p->pair_runs == pruns0 + 2,
               "verdict %d, %ld paired runs (expected 1 and %ld)", p ? p->pair : -2,
               p ? p->pair_runs : -1L, pruns0 + 2);
    snprintf(name, sizeof name, "bn.pair.paths.%s", tag);
    check_true(name, a.fwd_cudnn == 1 && a.bwd_cudnn == 1 && b.fwd_cudnn == checks &&
                         b.bwd_cudnn == 1 && b2.fwd_cudnn == 0 && b2.bwd_cudnn == 1,
               "cuDNN forward / backward calls: alone %ld / %ld, first paired %ld / %ld (the "
               "check's forward), checked %ld / %ld (expected 1/1, %ld/1, 0/1)", a.fwd_cudnn,
               a.bwd_cudnn, b.fwd_cudnn, b.bwd_cudnn, b2.fwd_cudnn, b2.bwd_cudnn, checks);
    compare("pair_vs_cudnn", &k, &in, &b, &a, 1);
    compare("pair_checked_vs_cudnn", &k, &in, &b2, &a, 1);
    snprintf(name, sizeof name, "bn.pair.same_bits_twice.%s", tag);
    check_true(name, same_bits(b.y, b2.y, in.n) && same_bits(b.dx, b2.dx, in.n),
               "the checked form's run differs from the first");
    /* BN + ReLU under `all`: no reserve, cuDNN's backward reads our y */
    Case kr = {dt, *s, &forms[1], MODE_TRAIN, ACC_FRESH, 0};
    case_tag(tag, sizeof tag, &kr);
    setenv("CTRAIN_BN_PAIR", "off", 1);
    Out ra = run(c, &kr, &in, 1);
    BnCudnn *q0 = batchnorm_cudnn_get(c, dt, (int)s->d[0], (int)s->d[1], (int)s->d[2],
                                      (int)s->d[3], 0, 1);
    const long runs0 = q0 ? q0->pair_runs : 0;
    setenv("CTRAIN_BN_PAIR", "all", 1);
    Out rb = run(c, &kr, &in, 1);
    BnCudnn *q = batchnorm_cudnn_get(c, dt, (int)s->d[0], (int)s->d[1], (int)s->d[2],
                                     (int)s->d[3], 0, 1);
    snprintf(name, sizeof name, "bn.pair.relu_taken.%s", tag);
    check_true(name, q && q->reserve_bytes == 0 && q->pair_runs == runs0 + 1 &&
                         rb.bwd_cudnn == 1,
               "reserve %zu bytes, %ld paired runs, %ld cuDNN backwards (expected 0, %ld, 1)",
               q ? q->reserve_bytes : 0, q ? q->pair_runs : -1L, rb.bwd_cudnn, runs0 + 1);
    compare("pair_relu_vs_cudnn", &kr, &in, &rb, &ra, 1);
    if (saved) setenv("CTRAIN_BN_PAIR", saved, 1);
    else unsetenv("CTRAIN_BN_PAIR");
    free(saved);
    out_free(&ra); out_free(&rb);
    out_free(&a); out_free(&b); out_free(&b2);
    inputs_free(&in);
}

int main(void)
{
    gpu_require();
    check_seed(777);
    /* the path checks count cuDNN's forwards: its own, unpaired (the pair's cases set
     * the setting themselves) */
    setenv("CTRAIN_BN_PAIR", "off", 1);
    if (!getenv("CTRAIN_BN"))
        check_true("bn.cudnn_op.default_is_cudnn", batchnorm_cudnn_wanted() == 1,
                   "CTRAIN_BN unset should select cuDNN");
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    check_true("bn.cudnn_op.ctx_follows_env",
               batchnorm_cudnn_enabled(&c) == batchnorm_cudnn_wanted(),
               "a fresh context should follow CTRAIN_BN");
    static const Shape shapes[4] = {
        {4, {4, 7, 7, 64}}, {4, {2, 5, 5, 6}}, {4, {3, 4, 5, 33}}, {2, {64, 8}}};
    long ran = 0, eligible = 0;
    for (int t = 0; t < 3; t++)
        for (int si = 0; si < 4; si++)
            for (int fi = 0; fi < 4; fi++)
                test_case(&c, gpu_float_types[t], &shapes[si], &forms[fi], &ran, &eligible);
    printf("  cuDNN ran forward and backward in %ld of %ld runs it could take\n", ran, eligible);
    /* 196, 105 and 49 pixels (padded to 224, 128 and 64 in the mask; the odd ones end
     * on a pair half padding), and 32 (none) */
    static const Shape pair_shapes[4] = {{4, {4, 7, 7, 128}}, {4, {3, 5, 7, 64}},
                                         {4, {1, 7, 7, 192}}, {4, {2, 4, 4, 64}}};
    for (int t = 0; t < 3; t++)
        for (int si = 0; si < 4; si++) test_pair(&c, gpu_float_types[t], &pair_shapes[si]);

    /* graphs last: a capture failure is fatal and would hide the rest */
    for (int use = 1; use >= 0; use--) {
        test_graph(&c, DT_F16, &shapes[0], &forms[2], use);
        test_graph(&c, DT_F32, &shapes[1], &forms[1], use);
        test_graph(&c, DT_BF16, &shapes[0], &forms[0], use);
    }
    batchnorm_cudnn_use(&c, -1);
    ctx_free(&c);
    return check_summary();
}
