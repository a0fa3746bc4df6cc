/* bench_rank.c — the ranks of `ctrain bench --gpus N` (bench_rank.h).
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
#include "bench_rank.h"

#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/settings.h"
#include "train/parallel/dist_env.h"
#include "train/parallel/dist_launch.h"
#include "bench_run.h"

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
    long long fd = setting_int(SET_BENCH_FD);
    if (argc != 0 || hex_decode(&cfg, sizeof cfg, setting_str(SET_BENCH_CONFIG)) != 0 || fd < 0 ||
        !dist_env_read(&e))
        ct_fatal_hint("run ctrain bench --gpus N", "bench-rank is started by ctrain bench --gpus "
                      "N, with its configuration in the environment");
    FILE *out = e.rank == 0 ? fdopen((int)fd, "w") : fopen("/dev/null", "w");
    if (!out) ct_fatal("bench-rank: cannot open the report stream");
    cfg.gpus = e.world;
    bench_child_config(out, &cfg);
    fclose(out);
    return 0;
}
