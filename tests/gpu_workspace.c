/* gpu_workspace.c — a library call's workspace (engine/ctx.h,
 * ctx_workspace_call; CTRAIN_CONV_WS):
 *   1. the calls themselves: a need within the shared workspace gets the
 *      shared one under either setting; past it, `shared` grows the shared
 *      one and `per_call` gives a pool block of exactly the need, counted
 *      in the engine's memory until it is given back, the shared one left
 *      as it was;
 *   2. ResNet-18 trained under `per_call` with the step in a CUDA graph (its
 *      blocks then the graph's own memory) gives the losses and weights of
 *      eager steps, bit for bit, fp16 (cuDNN's legacy calls) and strict fp32
 *      (cuDNN's graph-API engines). The shared workspace is cut to 1 MiB
 *      first, so that the convolutions do take blocks of their own (at these
 *      small shapes none asks for the usual 32 MiB): the captured step must
 *      take as many as an eager one, the replays none from the host, and the
 *      shared workspace keep its size between the runs (the cuBLASLt plans
 *      are keyed on it). The plans are searched afresh (CTRAIN_PLAN_CACHE
 *      off), so the algorithms are this card's choice, not a file's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "gpu_util.h"
#include "engine/mem.h"
#include "train_run.h"

static void calls(void)
{
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    const size_t base = c.workspace_bytes, big = base + (3u << 20);
    size_t own = 7, len = 0;
    setenv("CTRAIN_CONV_WS", "per_call", 1);
    void *w = ctx_workspace_call(&c, base / 2, &own, &len);
    check_true("workspace.small_is_shared", w == c.workspace && own == 0 && len == base,
               "own %zu, len %zu (base %zu)", own, len, base);
    ctx_workspace_done(&c, w, own);
    const size_t before = c.mem.current;
    const long n0 = c.workspace_own_calls;
    w = ctx_workspace_call(&c, big, &own, &len);
    const size_t during = c.mem.current;
    check_true("workspace.per_call_own_block",
               w && w != c.workspace && own == big && len == big && c.workspace_bytes == base &&
                   c.workspace_own_calls == n0 + 1,
               "own %zu, len %zu, shared %zu (want %zu, %zu, %zu)", own, len, c.workspace_bytes,
               big, big, base);
    CUDA_CHECK(cudaMemsetAsync(w, 0x5a, big, c.stream));   /* all of it is ours */
    ctx_workspace_done(&c, w, own);
    ctx_sync(&c);
    check_true("workspace.per_call_counted", during >= before + big && c.mem.current == before,
               "engine memory %zu -> %zu -> %zu for a block of %zu", before, during,
               c.mem.current, big);
    setenv("CTRAIN_CONV_WS", "shared", 1);
    w = ctx_workspace_call(&c, big, &own, &len);
    check_true("workspace.shared_grows",
               w == c.workspace && own == 0 && c.workspace_bytes >= big && len == c.workspace_bytes,
               "own %zu, shared %zu for a need of %zu", own, c.workspace_bytes, big);
    ctx_workspace_done(&c, w, own);
    unsetenv("CTRAIN_CONV_WS");
    ctx_free(&c);
}

/* Train `steps` steps: each one's loss, and the calls that took a block of their
 * own during it (own[s]; a replayed step makes none: its blocks are the graph's);
 * *st (when not NULL) the graph's state at the end. */
static float *train(Ctx *c, const char *args, float *losses, long *own, int steps,
                    GraphState *st)
{
    Run r;
    run_open(&r, c, args, DEV_CUDA);
    for (int s = 0; s < steps; s++) {
        const long n0 = c->workspace_own_calls;
        trainer_step(&r.tr);
        losses[s] = trainer_loss_value(&r.tr);
        own[s] = c->workspace_own_calls - n0;
    }
    ParamSet *ps = &r.m.params;
    float *w = (float *)malloc(ps->total * sizeof(float));
    mem_to_host(ps->ctx, w, ps->data, ps->total * sizeof(float));
    if (st) *st = r.tr.graph.state;
    run_close(&r, c);
    return w;
}

static void same_training(const char *name, const char *args)
{
    enum { STEPS = 6, WARM = 2 };
    float lp[STEPS], ls[STEPS];
    long op[STEPS], os[STEPS];
    char ga[600];
    snprintf(ga, sizeof ga, "%s --graph --graph-warmup %d", args, (int)WARM);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 42);
    mem_free(&c, c.workspace, c.workspace_bytes);   /* nobody holds it yet */
    c.workspace_bytes = 1u << 20;
    c.workspace = mem_alloc(&c, c.workspace_bytes);
    GraphState sp;
    setenv("CTRAIN_CONV_WS", "per_call", 1);
    float *ws = train(&c, args, ls, os, STEPS, NULL);
    const size_t shared_eager = c.workspace_bytes;
    float *wp = train(&c, ga, lp, op, STEPS, &sp);
    printf("  %s: calls with a block of their own a step, eager:", name);
    for (int s = 0; s < STEPS; s++) printf(" %ld", os[s]);
    printf("; graphed:");
    for (int s = 0; s < STEPS; s++) printf(" %ld", op[s]);
    printf(" (shared workspace %zu bytes)\n", c.workspace_bytes);
    char n[160];
    /* step WARM + 1 of the graphed run is captured, then replayed: the capture must
     * take the blocks an eager step takes, and the replays none from the host */
    int replays_quiet = 1;
    for (int s = WARM + 1; s < STEPS; s++) replays_quiet &= op[s] == 0;
    snprintf(n, sizeof n, "workspace.%s.blocks_in_capture", name);
    check_true(n, os[WARM] > 0 && op[WARM] == os[WARM] && replays_quiet,
               "blocks: eager step %d took %ld, the captured step %ld; replays %s",
               WARM + 1, os[WARM], op[WARM], replays_quiet ? "none" : "some");
    snprintf(n, sizeof n, "workspace.%s.shared_unchanged", name);
    check_true(n, c.workspace_bytes == shared_eager,
               "the shared workspace went from %zu to %zu bytes in the graphed run",
               shared_eager, c.workspace_bytes);
    snprintf(n, sizeof n, "workspace.%s.graph_on", name);
    check_true(n, sp == GRAPH_ON, "the per_call step was not captured (state %d)", (int)sp);
    int same = 1, first = -1;
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&lp[s], &ls[s], sizeof(float))) { same = 0; if (first < 0) first = s; }
    snprintf(n, sizeof n, "workspace.%s.losses", name);
    check_true(n, same && isfinite(ls[STEPS - 1]), "step %d: graphed %.9g, eager %.9g",
               first + 1, first >= 0 ? (double)lp[first] : 0.0,
               first >= 0 ? (double)ls[first] : 0.0);
    Run probe;
    run_open(&probe, &c, args, DEV_CUDA);
    const size_t P = probe.m.params.total;
    run_close(&probe, &c);
    snprintf(n, sizeof n, "workspace.%s.weights", name);
    check_true(n, !memcmp(wp, ws, P * sizeof(float)), "the final weights differ");
    free(wp);
    free(ws);
    unsetenv("CTRAIN_CONV_WS");
    ctx_free(&c);
}

int main(void)
{
    gpu_require();
    setenv("CTRAIN_PLAN_CACHE", "off", 1);
    calls();
    same_training("resnet18_fp16_224",
                  "--model resnet18 --data synthetic --image-size 224 --batch 16 --steps 6 "
                  "--lr 0.05 --momentum 0.9 --precision fp16");
    same_training("resnet18_fp32_64",
                  "--model resnet18 --data synthetic --image-size 64 --batch 8 --steps 6 "
                  "--lr 0.05 --momentum 0.9 --precision fp32");
    return check_summary();
}
