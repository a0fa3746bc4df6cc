/* gpu_fp8.c — the CUDA FP8 kernels (ops/fp8.cu) against the CPU reference
 * (ops/fp8.c), bit for bit:
 *   - the scaled cast of f32, f16 and bf16 tensors to E4M3 and E5M2: values
 *     log-uniform over 2^-24 .. 2^24 of both signs, the midpoints between
 *     neighbouring codes, and NaN, +-inf, +-0 (f32 only), a length that is
 *     not a multiple of the block; codes equal fp8_from_f32 of the same f32
 *     product (the f16/bf16 input widened exactly first); the amax equals
 *     max |x| (NaN skipped), accumulated over two casts into one amax and
 *     zeroed by fp8_amax_zero_cuda;
 *   - the kernels' conversion (cvt.rn.satfinite on sm_89 and later) on
 *     every one of the 2^32 f32 bit patterns, both formats;
 *   - the delayed-scaling update for 3 tensors over 12 steps (history
 *     length 5, margin 1), the step counter on the device, one step with an
 *     infinite amax: history, scale, scale_inv and the overflow flags equal
 *     the CPU's after every step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/fp8.h"
#include "check.h"
#include "gpu_util.h"

static void test_cast(DType xt, Fp8Format f)
{
    enum { N = 70001 };
    float *x = malloc(N * sizeof(float));
    check_seed(31 + (uint64_t)xt * 7 + (uint64_t)f);
    for (int i = 0; i < N; i++)
        x[i] = copysignf(exp2f(check_uniform(-24.0f, 24.0f)), check_uniform(-1.0f, 1.0f));
    for (int c = 0; c < 120; c++) {  /* midpoints between codes (before scaling by 1) */
        const float lo = fp8_to_f32((uint8_t)c, f), hi = fp8_to_f32((uint8_t)(c + 1), f);
        x[100 + c] = (float)(((double)lo + (double)hi) / 2);
    }
    if (xt == DT_F32) {
        x[1] = NAN; x[2] = INFINITY; x[3] = -INFINITY; x[4] = 0.0f; x[5] = -0.0f;
    }
    quantize(x, N, xt);  /* the values the device reads, exactly */
    const float scale = 0.75f;
    uint8_t *qref = malloc(N), *q = malloc(N);
    float amax_ref = 0.0f;
    fp8_cast_cpu(qref, &amax_ref, x, N, scale, f);

    void *dx = gpu_upload(x, N, xt);
    uint8_t *dq;
    float *dscale, *damax;
    CUDA_CHECK(cudaMalloc((void **)&dq, N));
    CUDA_CHECK(cudaMalloc((void **)&dscale, sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&damax, sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dscale, &scale, sizeof(float), cudaMemcpyHostToDevice));
    const float junk = 123.0f;
    CUDA_CHECK(cudaMemcpy(damax, &junk, sizeof(float), cudaMemcpyHostToDevice));
    sync_all();
    fp8_amax_zero_cuda(damax, 1, 0);
    fp8_cast_cuda(dq, damax, dx, xt, N, dscale, f, 0);
    /* a second cast of the first half adds to the same amax */
    fp8_cast_cuda(dq, damax, dx, xt, N / 2, dscale, f, 0);
    sync_all();
    float amax = -1.0f;
    CUDA_CHECK(cudaMemcpy(q, dq, N, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&amax, damax, sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0, first = -1;
    for (int i = 0; i < N; i++)
        if (q[i] != qref[i]) { bad++; if (first < 0) first = i; }
    char name[96];
    snprintf(name, sizeof name, "fp8.cast.%s.%s.bit_identical", dtype_name(xt), fp8_name(f));
    check_true(name, bad == 0, "%d of %d codes differ; first at %d: x %.9g -> 0x%02X, CPU 0x%02X",
               bad, N, first, first >= 0 ? (double)x[first] : 0.0, first >= 0 ? q[first] : 0,
               first >= 0 ? qref[first] : 0);
    snprintf(name, sizeof name, "fp8.cast.%s.%s.amax", dtype_name(xt), fp8_name(f));
    check_true(name, memcmp(&amax, &amax_ref, 4) == 0, "device %.9g, CPU %.9g", (double)amax,
               (double)amax_ref);
    dfree(dx); dfree(dq); dfree(dscale); dfree(damax);
    free(x); free(q); free(qref);
}

/* The kernels' conversion (the hardware's instruction where the card has
 * it) on all 2^32 f32 bit patterns: NaNs, infinities, f32 subnormals,
 * every rounding tie and every saturating value included. */
static void test_cvt_all(Fp8Format f)
{
    uint32_t first = 0;
    const long long bad = fp8_cvt_check_cuda(f, &first);
    char name[64];
    snprintf(name, sizeof name, "fp8.cvt.%s.all_f32_patterns", fp8_name(f));
    float x;
    memcpy(&x, &first, 4);
    check_true(name, bad == 0, "%lld of 2^32 codes differ; first 0x%08X (%.9g), whose CPU code is 0x%02X",
               bad, first, (double)x, bad ? fp8_from_f32(x, f) : 0);
}

static void test_scale_update(void)
{
    enum { T = 3, L = 5, STEPS = 12 };
    float hist[T * L] = {0}, scale[T] = {1.0f, 2.0f, 0.5f}, inv[T];
    int ovf[T] = {0};
    float *dh, *da, *ds, *di;
    int *dov;
    long long *dstep;
    CUDA_CHECK(cudaMalloc((void **)&dh, sizeof hist));
    CUDA_CHECK(cudaMalloc((void **)&da, T * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&ds, T * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&di, T * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&dov, T * sizeof(int)));
    CUDA_CHECK(cudaMalloc((void **)&dstep, sizeof(long long)));
    CUDA_CHECK(cudaMemcpy(dh, hist, sizeof hist, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(ds, scale, sizeof scale, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dov, 0, sizeof ovf));
    check_seed(77);
    int bad = -1;
    for (long t = 0; t < STEPS; t++) {
        float amax[T];
        for (int k = 0; k < T; k++) amax[k] = exp2f(check_uniform(-10.0f, 10.0f));
        if (t == 6) amax[1] = INFINITY;
        if (t == 3) amax[2] = 0.0f;
        for (int k = 0; k < T; k++)
            ovf[k] |= fp8_scale_update_cpu(hist + k * L, L, t, amax[k], FP8_E5M2, 1, &scale[k],
                                           &inv[k]);
        const long long step = t;
        CUDA_CHECK(cudaMemcpy(dstep, &step, sizeof step, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(da, amax, sizeof amax, cudaMemcpyHostToDevice));
        fp8_scale_update_cuda(dh, L, dstep, da, T, FP8_E5M2, 1, ds, di, 1, dov, 0);
        float gh[T * L], gs[T], gi[T];
        int go[T];
        CUDA_CHECK(cudaMemcpy(gh, dh, sizeof gh, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(gs, ds, sizeof gs, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(gi, di, sizeof gi, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(go, dov, sizeof go, cudaMemcpyDeviceToHost));
        if (bad < 0 && (memcmp(gh, hist, sizeof gh) || memcmp(gs, scale, sizeof gs) ||
                        memcmp(gi, inv, sizeof gi) || memcmp(go, ovf, sizeof go)))
            bad = (int)t;
    }
    check_true("fp8.scale_update.bit_identical", bad < 0, "first difference after step %d",
               bad);
    check_true("fp8.scale_update.overflow_flag", ovf[1] == 1 && ovf[0] == 0 && ovf[2] == 0,
               "flags %d %d %d", ovf[0], ovf[1], ovf[2]);
    dfree(dh); dfree(da); dfree(ds); dfree(di); dfree(dov); dfree(dstep);
}

int main(void)
{
    gpu_require();
    const DType types[3] = {DT_F32, DT_F16, DT_BF16};
    for (int t = 0; t < 3; t++) {
        test_cast(types[t], FP8_E4M3);
        test_cast(types[t], FP8_E5M2);
    }
    test_cvt_all(FP8_E4M3);
    test_cvt_all(FP8_E5M2);
    test_scale_update();
    return check_summary();
}
