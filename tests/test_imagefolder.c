/* test_imagefolder.c — the ImageFolder scanner and the crop functions
 * (data/imagefolder.h, data/augment.h). The source over the decoder, the
 * bad files and the permission case: test_folder_source.c.
 *
 * A temporary ImageFolder is written with stb_image_write: PNG and JPEG,
 * RGB, grey-scale and RGBA, several sizes, with distractors (hidden files
 * and folders, a .txt, a file at the root, a nested folder, an upper-case
 * extension) and a .webp file, which is listed (the decoder refuses it by
 * its bytes, naming it: nothing is left out silently). Checked: class
 * order and labels, per-class counts, file order as torchvision's
 * make_dataset gives it.
 *
 * Crops: RandomResizedCrop boxes in bounds over many draws, fallback boxes
 * of extreme aspect ratios computed by hand; the bilinear aug_train against
 * the ramp inside the drawn box; determinism in (seed, epoch, index); flip
 * mirrors exactly; p = 0.5. The evaluation window (aug_val_window) and its
 * axes (aug_val_axes) against torchvision's Resize + CenterCrop numbers.
 * Errors: missing root, root that is a file, no class folders, a class with
 * no images; the statuses of image errors (imagefolder_image_status) and
 * their hints. Splits: val's classes matched to train's by name: a val
 * lacking a class keeps train's labels, a val with a class train lacks is
 * refused by name.
 *
 * Shape letters: H W pixels, C channels, S output side.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb/stb_image_write.h>

#include "data/augment.h"
#include "data/image_decode.h"
#include "data/image_source.h"
#include "data/imagefolder.h"
#include "engine/log.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop

static char tmp[256];

static void check_msg(const char *name, const char *err, const char *want)
{
    if (!err) err = "(none)";
    check_true(name, strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
}

static void mkdir_p(const char *fmt, const char *a)
{
    char p[512];
    snprintf(p, sizeof p, fmt, tmp, a);
    if (mkdir(p, 0700) && errno != EEXIST) {
        fprintf(stderr, "test: mkdir %s: %s\n", p, strerror(errno));
        exit(1);
    }
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "test: cannot write %s\n", path);
        exit(1);
    }
}

/* An H x W x C image with pixel (y, x, c) = f(y, x, c). */
static uint8_t *make_img(int H, int W, int C, int kind)
{
    uint8_t *p = malloc((size_t)H * W * C);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < C; c++) {
                int v;
                if (kind == 0)  /* gradient: R = x, G = y, B = 255 - x */
                    v = c == 0 ? x : c == 1 ? y : 255 - x;
                else            /* smooth colours */
                    v = (x * 7 + y * 3 + c * 60 + kind * 11) & 255;
                p[((size_t)y * W + x) * C + c] = (uint8_t)v;
            }
    return p;
}

static void write_png(const char *rel, int H, int W, int C, int kind)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    uint8_t *img = make_img(H, W, C, kind);
    if (!stbi_write_png(p, W, H, C, img, W * C)) {
        fprintf(stderr, "test: stbi_write_png %s failed\n", p);
        exit(1);
    }
    free(img);
}

static void write_jpg(const char *rel, int H, int W, int C, int kind)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    uint8_t *img = make_img(H, W, C, kind);
    if (!stbi_write_jpg(p, W, H, C, img, 95)) {
        fprintf(stderr, "test: stbi_write_jpg %s failed\n", p);
        exit(1);
    }
    free(img);
}

static void path_of(char *buf, size_t n, const char *rel)
{
    snprintf(buf, n, "%s/%s", tmp, rel);
}

/* ------------------------------------------------------------ scan + decode */

static void test_scan(void)
{
    /* created out of order; sorted: bird, cat, dog */
    mkdir_p("%s/%s", "ds");
    mkdir_p("%s/ds/%s", "dog");
    mkdir_p("%s/ds/%s", "cat");
    mkdir_p("%s/ds/%s", "bird");
    mkdir_p("%s/ds/%s", ".git");
    mkdir_p("%s/ds/cat/%s", "sub");
    mkdir_p("%s/ds/cat/%s", ".cache");
    write_png("ds/cat/b.png", 30, 40, 3, 1);          /* RGB */
    write_png("ds/cat/A.PNG", 23, 17, 1, 2);          /* grey */
    write_jpg("ds/cat/c.jpeg", 48, 64, 3, 3);         /* JPEG */
    write_png("ds/cat/sub/a.png", 20, 20, 4, 4);      /* RGBA, nested */
    write_png("ds/cat/.hidden.png", 8, 8, 3, 1);
    write_png("ds/cat/.cache/x.png", 8, 8, 3, 1);
    write_png("ds/.git/y.png", 8, 8, 3, 1);
    write_png("ds/root_level.png", 8, 8, 3, 1);
    write_jpg("ds/dog/z.JPG", 10, 12, 3, 5);
    write_png("ds/dog/y.bmp.png", 12, 10, 3, 6);
    write_png("ds/bird/only.png", 16, 16, 3, 7);
    char p[512];
    path_of(p, sizeof p, "ds/dog/notes.txt");
    write_file(p, "not an image", 12);
    path_of(p, sizeof p, "ds/dog/photo.webp");
    write_file(p, "RIFF", 4);

    ImageFolder f;
    char err[1024];
    path_of(p, sizeof p, "ds/");
    int st = imagefolder_open(&f, p, err, sizeof err);
    check_true("scan.opens", st == IMGF_OK, "status %d: %s", st, err);
    if (st) return;
    check_true("scan.classes", f.nclasses == 3 && !strcmp(f.classes[0], "bird") &&
               !strcmp(f.classes[1], "cat") && !strcmp(f.classes[2], "dog"),
               "%d classes: %s %s %s", f.nclasses, f.nclasses > 0 ? f.classes[0] : "",
               f.nclasses > 1 ? f.classes[1] : "", f.nclasses > 2 ? f.classes[2] : "");
    check_true("scan.count", f.n == 8 && f.class_count[0] == 1 && f.class_count[1] == 4 &&
               f.class_count[2] == 3, "n %u counts %u %u %u", f.n, f.class_count[0],
               f.class_count[1], f.class_count[2]);
    const char *want[8] = {"bird/only.png", "cat/A.PNG", "cat/b.png", "cat/c.jpeg",
                           "cat/sub/a.png", "dog/photo.webp", "dog/y.bmp.png", "dog/z.JPG"};
    const int32_t wl[8] = {0, 1, 1, 1, 1, 2, 2, 2};
    int order_ok = f.n == 8;
    for (uint32_t i = 0; order_ok && i < 8; i++) {
        char full[512];
        snprintf(full, sizeof full, "%s/ds/%s", tmp, want[i]);
        if (strcmp(imagefolder_path(&f, i), full) || f.labels[i] != wl[i]) {
            order_ok = 0;
            printf("  [%u] %s label %d, want %s label %d\n", i, imagefolder_path(&f, i),
                   f.labels[i], full, wl[i]);
        }
    }
    check_true("scan.order_labels", order_ok, "file order or labels differ (above)");
    check_true("scan.lists_other_formats", imagefolder_is_image("a.webp") &&
               imagefolder_is_image("b.TIFF") && imagefolder_is_image("c.bmp") &&
               !imagefolder_is_image("d.txt") && !imagefolder_is_image("e.gif"),
               "the listed extensions changed");
    imagefolder_free(&f);
}

/* ------------------------------------------------------------- transforms */

/* ramp value of channel c at source coordinates (sy, sx) */
static double ramp(int c, double sy, double sx)
{
    return c == 0 ? sx : c == 1 ? sy : 255.0 - sx;
}

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

static void test_val(void)
{
    AugConfig cfg;
    aug_config_default(&cfg, 56);
    cfg.resize = 64;
    check_true("config.default", cfg.hflip == 0.5f && cfg.scale[0] == 0.08f &&
               fabsf(cfg.mean[1] - 0.456f) < 1e-7f && fabsf(cfg.std[2] - 0.225f) < 1e-7f,
               "defaults");
    AugConfig d224;
    aug_config_default(&d224, 224);
    check_true("config.resize224", d224.resize == 256, "resize %d", d224.resize);
    /* 160 x 256: shorter side -> 64, longer -> int(64 * 256 / 160) = 102;
     * top = round((64 - 56) / 2) = 4, left = round((102 - 56) / 2) = 23 */
    AugValWindow v = aug_val_window(160, 256, &cfg);
    check_true("val.window", v.nh == 64 && v.nw == 102 && v.top == 4 && v.left == 23,
               "%d x %d at %d, %d", v.nh, v.nw, v.top, v.left);
    v = aug_val_window(300, 200, &cfg);   /* tall: 96 x 64, top round(20) */
    check_true("val.window_tall", v.nh == 96 && v.nw == 64 && v.top == 20 && v.left == 4,
               "%d x %d at %d, %d", v.nh, v.nw, v.top, v.left);
    v = aug_val_window(160, 257, &cfg);   /* longer int(102.8) = 102; (102-56)/2 = 23 */
    AugValWindow w = aug_val_window(161, 256, &cfg);   /* (101 - 56) / 2 = 22.5: to even, 22 */
    check_true("val.window_rounding", v.nw == 102 && w.nw == 101 && w.left == 22,
               "nw %d, nw %d left %d", v.nw, w.nw, w.left);
    RsAxis ay, ax;
    aug_val_axes(&ay, &ax, 160, 256, &cfg);
    check_true("val.axes", ay.step == 160.0f / 64 && ay.start == 4 * (160.0f / 64) &&
               ay.lo == 0 && ay.hi == 160 && ax.step == 256.0f / 102 &&
               ax.start == 23 * (256.0f / 102) && ax.lo == 0 && ax.hi == 256,
               "rows %g %g [%d, %d) columns %g %g [%d, %d)", (double)ay.start,
               (double)ay.step, ay.lo, ay.hi, (double)ax.start, (double)ax.step, ax.lo, ax.hi);
}

static void test_rrc(void)
{
    /* boxes in bounds over many draws, both ratio sides and the scale range seen */
    AugConfig cfg;
    aug_config_default(&cfg, 32);
    const int dims[4][2] = {{375, 500}, {500, 375}, {224, 224}, {40, 33}};
    int bounds_ok = 1, wide = 0, tall = 0, small = 0, large = 0;
    for (int d = 0; d < 4; d++)
        for (uint32_t i = 0; i < 2000; i++) {
            const int H = dims[d][0], W = dims[d][1];
            AugBox b = aug_rrc_box(H, W, &cfg, 7, 3, i);
            if (!(b.h > 0 && b.w > 0 && b.top >= 0 && b.left >= 0 && b.top + b.h <= H &&
                  b.left + b.w <= W)) {
                if (bounds_ok)
                    printf("  box top %d left %d h %d w %d in %d x %d\n", b.top, b.left, b.h,
                           b.w, H, W);
                bounds_ok = 0;
            }
            double frac = (double)b.h * b.w / ((double)H * W), r = (double)b.w / b.h;
            wide += r > 1.25;
            tall += r < 0.8;
            small += frac < 0.12;
            large += frac > 0.9;
        }
    check_true("rrc.bounds", bounds_ok, "a box left the image (above)");
    check_true("rrc.spread", wide > 100 && tall > 100 && small > 100 && large > 50,
               "ratio > 1.25: %d, < 0.8: %d, area < 12%%: %d, > 90%%: %d of 8000", wide, tall,
               small, large);

    /* fallback: no crop with ratio in [3/4, 4/3] reaches 8% of a 10 x 1000 image */
    AugBox b = aug_rrc_box(10, 1000, &cfg, 1, 2, 3);
    check_true("rrc.fallback.wide", b.h == 10 && b.w == 13 && b.top == 0 && b.left == 493,
               "top %d left %d h %d w %d, want 0 493 10 13", b.top, b.left, b.h, b.w);
    b = aug_rrc_box(1000, 10, &cfg, 1, 2, 3);
    check_true("rrc.fallback.tall", b.h == 13 && b.w == 10 && b.top == 493 && b.left == 0,
               "top %d left %d h %d w %d, want 493 0 13 10", b.top, b.left, b.h, b.w);

    /* output = the ramp sampled inside the drawn box */
    const int H = 160, W = 256, S = 32;
    uint8_t *img = make_img(H, W, 3, 0);
    size_t n = (size_t)S * S * 3;
    float *o0 = malloc(n * 4), *o1 = malloc(n * 4), *ref = malloc(n * 4);
    cfg.hflip = 0.0f;
    int exact = 1;
    for (uint32_t idx = 0; idx < 20; idx++) {
        AugBox bx = aug_rrc_box(H, W, &cfg, 11, 5, idx);
        aug_train(o0, img, H, W, 3, &cfg, 11, 5, idx);
        for (int oy = 0; oy < S; oy++)
            for (int ox = 0; ox < S; ox++) {
                double sy = clampd(bx.top + (oy + 0.5) * bx.h / S - 0.5, bx.top,
                                   bx.top + bx.h - 1);
                double sx = clampd(bx.left + (ox + 0.5) * bx.w / S - 0.5, bx.left,
                                   bx.left + bx.w - 1);
                for (int c = 0; c < 3; c++)
                    ref[(oy * S + ox) * 3 + c] =
                        (float)((ramp(c, sy, sx) / 255.0 - cfg.mean[c]) / cfg.std[c]);
            }
        for (size_t k = 0; k < n; k++)
            if (fabsf(o0[k] - ref[k]) > 1e-4f) {
                if (exact)
                    printf("  index %u element %zu: got %g want %g (box %d %d %d %d)\n", idx, k,
                           o0[k], ref[k], bx.top, bx.left, bx.h, bx.w);
                exact = 0;
                break;
            }
    }
    check_true("rrc.output_is_box", exact, "RandomResizedCrop output differs (above)");

    /* determinism: a pure function of (seed, epoch, index) */
    cfg.hflip = 0.5f;
    aug_train(o0, img, H, W, 3, &cfg, 11, 5, 9);
    aug_train(o1, img, H, W, 3, &cfg, 11, 5, 9);
    check_true("rrc.deterministic", memcmp(o0, o1, n * 4) == 0, "same key, different output");
    aug_train(o1, img, H, W, 3, &cfg, 11, 5, 10);
    check_true("rrc.index_differs", memcmp(o0, o1, n * 4) != 0, "index 9 == index 10");
    aug_train(o1, img, H, W, 3, &cfg, 11, 6, 9);
    check_true("rrc.epoch_differs", memcmp(o0, o1, n * 4) != 0, "epoch 5 == epoch 6");
    aug_train(o1, img, H, W, 3, &cfg, 12, 5, 9);
    check_true("rrc.seed_differs", memcmp(o0, o1, n * 4) != 0, "seed 11 == seed 12");

    /* flip: same box, mirrored columns */
    cfg.hflip = 0.0f;
    aug_train(o0, img, H, W, 3, &cfg, 11, 5, 9);
    cfg.hflip = 1.0f;
    aug_train(o1, img, H, W, 3, &cfg, 11, 5, 9);
    int mirror = 1;
    for (int oy = 0; oy < S; oy++)
        for (int ox = 0; ox < S; ox++)
            for (int c = 0; c < 3; c++)
                mirror &= o1[(oy * S + ox) * 3 + c] == o0[(oy * S + S - 1 - ox) * 3 + c];
    check_true("hflip.mirrors", mirror, "flipped output is not the mirror image");
    cfg.hflip = 0.5f;
    int flips = 0;
    for (uint32_t i = 0; i < 4000; i++) flips += aug_flip(&cfg, 3, 1, i);
    check_true("hflip.p_half", flips > 2000 - 160 && flips < 2000 + 160,
               "%d flips of 4000 (sd 32)", flips);
    free(o0);
    free(o1);
    free(ref);
    free(img);
}

/* ----------------------------------------------------------------- errors */

static void test_errors(void)
{
    ImageFolder f;
    char err[1024], p[512];
    int st = imagefolder_open(&f, "/nonexistent/imagenet/train", err, sizeof err);
    check_true("err.missing.status", st == IMGF_ERR_OPEN && f.n == 0, "status %d", st);
    check_msg("err.missing.msg", err, "cannot open ImageFolder root /nonexistent/imagenet/"
              "train: No such file or directory");
    check_msg("err.missing.hint", imagefolder_hint(st), "pass --data synthetic to measure "
              "throughput without a dataset");
    imagefolder_free(&f);

    write_png("g.png", 4, 4, 3, 1);
    path_of(p, sizeof p, "g.png");
    st = imagefolder_open(&f, p, err, sizeof err);
    check_msg("err.file_root.msg", err, "g.png: Not a directory");

    mkdir_p("%s/%s", "noclass");
    path_of(p, sizeof p, "noclass/stray.png");
    write_png("noclass/stray.png", 4, 4, 3, 1);
    path_of(p, sizeof p, "noclass");
    st = imagefolder_open(&f, p, err, sizeof err);
    check_true("err.noclass.status", st == IMGF_ERR_EMPTY, "status %d", st);
    check_msg("err.noclass.msg", err, "noclass has no class folders");
    check_msg("err.noclass.hint", imagefolder_hint(st), "ROOT/CLASS/IMAGE.jpg");

    mkdir_p("%s/%s", "emptycls");
    mkdir_p("%s/emptycls/%s", "a");
    mkdir_p("%s/emptycls/%s", "b");
    write_png("emptycls/a/x.png", 4, 4, 3, 1);
    path_of(p, sizeof p, "emptycls/b/readme.txt");
    write_file(p, "x", 1);
    path_of(p, sizeof p, "emptycls");
    st = imagefolder_open(&f, p, err, sizeof err);
    check_true("err.emptyclass.status", st == IMGF_ERR_EMPTY && f.classes == NULL,
               "status %d", st);
    check_msg("err.emptyclass.msg", err, "emptycls/b has no images (extensions .jpg");

    /* image errors: one status each, the permission hint kept, image_decode's hints */
    const int img_st[7] = {IMG_ERR_OPEN, IMG_ERR_ACCESS, IMG_ERR_EMPTY, IMG_ERR_FORMAT,
                           IMG_ERR_SIZE, IMG_ERR_DAMAGED, IMG_ERR_NOMEM};
    const int imgf_st[7] = {IMGF_ERR_FILE, IMGF_ERR_PERM, IMGF_ERR_EMPTY_FILE, IMGF_ERR_FORMAT,
                            IMGF_ERR_SIZE, IMGF_ERR_DECODE, IMGF_ERR_NOMEM};
    int map_ok = imagefolder_image_status(IMG_OK) == IMGF_OK, hints_ok = 1;
    for (int i = 0; i < 7; i++) {
        map_ok &= imagefolder_image_status(img_st[i]) == imgf_st[i];
        const char *h = imagefolder_hint(imgf_st[i]);
        hints_ok &= h != NULL && (i == 1 || i == 6 || !strcmp(h, img_hint(img_st[i])));
    }
    check_true("err.image_status", map_ok, "imagefolder_image_status maps differently");
    check_true("err.image_hints", hints_ok, "an image status's hint is not image_decode's");
}

static void test_permission(void)
{
    check_true("perm.hint", strstr(imagefolder_hint(IMGF_ERR_PERM), "permission denied: check "
               "the file's permissions") && !strstr(imagefolder_hint(IMGF_ERR_PERM), "damaged"),
               "hint: %s", imagefolder_hint(IMGF_ERR_PERM));
}

/* Make ROOT/SPLIT/CLASS/i.png for each class of the comma list. */
static void make_split(const char *root, const char *split, const char *classes, int per)
{
    char rel[256], list[600];
    snprintf(rel, sizeof rel, "%s", root);
    mkdir_p("%s/%s", rel);
    snprintf(rel, sizeof rel, "%s/%s", root, split);
    mkdir_p("%s/%s", rel);
    snprintf(list, sizeof list, "%s", classes);
    for (char *c = strtok(list, ","); c; c = strtok(NULL, ",")) {
        snprintf(rel, sizeof rel, "%s/%s/%s", root, split, c);
        mkdir_p("%s/%s", rel);
        for (int i = 0; i < per; i++) {
            char f[300];
            snprintf(f, sizeof f, "%s/%d.png", rel, i);
            write_png(f, 6, 6, 3, i);
        }
    }
}

static void test_splits(void)
{
    char err[1024], p[512];
    make_split("sp", "train", "ant,bee,cat,dog,eel", 2);
    make_split("sp", "val", "bee,dog", 1);      /* lacks ant, cat, eel */
    make_split("sp", "val_extra", "bee,cat,zebra", 1);
    make_split("sp", "val_renamed", "a1,b2,c3,d4,e5", 1);  /* same count, other names */
    ImageSource tr, va;
    path_of(p, sizeof p, "sp/train");
    int st = src_imagefolder_open(&tr, p, 4, NULL, err, sizeof err);
    check_true("split.train", st == 0 && tr.classes == 5, "%s", err);
    if (st) return;
    path_of(p, sizeof p, "sp/val");
    st = src_imagefolder_open(&va, p, 4, NULL, err, sizeof err);
    check_true("split.val_opens", st == 0 && va.classes == 2, "%s", err);
    if (st) { src_free(&tr); return; }
    st = src_imagefolder_match(&va, &tr, err, sizeof err);
    check_true("split.subset_ok", st == IMGF_OK && va.classes == 5, "status %d: %s", st, err);
    /* bee is train's 1, dog train's 3, whatever their positions in val/ */
    const ImageFolder *vf = src_imagefolder(&va);
    uint8_t out[4 * 4 * 3];
    int labels_ok = vf->n == 2 && vf->nclasses == 5 && vf->class_count[1] == 1 &&
                    vf->class_count[3] == 1 && vf->class_count[0] == 0;
    for (uint32_t i = 0; labels_ok && i < vf->n; i++) {
        int32_t y = -1;
        src_get_u8(&va, i, 0, 1, 0, out, &y, NULL, 0, err, sizeof err);
        int want = strstr(imagefolder_path(vf, i), "/bee/") ? 1 : 3;
        labels_ok = y == want && !strcmp(vf->classes[y], strstr(imagefolder_path(vf, i), "/bee/")
                                                                ? "bee" : "dog");
    }
    check_true("split.labels_by_name", labels_ok, "val labels are not train's indices by name");
    src_free(&va);

    path_of(p, sizeof p, "sp/val_extra");
    st = src_imagefolder_open(&va, p, 4, NULL, err, sizeof err);
    if (!st) {
        st = src_imagefolder_match(&va, &tr, err, sizeof err);
        check_true("split.extra_refused", st == IMGF_ERR_CLASSES && va.classes == 3, "status %d",
                   st);
        check_msg("split.extra_names_it", err, "has the class folder \"zebra\", which ");
        check_msg("split.extra_lists_train", err, "(its 5 classes: ant, bee, cat, dog, eel)");
        src_free(&va);
    }
    path_of(p, sizeof p, "sp/val_renamed");
    st = src_imagefolder_open(&va, p, 4, NULL, err, sizeof err);
    if (!st) {
        st = src_imagefolder_match(&va, &tr, err, sizeof err);
        check_true("split.renamed_refused", st == IMGF_ERR_CLASSES, "status %d", st);
        check_msg("split.renamed_names_it", err, "\"a1\"");
        src_free(&va);
    }
    check_msg("split.hint", imagefolder_hint(IMGF_ERR_CLASSES), "val/");
    src_free(&tr);

    /* a long class list is shortened */
    char many[600] = "";
    for (int i = 0; i < 40; i++) {
        size_t l = strlen(many);
        snprintf(many + l, sizeof many - l, "%sclass_%02d", i ? "," : "", i);
    }
    make_split("big", "train", many, 1);
    make_split("big", "val", "class_03,zz", 1);
    ImageFolder bt, bv;
    path_of(p, sizeof p, "big/train");
    st = imagefolder_open(&bt, p, err, sizeof err);
    path_of(p, sizeof p, "big/val");
    st = st ? st : imagefolder_open(&bv, p, err, sizeof err);
    if (!st) {
        st = imagefolder_match_classes(&bv, &bt, err, sizeof err);
        check_true("split.long_list", st == IMGF_ERR_CLASSES && strstr(err, "\"zz\"") &&
                   strstr(err, "class_00, class_01") && strstr(err, "and 32 more") &&
                   !strstr(err, "class_39"), "status %d: %s", st, err);
        imagefolder_free(&bv);
        imagefolder_free(&bt);
    }
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/ctrain_imgf_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    test_scan();
    test_val();
    test_rrc();
    test_errors();
    test_permission();
    LogLevel level = log_get_level();
    log_set_level(LOG_WARN);  /* the subset's LOG_I line is expected */
    test_splits();
    log_set_level(level);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    struct stat sb;
    check_true("cleanup", stat(tmp, &sb) != 0, "%s still exists", tmp);
    return check_summary();
}
