/* probe_util.h — what the cuDNN probes (scripts/cudnn_*_probe.c) share:
 * host <-> device buffers of any storage type through f32, a seeded
 * uniform fill, the relative norm of a difference, and the card's device
 * copy bandwidth. Header-only (static functions): each probe is one C file
 * linked against the library.
 */
#ifndef CTRAIN_SCRIPTS_PROBE_UTIL_H
#define CTRAIN_SCRIPTS_PROBE_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/error.h"

static void *upload(const float *h, size_t n, DType dt)
{
    size_t bytes = n * dtype_size(dt);
    void *tmp = malloc(bytes), *d = NULL;
    dtype_convert(tmp, dt, h, DT_F32, n);
    CUDA_CHECK(cudaMalloc(&d, bytes));
    CUDA_CHECK(cudaMemcpy(d, tmp, bytes, cudaMemcpyHostToDevice));
    free(tmp);
    return d;
}

static float *download(const void *d, size_t n, DType dt)
{
    size_t bytes = n * dtype_size(dt);
    void *tmp = malloc(bytes);
    float *h = malloc(n * sizeof(float));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(tmp, d, bytes, cudaMemcpyDeviceToHost));
    dtype_convert(h, DT_F32, tmp, dt, n);
    free(tmp);
    return h;
}

static float *host_rand(size_t n, float lo, float hi, unsigned *seed)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        h[i] = lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f;
    }
    return h;
}

/* |a - b| / |b| over n elements (norms) */
static double rel_norm(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* Device copy bandwidth: bytes read + written per second, GB/s. */
static double copy_gbps(void)
{
    const size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CUDA_CHECK(cudaMalloc(&a, bytes));
    CUDA_CHECK(cudaMalloc(&b, bytes));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(e0, 0));
    for (int i = 0; i < 5; i++)
        CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
    CUDA_CHECK(cudaEventRecord(e1, 0));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    return 5.0 * 2.0 * (double)bytes / (ms * 1e6);
}

/* A probe's start: stdout line-buffered (a timeout keeps every finished
 * line), a CUDA context on device 0, the card's properties. */
static void probe_start(Ctx *c, struct cudaDeviceProp *prop)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ctx_init(c, DEV_CUDA, 0, 1);
    CUDA_CHECK(cudaGetDeviceProperties(prop, 0));
}

#endif
