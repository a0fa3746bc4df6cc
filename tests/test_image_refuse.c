/* test_image_refuse.c — the files the image decoder (data/image_decode.h)
 * must refuse, each with one error naming the file and the cause, and a
 * hint: the sniffer's verdict on every signature it knows; a zero-byte
 * file; a text file named .jpg; a truncated JPEG (for crops at the top, the
 * bottom, the whole image) and a truncated progressive JPEG; a JPEG cut in
 * its header; a JPEG missing only its EOI (it decodes, the same pixels); a
 * header claiming 60000 x 60000; a PNG claiming 0 x 4, one with a bad IHDR
 * CRC, one claiming 20000 x 20000; the stb_image crash cases of issue 18
 * (PIC, truncated RLE HDR, huge TGA, 'P6 4 0' PPM, a JPEG whose Huffman
 * counts exceed 256) and GIF/BMP/PSD/WebP/TIFF files named .jpg, none
 * reaching a decoder; a directory, a missing file, an unreadable file (read
 * as nobody in a child), a file above the size cap (sparse).
 *
 * Shape letters: H W source pixels, S output side.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/image_decode.h"
#include "data/resample.h"
#include "jpeg_fixture.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop
#include "child_util.h"

enum { PH = 375, PW = 460 };

static char tmp[256];

static void check_msg(const char *name, const char *err, const char *want)
{
    check_true(name, strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
}

static void path_of(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmp, name);
}

/* The whole pipeline on one file: read, header, the box, decode. */
static int decode_file(const char *path, uint8_t *out, int S, int which_box, int max_d,
                       ImgInfo *info, char *err, size_t errlen)
{
    uint8_t *b;
    size_t n;
    int st = img_read_file(path, &b, &n, err, errlen);
    if (st) return st;
    ImgInfo inf;
    st = img_header(&inf, b, n, path, err, errlen);
    if (!st) {
        int H = inf.height, W = inf.width;
        RsAxis ay, ax;
        if (which_box == 0) {        /* the whole image */
            ay = rs_axis_box(0, H, S);
            ax = rs_axis_box(0, W, S);
        } else if (which_box == 1) { /* a strip at the top */
            ay = rs_axis_box(0, (H + 7) / 8, S);
            ax = rs_axis_box(0, W, S);
        } else {                     /* a strip at the bottom */
            ay = rs_axis_box(H - (H + 7) / 8, (H + 7) / 8, S);
            ax = rs_axis_box(W / 2, W - W / 2, S);
        }
        st = img_decode_box(out, b, n, &inf, ay, ax, 0, S, max_d, path, err, errlen);
        if (info) *info = inf;
    }
    free(b);
    return st;
}

/* ---------------------------------------------------------------- bad files */

/* The pipeline on bytes written to tmp/name: status want, err naming the
 * file and containing `cause`, one line, a hint. */
static void expect_bad(const char *name, const void *bytes, size_t n, int want, const char *cause)
{
    char path[512], err[512] = "", tag[128];
    path_of(path, sizeof path, name);
    if (bytes) file_write(path, bytes, n);
    uint8_t out[32 * 32 * 3];
    int st = decode_file(path, out, 32, 0, 8, NULL, err, sizeof err);
    snprintf(tag, sizeof tag, "bad.%s", name);
    check_true(tag, st == want, "status %d, want %d (%s)", st, want, err);
    check_msg(tag, err, path);
    check_msg(tag, err, cause);
    check_true(tag, strchr(err, '\n') == NULL && img_hint(st) != NULL, "not one line + hint");
    if (getenv("CHECK_VERBOSE")) printf("    %s\n    hint: %s\n", err, img_hint(st));
}

/* In a child: drop root, read path, write "STATUS MESSAGE" to fd. */
static void read_as_nobody(void *ctx, int fd)
{
    char err[512] = "";
    uint8_t *b = NULL;
    size_t n;
    if (child_drop_root()) _exit(3);
    int st = img_read_file(ctx, &b, &n, err, sizeof err);
    dprintf(fd, "%d %s", st, err);
    free(b);
    _exit(st == IMG_ERR_ACCESS ? 0 : 2);
}

static void test_bad_files(void)
{
    char path[512], err[512];
    expect_bad("empty.jpg", "", 0, IMG_ERR_EMPTY, "an empty file (0 bytes)");
    const char *text = "<html><body>404 Not Found</body></html>\n";
    expect_bad("text.jpg", text, strlen(text), IMG_ERR_FORMAT, "a text file, not JPEG or PNG");
    uint8_t b[512];
    for (int k = 0; k < JFX_NBAD; k++) {
        const char *what, *type;
        size_t n = jfx_bad_file(k, b, &what, &type);
        char name[64];
        snprintf(name, sizeof name, "crash_%s.jpg", what);
        expect_bad(name, b, n, IMG_ERR_FORMAT, type);
    }
    /* real JPEGs, damaged */
    uint8_t *img = malloc((size_t)PH * PW * 3);
    jfx_pattern(img, PH, PW, 3, 3);
    for (int prog = 0; prog < 2; prog++) {
        JfxOptions o = {.quality = 90, .progressive = prog};
        unsigned char *j;
        unsigned long n;
        jfx_jpeg_encode(&j, &n, img, PH, PW, 3, &o);
        /* cut in the middle of the data: an error for every crop */
        for (int box = 0; box < 3; box++) {
            char name[64];
            snprintf(name, sizeof name, "trunc%d_%d.jpg", prog, box);
            path_of(path, sizeof path, name);
            file_write(path, j, n * 6 / 10);
            uint8_t out[32 * 32 * 3];
            int st = decode_file(path, out, 32, box, 8, NULL, err, sizeof err);
            snprintf(name, sizeof name, "bad.truncated%s.box%d", prog ? "_progressive" : "", box);
            check_true(name, st == IMG_ERR_DAMAGED, "status %d (%s)", st, err);
            check_msg(name, err, "truncated JPEG");
            check_msg(name, err, path);
        }
        /* cut in the header */
        char hname[32];
        snprintf(hname, sizeof hname, "trunchead%d.jpg", prog);
        expect_bad(hname, j, 300, IMG_ERR_DAMAGED, "truncated JPEG: 300 bytes");
        /* only the EOI missing: decodes, the same pixels */
        uint8_t o1[32 * 32 * 3], o2[32 * 32 * 3];
        path_of(path, sizeof path, "whole.jpg");
        file_write(path, j, n);
        int s1 = decode_file(path, o1, 32, 2, 8, NULL, err, sizeof err);
        path_of(path, sizeof path, "noeoi.jpg");
        file_write(path, j, n - 2);
        int s2 = decode_file(path, o2, 32, 2, 8, NULL, err, sizeof err);
        check_true(prog ? "jpeg.missing_eoi_progressive_decodes" : "jpeg.missing_eoi_decodes",
                   s1 == 0 && s2 == 0 && !memcmp(o1, o2, sizeof o1), "status %d %d (%s)", s1,
                   s2, err);
        if (!prog) {
            uint8_t *h = jfx_jpeg_resize_header(j, n, 60000, 60000);
            expect_bad("huge.jpg", h, n, IMG_ERR_SIZE, "60000 x 60000 pixels");
            free(h);
            h = jfx_bad_huffman(j, n);
            expect_bad("crash_huffman.jpg", h, n, IMG_ERR_DAMAGED, "Bogus Huffman table");
            free(h);
        }
        free(j);
    }
    free(img);
    /* PNG headers */
    uint8_t rows[4] = {0}, *png;
    size_t n;
    jfx_png_encode(&png, &n, 0, 4, 8, 0, rows, sizeof rows, NULL, 0);
    expect_bad("zero.png", png, n, IMG_ERR_DAMAGED, "0 x 4 pixels (W x H): a zero side");
    png[20] ^= 1;  /* height 4 -> 5 without fixing the CRC */
    expect_bad("crc.png", png, n, IMG_ERR_DAMAGED, "CRC does not match");
    free(png);
    uint8_t big[4] = {0};
    jfx_png_encode(&png, &n, 20000, 20000, 8, 0, big, 1, NULL, 0);
    expect_bad("huge.png", png, n, IMG_ERR_SIZE, "20000 x 20000 pixels");
    free(png);
    /* the file itself */
    path_of(path, sizeof path, "dir.jpg");
    mkdir(path, 0700);
    expect_bad("dir.jpg", NULL, 0, IMG_ERR_OPEN, "a directory");
    expect_bad("missing.jpg", NULL, 0, IMG_ERR_OPEN, "No such file or directory");
    path_of(path, sizeof path, "sparse.jpg");
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    int big_ok = fd >= 0 && ftruncate(fd, (off_t)IMG_MAX_FILE_BYTES + 1) == 0;
    if (fd >= 0) close(fd);
    if (big_ok) expect_bad("sparse.jpg", NULL, 0, IMG_ERR_SIZE, "above the limit");
    /* unreadable: as nobody (root reads a mode-000 file anyway) */
    path_of(path, sizeof path, "noread.jpg");
    file_write(path, "\xFF\xD8\xFF", 3);
    chmod(path, 0);
    char got[600];
    int rc = child_run(read_as_nobody, path, got, sizeof got);
    check_true("bad.noread.jpg", rc == 0 && strstr(got, path) && strstr(got, "permission denied"),
               "exit %d, \"%s\"", rc, got);
    check_true("hint.format", strstr(img_hint(IMG_ERR_FORMAT), "ImageMagick") != NULL, "%s",
               img_hint(IMG_ERR_FORMAT));
}

static void test_sniff(void)
{
    struct { const char *bytes; size_t n; ImgFormat f; const char *type; } c[] = {
        {"\xFF\xD8\xFF\xE0", 4, IMG_JPEG, "a JPEG image"},
        {"\x89PNG\r\n\x1A\n", 8, IMG_PNG, "a PNG image"},
        {"\x89PNG\r\n", 6, IMG_UNKNOWN, "not a JPEG or PNG image"},
        {"\xFF\xD8", 2, IMG_UNKNOWN, "not a JPEG or PNG image"},
        {"GIF87a", 6, IMG_UNKNOWN, "a GIF image"},
        {"#?RGBE\n", 7, IMG_UNKNOWN, "a Radiance HDR image"},
        {"P1\n", 3, IMG_UNKNOWN, "a PNM (PBM/PGM/PPM/PAM) image"},
        {"P6 4 0\n255\n", 11, IMG_UNKNOWN, "a PNM (PBM/PGM/PPM/PAM) image"},
        {"\0\0\0\x1C" "ftypavif", 12, IMG_UNKNOWN, "a HEIF/AVIF image"},
        {"hello\n", 6, IMG_UNKNOWN, "a text file"},
        {"", 0, IMG_UNKNOWN, "an empty file"},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        const char *type = NULL;
        ImgFormat f = img_sniff((const uint8_t *)c[i].bytes, c[i].n, &type);
        check_true("sniff", f == c[i].f && type && !strcmp(type, c[i].type),
                   "case %zu: format %d \"%s\", want %d \"%s\"", i, f, type ? type : "",
                   c[i].f, c[i].type);
    }
}

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *f)
{
    (void)s, (void)flag, (void)f;
    return remove(p);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_imgref_XXXXXX");
    if (!mkdtemp(tmp)) {
        check_true("tmpdir", 0, "mkdtemp: %s", strerror(errno));
        return check_summary();
    }
    test_sniff();
    test_bad_files();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
