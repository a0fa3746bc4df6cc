/* plan_store.h — what a search chose, kept on disk per machine, so that a
 * later run on the same card skips the search.
 *
 * A search (cuDNN's convolution algorithms and engines, ops/conv2d_cudnn.c)
 * times every candidate on the real buffers: ResNet50 in strict f32 spends
 * about a minute there before its first step. Its outcome depends on the
 * shape and the rules of the search (the store's key) and on the machine
 * (the store's identity: the card, its SM count, the driver, the library's
 * version), nothing else, so it can be kept.
 *
 * Where: one text file per family and identity,
 *   DIR/FAMILY-IDENTITY.txt        e.g. ~/.cache/ctrain/conv-nvidia-h200-sm-90-...txt
 * DIR from CTRAIN_PLAN_CACHE (unset: $XDG_CACHE_HOME/ctrain, else
 * ~/.cache/ctrain; "off": nothing on disk, the store lives in memory only).
 *
 * The file:
 *   # ctrain plan store, format 1 ...       (a comment line: what the file is)
 *   identity<TAB>the identity, whole
 *   KEY<TAB>VALUE                            one a line, printable ASCII
 * A file of another format or identity, one over 8 MiB, or one that cannot
 * be read is an empty store (said once); a line that does not parse is
 * skipped (counted, said once): its plan is searched again and the next
 * write replaces the file without it. Nothing a file holds is trusted
 * further than that: the caller checks each value it reads (a choice the
 * library refuses is searched again).
 *
 * Writing: plan_store_put() remembers the pair and rewrites the file at
 * once: under an exclusive flock of DIR/FAMILY-IDENTITY.txt.lock the file is
 * read again (pairs other processes added meanwhile are kept), merged with
 * this store's pairs (this store's value wins for a key in both) and written
 * whole to a temporary then renamed over it (engine/atomic_file.h), so a
 * crash or a full disk never leaves half a file. When the folder cannot be
 * made or written, the store says so once and stays in memory.
 */
#ifndef CTRAIN_OPS_PLAN_STORE_H
#define CTRAIN_OPS_PLAN_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLAN_STORE_KEY_MAX 256     /* bytes of a key, its terminator included */
#define PLAN_STORE_VALUE_MAX 512   /* bytes of a value, likewise */

typedef struct PlanStore PlanStore;

/* The folder CTRAIN_PLAN_CACHE names (or its default) in buf; NULL when it
 * is "off" or there is no default (neither XDG_CACHE_HOME nor HOME set). */
const char *plan_store_default_dir(char *buf, size_t n);

/* The store of `family` (a short word) for `identity` (one line), read from
 * dir (NULL: memory only). Never fails; see above for what it skips. */
PlanStore *plan_store_open(const char *dir, const char *family, const char *identity);
/* The same from the folder plan_store_default_dir names, saying (info) how
 * many `what` ("convolution plans") earlier runs kept there, when any. */
PlanStore *plan_store_open_default(const char *family, const char *identity, const char *what);
void plan_store_close(PlanStore *s);

/* The value kept for key, or NULL. */
const char *plan_store_get(const PlanStore *s, const char *key);

/* Keep key -> value (replacing an older value) and write the file. Returns
 * 0 when the pair is on disk, 1 when it is kept in memory only (no folder,
 * or writing failed: said once), -1 when key or value is not storable
 * (empty, too long, a tab, a line break or a byte outside printable ASCII). */
int plan_store_put(PlanStore *s, const char *key, const char *value);

/* Pairs of integers (cuDNN's engine knob settings: type, value) as a
 * value's text, "t:v,t:v" ("-" for none): 0, or -1 when n pairs do not fit
 * in len bytes (or n < 0). */
int plan_store_pairs_text(const int64_t (*kv)[2], int n, char *buf, size_t len);
/* The same text back into kv (at most max pairs): the count, or -1 when it
 * does not parse. */
int plan_store_pairs_parse(const char *text, int64_t (*kv)[2], int max);

/* The file's path, or NULL for a store in memory only. */
const char *plan_store_path(const PlanStore *s);
/* Pairs held, and lines of the file skipped when it was read. */
int plan_store_count(const PlanStore *s);
int plan_store_skipped(const PlanStore *s);

#ifdef __cplusplus
}
#endif
#endif
