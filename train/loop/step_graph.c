/* step_graph.c — capture the training step as two CUDA graphs and replay
 * them (the why and the how: step_graph.h). */
#include "step_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/settings.h"
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "train/parallel/dist.h"

#ifdef CTRAIN_CUDA
void step_graph_lr_fetch_cuda(float *lr, const float *table, int64_t n, const int64_t *step,
                              cudaStream_t s);
void step_graph_advance_cuda(int64_t *step, int64_t dstep, uint64_t *rng, uint64_t drng,
                             cudaStream_t s);

static const char *CAPTURE_HINT =
    "this happened while capturing the training step into a CUDA graph (--graph): some "
    "operation in the step cannot be captured; run without --graph";

/* Give up on the graph: say why once; the trainer stays eager. */
static void graph_refuse(StepGraph *g, const char *why)
{
    g->state = GRAPH_FAILED;
    snprintf(g->why, sizeof g->why, "%s", why);
    LOG_W("--graph: %s; the step runs eager", why);
}

/* Each kernel replays at the priority of the stream it was captured on
 * (cudaGraphInstantiateFlagUseNodePriority; capture copies stream
 * priorities into kernel nodes). Without the flag a graph runs every kernel
 * at the priority of the stream it is launched into, so the data-parallel
 * communication stream's high priority and the overlapped update's low one
 * (train/parallel/dist.c, train/loop/overlap.h) would hold only in eager steps. Measured
 * on 2 H200s (bench --gpus 2, bf16): BERT-large 91.3% -> 91.7% (94.4% ->
 * 94.8% with the sharded update), ResNet-50 98.5% -> 98.6%.
 * CTRAIN_GRAPH_NODE_PRIORITY=0 leaves the flag off. */
static unsigned long long instantiate_flags(void)
{
    return setting_switch(SET_GRAPH_NODE_PRIORITY) ? cudaGraphInstantiateFlagUseNodePriority : 0;
}

/* End the capture on c's stream and instantiate; on failure fill why. */
static int graph_finish(Ctx *c, cudaGraphExec_t *exec, const char *what, char *why, size_t n)
{
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, n, "capturing the %s graph failed: %s", what, cudaGetErrorString(e));
        return 0;
    }
    e = cudaGraphInstantiateWithFlags(exec, graph, instantiate_flags());
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, n, "instantiating the %s graph failed: %s", what, cudaGetErrorString(e));
        return 0;
    }
    return 1;
}

/* The learning rate of every step, as the eager step computes it. */
static void graph_upload_schedule(Trainer *t)
{
    StepGraph *g = &t->graph;
    g->n_table = t->sched.total + 1 > t->step + 1 ? t->sched.total + 1 : t->step + 1;
    float *h = (float *)malloc((size_t)g->n_table * sizeof(float));
    if (!h) ct_fatal("out of host memory tabulating the schedule (%lld steps)",
                     (long long)g->n_table);
    for (int64_t s = 0; s < g->n_table; s++) h[s] = sched_lr(&t->sched, (long)s);
    g->lr_table = (float *)mem_alloc(t->ctx, (size_t)g->n_table * sizeof(float));
    mem_to_device(t->ctx, g->lr_table, h, (size_t)g->n_table * sizeof(float));
    free(h);
}

/* One micro-batch into *exec; last: the step's last (it all-reduces with
 * several GPUs, so --accum K > 1 then needs a second graph for the others). */
static int capture_micro(Trainer *t, int last, cudaGraphExec_t *exec, char *why, size_t n)
{
    Ctx *c = t->ctx;
    StepGraph *g = &t->graph;
    uint64_t r0 = c->rng_offset;
    c->rng_offset = 0;                 /* offsets relative to the micro-batch's start */
    c->rng_base = g->rng_base;
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    /* the overlapped update runs inside the last micro-batch: its learning
     * rate is fetched here (the optimizer graph fetches it again, the same) */
    if (last && t->overlap)
        step_graph_lr_fetch_cuda(optimizer_lr_dev(&t->opt), g->lr_table, g->n_table, g->step_dev,
                                 c->stream);
    Tensor *loss = trainer_micro_body(t, last);
    CT_ASSERT(loss->dtype == DT_F32 && loss->numel == 1,
              "--graph: the loss must be one f32 value (got %zu of %s)", loss->numel,
              dtype_name(loss->dtype));
    mem_copy(c, g->loss->data, loss->data, sizeof(float));
    trainer_loss_accumulate(t, loss);   /* the interval's sum, in the graph */
    tensor_release(loss);
    g->rng_per_micro = c->rng_offset;
    if (g->rng_per_micro) step_graph_advance_cuda(NULL, 0, g->rng_base, g->rng_per_micro,
                                                  c->stream);
    c->rng_base = NULL;
    c->rng_offset = r0;
    return graph_finish(c, exec, last ? "forward/backward" : "first micro-batches", why, n);
}

static int capture_update(Trainer *t, char *why, size_t n)
{
    Ctx *c = t->ctx;
    StepGraph *g = &t->graph;
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    step_graph_lr_fetch_cuda(optimizer_lr_dev(&t->opt), g->lr_table, g->n_table, g->step_dev,
                             c->stream);
    trainer_update_body(t, 1);
    step_graph_advance_cuda(g->step_dev, 1, NULL, 0, c->stream);
    return graph_finish(c, &g->update, "optimizer", why, n);
}

void trainer_graph_capture(Trainer *t)
{
    Ctx *c = t->ctx;
    StepGraph *g = &t->graph;
    if (c->device != DEV_CUDA) {
        graph_refuse(g, "CUDA graphs need a CUDA device");
        return;
    }
    if (t->dist) {
        /* the all-reduces are captured with the rest (a second micro-batch
         * graph for --accum); CTRAIN_DIST_GRAPH=0 keeps data-parallel steps
         * eager. Every rank reaches this at the same step and they agree, so
         * none captures alone (NCCL needs a collective captured on every
         * rank or on none). */
        int want = setting_switch(SET_DIST_GRAPH);
        if (!dist_all_ok(t->dist, want)) {
            graph_refuse(g, "CTRAIN_DIST_GRAPH=0 on some rank: data-parallel steps stay eager");
            return;
        }
    }
    ctx_sync(c);
    graph_upload_schedule(t);
    g->step_dev = (int64_t *)mem_alloc(c, sizeof(int64_t));
    g->rng_base = (uint64_t *)mem_alloc(c, sizeof(uint64_t));
    int64_t step = t->step;
    uint64_t rng = c->rng_offset;
    mem_to_device(c, g->step_dev, &step, sizeof step);
    mem_to_device(c, g->rng_base, &rng, sizeof rng);
    int64_t one = 1;
    g->loss = tensor_new(c, DT_F32, 1, &one);
    mem_set_f32(c, (float *)g->loss->data, NAN);
    /* hand the pool's cached blocks back, so the graph's own allocations
     * can take that memory */
    ctx_sync(c);
    CUDA_CHECK(cudaMemPoolTrimTo(c->pool, 0));

    /* the step's transient bytes, as the eager accounting counts them */
    size_t peak_before = c->mem.peak, current = c->mem.current;
    c->mem.peak = current;
    /* with several GPUs the capture's NCCL calls may wait for the other
     * ranks on the host, with no progress marker for the watchdog to see */
    dist_host_section_begin(t->dist, "capturing the step into CUDA graphs");
    c->capturing = 1;
    c->capture_refused = NULL;
    ct_error_note(CAPTURE_HINT);
    char why[256] = "";
    int ok = capture_micro(t, 1, &g->micro, why, sizeof why);
    /* the step's other micro-batches neither all-reduce nor update */
    if (ok && (t->dist || t->overlap) && t->accum > 1)
        ok = capture_micro(t, 0, &g->micro_first, why, sizeof why);
    if (ok) ok = capture_update(t, why, sizeof why);
    ct_error_note(NULL);
    c->capturing = 0;
    g->graph_mem = c->mem.peak - current;
    c->mem.peak = peak_before > c->mem.peak ? peak_before : c->mem.peak;
    if (ok && c->capture_refused) {
        snprintf(why, sizeof why, "%s", c->capture_refused);
        ok = 0;
    }
    /* NCCL: a collective is graph-captured on every rank or on none, and a
     * graph with captured collectives is launched by every rank. A rank
     * whose capture failed (a refusal above, an instantiation error) would
     * run eager while the others replay: mismatched collectives, a hang.
     * So all replay, or all stay eager. */
    if (t->dist && !dist_all_ok(t->dist, ok) && ok) {
        snprintf(why, sizeof why, "another rank could not capture its step (CTRAIN_LOG=warn "
                 "shows its reason), so every rank stays eager");
        ok = 0;
    }
    dist_host_section_end(t->dist);
    if (!ok) {
        if (g->micro) cudaGraphExecDestroy(g->micro);
        if (g->micro_first) cudaGraphExecDestroy(g->micro_first);
        if (g->update) cudaGraphExecDestroy(g->update);
        g->micro = g->micro_first = g->update = NULL;
        graph_refuse(g, why);
        return;
    }
    g->state = GRAPH_ON;
    c->graphs_live++;   /* the context keeps what the graphs point at (ctx_workspace) */
    char mb[32];
    LOG_I("--graph: step captured after %ld eager steps (micro-batch graph + optimizer graph, "
          "%s of transient memory, %llu Philox blocks per micro-batch)", g->warmup_steps,
          mem_fmt(mb, sizeof mb, g->graph_mem), (unsigned long long)g->rng_per_micro);
}

void trainer_graph_step(Trainer *t)
{
    Ctx *c = t->ctx;
    StepGraph *g = &t->graph;
    for (int k = 0; k < t->accum; k++, t->micro++) {
        trainer_feed_next(t);   /* the batch into the static inputs, outside the graph */
        int last = k == t->accum - 1;
        CUDA_CHECK(cudaGraphLaunch(last || !g->micro_first ? g->micro : g->micro_first, c->stream));
        c->rng_offset += g->rng_per_micro;   /* the host's mirror of *rng_base */
    }
    CUDA_CHECK(cudaGraphLaunch(g->update, c->stream));
    t->step++;
    g->replays++;
    if (c->mem.current + g->graph_mem > c->mem.peak) c->mem.peak = c->mem.current + g->graph_mem;
}

float trainer_graph_loss(Trainer *t)
{
    float v;
    tensor_to_f32(&v, t->graph.loss);   /* waits for the step */
    return v;
}

void trainer_graph_free(Trainer *t)
{
    StepGraph *g = &t->graph;
    Ctx *c = t->ctx;
    if (g->micro) {
        CUDA_CHECK(cudaGraphExecDestroy(g->micro));
        c->graphs_live--;
    }
    if (g->micro_first) CUDA_CHECK(cudaGraphExecDestroy(g->micro_first));
    if (g->update) CUDA_CHECK(cudaGraphExecDestroy(g->update));
    g->micro = g->micro_first = g->update = NULL;
    if (g->lr_table) mem_free(c, g->lr_table, (size_t)g->n_table * sizeof(float));
    if (g->step_dev) mem_free(c, g->step_dev, sizeof(int64_t));
    if (g->rng_base) mem_free(c, g->rng_base, sizeof(uint64_t));
    tensor_release(g->loss);
    g->lr_table = NULL;
    g->step_dev = NULL;
    g->rng_base = NULL;
    g->loss = NULL;
    if (g->state == GRAPH_ON) g->state = GRAPH_OFF;   /* nothing left to replay */
}

#else /* CPU-only build */

void trainer_graph_capture(Trainer *t)
{
    t->graph.state = GRAPH_FAILED;
    snprintf(t->graph.why, sizeof t->graph.why, "this build has no CUDA");
    LOG_W("--graph: this build has no CUDA; the step runs eager");
}

void trainer_graph_step(Trainer *t) { (void)t; }
float trainer_graph_loss(Trainer *t) { (void)t; return NAN; }
void trainer_graph_free(Trainer *t) { (void)t; }

#endif
