/* matmul_search.c — the timed choice among cuBLASLt's candidates and its
 * text for the plan store (what and why: ops/matmul_search.h).
 *
 *   time(i) = median over GEMM_SEARCH_REPS runs of candidate i, alone
 *   pick    = argmin_i time(i)  if time(pick) < (1 - margin) time(0),  else 0
 *
 * A plain C file (cuBLASLt is a C API), built with -DCTRAIN_CUDA; in a
 * CPU-only build it is empty.
 */
#ifdef CTRAIN_CUDA
#include "matmul_search.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ctx.h"
#include "engine/error.h"
#include "engine/log.h"

static int cmp_float(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* One candidate's median time (ms), INFINITY when cuBLASLt refuses to run it. */
static float time_one(const GemmProblem *g, void *c, const cublasLtMatmulAlgo_t *algo,
                      cudaEvent_t ev[2 * GEMM_SEARCH_REPS])
{
    float t[GEMM_SEARCH_REPS];
    /* the warm-up run also tells whether the algorithm runs at all */
    if (cublasLtMatmul(g->lt, g->desc, &g->alpha, g->a, g->la, g->b, g->lb, &g->beta, c, g->lc,
                       c, g->lc, algo, g->workspace, g->workspace_bytes, g->stream) !=
        CUBLAS_STATUS_SUCCESS) {
        (void)cudaGetLastError();   /* a refused candidate's error is not the next kernel's */
        return INFINITY;
    }
    for (int r = 0; r < GEMM_SEARCH_REPS; r++) {
        CUDA_CHECK(cudaEventRecord(ev[2 * r], g->stream));
        CUBLAS_CHECK(cublasLtMatmul(g->lt, g->desc, &g->alpha, g->a, g->la, g->b, g->lb,
                                    &g->beta, c, g->lc, c, g->lc, algo, g->workspace,
                                    g->workspace_bytes, g->stream));
        CUDA_CHECK(cudaEventRecord(ev[2 * r + 1], g->stream));
    }
    CUDA_CHECK(cudaEventSynchronize(ev[2 * GEMM_SEARCH_REPS - 1]));
    for (int r = 0; r < GEMM_SEARCH_REPS; r++)
        CUDA_CHECK(cudaEventElapsedTime(&t[r], ev[2 * r], ev[2 * r + 1]));
    qsort(t, GEMM_SEARCH_REPS, sizeof t[0], cmp_float);
    return t[GEMM_SEARCH_REPS / 2];
}

int gemm_search_time(const GemmProblem *g, const cublasLtMatmulHeuristicResult_t *cand, int n,
                     float *ms)
{
    void *c = g->c, *scratch = NULL;
    if (g->beta != 0.0f) {   /* C is read: time on a copy's worth of scratch, never on C */
        if (cudaMalloc(&scratch, g->c_extent_bytes) != cudaSuccess) {
            (void)cudaGetLastError();   /* the failed allocation is not the caller's error */
            LOG_D("matmul_search: no %zu bytes for a scratch C; the heuristic's first stays",
                  g->c_extent_bytes);
            return -1;
        }
        CUDA_CHECK(cudaMemsetAsync(scratch, 0, g->c_extent_bytes, g->stream));
        c = scratch;
    }
    cudaEvent_t ev[2 * GEMM_SEARCH_REPS];
    for (int i = 0; i < 2 * GEMM_SEARCH_REPS; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < n; i++)
        ms[i] = cand[i].workspaceSize <= g->workspace_bytes ? time_one(g, c, &cand[i].algo, ev)
                                                            : INFINITY;
    for (int i = 0; i < 2 * GEMM_SEARCH_REPS; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
    if (scratch) {
        CUDA_CHECK(cudaStreamSynchronize(g->stream));
        CUDA_CHECK(cudaFree(scratch));
    }
    return gemm_search_pick(ms, n);
}

int gemm_search_pick(const float *ms, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (isfinite(ms[i]) && (best < 0 || ms[i] < ms[best])) best = i;
    if (best <= 0) return best;
    /* the first ran: the fastest must beat it by the margin; the first
     * failed (it is what the plan would run otherwise): the fastest */
    if (isfinite(ms[0]) && !(ms[best] < (1.0f - GEMM_SEARCH_MARGIN) * ms[0])) return 0;
    return best;
}

void gemm_choice_text(int rank, const cublasLtMatmulAlgo_t *algo, char *buf, size_t n)
{
    int w = snprintf(buf, n, "rank=%d algo=", rank);
    for (int i = 0; i < 8 && w > 0 && (size_t)w < n; i++)
        w += snprintf(buf + w, n - (size_t)w, "%016llx", (unsigned long long)algo->data[i]);
}

int gemm_choice_parse(const char *text, int *rank, cublasLtMatmulAlgo_t *algo)
{
    if (strncmp(text, "rank=", 5) != 0 || text[5] < '0' || text[5] > '9') return 0;
    char *end = NULL;
    long r = strtol(text + 5, &end, 10);
    if (r < 0 || r >= GEMM_SEARCH_CANDIDATES || strncmp(end, " algo=", 6) != 0) return 0;
    const char *h = end + 6;
    if (strlen(h) != 8 * 16) return 0;
    cublasLtMatmulAlgo_t a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 8; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 16; j++) {
            char ch = h[16 * i + j];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
            if (d < 0) return 0;
            v = v << 4 | (uint64_t)d;
        }
        a.data[i] = v;
    }
    *rank = (int)r;
    *algo = a;
    return 1;
}

void gemm_store_identity(char *buf, size_t n)
{
    char dev[300];
    ctx_device_identity(dev, sizeof dev);
    snprintf(buf, n, "%s, cuBLASLt %zu", dev, cublasLtGetVersion());
}
#else
typedef int ct_matmul_search_unused_; /* ISO C forbids an empty translation unit */
#endif
