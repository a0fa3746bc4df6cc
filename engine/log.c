/* log.c — leveled logging; the level starts from $CTRAIN_LOG (default info;
 * the settings table lists the levels in LogLevel order). */
#include "log.h"

#include "error.h"
#include "settings.h"

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
    if (current_level < 0) current_level = setting_choice(SET_LOG);
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
