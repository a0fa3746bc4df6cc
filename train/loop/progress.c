/* progress.c — the progress line: in place on a terminal, a line per update otherwise. */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

void progress_init(Progress *p)
{
    p->tty = isatty(STDOUT_FILENO);
    p->drawn = 0;
}

void progress_update(Progress *p, const char *fmt, ...)
{
    va_list ap;
    if (p->tty) fputs("\r\033[K", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (!p->tty) fputc('\n', stdout);
    p->drawn = p->tty;
    fflush(stdout);
}

void progress_done(Progress *p)
{
    if (p->drawn) fputc('\n', stdout);
    p->drawn = 0;
    fflush(stdout);
}

const char *progress_fmt_time(char *buf, size_t len, double s)
{
    if (!(s >= 0) || s > 1e7) { snprintf(buf, len, "--:--"); return buf; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
