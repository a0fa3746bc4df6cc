/* export_cmd.c — `ctrain export CKPT OUT`: the weights of a checkpoint as a
 * plain PyTorch state_dict in safetensors form.
 *
 * A training checkpoint (--save-every) holds the model's parameters and
 * buffers under PyTorch's names plus the training state (optimizer moments,
 * step, grad scaler) under names that start with "__ctrain."; a strict
 * load_state_dict (torchvision's resnet50, Hugging Face's BERT) refuses
 * those extra keys. Export copies every other tensor byte for byte, keeps
 * the descriptive metadata (model, steps, precision, format "pt") and writes
 * OUT atomically, so a failed export never leaves half a file.
 *
 * `ctrain export --hf DIR CKPT [--vocab FILE]` writes a BERT checkpoint as
 * a Hugging Face folder: the same weights (ctrain's BERT names are
 * transformers'), config.json from the model's size and the head the file
 * has, and the tokenizer's vocab.txt and tokenizer_config.json.
 */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "engine/error.h"
#include "models/bert.h"
#include "train/bench/bench_options.h"
#include "engine/atomic_file.h"
#include "train/io/safetensors.h"

#define TRAINING_STATE_PREFIX "__ctrain."

static void export_usage(void)
{
    printf("usage: ctrain export CKPT OUT\n\n"
           "Writes the model weights of CKPT (a --save file or a --save-every training\n"
           "checkpoint) to OUT as a PyTorch state_dict in safetensors form: every tensor but\n"
           "the training state (__ctrain.*: optimizer, step, grad scaler), so that\n"
           "load_state_dict(..., strict=True) in PyTorch takes it. OUT is written atomically.\n\n"
           "usage: ctrain export --hf DIR CKPT [--vocab vocab.txt]\n\n"
           "A BERT checkpoint as a Hugging Face folder: config.json and model.safetensors (and\n"
           "with --vocab, vocab.txt and tokenizer_config.json), which\n"
           "transformers' BertForMaskedLM / BertForSequenceClassification.from_pretrained(DIR)\n"
           "opens (the architecture follows the head the checkpoint has).\n");
}

/* Every tensor of f but the training state, with the descriptive metadata,
 * written atomically to out. Returns ST_OK with *kept / *dropped set, or a
 * status with err. */
static int export_weights(const StFile *f, const char *out, int *kept, int *dropped, char *err,
                          size_t errlen)
{
    StWriter w;
    st_writer_init(&w);
    int code = ST_OK;
    *kept = *dropped = 0;
    for (int i = 0; i < f->n && code == ST_OK; i++) {
        const StEntry *e = &f->e[i];
        if (!strncmp(e->name, TRAINING_STATE_PREFIX, strlen(TRAINING_STATE_PREFIX))) {
            (*dropped)++;
            continue;
        }
        if (e->dtype < 0) {
            snprintf(err, errlen, "%s: tensor '%s' has dtype %s, which ctrain cannot copy",
                     f->path, e->name, e->dtype_name);
            code = ST_ERR_FORMAT;
            break;
        }
        code = st_writer_add(&w, e->name, (DType)e->dtype, e->ndim, e->shape, e->data, err,
                             errlen);
        (*kept)++;
    }
    /* descriptive metadata; the writer's own keys (ctrain_crc32) are its to set */
    const char *keys[] = {"format", "model", "steps", "precision", "ctrain_version"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0] && code == ST_OK; k++) {
        const char *v = st_meta(f, keys[k]);
        if (!v && !strcmp(keys[k], "format")) v = "pt";
        if (v) code = st_writer_meta(&w, keys[k], v, err, errlen);
    }
    if (code == ST_OK && *kept == 0) {
        snprintf(err, errlen, "%s holds no model tensors (only training state)", f->path);
        code = ST_ERR_FORMAT;
    }
    if (code == ST_OK) code = st_writer_write(&w, out, err, errlen);
    st_writer_free(&w);
    return code;
}

static void export_fail(int code, const char *err)
{
    ct_fatal_hint(code == ST_ERR_IO ? "check that the folder exists, is writable and has room"
                                    : "pass a checkpoint written by ctrain",
                  "export: %s", err);
}

/* ---- --hf: a folder transformers' from_pretrained opens ---- */

/* Rows of tensor name in f (its first dimension); -1 when absent. */
static int64_t rows_of(const StFile *f, const char *name)
{
    const StEntry *e = st_find(f, name);
    return e && e->ndim >= 1 ? e->shape[0] : -1;
}

/* config.json for cfg and the head found in the file, written atomically. */
static void write_hf_config(const char *path, const BertConfig *cfg, const char *arch,
                            int64_t num_labels)
{
    char tmp[1100], err[1300];
    FILE *f = atomic_file_open(path, tmp, sizeof tmp, err, sizeof err);
    if (!f) ct_fatal_hint("check that the folder is writable", "export --hf: %s", err);
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"bert\",\n", arch);
    fprintf(f, "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
            "  \"num_attention_heads\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n  \"type_vocab_size\": %d,\n",
            cfg->vocab, cfg->hidden, cfg->layers, cfg->heads, cfg->intermediate, cfg->max_pos,
            cfg->type_vocab);
    fprintf(f, "  \"hidden_act\": \"gelu\",\n  \"layer_norm_eps\": %g,\n"
            "  \"hidden_dropout_prob\": %g,\n  \"attention_probs_dropout_prob\": %g,\n"
            "  \"initializer_range\": 0.02,\n  \"pad_token_id\": 0,\n"
            "  \"position_embedding_type\": \"absolute\",\n  \"tie_word_embeddings\": true",
            (double)cfg->ln_eps, (double)cfg->hidden_dropout, (double)cfg->attn_dropout);
    if (num_labels > 0) {
        fprintf(f, ",\n  \"id2label\": {");
        for (int64_t i = 0; i < num_labels; i++)
            fprintf(f, "%s\"%lld\": \"LABEL_%lld\"", i ? ", " : "", (long long)i, (long long)i);
        fprintf(f, "},\n  \"label2id\": {");
        for (int64_t i = 0; i < num_labels; i++)
            fprintf(f, "%s\"LABEL_%lld\": %lld", i ? ", " : "", (long long)i, (long long)i);
        fprintf(f, "}");
    }
    fprintf(f, "\n}\n");
    if (atomic_file_commit(f, tmp, path, err, sizeof err) != 0)
        ct_fatal_hint("check the disk space", "export --hf: %s", err);
}

/* ctrain export --hf DIR CKPT [--vocab FILE]: config.json, model.safetensors
 * (ctrain's BERT names are Hugging Face's), and with --vocab the vocab.txt
 * and a tokenizer_config.json (lower-cased WordPiece, as ctrain's), so that
 * BertForMaskedLM / BertForSequenceClassification.from_pretrained(DIR) and
 * BertTokenizer.from_pretrained(DIR) open it. The architecture follows the
 * head in the file: classifier.weight -> sequence classification (its rows
 * are the labels), cls.predictions.* -> masked LM, neither -> BertModel. */
static int export_hf(const char *dir, const char *ckpt, const char *vocab)
{
    StFile f;
    char err[1024];
    if (st_open(ckpt, &f, err, sizeof err) != ST_OK)
        ct_fatal_hint("pass a file written by ctrain train --save or --save-every", "%s", err);
    const char *model = st_meta(&f, "model");
    const int64_t V = rows_of(&f, "bert.embeddings.word_embeddings.weight");
    BertConfig cfg;
    if (!model || V < 1 || bert_config_named(&cfg, model, (int)V) != 0) {
        st_close(&f);
        ct_fatal_hint("export --hf writes BERT models; ctrain export CKPT OUT writes any model's "
                      "weights", "%s is not a ctrain BERT checkpoint (model '%s')", ckpt,
                      model ? model : "unknown");
    }
    char name[128];
    snprintf(name, sizeof name, "bert.encoder.layer.%d.output.dense.weight", cfg.layers - 1);
    const int64_t D = rows_of(&f, "bert.embeddings.position_embeddings.weight") > 0
                          ? st_find(&f, "bert.embeddings.word_embeddings.weight")->shape[1] : -1;
    if (D != cfg.hidden || !st_find(&f, name)) {
        st_close(&f);
        ct_fatal_hint("the checkpoint and its \"model\" metadata disagree: re-save it with ctrain",
                      "%s: the tensors are not those of a %s", ckpt, model);
    }
    cfg.max_pos = (int)rows_of(&f, "bert.embeddings.position_embeddings.weight");
    cfg.type_vocab = (int)rows_of(&f, "bert.embeddings.token_type_embeddings.weight");
    const int64_t labels = rows_of(&f, "classifier.weight");
    const char *arch = labels > 0 ? "BertForSequenceClassification"
                       : st_find(&f, "cls.predictions.bias") ? "BertForMaskedLM" : "BertModel";
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        st_close(&f);
        ct_fatal_hint("pass a folder that can be created", "export --hf: cannot create %s: %s",
                      dir, strerror(errno));
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int kept, dropped;
    const int code = export_weights(&f, path, &kept, &dropped, err, sizeof err);
    st_close(&f);
    if (code != ST_OK) export_fail(code, err);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_hf_config(path, &cfg, arch, labels);
    if (vocab) {
        snprintf(path, sizeof path, "%s/vocab.txt", dir);
        if (atomic_file_copy(vocab, path, err, sizeof err) != 0)
            ct_fatal_hint("pass --vocab the vocab.txt the model was trained with, to a writable "
                          "folder", "export --hf: %s", err);
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        char tmp[1100];
        FILE *t = atomic_file_open(path, tmp, sizeof tmp, err, sizeof err);
        if (t) fprintf(t, "{\n  \"tokenizer_class\": \"BertTokenizer\",\n  \"do_lower_case\": "
                       "true,\n  \"model_max_length\": %d\n}\n", cfg.max_pos);
        if (!t || atomic_file_commit(t, tmp, path, err, sizeof err) != 0)
            ct_fatal_hint("check the disk space", "export --hf: %s", err);
    }
    printf("exported %s (%s, %d tensors) to %s: config.json, model.safetensors%s\n", ckpt, arch,
           kept, dir, vocab ? ", vocab.txt, tokenizer_config.json" : "");
    return 0;
}

enum { EXPORT_HF = 256, EXPORT_VOCAB };

static const struct option export_table[] = {
    CLI_VALUE("hf", EXPORT_HF), CLI_VALUE("vocab", EXPORT_VOCAB), CLI_HELP, {0}};

int cmd_export(int argc, char **argv)
{
    const char *hf = NULL, *vocab = NULL, *file[2] = {NULL, NULL};
    int n = 0;   /* the words that are not options (the first two kept) */
    CliOpts p;
    cli_begin(&p, "export", export_table, argc, argv);
    for (int val; (val = cli_next(&p)) != -1;) {
        if (val == 'h') {
            export_usage();
            return 0;
        }
        if (val == EXPORT_HF) hf = p.value;
        else if (val == EXPORT_VOCAB) vocab = p.value;
        else if (val == CLI_WORD) {
            if (n < 2) file[n] = p.value;
            n++;
        } else cli_refuse(&p);
    }
    if (hf) {
        if (n > 1)
            ct_fatal_hint("ctrain export --hf DIR CKPT [--vocab vocab.txt]",
                          "export --hf: unexpected argument '%s'", file[1]);
        if (n == 0)
            ct_fatal_hint("ctrain export --hf DIR CKPT [--vocab vocab.txt]",
                          "export --hf takes a folder and a checkpoint");
        return export_hf(hf, file[0], vocab);
    }
    if (vocab) cli_fail("export", "--vocab goes with --hf DIR (a Hugging Face folder)");
    if (n != 2)
        ct_fatal_hint("ctrain export CKPT OUT (ctrain export --help)",
                      "export takes a checkpoint and an output file, got %d argument%s", n,
                      n == 1 ? "" : "s");
    const char *in = file[0], *out = file[1];
    if (!strcmp(in, out))
        ct_fatal_hint("write the export to another file", "export would overwrite %s", in);
    StFile f;
    char err[1024];
    if (st_open(in, &f, err, sizeof err) != ST_OK)
        ct_fatal_hint("pass a file written by ctrain train --save or --save-every", "%s", err);
    int kept, dropped;
    int code = export_weights(&f, out, &kept, &dropped, err, sizeof err);
    st_close(&f);
    if (code != ST_OK) export_fail(code, err);
    printf("exported %d tensors of %s to %s (left out %d training-state entries)\n", kept, in,
           out, dropped);
    return 0;
}
