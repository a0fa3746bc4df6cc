/* gpu_matmul_search.c — the timed choice among cuBLASLt's algorithms
 * (CTRAIN_GEMM_SEARCH=1, ops/matmul_search.h), kept in the plan store.
 *
 * Five calls of the kinds a Linear layer makes (a plain product, the bias
 * epilogue, an accumulating data gradient over a preloaded C, the weight
 * gradient with its bias-gradient epilogue adding into an f32 C, each of
 * 2^34 FLOP, the search's floor; a small strict f32 product, below it: never
 * searched), each checked against matmul_cpu:
 *   - a first cache (a first run) with CTRAIN_PLAN_CACHE a fresh folder:
 *     plans searched, one gemm-*.txt file written, every result right; the
 *     accumulating calls right means the search's timing never added into
 *     the caller's C (it times on a scratch copy);
 *   - a second cache (a later run): every searched plan taken from the file,
 *     none timed, and every output bit-identical to the first run's;
 *   - a damaged file (one value's algorithm bytes changed, one line cut):
 *     those plans searched again, the rest taken, the results still right;
 *   - a shape first met inside CUDA graph capture: no search (the heuristic's
 *     first), the replayed graph's result right;
 *   - CTRAIN_GEMM_SEARCH=0: nothing searched, nothing taken from the file;
 *   - twins (the accumulating calls written instead, beta 0, as
 *     CTRAIN_GRAD_FRESH writes a gradient's first contribution): after the
 *     adding call (onto zeros) in the same cache, no search and the same
 *     bits; in a later cache whose store holds only the adding choices,
 *     taken from there, none timed, the same bits.
 * The search itself: gemm_search_pick's rule (the margin, failed
 * candidates) and the store value's text round trip.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/matmul.h"
#include "ops/matmul_search.h"
#include "check.h"
#include "file_util.h"
#include "gpu_util.h"

#define NCALLS 5

typedef struct {
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_bytes;
    cudaStream_t stream;
} Dev;

/* One call: C (M x N, type tc) = op(A) op(B) [+ bias] [+ beta C0], A and B of type tab. */
typedef struct {
    const char *name;
    int M, N, K, ta, tb;
    float beta;
    DType tab, tc;
    int kind;   /* 0 plain, 1 bias epilogue, 2 bias-gradient epilogue */
} Call;

/* The first four at GEMM_SEARCH_MIN_FLOP (2 M N K = 2^34), the last below it. */
static const Call calls[NCALLS] = {
    {"plain bf16", 4096, 2048, 1024, 0, 1, 0.0f, DT_BF16, DT_BF16, 0},
    {"bias bf16", 4096, 2048, 1024, 0, 1, 0.0f, DT_BF16, DT_BF16, 1},
    {"dgrad += bf16", 2048, 2048, 2048, 0, 0, 1.0f, DT_BF16, DT_BF16, 0},
    {"wgrad+bgrad += f32", 2048, 2048, 2048, 1, 0, 1.0f, DT_BF16, DT_F32, 2},
    {"strict f32 (small: never searched)", 512, 512, 512, 0, 1, 0.0f, DT_F32, DT_F32, 0},
};

/* The inputs of every call, made once so every run reads the same values. */
typedef struct {
    float *A, *B, *C0, *bias;
    void *dA, *dB, *dbias;
} Inputs;

static Inputs inputs[NCALLS];

/* What a run got: C (as floats) and, for kind 2, the bias gradient. */
typedef struct {
    float *C[NCALLS], *bg[NCALLS];
} Outputs;

static void make_inputs(void)
{
    for (int i = 0; i < NCALLS; i++) {
        const Call *c = &calls[i];
        size_t nA = (size_t)c->M * c->K, nB = (size_t)c->K * c->N, nC = (size_t)c->M * c->N;
        Inputs *in = &inputs[i];
        in->A = hrand(nA, -1.0f, 1.0f, c->tab);
        in->B = hrand(nB, -1.0f, 1.0f, c->tab);
        in->C0 = hrand(nC, -1.0f, 1.0f, c->tc);
        in->bias = hrand((size_t)c->N, -1.0f, 1.0f, c->tc);
        in->dA = gpu_upload(in->A, nA, c->tab);
        in->dB = gpu_upload(in->B, nB, c->tab);
        in->dbias = gpu_upload(in->bias, (size_t)c->N, c->tc);
    }
}

/* Call i through cache on dev's stream into a fresh C (preloaded with C0
 * when beta != 0, NaN otherwise); its results into o. */
static void run_call(const Dev *d, MatmulPlanCache *cache, int i, Outputs *o)
{
    const Call *c = &calls[i];
    const Inputs *in = &inputs[i];
    size_t nC = (size_t)c->M * c->N;
    void *dC = c->beta != 0.0f ? gpu_upload(in->C0, nC, c->tc) : gpu_alloc_poison(nC, c->tc);
    void *dbg = NULL;
    if (c->kind == 2) CUDA_CHECK(cudaMalloc(&dbg, (size_t)c->M * sizeof(float)));
    if (c->kind == 0)
        matmul_cuda(d->lt, cache, d->workspace, d->workspace_bytes, d->stream, dC, c->tc, in->dA,
                    in->dB, c->tab, c->M, c->N, c->K, c->ta, c->tb, 1.0f, c->beta, 1, 0, 0, 0, 0,
                    NULL);
    else if (c->kind == 1)
        check_true("search.bias_epilogue_taken",
                   matmul_cuda_bias(d->lt, cache, d->workspace, d->workspace_bytes, d->stream,
                                    dC, c->tc, in->dA, in->dB, c->tab, in->dbias, c->tc, c->M,
                                    c->N, c->K, c->ta, c->tb, 0),
                   "%s", c->name);
    else
        check_true("search.bgrad_epilogue_taken",
                   matmul_cuda_bgrad(d->lt, cache, d->workspace, d->workspace_bytes, d->stream,
                                     dC, c->tc, in->dA, in->dB, c->tab, dbg, c->M, c->N, c->K,
                                     c->ta, c->tb, c->beta, 0, NULL),
                   "%s", c->name);
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
    o->C[i] = hbuf(nC);
    gpu_download(o->C[i], dC, nC, c->tc);
    o->bg[i] = NULL;
    if (dbg) {
        o->bg[i] = hbuf((size_t)c->M);
        gpu_download(o->bg[i], dbg, (size_t)c->M, DT_F32);
        dfree(dbg);
    }
    dfree(dC);
}

/* o's results of call i against matmul_cpu (+ bias, + the bias gradient). */
static void expect_reference(const char *tag, const Outputs *o, int i)
{
    const Call *c = &calls[i];
    const Inputs *in = &inputs[i];
    size_t nC = (size_t)c->M * c->N;
    float *ref = hcopy(in->C0, nC);
    matmul_cpu(ref, in->A, in->B, c->M, c->N, c->K, c->ta, c->tb, 1.0f, c->beta, 1, 0, 0, 0);
    for (size_t j = 0; c->kind == 1 && j < nC; j++) ref[j] += in->bias[j % (size_t)c->N];
    double acc = 1e-5 * sqrt((double)c->K);   /* |a|, |b| <= 1 (gpu_matmul.c's bound) */
    char name[160];
    snprintf(name, sizeof name, "%s.%s", tag, c->name);
    check_close(name, o->C[i], ref, nC, acc + tol_atol(c->tc), tol_rtol(c->tc));
    if (c->kind == 2) {   /* bgrad[m] = sum_k op(A)[m][k], A stored K x M */
        float *bref = hbuf((size_t)c->M);
        for (int m = 0; m < c->M; m++) {
            double s = 0.0;
            for (int k = 0; k < c->K; k++) s += in->A[(size_t)k * c->M + m];
            bref[m] = (float)s;
        }
        snprintf(name, sizeof name, "%s.%s.bias_gradient", tag, c->name);
        check_close(name, o->bg[i], bref, (size_t)c->M, 1e-5 * c->K, 1e-4);
        free(bref);
    }
    free(ref);
}

static void run_all(const Dev *d, Outputs *o, int *searched, int *loaded)
{
    MatmulPlanCache *cache = matmul_plan_cache_new();
    for (int i = 0; i < NCALLS; i++) run_call(d, cache, i, o);
    matmul_plan_cache_counts(cache, searched, loaded);
    matmul_plan_cache_free(cache);
}

static void free_outputs(Outputs *o)
{
    for (int i = 0; i < NCALLS; i++) {
        free(o->C[i]);
        free(o->bg[i]);
    }
}

/* Outputs a and b equal bit for bit (as floats read back from the same type). */
static void expect_same(const char *tag, const Outputs *a, const Outputs *b)
{
    for (int i = 0; i < NCALLS; i++) {
        size_t nC = (size_t)calls[i].M * calls[i].N;
        int same = memcmp(a->C[i], b->C[i], nC * sizeof(float)) == 0 &&
                   (!a->bg[i] || memcmp(a->bg[i], b->bg[i], (size_t)calls[i].M * 4) == 0);
        char name[160];
        snprintf(name, sizeof name, "%s.%s", tag, calls[i].name);
        check_true(name, same, "outputs bit-identical");
    }
}


/* The store file with the first kept choice's algorithm bytes changed and
 * the second kept line cut in half: returns how many choices were damaged. */
static int damage_store(const char *path)
{
    size_t n = 0;
    char *text = file_read(path, &n);
    if (!text) return 0;
    int damaged = 0;
    char *line = text;
    while (line && *line && damaged < 2) {
        char *end = strchr(line, '\n');
        char *algo = strstr(line, "algo=");
        if (algo && (!end || algo < end)) {
            if (damaged == 0) {
                algo[5] = algo[5] == '0' ? '1' : '0';   /* another algorithm's bytes */
            } else {
                char *tab = strchr(line, '\t');
                size_t keep = (size_t)(tab - line) / 2;   /* the key cut: no tab, skipped */
                memmove(line + keep, end ? end : line + strlen(line),
                        strlen(end ? end : line + strlen(line)) + 1);
            }
            damaged++;
            line = strchr(line, '\n');
            if (line) line++;
            continue;
        }
        line = end ? end + 1 : NULL;
    }
    file_write(path, text, strlen(text));
    free(text);
    return damaged;
}

/* The first call's shape met first inside graph capture: no search, the
 * heuristic's first captured, the replay's result right. */
static void check_capture(const Dev *d)
{
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Dev dc = *d;
    dc.stream = s;
    const Call *c = &calls[0];
    const Inputs *in = &inputs[0];
    size_t nC = (size_t)c->M * c->N;
    void *dC = gpu_alloc_poison(nC, c->tc);
    MatmulPlanCache *cache = matmul_plan_cache_new();
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    matmul_cuda(dc.lt, cache, dc.workspace, dc.workspace_bytes, s, dC, c->tc, in->dA, in->dB,
                c->tab, c->M, c->N, c->K, c->ta, c->tb, 1.0f, 0.0f, 1, 0, 0, 0, 0, NULL);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    int searched = -1, loaded = -1;
    matmul_plan_cache_counts(cache, &searched, &loaded);
    check_true("search.none_inside_capture", searched == 0 && loaded == 0,
               "%d searched, %d loaded", searched, loaded);
    Outputs o = {0};
    o.C[0] = hbuf(nC);
    gpu_download(o.C[0], dC, nC, c->tc);
    expect_reference("search.captured", &o, 0);
    free(o.C[0]);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    matmul_plan_cache_free(cache);
    dfree(dC);
    CUDA_CHECK(cudaStreamDestroy(s));
}

static void check_rule_and_text(void)
{
    float a[4] = {1.0f, 0.98f, 0.99f, 1.2f};   /* 2% better: within the margin */
    check_true("search.pick_margin_keeps_first", gemm_search_pick(a, 4) == 0, "%d",
               gemm_search_pick(a, 4));
    float b[4] = {1.0f, 0.98f, 0.90f, 0.95f};
    check_true("search.pick_fastest", gemm_search_pick(b, 4) == 2, "%d", gemm_search_pick(b, 4));
    float f[3] = {INFINITY, 1.0f, 0.999f};   /* the first failed: the fastest that ran */
    check_true("search.pick_first_failed", gemm_search_pick(f, 3) == 2, "%d",
               gemm_search_pick(f, 3));
    float none[2] = {INFINITY, INFINITY};
    check_true("search.pick_none_ran", gemm_search_pick(none, 2) == -1, "%d",
               gemm_search_pick(none, 2));
    cublasLtMatmulAlgo_t x, y;
    for (int i = 0; i < 8; i++) x.data[i] = 0x0123456789abcdefull * (uint64_t)(i + 1);
    char text[300];
    int rank = -1;
    gemm_choice_text(5, &x, text, sizeof text);
    check_true("search.text_round_trip",
               gemm_choice_parse(text, &rank, &y) && rank == 5 && memcmp(&x, &y, sizeof x) == 0,
               "\"%s\"", text);
    const char *bad[] = {"rank=9 algo=00", "rank=1 algo=xyz", "rank=-1 algo=", "algo=1", ""};
    for (int i = 0; i < 5; i++)
        check_true("search.text_refused", !gemm_choice_parse(bad[i], &rank, &y), "\"%s\"", bad[i]);
}

/* Call i (an accumulating one) with beta 1 onto zeros, or written (beta
 * 0, C poisoned); C and the bias gradient (kind 2) into c_out, bg_out. */
static void twin_call(const Dev *d, MatmulPlanCache *cache, int i, int add, float *c_out,
                      float *bg_out)
{
    const Call *c = &calls[i];
    const Inputs *in = &inputs[i];
    size_t nC = (size_t)c->M * c->N;
    float *z = calloc(nC, sizeof(float));
    void *dC = add ? gpu_upload(z, nC, c->tc) : gpu_alloc_poison(nC, c->tc);
    void *dbg = NULL;
    const float beta = add ? 1.0f : 0.0f;
    if (c->kind == 2) CUDA_CHECK(cudaMalloc(&dbg, (size_t)c->M * sizeof(float)));
    if (c->kind == 0)
        matmul_cuda(d->lt, cache, d->workspace, d->workspace_bytes, d->stream, dC, c->tc, in->dA,
                    in->dB, c->tab, c->M, c->N, c->K, c->ta, c->tb, 1.0f, beta, 1, 0, 0, 0, 0,
                    NULL);
    else
        matmul_cuda_bgrad(d->lt, cache, d->workspace, d->workspace_bytes, d->stream, dC, c->tc,
                          in->dA, in->dB, c->tab, dbg, c->M, c->N, c->K, c->ta, c->tb, beta, 0,
                          NULL);
    CUDA_CHECK(cudaStreamSynchronize(d->stream));
    gpu_download(c_out, dC, nC, c->tc);
    if (dbg) {
        gpu_download(bg_out, dbg, (size_t)c->M, DT_F32);
        dfree(dbg);
    }
    dfree(dC);
    free(z);
}

/* Twins: the written products take the adding ones' choices, in the cache
 * and from the store (a fresh folder under dir). */
static void check_twins(const Dev *d, const char *dir)
{
    const int twins[2] = {2, 3};   /* the accumulating calls */
    char sub[1200];
    for (int pass = 0; pass < 2; pass++) {
        snprintf(sub, sizeof sub, "%s/twins%d", dir, pass);
        setenv("CTRAIN_PLAN_CACHE", sub, 1);
        int diff = 0, between = 0, l0 = 0, s = 0, l = 0;
        MatmulPlanCache *cache = matmul_plan_cache_new(), *later = cache;
        float *ca[2], *cw[2], bga[2][2048], bgw[2][2048];
        for (int t = 0; t < 2; t++) {
            const Call *c = &calls[twins[t]];
            ca[t] = hbuf((size_t)c->M * c->N);
            cw[t] = hbuf((size_t)c->M * c->N);
            twin_call(d, cache, twins[t], 1, ca[t], bga[t]);
        }
        matmul_plan_cache_counts(cache, &between, &l0);
        if (pass) later = matmul_plan_cache_new();   /* its store read now: the adding choices */
        for (int t = 0; t < 2; t++) twin_call(d, later, twins[t], 0, cw[t], bgw[t]);
        matmul_plan_cache_counts(later, &s, &l);
        for (int t = 0; t < 2; t++) {
            const Call *c = &calls[twins[t]];
            diff += memcmp(ca[t], cw[t], (size_t)c->M * c->N * sizeof(float)) != 0;
            if (c->kind == 2) diff += memcmp(bga[t], bgw[t], (size_t)c->M * sizeof(float)) != 0;
            free(ca[t]);
            free(cw[t]);
        }
        if (pass == 0)
            check_true("search.twins_in_cache_no_search", between > 0 && s == between && l == 0,
                       "%d searched by the adding calls, %d in all, %d loaded", between, s, l);
        else
            check_true("search.twins_from_store_no_search", between > 0 && s == 0 && l == 2,
                       "%d adding searched; then %d searched, %d loaded of 2", between, s, l);
        check_true(pass ? "search.twins_from_store_same_bits" : "search.twins_in_cache_same_bits",
                   diff == 0, "%d of 3 outputs differ", diff);
        if (later != cache) matmul_plan_cache_free(later);
        matmul_plan_cache_free(cache);
    }
}

int main(void)
{
    gpu_require();
    check_seed(20261206);
    check_rule_and_text();

    Dev d = {0};
    CUBLAS_CHECK(cublasLtCreate(&d.lt));
    d.workspace_bytes = (size_t)32 << 20;
    CUDA_CHECK(cudaMalloc(&d.workspace, d.workspace_bytes));
    make_inputs();

    char dir[] = "/tmp/ctrain_gpu_gemm_plans_XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    setenv("CTRAIN_PLAN_CACHE", dir, 1);
    setenv("CTRAIN_GEMM_SEARCH", "1", 1);

    Outputs first = {0}, second = {0}, third = {0}, off = {0};
    int s1 = 0, l1 = 0, s2 = 0, l2 = 0, s3 = 0, l3 = 0;
    run_all(&d, &first, &s1, &l1);
    check_true("search.first_run_searches", s1 > 0 && l1 == 0, "%d searched, %d loaded", s1, l1);
    for (int i = 0; i < NCALLS; i++) expect_reference("search.first", &first, i);
    {   /* below GEMM_SEARCH_MIN_FLOP: the heuristic's first, untimed */
        Outputs small = {0};
        int ss = -1, ls = -1;
        MatmulPlanCache *cache = matmul_plan_cache_new();
        run_call(&d, cache, NCALLS - 1, &small);
        matmul_plan_cache_counts(cache, &ss, &ls);
        matmul_plan_cache_free(cache);
        check_true("search.small_not_searched", ss == 0 && ls == 0, "%d searched, %d loaded",
                   ss, ls);
        free(small.C[NCALLS - 1]);
    }
    char path[1200];
    check_true("search.one_file", store_file(dir, "gemm-", path, sizeof path), "in %s", dir);

    run_all(&d, &second, &s2, &l2);
    check_true("search.second_run_loads_all", s2 == 0 && l2 == s1, "%d searched, %d loaded of %d",
               s2, l2, s1);
    expect_same("search.loaded_bit_identical", &first, &second);

    int damaged = damage_store(path);
    run_all(&d, &third, &s3, &l3);
    check_true("search.damaged_searched_again",
               s1 < 2 || (damaged == 2 && s3 == 2 && l3 == s1 - 2),
               "%d damaged: %d searched, %d loaded of %d", damaged, s3, l3, s1);
    for (int i = 0; i < NCALLS; i++) expect_reference("search.after_damage", &third, i);

    setenv("CTRAIN_PLAN_CACHE", "off", 1);
    check_capture(&d);

    setenv("CTRAIN_PLAN_CACHE", dir, 1);
    setenv("CTRAIN_GEMM_SEARCH", "0", 1);
    int s4 = -1, l4 = -1;
    run_all(&d, &off, &s4, &l4);
    check_true("search.off_does_nothing", s4 == 0 && l4 == 0, "%d searched, %d loaded", s4, l4);
    for (int i = 0; i < NCALLS; i++) expect_reference("search.off", &off, i);

    setenv("CTRAIN_GEMM_SEARCH", "1", 1);
    check_twins(&d, dir);

    free_outputs(&first); free_outputs(&second); free_outputs(&third); free_outputs(&off);
    for (int i = 0; i < NCALLS; i++) {
        free(inputs[i].A); free(inputs[i].B); free(inputs[i].C0); free(inputs[i].bias);
        dfree(inputs[i].dA); dfree(inputs[i].dB); dfree(inputs[i].dbias);
    }
    CUDA_CHECK(cudaFree(d.workspace));
    CUBLAS_CHECK(cublasLtDestroy(d.lt));
    return check_summary();
}
