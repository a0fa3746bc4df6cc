/* feed.c — the --data dispatch: which feed kind a --model / --data pair
 * opens (feed.h), and closing a feed. The kinds live below it:
 * feed_image.c, feed_text.c, feed_cls.c, all on feed_stage.c. */
#include "feed.h"

#include <stdio.h>
#include <string.h>
#include "engine/error.h"
#include "feed_cls.h"
#include "feed_decode.h"
#include "feed_image.h"
#include "feed_text.h"
#include "models/model.h"

int feed_is_cls(const char *data)
{
    return !strcmp(data, "fortunes-cls") || !strncmp(data, "fortunes-cls:", 13);
}

void feed_open(Feed *f, Ctx *c, const FeedSpec *s)
{
    memset(f, 0, sizeof *f);
    f->batch = s->batch;
    const char *d = s->data;
    int kind = model_kind_parse(s->model);
    int mlp = kind == MODEL_MLP;
    if (kind >= 0 && model_kind_is_bert((ModelKind)kind)) {
        feed_decode_check_other(s->decode, d);   /* no image files: --decode gpu is refused */
        if (feed_is_cls(d)) feed_cls_open(f, c, s);
        else feed_text_open(f, c, s);
        return;
    }
    if (!strcmp(d, "fashion-mnist") || !strncmp(d, "fashion-mnist:", 14)) {
        const char *dir = d[13] == ':' ? d + 14 : NULL;
        if (mlp) {
            feed_decode_check_other(s->decode, d);
            feed_flat_open(f, c, s, dir);
        } else {
            feed_fmnist_images_open(f, c, s, dir);
        }
        return;
    }
    if (mlp)
        ct_fatal_hint("pass --data fashion-mnist (the MLP reads 28x28 images as 784 features)",
                      "--data %s: the MLP trains on Fashion-MNIST only", d);
    if (!strcmp(d, "synthetic")) {
        feed_decode_check_other(s->decode, d);
        feed_synthetic_images_open(f, c, s);
        return;
    }
    feed_imagefolder_open(f, c, s, !strncmp(d, "imagefolder:", 12) ? d + 12 : d);
}

void feed_close(Feed *f, Ctx *c)
{
    for (int i = 0; i < f->n_in; i++) tensor_release(f->in[i]);
    if (f->free) f->free(f, c);
    memset(f, 0, sizeof *f);
}

int feed_stats_now(Feed *f, FeedStats *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->decode, sizeof s->decode, "none");
    if (!f->stats) return 0;
    f->stats(f, s);
    return 1;
}
