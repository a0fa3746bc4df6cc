/* feed_jpeg.h — the GPU decode path of the ImageFolder feed (--decode gpu):
 * nvJPEG decodes each batch on the device, on a stream and a thread of its
 * own, one batch ahead of the step.
 *
 * One training batch:
 *   loader workers   read the file, its header (img_header), draw the crop
 *                    (aug_train_axes: the same pure function of (seed,
 *                    epoch, index) as the CPU path) and decode at once on
 *                    the CPU the kinds the GPU will not take
 *                    (jpipe_cpu_kinds: PNG, CMYK, and progressive files on
 *                    the hardware engines), as u8 rows; the rest keep their
 *                    bytes (data/loader.h, cfg.encoded)
 *   decode thread    owns a JpegGpu (train/feed/jpeg_gpu.h): probe +
 *                    jpeg_gpu_decode of the kept files into a free staging
 *                    buffer k (f32 [B, S, S, 3] and labels i32 [B]) on its
 *                    stream;
 *                    a file nvJPEG refuses there is decoded on the CPU
 *                    (src_encoded_decode); every CPU row (moved to the
 *                    front of the slot, in row order) goes up through
 *                    jpeg_gpu_upload_u8; an event `ready[k]` closes the
 *                    batch. With one thread (CTRAIN_JPEG_DECODERS=1) two
 *                    staging buffers alternate, so batch b + 1 decodes
 *                    while the step of batch b runs; with T threads, each
 *                    with its own decoder and stream, T batches decode at
 *                    once into T + 1 buffers (a call blocks until the
 *                    SMs run its kernels, so T calls in flight deliver
 *                    nearly T times as much beside the step). A thread
 *                    takes a free buffer, then the loader's next batch.
 *   jpipe_next       (the trainer's thread) waits for staging k to hold
 *                    batch (epoch, b), makes the context's stream wait on
 *                    ready[k], copies staging -> the static input tensors
 *                    (device to device: a --graph replay keeps reading the
 *                    same addresses) and records `consumed[k]`, which the
 *                    decode thread's stream waits on before it writes k
 *                    again. Nothing here is captured into a graph.
 * At an epoch's end the first decode thread to see it starts the next
 * epoch (the trainer's usual order); a jump (resume, another epoch) parks
 * the threads and restarts the loader.
 * Evaluation (jpipe_eval_next) runs the same decode on the caller's thread
 * and stream, synchronously, with the evaluation axes (aug_val_axes), in
 * pieces of at most B images.
 *
 * Errors: a file that fails (on the CPU, in a worker or in the decode
 * thread) stops the run at the next jpipe_next with the message naming it
 * and the hint; nothing is skipped.
 *
 * Device memory the path holds (said once, LOG_I, after the first batch):
 * the staging buffers, (T + 1) x (B S S 3 x 4 + B x 4) bytes (ctx->mem);
 * per thread the decoder's buffer (B images of 512 x 512 x 3 at first, grown
 * by jpeg_gpu_reserve from the trainer's thread when an image finds no
 * room) and its u8 upload buffer (B S S 3 bytes), both in
 * ctx->mem; nvJPEG's own buffers (cudaMalloc, counted by jpeg_gpu_stats).
 *
 * Statistics (jpipe_stats): images handed over, their CPU-decoded count,
 * the time jpipe_next blocked for a batch, the decode threads' busy time
 * divided by T (so images / busy_s is what they can deliver together).
 *
 * CPU-only builds: jpipe_open fails ("this build has no CUDA").
 *
 * Shape letters: B batch, S image side.
 */
#ifndef CTRAIN_TRAIN_FEED_JPEG_H
#define CTRAIN_TRAIN_FEED_JPEG_H

#include <stddef.h>
#include <stdint.h>
#include "data/loader.h"
#include "feed_types.h"

typedef struct JpegPipe JpegPipe;

typedef struct {
    uint64_t images;          /* training images handed over by jpipe_next */
    uint64_t cpu_fallback;    /* of those, decoded on the CPU */
    double wait_s;            /* jpipe_next blocked waiting for a batch */
    double busy_s;            /* the decode threads' time decoding batches / T */
} JpegPipeStats;

/* The decoder (nvJPEG, hardware engines when the card has them) for
 * batches of `batch` training images of side S (evaluation batches of any
 * size are decoded in pieces of `batch`: the decoders' buffers are sized for
 * it), its stream and staging, on c (a CUDA context). NULL with the reason
 * in err (nvJPEG missing, no backend opens). */
JpegPipe *jpipe_open(Ctx *c, int batch, int S, const float mean[3],
                     const float std[3], char *err, size_t errlen);
/* The SRC_CPU_* kinds the loaders should decode at once. */
unsigned jpipe_cpu_kinds(const JpegPipe *p);
/* The backend in use ("hardware", "gpu-hybrid"). */
const char *jpipe_backend(const JpegPipe *p);
/* The decode threads (CTRAIN_JPEG_DECODERS); each holds two loader batches. */
int jpipe_decoders(const JpegPipe *p);
/* Start the decode thread on the training loader L (cfg.encoded, the
 * cpu kinds above, batch B); it waits for the first jpipe_next. */
void jpipe_start(JpegPipe *p, Loader *L);
/* x f32 [B, S, S, 3], y i32 [B] (device) = training batch b of epoch,
 * queued on c's stream. Fatal when a file failed. */
void jpipe_next(JpegPipe *p, Ctx *c, uint64_t epoch, uint32_t b, Tensor *x, Tensor *y);
/* The next batch of the started evaluation loader V into rows 0..n-1 of
 * x, y, done when it returns (synchronous); n, or 0 at the end. */
int jpipe_eval_next(JpegPipe *p, Ctx *c, Loader *V, Tensor *x, Tensor *y);
void jpipe_stats(JpegPipe *p, JpegPipeStats *s);
/* Stops the thread (before the loaders stop), frees everything. */
void jpipe_close(JpegPipe *p);

#endif
