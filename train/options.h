/* options.h — command-line options of `ctrain train` / `ctrain eval`.
 *
 * Parsing is strict: an unknown flag, a missing value, a number that does not
 * parse or is out of range each end with a message naming the flag and a
 * hint to run `ctrain train --help`.
 */
#ifndef CTRAIN_TRAIN_OPTIONS_H
#define CTRAIN_TRAIN_OPTIONS_H

#include <stdint.h>
#include "../engine/ctx.h"

typedef struct TrainOptions {
    char model[32];
    char data[512];          /* "fashion-mnist" or "fashion-mnist:DIR" */
    int epochs;              /* 0 when --steps is used */
    long steps;              /* 0: run whole epochs */
    int batch;
    float lr, momentum, weight_decay, label_smoothing;
    int nesterov;
    uint64_t seed;
    Device device;
    int device_id;
    int device_given;
    char precision[8];       /* fp32 | tf32 */
    char log_path[512];
    int log_every;
    int hidden[8];
    int n_hidden;
} TrainOptions;

void train_options_default(TrainOptions *o);
/* Parse argv[0..argc) (the words after the subcommand). */
void train_options_parse(TrainOptions *o, int argc, char **argv, const char *cmd);
void train_options_usage(const char *cmd);

#endif
