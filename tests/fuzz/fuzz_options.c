/* fuzz_options.c — libFuzzer harness: the input as the words of a
 * `ctrain train` command line (train/cli/options.h), split at NUL bytes
 * and newlines, parsed into TrainOptions over the defaults, then the
 * decisions derived from them (train_options_head, train_options_feed_spec).
 *
 * train_options_parse ends the process on a bad flag (ct_fatal_hint, as a
 * CLI should). The harness is linked with -Wl,--wrap=ct_fatal_hint (the
 * Makefile's fuzz rules): __wrap_ct_fatal_hint below formats the message
 * and hint as the real one would (so ASan and UBSan see the formatting)
 * and jumps back here, without printing, so one process tries millions of
 * command lines and production code has no test hook. --help and -h print
 * the usage and exit(0): those words are dropped. A refusal must name
 * something; an accepted command line must keep every value in its range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include "fuzz_util.h"
#include "train/cli/options.h"

#define MAX_WORDS 64

static jmp_buf g_refused;
static int g_parsing;
static char g_msg[2048];

void __real_ct_fatal_hint(const char *hint, const char *fmt, ...);
void __wrap_ct_fatal_hint(const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    if (!g_parsing) __real_ct_fatal_hint(hint, "%s", g_msg);
    fuzz_check(g_msg[0] && (!hint || hint[0]), "an empty message or hint");
    longjmp(g_refused, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *words[MAX_WORDS];
    int n = 0;
    size_t pos = 0;
    char *w;
    while (n < MAX_WORDS && (w = fuzz_next_piece(data, size, &pos))) {
        if (!strcmp(w, "--help") || !strcmp(w, "-h")) { free(w); continue; }
        words[n++] = w;
    }
    static TrainOptions o;   /* static: setjmp leaves automatic variables indeterminate */
    train_options_default(&o);
    g_parsing = 1;
    if (!setjmp(g_refused)) {
        train_options_parse(&o, n, words, "train");
        g_parsing = 0;
        fuzz_check(o.batch >= 1 && o.accum >= 1 && o.epochs >= 1 && o.lr >= 0 && o.lr <= 100 &&
                       o.n_hidden >= 1 && o.n_hidden <= 7 && o.workers >= 1 && o.seq >= 2,
                   "an accepted command line out of range");
        for (int i = 0; i < o.n_hidden; i++) fuzz_check(o.hidden[i] >= 1, "hidden %d", i);
        fuzz_check(memchr(o.data, 0, sizeof o.data) && memchr(o.save_path, 0, sizeof o.save_path),
                   "an unterminated path");
        (void)train_options_head(&o);
        FeedSpec fs = train_options_feed_spec(&o);
        (void)fs;
    }
    g_parsing = 0;
    for (int i = 0; i < n; i++) free(words[i]);
    return 0;
}
