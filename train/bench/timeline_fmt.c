/* timeline_fmt.c — the timeline's events, its Chrome trace and summary
 * (see timeline_fmt.h). */
#include "timeline_fmt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "train/io/jsonw.h"

/* libstdc++'s demangler when it is linked (CUDA builds link it); weak, so a
 * build without it keeps the mangled names. */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status)
    __attribute__((weak));

void timeline_init(Timeline *tl) { memset(tl, 0, sizeof *tl); }

void timeline_free(Timeline *tl)
{
    for (size_t i = 0; i < tl->n_names; i++) free(tl->names[i]);
    free(tl->names);
    free(tl->ev);
    memset(tl, 0, sizeof *tl);
}

static int intern(Timeline *tl, const char *name)
{
    for (size_t i = tl->n_names; i-- > 0;)   /* recent names first: kernels repeat */
        if (!strcmp(tl->names[i], name)) return (int)i;
    if (tl->n_names == tl->cap_names) {
        size_t cap = tl->cap_names ? 2 * tl->cap_names : 64;
        char **p = (char **)realloc(tl->names, cap * sizeof *p);
        if (!p) return -1;
        tl->names = p;
        tl->cap_names = cap;
    }
    char *s = strdup(name);
    if (!s) return -1;
    tl->names[tl->n_names] = s;
    return (int)tl->n_names++;
}

int timeline_add(Timeline *tl, int kind, uint64_t start, uint64_t end, uint32_t stream,
                 const char *name, uint64_t bytes)
{
    if (tl->n == tl->cap) {
        size_t cap = tl->cap ? 2 * tl->cap : 4096;
        TlEvent *p = (TlEvent *)realloc(tl->ev, cap * sizeof *p);
        if (!p) return -1;
        tl->ev = p;
        tl->cap = cap;
    }
    int id = intern(tl, name ? name : "?");
    if (id < 0) return -1;
    TlEvent *e = &tl->ev[tl->n++];
    e->start = start;
    e->end = end > start ? end : start;
    e->bytes = bytes;
    e->stream = stream;
    e->kind = kind;
    e->name = id;
    return 0;
}

void timeline_short_name(char *out, size_t outlen, const char *raw)
{
    if (!outlen) return;
    char *dem = NULL;
    if (raw && raw[0] == '_' && raw[1] == 'Z' && __cxa_demangle) {
        int st = 0;
        dem = __cxa_demangle(raw, NULL, NULL, &st);
        if (st != 0) dem = NULL;
    }
    const char *s = dem ? dem : raw ? raw : "?";
    /* "(anonymous namespace)::" would read as a parameter list: drop it */
    static const char anon[] = "(anonymous namespace)::";
    char buf[1024];
    size_t m = 0;
    for (const char *p = s; *p && m + 1 < sizeof buf;) {
        if (!strncmp(p, anon, sizeof anon - 1)) {
            p += sizeof anon - 1;
            continue;
        }
        buf[m++] = *p++;
    }
    buf[m] = 0;
    /* up to the parameter list; a return type ("void ", before the name at
     * template depth 0) dropped */
    size_t end = 0, begin = 0;
    int depth = 0;
    for (; buf[end]; end++) {
        char c = buf[end];
        if (c == '<') depth++;
        else if (c == '>' && depth > 0) depth--;
        else if (c == '(' && depth == 0 && end > 0) break;
        else if (c == ' ' && depth == 0) begin = end + 1;
    }
    if (begin >= end) begin = 0;
    size_t n = end - begin;
    if (n > 120) n = 120;
    if (n > outlen - 1) n = outlen - 1;
    memcpy(out, buf + begin, n);
    out[n] = 0;
    free(dem);
}

static uint64_t first_start(const Timeline *tl)
{
    uint64_t t0 = UINT64_MAX;
    for (size_t i = 0; i < tl->n; i++)
        if (tl->ev[i].start < t0) t0 = tl->ev[i].start;
    return tl->n ? t0 : 0;
}

/* Writing PATH through PATH.tmp, renamed over PATH only when complete. */
static FILE *open_tmp(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    snprintf(tmp, tmplen, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    return f;
}

static int commit_tmp(FILE *f, const char *tmp, const char *path, char *err, size_t errlen)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

int timeline_write_chrome(const Timeline *tl, const char *path, int pid, char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f = open_tmp(path, tmp, sizeof tmp, err, errlen);
    if (!f) return -1;
    static const char *const cat[] = {"kernel", "memcpy", "memset"};
    uint64_t t0 = first_start(tl);
    JsonW name;   /* each event's name as a JSON string (the writer's compact style) */
    jsonw_init(&name, 0);
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    for (size_t i = 0; i < tl->n; i++) {
        const TlEvent *e = &tl->ev[i];
        jsonw_reset(&name);
        jsonw_string(&name, tl->names[e->name]);
        if (name.oom) break;
        fprintf(f, "{\"name\":%s,\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u",
                name.buf, cat[e->kind], (double)(e->start - t0) * 1e-3, (double)(e->end - e->start) * 1e-3,
                pid, e->stream);
        if (e->kind != TL_KERNEL) fprintf(f, ",\"args\":{\"bytes\":%llu}", (unsigned long long)e->bytes);
        fprintf(f, "}%s\n", i + 1 < tl->n ? "," : "");
    }
    int oom = name.oom;
    jsonw_free(&name);
    if (oom) {
        fclose(f);
        remove(tmp);
        snprintf(err, errlen, "cannot write %s: out of host memory", path);
        return -1;
    }
    fprintf(f, "]}\n");
    return commit_tmp(f, tmp, path, err, errlen);
}

int timeline_write_summary(const Timeline *tl, const char *path, const char *first_line,
                           int steps, char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f = open_tmp(path, tmp, sizeof tmp, err, errlen);
    if (!f) return -1;
    fprintf(f, "%s\n", first_line);
    timeline_summary(tl, f, steps);
    return commit_tmp(f, tmp, path, err, errlen);
}

/* ---- summary ---- */

typedef struct { uint64_t a, b; } Span;

static int span_cmp(const void *x, const void *y)
{
    const Span *p = (const Span *)x, *q = (const Span *)y;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* Sorts s[0..n) and merges it in place into disjoint spans; returns their count. */
static size_t span_union(Span *s, size_t n)
{
    if (!n) return 0;
    qsort(s, n, sizeof *s, span_cmp);
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i].a <= s[m].b) {
            if (s[i].b > s[m].b) s[m].b = s[i].b;
        } else {
            s[++m] = s[i];
        }
    }
    return m + 1;
}

static uint64_t span_total(const Span *s, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) t += s[i].b - s[i].a;
    return t;
}

typedef struct { uint64_t t; int d; } Edge;

static int edge_cmp(const void *x, const void *y)
{
    const Edge *p = (const Edge *)x, *q = (const Edge *)y;
    if (p->t != q->t) return p->t < q->t ? -1 : 1;
    return p->d - q->d;   /* ends before starts at the same instant */
}

typedef struct { int name; uint64_t total; size_t calls; } NameSum;

static int namesum_cmp(const void *x, const void *y)
{
    const NameSum *p = (const NameSum *)x, *q = (const NameSum *)y;
    return p->total < q->total ? 1 : p->total > q->total ? -1 : 0;
}

void timeline_summary(const Timeline *tl, FILE *out, int steps)
{
    if (steps < 1) steps = 1;
    double k = 1.0 / steps;
    if (!tl->n) {
        fprintf(out, "timeline: no events recorded\n");
        return;
    }
    uint64_t t0 = first_start(tl), t1 = 0;
    for (size_t i = 0; i < tl->n; i++)
        if (tl->ev[i].end > t1) t1 = tl->ev[i].end;
    if (tl->begin && tl->end > tl->begin) {   /* the window as recorded, gaps at its ends too */
        t0 = tl->begin;
        t1 = tl->end;
    }
    fprintf(out, "timeline: %zu events over %d step%s, %.3f ms a step (window %.3f ms)\n", tl->n,
            steps, steps == 1 ? "" : "s", (double)(t1 - t0) * 1e-6 * k, (double)(t1 - t0) * 1e-6);
    if (tl->dropped)
        fprintf(out, "timeline: %llu records were lost (out of buffer space); the figures miss them\n",
                (unsigned long long)tl->dropped);

    /* streams, in order of first appearance */
    uint32_t *ids = (uint32_t *)malloc(tl->n * sizeof *ids);
    Span *sp = (Span *)malloc(tl->n * sizeof *sp);
    Span *all = (Span *)malloc(tl->n * sizeof *all);
    NameSum *ns = (NameSum *)calloc(tl->n_names ? tl->n_names : 1, sizeof *ns);
    if (!ids || !sp || !all || !ns) {
        fprintf(out, "timeline: out of memory for the summary\n");
        free(ids); free(sp); free(all); free(ns);
        return;
    }
    size_t n_ids = 0, n_all = 0;
    for (size_t i = 0; i < tl->n; i++) {
        size_t j = 0;
        while (j < n_ids && ids[j] != tl->ev[i].stream) j++;
        if (j == n_ids) ids[n_ids++] = tl->ev[i].stream;
    }
    uint64_t busiest = 0;
    fprintf(out, "  stream      busy ms/step   events/step\n");
    Edge *edges = (Edge *)malloc(2 * tl->n * sizeof *edges);
    size_t n_edges = 0;
    for (size_t j = 0; j < n_ids; j++) {
        size_t m = 0;
        for (size_t i = 0; i < tl->n; i++)
            if (tl->ev[i].stream == ids[j]) sp[m++] = (Span){tl->ev[i].start, tl->ev[i].end};
        size_t events = m;
        m = span_union(sp, m);
        uint64_t busy = span_total(sp, m);
        if (busy > busiest) busiest = busy;
        fprintf(out, "  %-10u %13.3f %13.1f\n", ids[j], (double)busy * 1e-6 * k, (double)events * k);
        for (size_t i = 0; edges && i < m; i++) {
            edges[n_edges++] = (Edge){sp[i].a, +1};
            edges[n_edges++] = (Edge){sp[i].b, -1};
        }
        memcpy(all + n_all, sp, m * sizeof *sp);
        n_all += m;
    }
    uint64_t overlap = 0;
    if (edges) {
        qsort(edges, n_edges, sizeof *edges, edge_cmp);
        int active = 0;
        for (size_t i = 0; i < n_edges; i++) {
            if (active >= 2 && i > 0) overlap += edges[i].t - edges[i - 1].t;
            active += edges[i].d;
        }
        free(edges);
    }
    n_all = span_union(all, n_all);
    fprintf(out, "  any stream busy %.3f ms/step; two or more streams at once %.3f ms/step\n",
            (double)span_total(all, n_all) * 1e-6 * k, (double)overlap * 1e-6 * k);

    for (size_t i = 0; i < tl->n_names; i++) ns[i].name = (int)i;
    for (size_t i = 0; i < tl->n; i++) {
        ns[tl->ev[i].name].total += tl->ev[i].end - tl->ev[i].start;
        ns[tl->ev[i].name].calls++;
    }
    qsort(ns, tl->n_names, sizeof *ns, namesum_cmp);
    fprintf(out, "  %-9s %-9s %-9s %-6s  %s\n", "ms/step", "calls", "mean us", "share", "name");
    for (size_t i = 0; i < tl->n_names && i < 40; i++)
        fprintf(out, "  %9.3f %9.1f %9.2f %5.1f%%  %s\n", (double)ns[i].total * 1e-6 * k,
                (double)ns[i].calls * k, (double)ns[i].total * 1e-3 / (double)ns[i].calls,
                busiest ? 100.0 * (double)ns[i].total / (double)busiest : 0.0,
                tl->names[ns[i].name]);
    fprintf(out, "# per name, tab-separated (scripts/timeline_diff.py)\n"
                 "name\tcalls_per_step\tms_per_step\tmean_us\n");
    for (size_t i = 0; i < tl->n_names; i++)
        fprintf(out, "%s\t%.3f\t%.6f\t%.3f\n", tl->names[ns[i].name], (double)ns[i].calls * k,
                (double)ns[i].total * 1e-6 * k, (double)ns[i].total * 1e-3 / (double)ns[i].calls);
    free(ids);
    free(sp);
    free(all);
    free(ns);
}
