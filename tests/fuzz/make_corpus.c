/* make_corpus.c — writes the seed corpus of the harnesses, and the crash
 * cases found before the harnesses existed, with the project's own writers
 * where it has one (st_writer_write, ckpt_save, shard_write, vocab_build,
 * plan_store_put);
 * `make fuzz-corpus` runs it as
 *     make_corpus tests/fuzz/corpus tests/fuzz/crashes
 * Every file is a few hundred bytes and the same on every run, so the
 * committed corpus can be rewritten and compared.
 *
 * The crash cases: the 80,000-key metadata header of issue 17 (a
 * quadratic duplicate-key check: 50 s; about 1 MB), fortune entries that
 * all tokenize to nothing (UBSan in textcls_batch), IDX headers that
 * promise gigabytes (allocated before the data was read).
 */
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <zlib.h>

#include "fuzz_util.h"
#include "fuzz_model.h"
#include "data/text_shards.h"
#include "data/vocab_build.h"
#include "ops/plan_store.h"
#include "train/io/checkpoint.h"

static const char *g_out, *g_crash;
static char g_err[2048];

static void die(const char *what)
{
    fprintf(stderr, "make_corpus: %s: %s\n", what, g_err[0] ? g_err : strerror(errno));
    exit(1);
}

/* dir/name, with dir made when missing (a static buffer of 4). */
static const char *path_of(const char *root, const char *dir, const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root, dir);
    if (mkdir(buf[k], 0755) && errno != EEXIST) die(buf[k]);
    snprintf(buf[k], sizeof buf[k], "%s/%s/%s", root, dir, name);
    return buf[k];
}

static void put(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) die(path);
}

/* A seed of a text harness: the bytes of s (with its NULs: n given). */
static void plan_seeds(void);

static void seed(const char *harness, const char *name, const char *s, size_t n)
{
    put(path_of(g_out, harness, name), s, n);
}
#define SEED(h, name, lit) seed(h, name, lit, sizeof lit - 1)

static void *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    static char buf[1 << 20];
    *n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return buf;
}

/* A corpus of a few fortunes: the text vocab_build and shard_write read. */
static const char corpus_text[] =
    "The fortune cookie said: think.\n%\nA café is naïve, un-thinkable!\n"
    "Two lines\nof one entry.\n%\n中文 and 日本 code 10\n%\n\n%\nΣΑΣ straße 42?\n";

/* ---- safetensors and checkpoints ---- */

static void st_seeds(Ctx *c)
{
    StWriter w;
    st_writer_init(&w);
    float f32[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
    uint16_t f16[4] = {0x3c00, 0xc000, 0x7c00, 0x0001}, bf16[4] = {0x3f80, 0xbf80, 0x7f80, 1};
    int64_t i64 = -5;
    int32_t i32[3] = {1, 2, 3};
    uint8_t u8[5] = {0, 1, 2, 254, 255};
    if (st_writer_add(&w, "w", DT_F32, 2, (int64_t[]){2, 3}, f32, g_err, sizeof g_err) ||
        st_writer_add(&w, "h", DT_F16, 1, (int64_t[]){4}, f16, g_err, sizeof g_err) ||
        st_writer_add(&w, "layer.0.b", DT_BF16, 2, (int64_t[]){2, 2}, bf16, g_err, sizeof g_err) ||
        st_writer_add(&w, "step", DT_I64, 0, NULL, &i64, g_err, sizeof g_err) ||
        st_writer_add(&w, "n", DT_I32, 1, (int64_t[]){3}, i32, g_err, sizeof g_err) ||
        st_writer_add(&w, "u", DT_U8, 1, (int64_t[]){5}, u8, g_err, sizeof g_err) ||
        st_writer_add(&w, "empty", DT_F32, 2, (int64_t[]){0, 4}, f32, g_err, sizeof g_err) ||
        st_writer_meta(&w, "format", "pt", g_err, sizeof g_err) ||
        st_writer_meta(&w, "note", "a \"quoted\" \\ value \u00e9", g_err, sizeof g_err) ||
        st_writer_write(&w, path_of(g_out, "fuzz_safetensors", "dtypes.st"), g_err, sizeof g_err))
        die("dtypes.st");
    st_writer_free(&w);

    /* as PyTorch's writer lays it out: no ctrain_crc32, foreign dtypes */
    static const char hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                              "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]},"
                              "\"m\":{\"dtype\":\"BOOL\",\"shape\":[2,1],\"data_offsets\":[16,18]},"
                              "\"__metadata__\":{\"format\":\"pt\"}}";
    size_t hl = (sizeof hdr - 1 + 7) / 8 * 8;
    uint8_t file[512] = {0};
    uint64_t n = hl;
    memcpy(file, &n, 8);
    memset(file + 8, ' ', hl);
    memcpy(file + 8, hdr, sizeof hdr - 1);
    float a[2] = {1.5f, -2};
    double d = 3.25;
    memcpy(file + 8 + hl, a, 8);
    memcpy(file + 8 + hl + 8, &d, 8);
    file[8 + hl + 16] = 1;
    put(path_of(g_out, "fuzz_safetensors", "pytorch.st"), file, 8 + hl + 18);

    /* the checkpoint harness's model: weights, a training checkpoint, an f16 file */
    ParamSet ps;
    fuzz_model_build(&ps, c);
    if (ckpt_save_params(&ps, path_of(g_out, "fuzz_checkpoint", "weights.st"), NULL, 0, g_err,
                         sizeof g_err))
        die("weights.st");
    FuzzTrainState s;
    fuzz_state_init(&s);
    for (int i = 0; i < FUZZ_MODEL_P; i++) s.blocks[0][i] = 0.01f * i, s.blocks[1][i] = 1e-4f * i;
    s.opt_step = 3, s.scale = 65536, s.counts[0] = 2, s.step = 3, s.micro = 6, s.rng = 99;
    const char *meta[] = {"ctrain_checkpoint", "training", "model", "mlp", "optimizer", "adamw",
                          "precision", "fp32", "batch", "4", "accum", "2", "seed", "42",
                          "steps", "3"};
    const char *train_st = path_of(g_out, "fuzz_checkpoint", "training.st");
    if (ckpt_save(train_st, &ps, s.t, s.n, meta, 8, g_err, sizeof g_err)) die("training.st");
    size_t tn;
    void *tb = slurp(train_st, &tn);
    put(path_of(g_out, "fuzz_safetensors", "training.st"), tb, tn);

    st_writer_init(&w);
    static uint16_t half[FUZZ_MODEL_P];
    for (int i = 0; i < FUZZ_MODEL_P; i++) half[i] = (uint16_t)(0x3000 + i);
    float zero4[4] = {0}, one4[4] = {1, 1, 1, 1};
    int64_t nbt = 7;
    size_t off = 0;
    for (int i = 0; i < ps.n; i++) {
        if (st_writer_add(&w, ps.p[i].name, i % 2 ? DT_BF16 : DT_F16, ps.p[i].ndim,
                          ps.p[i].shape, half + off, g_err, sizeof g_err))
            die("weights_f16.st");
        off += ps.p[i].numel;
    }
    if (st_writer_add(&w, "bn1.running_mean", DT_F32, 1, (int64_t[]){4}, zero4, g_err, sizeof g_err) ||
        st_writer_add(&w, "bn1.running_var", DT_F32, 1, (int64_t[]){4}, one4, g_err, sizeof g_err) ||
        st_writer_add(&w, "bn1.num_batches_tracked", DT_I64, 0, NULL, &nbt, g_err, sizeof g_err) ||
        st_writer_write(&w, path_of(g_out, "fuzz_checkpoint", "weights_f16.st"), g_err, sizeof g_err))
        die("weights_f16.st");
    st_writer_free(&w);
    params_free(&ps);

    /* issue 17: 80,000 metadata keys took 50 s (a quadratic duplicate-key check) */
    size_t cap = 80000 * 16 + 64, len = 0;
    char *big = malloc(cap);
    if (!big) die("out of memory");
    len += (size_t)snprintf(big + 8, cap - 8, "{\"__metadata__\":{");
    for (int k = 0; k < 80000; k++)
        len += (size_t)snprintf(big + 8 + len, cap - 8 - len, "%s\"k%d\":\"\"", k ? "," : "", k);
    len += (size_t)snprintf(big + 8 + len, cap - 8 - len, "}}");
    while (len % 8) big[8 + len++] = ' ';
    n = len;
    memcpy(big, &n, 8);
    put(path_of(g_crash, "fuzz_safetensors", "meta_80k_keys.st"), big, 8 + len);
    free(big);
}

/* ---- IDX ---- */

static void put_gz(const char *path, const uint8_t *data, size_t n)
{
    uint8_t out[1024];
    z_stream z = {0};
    if (deflateInit2(&z, 9, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) die("zlib");
    z.next_in = (uint8_t *)data;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = sizeof out;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) die("zlib");
    put(path, out, sizeof out - z.avail_out);
    deflateEnd(&z);
}

static void idx_seeds(void)
{
    /* 2 images of 3 x 3, u8 */
    uint8_t img[4 + 12 + 18] = {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3};
    for (int i = 0; i < 18; i++) img[16 + i] = (uint8_t)(i * 14);
    uint8_t lab[4 + 4 + 2] = {0, 0, 0x08, 1, 0, 0, 0, 2, 7, 3};
    uint8_t f32[4 + 4 + 8] = {0, 0, 0x0D, 1, 0, 0, 0, 2, 0x3f, 0x80, 0, 0, 0x40, 0, 0, 0};
    put(path_of(g_out, "fuzz_idx", "images-ubyte"), img, sizeof img);
    put(path_of(g_out, "fuzz_idx", "labels-ubyte"), lab, sizeof lab);
    put(path_of(g_out, "fuzz_idx", "f32-ubyte"), f32, sizeof f32);
    put_gz(path_of(g_out, "fuzz_idx", "images-ubyte.gz"), img, sizeof img);
    put_gz(path_of(g_out, "fuzz_idx", "labels-ubyte.gz"), lab, sizeof lab);

    /* issue 17 and fuzz_idx: a header promising 2^31 (1.8e9) elements made
     * idx_load allocate them before finding the file holds none */
    uint8_t big[9] = {0, 0, 0x08, 1, 0x80, 0, 0, 0, 0};
    put(path_of(g_crash, "fuzz_idx", "header_promises_2g"), big, sizeof big);
    uint8_t gz[9] = {0, 0, 0x08, 1, 0x70, 0, 0, 0x02, 0};
    put_gz(path_of(g_crash, "fuzz_idx", "gz_header_promises_1.8g.gz"), gz, sizeof gz);
}

/* ---- vocab and shards ---- */

static void text_seeds(void)
{
    char corpus[] = "/tmp/ctrain-corpus-XXXXXX";
    int fd = mkstemp(corpus);
    if (fd < 0 || write(fd, corpus_text, sizeof corpus_text - 1) != sizeof corpus_text - 1 ||
        close(fd))
        die(corpus);
    const char *vocab = path_of(g_out, "fuzz_vocab", "built.txt");
    if (vocab_build(corpus, 160, WP_UNCASED, vocab, g_err, sizeof g_err)) die("vocab_build");
    Wordpiece wp;
    if (wordpiece_load(&wp, vocab, WP_UNCASED, g_err, sizeof g_err)) die("wordpiece_load");
    if (shard_write(corpus, &wp, path_of(g_out, "fuzz_shard", "fortunes.tok"), SHARD_DOC_AUTO,
                    NULL, g_err, sizeof g_err))
        die("shard_write");
    wordpiece_free(&wp);
    remove(corpus);

    uint32_t tok[6] = {5, 6, 7, 3, 9, 2};
    uint64_t off[3] = {0, 4, 6};
    if (shard_write_tokens(path_of(g_out, "fuzz_shard", "small.tok"), 10, 0x0123456789abcdefull, tok, off, 2, g_err,
                           sizeof g_err))
        die("small.tok");
    uint32_t wide[4] = {69999, 5, 65536, 4};
    uint64_t woff[3] = {0, 1, 4};
    if (shard_write_tokens(path_of(g_out, "fuzz_shard", "wide.tok"), 70000, 0x0123456789abcdefull, wide, woff, 2, g_err,
                           sizeof g_err))
        die("wide.tok");
    uint64_t eoff[1] = {0};
    if (shard_write_tokens(path_of(g_out, "fuzz_shard", "empty.tok"), 10, 0x0123456789abcdefull, NULL, eoff, 0, g_err,
                           sizeof g_err))
        die("empty.tok");

    char v[1024];
    size_t n = 0;
    for (uint32_t i = 0; i < FUZZ_VOCAB_N; i++)
        n += (size_t)snprintf(v + n, sizeof v - n, "%s\r\n", fuzz_vocab[i]);
    seed("fuzz_vocab", "crlf.txt", v, n);
    SEED("fuzz_vocab", "bom.txt", "\xef\xbb\xbf[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\n");
    SEED("fuzz_vocab", "dup.txt", "[UNK]\na\n\n##a\na\n[UNK]");

    /* fuzz_vocab_build: byte 0 = mode (% 3), score (& 4), held-out filter (& 8);
     * byte 1 = size (16 + 8 x byte 1) */
    char vb[sizeof corpus_text + 2] = {1, 20};
    memcpy(vb + 2, corpus_text, sizeof corpus_text - 1);
    seed("fuzz_vocab_build", "fortunes_uncased", vb, sizeof vb - 1);
    vb[0] = 5, vb[1] = 10;   /* cased NFC, likelihood */
    seed("fuzz_vocab_build", "fortunes_nfc_likelihood", vb, sizeof vb - 1);
    vb[0] = 8, vb[1] = 30;
    seed("fuzz_vocab_build", "fortunes_held_out", vb, sizeof vb - 1);
    char lw[128] = "\x01\x04short ";   /* a word of 101 characters: [UNK] whatever the vocab */
    size_t at = strlen(lw);
    memset(lw + at, 'a', 101);
    memcpy(lw + at + 101, " b\n", 3);
    seed("fuzz_vocab_build", "long_word", lw, at + 104);

    /* fuzz_wordpiece: byte 0 = vocab mode (% 3) and document rule (/ 3 % 4) */
    SEED("fuzz_wordpiece", "plain", "\x01The fortune cookie's café, naïve STRASSE: 中文 日本!");
    SEED("fuzz_wordpiece", "fortunes", "\x09" "a think\n%\ncafé\ncode\n%\n\n%\nx\n");
    SEED("fuzz_wordpiece", "paragraphs", "\x06" "one\ntwo\n\n  \nthree\t four\r\n\nfive");
    SEED("fuzz_wordpiece", "nfc", "\x02" "cafe\xcc\x81 A\xcc\x8a \xe1\x84\x80\xe1\x85\xa1 \xef\xac\x81");
    SEED("fuzz_wordpiece", "control", "\x04" "a\x01\x7f\xc2\x85 b\xe2\x80\xa8" "c\xef\xbf\xbd\xe3\x80\x80" "d");
    SEED("fuzz_wordpiece", "bad_utf8", "\x00" "ok \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82");
    SEED("fuzz_wordpiece", "sigma", "\x01ΣΑΣ ΌΣΟΣ. İstanbul ǅ");

    /* fuzz_text_cls: byte 0 = topics (& 3) + 1, named (& 4), held-out share (>> 3 & 3) / 3;
     * then topic files "a", "b", ... separated by NUL */
    static const char cls[] = "\x09" "the cookie\n%\ncafé think\n%\nx\n\0"
                              "code 10\n%\n中文\n%\n%\n\0" "one entry, no separator\n";
    seed("fuzz_text_cls", "three_topics", cls, sizeof cls - 1);
    static const char named[] = "\x15" "a\n%\nb\n\0c\n%\nd\n%\ne\n";
    seed("fuzz_text_cls", "named", named, sizeof named - 1);
    /* issue 17: UBSan "NULL + 0" in textcls_batch when every entry tokenized to nothing */
    static const char empty[] = "\x00" "\x01\n%\n\x7f\n%\n\xc2\x85\n";
    put(path_of(g_crash, "fuzz_text_cls", "every_entry_empty"), empty, sizeof empty - 1);

    /* fuzz_options: the words of a command line, one a line */
    SEED("fuzz_options", "mlp", "--model\nmlp\n--hidden\n64,32\n--steps\n20\n--lr\n0.1\n"
                                "--schedule\ncosine\n--warmup\n2\n--device\ncpu\n--nesterov");
    SEED("fuzz_options", "bert", "--model\nbert-tiny\n--data\nmlm:/x.tok\n--vocab\nv.txt\n--seq\n"
                                 "64\n--optim\nadamw\n--precision\nbf16\n--recompute\nevery:2\n"
                                 "--head\nmlm\n--dropout\n0\n--grad-reduce\nbf16\n--gpus\n2");
    SEED("fuzz_options", "files", "--save\nw.st\n--save-every\n10\n--log\nl.jsonl\n--log-every\n"
                                  "5\n--resume\nw.st\n--bucket-mb\n0\n--sync-bn\n--graph\n--trace");
    SEED("fuzz_options", "bad", "--hidden\n64,,32\n--steps\n4611686018427387903\n--lr\n1e-50");

    /* fuzz_dist_env: NAME=VALUE lines */
    SEED("fuzz_dist_env", "ctrain", "CTRAIN_RANK=1\nCTRAIN_WORLD_SIZE=4\nCTRAIN_LOCAL_RANK=1\n"
                                    "CTRAIN_MASTER_ADDR=host0\nCTRAIN_MASTER_PORT=29501");
    SEED("fuzz_dist_env", "ompi", "OMPI_COMM_WORLD_RANK=0\nOMPI_COMM_WORLD_SIZE=2\n"
                                  "OMPI_COMM_WORLD_LOCAL_RANK=0\nOMPI_COMM_WORLD_LOCAL_SIZE=1\n"
                                  "CTRAIN_RDZV_FD=3");
    SEED("fuzz_dist_env", "bad", "CTRAIN_RANK=4\nCTRAIN_WORLD_SIZE=4\nCTRAIN_MASTER_PORT=0x10");

    /* fuzz_plan_store: files the store writes itself, one damaged */
    plan_seeds();
}

/* fuzz_plan_store: a store of three conv plans as ops/plan_store.c writes
 * it, the same with damaged lines appended, and one of another identity. */
static void plan_seeds(void)
{
    char dir[] = "/tmp/ctrain_corpus_plans_XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp");
    PlanStore *ps = plan_store_open(dir, "conv", FUZZ_PLAN_IDENTITY);
    plan_store_put(ps, "forward N256 H56 W56 C64 K64 R3 S3 P56 Q56 stride1,1 pad1,1 dil1,1 bf16 "
                       "tf32=0 padmode=0 engines=0 accum=0 align=256 det=0 wsmax=4096M slice=256 "
                       "rules=1", "Cp=64 algo=1 math=1 engine=-1 knobs=-");
    plan_store_put(ps, "backward-data N256 H56 W56 C64 K64 R3 S3 P56 Q56 stride1,1 pad1,1 dil1,1 "
                       "bf16 tf32=0 padmode=0 engines=0 accum=0 align=256 det=1 wsmax=4096M "
                       "slice=256 rules=1", "Cp=64 algo=1 math=1 engine=27 knobs=3:1,5:0,11:2");
    plan_store_put(ps, "backward-filter N256 H224 W224 C3 K64 R7 S7 P112 Q112 stride2,2 pad3,3 "
                       "dil1,1 bf16 tf32=0 padmode=0 engines=0 accum=1 align=256 det=1 "
                       "wsmax=4096M slice=256 rules=1", "Cp=8 algo=0 math=1 engine=-1 knobs=-");
    char path[1100];
    snprintf(path, sizeof path, "%s", plan_store_path(ps));
    plan_store_close(ps);
    size_t n;
    char *b = slurp(path, &n);
    seed("fuzz_plan_store", "three", b, n);
    static const char bad[] = "no tab here\nctl\x01key\tv\nkey\t\n\tvalue\ncut\toff";
    static char damaged[1 << 16];
    memcpy(damaged, b, n);
    memcpy(damaged + n, bad, sizeof bad - 1);
    seed("fuzz_plan_store", "damaged", damaged, n + sizeof bad - 1);
    char *id = memmem(damaged, n, "driver 13000", 12);
    if (id) id[7] = '9';
    seed("fuzz_plan_store", "other_machine", damaged, n);
    unlink(path);
    char lock[1200];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(lock);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: make_corpus CORPUS_DIR CRASH_DIR\n");
        return 2;
    }
    g_out = argv[1];
    g_crash = argv[2];
    if ((mkdir(g_out, 0755) && errno != EEXIST) || (mkdir(g_crash, 0755) && errno != EEXIST))
        die("mkdir");
    fuzz_quiet();
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    st_seeds(&c);
    idx_seeds();
    text_seeds();
    ctx_free(&c);
    printf("make_corpus: wrote the seeds to %s and the known crash cases to %s\n", g_out, g_crash);
    return 0;
}
