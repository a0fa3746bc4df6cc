/* nvjpeg_lib.h — nvJPEG, loaded at run time with dlopen, so the build needs
 * neither its header nor its library (the CI machine's CUDA toolkit has
 * neither; the GPU machine's ships libnvjpeg.so.13 beside libcudart).
 *
 * The library: CTRAIN_NVJPEG_LIB when set (that file only), else the first of
 * libnvjpeg.so.13, .so.12, .so.11, .so that the dynamic loader finds (the
 * binary's run path holds the CUDA toolkit's lib64). Loaded once per
 * process (nvJPEG's handles are per caller; the function table is shared).
 *
 * The declarations below are this project's own, the subset of nvjpeg.h
 * (CUDA 11 to 13, unchanged in that span) that the batched decoder of
 * jpeg_gpu.c uses, mirroring its ABI: status, backend, subsampling and
 * output format are C enums (int), handles are opaque pointers,
 * nvjpegImage_t is four channel pointers then four pitches, the V2
 * allocators are two function pointers then a context pointer. Never
 * include NVIDIA's nvjpeg.h beside this header.
 *
 * A missing library is a state, not an error: nvjpeg_available() says why,
 * in one line, and the caller decodes on the CPU (the hint to print with it:
 * NVJPEG_HINT).
 */
#ifndef CTRAIN_TRAIN_FEED_NVJPEG_LIB_H
#define CTRAIN_TRAIN_FEED_NVJPEG_LIB_H

#include <stddef.h>

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define NVJPEG_HINT "install the CUDA toolkit's nvJPEG (libnvjpeg.so.13) or set CTRAIN_NVJPEG_LIB to " \
                    "its path; --decode cpu decodes on the CPU without it"

/* 1 when nvJPEG is loaded and has every function jpeg_gpu.c needs; 0 with
 * the reason in reason[len] (e.g. "libnvjpeg.so.13 not found: ..."; "this
 * build has no CUDA ..." in a CPU-only build). reason may be NULL. */
int nvjpeg_available(char *reason, size_t len);

#ifdef CTRAIN_CUDA

/* ---- nvjpeg.h's types, as its ABI lays them out ---- */
typedef int nvjpegStatus_t;                     /* NVJPEG_STATUS_SUCCESS = 0 */
typedef int nvjpegBackend_t;
typedef int nvjpegChromaSubsampling_t;
typedef int nvjpegOutputFormat_t;
typedef struct nvjpegHandle *nvjpegHandle_t;
typedef struct nvjpegJpegState *nvjpegJpegState_t;
typedef struct nvjpegJpegStream *nvjpegJpegStream_t;

enum {
    NVJPEG_STATUS_SUCCESS = 0, NVJPEG_STATUS_NOT_INITIALIZED = 1,
    NVJPEG_STATUS_INVALID_PARAMETER = 2, NVJPEG_STATUS_BAD_JPEG = 3,
    NVJPEG_STATUS_JPEG_NOT_SUPPORTED = 4, NVJPEG_STATUS_ALLOCATOR_FAILURE = 5,
    NVJPEG_STATUS_EXECUTION_FAILED = 6, NVJPEG_STATUS_ARCH_MISMATCH = 7,
    NVJPEG_STATUS_INTERNAL_ERROR = 8, NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED = 9,
    NVJPEG_STATUS_INCOMPLETE_BITSTREAM = 10
};
enum { NVJPEG_BACKEND_DEFAULT = 0, NVJPEG_BACKEND_HYBRID = 1, NVJPEG_BACKEND_GPU_HYBRID = 2,
       NVJPEG_BACKEND_HARDWARE = 3 };
enum { NVJPEG_CSS_444 = 0, NVJPEG_CSS_422 = 1, NVJPEG_CSS_420 = 2, NVJPEG_CSS_440 = 3,
       NVJPEG_CSS_411 = 4, NVJPEG_CSS_410 = 5, NVJPEG_CSS_GRAY = 6, NVJPEG_CSS_410V = 7,
       NVJPEG_CSS_UNKNOWN = -1 };
enum { NVJPEG_OUTPUT_YUV = 1,                  /* the planes as coded: Y, then Cb, Cr */
       NVJPEG_OUTPUT_RGBI = 5 };                /* interleaved RGB, one plane */
#define NVJPEG_MAX_COMPONENT 4
#define NVJPEG_FLAGS_DEFAULT 0u
#define NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION (1u << 5)   /* CUDA 12.x on */

typedef struct {
    unsigned char *channel[NVJPEG_MAX_COMPONENT];
    size_t pitch[NVJPEG_MAX_COMPONENT];
} nvjpegImage_t;

/* The V1 allocators (nvjpegCreateEx): cudaMalloc / cudaHostAlloc shaped. */
typedef struct {
    int (*dev_malloc)(void **ptr, size_t size);
    int (*dev_free)(void *ptr);
} nvjpegDevAllocator_t;
typedef struct {
    int (*pinned_malloc)(void **ptr, size_t size, unsigned int flags);
    int (*pinned_free)(void *ptr);
} nvjpegPinnedAllocator_t;
/* The V2 allocators (nvjpegCreateExV2): a context and the size on free, so
 * the bytes nvJPEG holds can be counted. Return 0 on success. */
typedef struct {
    int (*dev_malloc)(void *ctx, void **ptr, size_t size, cudaStream_t stream);
    int (*dev_free)(void *ctx, void *ptr, size_t size, cudaStream_t stream);
    void *dev_ctx;
} nvjpegDevAllocatorV2_t;
typedef struct {
    int (*pinned_malloc)(void *ctx, void **ptr, size_t size, cudaStream_t stream);
    int (*pinned_free)(void *ctx, void *ptr, size_t size, cudaStream_t stream);
    void *pinned_ctx;
} nvjpegPinnedAllocatorV2_t;

/* The function table. Required: every pointer not marked optional (NULL
 * when the loaded library lacks it). */
typedef struct NvjpegLib {
    const char *path;          /* the file loaded */
    int version[3];            /* major, minor, patch (0 0 0 when unknown) */
    nvjpegStatus_t (*create_ex)(nvjpegBackend_t, nvjpegDevAllocator_t *, nvjpegPinnedAllocator_t *,
                                unsigned int flags, nvjpegHandle_t *);
    nvjpegStatus_t (*create_ex_v2)(nvjpegBackend_t, nvjpegDevAllocatorV2_t *,
                                   nvjpegPinnedAllocatorV2_t *, unsigned int flags,
                                   nvjpegHandle_t *);                          /* optional */
    nvjpegStatus_t (*destroy)(nvjpegHandle_t);
    nvjpegStatus_t (*hw_decoder_info)(nvjpegHandle_t, unsigned int *engines,
                                      unsigned int *cores_per_engine);         /* optional */
    nvjpegStatus_t (*state_create)(nvjpegHandle_t, nvjpegJpegState_t *);
    nvjpegStatus_t (*state_destroy)(nvjpegJpegState_t);
    nvjpegStatus_t (*get_image_info)(nvjpegHandle_t, const unsigned char *data, size_t len,
                                     int *components, nvjpegChromaSubsampling_t *,
                                     int *widths, int *heights);
    nvjpegStatus_t (*batched_initialize)(nvjpegHandle_t, nvjpegJpegState_t, int batch_size,
                                         int max_cpu_threads, nvjpegOutputFormat_t);
    nvjpegStatus_t (*batched_decode)(nvjpegHandle_t, nvjpegJpegState_t,
                                     const unsigned char *const *data, const size_t *lens,
                                     nvjpegImage_t *dst, cudaStream_t);
    nvjpegStatus_t (*batched_preallocate)(nvjpegHandle_t, nvjpegJpegState_t, int batch_size,
                                          int width, int height, nvjpegChromaSubsampling_t,
                                          nvjpegOutputFormat_t);               /* optional */
    nvjpegStatus_t (*batched_supported)(nvjpegHandle_t, nvjpegJpegStream_t,
                                        int *is_supported);  /* *is_supported 0: it takes it */
    nvjpegStatus_t (*stream_create)(nvjpegHandle_t, nvjpegJpegStream_t *);
    nvjpegStatus_t (*stream_destroy)(nvjpegJpegStream_t);
    nvjpegStatus_t (*stream_parse)(nvjpegHandle_t, const unsigned char *data, size_t len,
                                   int save_metadata, int save_stream, nvjpegJpegStream_t);
    nvjpegStatus_t (*stream_parse_header)(nvjpegHandle_t, const unsigned char *data, size_t len,
                                          nvjpegJpegStream_t);                 /* optional */
} NvjpegLib;

/* The loaded library, or NULL with the reason (as nvjpeg_available). */
const NvjpegLib *nvjpeg_lib(char *reason, size_t len);
/* nvJPEG's status in words ("NVJPEG_STATUS_BAD_JPEG"). */
const char *nvjpeg_status_name(nvjpegStatus_t s);

#endif /* CTRAIN_CUDA */

#ifdef __cplusplus
}
#endif
#endif
