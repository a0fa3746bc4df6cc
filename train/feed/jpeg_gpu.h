/* jpeg_gpu.h — the device side of the image feed: a batch of JPEG files
 * decoded by nvJPEG on the GPU, resampled (crop, resize, flip) and
 * normalised by one kernel straight into an NHWC input tensor; and the same
 * normalisation for images the CPU decoded and resampled (u8 rows uploaded).
 *
 * Shape letters: B batch rows of the output, n images of one call, S output
 * side, H W an image's decoded size.
 *
 * Both paths end the same way (data/resample.h): v = the antialiased
 * resample of the decoded u8 image, u = rs_round_u8(v), then
 *     x[c] = fmaf(u, a[c], b[c]),   a[c] = 1 / (255 std[c]),  b[c] = -mean[c] / std[c]
 * in f32 (one fused multiply-add, on the device for both paths), stored in
 * the output's dtype (f32, or bf16 / f16 rounded to nearest even). So given
 * equal decoded pixels, the GPU and CPU paths give bit-equal inputs;
 * jpeg_gpu_upload_u8 is exact.
 *
 * Use (one batch of the GPU path; B rows of `out`, image i -> row i):
 *     JpegGpuInfo info[n];  JpegGpuBox box[n];  uint8_t fb[n];
 *     jpeg_gpu_probe(g, info, bytes, lens, n);           sizes, and what the GPU takes
 *     box[i] = crop of (info[i].h, info[i].w)            aug_rrc_box -> rs_axis_box, or
 *                                                        the val resize + center crop
 *     jpeg_gpu_decode(g, out, fb, bytes, lens, info, box, n, mean, std, stream, ...);
 *     rows with fb[i] != 0: decode and resample on the CPU into u8 [S,S,3], then
 *     jpeg_gpu_upload_u8(g, out, rows, pixels, m, mean, std, stream, ...);
 * The whole CPU path (--decode cpu) is the last call alone, on a JpegGpu
 * opened with JPEG_GPU_UPLOAD (no nvJPEG needed).
 *
 * Which images the GPU takes (info[i].gpu == JPEG_GPU_TAKEN): a JPEG whose
 * header nvJPEG reads, 1 component (gray: the decoder replicates Y) or 3
 * (4:4:4, 4:2:2, 4:2:0, 4:4:0), at most 2^28 pixels, ending in an EOI
 * marker (within its last 64 bytes), and that nvjpegDecodeBatchedSupported
 * accepts on the backend in use (the hardware engines take baseline
 * Huffman JPEGs only: progressive files go to the CPU there). Not taken
 * (JPEG_GPU_FORMAT): CMYK / YCCK (4 components), 4:1:1, 4:1:0 and unknown
 * sampling, unreadable headers, files cut short (nvJPEG decodes them
 * without an error), other formats. The CPU path decodes those, and
 * reports a broken file by its name. EXIF orientation is not applied by
 * either path (as torchvision's PIL loader).
 * (Measured on an H200 with the test's images; tests/gpu_jpeg.c.)
 *
 * Pixels: nvJPEG is asked to upsample chroma by interpolation
 * (NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, libjpeg's default "fancy"
 * upsampling), so it agrees with libjpeg-turbo's default decode (ISLOW
 * IDCT, fancy upsampling): on an H200, 4:2:0 / 4:2:2 / 4:4:4 / gray files
 * within 1 level on the hardware backend, 3 on GPU hybrid (without the
 * flag: 35 at colour edges, mean 0.6).
 *
 * Backends: JPEG_GPU_AUTO tries NVJPEG_BACKEND_HARDWARE (the JPEG engines of
 * A100 / H100 / H200: nvjpegGetHardwareDecoderInfo reports them) and falls
 * back to NVJPEG_BACKEND_GPU_HYBRID (Huffman decoding on the SMs, for cards
 * without engines: 4090, A6000); JPEG_GPU_HARDWARE / JPEG_GPU_HYBRID ask for
 * one (open fails when it cannot be had); JPEG_GPU_UPLOAD loads nothing and
 * only normalises uploaded u8 rows. jpeg_gpu_stats says which one runs.
 *
 * Memory: the decoded images of one call live in one device buffer from
 * the context's pool (engine/mem.h), sized at open for max_batch images of
 * max_side_hint x max_side_hint (hint <= 0: 512) and packed in call order
 * (each image H W 3 bytes, 256-aligned); an image that finds no room is not
 * taken (JPEG_GPU_NO_ROOM: the CPU decodes it) and the room it needed is in
 * stats.want_bytes: jpeg_gpu_reserve grows the buffer, from the context's
 * thread. Plus the u8 upload staging (max_batch S S 3 bytes), a small
 * table per image and the padding images' scratch (768 bytes an image).
 * nvJPEG's own buffers (device and pinned) come through allocators that
 * count them (stats.lib_*_bytes; the hardware backend allocates through
 * the driver instead: 0 there); they are not in ctx->mem. nvJPEG is
 * called per chroma layout with one call size (train/feed/nvjpeg_batch.h,
 * stats.layouts, stats.padded), so that it never re-sizes its buffers
 * while a step runs.
 *
 * Threads and streams. A JpegGpu is used by one thread at a time. decode
 * and upload_u8 never allocate from the context (mem_alloc is not
 * thread-safe); open, reserve and close do, so those run on the thread
 * that owns the context. decode may run on a feed thread, and should:
 * its host part (parsing every header; nvjpegDecodeBatched's host phase,
 * which on the hybrid backend includes Huffman work for small batches) and
 * the wait for the previous call's decode (nvJPEG's state is reused) are
 * host time the trainer's thread should not spend. All device work of a
 * call is queued on `stream` (the caller's; a cudaStream_t), so the trainer
 * orders it with an event: record one on `stream` after the call, make
 * the compute stream wait on it before the step reads `out`. Nothing here
 * may be captured into a CUDA graph (decode refuses a capturing stream):
 * with --graph, `out` is a buffer of its own and the step's static input
 * takes a device-to-device copy of it (or `out` is the static input and
 * the decode stream waits for the previous step's event before writing).
 * Caller buffers: `bytes` must stay unchanged until the next decode call
 * has returned (it waits for this one's decode); `pixels` of upload_u8 until
 * `stream` has passed the call (pinned memory makes the copy asynchronous).
 *
 * Without CUDA (CUDA=0 builds) every function here fails with "this build
 * has no CUDA".
 */
#ifndef CTRAIN_TRAIN_FEED_JPEG_GPU_H
#define CTRAIN_TRAIN_FEED_JPEG_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "data/resample.h"
#include "engine/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    JPEG_GPU_AUTO = 0,       /* hardware engines if the card has them, else GPU hybrid */
    JPEG_GPU_HARDWARE,       /* NVJPEG_BACKEND_HARDWARE only */
    JPEG_GPU_HYBRID,         /* NVJPEG_BACKEND_GPU_HYBRID only */
    JPEG_GPU_UPLOAD,         /* no nvJPEG: jpeg_gpu_upload_u8 only */
} JpegGpuBackend;

/* Why an image was not taken (fallback[i], info[i].gpu); 0: taken. */
enum {
    JPEG_GPU_TAKEN = 0,
    JPEG_GPU_FORMAT = 1,     /* nvJPEG cannot decode it on this backend */
    JPEG_GPU_NO_ROOM = 2,    /* the decode buffer was full (jpeg_gpu_reserve) */
    JPEG_GPU_FAILED = 3,     /* nvjpegDecodeBatched refused it (a corrupt bitstream) */
    JPEG_GPU_REASONS = 4
};

typedef struct {
    int h, w;                /* decoded size (0 x 0 when the header is unreadable) */
    int components;          /* 1 or 3 (4: CMYK / YCCK) */
    int subsampling;         /* nvJPEG's nvjpegChromaSubsampling_t (-1 unknown) */
    int gpu;                 /* JPEG_GPU_TAKEN, or why not (JPEG_GPU_FORMAT) */
} JpegGpuInfo;

/* The resampling of one image: rows ay, columns ax (data/resample.h), then
 * mirrored left-right when flip. Every axis must lie inside the image:
 * 0 <= lo < hi <= H (ay) and <= W (ax). */
typedef struct {
    RsAxis ay, ax;
    int flip;
} JpegGpuBox;

typedef struct {
    JpegGpuBackend backend;          /* the one in use */
    int version[3];                  /* nvJPEG's (0s when none) */
    unsigned hw_engines, hw_cores;   /* hardware backend: engines, cores each */
    int chroma_interpolated;         /* 1: chroma upsampled by interpolation (as libjpeg) */
    int planes;                      /* 1: YUV planes from nvJPEG, converted by our kernel */
    long long calls, images, taken;  /* decode calls, images offered, decoded on the GPU */
    long long not_taken[JPEG_GPU_REASONS];   /* by reason (index 0 unused) */
    long long failed_batches;        /* nvjpegDecodeBatched errors (then split and retried) */
    long long padded;                /* dummy images that kept nvJPEG's calls one size */
    int layouts;                     /* nvJPEG decoders made: one per chroma layout seen */
    long long uploaded;              /* images through jpeg_gpu_upload_u8 */
    double host_s;                   /* wall time inside decode (host work and waits) */
    double device_s;                 /* device time of the decode calls' nvJPEG part (to the
                                        table's upload, before any out_after wait) */
    size_t buffer_bytes;             /* decode buffer + staging, in ctx->mem */
    size_t want_bytes;               /* decode buffer a NO_ROOM call needed (0: none) */
    size_t lib_device_bytes, lib_pinned_bytes;   /* held by nvJPEG itself now */
    char last_error[256];            /* the last failed batch's nvJPEG status ("" none) */
} JpegGpuStats;

typedef struct JpegGpu JpegGpu;

/* A decoder for up to max_batch images a call and u8 uploads of side S
 * (`size`), on c's device (a CUDA context). NULL with the reason in err
 * (no CUDA, nvJPEG missing: nvjpeg_available's line, the backend asked for
 * is not there). */
JpegGpu *jpeg_gpu_open(Ctx *c, int max_batch, int size, int max_side_hint, JpegGpuBackend pref,
                       char *err, size_t errlen);
/* Waits for the device work queued by g, frees everything (NULL is fine). */
void jpeg_gpu_close(JpegGpu *g);
/* 1: nvJPEG writes 4:2:0 images as their Y, Cb, Cr planes and the
 * resample kernel filters chroma at its own resolution (resample.h's rule
 * on the half-size axes, rs_axis_scaled by 2) and converts YCbCr to RGB
 * itself (JFIF's full-range matrix), so no colour-conversion kernel of
 * nvJPEG's runs on the SMs; other layouts are then not taken
 * (JPEG_GPU_FORMAT: the CPU decodes them). At step 1 the chroma filter is
 * libjpeg's "fancy" upsampling (3/4, 1/4). Starts from CTRAIN_JPEG_PLANES;
 * set between calls, from the thread that uses g (tests). */
void jpeg_gpu_set_planes(JpegGpu *g, int on);
/* nvJPEG's calls padded to n images (1..max_batch; default max_batch), a
 * call of more split (train/feed/nvjpeg_batch.h: every call one size). The
 * feed opens its decoders for the training batch and needs none (its
 * evaluation goes in pieces of it); tests split calls with it. Between
 * decode calls, from the thread that uses g. */
void jpeg_gpu_set_call_size(JpegGpu *g, int n);
/* The next jpeg_gpu_decode's stream waits for `event` (a cudaEvent_t; NULL:
 * none) after nvJPEG's calls and before its first write to out, once. Why:
 * nvJPEG's hardware decoder waits on the host, image by image, for its own
 * work, which is ordered after everything queued on the stream before the
 * call; a wait for out's previous reader queued there first (the training
 * step that copies the staging buffer) made every decode call wait on the
 * host for the step, and the decode threads could never run ahead of it
 * (docs/kernels.md). nvJPEG writes only g's own decode buffer, so only the
 * resample (and, after it on the stream, the caller's uploads into out)
 * need the event. One call deep: the next call's nvJPEG work follows this
 * call's resample on the stream (both use g's one decode buffer), so it
 * waits for the event in turn; a decode thread gains a batch of lead.
 * Between decode calls, from the thread that uses g. */
void jpeg_gpu_out_after(JpegGpu *g, void *event);

/* Headers of n images: sizes, components, and what the GPU takes. Host
 * only (nvJPEG's header parser); no device work. Returns the number taken. */
int jpeg_gpu_probe(JpegGpu *g, JpegGpuInfo *info, const uint8_t *const *bytes,
                   const size_t *lens, int n);

/* Decode, resample and normalise n <= max_batch images into rows 0..n-1 of
 * out (f32 / bf16 / f16 [B >= n, S, S, 3] on the device), queued on stream.
 * info: jpeg_gpu_probe's for these bytes, or NULL (probed here; the boxes
 * must then fit the images anyway). fallback[i]: 0 when row i was written,
 * else why not (JPEG_GPU_FORMAT / NO_ROOM / FAILED): the caller fills that
 * row (jpeg_gpu_upload_u8). Rows not taken are left as they were.
 * 0, or -1 with err for a call that cannot work (shapes, a box outside its
 * image, a CUDA error, a capturing stream, an upload-only decoder). */
int jpeg_gpu_decode(JpegGpu *g, Tensor *out, uint8_t *fallback, const uint8_t *const *bytes,
                    const size_t *lens, const JpegGpuInfo *info, const JpegGpuBox *boxes, int n,
                    const float mean[3], const float std[3], void *stream, char *err,
                    size_t errlen);

/* Rows rows[k] of out (rows NULL: rows 0..n-1) = the normalised u8 images
 * pixels[k] (u8 [n, S, S, 3] on the host, pinned for an asynchronous copy;
 * S = out's side <= size), queued on stream. 0, or -1 with err. */
int jpeg_gpu_upload_u8(JpegGpu *g, Tensor *out, const int *rows, const uint8_t *pixels, int n,
                       const float mean[3], const float std[3], void *stream, char *err,
                       size_t errlen);

/* Grow the decode buffer to at least `bytes` (e.g. stats.want_bytes). From
 * the context's thread, between steps, not while a graph is captured; waits
 * for g's queued work. 0, or -1 with err. */
int jpeg_gpu_reserve(JpegGpu *g, size_t bytes, char *err, size_t errlen);

/* Counters so far (device_s counts calls whose work has finished). */
void jpeg_gpu_stats(const JpegGpu *g, JpegGpuStats *s);
/* "hardware", "gpu-hybrid", "upload", "auto". */
const char *jpeg_gpu_backend_name(JpegGpuBackend b);

/* a[c] = 1 / (255 std[c]), b[c] = -mean[c] / std[c] in f32: the normalisation
 * x = fmaf(u, a, b) both kernels apply (host reference: the same fmaf). */
void jpeg_gpu_norm_coeffs(float a[3], float b[3], const float mean[3], const float std[3]);

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

#ifdef __CUDACC__
#define JG_FN __host__ __device__ static inline
#else
#define JG_FN static inline
#endif

/* Where a 4:2:0 image's planes sit in the decode buffer (planes path):
 * Y (h x w, pitch w) at 0, Cb and Cr (ceil(h/2) x ceil(w/2), pitch
 * ceil(w/2)) at *cb and *cr, every plane starting 256-byte aligned. Returns
 * the bytes the image takes. Shared by the decode's buffer layout and the
 * kernel's reads. */
JG_FN size_t jpeg_planes_layout(int h, int w, size_t *cb, size_t *cr)
{
    const size_t y = (size_t)h * (size_t)w, c = (size_t)((h + 1) / 2) * (size_t)((w + 1) / 2);
    *cb = (y + 255) / 256 * 256;
    *cr = *cb + (c + 255) / 256 * 256;
    return *cr + c;
}

/* The chroma axis of a luma axis a (resample.h) for a 4:2:0 plane of nc
 * samples: every coordinate halved (a chroma sample sits at the centre of
 * its 2 x 2 luma block) and the window widened to the chroma samples that
 * libjpeg's fancy upsampling reads for luma pixels [lo, hi): [floor((lo -
 * 1) / 2), floor(hi / 2) + 1), clamped to the plane. At step 1 the filter
 * then gives that upsampling's weights (3/4, 1/4) everywhere, edges of the
 * crop included. */
JG_FN RsAxis jpeg_chroma_axis(RsAxis a, int nc)
{
    RsAxis c;
    c.start = a.start * 0.5f;
    c.step = a.step * 0.5f;
    c.lo = a.lo >= 1 ? (a.lo - 1) / 2 : 0;
    c.hi = a.hi / 2 + 1 < nc ? a.hi / 2 + 1 : nc;
    if (c.hi <= c.lo) c.hi = c.lo + 1 <= nc ? c.lo + 1 : nc;
    return c;
}

/* One decoded image as the resample kernel reads it: interleaved RGB u8 at
 * src + offset, pitch 3 w, written to output row `row`. */
typedef struct {
    uint64_t offset;
    int32_t h, w;
    int32_t row;
    int32_t flip;
    RsAxis ay, ax;
} JpegGpuImage;

/* The kernels (jpeg_gpu.cu). out: dt [B, S, S, 3]; img: n entries in device
 * memory; a, b: jpeg_gpu_norm_coeffs. */
void jpeg_gpu_resample_cuda(void *out, DType dt, int S, const uint8_t *src,
                            const JpegGpuImage *img, int n, const float a[3], const float b[3],
                            cudaStream_t st);
/* The same from 4:2:0 planes (jpeg_gpu_set_planes) at src + offset, laid
 * out as jpeg_planes_layout says. */
void jpeg_gpu_resample_planes_cuda(void *out, DType dt, int S, const uint8_t *src,
                                   const JpegGpuImage *img, int n, const float a[3],
                                   const float b[3], cudaStream_t st);
/* out row rows[k] (rows NULL: k) = normalised src u8 [n, S, S, 3]; rows in
 * device memory. */
void jpeg_gpu_normalize_cuda(void *out, DType dt, int S, const uint8_t *src, const int32_t *rows,
                             int n, const float a[3], const float b[3], cudaStream_t st);
#endif

#ifdef __cplusplus
}
#endif
#endif
