/* resume_check.c — the run-defining options of a training checkpoint: the
 * one table both trainer_save and trainer_resume read (resume_check.h). */
#include "resume_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/log.h"

typedef enum {
    RK_FIXED,    /* a difference is refused, no opt-out */
    RK_WARN,     /* a difference is said, the run goes on */
    RK_CHECKED,  /* a difference is refused unless --resume-change names it */
} ResumeRule;

/* Where a key's comparison means something (it is written for every run). */
typedef enum { ON_ALL, ON_SGD, ON_BERT, ON_RESNET, ON_DECAY } ResumeOn;

typedef void (*ResumeFormat)(char *buf, size_t n, const Trainer *t, const TrainOptions *o);

typedef struct ResumeKey {
    const char *key;       /* metadata key */
    const char *name;      /* the flag without "--"; --resume-change's name */
    ResumeRule rule;
    ResumeOn on;
    int is_switch;         /* a flag without a value: "on", or "" when not given */
    ResumeFormat format;   /* this run's value; "" = the flag was not given */
} ResumeKey;

/* The shortest text that reads back as the same f32 ("0.001", not
 * "0.00100000005"): what the user typed, normalised. */
static void f32_text(char *b, size_t n, float x)
{
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(b, n, "%.*g", digits, (double)x);
        if (strtof(b, NULL) == x) return;
    }
}

#define FMT(fn, ...) \
    static void fn(char *b, size_t n, const Trainer *t, const TrainOptions *o) \
    { (void)t; (void)o; snprintf(b, n, __VA_ARGS__); }
#define FMT_F32(fn, x) \
    static void fn(char *b, size_t n, const Trainer *t, const TrainOptions *o) \
    { (void)t; f32_text(b, n, x); }

FMT(f_model, "%s", model_kind_name(o->model))
FMT(f_optim, "%s", optim_name(o->optim.kind))
FMT(f_precision, "%s", precision_name(o->precision))
FMT(f_batch, "%d", o->batch)
FMT(f_accum, "%d", o->accum)
FMT(f_seed, "%" PRIu64, o->seed)
FMT_F32(f_lr, o->lr)
FMT(f_schedule, "%s", sched_name(o->schedule))
FMT(f_warmup, "%ld", o->warmup)
FMT_F32(f_final_lr, o->final_lr)
FMT(f_steps, "%ld", t->sched.total)   /* --steps, or --epochs x steps per epoch */
FMT(f_data, "%s", o->data)
FMT_F32(f_momentum, o->optim.momentum)
FMT(f_nesterov, "%s", o->optim.nesterov ? "on" : "")
FMT_F32(f_wd, o->optim.weight_decay)
FMT(f_no_wd_bn_bias, "%s", o->no_wd_bn_bias ? "on" : "")
FMT_F32(f_clip, o->clip)
FMT_F32(f_label_smoothing, o->label_smoothing)
FMT(f_seq, "%d", o->seq)
FMT(f_gpus, "%d", t->ctx->dp_world > 1 ? t->ctx->dp_world : 1)

static void f_dropout(char *b, size_t n, const Trainer *t, const TrainOptions *o)
{
    (void)t;
    if (o->dropout < 0) b[0] = 0;   /* the model's own */
    else f32_text(b, n, o->dropout);
}

static void f_image_size(char *b, size_t n, const Trainer *t, const TrainOptions *o)
{
    (void)t;
    if (!o->image_size) b[0] = 0;   /* the data set's natural size */
    else snprintf(b, n, "%d", o->image_size);
}

/* The fixed keys and precision are in every training checkpoint ctrain
 * wrote; the checked ones may be missing from older files. */
static const ResumeKey KEYS[] = {
    {"model", "model", RK_FIXED, ON_ALL, 0, f_model},
    {"optimizer", "optim", RK_FIXED, ON_ALL, 0, f_optim},
    {"batch", "batch", RK_FIXED, ON_ALL, 0, f_batch},
    {"accum", "accum", RK_FIXED, ON_ALL, 0, f_accum},
    {"seed", "seed", RK_FIXED, ON_ALL, 0, f_seed},
    {"precision", "precision", RK_WARN, ON_ALL, 0, f_precision},
    {"lr", "lr", RK_CHECKED, ON_ALL, 0, f_lr},
    {"schedule", "schedule", RK_CHECKED, ON_ALL, 0, f_schedule},
    {"warmup", "warmup", RK_CHECKED, ON_ALL, 0, f_warmup},
    {"final_lr", "final-lr", RK_CHECKED, ON_ALL, 0, f_final_lr},
    {"total_steps", "steps", RK_CHECKED, ON_DECAY, 0, f_steps},
    {"data", "data", RK_CHECKED, ON_ALL, 0, f_data},
    {"momentum", "momentum", RK_CHECKED, ON_SGD, 0, f_momentum},
    {"nesterov", "nesterov", RK_CHECKED, ON_SGD, 1, f_nesterov},
    {"weight_decay", "wd", RK_CHECKED, ON_ALL, 0, f_wd},
    {"no_wd_bn_bias", "no-wd-bn-bias", RK_CHECKED, ON_RESNET, 1, f_no_wd_bn_bias},
    {"clip", "clip", RK_CHECKED, ON_ALL, 0, f_clip},
    {"label_smoothing", "label-smoothing", RK_CHECKED, ON_ALL, 0, f_label_smoothing},
    {"dropout", "dropout", RK_CHECKED, ON_BERT, 0, f_dropout},
    {"seq", "seq", RK_CHECKED, ON_BERT, 0, f_seq},
    {"image_size", "image-size", RK_CHECKED, ON_RESNET, 0, f_image_size},
    {"world_size", "gpus", RK_CHECKED, ON_ALL, 0, f_gpus},
};
enum { N_KEYS = sizeof KEYS / sizeof KEYS[0] };
_Static_assert(N_KEYS + 2 <= RESUME_META_MAX, "ResumeMeta holds every key");
_Static_assert(N_KEYS <= 32, "--resume-change keeps a bit per key in an unsigned");

static int key_applies(const ResumeKey *k, const TrainOptions *o)
{
    switch (k->on) {
    case ON_ALL: return 1;
    case ON_SGD: return o->optim.kind == OPT_SGD;
    case ON_BERT: return model_kind_is_bert(o->model);
    case ON_RESNET: return model_kind_is_resnet(o->model);
    case ON_DECAY: return o->schedule != SCHED_CONSTANT;   /* constant: the total changes nothing */
    }
    return 1;
}

void resume_meta_fill(ResumeMeta *m, const Trainer *t, const TrainOptions *o)
{
    memset(m, 0, sizeof *m);
    m->kv[0] = "ctrain_checkpoint";
    m->kv[1] = "training";
    snprintf(m->val[0], sizeof m->val[0], "%ld", t->step);
    m->kv[2] = "steps";   /* the position; "total_steps" is the run's length */
    m->kv[3] = m->val[0];
    m->n = 2;
    for (int i = 0; i < N_KEYS; i++, m->n++) {
        KEYS[i].format(m->val[m->n], sizeof m->val[m->n], t, o);
        m->kv[2 * m->n] = KEYS[i].key;
        m->kv[2 * m->n + 1] = m->val[m->n];
    }
}

/* ---- the check ---- */

typedef struct { char *p; size_t n, len; } Text;

static void text_add(Text *s, const char *fmt, ...)
{
    if (s->len + 1 >= s->n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->p + s->len, s->n - s->len, fmt, ap);
    va_end(ap);
    if (k > 0) s->len += (size_t)k < s->n - s->len ? (size_t)k : s->n - s->len - 1;
}

/* "--lr 0.001", "--nesterov", "no --nesterov", "no --image-size". */
static void text_value(Text *s, const ResumeKey *k, const char *v)
{
    if (!v[0]) text_add(s, "no --%s", k->name);
    else if (k->is_switch) text_add(s, "--%s", k->name);
    else text_add(s, "--%s %s", k->name, v);
}

/* A fixed key: refused on its own, as ctrain always did. */
static void check_fixed(const StFile *f, const char *path, const ResumeKey *k, const char *ours)
{
    const char *saved = st_meta(f, k->key);
    if (!saved) ct_fatal_hint("resume from a file written by ctrain train --save-every",
                              "%s: training checkpoint without '%s' metadata", path, k->key);
    if (strcmp(saved, ours)) {
        char hint[1500];
        snprintf(hint, sizeof hint, "pass --%s %s as when it was saved, or drop --resume to start "
                 "a new run", k->name, saved);
        ct_fatal_hint(hint, "cannot resume %s: it was saved with --%s %s, this run has --%s %s",
                      path, k->name, saved, k->name, ours);
    }
}

void resume_check(const StFile *f, const char *path, const Trainer *t, const TrainOptions *o)
{
    static char saved_b[8192], ours_b[8192], names_b[1024], missing_b[1024];
    Text saved = {saved_b, sizeof saved_b, 0}, ours = {ours_b, sizeof ours_b, 0};
    Text names = {names_b, sizeof names_b, 0}, missing = {missing_b, sizeof missing_b, 0};
    char mine[RESUME_VALUE_MAX];
    int differ = 0;
    for (int i = 0; i < N_KEYS; i++) {
        const ResumeKey *k = &KEYS[i];
        k->format(mine, sizeof mine, t, o);
        if (k->rule == RK_FIXED) { check_fixed(f, path, k, mine); continue; }
        const char *was = st_meta(f, k->key);
        if (!was) {
            if (k->rule == RK_CHECKED && key_applies(k, o))
                text_add(&missing, "%s--%s", missing.len ? ", " : "", k->name);
            continue;
        }
        if (!strcmp(was, mine) || !key_applies(k, o)) continue;
        if (k->rule == RK_WARN) {
            LOG_W("%s was saved with --%s %s, this run has %s: the loss will not repeat bit for "
                  "bit", path, k->name, was, mine);
            continue;
        }
        if (o->resume_change & (1u << i)) {
            char a[RESUME_VALUE_MAX + 64], b[RESUME_VALUE_MAX + 64];
            Text ta = {a, sizeof a, 0}, tb = {b, sizeof b, 0};
            text_value(&ta, k, was);
            text_value(&tb, k, mine);
            LOG_W("--resume-change %s: %s was saved with %s, this run has %s", k->name, path, a, b);
            continue;
        }
        text_add(&saved, "%s", differ ? ", " : "");
        text_value(&saved, k, was);
        text_add(&ours, "%s", differ ? ", " : "");
        text_value(&ours, k, mine);
        text_add(&names, "%s%s", differ ? "," : "", k->name);
        differ++;
    }
    if (missing.len)
        LOG_W("%s was written before ctrain stored these options in its checkpoints: %s; they "
              "could not be checked (this run's values are used)", path, missing_b);
    if (!differ) return;
    static char hint[sizeof saved_b + sizeof names_b + 128];
    snprintf(hint, sizeof hint, "run with the saved value%s (%s), or add --resume-change %s to "
             "change %s deliberately", differ > 1 ? "s" : "", saved_b, names_b,
             differ > 1 ? "them" : "it");
    ct_fatal_hint(hint, "cannot resume %s: it was saved with %s; this run has %s", path, saved_b,
                  ours_b);
}

/* ---- --resume-change ---- */

const char *resume_change_names(void)
{
    static char list[512];
    if (!list[0]) {
        Text s = {list, sizeof list, 0};
        for (int i = 0; i < N_KEYS; i++)
            if (KEYS[i].rule == RK_CHECKED) text_add(&s, "%s%s", s.len ? ", " : "", KEYS[i].name);
    }
    return list;
}

int resume_change_parse(unsigned *mask, const char *list, char *err, size_t errlen)
{
    *mask = 0;
    const char *p = list;
    for (;;) {
        size_t item = strcspn(p, ","), len = item;
        const char *name = p;
        if (len >= 2 && name[0] == '-' && name[1] == '-') { name += 2; len -= 2; }
        int found = -1;
        for (int i = 0; i < N_KEYS && found < 0; i++)
            if (KEYS[i].rule == RK_CHECKED && strlen(KEYS[i].name) == len &&
                !strncmp(KEYS[i].name, name, len))
                found = i;
        if (found < 0)
            return ct_fail(err, errlen, -1, "--resume-change '%s': '%.*s' is not an option a "
                           "resumed run may change (those are: %s)", list, (int)item, p,
                           resume_change_names());
        *mask |= 1u << found;
        if (!p[item]) return 0;
        p += item + 1;
    }
}
