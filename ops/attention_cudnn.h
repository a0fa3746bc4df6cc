/* attention_cudnn.h — scaled dot-product attention on cuDNN's fused
 * flash-attention engines (the graph API, ops/cudnn_graph.h): the graph
 * builders that scripts/cudnn_sdpa_probe.c and the op share, and the op
 * layer's calls (CTRAIN_ATTN=cudnn, ops/attention_op.c).
 *
 * Shape letters: B batch, H heads, T tokens (queries = keys), Dh head width.
 * q, k, v, out and their gradients [B, T, H, Dh] (bthd 1) or [B, H, T, Dh]
 * (bthd 0) in f16 / bf16: cuDNN's [b, h, s, d] dims with that layout's
 * strides; mask f32 [B, T] additive (0 real keys, -10000 padding), cuDNN's
 * bias [B, 1, T, T] with stride 0 along the queries (a view of the [B, T]
 * rows: a [B, 1, 1, T] bias runs, but cuDNN 9.14's backward reads it
 * wrongly); stats f32 [B, H, T] (cuDNN's [b, h, s_q, 1]).
 *
 * The math, forward and backward side by side (scale = 1/sqrt(Dh), keep =
 * 1 - p, r cuDNN's own Bernoulli(keep) draws from (seed, offset): Philox,
 * not ctrain's drop_keep_bit, so the masks differ from the other paths'):
 *   forward                                  backward
 *   S     = scale Q K^T + bias               Dk    = rowsum(dO * O) keep   (f32 [B,H,T], a buffer)
 *   m     = rowmax S                         P     = exp(S - stats)        (S recomputed)
 *   E     = exp(S - m),  Z = rowsum E        Pd    = P r / keep            (r drawn again)
 *   stats = m + log Z    (f32, kept)         dV    = Pd^T dO
 *   P     = E / Z                            dS    = (dO V^T r - Dk) P / keep * scale
 *   Pd    = P r / keep   (p > 0)             dK    = dS^T Q
 *   O     = Pd V                             dQ    = dS K   (written by the matmul:
 *                                                    deterministic; the accumulator
 *                                                    form goes through an f32 buffer)
 * Unlike ctrain's fused kernels stats has no mask shift (ops/attention_fused.h's
 * lse is this minus the mask row's max M_b), and a query row whose keys
 * are all -inf is not special-cased (expect NaN where they give 0; not
 * checked; BERT's -10000 is fine).
 *
 * Builders (the probe's and the op's one copy): sdpa_build writes a graph's
 * descriptors for a shape and a form with fixed uids (SDPA_U_*), no
 * pointers; sdpa_finalize makes the operation graph; sdpa_plan takes the
 * heuristics' first plan that finalizes (runtime compilation allowed,
 * non-deterministic engines forbidden unless asked); sdpa_pointers fills a
 * variant pack's pointers in the graph's uid order from the buffers of one
 * call. The by-value scalars (scale, 1/(1-p), 1-p; for the drop_in form the
 * rate ctrain's mask draws, drop_scale) live in the SdpaGraph:
 * it must not move while a pack made from it can run (cuDNN reads them at
 * execute time, and a CUDA graph captures them then).
 *
 * The op layer's calls (attention_cudnn_*): plans per (B, H, T, Dh, dtype,
 * layout, mask or not, p, direction) in a cache registered with the context
 * (one context per device), a refusal cached too and logged once at info
 * level; the forward is taken only where cuDNN also took the backward.
 * Before each execution a one-thread kernel writes the int64 seed and
 * offset tensors (offset + *c->rng_base inside a captured step), so a
 * replayed graph draws the next step's mask; the backward passes the
 * node's same (seed, offset) and cuDNN draws the forward's mask again.
 *
 * A plain C file over cuDNN's C API (and one small kernel in
 * attention_cudnn.cu), built with -DCTRAIN_CUDA only.
 */
#ifndef CTRAIN_OPS_ATTENTION_CUDNN_H
#define CTRAIN_OPS_ATTENTION_CUDNN_H

#ifdef CTRAIN_CUDA
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "engine/ctx.h"
#include "engine/dtype.h"
#include "ops/cudnn_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the graph builders ---- */

/* The tensors' uids (the variant pack's), then the virtual ones from SDPA_U_VIRT. */
enum {
    SDPA_U_Q = 1, SDPA_U_K, SDPA_U_V, SDPA_U_O, SDPA_U_STATS, SDPA_U_BIAS, SDPA_U_SEED,
    SDPA_U_OFFSET, SDPA_U_SCALE, SDPA_U_DSCALE, SDPA_U_KEEP, SDPA_U_DO, SDPA_U_DQ, SDPA_U_DK,
    SDPA_U_DV, SDPA_U_SUM, SDPA_U_DQACC, SDPA_U_DMASK, SDPA_U_RNG_DUMP, SDPA_U_VIRT = 100
};

/* The key mask: none, a bias f32 [B, 1, T, T] (stride 0 along the queries), or
 * the bias in the data type. */
enum { SDPA_MASK_NONE = 0, SDPA_MASK_F32 = 1, SDPA_MASK_DT = 2 };

typedef struct SdpaShape {
    int64_t B, H, T, D;       /* D: Dh */
    cudnnDataType_t ct;       /* CUDNN_DATA_HALF or CUDNN_DATA_BFLOAT16 */
    int bthd;                 /* 1: [B, T, H, Dh] tensors; 0: [B, H, T, Dh] */
    int64_t ld;               /* bthd: the token stride of q, k, v and dq, dk, dv in elements
                               * (0: packed, H Dh; 3 H Dh reads them from one [B, T, 3, H, Dh]
                               * projection); out and dout are always packed */
} SdpaShape;

typedef struct SdpaForm {
    float p;      /* dropout probability (0: no RNG operation) */
    int mask;     /* SDPA_MASK_* */
    int legacy;   /* cuDNN 8.9's form: F16x16 reordering on P, its dropout and dQ's accumulator */
    int accum;    /* backward: dQ through an f32 accumulator [B, H, T, Dh] (else written
                   * by its matmul) */
    int drop_in;  /* p > 0: the dropout mask an input [B, H, T, T] in the data type (1 keep,
                   * 0 drop; attention_cudnn_drop_mask_cuda writes ctrain's) in place of
                   * cuDNN's RNG operation: the probe's (the op measured it 10-25% slower a
                   * step, docs/kernels.md) */
    int rng_dump; /* p > 0, RNG form: the RNG's draws also written, f32 [B, H, T, T] (a check's
                   * window on cuDNN's mask) */
} SdpaForm;

#define SDPA_NKEEP 128
#define SDPA_NOPS 48
#define SDPA_NIO 24

/* One graph: its descriptors, the non-virtual tensors' uids (the variant
 * pack's order), the first part cuDNN refused, the finalized graph, its
 * plan, and the by-value scalars the pack points at. */
typedef struct SdpaGraph {
    int bwd;
    SdpaForm form;
    CgDesc keep[SDPA_NKEEP];
    int nkeep;
    CgDesc ops[SDPA_NOPS];
    int nops;
    int64_t uids[SDPA_NIO];
    int nio;
    int64_t next_virtual;
    const char *refused;   /* NULL, or what cuDNN took not ("matmul Q K^T", ...) */
    CgDesc graph;          /* the finalized operation graph (NULL: not (yet)) */
    CgPlan plan;
    float scale, dscale, keep_p;   /* 1/sqrt(Dh), 1/(1-p), 1-p (drop_in: ctrain's rate) */
} SdpaGraph;

/* The descriptors of direction bwd's graph for shape s in form f into g
 * (cleared first). 1 when cuDNN took every part; 0 with g->refused naming
 * the first it refused. */
int sdpa_build(SdpaGraph *g, const SdpaShape *s, int bwd, const SdpaForm *f);
/* g's operations as a finalized graph (g->graph); cuDNN's status. */
cudnnStatus_t sdpa_finalize(SdpaGraph *g, cudnnHandle_t h);
/* g's first plan (cg_first_plan: runtime compilation allowed, at most
 * max_candidates finalize attempts, workspace at most ws_limit; engines
 * noted non-deterministic skipped unless allow_nondet). The candidates
 * looked at go into cand[0..*ncand-1] (at most max_cand). 1 with g->plan
 * set. */
int sdpa_plan(Ctx *c, SdpaGraph *g, int max_candidates, size_t ws_limit, int allow_nondet,
              CgCandidate *cand, int max_cand, int *ncand);
/* Destroys the plan, the graph and the descriptors; g is cleared. */
void sdpa_free(SdpaGraph *g);

/* One call's buffers, by role (NULL where the graph has no such tensor). */
typedef struct SdpaBufs {
    const void *q, *k, *v, *dout, *bias;   /* bias: f32 or the data type, as the form says */
    void *o, *dq, *dk, *dv;
    float *stats, *sum, *dqacc;
    int64_t *seed, *offset;                /* int64 [1, 1, 1, 1] each, in device memory */
    const void *dmask;                     /* the drop_in form's mask [B, H, T, T] */
    float *rng_dump;                       /* the rng_dump form's draws [B, H, T, T] */
} SdpaBufs;

/* ptrs[i] = the pointer of g->uids[i] (i < g->nio): the buffers' device
 * pointers, and the host pointers of g's own by-value scalars. */
void sdpa_pointers(SdpaGraph *g, const SdpaBufs *b, void **ptrs);

/* ---- the op layer's calls ---- */

/* 1 when cuDNN has plans for both directions of this attention (built on
 * first use: host calls, runtime compilation of seconds, a warm-up step's
 * work; inside a CUDA graph capture a shape not seen before answers 0), 0
 * when it declines (logged once at info level, the answer cached). p < 1;
 * dt f16 or bf16; every pointer the calls below get 16-byte aligned. ld:
 * SdpaShape's (bthd only; 0 packed). */
int attention_cudnn_ready(Ctx *c, DType dt, size_t B, size_t H, size_t T, size_t Dh, int bthd,
                          size_t ld, int has_mask, float p);
/* out = attention(q, k, v, mask) and stats f32 [B, H, T] (for the
 * backward) on c->stream, after attention_cudnn_ready answered 1. Returns
 * 1, or 0 when cuDNN refuses the execution (nothing written; the form is
 * then declined from here on, logged). */
int attention_cudnn_forward(Ctx *c, void *out, float *stats, const void *q, const void *k,
                            const void *v, const float *mask, DType dt, float p, uint64_t seed,
                            uint64_t offset, size_t B, size_t H, size_t T, size_t Dh, int bthd,
                            size_t ld);
/* dq, dk, dv (any may be NULL; accum 0 writes, 1 adds) of that forward,
 * from its q, k, v, out, stats, mask and (seed, offset). Temporaries from
 * the pool: the row sums f32 [B, H, T], a gradient that adds or is not
 * wanted (cuDNN writes all three), the mask in dt when only that bias form
 * was taken, the f32 dQ accumulator in that form. With a token stride ld
 * (q, k, v strided) dq, dk, dv are written in that stride: all three
 * wanted, written (not added), 16-byte aligned. Fatal when cuDNN refuses
 * the execution (the forward's mask and stats are cuDNN's: no other
 * backward can follow it). */
void attention_cudnn_backward(Ctx *c, void *dq, void *dk, void *dv, const void *dout,
                              const void *q, const void *k, const void *v, const void *out,
                              const float *stats, const float *mask, DType dt, float p,
                              uint64_t seed, uint64_t offset, size_t B, size_t H, size_t T,
                              size_t Dh, int accum_q, int accum_k, int accum_v, int bthd,
                              size_t ld);
/* Forwards and backwards cuDNN has run on c so far (what the tests read to
 * know which path ran). */
void attention_cudnn_runs(Ctx *c, long *fwd, long *bwd);

/* rng[0] = seed, rng[1] = offset + (*rng_base when rng_base is not NULL),
 * as int64, by one thread on s (attention_cudnn.cu). */
void attention_cudnn_rng_cuda(int64_t *rng, uint64_t seed, uint64_t offset,
                              const uint64_t *rng_base, cudaStream_t s);
/* m[idx] = drop_keep_bit(seed, offset + *rng_base, idx, thr(p)) as 1 or 0 in dt
 * (f16 / bf16) for idx < n (a multiple of 8): ctrain's attention dropout mask
 * (ops/dropout_mask.h) over [B, H, T, T], for the drop_in form (the probe). */
void attention_cudnn_drop_mask_cuda(void *m, DType dt, size_t n, float p, uint64_t seed,
                                    uint64_t offset, const uint64_t *rng_base, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
#endif
