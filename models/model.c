/* model.c — the parts of a model that do not depend on its kind. */
#include "model.h"

#include <string.h>

void model_free(Model *m)
{
    if (m->free_impl) m->free_impl(m);
    params_free(&m->params);
    memset(m, 0, sizeof *m);
}
