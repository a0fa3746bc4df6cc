/* cudnn_dgrad_probe.c — ResNet-50's strided convolutions' data gradient:
 * cuDNN's own kernel against the same gradient as stride-1 convolutions, one
 * per output phase, each writing straight into its rows and columns of dx.
 * A measurement for docs/kernels.md, not a test.
 *
 *   make build/cudnn_dgrad_probe   (CUDA builds; `make` builds it too)
 *   build/cudnn_dgrad_probe [N] [--dtype bf16|f32|both]
 *
 * Why: in ResNet-50's step timelines (docs/kernels.md, "ResNet-50 tf32:
 * where the step goes") three data-gradient calls take 809 us each in tf32
 * (400 in bf16) where the stride-1 3 x 3 ones of the same FLOPs take ~170
 * (~90): a strided data gradient scatters its sums into every other row and
 * column, which cuDNN's deterministic kernels do slowly.
 *
 * The identity (stride 2, forward y[i] = sum_r x[2 i + r - pad] w[r], per
 * spatial dimension): dx[h] = sum over r, i with 2 i + r - pad = h of dy[i] w[r].
 * For the rows of one parity py (h = 2 a + py) only the taps r with r = py +
 * pad (mod 2) reach it, from dy[a + u], u = (py + pad - r) / 2. So each of
 * the four phases (py, px) is a stride-1 correlation of dy (K channels, P x
 * Q) with a sub-filter of those taps (transposed: C outputs, K inputs),
 * padded 0 before and (taps - 1) after, whose P x Q result is dx's rows
 * 2 a + py, columns 2 b + px: an NHWC view with the row and column strides
 * doubled. 3 x 3, pad 1: 1, 2, 2 and 4 taps (9 in all, the FLOPs of the
 * original); 1 x 1, pad 0: phase (0, 0) alone, the other three are zeros.
 * The phases write disjoint elements, so the result is deterministic when
 * each convolution is.
 *
 * Per shape and type: the direct data gradient under ctrain's rule
 * (deterministic; f32 with TF32 allowed, bf16 without reduced-precision
 * reduction) and with non-deterministic engines allowed (what PyTorch may
 * run); then each phase's convolution into the strided view (or, when no
 * engine takes such an output, into a packed buffer, timed alone and
 * marked), their sum, and dx against the direct result (relative norm).
 */
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
    int H, C, K, R, pad, stride;   /* square input H x H */
} Shape;

/* the strided ones, then the stride-1 shapes of the first and last stages
 * for comparison (their data gradients have no phases) */
static const Shape shapes[] = {
    {"3x3 s2 128->128 56x56", 56, 128, 128, 3, 1, 2},
    {"3x3 s2 256->256 28x28", 28, 256, 256, 3, 1, 2},
    {"3x3 s2 512->512 14x14", 14, 512, 512, 3, 1, 2},
    {"1x1 s2 256->512 56x56", 56, 256, 512, 1, 0, 2},
    {"1x1 s2 512->1024 28x28", 28, 512, 1024, 1, 0, 2},
    {"1x1 s2 1024->2048 14x14", 14, 1024, 2048, 1, 0, 2},
    {"3x3 64->64 56x56", 56, 64, 64, 3, 1, 1},
    {"1x1 64->64 56x56", 56, 64, 64, 1, 0, 1},
    {"1x1 64->256 56x56", 56, 64, 256, 1, 0, 1},
    {"1x1 256->64 56x56", 56, 256, 64, 1, 0, 1},
    {"3x3 512->512 7x7", 7, 512, 512, 3, 1, 1},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

enum { U_DX = 1, U_W, U_DY, U_T };

typedef struct {
    Ctx *c;
    DType dt;
    cudnnDataType_t ct;
} Probe;

/* The rule ctrain's convolution search applies (ops/conv2d_cudnn.c
 * graph_rule), deterministic or not. */
static CgRule rule_for(DType dt, int det)
{
    CgRule r = {0};
    r.forbid_notes = dt == DT_F32 ? CG_NOTE(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
                                  : CG_NOTE(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION);
    if (det) r.forbid_notes |= CG_NOTE(CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    r.all_engines = 1;
    r.ws_limit = (size_t)4 << 30;
    return r;
}

/* Graph of ops[0..n-1] searched under rule on the variant pack and run once
 * more; the time of one run (ms), or -1 with the reason printed. */
static float search_run(Probe *p, CgDesc *ops, int n, const CgRule *rule, const int64_t *uids,
                        void *const *ptrs, int nu, int64_t *engine)
{
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    CgDesc g = cg_graph(p->c->cudnn, ops, n, &st);
    if (!g) {
        printf("graph declined (%s) ", cudnnGetErrorString(st));
        return -1.0f;
    }
    CgPlan plan;
    if (!cg_search(p->c, g, rule, uids, ptrs, nu, &plan)) {
        printf("no engine ran (%d tried, %d over the workspace, %d failed) ", plan.tried,
               plan.over_ws, plan.run_failed);
        cg_destroy(g);
        return -1.0f;
    }
    cg_execute(p->c, &plan, uids, ptrs, nu);
    CUDA_CHECK(cudaStreamSynchronize(p->c->stream));
    const float ms = plan.ms;
    *engine = plan.engine;
    cg_plan_free(&plan);
    cg_destroy(g);
    return ms;
}

/* An NHWC tensor [n, c, h, w] (cuDNN's order) with the row and column
 * strides multiplied by step (1: packed; 2: every other row and column of
 * a tensor twice the size) */
static CgDesc nhwc_view(int64_t uid, cudnnDataType_t t, int n, int c, int h, int w, int step)
{
    const int64_t W = (int64_t)w * step, H = (int64_t)h * step;
    const int64_t d[4] = {n, c, h, w}, s[4] = {H * W * c, 1, step * W * c, (int64_t)step * c};
    return cg_tensor_try(uid, t, 4, d, s, 16, 0);
}

/* The direct data gradient dx = conv^T(dy, w) (+ dx when beta is 1); -1
 * when none ran. */
static float direct(Probe *p, const Shape *sh, int N, int det, float beta, void *dx, void *w,
                    void *dy)
{
    const int H = sh->H, P = (H + 2 * sh->pad - sh->R) / sh->stride + 1, C = sh->C, K = sh->K;
    const int R = sh->R;
    const int64_t wd[4] = {K, C, R, R}, ws[4] = {(int64_t)R * R * C, 1, (int64_t)R * C, C};
    const int64_t pad[2] = {sh->pad, sh->pad}, str[2] = {sh->stride, sh->stride}, dil[2] = {1, 1};
    CgDesc xd = nhwc_view(U_DX, p->ct, N, C, H, H, 1);
    CgDesc wt = cg_tensor_try(U_W, p->ct, 4, wd, ws, 16, 0);
    CgDesc yd = nhwc_view(U_DY, p->ct, N, K, P, P, 1), cd = cg_conv_desc(2, pad, str, dil);
    CgDesc op = cg_conv_op_try(CG_DGRAD, cd, xd, wt, yd, 1.0f, beta);
    const int64_t uids[3] = {U_DX, U_W, U_DY};
    void *ptrs[3] = {dx, w, dy};
    int64_t engine = -1;
    const CgRule rule = rule_for(p->dt, det);
    printf("  dgrad %-23s ", det ? (beta != 0.0f ? "(deterministic, beta 1)" : "(deterministic)")
                                     : "(any)");
    const float ms = op ? search_run(p, &op, 1, &rule, uids, ptrs, 3, &engine) : -1.0f;
    if (!op) printf("operation refused ");
    if (ms >= 0)
        printf("%8.3f ms  engine %lld  %.0f TFLOP/s", (double)ms, (long long)engine,
               2e-9 * (double)N * P * P * K * C * R * R / ms);
    printf("\n");
    CgDesc all[5] = {op, cd, yd, wt, xd};
    for (int i = 0; i < 5; i++) cg_destroy(all[i]);
    return ms;
}

/* The taps of one phase: u0 = the first offset into dy (always 0 for the
 * shapes here), n taps, r[j] = the filter tap at offset u0 + j. */
static int phase_taps(int py, int pad, int R, int *r)
{
    int n = 0;
    for (int u = 0; u < R; u++)   /* u = (py + pad - r) / 2 for r of py's parity */
        for (int t = 0; t < R; t++)
            if ((py + pad - t) == 2 * u) r[n++] = t;
    return n;
}

/* One phase: dx's rows 2a + py, columns 2b + px, = corr(dy, sub-filter).
 * Returns its time (ms, -1 none); *packed set when it only ran into a
 * packed buffer (t) rather than dx's view. */
static float phase(Probe *p, const Shape *sh, int N, int py, int px, const float *hw, char *dx,
                   void *dy, void *t, int *packed)
{
    const int H = sh->H, P = H / 2, C = sh->C, K = sh->K, R = sh->R;
    const size_t es = dtype_size(p->dt);
    int rr[3], rc[3];
    const int nh = phase_taps(py, sh->pad, R, rr), nw = phase_taps(px, sh->pad, R, rc);
    if (nh == 0 || nw == 0) return 0.0f;   /* no tap reaches: zeros */
    /* the sub-filter, transposed: [C][nh][nw][K] from w [K][R][R][C] */
    float *hs = malloc((size_t)C * nh * nw * K * sizeof(float));
    for (int c = 0; c < C; c++)
        for (int u = 0; u < nh; u++)
            for (int v = 0; v < nw; v++)
                for (int k = 0; k < K; k++)
                    hs[(((size_t)c * nh + u) * nw + v) * K + k] =
                        hw[(((size_t)k * R + rr[u]) * R + rc[v]) * C + c];
    void *ws = upload(hs, (size_t)C * nh * nw * K, p->dt);
    free(hs);
    CUDA_CHECK(cudaDeviceSynchronize());
    const int64_t wd[4] = {C, K, nh, nw}, wst[4] = {(int64_t)nh * nw * K, 1, (int64_t)nw * K, K};
    const int64_t pre[2] = {0, 0}, post[2] = {nh - 1, nw - 1}, str[2] = {1, 1}, dil[2] = {1, 1};
    float ms = -1.0f;
    printf("  phase (%d,%d) %dx%d taps   ", py, px, nh, nw);
    for (int into_t = 0; into_t < 2 && ms < 0; into_t++) {
        CgDesc xd = nhwc_view(U_DY, p->ct, N, K, P, P, 1);
        CgDesc wt = cg_tensor_try(U_W, p->ct, 4, wd, wst, 16, 0);
        CgDesc yd = nhwc_view(into_t ? U_T : U_DX, p->ct, N, C, P, P, into_t ? 1 : 2);
        CgDesc cd = cg_conv_desc_pads(2, pre, post, str, dil);
        CgDesc op = cg_conv_op_try(CG_FPROP, cd, xd, wt, yd, 1.0f, 0.0f);
        const int64_t uids[3] = {into_t ? U_T : U_DX, U_W, U_DY};
        void *out = into_t ? t : (void *)(dx + ((size_t)py * H + px) * C * es);
        void *ptrs[3] = {out, ws, dy};
        int64_t engine = -1;
        const CgRule rule = rule_for(p->dt, 1);
        if (!op) printf("operation refused ");
        else ms = search_run(p, &op, 1, &rule, uids, ptrs, 3, &engine);
        if (ms >= 0) printf("%8.3f ms  engine %lld%s", (double)ms, (long long)engine,
                            into_t ? "  (into a packed buffer: no engine takes the strided view)"
                                   : "");
        *packed = into_t;
        CgDesc all[5] = {op, cd, yd, wt, xd};
        for (int i = 0; i < 5; i++) cg_destroy(all[i]);
    }
    printf("\n");
    CUDA_CHECK(cudaFree(ws));
    return ms;
}

static void run_shape(Probe *p, const Shape *sh, int N)
{
    const int H = sh->H, P = (H + 2 * sh->pad - sh->R) / sh->stride + 1, C = sh->C, K = sh->K;
    const int R = sh->R;
    const size_t nx = (size_t)N * H * H * C, ny = (size_t)N * P * P * K, nw = (size_t)K * R * R * C;
    const size_t es = dtype_size(p->dt);
    unsigned seed = 777u + (unsigned)H + (unsigned)K;
    float *hw = host_rand(nw, -0.1f, 0.1f, &seed), *hdy = host_rand(ny, -1, 1, &seed);
    void *w = upload(hw, nw, p->dt), *dy = upload(hdy, ny, p->dt), *dx, *t;
    free(hdy);
    CUDA_CHECK(cudaMalloc(&dx, nx * es));
    CUDA_CHECK(cudaMalloc(&t, (size_t)N * P * P * C * es));
    CUDA_CHECK(cudaDeviceSynchronize());
    printf("%s, %s, N %d (%.1f GFLOP):\n", sh->name, dtype_name(p->dt), N,
           2e-9 * (double)N * P * P * K * C * R * R);
    const float d_det = direct(p, sh, N, 1, 0.0f, dx, w, dy);
    float *ref = d_det >= 0 ? download(dx, nx, p->dt) : NULL;
    direct(p, sh, N, 1, 1.0f, dx, w, dy);
    direct(p, sh, N, 0, 0.0f, dx, w, dy);
    if (sh->stride != 2) {   /* no phases */
        free(ref);
        free(hw);
        void *bufs[] = {w, dy, dx, t};
        for (int i = 0; i < 4; i++) CUDA_CHECK(cudaFree(bufs[i]));
        return;
    }
    /* the phases: dx zeroed first (a 1 x 1 conv's odd rows and columns stay so) */
    CUDA_CHECK(cudaMemset(dx, 0, nx * es));
    float sum = 0.0f;
    int any_packed = 0, failed = 0;
    for (int py = 0; py < 2; py++)
        for (int px = 0; px < 2; px++) {
            int packed = 0;
            const float ms = phase(p, sh, N, py, px, hw, dx, dy, t, &packed);
            if (ms < 0) failed = 1;
            else sum += ms;
            any_packed |= packed;
        }
    printf("  phases in all %8.3f ms%s", (double)sum,
           failed ? " (one or more ran nowhere)" : any_packed ? " (some into packed buffers)" : "");
    if (ref && !failed && !any_packed) {
        float *got = download(dx, nx, p->dt);
        printf(", dx against the direct one %.1e", rel_norm(got, ref, nx));
        free(got);
    }
    if (d_det > 0 && !failed)
        printf(", %.2fx the deterministic direct time", (double)(d_det / sum));
    printf("\n");
    free(ref);
    free(hw);
    void *bufs[] = {w, dy, dx, t};
    for (int i = 0; i < 4; i++) CUDA_CHECK(cudaFree(bufs[i]));
}

int main(int argc, char **argv)
{
    int N = 256, dts = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *v = argv[++i];
            dts = !strcmp(v, "bf16") ? 1 : !strcmp(v, "f32") ? 2 : 3;
        } else if (argv[i][0] != '-') {
            N = atoi(argv[i]);
        } else {
            fprintf(stderr, "usage: cudnn_dgrad_probe [N] [--dtype bf16|f32|both]\n");
            return 2;
        }
    }
    if (N < 1) {
        fprintf(stderr, "cudnn_dgrad_probe: N must be positive\n");
        return 2;
    }
    Ctx c;
    struct cudaDeviceProp prop;
    probe_start(&c, &prop);
    printf("cudnn_dgrad_probe: %s (sm_%d%d), cuDNN %zu, batch %d\n", prop.name, prop.major,
           prop.minor, cudnnGetVersion(), N);
    Probe p = {&c, DT_BF16, CUDNN_DATA_BFLOAT16};
    for (int d = 0; d < 2; d++) {
        if (!(dts & (1 << d))) continue;
        p.dt = d == 0 ? DT_BF16 : DT_F32;   /* f32: TF32 engines allowed, as ctrain's tf32 */
        p.ct = d == 0 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
        for (int i = 0; i < NSHAPES; i++) run_shape(&p, &shapes[i], N);
    }
    ctx_free(&c);
    return 0;
}
