/* jpeg_gpu_probe.c — how fast the GPU image path decodes: N generated
 * 460x375 JPEGs (4:2:0, quality Q, the photo-like pattern of
 * tests/jpeg_fixture.h) in batches through train/feed/jpeg_gpu.h —
 * probe, nvJPEG batched decode, RandomResizedCrop + flip + normalise into a
 * bf16 [B, 224, 224, 3] tensor — once per backend (hardware engines, GPU
 * hybrid), and the CPU path's device half (u8 upload + normalise) for
 * comparison. Not a test: a measurement for the lead's notes.
 *
 *   make build/jpeg_gpu_probe   (CUDA builds; `make` builds it too)
 *   build/jpeg_gpu_probe [N [BATCH [ROUNDS [Q [mix]]]]]   default 1024 256 8 90
 * mix: every 32nd image gray and every 32nd (offset 2) 4:4:4, so each batch
 * mixes chroma layouts as a real folder does. With
 *   CTRAIN_TIMELINE=/tmp/probe.json:4:8 build/jpeg_gpu_probe 1024 256 4 90 mix
 * the hardware backend's batches 4..11 are traced (train/bench/timeline.h):
 * /tmp/probe.json.txt lists the host's CUDA calls, cuMemFree among them
 * (train/feed/nvjpeg_batch.h: none when calls keep one layout and size).
 * (the ImageNet-like files are ~80 KB: Q 98 comes closer than 90)
 *
 * Each backend: two warm-up batches, then ROUNDS passes over the N images,
 * batch after batch as a feed thread would issue them (decode returns once
 * its host part is done; the next call waits for the previous decode), one
 * stream sync at the end. Printed per backend, one JSON line:
 *   img_per_s   images / wall time of the timed passes (probe + decode +
 *               kernel, the whole device path of one feed thread)
 *   host_s      time inside jpeg_gpu_decode (host part and waits), timed passes
 *   device_s    stream time of nvJPEG's part of the decodes (from each
 *               call's start on the stream to its table's upload; the
 *               resample kernel after it is not counted), timed passes
 *   probe_s     time in jpeg_gpu_probe (header parsing, on the host)
 *   taken       images the GPU decoded; the rest would go to the CPU
 *
 * Then nvJPEG's batched decoder alone (train/feed/nvjpeg_batch.h, the 4:2:0
 * images only), its output as interleaved RGB (what the feed resamples) and
 * as YUV planes, each on an idle GPU and beside a busy one: a stream of
 * bf16 GEMMs (8192 x 8192 x 8192, cuBLASLt) with ~10 (~16 ms) always
 * pending, topped up before each call, at the lowest priority, as a
 * training step keeps the GPU. One line each:
 *   host_ms     time inside nvjb_decode a call (nvJPEG returns after its
 *               host part; a call blocked on the GPU shows here)
 *   img_per_s   images / wall time, the decodes and the GEMMs both done
 * Then RGB beside the GEMMs again, "gated": before each call the decode's
 * stream waits for the GEMM five places ahead in the busy queue (~8 ms), as
 * the feed's decode stream once waited for the step's copy of its staging
 * buffer before nvJPEG's calls (jpeg_gpu_out_after): if host_ms grows by
 * about that wait, nvJPEG's host-side waits follow the stream's order.
 * Last, two threads with a decoder each beside the busy GPU ("threads":2;
 * host_ms per call, img_per_s of both together): whether a second call in
 * flight doubles what one thread delivers there.
 * The feed's decode thread was seen blocked ~35 ms a batch inside nvJPEG
 * beside a training step (docs/kernels.md): if YUV beside the GEMMs stays
 * near its idle host time while RGB does not, the colour conversion's
 * kernels are what waits for the SMs, and the resample kernel should
 * convert the planes itself.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/augment.h"
#include "engine/ctx.h"
#include "engine/tensor.h"
#include "ops/matmul.h"
#include "train/feed/jpeg_gpu.h"
#include "train/feed/nvjpeg_batch.h"
#include "train/feed/nvjpeg_lib.h"
#include "train/bench/timeline.h"
#include "tests/jpeg_fixture.h"

#define JH 375
#define JW 460
#define S 224

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};

static void run_backend(Ctx *c, JpegGpuBackend be, uint8_t **bytes, size_t *lens, int N,
                        int batch, int rounds, Tensor *out, cudaStream_t st, int traced)
{
    char err[600];
    JpegGpu *g = jpeg_gpu_open(c, batch, S, 512, be, err, sizeof err);
    if (!g) {
        printf("{\"probe\":\"jpeg_gpu\",\"backend\":\"%s\",\"error\":\"%s\"}\n",
               jpeg_gpu_backend_name(be), err);
        return;
    }
    AugConfig cfg;
    aug_config_default(&cfg, S);
    JpegGpuInfo *info = malloc(sizeof *info * (size_t)batch);
    JpegGpuBox *box = malloc(sizeof *box * (size_t)batch);
    uint8_t *fb = malloc((size_t)batch);
    double probe_s = 0, t0 = 0;
    JpegGpuStats s0;
    memset(&s0, 0, sizeof s0);
    long long images = 0, fallback = 0;
    int warm = 2, nb = (N + batch - 1) / batch;
    for (int it = -warm; it < rounds * nb; it++) {
        if (it == 0) {
            cudaStreamSynchronize(st);
            jpeg_gpu_decode(g, out, fb, NULL, NULL, info, box, 0, MEAN, STD, st, err, sizeof err);
            jpeg_gpu_stats(g, &s0);   /* the empty call above counted the warm-up's device time */
            t0 = now_s();
            probe_s = 0;
        }
        if (traced) timeline_on_step(it + warm);
        int b0 = ((it % nb) + nb) % nb * batch, n = N - b0 < batch ? N - b0 : batch;
        double p0 = now_s();
        jpeg_gpu_probe(g, info, (const uint8_t *const *)(bytes + b0), lens + b0, n);
        for (int i = 0; i < n; i++) {
            int h = info[i].h > 0 ? info[i].h : JH, w = info[i].w > 0 ? info[i].w : JW;
            AugBox b = aug_rrc_box(h, w, &cfg, 1, (uint64_t)(it + warm), (uint32_t)(b0 + i));
            box[i].ay = rs_axis_box(b.top, b.h, S);
            box[i].ax = rs_axis_box(b.left, b.w, S);
            box[i].flip = aug_flip(&cfg, 1, (uint64_t)(it + warm), (uint32_t)(b0 + i));
        }
        probe_s += now_s() - p0;
        if (jpeg_gpu_decode(g, out, fb, (const uint8_t *const *)(bytes + b0), lens + b0, info, box,
                            n, MEAN, STD, st, err, sizeof err)) {
            printf("{\"probe\":\"jpeg_gpu\",\"backend\":\"%s\",\"error\":\"%s\"}\n",
                   jpeg_gpu_backend_name(be), err);
            break;
        }
        if (it >= 0) {
            images += n;
            for (int i = 0; i < n; i++) fallback += fb[i] != 0;
        }
    }
    cudaStreamSynchronize(st);
    double wall = now_s() - t0;
    JpegGpuStats s;
    jpeg_gpu_stats(g, &s);
    printf("{\"probe\":\"jpeg_gpu\",\"backend\":\"%s\",\"nvjpeg\":\"%d.%d.%d\",\"engines\":%u,"
           "\"images\":%lld,\"batch\":%d,\"size\":%d,\"out\":\"bf16\",\"img_per_s\":%.1f,"
           "\"wall_s\":%.3f,\"host_s\":%.3f,\"device_s\":%.3f,\"probe_s\":%.3f,\"planes\":%d,\"taken\":%lld,"
           "\"not_taken\":%lld,\"failed_batches\":%lld,\"layouts\":%d,\"padded\":%lld,\"buffer_mib\":%.1f,\"lib_device_mib\":%.1f,"
           "\"lib_pinned_mib\":%.1f}\n",
           jpeg_gpu_backend_name(s.backend), s.version[0], s.version[1], s.version[2],
           s.hw_engines, images, batch, S, images / wall, wall, s.host_s - s0.host_s,
           s.device_s - s0.device_s, probe_s, s.planes,
           images - fallback, fallback, s.failed_batches, s.layouts, s.padded, s.buffer_bytes / 1048576.0,
           s.lib_device_bytes / 1048576.0, s.lib_pinned_bytes / 1048576.0);
    fflush(stdout);
    free(info);
    free(box);
    free(fb);
    jpeg_gpu_close(g);
}

/* ---- nvJPEG alone, RGB against YUV, idle or beside GEMMs ---- */

static int nv_dev_malloc(void *ctx, void **p, size_t n, cudaStream_t s)
{
    (void)ctx, (void)s;
    return cudaMalloc(p, n) == cudaSuccess ? 0 : 1;
}
static int nv_dev_free(void *ctx, void *p, size_t n, cudaStream_t s)
{
    (void)ctx, (void)n, (void)s;
    return cudaFree(p) == cudaSuccess ? 0 : 1;
}
static int nv_pin_malloc(void *ctx, void **p, size_t n, cudaStream_t s)
{
    (void)ctx, (void)s;
    return cudaHostAlloc(p, n, cudaHostAllocDefault) == cudaSuccess ? 0 : 1;
}
static int nv_pin_free(void *ctx, void *p, size_t n, cudaStream_t s)
{
    (void)ctx, (void)n, (void)s;
    return cudaFreeHost(p) == cudaSuccess ? 0 : 1;
}

/* The busy GPU: bf16 GEMMs of 8192^3 (~1.6 ms each on an H200) on bs, an
 * event after each; busy_top_up keeps BUSY_AHEAD of them not yet finished. */
#define BUSY_RING 64
#define BUSY_AHEAD 10
typedef struct {
    MatmulPlanCache *cache;
    void *a, *b, *c;
    cudaStream_t bs;
    cudaEvent_t ev[BUSY_RING];
    int head, tail;   /* events [tail, head) pending, mod BUSY_RING */
} Busy;

static void busy_gemm(Ctx *c, Busy *z)
{
    matmul_cuda(c->lt, z->cache, c->workspace, c->workspace_bytes, z->bs, z->c, DT_BF16, z->a,
                z->b, DT_BF16, 8192, 8192, 8192, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0, NULL);
}

static void busy_top_up(Ctx *c, Busy *z)
{
    while (z->tail != z->head && cudaEventQuery(z->ev[z->tail % BUSY_RING]) == cudaSuccess)
        z->tail++;
    while (z->head - z->tail < BUSY_AHEAD) {
        busy_gemm(c, z);
        cudaEventRecord(z->ev[z->head % BUSY_RING], z->bs);
        z->head++;
    }
}

/* One nvJPEG batched decoder with its own stream, output and call arrays
 * (what a feed decode thread owns). */
typedef struct {
    NvjBatch *B;
    const char *backend;
    unsigned char *pad, *out;
    nvjpegImage_t *dst;
    cudaStream_t st;
    const unsigned char **cb;
    size_t *cl;
    uint8_t *failed;
    int yuv, batch;
} Dec;

static int dec_open(Dec *d, int yuv, int batch)
{
    char why[300];
    memset(d, 0, sizeof *d);
    d->yuv = yuv;
    d->batch = batch;
    const NvjpegLib *L = nvjpeg_lib(why, sizeof why);
    nvjpegDevAllocatorV2_t da = {nv_dev_malloc, nv_dev_free, NULL};
    nvjpegPinnedAllocatorV2_t pa = {nv_pin_malloc, nv_pin_free, NULL};
    cudaMalloc((void **)&d->pad, NVJB_PAD_BYTES(batch));
    d->B = L ? nvjb_open(L, NVJPEG_BACKEND_HARDWARE, batch, 512, &da, &pa, d->pad, why,
                         sizeof why) : NULL;
    d->backend = "hardware";
    if (L && !d->B) {
        d->B = nvjb_open(L, NVJPEG_BACKEND_GPU_HYBRID, batch, 512, &da, &pa, d->pad, why,
                         sizeof why);
        d->backend = "gpu_hybrid";
    }
    if (!d->B) {
        printf("{\"probe\":\"nvjb\",\"error\":\"%s\"}\n", why);
        cudaFree(d->pad);
        return 0;
    }
    if (yuv) nvjb_set_output(d->B, NVJPEG_OUTPUT_YUV);
    const size_t y_bytes = (size_t)JW * JH, c_bytes = (size_t)((JW + 1) / 2) * ((JH + 1) / 2);
    const size_t per = yuv ? y_bytes + 2 * c_bytes : y_bytes * 3;
    cudaMalloc((void **)&d->out, per * (size_t)batch);
    d->dst = calloc((size_t)batch, sizeof *d->dst);
    for (int k = 0; k < batch; k++) {
        unsigned char *o = d->out + per * (size_t)k;
        if (yuv) {
            d->dst[k].channel[0] = o;
            d->dst[k].pitch[0] = JW;
            d->dst[k].channel[1] = o + y_bytes;
            d->dst[k].channel[2] = o + y_bytes + c_bytes;
            d->dst[k].pitch[1] = d->dst[k].pitch[2] = (JW + 1) / 2;
        } else {
            d->dst[k].channel[0] = o;
            d->dst[k].pitch[0] = (size_t)JW * 3;
        }
    }
    cudaStreamCreateWithFlags(&d->st, cudaStreamNonBlocking);
    d->cb = malloc(sizeof *d->cb * (size_t)batch);
    d->cl = malloc(sizeof *d->cl * (size_t)batch);
    d->failed = malloc((size_t)batch);
    return 1;
}

/* Decode call number it (images from idx, in turn); returns the failures. */
static int dec_call(Dec *d, long it, uint8_t **bytes, size_t *lens, const int *idx, int n420)
{
    for (int k = 0; k < d->batch; k++) {
        const int i = idx[(it * d->batch + k) % n420];
        d->cb[k] = bytes[i];
        d->cl[k] = lens[i];
    }
    nvjb_decode(d->B, NVJB_420, d->cb, d->cl, d->dst, d->batch, d->failed, d->st);
    int bad = 0;
    for (int k = 0; k < d->batch; k++) bad += d->failed[k];
    return bad;
}

static void dec_close(Dec *d)
{
    if (!d->B) return;
    cudaStreamSynchronize(d->st);
    cudaStreamDestroy(d->st);
    free(d->cb);
    free(d->cl);
    free(d->failed);
    free(d->dst);
    cudaFree(d->out);
    nvjb_close(d->B);
    cudaFree(d->pad);
}

static void busy_open(Ctx *c, Busy *z)
{
    int lo = 0, hi = 0;
    memset(z, 0, sizeof *z);
    cudaDeviceGetStreamPriorityRange(&lo, &hi);
    cudaStreamCreateWithPriority(&z->bs, cudaStreamNonBlocking, lo); /* lo: the lowest */
    for (int e = 0; e < BUSY_RING; e++) cudaEventCreateWithFlags(&z->ev[e], cudaEventDisableTiming);
    z->cache = matmul_plan_cache_new();
    const size_t mb = (size_t)8192 * 8192 * 2;
    cudaMalloc(&z->a, mb);
    cudaMalloc(&z->b, mb);
    cudaMalloc(&z->c, mb);
    cudaMemset(z->a, 0, mb);
    cudaMemset(z->b, 0, mb);
    cudaStreamSynchronize(c->stream); /* the memsets and the workspace, before bs uses them */
    busy_gemm(c, z); /* the plan, before timing */
    cudaStreamSynchronize(z->bs);
}

static void busy_close(Busy *z)
{
    cudaStreamSynchronize(z->bs);
    cudaFree(z->a);
    cudaFree(z->b);
    cudaFree(z->c);
    matmul_plan_cache_free(z->cache);
    for (int e = 0; e < BUSY_RING; e++) cudaEventDestroy(z->ev[e]);
    cudaStreamDestroy(z->bs);
}

static void run_nvjb(Ctx *c, int yuv, int busy, uint8_t **bytes, size_t *lens, const int *idx,
                     int n420, int batch, int rounds)
{
    Dec d;
    if (!dec_open(&d, yuv, batch)) return;
    Busy z;
    if (busy) busy_open(c, &z);
    double host = 0, t0 = 0;
    long long images = 0, bad = 0;
    const int calls = rounds * ((n420 + batch - 1) / batch);
    for (int it = -2; it < calls; it++) {
        if (it == 0) {
            cudaStreamSynchronize(d.st);
            if (busy) cudaStreamSynchronize(z.bs);
            t0 = now_s();
            host = 0;
        }
        if (busy) busy_top_up(c, &z); /* ~10 GEMMs (~16 ms) always pending */
        /* gated: the decode's stream first waits for the GEMM half the queue ahead,
         * as the feed's once waited for the step's copy of its staging buffer */
        if (busy == 2) cudaStreamWaitEvent(d.st, z.ev[(z.head - BUSY_AHEAD / 2) % BUSY_RING], 0);
        const double h0 = now_s();
        int f = dec_call(&d, it + 2, bytes, lens, idx, n420);
        if (it >= 0) {
            host += now_s() - h0;
            images += batch;
            bad += f;
        }
    }
    cudaStreamSynchronize(d.st);
    if (busy) cudaStreamSynchronize(z.bs);
    const double wall = now_s() - t0;
    printf("{\"probe\":\"nvjb\",\"backend\":\"%s\",\"out\":\"%s\",\"busy\":%d,\"gated\":%d,"
           "\"calls\":%d,\"batch\":%d,\"host_ms\":%.2f,\"img_per_s\":%.1f,\"failed\":%lld}\n",
           d.backend, yuv ? "yuv" : "rgbi", busy != 0, busy == 2, calls, batch,
           1e3 * host / (calls > 0 ? calls : 1), images / wall, bad);
    fflush(stdout);
    if (busy) busy_close(&z);
    dec_close(&d);
}

/* Two decode threads, each with its own decoder, beside the busy GPU (the
 * main thread keeps it topped up): whether a second call in flight doubles
 * what one feed thread delivers (the calls wait for the SMs, not for the
 * engines), i.e. whether the feed should run two. */
typedef struct {
    Dec d;
    uint8_t **bytes;
    size_t *lens;
    const int *idx;
    int n420, calls, first;
    double host, t_end;
    long long images, bad;
    volatile int *go, done;
    Ctx *c;
    Busy *z;
    pthread_mutex_t *mu;
} DecThread;

static void *dec_thread_main(void *arg)
{
    DecThread *t = arg;
    cudaSetDevice(0);
    while (!__atomic_load_n(t->go, __ATOMIC_ACQUIRE)) {
    }
    for (int it = 0; it < t->calls; it++) {
        pthread_mutex_lock(t->mu);   /* as one thread does: the GEMMs topped up before a call */
        busy_top_up(t->c, t->z);
        pthread_mutex_unlock(t->mu);
        const double h0 = now_s();
        t->bad += dec_call(&t->d, 2L * it + t->first, t->bytes, t->lens, t->idx, t->n420);
        t->host += now_s() - h0;
        t->images += t->d.batch;
    }
    cudaStreamSynchronize(t->d.st);
    t->t_end = now_s();
    __atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void run_nvjb_pair(Ctx *c, uint8_t **bytes, size_t *lens, const int *idx, int n420,
                          int batch, int rounds)
{
    DecThread t[2];
    memset(t, 0, sizeof t);
    volatile int go = 0;
    for (int k = 0; k < 2; k++) {
        if (!dec_open(&t[k].d, 0, batch)) {
            if (k) dec_close(&t[0].d);
            return;
        }
        dec_call(&t[k].d, k, bytes, lens, idx, n420);   /* warm-up */
        cudaStreamSynchronize(t[k].d.st);
        t[k].bytes = bytes;
        t[k].lens = lens;
        t[k].idx = idx;
        t[k].n420 = n420;
        t[k].calls = rounds * ((n420 + batch - 1) / batch) / 2;
        t[k].first = k;
        t[k].go = &go;
    }
    Busy z;
    busy_open(c, &z);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    for (int k = 0; k < 2; k++) {
        t[k].c = c;
        t[k].z = &z;
        t[k].mu = &mu;
    }
    pthread_t th[2];
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, dec_thread_main, &t[k]);
    const double t0 = now_s();
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    const double wall = (t[0].t_end > t[1].t_end ? t[0].t_end : t[1].t_end) - t0;
    printf("{\"probe\":\"nvjb\",\"backend\":\"%s\",\"out\":\"rgbi\",\"busy\":1,\"threads\":2,"
           "\"calls\":%d,\"batch\":%d,\"host_ms\":%.2f,\"img_per_s\":%.1f,\"failed\":%lld}\n",
           t[0].d.backend, t[0].calls + t[1].calls, batch,
           1e3 * (t[0].host + t[1].host) / (t[0].calls + t[1].calls),
           (t[0].images + t[1].images) / wall, t[0].bad + t[1].bad);
    fflush(stdout);
    busy_close(&z);
    for (int k = 0; k < 2; k++) dec_close(&t[k].d);
}

/* The CPU path's device half: u8 rows from pinned memory, normalised. */
static void run_upload(Ctx *c, int batch, int rounds, Tensor *out, cudaStream_t st)
{
    char err[600];
    JpegGpu *g = jpeg_gpu_open(c, batch, S, 0, JPEG_GPU_UPLOAD, err, sizeof err);
    if (!g) {
        printf("{\"probe\":\"jpeg_gpu\",\"backend\":\"upload\",\"error\":\"%s\"}\n", err);
        return;
    }
    size_t bytes = (size_t)batch * S * S * 3;
    uint8_t *px = NULL;
    cudaMallocHost((void **)&px, bytes);
    for (size_t e = 0; e < bytes; e++) px[e] = (uint8_t)(e * 2654435761u >> 24);
    double t0 = 0;
    for (int it = -2; it < rounds; it++) {
        if (it == 0) {
            cudaStreamSynchronize(st);
            t0 = now_s();
        }
        if (jpeg_gpu_upload_u8(g, out, NULL, px, batch, MEAN, STD, st, err, sizeof err)) {
            printf("{\"probe\":\"jpeg_gpu\",\"backend\":\"upload\",\"error\":\"%s\"}\n", err);
            break;
        }
    }
    cudaStreamSynchronize(st);
    double wall = now_s() - t0;
    printf("{\"probe\":\"jpeg_gpu\",\"backend\":\"upload\",\"images\":%lld,\"batch\":%d,\"size\":%d,"
           "\"out\":\"bf16\",\"img_per_s\":%.1f,\"wall_s\":%.4f}\n",
           (long long)rounds * batch, batch, S, (double)rounds * batch / wall, wall);
    cudaFreeHost(px);
    jpeg_gpu_close(g);
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 1024, batch = argc > 2 ? atoi(argv[2]) : 256;
    int rounds = argc > 3 ? atoi(argv[3]) : 8, quality = argc > 4 ? atoi(argv[4]) : 90;
    int mix = argc > 5 && !strcmp(argv[5], "mix");
    if (N < 1 || batch < 1 || rounds < 1 || quality < 1 || quality > 100 || (argc > 5 && !mix)) {
        fprintf(stderr, "usage: jpeg_gpu_probe [N [BATCH [ROUNDS [QUALITY [mix]]]]]\n");
        return 2;
    }
    char reason[512];
    if (!nvjpeg_available(reason, sizeof reason)) {
        printf("{\"probe\":\"jpeg_gpu\",\"error\":\"%s\"}\n", reason);
        return 1;
    }
    /* 64 distinct images, repeated: the decoders see each file's bytes afresh */
    enum { DISTINCT = 64 };
    uint8_t **bytes = malloc(sizeof *bytes * (size_t)N);
    size_t *lens = malloc(sizeof *lens * (size_t)N);
    uint8_t *pix = malloc((size_t)JH * JW * 3);
    double kb = 0;
    for (int i = 0; i < N; i++) {
        if (i < DISTINCT) {
            jfx_pattern(pix, JH, JW, 3, 7000 + (uint64_t)i);
            JfxOptions o = {0};
            o.quality = quality;
            o.gray = mix && i % 32 == 1;
            o.subsample = mix && i % 32 == 2 ? JFX_444 : JFX_420;
            unsigned char *b;
            unsigned long n;
            jfx_jpeg_encode(&b, &n, pix, JH, JW, 3, &o);
            bytes[i] = b;
            lens[i] = n;
        } else {
            bytes[i] = malloc(lens[i % DISTINCT]);
            memcpy(bytes[i], bytes[i % DISTINCT], lens[i % DISTINCT]);
            lens[i] = lens[i % DISTINCT];
        }
        kb += lens[i] / 1024.0;
    }
    free(pix);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    struct cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("{\"probe\":\"jpeg_gpu\",\"device\":\"%s\",\"images\":%d,\"jpeg\":\"%dx%d q%d %s\","
           "\"mean_kb\":%.1f,\"rounds\":%d}\n", p.name, N, JW, JH, quality,
           mix ? "4:2:0, 1/32 gray, 1/32 4:4:4" : "4:2:0", kb / N, rounds);
    int64_t shape[4] = {batch, S, S, 3};
    Tensor *out = tensor_new(&c, DT_BF16, 4, shape);
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    cudaStreamSynchronize(c.stream);
    run_backend(&c, JPEG_GPU_HARDWARE, bytes, lens, N, batch, rounds, out, st, 1);
    run_backend(&c, JPEG_GPU_HYBRID, bytes, lens, N, batch, rounds, out, st, 0);
    run_upload(&c, batch, rounds * ((N + batch - 1) / batch), out, st);
    /* nvJPEG alone on the 4:2:0 images: RGB and YUV, idle and beside GEMMs */
    int *idx = malloc(sizeof *idx * (size_t)N), n420 = 0;
    for (int i = 0; i < N; i++)
        if (!(mix && (i % DISTINCT) % 32 >= 1 && (i % DISTINCT) % 32 <= 2)) idx[n420++] = i;
    ctx_workspace(&c, (size_t)64 << 20);
    for (int busy = 0; busy <= 1; busy++)
        for (int yuv = 0; yuv <= 1; yuv++)
            run_nvjb(&c, yuv, busy, bytes, lens, idx, n420, batch, rounds);
    run_nvjb(&c, 0, 2, bytes, lens, idx, n420, batch, rounds);   /* RGB, gated */
    run_nvjb_pair(&c, bytes, lens, idx, n420, batch, rounds);
    free(idx);
    cudaStreamDestroy(st);
    tensor_release(out);
    for (int i = 0; i < N; i++) free(bytes[i]);
    free(bytes);
    free(lens);
    ctx_free(&c);
    return 0;
}
