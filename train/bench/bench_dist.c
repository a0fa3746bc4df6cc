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
 *
 * Processes: the bench parent forks a child per row as always; for an
 * N-GPU row that child does not train itself but launches N ranks of the
 * hidden `ctrain bench-rank` (dist_launch.h) and waits. The config travels
 * to the ranks in the environment (CTRAIN_BENCH_CONFIG, the struct's bytes
 * in hex: the same binary reads them), and rank 0 writes its JSON lines to
 * the pipe the child inherited (CTRAIN_BENCH_FD); the other ranks' go to
 * /dev/null. Each rank runs the ordinary config (bench_run.c) with the
 * multi-GPU hooks on.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "train/parallel/dist_env.h"
#include "train/parallel/dist_launch.h"

static void hex_encode(char *out, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static int hex_decode(void *p, size_t n, const char *s)
{
    if (!s || strlen(s) != 2 * n) return -1;
    unsigned char *b = (unsigned char *)p;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        b[i] = (unsigned char)v;
    }
    return 0;
}

void bench_child_dist(FILE *out, const void *arg)
{
    const BenchConfig *cfg = (const BenchConfig *)arg;
    char *hex = (char *)malloc(2 * sizeof *cfg + 1);
    char fd[16];
    if (!hex) ct_fatal("out of host memory");
    hex_encode(hex, cfg, sizeof *cfg);
    fflush(out);
    snprintf(fd, sizeof fd, "%d", fileno(out));
    setenv("CTRAIN_BENCH_CONFIG", hex, 1);
    setenv("CTRAIN_BENCH_FD", fd, 1);
    free(hex);
    char *argv[] = {(char *)"/proc/self/exe", (char *)"bench-rank", NULL};
    char what[48];
    snprintf(what, sizeof what, "ctrain bench --gpus %d", cfg->gpus);
    int rc = dist_spawn(argv, cfg->gpus, 10.0, what);
    if (rc) exit(rc);
}

int cmd_bench_rank(int argc, char **argv)
{
    (void)argv;
    BenchConfig cfg;
    DistEnv e;
    const char *fd = getenv("CTRAIN_BENCH_FD");
    if (argc != 0 || hex_decode(&cfg, sizeof cfg, getenv("CTRAIN_BENCH_CONFIG")) != 0 || !fd ||
        !dist_env_read(&e))
        ct_fatal_hint("run ctrain bench --gpus N", "bench-rank is started by ctrain bench --gpus "
                      "N, with its configuration in the environment");
    FILE *out = e.rank == 0 ? fdopen(atoi(fd), "w") : fopen("/dev/null", "w");
    if (!out) ct_fatal("bench-rank: cannot open the report stream");
    cfg.gpus = e.world;
    bench_child_config(out, &cfg);
    fclose(out);
    return 0;
}

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
    static const char *vars[] = {"CTRAIN_DIST_SHARD", "CTRAIN_DIST_SPARSE_EMB", "CTRAIN_DIST_TAPER",
                                 "CTRAIN_OVERLAP_UPDATE",
                                 "CTRAIN_DIST_SHARD_WINDOW",
                                 "CTRAIN_GRAPH_NODE_PRIORITY", "NCCL_CTA_POLICY", "NCCL_PROTO",
                                 "NCCL_ALGO", "NCCL_MAX_CTAS"};
    int shown = 0;
    printf("data-parallel settings:");
    for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
        const char *e = getenv(vars[v]);
        if (!e || !*e) continue;
        printf(" %s=%s", vars[v], e);
        shown++;
    }
    printf("%s\n", shown ? "" : " the defaults (README, \"Multi-GPU\")");
    free(one);
    free(many);
    return 0;
}
