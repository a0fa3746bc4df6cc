/* timeline.c — CTRAIN_TIMELINE: CUPTI activity records of a window of
 * training steps (see timeline.h); the records become a Timeline
 * (timeline_fmt.h), written when the window closes. */
#include "timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/settings.h"

#if defined(CTRAIN_CUDA) && defined(__has_include)
#if __has_include(<cupti_activity.h>)
#define TIMELINE_CUPTI 1
#endif
#endif

#ifdef TIMELINE_CUPTI
#include <dlfcn.h>
#include <pthread.h>
#include <cuda_runtime.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_version.h>
#include "timeline_api.h"
#include "timeline_fmt.h"

#define TL_BUFFER_BYTES (8u << 20)

/* The leading fields of CUPTI's records, which every version of them has
 * kept in place (CUpti_ActivityKernel4 .. 10, Memcpy .. Memcpy6, Memset ..
 * Memset4): reading only these works whichever CUPTI the run loads. */
typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityKind kind;
    uint8_t cache_config, shared_memory_config;
    uint16_t registers_per_thread;
    CUpti_ActivityPartitionedGlobalCacheConfig global_cache_requested, global_cache_executed;
    uint64_t start, end, completed;
    uint32_t device_id, context_id, stream_id;
    int32_t grid[3], block[3], static_smem, dynamic_smem;
    uint32_t local_per_thread, local_total, correlation_id;
    int64_t grid_id;
    const char *name;
} KernelHead;

typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityKind kind;
    uint8_t copy_kind, src_kind, dst_kind, flags;
    uint64_t bytes, start, end;
    uint32_t device_id, context_id, stream_id;
} MemcpyHead;

typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityKind kind;
    uint32_t value;
    uint64_t bytes, start, end;
    uint32_t device_id, context_id, stream_id;
} MemsetHead;

#if !defined(CUPTI_API_VERSION)
#error "cupti_version.h did not define CUPTI_API_VERSION"
#elif CUPTI_API_VERSION >= 130000   /* checked against the records this header describes */
#include <stddef.h>
_Static_assert(offsetof(KernelHead, name) == offsetof(CUpti_ActivityKernel10, name) &&
               offsetof(KernelHead, stream_id) == offsetof(CUpti_ActivityKernel10, streamId) &&
               offsetof(KernelHead, start) == offsetof(CUpti_ActivityKernel10, start),
               "CUPTI kernel record layout");
_Static_assert(offsetof(MemcpyHead, stream_id) == offsetof(CUpti_ActivityMemcpy6, streamId) &&
               offsetof(MemcpyHead, bytes) == offsetof(CUpti_ActivityMemcpy6, bytes),
               "CUPTI memcpy record layout");
_Static_assert(offsetof(MemsetHead, stream_id) == offsetof(CUpti_ActivityMemset4, streamId) &&
               offsetof(MemsetHead, bytes) == offsetof(CUpti_ActivityMemset4, bytes),
               "CUPTI memset record layout");
#endif

static struct {
    int state;                 /* -1 not read yet, 0 off / done, 1 tracing */
    char path[4096];
    long start, steps, last_step;
    long opened_at;            /* the step the window opened at (START, or later on a resume) */
    int rank;
    void *lib;
    __typeof__(&cuptiActivityRegisterCallbacks) reg;
    __typeof__(&cuptiActivityEnable) enable;
    __typeof__(&cuptiActivityDisable) disable;
    __typeof__(&cuptiActivityFlushAll) flush;
    __typeof__(&cuptiActivityGetNextRecord) next;
    __typeof__(&cuptiGetTimestamp) now;
    __typeof__(&cuptiActivityGetNumDroppedRecords) dropped;   /* optional */
    __typeof__(&cuptiGetCallbackName) cb_name;                 /* optional */
    pthread_mutex_t mu;        /* the records arrive on CUPTI's thread */
    uint64_t t_begin, t_end;   /* the window, CUPTI timestamps; 0: not yet */
    Timeline tl;
    TlApi api;                 /* the host's CUDA calls (timeline_api.h) */
    int oom;
} T = {.state = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                           CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
                                           CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                           CUPTI_ACTIVITY_KIND_DRIVER};

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = (uint8_t *)aligned_alloc(8, TL_BUFFER_BYTES);
    *size = *buffer ? TL_BUFFER_BYTES : 0;
    *max_records = 0;
}

static const char *memcpy_name(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
    }
}

/* Keeps the records that start inside the window. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&T.mu);
    uint64_t a = T.t_begin, b = T.t_end ? T.t_end : UINT64_MAX;
    while (a && T.next(buffer, valid, &r) == CUPTI_SUCCESS) {
        char name[256];
        int bad = 0;
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const KernelHead *k = (const KernelHead *)r;
            if (k->start < a || k->start >= b) continue;
            timeline_short_name(name, sizeof name, k->name);
            bad = timeline_add(&T.tl, TL_KERNEL, k->start, k->end, k->stream_id, name, 0);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY || r->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
            /* MEMCPY2 (peer to peer) records begin as MEMCPY's do */
            const MemcpyHead *m = (const MemcpyHead *)r;
            if (m->start < a || m->start >= b) continue;
            bad = timeline_add(&T.tl, TL_MEMCPY, m->start, m->end, m->stream_id,
                               r->kind == CUPTI_ACTIVITY_KIND_MEMCPY2 ? "memcpy PtoP"
                                                                     : memcpy_name(m->copy_kind),
                               m->bytes);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            const CUpti_ActivityAPI *p = (const CUpti_ActivityAPI *)r;
            if (p->start < a || p->start >= b) continue;
            tl_api_add(&T.api, r->kind == CUPTI_ACTIVITY_KIND_DRIVER, p->cbid, p->threadId,
                       p->start, p->end);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const MemsetHead *m = (const MemsetHead *)r;
            if (m->start < a || m->start >= b) continue;
            bad = timeline_add(&T.tl, TL_MEMSET, m->start, m->end, m->stream_id, "memset", m->bytes);
        }
        T.oom |= bad != 0;
    }
    size_t lost = 0;
    if (a && T.dropped && T.dropped(ctx, stream, &lost) == CUPTI_SUCCESS) T.tl.dropped += lost;
    pthread_mutex_unlock(&T.mu);
    free(buffer);
}

static int load_cupti(void)
{
    const char *env = setting_str(SET_CUPTI_LIB);
    const char *names[] = {env, "libcupti.so", "libcupti.so.13", "libcupti.so.12",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                           "/usr/local/cuda/lib64/libcupti.so", "/usr/local/cuda/lib/libcupti.so"};
    for (size_t i = 0; i < sizeof names / sizeof *names && !T.lib; i++)
        if (names[i] && *names[i]) T.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!T.lib) return 0;
    *(void **)&T.reg = dlsym(T.lib, "cuptiActivityRegisterCallbacks");
    *(void **)&T.enable = dlsym(T.lib, "cuptiActivityEnable");
    *(void **)&T.disable = dlsym(T.lib, "cuptiActivityDisable");
    *(void **)&T.flush = dlsym(T.lib, "cuptiActivityFlushAll");
    *(void **)&T.next = dlsym(T.lib, "cuptiActivityGetNextRecord");
    *(void **)&T.now = dlsym(T.lib, "cuptiGetTimestamp");
    *(void **)&T.dropped = dlsym(T.lib, "cuptiActivityGetNumDroppedRecords");
    *(void **)&T.cb_name = dlsym(T.lib, "cuptiGetCallbackName");
    return T.reg && T.enable && T.disable && T.flush && T.next && T.now;
}

/* FILE with %r -> rank and %p -> pid; several ranks and no %r: ".rankR" appended. */
static void expand_path(char *out, size_t len, const char *pat, int rank, int ranks)
{
    size_t n = 0;
    int had_rank = 0;
    for (const char *p = pat; *p && n + 16 < len; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            n += (size_t)snprintf(out + n, len - n, "%d", rank);
            had_rank = 1;
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            n += (size_t)snprintf(out + n, len - n, "%ld", (long)getpid());
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = 0;
    if (ranks > 1 && !had_rank) snprintf(out + n, len - n, ".rank%d", rank);
}

static void open_env(void)
{
    T.state = 0;
    const char *e = setting_str(SET_TIMELINE);
    if (!e) return;
    char pat[4096];
    snprintf(pat, sizeof pat, "%s", e);
    T.start = 10;
    T.steps = 5;
    char *c1 = strchr(pat, ':');
    if (c1) {
        *c1 = 0;
        char *c2 = strchr(c1 + 1, ':');
        if (c2) *c2 = 0;
        char *end = NULL;
        T.start = strtol(c1 + 1, &end, 10);
        int ok = end != c1 + 1 && *end == 0 && T.start >= 0;
        if (c2) {
            T.steps = strtol(c2 + 1, &end, 10);
            ok = ok && end != c2 + 1 && *end == 0 && T.steps >= 1;
        }
        if (!ok || !*pat)
            ct_fatal_hint("set CTRAIN_TIMELINE=FILE, FILE:START or FILE:START:STEPS (steps from 0)",
                          "CTRAIN_TIMELINE=%s is not FILE[:START[:STEPS]]", e);
    }
    long long r = setting_int(SET_RANK), w = setting_int(SET_WORLD_SIZE);   /* -1: unset */
    T.rank = r < 0 ? 0 : (int)r;
    expand_path(T.path, sizeof T.path, pat, T.rank, w < 0 ? 1 : (int)w);
    if (!load_cupti()) {
        LOG_W("CTRAIN_TIMELINE: CUPTI not found (libcupti.so of the CUDA toolkit; "
              "CTRAIN_CUPTI_LIB=path names it); no timeline");
        return;
    }
    timeline_init(&T.tl);
    tl_api_init(&T.api);
    if (T.reg(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
        LOG_W("CTRAIN_TIMELINE: CUPTI refused its buffer callbacks; no timeline");
        return;
    }
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (T.enable(kinds[i]) != CUPTI_SUCCESS) {
            LOG_W("CTRAIN_TIMELINE: CUPTI refused activity kind %d (profiling may be reserved "
                  "by another tool, or not permitted here); no timeline", (int)kinds[i]);
            for (size_t j = 0; j < i; j++) T.disable(kinds[j]);
            return;
        }
    T.state = 1;
}

static const char *api_name(int driver, uint32_t cbid)
{
    const char *n = NULL;
    if (!T.cb_name || T.cb_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                                cbid, &n) != CUPTI_SUCCESS)
        return NULL;
    return n;
}

/* The host's CUDA calls after the summary in txt. */
static int append_api(const char *txt, char *err, size_t errlen)
{
    FILE *f = fopen(txt, "a");
    if (!f) return ct_fail(err, errlen, -1, "cannot append to %s: %s", txt, strerror(errno));
    fprintf(f, "\n");
    tl_api_write(&T.api, f, 40, api_name);
    if (fclose(f) != 0) return ct_fail(err, errlen, -1, "cannot write %s: %s", txt, strerror(errno));
    return 0;
}

/* CUPTI's clock once the device has finished all it was given (a window
 * edge); 0 when the sync failed inside an exit handler (from_exit: ct_fatal's
 * exit too), which gives up quietly instead of calling exit again. */
static uint64_t synced_now(int from_exit)
{
    if (from_exit) {
        if (cudaDeviceSynchronize() != cudaSuccess) return 0;
    } else {
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    uint64_t t = 0;
    T.now(&t);
    return t ? t : 1;
}

static void close_window(long steps, int from_exit)
{
    uint64_t t = synced_now(from_exit);
    if (!t) return;
    pthread_mutex_lock(&T.mu);
    T.t_end = t;
    pthread_mutex_unlock(&T.mu);
    T.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) T.disable(kinds[i]);
    T.state = 0;
    pthread_mutex_lock(&T.mu);
    T.tl.begin = T.t_begin;
    T.tl.end = T.t_end;
    char err[4400], txt[4200], head[256];
    long first = T.opened_at, last = T.opened_at + steps - 1;
    snprintf(txt, sizeof txt, "%s.txt", T.path);
    snprintf(head, sizeof head, "ctrain timeline, rank %d, steps %ld to %ld%s", T.rank, first, last,
             T.oom ? " (out of memory: records dropped)" : "");
    if (timeline_write_chrome(&T.tl, T.path, T.rank, err, sizeof err) != 0 ||
        timeline_write_summary(&T.tl, txt, head, (int)steps, err, sizeof err) != 0)
        LOG_W("CTRAIN_TIMELINE: %s", err);
    else if (append_api(txt, err, sizeof err) != 0)
        LOG_W("CTRAIN_TIMELINE: %s", err);
    else
        fprintf(stderr, "timeline: rank %d wrote %s and %s (%zu events, steps %ld to %ld)\n",
                T.rank, T.path, txt, T.tl.n, first, last);
    timeline_free(&T.tl);
    tl_api_free(&T.api);
    T.t_begin = 0;   /* a late buffer adds nothing */
    pthread_mutex_unlock(&T.mu);
}

static void at_exit(void)
{
    if (T.state == 1 && T.t_begin && !T.t_end) close_window(T.last_step + 1 - T.opened_at, 1);
}

void timeline_on_step(long step)
{
    if (T.state == -1) {
        open_env();
        if (T.state == 1) atexit(at_exit);
    }
    if (T.state != 1) return;
    T.last_step = step;
    if (!T.t_begin && step >= T.start) {   /* a resumed run may begin past START */
        uint64_t t = synced_now(0);
        pthread_mutex_lock(&T.mu);
        T.t_begin = t;
        pthread_mutex_unlock(&T.mu);
        T.opened_at = step;
    } else if (T.t_begin && step == T.opened_at + T.steps) {
        close_window(T.steps, 0);
    }
}

#else  /* no CUDA or no CUPTI header: the variable says so once */

void timeline_on_step(long step)
{
    static int read;
    (void)step;
    if (read) return;
    read = 1;
    if (setting_text(SET_TIMELINE))
        LOG_W("CTRAIN_TIMELINE: this ctrain was built without CUDA's CUPTI header; no timeline");
}

#endif
