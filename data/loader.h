/* loader.h — the batch loader: worker threads turn an ImageSource into
 * batches of rows [B, S, S, 3] (f32 x, or u8 pixels for a SRC_U8 source:
 * image_source.h) + y i32 [B], in a ring of K slots whose memory the
 * caller provides (the trainer: pinned host memory, so the host-to-device
 * copy is asynchronous; tests: malloc). With cfg.encoded (a SRC_U8 source,
 * the GPU decoder's feed) the workers do the host's part of each sample
 * (src_get_u8 with SrcEncoded: file bytes, header, crop) and decode at once
 * only the kinds in cfg.cpu_kinds; the batch's enc[r] says which rows hold
 * pixels (enc[r].bytes NULL) and which hold a file for the GPU.
 *
 * Order. Epoch e visits the samples in the order
 *   train:  perm = shuffle_perm(n, seed, e)  (data/shuffle.h), and with
 *           world > 1 only this rank's share, shuffle_shard(perm, rank, world)
 *           (n becomes n / world: every rank has as many batches)
 *   eval:   0, 1, ..., n-1
 * and batch i of the epoch holds perm[i*B .. i*B + B). Training drops the
 * last incomplete batch (n / B batches); evaluation keeps it (ceil(n / B)
 * batches; LoaderBatch.n says how many rows it holds). Each sample's pixels
 * are a pure function of (seed, epoch, index) (data/augment.h), and a row
 * is written only by the sample that belongs there, so the batches are
 * bit-identical for any number of workers and any timing.
 *
 * Use:
 *   Loader *L = loader_init(&src, &cfg);
 *   for (epoch ...) {
 *       loader_start(L, epoch, start_batch);  // 0, or the batch to resume at
 *       LoaderBatch *b;
 *       while ((b = loader_next(L))) {        // blocks; NULL at epoch end
 *           ... copy b->x, b->y (async) ...
 *           loader_release(L, b);             // once the copy has completed
 *       }
 *   }
 *   loader_free(L);
 * The consumer may hold up to K - 1 batches at once. loader_start may be
 * called before the epoch is consumed (it cancels the rest); batches held
 * then stay valid until released (so the next epoch can start while the
 * last batch of this one is still being copied). Resuming at (epoch,
 * batch) — the position a training checkpoint stores — gives the same
 * batches as the uninterrupted run from that point on.
 *
 * Errors. A sample that fails (an image that does not decode) stops the
 * epoch: loader_next exits through ct_fatal_hint with the source's message
 * (naming the file and the reason) and a hint. Unreadable images are not skipped: skipping would
 * change the batches, and so the run, silently; fix or remove the file.
 * loader_try_next returns the message instead, for callers that clean up.
 * A failed loader stays failed (every later loader_next reports it).
 *
 * Workers claim a few rows of the oldest unfinished batch at a time, so all
 * of them work on the batch the consumer waits for next. Statistics
 * (loader_stats): images made, the rate over the time the workers had work
 * (images/s delivered), the rate the workers could sustain if never held
 * back by full slots (capacity), and the time the consumer spent blocked in
 * loader_next (large: data is the bottleneck).
 *
 * Shape letters: N samples, B batch, S side, K slots, W workers.
 */
#ifndef CTRAIN_DATA_LOADER_H
#define CTRAIN_DATA_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "image_source.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Slot memory: alloc(bytes, user) returns memory or NULL; free releases it. */
typedef void *(*LoaderAllocFn)(size_t bytes, void *user);
typedef void (*LoaderFreeFn)(void *p, void *user);

#define LOADER_DEFAULT_SLOTS 4

typedef struct {
    int batch;            /* B */
    int workers;          /* W >= 1 */
    int slots;            /* K >= 2; 0: LOADER_DEFAULT_SLOTS */
    int train;            /* 1: shuffle, training transform, drop last; 0: eval */
    uint64_t seed;        /* shuffle and augmentation */
    uint32_t rank, world; /* data parallel, train only: this rank's share of each epoch's
                             permutation (shuffle_shard); world 0 or 1: all of it */
    int encoded;          /* SRC_U8 sources: the GPU decoder's host part (src_get_u8 with
                             SrcEncoded), decoding only cpu_kinds at once */
    unsigned cpu_kinds;   /* SRC_CPU_* bits, with encoded */
    LoaderAllocFn alloc;  /* NULL: malloc */
    LoaderFreeFn free;    /* NULL: free */
    void *alloc_user;
} LoaderConfig;

typedef struct {
    float *x;             /* f32 [B, S, S, 3] of a SRC_F32 source (else NULL), rows >= n
                             undefined */
    uint8_t *u8;          /* u8 [B, S, S, 3] of a SRC_U8 source (else NULL); with enc,
                             row r is written only when enc[r].bytes is NULL */
    SrcEncoded *enc;      /* [B] with cfg.encoded (else NULL); the bytes are the loader's
                             (freed at loader_release) */
    int32_t *y;           /* i32 [B] */
    uint32_t *index;      /* [B] the samples' indices in the source */
    int n;                /* rows: B, or fewer in eval's last batch */
    uint64_t epoch;
    uint32_t batch;       /* position in the epoch, 0 .. loader_batches - 1 */
} LoaderBatch;

typedef struct {
    uint64_t images;       /* images made since loader_init */
    uint64_t batches;      /* batches handed to the consumer */
    double active_s;       /* wall time the workers had an epoch to fill */
    double busy_s;         /* time inside src_get, summed over workers */
    double wait_s;         /* consumer time blocked in loader_next */
    double images_per_s;   /* images / active_s */
    double capacity_per_s; /* images / busy_s * W */
} LoaderStats;

typedef struct Loader Loader;

/* Start W workers (idle until loader_start) and allocate K slots. Bad
 * configuration is fatal. */
Loader *loader_init(const ImageSource *src, const LoaderConfig *cfg);

/* Batches per epoch: n / B (train) or ceil(n / B) (eval). */
uint32_t loader_batches(const Loader *L);

/* Begin epoch at batch start_batch (<= loader_batches), cancelling what is
 * left of the previous one. */
void loader_start(Loader *L, uint64_t epoch, uint32_t start_batch);

/* The epoch's next batch in order, blocking until it is ready; NULL at the
 * epoch's end. A failed sample is fatal (see above). */
LoaderBatch *loader_next(Loader *L);

/* As loader_next, but a failed sample returns the source's negative status
 * (an ImgfStatus for an ImageFolder: imagefolder_hint says what to do) with
 * the message in err; 0 with *out the batch or NULL at epoch end. */
int loader_try_next(Loader *L, LoaderBatch **out, char *err, size_t errlen);

/* The batch's slot may be refilled (its memory is no longer read). */
void loader_release(Loader *L, LoaderBatch *b);

void loader_stats(Loader *L, LoaderStats *st);

/* Cancel the epoch, stop and join the workers (idempotent). */
void loader_stop(Loader *L);

/* loader_stop, then free the slots through cfg.free. */
void loader_free(Loader *L);

#ifdef __cplusplus
}
#endif
#endif
