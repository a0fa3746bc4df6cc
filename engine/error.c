/* error.c — fatal errors with a hint, and failed-library-call reports. */
#include "error.h"

#include <stdarg.h>
#include <string.h>

static char msg_prefix[64];

void ct_set_msg_prefix(const char *prefix)
{
    snprintf(msg_prefix, sizeof msg_prefix, "%s", prefix ? prefix : "");
}

const char *ct_msg_prefix(void) { return msg_prefix; }

void ct_fatal_hint(const char *hint, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "ctrain: %s", msg_prefix);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (hint) fprintf(stderr, "hint: %s\n", hint);
    exit(1);
}

/* Diagnostics only: the one piece of process state the error path keeps. */
static const char *error_note;

void ct_error_note(const char *hint) { error_note = hint; }

void ct_check_failed(const char *file, int line, const char *call,
                     const char *lib, const char *msg)
{
    fflush(stdout);
    fprintf(stderr, "ctrain: %s%s:%d: %s failed: %s: %s\n", msg_prefix, file, line, call, lib,
            msg ? msg : "(no message)");
    if (error_note) fprintf(stderr, "hint: %s\n", error_note);
    exit(1);
}
