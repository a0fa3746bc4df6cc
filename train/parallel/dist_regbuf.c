/* dist_regbuf.c — NCCL-registered device buffers (see dist_regbuf.h). */
#include "dist_regbuf.h"

#include <string.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#ifdef CTRAIN_CUDA
#include <nccl.h>
#define REGBUF_HAS_WINDOW (NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0))
#endif

/* a symmetric window where NCCL has them (2.27+). With the split
 * all-reduce and NCCL's zero-CTA policy that train/parallel/dist.c then turns on,
 * BERT-large bf16 on 2 H200s scales 91.8% instead of 89.3%, ResNet-50 97.8%
 * instead of 97.0% (measured 2026-11-30; docs/multi-gpu.md) */
#if defined(CTRAIN_CUDA) && REGBUF_HAS_WINDOW
#define REGBUF_DEFAULT 2
#else
#define REGBUF_DEFAULT 0
#endif

int regbuf_mode_default(void) { return REGBUF_DEFAULT; }

const char *regbuf_mode_name(int mode)
{
    return mode == 2 ? "symmetric NCCL window" : "plain";
}

#ifdef CTRAIN_CUDA

void regbuf_alloc(RegBuf *rb, Ctx *c, void *comm, size_t bytes, int mode, int plain_fallback,
                  RegbufAgreeFn agree, void *agree_user)
{
    memset(rb, 0, sizeof *rb);
    rb->bytes = bytes;
    ncclComm_t cm = (ncclComm_t)comm;
    if (mode > 0) {
        int fits = !c->mem_limit || c->mem.current + bytes <= c->mem_limit;
        ncclResult_t r = fits ? ncclMemAlloc(&rb->ptr, bytes) : ncclInvalidUsage;
        if (r != ncclSuccess) rb->ptr = NULL;
        if (!agree(agree_user, r == ncclSuccess)) {   /* before any collective registration */
            if (rb->ptr) ncclMemFree(rb->ptr);
            rb->ptr = NULL;
            LOG_W("%s buffers: a rank could not allocate %zu bytes with ncclMemAlloc%s; "
                  "plain buffers on every rank", regbuf_mode_name(mode), bytes,
                  fits ? "" : " (over CTRAIN_MEM_LIMIT)");
        } else {
#if REGBUF_HAS_WINDOW
            ncclWindow_t w = NULL;
            r = ncclCommWindowRegister(cm, rb->ptr, bytes, &w, NCCL_WIN_COLL_SYMMETRIC);
            rb->handle = (void *)w;
#else
            (void)cm;
            r = ncclInvalidUsage;
#endif
            if (!agree(agree_user, r == ncclSuccess)) {
                /* refused everywhere (a machine without windows): plain
                 * buffers, as if not asked; on some ranks only: NCCL
                 * cannot undo it collectively */
                if (!agree(agree_user, r != ncclSuccess))
                    ct_fatal_hint("start every rank with the same NCCL and driver "
                                  "(LD_LIBRARY_PATH); NCCL_DEBUG=WARN says why a rank refused",
                                  "%s buffers: NCCL registered the %zu-byte buffer on some ranks "
                                  "only (here: %s)", regbuf_mode_name(mode), bytes,
                                  ncclGetErrorString(r));
                LOG_W("NCCL could not register the %zu-byte buffer (%s, mode %d): plain buffers "
                      "on every rank", bytes, ncclGetErrorString(r), mode);
                ncclMemFree(rb->ptr);
                rb->ptr = plain_fallback ? mem_alloc(c, bytes) : NULL;
                rb->mode = 0;
                return;
            }
            rb->mode = mode;
            mem_note_external(c, bytes, 0);
            return;
        }
    }
    rb->mode = 0;
    rb->ptr = plain_fallback ? mem_alloc(c, bytes) : NULL;
}

void regbuf_free(RegBuf *rb, Ctx *c, void *comm)
{
    if (!rb->ptr) return;
    ncclComm_t cm = (ncclComm_t)comm;
    if (rb->mode == 0) {
        mem_free(c, rb->ptr, rb->bytes);
    } else {
        CUDA_CHECK(cudaStreamSynchronize(c->stream));   /* nothing in flight reads it */
#if REGBUF_HAS_WINDOW
        NCCL_CHECK(ncclCommWindowDeregister(cm, (ncclWindow_t)rb->handle));
#else
        (void)cm;
#endif
        NCCL_CHECK(ncclMemFree(rb->ptr));
        mem_note_external(c, rb->bytes, 1);
    }
    memset(rb, 0, sizeof *rb);
}

#else

void regbuf_alloc(RegBuf *rb, Ctx *c, void *comm, size_t bytes, int mode, int plain_fallback,
                  RegbufAgreeFn agree, void *agree_user)
{
    (void)comm; (void)mode; (void)agree; (void)agree_user;
    memset(rb, 0, sizeof *rb);
    rb->bytes = bytes;
    rb->ptr = plain_fallback ? mem_alloc(c, bytes) : NULL;
}

void regbuf_free(RegBuf *rb, Ctx *c, void *comm)
{
    (void)comm;
    if (rb->ptr) mem_free(c, rb->ptr, rb->bytes);
    memset(rb, 0, sizeof *rb);
}

#endif
