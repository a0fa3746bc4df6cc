/* dist_regbuf.h — device buffers that NCCL may read and write directly on
 * the other GPUs of this machine: the gradient buffer (and the bf16 shadow
 * of --grad-reduce bf16) that the data-parallel all-reduces work on.
 *
 * Plain memory comes from cudaMallocAsync, which NCCL cannot map into
 * another process: each all-reduce then copies every byte through NCCL's
 * own staging buffers, an extra pass over HBM and more SM time on the
 * communication kernels, taken from the backward they overlap. Memory from
 * ncclMemAlloc (cuMem, exportable) can be registered with the communicator;
 * NCCL then reads and writes the user buffers over NVLink in place.
 *
 * The mode (regbuf_mode_default):
 *   2  ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC): NCCL
 *      2.27's symmetric kernels (every rank has the buffer at the same offset
 *      in its window), where NCCL has windows (2.27+): with the split
 *      all-reduce and NCCL's zero-CTA policy that train/parallel/dist.c then
 *      uses, the fastest on 2 H200s (docs/multi-gpu.md)
 *   0  cudaMallocAsync, no registration: older NCCL and the CPU build
 * Registration is collective (every rank, the same sizes, the same order),
 * and NCCL needs every rank to make the same choice, so the ranks agree
 * twice through `agree` (an all-reduce of "ok"): after ncclMemAlloc (a rank
 * that could not allocate makes every rank take the plain path, before any
 * collective registration) and after the registration (refused on every
 * rank, as where the machine has no windows: plain buffers with a warning;
 * refused on some ranks only, which cannot be undone collectively: fatal).
 * Results are identical either way, only the time differs. */
#ifndef CTRAIN_TRAIN_DIST_REGBUF_H
#define CTRAIN_TRAIN_DIST_REGBUF_H

#include <stddef.h>
#include "engine/ctx.h"

typedef struct RegBuf {
    void *ptr;
    size_t bytes;
    int mode;            /* what it is: 0 mem_alloc, 2 symmetric window */
    void *handle;        /* the ncclWindow_t */
} RegBuf;

/* The mode the data-parallel buffers get: 2 where NCCL has symmetric
 * windows, else 0. */
int regbuf_mode_default(void);
/* All ranks' verdict on this rank's ok: 1 when every rank passed 1. */
typedef int (*RegbufAgreeFn)(void *user, int ok);

/* bytes of device memory for `comm` (an ncclComm_t) in `mode`, counted in
 * c's memory figures. When the ranks cannot all have it registered: a
 * plain buffer (mem_alloc) if plain_fallback, else none (rb->ptr NULL);
 * rank 0 says so. */
void regbuf_alloc(RegBuf *rb, Ctx *c, void *comm, size_t bytes, int mode, int plain_fallback,
                  RegbufAgreeFn agree, void *agree_user);
/* Deregisters and frees: after every captured graph that used it is destroyed. */
void regbuf_free(RegBuf *rb, Ctx *c, void *comm);
const char *regbuf_mode_name(int mode);

#endif
