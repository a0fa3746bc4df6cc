/* nvjpeg_batch.c — one nvJPEG batched decoder per chroma layout, called
 * with a fixed number of images (nvjpeg_batch.h says why).
 *
 * One call of nvjb_decode(layout, n images):
 *   slots 0..n-1      the caller's images, to the caller's dst
 *   slots n..call_n-1 the layout's 16 x 16 dummy, each to its own 768-byte
 *                     slot of the scratch area
 *   nvjpegDecodeBatched(call_n slots), the state initialised for call_n
 *   once; a failed call is split in halves (each initialised for its size)
 *   down to single slots, and a real image that fails alone is marked.
 */
#include "nvjpeg_batch.h"

#ifdef CTRAIN_CUDA

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

#define NVJB_DUMMY 16

typedef struct {
    nvjpegHandle_t h;
    nvjpegJpegState_t st;
    int init_n;                      /* the batch size st is initialised for (0: none) */
    int broken;                      /* could not be made: its images fail */
    unsigned char *dummy;            /* a 16 x 16 JPEG of this layout (libjpeg's malloc) */
    unsigned long dummy_n;
} Decoder;

struct NvjBatch {
    const NvjpegLib *L;
    nvjpegBackend_t backend;
    unsigned flags;                  /* the flags the 4:2:0 decoder took */
    int out_fmt;                     /* NVJPEG_OUTPUT_RGBI, or _YUV (nvjb_set_output) */
    int cap;                         /* the slots' arrays, and the most call_n can be */
    int call_n;                      /* every call's size */
    nvjpegDevAllocatorV2_t da;
    nvjpegPinnedAllocatorV2_t pa;
    unsigned char *pad;              /* device scratch for the dummies */
    Decoder d[NVJB_LAYOUTS];
    /* one call's slots [call_n] */
    const unsigned char **bytes;
    size_t *lens;
    nvjpegImage_t *dst;
    int *real;                       /* slot -> the caller's image k, or -1 (a dummy) */
    NvjbStats stats;
};

int nvjb_layout(int components, int subsampling)
{
    if (components == 1) return NVJB_GRAY;
    if (components != 3) return -1;
    switch (subsampling) {
    case NVJPEG_CSS_420: return NVJB_420;
    case NVJPEG_CSS_422: return NVJB_422;
    case NVJPEG_CSS_444: return NVJB_444;
    case NVJPEG_CSS_440: return NVJB_440;
    default: return -1;
    }
}

/* A 16 x 16 smooth colour JPEG of the layout (Y sampling factors h x v over
 * chroma 1 x 1; gray: one component). */
static void dummy_make(Decoder *d, int layout)
{
    static const int hv[NVJB_LAYOUTS][2] = {{2, 2}, {2, 1}, {1, 1}, {1, 2}, {1, 1}};
    const int gray = layout == NVJB_GRAY, C = gray ? 1 : 3;
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr je;
    ci.err = jpeg_std_error(&je);
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &d->dummy, &d->dummy_n);
    ci.image_width = ci.image_height = NVJB_DUMMY;
    ci.input_components = C;
    ci.in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    ci.comp_info[0].h_samp_factor = hv[layout][0];
    ci.comp_info[0].v_samp_factor = hv[layout][1];
    for (int c = 1; c < ci.num_components; c++)
        ci.comp_info[c].h_samp_factor = ci.comp_info[c].v_samp_factor = 1;
    jpeg_start_compress(&ci, TRUE);
    unsigned char row[NVJB_DUMMY * 3];
    while (ci.next_scanline < NVJB_DUMMY) {
        for (int x = 0; x < NVJB_DUMMY * C; x++)
            row[x] = (unsigned char)(8 * x + 12 * ci.next_scanline);
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
}

static void decoder_free(const NvjpegLib *L, Decoder *d)
{
    if (d->st) L->state_destroy(d->st);
    if (d->h) L->destroy(d->h);
    d->st = NULL, d->h = NULL;
    d->init_n = 0;
}

/* Handle and state on B's backend with flags; 1, or 0 with why. */
static int decoder_make(NvjBatch *B, Decoder *d, unsigned flags, char *why, size_t len)
{
    const NvjpegLib *L = B->L;
    nvjpegStatus_t s = L->create_ex_v2 ? L->create_ex_v2(B->backend, &B->da, &B->pa, flags, &d->h)
                                       : L->create_ex(B->backend, NULL, NULL, flags, &d->h);
    const char *step = "nvjpegCreateEx";
    if (s == NVJPEG_STATUS_SUCCESS) {
        step = "nvjpegJpegStateCreate";
        s = L->state_create(d->h, &d->st);
    }
    if (s == NVJPEG_STATUS_SUCCESS) {
        step = "nvjpegDecodeBatchedInitialize";
        s = L->batched_initialize(d->h, d->st, B->call_n, 1, B->out_fmt);
        d->init_n = B->call_n;
    }
    if (s != NVJPEG_STATUS_SUCCESS) {
        if (why) snprintf(why, len, "%s: %s", step, nvjpeg_status_name(s));
        decoder_free(L, d);
        return 0;
    }
    B->stats.layouts_open++;
    return 1;
}

NvjBatch *nvjb_open(const NvjpegLib *L, nvjpegBackend_t b, int call_n, int hint,
                    const nvjpegDevAllocatorV2_t *da, const nvjpegPinnedAllocatorV2_t *pa,
                    unsigned char *pad, char *why, size_t len)
{
    NvjBatch *B = calloc(1, sizeof *B);
    if (B) {
        B->bytes = calloc((size_t)call_n, sizeof *B->bytes);
        B->lens = calloc((size_t)call_n, sizeof *B->lens);
        B->dst = calloc((size_t)call_n, sizeof *B->dst);
        B->real = calloc((size_t)call_n, sizeof *B->real);
    }
    if (!B || !B->bytes || !B->lens || !B->dst || !B->real) {
        snprintf(why, len, "out of host memory");
        nvjb_close(B);
        return NULL;
    }
    B->L = L;
    B->backend = b;
    B->out_fmt = NVJPEG_OUTPUT_RGBI;
    B->cap = B->call_n = call_n;
    B->da = *da;
    B->pa = *pa;
    B->pad = pad;
    for (int l = 0; l < NVJB_LAYOUTS; l++) dummy_make(&B->d[l], l);
    /* Chroma upsampled by interpolation, as libjpeg's default "fancy"
     * upsampling does (jpeg_gpu.h: within 1 level of libjpeg on the
     * engines, against 35 at colour edges without); a library without the
     * flag: without it. */
    int ok = 0;
    for (int k = 0; k < 2 && !ok; k++) {
        B->flags = k ? NVJPEG_FLAGS_DEFAULT : NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
        ok = decoder_make(B, &B->d[NVJB_420], B->flags, why, len);
    }
    if (!ok) {
        nvjb_close(B);
        return NULL;
    }
    B->stats.chroma_interpolated = B->flags != NVJPEG_FLAGS_DEFAULT;
    /* The hardware decoder's memory pool, sized once: worth >20% in NVIDIA's
     * own loaders; a failure here only costs that. */
    if (b == NVJPEG_BACKEND_HARDWARE && L->batched_preallocate)
        (void)L->batched_preallocate(B->d[NVJB_420].h, B->d[NVJB_420].st, call_n, hint, hint,
                                     NVJPEG_CSS_420, B->out_fmt);
    return B;
}

void nvjb_close(NvjBatch *B)
{
    if (!B) return;
    for (int l = 0; l < NVJB_LAYOUTS; l++) {
        if (B->L) decoder_free(B->L, &B->d[l]);
        free(B->d[l].dummy);
    }
    free(B->bytes);
    free(B->lens);
    free(B->dst);
    free(B->real);
    free(B);
}

nvjpegHandle_t nvjb_handle(const NvjBatch *B) { return B->d[NVJB_420].h; }

void nvjb_set_call_size(NvjBatch *B, int n)
{
    B->call_n = n < 1 ? 1 : n > B->cap ? B->cap : n;   /* decoders initialise again at their next call */
}

int nvjb_call_size(const NvjBatch *B) { return B->call_n; }

void nvjb_set_output(NvjBatch *B, int format)
{
    if (format == B->out_fmt) return;
    B->out_fmt = format;
    for (int l = 0; l < NVJB_LAYOUTS; l++) B->d[l].init_n = 0;   /* initialised again */
}

void nvjb_stats(const NvjBatch *B, NvjbStats *st) { *st = B->stats; }

/* Slots [lo, hi) of B's call through decoder d; a failed range is split. */
static void decode_range(NvjBatch *B, Decoder *d, int lo, int hi, uint8_t *failed, cudaStream_t s)
{
    const NvjpegLib *L = B->L;
    const int m = hi - lo;
    nvjpegStatus_t st = NVJPEG_STATUS_SUCCESS;
    if (d->init_n != m) {
        st = L->batched_initialize(d->h, d->st, m, 1, B->out_fmt);
        d->init_n = st == NVJPEG_STATUS_SUCCESS ? m : 0;
    }
    if (st == NVJPEG_STATUS_SUCCESS)
        st = L->batched_decode(d->h, d->st, B->bytes + lo, B->lens + lo, B->dst + lo, s);
    if (st == NVJPEG_STATUS_SUCCESS) return;
    (void)cudaGetLastError();          /* nvJPEG may leave a CUDA error of its own behind */
    B->stats.failed_batches++;
    snprintf(B->stats.last_error, sizeof B->stats.last_error, "nvjpegDecodeBatched of %d image%s: %s",
             m, m == 1 ? "" : "s", nvjpeg_status_name(st));
    d->init_n = 0;                     /* a failed batch must be initialised again */
    if (m == 1) {
        if (B->real[lo] >= 0) failed[B->real[lo]] = 1;
        return;
    }
    decode_range(B, d, lo, lo + m / 2, failed, s);
    decode_range(B, d, lo + m / 2, hi, failed, s);
}

void nvjb_decode(NvjBatch *B, int layout, const unsigned char *const *bytes, const size_t *lens,
                 const nvjpegImage_t *dst, int n, uint8_t *failed, cudaStream_t s)
{
    memset(failed, 0, (size_t)n);
    if (n <= 0) return;
    Decoder *d = &B->d[layout];
    if (!d->h && !d->broken) {
        char why[200];
        if (!decoder_make(B, d, B->flags, why, sizeof why)) {
            d->broken = 1;
            snprintf(B->stats.last_error, sizeof B->stats.last_error, "a decoder for a chroma "
                     "layout: %s", why);
        }
    }
    if (d->broken) {
        memset(failed, 1, (size_t)n);
        return;
    }
    for (int k = 0; k < B->call_n; k++) {
        if (k < n) {
            B->bytes[k] = bytes[k];
            B->lens[k] = lens[k];
            B->dst[k] = dst[k];
            B->real[k] = k;
            continue;
        }
        memset(&B->dst[k], 0, sizeof B->dst[k]);
        unsigned char *slot = B->pad + (size_t)k * NVJB_DUMMY * NVJB_DUMMY * 3;
        if (B->out_fmt == NVJPEG_OUTPUT_YUV) { /* planes within the slot: any layout fits */
            for (int c = 0; c < 3; c++) {
                B->dst[k].channel[c] = slot + (size_t)c * NVJB_DUMMY * NVJB_DUMMY;
                B->dst[k].pitch[c] = NVJB_DUMMY;
            }
        } else {
            B->dst[k].channel[0] = slot;
            B->dst[k].pitch[0] = NVJB_DUMMY * 3;
        }
        B->bytes[k] = d->dummy;
        B->lens[k] = d->dummy_n;
        B->real[k] = -1;
    }
    B->stats.padded += B->call_n - n;
    decode_range(B, d, 0, B->call_n, failed, s);
}

#endif /* CTRAIN_CUDA */
