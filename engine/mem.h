/* mem.h — device and host memory with current and peak accounting.
 *
 * CUDA: allocations come from the device's stream-ordered pool
 * (cudaMallocAsync / cudaFreeAsync on the context's stream) with the release
 * threshold set to "never", so freed blocks stay cached for the next step,
 * allocation is capturable in CUDA graphs, and a steady step reuses the same
 * addresses. CPU: 64-byte aligned malloc. Both count bytes in ctx->mem; the
 * caller passes the size back on free (tensors know their size), so no
 * pointer table is needed.
 *
 * Out of memory is fatal with the numbers a user needs: bytes asked, in use,
 * peak, and what to change.
 */
#ifndef CTRAIN_MEM_H
#define CTRAIN_MEM_H

#include <stddef.h>
#include "ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

void *mem_alloc(Ctx *c, size_t bytes);
void mem_free(Ctx *c, void *p, size_t bytes);
/* Zero n bytes at p on the context's device (async on CUDA). */
void mem_zero(Ctx *c, void *p, size_t bytes);
/* Copy between host and the context's device; these synchronize when reading back. */
void mem_to_device(Ctx *c, void *dst, const void *src_host, size_t bytes);
void mem_to_host(Ctx *c, void *dst_host, const void *src, size_t bytes);
void mem_copy(Ctx *c, void *dst, const void *src, size_t bytes);
/* Host-to-device copy queued on the stream without waiting: src must be
 * pinned (mem_host_pinned) and must not change until the copy has run. */
void mem_to_device_async(Ctx *c, void *dst, const void *src_pinned, size_t bytes);
/* Where the peak came, in words, into buf (len bytes): "backward of OP",
 * "forward, after OP" (in the op recorded after OP, or before the backward
 * once OP, the loss, was recorded) or "outside the forward and backward"
 * (the optimizer, or before any op was recorded). Returns buf. */
const char *mem_peak_place(const Ctx *c, char *buf, size_t len);
/* The peak from now on (and mem.peak_at: where the backward walk is). */
void mem_reset_peak(Ctx *c);
/* Device memory this process holds that mem_alloc did not allocate (the
 * NCCL-registered gradient buffer of train/parallel/dist_regbuf.c): counted in the
 * current and peak figures like mem_alloc's; freed: 0 when it is taken,
 * 1 when it is given back. */
void mem_note_external(Ctx *c, size_t bytes, int freed);
/* *p = v for one f32 in the context's memory, queued in stream order with
 * no host sync (on CUDA the value travels as a kernel argument): how the
 * host hands a per-step scalar such as the learning rate to the device. */
void mem_set_f32(Ctx *c, float *p, float v);

/* Page-locked host memory for overlapped host-to-device copies (plain malloc
 * on CPU-only contexts). */
void *mem_host_pinned(Ctx *c, size_t bytes);
void mem_host_pinned_free(Ctx *c, void *p);

/* "12.3 MiB" style, into buf. */
const char *mem_fmt(char *buf, size_t len, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
