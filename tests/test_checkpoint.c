/* test_checkpoint.c — safetensors checkpoints on the CPU backend:
 *   - save a ParamSet (an OHWI conv weight, f32 params, f32 running stats,
 *     an i64 num_batches_tracked) and load it into a differently seeded one:
 *     bit-identical params and buffers;
 *   - the raw file: 8-aligned data section, header JSON as PyTorch writes it,
 *     the conv weight stored in PyTorch's [O, I, H, W] order, metadata;
 *   - refusals with their messages: truncated (data and header), a flipped
 *     data byte (checksum), wrong shape, missing / extra tensor, wrong dtype,
 *     garbage, empty, nonexistent, JSON syntax, unknown dtype, overlapping
 *     offsets; a refused load changes nothing; the fatal wrappers give hints;
 *   - atomic save: a write failing part way (st_test_fail_writes_after)
 *     leaves the old file intact and no temp file behind;
 *   - a file in the exact bytes PyTorch's safetensors writer produces (no
 *     ctrain CRC) loads; F16 files load into f32; generic named tensors.
 * CHECK_VERBOSE=1 also prints each refusal message.
 */
#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "file_util.h"
#include "engine/mem.h"
#include "engine/params.h"
#include "train/io/checkpoint.h"
#include "train/io/safetensors.h"

/* conv1.weight: PyTorch [O, I, H, W] = [4, 3, 3, 2], memory [O, H, W, I] */
enum { O_ = 4, I_ = 3, H_ = 3, W_ = 2 };
enum { V_BASE, V_SHAPE, V_MISSING, V_EXTRA, V_DTYPE };

static char g_dir[64];
static char g_err[1024];

static const char *path_in(const char *name)
{
    static char buf[4][256];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* A small model: a conv stem, a batch norm with its buffers, a linear head. */
static void model_build(ParamSet *ps, Ctx *c, int variant, uint64_t seed)
{
    params_init(ps);
    params_add_layout(ps, "conv1.weight", 4, (int64_t[]){O_, I_, H_, W_}, LAYOUT_OHWI,
                      INIT_NORMAL, 0.5f, 1);
    params_add(ps, "bn1.weight", 1, (int64_t[]){4}, INIT_UNIFORM, 1.0f, 0);
    params_add(ps, "bn1.bias", 1, (int64_t[]){4}, INIT_UNIFORM, 1.0f, 0);
    params_add(ps, "fc.weight", 2, (int64_t[]){variant == V_SHAPE ? 6 : 5, 4}, INIT_UNIFORM, 0.3f, 1);
    if (variant != V_EXTRA) params_add(ps, "fc.bias", 1, (int64_t[]){5}, INIT_UNIFORM, 0.3f, 0);
    if (variant == V_MISSING) params_add(ps, "fc2.weight", 2, (int64_t[]){2, 5}, INIT_UNIFORM, 0.3f, 1);
    params_add_buffer(ps, "bn1.running_mean", DT_F32, 1, (int64_t[]){4}, INIT_ZERO);
    params_add_buffer(ps, "bn1.running_var", DT_F32, 1, (int64_t[]){4}, INIT_ONE);
    params_add_buffer(ps, "bn1.num_batches_tracked", variant == V_DTYPE ? DT_I32 : DT_I64, 0, NULL,
                      INIT_ZERO);
    params_alloc(ps, c, seed);
    /* buffers start at 0 / 1 whatever the seed: give them seed-dependent values */
    check_seed(seed * 31 + 5);
    for (int i = 0; i < ps->nb; i++) {
        BufferInfo *bi = &ps->b[i];
        if (bi->dtype == DT_F32) {
            float v[4];
            check_fill(v, bi->numel, -2, 2);
            mem_to_device(c, bi->t->data, v, bi->numel * sizeof(float));
        } else {
            int64_t v = 1000 + (int64_t)seed;
            int32_t v32 = (int32_t)v;
            mem_to_device(c, bi->t->data, bi->dtype == DT_I64 ? (void *)&v : (void *)&v32,
                          dtype_size(bi->dtype));
        }
    }
}

/* Everything a ParamSet holds, as bytes in a fixed order (for comparing). */
static size_t model_bytes(const ParamSet *ps, unsigned char *out)
{
    size_t o = ps->total * sizeof(float);
    params_to_host(ps, (float *)out);
    for (int i = 0; i < ps->nb; i++) {
        tensor_to_host(out + o, ps->b[i].t);
        o += ps->b[i].numel * dtype_size(ps->b[i].dtype);
    }
    return o;
}

static int model_equal(const ParamSet *a, const ParamSet *b)
{
    static unsigned char x[4096], y[4096];
    size_t nx = model_bytes(a, x), ny = model_bytes(b, y);
    return nx == ny && memcmp(x, y, nx) == 0;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A file from a header (padded to 8 with spaces, as the reference writer
 * does) and a data section. */
static void write_st(const char *path, const char *header, const void *data, size_t dlen)
{
    size_t h = strlen(header), pad = (8 - h % 8) % 8;
    unsigned char *buf = malloc(8 + h + pad + dlen);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)(h + pad) >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', pad);
    if (dlen) memcpy(buf + 8 + h + pad, data, dlen);
    file_write(path, buf, 8 + h + pad + dlen);
    free(buf);
}

/* code is want, and the message holds every string in the NULL-ended list. */
static void check_err(const char *name, int got, int want, ...)
{
    va_list ap;
    va_start(ap, want);
    const char *s, *missing = NULL;
    while ((s = va_arg(ap, const char *)))
        if (!missing && !strstr(g_err, s)) missing = s;
    va_end(ap);
    if (getenv("CHECK_VERBOSE")) printf("    [%s] %s\n", name, g_err);
    check_true(name, got == want && !missing, "status %d (want %d), message \"%s\"%s%s%s", got,
               want, got ? g_err : "", missing ? " lacks \"" : "", missing ? missing : "",
               missing ? "\"" : "");
}

static int count_tmp_files(void)
{
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static void test_roundtrip(Ctx *c)
{
    ParamSet a, b;
    model_build(&a, c, V_BASE, 1);
    model_build(&b, c, V_BASE, 2);
    check_true("roundtrip.seeds_differ", !model_equal(&a, &b), "seeds 1 and 2 gave the same model");
    const char *meta[] = {"epoch", "3", "model", "test"};
    const char *p = path_in("a.safetensors");
    int code = ckpt_save_params(&a, p, meta, 2, g_err, sizeof g_err);
    check_true("save.ok", code == CKPT_OK, "%s", g_err);
    code = ckpt_load_params(&b, p, "test", 0, g_err, sizeof g_err);
    check_true("load.ok", code == CKPT_OK, "%s", g_err);
    check_true("roundtrip.bit_identical", model_equal(&a, &b), "params or buffers differ after load");

    /* the raw file */
    size_t len;
    unsigned char *raw = (unsigned char *)file_read(p, &len);
    uint64_t n = le64(raw);
    check_true("file.data_8_aligned", (8 + n) % 8 == 0 && n + 8 <= len, "header length %llu",
               (unsigned long long)n);
    size_t last = 8 + n - 1;
    while (last > 8 && raw[last] == ' ') last--;
    check_true("file.header_is_object", raw[8] == '{' && raw[last] == '}', "header %.40s...",
               (const char *)raw + 8);
    char *hdr = strndup((const char *)raw + 8, n);
    check_true("file.header_pytorch_form",
               strstr(hdr, "\"conv1.weight\":{\"dtype\":\"F32\",\"shape\":[4,3,3,2],\"data_offsets\":[") &&
               strstr(hdr, "\"bn1.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],") &&
               strstr(hdr, "\"format\":\"pt\"") && strstr(hdr, "\"ctrain_version\":\"1\""),
               "header: %s", hdr);
    free(hdr);
    StFile f;
    code = st_open(p, &f, g_err, sizeof g_err);
    check_true("file.parses", code == ST_OK, "%s", g_err);
    if (code == ST_OK) {
        const StEntry *e = st_find(&f, "conv1.weight");
        const char *crc = st_meta(&f, "ctrain_crc32");
        check_true("file.metadata", crc && strlen(crc) == 8 && st_meta(&f, "epoch") &&
                   strcmp(st_meta(&f, "epoch"), "3") == 0 && !st_meta(&f, "nope"),
                   "crc %s", crc ? crc : "(none)");
        int aligned = 1;
        for (int i = 0; i < f.n; i++) aligned &= f.e[i].begin % f.e[i].elem_size == 0;
        check_true("file.tensors_aligned", aligned, "a tensor starts off its element size");
        /* element [o=3, i=1, h=2, w=1]: at its PyTorch index in the file */
        float mem[256];
        params_to_host(&a, mem);
        const ParamInfo *pi = &a.p[0];
        int o = 3, i = 1, h = 2, w = 1;
        float want = mem[pi->offset + ((o * H_ + h) * W_ + w) * I_ + i], got;
        memcpy(&got, raw + 8 + n + e->begin + (size_t)(((o * I_ + i) * H_ + h) * W_ + w) * 4, 4);
        check_true("file.conv_weight_oihw", e && e->ndim == 4 && e->shape[1] == I_ &&
                   memcmp(&got, &want, 4) == 0, "file has %g, memory [3,2,1,1] has %g", got, want);
        st_close(&f);
    }
    free(raw);
    params_free(&a);
    params_free(&b);
}

static void test_refusals(Ctx *c)
{
    ParamSet a;
    model_build(&a, c, V_BASE, 1);
    const char *good = path_in("good.safetensors");
    ckpt_save_params(&a, good, NULL, 0, g_err, sizeof g_err);
    size_t len;
    unsigned char *raw = (unsigned char *)file_read(good, &len);
    uint64_t n = le64(raw);
    int code;

    const char *p = path_in("cut_data.safetensors");
    file_write(p, raw, len - 5);
    code = ckpt_load_params(&a, p, "test", 0, g_err, sizeof g_err);
    check_err("refuse.truncated_data", code, CKPT_ERR_TRUNCATED, "cut_data.safetensors is truncated",
              "ends at byte", NULL);
    p = path_in("cut_header.safetensors");
    file_write(p, raw, 8 + n / 2);
    code = ckpt_load_params(&a, p, "test", 0, g_err, sizeof g_err);
    check_err("refuse.truncated_header", code, CKPT_ERR_TRUNCATED, "is truncated: the header is", NULL);
    p = path_in("flip.safetensors");
    raw[8 + n + 13] ^= 0x10;
    file_write(p, raw, len);
    raw[8 + n + 13] ^= 0x10;
    code = ckpt_load_params(&a, p, "test", 0, g_err, sizeof g_err);
    check_err("refuse.checksum", code, CKPT_ERR_CHECKSUM, "checksum mismatch: the file is corrupt", NULL);
    free(raw);

    /* model mismatches; a refused load leaves the model as it was */
    ParamSet b, keep;
    model_build(&b, c, V_SHAPE, 2);
    model_build(&keep, c, V_SHAPE, 2);
    code = ckpt_load_params(&b, good, "test", 0, g_err, sizeof g_err);
    check_err("refuse.shape", code, CKPT_ERR_MISMATCH, "tensor 'fc.weight' has shape [5, 4] in the "
              "file but model test needs [6, 4]", NULL);
    check_true("refuse.changes_nothing", model_equal(&b, &keep), "a refused load changed the model");
    params_free(&b);
    params_free(&keep);
    model_build(&b, c, V_MISSING, 2);
    code = ckpt_load_params(&b, good, "resnet50", 0, g_err, sizeof g_err);
    check_err("refuse.missing", code, CKPT_ERR_MISMATCH, "good.safetensors has no tensor 'fc2.weight' "
              "that model resnet50 needs", NULL);
    params_free(&b);
    model_build(&b, c, V_EXTRA, 2);
    code = ckpt_load_params(&b, good, "test", 0, g_err, sizeof g_err);
    check_err("refuse.extra", code, CKPT_ERR_EXTRA, "holds tensor 'fc.bias' that model test does not "
              "have", NULL);
    code = ckpt_load_params(&b, good, "test", CKPT_ALLOW_EXTRA, g_err, sizeof g_err);
    check_true("extra.allowed", code == CKPT_OK, "%s", g_err);
    params_free(&b);
    model_build(&b, c, V_DTYPE, 2);
    code = ckpt_load_params(&b, good, "test", 0, g_err, sizeof g_err);
    check_err("refuse.dtype", code, CKPT_ERR_MISMATCH, "tensor 'bn1.num_batches_tracked' is I64 in "
              "the file but model test needs I32", NULL);
    params_free(&b);

    /* not safetensors at all */
    p = path_in("garbage.safetensors");
    const char *text = "this is a text file, not a checkpoint\n";
    file_write(p, text, strlen(text));
    code = ckpt_load_params(&a, p, "test", 0, g_err, sizeof g_err);
    check_err("refuse.garbage", code, CKPT_ERR_FORMAT, "garbage.safetensors is not a safetensors file",
              "header length", NULL);
    write_st(p, "[1, 2, 3]", NULL, 0);
    code = ckpt_load_params(&a, p, "test", 0, g_err, sizeof g_err);
    check_err("refuse.not_object", code, CKPT_ERR_FORMAT, "does not start with '{'", NULL);
    p = path_in("empty.safetensors");
    file_write(p, "", 0);
    code = ckpt_load_params(&a, p, "test", 0, g_err, sizeof g_err);
    check_err("refuse.empty", code, CKPT_ERR_FORMAT, "empty.safetensors is empty", NULL);
    p = path_in("short.safetensors");
    file_write(p, "\x10\x00\x00", 3);
    code = ckpt_load_params(&a, p, "test", 0, g_err, sizeof g_err);
    check_err("refuse.short", code, CKPT_ERR_FORMAT, "is 3 bytes, too short", NULL);
    code = ckpt_load_params(&a, path_in("nonexistent.safetensors"), "test", 0, g_err, sizeof g_err);
    check_err("refuse.nonexistent", code, CKPT_ERR_IO, "cannot open", "nonexistent.safetensors: No "
              "such file or directory", NULL);
    code = ckpt_load_params(&a, g_dir, "test", 0, g_err, sizeof g_err);
    check_err("refuse.directory", code, CKPT_ERR_IO, "is a directory", NULL);

    /* damaged headers, read through the format layer */
    StFile f;
    float d[4] = {1, 2, 3, 4};
    p = path_in("hdr.safetensors");
    write_st(p, "{\"a\":{\"dtype\":\"F32\",,\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    code = st_open(p, &f, g_err, sizeof g_err);
    check_err("refuse.json_syntax", code, ST_ERR_FORMAT, "JSON syntax error at byte 20 of the header",
              NULL);
    write_st(p, "{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    code = st_open(p, &f, g_err, sizeof g_err);
    check_err("refuse.unknown_dtype", code, ST_ERR_FORMAT, "tensor 'a' has unknown dtype \"F33\"", NULL);
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d, 12);
    code = st_open(p, &f, g_err, sizeof g_err);
    check_err("refuse.overlap", code, ST_ERR_FORMAT, "tensors 'a' and 'b' overlap", NULL);
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d, 8);
    code = st_open(p, &f, g_err, sizeof g_err);
    check_err("refuse.size_vs_shape", code, ST_ERR_FORMAT, "tensor 'a' is F32 [3] (12 bytes) but its "
              "data_offsets [0, 8] hold 8 bytes", NULL);
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d, 16);
    code = st_open(p, &f, g_err, sizeof g_err);
    check_err("refuse.trailing_data", code, ST_ERR_FORMAT, "12 bytes after the last tensor", NULL);
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":"
                "\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", d, 16);
    code = st_open(p, &f, g_err, sizeof g_err);
    check_err("refuse.duplicate_name", code, ST_ERR_FORMAT, "tensor name 'a' appears twice", NULL);
    params_free(&a);
}

/* Run fn in a child; check it exits 1 with every string in want on stderr. */
static void check_dies(const char *name, void (*fn)(void), const char *want1, const char *want2)
{
    int fds[2];
    if (pipe(fds) != 0) { check_true(name, 0, "pipe failed"); return; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    char buf[2048] = {0};
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf - 1 && (got = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)got;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    check_true(name, WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(buf, want1) && strstr(buf, want2),
               "status %d, message: %s", st, buf);
}

static void die_load_missing(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    ParamSet b;
    model_build(&b, &c, V_MISSING, 2);
    ckpt_load_params_or_die(&b, path_in("good.safetensors"), "resnet50", 0);
}

static void die_save_nodir(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    ParamSet b;
    model_build(&b, &c, V_BASE, 2);
    ckpt_save_params_or_die(&b, path_in("no/such/dir/x.safetensors"), NULL, 0);
}

static void test_fatal_hints(void)
{
    check_dies("die.load_missing", die_load_missing, "ctrain: checkpoint ",
               "hint: the checkpoint was saved from a different model");
    check_dies("die.save_no_dir", die_save_nodir, "No such file or directory",
               "hint: check that the directory exists");
}

static void test_atomic_save(Ctx *c)
{
    ParamSet a, b, r;
    model_build(&a, c, V_BASE, 1);
    model_build(&b, c, V_BASE, 2);
    model_build(&r, c, V_BASE, 3);
    const char *p = path_in("atomic.safetensors");
    int code = ckpt_save_params(&a, p, NULL, 0, g_err, sizeof g_err);
    check_true("atomic.first_save", code == CKPT_OK, "%s", g_err);
    size_t len;
    free(file_read(p, &len));
    const long fail_at[3] = {0, 100, (long)len - 10};   /* length field, header, data */
    for (int k = 0; k < 3; k++) {
        char name[64];
        st_test_fail_writes_after(fail_at[k]);
        code = ckpt_save_params(&b, p, NULL, 0, g_err, sizeof g_err);
        st_test_fail_writes_after(-1);
        snprintf(name, sizeof name, "atomic.fails_after_%ld", fail_at[k]);
        check_err(name, code, CKPT_ERR_IO, "No space left on device", "atomic.safetensors was left as "
                  "it was", NULL);
        snprintf(name, sizeof name, "atomic.old_file_loads_%ld", fail_at[k]);
        code = ckpt_load_params(&r, p, "test", 0, g_err, sizeof g_err);
        check_true(name, code == CKPT_OK && model_equal(&r, &a), "%s", code ? g_err : "values differ");
    }
    check_true("atomic.no_temp_left", count_tmp_files() == 0, "%d *.tmp.* files in %s",
               count_tmp_files(), g_dir);
    code = ckpt_save_params(&b, p, NULL, 0, g_err, sizeof g_err);
    check_true("atomic.replace", code == CKPT_OK &&
               ckpt_load_params(&r, p, "test", 0, g_err, sizeof g_err) == CKPT_OK &&
               model_equal(&r, &b), "%s", g_err);
    check_true("atomic.no_temp_after_success", count_tmp_files() == 0, "temp file left");
    /* a save killed before its rename left PATH.tmp.PID: the next save removes
     * it when that process is gone, and leaves a live process's alone */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char stale[700], live[700];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", p, (long)dead);
    snprintf(live, sizeof live, "%s.tmp.%ld", p, (long)getppid());
    FILE *sf = fopen(stale, "w"), *lf = fopen(live, "w");
    if (sf) { fputs("half a file", sf); fclose(sf); }
    if (lf) fclose(lf);
    code = ckpt_save_params(&a, p, NULL, 0, g_err, sizeof g_err);
    check_true("atomic.stale_temp_removed", code == CKPT_OK && access(stale, F_OK) != 0,
               "%s still there after the next save (%s)", stale, code ? g_err : "saved");
    check_true("atomic.live_temp_kept", access(live, F_OK) == 0, "%s was removed", live);
    unlink(live);
    params_free(&a);
    params_free(&b);
    params_free(&r);
}

/* The bytes safetensors.torch.save_file writes for this model's state dict:
 * tensors sorted by dtype (I64 before F32), then by name; compact JSON with
 * keys dtype, shape, data_offsets; padded with spaces to 8; no CRC. */
static void test_pytorch_file(Ctx *c, int with_meta)
{
    static const char *names[7] = {"bn1.bias", "bn1.running_mean", "bn1.running_var", "bn1.weight",
                                   "conv1.weight", "fc.bias", "fc.weight"};
    static const int numel[7] = {4, 4, 4, 4, O_ * I_ * H_ * W_, 5, 20};
    static const char *shapes[7] = {"[4]", "[4]", "[4]", "[4]", "[4,3,3,2]", "[5]", "[5,4]"};
    char hdr[2048];
    size_t h = (size_t)snprintf(hdr, sizeof hdr, "{%s\"bn1.num_batches_tracked\":{\"dtype\":\"I64\","
                                "\"shape\":[],\"data_offsets\":[0,8]}",
                                with_meta ? "\"__metadata__\":{\"format\":\"pt\"}," : "");
    unsigned char data[1024];
    int64_t nbt = 7;
    memcpy(data, &nbt, 8);
    size_t off = 8;
    float vals[7][72];
    for (int t = 0; t < 7; t++) {
        for (int i = 0; i < numel[t]; i++) vals[t][i] = (float)(t * 100 + i) * 0.25f - 3.0f;
        h += (size_t)snprintf(hdr + h, sizeof hdr - h, ",\"%s\":{\"dtype\":\"F32\",\"shape\":%s,"
                              "\"data_offsets\":[%zu,%zu]}", names[t], shapes[t], off,
                              off + (size_t)numel[t] * 4);
        memcpy(data + off, vals[t], (size_t)numel[t] * 4);
        off += (size_t)numel[t] * 4;
    }
    snprintf(hdr + h, sizeof hdr - h, "}");
    const char *p = path_in(with_meta ? "torch_meta.safetensors" : "torch.safetensors");
    write_st(p, hdr, data, off);

    ParamSet b;
    model_build(&b, c, V_BASE, 2);
    int code = ckpt_load_params(&b, p, "test", 0, g_err, sizeof g_err);
    const char *name = with_meta ? "pytorch_file.with_format_loads" : "pytorch_file.loads";
    check_true(name, code == CKPT_OK, "%s", g_err);
    float mem[256], want[256];
    params_to_host(&b, mem);
    int ok = 1;
    for (int t = 0; t < 7; t++) {
        Tensor *x = params_get(&b, names[t]);
        if (x) {
            const ParamInfo *pi = NULL;
            for (int i = 0; i < b.n; i++)
                if (strcmp(b.p[i].name, names[t]) == 0) pi = &b.p[i];
            params_layout_from_torch(pi, want, vals[t]);   /* OHWI for conv1.weight */
            ok &= memcmp(mem + pi->offset, want, pi->numel * 4) == 0;
        } else {
            float got[4];
            tensor_to_host(got, params_get_buffer(&b, names[t]));
            ok &= memcmp(got, vals[t], 16) == 0;
        }
    }
    int64_t got_nbt = 0;
    tensor_to_host(&got_nbt, params_get_buffer(&b, "bn1.num_batches_tracked"));
    check_true(with_meta ? "pytorch_file.with_format_values" : "pytorch_file.values",
               ok && got_nbt == 7, "values differ (num_batches_tracked %lld)", (long long)got_nbt);
    params_free(&b);
}

/* Byte for byte what the reference implementation's serialize() produces
 * for {"attn.0": f32 [1, 2, 3] = 0..5} with no metadata (its own unit test),
 * and for no tensors with {"framework": "pt"}. */
static void test_reference_bytes(void)
{
    static const unsigned char one[] = {
        64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
        116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
        58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
        101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
        0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
    static const unsigned char empty[] = {
        40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
        95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
        116, 34, 125, 125, 32, 32, 32, 32, 32};
    const char *p = path_in("reference.safetensors");
    file_write(p, one, sizeof one);
    float v[6] = {0}, want[6] = {0, 1, 2, 3, 4, 5};
    CkptTensor t = {"attn.0", DT_F32, 3, {1, 2, 3}, v};
    int code = ckpt_load_tensors(p, &t, 1, 0, g_err, sizeof g_err);
    check_true("reference_bytes.tensor", code == CKPT_OK && !memcmp(v, want, sizeof v), "%s",
               code ? g_err : "values differ");
    file_write(p, empty, sizeof empty);
    StFile f;
    code = st_open(p, &f, g_err, sizeof g_err);
    check_true("reference_bytes.empty_with_metadata", code == ST_OK && f.n == 0 &&
               st_meta(&f, "framework") && !strcmp(st_meta(&f, "framework"), "pt"), "%s", g_err);
    if (!code) st_close(&f);
}

/* Parameters stored as F16 (a half model's file) load into f32, rounded. */
static void test_half_file(Ctx *c)
{
    ParamSet a, b;
    model_build(&a, c, V_BASE, 1);
    model_build(&b, c, V_BASE, 2);
    float mem[256];
    params_to_host(&a, mem);
    CkptTensor t[16];
    uint16_t half[256];
    float torch[256];
    unsigned char bufs[3][64];
    int n = 0;
    for (int i = 0; i < a.n; i++) {
        const ParamInfo *pi = &a.p[i];
        params_layout_to_torch(pi, torch, mem + pi->offset);
        for (size_t k = 0; k < pi->numel; k++) half[pi->offset + k] = f32_to_f16(torch[k]);
        t[n] = (CkptTensor){pi->name, DT_F16, pi->ndim, {0}, half + pi->offset};
        memcpy(t[n].shape, pi->shape, sizeof t[n].shape);
        n++;
    }
    for (int i = 0; i < a.nb; i++) {
        const BufferInfo *bi = &a.b[i];
        tensor_to_host(bufs[i], bi->t);
        t[n] = (CkptTensor){bi->name, bi->dtype, bi->ndim, {0}, bufs[i]};
        memcpy(t[n].shape, bi->shape, sizeof t[n].shape);
        n++;
    }
    const char *p = path_in("half.safetensors");
    int code = ckpt_save_tensors(p, t, n, NULL, 0, g_err, sizeof g_err);
    if (!code) code = ckpt_load_params(&b, p, "test", 0, g_err, sizeof g_err);
    check_true("half_file.loads", code == CKPT_OK, "%s", g_err);
    float got[256], want[256];
    params_to_host(&b, got);
    for (size_t k = 0; k < a.total; k++) want[k] = f16_to_f32(f32_to_f16(mem[k]));
    check_true("half_file.values_rounded", memcmp(got, want, a.total * 4) == 0,
               "loaded values are not the f16-rounded originals");
    params_free(&a);
    params_free(&b);
}

/* Named host tensors (training state) alone, and next to a model in one file. */
static void test_tensors(Ctx *c)
{
    int64_t step = 123456789012LL, step2 = 0;
    unsigned char rng[16], rng2[16] = {0};
    float m[7], m2[7] = {0};
    for (int i = 0; i < 16; i++) rng[i] = (unsigned char)(i * 37 + 1);
    check_fill(m, 7, -1, 1);
    CkptTensor t[3] = {{"step", DT_I64, 0, {0}, &step}, {"rng.state", DT_U8, 1, {16}, rng},
                       {"optim.m.fc.bias", DT_F32, 1, {7}, m}};
    CkptTensor u[3] = {{"step", DT_I64, 0, {0}, &step2}, {"rng.state", DT_U8, 1, {16}, rng2},
                       {"optim.m.fc.bias", DT_F32, 1, {7}, m2}};
    const char *p = path_in("state.safetensors");
    int code = ckpt_save_tensors(p, t, 3, NULL, 0, g_err, sizeof g_err);
    if (!code) code = ckpt_load_tensors(p, u, 3, 0, g_err, sizeof g_err);
    check_true("tensors.roundtrip", code == CKPT_OK && step2 == step && !memcmp(rng, rng2, 16) &&
               !memcmp(m, m2, sizeof m), "%s", code ? g_err : "values differ");

    ParamSet a, b;
    model_build(&a, c, V_BASE, 1);
    model_build(&b, c, V_BASE, 2);
    const char *meta[] = {"step", "17"};
    p = path_in("train_state.safetensors");
    code = ckpt_save(p, &a, t, 3, meta, 1, g_err, sizeof g_err);
    code = ckpt_load_params(&b, p, "test", 0, g_err, sizeof g_err);
    check_err("tensors.extra_beside_model", code, CKPT_ERR_EXTRA, "holds tensor '", NULL);
    step2 = 0;
    StFile f;
    code = ckpt_load(p, &b, "test", u, 3, 0, &f, g_err, sizeof g_err);
    check_true("tensors.with_model", code == CKPT_OK && model_equal(&a, &b) && step2 == step &&
               st_meta(&f, "step") && strcmp(st_meta(&f, "step"), "17") == 0, "%s",
               code ? g_err : "values or metadata differ");
    if (!code) st_close(&f);
    const char *bad[] = {"ctrain_crc32", "0"};
    code = ckpt_save(p, &a, NULL, 0, bad, 1, g_err, sizeof g_err);
    check_err("tensors.reserved_meta_key", code, CKPT_ERR_ARG, "is reserved", NULL);
    params_free(&a);
    params_free(&b);
}

static void remove_dir(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') unlink(path_in(e->d_name));
    closedir(d);
    rmdir(g_dir);
}

/* ckpt_load_params_except: a head of another shape keeps its values, the
 * rest comes from the file; without the skip the load is refused. */
static void test_new_head(Ctx *c)
{
    ParamSet a, b;
    model_build(&a, c, V_BASE, 1);       /* fc.weight [5, 4] */
    model_build(&b, c, V_SHAPE, 2);      /* fc.weight [6, 4]: another class count */
    const char *p = path_in("head.safetensors");
    check_true("head.save", ckpt_save_params(&a, p, NULL, 0, g_err, sizeof g_err) == CKPT_OK, "%s",
               g_err);
    int code = ckpt_load_params(&b, p, "test", 0, g_err, sizeof g_err);
    check_err("head.plain_load_refused", code, CKPT_ERR_MISMATCH, "fc.weight", "shape", NULL);
    static float before[512], got[512], want[512];
    params_to_host(&b, before);
    params_to_host(&a, want);
    const char *skip[] = {"fc.weight", "fc.bias"};
    code = ckpt_load_params_except(&b, p, "test", skip, 2, g_err, sizeof g_err);
    check_true("head.load_except_ok", code == CKPT_OK, "%s", g_err);
    params_to_host(&b, got);
    int bad = -1;
    for (int i = 0; i < b.n && bad < 0; i++) {
        const ParamInfo *pb = &b.p[i];
        const int head = !strcmp(pb->name, "fc.weight") || !strcmp(pb->name, "fc.bias");
        const float *ref = head ? before + pb->offset : want + a.p[i].offset;
        if (memcmp(got + pb->offset, ref, pb->numel * sizeof(float))) bad = i;
    }
    check_true("head.rest_loaded_head_kept", bad < 0, "parameter %s", bad >= 0 ? b.p[bad].name : "");
    unsigned char ba[4096], bb[4096];
    size_t na = model_bytes(&a, ba), nb = model_bytes(&b, bb);
    const size_t pa = a.total * sizeof(float), pb = b.total * sizeof(float);
    check_true("head.buffers_loaded", na - pa == nb - pb && !memcmp(ba + pa, bb + pb, na - pa),
               "buffers differ");
    params_free(&a);
    params_free(&b);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/ctrain_ckpt_XXXXXX");
    if (!mkdtemp(g_dir)) { perror("mkdtemp"); return 1; }
    check_seed(11);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_roundtrip(&c);
    test_refusals(&c);
    test_fatal_hints();
    test_atomic_save(&c);
    test_pytorch_file(&c, 0);
    test_pytorch_file(&c, 1);
    test_reference_bytes();
    test_half_file(&c);
    test_tensors(&c);
    test_new_head(&c);
    ctx_free(&c);
    remove_dir();
    return check_summary();
}
