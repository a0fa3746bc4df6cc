/* text_corpus.h — the generated corpus of the text tests (test_wordpiece,
 * test_text_shards): made-up words of a few syllables (accented ones too),
 * in a.txt (paragraphs), b.txt (fortune style: '%' lines) and sub/c.txt,
 * 40 documents each, plus a hidden file, a binary file and a symlink that a
 * corpus walk must skip. Deterministic. Include after file_util.h. */
#ifndef CTRAIN_TESTS_TEXT_CORPUS_H
#define CTRAIN_TESTS_TEXT_CORPUS_H

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const SYL[] = {"ka", "to", "ri", "mu", "sen", "da", "lo", "vi", "pre",
                                  "ing", "the", "qu", "é", "ß", "ño"};

/* A deterministic corpus: docs of words made of syllables. */
static inline void make_corpus(const char *dir)
{
    char p[600];
    snprintf(p, sizeof p, "%s/sub", dir);
    mkdir(dir, 0700);
    mkdir(p, 0700);
    uint64_t x = 12345;
    for (int fi = 0; fi < 3; fi++) {
        if (fi == 2) snprintf(p, sizeof p, "%s/sub/c.txt", dir);
        else snprintf(p, sizeof p, "%s/%c.txt", dir, 'a' + fi);
        FILE *f = fopen(p, "w");
        for (int line = 0; line < 400; line++) {
            int nw = 3 + line % 9;
            for (int w = 0; w < nw; w++) {
                int ns = 1 + (int)(x % 3);
                for (int s = 0; s < ns; s++) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    fputs(SYL[(x >> 33) % (sizeof SYL / sizeof *SYL)], f);
                }
                fputs(w + 1 < nw ? (x >> 40) % 7 == 0 ? ", " : " " : ".\n", f);
            }
            if (line % 10 == 9) fputs(fi == 1 ? "%\n" : "\n", f); /* b.txt: fortune style */
        }
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/.hidden", dir);
    file_write(p, "zzzzhidden\n", 11);
    snprintf(p, sizeof p, "%s/index.dat", dir);
    file_write(p, "\0\0\0\2bin\xff\xfe", 9);
    char target[600];
    snprintf(target, sizeof target, "%s/a.txt", dir);
    snprintf(p, sizeof p, "%s/a.u8", dir);
    if (symlink(target, p)) fprintf(stderr, "test: symlink: %s\n", strerror(errno));
}

#endif
