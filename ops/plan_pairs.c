/* plan_pairs.c — the text of a kept plan's integer pairs (cuDNN's engine
 * knob settings) for the plan store's values (plan_store.h): "t:v,t:v",
 * "-" for none. Its own file so that tests/mock_conv_bn_cudnn.c, which
 * stands in for the rest of the store, includes exactly this. */
#include "plan_store.h"

#include <stdio.h>
#include <string.h>

int plan_store_pairs_text(const int64_t (*kv)[2], int n, char *buf, size_t len)
{
    if (n < 0 || len == 0) return -1;
    if (n == 0) return len > 1 ? (snprintf(buf, len, "-"), 0) : -1;
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        int k = snprintf(buf + w, len - w, "%s%lld:%lld", i ? "," : "", (long long)kv[i][0],
                         (long long)kv[i][1]);
        if (k < 0 || (size_t)k >= len - w) return -1;
        w += (size_t)k;
    }
    return 0;
}

int plan_store_pairs_parse(const char *text, int64_t (*kv)[2], int max)
{
    if (strcmp(text, "-") == 0) return 0;
    int n = 0;
    for (const char *q = text; *q; n++) {
        long long t, v;
        int m = 0;
        if (n == max || sscanf(q, "%lld:%lld%n", &t, &v, &m) != 2) return -1;
        kv[n][0] = t;
        kv[n][1] = v;
        q += m;
        if (*q == ',') {
            q++;
            if (!*q) return -1;   /* a trailing comma */
        } else if (*q) {
            return -1;
        }
    }
    return n;
}
