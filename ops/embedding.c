/* embedding.c — CPU reference (f32) for the embedding lookup and its
 * scatter-add backward; ops/embedding.cu holds the CUDA kernels (contract in
 * embedding.h).
 *
 * Shape letters: N positions, V vocabulary rows, D width.
 *
 *   out[n, :] = table[ids[n], :]
 *   dtable[v, :] (+)= sum_{n : ids[n] == v} dout[n, :]
 *
 * The backward groups positions by id (a counting sort: counts, prefix sum,
 * positions in increasing order per id) and sums each group in double,
 * then adds once into the f32 gradient: the accurate reference the CUDA
 * version is tested against, and readable as the same algorithm.
 */
#include "embedding.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

/* Fatal error for an id the table does not have. */
static void bad_id(size_t n, int32_t id, size_t V)
{
    char hint[256];
    snprintf(hint, sizeof hint,
             "token ids must lie in [0, %zu); check that the tokenizer's vocabulary "
             "matches the model's vocab size",
             V);
    ct_fatal_hint(hint, "embedding: position %zu has id %d, outside the table of %zu rows", n,
                  (int)id, V);
}

void embedding_forward_cpu(float *out, const float *table, const int32_t *ids, size_t N,
                           size_t V, size_t D)
{
    for (size_t n = 0; n < N; n++)
        if (ids[n] < 0 || (size_t)ids[n] >= V) bad_id(n, ids[n], V);
#pragma omp parallel for if (N * D >= 32768)
    for (size_t n = 0; n < N; n++) memcpy(out + n * D, table + (size_t)ids[n] * D, D * sizeof(float));
}

/* forward: out[n, :] = table[ids[n], :]   so   dtable[ids[n], :] += dout[n, :] */
void embedding_backward_cpu(float *dtable, const float *dout, const int32_t *ids, size_t N,
                            size_t V, size_t D, int accum)
{
    for (size_t n = 0; n < N; n++)
        if (ids[n] < 0 || (size_t)ids[n] >= V) bad_id(n, ids[n], V);
    if (!accum) memset(dtable, 0, V * D * sizeof(float));
    /* start[v] .. start[v + 1]: the positions of id v, in increasing order */
    size_t *start = (size_t *)calloc(V + 1, sizeof(size_t));
    size_t *pos = (size_t *)malloc((N ? N : 1) * sizeof(size_t));
    double *acc = (double *)malloc((D ? D : 1) * sizeof(double));
    if (!start || !pos || !acc) ct_fatal("embedding_backward_cpu: out of host memory");
    for (size_t n = 0; n < N; n++) start[ids[n] + 1]++;
    for (size_t v = 0; v < V; v++) start[v + 1] += start[v];
    size_t *fill = (size_t *)malloc((V ? V : 1) * sizeof(size_t));
    if (!fill) ct_fatal("embedding_backward_cpu: out of host memory");
    memcpy(fill, start, V * sizeof(size_t));
    for (size_t n = 0; n < N; n++) pos[fill[ids[n]]++] = n;
    for (size_t v = 0; v < V; v++) {
        if (start[v] == start[v + 1]) continue;
        for (size_t d = 0; d < D; d++) acc[d] = 0.0;
        for (size_t k = start[v]; k < start[v + 1]; k++) {
            const float *dr = dout + pos[k] * D;
            for (size_t d = 0; d < D; d++) acc[d] += dr[d];
        }
        float *tr = dtable + v * D;
        for (size_t d = 0; d < D; d++) tr[d] = (float)(tr[d] + acc[d]);
    }
    free(fill);
    free(start);
    free(pos);
    free(acc);
}

/* The same sums, compact: the dense reference into a scratch table, then
 * the used rows in increasing id order. */
void embedding_backward_compact_cpu(float *rows, int32_t *ids_out, const float *dout,
                                    const int32_t *ids, size_t N, size_t V, size_t D)
{
    float *table = (float *)malloc((V && D ? V * D : 1) * sizeof(float));
    unsigned char *used = (unsigned char *)calloc(V ? V : 1, 1);
    if (!table || !used) ct_fatal("embedding_backward_compact_cpu: out of host memory");
    embedding_backward_cpu(table, dout, ids, N, V, D, 0);   /* checks the ids too */
    for (size_t n = 0; n < N; n++) used[ids[n]] = 1;
    size_t k = 0;
    for (size_t v = 0; v < V; v++) {
        if (!used[v]) continue;
        memcpy(rows + k * D, table + v * D, D * sizeof(float));
        ids_out[k++] = (int32_t)v;
    }
    for (; k < N; k++) ids_out[k] = -1;
    free(used);
    free(table);
}

void embedding_rows_add_cpu(float *dtable, const float *rows, const int32_t *ids, size_t K,
                            size_t V, size_t D, float scale)
{
    for (size_t k = 0; k < K; k++) {
        if (ids[k] < 0 || (size_t)ids[k] >= V) continue;
        float *tr = dtable + (size_t)ids[k] * D;
        for (size_t d = 0; d < D; d++) tr[d] += scale * rows[k * D + d];
    }
}

