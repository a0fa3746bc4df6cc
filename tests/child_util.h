/* child_util.h — for the tests that run a part of themselves in a forked
 * child (a path that ends in ct_fatal, a process that dropped root so that
 * file permissions apply, an address-space limit) and read what it wrote.
 * Header-only, like check.h; include after it. */
#ifndef CTRAIN_TESTS_CHILD_UTIL_H
#define CTRAIN_TESTS_CHILD_UTIL_H

#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run fn(ctx, fd) in a child, fd the write end of a pipe that is also the
 * child's stderr; the child exits 0 when fn returns. The parent keeps the
 * first len - 1 bytes written (out always terminated), reads the rest away
 * so the child never blocks, and returns the child's exit status (-1: no
 * child, or killed by a signal). */
static inline int child_run(void (*fn)(void *ctx, int fd), void *ctx, char *out, size_t len)
{
    int pfd[2];
    out[0] = 0;
    if (pipe(pfd)) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        fn(ctx, pfd[1]);
        _exit(0);
    }
    close(pfd[1]);
    size_t k = 0;
    char chunk[4096];
    ssize_t r;
    while ((r = read(pfd[0], chunk, sizeof chunk)) > 0) {
        size_t take = k + (size_t)r < len - 1 ? (size_t)r : len - 1 - k;
        memcpy(out + k, chunk, take);
        k += take;
    }
    out[k] = 0;
    close(pfd[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* In a child: as root, become uid/gid 65534 (nobody), for whom a mode-000
 * file is unreadable (root reads it anyway). 0, or -1 when that fails. */
static inline int child_drop_root(void)
{
    if (geteuid() != 0) return 0;
    return setgid(65534) || setuid(65534) ? -1 : 0;
}

#endif
