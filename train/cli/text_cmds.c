/* text_cmds.c — `ctrain vocab` (build a WordPiece vocabulary from a corpus),
 * `ctrain shard` (tokenize a corpus once into a binary token shard that
 * masked-LM training reads: --data mlm:SHARD) and `ctrain tokenize` (the
 * ids of each input line, for checking the tokenizer against another one:
 * scripts/tokenizer_parity.py compares it with transformers' BertTokenizer).
 * Their flags: a getopt_long table each, parsed by text_args into TextArgs. */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/corpus.h"
#include "data/text_cls.h"
#include "data/text_shards.h"
#include "data/vocab_build.h"
#include "data/wordpiece.h"
#include "engine/error.h"
#include "train/bench/bench_options.h"

/* A whole number in [lo, hi] for flag, parsed with strtoll and range-checked
 * before any narrowing: the message quotes what was typed. */
static long long int_value(const char *flag, const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    char hint[96];
    snprintf(hint, sizeof hint, "pass %s between %lld and %lld", flag, lo, hi);
    if (end == s || *end)
        ct_fatal_hint(hint, "%s: '%s' is not a whole number", flag, s);
    if (errno == ERANGE || v < lo || v > hi)
        ct_fatal_hint(hint, "%s %s is out of range", flag, s);
    return v;
}

#define EXCLUDE_HELP \
    "  --exclude-held-out leaves out the fortune entries that --data fortunes-cls\n" \
    "  holds out for its evaluation (10% of each fortune file, the same for any\n" \
    "  --classes), so that a model pre-trained on this corpus has not seen them\n"

#define CASE_HELP \
    "  --cased keeps case and accents (a cased vocab; no Unicode normalization, as\n" \
    "  transformers 5's BertTokenizer and every BertTokenizerFast); --cased-nfc the\n" \
    "  same after NFC, as the Python BertTokenizer of transformers 4.x\n"

/* What the three commands' flags say; each command's table takes the ones its usage lists. */
typedef struct TextArgs {
    const char *corpus, *out, *vocab, *in;
    int size, mode, exclude, tokens;
} TextArgs;

enum { T_CORPUS = 256, T_OUT, T_VOCAB, T_IN, T_SIZE, T_CASED, T_CASED_NFC, T_EXCLUDE, T_TOKENS };

#define CASE_FLAGS CLI_SWITCH("cased", T_CASED), CLI_SWITCH("cased-nfc", T_CASED_NFC)

static const struct option vocab_table[] = {
    CLI_VALUE("corpus", T_CORPUS), CLI_VALUE("size", T_SIZE), CLI_VALUE("out", T_OUT), CASE_FLAGS,
    CLI_SWITCH("exclude-held-out", T_EXCLUDE), CLI_HELP, {0}};
static const struct option shard_table[] = {
    CLI_VALUE("corpus", T_CORPUS), CLI_VALUE("vocab", T_VOCAB), CLI_VALUE("out", T_OUT), CASE_FLAGS,
    CLI_SWITCH("exclude-held-out", T_EXCLUDE), CLI_HELP, {0}};
static const struct option tokenize_table[] = {
    CLI_VALUE("vocab", T_VOCAB), CLI_VALUE("in", T_IN), CASE_FLAGS, CLI_SWITCH("tokens", T_TOKENS),
    CLI_HELP, {0}};

/* argv of `ctrain cmd` into t (its defaults set) by table; --help prints
 * usage and exits 0. */
static void text_args(TextArgs *t, const char *cmd, const struct option *table, const char *usage,
                      int argc, char **argv)
{
    CliOpts p;
    cli_begin(&p, cmd, table, argc, argv);
    for (int val; (val = cli_next(&p)) != -1;) {
        switch (val) {
        case 'h': fputs(usage, stdout); exit(0);
        case T_CORPUS: t->corpus = p.value; break;
        case T_OUT: t->out = p.value; break;
        case T_VOCAB: t->vocab = p.value; break;
        case T_IN: t->in = p.value; break;
        case T_SIZE: t->size = (int)int_value("--size", p.value, 16, 1000000); break;
        case T_CASED: t->mode = WP_CASED; break;
        case T_CASED_NFC: t->mode = WP_CASED_NFC; break;
        case T_EXCLUDE: t->exclude = 1; break;
        case T_TOKENS: t->tokens = 1; break;
        default: cli_refuse(&p);
        }
    }
}

int cmd_vocab(int argc, char **argv)
{
    TextArgs t = {.size = 30522, .mode = WP_UNCASED};
    text_args(&t, "vocab", vocab_table,
              "usage: ctrain vocab --corpus PATH --size N --out vocab.txt\n"
              "                    [--cased | --cased-nfc] [--exclude-held-out]\n"
              "  builds a WordPiece vocabulary (BERT's specials, every character, then\n"
              "  merged pieces) from a text file or a folder of text files;\n"
              CASE_HELP EXCLUDE_HELP, argc, argv);
    if (!t.corpus || !t.out) cli_fail("vocab", "vocab needs --corpus and --out");
    char err[512], hint[128];
    TextClsExclude x = {TEXTCLS_HELD_OUT, NULL, 0};
    VocabOpts vo = {t.size, t.mode, VOCAB_SCORE_FREQ, t.exclude ? textcls_exclude_held_out : NULL,
                    &x};
    VocabStats vs;
    int st = vocab_build_opts(t.corpus, &vo, t.out, &vs, err, sizeof err);
    if (st != 0) ct_fatal_hint(vocab_hint(hint, sizeof hint, st, &vs), "%s", err);
    if (t.exclude)
        printf("wrote %s (%llu held-out fortunes-cls entries left out)\n", t.out,
               (unsigned long long)vs.dropped);
    else
        printf("wrote %s\n", t.out);
    return 0;
}

int cmd_shard(int argc, char **argv)
{
    TextArgs t = {.mode = WP_UNCASED};
    text_args(&t, "shard", shard_table,
              "usage: ctrain shard --corpus PATH --vocab vocab.txt --out FILE\n"
              "                    [--cased | --cased-nfc] [--exclude-held-out]\n"
              "  tokenizes the corpus once into a token shard for --data mlm:FILE;\n"
              CASE_HELP EXCLUDE_HELP, argc, argv);
    if (!t.corpus || !t.out || !t.vocab)
        cli_fail("shard", "shard needs --corpus, --vocab and --out");
    char err[512];
    Wordpiece wp;
    int rc = wordpiece_load(&wp, t.vocab, t.mode, err, sizeof err);
    if (rc != 0) ct_fatal_hint(wordpiece_hint(rc), "%s", err);
    ShardStats st;
    TextClsExclude x = {TEXTCLS_HELD_OUT, NULL, 0};
    rc = shard_write_filtered(t.corpus, &wp, t.out, SHARD_DOC_AUTO,
                                  t.exclude ? textcls_exclude_held_out : NULL, &x, &st, err,
                                  sizeof err);
    if (rc != 0) ct_fatal_hint(shard_hint(rc), "%s", err);
    printf("wrote %s: %llu documents, %llu tokens (%llu [UNK]) from %llu files", t.out,
           (unsigned long long)st.docs, (unsigned long long)st.tokens, (unsigned long long)st.unk,
           (unsigned long long)st.files);
    if (t.exclude)
        printf("; %llu held-out fortunes-cls entries left out", (unsigned long long)st.dropped);
    printf("\n");
    wordpiece_free(&wp);
    return 0;
}

/* One line per input line: its ids (or tokens) separated by spaces, no
 * [CLS]/[SEP]. A line that is not UTF-8 stops the run with its number. */
int cmd_tokenize(int argc, char **argv)
{
    TextArgs t = {.mode = WP_UNCASED};
    text_args(&t, "tokenize", tokenize_table,
              "usage: ctrain tokenize --vocab vocab.txt [--in FILE] [--cased | --cased-nfc]\n"
              "                       [--tokens]\n"
              "  prints, for each line of FILE (default: standard input), its WordPiece\n"
              "  ids (--tokens: the tokens) separated by spaces, without [CLS]/[SEP];\n"
              CASE_HELP, argc, argv);
    if (!t.vocab) cli_fail("tokenize", "tokenize needs --vocab");
    FILE *f = t.in ? fopen(t.in, "rb") : stdin;
    if (!f) ct_fatal_hint("check the --in path", "cannot open %s: %s", t.in, strerror(errno));
    char err[512];
    Wordpiece wp;
    int rc = wordpiece_load(&wp, t.vocab, t.mode, err, sizeof err);
    if (rc != 0) ct_fatal_hint(wordpiece_hint(rc), "%s", err);
    WpIds ids = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') len--;
        ids.n = 0;
        if (wordpiece_encode(&wp, &ids, line, (size_t)len, err, sizeof err) != 0)
            ct_fatal_hint("convert the input to UTF-8 (iconv -f latin1 -t utf-8)", "%s line %ld: %s",
                          t.in ? t.in : "standard input", lineno, err);
        for (size_t k = 0; k < ids.n; k++) {
            if (k) putchar(' ');
            if (t.tokens) fputs(wordpiece_token(&wp, ids.ids[k]), stdout);
            else printf("%d", (int)ids.ids[k]);
        }
        putchar('\n');
    }
    free(line);
    wpids_free(&ids);
    wordpiece_free(&wp);
    if (t.in) fclose(f);
    return 0;
}
