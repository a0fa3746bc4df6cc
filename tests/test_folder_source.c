/* test_folder_source.c — the ImageFolder source through the image decoder
 * (data/image_source.h over data/image_decode.h) and the loader over it.
 *
 * A folder of generated images (tests/jpeg_fixture.h): baseline 4:2:0 JPEGs
 * of 460 x 375 and 1100 x 800 (large enough that RandomResizedCrop boxes
 * use DCT scaling), a progressive, a gray and an Adobe CMYK JPEG, an RGB
 * and a gray PNG, in three classes. Checked, for training (two epochs) and
 * evaluation:
 *   - labels are the class indices; each row is u8 and equals
 *     img_decode_box of the file through the axes of the pure functions:
 *     rs_axis_box of aug_rrc_box and aug_flip (training), rs_axis_resized
 *     of aug_val_window (evaluation); the axes aug_train_axes gives are
 *     those;
 *   - a PNG row equals rs_resample_u8 of the PNG's pixels (lossless) and
 *     of the pattern it was written from; a gray JPEG gives R = G = B;
 *   - the GPU path's host part (src_get_u8 with SrcEncoded): the kinds in
 *     cpu_kinds (PNG, CMYK, progressive when asked) are decoded at once
 *     into the same row, the others keep their bytes and header and the
 *     same axes, and src_encoded_decode of them gives the same row; the
 *     loader with cfg.encoded hands over exactly these;
 *   - the loader's u8 batches are identical for 1 and 3 workers.
 * Bad files, each alone in a folder of good ones, through the loader: a
 * zero-byte file, a text file named .jpg, a truncated JPEG, a header
 * claiming 60000 x 60000, a Softimage PIC named .jpg (an stb crash case), a
 * WebP file (listed by its extension, refused by its bytes): the epoch
 * stops with one error naming the file and the cause, its status, no
 * further batch, and through loader_next (in a child) exit 1 with the
 * message and the hint. (A file the user may not read: test_loader.c, as
 * nobody.)
 *
 * Shape letters: H W source pixels, S output side.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/augment.h"
#include "data/image_decode.h"
#include "data/image_source.h"
#include "data/imagefolder.h"
#include "data/loader.h"
#include "jpeg_fixture.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop
#include "child_util.h"

enum { S = 64 };

static char tmp[256];

static void check_msg(const char *name, const char *err, const char *want)
{
    check_true(name, err && strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"",
               err ? err : "(none)", want);
}

static void make_dir(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    if (mkdir(p, 0755) && errno != EEXIST) { perror(p); exit(1); }
}

static void path_of(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/%s", tmp, rel); }

/* A photo-like image written as rel: kind 'j' JPEG (opt), 'p' PNG. */
static void write_image(const char *rel, int H, int W, int C, uint64_t seed, char kind,
                        const JfxOptions *opt)
{
    char p[512];
    path_of(p, sizeof p, rel);
    uint8_t *img = malloc((size_t)H * W * C);
    jfx_pattern(img, H, W, C, seed);
    if (kind == 'j') jfx_write_jpeg(p, img, H, W, C, opt);
    else jfx_write_png(p, img, H, W, C);
    free(img);
}

/* The row of sample i the pure functions say: its file through
 * img_decode_box with rs_axis_box(aug_rrc_box) + aug_flip, or the
 * evaluation axes. 0, or the status. */
static int ref_row(uint8_t *out, const ImageSource *src, uint32_t i, int train, uint64_t seed,
                   uint64_t epoch, ImgInfo *info_out)
{
    const ImageFolder *f = src_imagefolder(src);
    const char *path = imagefolder_path(f, i);
    char err[600];
    uint8_t *b;
    size_t n;
    ImgInfo info;
    int st = img_read_file(path, &b, &n, err, sizeof err);
    if (!st) st = img_header(&info, b, n, path, err, sizeof err);
    if (st) return st;
    RsAxis ay, ax;
    int flip = 0;
    if (train) {
        AugBox bx = aug_rrc_box(info.height, info.width, &src->aug, seed, epoch, i);
        ay = rs_axis_box(bx.top, bx.h, S);
        ax = rs_axis_box(bx.left, bx.w, S);
        flip = aug_flip(&src->aug, seed, epoch, i);
    } else {
        AugValWindow v = aug_val_window(info.height, info.width, &src->aug);
        ay = rs_axis_resized(info.height, v.nh, v.top);
        ax = rs_axis_resized(info.width, v.nw, v.left);
    }
    st = img_decode_box(out, b, n, &info, ay, ax, flip, S, 8, path, err, sizeof err);
    if (info_out) *info_out = info;
    free(b);
    return st;
}

static int axes_equal(RsAxis a, RsAxis b)
{
    return a.start == b.start && a.step == b.step && a.lo == b.lo && a.hi == b.hi;
}

/* ------------------------------------------------------------ good folder */

static void make_good(void)
{
    make_dir("ok");
    make_dir("ok/ant");
    make_dir("ok/bee");
    make_dir("ok/cat");
    JfxOptions base = {0}, prog = {.progressive = 1}, gray = {.gray = 1}, cmyk = {.cmyk = 1};
    write_image("ok/ant/a0.jpg", 375, 460, 3, 1, 'j', &base);
    write_image("ok/ant/a1.jpg", 800, 1100, 3, 2, 'j', &base);
    write_image("ok/ant/a2.JPEG", 375, 460, 3, 3, 'j', &prog);
    write_image("ok/bee/b0.jpg", 300, 240, 3, 4, 'j', &gray);
    write_image("ok/bee/b1.png", 90, 120, 3, 5, 'p', NULL);
    write_image("ok/cat/c0.jpg", 375, 460, 3, 6, 'j', &cmyk);
    write_image("ok/cat/c1.png", 70, 50, 1, 7, 'p', NULL);
    write_image("ok/cat/c2.jpg", 800, 1100, 3, 8, 'j', &base);
}

static void test_rows(const ImageSource *src)
{
    const size_t row = (size_t)S * S * 3;
    uint8_t *got = malloc(row), *ref = malloc(row);
    char err[600];
    int labels = 1, rows = 1, axes = 1, st_all = 1;
    for (int train = 0; train < 2; train++)
        for (uint64_t epoch = 0; epoch < (train ? 2u : 1u); epoch++)
            for (uint32_t i = 0; i < src->n; i++) {
                int32_t y = -1;
                int st = src_get_u8(src, i, train, 77, epoch, got, &y, NULL, 0, err, sizeof err);
                ImgInfo info;
                int rst = ref_row(ref, src, i, train, 77, epoch, &info);
                if (st || rst) {
                    if (st_all) printf("  sample %u: %s\n", i, err);
                    st_all = 0;
                    continue;
                }
                labels &= y == src_imagefolder(src)->labels[i];
                if (memcmp(got, ref, row)) {
                    if (rows) printf("  sample %u train %d epoch %llu differs\n", i, train,
                                     (unsigned long long)epoch);
                    rows = 0;
                }
                if (train) {
                    RsAxis ay, ax;
                    int flip;
                    aug_train_axes(&ay, &ax, &flip, info.height, info.width, &src->aug, 77,
                                   epoch, i);
                    AugBox b = aug_rrc_box(info.height, info.width, &src->aug, 77, epoch, i);
                    axes &= axes_equal(ay, rs_axis_box(b.top, b.h, S)) &&
                            axes_equal(ax, rs_axis_box(b.left, b.w, S)) &&
                            flip == aug_flip(&src->aug, 77, epoch, i);
                }
            }
    check_true("source.decodes", st_all, "a good sample failed (above)");
    check_true("source.labels", labels, "a label is not its class index");
    check_true("source.rows_are_the_pure_crop", rows, "a row differs from img_decode_box "
               "through the pure functions' axes (above)");
    check_true("source.train_axes", axes, "aug_train_axes differs from rs_axis_box(aug_rrc_box)");

    /* the RGB PNG (sample 4: ant a0 a1 a2, bee b0 b1): lossless, so the row
     * is the pattern resampled */
    const int H = 90, W = 120;
    uint8_t *pat = malloc((size_t)H * W * 3), *res = malloc(row);
    jfx_pattern(pat, H, W, 3, 5);
    int32_t y;
    for (int train = 0; train < 2; train++) {
        src_get_u8(src, 4, train, 77, 1, got, &y, NULL, 0, err, sizeof err);
        RsAxis ay, ax;
        int flip = 0;
        if (train) aug_train_axes(&ay, &ax, &flip, H, W, &src->aug, 77, 1, 4);
        else aug_val_axes(&ay, &ax, H, W, &src->aug);
        rs_resample_u8(res, pat, ay, ax, flip, S, 0, 0, H, W);
        check_true(train ? "source.png.train_is_pattern" : "source.png.val_is_pattern",
                   memcmp(got, res, row) == 0 && y == 1, "the PNG's row is not its pattern "
                   "resampled (label %d)", y);
    }
    /* the gray JPEG (sample 3): R = G = B everywhere */
    src_get_u8(src, 3, 1, 77, 0, got, &y, NULL, 0, err, sizeof err);
    int grey = 1;
    for (size_t p = 0; p < row; p += 3) grey &= got[p] == got[p + 1] && got[p] == got[p + 2];
    check_true("source.gray_jpeg_replicated", grey, "a gray JPEG's row has colour");
    free(pat);
    free(res);
    free(got);
    free(ref);
}

/* The GPU path's host part: what is decoded at once and what keeps its bytes. */
static void test_encoded(const ImageSource *src)
{
    const size_t row = (size_t)S * S * 3;
    uint8_t *got = malloc(row), *ref = malloc(row), *dec = malloc(row);
    char err[600];
    /* expected: PNG (4, 6) and CMYK (5) on the CPU; progressive (2) only when
     * asked; the gray file (3) when not-4:2:0 is asked */
    const unsigned kinds[3] = {SRC_CPU_PNG | SRC_CPU_CMYK,
                               SRC_CPU_PNG | SRC_CPU_CMYK | SRC_CPU_PROGRESSIVE,
                               SRC_CPU_PNG | SRC_CPU_CMYK | SRC_CPU_NOT420};
    static const char *split_name[3] = {"encoded.split", "encoded.split_progressive_to_cpu",
                                        "encoded.split_not420_to_cpu"};
    for (int t = 0; t < 3; t++) {
        int ok_split = 1, ok_rows = 1, ok_kept = 1;
        for (uint32_t i = 0; i < src->n; i++) {
            int want_cpu = i == 4 || i == 6 || i == 5 || (i == 2 && t == 1) || (i == 3 && t == 2);
            SrcEncoded e;
            memset(&e, 0, sizeof e);
            memset(got, 0xA5, row);
            int32_t y, y2;
            int st = src_get_u8(src, i, 1, 5, 3, got, &y, &e, kinds[t], err, sizeof err);
            src_get_u8(src, i, 1, 5, 3, ref, &y2, NULL, 0, err, sizeof err);
            ok_split &= st == 0 && (e.bytes == NULL) == want_cpu && y == y2;
            if (!e.bytes) {
                ok_rows &= memcmp(got, ref, row) == 0;
                continue;
            }
            RsAxis ay, ax;
            int flip;
            aug_train_axes(&ay, &ax, &flip, e.info.height, e.info.width, &src->aug, 5, 3, i);
            int untouched = 1;
            for (size_t k = 0; k < row; k++) untouched &= got[k] == 0xA5;
            st = src_encoded_decode(dec, &e, S, err, sizeof err);
            ok_kept &= untouched && axes_equal(e.ay, ay) && axes_equal(e.ax, ax) &&
                       e.flip == flip && e.n > 0 && e.info.format == IMG_JPEG && st == 0 &&
                       memcmp(dec, ref, row) == 0 &&
                       !strcmp(e.path, imagefolder_path(src_imagefolder(src), i));
            free(e.bytes);
        }
        char nm[64];
        check_true(split_name[t], ok_split,
                   "which samples were decoded at once differs from the kinds asked");
        snprintf(nm, sizeof nm, "encoded.cpu_rows.%d", t);
        check_true(nm, ok_rows, "a row decoded at once differs from the plain decode");
        snprintf(nm, sizeof nm, "encoded.kept.%d", t);
        check_true(nm, ok_kept, "a kept sample's bytes, axes or later decode differ (or its row "
                   "was written)");
    }

    /* through the loader: rows with bytes NULL hold the pixels */
    LoaderConfig lc = {.batch = 4, .workers = 2, .slots = 3, .train = 1, .seed = 5,
                       .encoded = 1, .cpu_kinds = SRC_CPU_PNG | SRC_CPU_CMYK};
    Loader *L = loader_init(src, &lc);
    loader_start(L, 3, 0);
    LoaderBatch *b;
    int ok = 1, n = 0, kept = 0;
    while ((b = loader_next(L))) {
        for (int r = 0; r < b->n; r++, n++) {
            int32_t y;
            src_get_u8(src, b->index[r], 1, 5, 3, ref, &y, NULL, 0, err, sizeof err);
            if (b->enc[r].bytes) {
                kept++;
                ok &= src_encoded_decode(dec, &b->enc[r], S, err, sizeof err) == 0 &&
                      memcmp(dec, ref, row) == 0;
            } else {
                ok &= memcmp(b->u8 + (size_t)r * row, ref, row) == 0;
            }
            ok &= y == b->y[r] && b->x == NULL;
        }
        loader_release(L, b);
    }
    check_true("encoded.loader", ok && n == 8 && kept == 5, "%d rows, %d kept (want 8, 5)", n,
               kept);
    loader_free(L);
    free(got);
    free(ref);
    free(dec);
}

static void test_loader_workers(const ImageSource *src)
{
    const size_t row = (size_t)S * S * 3;
    uint8_t *a = malloc(row * src->n), *c = malloc(row * src->n);
    for (int w = 1; w <= 3; w += 2) {
        LoaderConfig lc = {.batch = 3, .workers = w, .slots = 2, .train = 1, .seed = 9};
        Loader *L = loader_init(src, &lc);
        loader_start(L, 1, 0);
        LoaderBatch *b;
        int k = 0;
        while ((b = loader_next(L))) {
            memcpy((w == 1 ? a : c) + (size_t)k * 3 * row, b->u8, (size_t)b->n * row);
            k++;
            loader_release(L, b);
        }
        loader_free(L);
    }
    check_true("loader.u8.w1_w3_identical", memcmp(a, c, row * 6) == 0, "1 and 3 workers differ");
    free(a);
    free(c);
}

/* -------------------------------------------------------------- bad files */

/* In a child: the epoch through loader_next, which ends the process at
 * the bad sample. */
static void drain(void *src, int fd)
{
    (void)fd;
    LoaderConfig lc = {.batch = 2, .workers = 2, .slots = 3, .train = 0};
    Loader *L = loader_init(src, &lc);
    loader_start(L, 0, 0);
    LoaderBatch *b;
    while ((b = loader_next(L))) loader_release(L, b);
}

/* Folder bad_<name>/c holding 3 good JPEGs and the bad file `file` (n
 * bytes; NULL: an empty file). */
static void make_bad(const char *name, const char *file, const void *bytes, size_t n)
{
    char rel[300], p[600];
    snprintf(rel, sizeof rel, "bad_%s", name);
    make_dir(rel);
    snprintf(rel, sizeof rel, "bad_%s/c", name);
    make_dir(rel);
    for (int i = 0; i < 3; i++) {
        char g[400];
        snprintf(g, sizeof g, "%s/good%d.jpg", rel, i);
        write_image(g, 40, 50, 3, 20 + (uint64_t)i, 'j', NULL);
    }
    snprintf(p, sizeof p, "%s/%s/%s", tmp, rel, file);
    file_write(p, bytes ? bytes : "", bytes ? n : 0);
}

/* The epoch of folder bad_<name> stops at `file` with status want and a
 * message naming it and `cause`; loader_next ends a child with the hint. */
static void expect_stop(const char *name, const char *file, int want, const char *cause,
                        const char *hint_part)
{
    char root[600], path[700], err[1024], tag[128];
    snprintf(root, sizeof root, "%s/bad_%s", tmp, name);
    snprintf(path, sizeof path, "%s/c/%s", root, file);
    ImageSource src;
    int st = src_imagefolder_open(&src, root, 32, NULL, err, sizeof err);
    snprintf(tag, sizeof tag, "bad.%s.listed", name);
    check_true(tag, st == 0 && src.n == 4, "status %d, %u images: %s", st, src.n, err);
    if (st) return;
    LoaderConfig lc = {.batch = 4, .workers = 2, .slots = 2, .train = 1, .seed = 3};
    Loader *L = loader_init(&src, &lc);
    loader_start(L, 0, 0);
    LoaderBatch *b = NULL;
    int rc = loader_try_next(L, &b, err, sizeof err);
    snprintf(tag, sizeof tag, "bad.%s.status", name);
    check_true(tag, rc == want && b == NULL, "status %d (want %d), batch %p", rc, want, (void *)b);
    snprintf(tag, sizeof tag, "bad.%s.names_file", name);
    check_msg(tag, err, path);
    snprintf(tag, sizeof tag, "bad.%s.cause", name);
    check_msg(tag, err, cause);
    char err2[1024] = "";
    int rc2 = loader_try_next(L, &b, err2, sizeof err2);
    snprintf(tag, sizeof tag, "bad.%s.stays_failed", name);
    check_true(tag, rc2 == want && b == NULL && !strcmp(err, err2), "a second call gave %d", rc2);
    loader_free(L);
    char out[2048];
    int code = child_run(drain, &src, out, sizeof out);
    snprintf(tag, sizeof tag, "bad.%s.fatal", name);
    check_true(tag, code == 1 && strstr(out, path) && strstr(out, "hint: ") &&
               strstr(out, hint_part), "exit %d: %s", code, out);
    src_free(&src);
}

static void test_bad_files(void)
{
    uint8_t *img = malloc(375 * 460 * 3);
    jfx_pattern(img, 375, 460, 3, 11);
    unsigned char *jpg;
    unsigned long jn;
    jfx_jpeg_encode(&jpg, &jn, img, 375, 460, 3, NULL);
    free(img);

    make_bad("empty", "zero.jpg", NULL, 0);
    expect_stop("empty", "zero.jpg", IMGF_ERR_EMPTY_FILE, "an empty file (0 bytes)",
                "the file is empty");
    const char *text = "this is a text file, not a photograph\n";
    make_bad("text", "notes.jpg", text, strlen(text));
    expect_stop("text", "notes.jpg", IMGF_ERR_FORMAT, "a text file, not JPEG or PNG",
                "convert it to JPEG or PNG");
    make_bad("truncated", "cut.jpg", jpg, jn * 3 / 5);
    expect_stop("truncated", "cut.jpg", IMGF_ERR_DECODE, "truncated JPEG",
                "replace it with a good copy");
    uint8_t *huge = jfx_jpeg_resize_header(jpg, jn, 60000, 60000);
    make_bad("huge", "huge.jpg", huge, jn);
    expect_stop("huge", "huge.jpg", IMGF_ERR_SIZE, "60000 x 60000 pixels", "downscale it");
    free(huge);
    uint8_t b[512];
    const char *what, *type;
    size_t n = jfx_bad_file(0, b, &what, &type);   /* the 104-byte PIC stb crashed on */
    make_bad("pic", "x.jpg", b, n);
    expect_stop("pic", "x.jpg", IMGF_ERR_FORMAT, "a Softimage PIC image, not JPEG or PNG",
                "convert it to JPEG or PNG");
    for (int k = 0; k < JFX_NBAD; k++) {
        n = jfx_bad_file(k, b, &what, &type);
        if (!strcmp(what, "WebP")) break;
    }
    make_bad("webp", "photo.webp", b, n);
    expect_stop("webp", "photo.webp", IMGF_ERR_FORMAT, "a WebP image, not JPEG or PNG",
                "convert it to JPEG or PNG");
    free(jpg);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/ctrain_fsrc_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    make_good();
    ImageSource src;
    char err[1024], root[600];
    snprintf(root, sizeof root, "%s/ok", tmp);
    int st = src_imagefolder_open(&src, root, S, NULL, err, sizeof err);
    check_true("source.open", st == 0 && src.n == 8 && src.classes == 3 && src.pixels == SRC_U8 &&
               src_row_bytes(&src) == (size_t)S * S * 3, "status %d, %u images: %s", st, src.n,
               err);
    if (!st) {
        test_rows(&src);
        test_encoded(&src);
        test_loader_workers(&src);
        src_free(&src);
    }
    test_bad_files();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
