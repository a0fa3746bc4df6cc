/* test_feed_image.c — the ImageFolder feed on the CPU path
 * (train/feed/feed_image.c, feed_decode.h) and the --decode choice.
 *
 * feed_decode_pick, every branch: cpu; an unknown word; gpu on data that is
 * not an ImageFolder; auto there (cpu, silently); gpu without nvJPEG
 * (nvjpeg_available's reason and NVJPEG_HINT; in a CPU-only build the
 * reason says the build has no CUDA); gpu on a CPU context; auto on a GPU
 * without nvJPEG (cpu and one warning line naming the reason), and on the
 * CPU (cpu, silently).
 *
 * The feed, on a CPU context, over a generated ImageFolder with train/ and
 * val/ (JPEGs of several sizes, a PNG, a gray JPEG), --decode cpu:
 *   - batch b of epoch e: the input rows are fmaf(u, a, b) of the u8 rows
 *     src_get_u8 gives for shuffle_perm(n, seed, e)[b B ..], bit for bit,
 *     the labels theirs; the first batch of the next epoch (the feed
 *     starts it while the last one is in use) is the next epoch's;
 *   - evaluation walks val/ in order with a partial last batch (twice), its rows
 *     the evaluation crops normalised;
 *   - Feed.stats: images = batches x B, decoder "cpu (libjpeg-turbo, W
 *     threads)", W parallel, busy time > 0, wait >= 0, no CPU fallback;
 *   - --decode gpu on this folder on the CPU context, and --decode gpu on
 *     --data synthetic, end the process (a child) with the message and a
 *     hint.
 *
 * Shape letters: B batch, S image side.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/image_source.h"
#include "data/shuffle.h"
#include "engine/ctx.h"
#include "engine/log.h"
#include "engine/tensor.h"
#include "train/feed/feed.h"
#include "train/feed/feed_decode.h"
#include "train/feed/nvjpeg_lib.h"
#include "jpeg_fixture.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop
#include "child_util.h"

enum { S = 32, B = 4, EB = 3 };

static char tmp[256];

static void check_msg(const char *name, const char *got, const char *want)
{
    check_true(name, got && strstr(got, want) != NULL, "\"%s\" lacks \"%s\"", got ? got : "(null)",
               want);
}

/* ------------------------------------------------------------ --decode */

static void test_pick(void)
{
    FeedDecode d;
    char note[800], err[800];
    const char *hint;
    char why[400] = "";
    int nvjpeg = nvjpeg_available(why, sizeof why);
    printf("  nvJPEG here: %s\n", nvjpeg ? "loaded" : why);

    int rc = feed_decode_pick(&d, "cpu", 1, 1, note, sizeof note, err, sizeof err, &hint);
    check_true("pick.cpu", rc == 0 && d == FEED_DECODE_CPU && !note[0], "rc %d", rc);
    rc = feed_decode_pick(&d, "fast", 1, 1, note, sizeof note, err, sizeof err, &hint);
    check_true("pick.unknown", rc == -1 && hint, "rc %d", rc);
    check_msg("pick.unknown.msg", err, "--decode: 'fast' is not auto, gpu or cpu");
    rc = feed_decode_pick(&d, "gpu", 0, 1, note, sizeof note, err, sizeof err, &hint);
    check_true("pick.gpu_not_folder", rc == -1 && hint && strstr(hint, "ImageFolder"), "rc %d", rc);
    check_msg("pick.gpu_not_folder.msg", err, "this --data is not an ImageFolder");
    rc = feed_decode_pick(&d, NULL, 0, 1, note, sizeof note, err, sizeof err, &hint);
    check_true("pick.auto_not_folder", rc == 0 && d == FEED_DECODE_CPU && !note[0], "rc %d", rc);
    rc = feed_decode_pick(&d, "auto", 1, 0, note, sizeof note, err, sizeof err, &hint);
    check_true("pick.auto_cpu_context", rc == 0 && d == FEED_DECODE_CPU && !note[0],
               "rc %d, note \"%s\"", rc, note);

    rc = feed_decode_pick(&d, "gpu", 1, 0, note, sizeof note, err, sizeof err, &hint);
    check_true("pick.gpu_refused", rc == -1, "rc %d", rc);
    if (!nvjpeg) {
        check_msg("pick.gpu_no_nvjpeg.reason", err, why);
        check_true("pick.gpu_no_nvjpeg.hint", hint && !strcmp(hint, NVJPEG_HINT), "hint %s",
                   hint ? hint : "(none)");
#ifndef CTRAIN_CUDA
        check_msg("pick.gpu_cpu_only_build", err, "--decode gpu: this build has no CUDA");
#endif
        rc = feed_decode_pick(&d, "auto", 1, 1, note, sizeof note, err, sizeof err, &hint);
        check_true("pick.auto_no_nvjpeg", rc == 0 && d == FEED_DECODE_CPU, "rc %d", rc);
        check_msg("pick.auto_no_nvjpeg.note", note, why);
    } else {
        check_msg("pick.gpu_cpu_context", err, "the GPU decoder needs a CUDA device");
        rc = feed_decode_pick(&d, "auto", 1, 1, note, sizeof note, err, sizeof err, &hint);
        check_true("pick.auto_gpu", rc == 0 && d == FEED_DECODE_GPU && !note[0], "rc %d", rc);
        rc = feed_decode_pick(&d, "gpu", 1, 1, note, sizeof note, err, sizeof err, &hint);
        check_true("pick.gpu", rc == 0 && d == FEED_DECODE_GPU, "rc %d: %s", rc, err);
    }
}

/* ------------------------------------------------------------ the feed */

static void make_dir(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    if (mkdir(p, 0755) && errno != EEXIST) { perror(p); exit(1); }
}

static void write_image(const char *rel, int H, int W, int C, uint64_t seed, int png,
                        const JfxOptions *o)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    uint8_t *img = malloc((size_t)H * W * C);
    jfx_pattern(img, H, W, C, seed);
    if (png) jfx_write_png(p, img, H, W, C);
    else jfx_write_jpeg(p, img, H, W, C, o);
    free(img);
}

static void make_folder(void)
{
    const char *split[2] = {"train", "val"}, *cls[2] = {"cat", "dog"};
    make_dir("data");
    JfxOptions gray = {.gray = 1};
    for (int s = 0; s < 2; s++) {
        char rel[128];
        snprintf(rel, sizeof rel, "data/%s", split[s]);
        make_dir(rel);
        for (int c = 0; c < 2; c++) {
            snprintf(rel, sizeof rel, "data/%s/%s", split[s], cls[c]);
            make_dir(rel);
            int n = s == 0 ? 6 : 4;   /* train 12 (3 batches of 4), val 8 (3 of 3: a partial) */
            for (int i = 0; i < n; i++) {
                char f[200];
                int png = i == 2;
                snprintf(f, sizeof f, "%s/%d.%s", rel, i, png ? "png" : "jpg");
                write_image(f, 40 + 17 * i, 90 - 9 * i, 3, (uint64_t)(100 * s + 10 * c + i), png,
                            i == 3 ? &gray : NULL);
            }
        }
    }
}

/* The input x [n, S, S, 3] (host tensor) against the normalised rows of
 * samples idx[0..n) of src (train / eval crops). */
static int rows_match(const float *x, const int32_t *y, const ImageSource *src,
                      const uint32_t *idx, int n, int train, uint64_t seed, uint64_t epoch)
{
    const size_t row = (size_t)S * S * 3;
    uint8_t *u = malloc(row);
    float a[3], b[3];
    jpeg_gpu_norm_coeffs(a, b, src->aug.mean, src->aug.std);
    char err[600];
    int ok = 1;
    for (int r = 0; r < n && ok; r++) {
        int32_t lab;
        ok = src_get_u8(src, idx[r], train, seed, epoch, u, &lab, NULL, 0, err, sizeof err) == 0 &&
             lab == y[r];
        for (size_t k = 0; ok && k < row; k++)
            ok = x[(size_t)r * row + k] == fmaf((float)u[k], a[k % 3], b[k % 3]);
        if (!ok) printf("  row %d (sample %u) differs%s\n", r, idx[r], lab == y[r] ? "" : " (label)");
    }
    free(u);
    return ok;
}

static FeedSpec spec_for(const char *data, const char *decode)
{
    FeedSpec s = {.data = data, .model = "resnet18", .batch = B, .eval_batch = EB,
                  .image_size = S, .workers = 2, .decode = decode, .seed = 21};
    return s;
}

static void test_feed(void)
{
    char root[512], tr[600], va[600], err[800];
    snprintf(root, sizeof root, "%s/data", tmp);
    snprintf(tr, sizeof tr, "%s/train", root);
    snprintf(va, sizeof va, "%s/val", root);
    ImageSource ts, vs;
    if (src_imagefolder_open(&ts, tr, S, NULL, err, sizeof err) ||
        src_imagefolder_open(&vs, va, S, NULL, err, sizeof err)) {
        check_true("feed.sources", 0, "%s", err);
        return;
    }
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    FeedSpec fs = spec_for(root, "cpu");
    Feed f;
    feed_open(&f, &c, &fs);
    check_true("feed.shape", f.n_in == 2 && f.batches_per_epoch == 3 && f.classes == 2 &&
               f.has_eval && f.stats && f.in[0]->dtype == DT_F32 && f.in[0]->shape[1] == S,
               "n_in %d, %ld batches, %d classes, eval %d", f.n_in, f.batches_per_epoch,
               f.classes, f.has_eval);
    check_msg("feed.desc", f.desc, "decode cpu");

    uint32_t perm[12];
    int ok = 1;
    for (uint64_t e = 0; e < 2; e++) {
        shuffle_perm(perm, ts.n, fs.seed, e);
        for (uint32_t b = 0; b < (e ? 1u : 3u); b++) {
            f.next(&f, &c, e, b);
            ok &= rows_match((const float *)f.in[0]->data, (const int32_t *)f.in[1]->data, &ts,
                             perm + b * B, B, 1, fs.seed, e);
        }
    }
    check_true("feed.train_rows", ok, "an input row is not the normalised crop (above)");
    /* a jump back (a resume): the same batch again */
    shuffle_perm(perm, ts.n, fs.seed, 0);
    f.next(&f, &c, 0, 2);
    check_true("feed.jump", rows_match((const float *)f.in[0]->data, (const int32_t *)f.in[1]->data,
                                       &ts, perm + 2 * B, B, 1, fs.seed, 0), "batch 2 after a jump");

    FeedStats st;
    f.stats(&f, &st);
    char want[64];
    snprintf(want, sizeof want, "cpu (libjpeg-turbo, %d threads)", fs.workers);
    check_true("feed.stats", st.images == 5 * B && st.decode_parallel == fs.workers &&
               st.decode_s > 0 && st.wait_s >= 0 && st.cpu_fallback == 0 &&
               !strcmp(st.decode, want), "images %llu, parallel %d, busy %g, wait %g, "
               "fallback %llu, decode \"%s\"", (unsigned long long)st.images, st.decode_parallel,
               st.decode_s, st.wait_s, (unsigned long long)st.cpu_fallback, st.decode);

    /* two passes: the evaluation batch is held only while one runs */
    for (int pass = 0; pass < 2; pass++) {
        f.eval_start(&f, &c);
        Tensor *in[FEED_MAX_IN];
        int n, seen = 0, eok = 1, last = 0;
        uint32_t idx[EB];
        while (f.eval_next(&f, &c, in, &n)) {
            for (int r = 0; r < n; r++) idx[r] = (uint32_t)(seen + r);
            eok &= rows_match((const float *)in[0]->data, (const int32_t *)in[1]->data, &vs, idx,
                              n, 0, 0, 0) && in[0]->shape[0] == n;
            seen += n;
            last = n;
            tensor_release(in[0]);
            tensor_release(in[1]);
        }
        check_true(pass ? "feed.eval_again" : "feed.eval", eok && seen == 8 && last == 2,
                   "%d rows, last batch %d", seen, last);
    }
    feed_close(&f, &c);
    ctx_free(&c);
    src_free(&ts);
    src_free(&vs);
}

/* In a child: open the feed of spec ctx (fatal when it refuses). */
static void open_feed(void *spec, int fd)
{
    (void)fd;
    log_set_level(LOG_ERROR);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    Feed f;
    feed_open(&f, &c, spec);
    feed_close(&f, &c);
}

static void test_refused(void)
{
    char root[512], out[2048];
    snprintf(root, sizeof root, "%s/data", tmp);
    FeedSpec fs = spec_for(root, "gpu");
    int code = child_run(open_feed, &fs, out, sizeof out);
    check_true("refuse.gpu_folder_on_cpu", code == 1 && strstr(out, "--decode gpu: ") &&
               strstr(out, "hint: "), "exit %d: %s", code, out);
#ifndef CTRAIN_CUDA
    check_msg("refuse.gpu_cpu_only_build", out, "this build has no CUDA");
#endif
    fs = spec_for("synthetic", "gpu");
    code = child_run(open_feed, &fs, out, sizeof out);
    check_true("refuse.gpu_synthetic", code == 1 && strstr(out, "not an ImageFolder") &&
               strstr(out, "--data synthetic") && strstr(out, "hint: "), "exit %d: %s", code, out);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/ctrain_feedimg_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    test_pick();
    make_folder();
    test_feed();
    test_refused();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
