/* test_data_mnist.c — the Fashion-MNIST loader, the IDX reader under it, and
 * the epoch permutation.
 *
 * Real data: FMNIST_DEFAULT_DIR (Debian package dataset-fashion-mnist): 60000
 * train / 10000 test images of 28x28, 6000 / 1000 per class, and the
 * documented pixel statistics mean 0.2860 std 0.3530. Where the package is
 * missing those checks are skipped (said so on stdout) and the damaged-file
 * tests run on a synthetic gzip set of the same layout instead.
 *
 * Damaged inputs, each refused with its message checked: missing directory,
 * truncated gzip, flipped bytes inside the deflate stream, a flipped CRC in
 * the gzip trailer (zlib only sees it at end of stream), wrong magic,
 * unsupported type, absurd dims, extra data, a 9-byte header promising 2^31
 * bytes (refused from the file size, plain, or as the gzip data runs out,
 * without allocating 2 GiB: checked under an address-space limit in a child
 * process), and image/label sets that do not fit together. Temp files live in one mkdtemp directory, removed at the
 * end. Shape letters: N images, B batch.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>  /* gzopen/gzwrite: writes the synthetic gzip files */

#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "data/shuffle.h"
/* check.h's helpers are static; this program does not use all of them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "check.h"
#pragma GCC diagnostic pop
#include "child_util.h"
#include "file_util.h"

static char tmp[256];
static const char *const FILES[4] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A check that err contains want; prints the whole message when not. */
static void check_msg(const char *name, const char *err, const char *want)
{
    if (!err) err = "(none)";
    check_true(name, strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
}

/* An IDX u8 file, gzip-compressed when gz is set. */
static void write_idx(const char *path, int gz, int ndim, const uint32_t *dims,
                      const uint8_t *data)
{
    uint8_t hdr[4 + 4 * IDX_MAX_DIMS] = {0, 0, 0x08, (uint8_t)ndim};
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        uint8_t *q = hdr + 4 + 4 * i;
        q[0] = (uint8_t)(dims[i] >> 24); q[1] = (uint8_t)(dims[i] >> 16);
        q[2] = (uint8_t)(dims[i] >> 8);  q[3] = (uint8_t)dims[i];
        n *= dims[i];
    }
    size_t hn = 4 + 4 * (size_t)ndim;
    if (!gz) {
        uint8_t *buf = malloc(hn + n);
        memcpy(buf, hdr, hn);
        memcpy(buf + hn, data, n);
        file_write(path, buf, hn + n);
        free(buf);
        return;
    }
    gzFile g = gzopen(path, "wb6");
    if (!g || gzwrite(g, hdr, (unsigned)hn) != (int)hn ||
        (n && gzwrite(g, data, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
        fprintf(stderr, "test: cannot write %s\n", path);
        exit(1);
    }
}

/* A Fashion-MNIST-shaped set in dir: ntrain/ntest images of h x w, labels
 * i % 10 (bad_label replaces label 3 when >= 0), nlab_test test labels. */
static void write_set(const char *dir, int gz, uint32_t ntrain, uint32_t ntest,
                      uint32_t nlab_test, uint32_t h, uint32_t w, int bad_label)
{
    mkdir(dir, 0700);
    uint32_t ns[2] = {ntrain, ntest}, nl[2] = {ntrain, nlab_test};
    for (int s = 0; s < 2; s++) {
        size_t n = (size_t)ns[s] * h * w;
        uint8_t *img = malloc(n ? n : 1), *lab = malloc(nl[s] ? nl[s] : 1);
        for (size_t i = 0; i < n; i++) img[i] = (uint8_t)(i * 2654435761u >> 13);
        for (uint32_t i = 0; i < nl[s]; i++) lab[i] = (uint8_t)(i % 10);
        if (bad_label >= 0 && nl[s] > 3) lab[3] = (uint8_t)bad_label;
        char p[512];
        uint32_t di[3] = {ns[s], h, w}, dl[1] = {nl[s]};
        snprintf(p, sizeof p, "%s/%s%s", dir, FILES[2 * s], gz ? ".gz" : "");
        write_idx(p, gz, 3, di, img);
        snprintf(p, sizeof p, "%s/%s%s", dir, FILES[2 * s + 1], gz ? ".gz" : "");
        write_idx(p, gz, 1, dl, lab);
        free(img);
        free(lab);
    }
}

/* tmp/name: links to the four .gz files of src, except `file` whose bytes
 * are given. Returns the directory (static buffer). */
static const char *make_case(const char *name, const char *src, const char *file,
                             const uint8_t *bytes, size_t n)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mkdir(dir, 0700);
    for (int k = 0; k < 4; k++) {
        char from[512], to[600];
        snprintf(from, sizeof from, "%s/%s.gz", src, FILES[k]);
        snprintf(to, sizeof to, "%s/%s.gz", dir, FILES[k]);
        if (strncmp(FILES[k], file, strlen(file)) == 0) file_write(to, bytes, n);
        else if (symlink(from, to) != 0) { perror("symlink"); exit(1); }
    }
    return dir;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

/* ---------------------------------------------------------------- real data */

static void test_real(const FashionMnist *ds)
{
    const FmnistSplit *tr = &ds->split[FMNIST_TRAIN], *te = &ds->split[FMNIST_TEST];
    check_true("real.train.n", tr->n == 60000, "train has %u images, expected 60000", tr->n);
    check_true("real.test.n", te->n == 10000, "test has %u images, expected 10000", te->n);

    for (int s = 0; s < 2; s++) {
        const FmnistSplit *sp = &ds->split[s];
        uint32_t hist[FMNIST_CLASSES] = {0}, bad = 0, want = s ? 1000 : 6000;
        for (uint32_t i = 0; i < sp->n; i++) {
            if (sp->labels[i] < FMNIST_CLASSES) hist[sp->labels[i]]++;
            else bad++;
        }
        check_true(s ? "real.test.labels<10" : "real.train.labels<10", bad == 0,
                   "%u labels out of range", bad);
        int ok = 1;
        for (int c = 0; c < FMNIST_CLASSES; c++) ok &= hist[c] == want;
        check_true(s ? "real.test.histogram" : "real.train.histogram", ok,
                   "class counts %u %u %u %u %u %u %u %u %u %u, each expected %u", hist[0],
                   hist[1], hist[2], hist[3], hist[4], hist[5], hist[6], hist[7], hist[8],
                   hist[9], want);
    }
    /* The first labels of each split, as published with the data set. */
    const uint8_t tr0[5] = {9, 0, 0, 3, 0}, te0[5] = {9, 2, 1, 1, 6};
    check_true("real.train.first_labels", memcmp(tr->labels, tr0, 5) == 0,
               "got %u %u %u %u %u", tr->labels[0], tr->labels[1], tr->labels[2],
               tr->labels[3], tr->labels[4]);
    check_true("real.test.first_labels", memcmp(te->labels, te0, 5) == 0,
               "got %u %u %u %u %u", te->labels[0], te->labels[1], te->labels[2],
               te->labels[3], te->labels[4]);

    /* The documented statistics are those of pixel/255 over the train set. */
    double sum = 0, sq = 0, n = (double)tr->n * FMNIST_PIXELS;
    for (size_t i = 0; i < (size_t)tr->n * FMNIST_PIXELS; i++) {
        double v = tr->images[i] / 255.0;
        sum += v;
        sq += v * v;
    }
    double mean = sum / n, std = sqrt(sq / n - mean * mean);
    check_true("real.mean", fabs(mean - FMNIST_MEAN) < 5e-4, "train pixel mean %.5f, "
               "FMNIST_MEAN %.4f", mean, (double)FMNIST_MEAN);
    check_true("real.std", fabs(std - FMNIST_STD) < 5e-4, "train pixel std %.5f, "
               "FMNIST_STD %.4f", std, (double)FMNIST_STD);
}

/* x, y of fmnist_batch_f32 against the formula in double. */
static void test_batch(const FashionMnist *ds, int split, const char *name)
{
    const FmnistSplit *sp = &ds->split[split];
    enum { B = 37 };
    uint32_t *perm = malloc(sizeof(uint32_t) * sp->n), idx[B];
    shuffle_perm(perm, sp->n, 1234, 7);
    for (int b = 0; b < B; b++) idx[b] = perm[b % sp->n];
    idx[B - 1] = sp->n - 1;  /* the last image: its row ends the buffer */
    float *x = malloc(sizeof(float) * B * FMNIST_PIXELS);
    float *ref = malloc(sizeof(float) * B * FMNIST_PIXELS);
    int32_t y[B];
    fmnist_batch_f32(x, y, ds, split, idx, B, FMNIST_MEAN, FMNIST_STD);
    int yok = 1;
    for (int b = 0; b < B; b++) {
        for (int p = 0; p < FMNIST_PIXELS; p++) {
            double v = sp->images[(size_t)idx[b] * FMNIST_PIXELS + p];
            ref[b * FMNIST_PIXELS + p] = (float)((v / 255.0 - FMNIST_MEAN) / FMNIST_STD);
        }
        yok &= y[b] == sp->labels[idx[b]];
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%s.x", name);
    check_close(nm, x, ref, (size_t)B * FMNIST_PIXELS, 1e-6, 1e-6);
    snprintf(nm, sizeof nm, "%s.y", name);
    check_true(nm, yok, "labels differ from the split's");
    /* The ends of the range: pixel 0 and 255 map to -mean/std and (1-mean)/std. */
    float lo = 1e9f, hi = -1e9f;
    for (int i = 0; i < B * FMNIST_PIXELS; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    snprintf(nm, sizeof nm, "%s.range", name);
    check_true(nm, fabsf(lo + FMNIST_MEAN / FMNIST_STD) < 1e-5f &&
               fabsf(hi - (1 - FMNIST_MEAN) / FMNIST_STD) < 1e-5f,
               "min %g max %g, expected %g %g", (double)lo, (double)hi,
               (double)(-FMNIST_MEAN / FMNIST_STD), (double)((1 - FMNIST_MEAN) / FMNIST_STD));
    free(perm);
    free(x);
    free(ref);
}

/* ------------------------------------------------------------------ shuffle */

static int is_perm(const uint32_t *p, uint32_t n)
{
    uint8_t *seen = calloc(n ? n : 1, 1);
    int ok = 1;
    for (uint32_t i = 0; i < n && ok; i++) {
        if (p[i] >= n || seen[p[i]]) ok = 0;
        else seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_shuffle(void)
{
    const uint32_t n = 60000;
    uint32_t *a = malloc(4 * n), *b = malloc(4 * n);
    shuffle_perm(a, n, 42, 3);
    check_true("shuffle.is_permutation", is_perm(a, n), "not a permutation of 0..%u", n - 1);
    uint32_t fixed = 0;
    for (uint32_t i = 0; i < n; i++) fixed += a[i] == i;
    check_true("shuffle.shuffled", fixed < 20, "%u of %u elements stayed in place", fixed, n);
    shuffle_perm(b, n, 42, 3);
    check_true("shuffle.same_seed_epoch", memcmp(a, b, 4 * n) == 0, "two calls differ");
    shuffle_perm(b, n, 42, 4);
    check_true("shuffle.other_epoch", memcmp(a, b, 4 * n) != 0 && is_perm(b, n),
               "epoch 4 gives epoch 3's order");
    shuffle_perm(b, n, 43, 3);
    check_true("shuffle.other_seed", memcmp(a, b, 4 * n) != 0 && is_perm(b, n),
               "seed 43 gives seed 42's order");

    uint32_t one = 77;
    shuffle_perm(&one, 1, 1, 1);
    shuffle_perm(NULL, 0, 1, 1);
    check_true("shuffle.n=1", one == 0, "got %u", one);

    /* Pinned output: resume and every rank rely on these exact orders. */
    uint32_t g[10];
    const uint32_t want[10] = {9, 8, 0, 6, 5, 2, 1, 7, 4, 3};
    shuffle_perm(g, 10, 42, 0);
    check_true("shuffle.golden", memcmp(g, want, sizeof g) == 0,
               "seed 42 epoch 0 n 10: %u %u %u %u %u %u %u %u %u %u", g[0], g[1], g[2],
               g[3], g[4], g[5], g[6], g[7], g[8], g[9]);

    /* Uniform over the 24 orders of 4 elements across 48000 epochs: each
     * order 2000 times, binomial sd 44; 5 sd allowed. */
    uint32_t count[24] = {0}, p[4];
    for (uint64_t e = 0; e < 48000; e++) {
        shuffle_perm(p, 4, 9, e);
        /* Lehmer code of p as an index 0..23 */
        int code = 0;
        for (int i = 0; i < 4; i++) {
            int smaller = 0;
            for (int j = i + 1; j < 4; j++) smaller += p[j] < p[i];
            code = code * (4 - i) + smaller;
        }
        count[code]++;
    }
    uint32_t lo = count[0], hi = count[0];
    for (int k = 1; k < 24; k++) {
        lo = count[k] < lo ? count[k] : lo;
        hi = count[k] > hi ? count[k] : hi;
    }
    check_true("shuffle.uniform", lo > 2000 - 220 && hi < 2000 + 220,
               "order counts range %u..%u, expected 2000 +- 220", lo, hi);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- IDX files */

static void test_idx(void)
{
    char p[512], err[512];
    IdxArray a;
    const uint32_t d3[3] = {3, 2, 2};
    const uint8_t v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 255};

    snprintf(p, sizeof p, "%s/plain.idx", tmp);
    write_idx(p, 0, 3, d3, v);
    int st = idx_load(&a, p, err, sizeof err);
    check_true("idx.plain.loads", st == IDX_OK, "status %d: %s", st, err);
    check_true("idx.plain.dims", a.ndim == 3 && a.dims[0] == 3 && a.dims[1] == 2 &&
               a.dims[2] == 2 && a.n == 12 && a.type == 0x08,
               "ndim %d dims %u %u %u n %zu", a.ndim, a.dims[0], a.dims[1], a.dims[2], a.n);
    check_true("idx.plain.data", a.data && memcmp(a.data, v, 12) == 0, "data differ");
    idx_free(&a);

    snprintf(p, sizeof p, "%s/small.idx.gz", tmp);
    write_idx(p, 1, 3, d3, v);
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.gz.loads", st == IDX_OK && a.n == 12 && memcmp(a.data, v, 12) == 0,
               "status %d: %s", st, err);
    idx_free(&a);

    snprintf(p, sizeof p, "%s/none.idx", tmp);
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.missing.status", st == IDX_ERR_OPEN, "status %d", st);
    check_msg("idx.missing.msg", err, "none.idx: No such file or directory");

    st = idx_load(&a, tmp, err, sizeof err);
    check_true("idx.directory.status", st == IDX_ERR_OPEN, "status %d", st);
    check_msg("idx.directory.msg", err, "Is a directory");

    snprintf(p, sizeof p, "%s/text.idx", tmp);
    file_write(p, "hello, world\n", 13);
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.text.status", st == IDX_ERR_FORMAT && a.data == NULL, "status %d", st);
    check_msg("idx.text.msg", err, "is not an IDX file: it starts with bytes 68 65 6c 6c");

    const uint8_t badmagic[8] = {0x00, 0x01, 0x08, 0x01, 0, 0, 0, 0};
    file_write(p, badmagic, 8);
    st = idx_load(&a, p, err, sizeof err);
    check_msg("idx.magic.msg", err, "starts with bytes 00 01 08 01");

    const uint8_t f32[12] = {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0x80, 0x3f};
    file_write(p, f32, 12);
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.type.status", st == IDX_ERR_FORMAT, "status %d", st);
    check_msg("idx.type.msg", err, "unsupported element type 0x0D (f32)");

    const uint8_t nodim[4] = {0, 0, 0x08, 0};
    file_write(p, nodim, 4);
    st = idx_load(&a, p, err, sizeof err);
    check_msg("idx.ndim0.msg", err, "header gives 0 dimensions");

    /* Headers alone: 65536 x 65536 = 2^32 elements, then 2^32-1 in one dim. */
    const uint8_t huge[12] = {0, 0, 0x08, 2, 0, 1, 0, 0, 0, 1, 0, 0};
    file_write(p, huge, sizeof huge);
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.absurd.status", st == IDX_ERR_FORMAT && a.data == NULL, "status %d", st);
    check_msg("idx.absurd.msg", err, "header dims 65536 x 65536 exceed 2147483648 elements");

    const uint8_t over[8] = {0, 0, 0x08, 1, 0xFF, 0xFF, 0xFF, 0xFF};
    file_write(p, over, sizeof over);
    st = idx_load(&a, p, err, sizeof err);
    check_msg("idx.absurd1.msg", err, "header dims 4294967295 exceed");

    /* Header promises 12 bytes, file holds 5. */
    uint8_t cut[4 + 12 + 5] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5};
    file_write(p, cut, sizeof cut);
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.short.status", st == IDX_ERR_TRUNCATED, "status %d", st);
    check_msg("idx.short.msg", err, "text.idx is truncated: its header (dims 3 x 2 x 2) "
              "promises 28 bytes, the file has 21");
    snprintf(p, sizeof p, "%s/cut.idx.gz", tmp);
    gzFile g = gzopen(p, "wb6");
    if (g) { gzwrite(g, cut, sizeof cut); gzclose(g); }
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.short_gz.status", st == IDX_ERR_TRUNCATED, "status %d", st);
    check_msg("idx.short_gz.msg", err, "cut.idx.gz is truncated: expected 12 data bytes, got 5");
    snprintf(p, sizeof p, "%s/text.idx", tmp);

    file_write(p, cut, 9);
    st = idx_load(&a, p, err, sizeof err);
    check_msg("idx.short_header.msg", err, "expected 16 header bytes, got 9");

    /* Header promises 12 bytes, file holds 13. */
    snprintf(p, sizeof p, "%s/long.idx", tmp);
    uint8_t lng[4 + 12 + 13] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
    file_write(p, lng, sizeof lng);
    st = idx_load(&a, p, err, sizeof err);
    check_true("idx.extra.status", st == IDX_ERR_FORMAT && a.data == NULL, "status %d", st);
    check_msg("idx.extra.msg", err, "long.idx holds more data than its header promises "
              "(dims 3 x 2 x 2 = 12 bytes)");
}

/* idx_load of path in a child whose address space is limited to 1 GiB more
 * than it uses: a reader that allocates what a header promises (2 GiB)
 * fails there with IDX_ERR_NOMEM. The status and message come back through
 * a pipe. Under ASan (which reserves terabytes of shadow) no limit is set. */
static void idx_load_child(void *ctx, int fd)
{
#if !defined(__SANITIZE_ADDRESS__)
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) { if (fscanf(f, "%ld", &pages) != 1) pages = 0; fclose(f); }
    if (pages > 0) {
        rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (1ull << 30);
        struct rlimit rl = {lim, lim};
        setrlimit(RLIMIT_AS, &rl);
    }
#endif
    IdxArray a;
    char e[512] = "";
    int st = idx_load(&a, ctx, e, sizeof e);
    dprintf(fd, "%d %s", st, e);
}

static int idx_load_limited(const char *path, char *err, size_t errlen)
{
    char out[700];
    int code = child_run(idx_load_child, (void *)path, out, sizeof out);
    const char *sp = strchr(out, ' ');
    snprintf(err, errlen, "%s", sp ? sp + 1 : out);
    return code == 0 && sp ? atoi(out) : 99;
}

/* A 9-byte file whose header promises 2^31 elements (the most idx_load
 * accepts): refused as truncated, from the size, before any allocation. */
static void test_idx_promise(void)
{
    char p[512], err[700];
    const uint8_t nine[9] = {0, 0, 0x08, 1, 0x80, 0, 0, 0, 0x55};
    snprintf(p, sizeof p, "%s/promise.idx", tmp);
    file_write(p, nine, sizeof nine);
    int st = idx_load_limited(p, err, sizeof err);
    check_true("idx.promise.status", st == IDX_ERR_TRUNCATED, "status %d: %s", st, err);
    check_msg("idx.promise.msg", err, "promise.idx is truncated: its header (dims 2147483648) "
              "promises 2147483656 bytes, the file has 9");
    snprintf(p, sizeof p, "%s/promise.idx.gz", tmp);
    gzFile g = gzopen(p, "wb6");
    if (g) { gzwrite(g, nine, sizeof nine); gzclose(g); }
    st = idx_load_limited(p, err, sizeof err);
    check_true("idx.promise_gz.status", st == IDX_ERR_TRUNCATED, "status %d: %s", st, err);
    check_msg("idx.promise_gz.msg", err, "expected 2147483648 data bytes, got 1");
}

/* ------------------------------------------------------ damaged Fashion-MNIST */

static void test_fmnist_errors(const char *src)
{
    char err[1024], p[1024];
    FashionMnist ds;

    int st = fmnist_load(&ds, "/nonexistent/fmnist", err, sizeof err);
    check_true("fmnist.missing.status", st == IDX_ERR_OPEN, "status %d", st);
    check_msg("fmnist.missing.msg", err, "cannot open /nonexistent/fmnist/"
              "train-images-idx3-ubyte.gz: No such file or directory");
    check_msg("fmnist.missing.hint", fmnist_hint(st),
              "apt-get install dataset-fashion-mnist) or pass --data fashion-mnist:DIR");
    check_msg("fmnist.missing_default.hint", fmnist_hint_dir(st, NULL), "apt-get install");
    check_true("fmnist.missing_dir.hint", strstr(fmnist_hint_dir(st, "/nonexistent/fmnist"),
               "check the path") && !strstr(fmnist_hint_dir(st, "/nonexistent/fmnist"),
               "install"), "%s", fmnist_hint_dir(st, "/nonexistent/fmnist"));
    check_true("fmnist.missing.empty", ds.split[0].images == NULL && ds.split[1].n == 0,
               "dataset not left empty");
    fmnist_free(&ds);

    /* The test images the source promises: N * 784 bytes. */
    IdxArray ti;
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", src);
    if (idx_load(&ti, p, err, sizeof err)) { printf("  FAIL source %s: %s\n", p, err); return; }
    char want[128];
    snprintf(want, sizeof want, "is truncated: expected %zu data bytes, got ", ti.n);
    idx_free(&ti);

    size_t n;
    uint8_t *gz = (uint8_t *)file_read(p, &n);
    const char *dir = make_case("trunc", src, "t10k-images", gz, n / 2);
    st = fmnist_load(&ds, dir, err, sizeof err);
    check_true("fmnist.truncated.status", st == IDX_ERR_TRUNCATED, "status %d: %s", st, err);
    check_msg("fmnist.truncated.file", err, "trunc/t10k-images-idx3-ubyte.gz");
    check_msg("fmnist.truncated.msg", err, want);
    check_msg("fmnist.truncated.zlib", err, "unexpected end of file");
    check_msg("fmnist.truncated.hint", fmnist_hint(st), "--reinstall dataset-fashion-mnist");
    check_true("fmnist.truncated.empty", ds.split[0].images == NULL, "train not freed");
    fmnist_free(&ds);

    /* Cut inside the 8-byte trailer: all data decodes, the stream still ends early. */
    dir = make_case("trailer_cut", src, "t10k-images", gz, n - 3);
    st = fmnist_load(&ds, dir, err, sizeof err);
    check_true("fmnist.trailer_cut.status", st == IDX_ERR_TRUNCATED, "status %d: %s", st, err);
    check_msg("fmnist.trailer_cut.msg", err, "data bytes read but the gzip stream ends early");
    fmnist_free(&ds);

    /* Flipped bytes in the middle of the deflate stream. */
    for (size_t i = n / 2; i < n / 2 + 16; i++) gz[i] ^= 0xA5;
    dir = make_case("flipped", src, "t10k-images", gz, n);
    st = fmnist_load(&ds, dir, err, sizeof err);
    check_true("fmnist.flipped.status", st == IDX_ERR_CORRUPT, "status %d: %s", st, err);
    check_msg("fmnist.flipped.msg", err, "flipped/t10k-images-idx3-ubyte.gz: corrupt gzip data: ");
    fmnist_free(&ds);
    free(gz);

    /* Only the CRC-32 in the trailer flipped: the data decode cleanly and zlib
     * notices only at end of stream. */
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", src);
    gz = (uint8_t *)file_read(p, &n);
    gz[n - 8] ^= 0x01;
    dir = make_case("crc", src, "t10k-labels", gz, n);
    st = fmnist_load(&ds, dir, err, sizeof err);
    check_true("fmnist.crc.status", st == IDX_ERR_CORRUPT, "status %d: %s", st, err);
    check_msg("fmnist.crc.msg", err, "t10k-labels-idx1-ubyte.gz: corrupt gzip data: "
              "incorrect data check");
    fmnist_free(&ds);
    gz[n - 8] ^= 0x01;
    gz[n - 4] ^= 0x01;  /* ISIZE, the length mod 2^32 */
    dir = make_case("isize", src, "t10k-labels", gz, n);
    st = fmnist_load(&ds, dir, err, sizeof err);
    check_msg("fmnist.isize.msg", err, "corrupt gzip data: incorrect length check");
    fmnist_free(&ds);
    free(gz);

    /* Synthetic sets that do not fit together. */
    snprintf(p, sizeof p, "%s/mismatch", tmp);
    write_set(p, 1, 20, 10, 9, 28, 28, -1);
    st = fmnist_load(&ds, p, err, sizeof err);
    check_true("fmnist.count_mismatch.status", st == IDX_ERR_FORMAT, "status %d: %s", st, err);
    check_msg("fmnist.count_mismatch.msg", err, "test split: ");
    check_msg("fmnist.count_mismatch.counts", err, "t10k-images-idx3-ubyte.gz holds 10 images "
              "but ");
    check_msg("fmnist.count_mismatch.labels", err, "t10k-labels-idx1-ubyte.gz holds 9 labels");
    check_true("fmnist.count_mismatch.empty", ds.split[0].images == NULL, "train not freed");
    fmnist_free(&ds);

    snprintf(p, sizeof p, "%s/badlabel", tmp);
    write_set(p, 1, 20, 10, 10, 28, 28, 10);
    st = fmnist_load(&ds, p, err, sizeof err);
    check_msg("fmnist.label_range.msg", err, "train-labels-idx1-ubyte.gz: label 10 at index 3 "
              "is out of range");
    fmnist_free(&ds);

    snprintf(p, sizeof p, "%s/baddims", tmp);
    write_set(p, 1, 20, 10, 10, 27, 28, -1);
    st = fmnist_load(&ds, p, err, sizeof err);
    check_msg("fmnist.image_dims.msg", err, "expected images of shape [N,28,28], the file "
              "holds [20,27,28]");
    fmnist_free(&ds);

    /* Unpacked files (no .gz) in a directory load the same way. */
    snprintf(p, sizeof p, "%s/plain", tmp);
    write_set(p, 0, 20, 10, 10, 28, 28, -1);
    st = fmnist_load(&ds, p, err, sizeof err);
    check_true("fmnist.plain.loads", st == IDX_OK && ds.split[0].n == 20 &&
               ds.split[1].n == 10, "status %d: %s", st, err);
    if (st == IDX_OK) {
        check_true("fmnist.plain.data", ds.split[1].labels[7] == 7 &&
                   ds.split[1].images[785] == (uint8_t)(785u * 2654435761u >> 13),
                   "label %u pixel %u", ds.split[1].labels[7], ds.split[1].images[785]);
        test_batch(&ds, FMNIST_TRAIN, "fmnist.plain.batch");
    }
    fmnist_free(&ds);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/ctrain_mnist_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }

    check_true("class_names", !strcmp(fmnist_class_names[0], "T-shirt/top") &&
               !strcmp(fmnist_class_names[9], "Ankle boot"), "names %s .. %s",
               fmnist_class_names[0], fmnist_class_names[9]);

    test_shuffle();
    test_idx();
    test_idx_promise();

    struct stat sb;
    char synth[512];
    const char *src = FMNIST_DEFAULT_DIR;
    if (stat(FMNIST_DEFAULT_DIR, &sb) == 0) {
        FashionMnist ds;
        char err[1024];
        double t0 = now_s();
        int st = fmnist_load(&ds, NULL, err, sizeof err);
        double t1 = now_s();
        check_true("real.loads", st == IDX_OK, "%s", err);
        if (st == IDX_OK) {
            printf("  loaded Fashion-MNIST (%u train + %u test) from %s in %.3f s\n",
                   ds.split[0].n, ds.split[1].n, FMNIST_DEFAULT_DIR, t1 - t0);
            test_real(&ds);
            test_batch(&ds, FMNIST_TRAIN, "batch.train");
            test_batch(&ds, FMNIST_TEST, "batch.test");
        }
        fmnist_free(&ds);
    } else {
        printf("  skip real-data checks: %s not found (apt-get install "
               "dataset-fashion-mnist); damaged-file tests use a synthetic set\n",
               FMNIST_DEFAULT_DIR);
        snprintf(synth, sizeof synth, "%s/synth", tmp);
        write_set(synth, 1, 600, 1000, 1000, 28, 28, -1);
        src = synth;
    }
    test_fmnist_errors(src);

    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    check_true("cleanup", stat(tmp, &sb) != 0, "%s still exists", tmp);
    return check_summary();
}
