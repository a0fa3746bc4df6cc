/* dist_env.c — parsing the data-parallel environment (the variables and
 * their defaults are listed in dist_env.h). Strict: a value that is not a
 * whole number in range is an error naming the variable, never a default. */
#include "dist_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"

void dist_options_default(DistOptions *o)
{
    memset(o, 0, sizeof *o);
    o->bucket_mb = DIST_DEFAULT_BUCKET_MB;
    o->timeout_s = DIST_DEFAULT_TIMEOUT_S;
    o->grad_reduce = DT_F32;
}

int dist_grad_reduce_parse(const char *s)
{
    if (!strcmp(s, "f32")) return DT_F32;
    if (!strcmp(s, "bf16")) return DT_BF16;
    return -1;
}

const char *dist_env_source_name(DistEnvSource s)
{
    switch (s) {
    case DIST_ENV_CTRAIN: return "CTRAIN_* variables";
    case DIST_ENV_TORCHRUN: return "torchrun";
    case DIST_ENV_OMPI: return "Open MPI";
    case DIST_ENV_SLURM: return "SLURM (srun)";
    default: return "none";
    }
}

int dist_first_host(const char *list, char *out, size_t len)
{
    /* prefix, then "[first-number..." and the suffix after "]", up to the
     * first comma outside brackets: "node[01-04,07]-ib,gpu2" -> "node01-ib" */
    size_t n = 0;
    const char *p = list;
    if (!list || !*list || len == 0) return 0;
    while (*p && *p != ',' && *p != '[') {
        if (n + 1 >= len) return 0;
        out[n++] = *p++;
    }
    if (*p == '[') {
        p++;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') {
            if (n + 1 >= len) return 0;
            out[n++] = *p++;
        }
        while (*p && *p != ']') p++;
        if (*p != ']') return 0;
        p++;
        while (*p && *p != ',') {
            if (*p == '[' || n + 1 >= len) return 0;
            out[n++] = *p++;
        }
    }
    out[n] = 0;
    return n > 0;
}

typedef struct Parse {
    DistGetenv get;
    void *user;
    char *err, *hint;
    size_t errlen, hintlen;
} Parse;

static int fail(Parse *p, const char *hint, const char *fmt, const char *a, const char *b)
{
    snprintf(p->err, p->errlen, fmt, a, b);
    snprintf(p->hint, p->hintlen, "%s", hint);
    return -1;
}

/* *out = the variable as a whole number in [lo, hi]; dflt when unset and
 * dflt_ok; returns -1 (message set) when bad or missing. */
static int num(Parse *p, const char *name, long lo, long hi, int dflt_ok, long dflt, long *out,
               const char *hint)
{
    const char *v = p->get(name, p->user);
    if (!v || !*v) {
        if (dflt_ok) { *out = dflt; return 0; }
        return fail(p, hint, "%s is not set%s", name, "");
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        char range[64], what[300];
        snprintf(range, sizeof range, "%ld..%ld", lo, hi);
        snprintf(what, sizeof what, "%s='%.200s'", name, v);
        return fail(p, hint, "%s is not a whole number in %s", what, range);
    }
    *out = x;
    return 0;
}

/* The variables of one way of starting ranks. */
typedef struct Source {
    DistEnvSource src;
    const char *rank, *world, *world_alt, *local;
    const char *hint;
} Source;

static const Source sources[] = {
    {DIST_ENV_CTRAIN, "CTRAIN_RANK", "CTRAIN_WORLD_SIZE", NULL, "CTRAIN_LOCAL_RANK",
     "set CTRAIN_RANK (0 .. N-1) and CTRAIN_WORLD_SIZE (N) for every process, or use "
     "ctrain train --gpus N on one machine"},
    {DIST_ENV_TORCHRUN, "RANK", "WORLD_SIZE", NULL, "LOCAL_RANK",
     "start ctrain under torchrun, which sets RANK, WORLD_SIZE and LOCAL_RANK, or unset RANK"},
    {DIST_ENV_OMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL,
     "OMPI_COMM_WORLD_LOCAL_RANK",
     "start ctrain under mpirun, which sets OMPI_COMM_WORLD_RANK and _SIZE"},
    {DIST_ENV_SLURM, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_LOCALID",
     "start one ctrain per GPU with srun (srun --ntasks-per-node=GPUS ctrain train ...)"},
};

static int is_set(const char *v) { return v && *v; }

/* Which launcher started this process: CTRAIN_* first, then torchrun's
 * RANK + WORLD_SIZE, then mpirun's, then srun's (SLURM_PROCID inside a job
 * step: a batch script alone also has SLURM_PROCID = 0, but no step). */
static const Source *source_of(DistGetenv get, void *user)
{
    if (is_set(get("CTRAIN_RANK", user)) || is_set(get("CTRAIN_WORLD_SIZE", user)))
        return &sources[0];
    if (is_set(get("RANK", user)) && is_set(get("WORLD_SIZE", user))) return &sources[1];
    if (is_set(get("OMPI_COMM_WORLD_RANK", user))) return &sources[2];
    if (is_set(get("SLURM_PROCID", user)) && is_set(get("SLURM_STEP_ID", user)))
        return &sources[3];
    return NULL;
}

/* Rank 0's host when CTRAIN_MASTER_ADDR is unset, in addr; 0, or -1 with
 * the message set. One machine defaults to 127.0.0.1. */
static int default_addr(Parse *p, const Source *s, long world, char *addr, size_t len)
{
    DistGetenv get = p->get;
    void *user = p->user;
    snprintf(addr, len, "127.0.0.1");
    if (s->src == DIST_ENV_TORCHRUN) {
        const char *m = get("MASTER_ADDR", user);
        if (is_set(m)) snprintf(addr, len, "%s", m);
        return 0;
    }
    if (s->src == DIST_ENV_OMPI) {   /* under mpirun: only one machine can default to this host */
        long lsize;
        if (num(p, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 65536, 1, world, &lsize, "") == 0 &&
            lsize != world)
            return fail(p, "pass mpirun -x CTRAIN_MASTER_ADDR=<host of rank 0> "
                        "-x CTRAIN_MASTER_PORT=<free port>",
                        "ranks on several machines need CTRAIN_MASTER_ADDR (the host of rank "
                        "0) for the rendezvous%s%s", "", "");
        return 0;
    }
    if (s->src == DIST_ENV_SLURM) {  /* srun: the step's first node holds task 0 */
        const char *nodes = get("SLURM_STEP_NODELIST", user);
        if (!is_set(nodes)) nodes = get("SLURM_JOB_NODELIST", user);
        long nn;
        const char *nn_name = is_set(get("SLURM_STEP_NUM_NODES", user)) ? "SLURM_STEP_NUM_NODES"
                                                                       : "SLURM_NNODES";
        if (num(p, nn_name, 1, 65536, 1, 1, &nn, "SLURM sets the node count; unset it") < 0)
            return -1;
        if (nn > 1 && !dist_first_host(nodes, addr, len))
            return fail(p, "export CTRAIN_MASTER_ADDR=<host of task 0> before srun",
                        "cannot tell task 0's host from SLURM's node list '%.200s'%s",
                        nodes ? nodes : "", "");
    }
    return 0;
}

int dist_env_parse(DistEnv *e, DistGetenv get, void *user, char *err, size_t errlen, char *hint,
                   size_t hintlen)
{
    memset(e, 0, sizeof *e);
    e->rdzv_fd = -1;
    Parse p = {get, user, err, hint, errlen, hintlen};
    err[0] = hint[0] = 0;
    const Source *s = source_of(get, user);
    if (!s) return 0;
    const char *ws = s->world;
    if (s->world_alt && !is_set(get(ws, user))) ws = s->world_alt;
    long rank, world, local;
    if (num(&p, ws, 1, 65536, 0, 0, &world, s->hint) ||
        num(&p, s->rank, 0, 65535, 0, 0, &rank, s->hint))
        return -1;
    if (rank >= world) {
        char a[96], b[96];
        snprintf(a, sizeof a, "%s=%ld", s->rank, rank);
        snprintf(b, sizeof b, "%s=%ld", ws, world);
        return fail(&p, "ranks are numbered 0 .. world size - 1", "%s is not below %s", a, b);
    }
    if (num(&p, s->local, 0, 1023, 1, rank, &local,
            "the local rank is the GPU index on this machine, 0 .. GPUs - 1"))
        return -1;
    e->source = s->src;
    e->rank = (int)rank;
    e->world = (int)world;
    e->local_rank = (int)local;

    const char *addr = get("CTRAIN_MASTER_ADDR", user);
    char dflt[256];
    if (!is_set(addr)) {
        if (default_addr(&p, s, world, dflt, sizeof dflt) < 0) return -1;
        addr = dflt;
    }
    if (strlen(addr) >= sizeof e->master_addr)
        return fail(&p, "use a shorter host name or an IP address",
                    "CTRAIN_MASTER_ADDR is longer than 255 characters%s%s", "", "");
    snprintf(e->master_addr, sizeof e->master_addr, "%s", addr);
    /* under torchrun its own store listens on MASTER_PORT (the agent's):
     * rank 0's rendezvous takes the port above it */
    long port, fd, dport = DIST_DEFAULT_PORT;
    if (s->src == DIST_ENV_TORCHRUN && is_set(get("MASTER_PORT", user)) &&
        !is_set(get("CTRAIN_MASTER_PORT", user))) {
        if (num(&p, "MASTER_PORT", 1, 65534, 0, 0, &dport,
                "MASTER_PORT is torchrun's TCP port; ctrain's rendezvous uses the next one"))
            return -1;
        dport++;
    }
    if (num(&p, "CTRAIN_MASTER_PORT", 1, 65535, 1, dport, &port,
            "CTRAIN_MASTER_PORT is a TCP port, 1 .. 65535, free on rank 0's machine"))
        return -1;
    e->master_port = (int)port;
    if (num(&p, "CTRAIN_RDZV_FD", 0, 1 << 20, 1, -1, &fd,
            "CTRAIN_RDZV_FD is set by ctrain's own launcher; unset it"))
        return -1;
    e->rdzv_fd = rank == 0 ? (int)fd : -1;
    return 1;
}

static const char *real_getenv(const char *name, void *user)
{
    (void)user;
    return getenv(name);
}

int dist_env_read(DistEnv *e)
{
    char err[512], hint[512];
    int r = dist_env_parse(e, real_getenv, NULL, err, sizeof err, hint, sizeof hint);
    if (r < 0) ct_fatal_hint(hint[0] ? hint : NULL, "%s", err);
    return r;
}
