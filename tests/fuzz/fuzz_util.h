/* fuzz_util.h — what the libFuzzer harnesses of tests/fuzz/ share: the input
 * handed to a parser that takes a path (an anonymous memfd, opened again
 * through /proc/self/fd/N, so no file is left behind), a small fixed
 * vocabulary for the tokenizing harnesses, and the end of a harness's
 * first call (quiet logs).
 *
 * A harness (fuzz_NAME.c) defines LLVMFuzzerTestOneInput; it runs under
 * libFuzzer (make fuzz) or under tests/fuzz/replay.c (make fuzz-replay).
 * An invariant a parser breaks is reported with fuzz_check, which aborts
 * (a crash for both drivers), naming the harness and what broke.
 */
#ifndef CTRAIN_TESTS_FUZZ_UTIL_H
#define CTRAIN_TESTS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/log.h"
#include "data/wordpiece.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* Once per process: only errors reach stderr (a refused input is normal). */
static inline void fuzz_quiet(void)
{
    static int done;
    if (!done) log_set_level(LOG_ERROR);
    done = 1;
}

/* data[0..size) as a file: returns the descriptor (close it after) and its
 * path in path[64]. */
static inline int fuzz_file_open(char path[64], const void *data, size_t size)
{
    int fd = memfd_create("ctrain-fuzz", MFD_CLOEXEC);
    if (fd < 0) { perror("memfd_create"); abort(); }
    const char *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w <= 0) { perror("fuzz: write"); abort(); }
        p += w;
        size -= (size_t)w;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

/* A fresh directory for a harness whose parser reads a directory or
 * writes a file, in dir[64]: in $TMPDIR, else in memory (/dev/shm: a file
 * system round trip per input would be most of the time), else /tmp.
 * at_exit (when not NULL) is registered to remove what is in it. */
static inline void fuzz_tmpdir(char dir[64], void (*at_exit)(void))
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || strlen(tmp) >= 30) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, 64, "%s/ctrain-fuzz-XXXXXX", tmp);
    if (!mkdtemp(dir)) { perror("mkdtemp"); abort(); }
    if (at_exit) atexit(at_exit);
}

/* The first NUL- or newline-separated piece of data[*pos..size) as a
 * malloc'd string, *pos moved past it; NULL at the end. */
static inline char *fuzz_next_piece(const uint8_t *data, size_t size, size_t *pos)
{
    if (*pos >= size) return NULL;
    size_t b = *pos, e = b;
    while (e < size && data[e] != 0 && data[e] != '\n') e++;
    char *s = malloc(e - b + 1);
    if (!s) abort();
    memcpy(s, data + b, e - b);
    s[e - b] = 0;
    *pos = e + 1;
    return s;
}

/* The machine a plan store's harness and seeds are written for
 * (ops/plan_store.h: the file's identity line must match it to be read). */
#define FUZZ_PLAN_IDENTITY "Fuzz Card 80GB, sm_90, 132 SMs, driver 13000, CUDA 13000, cuDNN 91900"

/* A small BERT vocabulary: the specials, whole words and "##" pieces,
 * accented and CJK entries, punctuation. */
static const char *const fuzz_vocab[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "!", ",", ".", "?", "%", "'", "the", "a",
    "an", "is", "of", "to", "and", "in", "fortune", "cook", "##ie", "##s", "##ing", "##ed",
    "un", "##able", "##ly", "think", "code", "##r", "e", "##e", "caf", "##é", "é", "naive",
    "中", "文", "日", "本", "x", "##x", "0", "1", "##0", "##1", "σ", "ς", "straße", "ß",
};
#define FUZZ_VOCAB_N ((uint32_t)(sizeof fuzz_vocab / sizeof fuzz_vocab[0]))

/* wp from fuzz_vocab in mode (WP_CASED, WP_UNCASED, WP_CASED_NFC). */
static inline void fuzz_vocab_init(Wordpiece *wp, int mode)
{
    char err[256];
    if (wordpiece_init_tokens(wp, fuzz_vocab, FUZZ_VOCAB_N, mode, err, sizeof err)) {
        fprintf(stderr, "fuzz: the fixed vocabulary is refused: %s\n", err);
        abort();
    }
}

#endif
