/* jpeg_gpu.c — the batch decoder of jpeg_gpu.h: nvJPEG's batched decode into
 * one device buffer, then the resample kernel (jpeg_gpu.cu) into the rows.
 *
 * One call of jpeg_gpu_decode, on the caller's stream s:
 *   1. s waits for the event of g's previous call (its buffers are reused);
 *      the host waits for the previous decode to finish (nvJPEG's batched
 *      state and our pinned table are reused; the previous call's bytes
 *      may then be released);
 *   2. the images the probe takes are packed into the decode buffer in
 *      call order, each H W 3 bytes at a 256-aligned offset; the rest of
 *      the room short, an image is left to the CPU (NO_ROOM);
 *   3. the taken images, grouped by chroma layout, through nvJPEG's batched
 *      decoder to interleaved RGB: one decoder per layout, every call of
 *      one size (nvjpeg_batch.h: a batch that mixes layouts or changes size
 *      makes nvJPEG free buffers, which waits for the whole device). A
 *      failed call is split in halves and each retried, down to single
 *      images, so one corrupt file costs ~2 log2(n) small calls and only
 *      itself goes to the CPU (FAILED); three calls in a row in which every
 *      image fails make the call an error (the decoder, not a file, is
 *      broken);
 *   4. the per-image table (offset, size, row, flip, axes) is copied from
 *      pinned memory (an event marks nvJPEG's part done: the next call's host
 *      waits for it), s waits for jpeg_gpu_out_after's event if one was
 *      named, and the resample kernel writes the rows;
 *   5. an event marks the end of g's work on s.
 * Device time (nvJPEG's part) is read from two events at the next call
 * (never a sync of its own).
 */
#include "jpeg_gpu.h"

#include <stdio.h>
#include <string.h>

const char *jpeg_gpu_backend_name(JpegGpuBackend b)
{
    switch (b) {
    case JPEG_GPU_HARDWARE: return "hardware";
    case JPEG_GPU_HYBRID: return "gpu-hybrid";
    case JPEG_GPU_UPLOAD: return "upload";
    default: return "auto";
    }
}

void jpeg_gpu_norm_coeffs(float a[3], float b[3], const float mean[3], const float std[3])
{
    for (int c = 0; c < 3; c++) {
        a[c] = 1.0f / (255.0f * std[c]);
        b[c] = -mean[c] / std[c];
    }
}

#ifndef CTRAIN_CUDA

#include "engine/error.h"

#define NO_CUDA "this build has no CUDA (built with CUDA=0, or without nvcc, cuDNN, cuBLAS or " \
                "NCCL): the GPU image decoder needs the CUDA build"

JpegGpu *jpeg_gpu_open(Ctx *c, int max_batch, int size, int max_side_hint, JpegGpuBackend pref,
                       char *err, size_t errlen)
{
    (void)c, (void)max_batch, (void)size, (void)max_side_hint, (void)pref;
    ct_fail(err, errlen, -1, NO_CUDA);
    return NULL;
}

void jpeg_gpu_close(JpegGpu *g) { (void)g; }
void jpeg_gpu_set_call_size(JpegGpu *g, int n) { (void)g, (void)n; }
void jpeg_gpu_out_after(JpegGpu *g, void *event) { (void)g, (void)event; }
void jpeg_gpu_set_planes(JpegGpu *g, int on) { (void)g, (void)on; }

int jpeg_gpu_probe(JpegGpu *g, JpegGpuInfo *info, const uint8_t *const *bytes,
                   const size_t *lens, int n)
{
    (void)g, (void)bytes, (void)lens;
    for (int i = 0; i < n; i++) {
        memset(&info[i], 0, sizeof info[i]);
        info[i].subsampling = -1;
        info[i].gpu = JPEG_GPU_FORMAT;
    }
    return 0;
}

int jpeg_gpu_decode(JpegGpu *g, Tensor *out, uint8_t *fallback, const uint8_t *const *bytes,
                    const size_t *lens, const JpegGpuInfo *info, const JpegGpuBox *boxes, int n,
                    const float mean[3], const float std[3], void *stream, char *err,
                    size_t errlen)
{
    (void)g, (void)out, (void)bytes, (void)lens, (void)info, (void)boxes, (void)mean, (void)std;
    (void)stream;
    for (int i = 0; i < n; i++) fallback[i] = JPEG_GPU_FORMAT;
    return ct_fail(err, errlen, -1, NO_CUDA);
}

int jpeg_gpu_upload_u8(JpegGpu *g, Tensor *out, const int *rows, const uint8_t *pixels, int n,
                       const float mean[3], const float std[3], void *stream, char *err,
                       size_t errlen)
{
    (void)g, (void)out, (void)rows, (void)pixels, (void)n, (void)mean, (void)std, (void)stream;
    return ct_fail(err, errlen, -1, NO_CUDA);
}

int jpeg_gpu_reserve(JpegGpu *g, size_t bytes, char *err, size_t errlen)
{
    (void)g, (void)bytes;
    return ct_fail(err, errlen, -1, NO_CUDA);
}

void jpeg_gpu_stats(const JpegGpu *g, JpegGpuStats *s)
{
    (void)g;
    memset(s, 0, sizeof *s);
    s->backend = JPEG_GPU_UPLOAD;
}

#else

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include "engine/error.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "nvjpeg_batch.h"
#include "nvjpeg_lib.h"

#define JG_ALIGN ((size_t)256)
#define JG_MAX_PIXELS ((size_t)1 << 28)
#define JG_HINT 512

struct JpegGpu {
    Ctx *c;
    JpegGpuBackend backend;
    int max_batch, size;
    const NvjpegLib *L;          /* NULL: upload only */
    NvjBatch *nb;                /* the decoders, one per chroma layout */
    nvjpegJpegStream_t js;       /* the probe's header parser */
    int all_failed;              /* consecutive calls in which every image failed */
    int planes;                  /* jpeg_gpu_set_planes */
    cudaEvent_t out_after;       /* jpeg_gpu_out_after: the next decode's wait, or NULL */
    uint8_t *dec;                /* decoded images, device */
    size_t dec_cap;
    uint8_t *pad;                /* the padding images' scratch (nvjpeg_batch.h), device */
    uint8_t *up;                 /* u8 upload staging [max_batch, size, size, 3], device */
    size_t up_cap;
    void *tab_dev;               /* JpegGpuImage[max_batch] then int32[max_batch], device */
    size_t tab_bytes;
    JpegGpuImage *meta_host;     /* pinned */
    int32_t *rows_host;          /* pinned */
    cudaEvent_t staged;          /* after the last copy out of meta_host / rows_host */
    cudaEvent_t done;            /* after g's last work on its stream */
    cudaEvent_t t0, t1;          /* around the last decode's device work */
    int timing;                  /* t0, t1 recorded, not yet counted */
    /* host scratch for one call, max_batch each */
    JpegGpuInfo *info;
    const unsigned char **bytes;
    size_t *lens;
    nvjpegImage_t *dst;
    int *idx;                    /* taken image k is the call's image idx[k] */
    uint8_t *failed;
    int *order;                  /* taken images grouped by layout: indices into the above */
    const unsigned char **cb;    /* one layout's call: bytes, lengths, outputs, failures */
    size_t *cl;
    nvjpegImage_t *cd;
    uint8_t *cf;
    JpegGpuStats stats;
    _Atomic size_t lib_dev, lib_pinned;
};

static double jg_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t jg_round(size_t n) { return (n + JG_ALIGN - 1) / JG_ALIGN * JG_ALIGN; }

/* A CUDA call whose failure becomes the call's error. */
#define JG_CUDA(call, what)                                                                  \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess)                                                               \
            return ct_fail(err, errlen, -1, "%s: %s", what, cudaGetErrorString(e_));         \
    } while (0)

/* ---- nvJPEG's allocators: plain cudaMalloc / cudaHostAlloc (available to
 * every stream at once, whatever stream nvJPEG names), counted. ---- */

static int jg_dev_malloc(void *ctx, void **p, size_t n, cudaStream_t s)
{
    (void)s;
    JpegGpu *g = ctx;
    if (cudaMalloc(p, n ? n : 1) != cudaSuccess) return 1;
    atomic_fetch_add(&g->lib_dev, n);
    return 0;
}

static int jg_dev_free(void *ctx, void *p, size_t n, cudaStream_t s)
{
    (void)s;
    JpegGpu *g = ctx;
    if (!p) return 0;
    atomic_fetch_sub(&g->lib_dev, n);
    return cudaFree(p) != cudaSuccess;
}

static int jg_pin_malloc(void *ctx, void **p, size_t n, cudaStream_t s)
{
    (void)s;
    JpegGpu *g = ctx;
    if (cudaHostAlloc(p, n ? n : 1, cudaHostAllocDefault) != cudaSuccess) return 1;
    atomic_fetch_add(&g->lib_pinned, n);
    return 0;
}

static int jg_pin_free(void *ctx, void *p, size_t n, cudaStream_t s)
{
    (void)s;
    JpegGpu *g = ctx;
    if (!p) return 0;
    atomic_fetch_sub(&g->lib_pinned, n);
    return cudaFreeHost(p) != cudaSuccess;
}

static void jg_nv_release(JpegGpu *g)
{
    if (g->js) g->L->stream_destroy(g->js);
    nvjb_close(g->nb);
    g->js = NULL;
    g->nb = NULL;
}

/* The decoders (nvjpeg_batch.h) and a header parser on backend b: 1, or 0
 * with why. */
static int jg_nv_start(JpegGpu *g, nvjpegBackend_t b, int hint, char *why, size_t len)
{
    const NvjpegLib *L = g->L;
    const char *bn = b == NVJPEG_BACKEND_HARDWARE ? "NVJPEG_BACKEND_HARDWARE"
                                                  : "NVJPEG_BACKEND_GPU_HYBRID";
    nvjpegDevAllocatorV2_t da = {jg_dev_malloc, jg_dev_free, g};
    nvjpegPinnedAllocatorV2_t pa = {jg_pin_malloc, jg_pin_free, g};
    char w[300];
    g->nb = nvjb_open(L, b, g->max_batch, hint, &da, &pa, g->pad, w, sizeof w);
    if (!g->nb) {
        snprintf(why, len, "%s (%s)", w, bn);
        return 0;
    }
    NvjbStats ns;
    nvjb_stats(g->nb, &ns);
    g->stats.chroma_interpolated = ns.chroma_interpolated;
    nvjpegStatus_t s = NVJPEG_STATUS_SUCCESS;
    if (b == NVJPEG_BACKEND_HARDWARE && L->hw_decoder_info) {
        unsigned e = 0, k = 0;
        s = L->hw_decoder_info(nvjb_handle(g->nb), &e, &k);
        if (s != NVJPEG_STATUS_SUCCESS || e == 0) {
            snprintf(why, len, "no hardware JPEG engines on this card (nvjpegGetHardwareDecoderInfo: "
                     "%s, %u engines)", nvjpeg_status_name(s), e);
            jg_nv_release(g);
            return 0;
        }
        g->stats.hw_engines = e;
        g->stats.hw_cores = k;
    }
    s = L->stream_create(nvjb_handle(g->nb), &g->js);
    if (s != NVJPEG_STATUS_SUCCESS) {
        snprintf(why, len, "nvjpegJpegStreamCreate (%s): %s", bn, nvjpeg_status_name(s));
        jg_nv_release(g);
        g->stats.hw_engines = g->stats.hw_cores = 0;
        return 0;
    }
    return 1;
}

static void jg_free_buffers(JpegGpu *g)
{
    Ctx *c = g->c;
    mem_free(c, g->dec, g->dec_cap);
    mem_free(c, g->pad, NVJB_PAD_BYTES(g->max_batch));
    mem_free(c, g->up, g->up_cap);
    mem_free(c, g->tab_dev, g->tab_bytes);
    mem_host_pinned_free(c, g->meta_host);
    mem_host_pinned_free(c, g->rows_host);
    g->dec = g->up = g->pad = NULL;
    g->tab_dev = NULL;
    g->meta_host = NULL;
    g->rows_host = NULL;
}

void jpeg_gpu_close(JpegGpu *g)
{
    if (!g) return;
    cudaSetDevice(g->c->device_id);
    if (g->done) cudaEventSynchronize(g->done);
    if (g->L) jg_nv_release(g);
    jg_free_buffers(g);
    cudaEvent_t ev[] = {g->staged, g->done, g->t0, g->t1};
    for (int i = 0; i < 4; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    free(g->info);
    free(g->bytes);
    free(g->lens);
    free(g->dst);
    free(g->idx);
    free(g->failed);
    free(g->order);
    free(g->cb);
    free(g->cl);
    free(g->cd);
    free(g->cf);
    free(g);
}

JpegGpu *jpeg_gpu_open(Ctx *c, int max_batch, int size, int max_side_hint, JpegGpuBackend pref,
                       char *err, size_t errlen)
{
    if (!c || c->device != DEV_CUDA) {
        ct_fail(err, errlen, -1, "the GPU image decoder needs a CUDA context");
        return NULL;
    }
    if (max_batch < 1 || size < 1 || max_side_hint > 65535) {
        ct_fail(err, errlen, -1, "jpeg_gpu_open: max_batch %d, size %d, max_side_hint %d out of range",
                max_batch, size, max_side_hint);
        return NULL;
    }
    int hint = max_side_hint > 0 ? max_side_hint : JG_HINT;
    JpegGpu *g = calloc(1, sizeof *g);
    if (!g) {
        ct_fail(err, errlen, -1, "out of host memory for the GPU image decoder");
        return NULL;
    }
    g->c = c;
    g->max_batch = max_batch;
    g->size = size;
    atomic_init(&g->lib_dev, 0);
    atomic_init(&g->lib_pinned, 0);
    if (pref != JPEG_GPU_UPLOAD) {
        /* before any CUDA call: a missing library is said without touching the device */
        char why[400] = "";
        g->L = nvjpeg_lib(why, sizeof why);
        if (!g->L) {
            ct_fail(err, errlen, -1, "%s", why);
            free(g);
            return NULL;
        }
    }
    cudaSetDevice(c->device_id);
    if (pref != JPEG_GPU_UPLOAD) {
        char why[400] = "", why_hw[400] = "";
        memcpy(g->stats.version, g->L->version, sizeof g->stats.version);
        g->pad = mem_alloc(c, NVJB_PAD_BYTES(max_batch));
        int have = 0;
        if (pref == JPEG_GPU_AUTO || pref == JPEG_GPU_HARDWARE) {
            have = jg_nv_start(g, NVJPEG_BACKEND_HARDWARE, hint, why_hw, sizeof why_hw);
            if (have) g->backend = JPEG_GPU_HARDWARE;
        }
        if (!have && (pref == JPEG_GPU_AUTO || pref == JPEG_GPU_HYBRID)) {
            have = jg_nv_start(g, NVJPEG_BACKEND_GPU_HYBRID, hint, why, sizeof why);
            if (have) g->backend = JPEG_GPU_HYBRID;
        }
        if (!have) {
            if (pref == JPEG_GPU_HARDWARE) ct_fail(err, errlen, -1, "nvJPEG's hardware decoder: %s", why_hw);
            else if (pref == JPEG_GPU_HYBRID) ct_fail(err, errlen, -1, "nvJPEG's GPU decoder: %s", why);
            else ct_fail(err, errlen, -1, "nvJPEG: hardware decoder: %s; GPU decoder: %s", why_hw, why);
            jpeg_gpu_close(g);
            return NULL;
        }
    } else {
        g->backend = JPEG_GPU_UPLOAD;
    }
    g->stats.backend = g->backend;
    if (g->nb && setting_switch(SET_JPEG_PLANES)) jpeg_gpu_set_planes(g, 1);

    size_t nb = (size_t)max_batch;
    g->info = calloc(nb, sizeof *g->info);
    g->bytes = calloc(nb, sizeof *g->bytes);
    g->lens = calloc(nb, sizeof *g->lens);
    g->dst = calloc(nb, sizeof *g->dst);
    g->idx = calloc(nb, sizeof *g->idx);
    g->failed = calloc(nb, sizeof *g->failed);
    g->order = calloc(nb, sizeof *g->order);
    g->cb = calloc(nb, sizeof *g->cb);
    g->cl = calloc(nb, sizeof *g->cl);
    g->cd = calloc(nb, sizeof *g->cd);
    g->cf = calloc(nb, sizeof *g->cf);
    if (!g->info || !g->bytes || !g->lens || !g->dst || !g->idx || !g->failed || !g->order ||
        !g->cb || !g->cl || !g->cd || !g->cf) {
        ct_fail(err, errlen, -1, "out of host memory for the GPU image decoder");
        jpeg_gpu_close(g);
        return NULL;
    }
    if (g->L) {
        g->dec_cap = nb * jg_round((size_t)hint * hint * 3);
        g->dec = mem_alloc(c, g->dec_cap);
    }
    g->up_cap = nb * (size_t)size * size * 3;
    g->up = mem_alloc(c, g->up_cap);
    g->tab_bytes = nb * (sizeof(JpegGpuImage) + sizeof(int32_t));
    g->tab_dev = mem_alloc(c, g->tab_bytes);
    g->meta_host = mem_host_pinned(c, nb * sizeof(JpegGpuImage));
    g->rows_host = mem_host_pinned(c, nb * sizeof(int32_t));
    g->stats.buffer_bytes = g->dec_cap + g->up_cap + g->tab_bytes +
                            (g->pad ? NVJB_PAD_BYTES(max_batch) : 0);
    cudaError_t e = cudaEventCreateWithFlags(&g->staged, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreate(&g->t0);
    if (e == cudaSuccess) e = cudaEventCreate(&g->t1);
    /* the pool's allocations are ordered on the context's stream; g's work
     * runs on the caller's streams */
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) {
        ct_fail(err, errlen, -1, "the GPU image decoder's events: %s", cudaGetErrorString(e));
        jpeg_gpu_close(g);
        return NULL;
    }
    return g;
}

void jpeg_gpu_set_call_size(JpegGpu *g, int n)
{
    if (g && g->nb) nvjb_set_call_size(g->nb, n);
}

void jpeg_gpu_out_after(JpegGpu *g, void *event)
{
    if (g) g->out_after = (cudaEvent_t)event;
}

/* s waits for *ev (jpeg_gpu_out_after's event), if any, once. */
static int jg_out_wait(cudaEvent_t *ev, cudaStream_t s, const char *what, char *err,
                       size_t errlen)
{
    if (!*ev) return 0;
    const cudaEvent_t e = *ev;
    *ev = NULL;
    JG_CUDA(cudaStreamWaitEvent(s, e, 0), what);
    return 0;
}

void jpeg_gpu_set_planes(JpegGpu *g, int on)
{
    if (!g || !g->nb) return;
    g->planes = on != 0;
    g->stats.planes = g->planes;
    nvjb_set_output(g->nb, g->planes ? NVJPEG_OUTPUT_YUV : NVJPEG_OUTPUT_RGBI);
}

/* ---- probe ---- */

/* An EOI marker (FF D9) near the end: a file cut short has none. nvJPEG
 * decodes such a file without an error (both backends, on an H200), where
 * the CPU decoder names it. */
static int jg_has_eoi(const uint8_t *p, size_t len)
{
    size_t from = len > 64 ? len - 64 : 0;
    for (size_t i = len; i-- > from + 1;)
        if (p[i - 1] == 0xFF && p[i] == 0xD9) return 1;
    return 0;
}

static void jg_probe_one(JpegGpu *g, JpegGpuInfo *f, const uint8_t *p, size_t len)
{
    memset(f, 0, sizeof *f);
    f->subsampling = NVJPEG_CSS_UNKNOWN;
    f->gpu = JPEG_GPU_FORMAT;
    if (!g || !g->L) return;                                    /* upload only */
    if (!p || len < 4 || p[0] != 0xFF || p[1] != 0xD8 || p[2] != 0xFF) return;  /* not JPEG */
    const NvjpegLib *L = g->L;
    int nc = 0, ws[NVJPEG_MAX_COMPONENT] = {0}, hs[NVJPEG_MAX_COMPONENT] = {0};
    nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
    nvjpegHandle_t h = nvjb_handle(g->nb);
    if (L->get_image_info(h, p, len, &nc, &css, ws, hs) != NVJPEG_STATUS_SUCCESS) return;
    f->components = nc;
    f->subsampling = css;
    f->w = ws[0];
    f->h = hs[0];
    if (f->w <= 0 || f->h <= 0 || (size_t)f->w * (size_t)f->h > JG_MAX_PIXELS) return;
    /* a layout with a decoder (gray, 4:4:4, 4:2:2, 4:2:0, 4:4:0; not CMYK /
     * YCCK, 4:1:1, 4:1:0), and an end marker */
    if (nvjb_layout(nc, css) < 0 || !jg_has_eoi(p, len)) return;
    if (g->planes && nvjb_layout(nc, css) != NVJB_420) return;   /* the planes kernel's layout */
    nvjpegStatus_t s = L->stream_parse_header ? L->stream_parse_header(h, p, len, g->js)
                                              : L->stream_parse(h, p, len, 0, 0, g->js);
    if (s != NVJPEG_STATUS_SUCCESS) return;
    int unsupported = 1;
    s = L->batched_supported(h, g->js, &unsupported);
    /* the hardware backend must be asked; the hybrid one decodes what it
     * parses, so an answer it cannot give is not a no */
    if (s == NVJPEG_STATUS_SUCCESS ? unsupported != 0 : g->backend == JPEG_GPU_HARDWARE) return;
    f->gpu = JPEG_GPU_TAKEN;
}

int jpeg_gpu_probe(JpegGpu *g, JpegGpuInfo *info, const uint8_t *const *bytes,
                   const size_t *lens, int n)
{
    int taken = 0;
    for (int i = 0; i < n; i++) {
        jg_probe_one(g, &info[i], bytes[i], lens[i]);
        taken += info[i].gpu == JPEG_GPU_TAKEN;
    }
    return taken;
}

/* ---- decode ---- */

static int jg_check_out(const Tensor *out, int n, int max_side, int *S, char *err,
                        size_t errlen)
{
    if (!out || out->device != DEV_CUDA || out->ndim != 4 || out->shape[3] != 3 ||
        out->shape[1] != out->shape[2] || out->shape[1] < 1 || out->shape[0] < n ||
        !dtype_is_float(out->dtype) || (max_side && out->shape[1] > max_side))
        return ct_fail(err, errlen, -1,
                       "the image decoder writes f32 / bf16 / f16 [B >= %d, S, S, 3] on the device"
                       "%s; got %s [%lld, %lld, %lld, %lld] on %s", n,
                       max_side ? " with S <= the size it was opened for" : "",
                       out ? dtype_name(out->dtype) : "none",
                       out && out->ndim > 0 ? (long long)out->shape[0] : 0,
                       out && out->ndim > 1 ? (long long)out->shape[1] : 0,
                       out && out->ndim > 2 ? (long long)out->shape[2] : 0,
                       out && out->ndim > 3 ? (long long)out->shape[3] : 0,
                       out && out->device == DEV_CUDA ? "cuda" : "cpu");
    *S = (int)out->shape[1];
    return 0;
}

static int jg_axis_ok(RsAxis a, int n)
{
    return a.lo >= 0 && a.lo < a.hi && a.hi <= n && a.step > 0.0f && a.step < 1e6f &&
           a.start > -1e6f && a.start < 1e6f;
}

/* The device stream of a call: on g's device, ordered after g's previous
 * work, not being captured. */
static int jg_begin(JpegGpu *g, cudaStream_t s, const char *what, char *err, size_t errlen)
{
    JG_CUDA(cudaSetDevice(g->c->device_id), what);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    JG_CUDA(cudaStreamIsCapturing(s, &cs), what);
    if (cs != cudaStreamCaptureStatusNone)
        return ct_fail(err, errlen, -1, "%s: the stream is being captured into a CUDA graph; image "
                       "decoding runs outside the step's graph", what);
    JG_CUDA(cudaStreamWaitEvent(s, g->done, 0), what);
    return 0;
}

/* The m taken images through nvJPEG, grouped by chroma layout, one call per
 * layout present (nvjpeg_batch.h: calls of one layout and one size); an
 * image that fails alone is marked in g->failed. */
static void jg_decode_taken(JpegGpu *g, const JpegGpuInfo *info, int m, cudaStream_t s)
{
    int counts[NVJB_LAYOUTS] = {0}, first[NVJB_LAYOUTS], fill[NVJB_LAYOUTS];
    for (int k = 0; k < m; k++) {   /* taken: one of the layouts (jg_probe_one) */
        const JpegGpuInfo *f = &info[g->idx[k]];
        counts[nvjb_layout(f->components, f->subsampling)]++;
    }
    for (int l = 0, at = 0; l < NVJB_LAYOUTS; l++) {
        first[l] = fill[l] = at;
        at += counts[l];
    }
    for (int k = 0; k < m; k++) {
        const JpegGpuInfo *f = &info[g->idx[k]];
        g->order[fill[nvjb_layout(f->components, f->subsampling)]++] = k;
    }
    const int call_n = nvjb_call_size(g->nb);
    for (int l = 0; l < NVJB_LAYOUTS; l++) {
        for (int j0 = 0; j0 < counts[l]; j0 += call_n) {   /* calls of at most call_n */
            const int n = counts[l] - j0 < call_n ? counts[l] - j0 : call_n;
            const int *ord = g->order + first[l] + j0;
            for (int j = 0; j < n; j++) {
                g->cb[j] = g->bytes[ord[j]];
                g->cl[j] = g->lens[ord[j]];
                g->cd[j] = g->dst[ord[j]];
            }
            nvjb_decode(g->nb, l, g->cb, g->cl, g->cd, n, g->cf, s);
            for (int j = 0; j < n; j++) g->failed[ord[j]] = g->cf[j];
        }
    }
}

int jpeg_gpu_decode(JpegGpu *g, Tensor *out, uint8_t *fallback, const uint8_t *const *bytes,
                    const size_t *lens, const JpegGpuInfo *info, const JpegGpuBox *boxes, int n,
                    const float mean[3], const float std[3], void *stream, char *err,
                    size_t errlen)
{
    static const char what[] = "jpeg_gpu_decode";
    double t_start = jg_now();
    cudaStream_t s = (cudaStream_t)stream;
    if (!g) return ct_fail(err, errlen, -1, "%s: no decoder", what);
    cudaEvent_t out_after = g->out_after;   /* this call's, whatever happens */
    g->out_after = NULL;
    if (!g->L)
        return ct_fail(err, errlen, -1, "%s: this decoder was opened for uploads only "
                       "(JPEG_GPU_UPLOAD)", what);
    if (n < 0 || n > g->max_batch)
        return ct_fail(err, errlen, -1, "%s: %d images, the decoder takes 0 to %d a call", what, n,
                       g->max_batch);
    int S = 0;
    if (jg_check_out(out, n, 0, &S, err, errlen)) return -1;
    if (jg_begin(g, s, what, err, errlen)) return -1;
    /* the previous decode has finished: nvJPEG's state and the pinned table
     * may be reused, its device time read */
    if (g->timing) {
        JG_CUDA(cudaEventSynchronize(g->t1), what);
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, g->t0, g->t1) == cudaSuccess) g->stats.device_s += 1e-3 * ms;
        g->timing = 0;
    }
    if (!info) {
        jpeg_gpu_probe(g, g->info, bytes, lens, n);
        info = g->info;
    }
    size_t used = 0, need = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        fallback[i] = (uint8_t)info[i].gpu;
        if (info[i].gpu != JPEG_GPU_TAKEN) {
            int r = info[i].gpu > 0 && info[i].gpu < JPEG_GPU_REASONS ? info[i].gpu : JPEG_GPU_FORMAT;
            fallback[i] = (uint8_t)r;
            g->stats.not_taken[r]++;
            continue;
        }
        const JpegGpuBox *b = &boxes[i];
        if (!jg_axis_ok(b->ay, info[i].h) || !jg_axis_ok(b->ax, info[i].w))
            return ct_fail(err, errlen, -1, "%s: image %d: crop rows [%d, %d) columns [%d, %d) "
                           "(steps %g, %g) do not fit its %d x %d pixels", what, i, b->ay.lo,
                           b->ay.hi, b->ax.lo, b->ax.hi, (double)b->ay.step, (double)b->ax.step,
                           info[i].h, info[i].w);
        /* the planes kernel reads 4:2:0 only, whatever the caller's probe said */
        if (g->planes && nvjb_layout(info[i].components, info[i].subsampling) != NVJB_420) {
            fallback[i] = JPEG_GPU_FORMAT;
            g->stats.not_taken[JPEG_GPU_FORMAT]++;
            continue;
        }
        size_t ocb = 0, ocr = 0;
        const size_t planes_bytes = jpeg_planes_layout(info[i].h, info[i].w, &ocb, &ocr);
        size_t bytes_i = jg_round(g->planes ? planes_bytes : (size_t)info[i].h * info[i].w * 3);
        need += bytes_i;
        if (used + bytes_i > g->dec_cap) {
            fallback[i] = JPEG_GPU_NO_ROOM;
            g->stats.not_taken[JPEG_GPU_NO_ROOM]++;
            continue;
        }
        nvjpegImage_t *d = &g->dst[m];
        memset(d, 0, sizeof *d);
        d->channel[0] = g->dec + used;
        if (g->planes) {   /* Y, then Cb and Cr at half size (jpeg_planes_layout) */
            d->pitch[0] = (size_t)info[i].w;
            d->channel[1] = g->dec + used + ocb;
            d->channel[2] = g->dec + used + ocr;
            d->pitch[1] = d->pitch[2] = (size_t)((info[i].w + 1) / 2);
        } else {
            d->pitch[0] = (size_t)info[i].w * 3;
        }
        g->bytes[m] = bytes[i];
        g->lens[m] = lens[i];
        g->idx[m] = i;
        g->failed[m] = 0;
        m++;
        used += bytes_i;
    }
    if (need > g->dec_cap && need > g->stats.want_bytes) g->stats.want_bytes = need;
    g->stats.calls++;
    g->stats.images += n;
    int kept = 0;
    if (m > 0) {
        JG_CUDA(cudaEventRecord(g->t0, s), what);
        jg_decode_taken(g, info, m, s);
        JG_CUDA(cudaEventSynchronize(g->staged), what);
        for (int k = 0; k < m; k++) {
            int i = g->idx[k];
            if (g->failed[k]) {
                fallback[i] = JPEG_GPU_FAILED;
                g->stats.not_taken[JPEG_GPU_FAILED]++;
                continue;
            }
            JpegGpuImage *im = &g->meta_host[kept++];
            im->offset = (uint64_t)(g->dst[k].channel[0] - g->dec);
            im->h = info[i].h;
            im->w = info[i].w;
            im->row = i;
            im->flip = boxes[i].flip != 0;
            im->ay = boxes[i].ay;
            im->ax = boxes[i].ax;
        }
        if (kept > 0) {
            JG_CUDA(cudaMemcpyAsync(g->tab_dev, g->meta_host, (size_t)kept * sizeof(JpegGpuImage),
                                    cudaMemcpyHostToDevice, s), what);
            JG_CUDA(cudaEventRecord(g->staged, s), what);
        }
        /* nvJPEG's part ends here: the next call's host waits for this, never for
         * out_after (its device time is nvJPEG's, not the wait's) */
        JG_CUDA(cudaEventRecord(g->t1, s), what);
        g->timing = 1;
        if (kept > 0) {
            if (jg_out_wait(&out_after, s, what, err, errlen)) return -1;   /* out's first write */
            float a[3], b[3];
            jpeg_gpu_norm_coeffs(a, b, mean, std);
            if (g->planes)
                jpeg_gpu_resample_planes_cuda(out->data, out->dtype, S, g->dec,
                                              (const JpegGpuImage *)g->tab_dev, kept, a, b, s);
            else
                jpeg_gpu_resample_cuda(out->data, out->dtype, S, g->dec,
                                       (const JpegGpuImage *)g->tab_dev, kept, a, b, s);
        }
        JG_CUDA(cudaEventRecord(g->done, s), what);
    }
    /* nothing resampled: the wait still goes before the caller's uploads into out */
    if (jg_out_wait(&out_after, s, what, err, errlen)) return -1;
    g->stats.taken += kept;
    g->all_failed = m > 0 && kept == 0 ? g->all_failed + 1 : 0;
    g->stats.host_s += jg_now() - t_start;
    if (g->all_failed >= 3)
        return ct_fail(err, errlen, -1, "%s: nvJPEG (%s backend) failed every image of the last %d "
                       "calls (%s)", what, jpeg_gpu_backend_name(g->backend), g->all_failed,
                       g->stats.last_error);
    return 0;
}

/* ---- u8 upload ---- */

int jpeg_gpu_upload_u8(JpegGpu *g, Tensor *out, const int *rows, const uint8_t *pixels, int n,
                       const float mean[3], const float std[3], void *stream, char *err,
                       size_t errlen)
{
    static const char what[] = "jpeg_gpu_upload_u8";
    cudaStream_t s = (cudaStream_t)stream;
    if (!g) return ct_fail(err, errlen, -1, "%s: no decoder", what);
    if (n < 0 || n > g->max_batch)
        return ct_fail(err, errlen, -1, "%s: %d images, the decoder takes 0 to %d a call", what, n,
                       g->max_batch);
    int S = 0;
    if (jg_check_out(out, rows ? 0 : n, g->size, &S, err, errlen)) return -1;
    for (int k = 0; rows && k < n; k++)
        if (rows[k] < 0 || rows[k] >= out->shape[0])
            return ct_fail(err, errlen, -1, "%s: row %d of image %d is outside the output's %lld rows",
                           what, rows[k], k, (long long)out->shape[0]);
    if (n == 0) return 0;
    if (jg_begin(g, s, what, err, errlen)) return -1;
    JG_CUDA(cudaEventSynchronize(g->staged), what);
    for (int k = 0; k < n; k++) g->rows_host[k] = rows ? rows[k] : k;
    int32_t *rows_dev = (int32_t *)((char *)g->tab_dev + (size_t)g->max_batch * sizeof(JpegGpuImage));
    JG_CUDA(cudaMemcpyAsync(g->up, pixels, (size_t)n * S * S * 3, cudaMemcpyHostToDevice, s), what);
    JG_CUDA(cudaMemcpyAsync(rows_dev, g->rows_host, (size_t)n * sizeof(int32_t),
                            cudaMemcpyHostToDevice, s), what);
    JG_CUDA(cudaEventRecord(g->staged, s), what);
    float a[3], b[3];
    jpeg_gpu_norm_coeffs(a, b, mean, std);
    jpeg_gpu_normalize_cuda(out->data, out->dtype, S, g->up, rows_dev, n, a, b, s);
    JG_CUDA(cudaEventRecord(g->done, s), what);
    g->stats.uploaded += n;
    return 0;
}

/* ---- memory, statistics ---- */

int jpeg_gpu_reserve(JpegGpu *g, size_t bytes, char *err, size_t errlen)
{
    static const char what[] = "jpeg_gpu_reserve";
    if (!g || !g->L || bytes <= g->dec_cap) return 0;
    if (g->c->capturing)
        return ct_fail(err, errlen, -1, "%s: a CUDA graph is being captured; grow the decode "
                       "buffer between steps", what);
    JG_CUDA(cudaSetDevice(g->c->device_id), what);
    JG_CUDA(cudaEventSynchronize(g->done), what);
    size_t cap = jg_round(bytes + bytes / 4);      /* a little ahead, so growth is rare */
    mem_free(g->c, g->dec, g->dec_cap);
    g->dec = mem_alloc(g->c, cap);
    g->stats.buffer_bytes += cap - g->dec_cap;
    g->dec_cap = cap;
    JG_CUDA(cudaStreamSynchronize(g->c->stream), what);
    if (g->stats.want_bytes <= cap) g->stats.want_bytes = 0;
    return 0;
}

void jpeg_gpu_stats(const JpegGpu *g, JpegGpuStats *s)
{
    memset(s, 0, sizeof *s);
    if (!g) return;
    *s = g->stats;
    if (g->nb) {
        NvjbStats ns;
        nvjb_stats(g->nb, &ns);
        s->failed_batches = ns.failed_batches;
        s->padded = ns.padded;
        s->layouts = ns.layouts_open;
        snprintf(s->last_error, sizeof s->last_error, "%s", ns.last_error);
    }
    s->lib_device_bytes = atomic_load(&((JpegGpu *)g)->lib_dev);
    s->lib_pinned_bytes = atomic_load(&((JpegGpu *)g)->lib_pinned);
}

#endif /* CTRAIN_CUDA */
