/* resume_check.h — what defines a training run, written into a training
 * checkpoint's metadata (trainer_save) and compared on --resume
 * (trainer_resume, step.h).
 *
 * One table (resume_check.c) lists each run-defining option once: its
 * metadata key, its flag, how its value is written (numbers reprinted from
 * the parsed value, a float as the shortest text that reads back as the same
 * f32, so "1e-3" and "0.001" compare equal; --data as given, a path not
 * resolved; "" for a flag not given) and what a
 * difference does on resume:
 *   fixed     model, optim, batch, accum, seed: refused, no opt-out (the
 *             tensors or the data position would not fit)
 *   warned    precision: the loss will not repeat bit for bit
 *   checked   lr, schedule, warmup, final-lr, steps (the total the schedule
 *             spans, from --steps or --epochs; checked only when this run's
 *             schedule decays over it, i.e. not constant), data, momentum and
 *             nesterov (SGD), wd, no-wd-bn-bias (ResNet), clip,
 *             label-smoothing, dropout and seq (BERT), image-size (ResNet),
 *             gpus (the data-parallel world size): refused, unless named in
 *             --resume-change, which lets each differ with a warning.
 * Every key is written whatever the run (momentum with AdamW too), so a key
 * the file lacks means a checkpoint from before it was stored: those are
 * listed in one warning and not checked.
 */
#ifndef CTRAIN_TRAIN_RESUME_CHECK_H
#define CTRAIN_TRAIN_RESUME_CHECK_H

#include <stddef.h>
#include "trainer.h"
#include "run_options.h"
#include "train/io/safetensors.h"

enum { RESUME_META_MAX = 32, RESUME_VALUE_MAX = 600 };

/* A training checkpoint's metadata pairs, for ckpt_save. */
typedef struct ResumeMeta {
    const char *kv[2 * RESUME_META_MAX];   /* key, value, key, value, ... */
    int n;                                 /* pairs */
    char val[RESUME_META_MAX][RESUME_VALUE_MAX];
} ResumeMeta;

/* ctrain_checkpoint=training, steps (the position: t->step), and every
 * table key with this run's value. */
void resume_meta_fill(ResumeMeta *m, const Trainer *t, const TrainOptions *o);
/* Compare f's metadata with this run (see the top of this file); ends the
 * program with a message naming each differing flag, its saved value and
 * this run's, and one hint. */
void resume_check(const StFile *f, const char *path, const Trainer *t, const TrainOptions *o);
/* --resume-change FLAG[,FLAG...] ("lr,steps"; "--lr" works too) -> a bit
 * per table entry. -1 with err naming the bad item and the names accepted. */
int resume_change_parse(unsigned *mask, const char *list, char *err, size_t errlen);
/* "lr, schedule, ...": the names --resume-change accepts. */
const char *resume_change_names(void);

#endif
