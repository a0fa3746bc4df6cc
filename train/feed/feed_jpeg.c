/* feed_jpeg.c — the GPU decode path of the image feed (feed_jpeg.h).
 *
 * Staging buffer states (under mu):
 *   FREE -> BUSY (a decode thread fills it) -> READY (batch (epoch, b) is
 *   queued on that thread's stream, ready[k] recorded) -> TAKEN (jpipe_next
 *   queues its copies, records consumed[k]) -> FREE
 * A thread takes any free buffer, then the loader's next batch (the loader
 * hands batches out in order, under its own lock). A restart (a jump in
 * the trainer's order) clears `running`, bumps `gen` (a batch a thread was
 * decoding for the old order is dropped when it comes back), waits until
 * every thread is parked (`active` 0), and only then touches the loader.
 *
 * Lifetimes of a loader batch a thread decoded (jpeg_gpu.h's rules): its
 * file bytes until that thread's next jpeg_gpu_decode call has returned,
 * its pixels until the thread's stream has passed the upload; so each
 * thread keeps its last batch (`held`) and releases it after its next
 * decode, once the event `done` recorded after the held batch's work has
 * completed.
 *
 * Each decoder's JpegGpu and per-call scratch are used under its own mu:
 * its thread, and for decoder 0 evaluation on the trainer's thread, and
 * jpeg_gpu_reserve (the trainer's thread, between steps) take turns.
 */
#include "feed_jpeg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"

#ifndef CTRAIN_CUDA

#define NO_CUDA "this build has no CUDA (built with CUDA=0, or without nvcc, cuDNN, cuBLAS or " \
                "NCCL): --decode gpu needs the CUDA build"

JpegPipe *jpipe_open(Ctx *c, int batch, int S, const float mean[3], const float std[3],
                     char *err, size_t errlen)
{
    (void)c, (void)batch, (void)S, (void)mean, (void)std;
    ct_fail(err, errlen, -1, NO_CUDA);
    return NULL;
}

unsigned jpipe_cpu_kinds(const JpegPipe *p)
{
    (void)p;
    return SRC_CPU_PNG | SRC_CPU_CMYK | SRC_CPU_PROGRESSIVE | SRC_CPU_NOT420;
}
const char *jpipe_backend(const JpegPipe *p) { (void)p; return "none"; }
int jpipe_decoders(const JpegPipe *p) { (void)p; return 1; }
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
#include "engine/settings.h"
#include "jpeg_gpu.h"

enum { STAGE_FREE, STAGE_BUSY, STAGE_READY, STAGE_TAKEN };
enum { MAX_DECODERS = 4, MAX_STAGES = MAX_DECODERS + 1 };

typedef struct {
    Tensor *x, *y;                 /* f32 [B, S, S, 3], i32 [B] on the device */
    int state;
    uint64_t epoch;
    uint32_t batch;
    int n_cpu;                     /* rows of it decoded on the CPU */
    cudaEvent_t ready, consumed;
} Stage;

typedef struct JpegPipe JpegPipe;

/* One decode thread's own: its decoder, stream and per-call scratch
 * [B] (under mu: the thread, and for decoder 0 evaluation and
 * jpeg_gpu_reserve on the trainer's thread, take turns), and the last batch
 * it decoded. */
typedef struct {
    JpegPipe *P;
    JpegGpu *g;
    cudaStream_t stream;
    pthread_mutex_t mu;
    const uint8_t **bytes;
    size_t *lens;
    JpegGpuInfo *info;
    JpegGpuBox *boxes;
    uint8_t *fb;
    int *rows;
    pthread_t thread;
    int have_thread;
    LoaderBatch *held;             /* the thread's own */
    cudaEvent_t done;              /* after the held batch's work on stream */
    JpegGpuStats gstats;           /* after its last decode (under P->mu) */
    /* where the thread's time went (under P->mu), for the closing line */
    double t_free, t_loader, t_decode, t_held;
    long batches;
} Decoder;

struct JpegPipe {
    Ctx *c;
    JpegGpuBackend backend;
    int S, B;                      /* B: the training batch, the most a decode call takes */
    float mean[3], std[3];
    Loader *L;
    uint32_t nb;                   /* training batches an epoch */
    int nd, ns;                    /* decode threads, staging buffers (nd + 1) */
    Decoder d[MAX_DECODERS];
    /* shared by the threads and jpipe_next: under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, quit, active;     /* active: decoders decoding */
    uint64_t gen;
    uint64_t loader_epoch;         /* the epoch the training loader is on */
    Stage st[MAX_STAGES];
    int failed;
    char err[1024];
    const char *hint;
    double busy_s;                 /* the threads' decoding time, summed */
    JpegPipeStats stats;
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

int jpipe_decoders(const JpegPipe *p) { return p->nd; }

/* Batch lb into rows 0..n-1 of x and y through decoder D, queued on s: the
 * kept files through nvJPEG, the CPU rows (the workers', then any nvJPEG
 * refused, decoded here) through the u8 upload; nothing is written to x or
 * y before s has passed out_after (NULL: no wait), and nvJPEG's own work is
 * queued before that wait (jpeg_gpu_out_after). *n_cpu: the CPU rows. 0, or
 * a negative status with err and *hint. */
static int pipe_decode(JpegPipe *P, Decoder *D, LoaderBatch *lb, Tensor *x, Tensor *y,
                       cudaStream_t s, cudaEvent_t out_after, int *n_cpu, JpegGpuStats *gs,
                       char *err, size_t errlen, const char **hint)
{
    const int n = lb->n, S = P->S;
    const size_t row = (size_t)S * S * 3;
    CT_ASSERT(n <= P->B && lb->enc && lb->u8, "jpipe: a batch of %d (at most %d) "
              "without encoded rows", n, P->B);
    pthread_mutex_lock(&D->mu);
    int m = 0;
    for (int r = 0; r < n; r++) {   /* CPU rows to the front, in order (m <= r) */
        const SrcEncoded *e = &lb->enc[r];
        D->bytes[r] = e->bytes;
        D->lens[r] = e->bytes ? e->n : 0;
        D->boxes[r].ay = e->ay;
        D->boxes[r].ax = e->ax;
        D->boxes[r].flip = e->flip;
        if (e->bytes) continue;
        if (m != r) memcpy(lb->u8 + (size_t)m * row, lb->u8 + (size_t)r * row, row);
        D->rows[m++] = r;
    }
    jpeg_gpu_probe(D->g, D->info, D->bytes, D->lens, n);   /* NULL bytes: not taken */
    for (int r = 0; r < n; r++) {   /* the crop was drawn on img_header's size */
        const ImgInfo *h = &lb->enc[r].info;
        if (D->bytes[r] && (D->info[r].h != h->height || D->info[r].w != h->width))
            D->info[r].gpu = JPEG_GPU_FORMAT;
    }
    *hint = "pass --decode cpu to decode the images on the CPU";
    jpeg_gpu_out_after(D->g, out_after);
    int rc = jpeg_gpu_decode(D->g, x, D->fb, D->bytes, D->lens, D->info, D->boxes, n, P->mean,
                             P->std, s, err, errlen);
    for (int r = 0; !rc && r < n; r++) {
        if (!D->bytes[r] || !D->fb[r]) continue;
        rc = src_encoded_decode(lb->u8 + (size_t)m * row, &lb->enc[r], S, err, errlen);
        if (rc) *hint = imagefolder_hint(rc);
        else D->rows[m++] = r;
    }
    if (!rc)
        rc = jpeg_gpu_upload_u8(D->g, x, D->rows, lb->u8, m, P->mean, P->std, s, err, errlen);
    if (!rc) {
        cudaError_t e = cudaMemcpyAsync(y->data, lb->y, (size_t)n * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, s);
        if (e != cudaSuccess) rc = ct_fail(err, errlen, -1, "the labels' copy: %s",
                                           cudaGetErrorString(e));
    }
    if (gs) jpeg_gpu_stats(D->g, gs);
    pthread_mutex_unlock(&D->mu);
    *n_cpu = m;
    return rc;
}

/* A decode thread's last batch back to the loader, once its work on the
 * stream has run. */
static void pipe_release_held(JpegPipe *P, Decoder *D)
{
    if (!D->held) return;
    CUDA_CHECK(cudaStreamSynchronize(D->stream));
    loader_release(P->L, D->held);
    D->held = NULL;
}

static int free_stage(const JpegPipe *P)
{
    for (int k = 0; k < P->ns; k++)
        if (P->st[k].state == STAGE_FREE) return k;
    return -1;
}

/* One decode thread. With several, each takes a free staging buffer, then
 * the loader's next batch (the loader hands batches out in order, so each
 * buffer's batch is known when it is taken) and decodes it on its own
 * decoder and stream; jpipe_next takes the buffers by (epoch, batch),
 * whichever thread finished first. */
static void *pipe_main(void *arg)
{
    Decoder *D = arg;
    JpegPipe *P = D->P;
    CUDA_CHECK(cudaSetDevice(P->c->device_id));
    char err[1024];
    pthread_mutex_lock(&P->mu);
    for (;;) {
        const double tw = now_s();
        while (!P->quit && (!P->running || free_stage(P) < 0))
            pthread_cond_wait(&P->cv, &P->mu);
        if (P->quit) break;
        if (P->running) D->t_free += now_s() - tw;
        const uint64_t gen = P->gen, epoch_seen = P->loader_epoch;
        const int k = free_stage(P);
        Stage *sg = &P->st[k];
        sg->state = STAGE_BUSY;
        P->active++;
        pthread_mutex_unlock(&P->mu);

        LoaderBatch *lb = NULL;
        const char *hint = NULL;
        const double tl = now_s();
        int rc = loader_try_next(P->L, &lb, err, sizeof err), n_cpu = 0, decoded = 0;
        double t0 = now_s(), th = 0.0;
        JpegGpuStats gs;
        pthread_mutex_lock(&P->mu);
        const int stale = gen != P->gen;   /* a restart came while the loader answered */
        pthread_mutex_unlock(&P->mu);
        if (rc) {
            hint = imagefolder_hint(rc);
        } else if (lb && stale) {          /* its bytes never reached nvJPEG: back at once */
            loader_release(P->L, lb);
        } else if (!lb) {                  /* the epoch's end: the next one starts now */
            pipe_release_held(P, D);
            pthread_mutex_lock(&P->mu);    /* once, by the first thread to see it */
            if (P->loader_epoch == epoch_seen && gen == P->gen)
                loader_start(P->L, ++P->loader_epoch, 0);
            pthread_mutex_unlock(&P->mu);
        } else {
            /* the buffer's last batch copied out by the step before this one's
             * rows go in; nvJPEG's decode itself does not wait for that */
            rc = pipe_decode(P, D, lb, sg->x, sg->y, D->stream, sg->consumed, &n_cpu, &gs, err,
                             sizeof err, &hint);
            if (!rc) CUDA_CHECK(cudaEventRecord(sg->ready, D->stream));
            /* the previous batch's bytes were needed until this decode returned,
             * its pixels until its upload ran (D->done, recorded after it on this
             * stream: the buffer's own event may mark another thread's batch by
             * now) */
            if (D->held) {
                const double t = now_s();
                CUDA_CHECK(cudaEventSynchronize(D->done));
                th = now_s() - t;
                loader_release(P->L, D->held);
            }
            if (!rc) CUDA_CHECK(cudaEventRecord(D->done, D->stream));
            D->held = lb;
            decoded = 1;
        }
        double t1 = now_s();

        pthread_mutex_lock(&P->mu);
        P->active--;
        sg->state = STAGE_FREE;
        D->t_loader += t0 - tl;
        if (decoded) {
            P->busy_s += t1 - t0;
            D->gstats = gs;
            D->t_decode += t1 - t0 - th;
            D->t_held += th;
            D->batches++;
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

/* The loader restarted at (epoch, b) with the threads parked (caller: not
 * holding mu). */
static void pipe_restart(JpegPipe *P, uint64_t epoch, uint32_t b)
{
    pthread_mutex_lock(&P->mu);
    P->running = 0;
    P->gen++;
    pthread_cond_broadcast(&P->cv);
    while (P->active) pthread_cond_wait(&P->cv, &P->mu);
    if (P->failed) pipe_fail_fatal(P);
    for (int d = 0; d < P->nd; d++) pipe_release_held(P, &P->d[d]);
    for (int k = 0; k < P->ns; k++) P->st[k].state = STAGE_FREE;
    loader_start(P->L, epoch, b);
    P->loader_epoch = epoch;
    P->running = 1;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    P->started = 1;
    P->want_epoch = epoch;
    P->want_batch = b;
}

static void pipe_log_memory(JpegPipe *P)
{
    const size_t stage = P->st[0].x->nbytes + P->st[0].y->nbytes;
    size_t buf = 0, lib = 0, pinned = 0;
    for (int d = 0; d < P->nd; d++) {
        JpegGpuStats gs;
        pthread_mutex_lock(&P->d[d].mu);
        jpeg_gpu_stats(P->d[d].g, &gs);
        pthread_mutex_unlock(&P->d[d].mu);
        buf += gs.buffer_bytes;
        lib += gs.lib_device_bytes;
        pinned += gs.lib_pinned_bytes;
    }
    const size_t total = (size_t)P->ns * stage + buf + lib;
    char a[32], b[32], d[32], e[32], f[32];
    LOG_I("--decode gpu (nvJPEG %s backend, %d decode thread%s): the decode path holds %s of "
          "device memory: staging %d x %s, decode buffers and u8 upload %s, nvJPEG's own %s "
          "(and %s of pinned host memory)", jpipe_backend(P), P->nd, P->nd > 1 ? "s" : "",
          mem_fmt(a, sizeof a, total), P->ns, mem_fmt(b, sizeof b, stage),
          mem_fmt(d, sizeof d, buf), mem_fmt(e, sizeof e, lib), mem_fmt(f, sizeof f, pinned));
}

/* A decoder whose images found no room asked for a larger buffer: grow
 * every decoder's, from the trainer's thread (between steps). */
static void pipe_grow(JpegPipe *P, size_t want)
{
    char err[512], mb[32];
    size_t got = 0;
    for (int d = 0; d < P->nd; d++) {
        JpegGpuStats gs;
        pthread_mutex_lock(&P->d[d].mu);
        int rc = jpeg_gpu_reserve(P->d[d].g, want, err, sizeof err);
        jpeg_gpu_stats(P->d[d].g, &gs);
        pthread_mutex_unlock(&P->d[d].mu);
        if (rc) ct_fatal("%s", err);
        got = gs.buffer_bytes;
    }
    pthread_mutex_lock(&P->mu);
    for (int d = 0; d < P->nd; d++) P->d[d].gstats.want_bytes = 0;
    pthread_mutex_unlock(&P->mu);
    LOG_I("--decode gpu: the decode buffer%s grew to %s for larger images",
          P->nd > 1 ? "s" : "", mem_fmt(mb, sizeof mb, got));
}

void jpipe_next(JpegPipe *P, Ctx *c, uint64_t epoch, uint32_t b, Tensor *x, Tensor *y)
{
    if (!P->started || epoch != P->want_epoch || b != P->want_batch) pipe_restart(P, epoch, b);
    double t0 = now_s();
    pthread_mutex_lock(&P->mu);
    int k = -1;
    for (;;) {
        for (int j = 0; j < P->ns; j++)
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
    size_t want = 0;
    for (int d = 0; d < P->nd; d++)
        if (P->d[d].gstats.want_bytes > want) want = P->d[d].gstats.want_bytes;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);

    P->want_epoch = b + 1 < P->nb ? epoch : epoch + 1;
    P->want_batch = b + 1 < P->nb ? b + 1 : 0;
    if (!P->logged) {
        pipe_log_memory(P);
        P->logged = 1;
    }
    if (want) pipe_grow(P, want);   /* images found no room: the buffers grow, from here */
}

int jpipe_eval_next(JpegPipe *P, Ctx *c, Loader *V, Tensor *x, Tensor *y)
{
    char err[1024];
    LoaderBatch *lb;
    int rc = loader_try_next(V, &lb, err, sizeof err);
    if (rc) ct_fatal_hint(imagefolder_hint(rc), "%s", err);
    if (!lb) return 0;
    const char *hint;
    const int n = lb->n, S = P->S;
    /* in pieces of the training batch: the decoders and their buffers are
     * sized for it, not for a larger evaluation batch */
    for (int off = 0; off < n; off += P->B) {
        LoaderBatch part = *lb;
        const size_t row = (size_t)S * S * 3;
        part.n = n - off < P->B ? n - off : P->B;
        part.u8 = lb->u8 + (size_t)off * row;
        part.enc = lb->enc + off;
        part.y = lb->y + off;
        part.index = lb->index + off;
        Tensor *xp = tensor_view(c, (char *)x->data + (size_t)off * row * dtype_size(x->dtype),
                                 x->dtype, 4, (int64_t[]){part.n, S, S, 3});
        Tensor *yp = tensor_view(c, (int32_t *)y->data + off, DT_I32, 1, (int64_t[]){part.n});
        int n_cpu;
        rc = pipe_decode(P, &P->d[0], &part, xp, yp, c->stream, NULL, &n_cpu, NULL, err,
                         sizeof err, &hint);
        tensor_release(xp);
        tensor_release(yp);
        if (rc) ct_fatal_hint(hint, "%s", err);
    }
    ctx_sync(c);   /* evaluation is not timed: the batch is done before it goes back */
    loader_release(V, lb);
    return n;
}

void jpipe_stats(JpegPipe *P, JpegPipeStats *s)
{
    pthread_mutex_lock(&P->mu);
    *s = P->stats;
    s->busy_s = P->busy_s / P->nd;
    pthread_mutex_unlock(&P->mu);
}

void jpipe_start(JpegPipe *P, Loader *L)
{
    P->L = L;
    P->nb = loader_batches(L);
    for (int d = 0; d < P->nd; d++) {
        int rc = pthread_create(&P->d[d].thread, NULL, pipe_main, &P->d[d]);
        if (rc) ct_fatal_hint("use fewer --workers", "cannot start the GPU decode thread: %s",
                              strerror(rc));
        P->d[d].have_thread = 1;
    }
}

static void decoder_free(Decoder *D)
{
    if (D->stream) CUDA_CHECK(cudaStreamSynchronize(D->stream));
    jpeg_gpu_close(D->g);
    if (D->stream) cudaStreamDestroy(D->stream);
    if (D->done) cudaEventDestroy(D->done);
    pthread_mutex_destroy(&D->mu);
    free(D->bytes);
    free(D->lens);
    free(D->info);
    free(D->boxes);
    free(D->fb);
    free(D->rows);
}

/* Where the decode threads' time went, a batch on average (the closing
 * line): waiting for a free staging buffer (the step is the slower: good),
 * for the loader's next batch (the CPU side is), in the decode call (nvJPEG
 * and the CPU rows; nvJPEG's host and device time apart, evaluation's calls
 * on the first thread included), for the previous batch's work on the
 * stream to finish before its bytes go back. */
static void pipe_log_times(JpegPipe *P)
{
    double f = 0, l = 0, d = 0, h = 0, host = 0, dev = 0;
    long n = 0;
    for (int k = 0; k < P->nd; k++) {
        const Decoder *D = &P->d[k];
        f += D->t_free; l += D->t_loader; d += D->t_decode; h += D->t_held;
        host += D->gstats.host_s; dev += D->gstats.device_s;
        n += D->batches;
    }
    if (n < 1) return;
    const double ms = 1e3 / (double)n;
    LOG_I("--decode gpu: %ld batches on %d decode thread%s, a batch's time on its thread: "
          "waiting for a free staging buffer %.1f ms, for the loader %.1f ms, decoding %.1f ms "
          "(nvJPEG's calls: host %.1f ms, device %.1f ms), for the previous batch's upload "
          "%.1f ms", n, P->nd, P->nd > 1 ? "s" : "", f * ms, l * ms, d * ms, host * ms,
          dev * ms, h * ms);
}

void jpipe_close(JpegPipe *P)
{
    if (!P) return;
    pthread_mutex_lock(&P->mu);
    P->quit = 1;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    for (int d = 0; d < P->nd; d++)
        if (P->d[d].have_thread) pthread_join(P->d[d].thread, NULL);
    pipe_log_times(P);
    for (int d = 0; d < P->nd; d++) {
        if (P->d[d].stream) CUDA_CHECK(cudaStreamSynchronize(P->d[d].stream));
        if (P->d[d].held) loader_release(P->L, P->d[d].held);
    }
    for (int d = 0; d < P->nd; d++) decoder_free(&P->d[d]);
    for (int k = 0; k < P->ns; k++) {
        if (P->st[k].ready) cudaEventDestroy(P->st[k].ready);
        if (P->st[k].consumed) cudaEventDestroy(P->st[k].consumed);
        tensor_release(P->st[k].x);
        tensor_release(P->st[k].y);
    }
    pthread_mutex_destroy(&P->mu);
    pthread_cond_destroy(&P->cv);
    free(P);
}

/* A decoder's nvJPEG decoder, stream and scratch for batches of up to batch,
 * on backend pref (the first: JPEG_GPU_AUTO; the others: the first one's,
 * so that a batch's pixels do not depend on the thread that decoded it). */
static int decoder_open(JpegPipe *P, Decoder *D, int batch, JpegGpuBackend pref,
                        char *err, size_t errlen)
{
    D->P = P;
    D->g = jpeg_gpu_open(P->c, batch, P->S, 0, pref, err, errlen);
    if (!D->g) return -1;
    JpegGpuStats gs;
    jpeg_gpu_stats(D->g, &gs);
    if (pref != JPEG_GPU_AUTO && gs.backend != pref) {
        ct_fail(err, errlen, -1, "nvJPEG gave the %s backend where the first decoder has %s",
                jpeg_gpu_backend_name(gs.backend), jpeg_gpu_backend_name(pref));
        jpeg_gpu_close(D->g);
        D->g = NULL;
        return -1;
    }
    size_t n = (size_t)batch;
    D->bytes = calloc(n, sizeof *D->bytes);
    D->lens = calloc(n, sizeof *D->lens);
    D->info = calloc(n, sizeof *D->info);
    D->boxes = calloc(n, sizeof *D->boxes);
    D->fb = calloc(n, 1);
    D->rows = calloc(n, sizeof *D->rows);
    if (!D->bytes || !D->lens || !D->info || !D->boxes || !D->fb || !D->rows)
        ct_fatal("out of host memory");
    pthread_mutex_init(&D->mu, NULL);
    /* the device's lowest priority, behind the step (the trainer's stream
     * sits one above it, engine/context.c), or with CTRAIN_JPEG_PRIORITY=1
     * its highest, the decode's short kernels ahead of the step's as SMs
     * free up: measured alike (docs/results.md) */
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&D->stream, cudaStreamNonBlocking,
                                            setting_switch(SET_JPEG_PRIORITY) ? greatest : least));
    CUDA_CHECK(cudaEventCreateWithFlags(&D->done, cudaEventDisableTiming));
    return 0;
}

JpegPipe *jpipe_open(Ctx *c, int batch, int S, const float mean[3], const float std[3],
                     char *err, size_t errlen)
{
    JpegPipe *P = calloc(1, sizeof *P);
    if (!P) ct_fatal("out of host memory");
    P->c = c;
    P->S = S;
    P->B = batch;
    memcpy(P->mean, mean, sizeof P->mean);
    memcpy(P->std, std, sizeof P->std);
    P->nd = (int)setting_int(SET_JPEG_DECODERS);
    CT_ASSERT(P->nd >= 1 && P->nd <= MAX_DECODERS, "CTRAIN_JPEG_DECODERS %d", P->nd);
    P->ns = P->nd + 1;
    for (int d = 0; d < P->nd; d++) {
        JpegGpuBackend pref = d ? P->backend : JPEG_GPU_AUTO;
        if (decoder_open(P, &P->d[d], batch, pref, err, errlen)) {
            if (P->nd > 1) {   /* say which of the CTRAIN_JPEG_DECODERS failed */
                char why[512];
                snprintf(why, sizeof why, "%s", err);
                ct_fail(err, errlen, -1, "decode thread %d of %d (CTRAIN_JPEG_DECODERS): %s",
                        d + 1, P->nd, why);
            }
            for (int e = 0; e < d; e++) decoder_free(&P->d[e]);
            free(P);
            return NULL;
        }
        if (d == 0) {
            JpegGpuStats gs;
            jpeg_gpu_stats(P->d[0].g, &gs);
            P->backend = gs.backend;
        }
    }
    /* nvJPEG converts each image on internal streams of the lowest priority:
     * a compute stream above them starves those kernels until each step
     * ends (engine/ctx.h) */
    ctx_stream_lowest_priority(c);
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->cv, NULL);
    for (int k = 0; k < P->ns; k++) {
        Stage *sg = &P->st[k];
        sg->x = tensor_new(c, DT_F32, 4, (int64_t[]){batch, S, S, 3});
        sg->y = tensor_new(c, DT_I32, 1, (int64_t[]){batch});
        CUDA_CHECK(cudaEventCreateWithFlags(&sg->ready, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&sg->consumed, cudaEventDisableTiming));
    }
    ctx_sync(c);   /* the pool's allocations are ordered on c's stream; the threads' are others */
    return P;
}

#endif /* CTRAIN_CUDA */
