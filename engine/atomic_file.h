/* atomic_file.h — a small file written whole or not at all: written to a
 * temporary beside it (PATH.tmp.PID) and renamed over PATH only when every
 * byte went out, so a failed write (a full disk) never replaces a good file
 * and never leaves half of one. For the JSON and text files the commands
 * write (eval --json, export --hf) and the searched plans kept on disk
 * (ops/plan_store.h); the safetensors writer and the shard and
 * vocabulary builders do the same for their own formats.
 */
#ifndef CTRAIN_ENGINE_ATOMIC_FILE_H
#define CTRAIN_ENGINE_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Open PATH's temporary for writing (its name into tmp); NULL with the
 * cause in err. */
FILE *atomic_file_open(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen);
/* Close f and rename tmp over path: 0, or -1 with the cause in err and the
 * temporary removed. */
int atomic_file_commit(FILE *f, const char *tmp, const char *path, char *err, size_t errlen);
/* src copied byte for byte to dst the same way: 0, or -1 with err. */
int atomic_file_copy(const char *src, const char *dst, char *err, size_t errlen);

#endif
