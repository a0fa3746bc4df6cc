/* gpu_jpeg.c — the device image path (train/feed/jpeg_gpu.h): the resample
 * kernel against a host evaluation of data/resample.h's rule in double, the
 * u8 upload kernel exactly, and nvJPEG's batched decode (hardware and GPU
 * hybrid backends, each when it is available) against libjpeg's.
 *
 * Kernel checks (no nvJPEG needed): photo-like u8 images (tests/jpeg_fixture.h)
 * of several sizes, with RandomResizedCrop boxes (aug_rrc_box), a tiny box
 * (upscaling), a whole 1200x900 image onto S (step ~5: the antialiasing),
 * the evaluation axes (resize + center crop) and flips, at S 224 and 37:
 *   - every output value is exactly fmaf(u, a[c], b[c]) for some u8 u, and
 *     u is within 1 level of the double-precision reference (a rounding
 *     tie may fall either way), with at most 1% of values off by one;
 *   - a flip mirrors the unflipped output exactly;
 *   - bf16 and f16 outputs are the f32 output rounded to nearest even;
 *   - rows no image targets keep their poison (NaN);
 *   - jpeg_gpu_upload_u8 is exact (rows permuted, the others untouched),
 *     refuses a capturing stream, and an upload-only decoder refuses decode.
 * nvJPEG checks, per backend that opens: 460x375 JPEGs at quality 90 as
 * 4:2:0, 4:4:4, 4:2:2, gray, progressive, Adobe CMYK, EXIF-rotated, plus a
 * PNG and a truncated JPEG:
 *   - the probe reads the sizes; baseline 4:2:0 / 4:4:4 / gray are taken,
 *     CMYK, the PNG and the truncated JPEG (no EOI) are not
 *     (JPEG_GPU_FORMAT); progressive, 4:2:2 and EXIF may go either way (on
 *     the H200's engines progressive is not taken, on GPU hybrid it is),
 *     but the decode's flags must agree with the probe's and a row is
 *     written exactly when its flag is 0;
 *   - an S x S window at step 1 (the decoded pixels themselves) against
 *     libjpeg's decode (ISLOW IDCT, fancy upsampling) of the same bytes.
 *     Tolerance, when nvJPEG interpolates chroma (stats.chroma_interpolated):
 *     max |diff| <= 4 levels, mean <= 0.25 (an H200 measured max 1 on the
 *     hardware backend, 3 on GPU hybrid); without that flag: mean <= 1.5,
 *     4:4:4 and gray max <= 8, subsampled files at most 1% of values beyond
 *     16 levels (nearest-neighbour chroma: 35 at hard colour edges). The
 *     figures are printed;
 *   - a RandomResizedCrop box + flip against the host reference applied to
 *     libjpeg's pixels: the same tolerance;
 *   - bf16 decode = f32 decode rounded; a buffer too small marks images
 *     JPEG_GPU_NO_ROOM, jpeg_gpu_reserve makes room and they are taken;
 *   - jpeg_gpu_out_after: with the event held back by a host function on
 *     another stream (1 s), the decode returns while it is pending (nvJPEG's
 *     work does not wait for it), out is untouched until it fires, then
 *     holds the rows of a plain decode.
 * Each backend again with the planes path (jpeg_gpu_set_planes: nvJPEG's
 * Y, Cb, Cr planes, chroma filtered at half resolution and converted by our
 * kernel): only 4:2:0 taken (4:4:4 and gray JPEG_GPU_FORMAT); the window at
 * step 1 against libjpeg with max 4 levels and mean 0.5 (the chroma filter
 * at step 1 is libjpeg's fancy upsampling; libjpeg rounds the upsampled
 * chroma and uses integer tables, the planes path rounds once: a
 * simulation on libjpeg's own planes gave max 1, mean 0.32), also with
 * even window edges (top 60, left 96); the RandomResizedCrop with the
 * loose tolerance (its chroma filter has its own radius at half
 * resolution); bf16 = f32 rounded; calls cut to 2 the same bits.
 * On an A100 / H100 / H200 the automatic choice must be the hardware backend.
 * A missing nvJPEG (CTRAIN_NVJPEG_LIB naming no file, in a child process)
 * says so, with the file's name. What is skipped, and why, is printed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/augment.h"
#include "data/resample.h"
#include "engine/ctx.h"
#include "engine/tensor.h"
#include "train/feed/jpeg_gpu.h"
#include "train/feed/nvjpeg_lib.h"
#include "check.h"
#include "gpu_util.h"
#include "jpeg_fixture.h"

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};
static float A[3], B[3];

/* ---- host reference: data/resample.h's rule in double ---- */

static void ref_resample(uint8_t *out, const uint8_t *img, int W, RsAxis ay, RsAxis ax,
                         int flip, int S)
{
    double ry = rs_radius(ay), rx = rs_radius(ax);
    for (int oy = 0; oy < S; oy++) {
        float cy;
        int y0, y1;
        rs_span(ay, oy, &cy, &y0, &y1);
        for (int ox = 0; ox < S; ox++) {
            float cx;
            int x0, x1;
            rs_span(ax, flip ? S - 1 - ox : ox, &cx, &x0, &x1);
            double acc[3] = {0, 0, 0}, wys = 0, wxs = 0;
            for (int x = x0; x < x1; x++) wxs += fmax(0.0, 1.0 - fabs(x + 0.5 - (double)cx) / rx);
            for (int y = y0; y < y1; y++) {
                double wy = fmax(0.0, 1.0 - fabs(y + 0.5 - (double)cy) / ry);
                wys += wy;
                for (int x = x0; x < x1; x++) {
                    double wx = fmax(0.0, 1.0 - fabs(x + 0.5 - (double)cx) / rx);
                    const uint8_t *p = img + ((size_t)y * W + x) * 3;
                    for (int c = 0; c < 3; c++) acc[c] += wy * wx * p[c];
                }
            }
            for (int c = 0; c < 3; c++) {
                double v = acc[c] / (wys * wxs);
                v = v < 0 ? 0 : v > 255 ? 255 : v;
                out[((size_t)oy * S + ox) * 3 + c] = (uint8_t)floor(v + 0.5);
            }
        }
    }
}

/* The u8 value whose normalisation is exactly x in channel c, or -1. */
static int unnorm(float x, int c)
{
    int lo = 0, hi = 255;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (fmaf((float)mid, A[c], B[c]) < x) lo = mid + 1;
        else hi = mid;
    }
    return fmaf((float)lo, A[c], B[c]) == x ? lo : -1;
}

/* Row r of a downloaded f32 output as u8 (-1: not a normalised u8 value). */
static void row_u8(int *u, const float *x, int r, int S)
{
    size_t n = (size_t)S * S * 3, o = (size_t)r * n;
    for (size_t e = 0; e < n; e++) u[e] = isnan(x[o + e]) ? -1 : unnorm(x[o + e], (int)(e % 3));
}

static int row_all_nan(const float *x, int r, int S)
{
    size_t n = (size_t)S * S * 3, o = (size_t)r * n;
    for (size_t e = 0; e < n; e++)
        if (!isnan(x[o + e])) return 0;
    return 1;
}

/* A device f32/bf16/f16 [B, S, S, 3] output filled with NaN, as a tensor view. */
static Tensor *out_new(Ctx *c, DType dt, int Bn, int S)
{
    int64_t shape[4] = {Bn, S, S, 3};
    return tensor_view(c, gpu_alloc_poison((size_t)Bn * S * S * 3, dt), dt, 4, shape);
}

static void out_free(Tensor *t)
{
    dfree(t->data);
    tensor_release(t);
}

static void out_download(float *h, const Tensor *t) { gpu_download(h, t->data, t->numel, t->dtype); }

/* bf16 / f16 raw download equals f32 rounded to dt, element for element. */
static void check_lowp_equal(const char *name, const Tensor *lo, const float *f32)
{
    size_t n = lo->numel, bad = 0, first = 0;
    uint16_t *raw = malloc(n * 2);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(raw, lo->data, n * 2, cudaMemcpyDeviceToHost));
    for (size_t e = 0; e < n; e++) {
        uint16_t want = isnan(f32[e]) ? raw[e]
                        : lo->dtype == DT_BF16 ? f32_to_bf16(f32[e]) : f32_to_f16(f32[e]);
        if (raw[e] != want && !bad++) first = e;
    }
    check_true(name, bad == 0, "%zu of %zu values differ from the f32 output rounded to %s "
               "(first at [%zu])", bad, n, dtype_name(lo->dtype), first);
    free(raw);
}

/* ---- the resample kernel on synthetic decoded images ---- */

typedef struct {
    int h, w;
    const char *kind;    /* "rrc", "tiny", "whole", "val" */
    int flip;
} KCase;

static void axes_for(const KCase *k, int S, uint32_t index, RsAxis *ay, RsAxis *ax)
{
    AugConfig cfg;
    aug_config_default(&cfg, S);
    if (!strcmp(k->kind, "rrc")) {
        AugBox b = aug_rrc_box(k->h, k->w, &cfg, 7, 1, index);
        *ay = rs_axis_box(b.top, b.h, S);
        *ax = rs_axis_box(b.left, b.w, S);
    } else if (!strcmp(k->kind, "tiny")) {
        *ay = rs_axis_box(k->h / 3, 11, S);
        *ax = rs_axis_box(k->w / 2, 17, S);
    } else if (!strcmp(k->kind, "whole")) {
        *ay = rs_axis_box(0, k->h, S);
        *ax = rs_axis_box(0, k->w, S);
    } else {  /* resize the shorter side to cfg.resize, center crop S */
        int R = cfg.resize, sh = k->h < k->w ? k->h : k->w;
        int h2 = k->h == sh ? R : (int)((double)R * k->h / sh);
        int w2 = k->w == sh ? R : (int)((double)R * k->w / sh);
        *ay = rs_axis_resized(k->h, h2, (int)lrint((h2 - S) / 2.0));
        *ax = rs_axis_resized(k->w, w2, (int)lrint((w2 - S) / 2.0));
    }
}

static void test_resample(Ctx *c, int S)
{
    static const KCase cases[] = {
        {375, 460, "rrc", 0}, {375, 460, "rrc", 1}, {333, 500, "rrc", 1}, {500, 333, "rrc", 0},
        {375, 460, "tiny", 0}, {900, 1200, "whole", 1}, {375, 460, "val", 0},
        {64, 80, "rrc", 1}, {900, 1200, "rrc", 0},
    };
    const int n = (int)(sizeof cases / sizeof *cases), Bn = n + 2;
    uint8_t *imgs[16];
    size_t off[16], total = 0;
    JpegGpuImage meta[16];
    for (int k = 0; k < n; k++) {
        imgs[k] = malloc((size_t)cases[k].h * cases[k].w * 3);
        jfx_pattern(imgs[k], cases[k].h, cases[k].w, 3, 100 + (uint64_t)k);
        off[k] = total;
        total += ((size_t)cases[k].h * cases[k].w * 3 + 255) / 256 * 256;
    }
    uint8_t *dsrc = NULL;
    CUDA_CHECK(cudaMalloc((void **)&dsrc, total));
    for (int k = 0; k < n; k++) {
        CUDA_CHECK(cudaMemcpy(dsrc + off[k], imgs[k], (size_t)cases[k].h * cases[k].w * 3,
                              cudaMemcpyHostToDevice));
        memset(&meta[k], 0, sizeof meta[k]);
        meta[k].offset = off[k];
        meta[k].h = cases[k].h;
        meta[k].w = cases[k].w;
        meta[k].row = Bn - 1 - k;          /* reversed, two rows left over */
        meta[k].flip = cases[k].flip;
        axes_for(&cases[k], S, (uint32_t)k, &meta[k].ay, &meta[k].ax);
    }
    JpegGpuImage *dmeta = gpu_upload_raw(meta, sizeof(JpegGpuImage) * (size_t)n);
    size_t per = (size_t)S * S * 3;
    float *got = falloc((size_t)Bn * per);
    Tensor *o32 = out_new(c, DT_F32, Bn, S);
    sync_all();
    jpeg_gpu_resample_cuda(o32->data, DT_F32, S, dsrc, dmeta, n, A, B, c->stream);
    out_download(got, o32);
    int *u = malloc(per * sizeof(int));
    uint8_t *ref = malloc(per);
    char name[128];
    for (int k = 0; k < n; k++) {
        const KCase *kc = &cases[k];
        ref_resample(ref, imgs[k], kc->w, meta[k].ay, meta[k].ax, kc->flip, S);
        row_u8(u, got, meta[k].row, S);
        size_t notu8 = 0, off1 = 0, worse = 0;
        for (size_t e = 0; e < per; e++) {
            if (u[e] < 0) { notu8++; continue; }
            int d = abs(u[e] - ref[e]);
            off1 += d == 1;
            worse += d > 1;
        }
        snprintf(name, sizeof name, "resample.S%d.%s.%dx%d%s.normalised_u8", S, kc->kind, kc->h,
                 kc->w, kc->flip ? ".flip" : "");
        check_true(name, notu8 == 0, "%zu of %zu values are not fmaf(u, a, b) of a u8 u", notu8, per);
        snprintf(name, sizeof name, "resample.S%d.%s.%dx%d%s.vs_double", S, kc->kind, kc->h, kc->w,
                 kc->flip ? ".flip" : "");
        check_true(name, worse == 0 && off1 * 100 <= per,
                   "%zu values more than 1 level from the double reference, %zu off by 1 (of %zu)",
                   worse, off1, per);
    }
    snprintf(name, sizeof name, "resample.S%d.untargeted_rows_untouched", S);
    check_true(name, row_all_nan(got, 0, S) && row_all_nan(got, 1, S), "rows 0, 1 were written");

    /* flip mirrors exactly: the same boxes with every flip inverted */
    JpegGpuImage meta2[16];
    memcpy(meta2, meta, sizeof meta);
    for (int k = 0; k < n; k++) meta2[k].flip = !meta[k].flip;
    JpegGpuImage *dmeta2 = gpu_upload_raw(meta2, sizeof(JpegGpuImage) * (size_t)n);
    Tensor *of = out_new(c, DT_F32, Bn, S);
    float *gotf = falloc((size_t)Bn * per);
    sync_all();
    jpeg_gpu_resample_cuda(of->data, DT_F32, S, dsrc, dmeta2, n, A, B, c->stream);
    out_download(gotf, of);
    size_t bad = 0;
    for (int k = 0; k < n; k++) {
        size_t o = (size_t)meta[k].row * per;
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                for (int ch = 0; ch < 3; ch++)
                    bad += memcmp(&got[o + ((size_t)y * S + x) * 3 + ch],
                                  &gotf[o + ((size_t)y * S + (S - 1 - x)) * 3 + ch], 4) != 0;
    }
    snprintf(name, sizeof name, "resample.S%d.flip_mirrors_exactly", S);
    check_true(name, bad == 0, "%zu values differ from the mirrored unflipped output", bad);

    /* bf16 / f16: the f32 results rounded */
    for (int t = 0; t < 2; t++) {
        DType dt = t ? DT_F16 : DT_BF16;
        Tensor *ol = out_new(c, dt, Bn, S);
        sync_all();
        jpeg_gpu_resample_cuda(ol->data, dt, S, dsrc, dmeta, n, A, B, c->stream);
        snprintf(name, sizeof name, "resample.S%d.%s_is_f32_rounded", S, dtype_name(dt));
        check_lowp_equal(name, ol, got);
        out_free(ol);
    }
    out_free(o32);
    out_free(of);
    dfree(dmeta);
    dfree(dmeta2);
    dfree(dsrc);
    free(got);
    free(gotf);
    free(u);
    free(ref);
    for (int k = 0; k < n; k++) free(imgs[k]);
}

/* ---- u8 upload ---- */

static void test_upload(Ctx *c)
{
    char err[512];
    const int S = 40, n = 3, Bn = 6, rows[3] = {4, 0, 2};
    JpegGpu *g = jpeg_gpu_open(c, 4, S, 0, JPEG_GPU_UPLOAD, err, sizeof err);
    if (!check_true("upload.open_without_nvjpeg", g != NULL, "%s", err)) return;
    size_t per = (size_t)S * S * 3;
    uint8_t *px = NULL;
    CUDA_CHECK(cudaMallocHost((void **)&px, n * per));
    for (size_t e = 0; e < n * per; e++) px[e] = (uint8_t)(check_uniform(0, 256));
    float *got = falloc(Bn * per);
    for (int t = 0; t < 3; t++) {
        DType dt = gpu_float_types[t];
        Tensor *o = out_new(c, dt, Bn, S);
        sync_all();
        int rc = jpeg_gpu_upload_u8(g, o, rows, px, n, MEAN, STD, c->stream, err, sizeof err);
        char name[96];
        snprintf(name, sizeof name, "upload.%s.returns_0", dtype_name(dt));
        check_true(name, rc == 0, "%s", err);
        out_download(got, o);
        size_t bad = 0;
        for (int k = 0; k < n; k++)
            for (size_t e = 0; e < per; e++) {
                float want = fmaf((float)px[k * per + e], A[e % 3], B[e % 3]);
                if (dt == DT_BF16) want = bf16_to_f32(f32_to_bf16(want));
                if (dt == DT_F16) want = f16_to_f32(f32_to_f16(want));
                bad += got[(size_t)rows[k] * per + e] != want;
            }
        snprintf(name, sizeof name, "upload.%s.exact", dtype_name(dt));
        check_true(name, bad == 0, "%zu of %zu values differ from fmaf(u, a, b)", bad, n * per);
        snprintf(name, sizeof name, "upload.%s.other_rows_untouched", dtype_name(dt));
        check_true(name, row_all_nan(got, 1, S) && row_all_nan(got, 3, S) && row_all_nan(got, 5, S),
                   "a row no image was sent to was written");
        out_free(o);
    }
    /* rows NULL: 0..n-1; a row outside the output is refused */
    Tensor *o = out_new(c, DT_F32, n, S);
    sync_all();
    int rc = jpeg_gpu_upload_u8(g, o, NULL, px, n, MEAN, STD, c->stream, err, sizeof err);
    out_download(got, o);
    check_true("upload.rows_null_in_order", rc == 0 && got[per] == fmaf((float)px[per], A[0], B[0]),
               "rc %d: %s", rc, err);
    const int bad_rows[3] = {0, 1, 7};
    rc = jpeg_gpu_upload_u8(g, o, bad_rows, px, n, MEAN, STD, c->stream, err, sizeof err);
    check_true("upload.row_outside_refused", rc == -1 && strstr(err, "outside"), "rc %d: %s", rc, err);

    /* a capturing stream is refused (the step graph must not hold decoding) */
    cudaStream_t cs;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    rc = jpeg_gpu_upload_u8(g, o, NULL, px, n, MEAN, STD, cs, err, sizeof err);
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamEndCapture(cs, &graph));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(cs));
    check_true("upload.capturing_stream_refused", rc == -1 && strstr(err, "captured"), "rc %d: %s",
               rc, err);

    /* decode on an upload-only decoder is an error, not a crash */
    uint8_t fb[1];
    const uint8_t *bp[1] = {px};
    size_t ln[1] = {16};
    JpegGpuBox bx[1];
    memset(bx, 0, sizeof bx);
    rc = jpeg_gpu_decode(g, o, fb, bp, ln, NULL, bx, 1, MEAN, STD, c->stream, err, sizeof err);
    check_true("upload.decode_refused", rc == -1 && strstr(err, "uploads only"), "rc %d: %s", rc, err);
    JpegGpuStats st;
    jpeg_gpu_stats(g, &st);
    check_true("upload.stats", st.backend == JPEG_GPU_UPLOAD && st.uploaded == 3 * n + n,
               "backend %s, uploaded %lld", jpeg_gpu_backend_name(st.backend), st.uploaded);
    out_free(o);
    free(got);
    CUDA_CHECK(cudaFreeHost(px));
    jpeg_gpu_close(g);
}

/* ---- nvJPEG decode against libjpeg ---- */

/* libjpeg's decode to RGB u8 [H, W, 3] (gray replicated); malloc'd. */
static uint8_t *libjpeg_rgb(const uint8_t *bytes, size_t n, int *H, int *W)
{
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, bytes, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    ci.out_color_space = JCS_RGB;
    jpeg_start_decompress(&ci);
    *H = (int)ci.output_height;
    *W = (int)ci.output_width;
    uint8_t *img = malloc((size_t)*H * *W * 3);
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW row = img + (size_t)ci.output_scanline * *W * 3;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    return img;
}

enum { IMG_420, IMG_444, IMG_422, IMG_GRAY, IMG_PROG, IMG_CMYK, IMG_EXIF, IMG_PNG, IMG_TRUNC,
       NIMG };
static const char *img_name[NIMG] = {"420", "444", "422", "gray", "progressive", "cmyk",
                                     "exif6", "png", "truncated"};
#define JH 375
#define JW 460

typedef struct {
    uint8_t *bytes[NIMG];
    size_t lens[NIMG];
    uint8_t *ref[NIMG];   /* libjpeg's pixels, NULL where libjpeg is not the reference */
} JpegSet;

static void jpegset_make(JpegSet *s)
{
    memset(s, 0, sizeof *s);
    uint8_t *pix = malloc((size_t)JH * JW * 3);
    jfx_pattern(pix, JH, JW, 3, 2024);
    for (int i = 0; i < NIMG; i++) {
        JfxOptions o = {0};
        o.quality = 90;
        if (i == IMG_444) o.subsample = JFX_444;
        if (i == IMG_422) o.subsample = JFX_422;
        if (i == IMG_GRAY) o.gray = 1;
        if (i == IMG_PROG) o.progressive = 1;
        if (i == IMG_CMYK) o.cmyk = 1;
        if (i == IMG_EXIF) o.orientation = 6;
        if (i == IMG_PNG) {
            /* a small PNG: 8 bytes of signature are all the probe needs to refuse it */
            static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13,
                                          'I', 'H', 'D', 'R', 0, 0, 1, 0, 0, 0, 1, 0, 8, 2, 0, 0, 0};
            s->bytes[i] = malloc(sizeof png);
            memcpy(s->bytes[i], png, sizeof png);
            s->lens[i] = sizeof png;
            continue;
        }
        unsigned char *b;
        unsigned long n;
        jfx_jpeg_encode(&b, &n, pix, JH, JW, 3, &o);
        if (i == IMG_TRUNC) n = n * 2 / 5;   /* the header and 40% of the scan */
        s->bytes[i] = b;
        s->lens[i] = n;
        if (i != IMG_CMYK && i != IMG_TRUNC) {
            int h, w;
            s->ref[i] = libjpeg_rgb(b, n, &h, &w);
            if (h != JH || w != JW) jfx_die_("libjpeg decoded another size");
        }
    }
    free(pix);
}

static void jpegset_free(JpegSet *s)
{
    for (int i = 0; i < NIMG; i++) {
        free(s->bytes[i]);
        free(s->ref[i]);
    }
}

/* Decoded u8 row against the reference u8: mean, max, share beyond 16. */
static void diff_stats(const int *u, const uint8_t *ref, size_t n, double *mean, int *mx,
                       double *beyond16)
{
    double sum = 0;
    size_t far = 0;
    *mx = 0;
    for (size_t e = 0; e < n; e++) {
        int d = u[e] < 0 ? 255 : abs(u[e] - ref[e]);
        sum += d;
        far += d > 16;
        if (d > *mx) *mx = d;
    }
    *mean = sum / (double)n;
    *beyond16 = (double)far / (double)n;
}

static void check_tolerance(const char *tag, int img, const int *u, const uint8_t *ref, size_t n,
                            int tight)
{
    double mean, far;
    int mx;
    diff_stats(u, ref, n, &mean, &mx, &far);
    printf("  %s.%s: |nvJPEG - libjpeg| mean %.3f max %d, beyond 16 levels %.3f%%\n", tag,
           img_name[img], mean, mx, 100 * far);
    char name[128];
    if (tight) { /* 2: the planes path, which rounds once where libjpeg rounds twice */
        const double mean_max = tight == 2 ? 0.5 : 0.25;
        snprintf(name, sizeof name, "%s.%s.max_within_4", tag, img_name[img]);
        check_true(name, mx <= 4 && mean <= mean_max, "max |diff| %d, mean %.3f levels (mean "
                   "allowed %.2f)", mx, mean, mean_max);
        return;
    }
    snprintf(name, sizeof name, "%s.%s.mean_within_1.5", tag, img_name[img]);
    check_true(name, mean <= 1.5, "mean |diff| %.3f levels", mean);
    if (img == IMG_444 || img == IMG_GRAY) {
        snprintf(name, sizeof name, "%s.%s.max_within_8", tag, img_name[img]);
        check_true(name, mx <= 8, "max |diff| %d levels", mx);
    } else {
        snprintf(name, sizeof name, "%s.%s.beyond_16_under_1pct", tag, img_name[img]);
        check_true(name, far <= 0.01, "%.3f%% of values beyond 16 levels", 100 * far);
    }
}

/* the window [top, top + S) x [left, left + S) of ref u8 [JH, JW, 3] */
static void window(uint8_t *w, const uint8_t *ref, int top, int left, int S)
{
    for (int y = 0; y < S; y++)
        memcpy(w + (size_t)y * S * 3, ref + ((size_t)(top + y) * JW + left) * 3, (size_t)S * 3);
}

/* A host function that holds its stream for a second (test_backend's out_after). */
static void CUDART_CB hold_one_second(void *arg)
{
    (void)arg;
    struct timespec t = {1, 0};
    nanosleep(&t, NULL);
}

static void test_backend(Ctx *c, JpegGpuBackend be, const JpegSet *js, int planes)
{
    char err[600], tag[64], name[160];
    const int S = 224, top = 61, left = 97;
    snprintf(tag, sizeof tag, "nvjpeg.%s%s", jpeg_gpu_backend_name(be), planes ? ".planes" : "");
    JpegGpu *g = jpeg_gpu_open(c, 16, S, 512, be, err, sizeof err);
    if (!g) {
        printf("  skipped: %s decode checks: %s\n", tag, err);
        return;
    }
    jpeg_gpu_set_planes(g, planes);
    JpegGpuStats st;
    jpeg_gpu_stats(g, &st);
    printf("  %s: nvJPEG %d.%d.%d, %u engines x %u cores, chroma %s\n", tag, st.version[0],
           st.version[1], st.version[2], st.hw_engines, st.hw_cores,
           planes ? "filtered by ctrain's kernel"
                  : st.chroma_interpolated ? "interpolated" : "nearest (no interpolation flag)");
    const int tight = planes ? 2 : st.chroma_interpolated;
    snprintf(name, sizeof name, "%s.backend", tag);
    check_true(name, st.backend == be, "opened %s", jpeg_gpu_backend_name(st.backend));

    const uint8_t *bytes[NIMG];
    for (int i = 0; i < NIMG; i++) bytes[i] = js->bytes[i];
    JpegGpuInfo info[NIMG];
    int taken = jpeg_gpu_probe(g, info, bytes, js->lens, NIMG);
    printf("  %s: probe takes %d of %d:", tag, taken, NIMG);
    for (int i = 0; i < NIMG; i++) printf(" %s=%d", img_name[i], info[i].gpu);
    printf("\n");
    for (int i = 0; i < NIMG; i++) {
        if (i == IMG_PNG) continue;
        snprintf(name, sizeof name, "%s.probe.%s.size", tag, img_name[i]);
        check_true(name, info[i].h == JH && info[i].w == JW, "%d x %d, want %d x %d", info[i].h,
                   info[i].w, JH, JW);
    }
    const int must_take[] = {IMG_420, IMG_444, IMG_GRAY};
    const int must_not[] = {IMG_CMYK, IMG_PNG, IMG_TRUNC, IMG_444, IMG_GRAY};
    for (int k = 0; k < (planes ? 1 : 3); k++) {
        snprintf(name, sizeof name, "%s.probe.%s.taken", tag, img_name[must_take[k]]);
        check_true(name, info[must_take[k]].gpu == JPEG_GPU_TAKEN, "not taken (%d)",
                   info[must_take[k]].gpu);
    }
    for (int k = 0; k < (planes ? 5 : 3); k++) {
        snprintf(name, sizeof name, "%s.probe.%s.not_taken", tag, img_name[must_not[k]]);
        check_true(name, info[must_not[k]].gpu == JPEG_GPU_FORMAT, "flag %d, want JPEG_GPU_FORMAT",
                   info[must_not[k]].gpu);
    }

    /* 1. the decoded pixels themselves: an S x S window at step 1 */
    JpegGpuBox box[NIMG];
    for (int i = 0; i < NIMG; i++) {
        box[i].ay = rs_axis_box(top, S, S);
        box[i].ax = rs_axis_box(left, S, S);
        box[i].flip = 0;
    }
    uint8_t fb[NIMG];
    Tensor *o = out_new(c, DT_F32, NIMG, S);
    size_t per = (size_t)S * S * 3;
    float *got = falloc(NIMG * per);
    int *u = malloc(per * sizeof(int));
    uint8_t *ref = malloc(per);
    sync_all();
    int rc = jpeg_gpu_decode(g, o, fb, bytes, js->lens, info, box, NIMG, MEAN, STD, c->stream, err,
                             sizeof err);
    snprintf(name, sizeof name, "%s.decode.returns_0", tag);
    check_true(name, rc == 0, "%s", err);
    out_download(got, o);
    for (int i = 0; i < NIMG; i++) {
        snprintf(name, sizeof name, "%s.decode.%s.flag_consistent", tag, img_name[i]);
        int ok = info[i].gpu ? fb[i] == info[i].gpu : fb[i] == 0 || fb[i] == JPEG_GPU_FAILED;
        check_true(name, ok, "probe %d, decode %d", info[i].gpu, fb[i]);
        snprintf(name, sizeof name, "%s.decode.%s.row_written_iff_taken", tag, img_name[i]);
        row_u8(u, got, i, S);
        size_t notu8 = 0;
        for (size_t e = 0; e < per; e++) notu8 += u[e] < 0;
        check_true(name, fb[i] ? row_all_nan(got, i, S) : notu8 == 0,
                   "flag %d, %zu of %zu values not normalised u8", fb[i], notu8, per);
        if (fb[i] == 0 && js->ref[i]) {
            window(ref, js->ref[i], top, left, S);
            char t2[96];
            snprintf(t2, sizeof t2, "%s.pixels", tag);
            check_tolerance(t2, i, u, ref, per, tight);
        }
    }
    uint8_t fbe[NIMG];   /* the even-edges decode's flags (planes only) */
    memset(fbe, 0, sizeof fbe);
    if (planes) { /* even window edges: the chroma window must still reach outside */
        const int top2 = 60, left2 = 96;
        for (int i = 0; i < NIMG; i++) {
            box[i].ay = rs_axis_box(top2, S, S);
            box[i].ax = rs_axis_box(left2, S, S);
        }
        sync_all();
        rc = jpeg_gpu_decode(g, o, fbe, bytes, js->lens, info, box, NIMG, MEAN, STD, c->stream,
                             err, sizeof err);
        out_download(got, o);
        for (int i = 0; !rc && i < NIMG; i++) {
            if (fbe[i] || !js->ref[i]) continue;
            window(ref, js->ref[i], top2, left2, S);
            row_u8(u, got, i, S);
            char t2[96];
            snprintf(t2, sizeof t2, "%s.pixels_even_edges", tag);
            check_tolerance(t2, i, u, ref, per, tight);
        }
    }
    jpeg_gpu_stats(g, &st);
    /* the counts run over every decode so far: one, or two with the planes' even edges */
    int n_taken = 0, n_images = NIMG;
    for (int i = 0; i < NIMG; i++) n_taken += fb[i] == 0;
    if (planes) {
        n_images += NIMG;
        for (int i = 0; i < NIMG; i++) n_taken += !rc && fbe[i] == 0;
    }
    snprintf(name, sizeof name, "%s.stats.taken", tag);
    check_true(name, st.taken == n_taken && st.images == n_images, "stats taken %lld images "
               "%lld, flags say %d of %d", st.taken, st.images, n_taken, n_images);
    if (st.last_error[0]) printf("  %s: last batch error: %s\n", tag, st.last_error);

    /* 2. RandomResizedCrop + flip against the reference on libjpeg's pixels;
     *    info NULL (the decoder probes), and bf16 = f32 rounded */
    AugConfig cfg;
    aug_config_default(&cfg, S);
    for (int i = 0; i < NIMG; i++) {
        AugBox b = aug_rrc_box(JH, JW, &cfg, 11, 0, (uint32_t)i);
        box[i].ay = rs_axis_box(b.top, b.h, S);
        box[i].ax = rs_axis_box(b.left, b.w, S);
        box[i].flip = i % 2;
    }
    Tensor *o2 = out_new(c, DT_F32, NIMG, S), *o3 = out_new(c, DT_BF16, NIMG, S);
    uint8_t fb3[NIMG];
    sync_all();
    rc = jpeg_gpu_decode(g, o2, fb, bytes, js->lens, NULL, box, NIMG, MEAN, STD, c->stream, err,
                         sizeof err);
    int rc3 = jpeg_gpu_decode(g, o3, fb3, bytes, js->lens, NULL, box, NIMG, MEAN, STD, c->stream,
                              err, sizeof err);
    snprintf(name, sizeof name, "%s.rrc.returns_0", tag);
    check_true(name, rc == 0 && rc3 == 0 && !memcmp(fb, fb3, sizeof fb), "%s", err);
    out_download(got, o2);
    for (int i = 0; i < NIMG; i++) {
        if (fb[i] || !js->ref[i]) continue;
        ref_resample(ref, js->ref[i], JW, box[i].ay, box[i].ax, box[i].flip, S);
        row_u8(u, got, i, S);
        char t2[96];
        snprintf(t2, sizeof t2, "%s.rrc", tag);
        check_tolerance(t2, i, u, ref, per, tight && !planes);
    }
    snprintf(name, sizeof name, "%s.rrc.bf16_is_f32_rounded", tag);
    check_lowp_equal(name, o3, got);

    /* 3. nvJPEG called with one chroma layout and one size a call
     *    (nvjpeg_batch.h): a decoder per layout seen, the rest of each call
     *    padded; calls cut to 2 images give the same rows bit for bit */
    jpeg_gpu_stats(g, &st);
    snprintf(name, sizeof name, "%s.layouts", tag);
    check_true(name, st.layouts >= (planes ? 1 : 4) && st.padded > 0, "%d decoders, %lld padded "
               "images (%s taken)", st.layouts, st.padded, planes ? "420" : "420, 444, 422 and gray");
    jpeg_gpu_set_call_size(g, 2);
    Tensor *o5 = out_new(c, DT_F32, NIMG, S);
    uint8_t fb5[NIMG];
    float *got5 = falloc(NIMG * per);
    sync_all();
    rc = jpeg_gpu_decode(g, o5, fb5, bytes, js->lens, NULL, box, NIMG, MEAN, STD, c->stream, err,
                         sizeof err);
    out_download(got5, o5);
    int differ = 0;
    for (int i = 0; i < NIMG; i++)
        if (!fb[i] && !fb5[i]) differ += memcmp(got + i * per, got5 + i * per, per * sizeof(float)) != 0;
    snprintf(name, sizeof name, "%s.call_size_2.same_rows", tag);
    check_true(name, rc == 0 && !memcmp(fb, fb5, sizeof fb) && differ == 0,
               "rc %d (%s), flags %s, %d rows differ", rc, err,
               memcmp(fb, fb5, sizeof fb) ? "differ" : "equal", differ);

    /* out_after: the decode returns, its nvJPEG work queued and waited on by the host,
     * while the event is still pending (a host function holds its stream for 1 s); out is
     * untouched until the event, then holds the same rows */
    cudaStream_t hold;
    cudaEvent_t gate;
    CUDA_CHECK(cudaStreamCreateWithFlags(&hold, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&gate, cudaEventDisableTiming));
    CUDA_CHECK(cudaMemset(o5->data, 0xFF, o5->numel * dtype_size(o5->dtype)));
    sync_all();
    CUDA_CHECK(cudaLaunchHostFunc(hold, hold_one_second, NULL));
    CUDA_CHECK(cudaEventRecord(gate, hold));
    jpeg_gpu_out_after(g, gate);
    rc = jpeg_gpu_decode(g, o5, fb5, bytes, js->lens, NULL, box, NIMG, MEAN, STD, c->stream, err,
                         sizeof err);
    const int pending_at_return = cudaEventQuery(gate) == cudaErrorNotReady;
    const size_t ob = o5->numel * dtype_size(o5->dtype);
    uint8_t *raw = malloc(ob);
    /* a copy on the legacy stream, which waits for neither non-blocking stream */
    CUDA_CHECK(cudaMemcpy(raw, o5->data, ob, cudaMemcpyDeviceToHost));
    const int pending_after_look = cudaEventQuery(gate) == cudaErrorNotReady;
    size_t touched = 0;
    for (size_t i = 0; i < ob; i++) touched += raw[i] != 0xFF;
    free(raw);
    sync_all();
    out_download(got5, o5);
    differ = 0;
    for (int i = 0; i < NIMG; i++)
        if (!fb[i] && !fb5[i])
            differ += memcmp(got + i * per, got5 + i * per, per * sizeof(float)) != 0;
    snprintf(name, sizeof name, "%s.out_after.decode_does_not_wait", tag);
    check_true(name, rc == 0 && pending_at_return, "rc %d (%s), the event %s when the decode "
               "returned", rc, err, pending_at_return ? "pending" : "already done");
    snprintf(name, sizeof name, "%s.out_after.out_untouched_before", tag);
    check_true(name, pending_after_look && touched == 0, "%zu bytes of out written before the "
               "event (the event %s when out was read)", touched,
               pending_after_look ? "pending" : "already done: nothing shown");
    snprintf(name, sizeof name, "%s.out_after.same_rows", tag);
    check_true(name, !memcmp(fb, fb5, sizeof fb) && differ == 0, "flags %s, %d rows differ",
               memcmp(fb, fb5, sizeof fb) ? "differ" : "equal", differ);
    CUDA_CHECK(cudaEventDestroy(gate));
    CUDA_CHECK(cudaStreamDestroy(hold));
    free(got5);
    out_free(o5);
    out_free(o);
    out_free(o2);
    out_free(o3);
    jpeg_gpu_close(g);

    /* 3. no room: a 64 x 64 hint leaves no room for 460 x 375 images; reserve makes it
     *    (the buffer's logic: once, on the RGB path) */
    g = planes ? NULL : jpeg_gpu_open(c, 4, S, 64, be, err, sizeof err);
    snprintf(name, sizeof name, "%s.small.open", tag);
    if (!planes && check_true(name, g != NULL, "%s", err)) {
        const uint8_t *b4[2] = {js->bytes[IMG_420], js->bytes[IMG_444]};
        size_t l4[2] = {js->lens[IMG_420], js->lens[IMG_444]};
        Tensor *o4 = out_new(c, DT_F32, 2, S);
        sync_all();
        rc = jpeg_gpu_decode(g, o4, fb, b4, l4, NULL, box, 2, MEAN, STD, c->stream, err, sizeof err);
        jpeg_gpu_stats(g, &st);
        snprintf(name, sizeof name, "%s.small.no_room", tag);
        check_true(name, rc == 0 && fb[0] == JPEG_GPU_NO_ROOM && fb[1] == JPEG_GPU_NO_ROOM &&
                   st.want_bytes >= (size_t)2 * JH * JW * 3,
                   "rc %d flags %d %d want %zu (%s)", rc, fb[0], fb[1], st.want_bytes, err);
        rc = jpeg_gpu_reserve(g, st.want_bytes, err, sizeof err);
        int rc2 = jpeg_gpu_decode(g, o4, fb, b4, l4, NULL, box, 2, MEAN, STD, c->stream, err,
                                  sizeof err);
        snprintf(name, sizeof name, "%s.small.reserve_then_taken", tag);
        check_true(name, rc == 0 && rc2 == 0 && fb[0] == 0 && fb[1] == 0, "rc %d %d flags %d %d (%s)",
                   rc, rc2, fb[0], fb[1], err);
        out_free(o4);
        jpeg_gpu_close(g);
    }
    free(got);
    free(u);
    free(ref);
}

/* ---- a missing nvJPEG, in a child (the library loads once per process) ---- */

static void child_missing(void *arg)
{
    (void)arg;
    setenv("CTRAIN_NVJPEG_LIB", "/nonexistent/libnvjpeg-missing.so", 1);
    char reason[512] = "", err[512] = "";
    int avail = nvjpeg_available(reason, sizeof reason);
    /* a context that was never initialised: open must fail before any CUDA call */
    Ctx c;
    memset(&c, 0, sizeof c);
    c.device = DEV_CUDA;
    JpegGpu *g = jpeg_gpu_open(&c, 4, 32, 0, JPEG_GPU_AUTO, err, sizeof err);
    fprintf(stderr, "available=%d reason=[%s] open=%s err=[%s]\n", avail, reason, g ? "ok" : "NULL",
            err);
    _exit(avail == 0 && g == NULL ? 0 : 1);
}

int main(void)
{
    char msg[2048];
    int rc = check_run_child(child_missing, NULL, msg, sizeof msg);
    check_true("nvjpeg.missing_library_says_so",
               rc == 0 && strstr(msg, "/nonexistent/libnvjpeg-missing.so") && strstr(msg, "not found"),
               "status %d, child said: %s", rc, msg);

    gpu_require();
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 42);
    jpeg_gpu_norm_coeffs(A, B, MEAN, STD);
    check_seed(18);
    test_resample(&c, 224);
    test_resample(&c, 37);
    test_upload(&c);

    char reason[512];
    if (!nvjpeg_available(reason, sizeof reason)) {
        printf("  skipped: every nvJPEG decode check: %s\n", reason);
    } else {
        JpegSet js;
        jpegset_make(&js);
        for (int planes = 0; planes <= 1; planes++) {
            test_backend(&c, JPEG_GPU_HARDWARE, &js, planes);
            test_backend(&c, JPEG_GPU_HYBRID, &js, planes);
        }
        /* the automatic choice: the engines where the card has them */
        char err[600];
        struct cudaDeviceProp p;
        CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        JpegGpu *g = jpeg_gpu_open(&c, 8, 224, 0, JPEG_GPU_AUTO, err, sizeof err);
        int engines = strstr(p.name, "A100") || strstr(p.name, "H100") || strstr(p.name, "H200") ||
                      strstr(p.name, "H800") || strstr(p.name, "A800");
        JpegGpuStats st;
        jpeg_gpu_stats(g, &st);
        printf("  auto on %s: %s\n", p.name, g ? jpeg_gpu_backend_name(st.backend) : err);
        check_true("nvjpeg.auto_opens", g != NULL, "%s", err);
        if (engines)
            check_true("nvjpeg.auto_is_hardware_on_a_card_with_engines",
                       g && st.backend == JPEG_GPU_HARDWARE, "%s chose %s", p.name,
                       g ? jpeg_gpu_backend_name(st.backend) : "nothing");
        else
            printf("  skipped: nvjpeg.auto_is_hardware: %s has no JPEG engines we know of\n", p.name);
        jpeg_gpu_close(g);
        jpegset_free(&js);
    }
    ctx_free(&c);
    return check_summary();
}
