/* loader.c — worker threads filling a ring of batch slots (contract in
 * loader.h).
 *
 * One mutex guards all shared state; work happens outside it. Slot states:
 *   FREE -> FILLING (a worker assigned it the next batch of the epoch)
 *        -> READY (all rows done) -> HELD (returned by loader_next)
 *        -> FREE (loader_release)
 * Batches are assigned to slots in epoch order. A worker looking for work
 * takes the FILLING slot with the lowest batch number that still has
 * unclaimed rows, else assigns the next batch to a FREE slot, and claims a
 * chunk of consecutive rows (chunk = B / 4W, 1..16: small enough that all
 * workers share the batch the consumer needs next, large enough that the
 * lock is taken rarely). The consumer waits for the slot holding batch
 * next_out to be READY. Row r of a batch is always sample perm[i*B + r],
 * written by whichever worker claimed it: results do not depend on timing.
 *
 * Cancelling (loader_start mid-epoch, loader_stop): `running` is cleared so
 * no new rows are claimed, then the caller waits until no chunk is in
 * flight (inflight == 0) before the slots are reset.
 */
#include "loader.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "imagefolder.h"
#include "shuffle.h"
#include "engine/error.h"

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

typedef struct {
    LoaderBatch b;
    void *mem;     /* rows and y, from cfg.alloc */
    int state;
    int claimed;   /* rows handed to workers */
    int done;      /* rows finished */
} Slot;

struct Loader {
    const ImageSource *src;
    LoaderConfig cfg;
    size_t row_bytes;    /* one row: S*S*3 f32 or u8 */
    int chunk;
    uint32_t nb;         /* batches per epoch */
    uint32_t *perm;      /* [N] order of the current epoch (this rank's share first) */
    uint32_t n_epoch;    /* training samples an epoch visits: N, or N / world */

    pthread_mutex_t mu;
    pthread_cond_t work_cv;   /* workers: a slot was freed, an epoch started, quit */
    pthread_cond_t ready_cv;  /* consumer: a batch is ready, or a worker failed */
    pthread_cond_t idle_cv;   /* canceller: inflight reached 0 */
    pthread_t *threads;
    int nthreads;
    int stopped;

    Slot *slots;
    uint64_t epoch;
    int running;          /* an epoch is active: rows may be claimed */
    int quit;
    int inflight;         /* chunks being computed */
    uint32_t next_fill;   /* next batch to assign to a slot */
    uint32_t next_out;    /* next batch loader_next returns */
    uint32_t filled;      /* batches of this epoch completed */
    uint32_t start_batch;

    int failed;           /* the source's negative status (ImgfStatus for an ImageFolder) */
    char err[1024];

    /* statistics */
    uint64_t images, batches_out;
    double busy_s, wait_s, active_s;
    double t_epoch;       /* when the epoch started */
    int timing;           /* t_epoch counts toward active_s */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *default_alloc(size_t bytes, void *user)
{
    (void)user;
    return malloc(bytes);
}

static void default_free(void *p, void *user)
{
    (void)user;
    free(p);
}

/* Stop counting the epoch's active time (caller holds mu). */
static void timing_end(Loader *L)
{
    if (L->timing) {
        L->active_s += now_s() - L->t_epoch;
        L->timing = 0;
    }
}

/* A slot with rows to claim, assigning the next batch to a free slot when
 * none is partly claimed; NULL when there is nothing to do. Holds mu. */
static Slot *find_work(Loader *L)
{
    if (!L->running || L->failed) return NULL;
    const int K = L->cfg.slots;
    Slot *best = NULL;
    for (int k = 0; k < K; k++) {
        Slot *s = &L->slots[k];
        if (s->state == SLOT_FILLING && s->claimed < s->b.n &&
            (!best || s->b.batch < best->b.batch))
            best = s;
    }
    if (best || L->next_fill >= L->nb) return best;
    for (int k = 0; k < K; k++) {
        Slot *s = &L->slots[k];
        if (s->state != SLOT_FREE) continue;
        const uint32_t i = L->next_fill++, B = (uint32_t)L->cfg.batch;
        const uint32_t first = i * B, n = L->cfg.train ? L->n_epoch : L->src->n;
        s->b.n = (int)(n - first < B ? n - first : B);
        s->b.epoch = L->epoch;
        s->b.batch = i;
        memcpy(s->b.index, L->perm + first, (size_t)s->b.n * sizeof(uint32_t));
        s->state = SLOT_FILLING;
        s->claimed = s->done = 0;
        return s;
    }
    return NULL;
}

/* Row r of batch b: the source's sample b->index[r]. */
static int sample_get(Loader *L, LoaderBatch *b, int r, uint64_t epoch, char *err,
                      size_t errlen)
{
    const ImageSource *src = L->src;
    const uint32_t i = b->index[r];
    if (src->pixels == SRC_F32)
        return src_get(src, i, L->cfg.train, L->cfg.seed, epoch,
                       (float *)((char *)b->x + (size_t)r * L->row_bytes), &b->y[r], err,
                       errlen);
    SrcEncoded *e = b->enc ? &b->enc[r] : NULL;
    if (e) {   /* a cancelled epoch may have left a file here */
        free(e->bytes);
        e->bytes = NULL;
    }
    return src_get_u8(src, i, L->cfg.train, L->cfg.seed, epoch, b->u8 + (size_t)r * L->row_bytes,
                      &b->y[r], e, L->cfg.cpu_kinds, err, errlen);
}

static void *worker_main(void *arg)
{
    Loader *L = arg;
    char err[1024];
    pthread_mutex_lock(&L->mu);
    for (;;) {
        if (L->quit) break;
        Slot *s = find_work(L);
        if (!s) {
            pthread_cond_wait(&L->work_cv, &L->mu);
            continue;
        }
        const int r0 = s->claimed, r1 = r0 + L->chunk < s->b.n ? r0 + L->chunk : s->b.n;
        s->claimed = r1;
        L->inflight++;
        const uint64_t epoch = L->epoch;
        pthread_mutex_unlock(&L->mu);

        double t0 = now_s();
        int r = r0, bad = 0;
        for (; r < r1; r++) {
            bad = sample_get(L, &s->b, r, epoch, err, sizeof err);
            if (bad) {
                if (bad > 0) bad = -1;
                break;
            }
        }
        double t1 = now_s();

        pthread_mutex_lock(&L->mu);
        L->busy_s += t1 - t0;
        L->images += (uint64_t)(r - r0);
        L->inflight--;
        if (bad && !L->failed) {
            L->failed = bad;
            snprintf(L->err, sizeof L->err, "%s", err);
            pthread_cond_broadcast(&L->ready_cv);
        }
        if (!bad) {
            s->done += r1 - r0;
            if (s->done == s->b.n && L->running) {
                s->state = SLOT_READY;
                if (++L->filled == L->nb - L->start_batch) timing_end(L);
                pthread_cond_broadcast(&L->ready_cv);
            }
        }
        if (L->inflight == 0) pthread_cond_broadcast(&L->idle_cv);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

Loader *loader_init(const ImageSource *src, const LoaderConfig *cfg)
{
    CT_ASSERT(src && src->n > 0 && (src->pixels == SRC_U8 ? src->get_u8 != NULL : src->get != NULL),
              "loader_init: empty or uninitialised source");
    CT_ASSERT(!cfg->encoded || src->pixels == SRC_U8, "loader_init: encoded batches need a u8 "
              "source (an ImageFolder), not %s", src->kind);
    CT_ASSERT(cfg->batch > 0 && cfg->workers > 0 && (cfg->slots == 0 || cfg->slots >= 2),
              "loader_init: batch %d workers %d slots %d (need batch >= 1, workers >= 1, "
              "slots 0 or >= 2)", cfg->batch, cfg->workers, cfg->slots);
    Loader *L = calloc(1, sizeof *L);
    if (!L) ct_fatal("loader_init: out of memory");
    L->src = src;
    L->cfg = *cfg;
    if (!L->cfg.slots) L->cfg.slots = LOADER_DEFAULT_SLOTS;
    if (!L->cfg.alloc || !L->cfg.free) {
        L->cfg.alloc = default_alloc;
        L->cfg.free = default_free;
    }
    const uint32_t B = (uint32_t)cfg->batch, n = src->n;
    if (!cfg->train || L->cfg.world < 1) { L->cfg.world = 1; L->cfg.rank = 0; }
    CT_ASSERT(L->cfg.rank < L->cfg.world, "loader_init: rank %u of %u", L->cfg.rank, L->cfg.world);
    L->n_epoch = shuffle_shard_count(n, L->cfg.world);
    L->nb = cfg->train ? L->n_epoch / B : (n + B - 1) / B;
    if (L->nb == 0)
        ct_fatal_hint("use a smaller --batch, or more data", "the data set has %u samples, "
                      "fewer than one batch of %d (training drops incomplete batches)", n,
                      cfg->batch);
    L->row_bytes = src_row_bytes(src);
    L->chunk = cfg->batch / (4 * cfg->workers);
    L->chunk = L->chunk < 1 ? 1 : L->chunk > 16 ? 16 : L->chunk;

    L->perm = malloc((size_t)n * sizeof(uint32_t));
    L->slots = calloc((size_t)L->cfg.slots, sizeof(Slot));
    if (!L->perm || !L->slots) ct_fatal("loader_init: out of memory");
    const size_t xbytes = (B * L->row_bytes + 255) & ~(size_t)255;
    const size_t bytes = xbytes + B * sizeof(int32_t);
    for (int k = 0; k < L->cfg.slots; k++) {
        Slot *s = &L->slots[k];
        s->mem = L->cfg.alloc(bytes, L->cfg.alloc_user);
        s->b.index = malloc(B * sizeof(uint32_t));
        s->b.enc = cfg->encoded ? calloc(B, sizeof(SrcEncoded)) : NULL;
        if (!s->mem || !s->b.index || (cfg->encoded && !s->b.enc))
            ct_fatal_hint("use a smaller --batch or fewer loader slots",
                          "loader_init: cannot allocate batch slot %d of %d (%.1f MiB)", k,
                          L->cfg.slots, (double)bytes / (1 << 20));
        if (src->pixels == SRC_U8) s->b.u8 = s->mem;
        else s->b.x = s->mem;
        s->b.y = (int32_t *)((char *)s->mem + xbytes);
    }

    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->work_cv, NULL);
    pthread_cond_init(&L->ready_cv, NULL);
    pthread_cond_init(&L->idle_cv, NULL);
    L->threads = calloc((size_t)cfg->workers, sizeof(pthread_t));
    if (!L->threads) ct_fatal("loader_init: out of memory");
    for (int w = 0; w < cfg->workers; w++) {
        int rc = pthread_create(&L->threads[w], NULL, worker_main, L);
        if (rc) {
            loader_stop(L);
            ct_fatal_hint("use fewer loader workers", "loader_init: cannot start worker "
                          "thread %d of %d: %s", w, cfg->workers, strerror(rc));
        }
        L->nthreads++;
    }
    return L;
}

uint32_t loader_batches(const Loader *L) { return L->nb; }

/* Stop claiming rows and wait until no chunk is in flight. Holds mu. */
static void cancel_epoch(Loader *L)
{
    L->running = 0;
    timing_end(L);
    while (L->inflight > 0) pthread_cond_wait(&L->idle_cv, &L->mu);
}

void loader_start(Loader *L, uint64_t epoch, uint32_t start_batch)
{
    CT_ASSERT(!L->stopped, "loader_start after loader_stop");
    CT_ASSERT(start_batch <= L->nb, "loader_start: start_batch %u beyond the epoch's %u "
              "batches", start_batch, L->nb);
    pthread_mutex_lock(&L->mu);
    cancel_epoch(L);
    for (int k = 0; k < L->cfg.slots; k++)   /* held batches stay the caller's */
        if (L->slots[k].state != SLOT_HELD) L->slots[k].state = SLOT_FREE;
    const uint32_t n = L->src->n;
    if (L->cfg.train) {
        shuffle_perm(L->perm, n, L->cfg.seed, epoch);
        shuffle_shard(L->perm, n, L->cfg.rank, L->cfg.world);
    }
    else
        for (uint32_t i = 0; i < n; i++) L->perm[i] = i;
    L->epoch = epoch;
    L->next_fill = L->next_out = L->start_batch = start_batch;
    L->filled = 0;
    L->running = 1;
    L->t_epoch = now_s();
    L->timing = start_batch < L->nb;
    pthread_cond_broadcast(&L->work_cv);
    pthread_mutex_unlock(&L->mu);
}

int loader_try_next(Loader *L, LoaderBatch **out, char *err, size_t errlen)
{
    *out = NULL;
    pthread_mutex_lock(&L->mu);
    CT_ASSERT(L->running || L->failed, "loader_next: call loader_start first");
    double t0 = now_s();
    int rc = 0;
    while (L->next_out < L->nb) {
        if (L->failed) {
            if (err && errlen) snprintf(err, errlen, "%s", L->err);
            rc = L->failed;
            break;
        }
        Slot *ready = NULL;
        int free_slots = 0;
        for (int k = 0; k < L->cfg.slots; k++) {
            Slot *s = &L->slots[k];
            if (s->state == SLOT_READY && s->b.batch == L->next_out) ready = s;
            free_slots += s->state == SLOT_FREE;
        }
        if (ready) {
            ready->state = SLOT_HELD;
            L->next_out++;
            L->batches_out++;
            *out = &ready->b;
            break;
        }
        if (L->next_fill == L->next_out && free_slots == 0) {
            pthread_mutex_unlock(&L->mu);
            ct_fatal("loader_next: all %d batch slots are held by the caller; "
                     "loader_release a batch before asking for the next", L->cfg.slots);
        }
        pthread_cond_wait(&L->ready_cv, &L->mu);
    }
    L->wait_s += now_s() - t0;
    pthread_mutex_unlock(&L->mu);
    return rc;
}

LoaderBatch *loader_next(Loader *L)
{
    LoaderBatch *b;
    char err[1024];
    int st = loader_try_next(L, &b, err, sizeof err);
    if (st) {
        loader_stop(L);
        ct_fatal_hint(imagefolder_hint(st), "%s", err);
    }
    return b;
}

/* A batch's files (its slot held or idle: no worker touches them). */
static void enc_free(SrcEncoded *enc, int n)
{
    for (int r = 0; enc && r < n; r++) {
        free(enc[r].bytes);
        enc[r].bytes = NULL;
    }
}

void loader_release(Loader *L, LoaderBatch *b)
{
    pthread_mutex_lock(&L->mu);
    Slot *s = NULL;
    for (int k = 0; k < L->cfg.slots; k++)
        if (&L->slots[k].b == b) s = &L->slots[k];
    CT_ASSERT(s && s->state == SLOT_HELD, "loader_release: not a batch from loader_next, or "
              "released twice");
    enc_free(b->enc, L->cfg.batch);
    s->state = SLOT_FREE;
    pthread_cond_broadcast(&L->work_cv);
    pthread_mutex_unlock(&L->mu);
}

void loader_stats(Loader *L, LoaderStats *st)
{
    pthread_mutex_lock(&L->mu);
    memset(st, 0, sizeof *st);
    st->images = L->images;
    st->batches = L->batches_out;
    st->active_s = L->active_s + (L->timing ? now_s() - L->t_epoch : 0.0);
    st->busy_s = L->busy_s;
    st->wait_s = L->wait_s;
    st->images_per_s = st->active_s > 0 ? (double)st->images / st->active_s : 0.0;
    st->capacity_per_s =
        st->busy_s > 0 ? (double)st->images / st->busy_s * L->cfg.workers : 0.0;
    pthread_mutex_unlock(&L->mu);
}

void loader_stop(Loader *L)
{
    if (!L || L->stopped) return;
    pthread_mutex_lock(&L->mu);
    cancel_epoch(L);
    L->quit = 1;
    pthread_cond_broadcast(&L->work_cv);
    pthread_mutex_unlock(&L->mu);
    for (int w = 0; w < L->nthreads; w++) pthread_join(L->threads[w], NULL);
    L->nthreads = 0;
    L->stopped = 1;
}

void loader_free(Loader *L)
{
    if (!L) return;
    loader_stop(L);
    for (int k = 0; k < L->cfg.slots; k++) {
        if (L->slots[k].mem) L->cfg.free(L->slots[k].mem, L->cfg.alloc_user);
        free(L->slots[k].b.index);
        enc_free(L->slots[k].b.enc, L->cfg.batch);
        free(L->slots[k].b.enc);
    }
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->work_cv);
    pthread_cond_destroy(&L->ready_cv);
    pthread_cond_destroy(&L->idle_cv);
    free(L->threads);
    free(L->slots);
    free(L->perm);
    free(L);
}
