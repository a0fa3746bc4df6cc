/* matmul_search.h — a timed choice among cuBLASLt's candidate algorithms for
 * one matmul plan (ops/matmul_cuda.c), and how a choice is written down for
 * the plan store (ops/plan_store.h, family "gemm").
 *
 * cuBLASLt's heuristic ranks the algorithms of a problem from a model of the
 * card; its first is not always the fastest. On BERT-large's GEMMs (R =
 * 32,768 rows, bf16, an H100) the fastest of its first eight beat the first
 * by 6% on the 1,024-wide forward, 10% on the FFN's first forward, 15% on
 * the accumulating 1,024-wide data gradient, 9% on the FFN's second data
 * gradient, and by 0-1% in FP8 (scripts/gemm_algo_probe.c, docs/kernels.md).
 *
 * The search, on the first call of a plan of at least GEMM_SEARCH_MIN_FLOP
 * (CTRAIN_GEMM_SEARCH=1, the default):
 *   - the heuristic's first GEMM_SEARCH_CANDIDATES answers, in its order;
 *   - each run once to warm up, then timed GEMM_SEARCH_REPS times alone
 *     (CUDA events on the caller's stream), its time the median;
 *   - the fastest taken only when it beats the heuristic's first by more
 *     than GEMM_SEARCH_MARGIN (3%, the convolution search's margin): a near
 *     tie keeps the first, so noise does not flip a choice run to run.
 * It runs on the caller's buffers: A, B and the bias only read, and an
 * output that the real call overwrites anyway (beta 0: C is not read; the
 * bias gradient is written, not added) timed in place; with beta != 0 on a
 * scratch C of the same extent (cudaMalloc'd for the search, zeroed; no
 * search when it cannot be had), so the caller's C is never touched before
 * its real call. Never inside CUDA graph capture (the caller's test).
 *
 * Bits: cuBLASLt gives the same bits run to run for one algorithm on one
 * card, library and workspace, but two algorithms may round differently.
 * A searched choice is therefore kept in the plan store, and a later run
 * (a resumed one included) takes it back instead of timing again, so its
 * bits match the first run's. What is kept: the rank among the heuristic's
 * answers and the algorithm's 64 bytes, as hex. Taken back only when the
 * heuristic, asked again, answers the same bytes at that rank (the store's
 * identity already names the card, driver and cuBLASLt version).
 */
#ifndef CTRAIN_OPS_MATMUL_SEARCH_H
#define CTRAIN_OPS_MATMUL_SEARCH_H

#ifdef CTRAIN_CUDA
#include <stddef.h>
#include <cuda_runtime.h>
#include <cublasLt.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GEMM_SEARCH_CANDIDATES 8
#define GEMM_SEARCH_REPS 5
#define GEMM_SEARCH_MARGIN 0.03f
/* Smaller problems (2 M N K batch FLOP) keep the heuristic's first: a few
 * microseconds a call, where timing noise exceeds what a choice could gain
 * (BERT-large's smallest GEMM at seq 512 bs 32 is 34 GFLOP). */
#define GEMM_SEARCH_MIN_FLOP 17179869184.0   /* 2^34 */
/* The version of the rules above: raise it when they change, so choices
 * made under the old rules are searched again (it is part of the key). */
#define GEMM_SEARCH_RULES 1

/* One problem as cuBLASLt runs it: descriptors (A, B, C layouts as
 * cuBLASLt names them: its A is the caller's B, see ops/matmul_cuda.c) and
 * the buffers. c_extent_bytes: C's bytes from its base to its last
 * element, for the scratch copy when beta != 0. */
typedef struct GemmProblem {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    const void *a, *b;     /* cuBLASLt's A and B */
    void *c;
    size_t c_extent_bytes;
    float alpha, beta;
    void *workspace;
    size_t workspace_bytes;
    cudaStream_t stream;
} GemmProblem;

/* Times the n candidates of g (ms[i] their median, INFINITY for one that
 * fails to run) and returns the index to take by the rule above; -1 when
 * no timing could be made (no scratch C, or nothing ran): keep the first,
 * and keep nothing. */
int gemm_search_time(const GemmProblem *g, const cublasLtMatmulHeuristicResult_t *cand, int n,
                     float *ms);

/* The rule alone: the fastest index when it beats ms[0] by the margin,
 * else 0; -1 when no time is finite. */
int gemm_search_pick(const float *ms, int n);

/* A choice as the store's value: "rank=R algo=HEX" (128 hex digits). */
void gemm_choice_text(int rank, const cublasLtMatmulAlgo_t *algo, char *buf, size_t n);
/* The value back: 1 with *rank and *algo set, 0 when it does not parse. */
int gemm_choice_parse(const char *text, int *rank, cublasLtMatmulAlgo_t *algo);

/* The store's identity: card, architecture, SM count, driver, CUDA runtime,
 * cuBLASLt. */
void gemm_store_identity(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* CTRAIN_CUDA */
#endif
