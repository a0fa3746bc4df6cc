/* atomic_file.c — write to PATH.tmp.PID, then rename over PATH (atomic_file.h). */
#include "atomic_file.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

FILE *atomic_file_open(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    return f;
}

int atomic_file_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen)
{
    const int bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        remove(tmp);
        return -1;
    }
    return 0;
}

int atomic_file_copy(const char *src, const char *dst, char *err, size_t errlen)
{
    FILE *in = fopen(src, "rb");
    if (!in) {
        snprintf(err, errlen, "cannot read %s: %s", src, strerror(errno));
        return -1;
    }
    char tmp[1100];
    FILE *out = atomic_file_open(dst, tmp, sizeof tmp, err, errlen);
    if (!out) {
        fclose(in);
        return -1;
    }
    char buf[65536];
    size_t n;
    int bad = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) bad |= fwrite(buf, 1, n, out) != n;
    bad |= ferror(in) != 0;
    fclose(in);
    if (bad) {
        fclose(out);
        remove(tmp);
        snprintf(err, errlen, "cannot copy %s to %s: %s", src, dst, strerror(errno ? errno : EIO));
        return -1;
    }
    return atomic_file_commit(out, tmp, dst, err, errlen);
}
