/* bench_child.c — running one benchmark measurement in a child process, and
 * the line protocol between the child and the parent.
 *
 * The child's stdout and stderr go to an unlinked temporary file (so a fatal
 * message can be read back and classified, and nothing the child prints
 * scribbles over the parent's table); what it reports goes through a pipe as
 * JSON lines (jsonlog.h), read by the parent while the child runs. A child
 * that exits non-zero, dies on a signal or outlives its time limit becomes an
 * error text; "out of memory" is recognised from ctrain's own message and the
 * libraries' allocation statuses. At CTRAIN_LOG=debug or trace the child's
 * whole output is copied to the parent's stderr after it ends (the log asked
 * for; at the default level only an error's tail is shown).
 */
#include "bench_child.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/settings.h"
#include "train/io/jsonlog.h"
#include "train/loop/progress.h"

/* ---- Running a child. */

static int temp_file(void)
{
    const char *dir = setting_str(SET_TMPDIR);   /* default /tmp */
    char path[512];
    snprintf(path, sizeof path, "%s/ctrain-bench-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0)
        ct_fatal_hint("set TMPDIR to a writable folder", "cannot create a temporary file in %s: %s",
                      dir, strerror(errno));
    unlink(path);
    return fd;
}

/* The whole file to stderr, between two lines that say whose it is. */
static void copy_out(int fd)
{
    if (lseek(fd, 0, SEEK_SET) < 0) return;
    if (isatty(STDOUT_FILENO)) {   /* off the progress line the table will redraw */
        fputc('\n', stdout);
        fflush(stdout);
    }
    fprintf(stderr, "bench: the measurement's own output (CTRAIN_LOG=%s):\n",
            log_get_level() >= LOG_TRACE ? "trace" : "debug");
    char b[1 << 14];
    ssize_t k;
    while ((k = read(fd, b, sizeof b)) > 0) fwrite(b, 1, (size_t)k, stderr);
    fprintf(stderr, "bench: (end of the measurement's output)\n");
    fflush(stderr);
}

/* The last len-1 bytes of the file, NUL-terminated. */
static void read_tail(int fd, char *out, size_t len)
{
    out[0] = 0;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end <= 0) return;
    off_t start = end > (off_t)(len - 1) ? end - (off_t)(len - 1) : 0;
    if (lseek(fd, start, SEEK_SET) < 0) return;
    size_t got = 0;
    while (got < (size_t)(end - start)) {
        ssize_t k = read(fd, out + got, (size_t)(end - start) - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    out[got] = 0;
    for (size_t i = 0; i < got; i++)
        if (!out[i]) out[i] = ' ';
}

int bench_child_run(BenchChildFn fn, const void *arg, double limit_s, BenchLineFn on_line,
                    BenchTickFn on_tick, void *user, BenchExit *ex)
{
    memset(ex, 0, sizeof *ex);
    int pfd[2];
    if (pipe(pfd) != 0) ct_fatal("cannot create a pipe: %s", strerror(errno));
    int ofd = temp_file();
    fflush(NULL);   /* or the child flushes the parent's buffered output again */
    double t0 = progress_now();
    pid_t pid = fork();
    if (pid < 0) ct_fatal("cannot fork a benchmark process: %s", strerror(errno));
    if (pid == 0) {
        close(pfd[0]);
        dup2(ofd, STDOUT_FILENO);
        dup2(ofd, STDERR_FILENO);
        close(ofd);
        signal(SIGINT, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a killed parent takes its child along */
        if (getppid() == 1) _exit(4);
        FILE *out = fdopen(pfd[1], "w");
        if (!out) _exit(3);
        fn(out, arg);
        fflush(NULL);
        exit(0);   /* atexit handlers: the CUDA runtime tears down */
    }
    close(pfd[1]);

    char buf[1 << 16];
    size_t n = 0;
    double last_tick = t0;
    for (;;) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        int r = poll(&p, 1, 250);
        double now = progress_now();
        if (r > 0) {
            ssize_t k = read(pfd[0], buf + n, sizeof buf - 1 - n);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;   /* EOF: the child is gone */
            n += (size_t)k;
            buf[n] = 0;
            char *s = buf, *nl;
            while ((nl = memchr(s, '\n', n - (size_t)(s - buf)))) {
                *nl = 0;
                if (on_line && *s) on_line(s, user);
                s = nl + 1;
            }
            n -= (size_t)(s - buf);
            memmove(buf, s, n);
            if (n == sizeof buf - 1) n = 0;   /* a line longer than the buffer: dropped */
        } else if (r < 0 && errno != EINTR) {
            break;
        }
        if (on_tick && now - last_tick >= 0.25) {
            on_tick(user);
            last_tick = now;
        }
        if (limit_s > 0 && now - t0 > limit_s) {
            kill(pid, SIGKILL);
            ex->timed_out = 1;
            break;
        }
    }
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    ex->elapsed_s = progress_now() - t0;
    if (WIFEXITED(st)) { ex->exited = 1; ex->status = WEXITSTATUS(st); }
    if (WIFSIGNALED(st)) { ex->signaled = 1; ex->sig = WTERMSIG(st); }
    read_tail(ofd, ex->output, sizeof ex->output);
    if (log_get_level() >= LOG_DEBUG) copy_out(ofd);
    close(ofd);
    return ex->exited && ex->status == 0 && !ex->timed_out ? 0 : -1;
}

int bench_text_is_oom(const char *t)
{
    return strstr(t, "out of memory") || strstr(t, "ALLOC_FAILED") ||
           strstr(t, "cudaErrorMemoryAllocation") || strstr(t, "out of host memory");
}

int bench_error_is_oom(const char *error)
{
    return error && !strncmp(error, BENCH_OOM_REASON, strlen(BENCH_OOM_REASON));
}

void bench_exit_reason(const BenchExit *ex, char *buf, size_t len)
{
    if (ex->timed_out) { snprintf(buf, len, "timed out after %.0f s", ex->elapsed_s); return; }
    if (ex->signaled) {
        if (ex->sig == SIGKILL)
            snprintf(buf, len, "killed (signal 9): the system may have run out of host memory");
        else
            snprintf(buf, len, "crashed: signal %d (%s)", ex->sig, strsignal(ex->sig));
        return;
    }
    if (bench_text_is_oom(ex->output)) { snprintf(buf, len, "%s", BENCH_OOM_REASON); return; }
    /* ctrain's own message: the first "ctrain: " line */
    const char *p = ex->output, *msg = NULL;
    while (p && *p) {
        if (!strncmp(p, "ctrain: ", 8)) { msg = p + 8; break; }
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (msg) {
        size_t k = strcspn(msg, "\n");
        snprintf(buf, len, "%.*s", (int)(k < len ? k : len - 1), msg);
        return;
    }
    snprintf(buf, len, "exited with status %d", ex->status);
}

/* ---- A reader for one flat JSON object (no nesting) per line. */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    return p;
}

/* A string at p ('"'): unescape into out (when non-NULL); returns the end. */
static const char *read_string(const char *p, char *out, size_t len)
{
    size_t n = 0;
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') {
        char ch = *p++;
        if (ch == '\\') {
            char e = *p++;
            if (!e) return NULL;
            if (e == 'n') ch = '\n';
            else if (e == 't') ch = '\t';
            else if (e == 'u') {
                unsigned v = 0;
                for (int i = 0; i < 4; i++, p++) {
                    if (!*p) return NULL;
                    char h = *p;
                    v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
                }
                ch = v < 0x80 ? (char)v : '?';
            } else ch = e;
        }
        if (out && n + 1 < len) out[n++] = ch;
    }
    if (out && len) out[n] = 0;
    return *p == '"' ? p + 1 : NULL;
}

/* Where key's value starts; NULL when the key is absent. */
static const char *find_value(const char *line, const char *key)
{
    const char *p = skip_ws(line);
    if (*p++ != '{') return NULL;
    char k[64];
    for (;;) {
        p = skip_ws(p);
        if (*p != '"') return NULL;
        p = read_string(p, k, sizeof k);
        if (!p) return NULL;
        p = skip_ws(p);
        if (*p++ != ':') return NULL;
        p = skip_ws(p);
        if (!strcmp(k, key)) return p;
        if (*p == '"') {
            p = read_string(p, NULL, 0);
            if (!p) return NULL;
        } else {
            while (*p && *p != ',' && *p != '}') p++;
        }
        p = skip_ws(p);
        if (*p != ',') return NULL;
        p++;
    }
}

int bench_line_num(const char *line, const char *key, double *v)
{
    const char *p = find_value(line, key);
    if (!p || *p == '"' || *p == 'n') return 0;   /* absent, a string, or null */
    char *end;
    double x = strtod(p, &end);
    if (end == p || !isfinite(x)) return 0;
    *v = x;
    return 1;
}

int bench_line_str(const char *line, const char *key, char *buf, size_t len)
{
    const char *p = find_value(line, key);
    if (!p || *p != '"') return 0;
    return read_string(p, buf, len) != NULL;
}

int bench_line_is(const char *line, const char *event)
{
    char e[32];
    return bench_line_str(line, "event", e, sizeof e) && !strcmp(e, event);
}

/* ---- Rows over the protocol. */

/* The measured fields a child sends; the rest the parent knows or derives. */
#define NUM(f) {#f, offsetof(BenchResult, f)}
static const struct { const char *key; size_t off; } ROW_NUMS[] = {
    NUM(samples_per_s), NUM(samples_per_s_min), NUM(samples_per_s_max), NUM(ms_per_step),
    NUM(step_ms_p50), NUM(step_ms_p99), NUM(peak_mem_bytes), NUM(state_mem_bytes), NUM(power_avg_w),
    NUM(power_peak_w), NUM(energy_j), NUM(temp_avg_c), NUM(temp_max_c), NUM(sm_clock_avg_mhz),
    NUM(sm_clock_min_mhz), NUM(final_loss),
    NUM(samples_per_s_mean), NUM(timed_s), NUM(data_images), NUM(data_wait_s), NUM(data_wait_fraction),
    NUM(decode_s), NUM(decode_images_per_s), NUM(decode_capacity_images_per_s), NUM(cpu_fallback),
};
#undef NUM

void bench_row_write(FILE *out, const BenchRow *row)
{
    JsonLine j;
    json_begin(&j, "result");
    for (size_t i = 0; i < sizeof ROW_NUMS / sizeof ROW_NUMS[0]; i++)
        json_num(&j, ROW_NUMS[i].key, *(const double *)((const char *)&row->r + ROW_NUMS[i].off));
    json_num(&j, "engine_peak_mem_bytes", row->engine_peak_mem_bytes);
    json_int(&j, "steps", row->r.steps);
    json_int(&j, "warmup", row->r.warmup);
    if (row->r.decode_parallel >= 0) json_int(&j, "decode_parallel", row->r.decode_parallel);
    if (row->pcie_gen_busy >= 0) json_int(&j, "pcie_gen_busy", row->pcie_gen_busy);
    if (row->pcie_width_busy >= 0) json_int(&j, "pcie_width_busy", row->pcie_width_busy);
    if (row->decoder[0]) json_str(&j, "decoder", row->decoder);
    if (row->throttle[0]) json_str(&j, "throttle", row->throttle);
    if (row->live_peak_at[0]) json_str(&j, "live_peak_at", row->live_peak_at);
    json_str(&j, "mode", row->mode);   /* "graph" becomes "eager" when the capture was refused */
    json_end(&j, out);
}

void bench_row_read(BenchRow *row, const char *line)
{
    double v;
    for (size_t i = 0; i < sizeof ROW_NUMS / sizeof ROW_NUMS[0]; i++)
        if (bench_line_num(line, ROW_NUMS[i].key, &v))
            *(double *)((char *)&row->r + ROW_NUMS[i].off) = v;
    if (bench_line_num(line, "engine_peak_mem_bytes", &v))
        row->engine_peak_mem_bytes = row->r.live_peak_bytes = v;
    if (bench_line_num(line, "steps", &v)) row->r.steps = (int)v;
    if (bench_line_num(line, "warmup", &v)) row->r.warmup = (int)v;
    if (bench_line_num(line, "decode_parallel", &v)) row->r.decode_parallel = (int)v;
    if (bench_line_num(line, "pcie_gen_busy", &v)) row->pcie_gen_busy = (int)v;
    if (bench_line_num(line, "pcie_width_busy", &v)) row->pcie_width_busy = (int)v;
    bench_line_str(line, "decoder", row->decoder, sizeof row->decoder);
    bench_line_str(line, "throttle", row->throttle, sizeof row->throttle);
    bench_line_str(line, "live_peak_at", row->live_peak_at, sizeof row->live_peak_at);
    bench_line_str(line, "mode", row->mode, sizeof row->mode);
    bench_row_fix(row);
}
