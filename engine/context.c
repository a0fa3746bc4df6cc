/* context.c — the life of the device context (engine/ctx.h): creating and
 * tearing it down (stream, handles, workspace, memory pool, the autograd
 * tape), its registry of op caches and its device error counters.
 *
 * Why not ctx.c: ctx.h is the bottom of the engine (the struct every file
 * receives, memory and autograd included), while the context's life uses
 * memory (mem.c: the workspace, the counters) and autograd (the tape). Its
 * own file keeps the arrows one way: ctx.h <- mem.c, autograd.c <- context.c. */
#include "ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "error.h"
#include "log.h"
#include "mem.h"
#include "settings.h"

/* 32 MiB serves cuBLASLt on Hopper (NVIDIA recommends 32 MiB there) and the
 * cuDNN algorithms we allow; grown on demand by the ops that need more. */
#define CTX_WORKSPACE_BYTES (32u << 20)

int ctx_parse_device(const char *s, Device *dev, int *id)
{
    *id = 0;
    if (strcmp(s, "cpu") == 0) { *dev = DEV_CPU; return 0; }
    if (strncmp(s, "cuda", 4) == 0) {
        *dev = DEV_CUDA;
        if (s[4] == 0) return 0;
        if (s[4] == ':' && s[5]) {
            char *end;
            long v = strtol(s + 5, &end, 10);
            if (*end == 0 && v >= 0) { *id = (int)v; return 0; }
        }
    }
    return -1;
}

#ifdef CTRAIN_CUDA
/* Before CUDA is first touched (it reads this when it starts): 32 hardware
 * work queues, not 8, so that libraries' own streams (nvJPEG's ~14 a
 * decoder) seldom share one with the compute stream and wait behind its
 * graph (engine/settings.c). A value the user gave is checked and kept. */
static void cuda_env_defaults(void)
{
    setting_default_env(SET_CUDA_DEVICE_MAX_CONNECTIONS, "32");
}
#endif

int ctx_cuda_available(void)
{
#ifdef CTRAIN_CUDA
    cuda_env_defaults();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { cudaGetLastError(); return 0; }
    return n > 0;
#else
    return 0;
#endif
}

/* CTRAIN_MEM_LIMIT=24G (or 512M, 1.5G, plain bytes): behave as a card with
 * that much memory for what ctrain allocates, e.g. to find on a big card
 * the batch that fits a smaller one (ctrain bench --max-batch). The CUDA
 * context and the libraries' own memory are not counted. */
size_t ctx_mem_limit_from_env(void) { return setting_size(SET_MEM_LIMIT); }

void ctx_init(Ctx *c, Device dev, int device_id, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->device = dev;
    c->device_id = device_id;
    c->grad_enabled = 1;
    c->autocast = DT_F32;
    c->seed = seed;
    c->dp_world = 1;
    c->mem_limit = ctx_mem_limit_from_env();
    c->tape = tape_new();
    if (dev == DEV_CPU) return;
#ifdef CTRAIN_CUDA
    cuda_env_defaults();
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        ct_fatal_hint("pass --device cpu to train on the CPU backend",
                      "no CUDA device found (%s)",
                      e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (device_id >= n)
        ct_fatal_hint("list devices with: ctrain info", "cuda:%d does not exist (%d device%s)",
                      device_id, n, n == 1 ? "" : "s");
    CUDA_CHECK(cudaSetDevice(device_id));
    /* one level above the lowest priority when the device has three or more:
     * the overlapped update's stream takes the lowest (train/loop/overlap.h), the
     * all-reduces' the highest (train/parallel/dist.c) */
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    int prio = least - 1 > greatest ? least - 1 : least;
    CUDA_CHECK(cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, prio));
    CUBLAS_CHECK(cublasLtCreate(&c->lt));
    CUDNN_CHECK(cudnnCreate(&c->cudnn));
    CUDNN_CHECK(cudnnSetStream(c->cudnn, c->stream));
    /* keep freed blocks cached in the pool: no release back to the driver */
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&c->pool, device_id));
    uint64_t threshold = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    c->workspace_bytes = CTX_WORKSPACE_BYTES;
    c->workspace = mem_alloc(c, c->workspace_bytes);
    c->dev_flags = (int32_t *)mem_alloc(c, CTX_FLAGS * sizeof(int32_t));
    mem_zero(c, c->dev_flags, CTX_FLAGS * sizeof(int32_t));
#else
    ct_fatal_hint("rebuild with nvcc, cuDNN and cuBLAS installed, or pass --device cpu",
                  "this ctrain was built without the CUDA backend");
#endif
}

#ifdef CTRAIN_CUDA
void *ctx_workspace(Ctx *c, size_t bytes)
{
    if (bytes > c->workspace_bytes && c->capturing) {
        /* growing would free memory the graph's kernels point at: refuse the
         * capture (nothing captured runs, so the small workspace is harmless) */
        c->capture_refused = "the step asked for a larger workspace during capture (it should "
                             "have grown in the eager warm-up steps; raise --graph-warmup)";
        return c->workspace;
    }
    if (bytes > c->workspace_bytes) {
        if (c->graphs_live) {
            /* a captured graph's kernels hold the old address (an evaluation
             * between replays may ask for more): keep it until the context goes */
            struct CtxKept *kept = realloc(c->workspace_kept,
                                           (size_t)(c->n_workspace_kept + 1) * sizeof *kept);
            if (!kept) ct_fatal("ctx_workspace: out of host memory");
            kept[c->n_workspace_kept++] = (struct CtxKept){c->workspace, c->workspace_bytes};
            c->workspace_kept = kept;
        } else {
            mem_free(c, c->workspace, c->workspace_bytes);
        }
        c->workspace_bytes = (bytes + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
        c->workspace = mem_alloc(c, c->workspace_bytes);
        /* held for the context's life, so part of every later peak */
        LOG_D("workspace: grown to %.1f MiB (%s%s)", c->workspace_bytes / 1048576.0,
              c->mem.where ? "backward of " : "forward, after ",
              c->mem.where ? c->mem.where : c->mem.last_op ? c->mem.last_op : "no op");
    }
    return c->workspace;
}

void *ctx_workspace_call(Ctx *c, size_t bytes, size_t *own, size_t *len)
{
    *own = 0;
    if (bytes > c->workspace_bytes && setting_choice(SET_CONV_WS) == 1) {
        *own = *len = bytes;
        c->workspace_own_calls++;
        return mem_alloc(c, bytes);
    }
    void *ws = ctx_workspace(c, bytes);
    *len = c->workspace_bytes;
    return ws;
}

void ctx_workspace_done(Ctx *c, void *ws, size_t own)
{
    if (own) mem_free(c, ws, own);
}

int32_t *ctx_flag(Ctx *c, int slot, CtxFlagReport report)
{
    CT_ASSERT(c->dev_flags != NULL && slot >= 0 && slot < CTX_FLAGS && report != NULL,
              "ctx_flag: slot %d (0 .. %d) with a report, on a CUDA context", slot,
              CTX_FLAGS - 1);
    CT_ASSERT(!c->flag_report[slot] || c->flag_report[slot] == report,
              "ctx_flag: device error counter %d already means something else", slot);
    c->flag_report[slot] = report;
    return c->dev_flags + slot;
}
#endif

void ctx_sync(Ctx *c)
{
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) CUDA_CHECK(cudaStreamSynchronize(c->stream));
#else
    (void)c;
#endif
}

void ctx_check_flags(Ctx *c)
{
#ifdef CTRAIN_CUDA
    if (c->device != DEV_CUDA) return;
    int32_t f[CTX_FLAGS];
    mem_to_host(c, f, c->dev_flags, sizeof f);
    for (int i = 0; i < CTX_FLAGS; i++) {
        if (f[i] <= 0) continue;
        if (c->flag_report[i]) c->flag_report[i](f[i]);
        ct_fatal("device error counter %d was set %d time%s by a kernel that registered no "
                 "report (ctx_flag)", i, f[i], f[i] == 1 ? "" : "s");
    }
#else
    (void)c;
#endif
}

void *ctx_cache_get(const Ctx *c, const CtxCacheKind *kind)
{
    for (int i = 0; i < c->n_caches; i++)
        if (c->caches[i].kind == kind) return c->caches[i].obj;
    return NULL;
}

void ctx_cache_set(Ctx *c, const CtxCacheKind *kind, void *obj)
{
    for (int i = 0; i < c->n_caches; i++)
        if (c->caches[i].kind == kind) {
            c->caches[i].obj = obj;
            return;
        }
    if (!obj) return;
    CT_ASSERT(c->n_caches < CTX_CACHES, "ctx_cache_set: more than %d cache kinds (adding %s)",
              CTX_CACHES, kind->name);
    c->caches[c->n_caches].kind = kind;
    c->caches[c->n_caches].obj = obj;
    c->n_caches++;
}

/* The registered caches, the last registered first (a cache made later may
 * rest on one made earlier, never the other way round). Each release runs
 * while the stream, the handles and the pool still exist. */
static void ctx_release_caches(Ctx *c)
{
    for (int i = c->n_caches - 1; i >= 0; i--) {
        CtxCache *e = &c->caches[i];
        void *obj = e->obj;
        e->obj = NULL;
        if (obj) e->kind->release(c, obj);
    }
    c->n_caches = 0;
}

#ifdef CTRAIN_CUDA
void ctx_device_identity(char *buf, size_t n)
{
    int dev = 0, drv = 0, rt = 0;
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    CUDA_CHECK(cudaDriverGetVersion(&drv));
    CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    snprintf(buf, n, "%s, sm_%d%d, %d SMs, driver %d, CUDA %d", prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, drv, rt);
}
#endif

void ctx_stream_lowest_priority(Ctx *c)
{
#ifdef CTRAIN_CUDA
    if (c->device != DEV_CUDA) return;
    CT_ASSERT(!c->capturing, "ctx_stream_lowest_priority during a CUDA graph capture");
    int least = 0, greatest = 0, now = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamGetPriority(c->stream, &now));
    if (now == least) return;
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, least));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    c->stream = s;
    CUDNN_CHECK(cudnnSetStream(c->cudnn, c->stream));
#else
    (void)c;
#endif
}

void ctx_free(Ctx *c)
{
    tape_free(c->tape);
    c->tape = NULL;
    ctx_release_caches(c);
#ifdef CTRAIN_CUDA
    if (c->device != DEV_CUDA) return;
    mem_free(c, c->dev_flags, CTX_FLAGS * sizeof(int32_t));
    mem_free(c, c->workspace, c->workspace_bytes);
    for (int i = 0; i < c->n_workspace_kept; i++)
        mem_free(c, c->workspace_kept[i].p, c->workspace_kept[i].bytes);
    free(c->workspace_kept);
    c->workspace_kept = NULL;
    c->n_workspace_kept = 0;
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    CUDNN_CHECK(cudnnDestroy(c->cudnn));
    CUBLAS_CHECK(cublasLtDestroy(c->lt));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
#endif
}
