/* test_dist_env.c — how multi-GPU ranks find each other, on the CPU:
 *   the environment: CTRAIN_*, torchrun's, Open MPI's and srun's variables
 *     with their defaults and which one wins, SLURM's node lists, and every
 *     bad value refused with a message naming the variable;
 *   the TCP rendezvous: rank 0 hands the blob to the others whatever the
 *     order they start in; a missing rank, a wrong world size, a duplicate
 *     rank and an unreachable rank 0 each end in time with a clear message;
 *   the launcher: N copies with the right variables; when one rank fails
 *     the others are stopped within a bounded time and the status says so.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "train/parallel/dist_env.h"
#include "train/parallel/dist_launch.h"
#include "train/parallel/dist_rdzv.h"

/* ---- the environment ---- */

typedef struct Env { const char *kv[16]; } Env;   /* "NAME=value", NULL-terminated */

static const char *env_get(const char *name, void *user)
{
    const Env *e = (const Env *)user;
    size_t n = strlen(name);
    for (int i = 0; e->kv[i]; i++)
        if (!strncmp(e->kv[i], name, n) && e->kv[i][n] == '=') return e->kv[i] + n + 1;
    return NULL;
}

static int parse(Env e, DistEnv *out, char *err, char *hint)
{
    return dist_env_parse(out, env_get, &e, err, 256, hint, 256);
}

static void env_ok(const char *name, Env e, int rank, int world, int local, const char *addr,
                   int port)
{
    DistEnv d;
    char err[256], hint[256];
    int r = parse(e, &d, err, hint);
    check_true(name, r == 1 && d.rank == rank && d.world == world && d.local_rank == local &&
               !strcmp(d.master_addr, addr) && d.master_port == port,
               "got %d: rank %d world %d local %d %s:%d (%s)", r, d.rank, d.world, d.local_rank,
               d.master_addr, d.master_port, err);
}

/* A bad environment: -1, the message names `names` and there is a hint. */
static void env_bad(const char *name, Env e, const char *names)
{
    DistEnv d;
    char err[256], hint[256];
    int r = parse(e, &d, err, hint);
    check_true(name, r == -1 && strstr(err, names) && hint[0], "got %d, message '%s', hint '%s'",
               r, err, hint);
}

static void test_env(void)
{
    DistEnv d;
    char err[256], hint[256];
    check_true("env: nothing set -> one process", parse((Env){{"PATH=/bin", NULL}}, &d, err, hint)
               == 0, "expected 0");
    env_ok("env: CTRAIN_* with defaults", (Env){{"CTRAIN_RANK=1", "CTRAIN_WORLD_SIZE=4", NULL}},
           1, 4, 1, "127.0.0.1", 29500);
    env_ok("env: CTRAIN_* complete",
           (Env){{"CTRAIN_RANK=5", "CTRAIN_WORLD_SIZE=8", "CTRAIN_LOCAL_RANK=1",
                  "CTRAIN_MASTER_ADDR=node0", "CTRAIN_MASTER_PORT=1234", NULL}},
           5, 8, 1, "node0", 1234);
    env_ok("env: Open MPI on one machine",
           (Env){{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
                  "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4", NULL}},
           2, 4, 2, "127.0.0.1", 29500);
    env_ok("env: Open MPI on two machines with CTRAIN_MASTER_ADDR",
           (Env){{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
                  "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                  "CTRAIN_MASTER_ADDR=10.0.0.1", NULL}},
           3, 4, 1, "10.0.0.1", 29500);
    env_ok("env: CTRAIN_* wins over Open MPI",
           (Env){{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "CTRAIN_RANK=0",
                  "CTRAIN_WORLD_SIZE=2", NULL}},
           0, 2, 0, "127.0.0.1", 29500);
    env_bad("env: rank without world size", (Env){{"CTRAIN_RANK=0", NULL}}, "CTRAIN_WORLD_SIZE");
    env_bad("env: world size without rank", (Env){{"CTRAIN_WORLD_SIZE=2", NULL}}, "CTRAIN_RANK");
    env_bad("env: rank not below world", (Env){{"CTRAIN_RANK=2", "CTRAIN_WORLD_SIZE=2", NULL}},
            "CTRAIN_RANK=2 is not below CTRAIN_WORLD_SIZE=2");
    env_bad("env: rank not a number", (Env){{"CTRAIN_RANK=one", "CTRAIN_WORLD_SIZE=2", NULL}},
            "CTRAIN_RANK='one'");
    env_bad("env: negative rank", (Env){{"CTRAIN_RANK=-1", "CTRAIN_WORLD_SIZE=2", NULL}},
            "CTRAIN_RANK");
    env_bad("env: world size 0", (Env){{"CTRAIN_RANK=0", "CTRAIN_WORLD_SIZE=0", NULL}},
            "CTRAIN_WORLD_SIZE='0'");
    env_bad("env: trailing junk", (Env){{"CTRAIN_RANK=0", "CTRAIN_WORLD_SIZE=2x", NULL}},
            "CTRAIN_WORLD_SIZE='2x'");
    env_bad("env: bad local rank",
            (Env){{"CTRAIN_RANK=0", "CTRAIN_WORLD_SIZE=2", "CTRAIN_LOCAL_RANK=gpu0", NULL}},
            "CTRAIN_LOCAL_RANK");
    env_bad("env: port out of range",
            (Env){{"CTRAIN_RANK=0", "CTRAIN_WORLD_SIZE=2", "CTRAIN_MASTER_PORT=70000", NULL}},
            "CTRAIN_MASTER_PORT='70000'");
    env_bad("env: Open MPI on two machines without an address",
            (Env){{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4",
                   "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL}},
            "CTRAIN_MASTER_ADDR");
}

/* torchrun's and SLURM's variables, which launcher wins, and SLURM's node
 * lists. */
static void test_launchers(void)
{
    DistEnv d;
    char err[256], hint[256];
    env_ok("env: torchrun, rendezvous on MASTER_PORT + 1",
           (Env){{"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=4",
                  "MASTER_ADDR=host0", "MASTER_PORT=29400", NULL}},
           3, 8, 3, "host0", 29401);
    env_ok("env: torchrun with CTRAIN_MASTER_PORT and _ADDR",
           (Env){{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=host0", "MASTER_PORT=29400",
                  "CTRAIN_MASTER_PORT=1234", "CTRAIN_MASTER_ADDR=10.1.1.1", NULL}},
           1, 2, 1, "10.1.1.1", 1234);
    env_ok("env: torchrun without MASTER_*",
           (Env){{"RANK=0", "WORLD_SIZE=2", NULL}}, 0, 2, 0, "127.0.0.1", 29500);
    env_ok("env: CTRAIN_* wins over torchrun",
           (Env){{"RANK=5", "WORLD_SIZE=8", "CTRAIN_RANK=1", "CTRAIN_WORLD_SIZE=2", NULL}},
           1, 2, 1, "127.0.0.1", 29500);
    env_ok("env: torchrun wins over Open MPI and SLURM",
           (Env){{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "SLURM_PROCID=2",
                  "SLURM_STEP_ID=0", "SLURM_NTASKS=4", "RANK=1", "WORLD_SIZE=2", NULL}},
           1, 2, 1, "127.0.0.1", 29500);
    check_true("env: RANK alone is not torchrun",
               parse((Env){{"RANK=1", NULL}}, &d, err, hint) == 0, "expected one process");
    env_bad("env: torchrun world size not a number",
            (Env){{"RANK=0", "WORLD_SIZE=two", NULL}}, "WORLD_SIZE='two'");
    env_bad("env: torchrun rank not below world", (Env){{"RANK=4", "WORLD_SIZE=4", NULL}},
            "RANK=4 is not below WORLD_SIZE=4");

    env_ok("env: srun over two nodes, task 0's host from the step's node list",
           (Env){{"SLURM_PROCID=13", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=16",
                  "SLURM_NTASKS=32", "SLURM_LOCALID=5", "SLURM_STEP_NUM_NODES=2",
                  "SLURM_STEP_NODELIST=gpu[07-08]", "SLURM_JOB_NODELIST=gpu[01-09]", NULL}},
           13, 16, 5, "gpu07", 29500);
    env_ok("env: srun on one node, SLURM_NTASKS",
           (Env){{"SLURM_PROCID=1", "SLURM_STEP_ID=3", "SLURM_NTASKS=4", "SLURM_LOCALID=1",
                  "SLURM_NNODES=1", NULL}},
           1, 4, 1, "127.0.0.1", 29500);
    env_ok("env: srun, the job's node list and CTRAIN_MASTER_PORT",
           (Env){{"SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=8", "SLURM_NNODES=2",
                  "SLURM_JOB_NODELIST=a100-[3,5]-ib,spare", "CTRAIN_MASTER_PORT=4000", NULL}},
           0, 8, 0, "a100-3-ib", 4000);
    check_true("env: a batch script's SLURM_PROCID (no job step) is one process",
               parse((Env){{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_JOB_ID=77", NULL}}, &d,
                     err, hint) == 0, "expected one process");
    env_ok("env: Open MPI wins over SLURM (mpirun inside a job)",
           (Env){{"SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=1",
                  "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", NULL}},
           2, 4, 2, "127.0.0.1", 29500);
    env_bad("env: srun over two nodes, node list not understood",
            (Env){{"SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_NTASKS=8", "SLURM_NNODES=2",
                   "SLURM_JOB_NODELIST=[weird", NULL}},
            "node list");

    struct { const char *list, *want; } h[] = {
        {"node[01-04,07],gpu2", "node01"}, {"a,b", "a"}, {"n[3-5]-ib", "n3-ib"},
        {"gpu5", "gpu5"}, {"x[12]", "x12"}, {"", NULL}, {"x[abc]", NULL}, {"x[1-2", NULL},
    };
    int bad = -1;
    for (int i = 0; i < (int)(sizeof h / sizeof h[0]); i++) {
        char out[64];
        const int ok = dist_first_host(h[i].list, out, sizeof out);
        if (h[i].want ? !(ok && !strcmp(out, h[i].want)) : ok) { bad = i; break; }
    }
    check_true("env: SLURM node lists, first host", bad < 0, "case %d ('%s')", bad,
               bad >= 0 ? h[bad].list : "");
}

/* ---- the rendezvous ---- */

enum { BLOB = 128 };

typedef struct Peer {
    int port, rank, world;
    double delay_s, timeout_s;
    unsigned char blob[BLOB];
    int rc;
    char err[512];
} Peer;

static void *peer_main(void *arg)
{
    Peer *p = (Peer *)arg;
    struct timespec ts = {(time_t)p->delay_s, (long)((p->delay_s - (int)p->delay_s) * 1e9)};
    nanosleep(&ts, NULL);
    p->rc = rdzv_fetch("127.0.0.1", p->port, p->rank, p->world, p->blob, BLOB, p->timeout_s,
                       p->err, sizeof p->err);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* world ranks; peers[i] for ranks 1..; serve with timeout; returns serve's rc. */
static int rendezvous(int world, Peer *peers, int n_peers, double timeout_s, char *err,
                      const unsigned char *blob, int port, int fd)
{
    pthread_t th[8];
    for (int i = 0; i < n_peers; i++) {
        peers[i].port = port;
        pthread_create(&th[i], NULL, peer_main, &peers[i]);
    }
    int rc = rdzv_serve(fd, world, blob, BLOB, timeout_s, err, 512);
    for (int i = 0; i < n_peers; i++) pthread_join(th[i], NULL);
    return rc;
}

static void test_rdzv(void)
{
    unsigned char blob[BLOB];
    for (int i = 0; i < BLOB; i++) blob[i] = (unsigned char)(i * 7 + 3);
    char err[512];
    int port = 0;
    /* 4 ranks; ranks 2 and 3 start before rank 0 serves, rank 1 later */
    int fd = rdzv_listen("127.0.0.1", 0, &port, err, sizeof err);
    check_true("rdzv: listen on a free port", fd >= 0 && port > 0, "%s", err);
    Peer p[3] = {{0, 1, 4, 0.3, 5, {0}, 0, ""}, {0, 2, 4, 0, 5, {0}, 0, ""},
                 {0, 3, 4, 0, 5, {0}, 0, ""}};
    int rc = rendezvous(4, p, 3, 5, err, blob, port, fd);
    int all = rc == 0;
    for (int i = 0; i < 3; i++) all &= p[i].rc == 0 && !memcmp(p[i].blob, blob, BLOB);
    check_true("rdzv: 4 ranks get rank 0's blob", all, "serve %d (%s), peer errors: %s / %s",
               rc, err, p[0].err, p[1].err);
    close(fd);

    /* a rank never comes: rank 0 gives up in time and names it */
    fd = rdzv_listen("127.0.0.1", 0, &port, err, sizeof err);
    Peer q[1] = {{0, 1, 3, 0, 5, {0}, 0, ""}};
    double t0 = now_s();
    rc = rendezvous(3, q, 1, 1.0, err, blob, port, fd);
    double dt = now_s() - t0;
    check_true("rdzv: a missing rank times out with its number", rc == -1 && dt < 4 &&
               strstr(err, "2 of 3 ranks") && strstr(err, "missing: rank 2"),
               "rc %d after %.1f s: %s", rc, dt, err);
    close(fd);

    /* a rank with another world size is refused, and told why */
    fd = rdzv_listen("127.0.0.1", 0, &port, err, sizeof err);
    Peer w[1] = {{0, 1, 8, 0, 5, {0}, 0, ""}};
    rc = rendezvous(2, w, 1, 3.0, err, blob, port, fd);
    check_true("rdzv: world size mismatch", rc == -1 && strstr(err, "says the world has 8") &&
               w[0].rc == -1 && strstr(w[0].err, "world sizes differ"), "%s / %s", err,
               w[0].err);
    close(fd);

    /* two processes claim rank 1 */
    fd = rdzv_listen("127.0.0.1", 0, &port, err, sizeof err);
    Peer dup[2] = {{0, 1, 3, 0, 5, {0}, 0, ""}, {0, 1, 3, 0.3, 5, {0}, 0, ""}};
    rc = rendezvous(3, dup, 2, 3.0, err, blob, port, fd);
    check_true("rdzv: duplicate rank", rc == -1 && strstr(err, "both claim rank 1"), "%s", err);
    close(fd);

    /* nobody listens: the fetch retries, then says where it looked */
    fd = rdzv_listen("127.0.0.1", 0, &port, err, sizeof err);
    close(fd);   /* the port is free again: nothing answers there */
    unsigned char got[BLOB];
    t0 = now_s();
    rc = rdzv_fetch("127.0.0.1", port, 1, 2, got, BLOB, 1.0, err, sizeof err);
    dt = now_s() - t0;
    check_true("rdzv: unreachable rank 0 times out", rc == -1 && dt < 4 &&
               strstr(err, "could not reach rank 0 at 127.0.0.1"), "rc %d after %.1f s: %s", rc,
               dt, err);
    rc = rdzv_fetch("no-such-host.invalid", port, 1, 2, got, BLOB, 1.0, err, sizeof err);
    check_true("rdzv: unknown host", rc == -1 && strstr(err, "cannot resolve"), "%s", err);
}

/* ---- the launcher ---- */

static void test_launch(void)
{
    char dir[] = "/tmp/ctrain-launch-XXXXXX";
    if (!mkdtemp(dir)) { check_true("launch: temp dir", 0, "mkdtemp failed"); return; }
    char script[1024];
    /* every rank writes what it was told; rank 0 also whether it got the socket */
    snprintf(script, sizeof script,
             "echo \"$CTRAIN_RANK $CTRAIN_WORLD_SIZE $CTRAIN_LOCAL_RANK $CTRAIN_MASTER_ADDR "
             "${CTRAIN_RDZV_FD:+fd}\" > %s/rank$CTRAIN_RANK", dir);
    char *ok_argv[] = {(char *)"/bin/sh", (char *)"-c", script, NULL};
    int rc = dist_spawn(ok_argv, 3, 5.0, "test");
    int env_ok = rc == 0;
    for (int r = 0; r < 3; r++) {
        char path[1100], line[256] = "", want[64];
        snprintf(path, sizeof path, "%s/rank%d", dir, r);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(line, sizeof line, f)) line[0] = 0;
            fclose(f);
        }
        snprintf(want, sizeof want, "%d 3 %d 127.0.0.1 %s\n", r, r, r == 0 ? "fd" : "");
        env_ok &= !strcmp(line, want);
        unlink(path);
    }
    rmdir(dir);
    check_true("launch: 3 ranks with their variables, status 0", env_ok, "rc %d", rc);

    /* rank 1 fails at once; ranks 0 and 2 would run 60 s: stopped within the grace time */
    char *fail_argv[] = {(char *)"/bin/sh", (char *)"-c",
                         (char *)"if [ \"$CTRAIN_RANK\" = 1 ]; then exit 3; fi; exec sleep 60",
                         NULL};
    double t0 = now_s();
    rc = dist_spawn(fail_argv, 3, 2.0, "test (rank 1 fails on purpose)");
    double dt = now_s() - t0;
    check_true("launch: one rank fails -> all stop, status 1", rc == 1 && dt < 10,
               "rc %d after %.1f s", rc, dt);

    /* a rank that ignores SIGTERM is killed after the grace time */
    char *stubborn[] = {(char *)"/bin/sh", (char *)"-c",
                        (char *)"if [ \"$CTRAIN_RANK\" = 1 ]; then kill -9 $$; fi; "
                                "trap '' TERM; while :; do sleep 0.1; done",
                        NULL};
    t0 = now_s();
    rc = dist_spawn(stubborn, 2, 1.0, "test (rank 0 ignores SIGTERM on purpose)");
    dt = now_s() - t0;
    check_true("launch: SIGKILL after the grace time", rc == 1 && dt < 8, "rc %d after %.1f s",
               rc, dt);
}

int main(void)
{
    test_env();
    test_launchers();
    test_rdzv();
    test_launch();
    return check_summary();
}
