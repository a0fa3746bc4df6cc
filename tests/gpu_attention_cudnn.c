/* gpu_attention_cudnn.c — the attention op on cuDNN's fused flash attention
 * (CTRAIN_ATTN=cudnn, ops/attention_cudnn.h) through autograd, for BERT's
 * shapes in bf16 and f16: q, k, v [B, T, H, Dh] leaves of the storage type,
 * loss = sum(out * w), so dout = w.
 *
 *   run:  make -j2 ARCH=90 build/tests/gpu_attention_cudnn && build/tests/gpu_attention_cudnn
 *         (CHECK_VERBOSE=1 prints every check; CTRAIN_LOG=debug the forms cuDNN took)
 *
 * Per type and shape (B 2, H 4, Dh 64, T 128 and 512; and Dh 20, a head
 * width cuDNN is expected to decline):
 *   (a) p 0, without and with the key mask (0 real keys, -10000 the last
 *       third of every batch row but the first): out, dq, dk, dv against the
 *       CPU reference op on the same (rounded) values, by relative norm
 *       (tol_norm for out, twice it for the gradients, as gpu_flash_attn's op
 *       checks); q = k = v one tensor (its gradient the three added) too,
 *       and op_attention_at on [B, H, T, Dh] (the mask);
 *   (b) p 0.1 (with the mask): the same (seed, offset) twice gives the same
 *       bits (out, dq, dk, dv); another offset another mask; per (b, h) sum
 *       dv.v = sum dO.out within 1e-2 relative (both are sum Pd (dO.v): it
 *       holds only when the backward redraws the forward's mask); and
 *       |out - out_p0| / |out_p0| = sqrt(p / (1-p)) within 15% (its
 *       expectation for v independent of the scores: the keep probability),
 *       the fused kernels' value printed beside;
 *   (c) accumulation: a second forward + backward into the same leaves
 *       leaves exactly twice the first gradients (the temporary-and-add path);
 *   (d) where cuDNN declines a form (its run counters do not move), the test
 *       prints SKIP for it and checks that the op fell back: out and the
 *       gradients equal, bit for bit, those of CTRAIN_ATTN=flash (the
 *       fused kernels). Every run: cuDNN ran both directions or neither, and all
 *       memory comes back;
 *   CUDA graphs: forward + backward (attention_cudnn_forward / _backward)
 *       captured once with c->rng_base and replayed with two base values,
 *       bit for bit the eager runs at offset + base (the seed / offset
 *       kernel reads the base inside the graph), and the two masks differ.
 * Shape letters: B batch, H heads, T tokens, Dh head width.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "tensor_check.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/attention.h"
#include "ops/attention_cudnn.h"
#include "ops/ops.h"

#define SEED 0x5eedULL
#define OFFSET 4242ULL

typedef struct {
    size_t B, H, T, Dh, n;
    int64_t shape[4], ms[2];   /* [B, T, H, Dh], the mask's [B, T] */
    DType dt;
    float *q, *k, *v, *w, *mask;   /* host, rounded through dt (the mask f32) */
    int bhtd;                      /* the ops called: op_attention_at on [B, H, T, Dh] */
} In;

static In in_make(DType dt, size_t B, size_t H, size_t T, size_t Dh)
{
    In in = {B, H, T, Dh, B * T * H * Dh, {(int64_t)B, (int64_t)T, (int64_t)H, (int64_t)Dh},
             {(int64_t)B, (int64_t)T}, dt, NULL, NULL, NULL, NULL, NULL, 0};
    in.q = hrand(in.n, -2.0f, 2.0f, dt);
    in.k = hrand(in.n, -2.0f, 2.0f, dt);
    in.v = hrand(in.n, -1.0f, 1.0f, dt);
    in.w = hrand(in.n, -1.0f, 1.0f, dt);
    in.mask = falloc(B * T);
    for (size_t i = 0; i < B * T; i++)
        in.mask[i] = i >= T && i % T >= 2 * T / 3 ? -10000.0f : 0.0f;
    return in;
}

static void in_free(In *in)
{
    free(in->q); free(in->k); free(in->v); free(in->w); free(in->mask);
}

/* One run's results: out, dq, dk, dv (dx when shared) as f32 and as stored. */
typedef struct {
    float *f[4];
    unsigned char *raw[4];
    int cudnn;        /* cuDNN ran every forward and backward of the run */
    size_t held;      /* bytes the context held after it more than before */
} Res;

static void res_free(Res *r)
{
    for (int i = 0; i < 4; i++) {
        free(r->f[i]);
        free(r->raw[i]);
    }
    memset(r, 0, sizeof r[0]);
}

static void grab(Res *r, int i, Tensor *t)
{
    r->f[i] = falloc(t->numel);
    tensor_to_f32(r->f[i], t);
    r->raw[i] = malloc(t->numel * dtype_size(t->dtype));
    tensor_to_host(r->raw[i], t);
}

/* reps forwards + backwards of op_attention_bthd_at on c into the same
 * leaves (of type dt; f32 on the CPU) under CTRAIN_ATTN=attn (NULL: flash, the
 * fused kernels);
 * shared: q = k = v = one leaf (q's values). */
static void run(Ctx *c, const char *attn, const In *in, int masked, float p, uint64_t offset,
                int reps, int shared, Res *r)
{
    memset(r, 0, sizeof *r);
    setenv("CTRAIN_ATTN", attn ? attn : "flash", 1);
    const DType dt = c->device == DEV_CUDA ? in->dt : DT_F32;
    const size_t before = c->mem.current;
    long f0 = 0, b0 = 0, f1 = 0, b1 = 0;
    if (c->device == DEV_CUDA) attention_cudnn_runs(c, &f0, &b0);
    const float *h[3] = {in->q, in->k, in->v};
    const int64_t bhtd[4] = {(int64_t)in->B, (int64_t)in->H, (int64_t)in->T, (int64_t)in->Dh};
    Tensor *t[3];
    for (int i = 0; i < 3; i++) {
        if (shared && i) {
            tensor_retain(t[0]);
            t[i] = t[0];
            continue;
        }
        /* a leaf of the storage type */
        t[i] = tensor_from_f32(c, h[i], dt, 4, in->bhtd ? bhtd : in->shape);
        t[i]->requires_grad = 1;
    }
    Tensor *m = masked ? tensor_from_f32(c, in->mask, DT_F32, 2, in->ms) : NULL;
    for (int rep = 0; rep < reps; rep++) {
        Tensor *y = in->bhtd ? op_attention_at(c, t[0], t[1], t[2], m, p, SEED, offset)
                             : op_attention_bthd_at(c, t[0], t[1], t[2], m, p, SEED, offset);
        backward_weighted(c, y, in->w);
        if (rep == reps - 1) grab(r, 0, y);
        tensor_release(y);
    }
    for (int i = 0; i < (shared ? 1 : 3); i++) {
        if (t[i]->grad) grab(r, i + 1, t[i]->grad);
    }
    for (int i = 0; i < 3; i++) tensor_release(t[i]);
    tensor_release(m);
    ctx_sync(c);
    r->held = c->mem.current - before;
    if (c->device == DEV_CUDA) {
        attention_cudnn_runs(c, &f1, &b1);
        r->cudnn = f1 - f0 == reps && b1 - b0 == reps;
        char name[96];
        snprintf(name, sizeof name, "gpu.attn_cudnn.%s: cuDNN ran both directions or neither",
                 attn ? attn : "flash");
        check_true(name, f1 - f0 == b1 - b0, "%ld forwards, %ld backwards", f1 - f0, b1 - b0);
    }
    unsetenv("CTRAIN_ATTN");
}

static const char *const out_names[4] = {"out", "dq", "dk", "dv"};

/* got against ref by relative norm: out within tol_norm(dt), gradients twice it. */
static void cmp_ref(const char *tag, const Res *got, const Res *ref, DType dt, size_t n,
                    int shared)
{
    char name[320];
    for (int i = 0; i < (shared ? 2 : 4); i++) {
        snprintf(name, sizeof name, "gpu.attn_cudnn.%s %s vs CPU",
                 i && shared ? "dx" : out_names[i], tag);
        if (!got->f[i] || !ref->f[i]) {
            check_true(name, 0, "missing");
            continue;
        }
        check_rel_norm(name, got->f[i], ref->f[i], n, (i ? 2.0 : 1.0) * tol_norm(dt));
    }
}

/* Every output of a and b (out, dx when shared) the same bytes. */
static void same_bits(const char *what, const char *tag, const Res *a, const Res *b, size_t n,
                      DType dt, int shared)
{
    char name[320];
    for (int i = 0; i < (shared ? 2 : 4); i++) {
        snprintf(name, sizeof name, "gpu.attn_cudnn.%s %s %s", i && shared ? "dx" : out_names[i],
                 what, tag);
        if (!a->raw[i] || !b->raw[i]) {
            check_true(name, 0, "missing");
            continue;
        }
        size_t d = 0;
        const size_t es = dtype_size(dt);
        for (size_t x = 0; x < n; x++) d += memcmp(a->raw[i] + x * es, b->raw[i] + x * es, es) != 0;
        check_true(name, d == 0, "%zu of %zu elements differ", d, n);
    }
}

/* ||a - b|| / ||b|| */
static double rel(const float *a, const float *b, size_t n)
{
    double e = 0.0, r = 0.0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0.0 ? sqrt(e / r) : sqrt(e);
}

/* head_dots_rel (gpu_util.h) on in's shape */
static double identity(const In *in, const float *x1, const float *y1, const float *x2,
                       const float *y2)
{
    return head_dots_rel(in->B, in->H, in->T, in->Dh, x1, y1, x2, y2);
}

/* (d): cuDNN declined: SKIP, and the op's results equal those of CTRAIN_ATTN=flash. */
static void check_fell_back(Ctx *g, const char *tag, const In *in, int masked, float p,
                            const Res *got, int shared)
{
    printf("  SKIP cuDNN declined %s: checking that the op fell back\n", tag);
    Res def;
    run(g, NULL, in, masked, p, OFFSET, 1, shared, &def);
    same_bits("= CTRAIN_ATTN=flash (fell back)", tag, got, &def, in->n, in->dt, shared);
    res_free(&def);
}

/* (a): p 0, with or without the mask, plain or q = k = v, against the CPU op. */
static void case_p0(Ctx *g, Ctx *cpu, const In *in, int masked, int shared, Res *keep)
{
    char tag[128];
    snprintf(tag, sizeof tag, "%s (B %zu, H %zu, T %zu, Dh %zu) p 0%s%s%s", dtype_name(in->dt),
             in->B, in->H, in->T, in->Dh, masked ? " mask" : "", shared ? " q = k = v" : "",
             in->bhtd ? " [B, H, T, Dh]" : "");
    Res got, ref;
    run(g, "cudnn", in, masked, 0.0f, OFFSET, 1, shared, &got);
    run(cpu, NULL, in, masked, 0.0f, OFFSET, 1, shared, &ref);
    if (!got.cudnn) check_fell_back(g, tag, in, masked, 0.0f, &got, shared);
    char t2[160];
    snprintf(t2, sizeof t2, "[%s] %s", got.cudnn ? "cudnn" : "fallback", tag);
    cmp_ref(t2, &got, &ref, in->dt, in->n, shared);
    res_free(&ref);
    if (keep) *keep = got;
    else res_free(&got);
}

/* (b) and (c): p 0.1 with the mask; p0 the p 0 run of the same inputs and mask. */
static void case_dropout(Ctx *g, const In *in, const Res *p0)
{
    const float p = 0.1f;
    char tag[128], name[320];
    snprintf(tag, sizeof tag, "%s (B %zu, H %zu, T %zu, Dh %zu) p %g mask", dtype_name(in->dt),
             in->B, in->H, in->T, in->Dh, (double)p);
    Res a, b, o, two, fused;
    run(g, "cudnn", in, 1, p, OFFSET, 1, 0, &a);
    run(g, "cudnn", in, 1, p, OFFSET, 1, 0, &b);
    if (!a.cudnn) check_fell_back(g, tag, in, 1, p, &a, 0);
    char t2[160];
    snprintf(t2, sizeof t2, "[%s] %s", a.cudnn ? "cudnn" : "fallback", tag);
    snprintf(name, sizeof name, "gpu.attn_cudnn.all memory returned %s", t2);
    check_true(name, b.held == 0, "%zu bytes held after the run", b.held);
    same_bits("repeats bit for bit (same seed, offset)", t2, &a, &b, in->n, in->dt, 0);
    /* another offset: another mask */
    run(g, "cudnn", in, 1, p, OFFSET + (1u << 20), 1, 0, &o);
    size_t d = 0;
    for (size_t i = 0; i < in->n; i++) d += a.f[0][i] != o.f[0][i];
    snprintf(name, sizeof name, "gpu.attn_cudnn.another offset draws another mask %s", t2);
    check_true(name, d > in->n / 2, "%zu of %zu out elements differ", d, in->n);
    /* sum dv.v = sum dO.out per (b, h): dO = w */
    int ok = a.f[0] && a.f[3];
    const double iv = ok ? identity(in, a.f[3], in->v, in->w, a.f[0]) : INFINITY;
    snprintf(name, sizeof name, "gpu.attn_cudnn.sum dv.v = sum dO.out per (b, h) %s", t2);
    check_true(name, iv <= 1e-2, "relative %.3g (tolerance 1e-2)", iv);
    if (getenv("CHECK_VERBOSE")) printf("       %s: relative %.3g\n", name, iv);
    /* the kept fraction, from out's spread against p 0 */
    run(g, NULL, in, 1, p, OFFSET, 1, 0, &fused);
    const double want = sqrt((double)p / (1.0 - (double)p));
    const double got = rel(a.f[0], p0->f[0], in->n);
    snprintf(name, sizeof name,
             "gpu.attn_cudnn.|out - out_p0| / |out_p0| = sqrt(p/(1-p)) %s", t2);
    check_true(name, fabs(got / want - 1.0) <= 0.15,
               "%.4f, expected %.4f within 15%% (the fused kernels' dropout: %.4f)", got, want,
               rel(fused.f[0], p0->f[0], in->n));
    /* (c) accumulation: twice into the same leaves = exactly twice the gradients */
    run(g, "cudnn", in, 1, p, OFFSET, 2, 0, &two);
    for (int i = 1; i < 4; i++) {
        snprintf(name, sizeof name, "gpu.attn_cudnn.%s accumulates (twice = 2 x once) %s",
                 out_names[i], t2);
        if (!two.f[i] || !a.f[i]) {
            check_true(name, 0, "missing");
            continue;
        }
        size_t bad = 0, first = in->n;
        for (size_t x = 0; x < in->n; x++)
            if (two.f[i][x] != 2.0f * a.f[i][x]) {
                bad++;
                if (first == in->n) first = x;
            }
        check_true(name, bad == 0, "%zu of %zu elements differ; first [%zu]: %.8g, 2 x %.8g",
                   bad, in->n, first, bad ? (double)two.f[i][first] : 0.0,
                   bad ? (double)a.f[i][first] : 0.0);
    }
    res_free(&a); res_free(&b); res_free(&o); res_free(&two); res_free(&fused);
}

/* ---- CUDA graphs: the seed and offset tensors written inside the graph ---- */

typedef struct {
    void *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *stats, *mask;
} GBufs;

/* forward + backward through attention_cudnn_* on the context's stream (no host sync) */
static int g_run(Ctx *g, GBufs *b, const In *in, float p, uint64_t offset)
{
    const int ran = attention_cudnn_forward(g, b->out, b->stats, b->q, b->k, b->v, b->mask,
                                            in->dt, p, SEED, offset, in->B, in->H, in->T,
                                            in->Dh, 1, 0);
    if (ran)
        attention_cudnn_backward(g, b->dq, b->dk, b->dv, b->dout, b->q, b->k, b->v, b->out,
                                 b->stats, b->mask, in->dt, p, SEED, offset, in->B, in->H, in->T,
                                 in->Dh, 0, 0, 0, 1, 0);
    return ran;
}

/* the bytes of out, stats, dq, dk, dv, concatenated */
static unsigned char *g_bytes(GBufs *b, const In *in, size_t *len)
{
    const size_t es = dtype_size(in->dt), nr = in->B * in->H * in->T;
    *len = 4 * in->n * es + nr * 4;
    unsigned char *h = malloc(*len);
    CUDA_CHECK(cudaDeviceSynchronize());
    void *src[4] = {b->out, b->dq, b->dk, b->dv};
    for (int x = 0; x < 4; x++)
        CUDA_CHECK(cudaMemcpy(h + x * in->n * es, src[x], in->n * es, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(h + 4 * in->n * es, b->stats, nr * 4, cudaMemcpyDeviceToHost));
    return h;
}

/* Forward + backward captured once with c->rng_base, replayed with two base
 * values: equal bit for bit to eager runs at offset + base (a replay draws
 * the mask of its base, the backward the forward's). */
static void graph_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh, float p)
{
    In in = in_make(dt, B, H, T, Dh);
    char name[320], tag[128];
    snprintf(tag, sizeof tag, "%s (B %zu, H %zu, T %zu, Dh %zu) p %g mask", dtype_name(dt), B, H,
             T, Dh, (double)p);
    if (!attention_cudnn_ready(g, dt, B, H, T, Dh, 1, 0, 1, p)) {
        printf("  SKIP cuDNN declined %s: no graph check\n", tag);
        in_free(&in);
        return;
    }
    const uint64_t offset = 5000, base1 = 77, base2 = 1234567;
    GBufs b;
    b.q = gpu_upload(in.q, in.n, dt);
    b.k = gpu_upload(in.k, in.n, dt);
    b.v = gpu_upload(in.v, in.n, dt);
    b.dout = gpu_upload(in.w, in.n, dt);
    b.out = gpu_alloc_poison(in.n, dt);
    b.dq = gpu_alloc_poison(in.n, dt);
    b.dk = gpu_alloc_poison(in.n, dt);
    b.dv = gpu_alloc_poison(in.n, dt);
    b.stats = (float *)gpu_alloc_poison(B * H * T, DT_F32);
    b.mask = (float *)gpu_upload(in.mask, B * T, DT_F32);
    uint64_t *d_base = (uint64_t *)gpu_upload_raw(&base1, sizeof base1);
    sync_all();
    size_t len = 0;
    int ran = g_run(g, &b, &in, p, offset + base1);
    unsigned char *e1 = g_bytes(&b, &in, &len);
    ran &= g_run(g, &b, &in, p, offset + base2);
    unsigned char *e2 = g_bytes(&b, &in, &len);
    snprintf(name, sizeof name, "gpu.attn_cudnn.graph: eager runs %s", tag);
    check_true(name, ran, "cuDNN refused an execution it had planned");
    cudaGraph_t gr;
    cudaGraphExec_t ex;
    const uint64_t *saved = g->rng_base;
    g->rng_base = d_base;
    g->capturing++;
    ctx_sync(g);
    CUDA_CHECK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeGlobal));
    ran = g_run(g, &b, &in, p, offset);
    CUDA_CHECK(cudaStreamEndCapture(g->stream, &gr));
    g->capturing--;
    g->rng_base = saved;
    CUDA_CHECK(cudaGraphInstantiate(&ex, gr, 0));
    CUDA_CHECK(cudaGraphLaunch(ex, g->stream));
    unsigned char *g1 = g_bytes(&b, &in, &len);
    CUDA_CHECK(cudaMemcpy(d_base, &base2, sizeof base2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaGraphLaunch(ex, g->stream));
    unsigned char *g2 = g_bytes(&b, &in, &len);
    CUDA_CHECK(cudaGraphExecDestroy(ex));
    CUDA_CHECK(cudaGraphDestroy(gr));
    snprintf(name, sizeof name, "gpu.attn_cudnn.graph replay = eager, rng_base 1 %s", tag);
    check_true(name, ran && memcmp(g1, e1, len) == 0, "replay differs from the eager run");
    snprintf(name, sizeof name, "gpu.attn_cudnn.graph replay = eager, rng_base 2 %s", tag);
    check_true(name, ran && memcmp(g2, e2, len) == 0 && memcmp(e1, e2, len) != 0,
               "replay with the second base differs from its eager run, or both bases gave "
               "the same mask");
    dfree(b.q); dfree(b.k); dfree(b.v); dfree(b.dout); dfree(b.out); dfree(b.dq);
    dfree(b.dk); dfree(b.dv); dfree(b.stats); dfree(b.mask); dfree(d_base);
    free(e1); free(e2); free(g1); free(g2);
    in_free(&in);
}

static void shape_cases(Ctx *g, Ctx *cpu, DType dt, size_t B, size_t H, size_t T, size_t Dh)
{
    In in = in_make(dt, B, H, T, Dh);
    Res p0;
    case_p0(g, cpu, &in, 0, 0, NULL);
    case_p0(g, cpu, &in, 1, 0, &p0);
    case_p0(g, cpu, &in, 1, 1, NULL);
    In hb = in;   /* the same values as [B, H, T, Dh] through op_attention_at */
    hb.bhtd = 1;
    case_p0(g, cpu, &hb, 1, 0, NULL);
    case_dropout(g, &in, &p0);
    res_free(&p0);
    in_free(&in);
}

int main(void)
{
    gpu_require();
    check_seed(13);
    Ctx gpu, cpu;
    ctx_init(&gpu, DEV_CUDA, 0, SEED);
    ctx_init(&cpu, DEV_CPU, 0, SEED);
    printf("gpu_attention_cudnn: cuDNN %zu (built against %d)\n", cudnnGetVersion(),
           CUDNN_VERSION);
    const DType dts[2] = {DT_BF16, DT_F16};
    for (int d = 0; d < 2; d++) {
        shape_cases(&gpu, &cpu, dts[d], 2, 4, 128, 64);
        shape_cases(&gpu, &cpu, dts[d], 2, 4, 512, 64);
    }
    graph_case(&gpu, DT_BF16, 2, 4, 128, 64, 0.1f);
    graph_case(&gpu, DT_F16, 2, 4, 512, 64, 0.1f);
    /* a head width cuDNN is expected to decline (rows of 40 bytes): the fallback */
    shape_cases(&gpu, &cpu, DT_BF16, 2, 3, 64, 20);
    ctx_free(&cpu);
    ctx_free(&gpu);
    return check_summary();
}
