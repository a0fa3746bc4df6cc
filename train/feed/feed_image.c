/* feed_image.c — the image feeds (feed_image.h): flat Fashion-MNIST for the
 * MLP, the threaded loader over an ImageSource, and synthetic images made
 * once on the device. The first two stage their batches through
 * feed_stage.h; an ImageFolder's u8 rows are normalised on the device
 * (feed_decode.h) or decoded there (--decode gpu: feed_jpeg.h). */
#include "feed_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "data/fashion_mnist.h"
#include "data/image_source.h"
#include "data/loader.h"
#include "data/shuffle.h"
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "engine/philox.h"
#include "feed_decode.h"
#include "feed_jpeg.h"
#include "feed_gpu_wait.h"
#include "feed_stage.h"

/* ---- flat Fashion-MNIST (MLP) ---- */

typedef struct Flat {
    FashionMnist ds;
    uint32_t *perm;
    uint64_t perm_epoch, seed;
    FeedStage st;              /* set k: images f32 [maxb, 784], labels i32 [maxb] */
    uint32_t eval_pos;
    uint32_t *idx;
    Tensor *ex, *ey;           /* eval batch tensors (full size; views for the tail) */
} Flat;

static void flat_next(Feed *f, Ctx *c, uint64_t epoch, uint32_t b)
{
    Flat *F = (Flat *)f->impl;
    const FmnistSplit *tr = &F->ds.split[FMNIST_TRAIN];
    if (F->perm_epoch != epoch + 1) {
        shuffle_perm(F->perm, tr->n, F->seed, epoch);
        shuffle_shard(F->perm, tr->n, (uint32_t)c->dp_rank, (uint32_t)feed_world(c));
        F->perm_epoch = epoch + 1;
    }
    int k = feed_stage_next(&F->st);
    fmnist_batch_f32((float *)F->st.buf[k][0], (int32_t *)F->st.buf[k][1], &F->ds, FMNIST_TRAIN,
                     F->perm + (size_t)b * f->batch, f->batch, FMNIST_MEAN, FMNIST_STD);
    feed_stage_send(&F->st, c, k, f->in, NULL, 2);
}

static void flat_eval_start(Feed *f, Ctx *c) { (void)c; ((Flat *)f->impl)->eval_pos = 0; }

static int flat_eval_next(Feed *f, Ctx *c, Tensor **in, int *n)
{
    Flat *F = (Flat *)f->impl;
    const FmnistSplit *te = &F->ds.split[FMNIST_TEST];
    if (F->eval_pos >= te->n) return 0;
    int B = (int)F->ex->shape[0];
    int b = (int)((te->n - F->eval_pos) < (uint32_t)B ? te->n - F->eval_pos : (uint32_t)B);
    for (int i = 0; i < b; i++) F->idx[i] = F->eval_pos + (uint32_t)i;
    F->eval_pos += (uint32_t)b;
    int k = feed_stage_next(&F->st);
    fmnist_batch_f32((float *)F->st.buf[k][0], (int32_t *)F->st.buf[k][1], &F->ds, FMNIST_TEST,
                     F->idx, b, FMNIST_MEAN, FMNIST_STD);
    Tensor *const dst[2] = {F->ex, F->ey};
    const size_t bytes[2] = {(size_t)b * FMNIST_PIXELS * sizeof(float), (size_t)b * sizeof(int32_t)};
    feed_stage_send(&F->st, c, k, dst, bytes, 2);
    in[0] = tensor_view(c, F->ex->data, DT_F32, 2, (int64_t[]){b, FMNIST_PIXELS});
    in[1] = tensor_view(c, F->ey->data, DT_I32, 1, (int64_t[]){b});
    *n = b;
    return 1;
}

static void flat_free(Feed *f, Ctx *c)
{
    Flat *F = (Flat *)f->impl;
    ctx_sync(c);
    feed_stage_free(&F->st, c);
    tensor_release(F->ex);
    tensor_release(F->ey);
    free(F->perm);
    free(F->idx);
    fmnist_free(&F->ds);
    free(F);
}

void feed_flat_open(Feed *f, Ctx *c, const FeedSpec *s, const char *dir)
{
    Flat *F = (Flat *)calloc(1, sizeof *F);
    F->seed = s->seed;
    fmnist_load_or_die(&F->ds, dir);
    const FmnistSplit *tr = &F->ds.split[FMNIST_TRAIN];
    if ((uint32_t)s->batch > tr->n)
        ct_fatal_hint("pass a smaller --batch", "--batch %d is larger than the %u training images",
                      s->batch, tr->n);
    int E = s->eval_batch;
    size_t maxb = (size_t)(s->batch > E ? s->batch : E);
    const size_t bytes[2] = {maxb * FMNIST_PIXELS * sizeof(float), maxb * sizeof(int32_t)};
    feed_stage_init(&F->st, c, 2, bytes);
    F->perm = (uint32_t *)malloc(tr->n * sizeof(uint32_t));
    F->idx = (uint32_t *)malloc((size_t)E * sizeof(uint32_t));
    f->impl = F;
    f->n_in = 2;
    f->in[0] = tensor_new(c, DT_F32, 2, (int64_t[]){s->batch, FMNIST_PIXELS});
    f->in[1] = tensor_new(c, DT_I32, 1, (int64_t[]){s->batch});
    F->ex = tensor_new(c, DT_F32, 2, (int64_t[]){E, FMNIST_PIXELS});
    F->ey = tensor_new(c, DT_I32, 1, (int64_t[]){E});
    f->batches_per_epoch = (long)(shuffle_shard_count(tr->n, (uint32_t)feed_world(c)) /
                                  (uint32_t)s->batch);
    if (f->batches_per_epoch < 1)
        ct_fatal_hint("pass a smaller --batch or use fewer GPUs",
                      "%d ranks x --batch %d is more than the %u training images", feed_world(c),
                      s->batch, tr->n);
    f->classes = FMNIST_CLASSES;
    f->has_eval = 1;
    f->eval_rows = (long)F->ds.split[FMNIST_TEST].n;
    f->next = flat_next;
    f->eval_start = flat_eval_start;
    f->eval_next = flat_eval_next;
    f->free = flat_free;
    snprintf(f->desc, sizeof f->desc, "fashion-mnist (%u train, %u test, 784 features)", tr->n,
             F->ds.split[FMNIST_TEST].n);
}

/* ---- loader over an ImageSource ---- */

/* The loader's batch slots are pinned, so the copies can run async. */
static void *pinned_alloc(size_t bytes, void *user) { return mem_host_pinned((Ctx *)user, bytes); }
static void pinned_free(void *p, void *user) { mem_host_pinned_free((Ctx *)user, p); }

typedef struct Img {
    FashionMnist ds;
    int have_ds;
    ImageSource train, val;
    int have_val;
    Loader *L, *V;
    LoaderBatch *held[2];      /* batches whose copies may still be running */
    FeedStage st;              /* events only: the batches are the loader's pinned slots */
    uint64_t started_epoch;    /* epoch + 1 the train loader was started for */
    uint32_t next_batch;
    int S, workers;
    Tensor *ex, *ey;           /* the evaluation batch, held only while a pass runs */
    int eval_batch, eval_running;
    /* u8 rows (an ImageFolder): normalised on the device, or decoded there */
    FeedDecode decode;
    JpegGpu *up;               /* --decode cpu on a CUDA context: the normalising upload */
    JpegPipe *pipe;            /* --decode gpu */
    uint64_t images;           /* handed to the model (the CPU path) */
    char decode_desc[64];
    FeedGpuWait gw;            /* the GPU's stall for each batch */
} Img;

/* The rows of lb into x (n rows) and its labels into y, queued on c's
 * stream; set k's event follows them. */
static void img_send(Img *I, Ctx *c, int k, LoaderBatch *lb, Tensor *x, Tensor *y, int n)
{
    if (lb->u8) {
        const AugConfig *a = &I->train.aug;
        feed_u8_to_input(c, I->up, x, lb->u8, n, a->mean, a->std);
        const void *const src[1] = {lb->y};
        const size_t bytes[1] = {(size_t)n * sizeof(int32_t)};
        feed_stage_send_from(&I->st, c, k, &y, src, bytes, 1);
        return;
    }
    Tensor *const dst[2] = {x, y};
    const void *const src[2] = {lb->x, lb->y};
    const size_t bytes[2] = {(size_t)n * I->S * I->S * 3 * sizeof(float), (size_t)n * sizeof(int32_t)};
    feed_stage_send_from(&I->st, c, k, dst, src, bytes, 2);
}

static void img_next_batch(Feed *f, Ctx *c, uint64_t epoch, uint32_t b);

static void img_next(Feed *f, Ctx *c, uint64_t epoch, uint32_t b)
{
    Img *I = (Img *)f->impl;
    feed_gpu_wait_begin(&I->gw, c);
    if (I->pipe) jpipe_next(I->pipe, c, epoch, b, f->in[0], f->in[1]);
    else img_next_batch(f, c, epoch, b);
    feed_gpu_wait_end(&I->gw, c);
}

/* The CPU path's batch b: the loader's rows, uploaded. */
static void img_next_batch(Feed *f, Ctx *c, uint64_t epoch, uint32_t b)
{
    Img *I = (Img *)f->impl;
    if (I->started_epoch != epoch + 1 || I->next_batch != b) {
        /* a new epoch (or a jump): every held batch goes back first */
        for (int j = 0; j < 2; j++)
            if (I->held[j]) {
                feed_stage_wait(&I->st, j);
                loader_release(I->L, I->held[j]);
                I->held[j] = NULL;
            }
        loader_start(I->L, epoch, b);
        I->started_epoch = epoch + 1;
    }
    int k = feed_stage_flip(&I->st);
    if (I->held[k]) {
        feed_stage_wait(&I->st, k);
        loader_release(I->L, I->held[k]);
        I->held[k] = NULL;
    }
    LoaderBatch *lb = loader_next(I->L);
    CT_ASSERT(lb != NULL, "loader: epoch %llu ended before batch %u", (unsigned long long)epoch, b);
    img_send(I, c, k, lb, f->in[0], f->in[1], f->batch);
    I->held[k] = lb;
    I->images += (uint64_t)f->batch;
    I->next_batch = b + 1;
    if (I->next_batch == (uint32_t)f->batches_per_epoch) {
        /* the next epoch's batches are made while this one's last step runs
         * (held batches stay valid across loader_start) */
        loader_start(I->L, epoch + 1, 0);
        I->started_epoch = epoch + 2;
        I->next_batch = 0;
    }
}

/* GPU path: decode_s is the busier stage's time, max(the loader workers'
 * busy time / W, the decode thread's), so images / decode_s is what the
 * pipeline could deliver; decode_parallel 1. CPU path: the workers' busy
 * time over W workers. */
static void img_stats(Feed *f, FeedStats *s)
{
    Img *I = (Img *)f->impl;
    LoaderStats ls;
    loader_stats(I->L, &ls);
    memset(s, 0, sizeof *s);
    snprintf(s->decode, sizeof s->decode, "%s", I->decode_desc);
    s->gpu_wait_s = feed_gpu_wait_s(&I->gw);
    if (I->pipe) {
        JpegPipeStats ps;
        jpipe_stats(I->pipe, &ps);
        s->images = ps.images;
        s->wait_s = ps.wait_s;
        s->cpu_fallback = ps.cpu_fallback;
        double w = ls.busy_s / (double)I->workers;
        s->decode_s = w > ps.busy_s ? w : ps.busy_s;
        s->decode_parallel = 1;
        return;
    }
    s->images = I->images;
    s->wait_s = ls.wait_s;
    s->decode_s = ls.busy_s;
    s->decode_parallel = I->workers;
}

static void img_eval_start(Feed *f, Ctx *c)
{
    Img *I = (Img *)f->impl;
    /* an evaluation batch larger than the training batch would add its
     * f32 rows to the training peak (147 MiB at 256 x 224^2): held only
     * while a pass runs, when the step's activations are gone */
    if (!I->ex) {
        I->ex = tensor_new(c, DT_F32, 4, (int64_t[]){I->eval_batch, I->S, I->S, 3});
        I->ey = tensor_new(c, DT_I32, 1, (int64_t[]){I->eval_batch});
    }
    loader_start(I->V, 0, 0);
    I->eval_running = 1;
}

/* The pass is over (the caller released its views): the batch goes back. */
static int img_eval_end(Img *I)
{
    tensor_release(I->ex);
    tensor_release(I->ey);
    I->ex = I->ey = NULL;
    return 0;
}

static int img_eval_next(Feed *f, Ctx *c, Tensor **in, int *n)
{
    Img *I = (Img *)f->impl;
    int b, S = I->S;
    if (I->pipe) {
        b = jpipe_eval_next(I->pipe, c, I->V, I->ex, I->ey);
        if (!b) return img_eval_end(I);
    } else {
        LoaderBatch *lb = loader_next(I->V);
        if (!lb) return img_eval_end(I);
        b = lb->n;
        Tensor *const dst[2] = {I->ex, I->ey};
        if (lb->u8) {
            const AugConfig *a = &I->val.aug;
            feed_u8_to_input(c, I->up, I->ex, lb->u8, b, a->mean, a->std);
            const void *const src[1] = {lb->y};
            const size_t bytes[1] = {(size_t)b * sizeof(int32_t)};
            feed_stage_copy(c, dst + 1, src, bytes, 1);
        } else {
            const void *const src[2] = {lb->x, lb->y};
            const size_t bytes[2] = {(size_t)b * S * S * 3 * sizeof(float), (size_t)b * sizeof(int32_t)};
            feed_stage_copy(c, dst, src, bytes, 2);
        }
        ctx_sync(c);   /* evaluation is not timed: keep it simple */
        loader_release(I->V, lb);
    }
    in[0] = tensor_view(c, I->ex->data, DT_F32, 4, (int64_t[]){b, S, S, 3});
    in[1] = tensor_view(c, I->ey->data, DT_I32, 1, (int64_t[]){b});
    *n = b;
    return 1;
}

static void img_free(Feed *f, Ctx *c)
{
    Img *I = (Img *)f->impl;
    ctx_sync(c);
    jpipe_close(I->pipe);          /* before the loaders stop: its thread reads from L */
    for (int k = 0; k < 2; k++)
        if (I->held[k]) loader_release(I->L, I->held[k]);
    loader_stop(I->L);
    loader_free(I->L);
    if (I->V) { loader_stop(I->V); loader_free(I->V); }
    jpeg_gpu_close(I->up);
    feed_stage_free(&I->st, c);
    feed_gpu_wait_free(&I->gw);
    src_free(&I->train);
    if (I->have_val) src_free(&I->val);
    if (I->have_ds) fmnist_free(&I->ds);
    tensor_release(I->ex);
    tensor_release(I->ey);
    free(I);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* --decode for an ImageFolder: the GPU pipeline, or the CPU path's upload
 * decoder (CUDA contexts). */
static void img_open_decoder(Img *I, Ctx *c, const FeedSpec *s)
{
    char err[600], note[700];
    const char *hint;
    if (feed_decode_pick(&I->decode, s->decode, 1, c->device == DEV_CUDA, note, sizeof note, err,
                         sizeof err, &hint))
        ct_fatal_hint(hint, "%s", err);
    if (note[0]) LOG_W("%s", note);
    AugConfig dflt;                /* the ImageFolder source's mean and std */
    aug_config_default(&dflt, I->S);
    const AugConfig *a = &dflt;
    if (I->decode == FEED_DECODE_GPU) {
        I->pipe = jpipe_open(c, s->batch, I->S, a->mean, a->std, err, sizeof err);
        if (!I->pipe) {
            if (s->decode && !strcmp(s->decode, "gpu"))
                ct_fatal_hint("pass --decode cpu to decode the images on the CPU",
                              "--decode gpu: %s", err);
            LOG_W("decoding the images on the CPU: nvJPEG did not open: %s", err);
            I->decode = FEED_DECODE_CPU;
        }
    }
    if (I->pipe)
        snprintf(I->decode_desc, sizeof I->decode_desc, "gpu (nvJPEG %s, %d loader threads)",
                 jpipe_backend(I->pipe), s->workers);
    else
        snprintf(I->decode_desc, sizeof I->decode_desc, "cpu (libjpeg-turbo, %d threads)",
                 s->workers);
    if (!I->pipe && c->device == DEV_CUDA) {
        int mb = s->batch > s->eval_batch ? s->batch : s->eval_batch;
        I->up = jpeg_gpu_open(c, mb, I->S, 0, JPEG_GPU_UPLOAD, err, sizeof err);
        if (!I->up) ct_fatal("the image feed's upload: %s", err);
    }
}

static void img_open(Feed *f, Ctx *c, const FeedSpec *s, int kind, const char *arg)
{
    Img *I = (Img *)calloc(1, sizeof *I);
    char err[512];
    int S = s->image_size;
    I->S = S ? S : kind == 0 ? 32 : 224;
    I->workers = s->workers;
    if (kind == 0) {
        feed_decode_check_other(s->decode, s->data);
        snprintf(I->decode_desc, sizeof I->decode_desc, "cpu (Fashion-MNIST resize, %d threads)",
                 s->workers);
    } else {
        img_open_decoder(I, c, s);   /* before the scan: a --decode that cannot be had */
    }
    if (kind == 0) {                       /* fashion-mnist resized to RGB */
        if (!S) S = 32;
        fmnist_load_or_die(&I->ds, arg);
        I->have_ds = 1;
        src_fmnist_init(&I->train, &I->ds, FMNIST_TRAIN, S, NULL);
        src_fmnist_init(&I->val, &I->ds, FMNIST_TEST, S, NULL);
        I->have_val = 1;
    } else {                               /* ImageFolder: root, or root/train + root/val */
        if (!S) S = 224;
        char tr[1100], va[1100];
        snprintf(tr, sizeof tr, "%s/train", arg);
        snprintf(va, sizeof va, "%s/val", arg);
        int split = is_dir(tr);
        int st = src_imagefolder_open(&I->train, split ? tr : arg, S, NULL, err, sizeof err);
        if (st != 0) ct_fatal_hint(imagefolder_hint(st), "%s", err);
        if (split && is_dir(va)) {
            st = src_imagefolder_open(&I->val, va, S, NULL, err, sizeof err);
            if (st != 0) ct_fatal_hint(imagefolder_hint(st), "%s", err);
            /* labels are train's indices: val's classes matched by name, before any step */
            st = src_imagefolder_match(&I->val, &I->train, err, sizeof err);
            if (st != 0) ct_fatal_hint(imagefolder_hint(st), "%s", err);
            I->have_val = 1;
        }
    }
    if ((uint32_t)s->batch > I->train.n)
        ct_fatal_hint("pass a smaller --batch", "--batch %d is larger than the %u training images",
                      s->batch, I->train.n);
    LoaderConfig lc;
    memset(&lc, 0, sizeof lc);
    lc.batch = s->batch;
    lc.workers = s->workers;
    /* each decode thread holds two batches (the one it decodes, the one
     * before until that decode returns): four more slots stay for the workers */
    lc.slots = I->pipe ? 4 + 2 * jpipe_decoders(I->pipe) : 4;
    lc.train = 1;
    lc.seed = s->seed;
    lc.rank = (uint32_t)c->dp_rank;
    lc.world = (uint32_t)feed_world(c);
    lc.encoded = I->pipe != NULL;
    lc.cpu_kinds = I->pipe ? jpipe_cpu_kinds(I->pipe) : 0;
    lc.alloc = pinned_alloc;
    lc.free = pinned_free;
    lc.alloc_user = c;
    I->L = loader_init(&I->train, &lc);
    if (I->have_val) {
        lc.batch = s->eval_batch;
        lc.train = 0;
        lc.slots = 3;
        I->V = loader_init(&I->val, &lc);
        I->eval_batch = s->eval_batch;
    }
    feed_stage_init(&I->st, c, 0, NULL);
    f->impl = I;
    f->n_in = 2;
    f->in[0] = tensor_new(c, DT_F32, 4, (int64_t[]){s->batch, S, S, 3});
    f->in[1] = tensor_new(c, DT_I32, 1, (int64_t[]){s->batch});
    f->batches_per_epoch = (long)loader_batches(I->L);
    f->classes = I->train.classes;
    f->has_eval = I->have_val;
    f->eval_rows = I->have_val ? (long)I->val.n : 0;
    f->next = img_next;
    f->stats = img_stats;
    f->eval_start = img_eval_start;
    f->eval_next = img_eval_next;
    f->free = img_free;
    feed_gpu_wait_init(&I->gw, c);
    if (I->pipe) jpipe_start(I->pipe, I->L);
    snprintf(f->desc, sizeof f->desc, "%s (%u images, %d classes, %dx%d, %d workers, decode %s)",
             I->train.kind, I->train.n, I->train.classes, S, S, s->workers,
             I->pipe ? "gpu" : "cpu");
}

/* ---- synthetic, generated once on the device ---- */

static void syn_next(Feed *f, Ctx *c, uint64_t epoch, uint32_t b) { (void)f; (void)c; (void)epoch; (void)b; }
static void syn_free(Feed *f, Ctx *c) { (void)f; (void)c; }

void feed_fmnist_images_open(Feed *f, Ctx *c, const FeedSpec *s, const char *dir)
{
    img_open(f, c, s, 0, dir);
}

void feed_imagefolder_open(Feed *f, Ctx *c, const FeedSpec *s, const char *root)
{
    if (!is_dir(root))
        ct_fatal_hint("pass --data synthetic to measure throughput without a data set, "
                      "--data fashion-mnist, or an ImageFolder root (DIR/CLASS/*.jpg)",
                      "cannot open %s: not a folder", root);
    img_open(f, c, s, 1, root);
}

void feed_synthetic_images_open(Feed *f, Ctx *c, const FeedSpec *s)
{
    int S = s->image_size ? s->image_size : 224, K = s->classes ? s->classes : 1000;
    size_t n = (size_t)s->batch * S * S * 3;
    float *x = (float *)malloc(n * sizeof(float));
    int32_t *y = (int32_t *)malloc((size_t)s->batch * sizeof(int32_t));
    if (!x || !y)
        ct_fatal_hint("use a smaller --batch or --image-size",
                      "out of host memory generating a synthetic batch of %zu values", n);
    /* data parallel: rank r makes rows r B .. r B + B - 1 of one batch of world x B */
    uint64_t r = (uint64_t)c->dp_rank;
    #pragma omp parallel for if (n > 65536)
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * philox_uniform(s->seed, 0, r * n + i) - 1.0f;
    for (int i = 0; i < s->batch; i++)
        y[i] = (int32_t)(philox_u32(s->seed, 1ull << 40, r * (uint64_t)s->batch + (uint64_t)i) %
                         (uint32_t)K);
    f->n_in = 2;
    f->in[0] = tensor_from_host(c, x, DT_F32, 4, (int64_t[]){s->batch, S, S, 3});
    f->in[1] = tensor_from_host(c, y, DT_I32, 1, (int64_t[]){s->batch});
    free(x);
    free(y);
    f->batches_per_epoch = 1000000000L;   /* no epochs: run --steps */
    f->classes = K;
    f->has_eval = 0;
    f->next = syn_next;
    f->free = syn_free;
    snprintf(f->desc, sizeof f->desc, "synthetic on the device (%dx%dx3, %d classes)", S, S, K);
}
