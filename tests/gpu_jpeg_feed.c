/* gpu_jpeg_feed.c — the ImageFolder feed both ways on one CUDA context:
 * --decode gpu (train/feed/feed_jpeg.h: nvJPEG in a decode thread,
 * staging, device-to-device into the static input) against --decode cpu
 * (libjpeg-turbo in the loader, u8 rows normalised on the device).
 *
 * A generated ImageFolder (tests/jpeg_fixture.h), train/ and val/, two
 * classes: baseline 4:2:0, 4:4:4 and gray JPEGs, a progressive one, an
 * Adobe CMYK one, a PNG; at most 120 x 100 pixels, so no crop of S = 64 is
 * decoded with DCT scaling on the CPU (both decoders read every pixel at
 * full size and only their pixels differ). Both feeds get the same seed,
 * so every sample has the same crop and flip. Checked:
 *   - every training batch of epoch 0, the first of epoch 1 (started by the
 *     decode thread at the epoch's end) and a jump back to batch 1 of
 *     epoch 0 (a restart): labels equal; each input value is a normalised
 *     u8 (fmaf(u, a, b)); rows the CPU decodes on both paths (PNG, CMYK,
 *     gray, 4:4:4, and progressive on the hardware engines) are bit-equal;
 *     the other rows within the decoders' tolerance (jpeg_gpu.h: max 4
 *     levels, mean 0.25 when nvJPEG interpolates chroma; else max 40, mean
 *     1.5);
 *   - the input tensor keeps its address (a --graph replay reads it);
 *   - Feed.stats: "gpu (nvJPEG ..." and the PNG, CMYK, gray and 4:4:4
 *     images counted as CPU decodes (exactly the CPU kinds, progressive
 *     included, on the hardware backend; at least those four elsewhere);
 *   - evaluation: the same rows, batch sizes and labels both ways (its batch
 *     larger than the training one: the GPU path decodes it in pieces).
 * All of it with one decode thread and again with two
 * (CTRAIN_JPEG_DECODERS=2: batches decoded out of order into three staging
 * buffers, the epoch's end seen by both threads, the restart parking both).
 * Without nvJPEG: --decode auto gives the CPU path with a warning, and
 * --decode gpu is refused (a child) naming the reason.
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

#include "data/shuffle.h"
#include "engine/ctx.h"
#include "engine/log.h"
#include "engine/tensor.h"
#include "train/feed/feed.h"
#include "train/feed/jpeg_gpu.h"
#include "train/feed/nvjpeg_lib.h"
#include "check.h"
#include "child_util.h"
#include "gpu_util.h"
#include "jpeg_fixture.h"

enum { S = 64, BT = 8, BE = 12, PER_CLASS = 8 };   /* BE > BT: evaluation in pieces */

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};
static float A[3], B[3];
static char tmp[256];

/* Which file of a class (i = 0..7) is what: kinds the CPU decodes on both paths. */
enum { K_BASE, K_444, K_GRAY, K_PROG, K_CMYK, K_PNG };
static const int kind_of[PER_CLASS] = {K_BASE, K_444, K_PNG, K_GRAY, K_CMYK, K_BASE, K_PROG, K_BASE};
/* Kinds the GPU feed leaves to the loader threads on every backend: PNG,
 * CMYK, and the JPEGs that are not 4:2:0 colour (gray, 4:4:4: nvJPEG is
 * called with one chroma layout, train/feed/nvjpeg_batch.h) */
static int cpu_kind(int k) { return k == K_PNG || k == K_CMYK || k == K_GRAY || k == K_444; }

static void make_dir(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    if (mkdir(p, 0755) && errno != EEXIST) { perror(p); exit(1); }
}

static void make_folder(void)
{
    const char *split[2] = {"train", "val"};
    make_dir("d");
    uint8_t *img = malloc(120 * 120 * 3);
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 2; c++) {
            char rel[128];
            snprintf(rel, sizeof rel, "d/%s", split[s]);
            make_dir(rel);
            snprintf(rel, sizeof rel, "d/%s/%c", split[s], 'a' + c);
            make_dir(rel);
            for (int i = 0; i < PER_CLASS; i++) {
                int H = 100 - 5 * i, W = 120 - 3 * i, k = kind_of[i];
                jfx_pattern(img, H, W, 3, (uint64_t)(100 * s + 10 * c + i));
                char p[600];
                snprintf(p, sizeof p, "%s/%s/%d.%s", tmp, rel, i, k == K_PNG ? "png" : "jpg");
                JfxOptions o = {.quality = 90, .subsample = k == K_444 ? JFX_444 : JFX_420,
                                .gray = k == K_GRAY, .progressive = k == K_PROG,
                                .cmyk = k == K_CMYK};
                if (k == K_PNG) jfx_write_png(p, img, H, W, 3);
                else jfx_write_jpeg(p, img, H, W, 3, &o);
            }
        }
    free(img);
}

/* The u8 value u with fmaf(u, A[c], B[c]) == x (the normalisation both paths
 * apply), or -1 when x is none. */
static int unnorm(float x, int c)
{
    long u = lrintf((x - B[c]) / A[c]);
    if (u < 0 || u > 255) return -1;
    return fmaf((float)u, A[c], B[c]) == x ? (int)u : -1;
}

typedef struct {
    int not_u8, cpu_rows_differ, labels;
    double sum, n;
    int max;
} Cmp;

/* Compare n rows of the two paths' downloaded inputs; cpu_row[r]: row r is
 * CPU-decoded on both. */
static void compare(Cmp *m, const float *g, const float *cpu, const int32_t *yg,
                    const int32_t *yc, const int *cpu_row, int n)
{
    const size_t row = (size_t)S * S * 3;
    for (int r = 0; r < n; r++) {
        m->labels += yg[r] != yc[r];
        for (size_t e = 0; e < row; e++) {
            size_t o = (size_t)r * row + e;
            int ug = unnorm(g[o], (int)(e % 3)), uc = unnorm(cpu[o], (int)(e % 3));
            if (ug < 0 || uc < 0) {
                m->not_u8++;
                continue;
            }
            int d = abs(ug - uc);
            if (cpu_row[r]) {
                m->cpu_rows_differ += d != 0;
                continue;
            }
            m->sum += d;
            m->n += 1;
            if (d > m->max) m->max = d;
        }
    }
}

/* The kind of sample index i of a split (sorted: class a 0..7, class b 0..7). */
static int kind_of_index(uint32_t i) { return kind_of[i % PER_CLASS]; }

static FeedSpec spec_for(const char *root, const char *decode)
{
    FeedSpec s = {.data = root, .model = "resnet18", .batch = BT, .eval_batch = BE,
                  .image_size = S, .workers = 3, .decode = decode, .seed = 31};
    return s;
}

static void test_both_ways(Ctx *c, int interpolated)
{
    char root[512];
    snprintf(root, sizeof root, "%s/d", tmp);
    FeedSpec sc = spec_for(root, "cpu"), sg = spec_for(root, "gpu");
    Feed fc, fg;
    feed_open(&fc, c, &sc);
    feed_open(&fg, c, &sg);
    FeedStats st;
    fg.stats(&fg, &st);
    printf("  gpu feed: %s; cpu feed: ", st.decode);
    FeedStats stc;
    fc.stats(&fc, &stc);
    printf("%s\n", stc.decode);
    check_true("feed.gpu_decoder", !strncmp(st.decode, "gpu (nvJPEG ", 12), "%s", st.decode);
    const int hardware = strstr(st.decode, "hardware") != NULL;

    const size_t row = (size_t)S * S * 3;
    float *xg = malloc(row * BT * sizeof(float)), *xc = malloc(row * BT * sizeof(float));
    int32_t yg[BE], yc[BE];   /* BE > BT: room for an evaluation batch's labels too */
    Cmp m = {0};
    void *addr = fg.in[0]->data;
    int static_addr = 1;
    int per_epoch = (int)fg.batches_per_epoch, expect_cpu = 0;
    check_true("feed.batches", per_epoch == 2 && fc.batches_per_epoch == 2, "%d", per_epoch);
    /* epoch 0 in order, epoch 1 batch 0 (the decode thread's own start), then a jump */
    const uint64_t order_e[4] = {0, 0, 1, 0};
    const uint32_t order_b[4] = {0, 1, 0, 1};
    uint32_t perm[2 * PER_CLASS];
    for (int t = 0; t < 4; t++) {
        fc.next(&fc, c, order_e[t], order_b[t]);
        fg.next(&fg, c, order_e[t], order_b[t]);
        static_addr &= fg.in[0]->data == addr;
        tensor_to_f32(xg, fg.in[0]);
        tensor_to_f32(xc, fc.in[0]);
        tensor_to_host(yg, fg.in[1]);
        tensor_to_host(yc, fc.in[1]);
        shuffle_perm(perm, 2 * PER_CLASS, sg.seed, order_e[t]);
        int cpu_row[BT];
        for (int r = 0; r < BT; r++) {
            int k = kind_of_index(perm[order_b[t] * BT + (uint32_t)r]);
            cpu_row[r] = cpu_kind(k) || (hardware && k == K_PROG);
            expect_cpu += cpu_kind(k);
        }
        compare(&m, xg, xc, yg, yc, cpu_row, BT);
    }
    double mean = m.n > 0 ? m.sum / m.n : 0;
    printf("  training rows, GPU vs CPU decode: max |diff| %d levels, mean %.3f (%s chroma)\n",
           m.max, mean, interpolated ? "interpolated" : "nvJPEG's default");
    check_true("train.labels_equal", m.labels == 0, "%d labels differ", m.labels);
    check_true("train.values_are_normalised_u8", m.not_u8 == 0, "%d values are not fmaf(u, a, b)",
               m.not_u8);
    check_true("train.cpu_rows_bit_equal", m.cpu_rows_differ == 0, "%d values of CPU-decoded "
               "rows differ (a row landed in the wrong place?)", m.cpu_rows_differ);
    if (interpolated)
        check_true("train.gpu_rows_within_tolerance", m.max <= 4 && mean <= 0.25,
                   "max %d, mean %.3f (want <= 4, <= 0.25)", m.max, mean);
    else
        check_true("train.gpu_rows_within_tolerance", m.max <= 40 && mean <= 1.5,
                   "max %d, mean %.3f (want <= 40, <= 1.5)", m.max, mean);
    check_true("train.static_input", static_addr, "the input tensor moved");

    fg.stats(&fg, &st);
    int prog = 0;
    for (int t = 0; t < 4; t++) {
        shuffle_perm(perm, 2 * PER_CLASS, sg.seed, order_e[t]);
        for (int r = 0; r < BT; r++) prog += kind_of_index(perm[order_b[t] * BT + (uint32_t)r]) == K_PROG;
    }
    printf("  gpu feed: %llu images, %llu decoded on the CPU (PNG, CMYK, gray, 4:4:4 %d; progressive %d), "
           "waited %.3f s, decode busy %.3f s\n", (unsigned long long)st.images,
           (unsigned long long)st.cpu_fallback, expect_cpu, prog, st.wait_s, st.decode_s);
    check_true("stats.images", st.images == 4 * BT, "%llu", (unsigned long long)st.images);
    if (hardware)
        check_true("stats.cmyk_png_progressive_fall_back", st.cpu_fallback == (uint64_t)(expect_cpu + prog),
                   "%llu CPU decodes, want %d", (unsigned long long)st.cpu_fallback, expect_cpu + prog);
    else
        check_true("stats.cmyk_png_fall_back", st.cpu_fallback >= (uint64_t)expect_cpu &&
                   st.cpu_fallback <= (uint64_t)(expect_cpu + prog), "%llu CPU decodes, want %d..%d",
                   (unsigned long long)st.cpu_fallback, expect_cpu, expect_cpu + prog);
    check_true("stats.times", st.decode_s > 0 && st.wait_s >= 0 && st.decode_parallel == 1,
               "busy %g wait %g parallel %d", st.decode_s, st.wait_s, st.decode_parallel);

    /* evaluation, both ways */
    fc.eval_start(&fc, c);
    fg.eval_start(&fg, c);
    Tensor *ic[FEED_MAX_IN], *ig[FEED_MAX_IN];
    int nc, ng, seen = 0, same_n = 1;
    Cmp ev = {0};
    float *eg = malloc(row * BE * sizeof(float)), *ec = malloc(row * BE * sizeof(float));
    while (fc.eval_next(&fc, c, ic, &nc)) {
        int more = fg.eval_next(&fg, c, ig, &ng);
        same_n &= more && ng == nc;
        if (!more) break;
        tensor_to_f32(eg, ig[0]);
        tensor_to_f32(ec, ic[0]);
        tensor_to_host(yg, ig[1]);
        tensor_to_host(yc, ic[1]);
        int cpu_row[BE];
        for (int r = 0; r < nc; r++) {
            int k = kind_of_index((uint32_t)(seen + r));
            cpu_row[r] = cpu_kind(k) || (hardware && k == K_PROG);
        }
        compare(&ev, eg, ec, yg, yc, cpu_row, nc);
        seen += nc;
        for (int i = 0; i < 2; i++) {
            tensor_release(ic[i]);
            tensor_release(ig[i]);
        }
    }
    same_n &= !fg.eval_next(&fg, c, ig, &ng);
    double emean = ev.n > 0 ? ev.sum / ev.n : 0;
    printf("  evaluation rows: max |diff| %d, mean %.3f over %d images\n", ev.max, emean, seen);
    check_true("eval.same_batches", same_n && seen == 2 * PER_CLASS, "%d rows", seen);
    check_true("eval.labels_equal", ev.labels == 0 && ev.not_u8 == 0 && ev.cpu_rows_differ == 0,
               "labels %d, not u8 %d, CPU rows %d", ev.labels, ev.not_u8, ev.cpu_rows_differ);
    check_true("eval.gpu_rows_within_tolerance",
               interpolated ? ev.max <= 4 && emean <= 0.25 : ev.max <= 40 && emean <= 1.5,
               "max %d, mean %.3f", ev.max, emean);
    free(eg);
    free(ec);
    free(xg);
    free(xc);
    feed_close(&fg, c);
    feed_close(&fc, c);
}

/* In a child: the feed of spec (fatal when it refuses). */
static void open_feed(void *spec, int fd)
{
    (void)fd;
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    Feed f;
    feed_open(&f, &c, spec);
    FeedStats st;
    f.stats(&f, &st);
    fprintf(stderr, "decode=%s\n", st.decode);
    feed_close(&f, &c);
    ctx_free(&c);
}

static void test_without_nvjpeg(const char *why)
{
    char root[512], out[4096];
    snprintf(root, sizeof root, "%s/d", tmp);
    FeedSpec sa = spec_for(root, "auto"), sg = spec_for(root, "gpu");
    int code = child_run(open_feed, &sa, out, sizeof out);
    check_true("no_nvjpeg.auto_is_cpu", code == 0 && strstr(out, "decode=cpu (libjpeg-turbo") &&
               strstr(out, why), "exit %d: %s", code, out);
    code = child_run(open_feed, &sg, out, sizeof out);
    check_true("no_nvjpeg.gpu_refused", code == 1 && strstr(out, "--decode gpu: ") &&
               strstr(out, why) && strstr(out, "hint: "), "exit %d: %s", code, out);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    gpu_require();
    jpeg_gpu_norm_coeffs(A, B, MEAN, STD);
    snprintf(tmp, sizeof tmp, "%s/ctrain_gfeed_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    make_folder();
    char why[512];
    if (!nvjpeg_available(why, sizeof why)) {
        printf("  skipped: the GPU path (nvJPEG missing: %s); checked the CPU fallback\n", why);
        test_without_nvjpeg(why);
    } else {
        Ctx c;
        ctx_init(&c, DEV_CUDA, 0, 42);
        char err[600];
        JpegGpu *g = jpeg_gpu_open(&c, 8, S, 0, JPEG_GPU_AUTO, err, sizeof err);
        JpegGpuStats gs;
        jpeg_gpu_stats(g, &gs);
        check_true("nvjpeg.opens", g != NULL, "%s", err);
        int interpolated = g && gs.chroma_interpolated;
        jpeg_gpu_close(g);
        for (int nd = 1; g && nd <= 2; nd++) {   /* one decode thread, then two */
            char v[8];
            snprintf(v, sizeof v, "%d", nd);
            setenv("CTRAIN_JPEG_DECODERS", v, 1);
            printf("  CTRAIN_JPEG_DECODERS=%d\n", nd);
            test_both_ways(&c, interpolated);
        }
        unsetenv("CTRAIN_JPEG_DECODERS");
        ctx_free(&c);
    }
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
