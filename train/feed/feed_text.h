/* feed_text.h — BERT's pre-training feeds (train/feed/feed_text.c):
 * --data synthetic (token batches made once and kept on the device, ids in
 * [0, spec->vocab_size), 30522 by default) or --data mlm:SHARD with --vocab
 * (masked-LM batches from a pre-tokenized shard, data/mlm.h). Inputs:
 * ids i32 [B, T], token types i32 [B, T], additive mask f32 [B, T],
 * masked rows i32 [M] and their labels i32 [M] (-100 on padding slots),
 * M = B x mlm_max_masked(T) (data/mlm.h). No held-out split.
 */
#ifndef CTRAIN_TRAIN_FEED_TEXT_H
#define CTRAIN_TRAIN_FEED_TEXT_H

#include "feed_types.h"

void feed_text_open(Feed *f, Ctx *c, const FeedSpec *spec);

#endif
