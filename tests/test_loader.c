/* test_loader.c — the batch loader and the image sources behind it
 * (data/loader.h, data/image_source.h).
 *
 * Checked: batches are bit-identical for 1 and 3 workers (synthetic and an
 * augmented ImageFolder) and arrive in order; a training epoch visits
 * perm[0 .. nb*B) of shuffle_perm exactly once (drop_last); evaluation keeps
 * a partial last batch in sequential order; resuming at start_batch gives
 * the uninterrupted run's batches; cancelling mid-epoch and starting the
 * next epoch gives that epoch's batches; several batches may be held, and a
 * batch held across loader_start keeps its contents while the next epoch
 * fills the other slots; ImageFolder batches are u8 rows; slot
 * memory comes from the allocator callback and goes back to it; no thread
 * outlives loader_free; a corrupt image is reported with its path
 * (loader_try_next, with its status) and is fatal through loader_next (run
 * in a child process); an image the process may not read is fatal with the
 * permissions hint, not "damaged" (a child that drops root to uid 65534,
 * since root reads mode-000 files); the statistics are positive. Fashion-MNIST as an RGB source:
 * shape, channels equal, resize at S = 28 equals fmnist_batch_f32 exactly,
 * normalised statistics near 0 / 1 (skipped with a note when the data set
 * is not installed). Finally the decode throughput of 224 RandomResizedCrop
 * from 500x375 JPEGs with 1 and 2 workers is printed.
 *
 * Shape letters: N samples, B batch, S side, K slots, W workers.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stb/stb_image_write.h>

#include "data/fashion_mnist.h"
#include "data/image_source.h"
#include "data/imagefolder.h"
#include "data/loader.h"
#include "data/shuffle.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#include "child_util.h"
#pragma GCC diagnostic pop

static char tmp[256];

static void check_msg(const char *name, const char *err, const char *want)
{
    if (!err) err = "(none)";
    check_true(name, strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* allocator callback that counts */
static int n_alloc, n_free;
static void *count_alloc(size_t bytes, void *user)
{
    (*(int *)user)++;
    n_alloc++;
    return malloc(bytes);
}
static void count_free(void *p, void *user)
{
    (void)user;
    n_free++;
    free(p);
}

/* One epoch, every batch copied out: x [nb*B, img bytes] (f32 or u8 rows),
 * y, index, n, batch. */
typedef struct {
    uint32_t nb;
    size_t img;
    int B;
    uint8_t *x;
    int32_t *y;
    uint32_t *index;
    int *n;
    uint32_t *batch;
} Epoch;

static void epoch_run(Epoch *E, Loader *L, const ImageSource *src, int B, uint64_t epoch,
                      uint32_t start)
{
    memset(E, 0, sizeof *E);
    E->nb = loader_batches(L);
    E->B = B;
    E->img = src_row_bytes(src);
    E->x = calloc((size_t)E->nb * B * E->img, 1);
    E->y = calloc((size_t)E->nb * B, sizeof(int32_t));
    E->index = calloc((size_t)E->nb * B, sizeof(uint32_t));
    E->n = calloc(E->nb, sizeof(int));
    E->batch = calloc(E->nb, sizeof(uint32_t));
    loader_start(L, epoch, start);
    LoaderBatch *b;
    uint32_t k = start;
    while ((b = loader_next(L))) {
        if (k < E->nb) {
            E->batch[k] = b->batch;
            E->n[k] = b->n;
            const void *rows = b->x ? (const void *)b->x : (const void *)b->u8;
            memcpy(E->x + (size_t)k * B * E->img, rows, (size_t)b->n * E->img);
            memcpy(E->y + (size_t)k * B, b->y, (size_t)b->n * sizeof(int32_t));
            memcpy(E->index + (size_t)k * B, b->index, (size_t)b->n * sizeof(uint32_t));
        }
        k++;
        loader_release(L, b);
    }
    E->nb = k;  /* batches seen, counted from 0 */
}

/* Row i of an epoch of f32 rows. */
static const float *row_f32(const Epoch *E, size_t i) { return (const float *)(E->x + i * E->img); }

static void epoch_free(Epoch *E)
{
    free(E->x);
    free(E->y);
    free(E->index);
    free(E->n);
    free(E->batch);
}

/* batches [from, nb) of a and b identical */
static int epoch_same(const Epoch *a, const Epoch *b, uint32_t from)
{
    if (a->nb != b->nb) return 0;
    for (uint32_t k = from; k < a->nb; k++) {
        if (a->n[k] != b->n[k] || a->batch[k] != b->batch[k]) return 0;
        size_t r = (size_t)k * a->B, n = (size_t)a->n[k];
        if (memcmp(a->x + r * a->img, b->x + r * b->img, n * a->img) ||
            memcmp(a->y + r, b->y + r, n * sizeof(int32_t)) ||
            memcmp(a->index + r, b->index + r, n * sizeof(uint32_t)))
            return 0;
    }
    return 1;
}

static Loader *make_loader(const ImageSource *src, int B, int W, int K, int train,
                           int *slots_alloc)
{
    LoaderConfig c = {.batch = B, .workers = W, .slots = K, .train = train, .seed = 1234,
                      .alloc = count_alloc, .free = count_free, .alloc_user = slots_alloc};
    return loader_init(src, &c);
}

/* ----------------------------------------------------------- synthetic */

static void test_synthetic(void)
{
    const uint32_t N = 103;
    const int B = 8, S = 12;
    ImageSource src;
    src_synthetic_init(&src, N, 7, S, 99);
    int allocs = 0;

    Loader *L1 = make_loader(&src, B, 1, 3, 1, &allocs);
    Loader *L3 = make_loader(&src, B, 3, 3, 1, &allocs);
    const int t_running = threads_now();  /* this one + 4 workers (+ any runtime's) */
    check_true("alloc.callback", allocs == 6, "%d slot allocations, want 6", allocs);
    check_true("train.batches", loader_batches(L1) == N / B, "%u", loader_batches(L1));
    Epoch a, b;
    epoch_run(&a, L1, &src, B, 2, 0);
    epoch_run(&b, L3, &src, B, 2, 0);
    check_true("train.w1_w3_identical", epoch_same(&a, &b, 0), "1 and 3 workers differ");

    int order = a.nb == N / B;
    for (uint32_t k = 0; order && k < a.nb; k++) order = a.batch[k] == k && a.n[k] == B;
    check_true("train.order", order, "batches out of order or short");
    uint32_t perm[103];
    shuffle_perm(perm, N, 1234, 2);
    check_true("train.perm", memcmp(a.index, perm, (size_t)a.nb * B * 4) == 0,
               "indices are not shuffle_perm(n, seed, epoch)[0 .. nb*B)");
    int seen[103] = {0}, once = 1;
    for (uint32_t i = 0; i < a.nb * (uint32_t)B; i++) once &= seen[a.index[i]]++ == 0;
    int visited = 0;
    for (uint32_t i = 0; i < N; i++) visited += seen[i];
    check_true("train.each_index_once", once && visited == (int)(N / B) * B,
               "%d visits, duplicates %s", visited, once ? "none" : "found");

    /* rows equal src_get of their index */
    float *row = malloc((size_t)S * S * 3 * sizeof(float));
    int rows_ok = 1;
    for (uint32_t i = 0; i < a.nb * (uint32_t)B; i += 7) {
        int32_t y;
        src_get(&src, a.index[i], 1, 1234, 2, row, &y, NULL, 0);
        rows_ok &= y == a.y[i] && memcmp(row, row_f32(&a, i), a.img) == 0;
    }
    check_true("train.rows_are_samples", rows_ok, "a row differs from src_get");
    double mean = 0, var = 0;
    const float *x0 = row_f32(&a, 0);
    const size_t nv = a.img / sizeof(float) * B;
    for (size_t i = 0; i < nv; i++) mean += x0[i];
    mean /= (double)nv;
    for (size_t i = 0; i < nv; i++) var += (x0[i] - mean) * (x0[i] - mean);
    var /= (double)nv;
    check_true("synthetic.stats", fabs(mean) < 0.3 && var > 0.9 && var < 1.3,
               "mean %.3f var %.3f", mean, var);
    epoch_free(&b);

    /* resume at batch 5: the same batches 5.. */
    epoch_run(&b, L3, &src, B, 2, 5);
    check_true("resume.start_batch", epoch_same(&a, &b, 5), "resumed batches differ");
    epoch_free(&b);

    /* cancel mid-epoch, then epoch 3 from the start, against a fresh run */
    loader_start(L3, 2, 0);
    LoaderBatch *h1 = loader_next(L3), *h2 = loader_next(L3);  /* hold two of three */
    check_true("hold.two", h1 && h2 && h1->batch == 0 && h2->batch == 1 && h1 != h2,
               "held batches wrong");
    loader_release(L3, h2);
    loader_release(L3, h1);
    epoch_run(&b, L3, &src, B, 3, 0);
    Epoch c;
    epoch_run(&c, L1, &src, B, 3, 0);
    check_true("cancel.then_next_epoch", epoch_same(&b, &c, 0), "epoch 3 after cancel differs");
    check_true("epochs.differ", memcmp(b.index, a.index, (size_t)B * 4) != 0,
               "epochs 2 and 3 start alike");

    /* a batch held across loader_start stays valid; the new epoch is whole */
    loader_start(L3, 2, 11);
    LoaderBatch *last = loader_next(L3);
    float *kept = malloc((size_t)B * a.img);
    memcpy(kept, last->x, (size_t)B * a.img);
    loader_start(L3, 3, 0);
    int same = 1;
    LoaderBatch *nb_;
    for (uint32_t k = 0; (nb_ = loader_next(L3)); k++) {
        same &= nb_->batch == k && nb_->epoch == 3 &&
                !memcmp(nb_->x, row_f32(&c, (size_t)k * B), (size_t)nb_->n * a.img);
        loader_release(L3, nb_);
    }
    check_true("hold.across_start", last->batch == 11 && last->epoch == 2 &&
               !memcmp(kept, last->x, (size_t)B * a.img) && same, "the held batch changed, or epoch 3 "
               "differs from a fresh run");
    loader_release(L3, last);
    free(kept);
    epoch_free(&a);
    epoch_free(&b);
    epoch_free(&c);

    LoaderStats st;
    loader_stats(L3, &st);
    check_true("stats.positive", st.images > 0 && st.images_per_s > 0 &&
               st.capacity_per_s > 0 && st.busy_s > 0 && st.batches > 0 && st.wait_s >= 0,
               "images %llu rate %g capacity %g", (unsigned long long)st.images,
               st.images_per_s, st.capacity_per_s);
    loader_free(L1);
    loader_free(L3);
    check_true("alloc.freed", n_free == n_alloc, "%d allocations, %d frees", n_alloc, n_free);
    /* a joined thread's /proc entry can outlive pthread_join by a moment (the
     * kernel wakes the joiner before it has removed the task): look again
     * for up to a second before calling a thread left behind */
    for (int i = 0; i < 100 && threads_now() != t_running - 4; i++) usleep(10000);
    check_true("threads.joined", threads_now() == t_running - 4, "%d threads with the 4 "
               "workers, %d after loader_free", t_running, threads_now());

    /* evaluation: sequential, last batch partial */
    Loader *V = make_loader(&src, B, 2, 2, 0, &allocs);
    check_true("val.batches", loader_batches(V) == (N + B - 1) / B, "%u", loader_batches(V));
    epoch_run(&a, V, &src, B, 0, 0);
    int seq = a.nb == 13 && a.n[12] == (int)(N % B);
    for (uint32_t i = 0; seq && i < N; i++) seq = a.index[i] == i;
    check_true("val.partial_last", seq, "%u batches, last n %d", a.nb, a.nb ? a.n[a.nb - 1] : -1);
    int32_t y;
    src_get(&src, 102, 0, 0, 0, row, &y, NULL, 0);
    check_true("val.last_row", y == a.y[102] && !memcmp(row, row_f32(&a, 102), a.img),
               "row of sample 102 differs");
    epoch_free(&a);
    loader_free(V);
    free(row);
    src_free(&src);
}

/* ----------------------------------------------------------- ImageFolder */

static void write_img(const char *rel, int H, int W, int C, int seed, int jpg, int q)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    uint8_t *img = malloc((size_t)H * W * C);
    uint32_t h = (uint32_t)seed * 2654435761u;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < C; c++) {
                h = h * 1664525u + 1013904223u;
                double v = 128 + 70 * sin(x * (0.03 + 0.01 * c) + seed) *
                                     cos(y * 0.05 + c) + (double)(h >> 26) - 32;
                img[((size_t)y * W + x) * C + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    int ok = jpg ? stbi_write_jpg(p, W, H, C, img, q) : stbi_write_png(p, W, H, C, img, W * C);
    if (!ok) { fprintf(stderr, "test: cannot write %s\n", p); exit(1); }
    free(img);
}

static void make_dir(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    if (mkdir(p, 0700) && errno != EEXIST) { perror(p); exit(1); }
}

/* In a child: one evaluation epoch of the source through loader_next,
 * which ends the process at a sample that fails. */
static void drain_epoch(void *src, int fd)
{
    (void)fd;
    int allocs = 0;
    Loader *L = make_loader(src, 2, 2, 3, 0, &allocs);
    loader_start(L, 0, 0);
    LoaderBatch *x;
    while ((x = loader_next(L))) loader_release(L, x);
}

static void test_folder(void)
{
    make_dir("f");
    const char *cls[3] = {"f/a", "f/b", "f/c"};
    for (int c = 0; c < 3; c++) {
        make_dir(cls[c]);
        for (int i = 0; i < 8; i++) {
            char rel[64];
            int jpg = i % 2;
            snprintf(rel, sizeof rel, "%s/%02d.%s", cls[c], i, jpg ? "jpg" : "png");
            write_img(rel, 24 + 5 * i, 40 - 2 * i, i == 2 ? 1 : 3, c * 8 + i, jpg, 90);
        }
    }
    ImageSource src;
    char err[1024], root[512];
    snprintf(root, sizeof root, "%s/f", tmp);
    int st = src_imagefolder_open(&src, root, 20, NULL, err, sizeof err);
    check_true("folder.open", st == 0 && src.n == 24 && src.classes == 3, "%s", err);
    if (st) return;
    int allocs = 0;
    const int B = 5;
    Loader *L1 = make_loader(&src, B, 1, 2, 1, &allocs);
    Loader *L3 = make_loader(&src, B, 3, 4, 1, &allocs);
    for (uint64_t e = 0; e < 2; e++) {
        Epoch a, b;
        epoch_run(&a, L1, &src, B, e, 0);
        epoch_run(&b, L3, &src, B, e, 0);
        check_true(e ? "folder.w1_w3_identical.e1" : "folder.w1_w3_identical.e0",
                   a.nb == 4 && epoch_same(&a, &b, 0), "%u batches; differ", a.nb);
        int labels = 1;
        for (uint32_t i = 0; i < a.nb * (uint32_t)B; i++) labels &= a.y[i] == (int)(a.index[i] / 8);
        check_true("folder.labels", labels, "label != class of index");
        epoch_free(&a);
        epoch_free(&b);
    }
    loader_free(L1);
    loader_free(L3);
    src_free(&src);

    /* a corrupt image: the message names it */
    write_img("f/b/zz_bad.png", 10, 10, 3, 1, 0, 0);
    char bad[512];
    snprintf(bad, sizeof bad, "%s/f/b/zz_bad.png", tmp);
    FILE *fp = fopen(bad, "r+b");
    if (fp) { fseek(fp, 20, SEEK_SET); fwrite("garbagegarbage", 1, 14, fp); fclose(fp); }
    st = src_imagefolder_open(&src, root, 20, NULL, err, sizeof err);
    if (st) { check_true("folder.reopen", 0, "%s", err); return; }
    Loader *L = make_loader(&src, 5, 2, 3, 0, &allocs);
    loader_start(L, 0, 0);
    LoaderBatch *bt;
    int rc = 0;
    while (!(rc = loader_try_next(L, &bt, err, sizeof err)) && bt) loader_release(L, bt);
    check_true("error.try_next", rc == IMGF_ERR_DECODE, "rc %d", rc);
    char want[600];
    snprintf(want, sizeof want, "%s: damaged PNG", bad);
    check_msg("error.try_next.path", err, want);
    loader_free(L);

    /* loader_next: fatal, with the path and a hint, in a child process */
    char out[2048];
    int code = child_run(drain_epoch, &src, out, sizeof out);
    check_true("error.next.fatal", code == 1, "child exit %d", code);
    check_msg("error.next.msg", out, want);
    check_msg("error.next.hint", out, "hint: replace it with a good copy");
    src_free(&src);
}

/* An image the process may not read: loader_next's hint is about
 * permissions, not damage. Root reads mode-000 files, so the loader runs in
 * a child that drops to uid/gid 65534 (skipped, saying so, where it cannot). */
static void drain_unreadable(void *img, int fd)
{
    (void)fd;
    if (child_drop_root()) _exit(2);
    FILE *probe = fopen(img, "rb");
    if (probe) _exit(3);
    ImageSource src;
    char err[1024], root[512];
    snprintf(root, sizeof root, "%s/p", tmp);
    if (src_imagefolder_open(&src, root, 8, NULL, err, sizeof err)) _exit(4);
    drain_epoch(&src, fd);   /* fatal at 01.png */
}

static void test_folder_permission(void)
{
    make_dir("p");
    make_dir("p/a");
    write_img("p/a/00.png", 12, 12, 3, 1, 0, 0);
    write_img("p/a/01.png", 12, 12, 3, 2, 0, 0);
    char img[512], d[512];
    snprintf(img, sizeof img, "%s/p/a/01.png", tmp);
    const char *dirs[3] = {"", "/p", "/p/a"};
    for (int i = 0; i < 3; i++) {
        snprintf(d, sizeof d, "%s%s", tmp, dirs[i]);
        chmod(d, 0755);
    }
    if (chmod(img, 0)) { printf("  skip perm.*: chmod: %s\n", strerror(errno)); return; }
    char out[2048];
    int code = child_run(drain_unreadable, img, out, sizeof out);
    if (code == 2 || code == 3) {
        printf("  skip perm.loader: %s\n", code == 2 ? "cannot drop root to uid 65534"
                                                   : "this user reads mode-000 files");
    } else {
        check_true("perm.loader.fatal", code == 1, "child exit %d: %s", code, out);
        check_msg("perm.loader.msg", out, "01.png: permission denied");
        check_msg("perm.loader.hint", out, "hint: permission denied: check the file's permissions");
        check_true("perm.loader.not_damaged", !strstr(out, "damaged"), "%s", out);
    }
    chmod(img, 0600);
}

/* --------------------------------------------------------- Fashion-MNIST */

static void test_fmnist(void)
{
    struct stat sb;
    if (stat(FMNIST_DEFAULT_DIR, &sb) != 0) {
        printf("  skip Fashion-MNIST source checks: %s not found (apt-get install "
               "dataset-fashion-mnist)\n", FMNIST_DEFAULT_DIR);
        return;
    }
    FashionMnist ds;
    char err[1024];
    if (fmnist_load(&ds, NULL, err, sizeof err)) {
        check_true("fmnist.loads", 0, "%s", err);
        return;
    }
    /* S = 28, evaluation: the resize is the identity, so the values are
     * exactly fmnist_batch_f32's, on all three channels */
    ImageSource s28;
    src_fmnist_init(&s28, &ds, FMNIST_TEST, 28, NULL);
    check_true("fmnist.shape", s28.n == 10000 && s28.classes == 10 && s28.size == 28,
               "n %u classes %d", s28.n, s28.classes);
    float x3[28 * 28 * 3], ref[784], got[784];
    int32_t y, yr;
    uint32_t idx = 17;
    src_get(&s28, idx, 0, 5, 0, x3, &y, NULL, 0);
    fmnist_batch_f32(ref, &yr, &ds, FMNIST_TEST, &idx, 1, FMNIST_MEAN, FMNIST_STD);
    int same_ch = 1;
    for (int p = 0; p < 784; p++) {
        got[p] = x3[3 * p];
        same_ch &= x3[3 * p + 1] == x3[3 * p] && x3[3 * p + 2] == x3[3 * p];
    }
    check_true("fmnist.channels_equal", same_ch, "grey not replicated");
    check_close("fmnist.s28_equals_batch_f32", got, ref, 784, 1e-5, 1e-5);
    check_true("fmnist.label", y == yr, "label %d vs %d", y, yr);
    src_free(&s28);

    /* S = 32 through the loader: train augmentation and eval statistics */
    ImageSource src;
    src_fmnist_init(&src, &ds, FMNIST_TRAIN, 32, NULL);
    int allocs = 0;
    Loader *L = make_loader(&src, 64, 2, 3, 1, &allocs);
    loader_start(L, 0, 0);
    const float lo = -FMNIST_MEAN / FMNIST_STD, hi = (1 - FMNIST_MEAN) / FMNIST_STD;
    int range = 1, labels = 1;
    double sum = 0, sq = 0;
    size_t cnt = 0;
    for (int k = 0; k < 8; k++) {
        LoaderBatch *b = loader_next(L);
        for (size_t i = 0; i < (size_t)b->n * 32 * 32 * 3; i++) {
            range &= b->x[i] >= lo - 1e-5f && b->x[i] <= hi + 1e-5f;
            sum += b->x[i];
            sq += (double)b->x[i] * b->x[i];
            cnt++;
        }
        for (int r = 0; r < b->n; r++) labels &= b->y[r] == ds.split[0].labels[b->index[r]];
        loader_release(L, b);
    }
    double mean = sum / cnt, sd = sqrt(sq / cnt - mean * mean);
    check_true("fmnist.train.range", range, "values outside [%g, %g]", lo, hi);
    check_true("fmnist.train.labels", labels, "labels differ from the split");
    /* padding adds black pixels: mean a little below 0 */
    check_true("fmnist.train.stats", mean > -0.2 && mean < 0.1 && sd > 0.8 && sd < 1.1,
               "mean %.3f sd %.3f", mean, sd);
    loader_free(L);
    src_free(&src);
    fmnist_free(&ds);
}

/* ------------------------------------------------------------ throughput */

static void test_throughput(void)
{
    make_dir("jpg");
    make_dir("jpg/a");
    make_dir("jpg/b");
    const int n = 48;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        char rel[64], p[512];
        snprintf(rel, sizeof rel, "jpg/%c/%03d.jpg", i % 2 ? 'b' : 'a', i);
        write_img(rel, 375, 500, 3, i, 1, 90);
        snprintf(p, sizeof p, "%s/%s", tmp, rel);
        struct stat sb;
        if (stat(p, &sb) == 0) bytes += (size_t)sb.st_size;
    }
    ImageSource src;
    char err[1024], root[512];
    snprintf(root, sizeof root, "%s/jpg", tmp);
    if (src_imagefolder_open(&src, root, 224, NULL, err, sizeof err)) {
        check_true("throughput.open", 0, "%s", err);
        return;
    }
    double rate[2] = {0, 0};
    for (int w = 1; w <= 2; w++) {
        int allocs = 0;
        Loader *L = make_loader(&src, 16, w, 3, 1, &allocs);
        loader_start(L, 0, 0);
        LoaderBatch *b;
        while ((b = loader_next(L))) loader_release(L, b);
        LoaderStats st;
        loader_stats(L, &st);
        rate[w - 1] = st.images_per_s;
        printf("  loader: 224 RandomResizedCrop from 500x375 JPEG (q90, %.0f KB avg): "
               "%d worker%s %.0f images/s (capacity %.0f/s, consumer waited %.2f s)\n",
               bytes / 1024.0 / n, w, w > 1 ? "s" : "", st.images_per_s, st.capacity_per_s,
               st.wait_s);
        check_true("throughput.positive", st.images == 48 && st.images_per_s > 0,
                   "images %llu rate %g", (unsigned long long)st.images, st.images_per_s);
        loader_free(L);
    }
    (void)rate;
    src_free(&src);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/ctrain_loader_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    test_synthetic();
    test_folder();
    test_folder_permission();
    test_fmnist();
    test_throughput();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    struct stat sb;
    check_true("cleanup", stat(tmp, &sb) != 0, "%s still exists", tmp);
    return check_summary();
}
