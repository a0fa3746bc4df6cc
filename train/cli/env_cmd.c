/* env_cmd.c — `ctrain env`: the environment variables ctrain reads (the
 * settings table, engine/settings.h), each with the value this shell gives
 * it or its default, checked by the parser the run would use; `ctrain env
 * --markdown` prints docs/env.md. */
#include "commands.h"

#include <stdio.h>
#include <string.h>
#include "engine/error.h"
#include "engine/settings.h"

static const char *audience_title(SettingAudience a)
{
    static const char *titles[SA_COUNT] = {"for users", "developer A/B switches", "internal",
                                           "other software's"};
    return titles[a];
}

/* One variable: its state on the first line, its doc on the second.
 * Returns 1 when its value does not parse. */
static int print_one(SettingId id)
{
    const Setting *s = setting_info(id);
    const char *t = setting_text(id);
    long long v;
    char err[512], hint[1024];
    int bad = setting_parse(&v, id, t, err, sizeof err, hint, sizeof hint) < 0;
    if (t) printf("  %s=%s%s%s\n", s->name, t, bad ? "   <- " : "", bad ? err : "");
    else if (s->dflt) printf("  %s   unset, default %s\n", s->name, s->dflt);
    else printf("  %s   unset: %s\n", s->name, s->unset);
    printf("      %s\n", s->doc);
    if (bad) printf("      hint: %s\n", hint);
    return bad;
}

int cmd_env(int argc, char **argv)
{
    if (argc == 1 && !strcmp(argv[0], "--markdown")) {
        settings_markdown(stdout);
        return 0;
    }
    if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: ctrain env [--markdown]\n"
               "  lists the environment variables ctrain reads, with their values here (or\n"
               "  their defaults) checked as a run would check them; exits 1 when a value\n"
               "  does not parse. --markdown prints the reference, docs/env.md.\n");
        return 0;
    }
    if (argc) ct_fatal_hint("run 'ctrain env --help'", "unknown option '%s'", argv[0]);
    int bad = 0;
    for (int a = 0; a < SA_COUNT; a++) {
        printf("%s%s:\n", a ? "\n" : "", audience_title((SettingAudience)a));
        for (int i = 0; i < SET_COUNT; i++)
            if (setting_info((SettingId)i)->audience == (SettingAudience)a)
                bad += print_one((SettingId)i);
    }
    return bad ? 1 : 0;
}
