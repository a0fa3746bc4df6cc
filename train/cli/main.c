/* main.c — the ctrain command: dispatch to a subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "train/bench/bench.h"
#include "commands.h"

static void usage(void)
{
    printf("ctrain — a training engine in C and CUDA\n\n"
           "usage: ctrain COMMAND [options]\n\n"
           "commands:\n"
           "  train   train a model      (ctrain train --help)\n"
           "  eval    evaluate saved weights on a held-out split (ctrain eval --help)\n"
           "  bench   measure training throughput, memory, MFU and power (ctrain bench --help)\n"
           "  report  merge bench JSON files into a markdown table and plots (ctrain report --help)\n"
           "  vocab   build a WordPiece vocabulary from a text corpus\n"
           "  shard   tokenize a corpus into a token shard for BERT pre-training\n"
           "  tokenize print the WordPiece ids of each input line (ctrain tokenize --help)\n"
           "  info    the device, CUDA, cuDNN and cuBLAS versions\n"
           "  env     the environment variables ctrain reads (ctrain env --help)\n"
           "  export  a checkpoint's weights alone, as a PyTorch state_dict (ctrain export --help)\n"
           "  help    this text (ctrain --version: the revision and libraries)\n");
}

/* GNU-style "--flag=value" becomes "--flag" "value" before any command
 * parses its options, so every command takes both forms; the split is at
 * the first '=' ("--label=a.json=H200" -> "--label" "a.json=H200"). Words
 * after a bare "--" and values (which do not start with "--") are kept. */
static char **split_flag_values(int *argc, char **argv)
{
    char **out = calloc((size_t)(2 * *argc + 1), sizeof *out);
    if (!out) ct_fatal("out of host memory");
    int n = 0, rest = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (!rest && !strcmp(a, "--")) rest = 1;
        if (rest || strncmp(a, "--", 2) || !eq || eq == a + 2) {
            out[n++] = argv[i];
            continue;
        }
        char *flag = strndup(a, (size_t)(eq - a));
        if (!flag) ct_fatal("out of host memory");
        out[n++] = flag;
        out[n++] = (char *)eq + 1;
    }
    *argc = n;
    return out;
}

int main(int argc, char **argv)
{
    /* line by line even into a pipe or a file, so stdout's lines and the
     * log's (stderr, unbuffered) keep the order they happened in */
    setvbuf(stdout, NULL, _IOLBF, 0);
    argv = split_flag_values(&argc, argv);
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "-h")) {
        usage();
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) return cmd_version();
    if (!strcmp(argv[1], "train")) return cmd_train(argc - 2, argv + 2);
    if (!strcmp(argv[1], "eval")) return cmd_eval(argc - 2, argv + 2);
    if (!strcmp(argv[1], "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(argv[1], "bench-rank")) return cmd_bench_rank(argc - 2, argv + 2);   /* internal */
    if (!strcmp(argv[1], "report")) return cmd_report(argc - 2, argv + 2);
    if (!strcmp(argv[1], "vocab")) return cmd_vocab(argc - 2, argv + 2);
    if (!strcmp(argv[1], "shard")) return cmd_shard(argc - 2, argv + 2);
    if (!strcmp(argv[1], "tokenize")) return cmd_tokenize(argc - 2, argv + 2);
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(argv[1], "env")) return cmd_env(argc - 2, argv + 2);
    if (!strcmp(argv[1], "export")) return cmd_export(argc - 2, argv + 2);
    ct_fatal_hint("run 'ctrain help' for the list of commands", "unknown command '%s'", argv[1]);
}
