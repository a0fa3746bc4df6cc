/* report.c — `ctrain report A.json B.json ...`: merge benchmark runs into a
 * markdown table (and plots) by running scripts/report.py with the same
 * arguments. The script is looked for in $CTRAIN_SCRIPTS, next to the binary
 * (build/ctrain -> scripts/ in the checkout), and in ./scripts.
 */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/error.h"
#include "engine/settings.h"

/* Fill path with the first candidate that exists; 0 when none does (path
 * then lists what was tried). */
static int find_script(char *path, size_t len)
{
    char tried[1500] = "", cand[1100];
    const char *env = setting_str(SET_SCRIPTS);
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char dir[1024] = "";
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) { *slash = 0; snprintf(dir, sizeof dir, "%s", exe); }
    }
    const char *fmts[3] = {env && *env ? "%s/report.py" : NULL, dir[0] ? "%s/../scripts/report.py" : NULL,
                           "scripts/report.py"};
    const char *args[3] = {env, dir, NULL};
    for (int i = 0; i < 3; i++) {
        if (!fmts[i]) continue;
        snprintf(cand, sizeof cand, fmts[i], args[i]);
        if (access(cand, R_OK) == 0) {
            snprintf(path, len, "%s", cand);
            return 1;
        }
        size_t t = strlen(tried);
        snprintf(tried + t, sizeof tried - t, "%s%s", t ? ", " : "", cand);
    }
    snprintf(path, len, "%s", tried);
    return 0;
}

int cmd_report(int argc, char **argv)
{
    char script[1500];
    if (argc == 0 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        printf("usage: ctrain report A.json [B.jsonl ...] [--baseline ENGINE|LABEL|FILE] [--out report.md]\n"
               "                    [--plots DIR] [--label FILE=NAME] [--ignore-layout] [--title T]\n\n"
               "Merges `ctrain bench --json` and scripts/torch_bench.py --json files (and older\n"
               "torch_bench.py JSON lines) into one markdown table (per config: samples/s, peak\n"
               "memory, MFU, ratio to the baseline), the real-data rows of `ctrain bench --data` in a\n"
               "block per card (synthetic vs real samples/s, data wait, decode rate and capacity),\n"
               "with plots when matplotlib is installed. Runs python3 scripts/report.py.\n");
        return argc == 0 ? 1 : 0;
    }
    if (!find_script(script, sizeof script))
        ct_fatal_hint("run ctrain from its checkout (scripts/report.py next to build/), or set "
                      "CTRAIN_SCRIPTS to the folder holding report.py",
                      "report: scripts/report.py not found (looked at %s)", script);
    char **av = (char **)calloc((size_t)argc + 3, sizeof *av);
    if (!av) ct_fatal("out of host memory");
    av[0] = "python3";
    av[1] = script;
    for (int i = 0; i < argc; i++) av[i + 2] = argv[i];
    fflush(NULL);
    execvp("python3", av);
    ct_fatal_hint("install Python 3 (the report needs only its standard library; matplotlib for plots)",
                  "report: cannot run python3: %s", strerror(errno));
}
