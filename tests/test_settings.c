/* test_settings.c — the settings table (engine/settings.h):
 *   (a) docs/env.md is what the table generates (`ctrain env --markdown`);
 *   (b) every entry has a name, a one-line doc and a default that parses
 *       (or says what unset means); the CTRAIN_LOG words are LogLevel's
 *       order; the rendezvous port's default is dist_env.h's;
 *   (c) the parser: switches 0 / 1 / empty / unset / garbage (garbage is
 *       fatal, in a forked child, with the variable and a hint), sizes with
 *       and without units, integers out of range, choices, strings;
 *       CTRAIN_CONV_NONDETERMINISTIC=0 reads as off;
 *   (d) no source file under engine ops models data train calls getenv()
 *       but engine/settings.c and the data-parallel parser's lookup
 *       (train/parallel/dist_env.c).
 * Runs from the repository root (as `make test` runs it).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "engine/log.h"
#include "engine/settings.h"
#include "train/parallel/dist_env.h"

/* ---- (a) docs/env.md ---- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) b = realloc(b, (cap *= 2) + 1);
    }
    fclose(f);
    if (b) b[n] = 0;
    *len = n;
    return b;
}

static void test_docs(void)
{
    char *gen = NULL;
    size_t gen_len = 0, doc_len = 0;
    FILE *m = open_memstream(&gen, &gen_len);
    settings_markdown(m);
    fclose(m);
    char *doc = read_file("docs/env.md", &doc_len);
    const char *fix = "run `build/ctrain env --markdown > docs/env.md`";
    if (!doc) {
        check_true("docs.env_md_exists", 0, "cannot read docs/env.md (from the repository root); %s",
                   fix);
        free(gen);
        return;
    }
    int line = 1;
    size_t i = 0;
    while (i < gen_len && i < doc_len && gen[i] == doc[i]) line += gen[i++] == '\n';
    int same = gen_len == doc_len && i == gen_len;
    if (!same) {
        size_t a = i, b = i;
        while (a > 0 && gen[a - 1] != '\n') a--;
        for (b = a; b < doc_len && doc[b] != '\n'; b++) {}
        size_t c = a;
        while (c < gen_len && gen[c] != '\n') c++;
        check_true("docs.env_md_matches_table", 0,
                   "docs/env.md differs from the table at line %d:\n    file:  %.*s\n    table: "
                   "%.*s\n  %s", line, (int)(b > a ? (b - a > 160 ? 160 : b - a) : 0),
                   a < doc_len ? doc + a : "", (int)(c - a > 160 ? 160 : c - a), gen + a, fix);
    } else {
        check_true("docs.env_md_matches_table", 1, NULL);
    }
    free(doc);
    free(gen);
}

/* ---- (b) the table ---- */

static void test_table(void)
{
    int users = 0, ok_order = 1;
    SettingAudience prev = SA_USER;
    for (int i = 0; i < SET_COUNT; i++) {
        const Setting *s = setting_info((SettingId)i);
        char name[96];
        snprintf(name, sizeof name, "table.%s", s->name ? s->name : "(unnamed)");
        int ok = s->name && s->doc && s->doc[0] && !strchr(s->doc, '|') && !strchr(s->doc, '\n');
        const char *why = "a name and a one-line doc without '|'";
        if (ok && (s->audience == SA_FOREIGN) == !strncmp(s->name, "CTRAIN_", 7)) {
            ok = 0;
            why = "CTRAIN_ names are ours, others' are SA_FOREIGN";
        }
        if (ok && !s->dflt && !(s->unset && s->unset[0] && !strchr(s->unset, '|'))) {
            ok = 0;
            why = "no default: the unset text says what unset means";
        }
        long long v = 0;
        char err[512], hint[1024];
        if (ok && s->dflt && setting_parse(&v, (SettingId)i, s->dflt, err, sizeof err, hint,
                                           sizeof hint) != 0) {
            ok = 0;
            why = err;
        }
        if (ok && s->kind == SK_INT && s->lo > s->hi) { ok = 0; why = "lo > hi"; }
        if (ok && s->kind == SK_SIZE && s->unit == 0) { ok = 0; why = "a size with no unit"; }
        if (ok && s->kind == SK_CHOICE &&
            (!s->choices || !s->choices[0] || strstr(s->choices, "||") ||
             s->choices[0] == '|' || s->choices[strlen(s->choices) - 1] == '|')) {
            ok = 0;
            why = "a choice needs words, '|' between them";
        }
        for (int j = 0; ok && j < i; j++)
            if (!strcmp(setting_name((SettingId)j), s->name)) { ok = 0; why = "declared twice"; }
        check_true(name, ok, "%s", why);
        if (s->audience < prev) ok_order = 0;
        prev = s->audience;
        users += s->audience == SA_USER;
    }
    check_true("table.audiences_in_order", ok_order, "the ids run users, developers, internal, "
               "foreign (docs/env.md's order)");
    check_true("table.few_user_variables", users <= 12, "%d variables for users: what a user "
               "chooses is a command-line flag", users);

    /* CTRAIN_LOG's words are LogLevel's, in order */
    long long lv = -2;
    char err[512], hint[1024];
    static const char *levels[] = {"error", "warn", "info", "debug", "trace"};
    int lok = 1;
    for (int l = 0; l < 5; l++)
        lok &= setting_parse(&lv, SET_LOG, levels[l], err, sizeof err, hint, sizeof hint) == 0 &&
               lv == l && log_parse_level(levels[l]) == l;
    check_true("table.log_levels_in_loglevel_order", lok, "CTRAIN_LOG's choices differ from LogLevel");
    setting_parse(&lv, SET_LOG, NULL, err, sizeof err, hint, sizeof hint);
    check_true("table.log_default_info", lv == LOG_INFO, "got %lld", lv);
    long long port = 0;
    setting_parse(&port, SET_MASTER_PORT, NULL, err, sizeof err, hint, sizeof hint);
    check_true("table.master_port_is_dist_default", port == DIST_DEFAULT_PORT,
               "table %lld, dist_env.h %d", port, DIST_DEFAULT_PORT);
}

/* ---- (c) the parser ---- */

static long long parse(SettingId id, const char *text, int *rc, char *err, size_t errlen)
{
    long long v = -12345;
    char hint[1024];
    *rc = setting_parse(&v, id, text, err, errlen, hint, sizeof hint);
    return v;
}

/* One case: text parses to want (want_rc 0), or is refused (want_rc -1)
 * with an error naming the variable and saying `says`. */
static void expect(const char *name, SettingId id, const char *text, int want_rc, long long want,
                   const char *says)
{
    int rc;
    char err[512] = "";
    long long v = parse(id, text, &rc, err, sizeof err);
    if (want_rc == 0)
        check_true(name, rc == 0 && v == want, "'%s': rc %d, value %lld, want %lld (%s)",
                   text ? text : "(unset)", rc, v, want, err);
    else
        check_true(name, rc == -1 && strstr(err, setting_name(id)) && strstr(err, says),
                   "'%s': rc %d, message '%s', want it to name %s and say '%s'",
                   text ? text : "(unset)", rc, err, setting_name(id), says);
}

static void test_switches(void)
{
    expect("switch.0", SET_LINEAR_EPILOGUE, "0", 0, 0, NULL);
    expect("switch.1", SET_LINEAR_EPILOGUE, "1", 0, 1, NULL);
    expect("switch.empty_is_default", SET_LINEAR_EPILOGUE, "", 0, 1, NULL);
    expect("switch.unset_is_default", SET_LINEAR_EPILOGUE, NULL, 0, 1, NULL);
    expect("switch.unset_default_0", SET_OVERLAP_UPDATE, NULL, 0, 0, NULL);
    expect("switch.unset_auto", SET_DIST_SHARD, NULL, 0, -1, NULL);
    expect("switch.garbage", SET_LINEAR_EPILOGUE, "yes", -1, 0, "is not 0 or 1");
    expect("switch.two", SET_LINEAR_EPILOGUE, "2", -1, 0, "is not 0 or 1");
    expect("switch.01", SET_LINEAR_EPILOGUE, "01", -1, 0, "is not 0 or 1");
    expect("switch.space", SET_LINEAR_EPILOGUE, " 1", -1, 0, "is not 0 or 1");

    /* the =0 bug: CTRAIN_CONV_NONDETERMINISTIC=0 once turned the option on */
    setenv("CTRAIN_CONV_NONDETERMINISTIC", "0", 1);
    check_true("switch.conv_nondeterministic_0_is_off",
               setting_switch(SET_CONV_NONDETERMINISTIC) == 0, "=0 read as on");
    setenv("CTRAIN_CONV_NONDETERMINISTIC", "1", 1);
    check_true("switch.conv_nondeterministic_1_is_on",
               setting_switch(SET_CONV_NONDETERMINISTIC) == 1, "=1 read as off");
    unsetenv("CTRAIN_CONV_NONDETERMINISTIC");
    check_true("switch.conv_nondeterministic_unset_is_off",
               setting_switch(SET_CONV_NONDETERMINISTIC) == 0, "unset read as on");
    setenv("CTRAIN_CONV_NONDETERMINISTIC", "", 1);
    check_true("switch.conv_nondeterministic_empty_is_off",
               setting_switch(SET_CONV_NONDETERMINISTIC) == 0, "empty read as on");
    unsetenv("CTRAIN_CONV_NONDETERMINISTIC");
}

static void test_sizes(void)
{
    const long long K = 1024, M = K * K, G = M * K;
    expect("size.unset_none", SET_MEM_LIMIT, NULL, 0, 0, NULL);
    expect("size.24G", SET_MEM_LIMIT, "24G", 0, 24 * G, NULL);
    expect("size.512M", SET_MEM_LIMIT, "512M", 0, 512 * M, NULL);
    expect("size.1.5g", SET_MEM_LIMIT, "1.5g", 0, 3 * G / 2, NULL);
    expect("size.4kB", SET_MEM_LIMIT, "4kB", 0, 4 * K, NULL);
    expect("size.bare_bytes", SET_MEM_LIMIT, "1000", 0, 1000, NULL);
    expect("size.bytes_B", SET_MEM_LIMIT, "1000B", 0, 1000, NULL);
    expect("size.mb_default", SET_CONV_SEARCH_WS_MB, NULL, 0, 4096 * M, NULL);
    expect("size.mb_bare_is_mib", SET_CONV_SEARCH_WS_MB, "64", 0, 64 * M, NULL);
    expect("size.mb_fraction", SET_OVERLAP_BUCKET_MB, "0.5", 0, M / 2, NULL);
    expect("size.mb_with_unit", SET_OVERLAP_BUCKET_MB, "512K", 0, 512 * K, NULL);
    expect("size.mb_unset_auto", SET_OVERLAP_BUCKET_MB, NULL, 0, 0, NULL);
    expect("size.word", SET_MEM_LIMIT, "lots", -1, 0, "is not a memory size");
    expect("size.zero", SET_MEM_LIMIT, "0", -1, 0, "is not a memory size");
    expect("size.negative", SET_MEM_LIMIT, "-1G", -1, 0, "is not a memory size");
    expect("size.unit_only", SET_MEM_LIMIT, "G", -1, 0, "is not a memory size");
    expect("size.unknown_unit", SET_MEM_LIMIT, "12Q", -1, 0, "is not a memory size");
    expect("size.huge", SET_MEM_LIMIT, "1e30", -1, 0, "is not a memory size");
    expect("size.mb_zero", SET_CONV_SEARCH_WS_MB, "0", -1, 0, "is not a memory size");
}

static void test_ints_choices_strings(void)
{
    expect("int.default", SET_MASTER_PORT, NULL, 0, 29500, NULL);
    expect("int.value", SET_MASTER_PORT, "1234", 0, 1234, NULL);
    expect("int.low_edge", SET_MASTER_PORT, "1", 0, 1, NULL);
    expect("int.high_edge", SET_MASTER_PORT, "65535", 0, 65535, NULL);
    expect("int.below", SET_MASTER_PORT, "0", -1, 0, "is not a whole number in 1..65535");
    expect("int.above", SET_MASTER_PORT, "65536", -1, 0, "is not a whole number in 1..65535");
    expect("int.negative", SET_RANK, "-1", -1, 0, "is not a whole number in 0..65535");
    expect("int.overflow", SET_RANK, "99999999999999999999", -1, 0, "is not a whole number");
    expect("int.trailing", SET_MASTER_PORT, "12a", -1, 0, "is not a whole number");
    expect("int.unset_none", SET_RANK, NULL, 0, -1, NULL);

    expect("choice.default", SET_BN, NULL, 0, 0, NULL);
    expect("choice.cudnn", SET_BN, "cudnn", 0, 0, NULL);
    expect("choice.own", SET_BN, "own", 0, 1, NULL);
    expect("choice.case_matters", SET_BN, "CUDNN", -1, 0, "is not one of cudnn or own");
    expect("choice.prefix", SET_BN, "cud", -1, 0, "is not one of cudnn or own");
    expect("choice.log_words", SET_LOG, "loud", -1, 0,
           "is not one of error, warn, info, debug or trace");
    expect("choice.unset_is_default", SET_ATTN, NULL, 0, 4, NULL);
    expect("choice.third_word", SET_ATTN, "flash", 0, 2, NULL);
    expect("choice.fifth_word", SET_ATTN, "auto", 0, 4, NULL);

    unsetenv("CTRAIN_MASTER_ADDR");
    const char *a = setting_str(SET_MASTER_ADDR);
    check_true("string.unset_is_default", a && !strcmp(a, "127.0.0.1"), "got %s", a ? a : "NULL");
    setenv("CTRAIN_MASTER_ADDR", "", 1);
    a = setting_str(SET_MASTER_ADDR);
    check_true("string.empty_is_default", a && !strcmp(a, "127.0.0.1"), "got %s", a ? a : "NULL");
    check_true("string.empty_text_is_null", setting_text(SET_MASTER_ADDR) == NULL, "not NULL");
    setenv("CTRAIN_MASTER_ADDR", "node0", 1);
    a = setting_str(SET_MASTER_ADDR);
    check_true("string.value", a && !strcmp(a, "node0"), "got %s", a ? a : "NULL");
    unsetenv("CTRAIN_MASTER_ADDR");
    unsetenv("CTRAIN_CUPTI_LIB");
    check_true("string.unset_no_default_is_null", setting_str(SET_CUPTI_LIB) == NULL, "not NULL");
}

/* setting_default_env: an unset variable gets ctrain's value and is marked as
 * ctrain's (the run's config log leaves it out); a user's value is kept and
 * stays the user's; a bad user value is fatal (test_fatal). */
static void test_default_env(void)
{
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    setting_default_env(SET_CUDA_DEVICE_MAX_CONNECTIONS, "32");
    const char *t = setting_text(SET_CUDA_DEVICE_MAX_CONNECTIONS);
    check_true("default_env.sets_unset", t && !strcmp(t, "32") &&
               setting_by_ctrain(SET_CUDA_DEVICE_MAX_CONNECTIONS), "got %s", t ? t : "NULL");
    setenv("NCCL_CTA_POLICY", "1", 1);
    setting_default_env(SET_NCCL_CTA_POLICY, "2");
    t = setting_text(SET_NCCL_CTA_POLICY);
    check_true("default_env.keeps_users", t && !strcmp(t, "1") &&
               !setting_by_ctrain(SET_NCCL_CTA_POLICY), "got %s", t ? t : "NULL");
    unsetenv("NCCL_CTA_POLICY");
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
}

static void default_env_bad(void *arg)
{
    (void)arg;
    setting_default_env(SET_CUDA_DEVICE_MAX_CONNECTIONS, "32");
}

/* A bad value in the environment is fatal: exit 1, the variable named, a hint. */
static void read_epilogue(void *arg) { (void)arg; (void)setting_switch(SET_LINEAR_EPILOGUE); }
static void read_mem_limit(void *arg) { (void)arg; (void)setting_size(SET_MEM_LIMIT); }
static void read_bn(void *arg) { (void)arg; (void)setting_choice(SET_BN); }
static void read_wrong_kind(void *arg) { (void)arg; (void)setting_int(SET_LOG); }

static void expect_fatal(const char *name, const char *var, const char *value,
                         void (*fn)(void *), const char *says, const char *hint)
{
    char msg[2048];
    if (var) setenv(var, value, 1);
    int st = check_run_child(fn, NULL, msg, sizeof msg);
    if (var) unsetenv(var);
    check_true(name, st == 1 && strstr(msg, says) && (!hint || strstr(msg, hint)),
               "exit %d, stderr: %s", st, msg);
}

static void test_fatal(void)
{
    expect_fatal("fatal.switch", "CTRAIN_LINEAR_EPILOGUE", "yes", read_epilogue,
                 "ctrain: CTRAIN_LINEAR_EPILOGUE=yes is not 0 or 1",
                 "hint: set CTRAIN_LINEAR_EPILOGUE to 1 (");
    expect_fatal("fatal.size", "CTRAIN_MEM_LIMIT", "lots", read_mem_limit,
                 "CTRAIN_MEM_LIMIT='lots' is not a memory size", "hint: set CTRAIN_MEM_LIMIT to a size");
    expect_fatal("fatal.choice", "CTRAIN_BN", "fast", read_bn, "CTRAIN_BN=fast is not one of cudnn or own",
                 "hint: set CTRAIN_BN to cudnn or own");
    expect_fatal("fatal.default_env_users_value", "CUDA_DEVICE_MAX_CONNECTIONS", "64",
                 default_env_bad, "CUDA_DEVICE_MAX_CONNECTIONS='64' is not a whole number in 1..32",
                 "hint: set CUDA_DEVICE_MAX_CONNECTIONS to a whole number in 1..32");
    expect_fatal("fatal.wrong_kind", NULL, NULL, read_wrong_kind,
                 "settings: CTRAIN_LOG is a choice, read as an integer", NULL);
}

/* ---- (d) getenv() only here ---- */

/* For good: the table's parser, and the data-parallel parser's lookup
 * callback (tests pass a table instead of the environment). */
static const char *allowed[] = {"engine/settings.c", "train/parallel/dist_env.c"};

/* src with its comments and string literals blanked, so only calls count. */
static void blank_comments(char *s)
{
    enum { CODE, BLOCK, LINE, STR, CHR } st = CODE;
    for (char *p = s; *p; p++) {
        switch (st) {
        case CODE:
            if (p[0] == '/' && p[1] == '*') { st = BLOCK; *p++ = ' '; *p = ' '; }
            else if (p[0] == '/' && p[1] == '/') { st = LINE; *p = ' '; }
            else if (*p == '"') st = STR;
            else if (*p == '\'') st = CHR;
            break;
        case BLOCK:
            if (p[0] == '*' && p[1] == '/') { st = CODE; *p++ = ' '; *p = ' '; }
            else if (*p != '\n') *p = ' ';
            break;
        case LINE:
            if (*p == '\n') st = CODE; else *p = ' ';
            break;
        case STR: case CHR:
            if (*p == '\\' && p[1]) { *p++ = ' '; *p = ' '; }
            else if (*p == (st == STR ? '"' : '\'')) st = CODE;
            else if (*p != '\n') *p = ' ';
            break;
        }
    }
}

/* Does the code call fn( (not as the tail of a longer name)? Returns the line. */
static int calls(const char *code, const char *fn)
{
    size_t n = strlen(fn);
    for (const char *p = strstr(code, fn); p; p = strstr(p + 1, fn)) {
        char before = p == code ? ' ' : p[-1];
        const char *q = p + n;
        while (*q == ' ') q++;
        if (*q == '(' && !(before == '_' || (before >= '0' && before <= '9') ||
                           (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z'))) {
            int line = 1;
            for (const char *r = code; r < p; r++) line += *r == '\n';
            return line;
        }
    }
    return 0;
}

static int ends_with(const char *s, const char *end)
{
    size_t a = strlen(s), b = strlen(end);
    return a >= b && !strcmp(s + a - b, end);
}

static int scan_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            int n = scan_dir(path);
            files += n > 0 ? n : 0;
            continue;
        }
        if (!(ends_with(path, ".c") || ends_with(path, ".h") || ends_with(path, ".cu") ||
              ends_with(path, ".cuh")))
            continue;
        files++;
        size_t len;
        char *src = read_file(path, &len);
        if (!src) continue;
        blank_comments(src);
        int line = calls(src, "getenv");
        if (!line) line = calls(src, "secure_getenv");
        free(src);
        int ok = 0;
        for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) ok |= !strcmp(path, allowed[i]);
        if (ok || !line) continue;
        char name[1100];
        snprintf(name, sizeof name, "no_getenv.%s", path);
        check_true(name, 0, "%s:%d reads the environment itself: declare the variable in "
                   "engine/settings.c and read it with setting_*(SET_...)", path, line);
    }
    closedir(d);
    return files;
}

static void test_no_getenv(void)
{
    static const char *dirs[] = {"engine", "ops", "models", "data", "train"};
    int failed_before = check_failed_, files = 0;
    for (int i = 0; i < 5; i++) {
        int n = scan_dir(dirs[i]);
        if (n < 0) {
            check_true("no_getenv.from_repo_root", 0, "cannot open %s/: run from the repository "
                       "root", dirs[i]);
            return;
        }
        files += n;
    }
    check_true("no_getenv.sources_found", files > 50, "only %d source files seen", files);
    if (check_failed_ == failed_before)
        check_true("no_getenv.only_settings_c", 1, NULL);
}

int main(void)
{
    test_docs();
    test_table();
    test_switches();
    test_sizes();
    test_ints_choices_strings();
    test_default_env();
    test_fatal();
    test_no_getenv();
    return check_summary();
}
