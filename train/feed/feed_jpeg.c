/* feed_jpeg.c — the GPU decode path of the image feed (feed_jpeg.h).
 *
 * Staging buffer states (under mu):
 *   FREE -> BUSY (the decode thread fills it) -> READY (batch (epoch, b) is
 *   queued on the decode stream, ready[k] recorded) -> TAKEN (jpipe_next
 *   queues its copies, records consumed[k]) -> FREE
 * The thread fills the buffers in turn (next_k). A restart (a jump in the
 * trainer's order) clears `running`, bumps `gen` (a batch the thread was
 * decoding for the old order is dropped when it comes back), waits until
 * the thread is parked (`active` 0), and only then touches the loader.
 *
 * Lifetimes of a loader batch the thread decoded (jpeg_gpu.h's rules): its
 * file bytes until the next jpeg_gpu_decode call has returned, its pixels
 * until the stream has passed the upload; so the thread keeps the last
 * batch (`held`) and releases it after the next decode, once ready[k] of
 * that batch has completed.
 *
 * The JpegGpu and the per-call scratch arrays are used under dec_mu: the
 * decode thread, evaluation on the trainer's thread and jpeg_gpu_reserve
 * (the trainer's thread, between steps) take turns.
 */
#include "feed_jpeg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"

#ifndef CTRAIN_CUDA

#define NO_CUDA "this build has no CUDA (built with CUDA=0, or without nvcc, cuDNN, cuBLAS or " \
                "NCCL): --decode gpu needs the CUDA build"

JpegPipe *jpipe_open(Ctx *c, int batch, int eval_batch, int S, const float mean[3],
                     const float std[3], char *err, size_t errlen)
{
    (void)c, (void)batch, (void)eval_batch, (void)S, (void)mean, (void)std;
    ct_fail(err, errlen, -1, NO_CUDA);
    return NULL;
}

unsigned jpipe_cpu_kinds(const JpegPipe *p) { (void)p; return ~0u; }
const char *jpipe_backend(const JpegPipe *p) { (void)p; return "none"; }
void jpipe_start(JpegPipe *p, Loader *L) { (void)p, (void)L; ct_fatal(NO_CUDA); }

void jpipe_next(JpegPipe *p, Ctx *c, uint64_t epoch, uint32_t b, Tensor *x, Tensor *y)
{
    (void)p, (void)c, (void)epoch, (void)b, (void)x, (void)y;
    ct_fatal(NO_CUDA);
}

int jpipe_eval_next(JpegPipe *p, Ctx *c, Loader *V, Tensor *x, Tensor *y)
{
    (void)p, (void)c, (void)V, (void)x, (void)y;
    ct_fatal(NO_CUDA);
}

void jpipe_stats(JpegPipe *p, JpegPipeStats *s) { (void)p; memset(s, 0, sizeof *s); }
void jpipe_close(JpegPipe *p) { (void)p; }

#else

#include <pthread.h>
#include <time.h>
#include "data/imagefolder.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "jpeg_gpu.h"

enum { STAGE_FREE, STAGE_BUSY, STAGE_READY, STAGE_TAKEN };

typedef struct {
    Tensor *x, *y;                 /* f32 [B, S, S, 3], i32 [B] on the device */
    int state;
    uint64_t epoch;
    uint32_t batch;
    int n_cpu;                     /* rows of it decoded on the CPU */
    cudaEvent_t ready, consumed;
} Stage;

struct JpegPipe {
    Ctx *c;
    JpegGpu *g;
    JpegGpuBackend backend;
    int S, B, max_batch;
    float mean[3], std[3];
    cudaStream_t stream;           /* the decode thread's */
    Loader *L;
    uint32_t nb;                   /* training batches an epoch */
    /* one decode call's scratch [max_batch], and the decoder: under dec_mu */
    pthread_mutex_t dec_mu;
    const uint8_t **bytes;
    size_t *lens;
    JpegGpuInfo *info;
    JpegGpuBox *boxes;
    uint8_t *fb;
    int *rows;
    /* shared by the thread and jpipe_next: under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int have_thread, running, quit, active;
    uint64_t gen;
    uint64_t loader_epoch;         /* the epoch the training loader is on */
    int next_k;
    Stage st[2];
    int failed;
    char err[1024];
    const char *hint;
    JpegGpuStats gstats;           /* after the thread's last decode */
    JpegPipeStats stats;
    /* the decode thread's own */
    LoaderBatch *held;             /* the last batch it decoded */
    int held_k;
    /* the trainer's thread's own */
    int started, logged;
    uint64_t want_epoch;
    uint32_t want_batch;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

unsigned jpipe_cpu_kinds(const JpegPipe *p)
{
    /* 4:2:0 colour only on the GPU: one nvJPEG call of one layout a batch
     * (train/feed/nvjpeg_batch.h); a batch's few gray / 4:4:4 files are
     * decoded by the loader threads beside it */
    unsigned k = SRC_CPU_PNG | SRC_CPU_CMYK | SRC_CPU_NOT420;
    /* the engines take baseline Huffman JPEGs only (jpeg_gpu.h) */
    if (p->backend == JPEG_GPU_HARDWARE) k |= SRC_CPU_PROGRESSIVE;
    return k;
}

const char *jpipe_backend(const JpegPipe *p) { return jpeg_gpu_backend_name(p->backend); }

/* Batch lb into rows 0..n-1 of x and y, queued on s: the kept files through
 * nvJPEG, the CPU rows (the workers', then any nvJPEG refused, decoded
 * here) through the u8 upload. *n_cpu: the CPU rows. 0, or a negative
 * status with err and *hint. */
static int pipe_decode(JpegPipe *P, LoaderBatch *lb, Tensor *x, Tensor *y, cudaStream_t s,
                       int *n_cpu, JpegGpuStats *gs, char *err, size_t errlen,
                       const char **hint)
{
    const int n = lb->n, S = P->S;
    const size_t row = (size_t)S * S * 3;
    CT_ASSERT(n <= P->max_batch && lb->enc && lb->u8, "jpipe: a batch of %d (at most %d) "
              "without encoded rows", n, P->max_batch);
    pthread_mutex_lock(&P->dec_mu);
    int m = 0;
    for (int r = 0; r < n; r++) {   /* CPU rows to the front, in order (m <= r) */
        const SrcEncoded *e = &lb->enc[r];
        P->bytes[r] = e->bytes;
        P->lens[r] = e->bytes ? e->n : 0;
        P->boxes[r].ay = e->ay;
        P->boxes[r].ax = e->ax;
        P->boxes[r].flip = e->flip;
        if (e->bytes) continue;
        if (m != r) memcpy(lb->u8 + (size_t)m * row, lb->u8 + (size_t)r * row, row);
        P->rows[m++] = r;
    }
    jpeg_gpu_probe(P->g, P->info, P->bytes, P->lens, n);   /* NULL bytes: not taken */
    for (int r = 0; r < n; r++) {   /* the crop was drawn on img_header's size */
        const ImgInfo *h = &lb->enc[r].info;
        if (P->bytes[r] && (P->info[r].h != h->height || P->info[r].w != h->width))
            P->info[r].gpu = JPEG_GPU_FORMAT;
    }
    *hint = "pass --decode cpu to decode the images on the CPU";
    int rc = jpeg_gpu_decode(P->g, x, P->fb, P->bytes, P->lens, P->info, P->boxes, n, P->mean,
                             P->std, s, err, errlen);
    for (int r = 0; !rc && r < n; r++) {
        if (!P->bytes[r] || !P->fb[r]) continue;
        rc = src_encoded_decode(lb->u8 + (size_t)m * row, &lb->enc[r], S, err, errlen);
        if (rc) *hint = imagefolder_hint(rc);
        else P->rows[m++] = r;
    }
    if (!rc)
        rc = jpeg_gpu_upload_u8(P->g, x, P->rows, lb->u8, m, P->mean, P->std, s, err, errlen);
    if (!rc) {
        cudaError_t e = cudaMemcpyAsync(y->data, lb->y, (size_t)n * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, s);
        if (e != cudaSuccess) rc = ct_fail(err, errlen, -1, "the labels' copy: %s",
                                           cudaGetErrorString(e));
    }
    if (gs) jpeg_gpu_stats(P->g, gs);
    pthread_mutex_unlock(&P->dec_mu);
    *n_cpu = m;
    return rc;
}

/* The decode thread's last batch back to the loader, once its work on the
 * stream has run. */
static void pipe_release_held(JpegPipe *P)
{
    if (!P->held) return;
    CUDA_CHECK(cudaStreamSynchronize(P->stream));
    loader_release(P->L, P->held);
    P->held = NULL;
}

static void *pipe_main(void *arg)
{
    JpegPipe *P = arg;
    CUDA_CHECK(cudaSetDevice(P->c->device_id));
    char err[1024];
    pthread_mutex_lock(&P->mu);
    for (;;) {
        while (!P->quit && (!P->running || P->st[P->next_k].state != STAGE_FREE))
            pthread_cond_wait(&P->cv, &P->mu);
        if (P->quit) break;
        const uint64_t gen = P->gen;
        const int k = P->next_k;
        Stage *sg = &P->st[k];
        sg->state = STAGE_BUSY;
        P->active = 1;
        pthread_mutex_unlock(&P->mu);

        LoaderBatch *lb = NULL;
        const char *hint = NULL;
        int rc = loader_try_next(P->L, &lb, err, sizeof err), n_cpu = 0, decoded = 0;
        double t0 = now_s();
        JpegGpuStats gs;
        if (rc) {
            hint = imagefolder_hint(rc);
        } else if (!lb) {                  /* the epoch's end: the next one starts now */
            pipe_release_held(P);
            loader_start(P->L, ++P->loader_epoch, 0);
        } else {
            CUDA_CHECK(cudaStreamWaitEvent(P->stream, sg->consumed, 0));
            rc = pipe_decode(P, lb, sg->x, sg->y, P->stream, &n_cpu, &gs, err, sizeof err, &hint);
            if (!rc) CUDA_CHECK(cudaEventRecord(sg->ready, P->stream));
            /* the previous batch's bytes were needed until this decode returned,
             * its pixels until its upload ran (ready of its buffer, the other one:
             * a restart releases the held batch, so it never shares k) */
            if (P->held) {
                CUDA_CHECK(cudaEventSynchronize(P->st[P->held_k].ready));
                loader_release(P->L, P->held);
            }
            P->held = lb;
            P->held_k = k;
            decoded = 1;
        }
        double t1 = now_s();

        pthread_mutex_lock(&P->mu);
        P->active = 0;
        sg->state = STAGE_FREE;
        if (decoded) {
            P->stats.busy_s += t1 - t0;
            P->gstats = gs;
            P->next_k = k ^ 1;
        }
        if (rc) {
            P->failed = rc;
            snprintf(P->err, sizeof P->err, "%s", err);
            P->hint = hint;
            P->running = 0;
        } else if (decoded && gen == P->gen) {
            sg->state = STAGE_READY;
            sg->epoch = lb->epoch;
            sg->batch = lb->batch;
            sg->n_cpu = n_cpu;
        }
        pthread_cond_broadcast(&P->cv);
    }
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

static void pipe_fail_fatal(JpegPipe *P)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", P->err);
    const char *hint = P->hint;
    pthread_mutex_unlock(&P->mu);
    ct_fatal_hint(hint, "%s", msg);
}

/* The loader restarted at (epoch, b) with the thread parked (caller: not
 * holding mu). */
static void pipe_restart(JpegPipe *P, uint64_t epoch, uint32_t b)
{
    pthread_mutex_lock(&P->mu);
    P->running = 0;
    P->gen++;
    pthread_cond_broadcast(&P->cv);
    while (P->active) pthread_cond_wait(&P->cv, &P->mu);
    if (P->failed) pipe_fail_fatal(P);
    pipe_release_held(P);
    for (int k = 0; k < 2; k++) P->st[k].state = STAGE_FREE;
    loader_start(P->L, epoch, b);
    P->loader_epoch = epoch;
    P->running = 1;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    P->started = 1;
    P->want_epoch = epoch;
    P->want_batch = b;
}

static void pipe_log_memory(JpegPipe *P, const JpegGpuStats *gs)
{
    const size_t stage = P->st[0].x->nbytes + P->st[0].y->nbytes;
    const size_t total = 2 * stage + gs->buffer_bytes + gs->lib_device_bytes;
    char a[32], b[32], d[32], e[32], f[32];
    LOG_I("--decode gpu (nvJPEG %s backend): the decode path holds %s of device memory: "
          "staging 2 x %s, decode buffer and u8 upload %s, nvJPEG's own %s (and %s of pinned "
          "host memory)", jpipe_backend(P), mem_fmt(a, sizeof a, total),
          mem_fmt(b, sizeof b, stage), mem_fmt(d, sizeof d, gs->buffer_bytes),
          mem_fmt(e, sizeof e, gs->lib_device_bytes), mem_fmt(f, sizeof f, gs->lib_pinned_bytes));
}

void jpipe_next(JpegPipe *P, Ctx *c, uint64_t epoch, uint32_t b, Tensor *x, Tensor *y)
{
    if (!P->started || epoch != P->want_epoch || b != P->want_batch) pipe_restart(P, epoch, b);
    double t0 = now_s();
    pthread_mutex_lock(&P->mu);
    int k = -1;
    for (;;) {
        for (int j = 0; j < 2; j++)
            if (P->st[j].state == STAGE_READY && P->st[j].epoch == epoch && P->st[j].batch == b)
                k = j;
        if (k >= 0 || P->failed) break;
        pthread_cond_wait(&P->cv, &P->mu);
    }
    if (P->failed) pipe_fail_fatal(P);
    Stage *sg = &P->st[k];
    sg->state = STAGE_TAKEN;
    pthread_mutex_unlock(&P->mu);
    double waited = now_s() - t0;

    CUDA_CHECK(cudaStreamWaitEvent(c->stream, sg->ready, 0));
    mem_copy(c, x->data, sg->x->data, x->numel * sizeof(float));
    mem_copy(c, y->data, sg->y->data, y->numel * sizeof(int32_t));
    CUDA_CHECK(cudaEventRecord(sg->consumed, c->stream));

    pthread_mutex_lock(&P->mu);
    sg->state = STAGE_FREE;
    P->stats.images += (uint64_t)P->B;
    P->stats.cpu_fallback += (uint64_t)sg->n_cpu;
    P->stats.wait_s += waited;
    JpegGpuStats gs = P->gstats;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);

    P->want_epoch = b + 1 < P->nb ? epoch : epoch + 1;
    P->want_batch = b + 1 < P->nb ? b + 1 : 0;
    if (!P->logged) {
        pipe_log_memory(P, &gs);
        P->logged = 1;
    }
    if (gs.want_bytes) {   /* images found no room: the decoder's buffer grows, from here */
        char err[512], mb[32];
        pthread_mutex_lock(&P->dec_mu);
        int rc = jpeg_gpu_reserve(P->g, gs.want_bytes, err, sizeof err);
        jpeg_gpu_stats(P->g, &gs);
        pthread_mutex_unlock(&P->dec_mu);
        if (rc) ct_fatal("%s", err);
        pthread_mutex_lock(&P->mu);
        P->gstats.want_bytes = 0;
        pthread_mutex_unlock(&P->mu);
        LOG_I("--decode gpu: the decode buffer grew to %s for larger images",
              mem_fmt(mb, sizeof mb, gs.buffer_bytes));
    }
}

int jpipe_eval_next(JpegPipe *P, Ctx *c, Loader *V, Tensor *x, Tensor *y)
{
    char err[1024];
    LoaderBatch *lb;
    int rc = loader_try_next(V, &lb, err, sizeof err);
    if (rc) ct_fatal_hint(imagefolder_hint(rc), "%s", err);
    if (!lb) return 0;
    const char *hint;
    int n_cpu, n = lb->n;
    rc = pipe_decode(P, lb, x, y, c->stream, &n_cpu, NULL, err, sizeof err, &hint);
    if (rc) ct_fatal_hint(hint, "%s", err);
    ctx_sync(c);   /* evaluation is not timed: the batch is done before it goes back */
    loader_release(V, lb);
    return n;
}

void jpipe_stats(JpegPipe *P, JpegPipeStats *s)
{
    pthread_mutex_lock(&P->mu);
    *s = P->stats;
    pthread_mutex_unlock(&P->mu);
}

void jpipe_start(JpegPipe *P, Loader *L)
{
    P->L = L;
    P->nb = loader_batches(L);
    int rc = pthread_create(&P->thread, NULL, pipe_main, P);
    if (rc) ct_fatal_hint("use fewer --workers", "cannot start the GPU decode thread: %s",
                          strerror(rc));
    P->have_thread = 1;
}

void jpipe_close(JpegPipe *P)
{
    if (!P) return;
    if (P->have_thread) {
        pthread_mutex_lock(&P->mu);
        P->quit = 1;
        pthread_cond_broadcast(&P->cv);
        pthread_mutex_unlock(&P->mu);
        pthread_join(P->thread, NULL);
    }
    if (P->stream) CUDA_CHECK(cudaStreamSynchronize(P->stream));
    if (P->held) loader_release(P->L, P->held);
    jpeg_gpu_close(P->g);
    for (int k = 0; k < 2; k++) {
        if (P->st[k].ready) cudaEventDestroy(P->st[k].ready);
        if (P->st[k].consumed) cudaEventDestroy(P->st[k].consumed);
        tensor_release(P->st[k].x);
        tensor_release(P->st[k].y);
    }
    if (P->stream) cudaStreamDestroy(P->stream);
    pthread_mutex_destroy(&P->mu);
    pthread_mutex_destroy(&P->dec_mu);
    pthread_cond_destroy(&P->cv);
    free(P->bytes);
    free(P->lens);
    free(P->info);
    free(P->boxes);
    free(P->fb);
    free(P->rows);
    free(P);
}

JpegPipe *jpipe_open(Ctx *c, int batch, int eval_batch, int S, const float mean[3],
                     const float std[3], char *err, size_t errlen)
{
    const int mb = batch > eval_batch ? batch : eval_batch;
    JpegGpu *g = jpeg_gpu_open(c, mb, S, 0, JPEG_GPU_AUTO, err, errlen);
    if (!g) return NULL;
    /* nvJPEG converts each image on internal streams of the lowest priority:
     * a compute stream above them starves those kernels until each step
     * ends (engine/ctx.h) */
    ctx_stream_lowest_priority(c);
    jpeg_gpu_set_call_size(g, batch);   /* training calls unpadded to the evaluation batch */
    JpegPipe *P = calloc(1, sizeof *P);
    if (!P) ct_fatal("out of host memory");
    P->c = c;
    P->g = g;
    JpegGpuStats gs;
    jpeg_gpu_stats(g, &gs);
    P->backend = gs.backend;
    P->S = S;
    P->B = batch;
    P->max_batch = mb;
    memcpy(P->mean, mean, sizeof P->mean);
    memcpy(P->std, std, sizeof P->std);
    size_t n = (size_t)mb;
    P->bytes = calloc(n, sizeof *P->bytes);
    P->lens = calloc(n, sizeof *P->lens);
    P->info = calloc(n, sizeof *P->info);
    P->boxes = calloc(n, sizeof *P->boxes);
    P->fb = calloc(n, 1);
    P->rows = calloc(n, sizeof *P->rows);
    if (!P->bytes || !P->lens || !P->info || !P->boxes || !P->fb || !P->rows)
        ct_fatal("out of host memory");
    pthread_mutex_init(&P->mu, NULL);
    pthread_mutex_init(&P->dec_mu, NULL);
    pthread_cond_init(&P->cv, NULL);
    CUDA_CHECK(cudaStreamCreateWithFlags(&P->stream, cudaStreamNonBlocking));
    for (int k = 0; k < 2; k++) {
        Stage *sg = &P->st[k];
        sg->x = tensor_new(c, DT_F32, 4, (int64_t[]){batch, S, S, 3});
        sg->y = tensor_new(c, DT_I32, 1, (int64_t[]){batch});
        CUDA_CHECK(cudaEventCreateWithFlags(&sg->ready, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&sg->consumed, cudaEventDisableTiming));
    }
    ctx_sync(c);   /* the pool's allocations are ordered on c's stream; the thread's is another */
    return P;
}

#endif /* CTRAIN_CUDA */
