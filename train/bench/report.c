/* report.c — `ctrain report A.json B.json ...`: merge benchmark runs of one
 * or several cards into a markdown report (a table per question, the cards as
 * columns) and charts, by running scripts/report.py with the same arguments
 * (checked here first, as every command checks its own: report_args).
 * The script is looked for in $CTRAIN_SCRIPTS, next to the binary
 * (build/ctrain -> scripts/ in the checkout; DIR/bin/ctrain ->
 * DIR/share/ctrain/scripts when installed), and in ./scripts.
 *
 * With --plots the report needs matplotlib, which is often installed for one
 * Python and not another (a pyenv or venv python3 first on PATH, the Debian
 * package python3-matplotlib under /usr/bin/python3). So the Pythons are
 * tried in order, python3 on PATH then /usr/bin/python3, and the first that
 * imports matplotlib runs the report; when none does, python3 runs it and
 * report.py says what to install, and writes the tables all the same.
 */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "engine/error.h"
#include "engine/settings.h"
#include "bench_options.h"

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
    /* $CTRAIN_SCRIPTS; the checkout (build/ctrain -> scripts/); an installed
     * binary (DIR/bin/ctrain -> DIR/share/ctrain/scripts, `make install`); ./scripts */
    const char *fmts[4] = {env && *env ? "%s/report.py" : NULL, dir[0] ? "%s/../scripts/report.py" : NULL,
                           dir[0] ? "%s/../share/ctrain/scripts/report.py" : NULL, "scripts/report.py"};
    const char *args[4] = {env, dir, dir, NULL};
    for (int i = 0; i < 4; i++) {
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

/* 1 when `py -c "import matplotlib"` succeeds (its output silenced). */
static int has_matplotlib(const char *py)
{
    extern char **environ;
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) return 0;
    for (int fd = 0; fd < 3; fd++)
        posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
    char *av[] = {(char *)py, "-c", "import matplotlib", NULL};
    pid_t pid;
    int st = 0, ok = posix_spawnp(&pid, py, &fa, NULL, av, environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
    if (!ok) return 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void report_usage(void)
{
    printf("usage: ctrain report A.json [B.json ...] [--out report.md] [--plots DIR]\n"
           "                    [--label FILE=NAME] [--price CARD=USD_PER_HOUR]\n"
           "                    [--baseline FILE|LABEL|ENGINE] [--ignore-layout] [--title T]\n\n"
           "Merges `ctrain bench --json` files of one or several cards and scripts/torch_bench.py\n"
           "--json files into one markdown report: a caption per card (driver, CUDA, cuDNN,\n"
           "power limit, ECC, date, warnings), then a table per question with the cards as\n"
           "columns: samples/s (PyTorch beside ctrain, and their ratio per card), step time,\n"
           "energy per sample, MFU, power, peak memory, recompute, the largest batch, eager vs\n"
           "CUDA graphs, real data, multi-GPU scaling, soak, cost per million samples (--price),\n"
           "matmul ceilings. --plots DIR writes a chart per model (DIR/MODEL.png and .svg),\n"
           "samples/s against the batch (DIR/MODEL_batch.png) and recompute's trade-off\n"
           "(DIR/recompute.png) with matplotlib, from the first of python3 and /usr/bin/python3\n"
           "that has it. Runs scripts/report.py.\n");
}

enum { R_OUT = 256, R_PLOTS, R_LABEL, R_PRICE, R_BASELINE, R_IGNORE_LAYOUT, R_TITLE };

/* scripts/report.py's flags (its argparse), checked here as every command
 * checks its own. */
static const struct option report_table[] = {
    CLI_VALUE("out", R_OUT), CLI_VALUE("plots", R_PLOTS), CLI_VALUE("label", R_LABEL),
    CLI_VALUE("price", R_PRICE), CLI_VALUE("baseline", R_BASELINE),
    CLI_SWITCH("ignore-layout", R_IGNORE_LAYOUT), CLI_VALUE("title", R_TITLE), CLI_HELP, {0}};

/* The script's command line from argv, checked: [0] and [1] left for the
 * Python and the script, then each option as --NAME=VALUE (a value that
 * starts with '-' stays a value for argparse), "--" and the files. *plots:
 * --plots was given. --help prints the usage and exits 0. */
static char **report_args(int argc, char **argv, int *plots)
{
    char **av = calloc((size_t)argc + 4, sizeof *av);
    char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!av || !files) ct_fatal("out of host memory");
    int n = 2, nf = 0;
    CliOpts p;
    cli_begin(&p, "report", report_table, argc, argv);
    for (int val; (val = cli_next(&p)) != -1;) {
        if (val == 'h') {
            report_usage();
            exit(0);
        }
        if (val == '?') cli_refuse(&p);
        if (val == CLI_WORD) files[nf++] = (char *)p.value;
        else if (val == R_IGNORE_LAYOUT) av[n++] = (char *)"--ignore-layout";
        else if (asprintf(&av[n++], "%s=%s", p.flag, p.value) < 0) ct_fatal("out of host memory");
        *plots |= val == R_PLOTS;
    }
    if (!nf) cli_fail("report", "report takes the bench JSON files to merge: ctrain report A.json ...");
    av[n++] = (char *)"--";
    memcpy(av + n, files, (size_t)nf * sizeof *files);
    free(files);
    return av;
}

int cmd_report(int argc, char **argv)
{
    if (argc == 0) {
        report_usage();
        return 1;
    }
    int plots = 0;
    char **av = report_args(argc, argv, &plots);
    char script[1500];
    if (!find_script(script, sizeof script))
        ct_fatal_hint("run ctrain from its checkout (scripts/report.py next to build/), or set "
                      "CTRAIN_SCRIPTS to the folder holding report.py",
                      "report: scripts/report.py not found (looked at %s)", script);
    static const char *pythons[] = {"python3", "/usr/bin/python3"};
    const char *py = pythons[0];
    if (plots)
        for (size_t i = 0; i < sizeof pythons / sizeof pythons[0]; i++)
            if (has_matplotlib(pythons[i])) { py = pythons[i]; break; }
    av[1] = script;
    fflush(NULL);
    av[0] = (char *)py;
    execvp(py, av);
    av[0] = "/usr/bin/python3";   /* no python3 on PATH: the system's, if there is one */
    execv(av[0], av);
    ct_fatal_hint("install Python 3 (the report needs only its standard library; matplotlib for plots)",
                  "report: cannot run %s: %s", py, strerror(errno));
}
