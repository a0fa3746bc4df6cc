/* cli_opts.c — the strict getopt_long loop of every command (cli_opts.h). */
#include "cli_opts.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"

void cli_fail(const char *cmd, const char *fmt, ...)
{
    char msg[1024], hint[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(hint, sizeof hint, "run 'ctrain %s --help' for the options", cmd);
    ct_fatal_hint(hint, "%s", msg);
}

void cli_refuse(const CliOpts *p)
{
    if (p->flag[0]) cli_fail(p->cmd, "unknown option '%s'", p->flag);
    cli_fail(p->cmd, "unexpected argument '%s'", p->value);
}

void cli_begin(CliOpts *p, const char *cmd, const struct option *table, int argc, char **argv)
{
    static char **words;   /* kept for the next parse: getopt_long reads argv from [1] */
    static int cap;
    if (argc + 2 > cap) {
        cap = argc + 2;
        words = realloc(words, (size_t)cap * sizeof *words);
        if (!words) ct_fatal("out of host memory");
    }
    words[0] = (char *)"ctrain";
    for (int i = 0; i < argc; i++) words[i + 1] = argv[i];
    words[argc + 1] = NULL;
    *p = (CliOpts){.cmd = cmd, .table = table, .argc = argc + 1, .argv = words};
    optind = 0;   /* glibc: start over, forgetting any word left half read */
    opterr = 0;   /* the messages are ctrain's */
}

/* The entry of table with this val; NULL when none has it. */
static const struct option *option_of(const struct option *t, int val)
{
    while (t->name && t->val != val) t++;
    return t->name ? t : NULL;
}

int cli_next(CliOpts *p)
{
    const int at = optind ? optind : 1;   /* the word getopt_long reads next: none is clustered */
    p->flag[0] = 0;
    p->value = NULL;
    if (at >= p->argc) return -1;
    if (p->rest) {
        p->value = p->argv[optind++];
        return CLI_WORD;
    }
    int idx = -1;
    const int c = getopt_long(p->argc, p->argv, "+:h", p->table, &idx);   /* '+': stop at a word */
    const char *w = p->argv[at];
    if (c == -1) {
        if (optind >= p->argc) return -1;
        if (!strcmp(w, "--")) p->rest = 1;   /* getopt_long stepped over it */
        p->value = p->argv[optind++];
        return CLI_WORD;
    }
    const size_t n = strncmp(w, "--", 2) ? strlen(w) : strcspn(w, "=");
    snprintf(p->flag, sizeof p->flag, "%.*s", (int)n, w);
    if (strncmp(w, "--", 2)) {   /* -h alone, no other short option */
        if (c != 'h' || strcmp(w, "-h")) cli_refuse(p);
        return c;
    }
    const struct option *o = idx >= 0 ? &p->table[idx] : c == '?' && !optopt ? NULL
                                                        : option_of(p->table, optopt);
    if (!o) return '?';
    if (strlen(o->name) != n - 2)   /* getopt_long takes an unambiguous prefix; ctrain does not */
        cli_fail(p->cmd, "unknown option '%s' (did you mean --%s?)", p->flag, o->name);
    if (c == ':') cli_fail(p->cmd, "%s needs a value", p->flag);
    if (c == '?') cli_fail(p->cmd, "%s takes no value: write %s, not '%s'", p->flag, p->flag, w);
    p->value = optarg;
    return c;
}

void cli_command_line(char *out, size_t len, const char *cmd, int argc, char **argv)
{
    size_t n = (size_t)snprintf(out, len, "ctrain %s", cmd);
    for (int i = 0; i < argc && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, strchr(argv[i], ' ') ? " '%s'" : " %s", argv[i]);
}
