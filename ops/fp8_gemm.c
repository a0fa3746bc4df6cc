/* fp8_gemm.c — the FP8 GEMM of fp8_gemm.h through cuBLASLt, and its CPU
 * reference (always compiled):
 *
 *   D[M, N] = (*a_scale_inv) (*b_scale_inv) A[M, K] B[N, K]^T + beta D[M, N]
 *
 * Row-major onto cuBLASLt's column-major (the convention of matmul_cuda.c):
 * a row-major R x S buffer read column-major is the S x R matrix with
 * leading dimension S, its transpose. So our D (M x N) is cuBLASLt's N x M
 * matrix D^T = B A^T, and cuBLASLt computes (m, n, k) = (N, M, K) with
 *   - its A = our B buffer: read column-major it is K x N, ld K (= B^T);
 *     transa = T makes op(A) = B, N x K;
 *   - its B = our A buffer: K x M column-major, ld K (= A^T); transb = N;
 *   - its C = D = our D buffer: N x M column-major, ld N.
 * transa = T with transb = N is the "TN" layout, the only one cuBLASLt's
 * FP8 kernels take on Ada and Hopper: both operands with K contiguous. It
 * is matmul_cuda's transA = 0, transB = 1 (C = A B^T). Since cuBLASLt's A
 * is our B, its A scale is our b_scale_inv and its B scale our
 * a_scale_inv.
 *
 * The descriptor (cuBLASLt's names, cublasLt.h of CUDA 13.0):
 *   compute CUBLAS_COMPUTE_32F, scale type CUDA_R_32F: the only FP8 setting;
 *   TRANSA = T, TRANSB = N: TN, above;
 *   POINTER_MODE host: alpha = 1 and beta are host floats;
 *   A_SCALE_POINTER / B_SCALE_POINTER: device pointers to one f32 each (the
 *     scale factor "must have the same type as the compute type"); the
 *     kernel computes alpha * scale_A * scale_B * op(A) op(B) + beta C.
 *     Set on the cached descriptor at every call (a plan serves every layer
 *     of its shape) and before the heuristic query at plan creation;
 *   FAST_ACCUM = 0 (set to say so): partial sums promoted to f32
 *     periodically (fp8_gemm.h); 1 when the caller asks (a plan each: the
 *     FP8 Linear's forward GEMM by default, CTRAIN_FP8_FAST_ACCUM);
 *   no D scale, no amax of D: both apply to FP8 outputs only;
 *   with a bias (bf16 D only): EPILOGUE = CUBLASLT_EPILOGUE_BIAS,
 *     BIAS_DATA_TYPE = CUDA_R_16BF and BIAS_POINTER set on the cached
 *     descriptor at every call, as the scales (a plan serves every layer
 *     of its shape); the heuristic reads the pointer's value to learn its
 *     alignment (cublasLt.h), so it is set before the query and its
 *     alignment is in the key, as matmul_cuda.c does.
 * Layout types: CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 for the operands, and C
 * and D both bf16 (CUDA_R_16BF) or both f32, the C/D pairs cuBLASLt lists
 * for FP8 inputs. C and D are one buffer (in place: same layout).
 * Heuristic preferences, as matmul_cuda.c's: the workspace, the operands'
 * real alignment (so an algorithm assuming 256 bytes is not picked for a
 * sliced buffer), and with a bf16 D only split-K reductions kept in f32.
 *
 * A plan with no algorithm is kept too (the message is printed once, when
 * it is made), and every call of it returns 1. Without a bias that is an
 * error (stderr: the Linear cannot run); with one it is the caller's cue to
 * run the plain GEMM and add the bias apart (an info line in the log).
 */
#include "fp8_gemm.h"
#include "matmul.h"

#include <stdlib.h>
#include <string.h>

#include "engine/ctx.h"
#include "engine/error.h"
#include "engine/log.h"

void fp8_gemm_ref(float *D, const uint8_t *A, Fp8Format af, float a_scale_inv, const uint8_t *B,
                  Fp8Format bf, float b_scale_inv, int M, int N, int K, float beta)
{
    CT_ASSERT(M >= 0 && N >= 0 && K >= 0, "fp8_gemm_ref: negative size M=%d N=%d K=%d", M, N,
              K);
    double va[256], vb[256];   /* every code's value: products and sums exact in double */
    for (int c = 0; c < 256; c++) {
        va[c] = fp8_to_f32((uint8_t)c, af);
        vb[c] = fp8_to_f32((uint8_t)c, bf);
    }
    const double alpha = (double)a_scale_inv * (double)b_scale_inv;
#pragma omp parallel for schedule(static) if ((long long)M * N * K >= 65536)
    for (int m = 0; m < M; m++) {
        const uint8_t *a = A + (size_t)m * K;
        for (int n = 0; n < N; n++) {
            const uint8_t *b = B + (size_t)n * K;
            double acc = 0.0;
            for (int k = 0; k < K; k++) acc += va[a[k]] * vb[b[k]];
            float *d = D + (size_t)m * N + n;
            double out = alpha * acc;
            if (beta != 0.0f) out += (double)beta * (double)*d;
            *d = (float)out;
        }
    }
}

#ifdef CTRAIN_CUDA
/* Everything a plan depends on. Built with memset first so padding bytes
 * are zero and keys compare with memcmp. */
typedef struct {
    cublasLtHandle_t lt;
    int M, N, K, af, bf, dt, beta_nonzero, has_bias, fast_accum;
    size_t workspace_bytes;
    uint32_t align_a, align_b, align_d, align_bias;
} Fp8Key;

typedef struct {
    Fp8Key key;
    cublasLtMatmulDesc_t desc;
    /* cuBLASLt's operands: lt_a holds our B, lt_b our A, lt_d our D (= C). */
    cublasLtMatrixLayout_t lt_a, lt_b, lt_d;
    cublasLtMatmulAlgo_t algo;
    int has_algo;
} Fp8Plan;

/* A linear table, as matmul_cuda.c's: a model has a few dozen shapes. */
static struct {
    Fp8Plan *plans;
    int n, cap;
} plan_cache;

void fp8_gemm_cache_clear(void)
{
    for (int i = 0; i < plan_cache.n; i++) {
        Fp8Plan *p = &plan_cache.plans[i];
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lt_a));
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lt_b));
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lt_d));
        CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->desc));
    }
    free(plan_cache.plans);
    memset(&plan_cache, 0, sizeof plan_cache);
}

static void cache_release(Ctx *c, void *obj)
{
    (void)c;
    (void)obj;
    fp8_gemm_cache_clear();
}

static const CtxCacheKind fp8_cache_kind = {"cuBLASLt FP8 GEMM plans", cache_release};

void fp8_gemm_cache_attach(struct Ctx *c)
{
    if (!ctx_cache_get(c, &fp8_cache_kind)) ctx_cache_set(c, &fp8_cache_kind, &plan_cache);
}

static cudaDataType_t fp8_cuda_type(Fp8Format f)
{
    return f == FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

/* The largest power of two dividing the address, capped at the 256 bytes
 * cuBLASLt assumes by default. */
static uint32_t alignment(const void *p)
{
    uint64_t bits = (uint64_t)(uintptr_t)p | 256u;
    return (uint32_t)(bits & (~bits + 1));   /* lowest set bit */
}

static cublasLtMatrixLayout_t layout(cudaDataType_t t, int rows, int cols)
{
    cublasLtMatrixLayout_t l;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, (uint64_t)rows, (uint64_t)cols, (int64_t)rows));
    return l;
}

/* The operands' scales on the descriptor; cuBLASLt's A is our B. */
static void desc_set_scales(cublasLtMatmulDesc_t desc, const float *a_scale_inv,
                            const float *b_scale_inv)
{
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                &b_scale_inv, sizeof b_scale_inv));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                &a_scale_inv, sizeof a_scale_inv));
}

/* The bias vector's pointer on the descriptor (a plan with the epilogue). */
static void desc_set_bias(cublasLtMatmulDesc_t desc, const void *bias)
{
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof bias));
}

/* The heuristic's best algorithm for p's descriptors, or has_algo 0 with
 * the reason said (fp8_gemm.c's top: an error without a bias, an info line
 * with one). */
static void plan_pick_algo(Fp8Plan *p)
{
    const Fp8Key *k = &p->key;
    cublasLtMatmulPreference_t pref = matmul_lt_preference(k->workspace_bytes, k->dt == DT_F32,
                                                           k->align_a, k->align_b, k->align_d);

    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    memset(&result, 0, sizeof result);
    /* "No algorithm" is CUBLAS_STATUS_NOT_SUPPORTED; any other failure is fatal. */
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(k->lt, p->desc, p->lt_a, p->lt_b,
                                                           p->lt_d, p->lt_d, pref, 1, &result,
                                                           &found);
    /* without a bias any other status is a bug; with one, any refusal of the
     * epilogue is the caller's fallback (matmul_cuda.c found the heuristic
     * answering CUBLAS_STATUS_INVALID_VALUE for some bias plans) */
    if (status != CUBLAS_STATUS_NOT_SUPPORTED && !k->has_bias) CUBLAS_CHECK(status);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    p->has_algo = status == CUBLAS_STATUS_SUCCESS && found > 0 &&
                  result.state == CUBLAS_STATUS_SUCCESS;
    if (p->has_algo) {
        p->algo = result.algo;
        return;
    }
    if (k->has_bias) {
        LOG_I("FP8 GEMM M=%d N=%d K=%d %s x %s: cuBLASLt has no algorithm with the bias "
              "epilogue (bias alignment %u bytes; %s): the bias is added by a separate pass",
              k->M, k->N, k->K, fp8_name((Fp8Format)k->af), fp8_name((Fp8Format)k->bf),
              k->align_bias, ct_cublas_status_string(status));
        return;
    }
    ct_error_hint("FP8 GEMMs need an sm_89 or newer GPU; a larger workspace or operands aligned "
                  "to 256 bytes widen cuBLASLt's choice",
                  "fp8_gemm_cuda: cuBLASLt found no algorithm for M=%d N=%d K=%d A %s x B %s, "
                  "D %s, beta%s, alignment (A %u, B %u, D %u bytes), workspace %zu bytes (%s)",
                  k->M, k->N, k->K, fp8_name((Fp8Format)k->af), fp8_name((Fp8Format)k->bf),
                  dtype_name((DType)k->dt), k->beta_nonzero ? " != 0" : " = 0", k->align_a,
                  k->align_b, k->align_d, k->workspace_bytes, ct_cublas_status_string(status));
}

/* The descriptors of a new plan and its algorithm; the first caller's
 * scale and bias pointers are on the descriptor when the heuristic looks. */
static void plan_create(Fp8Plan *p, const Fp8Key *k, const float *a_scale_inv,
                        const float *b_scale_inv, const void *bias)
{
    memcpy(&p->key, k, sizeof *k);   /* padding too: keys compare with memcmp */
    p->desc = matmul_lt_desc(CUBLAS_COMPUTE_32F, CUBLAS_OP_T, CUBLAS_OP_N);   /* TN */
    const int8_t fast_accum = k->fast_accum ? 1 : 0;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                                &fast_accum, sizeof fast_accum));
    desc_set_scales(p->desc, a_scale_inv, b_scale_inv);
    if (k->has_bias) {
        const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        const int32_t type = CUDA_R_16BF;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                    sizeof epi));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                    &type, sizeof type));
        desc_set_bias(p->desc, bias);
    }

    /* Layouts describe the buffers as stored (top of the file). */
    p->lt_a = layout(fp8_cuda_type((Fp8Format)k->bf), k->K, k->N);
    p->lt_b = layout(fp8_cuda_type((Fp8Format)k->af), k->K, k->M);
    p->lt_d = layout(k->dt == DT_F32 ? CUDA_R_32F : CUDA_R_16BF, k->N, k->M);
    plan_pick_algo(p);
}

static const Fp8Plan *plan_get(const Fp8Key *k, const float *a_scale_inv,
                               const float *b_scale_inv, const void *bias)
{
    for (int i = 0; i < plan_cache.n; i++)
        if (memcmp(&plan_cache.plans[i].key, k, sizeof *k) == 0) return &plan_cache.plans[i];
    if (plan_cache.n == plan_cache.cap) {
        int cap = plan_cache.cap ? 2 * plan_cache.cap : 16;
        Fp8Plan *grown = realloc(plan_cache.plans, sizeof(Fp8Plan) * cap);
        CT_ASSERT(grown != NULL, "fp8_gemm_cuda: out of host memory for %d plans", cap);
        plan_cache.plans = grown;
        plan_cache.cap = cap;
    }
    plan_create(&plan_cache.plans[plan_cache.n], k, a_scale_inv, b_scale_inv, bias);
    return &plan_cache.plans[plan_cache.n++];
}

/* The checks of fp8_gemm.h, the format pair first: they come before any
 * CUDA call, so a refused call touches no device. */
static void fp8_gemm_check(cublasLtHandle_t lt, const void *D, DType dt, const uint8_t *A,
                           Fp8Format af, const float *a_scale_inv, const uint8_t *B,
                           Fp8Format bf, const float *b_scale_inv, const void *bias, int M,
                           int N, int K)
{
    CT_ASSERT((af == FP8_E4M3 || af == FP8_E5M2) && (bf == FP8_E4M3 || bf == FP8_E5M2),
              "fp8_gemm_cuda: unknown FP8 format (A %d, B %d)", (int)af, (int)bf);
    if (af == FP8_E5M2 && bf == FP8_E5M2)
        ct_fatal_hint("cast one operand to e4m3 (the forward tensors are e4m3, gradients e5m2)",
                      "fp8_gemm_cuda: A e5m2 x B e5m2 (M=%d N=%d K=%d): cuBLASLt has no "
                      "e5m2 x e5m2 FP8 GEMM", M, N, K);
    CT_ASSERT(dt == DT_BF16 || dt == DT_F32, "fp8_gemm_cuda: D dtype %s; expected bf16 or f32",
              dtype_name(dt));
    if (M <= 0 || N <= 0 || K <= 0 || M % 16 || N % 16 || K % 16)
        ct_fatal_hint("pad the operands' rows and the reduced length to multiples of 16",
                      "fp8_gemm_cuda: M=%d N=%d K=%d (A %s x B %s): FP8 GEMMs need positive "
                      "multiples of 16", M, N, K, fp8_name(af), fp8_name(bf));
    CT_ASSERT(lt != NULL && A != NULL && B != NULL && D != NULL && a_scale_inv != NULL &&
                  b_scale_inv != NULL,
              "fp8_gemm_cuda: NULL handle, operand, output or scale (M=%d N=%d K=%d)", M, N, K);
    CT_ASSERT(alignment(A) >= 16 && alignment(B) >= 16 && alignment(D) >= 16,
              "fp8_gemm_cuda: A %p, B %p, D %p: FP8 GEMMs need 16-byte aligned operands "
              "(M=%d N=%d K=%d)", (const void *)A, (const void *)B, D, M, N, K);
    /* cuBLASLt 13.1 on an H200 refuses, at the launch only, scale pointers
     * that are not 16-byte aligned (the recipe spaces them so, fp8_recipe.h) */
    CT_ASSERT(alignment(a_scale_inv) >= 16 && alignment(b_scale_inv) >= 16,
              "fp8_gemm_cuda: scale pointers %p and %p: FP8 GEMMs need them 16-byte aligned "
              "(M=%d N=%d K=%d)", (const void *)a_scale_inv, (const void *)b_scale_inv, M, N, K);
    CT_ASSERT(!bias || (dt == DT_BF16 && alignment(bias) >= 2),
              "fp8_gemm_cuda: a bias %p with a %s D: the bias epilogue takes a bf16 D and a "
              "2-byte aligned bf16 vector (M=%d N=%d K=%d)", bias, dtype_name(dt), M, N, K);
}

int fp8_gemm_cuda(cublasLtHandle_t lt, void *workspace, size_t workspace_bytes,
                  cudaStream_t stream, void *D, DType dt, const uint8_t *A, Fp8Format af,
                  const float *a_scale_inv, const uint8_t *B, Fp8Format bf,
                  const float *b_scale_inv, const void *bias, int fast_accum, int M, int N,
                  int K, float beta)
{
    fp8_gemm_check(lt, D, dt, A, af, a_scale_inv, B, bf, b_scale_inv, bias, M, N, K);
    Fp8Key k;
    memset(&k, 0, sizeof k);
    k.lt = lt;
    k.M = M; k.N = N; k.K = K;
    k.af = af; k.bf = bf; k.dt = dt;
    k.beta_nonzero = beta != 0.0f;
    k.workspace_bytes = workspace ? workspace_bytes : 0;
    k.align_a = alignment(A);
    k.align_b = alignment(B);
    k.align_d = alignment(D);
    k.has_bias = bias != NULL;
    k.fast_accum = fast_accum != 0;
    k.align_bias = bias ? alignment(bias) : 0;
    const Fp8Plan *p = plan_get(&k, a_scale_inv, b_scale_inv, bias);
    if (!p->has_algo) return 1;
    desc_set_scales(p->desc, a_scale_inv, b_scale_inv);
    if (bias) desc_set_bias(p->desc, bias);
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt, p->desc, &alpha, B, p->lt_a, A, p->lt_b, &beta, D, p->lt_d,
                                D, p->lt_d, &p->algo, workspace, p->key.workspace_bytes,
                                stream));
    return 0;
}
#endif
