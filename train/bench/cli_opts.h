/* cli_opts.h — the strict getopt_long loop every ctrain command parses its
 * flags with (train, eval, bench, report, export, vocab, shard, tokenize).
 * It lives here, in the lowest layer that has commands (train/bench: bench
 * and report), so train/cli's parsers use the same one.
 *
 * glibc's getopt_long over the command's table (struct option[], ended by a
 * zeroed entry; --help has val 'h', the other vals are above 255), strict
 * where getopt_long is lenient: an abbreviation (--ep for --epochs) is
 * refused naming the flag it would have picked, a value given to a flag that
 * takes none (--graph=1) is refused, and -h is the only short option.
 * `--flag value` and `--flag=value` are the same (split at the first '=':
 * --label=a.json=H200 gives "a.json=H200"). Words that are not options come
 * back in their place (after "--", every word). Each refusal names the word
 * as typed and hints at `ctrain CMD --help`. getopt_long keeps its state in
 * globals: one parse at a time. */
#ifndef CTRAIN_TRAIN_BENCH_CLI_OPTS_H
#define CTRAIN_TRAIN_BENCH_CLI_OPTS_H

#include <stddef.h>

struct option;
#define CLI_WORD 1   /* cli_next: a word that is not an option, in value */

typedef struct CliOpts {
    const char *cmd;               /* "train": the hint names `ctrain train --help` */
    const struct option *table;
    int argc;
    char **argv;                   /* getopt_long's: a program name, then the words */
    int rest;                      /* after "--": every word is a CLI_WORD */
    char flag[128];                /* the option as typed, without "=value": "--lr" */
    const char *value;             /* its value, or the word */
} CliOpts;

/* Table entries: a flag that takes a value, one that takes none, --help. */
#define CLI_VALUE(name, val) {name, required_argument, NULL, val}
#define CLI_SWITCH(name, val) {name, no_argument, NULL, val}
#define CLI_HELP {"help", no_argument, NULL, 'h'}

/* Start parsing argv[0..argc) (the words after the command) with table. */
void cli_begin(CliOpts *p, const char *cmd, const struct option *table, int argc, char **argv);
/* The next option's val (its value in p->value), CLI_WORD, '?' for an option
 * the table lacks (named in p->flag), or -1 at the end. */
int cli_next(CliOpts *p);
/* Refuse the word cli_next returned: "unknown option '--x'" or
 * "unexpected argument 'x'". */
void cli_refuse(const CliOpts *p) __attribute__((noreturn));
/* Fatal: the message, with the hint "run 'ctrain CMD --help' for the options". */
void cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* "ctrain CMD ARGS...", each argument as typed (quoted when it holds a space),
 * for logs and bench records. */
void cli_command_line(char *out, size_t len, const char *cmd, int argc, char **argv);

#endif
