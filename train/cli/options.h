/* options.h — command-line options of `ctrain train` and `ctrain eval`, read
 * into the run's decisions (TrainOptions, train/loop/run_options.h).
 *
 * Parsing is strict (getopt_long through cli_next, train/bench/bench_options.h;
 * --flag value and --flag=value alike): an unknown flag, an abbreviation, a
 * missing value, a number that does not parse or is out of range each end
 * with a message naming the flag and a hint to run `ctrain train --help`.
 * ctrain eval takes its own flags and refuses the training ones by name.
 */
#ifndef CTRAIN_TRAIN_OPTIONS_H
#define CTRAIN_TRAIN_OPTIONS_H

#include "train/loop/run_options.h"

/* Parse argv[0..argc) (the words after the subcommand) into o (which holds
 * the defaults, train/loop/run_options.h). */
void train_options_parse(TrainOptions *o, int argc, char **argv, const char *cmd);
void train_options_usage(const char *cmd);

/* A warning for each flag the command line gave that does nothing in this
 * run (--graph on the CPU, --seq on a ResNet, --bucket-mb in one process,
 * ...): said, not silently dropped. device: the run's; world: its processes;
 * has_eval: its data has a held-out split. */
void train_options_warn_unused(const TrainOptions *o, Device device, int world, int has_eval);

#endif
