/* cudnn_sdpa_probe.c — does cuDNN's fused flash attention (SDPA) run through
 * the graph (backend) API called from C for BERT's attention, does it
 * compute what ctrain's fused kernels compute (ops/attention_fused.h), and
 * how fast is it against them. A measurement for docs/kernels.md, not a test.
 *
 *   make build/cudnn_sdpa_probe   (CUDA builds; `make` builds it too)
 *   build/cudnn_sdpa_probe [B H T Dh] [--dtype bf16|f16|both] [--candidates K] [--accum]
 *                          [--knobs]
 *
 * Shapes: BERT-large's B 256, T 128 and B 32, T 512 (H 16, Dh 64), or the
 * one given; bf16 unless --dtype says otherwise. q, k, v, out and their
 * gradients are ctrain's [B, T, H, Dh]: cuDNN's [b, h, s, d] dims with the
 * strides {T H Dh, Dh, H Dh, 1}. Softmax statistics f32 [B, H, T] (cuDNN's
 * [b, h, s_q, 1]), scale 1/sqrt(Dh), the key mask (0 for real keys, -10000
 * for padding) an additive bias [B, 1, T, T] with stride 0 along the queries
 * (f32, else in the data type; seen as [B, 1, 1, T], cuDNN 9.14's backward
 * gave gradients ~100% off on the H100 while its forward was right),
 * dropout through cuDNN's RNG operation (Philox; seed and offset int64
 * device tensors).
 *
 * The graphs (built by ops/attention_cudnn.c, which the op's CTRAIN_ATTN=cudnn
 * path shares), op by op as cudnn-frontend's composite SDPA nodes give them
 * to cuDNN 9's runtime fused-attention engines (virtual tensors f32 unless said):
 *   forward   S = Q K^T * scale [+ bias]; softmax as row max, sub, exp, row
 *             sum, log, add (stats = max + log sum exp, stored f32) and div:
 *             P in the data type, or f32 then P * mask(Bernoulli 1-p) * 1/(1-p)
 *             in the data type; O = P V
 *   backward  Dk = rowsum(dO * O) * (1-p) stored f32 (a buffer of the probe);
 *             P = exp(S - stats) recomputed, [* mask * 1/(1-p)], reshaped to P^T
 *             in the data type; dV = P^T dO; dS = (dO V^T [* mask] - Dk) * P
 *             [* 1/(1-p)] * scale; dK = (dS^T in the data type) Q; dQ = dS K
 *             (K a reshape of K^T) written by the matmul: the deterministic
 *             form; --accum also runs the other form, dQ through an f32
 *             accumulator (a buffer) and an identity.
 * Each step prints what cuDNN took or refused (the operation, the graph,
 * each engine's plan with its status and notes): a refusal is a finding,
 * never a crash. A refused graph is tried again in cuDNN 8.9's form (F16x16
 * reordering on P, its dropout and the dQ accumulator), and a refused f32
 * bias as a bias in the data type.
 *
 * Checks per shape (PASS/FAIL lines, then "N passed, N failed"):
 *   (a) p 0, no mask: out, stats, dq, dk, dv against ctrain's kernels on the
 *       same inputs (ctrain's lse is the log-sum-exp of the scores plus the
 *       mask minus the mask row's max M_b; cuDNN's stats has no shift: the
 *       check is stats = lse + M_b); the backward repeats bit for bit.
 *   (b) p 0 with the mask: the same.
 *   (c) p 0.1 (with the mask when (b) ran): two forwards with the same seed
 *       and offset give the same bits; stats equal (b)'s (dropout comes
 *       after the softmax); |out - out_p0| / |out_p0| = sqrt(p / (1-p))
 *       within 10% (its expectation for v independent of the scores: it pins
 *       the keep probability); the backward is finite and repeats bit for
 *       bit; per (b, h), sum dv.v = sum dO.out (both are sum P_d (dO.v):
 *       only when the backward redraws the forward's mask) and sum dq.q =
 *       sum dk.k (both are scale sum dS (q.k)). ctrain's own values of the
 *       last three are printed beside, as the scale of rounding.
 * --knobs: instead of the checks, BERT's step form (p 0.1, no key mask) with
 * each of the chosen engine's knobs moved alone over cuDNN's range, timed
 * against the heuristics' choice (knob_sweep).
 * Timing: CUDA events, median of 20 runs after 5 warm-ups, forward and
 * backward apart, cuDNN and ctrain on the same inputs and p; a JSON line
 * each ({"bench":"sdpa_probe",...}). TFLOP/s: forward 4 B H T^2 Dh, backward
 * 2.5 times that.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "ops/attention_cudnn.h"
#include "ops/attention_fused.h"
#include "ops/dropout_mask.h"
#include "ops/cudnn_graph.h"
#include "tests/check.h"
#include "tests/gpu_util.h"

#define SEED 0x5eedULL
#define MAX_CAND 24

typedef struct {
    Ctx *c;
    int B, H, T, D, ncand, accum, tc;   /* tc: ctrain's [B, T, H, Dh] kernels apply */
    int knobs;                           /* --knobs: the sweep instead of the checks */
    DType dt;
    cudnnDataType_t ct;
    size_t n, nrow, nmask;               /* B T H Dh elements; B H T rows; B H T T scores */
    SdpaShape shape;                     /* the graphs' dims, [B, T, H, Dh] layout */
    /* device */
    void *q, *k, *v, *o, *dout, *dq, *dk, *dv, *c_out, *bias_dt, *dmask;
    float *stats, *sum, *dqacc, *mask, *c_lse, *rdump;
    int64_t *seed, *offset;
    /* host, as the device holds them */
    float *hq, *hk, *hv, *hdo, *hmask, *mb;   /* mb[b]: the mask row's max M_b */
} Probe;

/* p, mask (0 none, 1 bias f32, 2 bias in the data type), legacy (cuDNN
 * 8.9's F16x16 reordering), accum (backward: dQ through an f32 accumulator) */
typedef SdpaForm Form;

/* ---- checks ---- */

static void verdict(const char *name, int ok, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("    %s %s: %s\n", ok ? "PASS" : "FAIL", name, buf);
    if (ok) check_passed_++;
    else check_failed_++;
}

/* ||a - ref|| / ||ref|| */
static double rel(const float *a, const float *ref, size_t n)
{
    double e = 0.0, r = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)ref[i];
        e += d * d;
        r += (double)ref[i] * (double)ref[i];
    }
    return r > 0.0 ? sqrt(e / r) : sqrt(e);
}

static int all_finite(const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return 0;
    return 1;
}

/* head_dots_rel (tests/gpu_util.h) on the probe's shape */
static double identity(const Probe *p, const float *x1, const float *y1, const float *x2,
                       const float *y2)
{
    return head_dots_rel((size_t)p->B, (size_t)p->H, (size_t)p->T, (size_t)p->D, x1, y1, x2, y2);
}

/* The device buffer's bytes, as they are. */
static unsigned char *raw(const void *d, size_t bytes)
{
    unsigned char *h = malloc(bytes);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/* Elements of `size` bytes that differ between two copies. */
static size_t bits_differ(const unsigned char *a, const unsigned char *b, size_t n, size_t size)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(a + i * size, b + i * size, size) != 0;
    return d;
}

static float *fetch(const void *d, size_t n, DType dt)
{
    float *h = falloc(n);
    gpu_download(h, d, n, dt);
    return h;
}

/* cuDNN's own words on its last refusal, when it kept any. */
static void why(void)
{
    char msg[1024] = {0};
    cudnnGetLastErrorString(msg, sizeof msg);
    for (char *s = msg; *s; s++)
        if (*s == '\n') *s = ' ';
    if (msg[0]) printf("      cuDNN says: %.400s\n", msg);
}

/* ---- plans ---- */

/* One graph (ops/attention_cudnn.h: descriptors, plan, by-value scalars),
 * its variant pack on the probe's buffers and the plan's workspace. */
typedef struct {
    SdpaGraph s;
    CgDesc pack;
    void *ws;
    int nondet;   /* only engines marked non-deterministic took it */
} Graph;

static void graph_free(Graph *g)
{
    cg_destroy(g->pack);
    sdpa_free(&g->s);
    if (g->ws) CUDA_CHECK(cudaFree(g->ws));
    memset(g, 0, sizeof *g);
}

static void print_notes(uint32_t notes, uint32_t behavior)
{
    static const char *const num[] = {"tensor-core", "down-convert", "reduced-precision-reduction",
                                      "fft", "NON-DETERMINISTIC", "winograd", "winograd-4x4",
                                      "winograd-6x6", "winograd-13x13", "strict-nan"};
    static const char *const beh[] = {"runtime-compiled", "int8x32-filter", "int8x32-bias",
                                      "cuda-graph-native", "cublaslt"};
    const char *sep = "";
    printf("[");
    for (int i = 0; i < 10; i++)
        if (notes & CG_NOTE(i)) printf("%s%s", sep, num[i]), sep = ", ";
    for (int i = 0; i < 5; i++)
        if (behavior & CG_NOTE(i)) printf("%s%s", sep, beh[i]), sep = ", ";
    printf("]");
}

static void print_candidates(const CgCandidate *k, int n)
{
    static const char *const skip[] = {"", "skipped: a forbidden note",
                                       "skipped: compiles at run time", "workspace over the limit",
                                       "repeat", "skipped: candidate cap reached"};
    if (n == 0) printf("      the heuristics proposed no engine\n");
    for (int i = 0; i < n; i++) {
        printf("      engine %lld (%s) ", (long long)k[i].engine,
               k[i].fallback ? "fallback" : "mode A");
        print_notes(k[i].notes, k[i].behavior);
        if (k[i].skipped) printf(": %s\n", skip[k[i].skipped]);
        else if (k[i].status == CUDNN_STATUS_SUCCESS)
            printf(": plan SUCCESS, workspace %zu bytes\n", k[i].ws_bytes);
        else printf(": plan refused, %s\n", cudnnGetErrorString(k[i].status));
    }
}

static const char *mask_name(int mask, DType dt)
{
    if (mask == 0) return "no mask";
    return mask == 1 ? "bias f32" : dt == DT_BF16 ? "bias bf16" : "bias f16";
}

/* g's variant pack on the probe's buffers with workspace ws (NULL and the
 * status in *st when cuDNN refuses it). */
static CgDesc pack_for(Probe *p, Graph *g, const Form *f, void *ws, cudnnStatus_t *st)
{
    SdpaBufs bufs = {.q = p->q, .k = p->k, .v = p->v, .dout = p->dout, .o = p->o,
                     .bias = f->mask == 2 ? p->bias_dt : (void *)p->mask, .dq = p->dq,
                     .dk = p->dk, .dv = p->dv, .stats = p->stats, .sum = p->sum,
                     .dqacc = p->dqacc, .seed = p->seed, .offset = p->offset,
                     .dmask = p->dmask, .rng_dump = p->rdump};
    void *ptrs[SDPA_NIO];
    sdpa_pointers(&g->s, &bufs, ptrs);
    return cg_variant_pack_try(g->s.uids, ptrs, g->s.nio, ws, st);
}

/* The graph of form f, its first plan, workspace and variant pack; prints
 * what cuDNN took or refused. */
static int prepare(Probe *p, Graph *g, int bwd, const Form *f)
{
    memset(g, 0, sizeof *g);
    printf("    %s graph (%s, %s%s%s): ", bwd ? "backward" : "forward",
           mask_name(f->mask, p->dt),
           f->legacy ? "cuDNN 8.9 form: F16x16 reordering" : "cuDNN 9 form",
           !bwd ? "" : f->accum ? ", dQ via f32 accumulator" : ", dQ direct",
           f->p > 0.0f && f->drop_in ? ", dropout mask an input" : "");
    if (!sdpa_build(&g->s, &p->shape, bwd, f)) {
        printf("refused: cuDNN took no %s\n", g->s.refused);
        why();
        graph_free(g);
        return 0;
    }
    cudnnStatus_t st = sdpa_finalize(&g->s, p->c->cudnn);
    if (!g->s.graph) {
        printf("%d operations taken, graph declined: %s\n", g->s.nops, cudnnGetErrorString(st));
        why();
        graph_free(g);
        return 0;
    }
    printf("%d operations, graph finalized\n", g->s.nops);
    const size_t ws_limit = (size_t)8 << 30;
    CgCandidate k[MAX_CAND];
    int nk = 0, found = sdpa_plan(p->c, &g->s, p->ncand, ws_limit, 0, k, MAX_CAND, &nk);
    print_candidates(k, nk);
    int forbidden = 0;
    for (int i = 0; i < nk; i++) forbidden |= k[i].skipped == CG_SKIP_NOTE;
    if (!found && forbidden) {
        printf("      no deterministic engine: the non-deterministic ones\n");
        found = sdpa_plan(p->c, &g->s, p->ncand, ws_limit, 1, k, MAX_CAND, &nk);
        print_candidates(k, nk);
        g->nondet = found;
    }
    if (!found) {
        printf("      no plan\n");
        why();
        graph_free(g);
        return 0;
    }
    if (g->s.plan.ws_bytes && cudaMalloc(&g->ws, g->s.plan.ws_bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        g->ws = NULL;
        printf("      no memory for the plan's workspace (%zu bytes)\n", g->s.plan.ws_bytes);
        graph_free(g);
        return 0;
    }
    g->pack = pack_for(p, g, f, g->ws, &st);
    if (!g->pack) {
        printf("      variant pack refused: %s\n", cudnnGetErrorString(st));
        why();
        graph_free(g);
        return 0;
    }
    return 1;
}

/* prepare() in f's form, then the others: cuDNN 8.9's reordering, and for
 * a mask the bias in the other type. f is left in the form that ran. */
static int prepare_any(Probe *p, Graph *g, int bwd, Form *f)
{
    const int m0 = f->mask, l0 = f->legacy, nm = f->mask ? 2 : 1;
    for (int i = 0; i < 2 * nm; i++) {
        f->mask = m0 == 0 ? 0 : ((m0 - 1 + i / 2) % 2) + 1;
        f->legacy = (l0 + i) % 2;
        if (prepare(p, g, bwd, f)) return 1;
    }
    f->mask = m0;
    f->legacy = l0;
    return 0;
}

/* One run of g on the context's stream, synchronized. */
static int exec(Probe *p, Graph *g, const char *what)
{
    cudnnStatus_t st = cudnnBackendExecute(p->c->cudnn, g->s.plan.plan, g->pack);
    if (st != CUDNN_STATUS_SUCCESS) {
        printf("    %s: execute refused, %s\n", what, cudnnGetErrorString(st));
        why();
        return 0;
    }
    cudaError_t e = cudaStreamSynchronize(p->c->stream);
    if (e != cudaSuccess) {
        printf("    %s: the run failed on the device, %s (the context is lost)\n", what,
               cudaGetErrorString(e));
        check_failed_++;
        check_summary();
        exit(1);
    }
    return 1;
}

/* ---- ctrain's kernels ---- */

static void ctrain_fwd(Probe *p, const Form *f)
{
    attention_fused_forward_cuda(p->c, p->c_out, p->c_lse, NULL, p->q, p->k, p->v,
                                 f->mask ? p->mask : NULL, p->dt, f->p, SEED, 0, p->B, p->H,
                                 p->T, p->D, 1);
}

/* after ctrain_fwd of the same form */
static void ctrain_bwd(Probe *p, const Form *f)
{
    attention_fused_backward_cuda(p->c, p->dq, p->dk, p->dv, p->dout, p->q, p->k, p->v, p->c_out,
                                  p->c_lse, f->mask ? p->mask : NULL, NULL, p->dt, f->p, SEED, 0,
                                  p->B, p->H, p->T, p->D, 0, 0, 0, 1);
}

typedef struct {
    float *out, *lse, *dq, *dk, *dv;
} Res;

static void res_free(Res *r)
{
    free(r->out); free(r->lse); free(r->dq); free(r->dk); free(r->dv);
    memset(r, 0, sizeof *r);
}

/* ctrain's forward and backward of form f, downloaded; lse + M_b, cuDNN's
 * stats. */
static void ctrain_res(Probe *p, const Form *f, Res *r)
{
    ctrain_fwd(p, f);
    ctrain_bwd(p, f);
    r->out = fetch(p->c_out, p->n, p->dt);
    r->lse = fetch(p->c_lse, p->nrow, DT_F32);
    for (size_t i = 0; i < p->nrow && f->mask; i++) r->lse[i] += p->mb[i / ((size_t)p->H * p->T)];
    r->dq = fetch(p->dq, p->n, p->dt);
    r->dk = fetch(p->dk, p->n, p->dt);
    r->dv = fetch(p->dv, p->n, p->dt);
}

/* ---- timing ---- */

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median of 20 timed runs after 5 warm-ups: g, or ctrain's forward (what
 * 1) or backward (2) of f; -1 when a cuDNN run is refused. */
static double bench(Probe *p, Graph *g, int what, const Form *f, double *min_ms)
{
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float ms[20];
    int ok = 1;
    for (int it = -5; it < 20 && ok; it++) {
        CUDA_CHECK(cudaEventRecord(e0, p->c->stream));
        if (what == 0)
            ok = cudnnBackendExecute(p->c->cudnn, g->s.plan.plan, g->pack) ==
                 CUDNN_STATUS_SUCCESS;
        else if (what == 1) ctrain_fwd(p, f);
        else ctrain_bwd(p, f);
        CUDA_CHECK(cudaEventRecord(e1, p->c->stream));
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (it >= 0) CUDA_CHECK(cudaEventElapsedTime(&ms[it], e0, e1));
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    if (!ok) return -1.0;
    qsort(ms, 20, sizeof ms[0], cmp_float);
    *min_ms = ms[0];
    return 0.5 * ((double)ms[9] + (double)ms[10]);
}

/* Times one pass of cuDNN (g) and ctrain; a JSON line each and a summary. */
static void time_pass(Probe *p, Graph *g, int bwd, const Form *f)
{
    const double flop = 4.0 * p->B * p->H * (double)p->T * p->T * p->D * (bwd ? 2.5 : 1.0);
    double ms[2] = {-1.0, -1.0}, mn[2] = {0.0, 0.0};
    if (g) ms[0] = bench(p, g, 0, f, &mn[0]);
    if (p->tc) {
        if (bwd) ctrain_fwd(p, f);   /* the out and lse ctrain's backward reads */
        ms[1] = bench(p, NULL, bwd ? 2 : 1, f, &mn[1]);
    }
    for (int i = 0; i < 2; i++) {
        if (ms[i] < 0.0) continue;
        printf("{\"bench\":\"sdpa_probe\",\"device\":\"%s\",\"cudnn\":%zu,\"impl\":\"%s\","
               "\"pass\":\"%s\",\"form\":\"%s\",\"engine\":%lld,\"dtype\":\"%s\",\"B\":%d,"
               "\"H\":%d,\"T\":%d,\"Dh\":%d,\"p\":%g,\"mask\":%d,\"drop_in\":%d,"
               "\"warmup\":5,\"iters\":20,\"median_ms\":%.4f,\"min_ms\":%.4f,"
               "\"tflops\":%.1f}\n",
               ctx_device_name(p->c), cudnnGetVersion(), i ? "ctrain" : "cudnn",
               bwd ? "bwd" : "fwd", i ? "-" : bwd && f->accum ? "accum" : "det",
               i ? -1LL : (long long)g->s.plan.engine, dtype_name(p->dt), p->B, p->H, p->T,
               p->D, (double)f->p, f->mask != 0, f->drop_in, ms[i], mn[i],
               flop / (ms[i] * 1e-3) * 1e-12);
    }
    if (ms[0] > 0.0 && ms[1] > 0.0)
        printf("    %s time: cuDNN %.3f ms (%.0f TFLOP/s), ctrain %.3f ms (%.0f TFLOP/s): "
               "cuDNN/ctrain %.2f\n", bwd ? "backward" : "forward", ms[0],
               flop / (ms[0] * 1e-3) * 1e-12, ms[1], flop / (ms[1] * 1e-3) * 1e-12, ms[0] / ms[1]);
    fflush(stdout);
}

/* The drop_in form's mask kernel alone: median of 20 after 5 warm-ups. */
static void time_mask(Probe *p, const Form *f)
{
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float ms[20];
    for (int it = -5; it < 20; it++) {
        CUDA_CHECK(cudaEventRecord(e0, p->c->stream));
        attention_cudnn_drop_mask_cuda(p->dmask, p->dt, p->nmask, f->p, SEED, 0, NULL,
                                       p->c->stream);
        CUDA_CHECK(cudaEventRecord(e1, p->c->stream));
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (it >= 0) CUDA_CHECK(cudaEventElapsedTime(&ms[it], e0, e1));
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    qsort(ms, 20, sizeof ms[0], cmp_float);
    const double med = 0.5 * ((double)ms[9] + (double)ms[10]);
    printf("    the mask [B, H, T, T] written by ctrain's kernel: %.3f ms (%.0f GB/s)\n", med,
           (double)p->nmask * dtype_size(p->dt) / (med * 1e-3) * 1e-9);
}

/* ---- a host reference on the mask cuDNN used ---- */

#define REF_HEADS 4

/* Forward and backward of (b, h) = bh in double on the host, from the
 * probe's q, k, v, dO and a keep mask M [T, T] (1 keep, 0 drop):
 *   S = scale q k^T, P = softmax S, Pd = P M s, O = Pd v
 *   dPd = dO v^T, dv = Pd^T dO, D = rowsum(dO O), dS = P (dPd M s - D),
 *   dq = scale dS k, dk = scale dS^T q
 * into o, dq, dk, dv [T, Dh] each. */
static void ref_head(const Probe *p, int bh, const float *M, double s, double *o, double *dq,
                     double *dk, double *dv)
{
    const int T = p->T, D = p->D, H = p->H, b = bh / H, h = bh % H;
    const double scale = 1.0 / sqrt((double)D);
#define AT(x, t, d) ((double)(x)[(((size_t)b * T + (t)) * H + h) * D + (d)])
    double *P = malloc(sizeof(double) * (size_t)T * T), *dS = malloc(sizeof(double) * (size_t)T * T);
    for (int i = 0; i < T; i++) {
        double mx = -INFINITY;
        for (int j = 0; j < T; j++) {
            double a = 0.0;
            for (int d = 0; d < D; d++) a += AT(p->hq, i, d) * AT(p->hk, j, d);
            P[(size_t)i * T + j] = a * scale;
            mx = fmax(mx, a * scale);
        }
        double z = 0.0;
        for (int j = 0; j < T; j++) z += (P[(size_t)i * T + j] = exp(P[(size_t)i * T + j] - mx));
        for (int j = 0; j < T; j++) P[(size_t)i * T + j] /= z;
    }
    for (int i = 0; i < T; i++)
        for (int d = 0; d < D; d++) {
            double a = 0.0;
            for (int j = 0; j < T; j++) a += P[(size_t)i * T + j] * M[(size_t)i * T + j] * s * AT(p->hv, j, d);
            o[(size_t)i * D + d] = a;
        }
    for (int j = 0; j < T; j++)
        for (int d = 0; d < D; d++) {
            double a = 0.0;
            for (int i = 0; i < T; i++) a += P[(size_t)i * T + j] * M[(size_t)i * T + j] * s * AT(p->hdo, i, d);
            dv[(size_t)j * D + d] = a;
        }
    for (int i = 0; i < T; i++) {
        double Di = 0.0;
        for (int d = 0; d < D; d++) Di += AT(p->hdo, i, d) * o[(size_t)i * D + d];
        for (int j = 0; j < T; j++) {
            double a = 0.0;
            for (int d = 0; d < D; d++) a += AT(p->hdo, i, d) * AT(p->hv, j, d);
            dS[(size_t)i * T + j] = P[(size_t)i * T + j] * (a * M[(size_t)i * T + j] * s - Di);
        }
    }
    for (int i = 0; i < T; i++)
        for (int d = 0; d < D; d++) {
            double a = 0.0;
            for (int j = 0; j < T; j++) a += dS[(size_t)i * T + j] * AT(p->hk, j, d);
            dq[(size_t)i * D + d] = a * scale;
        }
    for (int j = 0; j < T; j++)
        for (int d = 0; d < D; d++) {
            double a = 0.0;
            for (int i = 0; i < T; i++) a += dS[(size_t)i * T + j] * AT(p->hq, i, d);
            dk[(size_t)j * D + d] = a * scale;
        }
#undef AT
    free(P);
    free(dS);
}

/* cuDNN's out (host, [B, T, H, Dh]) and the backward's dq, dk, dv on the
 * device against ref_head on the first REF_HEADS (b, h) with mask M (host,
 * [B, H, T, T] from the start), by relative norm over those heads. */
static void check_ref(Probe *p, const char *tag, const float *out, const float *M, double sd)
{
    const int T = p->T, D = p->D, H = p->H, nh = p->B * H < REF_HEADS ? p->B * H : REF_HEADS;
    const size_t hn = (size_t)T * D;
    float *got[4] = {NULL, fetch(p->dq, p->n, p->dt), fetch(p->dk, p->n, p->dt),
                     fetch(p->dv, p->n, p->dt)};
    got[0] = (float *)out;
    double err[4] = {0}, nrm[4] = {0};
    double *r[4];
    for (int x = 0; x < 4; x++) r[x] = malloc(sizeof(double) * hn);
    for (int bh = 0; bh < nh; bh++) {
        const int b = bh / H, h = bh % H;
        ref_head(p, bh, M + (size_t)bh * T * T, sd, r[0], r[1], r[2], r[3]);
        for (int x = 0; x < 4; x++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    const double g = got[x][(((size_t)b * T + t) * H + h) * D + d];
                    const double e = r[x][(size_t)t * D + d];
                    err[x] += (g - e) * (g - e);
                    nrm[x] += e * e;
                }
    }
    static const char *const nm[4] = {"out", "dq", "dk", "dv"};
    char name[128];
    for (int x = 0; x < 4; x++) {
        const double e = sqrt(err[x] / (nrm[x] > 0.0 ? nrm[x] : 1.0));
        const double tol = (x ? 2.0 : 1.0) * tol_norm(p->dt);
        snprintf(name, sizeof name, "%s %s vs the host reference on cuDNN's mask (%d heads)", tag,
                 nm[x], nh);
        verdict(name, e <= tol, "relative error %.2e (tolerance %.1e)", e, tol);
        free(r[x]);
    }
    for (int x = 1; x < 4; x++) free(got[x]);
}

/* The first REF_HEADS heads' mask of form f's last forward, as 0 / 1 floats. */
static float *mask_heads(Probe *p, const Form *f)
{
    const int nh = p->B * p->H < REF_HEADS ? p->B * p->H : REF_HEADS;
    const size_t n = (size_t)nh * p->T * p->T;
    float *m = falloc(n);
    if (f->rng_dump) {
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(m, p->rdump, n * sizeof(float), cudaMemcpyDeviceToHost));
    } else {
        gpu_download(m, p->dmask, n, p->dt);
    }
    return m;
}

/* ---- one configuration ---- */

/* cuDNN's p = 0 results of a mask setting, for (c). */
typedef struct {
    float *out, *stats, *c_out;   /* cuDNN's out and stats, ctrain's out */
} P0;

static void compare_ctrain(Probe *p, const char *pass, const float *got[], const Res *r)
{
    const float *ref[3] = {r->dq, r->dk, r->dv};
    static const char *const nm[3] = {"dq", "dk", "dv"};
    const double tol = 2.0 * tol_norm(p->dt);
    char name[64];
    for (int i = 0; i < 3; i++) {
        const double e = rel(got[i], ref[i], p->n);
        snprintf(name, sizeof name, "%s %s vs ctrain", pass, nm[i]);
        verdict(name, e <= tol, "relative error %.2e (tolerance %.1e)", e, tol);
    }
}

/* The backward of f twice: finite, the same bits; then against ctrain (p 0)
 * or the dropout identities (p > 0, with the forward's out in out). */
static void check_bwd(Probe *p, Graph *g, const Form *f, const Res *ctr, const float *out,
                      const char *tag)
{
    const size_t bytes = p->n * dtype_size(p->dt);
    void *dev[3] = {p->dq, p->dk, p->dv};
    unsigned char *first[3];
    for (int i = 0; i < 3; i++)   /* NaN: an element the run forgets shows */
        CUDA_CHECK(cudaMemsetAsync(dev[i], 0xFF, bytes, p->c->stream));
    char name[96];
    if (!exec(p, g, "backward")) {
        snprintf(name, sizeof name, "%s cuDNN backward runs", tag);
        verdict(name, 0, "execute refused (above)");
        return;
    }
    for (int i = 0; i < 3; i++) first[i] = raw(dev[i], bytes);
    const int again = exec(p, g, "backward, again");
    size_t diff = 0;
    for (int i = 0; i < 3 && again; i++) {
        unsigned char *second = raw(dev[i], bytes);
        diff += bits_differ(first[i], second, p->n, dtype_size(p->dt));
        free(second);
    }
    for (int i = 0; i < 3; i++) free(first[i]);
    snprintf(name, sizeof name, "%s backward repeats bit for bit", tag);
    if (again && !f->accum)
        verdict(name, diff == 0, "%zu of %zu dq, dk, dv elements differ", diff, 3 * p->n);
    else if (again)   /* the accumulator's form: no determinism asked of it */
        printf("    (%s: %zu of %zu elements differ)\n", name, diff, 3 * p->n);
    float *got[3] = {fetch(p->dq, p->n, p->dt), fetch(p->dk, p->n, p->dt),
                     fetch(p->dv, p->n, p->dt)};
    const int finite = all_finite(got[0], p->n) && all_finite(got[1], p->n) &&
                       all_finite(got[2], p->n);
    snprintf(name, sizeof name, "%s dq, dk, dv finite", tag);
    verdict(name, finite, "%s", finite ? "yes" : "NaN or inf present");
    if ((f->p == 0.0f || f->drop_in) && ctr && ctr->dq) {   /* the same mask as ctrain's */
        compare_ctrain(p, tag, (const float **)got, ctr);
    } else if (f->p > 0.0f && out) {
        const double iv = identity(p, got[2], p->hv, p->hdo, out);
        const double ik = identity(p, got[0], p->hq, got[1], p->hk);
        double cv = -1.0, ck = -1.0;
        if (ctr && ctr->dq) {
            cv = identity(p, ctr->dv, p->hv, p->hdo, ctr->out);
            ck = identity(p, ctr->dq, p->hq, ctr->dk, p->hk);
        }
        snprintf(name, sizeof name, "%s sum dv.v = sum dO.out per (b, h)", tag);
        verdict(name, iv <= 0.05, "relative %.2e (tolerance 5e-2; ctrain's %.2e)", iv, cv);
        snprintf(name, sizeof name, "%s sum dq.q = sum dk.k per (b, h)", tag);
        verdict(name, ik <= 0.05, "relative %.2e (tolerance 5e-2; ctrain's %.2e)", ik, ck);
    }
    for (int i = 0; i < 3; i++) free(got[i]);
}

static void run_config(Probe *p, const char *title, Form *f, P0 *p0)
{
    printf("  %s\n", title);
    Res ctr = {0};
    if (p->tc) ctrain_res(p, f, &ctr);
    else printf("    (ctrain's [B, T, H, Dh] kernels do not apply here: no comparisons)\n");
    char tag[48];
    snprintf(tag, sizeof tag, "p %g%s%s", (double)f->p, f->mask ? " mask" : "",
             f->p > 0.0f && f->drop_in ? " drop_in" : "");
    if (f->p > 0.0f && f->drop_in) {   /* ctrain's mask of (SEED, 0), as its kernels draw it */
        attention_cudnn_drop_mask_cuda(p->dmask, p->dt, p->nmask, f->p, SEED, 0, NULL,
                                       p->c->stream);
        CUDA_CHECK(cudaStreamSynchronize(p->c->stream));
    }
    Graph gf, gb;
    float *out = NULL, *mheads = NULL;
    const int fwd_ok = prepare_any(p, &gf, 0, f);
    if (fwd_ok && exec(p, &gf, "forward")) {
        out = fetch(p->o, p->n, p->dt);
        if (f->p > 0.0f && (f->rng_dump || f->drop_in)) mheads = mask_heads(p, f);
        float *stats = fetch(p->stats, p->nrow, DT_F32);
        char name[96];
        if ((f->p == 0.0f || f->drop_in) && ctr.out) {
            const double e = rel(out, ctr.out, p->n);
            double dmax = 0.0, dsum = 0.0;
            for (size_t i = 0; i < p->nrow; i++) {
                const double d = (double)stats[i] - ctr.lse[i];
                dmax = fmax(dmax, isnan(d) ? INFINITY : fabs(d));
                dsum += d;
            }
            snprintf(name, sizeof name, "%s out vs ctrain", tag);
            verdict(name, e <= tol_norm(p->dt), "relative error %.2e (tolerance %.1e)", e,
                    tol_norm(p->dt));
            snprintf(name, sizeof name, "%s stats = ctrain's lse + M_b", tag);
            verdict(name, dmax <= 2e-3, "max |diff| %.2e, mean diff %.2e (tolerance 2e-3)", dmax,
                    dsum / (double)p->nrow);
        }
        if (f->drop_in) {
            /* compared with ctrain's kernels (the same mask) above */
        } else if (f->p == 0.0f) {   /* kept for (c) */
            p0->out = out;
            p0->stats = stats;
            p0->c_out = ctr.out;
            ctr.out = NULL;
            out = stats = NULL;
        } else {
            const size_t bytes = p->n * dtype_size(p->dt);
            unsigned char *a = raw(p->o, bytes), *b2 = NULL;
            if (exec(p, &gf, "forward, again")) {
                b2 = raw(p->o, bytes);
                const size_t d = bits_differ(a, b2, p->n, dtype_size(p->dt));
                snprintf(name, sizeof name, "%s forward repeats bit for bit (same seed, offset)",
                         tag);
                verdict(name, d == 0, "%zu of %zu out elements differ", d, p->n);
            }
            free(a);
            free(b2);
            if (p0->out) {
                double dmax = 0.0;
                for (size_t i = 0; i < p->nrow; i++)
                    dmax = fmax(dmax, fabs((double)stats[i] - p0->stats[i]));
                snprintf(name, sizeof name, "%s stats = the p 0 stats", tag);
                verdict(name, dmax <= 1e-4, "max |diff| %.2e (tolerance 1e-4)", dmax);
                const double want = sqrt((double)f->p / (1.0 - (double)f->p));
                const double got = rel(out, p0->out, p->n);
                const double mine = ctr.out && p0->c_out ? rel(ctr.out, p0->c_out, p->n) : -1.0;
                snprintf(name, sizeof name, "%s |out - out_p0| / |out_p0| = sqrt(p/(1-p))", tag);
                verdict(name, fabs(got / want - 1.0) <= 0.1,
                        "%.4f, expected %.4f within 10%% (ctrain's dropout: %.4f)", got, want,
                        mine);
            }
        }
        free(stats);
    } else if (fwd_ok) {
        graph_free(&gf);
    }
    if (!fwd_ok || !gf.s.graph) {
        char name[96];
        snprintf(name, sizeof name, "%s cuDNN forward runs", tag);
        verdict(name, 0, "refused (above)");
        if (f->p == 0.0f && ctr.out) {   /* the backward on ctrain's forward instead */
            printf("    (the backward reads ctrain's out and lse + M_b instead)\n");
            CUDA_CHECK(cudaMemcpy(p->o, p->c_out, p->n * dtype_size(p->dt),
                                  cudaMemcpyDeviceToDevice));
            CUDA_CHECK(cudaMemcpy(p->stats, ctr.lse, p->nrow * 4, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaDeviceSynchronize());   /* before the context's stream reads them */
        }
    }
    Form fb = *f;
    fb.accum = 0;
    fb.rng_dump = 0;   /* the backward the op runs: it draws the forward's mask again */
    const int bwd_ok = prepare_any(p, &gb, 1, &fb);
    if (bwd_ok) {
        printf("    backward engine %lld: %s\n", (long long)gb.s.plan.engine,
               gb.nondet ? "NON-DETERMINISTIC (no deterministic engine took the graph)"
                         : "no non-deterministic note");
        check_bwd(p, &gb, &fb, &ctr, out, tag);
        /* the kept values' scale: 1 / (1 - p) for cuDNN's own mask, the rate
         * ctrain's mask draws for drop_in (ops/dropout_mask.h) */
        if (mheads && out)
            check_ref(p, tag, out, mheads,
                      f->drop_in ? (double)drop_scale(f->p) : 1.0 / (1.0 - (double)f->p));
    } else {
        char name[96];
        snprintf(name, sizeof name, "%s cuDNN backward runs", tag);
        verdict(name, 0, "refused (above)");
    }
    time_pass(p, gf.s.graph ? &gf : NULL, 0, f);
    if (f->p > 0.0f && f->drop_in) time_mask(p, f);
    time_pass(p, bwd_ok ? &gb : NULL, 1, &fb);
    if (p->accum && bwd_ok) {
        Graph ga;
        Form fa = fb;
        fa.accum = 1;
        if (prepare(p, &ga, 1, &fa)) {
            printf("    backward engine %lld (dQ via f32 accumulator)%s\n",
                   (long long)ga.s.plan.engine, ga.nondet ? ": NON-DETERMINISTIC" : "");
            char atag[64];
            snprintf(atag, sizeof atag, "%s accum", tag);
            check_bwd(p, &ga, &fa, &ctr, out, atag);
            time_pass(p, &ga, 1, &fa);
            graph_free(&ga);
        }
    }
    if (gf.s.graph) graph_free(&gf);
    if (bwd_ok) graph_free(&gb);
    free(out);
    free(mheads);
    res_free(&ctr);
}

/* ---- a shape ---- */

/* --knobs: the engine the heuristics chose for form f, each of its knobs
 * moved alone over the values cuDNN reports (at most 48 a knob, the others at
 * the heuristics' choice), each plan timed as bench() times, its outputs
 * against the heuristics' plan (relative norm: a plan may draw dropout's
 * mask in another order, which shows here as a large difference). At most
 * ~100 s a graph (each plan compiles at run time). */
static void knob_sweep(Probe *p, int bwd, const Form *f)
{
    Graph g;
    if (!prepare(p, &g, bwd, f)) return;
    CgPlan *hp = &g.s.plan;
    double mn, base = bench(p, &g, 0, f, &mn);
    const size_t n = p->n;
    float *ref[3] = {fetch(bwd ? p->dq : p->o, n, p->dt), bwd ? fetch(p->dk, n, p->dt) : NULL,
                     bwd ? fetch(p->dv, n, p->dt) : NULL};
    printf("    %s: engine %lld, %d knobs chosen:", bwd ? "backward" : "forward",
           (long long)hp->engine, hp->nknobs);
    for (int i = 0; i < hp->nknobs; i++)
        printf(" %lld=%lld", (long long)hp->knobs[i][0], (long long)hp->knobs[i][1]);
    printf("; %.4f ms\n", base);
    CgKnobInfo ki[CG_MAX_KNOBS];
    const int nk = cg_engine_knobs(g.s.graph, hp->engine, ki, CG_MAX_KNOBS);
    printf("    the engine's knobs (%d):", nk);
    for (int i = 0; i < nk; i++)
        printf(" type %lld [%lld, %lld] step %lld;", (long long)ki[i].type, (long long)ki[i].min,
               (long long)ki[i].max, (long long)ki[i].stride);
    printf("\n");
    CgRule rule = {0};
    rule.runtime_compile = 1;
    rule.ws_limit = (size_t)8 << 30;
    rule.forbid_notes = CG_NOTE(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double best = base;
    int refused = 0, tried = 0;
    for (int i = 0; i < nk; i++) {
        int cur = -1;
        for (int j = 0; j < hp->nknobs; j++)
            if (hp->knobs[j][0] == ki[i].type) cur = j;
        int vals = 0;
        for (int64_t v = ki[i].min; v <= ki[i].max && vals < 48; v += ki[i].stride, vals++) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) > 100.0)
                break;   /* each plan compiles at run time: ~100 s a graph at most */
            if (cur >= 0 && hp->knobs[cur][1] == v) continue;
            int64_t kn[CG_MAX_KNOBS][2];
            int m = hp->nknobs;
            for (int j = 0; j < m; j++) kn[j][0] = hp->knobs[j][0], kn[j][1] = hp->knobs[j][1];
            if (cur >= 0) kn[cur][1] = v;
            else if (m < CG_MAX_KNOBS) kn[m][0] = ki[i].type, kn[m++][1] = v;
            CgPlan alt;
            if (!cg_plan_for_engine(p->c, g.s.graph, &rule, hp->engine,
                                    (const int64_t(*)[2])kn, m, &alt)) {
                refused++;
                continue;
            }
            void *ws = NULL;
            cudnnStatus_t st;
            if (alt.ws_bytes && cudaMalloc(&ws, alt.ws_bytes) != cudaSuccess) {
                (void)cudaGetLastError();
                cg_plan_free(&alt);
                continue;
            }
            CgDesc pack = pack_for(p, &g, f, ws, &st);
            CgDesc keep_plan = hp->plan, keep_pack = g.pack;
            hp->plan = alt.plan;
            g.pack = pack;
            double t = pack ? bench(p, &g, 0, f, &mn) : -1.0;
            tried++;
            double e[3] = {0, 0, 0};
            if (t > 0.0) {
                const void *got[3] = {bwd ? p->dq : p->o, p->dk, p->dv};
                for (int r = 0; r < (bwd ? 3 : 1); r++) {
                    float *h = fetch(got[r], n, p->dt);
                    e[r] = rel(h, ref[r], n);
                    free(h);
                }
            }
            hp->plan = keep_plan;
            g.pack = keep_pack;
            printf("      knob %lld = %lld: %s%.4f ms (%.2f of the heuristics'), rel diff "
                   "%.1e %.1e %.1e\n", (long long)ki[i].type, (long long)v,
                   t > 0.0 ? "" : "refused to run, ", t, t > 0.0 ? t / base : 0.0, e[0], e[1],
                   e[2]);
            if (t > 0.0 && t < best) best = t;
            cg_destroy(pack);
            cg_plan_free(&alt);
            if (ws) CUDA_CHECK(cudaFree(ws));
        }
    }
    printf("    %s sweep: %d plans timed, %d refused; best %.4f ms against the heuristics' %.4f "
           "(%.2f)\n", bwd ? "backward" : "forward", tried, refused, best, base, best / base);
    for (int r = 0; r < 3; r++) free(ref[r]);
    graph_free(&g);
}

/* The checks (a)-(e) of the file's header, on the uploaded inputs. */
static void run_configs(Probe *p, P0 p0[2], Form *fa, Form *fb)
{
    run_config(p, "(a) p 0, no mask", fa, &p0[0]);
    run_config(p, "(b) p 0, key mask as a bias [B, 1, T, T] (query stride 0)", fb, &p0[1]);
    const int with_mask = p0[1].out != NULL;
    Form fc = with_mask ? *fb : *fa;
    fc.p = 0.1f;
    run_config(p, with_mask ? "(c) p 0.1, key mask" : "(c) p 0.1, no mask (the mask was refused)",
               &fc, &p0[with_mask]);
    /* BERT's synthetic step passes no key mask: cuDNN's RNG against the mask as an input */
    Form fd = {0.1f, 0, 0, 0, 0, 1}, fe = {0.1f, 0, 0, 0, 1, 0};
    run_config(p, "(d) p 0.1, no mask, cuDNN's RNG (its draws dumped: a host reference on them)",
               &fd, &p0[0]);
    P0 none = {0};
    run_config(p, "(e) p 0.1, no mask, ctrain's dropout mask an input [B, H, T, T]", &fe, &none);
}

static void run_shape(Probe *p)
{
    const size_t n = p->n, es = dtype_size(p->dt);
    /* inputs: scores q.k/sqrt(Dh) of std ~1.3 (a peaked softmax); the mask
     * pads a suffix of each row but for at least half the keys (row 0 none) */
    p->hq = hrand(n, -2.0f, 2.0f, p->dt);
    p->hk = hrand(n, -2.0f, 2.0f, p->dt);
    p->hv = hrand(n, -1.0f, 1.0f, p->dt);
    p->hdo = hrand(n, -1.0f, 1.0f, p->dt);
    p->hmask = falloc((size_t)p->B * p->T);
    p->mb = falloc((size_t)p->B);
    for (int b = 0; b < p->B; b++) {
        const int len = p->T - (int)(((unsigned)b * 7919u) % (unsigned)(p->T / 2 + 1));
        p->mb[b] = -INFINITY;
        for (int j = 0; j < p->T; j++) {
            p->hmask[(size_t)b * p->T + j] = j < len ? 0.0f : -10000.0f;
            p->mb[b] = fmaxf(p->mb[b], p->hmask[(size_t)b * p->T + j]);
        }
    }
    p->q = gpu_upload(p->hq, n, p->dt);
    p->k = gpu_upload(p->hk, n, p->dt);
    p->v = gpu_upload(p->hv, n, p->dt);
    p->dout = gpu_upload(p->hdo, n, p->dt);
    p->mask = (float *)gpu_upload(p->hmask, (size_t)p->B * p->T, DT_F32);
    p->bias_dt = gpu_upload(p->hmask, (size_t)p->B * p->T, p->dt);
    void **outs[] = {&p->o, &p->dq, &p->dk, &p->dv, &p->c_out};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        CUDA_CHECK(cudaMalloc(outs[i], n * es));
    CUDA_CHECK(cudaMalloc((void **)&p->stats, p->nrow * 4));
    CUDA_CHECK(cudaMalloc((void **)&p->sum, p->nrow * 4));
    CUDA_CHECK(cudaMalloc((void **)&p->c_lse, p->nrow * 4));
    CUDA_CHECK(cudaMalloc((void **)&p->dqacc, n * 4));
    CUDA_CHECK(cudaMalloc(&p->dmask, p->nmask * es));
    CUDA_CHECK(cudaMalloc((void **)&p->rdump, p->nmask * sizeof(float)));
    const int64_t seed = (int64_t)SEED, offset = 0;
    p->seed = (int64_t *)gpu_upload_raw(&seed, 8);
    p->offset = (int64_t *)gpu_upload_raw(&offset, 8);
    CUDA_CHECK(cudaDeviceSynchronize());   /* uploads done before the stream's work */

    printf("B %d, H %d, T %d, Dh %d, %s (q, k, v, out [B, T, H, Dh]):\n", p->B, p->H, p->T, p->D,
           dtype_name(p->dt));
    if (p->T % 128 != 0 && cudnnGetVersion() < 91600)
        printf("  note: for T %% 128 != 0 before cuDNN 9.16 cudnn-frontend adds a full-length\n"
               "  padding mask to the backward; this probe does not\n");
    if (p->knobs) {   /* BERT's step form: p 0.1, no key mask, dQ direct */
        Form fk = {0.1f, 0, 0, 0, 0, 0};
        knob_sweep(p, 0, &fk);
        knob_sweep(p, 1, &fk);
    }
    P0 p0[2] = {{0}};
    Form fa = {0.0f, 0, 0, 0, 0, 0}, fb = {0.0f, 1, 0, 0, 0, 0};
    if (!p->knobs) run_configs(p, p0, &fa, &fb);
    for (int i = 0; i < 2; i++) {
        free(p0[i].out);
        free(p0[i].stats);
        free(p0[i].c_out);
    }
    void *dev[] = {p->q, p->k, p->v, p->dout, p->mask, p->bias_dt, p->o, p->dq, p->dk, p->dv,
                   p->c_out, p->stats, p->sum, p->c_lse, p->dqacc, p->seed, p->offset,
                   p->dmask, p->rdump};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dfree(dev[i]);
    free(p->hq); free(p->hk); free(p->hv); free(p->hdo); free(p->hmask); free(p->mb);
}

int main(int argc, char **argv)
{
    int shape[4] = {0, 0, 0, 0}, ns = 0, ncand = 4, dts = 1, accum = 0, knobs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *v = argv[++i];
            dts = !strcmp(v, "bf16") ? 1 : !strcmp(v, "f16") ? 2 : 3;
        } else if (!strcmp(argv[i], "--candidates") && i + 1 < argc) {
            ncand = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--accum")) {
            accum = 1;
        } else if (!strcmp(argv[i], "--knobs")) {
            knobs = 1;
        } else if (argv[i][0] != '-' && ns < 4) {
            shape[ns++] = atoi(argv[i]);
        } else {
            ns = -1;
            break;
        }
    }
    if ((ns != 0 && ns != 4) || ncand < 1 || (ns == 4 && (shape[0] < 1 || shape[1] < 1 ||
                                                          shape[2] < 2 || shape[3] < 8))) {
        fprintf(stderr, "usage: cudnn_sdpa_probe [B H T Dh] [--dtype bf16|f16|both] "
                        "[--candidates K] [--accum] [--knobs]\n");
        return 2;
    }
    const int shapes[2][4] = {{256, 16, 128, 64}, {32, 16, 512, 64}};
    setvbuf(stdout, NULL, _IOLBF, 0);   /* a timeout keeps every finished line */
    check_seed(7);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("cudnn_sdpa_probe: %s (sm_%d%d), cuDNN %zu (built against %d), at most %d plan "
           "attempts a graph\n", prop.name, prop.major, prop.minor, cudnnGetVersion(),
           CUDNN_VERSION, ncand);
    for (int d = 0; d < 2; d++) {
        if (!(dts & (1 << d))) continue;
        for (int s = 0; s < (ns == 4 ? 1 : 2); s++) {
            const int *sh = ns == 4 ? shape : shapes[s];
            Probe p;
            memset(&p, 0, sizeof p);
            p.c = &c;
            p.B = sh[0], p.H = sh[1], p.T = sh[2], p.D = sh[3];
            p.ncand = ncand;
            p.accum = accum;
            p.knobs = knobs;
            p.dt = d == 0 ? DT_BF16 : DT_F16;
            p.ct = d == 0 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
            p.n = (size_t)p.B * p.T * p.H * p.D;
            p.nrow = (size_t)p.B * p.H * p.T;
            p.nmask = p.nrow * (size_t)p.T;
            p.shape = (SdpaShape){p.B, p.H, p.T, p.D, p.ct, 1, 0};
            p.tc = attention_fa_tc_supports(&c, p.dt, (size_t)p.D);
            run_shape(&p);
        }
    }
    ctx_free(&c);
    return check_summary() ? 1 : 0;
}
