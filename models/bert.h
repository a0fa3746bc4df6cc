/* bert.h — BERT as Hugging Face defines it (post-LayerNorm encoder).
 *
 *   embeddings:  E = LayerNorm(word[ids] + position[t] + token_type[tt]); dropout
 *   layer l:     A = LayerNorm(E + dropout(Wo · attention(Wq E, Wk E, Wv E, mask)))
 *                E = LayerNorm(A + dropout(W2 · gelu(W1 A)))
 *   MLM head:    logits = LayerNorm(gelu(Wt E)) · word^T + bias   (decoder tied
 *                to the word embeddings, with its own bias)
 *   classifier:  logits = Wc · dropout(tanh(Wp E[:, 0]))            (pooler on [CLS])
 * Shapes: B batch, T tokens, D hidden, H heads, Dh = D / H, I intermediate,
 * V vocabulary. Parameter names are the HF state_dict's
 * (bert.embeddings.word_embeddings.weight, bert.encoder.layer.0.attention.
 * self.query.weight, cls.predictions.bias, classifier.weight, ...), linear
 * weights [out, in]. Init as HF: N(0, 0.02) for weights and embeddings,
 * zero biases, LayerNorm 1 / 0.
 *
 * Inputs to the loss: ids i32 [B, T], token types i32 [B, T], an additive
 * attention mask f32 [B, T] (0 for real tokens, -10000 for padding), labels
 * i32 ([B*T] for MLM with -100 = not predicted; [B] for classification).
 */
#ifndef CTRAIN_MODELS_BERT_H
#define CTRAIN_MODELS_BERT_H

#include "../engine/recompute.h"
#include "model.h"

typedef enum { BERT_MLM = 0, BERT_CLASSIFIER } BertHead;

typedef struct BertConfig {
    int vocab, hidden, layers, heads, intermediate, max_pos, type_vocab;
    float ln_eps, hidden_dropout, attn_dropout;
    BertHead head;
    int classes;                 /* classifier head */
    RecomputePolicy recompute;   /* per encoder layer */
} BertConfig;

/* tiny, mini, small, medium, base, large; returns -1 when the name is unknown. */
int bert_config_named(BertConfig *cfg, const char *name, int vocab);
void bert_create(Model *m, Ctx *c, const BertConfig *cfg, uint64_t seed);
/* Training FLOPs per sequence of T tokens (6 x params-in-matmuls x T plus
 * attention), for MFU. */
double bert_train_flops_per_seq(const BertConfig *cfg, int T);

#endif
