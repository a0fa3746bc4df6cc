/* log.c — leveled logging; the level starts from $CTRAIN_LOG (default info). */
#include "log.h"

#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *level_names[] = {"error", "warn", "info", "debug", "trace"};
static int current_level = -1;

int log_parse_level(const char *s)
{
    for (int i = 0; i <= LOG_TRACE; i++)
        if (strcmp(s, level_names[i]) == 0) return i;
    return -1;
}

LogLevel log_get_level(void)
{
    if (current_level < 0) {
        const char *e = getenv("CTRAIN_LOG");
        int l = e ? log_parse_level(e) : -1;
        current_level = l < 0 ? LOG_INFO : l;
    }
    return (LogLevel)current_level;
}

void log_set_level(LogLevel l) { current_level = (int)l; }

void log_msg(LogLevel l, const char *fmt, ...)
{
    if (l > log_get_level()) return;
    va_list ap;
    fprintf(stderr, "[%s] %s", level_names[l], ct_msg_prefix());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
