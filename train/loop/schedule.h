/* schedule.h — learning-rate schedules: linear warm-up, then a decay.
 *
 *   warm-up (step < W):  lr = base * (step + 1) / W
 *   constant:            lr = base
 *   cosine:              lr = final + (base - final) * (1 + cos(pi * t)) / 2
 *   linear:              lr = final + (base - final) * (1 - t)        (BERT)
 *   poly:                lr = final + (base - final) * (1 - t)^power
 *   step:                lr = base * gamma^(number of milestones passed)
 * with t = (step - W) / (total - W) in [0, 1]; step counts optimizer steps
 * from 0. The same function runs on the host and (later) on the device so a
 * captured CUDA graph advances the schedule itself.
 */
#ifndef CTRAIN_TRAIN_SCHEDULE_H
#define CTRAIN_TRAIN_SCHEDULE_H

typedef enum { SCHED_CONSTANT = 0, SCHED_COSINE, SCHED_LINEAR, SCHED_POLY, SCHED_STEP } SchedKind;

#define SCHED_MAX_MILESTONES 8

typedef struct Schedule {
    SchedKind kind;
    float base, final_lr;
    long warmup, total;
    float power;                         /* poly */
    float gamma;                         /* step: factor per milestone */
    long milestones[SCHED_MAX_MILESTONES];
    int n_milestones;
} Schedule;

/* Parse "constant", "cosine", "linear", "poly", "step"; -1 when unknown. */
int sched_parse(const char *s);
const char *sched_name(SchedKind k);
float sched_lr(const Schedule *s, long step);

#endif
