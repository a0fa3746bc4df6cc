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
    return s == DIST_ENV_CTRAIN ? "CTRAIN_* variables" : s == DIST_ENV_OMPI ? "Open MPI" : "none";
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

int dist_env_parse(DistEnv *e, DistGetenv get, void *user, char *err, size_t errlen, char *hint,
                   size_t hintlen)
{
    memset(e, 0, sizeof *e);
    e->rdzv_fd = -1;
    Parse p = {get, user, err, hint, errlen, hintlen};
    err[0] = hint[0] = 0;
    const char *cr = get("CTRAIN_RANK", user), *cw = get("CTRAIN_WORLD_SIZE", user);
    const char *orank = get("OMPI_COMM_WORLD_RANK", user);
    int ctrain = (cr && *cr) || (cw && *cw);
    if (!ctrain && !(orank && *orank)) return 0;
    const char *pfx = ctrain ? "CTRAIN_" : "OMPI_COMM_WORLD_";
    char rk[64], ws[64], lr[64];
    snprintf(rk, sizeof rk, "%sRANK", pfx);
    snprintf(ws, sizeof ws, "%s%s", pfx, ctrain ? "WORLD_SIZE" : "SIZE");
    snprintf(lr, sizeof lr, "%sLOCAL_RANK", pfx);
    const char *h_both = ctrain
        ? "set CTRAIN_RANK (0 .. N-1) and CTRAIN_WORLD_SIZE (N) for every process, or use "
          "ctrain train --gpus N on one machine"
        : "start ctrain under mpirun, which sets OMPI_COMM_WORLD_RANK and _SIZE";
    long rank, world, local;
    if (num(&p, ws, 1, 65536, 0, 0, &world, h_both) || num(&p, rk, 0, 65535, 0, 0, &rank, h_both))
        return -1;
    if (rank >= world) {
        char a[96], b[96];
        snprintf(a, sizeof a, "%s=%ld", rk, rank);
        snprintf(b, sizeof b, "%s=%ld", ws, world);
        return fail(&p, "ranks are numbered 0 .. world size - 1", "%s is not below %s", a, b);
    }
    if (num(&p, lr, 0, 1023, 1, rank, &local,
            "the local rank is the GPU index on this machine, 0 .. GPUs - 1"))
        return -1;
    e->source = ctrain ? DIST_ENV_CTRAIN : DIST_ENV_OMPI;
    e->rank = (int)rank;
    e->world = (int)world;
    e->local_rank = (int)local;

    const char *addr = get("CTRAIN_MASTER_ADDR", user);
    if (!addr || !*addr) {
        if (!ctrain) {   /* under mpirun: only one machine can default to this host */
            long lsize;
            if (num(&p, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 65536, 1, world, &lsize, "") == 0 &&
                lsize != world)
                return fail(&p, "pass mpirun -x CTRAIN_MASTER_ADDR=<host of rank 0> "
                            "-x CTRAIN_MASTER_PORT=<free port>",
                            "ranks on several machines need CTRAIN_MASTER_ADDR (the host of rank "
                            "0) for the rendezvous%s%s", "", "");
        }
        addr = "127.0.0.1";
    }
    if (strlen(addr) >= sizeof e->master_addr)
        return fail(&p, "use a shorter host name or an IP address",
                    "CTRAIN_MASTER_ADDR is longer than 255 characters%s%s", "", "");
    snprintf(e->master_addr, sizeof e->master_addr, "%s", addr);
    long port, fd;
    if (num(&p, "CTRAIN_MASTER_PORT", 1, 65535, 1, DIST_DEFAULT_PORT, &port,
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
