/* commands.h — the subcommands main.c dispatches to (besides the bench's, train/bench/bench.h). */
#ifndef CTRAIN_TRAIN_TRAIN_H
#define CTRAIN_TRAIN_TRAIN_H

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_info(int argc, char **argv);
/* ctrain --version: the revision and the libraries this build was compiled against. */
int cmd_version(void);
int cmd_vocab(int argc, char **argv);
int cmd_shard(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_env(int argc, char **argv);
/* ctrain export CKPT OUT: the weights alone, a strict-loadable PyTorch state_dict. */
int cmd_export(int argc, char **argv);

#endif
