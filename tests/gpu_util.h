/* gpu_util.h — shared helpers for the GPU test programs (tests/gpu_*.c):
 * upload/download with dtype conversion, poisoned outputs, per-dtype
 * tolerances. Include after check.h. Host data is always f32; on upload it is
 * converted to the storage dtype, and quantize() rounds host inputs the same
 * way so the CPU reference sees exactly the values the GPU sees.
 */
#ifndef CTRAIN_TESTS_GPU_UTIL_H
#define CTRAIN_TESTS_GPU_UTIL_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "engine/dtype.h"
#include "engine/error.h"

/* Exit with a clear message when no CUDA device is usable. */
static inline void gpu_require(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no CUDA device (%s): GPU tests need one; run them with make test-gpu on a GPU machine\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
        printf("0 passed, 1 failed\n");
        exit(1);
    }
}

/* The same checks under another setting: settings are read once per
 * process, so fn(arg, payload) runs in a child forked before this process
 * touches CUDA, with NAME=VALUE set (a child without a GPU runs nothing:
 * the parent's gpu_require says why). The child's check counts are added
 * to this process's, and its payload (payload_bytes, filled by fn; may be
 * 0) comes back through a pipe. Returns 1 when the child finished (exit 0,
 * counts and payload read). Call first thing in main. */
__attribute__((unused)) static int gpu_child_run(const char *name, const char *value,
                                                 void (*fn)(void *arg, void *payload),
                                                 void *arg, void *payload, size_t payload_bytes)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("gpu_child_run: pipe");
        return 0;
    }
    fflush(stdout);
    pid_t pid = fork();   /* before any CUDA call: the child starts its own */
    if (pid == 0) {
        close(fds[0]);
        setenv(name, value, 1);
        int n = 0;
        if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) fn(arg, payload);
        int counts[2] = {check_passed_, check_failed_};
        fflush(stdout);
        const int ok = write(fds[1], counts, sizeof counts) == (ssize_t)sizeof counts &&
                       (payload_bytes == 0 ||
                        write(fds[1], payload, payload_bytes) == (ssize_t)payload_bytes);
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    int counts[2] = {0, 0}, status = 0;
    int got = pid > 0 && read(fds[0], counts, sizeof counts) == (ssize_t)sizeof counts &&
              (payload_bytes == 0 ||
               read(fds[0], payload, payload_bytes) == (ssize_t)payload_bytes);
    close(fds[0]);
    if (pid > 0) waitpid(pid, &status, 0);
    check_passed_ += counts[0];   /* the child's own checks */
    check_failed_ += counts[1];
    return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Round host values through dt (in place): the CPU reference then computes on
 * the same inputs the GPU reads. */
static inline void quantize(float *h, size_t n, DType dt)
{
    if (dt == DT_F32) return;
    uint16_t *tmp = (uint16_t *)malloc(n * 2);
    dtype_convert(tmp, dt, h, DT_F32, n);
    dtype_convert(h, DT_F32, tmp, dt, n);
    free(tmp);
}

static inline void *gpu_upload(const float *h, size_t n, DType dt)
{
    size_t bytes = n * dtype_size(dt);
    void *tmp = malloc(bytes ? bytes : 1), *d = NULL;
    dtype_convert(tmp, dt, h, DT_F32, n);
    CUDA_CHECK(cudaMalloc(&d, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemcpy(d, tmp, bytes, cudaMemcpyHostToDevice));
    free(tmp);
    return d;
}

static inline void *gpu_upload_raw(const void *h, size_t bytes)
{
    void *d = NULL;
    CUDA_CHECK(cudaMalloc(&d, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* An output buffer filled with 0xFF bytes: NaN in f32, f16 and bf16, so an
 * element the kernel forgot to write fails the comparison. */
static inline void *gpu_alloc_poison(size_t n, DType dt)
{
    void *d = NULL;
    size_t bytes = n * dtype_size(dt);
    CUDA_CHECK(cudaMalloc(&d, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemset(d, 0xFF, bytes));
    return d;
}

static inline void gpu_download(float *h, const void *d, size_t n, DType dt)
{
    size_t bytes = n * dtype_size(dt);
    void *tmp = malloc(bytes ? bytes : 1);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(tmp, d, bytes, cudaMemcpyDeviceToHost));
    dtype_convert(h, DT_F32, tmp, dt, n);
    free(tmp);
}

/* Tolerances for a GPU result stored in dt against the f32 CPU reference on
 * the same (quantized) inputs: the output rounding of dt plus f32 reordering. */
static inline double tol_atol(DType dt) { return dt == DT_F32 ? 1e-5 : dt == DT_F16 ? 2e-3 : 1.6e-2; }
static inline double tol_rtol(DType dt) { return dt == DT_F32 ? 1e-4 : dt == DT_F16 ? 2e-3 : 1.6e-2; }
/* Relative-norm tolerance for long accumulations stored in dt. */
static inline double tol_norm(DType dt) { return dt == DT_F32 ? 1e-5 : dt == DT_F16 ? 3e-3 : 2e-2; }

/* An uninitialised host f32 buffer; exits when the host is out of memory. */
static inline float *falloc(size_t n)
{
    float *p = (float *)malloc((n ? n : 1) * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static inline double maxabs(const float *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* The dtype's absolute tolerance, scaled to the size of the reference. */
static inline double atol_for(DType dt, const float *ref, size_t n)
{
    return tol_atol(dt) * fmax(1e-3, fmin(1.0, maxabs(ref, n)));
}

/* Uploads and poison memsets run on the legacy stream, which a context's
 * stream does not wait for: synchronize before each launch. */
static inline void sync_all(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

/* qsort's comparison of two floats, ascending (the timed benches' medians) */
static inline int gpu_cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* 1 when bytes bytes at device pointers a and b are the same bits (after
 * everything queued has run) */
static inline int gpu_same_bytes(const void *a, const void *b, size_t bytes)
{
    void *ha = malloc(bytes ? bytes : 1), *hb = malloc(bytes ? bytes : 1);
    sync_all();
    CUDA_CHECK(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost));
    const int same = memcmp(ha, hb, bytes) == 0;
    free(ha);
    free(hb);
    return same;
}

/* Host buffers for the checks: random values in [lo, hi) rounded through
 * dt (what the GPU will read), zeroed, or a copy; and a device free. */
static inline float *hrand(size_t n, float lo, float hi, DType dt)
{
    float *p = (float *)calloc(n ? n : 1, sizeof(float));
    check_fill(p, n, lo, hi);
    quantize(p, n, dt);
    return p;
}
static inline float *hbuf(size_t n) { return (float *)calloc(n ? n : 1, sizeof(float)); }
static inline float *hcopy(const float *src, size_t n)
{
    float *p = hbuf(n);
    memcpy(p, src, n * sizeof(float));
    return p;
}
static inline void dfree(void *d) { CUDA_CHECK(cudaFree(d)); }

/* Per head (b, h) of [B, T, H, Dh] arrays, L = sum x1 y1 and R = sum x2 y2:
 * ||L - R|| / ||R|| over the B H heads (attention's identities: sum dv.v =
 * sum dO.out, sum dq.q = sum dk.k). */
static inline double head_dots_rel(size_t B, size_t H, size_t T, size_t Dh, const float *x1,
                                   const float *y1, const float *x2, const float *y2)
{
    const size_t bh = B * H, n = B * T * H * Dh;
    double *l = (double *)calloc(bh, sizeof(double)), *r = (double *)calloc(bh, sizeof(double));
    for (size_t i = 0; i < n; i++) {
        const size_t row = i / Dh, h = row % H, b = row / (H * T);
        l[b * H + h] += (double)x1[i] * y1[i];
        r[b * H + h] += (double)x2[i] * y2[i];
    }
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < bh; i++) {
        e += (l[i] - r[i]) * (l[i] - r[i]);
        m += r[i] * r[i];
    }
    free(l);
    free(r);
    return m > 0.0 ? sqrt(e / m) : sqrt(e);
}

__attribute__((unused)) static const DType gpu_float_types[3] = {DT_F32, DT_F16, DT_BF16};

/* The expected result of an accumulating call: ref + g0 in a new buffer
 * (accum) or ref itself; free it with ref_accum_free. */
__attribute__((unused)) static float *ref_accum(float *ref, const float *g0, size_t n, int accum)
{
    if (!accum) return ref;
    float *r = falloc(n);
    for (size_t j = 0; j < n; j++) r[j] = ref[j] + g0[j];
    return r;
}

__attribute__((unused)) static void ref_accum_free(float *r, const float *ref)
{
    if (r != ref) free(r);
}

/* The four ways an op runs in floating point: strict f32, f32 with TF32
 * tensor cores allowed, f16 and bf16. */
typedef struct {
    const char *name;
    DType dt;
    int tf32;
} GpuSetting;

__attribute__((unused)) static const GpuSetting gpu_settings[4] = {
    {"f32", DT_F32, 0}, {"f32+tf32", DT_F32, 1}, {"f16", DT_F16, 0}, {"bf16", DT_BF16, 0},
};

#endif
