/* test_plan_store.c — ops/plan_store: searched choices kept on disk.
 * A round trip, a second store (another process) adding pairs without
 * losing the first's, the folder made on demand, the default folder from
 * CTRAIN_PLAN_CACHE / XDG_CACHE_HOME / HOME, "off", another identity and
 * another format ignored, damaged lines skipped and dropped on the next
 * write, pairs the file cannot hold refused, an unwritable folder kept in
 * memory, and two processes writing at once losing nothing; the engine
 * knobs' text (plan_store_pairs_text / _parse) both ways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "file_util.h"
#include "ops/plan_store.h"

static char g_dir[] = "/tmp/ctrain_plan_store_XXXXXX";
static const char *ID = "Test Card 80GB, sm_90, 132 SMs, driver 13000, cuDNN 91900";

static int count_lines(const char *path)
{
    size_t n = 0;
    char *b = file_read(path, &n);
    if (!b) return -1;
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += b[i] == '\n';
    free(b);
    return lines;
}

static void test_round_trip(void)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/a/b", g_dir); /* made on the first write */
    PlanStore *s = plan_store_open(dir, "conv", ID);
    check_true("empty at first", plan_store_count(s) == 0 && plan_store_get(s, "k1") == NULL,
               "%d pairs", plan_store_count(s));
    const char *path = plan_store_path(s);
    check_true("path from family and identity",
               path && strstr(path, "/a/b/conv-test-card-80gb-sm-90-132-sms-driver-13000-cudnn-91900.txt"),
               "%s", path ? path : "(null)");
    check_true("put 1 on disk", plan_store_put(s, "fwd N=8 C=64", "algo=1 ws=0") == 0, NULL);
    check_true("put 2 on disk", plan_store_put(s, "bwd N=8 C=64", "algo=3 ws=1024") == 0, NULL);
    check_true("put replaces", plan_store_put(s, "fwd N=8 C=64", "algo=2 ws=0") == 0, NULL);
    check_true("get after put", plan_store_get(s, "fwd N=8 C=64") &&
               strcmp(plan_store_get(s, "fwd N=8 C=64"), "algo=2 ws=0") == 0, NULL);
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", path);
    plan_store_close(s);
    check_true("file: header, identity, 2 pairs", count_lines(saved) == 4, "%d lines",
               count_lines(saved));

    /* another process later: reads both, adds one; the file keeps all three */
    PlanStore *t = plan_store_open(dir, "conv", ID);
    check_true("read back 2", plan_store_count(t) == 2 && plan_store_skipped(t) == 0,
               "%d pairs, %d skipped", plan_store_count(t), plan_store_skipped(t));
    check_true("value read back", plan_store_get(t, "bwd N=8 C=64") &&
               strcmp(plan_store_get(t, "bwd N=8 C=64"), "algo=3 ws=1024") == 0, NULL);
    /* a store opened before t wrote (a concurrent run) adds its own pair:
     * the merge keeps t's too */
    PlanStore *u = plan_store_open(dir, "conv", ID);
    plan_store_put(t, "wgrad N=8 C=64", "engine=12 knobs=3:1");
    plan_store_put(u, "fwd N=16 C=64", "algo=0 ws=0");
    plan_store_close(t);
    plan_store_close(u);
    PlanStore *v = plan_store_open(dir, "conv", ID);
    check_true("merge keeps every process's pairs", plan_store_count(v) == 4,
               "%d pairs", plan_store_count(v));
    plan_store_close(v);

    /* another identity (a driver update): its own file, the first untouched */
    PlanStore *w = plan_store_open(dir, "conv", "Test Card 80GB, sm_90, 132 SMs, driver 13010, cuDNN 91900");
    check_true("another identity starts empty", plan_store_count(w) == 0, "%d",
               plan_store_count(w));
    plan_store_close(w);
}

static void test_damaged(void)
{
    char dir[256], path[512];
    snprintf(dir, sizeof dir, "%s/damaged", g_dir);
    mkdir(dir, 0755);
    PlanStore *s = plan_store_open(dir, "conv", ID);
    snprintf(path, sizeof path, "%s", plan_store_path(s));
    plan_store_put(s, "good", "1");
    plan_store_close(s);

    /* append damage: no tab, a control byte, an over-long line, a last line
     * cut off without its newline */
    FILE *f = fopen(path, "ab");
    fputs("no tab here\n", f);
    fputs("ctl\x01key\tv\n", f);
    fputs("also good\tvalue 2\n", f);
    for (int i = 0; i < 3000; i++) fputc('x', f);
    fputs("\tlong\n", f);
    fputs("cut\toff", f);
    fclose(f);
    s = plan_store_open(dir, "conv", ID);
    check_true("damaged lines skipped", plan_store_skipped(s) == 4, "%d skipped",
               plan_store_skipped(s));
    check_true("good lines kept", plan_store_count(s) == 2 && plan_store_get(s, "also good"),
               "%d pairs", plan_store_count(s));
    plan_store_put(s, "new", "3");
    plan_store_close(s);
    check_true("rewrite drops the damage", count_lines(path) == 5, "%d lines", count_lines(path));

    /* another identity in the file: nothing read, and a write replaces it */
    size_t n;
    char *b = file_read(path, &n);
    char *id = strstr(b, "driver 13000");
    id[7] = '9';
    file_write(path, b, n);
    free(b);
    s = plan_store_open(dir, "conv", ID);
    check_true("foreign identity: empty", plan_store_count(s) == 0, "%d", plan_store_count(s));
    plan_store_put(s, "only", "1");
    plan_store_close(s);
    check_true("foreign file replaced", count_lines(path) == 3, "%d lines", count_lines(path));

    /* another format */
    const char *other = "# some other file\nidentity\tx\nk\tv\n";
    file_write(path, other, strlen(other));
    s = plan_store_open(dir, "conv", ID);
    check_true("other format: empty", plan_store_count(s) == 0, "%d", plan_store_count(s));
    plan_store_close(s);
    /* a binary file */
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 131 + 7);
    file_write(path, junk, sizeof junk);
    s = plan_store_open(dir, "conv", ID);
    check_true("binary file: empty", plan_store_count(s) == 0, "%d", plan_store_count(s));
    plan_store_close(s);
}

static void test_refused_and_memory(void)
{
    PlanStore *m = plan_store_open(NULL, "conv", ID);
    check_true("memory only: no path", plan_store_path(m) == NULL, NULL);
    check_true("memory only: put kept in memory", plan_store_put(m, "k", "v") == 1 &&
               plan_store_get(m, "k") != NULL, NULL);
    check_true("tab in key refused", plan_store_put(m, "a\tb", "v") == -1, NULL);
    check_true("newline in value refused", plan_store_put(m, "a", "v\n") == -1, NULL);
    check_true("empty value refused", plan_store_put(m, "a", "") == -1, NULL);
    check_true("non-ASCII refused", plan_store_put(m, "caf\xc3\xa9", "v") == -1, NULL);
    char longk[PLAN_STORE_KEY_MAX + 1];
    memset(longk, 'k', sizeof longk - 1);
    longk[sizeof longk - 1] = '\0';
    check_true("over-long key refused", plan_store_put(m, longk, "v") == -1, NULL);
    check_true("refused pairs not kept", plan_store_count(m) == 1, "%d", plan_store_count(m));
    plan_store_close(m);

    /* a folder that cannot be made: kept in memory, said once */
    char dir[256];
    snprintf(dir, sizeof dir, "%s/file", g_dir);
    file_write(dir, "x", 1); /* a file where the folder should be */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    PlanStore *s = plan_store_open(sub, "conv", ID);
    check_true("unwritable: memory only", plan_store_put(s, "k", "v") == 1 &&
               plan_store_get(s, "k") != NULL, NULL);
    check_true("unwritable: still in memory", plan_store_put(s, "k2", "v") == 1 &&
               plan_store_count(s) == 2, NULL);
    plan_store_close(s);
}

static void test_default_dir(void)
{
    char buf[512];
    setenv("CTRAIN_PLAN_CACHE", "/x/plans", 1);
    const char *d = plan_store_default_dir(buf, sizeof buf);
    check_true("CTRAIN_PLAN_CACHE wins", d && strcmp(d, "/x/plans") == 0, "%s", d ? d : "(null)");
    setenv("CTRAIN_PLAN_CACHE", "off", 1);
    check_true("off: no folder", plan_store_default_dir(buf, sizeof buf) == NULL, NULL);
    unsetenv("CTRAIN_PLAN_CACHE");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    d = plan_store_default_dir(buf, sizeof buf);
    check_true("XDG_CACHE_HOME/ctrain", d && strcmp(d, "/xdg/ctrain") == 0, "%s", d ? d : "(null)");
    unsetenv("XDG_CACHE_HOME");
    d = plan_store_default_dir(buf, sizeof buf);
    check_true("~/.cache/ctrain", d && strcmp(d, "/home/u/.cache/ctrain") == 0, "%s",
               d ? d : "(null)");
    unsetenv("HOME");
    check_true("no HOME: none", plan_store_default_dir(buf, sizeof buf) == NULL, NULL);
}

/* Two processes, 200 pairs each, written at once: all 400 survive. */
static void test_concurrent(void)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/conc", g_dir);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            PlanStore *s = plan_store_open(dir, "conv", ID);
            char key[64];
            for (int i = 0; i < 200; i++) {
                snprintf(key, sizeof key, "proc %d plan %d", k, i);
                if (plan_store_put(s, key, "algo=1") != 0) _exit(2);
            }
            plan_store_close(s);
            _exit(0);
        }
    }
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        int st = 0;
        waitpid(kids[k], &st, 0);
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    check_true("concurrent writers exit 0", ok, NULL);
    PlanStore *s = plan_store_open(dir, "conv", ID);
    check_true("concurrent writers lose nothing", plan_store_count(s) == 400, "%d of 400",
               plan_store_count(s));
    plan_store_close(s);
}

/* the engine knobs' text: a round trip of 0, 1 and many pairs, negative
 * values, the exact fit and one byte short, and texts that do not parse */
static void test_pairs(void)
{
    int64_t kv[40][2], back[40][2];
    for (int i = 0; i < 40; i++) {
        kv[i][0] = i;
        kv[i][1] = i % 3 ? -1000000007LL * i : i;
    }
    char buf[600];
    int ok = 1;
    for (int n = 0; n <= 33; n++) {
        if (plan_store_pairs_text((const int64_t(*)[2])kv, n, buf, sizeof buf) != 0) ok = 0;
        int m = plan_store_pairs_parse(buf, back, 40);
        if (m != n || (n && memcmp(kv, back, (size_t)n * sizeof kv[0]) != 0)) ok = 0;
    }
    check_true("pairs.round_trip", ok, "a round trip of up to 33 pairs differs");
    plan_store_pairs_text((const int64_t(*)[2])kv, 0, buf, sizeof buf);
    check_true("pairs.none_is_dash", strcmp(buf, "-") == 0, "got '%s'", buf);
    plan_store_pairs_text((const int64_t(*)[2])kv, 2, buf, sizeof buf);
    check_true("pairs.text", strcmp(buf, "0:0,1:-1000000007") == 0, "got '%s'", buf);
    size_t need = strlen(buf) + 1;
    check_true("pairs.exact_fit",
               plan_store_pairs_text((const int64_t(*)[2])kv, 2, buf, need) == 0 &&
                   plan_store_pairs_text((const int64_t(*)[2])kv, 2, buf, need - 1) == -1,
               "a buffer of %zu bytes must fit, one less must not", need);
    const char *bad[] = {"", "1:", "1:2,", "1:2;3:4", "x", "1:2 ", "1", ",1:2"};
    int refused = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (plan_store_pairs_parse(bad[i], back, 40) != -1 &&
            !(bad[i][0] == '\0' && plan_store_pairs_parse(bad[i], back, 40) == 0))
            refused = 0;
    check_true("pairs.bad_refused", refused, "a malformed text parsed");
    check_true("pairs.too_many", plan_store_pairs_parse("1:1,2:2,3:3", back, 2) == -1,
               "three pairs into room for two");
}

int main(void)
{
    if (!mkdtemp(g_dir)) { perror("mkdtemp"); return 1; }
    test_round_trip();
    test_damaged();
    test_refused_and_memory();
    test_default_dir();
    test_concurrent();
    test_pairs();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "test_plan_store: could not remove %s\n", g_dir);
    return check_summary();
}
