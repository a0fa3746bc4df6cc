/* text_cmds.c — `ctrain vocab` (build a WordPiece vocabulary from a corpus)
 * and `ctrain shard` (tokenize a corpus once into a binary token shard that
 * masked-LM training reads: --data mlm:SHARD). */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../data/text_shards.h"
#include "../data/vocab_build.h"
#include "../data/wordpiece.h"
#include "../engine/error.h"

static const char *arg_value(int argc, char **argv, int *i, const char *cmd)
{
    if (*i + 1 >= argc) {
        char hint[96];
        snprintf(hint, sizeof hint, "run 'ctrain %s --help'", cmd);
        ct_fatal_hint(hint, "%s needs a value", argv[*i]);
    }
    return argv[++*i];
}

int cmd_vocab(int argc, char **argv)
{
    const char *corpus = NULL, *out = NULL;
    int size = 30522, lower = 1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--corpus")) corpus = arg_value(argc, argv, &i, "vocab");
        else if (!strcmp(argv[i], "--out")) out = arg_value(argc, argv, &i, "vocab");
        else if (!strcmp(argv[i], "--size")) size = atoi(arg_value(argc, argv, &i, "vocab"));
        else if (!strcmp(argv[i], "--cased")) lower = 0;
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: ctrain vocab --corpus PATH --size N --out vocab.txt [--cased]\n"
                   "  builds a WordPiece vocabulary (BERT's specials, every character, then\n"
                   "  merged pieces) from a text file or a folder of text files\n");
            return 0;
        } else ct_fatal_hint("run 'ctrain vocab --help'", "unknown option '%s'", argv[i]);
    }
    if (!corpus || !out) ct_fatal_hint("run 'ctrain vocab --help'", "vocab needs --corpus and --out");
    if (size < 16 || size > 1000000)
        ct_fatal_hint("pass --size between 16 and 1000000", "--size %d is out of range", size);
    char err[512];
    if (vocab_build(corpus, size, lower, out, err, sizeof err) != 0)
        ct_fatal_hint("check the corpus path (a UTF-8 text file or a folder of them)", "%s", err);
    printf("wrote %s\n", out);
    return 0;
}

int cmd_shard(int argc, char **argv)
{
    const char *corpus = NULL, *out = NULL, *vocab = NULL;
    int lower = 1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--corpus")) corpus = arg_value(argc, argv, &i, "shard");
        else if (!strcmp(argv[i], "--out")) out = arg_value(argc, argv, &i, "shard");
        else if (!strcmp(argv[i], "--vocab")) vocab = arg_value(argc, argv, &i, "shard");
        else if (!strcmp(argv[i], "--cased")) lower = 0;
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: ctrain shard --corpus PATH --vocab vocab.txt --out FILE [--cased]\n"
                   "  tokenizes the corpus once into a token shard for --data mlm:FILE\n");
            return 0;
        } else ct_fatal_hint("run 'ctrain shard --help'", "unknown option '%s'", argv[i]);
    }
    if (!corpus || !out || !vocab)
        ct_fatal_hint("run 'ctrain shard --help'", "shard needs --corpus, --vocab and --out");
    char err[512];
    Wordpiece wp;
    if (wordpiece_load(&wp, vocab, lower, err, sizeof err) != 0)
        ct_fatal_hint("check the --vocab path (one token per line)", "%s", err);
    ShardStats st;
    int rc = shard_write(corpus, &wp, out, SHARD_DOC_AUTO, &st, err, sizeof err);
    if (rc != 0) ct_fatal_hint(shard_hint(rc), "%s", err);
    printf("wrote %s: %llu documents, %llu tokens (%llu [UNK]) from %llu files\n", out,
           (unsigned long long)st.docs, (unsigned long long)st.tokens, (unsigned long long)st.unk,
           (unsigned long long)st.files);
    wordpiece_free(&wp);
    return 0;
}
