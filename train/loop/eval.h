/* eval.h — accuracy and loss over a feed's held-out split, in eval mode
 * (batch norm uses running statistics, no dropout, no autograd).
 *
 * What is counted, per labelled row (label y in [0, K); rows labelled with
 * the ignore index -100 are skipped, other labels are an error):
 *   rank    = #{k : z[k] > z[y]} + #{k < y : z[k] == z[y]}
 *             (the true class's place when sorted, ties going to the lower
 *             index as argmax does; a row with a NaN logit ranks last)
 *   top-1   = rank == 0, i.e. argmax(z) == y;  top-5 = rank < 5
 *   loss    = sum over batches of (the batch's mean cross-entropy x its
 *             labelled rows) / labelled rows: the mean over all rows, whatever
 *             the batch sizes (the last batch is partial)
 *   majority = the largest class count / rows: the accuracy of always
 *             answering the split's most common label.
 */
#ifndef CTRAIN_TRAIN_EVAL_H
#define CTRAIN_TRAIN_EVAL_H

#include "models/model.h"
#include "train/feed/feed.h"

typedef struct EvalResult {
    double loss, top1, top5;
    double majority;   /* top-1 of always answering the split's most common label */
    long n;            /* labelled rows evaluated */
    int classes;       /* K: columns of the logits (0 when nothing was evaluated) */
    long *class_n;     /* [K] rows whose label is k */
    long *class_hit;   /* [K] of them answered right (top-1) */
    long *class_pred;  /* [K] rows answered k (argmax) */
} EvalResult;

EvalResult evaluate(Ctx *c, Model *m, Feed *f);
void eval_result_free(EvalResult *r);

/* Where label y ranks among the logits row [K] (the rule above); K when
 * the row holds a NaN. */
size_t eval_rank(const float *row, size_t K, int32_t y);

/* argmax of row [K], the first index on ties; -1 when the row holds a NaN. */
int eval_argmax(const float *row, size_t K);

/* "  per class (right/rows): name 12/30 40.0% (answered 25), ..." on stdout,
 * for K <= 32; names may be NULL (then the class index). */
void eval_print_classes(const EvalResult *r, const char *const *names);

#endif
