/* idx.h — reader for IDX files (the MNIST / Fashion-MNIST container), plain
 * or gzip-compressed.
 *
 * Format (all integers big-endian):
 *   byte 0,1   0x00 0x00
 *   byte 2     element type: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64
 *   byte 3     ndim
 *   ndim x u32 dims[0..ndim-1]
 *   data       prod(dims) elements, row-major (last dim fastest)
 *
 * Only u8 data (type 0x08) is supported; every image and label set of the
 * MNIST family is u8. A file starting with the gzip magic (1f 8b) is
 * decompressed with zlib, any other is read as is, so "x-ubyte.gz" and an
 * unpacked "x-ubyte" go through the same call.
 *
 * Errors are returned, not fatal: idx_load() writes one line into err naming
 * the file and what is wrong with it (bytes expected and got for a truncated
 * file, zlib's own message for a corrupt stream, strerror for a missing one)
 * and returns a negative IdxStatus, so a caller can add its own hint and a
 * test can check the wording. A gzip stream is decoded to its end marker, so
 * a CRC-32 or length mismatch in the trailer (zlib sees it only at the end)
 * and a file cut anywhere, trailer included, are refused.
 */
#ifndef CTRAIN_DATA_IDX_H
#define CTRAIN_DATA_IDX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IDX_MAX_DIMS 8
/* Element-count ceiling: a header promising more is taken as damaged. */
#define IDX_MAX_ELEMS (1ull << 31)

typedef enum {
    IDX_OK = 0,
    IDX_ERR_OPEN = -1,      /* file missing, unreadable, or a directory */
    IDX_ERR_CORRUPT = -2,   /* zlib refused the stream (bad data, CRC, length) */
    IDX_ERR_FORMAT = -3,    /* wrong magic, unsupported type, absurd dims, extra data */
    IDX_ERR_TRUNCATED = -4, /* fewer bytes than the header promises */
    IDX_ERR_NOMEM = -5,
} IdxStatus;

typedef struct {
    uint8_t type;                /* 0x08: the only type idx_load accepts */
    int ndim;
    uint32_t dims[IDX_MAX_DIMS];
    size_t n;                    /* prod(dims): number of elements (= bytes for u8) */
    uint8_t *data;               /* [dims...] row-major; owned, freed by idx_free */
} IdxArray;

/* Load path into out. Returns IDX_OK, or a negative IdxStatus with a
 * one-line message in err (err may be NULL). On failure out is left empty
 * (idx_free on it is safe). */
int idx_load(IdxArray *out, const char *path, char *err, size_t errlen);
void idx_free(IdxArray *a);

/* "u8", "f32", ... for an IDX type byte; "unknown" otherwise. */
const char *idx_type_name(uint8_t type);

#ifdef __cplusplus
}
#endif
#endif
