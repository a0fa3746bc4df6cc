/* fuzz_vocab.c — libFuzzer harness: the input as a vocab.txt
 * (data/wordpiece.h wordpiece_load), as --vocab and `ctrain shard` read
 * it. On success: every token is looked up by name (the later line wins
 * for duplicates, so the id found holds the same text), the specials are
 * in range, and a fixed text with accents, CJK and punctuation is encoded
 * to ids that are all in range and joined back. A refusal must say why.
 */
#include "fuzz_util.h"

static const char sample[] = "The fortune cookie's café, naïve STRASSE straße: 中文 日本! "
                             "x0 x1 unthinkable ΣΑΣ ∞ \xe2\x80\x8b tab\there";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char path[64], err[512] = "";
    int fd = fuzz_file_open(path, data, size);
    Wordpiece wp;
    int st = wordpiece_load(&wp, path, WP_UNCASED, err, sizeof err);
    if (st == WP_OK) {
        fuzz_check(wp.unk_id >= 0 && (uint32_t)wp.unk_id < wp.V, "[UNK] id %d of %u", wp.unk_id,
                   wp.V);
        int32_t sp[] = {wp.pad_id, wp.cls_id, wp.sep_id, wp.mask_id};
        for (int i = 0; i < 4; i++)
            fuzz_check(sp[i] >= -1 && sp[i] < (int32_t)wp.V, "special id %d of %u", sp[i], wp.V);
        for (uint32_t i = 0; i < wp.V; i++) {
            const char *t = wordpiece_token(&wp, (int32_t)i);
            if (!t[0] || strlen(t) != wp.len[i]) continue;   /* never matches: "" or a NUL inside */
            int32_t id = wordpiece_id(&wp, t);
            fuzz_check(id >= 0 && !strcmp(wordpiece_token(&wp, id), t), "token %u '%s' -> %d", i,
                       t, id);
        }
        WpIds ids = {0};
        st = wordpiece_encode(&wp, &ids, sample, strlen(sample), err, sizeof err);
        fuzz_check(st == 0, "the sample text: %s", err);
        for (size_t i = 0; i < ids.n; i++)
            fuzz_check(ids.ids[i] >= 0 && (uint32_t)ids.ids[i] < wp.V, "id %d of %u", ids.ids[i],
                       wp.V);
        char joined[256];
        wordpiece_join(joined, sizeof joined, &wp, ids.ids, ids.n);
        wpids_free(&ids);
        wordpiece_free(&wp);
    } else {
        fuzz_check(err[0], "status %d without a message", st);
    }
    close(fd);
    return 0;
}
