/* dist.c — the data-parallel glue (design in dist.h): the launcher
 * decision, rank set-up, NCCL communicators, the gradient buckets'
 * all-reduces on their own stream, the loss average and the teardown.
 *
 * --grad-reduce bf16 (numerics in dist.h): a bf16 shadow of the whole
 * gradient buffer, allocated once; per bucket
 *   comm stream:     h[k] = bf16(g[k])             (once backward is done with g[k])
 *                    h[k] = avg over ranks of h[k] (ncclBfloat16, ncclAvg)
 *                    g[k] = f32(h[k])              (overwrite, not accumulate)
 * all stream-ordered like the f32 path, so it is graph-capturable too. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "engine/settings.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "dist_bucket.h"
#include "dist_launch.h"
#include "dist_rdzv.h"
#include "dist_regbuf.h"
#include "dist_trace.h"
#include "dist_watchdog.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#if !defined(NCCL_VERSION)
#error "ctrain needs NCCL 2.10 or newer (ncclAvg, ncclBfloat16); install one, or make CUDA=0"
#elif NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
#error "ctrain needs NCCL 2.10 or newer (ncclAvg, ncclBfloat16); install one, or make CUDA=0"
#endif
#endif

struct Dist {
    DistEnv env;
    DistOptions opt;
    Ctx *ctx;
    ParamSet *ps;              /* from dist_attach (DistModel): the buffers it sends */
    float *state[DIST_MAX_STATE];   /* the optimizer's state blocks */
    int n_state;
    DistHooks hooks;           /* the training loop's callbacks */
    BucketPlan plan;
    GradReady ready;
    int attached, hooked;
#ifdef CTRAIN_CUDA
    ncclComm_t comm, bn_comm;
    cudaStream_t comm_stream;
    cudaEvent_t *bucket_ev;    /* [plan.n] gradients of bucket k written (compute stream) */
    cudaEvent_t done_ev;       /* every all-reduce of the step issued so far done (comm stream) */
    uint16_t *shadow;          /* --grad-reduce bf16: [total] the gradients as sent; else NULL */
    RegBuf grad_buf;           /* the gradients, in a symmetric NCCL window (dist_regbuf.h) */
    RegBuf shadow_buf;         /* the shadow's memory */
    RegBuf data_buf, lowp_buf; /* sharded, in a symmetric window: the weights (and AMP copy),
                                * which the shares' all-gathers write */
    float *scratch;            /* one device float for the barrier */
    int split;                 /* reduce-scatter + all-gather per bucket: when the buffer
                                * NCCL sends is in a symmetric window */
    int sharding;              /* the sharded update wanted (dist_shard_wanted, dist.h) and
                                * possible: the optimizer state is current
                                * only in this rank's shares until dist_sync_state */
    long save_every;           /* --save-every and --save as given (rank 0 alone keeps them): */
    int saves;                 /* every rank joins the state gather before a save */
    cudaEvent_t *upd_ev;       /* [plan.n] bucket k's share updated (update stream) */
    /* CTRAIN_DIST_SPARSE_EMB (default on with f32 reduction in buckets): a
     * large embedding table's lookup gradient in compact form ("sparse" below) */
    int sparse;                /* -1 until dist_attach: the default */
    int taper;                 /* CTRAIN_DIST_TAPER: the last buckets small (dist_bucket.h;
                                * -1 until dist_attach: from DIST_TAPER_AUTO_MB up) */
    const Node *defer_node;    /* this step's deferred lookup (NULL: none yet) */
    int defer_bucket;          /* its table's bucket: all-reduced early, updated after */
    size_t defer_off, sp_cap, sp_V, sp_D;
    int sp_taken;              /* the lookup's backward wrote the compact rows this step */
    int held_ag;               /* [shard] a bucket whose all-gather waits for the rows (-1: none) */
    int sp_logged;
    float *sp_rows;            /* [(1 + world) sp_cap sp_D]: this rank's rows, then everyone's */
    int32_t *sp_ids;           /* [(1 + world) sp_cap] */
    cudaEvent_t sp_ev;
    DistWatchdog *wd;
    DistTrace *trace;          /* CTRAIN_DIST_TRACE=1: step phase timings; else NULL */
#endif
};

int dist_is_main(const Dist *d) { return !d || d->env.rank == 0; }

int dist_buckets(const Dist *d) { return d ? d->plan.n : 0; }

int dist_device_id(const Dist *d) { return d->env.local_rank; }

int dist_launch_if_asked(const DistOptions *o, Device device, const char *cmd, int argc,
                         char **argv, int *rc)
{
    if (o->gpus <= 1) return 0;
    DistEnv e;
    if (dist_env_read(&e)) return 0;   /* already a rank: --gpus is the launcher's business */
#ifndef CTRAIN_CUDA
    ct_fatal_hint("build ctrain with nvcc, cuDNN, cuBLAS and NCCL (make), or drop --gpus",
                  "--gpus %d: this ctrain is a CPU-only build", o->gpus);
#endif
    if (device != DEV_CUDA)
        ct_fatal_hint("drop --device cpu (each rank trains on its own GPU), or drop --gpus",
                      "--gpus %d needs CUDA devices%s", o->gpus,
                      ctx_cuda_available() ? "" : ", and none was found");
    char **av = (char **)calloc((size_t)argc + 3, sizeof *av);
    if (!av) ct_fatal("out of host memory");
    av[0] = (char *)"/proc/self/exe";
    av[1] = (char *)cmd;
    for (int i = 0; i < argc; i++) av[i + 2] = argv[i];
    char what[64];
    snprintf(what, sizeof what, "ctrain %s --gpus %d", cmd, o->gpus);
    *rc = dist_spawn(av, o->gpus, 10.0, what);
    free(av);
    return 1;
}

Dist *dist_setup(const DistOptions *o, Device device, long save_every, int saves)
{
    DistEnv e;
    if (!dist_env_read(&e) || e.world == 1) {
        if (o->sync_bn)
            LOG_W("--sync-bn: this run has one process, so batch norm uses this GPU's batch "
                  "anyway");
        if (o->grad_reduce != DT_F32)
            LOG_W("--grad-reduce %s: this run has one process, so no gradient is all-reduced",
                  dtype_name(o->grad_reduce));
        return NULL;
    }
    char pfx[32];
    snprintf(pfx, sizeof pfx, "rank %d: ", e.rank);
    ct_set_msg_prefix(pfx);
#ifndef CTRAIN_CUDA
    (void)device; (void)save_every; (void)saves;
    ct_fatal_hint("build ctrain with nvcc, cuDNN, cuBLAS and NCCL (make), or run one process",
                  "multi-GPU training (%d ranks from %s) needs the CUDA build; this one is "
                  "CPU-only", e.world, dist_env_source_name(e.source));
#else
    if (device != DEV_CUDA)
        ct_fatal_hint("drop --device cpu: each rank trains on GPU <local rank>",
                      "multi-GPU training needs CUDA devices (rank %d of %d)", e.rank, e.world);
    Dist *d = (Dist *)calloc(1, sizeof *d);
    if (!d) ct_fatal("out of host memory");
    d->env = e;
    d->held_ag = -1;
    d->opt = *o;
    d->save_every = save_every;
    d->saves = saves;
    if (e.rank != 0) {
        /* rank 0 writes the files and the progress (the caller drops this
         * rank's --log and --save: dist_is_main); the others only report errors */
        if (!setting_text(SET_LOG)) log_set_level(LOG_ERROR);
        if (!freopen("/dev/null", "w", stdout))
            LOG_W("cannot silence stdout on rank %d", e.rank);
    }
    return d;
#endif
}

#ifdef CTRAIN_CUDA

static void bn_allreduce(Ctx *c, float *buf, size_t n, void *user)
{
    Dist *d = (Dist *)user;
    NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, ncclAvg, d->bn_comm, c->stream));
}

/* Rank 0 makes the NCCL id and serves it; the others fetch it. */
static void rendezvous(Dist *d, ncclUniqueId *id)
{
    const DistEnv *e = &d->env;
    char err[512];
    double t = (double)d->opt.timeout_s;
    if (e->rank == 0) {
        NCCL_CHECK(ncclGetUniqueId(id));
        int fd = e->rdzv_fd;
        if (fd < 0) fd = rdzv_listen("0.0.0.0", e->master_port, NULL, err, sizeof err);
        if (fd < 0)
            ct_fatal_hint("choose a free port with CTRAIN_MASTER_PORT", "%s", err);
        int rc = rdzv_serve(fd, e->world, id, sizeof *id, t, err, sizeof err);
        close(fd);
        if (rc)
            ct_fatal_hint("start every rank with the same CTRAIN_WORLD_SIZE and distinct "
                          "CTRAIN_RANK; --dist-timeout sets how long rank 0 waits", "%s", err);
    } else if (rdzv_fetch(e->master_addr, e->master_port, e->rank, e->world, id, sizeof *id, t,
                          err, sizeof err)) {
        ct_fatal_hint("check that rank 0 runs and that CTRAIN_MASTER_ADDR / CTRAIN_MASTER_PORT "
                      "name its host and port (reachable from here)", "%s", err);
    }
}

/* "2.28.9" from ncclGetVersion's code (before 2.9 it was X*1000 + Y*100 + Z). */
static const char *nccl_version_str(char *buf, size_t len, int v)
{
    if (v >= 10000) snprintf(buf, len, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else snprintf(buf, len, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
    return buf;
}

/* The NCCL this process loaded can be older than the header it was built
 * with (LD_LIBRARY_PATH): bf16 all-reduces need 2.10. */
static void check_nccl_for_options(const DistOptions *o)
{
    int v = 0;
    char s[32];
    NCCL_CHECK(ncclGetVersion(&v));
    if (o->grad_reduce == DT_BF16 && v < NCCL_VERSION(2, 10, 0))
        ct_fatal_hint("use NCCL 2.10 or newer (LD_LIBRARY_PATH may point at an old libnccl), "
                      "or drop --grad-reduce bf16", "--grad-reduce bf16 needs NCCL 2.10 or newer "
                      "(ncclBfloat16); this process loaded NCCL %s", nccl_version_str(s, sizeof s, v));
}

void dist_start(Dist *d, Ctx *c)
{
    if (!d) return;
    const DistEnv *e = &d->env;
    CT_ASSERT(c->device == DEV_CUDA, "dist_start needs a CUDA context");
    int n_dev = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n_dev));
    if (e->local_rank >= n_dev)
        ct_fatal_hint("start at most as many ranks per machine as it has GPUs (or fix "
                      "CTRAIN_LOCAL_RANK / CUDA_VISIBLE_DEVICES; under srun give every task "
                      "the node's GPUs: --gpus-per-node, not --gpus-per-task)",
                      "local rank %d needs GPU %d, this machine shows %d", e->local_rank,
                      e->local_rank, n_dev);
    check_nccl_for_options(&d->opt);
    d->ctx = c;
    d->wd = watchdog_start(e->rank, c->device_id, d->opt.timeout_s, 2.0 * d->opt.timeout_s);
    d->trace = dist_trace_open(e->rank);
    ncclUniqueId id;
    rendezvous(d, &id);
    watchdog_setup_deadline(d->wd, (double)d->opt.timeout_s);
    /* with the gradients in a symmetric window (the default, dist_regbuf.h)
     * NCCL's zero-CTA policy, with each bucket split into a reduce-scatter
     * and an all-gather (issue_bucket), scales best (docs/multi-gpu.md);
     * NCCL_CTA_POLICY set by the user wins */
    int nv = 0;
    NCCL_CHECK(ncclGetVersion(&nv));
    if (regbuf_mode_default() == 2 && nv >= NCCL_VERSION(2, 28, 0))
        setting_default_env(SET_NCCL_CTA_POLICY, "2");   /* kept when the user set it */
    NCCL_CHECK(ncclCommInitRank(&d->comm, e->world, id, e->rank));
    if (d->opt.sync_bn) NCCL_CHECK(ncclCommSplit(d->comm, 0, e->rank, &d->bn_comm, NULL));
    watchdog_run(d->wd, d->comm, d->bn_comm);

    /* the all-reduces' stream outranks the compute stream, so NCCL's kernels
     * get SMs as soon as a bucket is final (the compute stream's priority
     * instead measured no different) */
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&d->comm_stream, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaEventCreateWithFlags(&d->done_ev, cudaEventDisableTiming));
    d->scratch = (float *)mem_alloc(c, sizeof(float));
    d->sparse = setting_switch(SET_DIST_SPARSE_EMB);
    d->taper = setting_switch(SET_DIST_TAPER);
    CUDA_CHECK(cudaEventCreateWithFlags(&d->sp_ev, cudaEventDisableTiming));

    c->dp_rank = e->rank;
    c->dp_world = e->world;
    /* dropout: a different stream of masks on every rank (rank 0 keeps --seed's) */
    c->seed += (uint64_t)e->rank * 0x9E3779B97F4A7C15ull;
    if (d->opt.sync_bn) {
        c->bn_allreduce = bn_allreduce;
        c->bn_allreduce_user = d;
    }
}

static ncclDataType_t nccl_type(DType dt)
{
    switch (dt) {
    case DT_F32: return ncclFloat;
    case DT_F16: return ncclHalf;
    case DT_BF16: return ncclBfloat16;
    case DT_I32: return ncclInt32;
    case DT_I64: return ncclInt64;
    default: return ncclUint8;
    }
}

/* This rank's share of a bucket of n elements, [*mine, *mine + share), for
 * the in-place reduce-scatters and all-gathers; 0 when n does not divide by
 * the ranks (that bucket is all-reduced and updated whole on every rank). */
static size_t bucket_share(const Dist *d, size_t n, size_t *mine)
{
    size_t w = (size_t)d->env.world, share = n % w ? 0 : n / w;
    *mine = (size_t)d->env.rank * share;
    return share;
}

/* The loop queues this step's update bucket by bucket (DistHooks.overlapped). */
static int overlapped(const Dist *d) { return d->hooks.overlapped(d->hooks.user); }

/* The all-gather half of issue_bucket_sharded: every rank's updated share
 * of bucket b's weights (f32 and the AMP copy) to every rank, once the
 * share's update is done. */
static void gather_shares(Dist *d, int b)
{
    ParamSet *ps = d->ps;
    const DistBucket *k = &d->plan.b[b];
    size_t mine, share = bucket_share(d, k->end - k->begin, &mine);
    CUDA_CHECK(cudaStreamWaitEvent(d->comm_stream, d->upd_ev[b], 0));
    float *w = ps->data + k->begin;
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllGather(w + mine, w, share, ncclFloat, d->comm, d->comm_stream));
    if (ps->lowp) {
        size_t es = dtype_size(ps->lowp_dt);
        char *l = (char *)ps->lowp + k->begin * es;
        NCCL_CHECK(ncclAllGather(l + mine * es, l, share, nccl_type(ps->lowp_dt), d->comm,
                                 d->comm_stream));
    }
    NCCL_CHECK(ncclGroupEnd());
}

/* The sharded update of bucket b (n gradients at g, final on the compute
 * stream; the communication stream waits for them already). Rank r owns the
 * share [r n/N, (r+1) n/N) of the bucket:
 *   comm stream:   g[share] = average over ranks of g[share]   (reduce-scatter)
 *                  g outside the share = 0  (read by the reduce-scatter, no longer needed)
 *   update stream: update the share's weights (f32 and AMP copy), zero g[share]
 *   comm stream:   every rank's share of the weights to every rank (all-gather, in place)
 * For 2 ranks the average is the all-reduce's, bit for bit (one addition),
 * and the update is elementwise, so the weights equal the unsharded step's.
 * The optimizer state (momentum, Adam's m and v) moves only in the share:
 * dist_sync_state gathers it before a checkpoint is written. */
static void issue_bucket_sharded(Dist *d, int b, float *g, size_t n, size_t share, size_t mine)
{
    const DistBucket *k = &d->plan.b[b];
    NCCL_CHECK(ncclReduceScatter(g, g + mine, share, ncclFloat, ncclAvg, d->comm, d->comm_stream));
    if (mine > 0) CUDA_CHECK(cudaMemsetAsync(g, 0, mine * sizeof(float), d->comm_stream));
    if (mine + share < n)
        CUDA_CHECK(cudaMemsetAsync(g + mine + share, 0, (n - mine - share) * sizeof(float),
                                   d->comm_stream));
    d->hooks.bucket_final(d->hooks.user, b, k->begin + mine, k->begin + mine + share,
                          d->comm_stream);
    d->hooks.record_update(d->hooks.user, d->upd_ev[b]);
    /* [sparse] the last bucket of a step with a deferred lookup: its
     * all-gather waits until the lookup's rows have gone (sparse_finish),
     * which would otherwise queue behind it at the very end of backward */
    if (d->defer_node && d->ready.n_issued == d->plan.n && d->held_ag < 0) {
        d->held_ag = b;
        return;
    }
    gather_shares(d, b);
}

/* GradReady's issue: bucket b's gradients are final on the compute stream.
 * f32: averaged in place. bf16: rounded into the shadow on the compute
 * stream, the shadow averaged, and the average written back over g. */
static void issue_bucket(void *user, int b)
{
    Dist *d = (Dist *)user;
    Ctx *c = d->ctx;
    const DistBucket *k = &d->plan.b[b];
    size_t n = k->end - k->begin;
    float *g = d->ps->grad + k->begin;
    void *buf = g;
    ncclDataType_t type = ncclFloat;
    CUDA_CHECK(cudaEventRecord(d->bucket_ev[b], c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(d->comm_stream, d->bucket_ev[b], 0));
    dist_trace_mark(d->trace, TRACE_COMM_FIRST, d->comm_stream);
    /* [sparse] the deferred lookup's table: its dense part is averaged now,
     * the lookup rows are added (and the bucket updated) after backward */
    int held = d->defer_node && b == d->defer_bucket;
    /* [shard] this rank's share of the bucket: reduce-scatter, update the
     * share, all-gather the updated values (issue_bucket_sharded) */
    size_t mine, share = bucket_share(d, n, &mine);
    if (!held && d->sharding && overlapped(d) && share) {
        issue_bucket_sharded(d, b, g, n, share, mine);
        return;
    }
    /* the casts run on the communication stream, off backward's path: the
     * compute stream writes g[k] no more before the update, which waits */
    if (d->shadow) {
        buf = d->shadow + k->begin;
        type = ncclBfloat16;
        cast_cuda(buf, DT_BF16, g, DT_F32, n, 0, d->comm_stream);
    }
    if (d->split && share) {
        /* the same average in two halves: a reduce-scatter (each rank's
         * share, in place), then an all-gather of the shares (in place);
         * fastest with the gradients in a symmetric window and NCCL's
         * zero-CTA policy (the defaults, dist_start / dist_regbuf.h) */
        char *own = (char *)buf + mine * (type == ncclFloat ? 4 : 2);
        NCCL_CHECK(ncclReduceScatter(buf, own, share, type, ncclAvg, d->comm, d->comm_stream));
        NCCL_CHECK(ncclAllGather(own, buf, share, type, d->comm, d->comm_stream));
    } else {
        NCCL_CHECK(ncclAllReduce(buf, buf, n, type, ncclAvg, d->comm, d->comm_stream));
    }
    if (d->shadow) cast_cuda(g, DT_F32, buf, DT_BF16, n, 0, d->comm_stream);
    /* [overlap] the averaged bucket is final: its update goes on the update
     * stream, next to backward and the next all-reduces (train/loop/overlap.h) */
    if (overlapped(d) && !held)
        d->hooks.bucket_final(d->hooks.user, b, k->begin, k->end, d->comm_stream);
}

/* ---- [sparse] the lookup gradient of a large embedding table ----
 * BERT's word embeddings (31M parameters) are used twice: by the MLM
 * decoder (tied weights), whose gradient is dense and comes first in
 * backward, and by the lookup, whose gradient comes last and touches only
 * the rows of the batch's tokens (at most B x T of 30,522). Counted
 * normally, the table's 125 MB bucket is final only at the very end and its
 * all-reduce is exposed. So (by default with f32 reduction;
 * CTRAIN_DIST_SPARSE_EMB=0 turns it off) the lookup's use is deferred
 * (GradReady.defer): the bucket is all-reduced once the decoder is done,
 * mid-backward; the lookup's backward writes its per-token-id sums in
 * compact form (ids, rows: ops/embedding.h) instead of adding them; after
 * backward every rank's rows are all-gathered (B x T rows, ~16 MB each for
 * BERT-large) and added into the averaged gradient with 1/N, rank by rank
 * (deterministic); then the bucket is updated. With the sharded update the
 * step's last bucket holds its all-gather until the rows have gone
 * (held_ag): issued first it kept them waiting ~0.1 ms at the very end of
 * backward (BERT-large on 2 GPUs 95.0-95.3% -> 95.4-95.6%). Which lookup is
 * deferred: grad_ready_lookup_deferrable (dist_bucket.h); one a step. */
static int sparse_defer(void *user, const Node *n, int p)
{
    Dist *d = (Dist *)user;
    if (d->defer_node) return n == d->defer_node;
    if (!grad_ready_lookup_deferrable(&d->ready, n, p, d->ctx->bwd_depth)) return 0;
    const ParamInfo *pi = &d->ps->p[p];
    size_t N = n->saved[0]->numel, V = (size_t)n->i[0];
    d->defer_node = n;
    d->defer_bucket = d->plan.param_bucket[p];
    d->defer_off = pi->offset;
    if (!d->sp_logged) {
        d->sp_logged = 1;
        LOG_I("deferred lookup: %s (%zu of %zu rows at most a step) in bucket %d of its own; "
              "its rows all-gathered after backward", pi->name, N, V, d->defer_bucket);
    }
    return 1;
}

static int sparse_take(void *user, const void *node, float **rows, int32_t **ids)
{
    Dist *d = (Dist *)user;
    const Node *n = (const Node *)node;
    if (!d->defer_node || n != d->defer_node) return 0;
    size_t N = n->saved[0]->numel, V = (size_t)n->i[0], D = (size_t)n->i[1];
    if (d->sp_cap != N || d->sp_D != D) {   /* first step (eager), or the batch changed */
        CT_ASSERT(!d->ctx->capturing, "data parallel: the sparse lookup buffers grew during "
                  "graph capture (warm-up steps come first)");
        size_t w = (size_t)d->env.world + 1;
        if (d->sp_rows) mem_free(d->ctx, d->sp_rows, w * d->sp_cap * d->sp_D * sizeof(float));
        if (d->sp_ids) mem_free(d->ctx, d->sp_ids, w * d->sp_cap * sizeof(int32_t));
        d->sp_rows = (float *)mem_alloc(d->ctx, w * N * D * sizeof(float));
        d->sp_ids = (int32_t *)mem_alloc(d->ctx, w * N * sizeof(int32_t));
        d->sp_cap = N;
        d->sp_D = D;
    }
    d->sp_V = V;
    d->sp_taken = 1;
    *rows = d->sp_rows;
    *ids = d->sp_ids;
    return 1;
}

/* After backward (the deferred table's bucket all-reduced already): every
 * rank's compact rows to every rank, added with 1/N into the gradient; then
 * the bucket's update when the update overlaps. */
static void sparse_finish(Dist *d)
{
    Ctx *c = d->ctx;
    size_t cap = d->sp_cap, D = d->sp_D, W = (size_t)d->env.world;
    float *g = d->ps->grad + d->defer_off;
    if (!d->sp_taken) goto update;   /* the lookup got no gradient (every rank alike) */
    CUDA_CHECK(cudaEventRecord(d->sp_ev, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(d->comm_stream, d->sp_ev, 0));
    float *rows_all = d->sp_rows + cap * D;
    int32_t *ids_all = d->sp_ids + cap;
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllGather(d->sp_ids, ids_all, cap, ncclInt32, d->comm, d->comm_stream));
    NCCL_CHECK(ncclAllGather(d->sp_rows, rows_all, cap * D, ncclFloat, d->comm, d->comm_stream));
    NCCL_CHECK(ncclGroupEnd());
    for (size_t r = 0; r < W; r++)
        embedding_rows_add_cuda(g, rows_all + r * cap * D, ids_all + r * cap, cap, d->sp_V, D,
                                1.0f / (float)W, d->comm_stream);
update:
    if (overlapped(d)) {
        const DistBucket *k = &d->plan.b[d->defer_bucket];
        d->hooks.bucket_final(d->hooks.user, d->defer_bucket, k->begin, k->end, d->comm_stream);
    }
    if (d->held_ag >= 0) gather_shares(d, d->held_ag);   /* [shard] after the rows */
    d->held_ag = -1;
}

/* dist_regbuf's agreement: every rank's ok, all-reduced (dist_all_ok). */
static int regbuf_agree(void *user, int ok) { return dist_all_ok((Dist *)user, ok); }

void dist_attach(Dist *d, const DistModel *m, const DistHooks *h)
{
    if (!d) return;
    Ctx *c = d->ctx;
    ParamSet *ps = m->params;
    d->ps = ps;
    for (int i = 0; i < m->n_state; i++) d->state[i] = m->state[i];
    d->n_state = m->n_state;
    d->hooks = *h;
    /* the same starting point everywhere, whatever each rank initialised or loaded */
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclBroadcast(ps->data, ps->data, ps->total, ncclFloat, 0, d->comm, c->stream));
    for (int i = 0; i < ps->nb; i++) {
        Tensor *b = ps->b[i].t;
        size_t n = b->numel * (nccl_type(b->dtype) == ncclUint8 ? dtype_size(b->dtype) : 1);
        NCCL_CHECK(ncclBroadcast(b->data, b->data, n, nccl_type(b->dtype), 0, d->comm, c->stream));
    }
    NCCL_CHECK(ncclGroupEnd());
    /* the f32 values may have changed on this rank: AMP's working copy
     * follows before the first forward (params_lowp_refresh) */
    ps->lowp_stale = 1;

    if (d->opt.bucket_mb < 0) d->opt.bucket_mb = dist_bucket_mb_auto(ps->total * sizeof(float));
    size_t elems = (size_t)((double)d->opt.bucket_mb * 1024.0 * 1024.0 / sizeof(float));
    /* the defaults (dist.h): the sparse lookup with f32 reduction in buckets,
     * the taper from 50 MB buckets up */
    int sparse_asked = d->sparse >= 0;
    if (d->sparse < 0) d->sparse = d->opt.grad_reduce == DT_F32;
    if (d->taper < 0) d->taper = d->opt.bucket_mb >= DIST_TAPER_AUTO_MB;
    if (d->sparse && d->opt.bucket_mb <= 0) {   /* nothing goes out before the lookup */
        if (sparse_asked)
            LOG_W("CTRAIN_DIST_SPARSE_EMB=1: not with --bucket-mb 0 (one all-reduce after "
                  "backward); the lookup gradient goes dense");
        d->sparse = 0;
    }
    bucket_plan_build(&d->plan, ps, elems, (d->sparse ? BUCKET_ISOLATE_LOOKUPS : 0) |
                                               (d->taper ? BUCKET_TAPER : 0));
    grad_ready_init(&d->ready, ps, &d->plan, issue_bucket, d);
    if (d->sparse) {
        d->ready.defer = sparse_defer;
        d->ready.defer_user = d;
    }
    d->bucket_ev = (cudaEvent_t *)calloc((size_t)d->plan.n, sizeof(cudaEvent_t));
    if (!d->bucket_ev) ct_fatal("out of host memory");
    d->upd_ev = (cudaEvent_t *)calloc((size_t)d->plan.n, sizeof(cudaEvent_t));
    if (!d->upd_ev) ct_fatal("out of host memory");
    for (int b = 0; b < d->plan.n; b++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&d->bucket_ev[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&d->upd_ev[b], cudaEventDisableTiming));
    }
    int shard_asked = 0, shard = dist_shard_wanted(ps->total, &shard_asked);
    if (shard && shard_asked && d->opt.grad_reduce != DT_F32)
        LOG_W("CTRAIN_DIST_SHARD=1: not with --grad-reduce %s; every rank updates every weight",
              dtype_name(d->opt.grad_reduce));
    if (shard && shard_asked && !m->overlap)
        LOG_W("CTRAIN_DIST_SHARD=1: the update is not overlapped (see the warning above); "
              "every rank updates every weight");
    d->sharding = shard && m->overlap && d->opt.grad_reduce == DT_F32;
    if (d->sharding)
        LOG_I("sharded update: each bucket reduce-scattered, 1/%d of it updated here, the "
              "weights all-gathered (CTRAIN_DIST_SHARD%s)", d->env.world,
              shard_asked ? "=1" : " unset: on from 100M parameters");
    /* NCCL sends the gradients themselves (f32) or their bf16 shadow: that
     * buffer goes into a symmetric NCCL window where NCCL has them
     * (dist_regbuf.h) */
    int reg = regbuf_mode_default();
    if (d->opt.grad_reduce == DT_BF16) {
        regbuf_alloc(&d->shadow_buf, c, d->comm, ps->total * sizeof(uint16_t), reg, 1,
                     regbuf_agree, d);
        d->shadow = (uint16_t *)d->shadow_buf.ptr;
    } else if (reg > 0) {
        regbuf_alloc(&d->grad_buf, c, d->comm, ps->total * sizeof(float), reg, 0, regbuf_agree, d);
        if (d->grad_buf.ptr) params_grad_move(ps, (float *)d->grad_buf.ptr);
    }
    /* [shard] the weights' all-gathers in a window too (as the gradients';
     * CTRAIN_DIST_SHARD_WINDOW=0 leaves them in plain memory) */
    if (d->sharding && reg == 2 &&
        setting_switch(SET_DIST_SHARD_WINDOW)) {
        regbuf_alloc(&d->data_buf, c, d->comm, ps->total * sizeof(float), reg, 0, regbuf_agree, d);
        if (ps->lowp)
            regbuf_alloc(&d->lowp_buf, c, d->comm, ps->total * dtype_size(ps->lowp_dt), reg, 0,
                         regbuf_agree, d);
        if (d->data_buf.ptr && (!ps->lowp || d->lowp_buf.ptr)) {
            params_values_move(ps, (float *)d->data_buf.ptr, d->lowp_buf.ptr);
        } else {   /* a window could not be had (on some rank): plain weights */
            regbuf_free(&d->data_buf, c, d->comm);
            regbuf_free(&d->lowp_buf, c, d->comm);
        }
    }
    /* the split all-reduce where the buffer NCCL sends is a symmetric
     * window (measured: alone it is slower, in a window faster) */
    d->split = (d->shadow ? d->shadow_buf.mode : d->grad_buf.mode) == 2;
    d->hooked = d->opt.bucket_mb > 0;   /* 0: one all-reduce after backward, no overlap */
    d->attached = 1;
    int version = 0;
    char vs[32];
    ncclGetVersion(&version);
    LOG_I("data parallel: %d ranks (%s), NCCL %s; gradients in %d bucket%s of ~%g MB "
          "all-reduced%s %s, %s buffers; batch norm %s; each rank a batch of %d", d->env.world,
          dist_env_source_name(d->env.source), nccl_version_str(vs, sizeof vs, version),
          d->plan.n, d->plan.n == 1 ? "" : "s", (double)d->opt.bucket_mb,
          d->shadow ? " (bf16)" : "", d->hooked ? (d->split ? "during backward (reduce-scatter + "
          "all-gather)" : "during backward") : "after backward",
          regbuf_mode_name(d->shadow ? d->shadow_buf.mode : d->grad_buf.mode),
          d->opt.sync_bn ? "synchronized (--sync-bn)" : "per GPU", m->batch);
    if (d->taper) {   /* the sizes, in the order backward sends them */
        char sizes[512];
        size_t o = 0;
        for (int b = 0; b < d->plan.n && o + 16 < sizeof sizes; b++)
            o += (size_t)snprintf(sizes + o, sizeof sizes - o, " %.1f",
                                  (double)(d->plan.b[b].end - d->plan.b[b].begin) * 4.0 /
                                      1048576.0);
        LOG_I("tapered buckets, MB in backward order:%s", sizes);
    }
    watchdog_mark(d->wd, c->stream);
}

void dist_backward_begin(Dist *d, int last)
{
    if (!d) return;
    if (last) dist_trace_mark(d->trace, TRACE_BWD_BEGIN, d->ctx->stream);
    d->defer_node = NULL;
    d->sp_taken = 0;
    d->held_ag = -1;
    d->ctx->emb_defer = NULL;
    if (last && d->hooked) {
        grad_ready_reset(&d->ready);
        d->ctx->bwd_hook = &d->ready.hook;
        if (d->sparse) {   /* [sparse] */
            d->ctx->emb_defer = sparse_take;
            d->ctx->emb_defer_user = d;
        }
    } else {
        d->ctx->bwd_hook = NULL;
    }
}

void dist_grads_ready(Dist *d)
{
    if (!d) return;
    Ctx *c = d->ctx;
    c->bwd_hook = NULL;
    dist_trace_mark(d->trace, TRACE_BWD_END, c->stream);
    if (!d->hooked) grad_ready_reset(&d->ready);
    grad_ready_finish(&d->ready);
    c->emb_defer = NULL;
    if (d->defer_node) sparse_finish(d);   /* [sparse] the lookup rows, then the held update */
    d->defer_node = NULL;
    dist_trace_mark(d->trace, TRACE_COMM_DONE, d->comm_stream);
    CUDA_CHECK(cudaEventRecord(d->done_ev, d->comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, d->done_ev, 0));
}

void dist_step_done(Dist *d)
{
    if (!d) return;
    watchdog_mark(d->wd, d->ctx->stream);
    dist_trace_mark(d->trace, TRACE_STEP_END, d->ctx->stream);
    dist_trace_step(d->trace);
}

void dist_loss_average(Dist *d, float *loss)
{
    if (!d) return;
    NCCL_CHECK(ncclAllReduce(loss, loss, 1, ncclFloat, ncclAvg, d->comm, d->ctx->stream));
    watchdog_mark(d->wd, d->ctx->stream);
}

void dist_max_f32(Dist *d, float *x, size_t n)
{
    if (!d) return;
    NCCL_CHECK(ncclAllReduce(x, x, n, ncclFloat, ncclMax, d->comm, d->ctx->stream));
    watchdog_mark(d->wd, d->ctx->stream);
}

/* One float reduced over the ranks with op, on the compute stream; waits
 * for the result (the all-reduce is stream-ordered before the copy back). */
static float all_reduce_scalar(Dist *d, float v, ncclRedOp_t op)
{
    Ctx *c = d->ctx;
    mem_to_device(c, d->scratch, &v, sizeof v);
    NCCL_CHECK(ncclAllReduce(d->scratch, d->scratch, 1, ncclFloat, op, d->comm, c->stream));
    watchdog_mark(d->wd, c->stream);
    mem_to_host(c, &v, d->scratch, sizeof v);
    return v;
}

int dist_all_ok(Dist *d, int ok)
{
    if (!d) return ok;
    return all_reduce_scalar(d, ok ? 1.0f : 0.0f, ncclMin) > 0.5f;
}

int dist_all_max(Dist *d, int v)
{
    if (!d) return v;
    return (int)all_reduce_scalar(d, (float)v, ncclMax);   /* exact below 2^24 */
}

int dist_shard_wanted(size_t n_params, int *asked)
{
    int v = setting_switch(SET_DIST_SHARD);
    if (asked) *asked = v >= 0;
    return v >= 0 ? v : n_params >= DIST_SHARD_AUTO_PARAMS;
}

void dist_sync_state(Dist *d)
{
    if (!d || !d->sharding) return;   /* replayed steps shard too: gather whenever sharding */
    Ctx *c = d->ctx;
    float **blocks = d->state;
    int nb = d->n_state;
    NCCL_CHECK(ncclGroupStart());
    for (int b = 0; b < d->plan.n; b++) {
        const DistBucket *k = &d->plan.b[b];
        size_t n = k->end - k->begin;
        size_t mine, share = bucket_share(d, n, &mine);
        if (!share) continue;   /* all-reduced and updated on every rank */
        for (int i = 0; i < nb; i++) {
            float *st = blocks[i] + k->begin;
            NCCL_CHECK(ncclAllGather(st + mine, st, share, ncclFloat, d->comm, c->stream));
        }
    }
    NCCL_CHECK(ncclGroupEnd());
    watchdog_mark(d->wd, c->stream);
}

void dist_before_save(Dist *d, long step, int at_end)
{
    if (!d) return;
    int due = at_end ? d->saves && d->save_every : d->save_every && step % d->save_every == 0;
    if (due) dist_sync_state(d);
}

void dist_host_section_begin(Dist *d, const char *what)
{
    if (d) watchdog_host_section(d->wd, what);
}

void dist_host_section_end(Dist *d)
{
    if (d) watchdog_host_section(d->wd, NULL);
}

void dist_finish(Dist *d)
{
    if (!d) return;
    Ctx *c = d->ctx;
    mem_zero(c, d->scratch, sizeof(float));
    NCCL_CHECK(ncclAllReduce(d->scratch, d->scratch, 1, ncclFloat, ncclSum, d->comm, c->stream));
    watchdog_mark(d->wd, c->stream);
    ctx_sync(c);
    watchdog_stop(d->wd);
    dist_trace_close(d->trace);
    /* a captured step's all-reduces hold NCCL's persistent plans until its
     * graph is destroyed, and finalizing the communicator waits for them:
     * with the graph still alive that wait never ends (seen on 2 H200s) */
    if (d->attached) {
        d->hooks.release(d->hooks.user);   /* the loop frees its CUDA graphs */
        if (d->grad_buf.ptr) params_grad_move(d->ps, NULL);
        if (d->ps->values_external) params_values_move(d->ps, NULL, NULL);
        regbuf_free(&d->data_buf, c, d->comm);
        regbuf_free(&d->lowp_buf, c, d->comm);
        regbuf_free(&d->grad_buf, c, d->comm);
        regbuf_free(&d->shadow_buf, c, d->comm);
        d->shadow = NULL;
    }
    c->bn_allreduce = NULL;
    c->bwd_hook = NULL;
    if (d->bn_comm) {
        NCCL_CHECK(ncclCommFinalize(d->bn_comm));
        NCCL_CHECK(ncclCommDestroy(d->bn_comm));
    }
    NCCL_CHECK(ncclCommFinalize(d->comm));
    NCCL_CHECK(ncclCommDestroy(d->comm));
    mem_free(c, d->scratch, sizeof(float));
    for (int b = 0; b < d->plan.n; b++) {
        CUDA_CHECK(cudaEventDestroy(d->bucket_ev[b]));
        CUDA_CHECK(cudaEventDestroy(d->upd_ev[b]));
    }
    free(d->bucket_ev);
    free(d->upd_ev);
    CUDA_CHECK(cudaEventDestroy(d->sp_ev));
    size_t w = (size_t)d->env.world + 1;
    if (d->sp_rows) mem_free(c, d->sp_rows, w * d->sp_cap * d->sp_D * sizeof(float));
    if (d->sp_ids) mem_free(c, d->sp_ids, w * d->sp_cap * sizeof(int32_t));
    CUDA_CHECK(cudaEventDestroy(d->done_ev));
    CUDA_CHECK(cudaStreamDestroy(d->comm_stream));
    if (d->attached) {
        grad_ready_free(&d->ready);
        bucket_plan_free(&d->plan);
    }
    free(d);
}

#else  /* CPU-only build: dist_setup never returns a Dist */

void dist_start(Dist *d, Ctx *c) { (void)d; (void)c; }
void dist_attach(Dist *d, const DistModel *m, const DistHooks *h) { (void)d; (void)m; (void)h; }
void dist_backward_begin(Dist *d, int last) { (void)d; (void)last; }
void dist_grads_ready(Dist *d) { (void)d; }
void dist_step_done(Dist *d) { (void)d; }
int dist_all_ok(Dist *d, int ok) { (void)d; return ok; }
int dist_all_max(Dist *d, int v) { (void)d; return v; }
void dist_host_section_begin(Dist *d, const char *what) { (void)d; (void)what; }
void dist_host_section_end(Dist *d) { (void)d; }
void dist_loss_average(Dist *d, float *loss) { (void)d; (void)loss; }
void dist_max_f32(Dist *d, float *x, size_t n) { (void)d; (void)x; (void)n; }
void dist_finish(Dist *d) { (void)d; }
int dist_shard_wanted(size_t n_params, int *asked)
{
    (void)n_params;
    if (asked) *asked = 0;
    return 0;
}
void dist_sync_state(Dist *d) { (void)d; }
void dist_before_save(Dist *d, long step, int at_end) { (void)d; (void)step; (void)at_end; }

#endif
