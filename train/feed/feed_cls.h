/* feed_cls.h — BERT fine-tuning on the fortunes topic set
 * (train/feed/feed_cls.c): "fortunes-cls[:DIR]" with --vocab; spec->classes
 * topics (0: 4). Inputs: ids i32 [B, T], token types i32 [B, T], additive
 * mask f32 [B, T], then labels i32 [B] (the topic); classes = topics;
 * held-out split for evaluation.
 */
#ifndef CTRAIN_TRAIN_FEED_CLS_H
#define CTRAIN_TRAIN_FEED_CLS_H

#include "feed_types.h"

void feed_cls_open(Feed *f, Ctx *c, const FeedSpec *spec);

#endif
