/* nvjpeg_batch.h — nvJPEG's batched decoder as jpeg_gpu.c drives it: one
 * decoder (handle + state) per chroma layout, each always called with the
 * same number of images.
 *
 * Why. nvjpegDecodeBatched sizes its internal buffers for the batch it is
 * given; when a call's mix of layouts or its size differs from what the
 * buffers were made for, it frees and remakes them, and cuMemFree waits
 * for all work queued on the device. Beside a training step that is a wait
 * for the whole step, every batch. Measured on an H200 (nvJPEG 13.0.1,
 * hardware backend, scripts/jpeg_gpu_probe.c's images, 8 calls of 256):
 *     256 x 4:2:0, every call                      0 cuMemFree
 *     240 x 4:2:0 + 8 gray + 8 x 4:4:4, every call 448 cuMemFree (56 a call)
 *     the same, one decoder per layout             0 cuMemFree
 * and ResNet-50 bs 256 on a JPEG folder with a few gray / 4:4:4 files ran at
 * 74% of its synthetic-data rate, the decode thread blocked in cuMemFree for
 * ~36 ms of each 50 ms step (a CUPTI trace of the runtime and driver calls).
 *
 * So: a call's images are grouped by layout (4:2:0, 4:2:2, 4:4:4, 4:4:0,
 * gray); each group goes to its layout's decoder in calls of exactly
 * call_n images, the rest of a call filled with a 16 x 16 JPEG of that
 * layout (made here with libjpeg at open), decoded into a scratch area and
 * dropped. The 4:2:0 decoder (what cameras and PIL write) is made at open;
 * the others when their first image comes. A padded image costs the
 * engines a few microseconds.
 *
 * A failed call is split in halves and each retried, down to single images
 * (those calls are smaller than call_n: a corrupt file costs a re-sizing,
 * once); an image that fails alone is marked failed.
 */
#ifndef CTRAIN_TRAIN_FEED_NVJPEG_BATCH_H
#define CTRAIN_TRAIN_FEED_NVJPEG_BATCH_H

#ifdef CTRAIN_CUDA

#include <stddef.h>
#include <stdint.h>
#include "nvjpeg_lib.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { NVJB_420, NVJB_422, NVJB_444, NVJB_440, NVJB_GRAY, NVJB_LAYOUTS } NvjbLayout;

/* Bytes of scratch device memory nvjb_open needs for call_n padded images. */
#define NVJB_PAD_BYTES(call_n) ((size_t)(call_n) * 16 * 16 * 3)

typedef struct {
    long long failed_batches;   /* nvjpegDecodeBatched errors (then split and retried) */
    long long padded;           /* dummy images decoded to keep call sizes fixed */
    int layouts_open;           /* decoders made so far */
    int chroma_interpolated;    /* 1: NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION taken */
    char last_error[256];       /* the last failed call's status ("" none) */
} NvjbStats;

typedef struct NvjBatch NvjBatch;

/* Decoders on backend b for calls of call_n images (also the most a call
 * takes: nvjb_set_call_size may lower the size later), the 4:2:0 one made now
 * (its buffers preallocated for hint x hint images where the backend
 * offers it). da, pa: nvJPEG's allocators (copied). pad: NVJB_PAD_BYTES
 * of device memory for the dummies, kept by the caller. NULL with why. */
NvjBatch *nvjb_open(const NvjpegLib *L, nvjpegBackend_t b, int call_n, int hint,
                    const nvjpegDevAllocatorV2_t *da, const nvjpegPinnedAllocatorV2_t *pa,
                    unsigned char *pad, char *why, size_t len);
void nvjb_close(NvjBatch *B);
/* Calls padded to n images from now on (1 <= n <= nvjb_open's call_n), so
 * that a caller's usual batch smaller than the largest it opened for is not
 * padded to it. */
void nvjb_set_call_size(NvjBatch *B, int n);
int nvjb_call_size(const NvjBatch *B);
/* The 4:2:0 decoder's handle (header parsing, engine queries). */
nvjpegHandle_t nvjb_handle(const NvjBatch *B);
/* The layout of a header (components, nvJPEG's subsampling); -1: none of them. */
int nvjb_layout(int components, int subsampling);
/* The output format from now on: NVJPEG_OUTPUT_RGBI (the default: what
 * jpeg_gpu.c resamples) or NVJPEG_OUTPUT_YUV (the planes as coded; for
 * 4:2:0, Y w x h then Cb and Cr ceil(w/2) x ceil(h/2) in dst's channels
 * 0..2). scripts/jpeg_gpu_probe.c compares the two beside a busy GPU: the
 * planes need none of nvJPEG's colour-conversion kernels. */
void nvjb_set_output(NvjBatch *B, int format);
/* Decode n <= the call size images of one layout to the output format at
 * dst[k], queued on s (nvJPEG returns once its host part is done).
 * failed[k] = 1 for an image that failed alone (else 0). */
void nvjb_decode(NvjBatch *B, int layout, const unsigned char *const *bytes, const size_t *lens,
                 const nvjpegImage_t *dst, int n, uint8_t *failed, cudaStream_t s);
void nvjb_stats(const NvjBatch *B, NvjbStats *st);

#ifdef __cplusplus
}
#endif
#endif /* CTRAIN_CUDA */
#endif
