/* gemm_algo_probe.c — how much a timed choice among cuBLASLt's algorithms
 * would gain over the heuristic's first, on BERT-large's GEMM shapes. A
 * measurement for docs/kernels.md, not a test.
 *
 *   make build/gemm_algo_probe   (CUDA builds; `make` builds it too)
 *   build/gemm_algo_probe [R] [--candidates K]
 *
 * ctrain (ops/matmul_cuda.c, ops/fp8_gemm.c) runs the algorithm the
 * heuristic ranks first (cublasLtMatmulAlgoGetHeuristic with one result).
 * Here each shape asks for K (default 16) and times every one that runs the
 * way ctrain's search does (ops/matmul_search.h, gemm_search_time: one
 * warm-up launch, then the median of GEMM_SEARCH_REPS, each between two
 * events, on the same buffers). One line a shape: the first's time and
 * TFLOP/s, the fastest's (and its rank), the gain. If the fastest beats the
 * first by more than a few percent on the shapes that carry the step, a
 * search at plan time (kept in the plan store, as the convolutions' are)
 * is worth building; if not, the heuristic stays.
 *
 * Shapes, R = batch x sequence rows (default 32,768: seq 128, batch 256),
 * in cuBLASLt's column-major terms (ops/matmul_cuda.c maps ctrain's
 * row-major calls onto them: m = the output's columns, n = R):
 *   fwd   y = x w^T        TN  m = out, n = R, k = in            beta 0
 *   dgrad dx (+)= dy w      NN  m = in, n = R, k = out           beta 1 / 0
 *   wgrad dw = dy^T x       NT  m = in, n = out, k = R, f32 out  beta 0
 * for the attention's 1,024 x 1,024 Linears and the FFN's 1,024 x 4,096
 * pair; bf16 with f32 accumulation, and FP8 (E4M3 x E4M3 forward, E4M3 x
 * E5M2 for gradients, all TN as FP8 requires: the transposed copies are
 * what ctrain's casts make) with a bf16 D (f32 for wgrad) and unit scales.
 * The descriptor and the heuristic's preference are ctrain's own
 * (matmul_lt_desc, matmul_lt_preference: f32 reductions for a 16-bit D,
 * 256-byte alignments); the workspace is ctrain's 32 MiB. No bias epilogue.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/matmul.h"
#include "ops/matmul_search.h"

#define CK(x)                                                                     \
    do {                                                                          \
        cudaError_t e_ = (x);                                                     \
        if (e_ != cudaSuccess) {                                                  \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)
#define LK(x)                                                                     \
    do {                                                                          \
        cublasStatus_t s_ = (x);                                                  \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                        \
            fprintf(stderr, "%s:%d cublasLt status %d\n", __FILE__, __LINE__, (int)s_); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

enum { MAXC = 32 };
static const size_t WS = 32u << 20;

typedef struct {
    const char *name;
    int ta, tb;                   /* cuBLASLt's transa, transb (1 = T) */
    int m, n, k;                  /* n == 0: R */
    cudaDataType_t a, b, d;
    float beta;
} Shape;

static cublasLtMatrixLayout_t layout(cudaDataType_t t, int trans, int rows_op, int cols_op)
{
    /* the stored matrix: op = T means stored cols_op x rows_op */
    cublasLtMatrixLayout_t l;
    int r = trans ? cols_op : rows_op, c = trans ? rows_op : cols_op;
    LK(cublasLtMatrixLayoutCreate(&l, t, (uint64_t)r, (uint64_t)c, (int64_t)r));
    return l;
}

static int is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

static void run_shape(cublasLtHandle_t lt, const Shape *sh, int R, int ncand, void *A, void *B,
                      void *C, void *ws, float *scales, cudaStream_t s, double *sum_first,
                      double *sum_best)
{
    const int m = sh->m ? sh->m : R, n = sh->n ? sh->n : R, k = sh->k ? sh->k : R;
    cublasLtMatmulDesc_t desc = matmul_lt_desc(
        CUBLAS_COMPUTE_32F, sh->ta ? CUBLAS_OP_T : CUBLAS_OP_N, sh->tb ? CUBLAS_OP_T : CUBLAS_OP_N);
    if (is_fp8(sh->a)) {
        const float *sa = scales, *sb = scales + 4;
        LK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa,
                                          sizeof sa));
        LK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb,
                                          sizeof sb));
    }
    cublasLtMatrixLayout_t la = layout(sh->a, sh->ta, m, k), lb = layout(sh->b, sh->tb, k, n);
    cublasLtMatrixLayout_t lc;
    LK(cublasLtMatrixLayoutCreate(&lc, sh->d, (uint64_t)m, (uint64_t)n, (int64_t)m));
    cublasLtMatmulPreference_t pref =
        matmul_lt_preference(WS, sh->d == CUDA_R_32F, 256, 256, 256);   /* cudaMalloc'd: 256 */
    cublasLtMatmulHeuristicResult_t res[MAXC];
    int found = 0;
    memset(res, 0, sizeof res);
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, ncand, res, &found);
    const double flop = 2.0 * m * n * (double)k;
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        printf("%-26s m %5d n %5d k %5d: no algorithm (status %d)\n", sh->name, m, n, k, (int)st);
    } else {
        int n_ok = 0;   /* the usable answers, in the heuristic's order */
        while (n_ok < found && res[n_ok].state == CUBLAS_STATUS_SUCCESS) n_ok++;
        const size_t d_bytes = sh->d == CUDA_R_32F ? 4 : 2;
        const GemmProblem g = {lt, desc, la, lb, lc, A, B, C, (size_t)m * n * d_bytes, 1.0f,
                               sh->beta, ws, WS, s};
        float ms[MAXC], first = -1.0f, best = -1.0f;
        int best_i = -1, ran = 0;
        gemm_search_time(&g, res, n_ok, ms);
        for (int i = 0; i < n_ok; i++) {
            if (!isfinite(ms[i])) continue;
            ran++;
            if (i == 0) first = ms[i];
            if (best < 0 || ms[i] < best) best = ms[i], best_i = i;
        }
        if (first < 0) first = best;
        printf("%-26s m %5d n %5d k %5d: first %8.1f us %6.0f TFLOP/s | best #%-2d of %2d %8.1f us "
               "%6.0f TFLOP/s | %+5.1f%%\n",
               sh->name, m, n, k, 1e3 * first, flop / (1e9 * first), best_i, ran, 1e3 * best,
               flop / (1e9 * best), 100.0 * (first / best - 1.0));
        *sum_first += first;
        *sum_best += best;
    }
    LK(cublasLtMatmulPreferenceDestroy(pref));
    LK(cublasLtMatrixLayoutDestroy(la));
    LK(cublasLtMatrixLayoutDestroy(lb));
    LK(cublasLtMatrixLayoutDestroy(lc));
    LK(cublasLtMatmulDescDestroy(desc));
}

int main(int argc, char **argv)
{
    int R = 32768, ncand = 16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--candidates") && i + 1 < argc) ncand = atoi(argv[++i]);
        else if (argv[i][0] != '-') R = atoi(argv[i]);
        else {
            fprintf(stderr, "usage: gemm_algo_probe [R] [--candidates K]\n");
            return 2;
        }
    }
    if (ncand < 1) ncand = 1;
    if (ncand > MAXC) ncand = MAXC;
    const cudaDataType_t BF = CUDA_R_16BF, F32 = CUDA_R_32F, E4 = CUDA_R_8F_E4M3,
                         E5 = CUDA_R_8F_E5M2;
    const Shape shapes[] = {
        {"bf16 fwd 1024x1024", 1, 0, 1024, 0, 1024, BF, BF, BF, 0},
        {"bf16 fwd ffn1 4096x1024", 1, 0, 4096, 0, 1024, BF, BF, BF, 0},
        {"bf16 fwd ffn2 1024x4096", 1, 0, 1024, 0, 4096, BF, BF, BF, 0},
        {"bf16 dgrad 1024 (+=)", 0, 0, 1024, 0, 1024, BF, BF, BF, 1},
        {"bf16 dgrad ffn1 (+=)", 0, 0, 1024, 0, 4096, BF, BF, BF, 1},
        {"bf16 dgrad ffn2", 0, 0, 4096, 0, 1024, BF, BF, BF, 0},
        {"bf16 wgrad 1024x1024", 0, 1, 1024, 1024, 0, BF, BF, F32, 0},
        {"bf16 wgrad 1024x4096", 0, 1, 1024, 4096, 0, BF, BF, F32, 0},
        {"bf16 wgrad 4096x1024", 0, 1, 4096, 1024, 0, BF, BF, F32, 0},
        {"fp8 fwd 1024x1024", 1, 0, 1024, 0, 1024, E4, E4, BF, 0},
        {"fp8 fwd ffn1 4096x1024", 1, 0, 4096, 0, 1024, E4, E4, BF, 0},
        {"fp8 fwd ffn2 1024x4096", 1, 0, 1024, 0, 4096, E4, E4, BF, 0},
        {"fp8 dgrad 1024 (+=)", 1, 0, 1024, 0, 1024, E4, E5, BF, 1},
        {"fp8 dgrad ffn1 (+=)", 1, 0, 1024, 0, 4096, E4, E5, BF, 1},
        {"fp8 dgrad ffn2", 1, 0, 4096, 0, 1024, E4, E5, BF, 0},
        {"fp8 wgrad 1024x1024", 1, 0, 1024, 1024, 0, E4, E5, F32, 0},
        {"fp8 wgrad 1024x4096", 1, 0, 1024, 4096, 0, E4, E5, F32, 0},
        {"fp8 wgrad 4096x1024", 1, 0, 4096, 1024, 0, E4, E5, F32, 0},
    };
    const size_t big = (size_t)R * 4096 * 2;   /* the largest operand: R x 4096 bf16 */
    void *A, *B, *C, *ws;
    float *scales;
    CK(cudaMalloc(&A, big));
    CK(cudaMalloc(&B, big));
    CK(cudaMalloc(&C, (size_t)R * 4096 * 4));
    CK(cudaMalloc(&ws, WS));
    CK(cudaMalloc((void **)&scales, 64));
    /* small values of every type: 0x3c bytes read as bf16 pairs, e4m3 and e5m2 are all finite */
    CK(cudaMemset(A, 0x3c, big));
    CK(cudaMemset(B, 0x3c, big));
    CK(cudaMemset(C, 0, (size_t)R * 4096 * 4));
    const float one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    CK(cudaMemcpy(scales, one, sizeof one, cudaMemcpyHostToDevice));
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("gemm_algo_probe: %s, cuBLASLt %zu, R = %d rows, up to %d candidates a shape\n",
           prop.name, cublasLtGetVersion(), R, ncand);
    double f16_first = 0, f16_best = 0, f8_first = 0, f8_best = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int f8 = is_fp8(shapes[i].a);
        run_shape(lt, &shapes[i], R, ncand, A, B, C, ws, scales, s, f8 ? &f8_first : &f16_first,
                  f8 ? &f8_best : &f16_best);
    }
    printf("sum over the shapes (one call each): bf16 first %.3f ms, best %.3f ms (%+.1f%%); "
           "fp8 first %.3f ms, best %.3f ms (%+.1f%%)\n",
           f16_first, f16_best, 100.0 * (f16_first / f16_best - 1.0), f8_first, f8_best,
           100.0 * (f8_first / f8_best - 1.0));
    LK(cublasLtDestroy(lt));
    CK(cudaStreamDestroy(s));
    return 0;
}
