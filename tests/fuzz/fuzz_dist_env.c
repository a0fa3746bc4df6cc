/* fuzz_dist_env.c — libFuzzer harness: the rendezvous environment
 * (train/parallel/dist_env.h dist_env_parse), as a multi-GPU rank reads its
 * CTRAIN_* / OMPI_COMM_WORLD_* variables. The input is NAME=VALUE lines
 * (NUL or newline separated; a later line wins, a line without '=' is
 * skipped), looked up through dist_env_parse's getter instead of the
 * process environment. Checked: 0 (no rank variables) or 1 with rank <
 * world, ranks and port in their ranges and a terminated address; -1 with
 * a message and a hint.
 */
#include "fuzz_util.h"
#include "train/parallel/dist_env.h"

#define MAX_VARS 32

typedef struct {
    char *line[MAX_VARS];
    int n;
} Env;

static const char *env_get(const char *name, void *user)
{
    const Env *e = user;
    size_t l = strlen(name);
    for (int i = e->n - 1; i >= 0; i--)
        if (!strncmp(e->line[i], name, l) && e->line[i][l] == '=') return e->line[i] + l + 1;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    Env env = {.n = 0};
    size_t pos = 0;
    char *w;
    while (env.n < MAX_VARS && (w = fuzz_next_piece(data, size, &pos))) {
        if (strchr(w, '=')) env.line[env.n++] = w;
        else free(w);
    }
    DistEnv e;
    char err[512], hint[512];
    int r = dist_env_parse(&e, env_get, &env, err, sizeof err, hint, sizeof hint);
    if (r == 1) {
        fuzz_check(e.world >= 1 && e.rank >= 0 && e.rank < e.world && e.local_rank >= 0 &&
                       e.master_port >= 1 && e.master_port <= 65535 &&
                       memchr(e.master_addr, 0, sizeof e.master_addr) && e.master_addr[0],
                   "accepted: rank %d world %d local %d port %d", e.rank, e.world, e.local_rank,
                   e.master_port);
        fuzz_check(e.source == DIST_ENV_CTRAIN || e.source == DIST_ENV_OMPI, "source %d",
                   e.source);
        (void)dist_env_source_name(e.source);
    } else if (r == -1) {
        fuzz_check(err[0] && hint[0], "refused without a message or hint: '%s' / '%s'", err, hint);
    } else {
        fuzz_check(r == 0, "dist_env_parse returned %d", r);
    }
    for (int i = 0; i < env.n; i++) free(env.line[i]);
    return 0;
}
