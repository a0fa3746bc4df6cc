/* test_image_decode.c — the CPU image decoder (data/image_decode.h) and the
 * CPU resampler (rs_resample_u8, data/resample.h).
 *
 * Resampler: on random u8 images, random RandomResizedCrop boxes, Resize +
 * CenterCrop axes and DCT-scaled axes, every output pixel against a direct
 * double-precision evaluation of resample.h's formula (2D, unseparated):
 * at most 1 level apart; a window of the source gives the same bytes as
 * the whole source; a flat image stays flat; flip mirrors exactly.
 *
 * Decoder, on JPEGs written by libjpeg (tests/jpeg_fixture.h) from a
 * photo-like 375 x 460 pattern: baseline 4:2:0, progressive, 4:2:2, 4:4:4,
 * gray, Adobe CMYK, EXIF orientation 6 (ignored: the stored raster comes
 * back), at quality 95 — the full decode against the source pattern, mean
 * absolute error below 3 levels (max per image printed); the header's
 * fields. Cropped decode (skipped rows, cropped columns, stop after the
 * window) equals the full decode + the same resample exactly; DCT-scaled
 * decode against the full decode + the same box: mean within TOL_DCT_MEAN
 * levels, max TOL_DCT_MAX. PNG: RGB, gray, RGBA round trip exactly; 16-bit
 * and palette PNGs as stb gives them.
 *
 * Small and odd sizes (1-pixel sides, iMCU boundaries, boxes at every
 * edge): cropped decode equals full decode for every subsampling, gray,
 * CMYK, progressive. The files the decoder refuses: test_image_refuse.c.
 *
 * Finally the single-thread rate for 460 x 375 and 1000 x 750 q90 JPEGs
 * with RandomResizedCrop(224) boxes is printed (not asserted): DCT scaling
 * on, off, and the stb_image + aug_train path data/image_source.c uses
 * today. (At 460 x 375 no box is scaled: a side would need >= 448 pixels.)
 *
 * Shape letters: H W source pixels, S output side.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stb/stb_image.h>

#include "data/augment.h"
#include "data/image_decode.h"
#include "data/resample.h"
#include "jpeg_fixture.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop

/* DCT-scaled decode (1/2..1/8) against full decode + the same box, levels */
#define TOL_DCT_MEAN 1.0
#define TOL_DCT_MAX 80
/* full decode against the source pattern at quality 95, mean |diff| */
#define TOL_Q95_MEAN 3.0

static char tmp[256];

static uint64_t rng_state = 0x1234567;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static int rnd_in(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmp, name);
}

/* ---------------------------------------------------------------- resample */

/* resample.h's formula in double, 2D: v = sum w_y w_x src / sum w_y w_x. */
static double ref_pixel(const uint8_t *img, int W, RsAxis ay, RsAxis ax, int ky, int kx, int c)
{
    double cy = (double)ay.start + (ky + 0.5) * (double)ay.step;
    double cx = (double)ax.start + (kx + 0.5) * (double)ax.step;
    double ry = ay.step > 1 ? ay.step : 1, rx = ax.step > 1 ? ax.step : 1;
    double num = 0, den = 0;
    for (int y = ay.lo; y < ay.hi; y++) {
        double wy = 1 - fabs(y + 0.5 - cy) / ry;
        if (wy <= 0) continue;
        for (int x = ax.lo; x < ax.hi; x++) {
            double wx = 1 - fabs(x + 0.5 - cx) / rx;
            if (wx <= 0) continue;
            num += wy * wx * img[((size_t)y * W + x) * 3 + c];
            den += wy * wx;
        }
    }
    if (den == 0) {  /* a center outside its window: the nearest pixel */
        int y = cy < ay.lo ? ay.lo : cy >= ay.hi ? ay.hi - 1 : (int)cy;
        int x = cx < ax.lo ? ax.lo : cx >= ax.hi ? ax.hi - 1 : (int)cx;
        return img[((size_t)y * W + x) * 3 + c];
    }
    return num / den;
}

static void test_resample(void)
{
    int worst = 0, cases = 0, window_same = 1, mirrored = 1;
    for (int t = 0; t < 60; t++) {
        int H = rnd_in(1, 90), W = rnd_in(1, 90), S = rnd_in(1, 48);
        uint8_t *img = malloc((size_t)H * W * 3);
        for (size_t i = 0; i < (size_t)H * W * 3; i++) img[i] = (uint8_t)rnd();
        RsAxis ay, ax;
        int kind = t % 3;
        if (kind == 0) {         /* a RandomResizedCrop box */
            int h = rnd_in(1, H), w = rnd_in(1, W);
            ay = rs_axis_box(rnd_in(0, H - h), h, S);
            ax = rs_axis_box(rnd_in(0, W - w), w, S);
        } else if (kind == 1) {  /* Resize(R) + CenterCrop(S) */
            int R = S + rnd_in(0, 20);
            int nh = H <= W ? R : (int)((int64_t)R * H / W), nw = H <= W ? (int)((int64_t)R * W / H) : R;
            if (nh < S) nh = S;
            if (nw < S) nw = S;
            ay = rs_axis_resized(H, nh, (int)rint((nh - S) / 2.0));
            ax = rs_axis_resized(W, nw, (int)rint((nw - S) / 2.0));
        } else {                 /* a box of a bigger source, moved to this one */
            int H2 = H * 4, W2 = W * 4, h = rnd_in(1, H2), w = rnd_in(1, W2);
            ay = rs_axis_scaled(rs_axis_box(rnd_in(0, H2 - h), h, S), 4, H);
            ax = rs_axis_scaled(rs_axis_box(rnd_in(0, W2 - w), w, S), 4, W);
        }
        int flip = (int)(rnd() & 1);
        uint8_t *out = malloc((size_t)S * S * 3), *out2 = malloc((size_t)S * S * 3);
        rs_resample_u8(out, img, ay, ax, flip, S, 0, 0, H, W);
        for (int ky = 0; ky < S; ky++)
            for (int kx = 0; kx < S; kx++)
                for (int c = 0; c < 3; c++) {
                    double r = ref_pixel(img, W, ay, ax, ky, flip ? S - 1 - kx : kx, c);
                    int d = abs((int)out[((size_t)ky * S + kx) * 3 + c] - (int)lrint(r));
                    worst = d > worst ? d : worst;
                }
        /* the window the taps read, alone, gives the same bytes */
        int y0, y1, x0, x1;
        rs_window(&y0, &y1, ay, S);
        rs_window(&x0, &x1, ax, S);
        uint8_t *win = malloc((size_t)(y1 - y0) * (x1 - x0) * 3);
        for (int y = y0; y < y1; y++)
            memcpy(win + (size_t)(y - y0) * (x1 - x0) * 3, img + ((size_t)y * W + x0) * 3,
                   (size_t)(x1 - x0) * 3);
        rs_resample_u8(out2, win, ay, ax, flip, S, y0, x0, y1 - y0, x1 - x0);
        window_same &= memcmp(out, out2, (size_t)S * S * 3) == 0;
        /* flip is the mirror image */
        rs_resample_u8(out2, img, ay, ax, !flip, S, 0, 0, H, W);
        for (int ky = 0; ky < S; ky++)
            for (int kx = 0; kx < S; kx++)
                mirrored &= memcmp(out + ((size_t)ky * S + kx) * 3,
                                   out2 + ((size_t)ky * S + S - 1 - kx) * 3, 3) == 0;
        free(win), free(out), free(out2), free(img);
        cases++;
    }
    check_true("resample.vs_double_formula", worst <= 1, "max |diff| %d levels", worst);
    check_true("resample.window_equals_whole", window_same, "a window gave other bytes");
    check_true("resample.flip_mirrors", mirrored, "flip is not the mirror image");
    /* a flat image stays flat through a strong downscale */
    uint8_t flat[40 * 50 * 3], o[7 * 7 * 3];
    for (size_t i = 0; i < sizeof flat; i++) flat[i] = (uint8_t)(i % 3 == 0 ? 17 : i % 3 == 1 ? 200 : 93);
    rs_resample_u8(o, flat, rs_axis_box(0, 40, 7), rs_axis_box(3, 47, 7), 0, 7, 0, 0, 40, 50);
    int ok = 1;
    for (int i = 0; i < 7 * 7; i++) ok &= o[3 * i] == 17 && o[3 * i + 1] == 200 && o[3 * i + 2] == 93;
    check_true("resample.flat_stays_flat", ok, "flat image changed");
    printf("  resample: %d random cases, max |diff| vs double formula %d level(s)\n", cases, worst);
}

/* ------------------------------------------------------------- JPEG decode */

enum { PH = 375, PW = 460 };

typedef struct {
    const char *name;
    JfxOptions o;
} Variant;

static const Variant variants[] = {
    {"baseline 4:2:0", {.quality = 95}},
    {"progressive", {.quality = 95, .progressive = 1}},
    {"4:2:2", {.quality = 95, .subsample = JFX_422}},
    {"4:4:4", {.quality = 95, .subsample = JFX_444}},
    {"gray", {.quality = 95, .gray = 1}},
    {"CMYK (Adobe)", {.quality = 95, .cmyk = 1}},
    {"EXIF orientation 6", {.quality = 95, .orientation = 6}},
    {"progressive gray 4:4:4", {.quality = 95, .progressive = 1, .gray = 1}},
};
#define NVAR ((int)(sizeof variants / sizeof *variants))

static void test_jpeg_variants(void)
{
    uint8_t *rgb = malloc((size_t)PH * PW * 3), *gray = malloc((size_t)PH * PW);
    uint8_t *dec = malloc((size_t)PH * PW * 3), *full = malloc((size_t)PH * PW * 3);
    jfx_pattern(rgb, PH, PW, 3, 11);
    for (size_t i = 0; i < (size_t)PH * PW; i++)  /* the fixture's luma of the pattern */
        gray[i] = (uint8_t)lrint(0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2]);
    AugConfig cfg;
    aug_config_default(&cfg, 224);
    for (int v = 0; v < NVAR; v++) {
        const Variant *V = &variants[v];
        char path[512], err[512], name[96];
        snprintf(name, sizeof name, "v%d.jpg", v);
        path_of(path, sizeof path, name);
        jfx_write_jpeg(path, rgb, PH, PW, 3, &V->o);
        uint8_t *b;
        size_t n;
        ImgInfo info;
        int st = img_read_file(path, &b, &n, err, sizeof err);
        if (!st) st = img_header(&info, b, n, path, err, sizeof err);
        snprintf(name, sizeof name, "jpeg.%s.header", V->name);
        if (!check_true(name, st == IMG_OK, "%s", err)) continue;
        int want_c = V->o.cmyk ? 4 : V->o.gray ? 1 : 3;
        int want_420 = want_c == 3 && V->o.subsample == JFX_420;
        check_true(name, info.format == IMG_JPEG && info.width == PW && info.height == PH &&
                   info.channels == want_c && info.progressive == V->o.progressive &&
                   info.cmyk == V->o.cmyk && info.chroma420 == want_420,
                   "format %d %d x %d x %d progressive %d cmyk %d chroma420 %d (want %d)",
                   info.format, info.width, info.height, info.channels, info.progressive,
                   info.cmyk, info.chroma420, want_420);
        st = img_decode_rgb(dec, b, n, &info, path, err, sizeof err);
        snprintf(name, sizeof name, "jpeg.%s.decode", V->name);
        if (!check_true(name, st == IMG_OK, "%s", err)) { free(b); continue; }
        /* against the source pattern */
        double sum = 0;
        int mx = 0, same_rgb = 1;
        for (size_t i = 0; i < (size_t)PH * PW; i++)
            for (int c = 0; c < 3; c++) {
                int ref = V->o.gray ? gray[i] : rgb[3 * i + c];
                int d = abs((int)dec[3 * i + c] - ref);
                sum += d;
                mx = d > mx ? d : mx;
                if (V->o.gray) same_rgb &= dec[3 * i + c] == dec[3 * i];
            }
        double mean = sum / ((double)PH * PW * 3);
        snprintf(name, sizeof name, "jpeg.%s.vs_source", V->name);
        check_true(name, mean < TOL_Q95_MEAN, "mean |diff| %.2f levels (max %d)", mean, mx);
        if (V->o.gray) check_true("jpeg.gray.replicated", same_rgb, "R, G, B differ");
        printf("  %-24s %6zu bytes  vs source: mean |diff| %.2f, max %d levels\n", V->name, n,
               mean, mx);
        /* cropped decode == full decode + the same resample; DCT-scaled: close */
        int exact = 1, dmax = 0, dcount[9] = {0};
        double dsum = 0;
        long dpix = 0;
        uint8_t o1[224 * 224 * 3], o2[224 * 224 * 3], o3[224 * 224 * 3];
        for (uint32_t idx = 0; idx < 24; idx++) {
            const int S = idx % 4 == 3 ? 32 : idx % 4 == 2 ? 112 : 224;
            cfg.size = S;
            RsAxis ay, ax;
            if (idx % 6 == 5) {  /* evaluation: Resize(256) + CenterCrop(224) */
                int R = S * 256 / 224, nh = PH <= PW ? R : R * PH / PW, nw = PH <= PW ? R * PW / PH : R;
                ay = rs_axis_resized(PH, nh, (int)rint((nh - S) / 2.0));
                ax = rs_axis_resized(PW, nw, (int)rint((nw - S) / 2.0));
            } else {
                AugBox bx = aug_rrc_box(PH, PW, &cfg, 5, 0, idx);
                ay = rs_axis_box(bx.top, bx.h, S);
                ax = rs_axis_box(bx.left, bx.w, S);
            }
            int flip = (int)(idx & 1);
            rs_resample_u8(o1, dec, ay, ax, flip, S, 0, 0, PH, PW);
            st = img_decode_box(o2, b, n, &info, ay, ax, flip, S, 1, path, err, sizeof err);
            if (!st) st = img_decode_box(o3, b, n, &info, ay, ax, flip, S, 8, path, err, sizeof err);
            if (st) {
                check_true("jpeg.decode_box", 0, "%s", err);
                break;
            }
            exact &= memcmp(o1, o2, (size_t)S * S * 3) == 0;
            int d = img_dct_denom(ay, ax, 8);
            dcount[d]++;
            if (d > 1)
                for (size_t i = 0; i < (size_t)S * S * 3; i++) {
                    int e = abs((int)o3[i] - (int)o2[i]);
                    dsum += e;
                    dmax = e > dmax ? e : dmax;
                    dpix++;
                }
            else
                exact &= memcmp(o2, o3, (size_t)S * S * 3) == 0;
        }
        snprintf(name, sizeof name, "jpeg.%s.cropped_equals_full", V->name);
        check_true(name, exact, "a cropped decode differs from the full decode's box");
        double dmean = dpix ? dsum / dpix : 0;
        snprintf(name, sizeof name, "jpeg.%s.dct_scaled", V->name);
        check_true(name, dpix > 0 && dmean < TOL_DCT_MEAN && dmax <= TOL_DCT_MAX,
                   "%ld scaled pixels, mean |diff| %.2f, max %d", dpix, dmean, dmax);
        printf("  %-24s DCT-scaled vs full (d=2:%d 4:%d 8:%d of 24 boxes): mean |diff| %.2f, "
               "max %d\n", "", dcount[2], dcount[4], dcount[8], dmean, dmax);
        free(b);
    }
    free(rgb), free(gray), free(dec), free(full);
}

/* Small and odd sizes (iMCU boundaries, 1-pixel sides, boxes at every
 * edge): the cropped, skipped, stopped decode equals the full decode + the
 * same resample exactly, for each subsampling, gray and CMYK, with and
 * without progressive; DCT-scaled boxes decode without error. */
static void test_jpeg_small(void)
{
    int exact = 1, cases = 0, scaled_ok = 1;
    char err[512] = "";
    for (int t = 0; t < 80; t++) {
        int H = rnd_in(1, 70), W = rnd_in(1, 70), S = rnd_in(1, 24);
        uint8_t *img = malloc((size_t)H * W * 3), *full = malloc((size_t)H * W * 3);
        jfx_pattern(img, H, W, 3, (uint64_t)t);
        JfxOptions o = {.quality = 85, .subsample = t % 3, .progressive = (t / 3) % 2,
                        .gray = t % 7 == 5, .cmyk = t % 7 == 6};
        unsigned char *j;
        unsigned long n;
        jfx_jpeg_encode(&j, &n, img, H, W, 3, &o);
        ImgInfo info;
        int st = img_header(&info, j, n, "small.jpg", err, sizeof err);
        if (!st) st = img_decode_rgb(full, j, n, &info, "small.jpg", err, sizeof err);
        for (int b = 0; !st && b < 6; b++) {
            int h = rnd_in(1, H), w = rnd_in(1, W), top = rnd_in(0, H - h), left = rnd_in(0, W - w);
            if (b == 0) top = 0, left = 0;
            if (b == 1) top = H - h, left = W - w;
            RsAxis ay = rs_axis_box(top, h, S), ax = rs_axis_box(left, w, S);
            uint8_t o1[24 * 24 * 3], o2[24 * 24 * 3];
            rs_resample_u8(o1, full, ay, ax, b & 1, S, 0, 0, H, W);
            st = img_decode_box(o2, j, n, &info, ay, ax, b & 1, S, 1, "small.jpg", err, sizeof err);
            exact &= !st && !memcmp(o1, o2, (size_t)S * S * 3);
            if (!st) st = img_decode_box(o2, j, n, &info, ay, ax, b & 1, S, 8, "small.jpg", err,
                                         sizeof err);
            scaled_ok &= !st;
            cases++;
        }
        if (st) exact = 0;
        free(j), free(img), free(full);
    }
    check_true("jpeg.small_sizes.cropped_equals_full", exact, "%d boxes; %s", cases, err);
    check_true("jpeg.small_sizes.scaled_decodes", scaled_ok, "%s", err);
}

/* ---------------------------------------------------------------------- PNG */

static void test_png(void)
{
    const int H = 37, W = 53;
    uint8_t *dec = malloc((size_t)H * W * 3);
    char path[512], err[512];
    int C[3] = {3, 1, 4};
    const char *names[3] = {"png.rgb_exact", "png.gray_exact", "png.rgba_exact"};
    for (int t = 0; t < 3; t++) {
        uint8_t *img = malloc((size_t)H * W * C[t]);
        for (size_t i = 0; i < (size_t)H * W * C[t]; i++) img[i] = (uint8_t)rnd();
        path_of(path, sizeof path, "p.jpg");  /* a PNG named .jpg decodes: the bytes decide */
        jfx_write_png(path, img, H, W, C[t]);
        uint8_t *b = NULL;
        size_t n;
        ImgInfo info = {0};
        int st = img_read_file(path, &b, &n, err, sizeof err);
        if (!st) st = img_header(&info, b, n, path, err, sizeof err);
        if (!st) st = img_decode_rgb(dec, b, n, &info, path, err, sizeof err);
        int ok = st == IMG_OK && info.format == IMG_PNG && info.channels == C[t];
        for (size_t i = 0; ok && i < (size_t)H * W; i++)
            for (int c = 0; c < 3; c++)
                ok &= dec[3 * i + c] == img[i * C[t] + (C[t] == 1 ? 0 : c)];
        check_true(names[t], ok, "status %d %s", st, st ? err : "pixels differ");
        if (t == 0 && ok) {  /* the box path resamples the same pixels */
            uint8_t o1[16 * 16 * 3], o2[16 * 16 * 3];
            RsAxis ay = rs_axis_box(3, 30, 16), ax = rs_axis_box(10, 40, 16);
            rs_resample_u8(o1, img, ay, ax, 1, 16, 0, 0, H, W);
            st = img_decode_box(o2, b, n, &info, ay, ax, 1, 16, 8, path, err, sizeof err);
            check_true("png.decode_box", st == 0 && !memcmp(o1, o2, sizeof o1), "%s", err);
        }
        free(b);
        free(img);
    }
    /* 16-bit RGB: stb keeps the high byte; palette: expanded */
    uint8_t rows[4 * (1 + 4 * 6)], *png;
    size_t n;
    for (int y = 0; y < 4; y++) {
        rows[y * 25] = 0;
        for (int i = 0; i < 24; i++) rows[y * 25 + 1 + i] = (uint8_t)(y * 40 + i * 9);
    }
    jfx_png_encode(&png, &n, 4, 4, 16, 2, rows, sizeof rows, NULL, 0);
    ImgInfo info;
    int st = img_header(&info, png, n, "p16.png", err, sizeof err);
    if (!st) st = img_decode_rgb(dec, png, n, &info, "p16.png", err, sizeof err);
    int ok = st == 0;
    for (int y = 0; ok && y < 4; y++)
        for (int x = 0; x < 4; x++)
            for (int c = 0; c < 3; c++)
                ok &= dec[(y * 4 + x) * 3 + c] == rows[y * 25 + 1 + (x * 3 + c) * 2];
    check_true("png.16bit_high_byte", ok, "status %d %s", st, err);
    free(png);
    const uint8_t plte[] = {10, 20, 30, 200, 100, 50, 0, 255, 0};
    uint8_t prow[3 * 4];
    for (int y = 0; y < 3; y++) {
        prow[y * 4] = 0;
        for (int x = 0; x < 3; x++) prow[y * 4 + 1 + x] = (uint8_t)((x + y) % 3);
    }
    jfx_png_encode(&png, &n, 3, 3, 8, 3, prow, sizeof prow, plte, 3);
    st = img_header(&info, png, n, "pal.png", err, sizeof err);
    if (!st) st = img_decode_rgb(dec, png, n, &info, "pal.png", err, sizeof err);
    ok = st == 0;
    for (int y = 0; ok && y < 3; y++)
        for (int x = 0; x < 3; x++)
            ok &= !memcmp(dec + (y * 3 + x) * 3, plte + 3 * ((x + y) % 3), 3);
    check_true("png.palette", ok, "status %d %s", st, err);
    free(png);
    free(dec);
}

/* ----------------------------------------------------------------- the rate */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* RandomResizedCrop(224) of an H x W q90 JPEG, n images: DCT scaling on,
 * off, and the stb_image + aug_train path; the rates printed. */
static void bench(int H, int W, int n_img)
{
    uint8_t *img = malloc((size_t)H * W * 3);
    jfx_pattern(img, H, W, 3, 21);
    JfxOptions o = {.quality = 90};
    unsigned char *j;
    unsigned long n;
    jfx_jpeg_encode(&j, &n, img, H, W, 3, &o);
    ImgInfo info;
    char err[256];
    if (img_header(&info, j, n, "bench.jpg", err, sizeof err)) return;
    AugConfig cfg;
    aug_config_default(&cfg, 224);
    uint8_t *out = malloc(224 * 224 * 3);
    float *outf = malloc(sizeof(float) * 224 * 224 * 3);
    double rate[3];
    int scaled = 0;
    for (int mode = 0; mode < 3; mode++) {
        double t0 = now();
        for (uint32_t i = 0; i < (uint32_t)n_img; i++) {
            if (mode < 2) {
                AugBox bx = aug_rrc_box(info.height, info.width, &cfg, 1, 0, i);
                RsAxis ay = rs_axis_box(bx.top, bx.h, 224), ax = rs_axis_box(bx.left, bx.w, 224);
                if (mode == 0) scaled += img_dct_denom(ay, ax, 8) > 1;
                img_decode_box(out, j, n, &info, ay, ax, aug_flip(&cfg, 1, 0, i), 224,
                               mode == 0 ? 8 : 1, "bench.jpg", err, sizeof err);
            } else {
                int w, h, c;
                uint8_t *p = stbi_load_from_memory(j, (int)n, &w, &h, &c, 3);
                aug_train(outf, p, h, w, 3, &cfg, 1, 0, i);
                stbi_image_free(p);
            }
        }
        rate[mode] = n_img / (now() - t0);
    }
    printf("  rate, 1 thread, %dx%d q90 (%lu bytes), RandomResizedCrop 224 (%d of %d boxes "
           "DCT-scaled): libjpeg + DCT scaling %.0f img/s, libjpeg full size %.0f img/s, "
           "stb_image + aug_train %.0f img/s\n", W, H, n, scaled, n_img, rate[0], rate[1],
           rate[2]);
    free(out), free(outf), free(j), free(img);
}

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *f)
{
    (void)s, (void)flag, (void)f;
    return remove(p);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_imgdec_XXXXXX");
    if (!mkdtemp(tmp)) {
        check_true("tmpdir", 0, "mkdtemp: %s", strerror(errno));
        return check_summary();
    }
    test_resample();
    test_jpeg_variants();
    test_jpeg_small();
    test_png();
    bench(375, 460, 200);
    bench(750, 1000, 60);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
