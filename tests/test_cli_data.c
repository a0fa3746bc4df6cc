/* test_cli_data.c — the data commands and feeds end to end on the CPU
 * backend, for bad input: every refusal exits 1 with one message and
 * exactly one hint, the right one for the cause.
 *   - ctrain vocab / shard: a --size that overflows an int (quoted as typed),
 *     an --out in a missing folder (named, before the corpus is read), a
 *     corpus that is not UTF-8, a vocab without [UNK], a corpus whose
 *     documents give no token to mask;
 *   - --data mlm:SHARD: training ends with the held-out tail's masked-token
 *     accuracy, loss and perplexity, and ctrain eval of the saved weights
 *     gives the same line; --eval-every N adds passes during training that
 *     change nothing (the final line is the same), logged with "final": 0; a reordered vocab of the same size is refused by the
 *     shard's vocab hash (both files named), a CTTOK1 shard trains with one
 *     warning, a vocab with a UTF-8 byte-order mark trains (with a warning),
 *     a vocab lacking [PAD] is refused naming it;
 *   - --data fortunes-cls:/nonexistent and fashion-mnist:/nonexistent/fm:
 *     "check the path", not "install";
 *   - an ImageFolder whose val/ has a class train/ lacks, or other names, is
 *     refused when the feed opens (no step runs); a val/ with fewer classes
 *     trains, its labels matched by name.
 * Runs build/ctrain (CTRAIN_BIN overrides) from the repository root.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <stb/stb_image_write.h>
#include "check.h"
#include "cli_util.h"
#include "file_util.h"

static char tmp[256];

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* ctrain ARGS fails with status 1, the output holds want (and want2 when
 * given), lacks bad (when given) and has exactly one hint. */
static void expect_refusal(const char *name, const char *args, const char *want,
                           const char *want2, const char *bad)
{
    char cmd[4096], out[16384];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin(), args);
    int st = run(cmd, out, sizeof out);
    check_true(name, st == 1 && strstr(out, want) && (!want2 || strstr(out, want2)) &&
               (!bad || !strstr(out, bad)) && count(out, "hint:") == 1,
               "exit %d, %d hints, wanted \"%s\"%s%s%s%s, got: %s", st, count(out, "hint:"),
               want, want2 ? " and " : "", want2 ? want2 : "", bad ? ", not " : "",
               bad ? bad : "", out);
}

/* A corpus of paragraphs of made-up words. */
static void make_corpus(const char *path)
{
    static const char *const syl[] = {"ka", "to", "ri", "mu", "sen", "da", "lo", "vi", "pre"};
    FILE *f = fopen(path, "w");
    uint64_t x = 7;
    for (int line = 0; line < 300; line++) {
        for (int w = 0; w < 8; w++) {
            for (int s = 0; s < 2; s++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                fputs(syl[(x >> 33) % 9], f);
            }
            fputs(w < 7 ? " " : ".\n", f);
        }
        if (line % 6 == 5) fputs("\n", f);
    }
    fclose(f);
}

static int sh(const char *cmd)
{
    char out[16384];
    int st = run(cmd, out, sizeof out);
    if (st) printf("  command failed (%d): %s\n%s", st, cmd, out);
    return st;
}

static void test_vocab_shard(const char *corpus, const char *vocab)
{
    char args[2048], p[700];
    snprintf(args, sizeof args, "vocab --corpus %s --size 99999999999 --out %s/v.txt", corpus, tmp);
    expect_refusal("vocab.size_overflow", args, "--size 99999999999 is out of range",
                   "hint: pass --size between 16 and 1000000", "1215752191");
    snprintf(args, sizeof args, "vocab --corpus %s --size 12x --out %s/v.txt", corpus, tmp);
    expect_refusal("vocab.size_junk", args, "--size: '12x' is not a whole number", NULL, NULL);
    snprintf(args, sizeof args, "vocab --corpus %s --size 200 --out /nonexistent/v.txt", corpus);
    expect_refusal("vocab.out_missing_dir", args, "cannot write vocab /nonexistent/v.txt: the "
                   "folder /nonexistent does not exist", "hint: pass --out", "corpus path");
    snprintf(args, sizeof args, "shard --corpus %s --vocab %s --out /nonexistent/x.tok", corpus,
             vocab);
    expect_refusal("shard.out_missing_dir", args, "cannot write shard /nonexistent/x.tok: the "
                   "folder /nonexistent does not exist", "hint: pass --out", "damaged");

    snprintf(p, sizeof p, "%s/latin1.txt", tmp);
    file_write(p, "caf\xe9 au lait\n", 13);
    snprintf(args, sizeof args, "vocab --corpus %s --size 200 --out %s/v.txt", p, tmp);
    expect_refusal("vocab.latin1_one_hint", args, "invalid UTF-8 at byte offset 3", "iconv",
                   "check the corpus path");
    snprintf(args, sizeof args, "shard --corpus %s --vocab %s --out %s/x.tok", p, vocab, tmp);
    expect_refusal("shard.latin1_one_hint", args, "invalid UTF-8 at byte offset 3", "iconv",
                   "damaged");

    snprintf(p, sizeof p, "%s/nounk.txt", tmp);
    file_write(p, "[PAD]\nhello\n", 12);
    snprintf(args, sizeof args, "shard --corpus %s --vocab %s --out %s/x.tok", corpus, p, tmp);
    expect_refusal("shard.vocab_no_unk", args, "has no [UNK] token", "ctrain vocab --corpus",
                   "check the --vocab path");

    char dir[600];
    snprintf(dir, sizeof dir, "%s/emptydocs", tmp);
    mkdir(dir, 0700);
    snprintf(p, sizeof p, "%s/a", dir);
    file_write(p, "%\n%\n%\n", 6);
    snprintf(args, sizeof args, "shard --corpus %s --vocab %s --out %s/e.tok", dir, vocab, tmp);
    expect_refusal("shard.empty_docs", args, "gives 0 tokens", "one masked-LM sequence needs "
                   "at least 1 token", NULL);
    snprintf(p, sizeof p, "%s/b", dir);
    file_write(p, "\xe5\x8c\x97\xe4\xba\xac\n", 7);   /* two ideographs the vocab lacks */
    expect_refusal("shard.all_unk", args, "gives 2 tokens, all [UNK] (2)", NULL, NULL);
}

/* The CTTOK1 form of a CTTOK2 shard: the 8-byte vocab hash dropped, the
 * magic and the CRC-32 rewritten. */
static int write_v1(const char *v2, const char *v1)
{
    size_t n;
    char *b = file_read(v2, &n);
    if (!b || n < 44 || memcmp(b, "CTTOK2", 6)) { free(b); return -1; }
    memmove(b + 24, b + 32, n - 32);
    n -= 8;
    b[5] = '1';
    uint32_t crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), (const Bytef *)b + 8, (uInt)(n - 12));
    memcpy(b + n - 4, &crc, 4);
    file_write(v1, b, n);
    free(b);
    return 0;
}

static void test_mlm_feed(const char *corpus, const char *vocab)
{
    char shard[600], cmd[4096], args[3000], out[16384], p[600], q[600];
    snprintf(shard, sizeof shard, "%s/corpus.tok", tmp);
    snprintf(cmd, sizeof cmd, "%s shard --corpus %s --vocab %s --out %s 2>&1", bin(), corpus,
             vocab, shard);
    if (sh(cmd)) { check_true("mlm.shard", 0, "ctrain shard failed"); return; }
    const char *train = "train --model bert-tiny --device cpu --steps 1 --batch 2 --seq 16 "
                        "--log-every 1";

    /* the right vocab trains */
    snprintf(cmd, sizeof cmd, "%s %s --data mlm:%s --vocab %s 2>&1", bin(), train, shard, vocab);
    int st = run(cmd, out, sizeof out);
    check_true("mlm.trains", st == 0 && strstr(out, "trained 1 steps") && !strstr(out, "[warn]"),
               "exit %d: %s", st, out);

    /* the held-out tail: scored at the end of training, and by ctrain eval
     * (another batch size) on exactly the same masked tokens */
    snprintf(cmd, sizeof cmd, "%s %s --data mlm:%s --vocab %s --save %s/mlm.st 2>&1 | grep "
             "'held-out masked LM' && %s eval --model bert-tiny --device cpu --seq 16 --data "
             "mlm:%s --vocab %s --load %s/mlm.st 2>&1 | grep 'held-out masked LM'", bin(), train,
             shard, vocab, tmp, bin(), shard, vocab, tmp);
    st = run(cmd, out, sizeof out);
    char *nl = strchr(out, '\n');
    check_true("mlm.held_out_eval", st == 0 && nl && strstr(out, "perplexity") &&
               strstr(out, "masked tokens") && !strncmp(out, nl + 1, (size_t)(nl - out)),
               "exit %d: %s", st, out);

    /* ctrain eval --precision fp8 of a weights-only file: the scales are calibrated on one
     * pass first (else every cast would run at scale 1), and the held-out loss is fp32's
     * within FP8's rounding */
    snprintf(cmd, sizeof cmd, "%s eval --model bert-tiny --device cpu --seq 16 --data mlm:%s --vocab %s "
             "--load %s/mlm.st --precision fp8 2>&1 && %s eval --model bert-tiny --device cpu --seq 16 "
             "--data mlm:%s --vocab %s --load %s/mlm.st 2>&1", bin(), shard, vocab, tmp, bin(), shard,
             vocab, tmp);
    st = run(cmd, out, sizeof out);
    const char *e8 = strstr(out, "held-out masked LM"), *e32 = e8 ? strstr(e8 + 1, "held-out masked LM") : NULL;
    const char *p8 = e8 ? strstr(e8, "loss ") : NULL, *p32 = e32 ? strstr(e32, "loss ") : NULL;
    const double loss8 = p8 ? atof(p8 + 5) : -1, loss32 = p32 ? atof(p32 + 5) : -1;
    check_true("mlm.eval_fp8_calibrated", st == 0 && strstr(out, "scales calibrated on one pass") &&
               loss32 > 0 && fabs(loss8 - loss32) <= 0.02 * loss32, "exit %d, loss fp8 %.4f fp32 %.4f: %s",
               st, loss8, loss32, out);

    /* --eval-every 2 over 4 steps: a pass at step 2 (printed, logged with
     * final 0), the final one at step 4 only once, and the evaluation in
     * between changes nothing: the final line is the one of a run without it */
    const char *train4 = "train --model bert-tiny --device cpu --steps 4 --batch 2 --seq 16 "
                         "--log-every 1";
    snprintf(cmd, sizeof cmd, "%s %s --data mlm:%s --vocab %s 2>&1 | grep '^held-out masked LM' "
             "&& %s %s --data mlm:%s --vocab %s --eval-every 2 --log %s/ee.jsonl 2>&1 | grep "
             "'held-out masked LM' && grep -c '\"event\":\"eval\"' %s/ee.jsonl && grep "
             "'\"event\":\"eval\"' %s/ee.jsonl", bin(), train4, shard, vocab, bin(), train4,
             shard, vocab, tmp, tmp, tmp);
    st = run(cmd, out, sizeof out);
    char *l1 = strchr(out, '\n'), *l2 = l1 ? strchr(l1 + 1, '\n') : NULL;
    char *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
    check_true("mlm.eval_every", st == 0 && l3 && !strncmp(l1 + 1, "step 2: held-out masked LM", 26)
               && !strncmp(out, l2 + 1, (size_t)(l1 - out)) && !strncmp(l3 + 1, "2\n", 2) &&
               strstr(l3, "\"step\":2,\"final\":0") && strstr(l3, "\"step\":4,\"final\":1")
               && !strstr(out, "step 4: "), "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "%s %s --data mlm:%s --vocab %s --eval-every 2 --no-eval 2>&1",
             bin(), train4, shard, vocab);
    st = run(cmd, out, sizeof out);
    check_true("mlm.eval_every_no_effect_said", st == 0 && strstr(out, "--eval-every has no effect")
               && !strstr(out, "held-out masked LM"), "exit %d: %s", st, out);

    /* export --hf: the folder transformers opens (checked with transformers
     * on the GPU machine; here its files and config.json's figures) */
    snprintf(cmd, sizeof cmd, "%s export --hf %s/hf %s/mlm.st --vocab %s 2>&1 && cat %s/hf/config.json "
             "&& cmp %s %s/hf/vocab.txt && grep -c __ctrain %s/hf/model.safetensors; ls %s/hf",
             bin(), tmp, tmp, vocab, tmp, vocab, tmp, tmp, tmp);
    st = run(cmd, out, sizeof out);
    check_true("mlm.export_hf", strstr(out, "\"architectures\": [\"BertForMaskedLM\"]") &&
               strstr(out, "\"hidden_size\": 128") && strstr(out, "\"num_hidden_layers\": 2") &&
               strstr(out, "\"max_position_embeddings\": 512") &&
               strstr(out, "\n0\n") && strstr(out, "tokenizer_config.json") &&
               strstr(out, "model.safetensors"), "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "%s export --hf %s/hf2 %s 2>&1", bin(), tmp, vocab);
    st = run(cmd, out, sizeof out);
    check_true("mlm.export_hf_refuses_non_bert", st == 1 && strstr(out, "hint:"), "exit %d: %s",
               st, out);

    /* the same tokens, two swapped: same size, another vocab */
    size_t n;
    char *v = file_read(vocab, &n);
    char *l6 = v, *l7, *l8;
    for (int i = 0; i < 6 && l6; i++) l6 = strchr(l6, '\n') + 1;   /* lines 6 and 7 (0-based) */
    l7 = strchr(l6, '\n') + 1;
    l8 = strchr(l7, '\n') + 1;
    snprintf(p, sizeof p, "%s/swapped.txt", tmp);
    FILE *f = fopen(p, "wb");
    fwrite(v, 1, (size_t)(l6 - v), f);
    fwrite(l7, 1, (size_t)(l8 - l7), f);
    fwrite(l6, 1, (size_t)(l7 - l6), f);
    fwrite(l8, 1, n - (size_t)(l8 - v), f);
    fclose(f);
    snprintf(args, sizeof args, "%s --data mlm:%s --vocab %s", train, shard, p);
    expect_refusal("mlm.reordered_vocab", args, "was made with another vocabulary than --vocab",
                   "ctrain shard --corpus DIR --vocab", "trained");
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin(), args);
    run(cmd, out, sizeof out);
    check_true("mlm.reordered_names_files", strstr(out, shard) && strstr(out, p), "%s", out);

    /* a CTTOK1 shard: trains, warning once that only the size is checked */
    snprintf(q, sizeof q, "%s/v1.tok", tmp);
    if (write_v1(shard, q) == 0) {
        snprintf(cmd, sizeof cmd, "%s %s --data mlm:%s --vocab %s 2>&1", bin(), train, q, vocab);
        st = run(cmd, out, sizeof out);
        check_true("mlm.v1_trains_warns", st == 0 && strstr(out, "trained 1 steps") &&
                   count(out, "older CTTOK1 format") == 1 && strstr(out, "run ctrain shard again"),
                   "exit %d: %s", st, out);
    } else {
        check_true("mlm.v1_written", 0, "could not rewrite %s as CTTOK1", shard);
    }

    /* a byte-order mark before [PAD]: dropped, the vocab (and its hash) as before */
    snprintf(p, sizeof p, "%s/bom.txt", tmp);
    f = fopen(p, "wb");
    fputs("\xEF\xBB\xBF", f);
    fwrite(v, 1, n, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s %s --data mlm:%s --vocab %s 2>&1", bin(), train, shard, p);
    st = run(cmd, out, sizeof out);
    check_true("mlm.bom_trains", st == 0 && strstr(out, "trained 1 steps") &&
               strstr(out, "byte-order mark"), "exit %d: %s", st, out);

    /* a vocab whose [PAD] line is something else: its shard is refused for [PAD] */
    snprintf(p, sizeof p, "%s/nopad.txt", tmp);
    f = fopen(p, "wb");
    fputs("[PXD]", f);
    fwrite(v + 5, 1, n - 5, f);   /* the vocab starts with "[PAD]" */
    fclose(f);
    snprintf(q, sizeof q, "%s/nopad.tok", tmp);
    snprintf(cmd, sizeof cmd, "%s shard --corpus %s --vocab %s --out %s 2>&1", bin(), corpus, p,
             q);
    if (!sh(cmd)) {
        snprintf(args, sizeof args, "%s --data mlm:%s --vocab %s", train, q, p);
        expect_refusal("mlm.no_pad", args, "needs the special token [PAD], which the vocab lacks",
                       "[PAD] [UNK] [CLS] [SEP] [MASK]", "longer corpus");
    }
    free(v);

    snprintf(args, sizeof args, "train --model bert-tiny --device cpu --steps 1 --batch 2 "
             "--seq 16 --data fortunes-cls:/nonexistent --vocab %s", vocab);
    expect_refusal("cls.missing_dir", args, "cannot open fortunes directory /nonexistent",
                   "hint: check the path", "install");
    expect_refusal("fmnist.missing_dir", "train --device cpu --data fashion-mnist:/nonexistent/fm",
                   "/nonexistent/fm/train-images-idx3-ubyte", "hint: check the path", "install");
}

/* ROOT/SPLIT/C/i.png for each class in the comma list. */
static void make_split(const char *root, const char *split, const char *classes)
{
    char d[700], list[256];
    snprintf(d, sizeof d, "%s/%s", root, split);
    mkdir(root, 0700);
    mkdir(d, 0700);
    snprintf(list, sizeof list, "%s", classes);
    uint8_t px[8 * 8 * 3];
    for (char *c = strtok(list, ","); c; c = strtok(NULL, ",")) {
        snprintf(d, sizeof d, "%s/%s/%s", root, split, c);
        mkdir(d, 0700);
        for (int i = 0; i < 2; i++) {
            for (size_t k = 0; k < sizeof px; k++) px[k] = (uint8_t)(k * 7 + i * 40 + c[0]);
            char f[800];
            snprintf(f, sizeof f, "%s/%d.png", d, i);
            stbi_write_png(f, 8, 8, 3, px, 8 * 3);
        }
    }
}

static void test_imagefolder_splits(void)
{
    char root[600], args[2048], cmd[2400], out[16384];
    const char *train = "train --model resnet18 --device cpu --image-size 16 --steps 1 --batch 2 "
                        "--eval-batch 2 --workers 1 --log-every 1";
    snprintf(root, sizeof root, "%s/extra", tmp);
    make_split(root, "train", "ant,bee,cat");
    make_split(root, "val", "ant,bee,zebra");
    snprintf(args, sizeof args, "%s --data %s", train, root);
    expect_refusal("imgf.val_extra_class", args, "has the class folder \"zebra\", which",
                   "(its 3 classes: ant, bee, cat)", "step 1");
    snprintf(root, sizeof root, "%s/renamed", tmp);
    make_split(root, "train", "ant,bee,cat");
    make_split(root, "val", "a1,b2,c3");
    snprintf(args, sizeof args, "%s --data %s", train, root);
    expect_refusal("imgf.val_renamed", args, "has the class folder \"a1\"", NULL, "step 1");
    snprintf(root, sizeof root, "%s/subset", tmp);
    make_split(root, "train", "ant,bee,cat");
    make_split(root, "val", "cat");
    snprintf(cmd, sizeof cmd, "%s %s --data %s 2>&1", bin(), train, root);
    int st = run(cmd, out, sizeof out);
    check_true("imgf.val_subset_trains", st == 0 && strstr(out, "trained 1 steps") &&
               count(out, "1 of the 3 classes of") == 1, "exit %d: %s", st, out);
}

int main(void)
{
    if (access(bin(), X_OK) != 0) {
        printf("  FAIL %s is not built: run make first\n", bin());
        printf("0 passed, 1 failed\n");
        return 1;
    }
    snprintf(tmp, sizeof tmp, "/tmp/ctrain_cli_data_XXXXXX");
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    char corpus[600], vocab[600], cmd[2048];
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", tmp);
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", tmp);
    make_corpus(corpus);
    snprintf(cmd, sizeof cmd, "%s vocab --corpus %s --size 200 --out %s 2>&1", bin(), corpus,
             vocab);
    if (sh(cmd) == 0) {
        test_vocab_shard(corpus, vocab);
        test_mlm_feed(corpus, vocab);
    } else {
        check_true("vocab.built", 0, "ctrain vocab failed");
    }
    test_imagefolder_splits();
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    char out[256];
    run(cmd, out, sizeof out);
    return check_summary();
}
