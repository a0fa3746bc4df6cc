/* safetensors.h — reading and writing the safetensors file format.
 *
 * The format (Hugging Face's, used by PyTorch users to store state dicts):
 *
 *   [u64 little-endian N] [N bytes of UTF-8 JSON header] [data section]
 *
 * The header is one JSON object mapping each tensor name to
 *   {"dtype": "F32", "shape": [O, I, H, W], "data_offsets": [begin, end]}
 * with offsets in bytes relative to the start of the data section, plus an
 * optional "__metadata__" object of string -> string. Tensors are raw
 * little-endian row-major bytes, tightly packed: sorted by begin, the first
 * starts at 0, each starts where the previous ends, the last ends at the end
 * of the file. The writer pads the header with spaces so the data section
 * starts 8-byte aligned (as the reference implementation does) and places
 * tensors by descending element size, so every tensor is aligned to its
 * element size in a mapped file.
 *
 * ctrain additions, both inside the standard format (PyTorch ignores them):
 *   - every file the writer produces carries "ctrain_crc32" in __metadata__:
 *     zlib's CRC32 of the whole data section as 8 hex digits; st_open checks
 *     it when present (files written elsewhere have none and load fine);
 *   - the write is atomic: PATH.tmp.<pid> in the same directory, fsync,
 *     rename over PATH, fsync of the directory. On any failure the temp file
 *     is removed and an existing PATH is left as it was. Test hook:
 *     st_test_fail_writes_after(N) makes writes fail with ENOSPC after N
 *     bytes, as a full disk would.
 *
 * Errors are returned, never fatal: a status (ST_ERR_*) and one line of text
 * in the caller's buffer that names the file and says what is wrong (JSON
 * syntax errors give the byte position in the header). checkpoint.h adds the
 * hints for users.
 *
 * Names: StWriter (building a file), StFile (an opened file), StEntry (one
 * tensor in it). Shapes are int64 as in the JSON; numel is their product.
 */
#ifndef CTRAIN_TRAIN_SAFETENSORS_H
#define CTRAIN_TRAIN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "engine/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ST_MAX_DIMS 8
/* The __metadata__ key of the writer's checksum (see above). */
#define ST_CRC_KEY "ctrain_crc32"
/* The reference implementation refuses headers over 100 MB; so do we. */
#define ST_MAX_HEADER ((uint64_t)100000000)
/* The most tensors and __metadata__ keys a header may list: far above any
 * model (BERT-large has ~400 tensors), far below what 100 MB could hold. */
#define ST_MAX_TENSORS 1000000
#define ST_MAX_META 1000000

enum {
    ST_OK = 0,
    ST_ERR_IO,          /* cannot open / read / write / rename: errno text in the message */
    ST_ERR_FORMAT,      /* not a safetensors file, bad JSON, unknown dtype, bad offsets */
    ST_ERR_TRUNCATED,   /* the header or the data goes past the end of the file */
    ST_ERR_CHECKSUM,    /* ctrain_crc32 does not match the data section */
    ST_ERR_ARG,         /* writer misuse: duplicate name, too many dims */
};

/* ---- writer ---- */

typedef struct StWriteEntry {
    char *name;
    DType dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    const void *data;   /* host bytes, kept by pointer until st_writer_write */
} StWriteEntry;

typedef struct StWriter {
    StWriteEntry *e;
    int n, cap;
    char **meta;        /* key, value, key, value, ... */
    int nmeta, metacap; /* pairs */
} StWriter;

void st_writer_init(StWriter *w);
/* Add a tensor; data (host, numel * dtype_size bytes) must stay valid until
 * the write. Returns ST_OK, or ST_ERR_ARG (with err) for a duplicate name,
 * an empty name or more than ST_MAX_DIMS dims. */
int st_writer_add(StWriter *w, const char *name, DType dt, int ndim, const int64_t *shape,
                  const void *data, char *err, size_t errlen);
/* Add a metadata key/value; "ctrain_crc32" is reserved (the writer sets it). */
int st_writer_meta(StWriter *w, const char *key, const char *value, char *err, size_t errlen);
/* Write the file atomically (see the top of this file). */
int st_writer_write(const StWriter *w, const char *path, char *err, size_t errlen);
/* Can st_writer_write write path? Creates and removes the temporary it would
 * write first (PATH.tmp.PID, in path's folder): ST_OK, or ST_ERR_IO with the
 * cause in err. For a run to find a bad --save before it trains, not after. */
int st_probe_writable(const char *path, char *err, size_t errlen);
/* Remove path's temporaries (PATH.tmp.PID) left by saves of processes that
 * are gone, with a warning each; st_writer_write calls it. Returns how many. */
int st_remove_stale_temps(const char *path);
/* Tests only: from now on every write fails with ENOSPC once it has written
 * `bytes` bytes, as on a full disk (bytes < 0: back to normal). */
void st_test_fail_writes_after(int64_t bytes);
void st_writer_free(StWriter *w);

/* ---- reader ---- */

typedef struct StEntry {
    char *name;
    const char *dtype_name;   /* as in the file: "F32", "BF16", "I64", ... */
    int dtype;                /* DType, or -1 when ctrain has no such type (F64, BOOL, ...) */
    size_t elem_size;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;
    uint64_t begin, end;      /* byte offsets in the data section */
    const void *data;         /* points into the file; may be unaligned for foreign files */
} StEntry;

typedef struct StFile {
    char *path;
    uint8_t *base;            /* the whole file (mapped, or read when mmap is refused) */
    size_t size;
    int mapped;
    uint64_t header_len;
    const uint8_t *data;      /* data section */
    size_t data_size;
    StEntry *e;               /* in header order */
    int n;
    const StEntry **by_name;  /* e sorted by name, for st_find */
    char **meta;              /* key, value, ... sorted by key (st_meta's binary search) */
    int nmeta;
} StFile;

/* Open, parse and validate a file; verifies ctrain_crc32 when present.
 * A name that appears twice (a tensor, a __metadata__ key) is refused by
 * name; so are more than ST_MAX_TENSORS tensors or ST_MAX_META keys. Every
 * check is O(n log n) in the header's size. On failure f is left empty
 * (st_close is still safe). */
int st_open(const char *path, StFile *f, char *err, size_t errlen);
const StEntry *st_find(const StFile *f, const char *name);
/* Metadata value for key, or NULL. */
const char *st_meta(const StFile *f, const char *key);
void st_close(StFile *f);

/* "F32" for DT_F32 ...; NULL for a dtype the format cannot name. */
const char *st_dtype_name(DType dt);
/* "[2, 3, 4]" into buf, for messages. */
const char *st_shape_str(char *buf, size_t len, int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
