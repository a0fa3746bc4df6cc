/* bert.h — BERT as Hugging Face defines it (post-LayerNorm encoder).
 *
 *   embeddings:  E = LayerNorm(word[ids] + position[t] + token_type[tt]); dropout
 *   layer l:     A = LayerNorm(E + dropout(Wo · attention(Wq E, Wk E, Wv E, mask)))
 *                E = LayerNorm(A + dropout(W2 · gelu(W1 A)))
 *   MLM head:    logits = LayerNorm(gelu(Wt E[rows])) · word^T + bias  (decoder
 *                tied to the word embeddings, with its own bias; on the rows
 *                the loss scores)
 *   classifier:  logits = Wc · dropout(tanh(Wp E[:, 0]))            (pooler on [CLS])
 * Shapes: B batch, T tokens, D hidden, H heads, Dh = D / H, I intermediate,
 * V vocabulary. Parameter names are the HF state_dict's
 * (bert.embeddings.word_embeddings.weight, bert.encoder.layer.0.attention.
 * self.query.weight, cls.predictions.bias, classifier.weight, ...), linear
 * weights [out, in]. Init as HF: N(0, 0.02) for weights and embeddings,
 * zero biases, LayerNorm 1 / 0.
 *
 * Inputs to the loss: ids i32 [B, T], token types i32 [B, T], an additive
 * attention mask f32 [B, T] (0 for real tokens, -10000 for padding), then
 *   MLM:            rows i32 [M] (flat positions b T + t, distinct) and labels
 *                   i32 [M] (-100 = not scored): the head runs on these M
 *                   rows only (data/mlm.h makes them: the masked positions,
 *                   padded to a static M); rows = every position with the
 *                   [B*T] labels is the head on all tokens, same loss and
 *                   gradients;
 *   classification: labels i32 [B].
 * The loss is the mean cross-entropy over the labelled rows (HF's).
 */
#ifndef CTRAIN_MODELS_BERT_H
#define CTRAIN_MODELS_BERT_H

#include "engine/recompute.h"
#include "model.h"

typedef enum { BERT_MLM = 0, BERT_CLASSIFIER } BertHead;

typedef struct BertConfig {
    int vocab, hidden, layers, heads, intermediate, max_pos, type_vocab;
    float ln_eps, hidden_dropout, attn_dropout;
    BertHead head;
    int classes;                 /* classifier head */
    RecomputePolicy recompute;   /* per encoder layer */
} BertConfig;

/* The configuration of a BERT kind (MODEL_BERT_TINY ... MODEL_BERT_LARGE);
 * -1 when kind is not a BERT. */
int bert_config_kind(BertConfig *cfg, ModelKind kind, int vocab);
/* The same by name: "bert-tiny" or "tiny", ... "large"; -1 when unknown. */
int bert_config_named(BertConfig *cfg, const char *name, int vocab);
void bert_create(Model *m, Ctx *c, const BertConfig *cfg, uint64_t seed);
/* Training FLOPs per sequence of T tokens, for MFU: the model FLOPs of
 * what the step computes, 6 x matmul multiply-adds (forward 2, backward 4):
 * the encoder's on all T tokens, plus attention's QK^T and PV, plus the
 * head's on head_rows rows a sequence: for MLM the masked-row slots
 * (mlm_max_masked(T, 0.15): 19 of 128 tokens), for the classifier 1 ([CLS]).
 * Embedding lookups, norms, softmax and the loss are not counted. */
double bert_train_flops_per_seq(const BertConfig *cfg, int T, double head_rows);

#endif
