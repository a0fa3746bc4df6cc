/* dist_watchdog.c — the watchdog thread of a multi-GPU rank (see
 * dist_watchdog.h). */
#ifdef CTRAIN_CUDA
#include "dist_watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "engine/error.h"

#define WD_RING 64
#define WD_POLL_MS 100
#define WD_ABORT_S 5

struct DistWatchdog {
    pthread_t thread;
    int rank, device, timeout_s;
    atomic_int stop, phase;                /* phase 0: set-up, 1: running */
    atomic_int aborted;                    /* the communicators are aborted */
    atomic_llong setup_deadline_ms;
    atomic_llong host_deadline_ms;         /* a host section's deadline (0: none) */
    const char *_Atomic host_what;         /* what that section does */
    ncclComm_t comm[2];
    cudaEvent_t ev[WD_RING];
    long long t_ms[WD_RING];               /* when each marker was recorded */
    atomic_uint head, tail;                /* markers recorded / passed */
};

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void *abort_comms(void *arg)
{
    DistWatchdog *w = (DistWatchdog *)arg;
    for (int i = 1; i >= 0; i--)
        if (w->comm[i]) ncclCommAbort(w->comm[i]);
    atomic_store(&w->aborted, 1);
    return NULL;
}

/* Say why, abort the communicators (their kernels return; peers on network
 * transports see the error), exit 1. The abort gets WD_ABORT_S seconds on a
 * thread of its own: should it hang too, the process ends anyway. */
static void die(DistWatchdog *w, const char *why, const char *hint)
{
    fflush(stdout);
    fprintf(stderr, "ctrain: rank %d: %s\nhint: %s\n", w->rank, why, hint);
    fflush(stderr);
    pthread_t t;
    if (pthread_create(&t, NULL, abort_comms, w) == 0)
        for (int i = 0; i < WD_ABORT_S * 10 && !atomic_load(&w->aborted); i++) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    _exit(1);
}

static void check_comm(DistWatchdog *w, ncclComm_t c)
{
    ncclResult_t r = ncclSuccess;
    if (!c || ncclCommGetAsyncError(c, &r) != ncclSuccess) return;
    if (r == ncclSuccess || r == ncclInProgress) return;
    char why[512];
    const char *last = ncclGetLastError(c);
    snprintf(why, sizeof why, "NCCL reported an error: %s%s%s", ncclGetErrorString(r),
             last && *last ? ": " : "", last ? last : "");
    die(w, why, "another rank probably failed first: its message names the cause");
}

static void check_markers(DistWatchdog *w, long long now)
{
    unsigned t = atomic_load_explicit(&w->tail, memory_order_relaxed);
    unsigned h = atomic_load_explicit(&w->head, memory_order_acquire);
    while (t != h) {
        cudaError_t e = cudaEventQuery(w->ev[t % WD_RING]);
        if (e == cudaErrorNotReady) {
            if (now - w->t_ms[t % WD_RING] > (long long)w->timeout_s * 1000) {
                char why[256];
                snprintf(why, sizeof why, "no progress for %d s: the GPU waits in a collective "
                         "(another rank died, hangs, or is much slower)", w->timeout_s);
                die(w, why, "look for the first failing rank's message; if a rank is only slow "
                    "(a long checkpoint save or evaluation on rank 0), raise --dist-timeout");
            }
            break;
        }
        if (e != cudaSuccess) {
            char why[256];
            snprintf(why, sizeof why, "the GPU reported an error: %s", cudaGetErrorString(e));
            die(w, why, "the message of the failing call on this or another rank says more");
        }
        t++;
        atomic_store_explicit(&w->tail, t, memory_order_release);
    }
}

static void *watch(void *arg)
{
    DistWatchdog *w = (DistWatchdog *)arg;
    cudaSetDevice(w->device);
    /* relaxed: this thread's event queries are legal while the main thread
     * captures a CUDA graph, and do not invalidate it */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    while (!atomic_load(&w->stop)) {
        struct timespec ts = {0, WD_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
        long long now = now_ms();
        if (atomic_load_explicit(&w->phase, memory_order_acquire) == 0) {
            if (now > atomic_load(&w->setup_deadline_ms))
                die(w, "the multi-GPU set-up (rendezvous and NCCL initialisation) did not finish "
                    "in time", "a rank did not start, failed early, or cannot reach the others "
                    "(firewall, CTRAIN_MASTER_ADDR, NCCL_SOCKET_IFNAME); the other ranks' "
                    "messages say more; --dist-timeout sets the limit");
            continue;
        }
        check_comm(w, w->comm[0]);
        check_comm(w, w->comm[1]);
        check_markers(w, now);
        long long hd = atomic_load(&w->host_deadline_ms);
        if (hd > 0 && now > hd) {
            const char *what = atomic_load(&w->host_what);
            char why[256];
            snprintf(why, sizeof why, "%s did not finish in %d s: the host waits inside CUDA or "
                     "NCCL (another rank died, hangs, or took another path)",
                     what ? what : "a host section", w->timeout_s);
            die(w, why, "look for the first failing rank's message; raise --dist-timeout if this "
                "rank is only slow");
        }
    }
    return NULL;
}

DistWatchdog *watchdog_start(int rank, int device, int timeout_s, double deadline_s)
{
    DistWatchdog *w = (DistWatchdog *)calloc(1, sizeof *w);
    if (!w) ct_fatal("out of host memory");
    w->rank = rank;
    w->device = device;
    w->timeout_s = timeout_s;
    for (int i = 0; i < WD_RING; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&w->ev[i], cudaEventDisableTiming));
    watchdog_setup_deadline(w, deadline_s);
    int rc = pthread_create(&w->thread, NULL, watch, w);
    if (rc) ct_fatal("cannot start the multi-GPU watchdog thread: %s", strerror(rc));
    return w;
}

void watchdog_setup_deadline(DistWatchdog *w, double deadline_s)
{
    atomic_store(&w->setup_deadline_ms, now_ms() + (long long)(deadline_s * 1000.0));
}

void watchdog_run(DistWatchdog *w, ncclComm_t comm, ncclComm_t comm2)
{
    w->comm[0] = comm;
    w->comm[1] = comm2;
    atomic_store_explicit(&w->phase, 1, memory_order_release);
}

void watchdog_mark(DistWatchdog *w, cudaStream_t s)
{
    if (!w) return;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
    if (cs != cudaStreamCaptureStatusNone) return;
    unsigned h = atomic_load_explicit(&w->head, memory_order_relaxed);
    unsigned t = atomic_load_explicit(&w->tail, memory_order_acquire);
    if (h - t >= WD_RING) return;   /* the GPU is far behind: the oldest marker still counts */
    CUDA_CHECK(cudaEventRecord(w->ev[h % WD_RING], s));
    w->t_ms[h % WD_RING] = now_ms();
    atomic_store_explicit(&w->head, h + 1, memory_order_release);
}

void watchdog_host_section(DistWatchdog *w, const char *what)
{
    if (!w) return;
    if (what) {
        atomic_store(&w->host_what, what);
        atomic_store(&w->host_deadline_ms, now_ms() + (long long)w->timeout_s * 1000);
    } else {
        atomic_store(&w->host_deadline_ms, 0);
    }
}

void watchdog_stop(DistWatchdog *w)
{
    if (!w) return;
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    for (int i = 0; i < WD_RING; i++) cudaEventDestroy(w->ev[i]);
    free(w);
}
#else
typedef int ct_dist_watchdog_unused_; /* the watchdog exists in CUDA builds only */
#endif
