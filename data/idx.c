/* idx.c — IDX reader (format in idx.h): header, dims, u8 data, through zlib.
 *
 * A file starting with the gzip magic 1f 8b is decoded with inflate, any
 * other is read as plain bytes. inflate is used directly rather than gzread:
 * gzread reports a clean end of file when the input runs out inside the
 * 8-byte gzip trailer, so a file cut there would pass unchecked. Here a
 * gzip stream must reach Z_STREAM_END, which inflate only returns after
 * checking the trailer's CRC-32 and length. After the promised bytes one
 * more byte is requested: that drives inflate through the trailer and tells
 * a file with extra data from a complete one.
 *
 * Memory follows the data, never the header alone: a plain file shorter
 * than its header promises is refused before the data is allocated (its
 * size is known), and a gzip stream's buffer grows as bytes arrive, so a
 * damaged 9-byte header promising 2^31 elements costs no 2 GiB.
 */
#include "idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "engine/error.h"

const char *idx_type_name(uint8_t type)
{
    switch (type) {
    case 0x08: return "u8";
    case 0x09: return "i8";
    case 0x0B: return "i16";
    case 0x0C: return "i32";
    case 0x0D: return "f32";
    case 0x0E: return "f64";
    default: return "unknown";
    }
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* "60000 x 28 x 28" */
static void dims_str(char *buf, size_t len, const uint32_t *dims, int ndim)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? " x %u" : "%u", dims[i]);
}

/* Input buffer: fewer read(2) calls than zlib's 8 KiB default. */
#define IDX_INBUF (1u << 18)

/* A byte source: a gzip stream decoded with inflate, or plain bytes. */
typedef struct {
    int fd;
    const char *path;
    long long file_size; /* bytes of the file (fstat), -1 when unknown */
    int gzip;            /* stream starts with 1f 8b */
    int zinit;           /* inflateInit2 done */
    int member_end;      /* inflate returned Z_STREAM_END for the current member */
    int file_eof;        /* read(2) returned 0 */
    z_stream zs;
    uint8_t *in;         /* [IDX_INBUF]; zs.next_in/avail_in point into it */
    /* failure: status and message, set by the first error */
    int status;
    char msg[256];
    int cut;             /* the gzip stream ended before Z_STREAM_END */
} IdxSrc;

/* Keep at least `need` unread input bytes buffered unless the file ends.
 * Returns 0, or -1 on a read error (status set). */
static int src_fill(IdxSrc *s, size_t need)
{
    if (s->zs.avail_in && s->zs.next_in != s->in)
        memmove(s->in, s->zs.next_in, s->zs.avail_in);
    s->zs.next_in = s->in;
    while (s->zs.avail_in < need && !s->file_eof) {
        ssize_t r = read(s->fd, s->in + s->zs.avail_in, IDX_INBUF - s->zs.avail_in);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s->status = IDX_ERR_OPEN;
            snprintf(s->msg, sizeof s->msg, "cannot read %s: %s", s->path, strerror(errno));
            return -1;
        }
        if (r == 0) s->file_eof = 1;
        s->zs.avail_in += (uInt)r;
    }
    return 0;
}

/* Up to len bytes into buf: fewer only at the end of the data. Returns the
 * count, or -1 on an error (status and msg set). A gzip stream that stops
 * before its end marker sets `cut` and returns what it decoded. After a
 * member's end marker (its CRC-32 and length already checked by inflate) a
 * following gzip member is decoded too; other trailing bytes are ignored, as
 * gzip(1) and zlib's gzread do. */
static long long src_read(IdxSrc *s, uint8_t *buf, size_t len)
{
    size_t got = 0;
    if (!s->gzip) {
        size_t k = s->zs.avail_in < len ? s->zs.avail_in : len;
        memcpy(buf, s->zs.next_in, k);
        s->zs.next_in += k;
        s->zs.avail_in -= (uInt)k;
        got = k;
        while (got < len && !s->file_eof) {
            ssize_t r = read(s->fd, buf + got, len - got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                s->status = IDX_ERR_OPEN;
                snprintf(s->msg, sizeof s->msg, "cannot read %s: %s", s->path, strerror(errno));
                return -1;
            }
            if (r == 0) s->file_eof = 1;
            got += (size_t)r;
        }
        return (long long)got;
    }
    while (got < len) {
        if (s->member_end) {  /* another gzip member, or the end */
            if (src_fill(s, 2)) return -1;
            if (s->zs.avail_in < 2 || s->in[0] != 0x1f || s->in[1] != 0x8b) break;
            inflateReset(&s->zs);
            s->member_end = 0;
        }
        if (s->zs.avail_in == 0) {
            if (src_fill(s, 1)) return -1;
            if (s->zs.avail_in == 0) {
                s->cut = 1;
                break;
            }
        }
        size_t want = len - got > (1u << 30) ? (1u << 30) : len - got;
        s->zs.next_out = buf + got;
        s->zs.avail_out = (uInt)want;
        int ret = inflate(&s->zs, Z_NO_FLUSH);
        got += want - s->zs.avail_out;
        if (ret == Z_STREAM_END) {
            s->member_end = 1;
        } else if (ret == Z_MEM_ERROR) {
            s->status = IDX_ERR_NOMEM;
            snprintf(s->msg, sizeof s->msg, "out of memory decompressing %s", s->path);
            return -1;
        } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
            s->status = IDX_ERR_CORRUPT;
            snprintf(s->msg, sizeof s->msg, "%s: corrupt gzip data: %s (zlib error %d)",
                     s->path, s->zs.msg ? s->zs.msg : "invalid data", ret);
            return -1;
        }
    }
    return (long long)got;
}

static int src_fail(IdxSrc *s, char *err, size_t errlen)
{
    return ct_fail(err, errlen, s->status, "%s", s->msg);
}

/* A short read: name the bytes promised and got, and say so when the gzip
 * stream itself ended early. */
static int short_fail(IdxSrc *s, const char *what, size_t want, long long got, char *err,
                      size_t errlen)
{
    return ct_fail(err, errlen, IDX_ERR_TRUNCATED,
                   "%s is truncated: expected %zu %s bytes, got %lld%s", s->path, want,
                   what, got, s->cut ? " (gzip stream: unexpected end of file)" : "");
}

static int load_stream(IdxArray *out, IdxSrc *s, char *err, size_t errlen)
{
    const char *path = s->path;
    uint8_t hdr[4 + 4 * IDX_MAX_DIMS];
    long long got = src_read(s, hdr, 4);
    if (got < 0) return src_fail(s, err, errlen);
    if (got < 4) return short_fail(s, "header", 4, got, err, errlen);

    if (hdr[0] != 0 || hdr[1] != 0 || !strcmp(idx_type_name(hdr[2]), "unknown"))
        return ct_fail(err, errlen, IDX_ERR_FORMAT,
                       "%s is not an IDX file: it starts with bytes %02x %02x %02x %02x, "
                       "an IDX file starts with 00 00 <type> <ndim>",
                       path, hdr[0], hdr[1], hdr[2], hdr[3]);
    if (hdr[2] != 0x08)
        return ct_fail(err, errlen, IDX_ERR_FORMAT,
                       "%s: unsupported element type 0x%02X (%s); only 0x08 (u8) "
                       "is supported", path, hdr[2], idx_type_name(hdr[2]));
    int ndim = hdr[3];
    if (ndim < 1 || ndim > IDX_MAX_DIMS)
        return ct_fail(err, errlen, IDX_ERR_FORMAT,
                       "%s: header gives %d dimensions; expected 1 to %d", path, ndim,
                       IDX_MAX_DIMS);

    size_t dbytes = 4 * (size_t)ndim;
    got = src_read(s, hdr + 4, dbytes);
    if (got < 0) return src_fail(s, err, errlen);
    if ((size_t)got < dbytes) return short_fail(s, "header", 4 + dbytes, 4 + got, err, errlen);

    uint32_t dims[IDX_MAX_DIMS];
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        /* Both factors stay below 2^32 because n is checked every step. */
        n *= dims[i];
        if (n > IDX_MAX_ELEMS) {
            char ds[160];
            dims_str(ds, sizeof ds, dims, i + 1);
            return ct_fail(err, errlen, IDX_ERR_FORMAT,
                           "%s: header dims %s%s exceed %llu elements; the header is "
                           "damaged", path, ds, i + 1 < ndim ? " x ..." : "",
                           (unsigned long long)IDX_MAX_ELEMS);
        }
    }

    uint64_t hbytes = 4 + dbytes;
    if (!s->gzip && s->file_size >= 0 && (uint64_t)s->file_size < hbytes + n) {
        char ds[160];
        dims_str(ds, sizeof ds, dims, ndim);
        return ct_fail(err, errlen, IDX_ERR_TRUNCATED, "%s is truncated: its header (dims %s) "
                       "promises %llu bytes, the file has %lld", path, ds,
                       (unsigned long long)(hbytes + n), s->file_size);
    }
    /* gzip: no size to check up front; the buffer doubles as the data comes */
    size_t cap = s->gzip && n > (1u << 24) ? (1u << 24) : (size_t)n;
    uint8_t *data = malloc(cap ? cap : 1);
    got = 0;
    while (data && got >= 0) {
        long long r = src_read(s, data + got, cap - (size_t)got);
        if (r < 0) { got = r; break; }
        got += r;
        if ((size_t)got < cap || cap == n) break;
        size_t c2 = cap > n / 2 ? (size_t)n : 2 * cap;
        uint8_t *q = realloc(data, c2);
        if (!q) { free(data); data = NULL; break; }
        data = q;
        cap = c2;
    }
    if (!data)
        return ct_fail(err, errlen, IDX_ERR_NOMEM, "out of memory: %s needs %llu bytes",
                       path, (unsigned long long)n);
    int st = IDX_OK;
    if (got < 0) {
        st = src_fail(s, err, errlen);
    } else if ((size_t)got < n) {
        st = short_fail(s, "data", (size_t)n, got, err, errlen);
    } else {
        /* One byte past the end: runs inflate through the gzip trailer (CRC-32
         * and length checks) and finds data the header did not promise. */
        uint8_t extra;
        got = src_read(s, &extra, 1);
        if (got < 0) {
            st = src_fail(s, err, errlen);
        } else if (got > 0) {
            char ds[160];
            dims_str(ds, sizeof ds, dims, ndim);
            st = ct_fail(err, errlen, IDX_ERR_FORMAT,
                         "%s holds more data than its header promises (dims %s = %llu "
                         "bytes)", path, ds, (unsigned long long)n);
        } else if (s->cut) {  /* data complete, trailer cut off */
            st = ct_fail(err, errlen, IDX_ERR_TRUNCATED,
                         "%s is truncated: all %llu data bytes read but the gzip stream "
                         "ends early (unexpected end of file)", path,
                         (unsigned long long)n);
        }
    }
    if (st != IDX_OK) {
        free(data);
        return st;
    }

    out->type = hdr[2];
    out->ndim = ndim;
    memcpy(out->dims, dims, sizeof(uint32_t) * (size_t)ndim);
    out->n = (size_t)n;
    out->data = data;
    return IDX_OK;
}

int idx_load(IdxArray *out, const char *path, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (err && errlen) err[0] = 0;

    IdxSrc s;
    memset(&s, 0, sizeof s);
    s.path = path;
    s.file_size = -1;
    s.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s.fd < 0)
        return ct_fail(err, errlen, IDX_ERR_OPEN, "cannot open %s: %s", path,
                       strerror(errno));
    struct stat sb;
    int st = IDX_OK, have_stat = fstat(s.fd, &sb) == 0;
    if (have_stat && S_ISREG(sb.st_mode)) s.file_size = (long long)sb.st_size;
    if (have_stat && S_ISDIR(sb.st_mode)) {
        st = ct_fail(err, errlen, IDX_ERR_OPEN, "cannot read %s: %s", path,
                     strerror(EISDIR));
    } else if (!(s.in = malloc(IDX_INBUF))) {
        st = ct_fail(err, errlen, IDX_ERR_NOMEM, "out of memory opening %s", path);
    } else if (src_fill(&s, 2)) {
        st = src_fail(&s, err, errlen);
    } else {
        s.gzip = s.zs.avail_in >= 2 && s.in[0] == 0x1f && s.in[1] == 0x8b;
        /* 16 + MAX_WBITS: a gzip wrapper, whose CRC-32 and length inflate checks. */
        if (s.gzip && inflateInit2(&s.zs, 16 + MAX_WBITS) != Z_OK)
            st = ct_fail(err, errlen, IDX_ERR_NOMEM, "out of memory opening %s", path);
        else
            s.zinit = s.gzip;
    }
    if (st == IDX_OK) st = load_stream(out, &s, err, errlen);
    if (s.zinit) inflateEnd(&s.zs);
    free(s.in);
    close(s.fd);
    return st;
}

void idx_free(IdxArray *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
