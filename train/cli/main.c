/* main.c — the ctrain command: dispatch to a subcommand, which parses its
 * own options (--flag value and --flag=value alike: cli_next,
 * train/bench/bench_options.h). */
#include <stdio.h>
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

int main(int argc, char **argv)
{
    /* line by line even into a pipe or a file, so stdout's lines and the
     * log's (stderr, unbuffered) keep the order they happened in */
    setvbuf(stdout, NULL, _IOLBF, 0);
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
