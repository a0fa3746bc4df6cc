/* jpeg_fixture.h — test images made on the spot: JPEG files written with
 * libjpeg's compressor in the forms real data sets hold, PNG files (stb's
 * writer, and a raw writer for the forms stb cannot write), and a
 * deterministic photo-like pattern to fill them with. No downloads.
 *
 *   jfx_pattern(img, H, W, C, seed)        u8 [H, W, C], C = 1 or 3
 *   jfx_jpeg_encode(&bytes, &n, img, H, W, C, &opt)   JPEG in memory
 *   jfx_write_jpeg(path, img, H, W, C, &opt)          ... to a file
 *   jfx_write_png(path, img, H, W, C)                 stb_image_write, 8 bit
 *   jfx_png_encode(&bytes, &n, W, H, depth, ctype, rows, plte, nplte)
 *       a PNG from raw filter-0 rows (any bit depth / colour type, palette):
 *       zlib deflate + CRC32 per chunk; also crafts bad headers (0 x 4).
 *   jfx_write_file(path, bytes, n)
 *
 * JPEG options (JfxOptions, zero = libjpeg's defaults):
 *   quality 1..100 (0: 90); progressive; subsample JFX_420 (default, what
 *   cameras and PIL write), JFX_422, JFX_444; gray (a 1-component file; RGB
 *   input becomes its luma Y = 0.299 R + 0.587 G + 0.114 B, rounded); cmyk
 *   (an Adobe CMYK file, 4 components, values stored inverted as Photoshop
 *   writes them: stored C' = 255 - C; the inverse of the decoder's
 *   R = C' K' / 255 with K' = max(R, G, B), C' = 255 R / K'); orientation
 *   1..8 adds an EXIF APP1 segment with that Orientation tag (0: none).
 *
 * The pattern (what a decoder's pixel tolerance is measured on; JPEG's
 * error depends on content, so it must look like a photo, not a ramp):
 * per channel a smooth field of two sinusoids and a diagonal gradient, a
 * few hard-edged discs and rectangles of flat colour (seeded positions),
 * and uniform noise in [-6, 6] (a hash of seed, y, x); the same (H, W, C,
 * seed) gives the same bytes on a given libm (tests compare a decode with
 * the pattern made in the same process).
 *
 * Failures exit(1) with a message (a fixture that cannot write is a broken
 * test, not a case to handle). Header-only; include once per test program
 * (needs -l:libjpeg.a, -l:libstb.a and -lz, which the Makefile links).
 */
#ifndef CTRAIN_TESTS_JPEG_FIXTURE_H
#define CTRAIN_TESTS_JPEG_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <stb/stb_image_write.h>
#include <zlib.h>

enum { JFX_420 = 0, JFX_422 = 1, JFX_444 = 2 };

typedef struct {
    int quality;      /* 1..100; 0: 90 */
    int progressive;
    int subsample;    /* JFX_420 / JFX_422 / JFX_444 */
    int gray;         /* one-component file */
    int cmyk;         /* Adobe CMYK (inverted) */
    int orientation;  /* EXIF Orientation 1..8; 0: no EXIF segment */
} JfxOptions;

static inline void jfx_die_(const char *what)
{
    fprintf(stderr, "jpeg_fixture: %s\n", what);
    exit(1);
}

static inline uint64_t jfx_hash_(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A photo-like u8 [H, W, C] image (C = 1 or 3), a pure function of its
 * arguments (see the file comment). */
static inline void jfx_pattern(uint8_t *img, int H, int W, int C, uint64_t seed)
{
    if (C != 1 && C != 3) jfx_die_("jfx_pattern: C must be 1 or 3");
    enum { NSHAPE = 6 };
    double sx[NSHAPE], sy[NSHAPE], sr[NSHAPE], sv[NSHAPE][3];
    int disc[NSHAPE];
    for (int s = 0; s < NSHAPE; s++) {
        uint64_t h = jfx_hash_(seed * 131 + (uint64_t)s + 1);
        sx[s] = (double)(h & 0xFFFF) / 65536.0 * W;
        sy[s] = (double)((h >> 16) & 0xFFFF) / 65536.0 * H;
        sr[s] = (0.05 + 0.15 * (double)((h >> 32) & 0xFF) / 256.0) * (H < W ? H : W);
        disc[s] = (int)((h >> 40) & 1);
        for (int c = 0; c < 3; c++) sv[s][c] = (double)((h >> (44 + 6 * c)) & 63) * 4.0;
    }
    double ph = (double)(jfx_hash_(seed) & 0xFFFF) / 65536.0 * 6.283185307179586;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double u = (double)x / W, v = (double)y / H;
            double base[3];
            for (int c = 0; c < 3; c++)
                base[c] = 128.0 + 60.0 * sin(6.283185307179586 * (1.3 + c * 0.4) * u + ph + c) +
                          40.0 * cos(6.283185307179586 * (0.9 + c * 0.3) * v - ph) +
                          30.0 * (u - v);
            for (int s = 0; s < NSHAPE; s++) {
                double dx = x + 0.5 - sx[s], dy = y + 0.5 - sy[s];
                int in = disc[s] ? dx * dx + dy * dy < sr[s] * sr[s]
                                 : fabs(dx) < sr[s] && fabs(dy) < 0.6 * sr[s];
                if (in)
                    for (int c = 0; c < 3; c++) base[c] = sv[s][c];
            }
            uint64_t h = jfx_hash_(seed ^ ((uint64_t)y << 32) ^ (uint64_t)x ^ 0x5bd1e995ull);
            for (int c = 0; c < C; c++) {
                double noise = (double)((h >> (8 * c)) % 13) - 6.0;
                double val = (C == 1 ? 0.299 * base[0] + 0.587 * base[1] + 0.114 * base[2]
                                     : base[c]) + noise;
                val = val < 0 ? 0 : val > 255 ? 255 : val;
                img[((size_t)y * W + x) * C + c] = (uint8_t)lrint(val);
            }
        }
}

/* The EXIF APP1 payload "Exif\0\0" + a little-endian TIFF header and one
 * IFD holding Orientation (tag 0x0112, SHORT, count 1). 32 bytes. */
static inline size_t jfx_exif_orientation_(uint8_t *p, int orientation)
{
    static const uint8_t head[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0,
                                   1,   0,   /* one entry */
                                   0x12, 0x01, 3, 0, 1, 0, 0, 0};
    memcpy(p, head, sizeof head);
    size_t n = sizeof head;
    p[n++] = (uint8_t)orientation;
    p[n++] = 0;
    p[n++] = 0;
    p[n++] = 0;                                       /* value, padded to 4 bytes */
    memset(p + n, 0, 4);                              /* no next IFD */
    return n + 4;
}

/* Encode img u8 [H, W, C] (C = 1 or 3) as a JPEG in memory; *out is
 * malloc'd by libjpeg (free() it). */
static inline void jfx_jpeg_encode(unsigned char **out, unsigned long *n, const uint8_t *img,
                                   int H, int W, int C, const JfxOptions *o)
{
    JfxOptions d = {0};
    if (!o) o = &d;
    if (C != 1 && C != 3) jfx_die_("jfx_jpeg_encode: C must be 1 or 3");
    if (o->cmyk && (o->gray || C != 3)) jfx_die_("jfx_jpeg_encode: CMYK needs RGB input");
    const int oc = o->cmyk ? 4 : (o->gray || C == 1) ? 1 : 3;
    uint8_t *conv = malloc((size_t)W * H * oc);
    if (!conv) jfx_die_("out of memory");
    for (size_t i = 0; i < (size_t)W * H; i++) {
        const uint8_t *s = img + i * C;
        uint8_t *t = conv + i * oc;
        if (oc == 1) {
            t[0] = C == 1 ? s[0] : (uint8_t)lrint(0.299 * s[0] + 0.587 * s[1] + 0.114 * s[2]);
        } else if (oc == 3) {
            memcpy(t, s, 3);
        } else {  /* inverted CMYK: K' = max, C' = 255 R / K' (so R = C' K' / 255) */
            int k = s[0] > s[1] ? s[0] : s[1];
            k = k > s[2] ? k : s[2];
            for (int c = 0; c < 3; c++) t[c] = k ? (uint8_t)lrint(255.0 * s[c] / k) : 0;
            t[3] = (uint8_t)k;
        }
    }
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);  /* default error_exit: exit(), fine for a fixture */
    jpeg_create_compress(&ci);
    *out = NULL;
    *n = 0;
    jpeg_mem_dest(&ci, out, n);
    ci.image_width = (JDIMENSION)W;
    ci.image_height = (JDIMENSION)H;
    ci.input_components = oc;
    ci.in_color_space = oc == 1 ? JCS_GRAYSCALE : oc == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&ci);  /* CMYK: colour space CMYK and the Adobe marker */
    jpeg_set_quality(&ci, o->quality ? o->quality : 90, TRUE);
    if (oc == 3) {
        int h = o->subsample == JFX_444 ? 1 : 2, v = o->subsample == JFX_420 ? 2 : 1;
        ci.comp_info[0].h_samp_factor = h;
        ci.comp_info[0].v_samp_factor = v;
        for (int c = 1; c < 3; c++) ci.comp_info[c].h_samp_factor = ci.comp_info[c].v_samp_factor = 1;
    }
    if (o->progressive) jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    if (o->orientation) {
        uint8_t app1[64];
        size_t len = jfx_exif_orientation_(app1, o->orientation);
        jpeg_write_marker(&ci, JPEG_APP0 + 1, app1, (unsigned)len);
    }
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = conv + (size_t)ci.next_scanline * W * oc;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(conv);
}

static inline void jfx_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
        fprintf(stderr, "jpeg_fixture: cannot write %s\n", path);
        exit(1);
    }
}

static inline void jfx_write_jpeg(const char *path, const uint8_t *img, int H, int W, int C,
                                  const JfxOptions *o)
{
    unsigned char *bytes;
    unsigned long n;
    jfx_jpeg_encode(&bytes, &n, img, H, W, C, o);
    jfx_write_file(path, bytes, n);
    free(bytes);
}

/* An 8-bit PNG of img u8 [H, W, C] (C = 1..4) through stb_image_write. */
static inline void jfx_write_png(const char *path, const uint8_t *img, int H, int W, int C)
{
    if (!stbi_write_png(path, W, H, C, img, W * C)) {
        fprintf(stderr, "jpeg_fixture: stbi_write_png %s failed\n", path);
        exit(1);
    }
}

static inline void jfx_put32_(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Append chunk `type` with `len` data bytes and its CRC32 at *at. */
static inline void jfx_png_chunk_(uint8_t *buf, size_t *at, const char *type,
                                  const uint8_t *data, uint32_t len)
{
    uint8_t *p = buf + *at;
    jfx_put32_(p, len);
    memcpy(p + 4, type, 4);
    if (len) memcpy(p + 8, data, len);
    uLong crc = crc32(0L, p + 4, len + 4);
    jfx_put32_(p + 8 + len, (uint32_t)crc);
    *at += 12 + (size_t)len;
}

/* A PNG from raw image data: rows = H rows of (1 filter byte 0 + packed
 * pixels), rows_n bytes; W and H go into IHDR as given (0 allowed, to craft
 * a bad header); ctype 0 grey, 2 RGB, 3 palette (plte: nplte RGB triples),
 * 4 grey+alpha, 6 RGBA; depth 1..16. *out is malloc'd. */
static inline void jfx_png_encode(uint8_t **out, size_t *n, uint32_t W, uint32_t H, int depth,
                                  int ctype, const uint8_t *rows, size_t rows_n,
                                  const uint8_t *plte, int nplte)
{
    uLongf zn = compressBound((uLong)rows_n);
    uint8_t *z = malloc(zn ? zn : 1);
    if (!z || compress2(z, &zn, rows, (uLong)rows_n, 6) != Z_OK) jfx_die_("jfx_png_encode: zlib");
    uint8_t *buf = malloc(8 + 25 + (size_t)(12 + 3 * nplte) + 12 + zn + 12);
    if (!buf) jfx_die_("out of memory");
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    memcpy(buf, sig, 8);
    size_t at = 8;
    uint8_t ihdr[13];
    jfx_put32_(ihdr, W);
    jfx_put32_(ihdr + 4, H);
    ihdr[8] = (uint8_t)depth, ihdr[9] = (uint8_t)ctype, ihdr[10] = 0, ihdr[11] = 0, ihdr[12] = 0;
    jfx_png_chunk_(buf, &at, "IHDR", ihdr, 13);
    if (plte && nplte) jfx_png_chunk_(buf, &at, "PLTE", plte, (uint32_t)(3 * nplte));
    jfx_png_chunk_(buf, &at, "IDAT", z, (uint32_t)zn);
    jfx_png_chunk_(buf, &at, "IEND", NULL, 0);
    free(z);
    *out = buf;
    *n = at;
}

#endif
