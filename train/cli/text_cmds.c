/* text_cmds.c — `ctrain vocab` (build a WordPiece vocabulary from a corpus),
 * `ctrain shard` (tokenize a corpus once into a binary token shard that
 * masked-LM training reads: --data mlm:SHARD) and `ctrain tokenize` (the
 * ids of each input line, for checking the tokenizer against another one:
 * scripts/tokenizer_parity.py compares it with transformers' BertTokenizer). */
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/corpus.h"
#include "data/text_cls.h"
#include "data/text_shards.h"
#include "data/vocab_build.h"
#include "data/wordpiece.h"
#include "engine/error.h"

static const char *arg_value(int argc, char **argv, int *i, const char *cmd)
{
    if (*i + 1 >= argc) {
        char hint[96];
        snprintf(hint, sizeof hint, "run 'ctrain %s --help'", cmd);
        ct_fatal_hint(hint, "%s needs a value", argv[*i]);
    }
    return argv[++*i];
}

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
    "  holds out for its evaluation (10%% of each fortune file, the same for any\n" \
    "  --classes), so that a model pre-trained on this corpus has not seen them\n"

#define CASE_HELP \
    "  --cased keeps case and accents (a cased vocab; no Unicode normalization, as\n" \
    "  transformers 5's BertTokenizer and every BertTokenizerFast); --cased-nfc the\n" \
    "  same after NFC, as the Python BertTokenizer of transformers 4.x\n"

/* --cased / --cased-nfc: the vocabulary's normalization (data/wordpiece.h). */
static int case_option(const char *a, int *mode)
{
    if (!strcmp(a, "--cased")) *mode = WP_CASED;
    else if (!strcmp(a, "--cased-nfc")) *mode = WP_CASED_NFC;
    else return 0;
    return 1;
}

int cmd_vocab(int argc, char **argv)
{
    const char *corpus = NULL, *out = NULL;
    int size = 30522, mode = WP_UNCASED, exclude = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--corpus")) corpus = arg_value(argc, argv, &i, "vocab");
        else if (!strcmp(argv[i], "--out")) out = arg_value(argc, argv, &i, "vocab");
        else if (!strcmp(argv[i], "--size"))
            size = (int)int_value("--size", arg_value(argc, argv, &i, "vocab"), 16, 1000000);
        else if (case_option(argv[i], &mode)) continue;
        else if (!strcmp(argv[i], "--exclude-held-out")) exclude = 1;
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: ctrain vocab --corpus PATH --size N --out vocab.txt\n"
                   "                    [--cased | --cased-nfc] [--exclude-held-out]\n"
                   "  builds a WordPiece vocabulary (BERT's specials, every character, then\n"
                   "  merged pieces) from a text file or a folder of text files;\n"
                   CASE_HELP EXCLUDE_HELP);
            return 0;
        } else ct_fatal_hint("run 'ctrain vocab --help'", "unknown option '%s'", argv[i]);
    }
    if (!corpus || !out) ct_fatal_hint("run 'ctrain vocab --help'", "vocab needs --corpus and --out");
    char err[512], hint[128];
    TextClsExclude x = {TEXTCLS_HELD_OUT, NULL, 0};
    VocabOpts vo = {size, mode, VOCAB_SCORE_FREQ, exclude ? textcls_exclude_held_out : NULL, &x};
    VocabStats vs;
    int st = vocab_build_opts(corpus, &vo, out, &vs, err, sizeof err);
    if (st != 0) ct_fatal_hint(vocab_hint(hint, sizeof hint, st, &vs), "%s", err);
    if (exclude)
        printf("wrote %s (%llu held-out fortunes-cls entries left out)\n", out,
               (unsigned long long)vs.dropped);
    else
        printf("wrote %s\n", out);
    return 0;
}

int cmd_shard(int argc, char **argv)
{
    const char *corpus = NULL, *out = NULL, *vocab = NULL;
    int mode = WP_UNCASED, exclude = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--corpus")) corpus = arg_value(argc, argv, &i, "shard");
        else if (!strcmp(argv[i], "--out")) out = arg_value(argc, argv, &i, "shard");
        else if (!strcmp(argv[i], "--vocab")) vocab = arg_value(argc, argv, &i, "shard");
        else if (case_option(argv[i], &mode)) continue;
        else if (!strcmp(argv[i], "--exclude-held-out")) exclude = 1;
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: ctrain shard --corpus PATH --vocab vocab.txt --out FILE\n"
                   "                    [--cased | --cased-nfc] [--exclude-held-out]\n"
                   "  tokenizes the corpus once into a token shard for --data mlm:FILE;\n"
                   CASE_HELP EXCLUDE_HELP);
            return 0;
        } else ct_fatal_hint("run 'ctrain shard --help'", "unknown option '%s'", argv[i]);
    }
    if (!corpus || !out || !vocab)
        ct_fatal_hint("run 'ctrain shard --help'", "shard needs --corpus, --vocab and --out");
    char err[512];
    Wordpiece wp;
    int rc = wordpiece_load(&wp, vocab, mode, err, sizeof err);
    if (rc != 0) ct_fatal_hint(wordpiece_hint(rc), "%s", err);
    ShardStats st;
    TextClsExclude x = {TEXTCLS_HELD_OUT, NULL, 0};
    rc = shard_write_filtered(corpus, &wp, out, SHARD_DOC_AUTO,
                                  exclude ? textcls_exclude_held_out : NULL, &x, &st, err,
                                  sizeof err);
    if (rc != 0) ct_fatal_hint(shard_hint(rc), "%s", err);
    printf("wrote %s: %llu documents, %llu tokens (%llu [UNK]) from %llu files", out,
           (unsigned long long)st.docs, (unsigned long long)st.tokens, (unsigned long long)st.unk,
           (unsigned long long)st.files);
    if (exclude)
        printf("; %llu held-out fortunes-cls entries left out", (unsigned long long)st.dropped);
    printf("\n");
    wordpiece_free(&wp);
    return 0;
}

/* One line per input line: its ids (or tokens) separated by spaces, no
 * [CLS]/[SEP]. A line that is not UTF-8 stops the run with its number. */
int cmd_tokenize(int argc, char **argv)
{
    const char *vocab = NULL, *in = NULL;
    int mode = WP_UNCASED, tokens = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab")) vocab = arg_value(argc, argv, &i, "tokenize");
        else if (!strcmp(argv[i], "--in")) in = arg_value(argc, argv, &i, "tokenize");
        else if (case_option(argv[i], &mode)) continue;
        else if (!strcmp(argv[i], "--tokens")) tokens = 1;
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: ctrain tokenize --vocab vocab.txt [--in FILE] [--cased | --cased-nfc]\n"
                   "                       [--tokens]\n"
                   "  prints, for each line of FILE (default: standard input), its WordPiece\n"
                   "  ids (--tokens: the tokens) separated by spaces, without [CLS]/[SEP];\n"
                   CASE_HELP);
            return 0;
        } else ct_fatal_hint("run 'ctrain tokenize --help'", "unknown option '%s'", argv[i]);
    }
    if (!vocab) ct_fatal_hint("run 'ctrain tokenize --help'", "tokenize needs --vocab");
    FILE *f = in ? fopen(in, "rb") : stdin;
    if (!f) ct_fatal_hint("check the --in path", "cannot open %s: %s", in, strerror(errno));
    char err[512];
    Wordpiece wp;
    int rc = wordpiece_load(&wp, vocab, mode, err, sizeof err);
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
                          in ? in : "standard input", lineno, err);
        for (size_t k = 0; k < ids.n; k++) {
            if (k) putchar(' ');
            if (tokens) fputs(wordpiece_token(&wp, ids.ids[k]), stdout);
            else printf("%d", (int)ids.ids[k]);
        }
        putchar('\n');
    }
    free(line);
    wpids_free(&ids);
    wordpiece_free(&wp);
    if (in) fclose(f);
    return 0;
}
