/* check.h — the test harness: named checks, closeness with the worst element,
 * and the "N passed, N failed" summary line every test program ends with.
 *
 *   check_close("gelu.dx", got, ref, n, atol, rtol)
 *   passes when |got - ref| <= atol + rtol * |ref| for every element; on
 *   failure it prints the worst element, its index, and both values.
 *   NaN in got never passes. check_close_most allows a few elements out.
 *
 * Header-only so each test program is one file; include it once per program.
 */
#ifndef CTRAIN_TESTS_CHECK_H
#define CTRAIN_TESTS_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int check_passed_ = 0, check_failed_ = 0;

static inline void check_report_(int ok, const char *name, const char *detail)
{
    if (ok) {
        check_passed_++;
        if (getenv("CHECK_VERBOSE")) printf("  ok   %s\n", name);
    } else {
        check_failed_++;
        printf("  FAIL %s%s%s\n", name, detail ? ": " : "", detail ? detail : "");
    }
}

/* A boolean check with a printf-style description of what was expected. */
static inline int check_true(const char *name, int cond, const char *fmt, ...)
{
    char buf[512] = {0};
    if (!cond && fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
    }
    check_report_(cond, name, cond ? NULL : buf);
    return cond;
}

static inline int check_close(const char *name, const float *got, const float *ref, size_t n,
                       double atol, double rtol)
{
    size_t worst = 0;
    double worst_excess = -1.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        double tol = atol + rtol * fabs(r);
        double err = fabs(g - r);
        double excess = (isnan(g) || isnan(r)) ? INFINITY : err - tol;
        if (excess > 0) ok = 0;
        if (excess > worst_excess) { worst_excess = excess; worst = i; }
    }
    char buf[256];
    if (!ok)
        snprintf(buf, sizeof buf, "worst at [%zu]: got %.8g ref %.8g (|diff| %.3g, tol %.3g)",
                 worst, (double)got[worst], (double)ref[worst],
                 fabs((double)got[worst] - ref[worst]), atol + rtol * fabs((double)ref[worst]));
    check_report_(ok, name, ok ? NULL : buf);
    return ok;
}

/* Like check_close, but passes with up to max_bad elements out of
 * tolerance (reported with CHECK_VERBOSE): for ReLU-mask edge cases. */
static inline int check_close_most(const char *name, const float *got, const float *ref,
                                   size_t n, double atol, double rtol, size_t max_bad)
{
    size_t bad = 0, worst = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        double excess = (isnan(g) || isnan(r)) ? INFINITY : fabs(g - r) - (atol + rtol * fabs(r));
        if (excess > 0) bad++;
        if (excess > worst_excess) { worst_excess = excess; worst = i; }
    }
    int ok = bad <= max_bad;
    if (getenv("CHECK_VERBOSE") && bad)
        printf("       %s: %zu of %zu elements out of tolerance (allowed %zu)\n", name, bad, n,
               max_bad);
    return check_true(name, ok, "%zu of %zu elements out of tolerance (allowed %zu); worst at "
                      "[%zu]: got %.8g ref %.8g", bad, n, max_bad, worst, (double)got[worst],
                      (double)ref[worst]);
}

/* Same in double (for finite-difference checks computed in f64). */
static inline int check_close_f64(const char *name, const double *got, const double *ref,
                           size_t n, double atol, double rtol)
{
    size_t worst = 0;
    double worst_excess = -1.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double tol = atol + rtol * fabs(ref[i]);
        double err = fabs(got[i] - ref[i]);
        double excess = (isnan(got[i]) || isnan(ref[i])) ? INFINITY : err - tol;
        if (excess > 0) ok = 0;
        if (excess > worst_excess) { worst_excess = excess; worst = i; }
    }
    char buf[256];
    if (!ok)
        snprintf(buf, sizeof buf, "worst at [%zu]: got %.10g ref %.10g", worst, got[worst],
                 ref[worst]);
    check_report_(ok, name, ok ? NULL : buf);
    return ok;
}

/* Relative error of a whole array: ||got - ref||_2 / ||ref||_2 <= tol. For
 * low-precision modes, where single elements can legitimately differ a lot
 * (a ReLU flips on a value near 0), the norm is the meaningful measure. */
static inline int check_rel_norm(const char *name, const float *got, const float *ref, size_t n,
                                 double tol)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    char buf[128];
    int ok = rel <= tol; /* NaN fails */
    snprintf(buf, sizeof buf, "relative error %.3g > %.3g", rel, tol);
    check_report_(ok, name, ok ? NULL : buf);
    if (getenv("CHECK_VERBOSE")) printf("       %s: relative error %.3g\n", name, rel);
    return ok;
}

/* Deterministic test inputs: uniform in [lo, hi) from a per-test seed
 * (xorshift64*), never zeros. */
static uint64_t check_rng_state_ = 0x9E3779B97F4A7C15ull;
static inline void check_seed(uint64_t s) { check_rng_state_ = s * 0x9E3779B97F4A7C15ull + 1; }
static inline float check_uniform(float lo, float hi)
{
    uint64_t x = check_rng_state_;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    check_rng_state_ = x;
    double u = (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}
static inline void check_fill(float *p, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) p[i] = check_uniform(lo, hi);
}

/* Run fn(arg) in a forked child with stderr captured into msg; returns the
 * child's exit status (or -1 when it did not exit normally). For checking
 * that fatal errors exit with status 1 and say the right thing. */
#include <sys/wait.h>
#include <unistd.h>
static inline int check_run_child(void (*fn)(void *), void *arg, char *msg, size_t len)
{
    int fds[2];
    msg[0] = 0;
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n < len - 1 && (got = read(fds[0], msg + n, len - 1 - n)) > 0) n += (size_t)got;
    msg[n] = 0;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Ends every test program: prints the summary line, returns the exit code. */
static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

#endif
