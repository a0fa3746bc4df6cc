/* gpu_conv2d.c — the cuDNN convolution (ops/conv2d_cudnn.c) against the CPU
 * reference (ops/conv2d.c), and the tensor op on CUDA against the CPU op.
 *
 * Shape letters: N batch, H W input size, C input channels, K filters,
 * R S filter size, P Q output size. x [N,H,W,C], w [K,R,S,C], y [N,P,Q,K].
 *
 * For each ResNet-like shape (3x3 on 56x56x64, 1x1 256->64, 3x3 stride 2
 * on 128 channels, the 1x1 stride-2 downsample, the 7x7 stride-2 stem with
 * C = 3) and an odd one (C = 5, dilation 2, non-square stride), in each
 * precision setting — f32 strict, f32 with TF32, f16, bf16 — random inputs
 * in [-1, 1) are rounded to the storage type (quantize), so the CPU
 * reference computes on exactly the values the GPU reads:
 *   - forward (y poisoned with NaN);
 *   - backward data, accum 0 (poisoned) and 1 (dx preloaded);
 *   - backward filter into the f32 parameter gradient, accum 0 and 1, and
 *     into a gradient of the storage type (f16/bf16);
 * then the stem and the odd shape again with channel padding forced
 * (CONV2D_PAD_ALWAYS: the padded-copy path); the plan cache (a repeated
 * call hits, results are bit-identical); large-batch handling with its
 * limits forced small (a batch of 7 in chunks of 3, 3, 1, plans searched
 * on 2 images: the stem, 1x1 and 3x3 in f32, f16, bf16, every direction
 * and accumulation) against the plain path (relative norm, tol_norm) and
 * the CPU, then all plans freed and the memory back; and op_conv2d
 * through autograd on CUDA (f32, f16 and bf16 autocast) against op_conv2d
 * on the CPU in f32; then every shape and setting again on the graph API's
 * engines alone (CONV2D_ENGINES_GRAPH, ops/cudnn_graph.h), each plan a
 * graph plan, and the plan cache there; then the 1 x 1 shapes as cuBLASLt
 * GEMMs (ops/conv_gemm.h), forced and searched (see test_gemm).
 *
 * Tolerances, for L products of values in [-1, 1) per output element
 * (forward R*S*C, backward data up to K*R*S, backward filter N*P*Q):
 *   - f32 strict: summation order only: atol 3e-5 * sqrt(L), rtol 1e-4
 *     (a TF32 kernel, ~3e-4 * sqrt(L), would fail by 10x);
 *   - TF32: inputs rounded to 10 mantissa bits: relative norm 3e-3;
 *   - f16 / bf16: f32 accumulation, rounding of the stored output (2^-11,
 *     2^-8): relative norm 1e-2.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "ops/conv2d.h"
#include "ops/ops.h"
#include "check.h"
#include "gpu_util.h"

#define NSETTINGS (sizeof gpu_settings / sizeof gpu_settings[0])

typedef struct {
    const char *name;
    int N, H, W, C, K, R, S, sh, sw, ph, pw, dh, dw;
} Shape;

static const Shape shapes[] = {
    {"3x3.56x56x64", 2, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1},
    {"1x1.56x56.256to64", 2, 56, 56, 256, 64, 1, 1, 1, 1, 0, 0, 1, 1},
    {"3x3.s2.56x56x128", 2, 56, 56, 128, 128, 3, 3, 2, 2, 1, 1, 1, 1},
    {"1x1.s2.56x56.256to512", 2, 56, 56, 256, 512, 1, 1, 2, 2, 0, 0, 1, 1},
    {"stem.7x7.s2.224x224x3", 2, 224, 224, 3, 64, 7, 7, 2, 2, 3, 3, 1, 1},
    {"odd.C5.dil2.s2x1.9x13", 3, 9, 13, 5, 7, 3, 3, 2, 1, 2, 2, 2, 2},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static Conv2dShape shape_of(const Shape *h)
{
    return conv2d_shape(h->N, h->H, h->W, h->C, h->K, h->R, h->S, h->sh, h->sw, h->ph, h->pw,
                        h->dh, h->dw);
}

static float *hrand_unit(size_t n)
{
    float *p = malloc(n * sizeof(float));
    check_fill(p, n, -1.0f, 1.0f);
    return p;
}
static float *hcopy_q(const float *src, size_t n, DType dt)
{
    float *p = malloc(n * sizeof(float));
    memcpy(p, src, n * sizeof(float));
    quantize(p, n, dt);
    return p;
}
/* uploads and poison fills run on the legacy stream; the context's stream
 * does not wait for them by itself */

/* Compare got with ref by the setting's rule (see the top of the file);
 * L = products per element. */
static void expect_host(const char *name, const float *got, const float *ref, size_t n,
                        const GpuSetting *st, double L)
{
    if (st->dt == DT_F32 && !st->tf32) check_close(name, got, ref, n, 3e-5 * sqrt(L), 1e-4);
    else check_rel_norm(name, got, ref, n, st->tf32 ? 3e-3 : 1e-2);
}

/* The same for d, n elements of type `stored` on the device. */
static void expect(const char *name, const void *d, DType stored, const float *ref, size_t n,
                   const GpuSetting *st, double L)
{
    float *got = malloc(n * sizeof(float));
    gpu_download(got, d, n, stored);
    expect_host(name, got, ref, n, st, L);
    free(got);
}

/* ---- kernel level ---- */

static void run_shape(Ctx *c, const Shape *h, const char *tag)
{
    Conv2dShape s = shape_of(h);
    size_t nx = (size_t)s.N * s.H * s.W * s.C, nw = (size_t)s.K * s.R * s.S * s.C;
    size_t ny = (size_t)s.N * s.P * s.Q * s.K;
    double Lf = (double)s.R * s.S * s.C, Ld = (double)s.K * s.R * s.S;
    double Lw = (double)s.N * s.P * s.Q;
    float *x0 = hrand_unit(nx), *w0 = hrand_unit(nw), *g0 = hrand_unit(ny), *dxa = hrand_unit(nx), *dwa = hrand_unit(nw);
    char name[160];
    for (size_t k = 0; k < NSETTINGS; k++) {
        const GpuSetting *st = &gpu_settings[k];
        DType dt = st->dt;
        c->allow_tf32 = st->tf32;
        float *x = hcopy_q(x0, nx, dt), *w = hcopy_q(w0, nw, dt), *g = hcopy_q(g0, ny, dt);
        float *dx0 = hcopy_q(dxa, nx, dt);
        float *yref = malloc(ny * sizeof(float)), *dxref = malloc(nx * sizeof(float));
        float *dwref = malloc(nw * sizeof(float)), *ref = malloc((nx > nw ? nx : nw) * sizeof(float));
        conv2d_forward_cpu(yref, x, w, &s);
        conv2d_backward_data_cpu(dxref, g, w, &s, 0);
        conv2d_backward_filter_cpu(dwref, g, x, &s, 0);
        void *dX = gpu_upload(x, nx, dt), *dW = gpu_upload(w, nw, dt), *dG = gpu_upload(g, ny, dt);

        void *dY = gpu_alloc_poison(ny, dt);
        sync_all();
        conv2d_forward_cuda(c, dY, dX, dW, dt, &s);
        snprintf(name, sizeof name, "conv2d.fwd.%s.%s%s", h->name, st->name, tag);
        expect(name, dY, dt, yref, ny, st, Lf);
        dfree(dY);

        for (int accum = 0; accum < 2; accum++) {
            void *dDX = accum ? gpu_upload(dx0, nx, dt) : gpu_alloc_poison(nx, dt);
            sync_all();
            conv2d_backward_data_cuda(c, dDX, dG, dW, dt, &s, accum);
            for (size_t i = 0; i < nx; i++) ref[i] = dxref[i] + (accum ? dx0[i] : 0.0f);
            snprintf(name, sizeof name, "conv2d.dx.accum%d.%s.%s%s", accum, h->name, st->name,
                     tag);
            expect(name, dDX, dt, ref, nx, st, Ld);
            dfree(dDX);
        }
        /* the f32 parameter gradient; and one in the storage type */
        for (int accum = 0; accum < 3; accum++) {
            DType tdw = accum < 2 ? DT_F32 : dt;
            if (accum == 2 && dt == DT_F32) break;
            int acc = accum == 1;
            void *dDW = acc ? gpu_upload(dwa, nw, DT_F32) : gpu_alloc_poison(nw, tdw);
            sync_all();
            conv2d_backward_filter_cuda(c, dDW, tdw, dG, dX, dt, &s, acc);
            for (size_t i = 0; i < nw; i++) ref[i] = dwref[i] + (acc ? dwa[i] : 0.0f);
            snprintf(name, sizeof name, "conv2d.dw.%s.accum%d.%s.%s%s", dtype_name(tdw), acc,
                     h->name, st->name, tag);
            expect(name, dDW, tdw, ref, nw, st, Lw);
            dfree(dDW);
        }
        dfree(dX); dfree(dW); dfree(dG);
        free(x); free(w); free(g); free(dx0); free(yref); free(dxref); free(dwref); free(ref);
    }
    c->allow_tf32 = 0;
    free(x0); free(w0); free(g0); free(dxa); free(dwa);
}

/* A repeated call is a cache hit (no new plan) and gives the same bits:
 * forward, and the backward passes (deterministic algorithms preferred). */
static const Shape cache_3x3 = {"cache.3x3.28x28x64", 2, 28, 28, 64, 96, 3, 3, 1, 1, 1, 1, 1, 1};

static void test_cache(Ctx *c, const Shape *h)
{
    Conv2dShape s = shape_of(h);
    size_t nx = (size_t)s.N * s.H * s.W * s.C, nw = (size_t)s.K * s.R * s.S * s.C;
    size_t ny = (size_t)s.N * s.P * s.Q * s.K;
    const DType types[2] = {DT_F32, DT_F16};
    for (int t = 0; t < 2; t++) {
        DType dt = types[t];
        char name[96];
        float *x = hrand_unit(nx), *w = hrand_unit(nw), *g = hrand_unit(ny);
        void *dX = gpu_upload(x, nx, dt), *dW = gpu_upload(w, nw, dt), *dG = gpu_upload(g, ny, dt);
        size_t bytes[3] = {ny * dtype_size(dt), nx * dtype_size(dt), nw * sizeof(float)};
        void *out[2][3];
        int plans[3];
        plans[0] = conv2d_cuda_plan_count(c);
        for (int round = 0; round < 2; round++) {
            out[round][0] = gpu_alloc_poison(ny, dt);
            out[round][1] = gpu_alloc_poison(nx, dt);
            out[round][2] = gpu_alloc_poison(nw, DT_F32);
            sync_all();
            conv2d_forward_cuda(c, out[round][0], dX, dW, dt, &s);
            conv2d_backward_data_cuda(c, out[round][1], dG, dW, dt, &s, 0);
            conv2d_backward_filter_cuda(c, out[round][2], DT_F32, dG, dX, dt, &s, 0);
            sync_all();
            plans[round + 1] = conv2d_cuda_plan_count(c);
        }
        snprintf(name, sizeof name, "conv2d.%s.%s.first_call_plans", h->name, dtype_name(dt));
        check_true(name, plans[1] - plans[0] == 3, "%d new plans (want 3)", plans[1] - plans[0]);
        snprintf(name, sizeof name, "conv2d.%s.%s.second_call_hits", h->name, dtype_name(dt));
        check_true(name, plans[2] == plans[1], "%d new plans on a repeated shape",
                   plans[2] - plans[1]);
        static const char *dirs[3] = {"fwd", "dx", "dw"};
        for (int d = 0; d < 3; d++) {
            void *a = malloc(bytes[d]), *b = malloc(bytes[d]);
            CUDA_CHECK(cudaMemcpy(a, out[0][d], bytes[d], cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(b, out[1][d], bytes[d], cudaMemcpyDeviceToHost));
            snprintf(name, sizeof name, "conv2d.%s.%s.%s_bit_identical", h->name, dtype_name(dt),
                     dirs[d]);
            check_true(name, memcmp(a, b, bytes[d]) == 0, "two runs of the same call differ");
            free(a); free(b);
            dfree(out[0][d]); dfree(out[1][d]);
        }
        dfree(dX); dfree(dW); dfree(dG);
        free(x); free(w); free(g);
    }
}

/* ---- large batches: chunks and the search slice, forced small ----
 * A batch of 7 under an element limit of 3 images runs as chunks of 3, 3
 * and 1 (two chunk plans), and each plan of more than 2 images is searched
 * on its first 2. Every call must give what the plain path gives (one call,
 * searched at full N, fresh plans for both) and what the CPU gives. */

static const Shape chunk_shapes[] = {
    {"stem.7x7.s2.32x32x3", 7, 32, 32, 3, 16, 7, 7, 2, 2, 3, 3, 1, 1},
    {"1x1.14x14.32to64", 7, 14, 14, 32, 64, 1, 1, 1, 1, 0, 0, 1, 1},
    {"3x3.14x14x32", 7, 14, 14, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1},
};
#define NCHUNK_SHAPES (sizeof chunk_shapes / sizeof chunk_shapes[0])

/* One call: direction (0 fwd, 1 dx, 2 dw), accumulate, dw in f32 (else in
 * x's type). Accumulating calls come first, so that each plan is searched
 * with the output kept aside (the search's scratch path). */
typedef struct {
    const char *name;
    int dir, accum, dw_f32;
} ChunkCall;

static const ChunkCall chunk_calls[] = {
    {"fwd", 0, 0, 0},           {"dx.accum1", 1, 1, 0},     {"dx.accum0", 1, 0, 0},
    {"dw.accum1", 2, 1, 0},     {"dw.accum0", 2, 0, 0},     {"dw.f32.accum1", 2, 1, 1},
    {"dw.f32.accum0", 2, 0, 1},
};
#define NCHUNK_CALLS (sizeof chunk_calls / sizeof chunk_calls[0])

/* Elements of one image in the largest tensor cuDNN sees: x with its
 * channels padded to 16-byte rows, or y. */
static size_t image_elems(const Conv2dShape *s, DType dt)
{
    const int m = 16 / (int)dtype_size(dt), Cp = (s->C + m - 1) / m * m;
    size_t x = (size_t)s->H * s->W * Cp, y = (size_t)s->P * s->Q * s->K;
    return x > y ? x : y;
}

/* Every call of chunk_calls on fresh plans; got[i] receives call i's
 * result (NULL where it does not apply: dw in f32 is dw itself for f32).
 * pre[d] preloads the accumulating output of direction d. Returns the
 * plans the forward made. */
/* The GEMM mode the chunked runs set after each release (which resets it). */
static Conv2dGemm chunk_gemm = CONV2D_GEMM_OFF;

static int chunk_run(Ctx *c, const Conv2dShape *s, DType dt, Conv2dPadMode pad,
                     size_t max_elems, int search_max_n, void *const in[3],
                     float *const pre[3], const size_t n[3], float **got)
{
    conv2d_cuda_release(c);
    conv2d_cuda_set_pad_mode(c, pad);
    conv2d_cuda_set_gemm(c, chunk_gemm);
    conv2d_cuda_set_limits(c, max_elems, search_max_n);
    const void *dX = in[0], *dW = in[1], *dG = in[2];
    int fwd_plans = 0;
    for (size_t i = 0; i < NCHUNK_CALLS; i++) {
        const ChunkCall *k = &chunk_calls[i];
        const DType to = k->dw_f32 ? DT_F32 : dt;
        got[i] = NULL;
        if (k->dw_f32 && dt == DT_F32) continue;
        void *d = k->accum ? gpu_upload(pre[k->dir], n[k->dir], to)
                           : gpu_alloc_poison(n[k->dir], to);
        sync_all();
        if (k->dir == 0) conv2d_forward_cuda(c, d, dX, dW, dt, s);
        if (k->dir == 1) conv2d_backward_data_cuda(c, d, dG, dW, dt, s, k->accum);
        if (k->dir == 2) conv2d_backward_filter_cuda(c, d, to, dG, dX, dt, s, k->accum);
        if (k->dir == 0) fwd_plans = conv2d_cuda_plan_count(c);
        got[i] = falloc(n[k->dir]);
        gpu_download(got[i], d, n[k->dir], to);
        dfree(d);
    }
    return fwd_plans;
}

static void run_chunked(Ctx *c, const Shape *h, Conv2dPadMode pad, const char *tag)
{
    const Conv2dShape s = shape_of(h);
    /* elements and products per element, by direction: y, dx, dw */
    const size_t n[3] = {(size_t)s.N * s.P * s.Q * s.K, (size_t)s.N * s.H * s.W * s.C,
                         (size_t)s.K * s.R * s.S * s.C};
    const double L[3] = {(double)s.R * s.S * s.C, (double)s.K * s.R * s.S,
                         (double)s.N * s.P * s.Q};
    const GpuSetting *sets[3] = {&gpu_settings[0], &gpu_settings[2], &gpu_settings[3]}; /* f32, f16, bf16 */
    float *x0 = hrand_unit(n[1]), *w0 = hrand_unit(n[2]), *g0 = hrand_unit(n[0]);
    float *pre0[3] = {NULL, hrand_unit(n[1]), hrand_unit(n[2])};
    char name[192];
    for (int k = 0; k < 3; k++) {
        const GpuSetting *st = sets[k];
        const DType dt = st->dt;
        float *x = hcopy_q(x0, n[1], dt), *w = hcopy_q(w0, n[2], dt), *g = hcopy_q(g0, n[0], dt);
        float *pre[3] = {NULL, hcopy_q(pre0[1], n[1], dt), hcopy_q(pre0[2], n[2], dt)};
        float *cpu[3] = {falloc(n[0]), falloc(n[1]), falloc(n[2])};
        float *ref = falloc(n[0] + n[1] + n[2]); /* room for any direction's result */
        conv2d_forward_cpu(cpu[0], x, w, &s);
        conv2d_backward_data_cpu(cpu[1], g, w, &s, 0);
        conv2d_backward_filter_cpu(cpu[2], g, x, &s, 0);
        void *in[3] = {gpu_upload(x, n[1], dt), gpu_upload(w, n[2], dt),
                       gpu_upload(g, n[0], dt)};
        float *plain[NCHUNK_CALLS], *chunked[NCHUNK_CALLS];
        c->allow_tf32 = 0;
        int plans_plain = chunk_run(c, &s, dt, pad, 0, 0, in, pre, n, plain);
        int plans_chunked = chunk_run(c, &s, dt, pad, 3 * image_elems(&s, dt), 2, in, pre, n,
                                      chunked);
        snprintf(name, sizeof name, "conv2d.chunk.%s.%s%s.fwd_plans", h->name, st->name, tag);
        check_true(name, plans_plain == 1 && plans_chunked == 2,
                   "%d plans plain (want 1), %d chunked (want 2: 3 and 1 images)", plans_plain,
                   plans_chunked);
        for (size_t i = 0; i < NCHUNK_CALLS; i++) {
            const ChunkCall *cc = &chunk_calls[i];
            const size_t m = n[cc->dir];
            if (!chunked[i]) continue;
            snprintf(name, sizeof name, "conv2d.chunk.%s.%s%s.%s.vs_plain", h->name, st->name,
                     tag, cc->name);
            check_rel_norm(name, chunked[i], plain[i], m, tol_norm(dt));
            for (size_t j = 0; j < m; j++)
                ref[j] = cpu[cc->dir][j] + (cc->accum ? pre[cc->dir][j] : 0.0f);
            snprintf(name, sizeof name, "conv2d.chunk.%s.%s%s.%s.vs_cpu", h->name, st->name,
                     tag, cc->name);
            expect_host(name, chunked[i], ref, m, st, L[cc->dir]);
            free(plain[i]);
            free(chunked[i]);
        }
        for (int d = 0; d < 3; d++) {
            dfree(in[d]);
            free(cpu[d]);
            free(pre[d]);
        }
        free(x); free(w); free(g); free(ref);
    }
    free(x0); free(w0); free(g0); free(pre0[1]); free(pre0[2]);
}

/* The chunked shapes (the stem also with padded channels); then every plan
 * is freed and the memory the calls took is back (the shared workspace
 * may have grown). */
static void test_chunked(Ctx *c)
{
    conv2d_cuda_release(c);
    ctx_sync(c);
    const size_t base = c->mem.current, ws0 = c->workspace_bytes;
    for (size_t i = 0; i < NCHUNK_SHAPES; i++)
        run_chunked(c, &chunk_shapes[i], CONV2D_PAD_AUTO, "");
    run_chunked(c, &chunk_shapes[0], CONV2D_PAD_ALWAYS, ".padded");
    conv2d_cuda_release(c);
    ctx_sync(c);
    check_true("conv2d.chunk.plans_freed", conv2d_cuda_plan_count(c) == 0, "%d plans left",
               conv2d_cuda_plan_count(c));
    const size_t want = base + (c->workspace_bytes - ws0);
    check_true("conv2d.chunk.memory_back", c->mem.current == want,
               "%zu bytes held, expected %zu", c->mem.current, want);
}

/* ---- the tensor op: CUDA (f32, or autocast f16/bf16) against the CPU in f32 ---- */

typedef struct {
    float *y, *dx, *dw;
    DType ydt, dxdt;
} OpResult;

static OpResult op_run(Ctx *c, DType autocast, const float *xh, const float *wh,
                       const float *gh, const int64_t *xs, const int64_t *ws, const int64_t *ys)
{
    OpResult r;
    size_t nx = (size_t)(xs[0] * xs[1] * xs[2] * xs[3]), nw = (size_t)(ws[0] * ws[1] * ws[2] * ws[3]);
    size_t ny = (size_t)(ys[0] * ys[1] * ys[2] * ys[3]);
    Tensor *x = tensor_from_f32(c, xh, DT_F32, 4, xs), *w = tensor_from_f32(c, wh, DT_F32, 4, ws);
    Tensor *g = tensor_from_f32(c, gh, DT_F32, 4, ys);
    x->requires_grad = 1;
    w->requires_grad = 1;
    c->autocast = autocast;
    Tensor *y = op_conv2d_ex(c, x, w, 2, 2, 1, 1, 1, 1);
    Tensor *gl = g;
    if (y->dtype != DT_F32) {
        int gm = ad_set_grad(c, 0);
        gl = op_cast(c, g, y->dtype);
        ad_set_grad(c, gm);
    }
    Tensor *yg = op_mul(c, y, gl), *loss = op_sum(c, yg);
    ad_backward(c, loss, 1.0f);
    c->autocast = DT_F32;
    r.y = malloc(ny * sizeof(float));
    r.dx = malloc(nx * sizeof(float));
    r.dw = malloc(nw * sizeof(float));
    r.ydt = y->dtype;
    r.dxdt = x->grad->dtype;
    tensor_to_f32(r.y, y);
    tensor_to_f32(r.dx, x->grad);
    tensor_to_f32(r.dw, w->grad);
    if (gl != g) tensor_release(gl);
    Tensor *all[] = {y, yg, loss, x->grad, w->grad, x, w, g};
    x->grad = NULL;
    w->grad = NULL;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tensor_release(all[i]);
    return r;
}

static void test_op(Ctx *gpu)
{
    Ctx cpu;
    ctx_init(&cpu, DEV_CPU, 0, 1);
    const int64_t xs[4] = {2, 16, 15, 8}, ws[4] = {16, 3, 3, 8}, ys[4] = {2, 8, 8, 16};
    size_t nx = 2 * 16 * 15 * 8, nw = 16 * 3 * 3 * 8, ny = 2 * 8 * 8 * 16;
    float *xh = hrand_unit(nx), *wh = hrand_unit(nw), *gh = hrand_unit(ny);
    OpResult ref = op_run(&cpu, DT_F32, xh, wh, gh, xs, ws, ys);
    const DType modes[3] = {DT_F32, DT_F16, DT_BF16};
    for (int m = 0; m < 3; m++) {
        char name[64];
        const char *mn = dtype_name(modes[m]);
        OpResult r = op_run(gpu, modes[m], xh, wh, gh, xs, ws, ys);
        snprintf(name, sizeof name, "op.%s.types", mn);
        check_true(name, r.ydt == modes[m] && r.dxdt == DT_F32, "y %s, dx %s",
                   dtype_name(r.ydt), dtype_name(r.dxdt));
        double tol = modes[m] == DT_F32 ? 0 : 1e-2;
        const char *what[3] = {"y", "dx", "dw"};
        float *got[3] = {r.y, r.dx, r.dw}, *want[3] = {ref.y, ref.dx, ref.dw};
        size_t n[3] = {ny, nx, nw};
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "op.%s.%s", mn, what[k]);
            if (tol > 0) check_rel_norm(name, got[k], want[k], n[k], tol);
            else check_close(name, got[k], want[k], n[k], 1e-3, 1e-4);
        }
        free(r.y); free(r.dx); free(r.dw);
    }
    free(ref.y); free(ref.dx); free(ref.dw);
    free(xh); free(wh); free(gh);
    ctx_free(&cpu);
}

/* ---- 1 x 1 convolutions as GEMMs (ops/conv_gemm.h) ----
 * Forced (CONV2D_GEMM_ALWAYS): the 1 x 1 shapes above (stride 1 in place,
 * stride 2 through the gather and the scatter), an odd one (stride 2 x 3
 * on 9 x 13, rows of 6 channels: 8- and 4-byte copy units), every setting,
 * direction and accumulation against the CPU; each plan a GEMM plan; a
 * repeat bit-identical; the chunked 1 x 1 with its search slice. Then
 * timed against cuDNN's choice (CONV2D_GEMM_SEARCH): whichever runs, the
 * results hold. */
static const Shape gemm_odd = {"1x1.s2x3.9x13.6to10", 3, 9, 13, 6, 10, 1, 1, 2, 3, 0, 0, 1, 1};
static const Shape gemm_cache = {"gemm.1x1.s2.28x28.64to96", 2, 28, 28, 64, 96, 1, 1, 2, 2, 0, 0,
                                 1, 1};

static void test_gemm(Ctx *c)
{
    conv2d_cuda_release(c);   /* settings back to the environment's: pin them */
    conv2d_cuda_set_gemm(c, CONV2D_GEMM_ALWAYS);
    conv2d_cuda_set_pad_mode(c, CONV2D_PAD_AUTO);
    run_shape(c, &shapes[1], ".gemm");
    run_shape(c, &shapes[3], ".gemm");
    run_shape(c, &gemm_odd, ".gemm");
    int np = conv2d_cuda_plan_count(c), ng = conv2d_cuda_gemm_plan_count(c);
    check_true("conv2d.gemm.every_plan", np > 0 && ng == np, "%d of %d plans GEMMs", ng, np);
    test_cache(c, &gemm_cache);
    chunk_gemm = CONV2D_GEMM_ALWAYS;
    run_chunked(c, &chunk_shapes[1], CONV2D_PAD_AUTO, ".gemm");
    chunk_gemm = CONV2D_GEMM_OFF;
    conv2d_cuda_release(c);
    conv2d_cuda_set_gemm(c, CONV2D_GEMM_SEARCH);
    conv2d_cuda_set_pad_mode(c, CONV2D_PAD_AUTO);
    run_shape(c, &shapes[1], ".gemm_search");
    run_shape(c, &shapes[3], ".gemm_search");
    run_shape(c, &shapes[2], ".gemm_search");   /* a 3 x 3: cuDNN's, never a GEMM */
    check_true("conv2d.gemm_search.plans", conv2d_cuda_plan_count(c) > 0, "no plans");
    conv2d_cuda_release(c);
}

int main(void)
{
    gpu_require();
    check_seed(77);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    conv2d_cuda_set_gemm(&c, CONV2D_GEMM_OFF);   /* cuDNN's plans, whatever CTRAIN_CONV_GEMM says */
    for (size_t i = 0; i < NSHAPES; i++) run_shape(&c, &shapes[i], "");
    /* the padded-channel path, forced (C = 3 and C = 5) */
    conv2d_cuda_set_pad_mode(&c, CONV2D_PAD_ALWAYS);
    run_shape(&c, &shapes[4], ".padded");
    run_shape(&c, &shapes[5], ".padded");
    conv2d_cuda_set_pad_mode(&c, CONV2D_PAD_AUTO);
    test_cache(&c, &cache_3x3);
    test_chunked(&c);
    test_op(&c);
    /* the graph API's engines (CONV2D_ENGINES_GRAPH): every shape, setting,
     * direction and accumulation again, and the padded path; each plan must
     * be a graph plan (none fell back to the legacy search) */
    conv2d_cuda_release(&c);
    conv2d_cuda_set_engines(&c, CONV2D_ENGINES_GRAPH);
    conv2d_cuda_set_gemm(&c, CONV2D_GEMM_OFF);
    for (size_t i = 0; i < NSHAPES; i++) run_shape(&c, &shapes[i], ".graph");
    conv2d_cuda_set_pad_mode(&c, CONV2D_PAD_ALWAYS);
    run_shape(&c, &shapes[4], ".graph.padded");
    conv2d_cuda_set_pad_mode(&c, CONV2D_PAD_AUTO);
    int np = conv2d_cuda_plan_count(&c), ng = conv2d_cuda_graph_plan_count(&c);
    check_true("conv2d.graph.every_plan", np > 0 && ng == np, "%d of %d plans on graph engines",
               ng, np);
    test_cache(&c, &cache_3x3);
    test_gemm(&c);
    conv2d_cuda_release(&c);
    ctx_free(&c);
    return check_summary();
}
