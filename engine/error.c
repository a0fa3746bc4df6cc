/* error.c — fatal errors with a hint, the same without the exit, errors as
 * text for a caller, and failed-library-call reports. */
#include "error.h"

#include <stdarg.h>
#include <string.h>

static char msg_prefix[64];

void ct_set_msg_prefix(const char *prefix)
{
    snprintf(msg_prefix, sizeof msg_prefix, "%s", prefix ? prefix : "");
}

const char *ct_msg_prefix(void) { return msg_prefix; }

/* "ctrain: <prefix><msg>" and "hint: <hint>", after what stdout holds. */
static void error_vprint(const char *hint, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, "ctrain: %s", msg_prefix);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (hint) fprintf(stderr, "hint: %s\n", hint);
    fflush(stderr);
}

void ct_fatal_hint(const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vprint(hint, fmt, ap);
    va_end(ap);
    exit(1);
}

void ct_error_hint(const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vprint(hint, fmt, ap);
    va_end(ap);
}

int ct_fail(char *err, size_t errlen, int status, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
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
