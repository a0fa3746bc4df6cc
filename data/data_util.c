/* data_util.c — array growth and the output-folder check for the loaders
 * in data/. */
#include "data_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/error.h"

int data_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

int data_check_output(const char *path, const char *what, char *err, size_t errlen)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return ct_fail(err, errlen, -1, "cannot write %s %s: it is a folder", what, path);
    if (stat(dir, &sb) != 0)
        return ct_fail(err, errlen, -1, "cannot write %s %s: the folder %s %s", what, path, dir,
                       errno == ENOENT ? "does not exist" : strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ct_fail(err, errlen, -1, "cannot write %s %s: %s is not a folder", what, path,
                       dir);
    if (access(dir, W_OK | X_OK) != 0)
        return ct_fail(err, errlen, -1, "cannot write %s %s: the folder %s is not writable: %s",
                       what, path, dir, strerror(errno));
    return 0;
}
