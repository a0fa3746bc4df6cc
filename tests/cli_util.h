/* cli_util.h — for the tests that run the ctrain binary (test_cli,
 * test_bench, test_resume): where the binary is, and running a command
 * with its output captured. Include after check.h. */
#ifndef CTRAIN_TESTS_CLI_UTIL_H
#define CTRAIN_TESTS_CLI_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* $CTRAIN_BIN, else the build's binary. */
static inline const char *bin(void)
{
    const char *b = getenv("CTRAIN_BIN");
    return b ? b : "./build/ctrain";
}

/* Run a shell command, capture stdout+stderr (its last len-1 bytes) into
 * out; reads to the end so the command never sees a closed pipe. Returns
 * the exit status. */
static inline int run(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0;
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, p)) > 0) {
        if (got >= len - 1) {
            memcpy(out, chunk + got - (len - 1), len - 1);
            n = len - 1;
        } else {
            if (n + got > len - 1) {          /* keep the tail */
                size_t drop = n + got - (len - 1);
                memmove(out, out + drop, n - drop);
                n -= drop;
            }
            memcpy(out + n, chunk, got);
            n += got;
        }
    }
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `ctrain eval`'s summary top-1 (the last "top-1 NN.NN%"), not a progress
 * line's "top-1 so far" (printed when the evaluation takes over 2 s, as on
 * a loaded machine); -1 when there is none. */
static inline double eval_top1(const char *out)
{
    double top1 = -1;
    for (const char *p = strstr(out, "top-1 "); p; p = strstr(p + 6, "top-1 "))
        if (p[6] >= '0' && p[6] <= '9') top1 = atof(p + 6);
    return top1;
}

#endif
