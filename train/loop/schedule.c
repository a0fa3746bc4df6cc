/* schedule.c — learning rate at a given optimizer step. */
#include "schedule.h"

#include <math.h>
#include <string.h>

static const char *names[] = {"constant", "cosine", "linear", "poly", "step"};

int sched_parse(const char *s)
{
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *sched_name(SchedKind k) { return (k >= 0 && k <= SCHED_STEP) ? names[k] : "?"; }

float sched_lr(const Schedule *s, long step)
{
    if (step < s->warmup) return s->base * (float)(step + 1) / (float)s->warmup;
    if (s->kind == SCHED_CONSTANT) return s->base;
    if (s->kind == SCHED_STEP) {
        float lr = s->base;
        for (int i = 0; i < s->n_milestones; i++)
            if (step >= s->milestones[i]) lr *= s->gamma;
        return lr;
    }
    long span = s->total - s->warmup;
    double t = span > 0 ? (double)(step - s->warmup) / (double)span : 1.0;
    if (t > 1.0) t = 1.0;
    double f;
    switch (s->kind) {
    case SCHED_COSINE: f = 0.5 * (1.0 + cos(M_PI * t)); break;
    case SCHED_LINEAR: f = 1.0 - t; break;
    case SCHED_POLY: f = pow(1.0 - t, s->power); break;
    default: f = 1.0; break;
    }
    return (float)(s->final_lr + (s->base - s->final_lr) * f);
}
