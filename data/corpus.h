/* corpus.h — the files of a text corpus, read whole and checked to be UTF-8
 * (shared by data/vocab_build.c and data/text_shards.c).
 *
 * A corpus is a file, or a directory of text files read recursively: every
 * regular file below it, in byte order of the path, skipping names that
 * start with '.', symbolic links (the fortunes package links NAME.u8 to
 * NAME: one copy is read) and binary files (a NUL byte in the first 4 KiB,
 * like fortune's .dat indexes). A text file must be UTF-8: a bad byte is an
 * error naming the file and the byte offset; corpus_hint(CORPUS_ERR_UTF8)
 * says to convert it.
 */
#ifndef CTRAIN_DATA_CORPUS_H
#define CTRAIN_DATA_CORPUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CORPUS_OK = 0,
    CORPUS_ERR_OPEN = -1,   /* missing, unreadable, or an empty directory */
    CORPUS_ERR_UTF8 = -2,   /* a text file is not UTF-8 */
    CORPUS_ERR_NOMEM = -3,
    CORPUS_ERR_ARG = -4,    /* a bad option (size too small for the alphabet, ...) */
    CORPUS_ERR_WRITE = -5,  /* the output file could not be written */
} CorpusStatus;

/* The files of a corpus (rules above). files[i] are malloc'd paths. */
typedef struct {
    char **files;
    size_t n;
    int is_dir;       /* path was a directory: binary files are skipped on read */
} CorpusFiles;

int corpus_list(CorpusFiles *cf, const char *path, char *err, size_t errlen);

/* What to do about a failed corpus_list / corpus_read (or a builder that
 * reads a corpus and writes --out), by its status; NULL for CORPUS_OK and
 * CORPUS_ERR_ARG (the caller knows which option was wrong). */
const char *corpus_hint(int status);

/* Which documents of a corpus to use (vocab building, shards): asked for
 * each document of each file in corpus order, with the file's path and
 * whether it was read as a fortune file ('%' lines between entries);
 * nonzero keeps the document. */
typedef int (*CorpusDocFilter)(void *ctx, const char *path, int fortune_file, const char *doc,
                               size_t len);
void corpus_files_free(CorpusFiles *cf);

/* Read a whole file into *buf (malloc'd, NUL-terminated, *n bytes) and check
 * it is UTF-8. Returns 0; 1 when skip_binary and the file looks binary
 * (*buf NULL); or a negative CorpusStatus with "PATH: invalid UTF-8 at byte
 * offset N: ..." or the open error in err. */
int corpus_read(const char *path, int skip_binary, char **buf, size_t *n, char *err,
                size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
