/* timeline_api.c — the per-thread table of CUDA API time (timeline_api.h). */
#include "timeline_api.h"

#include <stdlib.h>
#include <string.h>

void tl_api_init(TlApi *a) { memset(a, 0, sizeof *a); }

void tl_api_free(TlApi *a)
{
    free(a->rows);
    memset(a, 0, sizeof *a);
}

void tl_api_add(TlApi *a, int driver, uint32_t cbid, uint32_t thread, uint64_t start,
                uint64_t end)
{
    uint64_t d = end > start ? end - start : 0;
    driver = driver != 0;
    TlApiRow *r = NULL;
    for (size_t i = 0; i < a->n && !r; i++)   /* a window has tens of distinct calls */
        if (a->rows[i].driver == driver && a->rows[i].cbid == cbid && a->rows[i].thread == thread)
            r = &a->rows[i];
    if (!r) {
        if (a->n == a->cap) {
            size_t cap = a->cap ? 2 * a->cap : 64;
            TlApiRow *p = realloc(a->rows, cap * sizeof *p);
            if (!p) {
                a->oom = 1;
                return;
            }
            a->rows = p;
            a->cap = cap;
        }
        r = &a->rows[a->n++];
        *r = (TlApiRow){.driver = driver, .cbid = cbid, .thread = thread};
    }
    r->calls++;
    r->total_ns += d;
    if (d > r->max_ns) r->max_ns = d;
}

static int by_total(const void *x, const void *y)
{
    const TlApiRow *a = x, *b = y;
    return a->total_ns < b->total_ns ? 1 : a->total_ns > b->total_ns ? -1 : 0;
}

void tl_api_write(TlApi *a, FILE *out, int top, const char *(*name)(int driver, uint32_t cbid))
{
    if (a->n) qsort(a->rows, a->n, sizeof *a->rows, by_total);
    size_t n = top > 0 && (size_t)top < a->n ? (size_t)top : a->n;
    fprintf(out, "host: CUDA runtime and driver calls by thread, longest total first%s\n",
            a->oom ? " (out of memory: some left out)" : "");
    fprintf(out, "  %-12s %10s %8s %11s   %s\n", "thread", "total ms", "calls", "longest ms", "call");
    for (size_t i = 0; i < n; i++) {
        const TlApiRow *r = &a->rows[i];
        const char *nm = name ? name(r->driver, r->cbid) : NULL;
        char buf[32];
        if (!nm) {
            snprintf(buf, sizeof buf, "cbid %u", r->cbid);
            nm = buf;
        }
        fprintf(out, "  %-12u %10.3f %8ld %11.3f   %s (%s)\n", r->thread, 1e-6 * (double)r->total_ns,
                r->calls, 1e-6 * (double)r->max_ns, nm, r->driver ? "driver" : "runtime");
    }
    if (n < a->n) fprintf(out, "  ... %zu more\n", a->n - n);
}
