/* progress.c — the progress line: in place on a terminal (clipped to its width, so
 * the carriage return can overwrite it), a line per update otherwise. */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

void progress_init(Progress *p)
{
    p->tty = isatty(STDOUT_FILENO);
    p->drawn = 0;
}

/* Columns of the terminal on stdout; 0 when unknown. */
static int term_width(void)
{
    struct winsize ws;
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

void progress_update(Progress *p, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (p->tty) {
        /* one screen line: a wrapped line would not be overwritten by \r */
        const int w = term_width();
        if (w > 1 && strlen(line) >= (size_t)w) line[w - 1] = 0;
        fputs("\r\033[K", stdout);
    }
    fputs(line, stdout);
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
