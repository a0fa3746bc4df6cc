/* data_util.h — two helpers every loader in data/ needs: writing a one-line
 * error into the caller's buffer (the data APIs report errors as text plus a
 * status instead of exiting, so tests and callers can check the message),
 * and growing a dynamic array. */
#ifndef CTRAIN_DATA_UTIL_H
#define CTRAIN_DATA_UTIL_H

#include <stddef.h>

/* printf into err (when err is non-NULL and errlen > 0); returns status. */
int data_fail(char *err, size_t errlen, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Grow *p (elements of size elem, capacity *cap) to hold at least need,
 * doubling from 16; returns 0, or -1 when out of memory (*p unchanged). */
int data_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
