/* test_error.c — the error formatter of engine/error.h: what a user sees.
 *   - ct_fatal_hint: "ctrain: <prefix><msg>" and "hint: <hint>", exit 1;
 *   - ct_error_hint: the same two lines, and the process goes on;
 *   - ct_fail: the message into a caller's buffer (truncated to fit, none
 *     with a NULL buffer), the status returned;
 *   - the message prefix ("rank 1: ") in front of every message.
 */
#include <string.h>

#include "check.h"
#include "engine/error.h"

static void fatal_with_hint(void *arg)
{
    (void)arg;
    ct_fatal_hint("pass --data synthetic", "cannot open %s: %s", "data/x", "No such file");
}

static void fatal_plain(void *arg)
{
    (void)arg;
    ct_fatal("batch %d is larger than the data", 64);
}

/* ct_error_hint, then a clean exit: status 0 means it returned */
static void error_then_exit(void *arg)
{
    (void)arg;
    ct_error_hint("check that the folder exists and is writable", "cannot write %s", "out.json");
    ct_error("the probe failed (%s); continuing", "timeout");
    exit(0);
}

static void error_with_prefix(void *arg)
{
    (void)arg;
    ct_set_msg_prefix("rank 1: ");
    ct_error_hint("raise CTRAIN_NCCL_TIMEOUT", "no progress for %d s", 30);
    ct_fatal("stopping");
}

static void test_fatal(void)
{
    char msg[512];
    int st = check_run_child(fatal_with_hint, NULL, msg, sizeof msg);
    check_true("fatal_hint.exit_status", st == 1, "status %d", st);
    check_true("fatal_hint.text",
               strcmp(msg, "ctrain: cannot open data/x: No such file\n"
                           "hint: pass --data synthetic\n") == 0,
               "got '%s'", msg);
    st = check_run_child(fatal_plain, NULL, msg, sizeof msg);
    check_true("fatal.exit_status", st == 1, "status %d", st);
    check_true("fatal.text_no_hint", strcmp(msg, "ctrain: batch 64 is larger than the data\n") == 0,
               "got '%s'", msg);
}

static void test_error_print(void)
{
    char msg[512];
    int st = check_run_child(error_then_exit, NULL, msg, sizeof msg);
    check_true("error_hint.returns", st == 0, "status %d (it must not exit)", st);
    check_true("error_hint.text",
               strcmp(msg, "ctrain: cannot write out.json\n"
                           "hint: check that the folder exists and is writable\n"
                           "ctrain: the probe failed (timeout); continuing\n") == 0,
               "got '%s'", msg);
    st = check_run_child(error_with_prefix, NULL, msg, sizeof msg);
    check_true("error_hint.prefix",
               st == 1 && strcmp(msg, "ctrain: rank 1: no progress for 30 s\n"
                                      "hint: raise CTRAIN_NCCL_TIMEOUT\n"
                                      "ctrain: rank 1: stopping\n") == 0,
               "status %d, got '%s'", st, msg);
}

static void test_fail(void)
{
    char err[64];
    int st = ct_fail(err, sizeof err, -3, "cannot open %s: %s", "vocab.txt", "No such file");
    check_true("fail.status", st == -3, "returned %d", st);
    check_true("fail.text", strcmp(err, "cannot open vocab.txt: No such file") == 0, "got '%s'",
               err);
    char small[8];
    st = ct_fail(small, sizeof small, 2, "%s", "a longer message");
    check_true("fail.truncated", st == 2 && strcmp(small, "a longe") == 0, "status %d, '%s'", st,
               small);
    check_true("fail.null_buffer", ct_fail(NULL, 0, -1, "%d", 1) == -1, "status not returned");
    err[0] = 'x';
    st = ct_fail(err, 0, 5, "%s", "nothing written");
    check_true("fail.zero_length", st == 5 && err[0] == 'x', "status %d, buffer touched", st);
}

int main(void)
{
    test_fatal();
    test_error_print();
    test_fail();
    return check_summary();
}
