/* overlap.c — the overlapped update (design in overlap.h). */
#include "overlap.h"

#include <stdlib.h>
#include <string.h>
#include "engine/settings.h"
#include "engine/error.h"
#include "engine/log.h"
#include "train/parallel/dist_bucket.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

struct Overlap {
    Ctx *ctx;
    ParamSet *ps;
    Optimizer *opt;
    int own;                   /* alone: the plan and tracker below are used */
    int n;                     /* buckets */
    int early;                 /* buckets updated during backward's walk, all steps */
    BucketPlan plan;
    GradReady ready;
#ifdef CTRAIN_CUDA
    cudaStream_t stream;       /* the updates, lowest priority */
    cudaEvent_t *bucket_ev;    /* [n] bucket k final on its producer stream */
    cudaEvent_t done_ev;       /* every update queued so far done (update stream) */
#endif
};

/* CTRAIN_OVERLAP_UPDATE=1 */
static int overlap_asked(void)
{
    return setting_switch(SET_OVERLAP_UPDATE);
}

int overlap_mode(const Ctx *c, const ParamSet *ps, const Optimizer *opt, DType grad_reduce,
                 float clip, int scaler_on)
{
    int asked = overlap_asked();
    /* off unless asked for: on 1 and 2 H200s it measured no faster (docs/multi-gpu.md,
     * "Tried and removed"): the update's memory traffic slows backward by
     * about what it hides */
    /* the sharded update (train/parallel/dist.h, CTRAIN_DIST_SHARD) rides on it:
     * wanted with several ranks (asked for, or by default for a large
     * model), it turns the overlap on; by default silently off where the
     * update cannot be split */
    int shard_asked = 0;
    int shard = c->dp_world > 1 && grad_reduce == DT_F32 &&
                dist_shard_wanted(ps->total, &shard_asked);
    if (!shard && !asked) return 0;
    const char *why = NULL;
    if (!optimizer_can_split(opt)) why = "LAMB needs whole-tensor norms";
    else if (clip > 0) why = "--clip needs the global gradient norm first";
    else if (scaler_on) why = "fp16's grad scaler checks every gradient first";
    if (why && (asked || shard_asked))
        LOG_W("%s: the update stays after backward (%s)",
              shard && shard_asked ? "CTRAIN_DIST_SHARD=1" : "CTRAIN_OVERLAP_UPDATE=1", why);
    return why == NULL;
}

/* The range step: optimizer on [begin, end), then those gradients zeroed,
 * queued on stream (a cudaStream_t; NULL on the CPU). */
static void update_range(Overlap *o, size_t begin, size_t end, void *stream)
{
    ParamSet *ps = o->ps;
    optimizer_split_range(o->opt, ps, begin, end, stream);
    if (o->ctx->device == DEV_CPU) {
        memset(ps->grad + begin, 0, (end - begin) * sizeof(float));
        return;
    }
#ifdef CTRAIN_CUDA
    CUDA_CHECK(cudaMemsetAsync(ps->grad + begin, 0, (end - begin) * sizeof(float),
                               (cudaStream_t)stream));
#endif
}

void overlap_bucket_final(Overlap *o, int b, size_t begin, size_t end, void *producer)
{
    CT_ASSERT(b >= 0 && b < o->n, "overlap_bucket_final: bucket %d of %d", b, o->n);
    if (o->ctx->bwd_hook) o->early++;
    if (o->ctx->device == DEV_CPU) {   /* the gradients are final now: update in place */
        update_range(o, begin, end, NULL);
        return;
    }
#ifdef CTRAIN_CUDA
    CUDA_CHECK(cudaEventRecord(o->bucket_ev[b], (cudaStream_t)producer));
    CUDA_CHECK(cudaStreamWaitEvent(o->stream, o->bucket_ev[b], 0));
    update_range(o, begin, end, o->stream);
#else
    (void)producer;
#endif
}

/* GradReady's issue (alone): bucket b's gradients are final on the compute stream. */
static void issue_bucket(void *user, int b)
{
    Overlap *o = (Overlap *)user;
    const DistBucket *k = &o->plan.b[b];
    void *producer = NULL;   /* the CPU: no streams */
#ifdef CTRAIN_CUDA
    producer = o->ctx->stream;
#endif
    overlap_bucket_final(o, b, k->begin, k->end, producer);
}

Overlap *overlap_open(Ctx *c, ParamSet *ps, Optimizer *opt, const Dist *dist)
{
    Overlap *o = (Overlap *)calloc(1, sizeof *o);
    if (!o) ct_fatal("out of host memory");
    o->ctx = c;
    o->ps = ps;
    o->opt = opt;
    o->own = dist == NULL;
    float mb = dist_bucket_mb_auto(ps->total * sizeof(float));
    if (o->own) {
        size_t asked = setting_size(SET_OVERLAP_BUCKET_MB);   /* bytes; 0: unset */
        size_t elems = asked ? asked / sizeof(float)
                             : (size_t)((double)mb * 1024.0 * 1024.0 / sizeof(float));
        bucket_plan_build(&o->plan, ps, elems, 0);
        grad_ready_init(&o->ready, ps, &o->plan, issue_bucket, o);
        o->n = o->plan.n;
    } else {
        o->n = dist_buckets(dist);
    }
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) {
        int least = 0, greatest = 0;
        CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        CUDA_CHECK(cudaStreamCreateWithPriority(&o->stream, cudaStreamNonBlocking, least));
        o->bucket_ev = (cudaEvent_t *)calloc((size_t)o->n, sizeof(cudaEvent_t));
        if (!o->bucket_ev) ct_fatal("out of host memory");
        for (int b = 0; b < o->n; b++)
            CUDA_CHECK(cudaEventCreateWithFlags(&o->bucket_ev[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&o->done_ev, cudaEventDisableTiming));
    }
#endif
    if (o->own)
        LOG_I("overlapped update: %d buckets of ~%g MB, each updated once backward has finished "
              "its gradients (CTRAIN_OVERLAP_UPDATE=1)", o->n, (double)mb);
    else
        LOG_I("overlapped update: each of the %d buckets updated once its all-reduce is done "
              "(%s)", o->n, overlap_asked() ? "CTRAIN_OVERLAP_UPDATE=1" : "for the sharded update");
    return o;
}

void overlap_backward_begin(Overlap *o, int last)
{
    if (!o || !o->own) return;
    if (last) {
        grad_ready_reset(&o->ready);
        o->ctx->bwd_hook = &o->ready.hook;
    } else {
        o->ctx->bwd_hook = NULL;
    }
}

void overlap_grads_ready(Overlap *o)
{
    if (!o) return;
    Ctx *c = o->ctx;
    if (o->own) {
        c->bwd_hook = NULL;
        grad_ready_finish(&o->ready);
    }
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) {
        CUDA_CHECK(cudaEventRecord(o->done_ev, o->stream));
        CUDA_CHECK(cudaStreamWaitEvent(c->stream, o->done_ev, 0));
    }
#endif
}

void overlap_record(Overlap *o, void *event)
{
#ifdef CTRAIN_CUDA
    if (o->ctx->device == DEV_CUDA)
        CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, o->stream));
#else
    (void)o; (void)event;
#endif
}

int overlap_early_buckets(const Overlap *o) { return o ? o->early : 0; }
int overlap_buckets(const Overlap *o) { return o ? o->n : 0; }

void overlap_close(Overlap *o)
{
    if (!o) return;
#ifdef CTRAIN_CUDA
    if (o->ctx->device == DEV_CUDA) {
        CUDA_CHECK(cudaStreamSynchronize(o->stream));
        for (int b = 0; b < o->n; b++) CUDA_CHECK(cudaEventDestroy(o->bucket_ev[b]));
        free(o->bucket_ev);
        CUDA_CHECK(cudaEventDestroy(o->done_ev));
        CUDA_CHECK(cudaStreamDestroy(o->stream));
    }
#endif
    if (o->own) {
        grad_ready_free(&o->ready);
        bucket_plan_free(&o->plan);
    }
    free(o);
}
