/* fuzz_plan_store.c — libFuzzer harness: a kept plan file
 * (ops/plan_store.h), as a later run on the same card reads it. The input
 * is the whole file, put where the store of FUZZ_PLAN_IDENTITY looks.
 * Checked: every pair read has a key and a value the file could hold
 * (non-empty, printable ASCII, under the size limits); then one new pair is
 * put, which rewrites the file: read again, it holds every pair read before
 * with the same value plus the new one, and no skipped line (the rewrite
 * drops what did not parse).
 */
#include "fuzz_util.h"
#include "ops/plan_store.h"

static char g_dir[64];
static char g_path[1100];

static void cleanup(void)
{
    unlink(g_path);
    char lock[1200];
    snprintf(lock, sizeof lock, "%s.lock", g_path);
    unlink(lock);
    rmdir(g_dir);
}

static int printable(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return 0;
    return 1;
}

/* The keys a store holds, found by trying the ones the harness knows: the
 * store has no iterator, so the check goes through the file it writes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    if (!g_dir[0]) {
        fuzz_tmpdir(g_dir, cleanup);
        PlanStore *s = plan_store_open(g_dir, "conv", FUZZ_PLAN_IDENTITY);
        snprintf(g_path, sizeof g_path, "%s", plan_store_path(s));
        plan_store_close(s);
    }
    FILE *f = fopen(g_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror("fuzz_plan_store: write");
        abort();
    }
    PlanStore *s = plan_store_open(g_dir, "conv", FUZZ_PLAN_IDENTITY);
    const int n = plan_store_count(s);
    fuzz_check(n >= 0 && plan_store_skipped(s) >= 0, "count %d skipped %d", n,
               plan_store_skipped(s));
    /* the pairs as the store holds them: read back from a rewrite below */
    const char *newkey = "fwd N1 H1 W1 C1 K1 R1 S1 fuzz-new-key";
    const int had_new = plan_store_get(s, newkey) != NULL;
    fuzz_check(plan_store_put(s, newkey, "Cp=1 algo=0 math=0 engine=-1 knobs=-") == 0,
               "put into %s failed", g_path);
    fuzz_check(plan_store_count(s) == n + !had_new, "count %d after a put, %d before",
               plan_store_count(s), n);
    PlanStore *t = plan_store_open(g_dir, "conv", FUZZ_PLAN_IDENTITY);
    fuzz_check(plan_store_count(t) == plan_store_count(s) && plan_store_skipped(t) == 0,
               "reread: %d pairs (%d skipped), %d written", plan_store_count(t),
               plan_store_skipped(t), plan_store_count(s));
    /* every line of the rewritten file is a pair the first store holds */
    size_t len = 0;
    FILE *g = fopen(g_path, "rb");
    fuzz_check(g != NULL, "the rewritten file is gone");
    char line[PLAN_STORE_KEY_MAX + PLAN_STORE_VALUE_MAX + 16];
    int lines = 0;
    while (fgets(line, sizeof line, g)) {
        len = strlen(line);
        fuzz_check(len > 0 && line[len - 1] == '\n', "a line without its end");
        line[len - 1] = 0;
        if (++lines <= 2) continue; /* header, identity */
        char *tab = strchr(line, '\t');
        fuzz_check(tab != NULL, "a written line without a tab: '%s'", line);
        *tab = 0;
        fuzz_check(printable(line, PLAN_STORE_KEY_MAX) && printable(tab + 1, PLAN_STORE_VALUE_MAX),
                   "a written pair the file cannot hold");
        const char *v = plan_store_get(s, line), *w = plan_store_get(t, line);
        fuzz_check(v && w && strcmp(v, tab + 1) == 0 && strcmp(w, v) == 0,
                   "pair '%s' differs between the stores and the file", line);
    }
    fclose(g);
    fuzz_check(lines == plan_store_count(s) + 2, "%d lines for %d pairs", lines,
               plan_store_count(s));
    plan_store_close(t);
    plan_store_close(s);
    return 0;
}
