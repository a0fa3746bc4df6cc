/* feed_stage.h — what every feed kind shares: the double-buffered pinned
 * staging of host batches, and the data-parallel world size.
 *
 * Staging: a feed fills a host batch in pinned memory and queues its
 * host-to-device copies into the static input tensors on the context's
 * stream, then returns while the copies (and the step before) run. Two sets
 * of buffers alternate; before set k is refilled, the host waits on the
 * event recorded after set k's last copies, so no buffer is overwritten
 * while a copy still reads it. One batch:
 *
 *   int k = feed_stage_next(&st);           flip to the other set, wait for its copies
 *   ... fill st.buf[k][0 .. n) ...
 *   feed_stage_send(&st, c, k, f->in, NULL, n);   queue the copies, record set k's event
 *
 * On CPU contexts the buffers are plain malloc, the copies are memcpy and
 * the waits and events do nothing.
 */
#ifndef CTRAIN_TRAIN_FEED_STAGE_H
#define CTRAIN_TRAIN_FEED_STAGE_H

#include <stddef.h>
#include "feed_types.h"

#define FEED_STAGE_MAX 5       /* buffers in one set (BERT MLM: five inputs) */

typedef struct FeedStage {
    void *buf[2][FEED_STAGE_MAX];  /* two sets of n pinned host buffers */
    int n;
    int k;                         /* the set filled last */
    int cuda;
#ifdef CTRAIN_CUDA
    cudaEvent_t done[2];           /* recorded after set k's copies were queued */
#endif
} FeedStage;

/* Two sets of n pinned buffers, buffer i of bytes[i] bytes, and one event a
 * set on CUDA. n = 0: events only, for host batches in someone else's
 * pinned memory (the loader's slots; feed_stage_send_from). */
void feed_stage_init(FeedStage *s, Ctx *c, int n, const size_t *bytes);
/* Flip to the other set and wait until its previous copies have run;
 * returns it (0 or 1). */
int feed_stage_next(FeedStage *s);
/* The two halves of feed_stage_next, for a feed that waits only when the
 * set still holds something (the loader's held batches). */
int feed_stage_flip(FeedStage *s);
void feed_stage_wait(FeedStage *s, int k);
/* Queue dst[i] <- buffer i of set k (bytes[i] bytes; bytes NULL: each
 * dst's whole size) for i < n, in order, then record set k's event. */
void feed_stage_send(FeedStage *s, Ctx *c, int k, Tensor *const *dst, const size_t *bytes,
                     int n);
/* The same from other pinned memory src[0 .. n). */
void feed_stage_send_from(FeedStage *s, Ctx *c, int k, Tensor *const *dst,
                          const void *const *src, const size_t *bytes, int n);
/* The copies alone, no event (a caller that synchronizes right after). */
void feed_stage_copy(Ctx *c, Tensor *const *dst, const void *const *src, const size_t *bytes,
                     int n);
/* Call after the context has synchronized (no copy may still read). */
void feed_stage_free(FeedStage *s, Ctx *c);

/* The data-parallel world size the feeds split for (1 when alone). */
int feed_world(const Ctx *c);

#endif
