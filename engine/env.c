/* env.c — on/off switches from the environment (contract in env.h). */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"

int env_switch(const char *name, int dflt, const char *meaning_of_1)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    if (!strcmp(s, "0") || !strcmp(s, "1")) return s[0] == '1';
    char hint[320];
    snprintf(hint, sizeof hint, "set %s to 1 (%s) or 0, or leave it unset for the default", name,
             meaning_of_1);
    ct_fatal_hint(hint, "%s=%s is not 0 or 1", name, s);
    return dflt;
}
