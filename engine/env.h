/* env.h — env_switch, the on/off reader of the variables not yet read
 * through the settings table (engine/settings.h). Transitional: the call
 * sites left (train/parallel/dist.c, train/loop/overlap.c,
 * train/loop/step_graph.c) move to setting_switch(SET_...), then this
 * header goes. Implemented in engine/settings.c with the table's parser.
 *
 * env_switch(name, dflt, meaning_of_1): unset or empty gives dflt; "0" and
 * "1" give 0 and 1; anything else is fatal, naming the variable and what 1
 * means, so a typo never silently leaves a switch off. dflt may be another
 * value (-1: "decide later") for a switch whose default depends on context.
 */
#ifndef CTRAIN_ENGINE_ENV_H
#define CTRAIN_ENGINE_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

int env_switch(const char *name, int dflt, const char *meaning_of_1);

#ifdef __cplusplus
}
#endif
#endif
