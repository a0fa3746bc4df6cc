/* image_decode.c — sniff, read, header and decode of JPEG (libjpeg-turbo)
 * and PNG (stb_image) files into the u8 crop a sample needs; the rules
 * (formats, DCT scaling, truncation, errors) are in image_decode.h.
 *
 * libjpeg reports through an error manager: error_exit longjmps back to the
 * call that set it up (never exit()), with the library's formatted message;
 * emit_message records the two warnings the truncation rule reads (the
 * input exhausted, a scan's data ending early) and prints nothing. The
 * decoder's state lives in a JpegRun the caller of setjmp owns, so nothing
 * the longjmp returns to is a modified automatic variable.
 *
 * Shape letters: H W source pixels, Hd Wd the source decoded at 1/d,
 * S output side.
 */
#include "image_decode.h"


#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <jerror.h>
#include <stb/stb_image.h>
#include <zlib.h>

#include "engine/error.h"

/* ------------------------------------------------------------------ sniff */

static int starts(const uint8_t *b, size_t n, const void *magic, size_t k)
{
    return n >= k && memcmp(b, magic, k) == 0;
}

ImgFormat img_sniff(const uint8_t *b, size_t n, const char **type)
{
    const char *t;
    ImgFormat f = IMG_UNKNOWN;
    if (n == 0) {
        t = "an empty file";
    } else if (starts(b, n, "\xFF\xD8\xFF", 3)) {
        t = "a JPEG image", f = IMG_JPEG;
    } else if (starts(b, n, "\x89PNG\r\n\x1A\n", 8)) {
        t = "a PNG image", f = IMG_PNG;
    } else if (starts(b, n, "GIF87a", 6) || starts(b, n, "GIF89a", 6)) {
        t = "a GIF image";
    } else if (starts(b, n, "BM", 2)) {
        t = "a BMP image";
    } else if (starts(b, n, "II*\0", 4) || starts(b, n, "MM\0*", 4)) {
        t = "a TIFF image";
    } else if (n >= 12 && starts(b, n, "RIFF", 4) && memcmp(b + 8, "WEBP", 4) == 0) {
        t = "a WebP image";
    } else if (starts(b, n, "8BPS", 4)) {
        t = "a PSD (Photoshop) image";
    } else if (starts(b, n, "#?RADIANCE", 10) || starts(b, n, "#?RGBE", 6)) {
        t = "a Radiance HDR image";
    } else if (starts(b, n, "\x53\x80\xF6\x34", 4)) {
        t = "a Softimage PIC image";
    } else if (n >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7' &&
               (b[2] == ' ' || b[2] == '\t' || b[2] == '\n' || b[2] == '\r')) {
        t = "a PNM (PBM/PGM/PPM/PAM) image";
    } else if (starts(b, n, "\0\0\0\x0CjP  ", 8) || starts(b, n, "\xFF\x4F\xFF\x51", 4)) {
        t = "a JPEG 2000 image";
    } else if (starts(b, n, "\xFF\x0A", 2) || starts(b, n, "\0\0\0\x0CJXL ", 8)) {
        t = "a JPEG XL image";
    } else if (n >= 12 && memcmp(b + 4, "ftyp", 4) == 0 &&
               (!memcmp(b + 8, "heic", 4) || !memcmp(b + 8, "heix", 4) ||
                !memcmp(b + 8, "mif1", 4) || !memcmp(b + 8, "avif", 4))) {
        t = "a HEIF/AVIF image";
    } else {
        size_t k = n < 512 ? n : 512, i = 0;
        while (i < k && ((b[i] >= 0x20 && b[i] < 0x7F) || b[i] == '\t' || b[i] == '\n' ||
                         b[i] == '\r'))
            i++;
        t = i == k ? "a text file" : "not a JPEG or PNG image";
    }
    if (type) *type = t;
    return f;
}

/* -------------------------------------------------------------- read file */

int img_read_file(const char *path, uint8_t **bytes, size_t *n, char *err, size_t errlen)
{
    *bytes = NULL;
    *n = 0;
    char eb[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == EACCES || e == EPERM)
            return ct_fail(err, errlen, IMG_ERR_ACCESS, "cannot read %s: permission denied",
                           path);
        return ct_fail(err, errlen, IMG_ERR_OPEN, "cannot open %s: %s", path,
                       strerror_r(e, eb, sizeof eb));
    }
    struct stat st;
    int status = IMG_OK;
    if (fstat(fd, &st)) {
        status = ct_fail(err, errlen, IMG_ERR_OPEN, "cannot read %s: %s", path,
                         strerror_r(errno, eb, sizeof eb));
    } else if (S_ISDIR(st.st_mode)) {
        status = ct_fail(err, errlen, IMG_ERR_OPEN, "%s: a directory, not an image file", path);
    } else if (!S_ISREG(st.st_mode)) {
        status = ct_fail(err, errlen, IMG_ERR_OPEN, "%s: not a regular file", path);
    } else if (st.st_size == 0) {
        status = ct_fail(err, errlen, IMG_ERR_EMPTY, "%s: an empty file (0 bytes)", path);
    } else if ((unsigned long long)st.st_size > IMG_MAX_FILE_BYTES) {
        status = ct_fail(err, errlen, IMG_ERR_SIZE, "%s: %lld bytes, above the limit of %llu "
                         "bytes for one image file", path, (long long)st.st_size,
                         IMG_MAX_FILE_BYTES);
    }
    if (status) {
        close(fd);
        return status;
    }
    size_t cap = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return ct_fail(err, errlen, IMG_ERR_NOMEM, "%s: out of memory for %zu bytes", path, cap);
    }
    while (got < cap) {  /* a file that shrinks meanwhile is read as it now is */
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            status = ct_fail(err, errlen, IMG_ERR_OPEN, "cannot read %s: %s", path,
                             strerror_r(errno, eb, sizeof eb));
            break;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!status && got == 0)
        status = ct_fail(err, errlen, IMG_ERR_EMPTY, "%s: an empty file (0 bytes)", path);
    if (status) {
        free(buf);
        return status;
    }
    *bytes = buf;
    *n = got;
    return IMG_OK;
}

/* ------------------------------------------------------------ libjpeg glue */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
    int eof;         /* JWRN_JPEG_EOF: the input ran out (libjpeg inserted an EOI) */
    int hit_marker;  /* JWRN_HIT_MARKER: a scan needed bits past its data's end */
    char msg[JMSG_LENGTH_MAX];
} JpegErr;

typedef struct {
    struct jpeg_decompress_struct ci;
    JpegErr jerr;
    int created;
    uint8_t *buf;    /* the decoded window, RGB */
    int own_buf;     /* buf was malloc'd here */
    uint8_t *row;    /* one CMYK or discarded row */
} JpegRun;

static void jerr_exit(j_common_ptr ci)
{
    JpegErr *e = (JpegErr *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jmp, 1);
}

static void jerr_emit(j_common_ptr ci, int level)
{
    JpegErr *e = (JpegErr *)ci->err;
    if (level >= 0) return;  /* trace messages */
    if (e->pub.msg_code == JWRN_JPEG_EOF) e->eof = 1;
    if (e->pub.msg_code == JWRN_HIT_MARKER) e->hit_marker = 1;
    e->pub.num_warnings++;
}

static void run_init(JpegRun *J)
{
    memset(J, 0, sizeof *J);
    J->ci.err = jpeg_std_error(&J->jerr.pub);
    J->jerr.pub.error_exit = jerr_exit;
    J->jerr.pub.emit_message = jerr_emit;
}

static void run_free(JpegRun *J)
{
    if (J->created) jpeg_destroy_decompress(&J->ci);
    J->created = 0;
    if (J->own_buf) free(J->buf);
    J->buf = NULL;
    free(J->row);
    J->row = NULL;
}

/* The message of a libjpeg failure: a truncation when the input ran out. */
static int jpeg_failed(const JpegRun *J, size_t n, const char *path, char *err, size_t errlen)
{
    if (J->jerr.eof)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: truncated JPEG: %zu bytes, the data "
                       "ends early (%s)", path, n, J->jerr.msg);
    return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this JPEG: %s", path,
                   J->jerr.msg);
}

/* Only after setjmp: create, attach the bytes, read the header. */
static void jpeg_open(JpegRun *J, const uint8_t *bytes, size_t n)
{
    jpeg_create_decompress(&J->ci);
    J->created = 1;
    jpeg_mem_src(&J->ci, bytes, (unsigned long)n);
    jpeg_read_header(&J->ci, TRUE);
}

static int jpeg_colour_ok(const struct jpeg_decompress_struct *ci)
{
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: case JCS_YCbCr: case JCS_RGB: case JCS_CMYK: case JCS_YCCK:
        return 1;
    default:
        return 0;
    }
}

static int is_cmyk(const struct jpeg_decompress_struct *ci)
{
    return ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
}

/* 1 when the stream ends in EOI: FF D9 within the last 1 KiB, after
 * position `from` (the end of the first scan's header; an EXIF thumbnail's
 * EOI lies before it). */
static int jpeg_ends_in_eoi(const uint8_t *b, size_t n, size_t from)
{
    size_t lo = n > 1024 ? n - 1024 : 0;
    if (lo < from) lo = from;
    for (size_t i = n; i >= lo + 2; i--)
        if (b[i - 2] == 0xFF && b[i - 1] == 0xD9) return 1;
    return 0;
}

/* Ink values to RGB, as PIL: R = (255 - C)(255 - K) / 255, rounded; an
 * Adobe file stores 255 - C (so R = C' K' / 255). */
static void cmyk_to_rgb(uint8_t *rgb, const uint8_t *cmyk, int w, int inverted)
{
    for (int x = 0; x < w; x++, cmyk += 4, rgb += 3) {
        unsigned k = inverted ? cmyk[3] : 255u - cmyk[3];
        for (int c = 0; c < 3; c++) {
            unsigned v = inverted ? cmyk[c] : 255u - cmyk[c];
            rgb[c] = (uint8_t)((v * k + 127) / 255);
        }
    }
}

/* Decode rows [r0, r1) and columns [c0, c1) (at least) of the JPEG at 1/d
 * (Hd x Wd) into J->buf, RGB, columns [*x0, *x0 + *w): the crop is widened
 * to libjpeg's iMCU boundary. J->buf may be given (then it must hold
 * (r1 - r0) x Wd x 3: only a whole-width decode passes one). */
static int jpeg_window(JpegRun *J, const uint8_t *bytes, size_t n, int d, int Hd, int Wd,
                       int r0, int r1, int c0, int c1, int *x0, int *w, const char *path,
                       char *err, size_t errlen)
{
    struct jpeg_decompress_struct *ci = &J->ci;
    if (setjmp(J->jerr.jmp)) return jpeg_failed(J, n, path, err, errlen);
    jpeg_open(J, bytes, n);
    if (!jpeg_colour_ok(ci))
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this JPEG: colour "
                       "space %d with %d components", path, (int)ci->jpeg_color_space,
                       ci->num_components);
    const int cmyk = is_cmyk(ci), comps = cmyk ? 4 : 3;
    const int inverted = ci->saw_Adobe_marker;
    /* a stream without EOI is decoded to its end (the truncation rule) */
    const int to_end = !jpeg_ends_in_eoi(bytes, n, n - ci->src->bytes_in_buffer);
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)d;
    ci->dct_method = JDCT_ISLOW;
    ci->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(ci);
    if ((int)ci->output_height != Hd || (int)ci->output_width != Wd ||
        ci->output_components != comps)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this JPEG: libjpeg "
                       "gives %u x %u x %d at 1/%d, expected %d x %d x %d", path,
                       ci->output_width, ci->output_height, ci->output_components, d, Wd, Hd,
                       comps);
    JDIMENSION xo = (JDIMENSION)c0, cw = (JDIMENSION)(c1 - c0);
    if ((int)cw < Wd) jpeg_crop_scanline(ci, &xo, &cw);
    const int ow = (int)ci->output_width;
    if (r0 > 0 && jpeg_skip_scanlines(ci, (JDIMENSION)r0) != (JDIMENSION)r0)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this JPEG: skipping "
                       "%d rows failed", path, r0);
    if (!J->buf) {
        J->buf = malloc((size_t)(r1 - r0) * (size_t)ow * 3);
        J->own_buf = 1;
    }
    J->row = malloc((size_t)ow * 4);
    if (!J->buf || !J->row)
        return ct_fail(err, errlen, IMG_ERR_NOMEM, "%s: out of memory for %d x %d pixels",
                       path, ow, r1 - r0);
    while ((int)ci->output_scanline < r1) {
        int y = (int)ci->output_scanline - r0;
        uint8_t *dst = J->buf + (size_t)y * ow * 3;
        if (cmyk) {
            JSAMPROW rp = J->row;
            if (jpeg_read_scanlines(ci, &rp, 1) != 1) break;
            cmyk_to_rgb(dst, J->row, ow, inverted);
        } else {
            JSAMPROW rows[16];
            int k = r1 - r0 - y < 16 ? r1 - r0 - y : 16;
            for (int i = 0; i < k; i++) rows[i] = dst + (size_t)i * ow * 3;
            if (jpeg_read_scanlines(ci, rows, (JDIMENSION)k) == 0) break;
        }
    }
    if ((int)ci->output_scanline < r1)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this JPEG: libjpeg "
                       "stopped at row %u of %d", path, ci->output_scanline, r1);
    if (to_end || r1 == Hd) {
        /* every row through the entropy decoder (jpeg_skip_scanlines to the
         * end would not read the data), then the markers up to EOI */
        while (ci->output_scanline < ci->output_height) {
            JSAMPROW rp = J->row;
            if (jpeg_read_scanlines(ci, &rp, 1) != 1) break;
        }
        jpeg_finish_decompress(ci);
    } else {
        jpeg_abort_decompress(ci);
    }
    if (J->jerr.eof && J->jerr.hit_marker)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: truncated JPEG: %zu bytes, the data "
                       "ends early", path, n);
    *x0 = (int)xo;
    *w = ow;
    return IMG_OK;
}

/* ------------------------------------------------------------------ header */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int png_header(ImgInfo *info, const uint8_t *b, size_t n, const char *path, char *err,
                      size_t errlen)
{
    /* signature (8), then IHDR: length 13, type, 13 data bytes, CRC */
    if (n < 33)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: truncated PNG: %zu bytes, too short "
                       "for its header", path, n);
    if (be32(b + 8) != 13 || memcmp(b + 12, "IHDR", 4) != 0)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: damaged PNG: the first chunk is not "
                       "a 13-byte IHDR", path);
    if ((uint32_t)crc32(0L, b + 12, 17) != be32(b + 29))
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: damaged PNG: the IHDR chunk's CRC "
                       "does not match", path);
    uint32_t W = be32(b + 16), H = be32(b + 20);
    int depth = b[24], ct = b[25];
    int ok = (ct == 0 && (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)) ||
             (ct == 3 && (depth == 1 || depth == 2 || depth == 4 || depth == 8)) ||
             ((ct == 2 || ct == 4 || ct == 6) && (depth == 8 || depth == 16));
    if (!ok || b[26] != 0 || b[27] != 0 || b[28] > 1)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: damaged PNG: bit depth %d, colour "
                       "type %d, compression %d, filter %d, interlace %d is not a valid "
                       "combination", path, depth, ct, b[26], b[27], b[28]);
    if (W == 0 || H == 0)
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: PNG header says %u x %u pixels (W x "
                       "H): a zero side", path, W, H);
    if ((unsigned long long)W * H > IMG_MAX_PIXELS)
        return ct_fail(err, errlen, IMG_ERR_SIZE, "%s: PNG header says %u x %u pixels (W x H), "
                       "%llu in all: above the limit of %llu (2^28)", path, W, H,
                       (unsigned long long)W * H, IMG_MAX_PIXELS);
    info->width = (int)W;
    info->height = (int)H;
    info->channels = ct == 0 ? 1 : ct == 4 ? 2 : ct == 6 ? 4 : 3;
    return IMG_OK;
}

/* The header of a JPEG: setjmp here, state in J. */
static int jpeg_header(JpegRun *J, ImgInfo *info, const uint8_t *b, size_t n,
                       const char *path, char *err, size_t errlen)
{
    if (setjmp(J->jerr.jmp)) return jpeg_failed(J, n, path, err, errlen);
    jpeg_open(J, b, n);
    const struct jpeg_decompress_struct *ci = &J->ci;
    if (!jpeg_colour_ok(ci))
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this JPEG: colour "
                       "space %d with %d components", path, (int)ci->jpeg_color_space,
                       ci->num_components);
    unsigned long long W = ci->image_width, H = ci->image_height;
    if (W * H > IMG_MAX_PIXELS)
        return ct_fail(err, errlen, IMG_ERR_SIZE, "%s: JPEG header says %llu x %llu pixels "
                       "(W x H), %llu in all: above the limit of %llu (2^28)", path, W, H,
                       W * H, IMG_MAX_PIXELS);
    info->width = (int)W;
    info->height = (int)H;
    info->channels = ci->num_components;
    info->progressive = ci->progressive_mode ? 1 : 0;
    info->cmyk = is_cmyk(ci);
    const jpeg_component_info *k = ci->comp_info;
    info->chroma420 = ci->num_components == 3 && k[0].h_samp_factor == 2 &&
                      k[0].v_samp_factor == 2 && k[1].h_samp_factor == 1 &&
                      k[1].v_samp_factor == 1 && k[2].h_samp_factor == 1 && k[2].v_samp_factor == 1;
    return IMG_OK;
}

int img_header(ImgInfo *info, const uint8_t *bytes, size_t n, const char *path, char *err,
               size_t errlen)
{
    memset(info, 0, sizeof *info);
    const char *type;
    info->format = img_sniff(bytes, n, &type);
    if (n == 0) return ct_fail(err, errlen, IMG_ERR_EMPTY, "%s: an empty file (0 bytes)", path);
    if (info->format == IMG_PNG) return png_header(info, bytes, n, path, err, errlen);
    if (info->format != IMG_JPEG) {
        if (!strncmp(type, "not ", 4))
            return ct_fail(err, errlen, IMG_ERR_FORMAT, "%s: not a JPEG or PNG image (first "
                           "bytes %02x %02x %02x %02x; formats without a signature, such as "
                           "TGA, are not read)", path, bytes[0], n > 1 ? bytes[1] : 0,
                           n > 2 ? bytes[2] : 0, n > 3 ? bytes[3] : 0);
        return ct_fail(err, errlen, IMG_ERR_FORMAT, "%s: %s, not JPEG or PNG", path, type);
    }
    JpegRun J;
    run_init(&J);
    int st = jpeg_header(&J, info, bytes, n, path, err, errlen);
    run_free(&J);
    return st;
}

/* ------------------------------------------------------------------ decode */

int img_dct_denom(RsAxis ay, RsAxis ax, int max_d)
{
    for (int d = 8; d > 1; d /= 2)
        if (d <= max_d && ay.step >= (float)d && ax.step >= (float)d) return d;
    return 1;
}

static int png_decode(uint8_t **img, const uint8_t *bytes, size_t n, const ImgInfo *info,
                      const char *path, char *err, size_t errlen)
{
    int w = 0, h = 0, comp = 0;
    *img = stbi_load_from_memory(bytes, (int)n, &w, &h, &comp, 3);
    if (!*img) {
        const char *why = stbi_failure_reason();
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this PNG: %s", path,
                       why && *why ? why : "stb_image gives no reason");
    }
    if (w != info->width || h != info->height) {
        stbi_image_free(*img);
        *img = NULL;
        return ct_fail(err, errlen, IMG_ERR_DAMAGED, "%s: cannot decode this PNG: %d x %d "
                       "decoded, the header says %d x %d", path, w, h, info->width,
                       info->height);
    }
    return IMG_OK;
}

static void check_call(const ImgInfo *info, size_t n)
{
    CT_ASSERT(info && n > 0 && (info->format == IMG_JPEG || info->format == IMG_PNG) &&
              info->width > 0 && info->height > 0,
              "image_decode: call img_header first (format %d, %d x %d)",
              info ? (int)info->format : -1, info ? info->width : 0, info ? info->height : 0);
}

int img_decode_box(uint8_t *out, const uint8_t *bytes, size_t n, const ImgInfo *info,
                   RsAxis ay, RsAxis ax, int flip, int S, int max_d, const char *path,
                   char *err, size_t errlen)
{
    check_call(info, n);
    const int H = info->height, W = info->width;
    CT_ASSERT(S > 0 && ay.lo >= 0 && ay.hi <= H && ay.lo < ay.hi && ax.lo >= 0 &&
              ax.hi <= W && ax.lo < ax.hi, "img_decode_box: S %d, rows [%d, %d) columns "
              "[%d, %d) of a %d x %d image", S, ay.lo, ay.hi, ax.lo, ax.hi, W, H);
    if (info->format == IMG_PNG) {
        uint8_t *img;
        int st = png_decode(&img, bytes, n, info, path, err, errlen);
        if (st) return st;
        rs_resample_u8(out, img, ay, ax, flip, S, 0, 0, H, W);
        stbi_image_free(img);
        return IMG_OK;
    }
    const int d = img_dct_denom(ay, ax, max_d);
    const int Hd = (H + d - 1) / d, Wd = (W + d - 1) / d;
    RsAxis sy = d > 1 ? rs_axis_scaled(ay, d, Hd) : ay;
    RsAxis sx = d > 1 ? rs_axis_scaled(ax, d, Wd) : ax;
    int r0, r1, c0, c1;
    rs_window(&r0, &r1, sy, S);
    rs_window(&c0, &c1, sx, S);
    /* 2 more columns each side: fancy upsampling reads the chroma neighbour */
    c0 = c0 > 2 ? c0 - 2 : 0;
    c1 = c1 + 2 < Wd ? c1 + 2 : Wd;
    JpegRun J;
    run_init(&J);
    int x0 = 0, w = 0;
    int st = jpeg_window(&J, bytes, n, d, Hd, Wd, r0, r1, c0, c1, &x0, &w, path, err, errlen);
    if (!st) rs_resample_u8(out, J.buf, sy, sx, flip, S, r0, x0, r1 - r0, w);
    run_free(&J);
    return st;
}

int img_decode_rgb(uint8_t *out, const uint8_t *bytes, size_t n, const ImgInfo *info,
                   const char *path, char *err, size_t errlen)
{
    check_call(info, n);
    const int H = info->height, W = info->width;
    if (info->format == IMG_PNG) {
        uint8_t *img;
        int st = png_decode(&img, bytes, n, info, path, err, errlen);
        if (st) return st;
        memcpy(out, img, (size_t)H * W * 3);
        stbi_image_free(img);
        return IMG_OK;
    }
    JpegRun J;
    run_init(&J);
    J.buf = out;
    int x0, w;
    int st = jpeg_window(&J, bytes, n, 1, H, W, 0, H, 0, W, &x0, &w, path, err, errlen);
    run_free(&J);
    return st;
}

const char *img_hint(int status)
{
    switch (status) {
    case IMG_OK: return NULL;
    case IMG_ERR_OPEN:
        return "check that the file exists and is a regular file (did the data set change "
               "since it was scanned?)";
    case IMG_ERR_ACCESS:
        return "check the file's permissions: this user must be able to read it (chmod a+r)";
    case IMG_ERR_EMPTY:
        return "the file is empty (an interrupted copy or download?): copy it again or "
               "remove it";
    case IMG_ERR_FORMAT:
        return "convert it to JPEG or PNG (e.g. with ImageMagick) or remove it";
    case IMG_ERR_SIZE:
        return "downscale it (e.g. with ImageMagick's mogrify -resize) or remove it";
    case IMG_ERR_DAMAGED:
        return "replace it with a good copy, re-encode it (e.g. with ImageMagick), or "
               "remove it";
    case IMG_ERR_NOMEM:
        return "the machine ran out of memory: use fewer --workers";
    default: return NULL;
    }
}
