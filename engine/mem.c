/* mem.c — allocation with accounting: CUDA stream-ordered pool or aligned
 * host memory; OOM is reported with the numbers needed to fix it. */
#include "mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "kernels.h"

const char *mem_fmt(char *buf, size_t len, size_t bytes)
{
    double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, len, "%.1f KiB", b / 1024.0);
    return buf;
}

static void mem_oom(Ctx *c, size_t bytes, const char *why)
{
    char a[32], u[32], p[32], extra[128] = "";
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
            char f1[32], t1[32];
            snprintf(extra, sizeof extra, "; device free %s of %s", mem_fmt(f1, 32, fr),
                     mem_fmt(t1, 32, tot));
        }
    }
#endif
    ct_fatal_hint("use a smaller --batch, or --recompute all to trade compute for memory",
                  "out of memory on %s:%d allocating %s (%s): ctrain holds %s, peak %s%s",
                  ctx_device_name(c), c->device_id, mem_fmt(a, 32, bytes), why,
                  mem_fmt(u, 32, c->mem.current), mem_fmt(p, 32, c->mem.peak), extra);
}

static void mem_count(Ctx *c, size_t bytes)
{
    c->mem.current += bytes;
    c->mem.n_allocs++;
    if (c->mem.current > c->mem.peak) {
        c->mem.peak = c->mem.current;
        c->mem.peak_at = c->mem.where;
        c->mem.peak_after = c->mem.where ? NULL : c->mem.last_op;
    }
}

void *mem_alloc(Ctx *c, size_t bytes)
{
    void *p = NULL;
    size_t b = bytes ? bytes : 1;
    if (c->mem_limit && c->mem.current + b > c->mem_limit) {
        char lim[32];
        char why[64];
        snprintf(why, sizeof why, "over CTRAIN_MEM_LIMIT=%s", mem_fmt(lim, sizeof lim, c->mem_limit));
        mem_oom(c, bytes, why);
    }
    if (c->device == DEV_CPU) {
        size_t rounded = (b + 63) & ~(size_t)63;
        p = aligned_alloc(64, rounded);
        if (!p) mem_oom(c, bytes, "host malloc failed");
    } else {
#ifdef CTRAIN_CUDA
        cudaError_t e = cudaMallocAsync(&p, b, c->stream);
        if (e == cudaErrorMemoryAllocation) mem_oom(c, bytes, cudaGetErrorString(e));
        CUDA_CHECK(e);
#endif
    }
    mem_count(c, bytes);
    return p;
}

void mem_note_external(Ctx *c, size_t bytes, int freed)
{
    if (freed) c->mem.current -= bytes;
    else mem_count(c, bytes);
}

void mem_free(Ctx *c, void *p, size_t bytes)
{
    if (!p) return;
    if (c->device == DEV_CPU) free(p);
#ifdef CTRAIN_CUDA
    else CUDA_CHECK(cudaFreeAsync(p, c->stream));
#endif
    c->mem.current -= bytes;
}

void mem_zero(Ctx *c, void *p, size_t bytes)
{
    if (!bytes) return;
    if (c->device == DEV_CPU) memset(p, 0, bytes);
#ifdef CTRAIN_CUDA
    else CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, c->stream));
#endif
}

void mem_to_device(Ctx *c, void *dst, const void *src_host, size_t bytes)
{
    if (!bytes) return;
    if (c->device == DEV_CPU) memcpy(dst, src_host, bytes);
#ifdef CTRAIN_CUDA
    else {
        CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream));
        /* pageable source: the copy may still read it after return, so wait */
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
    }
#endif
}

void mem_to_device_async(Ctx *c, void *dst, const void *src_pinned, size_t bytes)
{
    if (!bytes) return;
    if (c->device == DEV_CPU) memcpy(dst, src_pinned, bytes);
#ifdef CTRAIN_CUDA
    else CUDA_CHECK(cudaMemcpyAsync(dst, src_pinned, bytes, cudaMemcpyHostToDevice, c->stream));
#endif
}

void mem_to_host(Ctx *c, void *dst_host, const void *src, size_t bytes)
{
    if (!bytes) return;
    if (c->device == DEV_CPU) memcpy(dst_host, src, bytes);
#ifdef CTRAIN_CUDA
    else {
        CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, c->stream));
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
    }
#endif
}

void mem_copy(Ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    if (c->device == DEV_CPU) memmove(dst, src, bytes);
#ifdef CTRAIN_CUDA
    else CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
#endif
}

const char *mem_peak_place(const Ctx *c, char *buf, size_t len)
{
    if (c->mem.peak_at) snprintf(buf, len, "backward of %s", c->mem.peak_at);
    else if (c->mem.peak_after) snprintf(buf, len, "forward, after %s", c->mem.peak_after);
    else snprintf(buf, len, "outside the forward and backward");
    return buf;
}

void mem_reset_peak(Ctx *c)
{
    c->mem.peak = c->mem.current;
    c->mem.peak_at = c->mem.where;
    c->mem.peak_after = c->mem.where ? NULL : c->mem.last_op;
}

void mem_set_f32(Ctx *c, float *p, float v)
{
    if (c->device == DEV_CPU) { *p = v; return; }
#ifdef CTRAIN_CUDA
    fill_cuda(p, DT_F32, v, 1, c->stream);
#endif
}

void *mem_host_pinned(Ctx *c, size_t bytes)
{
    void *p = NULL;
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) {
        CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
        return p;
    }
#endif
    (void)c;
    p = malloc(bytes ? bytes : 1);
    if (!p) ct_fatal("out of host memory allocating %zu bytes for a pinned buffer", bytes);
    return p;
}

void mem_host_pinned_free(Ctx *c, void *p)
{
    if (!p) return;
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) { CUDA_CHECK(cudaFreeHost(p)); return; }
#endif
    (void)c;
    free(p);
}
