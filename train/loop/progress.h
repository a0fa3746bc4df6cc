/* progress.h — the live progress line.
 *
 * On a terminal the line is redrawn in place (\r, clear to end of line);
 * when stdout is a file or pipe, one full line is printed per update
 * instead, so logs stay readable. The caller decides how often to update
 * (every --log-every steps).
 */
#ifndef CTRAIN_TRAIN_PROGRESS_H
#define CTRAIN_TRAIN_PROGRESS_H

#include <stddef.h>

typedef struct Progress {
    int tty;
    int drawn;      /* a line is on screen that the next update overwrites */
} Progress;

void progress_init(Progress *p);
/* Print a formatted progress line. */
void progress_update(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* End the in-place line so the next output starts on its own line. */
void progress_done(Progress *p);
/* "1:02:03" or "2:05" into buf. */
const char *progress_fmt_time(char *buf, size_t len, double seconds);
/* Seconds since an arbitrary start (monotonic). */
double progress_now(void);

#endif
