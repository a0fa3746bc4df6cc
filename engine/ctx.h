/* ctx.h — the device context every op receives.
 *
 * One Ctx per process and device. It holds what ops need and must not keep
 * in globals (no op keeps hidden state: the context is passed in): the device kind, the CUDA stream, the
 * cuBLASLt and cuDNN handles, the one shared workspace, the memory pool and
 * its statistics, the autograd tape and grad mode, the autocast dtype and
 * TF32 switch, the Philox RNG position, and the data-parallel hooks.
 *
 * Two mechanisms let the layers above keep per-context state without the
 * engine knowing their types:
 *   - caches: an op family (the matmul plans, the cuDNN convolution plans,
 *     the cuDNN batch-norm forms) creates its cache on first use and
 *     registers it under a CtxCacheKind (ctx_cache_set); ctx_cache_get finds
 *     it again, and ctx_free releases every registered cache, the last
 *     registered first, before the workspace and the stream go;
 *   - device error counters (CUDA): CTX_FLAGS int32 counters in device
 *     memory that kernels add to when they meet bad input (a label or token
 *     id out of range), so a step never syncs to check; the op asks for its
 *     slot with ctx_flag, registering the report a user sees, and
 *     ctx_check_flags reads the counters at the next host sync and stops
 *     with that report. Which slot means what is decided in ops/op_flags.h.
 *
 * CPU contexts have no stream or handles; ops run synchronously on the host.
 *
 * This header is the bottom of the engine: memory (mem.h), tensors and the
 * tape include it for the struct. The functions declared here live in
 * engine/context.c, which sits above memory and autograd (it allocates the
 * workspace and makes the tape), so no circle runs through the context.
 */
#ifndef CTRAIN_CTX_H
#define CTRAIN_CTX_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cudnn.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DEV_CPU = 0, DEV_CUDA = 1 } Device;

/* Device error counters per context (see the top of the file). */
#define CTX_FLAGS 16
/* Called by ctx_check_flags with a set counter's value (> 0): prints what
 * went wrong and what to do, and does not return (ct_fatal_hint). */
typedef void (*CtxFlagReport)(int32_t count);

typedef struct Tape Tape;
typedef struct AdHook AdHook;
typedef struct Ctx Ctx;

/* Average n floats in place over the data-parallel group (sync batch norm):
 * queued on the context's stream, no host sync. */
typedef void (*CtxAllReduceFn)(Ctx *c, float *buf, size_t n, void *user);

/* A kind of per-context cache. The op family that owns it defines one
 * (static const) and keys its cache by the kind's address. release frees obj
 * and everything in it (descriptors, plans, host memory); it may use the
 * stream, the handles and the pool, which are still alive when it runs. */
typedef struct CtxCacheKind {
    const char *name;                        /* what it holds, for messages */
    void (*release)(Ctx *c, void *obj);
} CtxCacheKind;

/* At most this many kinds register with one context (four exist today: the
 * matmul, FP8 GEMM, convolution and batch-norm plans). */
#define CTX_CACHES 8

typedef struct CtxCache {
    const CtxCacheKind *kind;
    void *obj;             /* NULL: released (ctx_cache_set(c, kind, NULL)) */
} CtxCache;

typedef struct MemStats {
    size_t current;    /* bytes held by live allocations */
    size_t peak;       /* high-water mark of current since the last reset */
    size_t n_allocs;   /* allocations made (a steady step makes the same number) */
    const char *where;    /* the autograd node whose backward runs now (its op's
                           * name), NULL outside a backward walk */
    const char *peak_at;  /* `where` when peak was last raised (NULL: outside a
                           * backward: the forward, the loss, the optimizer) */
    const char *last_op;  /* the op of the latest node recorded: how far a forward has
                           * come (NULL from the start of a backward walk to the next
                           * record) */
    const char *peak_after; /* outside a backward, `last_op` when peak was last raised:
                             * the peak came in the op after it (NULL: before any op
                             * recorded, or after the backward: the optimizer) */
} MemStats;

struct Ctx {
    Device device;
    int device_id;
    int grad_enabled;      /* record autograd nodes (0 in eval / no-grad) */
    int recomputing;       /* > 0 while a recompute segment re-runs its forward:
                              batch norm must not update running stats again */
    long recomputed;       /* segments re-run so far (for --trace) */
    Tape *tape;
    MemStats mem;
    size_t mem_limit;      /* CTRAIN_MEM_LIMIT: allocations past it are out of memory (0: none) */
    int allow_tf32;        /* f32 matmuls may use TF32 tensor cores */
    DType autocast;        /* DT_F32: off; DT_F16 / DT_BF16: matmuls run in it */
    int fp8;               /* models run their FP8-capable Linear layers in FP8
                              (ops/linear_fp8.h; --precision fp8) */
    uint64_t seed;         /* Philox key for dropout and init */
    uint64_t rng_offset;   /* next unused Philox counter block */
    /* data parallel (train/parallel/dist.h sets these; one process: rank 0 of 1) */
    int dp_rank, dp_world; /* this process's rank and the number of processes */
    CtxAllReduceFn bn_allreduce;   /* non-NULL: batch norm syncs its statistics (--sync-bn) */
    void *bn_allreduce_user;
    AdHook *bwd_hook;      /* non-NULL: ad_backward_from reports its walk (engine/autograd.h) */
    /* Non-NULL (data parallel's sparse lookup gradient, train/parallel/dist.c): the
     * embedding backward asks it for each node (a Node *); 1 with rows and
     * ids set: write the table's gradient there in compact form
     * (ops/embedding.h) instead of adding it to the table's gradient. */
    int (*emb_defer)(void *user, const void *node, float **rows, int32_t **ids);
    void *emb_defer_user;
    int bwd_depth;         /* tapes being walked: 1 in the outer walk, 2 in a recompute sub-tape */
    CtxCache caches[CTX_CACHES];   /* in registration order (ctx_cache_set) */
    int n_caches;
#ifdef CTRAIN_CUDA
    cudaStream_t stream;
    cublasLtHandle_t lt;
    cudnnHandle_t cudnn;
    void *workspace;       /* shared by cuBLASLt and cuDNN; one stream, so no overlap */
    size_t workspace_bytes;
    long workspace_own_calls;   /* calls given a block of their own (ctx_workspace_call) */
    /* While a step is captured into a CUDA graph (train/loop/step_graph.c): a device
     * word that Philox-drawing kernels add to their offset (NULL: eager).
     * The graph advances it, so each replay draws the next step's masks. */
    const uint64_t *rng_base;
    int capturing;         /* > 0 during stream capture: no syncs, no growth */
    int graphs_live;       /* captured graphs that may still replay: nothing they point at is freed */
    struct CtxKept { void *p; size_t bytes; } *workspace_kept;   /* workspaces outgrown
                              while a graph was live (freed with the context) */
    int n_workspace_kept;
    const char *capture_refused;   /* why this capture cannot be used (NULL: fine) */
    cudaMemPool_t pool;
    int32_t *dev_flags;    /* CTX_FLAGS device error counters, read when the host syncs */
    CtxFlagReport flag_report[CTX_FLAGS];   /* per slot: what a set counter means */
#endif
};

/* Device from "cpu" / "cuda" / "cuda:N"; -1 when the text is not a device. */
int ctx_parse_device(const char *s, Device *dev, int *id);
/* 1 when a CUDA device is usable in this build on this machine. */
int ctx_cuda_available(void);
/* CTRAIN_MEM_LIMIT in bytes (0: unset); a value that is not a size is fatal. */
size_t ctx_mem_limit_from_env(void);
void ctx_init(Ctx *c, Device dev, int device_id, uint64_t seed);
void ctx_free(Ctx *c);
/* Wait for all queued device work (no-op on the CPU). */
void ctx_sync(Ctx *c);
/* Re-create the compute stream at the device's lowest priority, the one
 * libraries' internal streams get (created with the default priority).
 * ctx_init puts the compute stream one level above it (the overlapped
 * update's stream sits below, train/loop/overlap.h); but a library that
 * runs kernels on streams of its own (nvJPEG's hardware decoder converts
 * each image on one of 14 internal streams) then waits for every step to
 * end, since a higher-priority stream that always has blocks pending is
 * served first. Call it before any work is captured or any stream or
 * event was made to wait on the old stream; it syncs. No-op on the CPU. */
void ctx_stream_lowest_priority(Ctx *c);
/* Device error counters: syncs and reads them; a set counter is fatal with
 * the report its slot registered (slots in order, so the lowest set slot
 * speaks). No-op on the CPU. */
void ctx_check_flags(Ctx *c);

/* The cache registered under kind, NULL when there is none (yet). */
void *ctx_cache_get(const Ctx *c, const CtxCacheKind *kind);
/* Register obj under kind (a kind seen before keeps its place in the
 * release order); obj NULL: the owner has released it itself, ctx_free
 * skips it. */
void ctx_cache_set(Ctx *c, const CtxCacheKind *kind, void *obj);
static inline const char *ctx_device_name(const Ctx *c)
{
    return c->device == DEV_CUDA ? "cuda" : "cpu";
}
#ifdef CTRAIN_CUDA
/* The shared workspace, grown to at least `bytes` (cuDNN algorithms ask
 * for more than the default). Growing frees and reallocates, so it must
 * happen during warm-up, never inside CUDA graph capture. */
void *ctx_workspace(Ctx *c, size_t bytes);
/* A workspace of `bytes` for one library call (a convolution, a cuDNN
 * graph): the shared one when it holds that much; past it, under
 * CTRAIN_CONV_WS=per_call (the default), a pool block of its own for that
 * call alone (stream-ordered, so taken in a capture it is the graph's own),
 * under `shared` the shared one grown (ctx_workspace). *own is the block's size (0: the
 * shared one); *len what the call may use. Give it back with
 * ctx_workspace_done(c, ws, *own) once the call is queued. */
void *ctx_workspace_call(Ctx *c, size_t bytes, size_t *own, size_t *len);
void ctx_workspace_done(Ctx *c, void *ws, size_t own);
/* Device error counter `slot` (< CTX_FLAGS) for a kernel to add to, with
 * the report ctx_check_flags gives when it is set. A slot has one report:
 * registering another is a programming error (fatal). */
int32_t *ctx_flag(Ctx *c, int slot, CtxFlagReport report);
/* The current device as one line: "NAME, sm_XY, N SMs, driver D, CUDA R"
 * (what a kept search result depends on besides its library: ops/plan_store.h). */
void ctx_device_identity(char *buf, size_t n);
#endif

/* Claim n Philox counter blocks; returns the offset to draw from. */
static inline uint64_t ctx_rng_take(Ctx *c, uint64_t blocks)
{
    uint64_t o = c->rng_offset;
    c->rng_offset += blocks;
    return o;
}

#ifdef __cplusplus
}
#endif
#endif
