/* bench_dist.c — `ctrain bench --gpus N`: multi-GPU scaling.
 *
 * Each config runs twice, as two rows of the usual table: on one GPU, then
 * data parallel on N GPUs with the same batch per GPU (weak scaling: the
 * global batch is N times larger, as in DDP practice). Then a scaling table:
 *   per-GPU samples/s on N GPUs = batch / median step time (of rank 0; the
 *                                 all-reduce makes every rank's step as long)
 *   total samples/s             = N x per-GPU
 *   efficiency                  = total / (N x the one-GPU samples/s)
 *   reduce                      = the gradient all-reduce's type on the N
 *                                 GPUs (--grad-reduce: f32, or bf16)
 * measured in the same call, so both sides see the same machine state.
 * This is the parent's side; the N-GPU row's child and its ranks are
 * bench_rank.c.
 */
#include "bench_dist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/settings.h"

int bench_scaling(BenchSession *s, const BenchConfig *cfgs, int n, int gpus)
{
    BenchRow *one = (BenchRow *)calloc((size_t)n, sizeof *one);
    BenchRow *many = (BenchRow *)calloc((size_t)n, sizeof *many);
    if (!one || !many) ct_fatal("out of host memory");
    bench_table_header(1);
    for (int i = 0; i < n; i++) {
        BenchConfig c = cfgs[i];
        char prefix[48];
        for (int k = 0; k < 2; k++) {
            c.gpus = k ? gpus : 1;
            BenchRow *row = k ? &many[i] : &one[i];
            snprintf(prefix, sizeof prefix, "[%d/%d]", 2 * i + k + 1, 2 * n);
            bench_run_config(s, &c, row, prefix);
            bench_session_add(s, row);
            if (k) printf("  the same on %d GPUs (samples/s per GPU):\n", gpus);
            bench_table_row(row);
            bench_session_write_json(s);
        }
    }
    printf("\nscaling on %d GPUs (data parallel over NCCL, the same batch per GPU; samples/s are "
           "medians of the timed steps)\n", gpus);
    printf("%-11s %-4s %5s %4s %6s %12s %14s %12s %11s\n", "model", "prec", "batch", "seq",
           "reduce", "1 GPU smp/s", "per GPU smp/s", "total smp/s", "efficiency");
    for (int i = 0; i < n; i++) {
        const BenchRow *a = &one[i], *b = &many[i];
        char seq[16] = "-";
        if (a->r.seq > 0) snprintf(seq, sizeof seq, "%d", a->r.seq);
        printf("%-11s %-4s %5d %4s %6s ", a->model, a->precision, a->r.batch, seq,
               dtype_name(cfgs[i].grad_reduce));
        if (a->error[0] || b->error[0]) {
            printf("%s\n", a->error[0] ? a->error : b->error);
            continue;
        }
        double per = b->r.samples_per_s, total = per * gpus, single = a->r.samples_per_s;
        printf("%12.1f %14.1f %12.1f %10.1f%%\n", single, per, total,
               single > 0 ? 100.0 * total / (gpus * single) : NAN);
    }
    /* what the ranks were told beyond the defaults (train/parallel/dist.h, README
     * "Multi-GPU"), so a pasted table says how it was measured */
    static const SettingId vars[] = {SET_DIST_SHARD, SET_DIST_SPARSE_EMB, SET_DIST_TAPER,
                                     SET_OVERLAP_UPDATE, SET_DIST_SHARD_WINDOW,
                                     SET_GRAPH_NODE_PRIORITY, SET_NCCL_CTA_POLICY, SET_NCCL_PROTO,
                                     SET_NCCL_ALGO, SET_NCCL_MAX_CTAS};
    int shown = 0;
    printf("data-parallel settings:");
    for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
        const char *e = setting_text(vars[v]);
        if (!e) continue;
        printf(" %s=%s", setting_name(vars[v]), e);
        shown++;
    }
    printf("%s\n", shown ? "" : " the defaults (README, \"Multi-GPU\")");
    free(one);
    free(many);
    return 0;
}
