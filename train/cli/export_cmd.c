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
 */
#include "commands.h"

#include <stdio.h>
#include <string.h>
#include "engine/error.h"
#include "train/io/safetensors.h"

#define TRAINING_STATE_PREFIX "__ctrain."

static void export_usage(void)
{
    printf("usage: ctrain export CKPT OUT\n\n"
           "Writes the model weights of CKPT (a --save file or a --save-every training\n"
           "checkpoint) to OUT as a PyTorch state_dict in safetensors form: every tensor but\n"
           "the training state (__ctrain.*: optimizer, step, grad scaler), so that\n"
           "load_state_dict(..., strict=True) in PyTorch takes it. OUT is written atomically.\n");
}

int cmd_export(int argc, char **argv)
{
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        export_usage();
        return 0;
    }
    if (argc != 2)
        ct_fatal_hint("ctrain export CKPT OUT (ctrain export --help)",
                      "export takes a checkpoint and an output file, got %d argument%s", argc,
                      argc == 1 ? "" : "s");
    const char *in = argv[0], *out = argv[1];
    if (!strcmp(in, out))
        ct_fatal_hint("write the export to another file", "export would overwrite %s", in);
    StFile f;
    char err[1024];
    if (st_open(in, &f, err, sizeof err) != ST_OK)
        ct_fatal_hint("pass a file written by ctrain train --save or --save-every", "%s", err);
    StWriter w;
    st_writer_init(&w);
    int kept = 0, dropped = 0, code = ST_OK;
    for (int i = 0; i < f.n && code == ST_OK; i++) {
        const StEntry *e = &f.e[i];
        if (!strncmp(e->name, TRAINING_STATE_PREFIX, strlen(TRAINING_STATE_PREFIX))) {
            dropped++;
            continue;
        }
        if (e->dtype < 0) {
            snprintf(err, sizeof err, "%s: tensor '%s' has dtype %s, which ctrain cannot copy",
                     in, e->name, e->dtype_name);
            code = ST_ERR_FORMAT;
            break;
        }
        code = st_writer_add(&w, e->name, (DType)e->dtype, e->ndim, e->shape, e->data, err,
                             sizeof err);
        kept++;
    }
    /* descriptive metadata; the writer's own keys (ctrain_crc32) are its to set */
    const char *keys[] = {"format", "model", "steps", "precision", "ctrain_version"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0] && code == ST_OK; k++) {
        const char *v = st_meta(&f, keys[k]);
        if (!v && !strcmp(keys[k], "format")) v = "pt";
        if (v) code = st_writer_meta(&w, keys[k], v, err, sizeof err);
    }
    if (code == ST_OK && kept == 0) {
        snprintf(err, sizeof err, "%s holds no model tensors (only training state)", in);
        code = ST_ERR_FORMAT;
    }
    if (code == ST_OK) code = st_writer_write(&w, out, err, sizeof err);
    st_writer_free(&w);
    st_close(&f);
    if (code != ST_OK)
        ct_fatal_hint(code == ST_ERR_IO ? "check that the folder exists, is writable and has room"
                                        : "pass a checkpoint written by ctrain",
                      "export: %s", err);
    printf("exported %d tensors of %s to %s (left out %d training-state entries)\n", kept, in,
           out, dropped);
    return 0;
}
