/* gpu_bert_parity.c — ctrain's BERT (MLM head) against Hugging Face
 * transformers with the same weights: scripts/torch_parity.py bert writes
 * DIR/weights.safetensors (BertForMaskedLM's state_dict, with the tied
 * decoder entries ctrain does not need) and DIR/ref.safetensors (a batch
 * with padding and 15% labels, the loss, every gradient; dropout off, strict
 * f32). Compares the loss and every gradient (max |diff| / max |ref| per
 * tensor). ctrain's MLM head runs on the labelled rows (models/bert.h),
 * transformers' on every token: the loss and gradients must agree anyway.
 *
 *   gpu_bert_parity DIR [SIZE]       (SIZE: tiny, small, base, large; default base)
 */
#include <string.h>
#include "check.h"
#include "gpu_util.h"
#include "data/mlm.h"
#include "engine/autograd.h"
#include "models/bert.h"
#include "train/io/checkpoint.h"
#include "train/io/safetensors.h"
#include "parity_util.h"

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("CTRAIN_BERT_PARITY_DIR");
    const char *size = argc > 2 ? argv[2] : "base";
    if (!dir) {
        printf("usage: gpu_bert_parity DIR [SIZE] (DIR from scripts/torch_parity.py bert)\n0 passed, 1 failed\n");
        return 1;
    }
    gpu_require();
    char wpath[1024], err[512];
    StFile ref;
    parity_open(dir, wpath, sizeof wpath, &ref);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    BertConfig cfg;
    bert_config_named(&cfg, size, 30522);
    cfg.hidden_dropout = cfg.attn_dropout = 0.0f;
    Model m;
    bert_create(&m, &c, &cfg, 1);
    /* the tied decoder entries (cls.predictions.decoder.*) are extra here */
    int st = ckpt_load_params(&m.params, wpath, "bert", CKPT_ALLOW_EXTRA, err, sizeof err);
    check_true("bert_parity.load_hf_weights", st == 0, "%s", err);

    const StEntry *ei = parity_need(&ref, "input_ids"), *et = parity_need(&ref, "token_type_ids");
    const StEntry *em = parity_need(&ref, "attention_mask"), *el = parity_need(&ref, "labels");
    const StEntry *eloss = parity_need(&ref, "loss");
    int64_t B = ei->shape[0], T = ei->shape[1];
    float *madd = malloc((size_t)(B * T) * sizeof(float));
    for (int64_t i = 0; i < B * T; i++) madd[i] = ((const float *)em->data)[i] > 0.5f ? 0.0f : -10000.0f;
    Tensor *ids = tensor_from_host(&c, ei->data, DT_I32, 2, ei->shape);
    Tensor *tt = tensor_from_host(&c, et->data, DT_I32, 2, et->shape);
    Tensor *mask = tensor_from_host(&c, madd, DT_F32, 2, (int64_t[]){B, T});
    /* transformers scores every token and ignores the -100 ones; ctrain runs
     * its head on the labelled rows only (padded to the most any sequence
     * has): the same loss and gradients, which is what this compares */
    const int32_t *labels = (const int32_t *)el->data;
    int S = mlm_labelled_max(labels, (int)B, (int)T);
    if (S < 1) S = 1;
    int32_t *rows = malloc((size_t)(B * S) * sizeof(int32_t)), *rl = malloc((size_t)(B * S) * sizeof(int32_t));
    long labelled = mlm_select_rows(rows, rl, labels, (int)B, (int)T, S);
    printf("  MLM head on %lld rows (%ld labelled of %lld tokens)\n", (long long)(B * S), labelled,
           (long long)(B * T));
    Tensor *rws = tensor_from_host(&c, rows, DT_I32, 1, (int64_t[]){B * S});
    Tensor *lab = tensor_from_host(&c, rl, DT_I32, 1, (int64_t[]){B * S});
    free(rows);
    free(rl);
    Tensor *in[5] = {ids, tt, mask, rws, lab};
    Tensor *loss = model_loss(&c, &m, in, 0.0f, NULL);
    float lv, lref = *(const float *)eloss->data;
    tensor_to_f32(&lv, loss);
    ad_backward(&c, loss, 1.0f);
    tensor_release(loss);
    printf("  bert-%s batch %lld seq %lld: loss ctrain %.7f  transformers %.7f\n", size,
           (long long)B, (long long)T, (double)lv, (double)lref);
    check_close("bert_parity.loss", &lv, &lref, 1, 1e-5, 1e-5);

    size_t n = m.params.total;
    float *g = malloc(n * sizeof(float));
    grads_to_host(&m.params, g);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < m.params.n; i++) {
        ParamInfo *pi = &m.params.p[i];
        char name[200];
        snprintf(name, sizeof name, "grad.%s", pi->name);
        const StEntry *e = parity_need(&ref, name);
        double r = parity_rel_inf(g + pi->offset, (const float *)e->data, pi->numel);
        if (strstr(pi->name, "attention.self.key.bias")) {
            /* q.(k_j + b) - q.k_j is the same for every key j, and softmax
             * ignores a constant: this gradient is 0 in exact arithmetic and
             * both sides hold rounding noise. Check it is noise-sized next to
             * the key weight's gradient instead of comparing the noise. */
            char wname[200];
            snprintf(wname, sizeof wname, "grad.%.*sweight", (int)(strlen(pi->name) - 4), pi->name);
            const StEntry *ew = parity_need(&ref, wname);
            double gmax = 0, wmax = 0;
            for (size_t k = 0; k < pi->numel; k++) gmax = fmax(gmax, fabs(g[pi->offset + k]));
            for (size_t k = 0; k < ew->numel; k++) wmax = fmax(wmax, fabs(((const float *)ew->data)[k]));
            if (!check_true("bert_parity.key_bias_is_zero", gmax <= 1e-3 * wmax,
                            "%s: max |grad| %.3g vs key weight %.3g", pi->name, gmax, wmax))
                worst = fmax(worst, 1.0);
            continue;
        }
        if (getenv("CHECK_VERBOSE")) printf("    %-60s %.3g\n", pi->name, r);
        if (r > worst) { worst = r; worst_name = pi->name; }
    }
    printf("  worst gradient relative error %.3g (%s) over %d tensors\n", worst, worst_name, m.params.n);
    check_true("bert_parity.grads", worst <= 1e-3, "worst %.3g at %s", worst, worst_name);
    free(g);
    free(madd);
    tensor_release(ids); tensor_release(tt); tensor_release(mask); tensor_release(rws);
    tensor_release(lab);
    model_free(&m);
    st_close(&ref);
    ctx_free(&c);
    return check_summary();
}
