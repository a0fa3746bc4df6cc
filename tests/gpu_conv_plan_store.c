/* gpu_conv_plan_store.c — the convolution plans a search chose, kept on disk
 * (ops/plan_store.h via ops/conv2d_cudnn.c), taken back by a later context.
 *
 * With CTRAIN_PLAN_CACHE set to a fresh folder, a first context runs three
 * shapes (a 3x3, a 1x1 stride 2, the C = 3 stem that cuDNN may run on
 * padded channels) in every direction, in strict f32 and bf16, with and
 * without accumulation: every plan is searched and one file appears. A
 * second context (a later run) runs the same calls: every plan is taken
 * from the file, none searched, and each output is bit-identical to the
 * first context's (same algorithm or engine, same knobs). Then:
 *   - the graph engines alone (CTRAIN_CONV_ENGINES=graph's mode): plans
 *     with engine and knobs kept, taken back bit-identically too;
 *   - a damaged file (one value's algorithm made 99, one line cut in half):
 *     those plans are searched again, the rest taken, outputs still right
 *     against the CPU reference;
 *   - CTRAIN_PLAN_CACHE=off: everything searched, the kept file untouched,
 *     nothing written where the default folder would be.
 * The 1 x 1 shape as cuBLASLt GEMMs (CONV2D_GEMM_ALWAYS): kept, taken back,
 * bit-identical. Twins (a backward plan that writes, beta 0, takes the choice of the one
 * that adds, beta 1: CTRAIN_GRAD_FRESH's written gradients): in a fresh
 * folder, a context whose adding calls come first (onto zeros) runs the
 * writing ones with no search and nothing loaded, to the same bits; a
 * later context that runs only writing calls takes every one from the
 * adding twins kept on disk (none searched), to the same bits again.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv2d.h"
#include "check.h"
#include "file_util.h"
#include "gpu_util.h"

typedef struct {
    const char *name;
    int N, H, W, C, K, R, S, st, pad;
} Shape;

static const Shape shapes[] = {
    {"3x3", 4, 28, 28, 64, 64, 3, 3, 1, 1},
    {"1x1.s2", 4, 28, 28, 128, 256, 1, 1, 2, 0},
    {"stem", 2, 64, 64, 3, 64, 7, 7, 2, 3},
};
#define NSHAPES 3
#define NDT 2
static const DType dts[NDT] = {DT_F32, DT_BF16};
/* per shape and type: y, dx (fresh), dx (accumulated), dw (f32, fresh), dw (accumulated) */
#define NOUT 5

typedef struct {
    float *out[NSHAPES][NDT][NOUT];
    size_t n[NSHAPES][NDT][NOUT];
} Outputs;

static float *rnd(size_t n, DType dt, unsigned seed)
{
    float *p = malloc(n * sizeof(float));
    srand(seed);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    quantize(p, n, dt);
    return p;
}

/* Shape i and the element counts of its x, w and y. */
static Conv2dShape shape_of(int i, size_t *nx, size_t *nw, size_t *ny)
{
    const Shape *h = &shapes[i];
    Conv2dShape s = conv2d_shape(h->N, h->H, h->W, h->C, h->K, h->R, h->S, h->st, h->st, h->pad,
                                 h->pad, 1, 1);
    *nx = (size_t)s.N * s.H * s.W * s.C;
    *nw = (size_t)s.K * s.R * s.S * s.C;
    *ny = (size_t)s.N * s.P * s.Q * s.K;
    return s;
}

/* Every call of every shape and type in a fresh context; the outputs in o. */
/* The GEMM mode run_all sets (ops/conv_gemm.h), and the GEMM plans its
 * last run made. */
static Conv2dGemm run_gemm = CONV2D_GEMM_OFF;
static int run_gemm_plans;

static void run_all(Conv2dEngines engines, Outputs *o, int *searched, int *loaded)
{
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    conv2d_cuda_set_engines(&c, engines);
    conv2d_cuda_set_gemm(&c, run_gemm);
    for (int i = 0; i < NSHAPES; i++) {
        size_t nx, nw, ny;
        Conv2dShape s = shape_of(i, &nx, &nw, &ny);
        for (int d = 0; d < NDT; d++) {
            DType dt = dts[d];
            c.allow_tf32 = 0;
            float *x = rnd(nx, dt, 1 + i), *w = rnd(nw, dt, 11 + i), *g = rnd(ny, dt, 21 + i);
            float *pre = rnd(nx, dt, 31 + i), *prew = rnd(nw, DT_F32, 41 + i);
            void *dx_ = gpu_upload(x, nx, dt), *dw_ = gpu_upload(w, nw, dt);
            void *dg = gpu_upload(g, ny, dt);
            void *y = gpu_alloc_poison(ny, dt), *dx0 = gpu_alloc_poison(nx, dt);
            void *dx1 = gpu_upload(pre, nx, dt), *dw0 = gpu_alloc_poison(nw, DT_F32);
            void *dw1 = gpu_upload(prew, nw, DT_F32);
            conv2d_forward_cuda(&c, y, dx_, dw_, dt, &s);
            conv2d_backward_data_cuda(&c, dx0, dg, dw_, dt, &s, 0);
            conv2d_backward_data_cuda(&c, dx1, dg, dw_, dt, &s, 1);
            conv2d_backward_filter_cuda(&c, dw0, DT_F32, dg, dx_, dt, &s, 0);
            conv2d_backward_filter_cuda(&c, dw1, DT_F32, dg, dx_, dt, &s, 1);
            void *outs[NOUT] = {y, dx0, dx1, dw0, dw1};
            const size_t ns[NOUT] = {ny, nx, nx, nw, nw};
            const DType ts[NOUT] = {dt, dt, dt, DT_F32, DT_F32};
            for (int k = 0; k < NOUT; k++) {
                o->n[i][d][k] = ns[k];
                o->out[i][d][k] = malloc(ns[k] * sizeof(float));
                gpu_download(o->out[i][d][k], outs[k], ns[k], ts[k]);
                dfree(outs[k]);
            }
            dfree(dx_); dfree(dw_); dfree(dg);
            free(x); free(w); free(g); free(pre); free(prew);
        }
    }
    conv2d_cuda_plan_origins(&c, searched, loaded);
    run_gemm_plans = conv2d_cuda_gemm_plan_count(&c);
    conv2d_cuda_release(&c);
    ctx_free(&c);
}

static void free_outputs(Outputs *o)
{
    for (int i = 0; i < NSHAPES; i++)
        for (int d = 0; d < NDT; d++)
            for (int k = 0; k < NOUT; k++) free(o->out[i][d][k]);
}

/* Outputs a and b bit for bit. */
static void expect_same(const char *tag, const Outputs *a, const Outputs *b)
{
    int diff = 0;
    for (int i = 0; i < NSHAPES; i++)
        for (int d = 0; d < NDT; d++)
            for (int k = 0; k < NOUT; k++)
                diff += memcmp(a->out[i][d][k], b->out[i][d][k],
                               a->n[i][d][k] * sizeof(float)) != 0;
    check_true(tag, diff == 0, "%d of %d outputs differ", diff, NSHAPES * NDT * NOUT);
}

/* The forward outputs against the CPU reference (the search's choice must
 * not matter for correctness). */
static void expect_reference(const char *tag, const Outputs *o)
{
    for (int i = 0; i < NSHAPES; i++) {
        const Shape *h = &shapes[i];
        size_t nx, nw, ny;
        Conv2dShape s = shape_of(i, &nx, &nw, &ny);
        for (int d = 0; d < NDT; d++) {
            float *x = rnd(nx, dts[d], 1 + i), *w = rnd(nw, dts[d], 11 + i);
            float *ref = malloc(ny * sizeof(float));
            conv2d_forward_cpu(ref, x, w, &s);
            char name[128];
            snprintf(name, sizeof name, "%s.%s.%s.forward", tag, h->name, dtype_name(dts[d]));
            if (dts[d] == DT_F32)
                check_close(name, o->out[i][d][0], ref, ny, 3e-5 * sqrt((double)h->R * h->S * h->C),
                            1e-4);
            else check_rel_norm(name, o->out[i][d][0], ref, ny, 1e-2);
            free(x); free(w); free(ref);
        }
    }
}

/* The backward calls of every shape and type in a context with the store
 * of CTRAIN_PLAN_CACHE: pass 0 adds (beta 1, onto zeros) into add[], pass
 * 1 writes (beta 0) into wrote[]; passes [from, to). Outputs:
 * [shape][type] dx, dw. *between: plans searched after pass 0. */
#define NTW 2
typedef struct {
    float *out[NSHAPES][NDT][NTW];
} TwinOut;

static void run_twins(int from, int to, TwinOut *add, TwinOut *wrote, int *searched,
                      int *loaded, int *between)
{
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    c.allow_tf32 = 1;   /* f32 on TF32's plans, as ResNet tf32 runs them */
    for (int pass = from; pass < to; pass++) {
        TwinOut *o = pass ? wrote : add;
        for (int i = 0; i < NSHAPES; i++) {
            size_t nx, nw, ny;
            Conv2dShape s = shape_of(i, &nx, &nw, &ny);
            for (int d = 0; d < NDT; d++) {
                DType dt = dts[d];
                float *x = rnd(nx, dt, 1 + i), *w = rnd(nw, dt, 11 + i), *g = rnd(ny, dt, 21 + i);
                float *zx = calloc(nx, sizeof(float)), *zw = calloc(nw, sizeof(float));
                void *dx_ = gpu_upload(x, nx, dt), *dw_ = gpu_upload(w, nw, dt);
                void *dg = gpu_upload(g, ny, dt);
                void *gx = pass ? gpu_alloc_poison(nx, dt) : gpu_upload(zx, nx, dt);
                void *gw = pass ? gpu_alloc_poison(nw, DT_F32) : gpu_upload(zw, nw, DT_F32);
                conv2d_backward_data_cuda(&c, gx, dg, dw_, dt, &s, !pass);
                conv2d_backward_filter_cuda(&c, gw, DT_F32, dg, dx_, dt, &s, !pass);
                o->out[i][d][0] = malloc(nx * sizeof(float));
                o->out[i][d][1] = malloc(nw * sizeof(float));
                gpu_download(o->out[i][d][0], gx, nx, dt);
                gpu_download(o->out[i][d][1], gw, nw, DT_F32);
                dfree(dx_); dfree(dw_); dfree(dg); dfree(gx); dfree(gw);
                free(x); free(w); free(g); free(zx); free(zw);
            }
        }
        int l = 0;
        if (pass == 0) conv2d_cuda_plan_origins(&c, between, &l);
    }
    conv2d_cuda_plan_origins(&c, searched, loaded);
    conv2d_cuda_release(&c);
    ctx_free(&c);
}

static void twin_same(const char *tag, const TwinOut *a, const TwinOut *b)
{
    int diff = 0;
    for (int i = 0; i < NSHAPES; i++) {
        size_t nx, nw, ny;
        shape_of(i, &nx, &nw, &ny);
        for (int d = 0; d < NDT; d++)
            for (int k = 0; k < NTW; k++)
                diff += memcmp(a->out[i][d][k], b->out[i][d][k],
                               (k ? nw : nx) * sizeof(float)) != 0;
    }
    check_true(tag, diff == 0, "%d of %d outputs differ", diff, NSHAPES * NDT * NTW);
}

static void twin_free(TwinOut *o)
{
    for (int i = 0; i < NSHAPES; i++)
        for (int d = 0; d < NDT; d++)
            for (int k = 0; k < NTW; k++) free(o->out[i][d][k]);
}

/* Twins: the writing plans follow the adding ones, in the context and from
 * the store (a fresh folder: dir). */
static void test_twins(const char *dir)
{
    setenv("CTRAIN_PLAN_CACHE", dir, 1);
    TwinOut add, wrote, later;
    int s = 0, l = 0, between = 0;
    run_twins(0, 2, &add, &wrote, &s, &l, &between);
    check_true("twins.in_context_no_search", between > 0 && s == between && l == 0,
               "%d searched by the adding calls, %d in all, %d loaded", between, s, l);
    twin_same("twins.in_context_same_bits", &add, &wrote);
    /* a later run that only writes: every plan from its twin on disk (the
     * first context kept the writing plans too: a fresh folder holding the
     * adding ones alone) */
    char dir2[1100];
    snprintf(dir2, sizeof dir2, "%s/adding", dir);
    setenv("CTRAIN_PLAN_CACHE", dir2, 1);
    TwinOut add2, unused;
    int s2 = 0, l2 = 0, b2 = 0;
    run_twins(0, 1, &add2, &unused, &s2, &l2, &b2);
    int s3 = 0, l3 = 0, b3 = 0;
    run_twins(1, 2, &unused, &later, &s3, &l3, &b3);
    check_true("twins.from_store_no_search", s2 > 0 && s3 == 0 && l3 == s2,
               "%d adding plans searched; then %d searched, %d loaded", s2, s3, l3);
    twin_same("twins.from_store_same_bits", &add2, &later);
    twin_free(&add); twin_free(&wrote); twin_free(&add2); twin_free(&later);
}

int main(void)
{
    gpu_require();
    char dir[] = "/tmp/ctrain_gpu_plans_XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    setenv("CTRAIN_PLAN_CACHE", dir, 1);

    Outputs first, second;
    int s1 = 0, l1 = 0, s2 = 0, l2 = 0;
    run_all(CONV2D_ENGINES_FASTEST, &first, &s1, &l1);
    check_true("store.first_run_searches", s1 > 0 && l1 == 0, "%d searched, %d loaded", s1, l1);
    char path[1200];
    check_true("store.one_file", store_file(dir, "conv-", path, sizeof path), "in %s", dir);
    run_all(CONV2D_ENGINES_FASTEST, &second, &s2, &l2);
    check_true("store.second_run_loads_all", s2 == 0 && l2 == s1, "%d searched, %d loaded of %d",
               s2, l2, s1);
    expect_same("store.loaded_bit_identical", &first, &second);
    expect_reference("store.first", &first);
    free_outputs(&second);

    /* graph engines alone: engine and knobs kept and taken back */
    Outputs g1, g2;
    int sg = 0, lg = 0;
    run_all(CONV2D_ENGINES_GRAPH, &g1, &sg, &lg);
    run_all(CONV2D_ENGINES_GRAPH, &g2, &s2, &l2);
    check_true("store.graph_loads_all", sg > 0 && lg == 0 && s2 == 0 && l2 == sg,
               "%d then %d searched, %d loaded", sg, s2, l2);
    expect_same("store.graph_bit_identical", &g1, &g2);
    free_outputs(&g1);
    free_outputs(&g2);


    /* damage: the first pair's algorithm made 99 (cuDNN has no such
     * algorithm; the first pairs are the first run's), the last pair cut in
     * half (the last pairs are the graph run's) */
    size_t n = 0;
    char *b = file_read(path, &n);
    char *a = b ? strstr(b, " algo=") : NULL;
    int damaged = 0;
    if (a && a[6] != '-') {
        char *e = a + 6;
        while (*e >= '0' && *e <= '9') e++;
        size_t head = (size_t)(a + 6 - b);
        char *nb = malloc(n + 4);
        memcpy(nb, b, head);
        memcpy(nb + head, "99", 2);
        memcpy(nb + head + 2, e, n - (size_t)(e - b));
        n = head + 2 + (n - (size_t)(e - b));
        free(b);
        b = nb;
        damaged++;
    }
    if (b && n > 10) {
        char *last = b + n - 2;
        while (last > b && *last != '\n') last--;
        size_t keep = (size_t)(last - b) + 1 + (n - (size_t)(last - b) - 1) / 2;
        n = keep;
        damaged++;
    }
    if (b) file_write(path, b, n);
    free(b);
    check_true("store.damaged_written", damaged == 2, "%d of 2 damages made", damaged);
    Outputs third;
    int s3 = 0, l3 = 0;
    run_all(CONV2D_ENGINES_FASTEST, &third, &s3, &l3);
    check_true("store.refused_value_searched_again", s3 == 1 && l3 == s1 - 1,
               "%d searched, %d loaded of %d", s3, l3, s1);
    expect_reference("store.after_damage", &third);
    free_outputs(&third);
    run_all(CONV2D_ENGINES_GRAPH, &third, &s3, &l3);
    check_true("store.cut_line_searched_again", s3 == 1 && l3 == sg - 1,
               "%d searched, %d loaded of %d", s3, l3, sg);
    free_outputs(&third);

    /* the 1 x 1 stride-2 shape as GEMMs (CONV2D_GEMM_ALWAYS): its plans
     * searched (the mode is in their key), the others' taken from the file;
     * kept with gemm=1 and taken back, bit-identically (cuBLASLt's own
     * choice is kept in its store beside) */
    Outputs m1, m2;
    int sm = 0, lm = 0;
    run_gemm = CONV2D_GEMM_ALWAYS;
    run_all(CONV2D_ENGINES_FASTEST, &m1, &sm, &lm);
    const int gemm_plans = run_gemm_plans;
    run_all(CONV2D_ENGINES_FASTEST, &m2, &s2, &l2);
    run_gemm = CONV2D_GEMM_OFF;
    check_true("store.gemm_loads_all", sm > 0 && s2 == 0 && l2 == sm + lm &&
               gemm_plans == sm && run_gemm_plans == gemm_plans,
               "%d searched (%d loaded), then %d searched, %d loaded; %d and %d GEMM plans",
               sm, lm, s2, l2, gemm_plans, run_gemm_plans);
    expect_same("store.gemm_bit_identical", &m1, &m2);
    expect_reference("store.gemm", &m1);
    free_outputs(&m1);
    free_outputs(&m2);

    /* off: nothing read, nothing written (the kept file stays as it is, and
     * nothing appears where the default folder would be) */
    char dir2[] = "/tmp/ctrain_gpu_plans_off_XXXXXX";
    if (!mkdtemp(dir2)) { perror("mkdtemp"); return 1; }
    size_t before_n = 0, after_n = 0;
    char *before = file_read(path, &before_n);
    setenv("CTRAIN_PLAN_CACHE", "off", 1);
    setenv("XDG_CACHE_HOME", dir2, 1);
    setenv("HOME", dir2, 1);
    Outputs off;
    int s4 = 0, l4 = 0;
    run_all(CONV2D_ENGINES_FASTEST, &off, &s4, &l4);
    check_true("store.off_searches_all", s4 > 0 && l4 == 0, "%d searched, %d loaded", s4, l4);
    char *after = file_read(path, &after_n);
    check_true("store.off_leaves_the_file", before && after && before_n == after_n &&
               memcmp(before, after, before_n) == 0, "the kept file changed");
    char sub[1100], p2[1200];
    snprintf(sub, sizeof sub, "%s/ctrain", dir2);
    check_true("store.off_writes_nothing", !store_file(sub, "conv-", p2, sizeof p2) &&
               !store_file(dir2, "conv-", p2, sizeof p2), "%s", p2);
    free(before);
    free(after);
    free_outputs(&off);
    free_outputs(&first);

    char dir3[] = "/tmp/ctrain_gpu_twins_XXXXXX";
    if (!mkdtemp(dir3)) { perror("mkdtemp"); return 1; }
    test_twins(dir3);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", dir, dir2, dir3);
    if (system(cmd) != 0) fprintf(stderr, "gpu_conv_plan_store: could not remove %s\n", dir);
    return check_summary();
}
