/* fuzz_checkpoint.c — libFuzzer harness: the input as a checkpoint loaded
 * into a small model (fuzz_model.h), as --load and --resume load one
 * (train/io/checkpoint.h): once strictly with a training checkpoint's
 * tensors (ckpt_load, keeping the file to read its metadata as a resume
 * does), once as weights with CKPT_ALLOW_MISSING | CKPT_ALLOW_EXTRA (a
 * fine-tuning --load). A refusal must say why and leave the model as it was.
 */
#include "fuzz_util.h"
#include "fuzz_model.h"
#include "engine/mem.h"

static Ctx g_ctx;
static ParamSet g_ps;

/* The model's values and buffers as bytes, for "a refusal changes nothing". */
static size_t model_bytes(uint8_t *out)
{
    size_t o = g_ps.total * sizeof(float);
    params_to_host(&g_ps, (float *)out);
    for (int i = 0; i < g_ps.nb; i++) {
        size_t b = g_ps.b[i].numel * dtype_size(g_ps.b[i].dtype);
        mem_to_host(&g_ctx, out + o, g_ps.b[i].t->data, b);
        o += b;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        fuzz_quiet();
        ctx_init(&g_ctx, DEV_CPU, 0, 1);
        fuzz_model_build(&g_ps, &g_ctx);
        ready = 1;
    }
    static uint8_t before[4096], after[4096];
    char path[64], err[1024] = "";
    int fd = fuzz_file_open(path, data, size);
    FuzzTrainState s;
    fuzz_state_init(&s);
    StFile keep;
    size_t nb = model_bytes(before);
    int st = ckpt_load(path, &g_ps, "fuzz", s.t, s.n, 0, &keep, err, sizeof err);
    if (st == CKPT_OK) {
        const char *kind = st_meta(&keep, "ctrain_checkpoint");
        const char *steps = st_meta(&keep, "steps");
        if (kind && steps && strlen(kind) + strlen(steps) == 1) fputc(0, stderr);
        st_close(&keep);
    } else {
        fuzz_check(err[0], "ckpt_load: status %d without a message", st);
        fuzz_check(model_bytes(after) == nb && !memcmp(before, after, nb),
                   "a refused load (%s) changed the model", err);
        fuzz_check(ckpt_hint(st, 0) != NULL, "no hint for status %d", st);
    }
    err[0] = 0;
    st = ckpt_load(path, &g_ps, "fuzz", NULL, 0, CKPT_ALLOW_MISSING | CKPT_ALLOW_EXTRA, NULL, err,
                   sizeof err);
    fuzz_check(st == CKPT_OK || err[0], "ckpt_load (fine-tuning): status %d without a message", st);
    close(fd);
    return 0;
}
