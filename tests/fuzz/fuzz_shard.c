/* fuzz_shard.c — libFuzzer harness: the input as a token shard
 * (data/text_shards.h shard_open), as --data mlm:SHARD reads it, and an
 * opened shard through MLM packing and masking (data/mlm.h), as a BERT
 * pre-training run batches it.
 *
 * The input is opened twice: as it is, and with its trailing CRC-32
 * recomputed (a fuzzer cannot find a matching CRC by mutation, so without
 * this it would never get past the check). On success: offsets run from 0
 * to N without going down, every token is below V, the size is the one the
 * header implies; then (V <= 2^20, so the batcher's tables stay small) an
 * MLM batcher with T = 16, B = 3 packs the first and last batch of two
 * epochs, and every id in a batch is below V. A refusal must say why.
 */
#include <zlib.h>
#include "fuzz_util.h"
#include "data/mlm.h"
#include "data/text_shards.h"

static void check_shard(const TextShard *s)
{
    uint64_t N = s->n_tokens;
    fuzz_check(s->offsets[0] == 0 && s->offsets[s->n_docs] == N, "offsets %llu..%llu of %llu",
               (unsigned long long)s->offsets[0], (unsigned long long)s->offsets[s->n_docs],
               (unsigned long long)N);
    for (uint32_t d = 0; d < s->n_docs; d++)
        fuzz_check(s->offsets[d] <= s->offsets[d + 1], "document %u", d);
    for (uint64_t k = 0; k < N; k++)
        fuzz_check(shard_token(s, k) < s->vocab_size, "token %llu: %u of %u",
                   (unsigned long long)k, shard_token(s, k), s->vocab_size);
    uint64_t header = s->version == 1 ? SHARD_HEADER_BYTES_V1 : SHARD_HEADER_BYTES;
    fuzz_check(s->size == header + 8 * ((uint64_t)s->n_docs + 1) +
                              (uint64_t)s->width * N + 4,
               "size %zu", s->size);
    if (s->vocab_size > (1u << 20)) return;

    MlmConfig cfg = {.T = 16, .B = 3, .seed = 5, .mask_prob = MLM_MASK_PROB,
                     .mask_token_frac = 0.8f, .random_token_frac = 0.1f, .pad_id = 0,
                     .unk_id = 1, .cls_id = 2, .sep_id = 3, .mask_id = 4,
                     .vocab_size = s->vocab_size};
    MlmBatcher mb;
    char err[512] = "";
    if (mlm_init(&mb, s, &cfg, NULL, err, sizeof err)) {
        fuzz_check(err[0], "mlm_init refused without a message");
        return;
    }
    mlm_set_shard(&mb, 0, 1);
    MlmBatch b;
    if (mlm_batch_alloc(&b, cfg.B, cfg.T, 1)) abort();
    uint64_t nb = mlm_batches_per_epoch(&mb);
    for (uint64_t e = 0; e < 2; e++)
        for (uint64_t step = 0; step < nb; step += nb > 1 ? nb - 1 : 1) {
            mlm_batch(&mb, &b, e, step);
            for (int i = 0; i < cfg.B * cfg.T; i++) {
                fuzz_check(b.input_ids[i] >= 0 && (uint32_t)b.input_ids[i] < s->vocab_size,
                           "input id %d", b.input_ids[i]);
                fuzz_check(b.labels[i] == MLM_IGNORE_INDEX ||
                               (b.labels[i] >= 0 && (uint32_t)b.labels[i] < s->vocab_size),
                           "label %d", b.labels[i]);
            }
        }
    mlm_batch_free(&b);
    mlm_free(&mb);
}

static void open_one(const uint8_t *data, size_t size)
{
    char path[64], err[512] = "";
    int fd = fuzz_file_open(path, data, size);
    TextShard s;
    int st = shard_open(&s, path, err, sizeof err);
    if (st == SHARD_OK) check_shard(&s);
    else fuzz_check(err[0] && shard_hint(st), "status %d without a message or hint", st);
    shard_close(&s);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    open_one(data, size);
    if (size >= SHARD_HEADER_BYTES_V1 + 12) {
        uint8_t *fixed = malloc(size);
        if (!fixed) abort();
        memcpy(fixed, data, size);
        uint32_t crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), fixed + 8, (uInt)(size - 12));
        memcpy(fixed + size - 4, &crc, 4);
        if (memcmp(fixed + size - 4, data + size - 4, 4)) open_one(fixed, size);
        free(fixed);
    }
    return 0;
}
