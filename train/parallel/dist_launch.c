/* dist_launch.c — the one-machine launcher: fork + exec N ranks, watch
 * them with waitpid, stop them all when one fails (see dist_launch.h). */
#include "dist_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "engine/error.h"
#include "dist_rdzv.h"

static volatile sig_atomic_t forward_sig;
static void on_signal(int sig) { forward_sig = sig; }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void set_env_int(const char *name, long v)
{
    char b[32];
    snprintf(b, sizeof b, "%ld", v);
    setenv(name, b, 1);
}

/* In the child: the rank's environment, then exec. Never returns. */
static void exec_rank(char *const argv[], int rank, int n, int port, int listen_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a killed launcher takes its ranks along */
    set_env_int("CTRAIN_RANK", rank);
    set_env_int("CTRAIN_LOCAL_RANK", rank);
    set_env_int("CTRAIN_WORLD_SIZE", n);
    setenv("CTRAIN_MASTER_ADDR", "127.0.0.1", 1);
    set_env_int("CTRAIN_MASTER_PORT", port);
    if (rank == 0) {
        fcntl(listen_fd, F_SETFD, 0);   /* keep the listening socket across exec */
        set_env_int("CTRAIN_RDZV_FD", listen_fd);
    } else {
        close(listen_fd);
        unsetenv("CTRAIN_RDZV_FD");
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execv(argv[0], argv);
    fprintf(stderr, "ctrain: rank %d: cannot run %s: %s\n", rank, argv[0], strerror(errno));
    _exit(127);
}

static void describe(char *buf, size_t len, int st)
{
    if (WIFEXITED(st)) snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else snprintf(buf, len, "stopped (status 0x%x)", st);
}

int dist_spawn(char *const argv[], int n, double grace_s, const char *what)
{
    char err[512];
    int port = 0;
    int lfd = rdzv_listen("127.0.0.1", 0, &port, err, sizeof err);
    if (lfd < 0) ct_fatal_hint("check that this machine allows TCP on 127.0.0.1", "%s", err);
    pid_t *pid = (pid_t *)calloc((size_t)n, sizeof *pid);
    int *alive = (int *)calloc((size_t)n, sizeof *alive);
    if (!pid || !alive) ct_fatal("out of host memory");
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    forward_sig = 0;
    fflush(NULL);
    int started = 0;
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            fprintf(stderr, "ctrain: %s: cannot start rank %d: %s\n", what, i, strerror(errno));
            break;
        }
        if (pid[i] == 0) exec_rank(argv, i, n, port, lfd);
        alive[i] = 1;
        started++;
    }
    close(lfd);

    int failed = started < n, left = started;
    double kill_at = failed ? now_s() + grace_s : 0;
    if (failed)
        for (int i = 0; i < started; i++) kill(pid[i], SIGTERM);
    while (left > 0) {
        if (forward_sig) {
            for (int i = 0; i < n; i++)
                if (alive[i]) kill(pid[i], forward_sig);
            if (!failed) kill_at = now_s() + grace_s;
            failed = 1;
            forward_sig = 0;
        }
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            int r = -1;
            for (int i = 0; i < n; i++)
                if (pid[i] == p && alive[i]) r = i;
            if (r < 0) continue;
            alive[r] = 0;
            left--;
            int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (!ok && !failed) {
                char why[128];
                describe(why, sizeof why, st);
                fprintf(stderr, "ctrain: %s: rank %d %s; stopping the other %d rank%s\n", what, r,
                        why, left, left == 1 ? "" : "s");
                failed = 1;
                kill_at = now_s() + grace_s;
                for (int i = 0; i < n; i++)
                    if (alive[i]) kill(pid[i], SIGTERM);
            }
            continue;
        }
        if (p < 0 && errno == ECHILD) break;
        if (failed && kill_at > 0 && now_s() > kill_at) {
            for (int i = 0; i < n; i++)
                if (alive[i]) kill(pid[i], SIGKILL);
            kill_at = 0;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(pid);
    free(alive);
    return failed ? 1 : 0;
}
