/* replay.c — a main() for the harnesses without libFuzzer: feeds every file
 * named on the command line, and every file in every directory named (not
 * recursively, dot files skipped, in name order), through
 * LLVMFuzzerTestOneInput once, then prints "fuzz_NAME: N inputs ok" (NAME
 * from argv[0]). Linked with each fuzz_NAME.c by `make fuzz-replay`, with
 * any C compiler.
 *
 * An input that crashes the harness (a sanitizer report, an abort from
 * fuzz_check, a signal), makes it exit or runs past REPLAY_LIMIT_S seconds
 * is named on stderr ("fuzz_NAME: FILE: ...") and the process fails.
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLAY_LIMIT_S 10

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* In the sanitizer runtimes (sanitizer/common_interface_defs.h); absent in a plain build. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static const char *g_name = "fuzz";
static const char *volatile g_input;   /* the file being replayed, or NULL */

static void say(const char *what)
{
    const char *parts[] = {g_name, ": ", g_input ? g_input : "?", ": ", what, "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (write(2, parts[i], strlen(parts[i])) < 0) break;
}

static void on_death(void) { if (g_input) say("the sanitizer stopped the harness on this input"); }
static void on_exit_call(void)
{
    if (!g_input) return;
    say("the harness called exit() on this input (a parser must return an error instead)");
    _exit(2);
}
static void on_signal(int sig)
{
    if (sig == SIGALRM) say("took longer than the replay's limit (see REPLAY_LIMIT_S)");
    else say(sig == SIGABRT ? "aborted on this input" : "crashed on this input");
    signal(sig, SIG_DFL);
    raise(sig == SIGALRM ? SIGKILL : sig);
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return -1; }
    size_t cap = 4096, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *q = realloc(buf, cap *= 2);
            if (!q) { free(buf); buf = NULL; }
            buf = q;
        }
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "%s: out of memory reading %s\n", g_name, path); return -1; }
    /* the exact size, so ASan sees a read past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return -1; }
    memcpy(exact, buf, n);
    free(buf);
    g_input = path;
    alarm(REPLAY_LIMIT_S);
    LLVMFuzzerTestOneInput(exact, n);
    alarm(0);
    g_input = NULL;
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay path (a file, or a directory's files); returns the count, or -1. */
static long run_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb)) return 0;   /* a harness without crash files has no crashes/ dir */
    if (!S_ISDIR(sb.st_mode)) return run_file(path) ? -1 : 1;
    DIR *d = opendir(path);
    if (!d) { perror(path); return -1; }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **q = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *q);
            if (!q) abort();
            names = q;
        }
        size_t l = strlen(path) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(l))) abort();
        snprintf(names[n++], l, "%s/%s", path, e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    long count = 0;
    for (size_t i = 0; i < n; i++) {
        if (stat(names[i], &sb) || !S_ISREG(sb.st_mode)) { free(names[i]); continue; }
        if (count >= 0) count = run_file(names[i]) ? -1 : count + 1;
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    const char *slash = strrchr(argv[0], '/');
    g_name = slash ? slash + 1 : argv[0];
    if (__sanitizer_set_death_callback) {   /* the sanitizer reports faults itself */
        __sanitizer_set_death_callback(on_death);
    } else {
        signal(SIGSEGV, on_signal);
        signal(SIGBUS, on_signal);
        signal(SIGFPE, on_signal);
    }
    atexit(on_exit_call);
    signal(SIGABRT, on_signal);
    signal(SIGALRM, on_signal);
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", g_name);
        return 2;
    }
    long total = 0;
    for (int i = 1; i < argc; i++) {
        long k = run_path(argv[i]);
        if (k < 0) return 1;
        total += k;
    }
    printf("%s: %ld inputs ok\n", g_name, total);
    return 0;
}
