/* embedding.cu — CUDA embedding lookup and its deterministic scatter-add
 * backward (contract in ops/embedding.h; ops/embedding.c is the CPU
 * reference).
 *
 * Shape letters: N positions, V vocabulary rows, D width; TS positions per
 * tile, NT = ceil(N / TS) tiles.
 *
 * Forward: a block per output row (grid-stride over rows), threads over the
 * columns: out[n, d] = table[ids[n], d] rounded to dt. An id outside [0, V)
 * adds 1 to *nbad (integer atomics: the count is exact) and gives a zero row.
 *
 * Backward: dtable[v, :] += sum over v's positions of dout[n, :], with no
 * float atomics. The positions are first grouped by id with a stable
 * counting sort built only from integer work (so every intermediate is
 * exact and the result is the same on every run):
 *   1. tile ranks (a block per tile of TS positions, ids in shared memory):
 *      rank[n] = number of earlier positions of the tile with the same id;
 *      the last occurrence of id v in tile t writes cnt[t][v] = its count;
 *   2. column prefix (a thread per id): cnt[t][v] becomes the number of v's
 *      in tiles before t, and total[v] the count over all tiles;
 *   3. scan (one block): start[v] = exclusive prefix sum of total (CSR row
 *      pointers, start[V] = number of valid positions), the list of used
 *      ids in increasing order with its length n_used, and the list of the
 *      "heavy" ones (more than SUM_SLICES positions: their index in the
 *      used list) with its length n_heavy;
 *   4. scatter: pos[start[v] + cnt[t][v] + rank[n]] = n, so each id's
 *      positions sit in increasing order;
 *   5. segment sums, in two kernels that skip each other's ids (both
 *      grid-stride on device-side counts: no host sync):
 *      light ids (at most SL positions, most of a text batch's): a block
 *      per id over all its columns, each thread a column at a time adding
 *      v's positions in order in f32;
 *      heavy ids: blocks of 32 columns x SL slices; slice s adds v's
 *      positions s, s + SL, s + 2 SL, ... in order in f32, then the SL
 *      slice sums are added in slice order. A very frequent id (padding,
 *      [MASK], a position row) is thus spread over SL lanes per column and
 *      over the column tiles' blocks instead of one thread.
 *      Either way the result is added to dtable once. The light sum is the
 *      slices' sum for <= SL positions to the bit (slice s then holds
 *      position s alone, and adding the empty slices' +0 changes nothing),
 *      so the split changed no result. Before it every id had a 512-thread
 *      block per 32 columns, mostly idle: the BERT-large word embeddings'
 *      sums (B x T = 4,096 positions, nearly as many ids) took 312 us, at
 *      the very end of backward; split, the bf16 step is 0.27 ms shorter
 *      (1,280 -> 1,294 seq/s on one H200; docs/multi-gpu.md, the end of
 *      its tuning history).
 * A table of at most SMALL_V rows (token types) takes a shorter path,
 * described above its kernels: chunks of positions instead of the sort.
 * Ids outside [0, V) are skipped in every step. With accum 0 dtable is
 * zeroed first (step 5 always adds). Scratch, from the stream-ordered pool:
 * cnt NT*V, start V+1, used min(N,V)+1, heavy N/(SL+1)+1, rank N, pos N,
 * all i32.
 */
#include <stdint.h>

#include "engine/error.h"
#include "cuda_util.cuh"
#include "embedding.h"

namespace {

constexpr int TS = 1024;          /* positions per tile (threads of the rank kernel) */
constexpr int SCAN_THREADS = 1024;
constexpr int SUM_COLS = 32;      /* columns per segment-sum block */
constexpr int SUM_SLICES = 16;    /* position slices per segment-sum block */
constexpr unsigned MAX_GRID = 65535;

__device__ __forceinline__ bool id_ok(int32_t id, size_t V) { return id >= 0 && (size_t)id < V; }

/* ---- forward ---- */

template <typename T>
__global__ void emb_fwd_kernel(T *out, const float *table, const int32_t *ids, int32_t *nbad,
                               size_t N, size_t V, int D)
{
    for (size_t n = blockIdx.x; n < N; n += gridDim.x) {
        const int32_t id = ids[n];
        const bool ok = id_ok(id, V);
        if (!ok && threadIdx.x == 0 && nbad) atomicAdd(nbad, 1);
        const float *tr = table + (size_t)(ok ? id : 0) * D;
        T *o = out + n * (size_t)D;
        for (int d = threadIdx.x; d < D; d += blockDim.x) o[d] = from_f32<T>(ok ? tr[d] : 0.0f);
    }
}

/* ---- backward, step 1: ranks within a tile ---- */

__global__ void __launch_bounds__(TS)
    emb_tile_rank_kernel(int32_t *rank, int32_t *cnt, const int32_t *ids, size_t N, size_t V)
{
    __shared__ int32_t sid[TS];
    const size_t t = blockIdx.x, n = t * TS + threadIdx.x;
    const int tile_n = (int)(N - t * TS < (size_t)TS ? N - t * TS : (size_t)TS);
    sid[threadIdx.x] = (int)threadIdx.x < tile_n ? ids[n] : -1;
    __syncthreads();
    if ((int)threadIdx.x >= tile_n) return;
    const int32_t id = sid[threadIdx.x];
    if (!id_ok(id, V)) return;
    int r = 0;
    bool last = true;
    for (int j = 0; j < tile_n; j++) {
        if (sid[j] != id) continue;
        if (j < (int)threadIdx.x) r++;
        else if (j > (int)threadIdx.x) last = false;
    }
    rank[n] = r;
    if (last) cnt[t * V + (size_t)id] = r + 1;
}

/* ---- step 2: per id, counts of earlier tiles; total count ---- */

__global__ void emb_col_prefix_kernel(int32_t *cnt, int32_t *total, size_t NT, size_t V)
{
    const size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= V) return;
    int32_t run = 0;
    for (size_t t = 0; t < NT; t++) {
        const int32_t c = cnt[t * V + v];
        cnt[t * V + v] = run;
        run += c;
    }
    total[v] = run;
}

/* ---- step 3: CSR starts and the used-id list (one block) ---- */

/* Exclusive scan of one int per thread across the block; *sum gets the total. */
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t v, int32_t *sh, int32_t *sum)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int32_t inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        const int32_t u = __shfl_up_sync(FULL_MASK, inc, o);
        if (lane >= o) inc += u;
    }
    if (lane == 31) sh[w] = inc;
    __syncthreads();
    if (w == 0) {
        int32_t s = lane < nw ? sh[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            const int32_t u = __shfl_up_sync(FULL_MASK, s, o);
            if (lane >= o) s += u;
        }
        if (lane < nw) sh[lane] = s; /* inclusive prefix of the warp totals */
    }
    __syncthreads();
    const int32_t base = w ? sh[w - 1] : 0;
    *sum = sh[nw - 1];
    __syncthreads();
    return base + inc - v;
}

__global__ void __launch_bounds__(SCAN_THREADS)
    emb_scan_kernel(int32_t *start, int32_t *used, int32_t *n_used, int32_t *heavy,
                    int32_t *n_heavy, size_t V)
{
    __shared__ int32_t sh[32];
    const size_t chunk = (V + blockDim.x - 1) / blockDim.x;
    const size_t v0 = threadIdx.x * chunk, v1 = v0 + chunk < V ? v0 + chunk : V;
    int32_t s = 0, u = 0, h = 0;
    for (size_t v = v0; v < v1; v++) {
        s += start[v];
        u += start[v] > 0;
        h += start[v] > SUM_SLICES;
    }
    int32_t s_all, u_all, h_all;
    int32_t s_run = block_exclusive_scan(s, sh, &s_all);
    int32_t u_run = block_exclusive_scan(u, sh, &u_all);
    int32_t h_run = block_exclusive_scan(h, sh, &h_all);
    for (size_t v = v0; v < v1; v++) {
        const int32_t c = start[v];
        start[v] = s_run;
        s_run += c;
        if (c > SUM_SLICES) heavy[h_run++] = u_run;   /* its index in the used list */
        if (c > 0) used[u_run++] = (int32_t)v;
    }
    if (threadIdx.x == 0) {
        start[V] = s_all;
        *n_used = u_all;
        *n_heavy = h_all;
    }
}

/* ---- step 4: positions grouped by id, increasing within an id ---- */

__global__ void emb_scatter_kernel(int32_t *pos, const int32_t *ids, const int32_t *rank,
                                   const int32_t *cnt, const int32_t *start, size_t N, size_t V)
{
    const size_t n = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const int32_t id = ids[n];
    if (!id_ok(id, V)) return;
    const size_t t = n / TS;
    pos[(size_t)start[id] + cnt[t * V + (size_t)id] + rank[n]] = (int32_t)n;
}

/* ---- step 5: the sums of the used ids, fixed summation order ---- */

/* v's sum (the k-th used id) in column d: to rows[k, d] (compact: rows !=
 * NULL, with v in ids_out[k]) or added to dtable[v, d] */
__device__ __forceinline__ void emb_sum_store(float *dtable, float *rows, int32_t *ids_out,
                                              int k, int32_t v, int D, int d, float tot)
{
    if (rows) {
        rows[(size_t)k * D + d] = tot;
        if (d == 0) ids_out[k] = v;
    } else {
        dtable[(size_t)v * D + d] += tot;
    }
}

constexpr int LIGHT_THREADS = 256;

/* light ids (at most SUM_SLICES positions): a block per id, threads over
 * the columns, the positions added in order */
template <typename T>
__global__ void __launch_bounds__(LIGHT_THREADS)
    emb_sum_light_kernel(float *dtable, const T *dout, const int32_t *pos, const int32_t *start,
                         const int32_t *used, const int32_t *n_used, int D, float *rows,
                         int32_t *ids_out)
{
    const int nu = *n_used;
    for (int k = blockIdx.x; k < nu; k += gridDim.x) {
        const int32_t v = used[k];
        const int32_t s0 = start[v], s1 = start[v + 1];
        if (s1 - s0 > SUM_SLICES) continue;   /* heavy: emb_sum_heavy_kernel's */
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            float tot = 0.0f;
            for (int p = s0; p < s1; p++) tot += to_f32(dout[(size_t)pos[p] * D + d]);
            emb_sum_store(dtable, rows, ids_out, k, v, D, d, tot);
        }
    }
}

/* heavy ids: one block per (column tile, heavy id), SUM_SLICES slices */
template <typename T>
__global__ void __launch_bounds__(SUM_COLS *SUM_SLICES)
    emb_sum_heavy_kernel(float *dtable, const T *dout, const int32_t *pos, const int32_t *start,
                         const int32_t *used, const int32_t *heavy, const int32_t *n_heavy, int D,
                         float *rows, int32_t *ids_out)
{
    __shared__ float part[SUM_SLICES][SUM_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int d = blockIdx.x * SUM_COLS + tx;
    const int nh = *n_heavy;
    for (int h = blockIdx.y; h < nh; h += gridDim.y) {
        const int k = heavy[h];
        const int32_t v = used[k];
        const int32_t s0 = start[v], s1 = start[v + 1];
        float acc = 0.0f;
        if (d < D) {
            int p = s0 + ty;
            /* four loads in flight, added in position order */
            for (; p + 3 * SUM_SLICES < s1; p += 4 * SUM_SLICES) {
                const float a0 = to_f32(dout[(size_t)pos[p] * D + d]);
                const float a1 = to_f32(dout[(size_t)pos[p + SUM_SLICES] * D + d]);
                const float a2 = to_f32(dout[(size_t)pos[p + 2 * SUM_SLICES] * D + d]);
                const float a3 = to_f32(dout[(size_t)pos[p + 3 * SUM_SLICES] * D + d]);
                acc += a0;
                acc += a1;
                acc += a2;
                acc += a3;
            }
            for (; p < s1; p += SUM_SLICES) acc += to_f32(dout[(size_t)pos[p] * D + d]);
        }
        part[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && d < D) {
            float tot = 0.0f;
            for (int s = 0; s < SUM_SLICES; s++) tot += part[s][tx];
            emb_sum_store(dtable, rows, ids_out, k, v, D, d, tot);
        }
        __syncthreads();
    }
}

/* ---- a few rows (V <= SMALL_V: token types): chunks of positions ----
 * The path above sorts the positions and then gives each used id one block
 * per column tile, so an id that every position uses (BERT's token type 0)
 * is summed by SUM_SLICES lanes per column over all N positions; with the
 * sort that took 73 us per BERT-large bs 32 seq 128 step, 13 us this way
 * (CUPTI timeline, 2026-11-30; docs/kernels.md). Block (tile, v, c) sums
 * v's positions in chunk c (CHUNK positions, in order, slices as above)
 * into part[c][v]; then one thread per (v, d) adds the chunks in order to
 * dtable. No sort needed; deterministic. */
constexpr size_t SMALL_V = EMBEDDING_SMALL_V;
constexpr int CHUNK = 128;

template <typename T>
__global__ void __launch_bounds__(SUM_COLS *SUM_SLICES)
    emb_small_part_kernel(float *part, const T *dout, const int32_t *ids, size_t N, int V, int D)
{
    __shared__ float sh[SUM_SLICES][SUM_COLS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, v = blockIdx.y;
    const int d = blockIdx.x * SUM_COLS + tx;
    const size_t n0 = (size_t)blockIdx.z * CHUNK, n1 = n0 + CHUNK < N ? n0 + CHUNK : N;
    float acc = 0.0f;
    if (d < D)
        for (size_t n = n0 + ty; n < n1; n += SUM_SLICES)
            if (ids[n] == v) acc += to_f32(dout[n * D + d]);
    sh[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && d < D) {
        float tot = 0.0f;
        for (int k = 0; k < SUM_SLICES; k++) tot += sh[k][tx];
        part[((size_t)blockIdx.z * V + v) * D + d] = tot;
    }
}

__global__ void emb_small_finish_kernel(float *dtable, const float *part, int C, int V, int D)
{
    const size_t VD = (size_t)V * D;
    for (size_t x = blockIdx.x * (size_t)blockDim.x + threadIdx.x; x < VD;
         x += (size_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++) acc += part[(size_t)c * VD + x];
        dtable[x] += acc;
    }
}

/* dtable[ids[k], :] += scale * rows[k, :]: a block per k (grid-stride),
 * threads over the columns; distinct ids, so no two blocks write a row */
__global__ void emb_rows_add_kernel(float *dtable, const float *rows, const int32_t *ids,
                                    size_t K, size_t V, int D, float scale)
{
    for (size_t k = blockIdx.x; k < K; k += gridDim.x) {
        const int32_t id = ids[k];
        if (!id_ok(id, V)) continue;
        float *tr = dtable + (size_t)id * D;
        const float *r = rows + k * D;
        for (int d = threadIdx.x; d < D; d += blockDim.x) tr[d] += scale * r[d];
    }
}

} // namespace

extern "C" void embedding_forward_cuda(void *out, DType dt, const float *table,
                                       const int32_t *ids, int32_t *nbad, size_t N, size_t V,
                                       size_t D, cudaStream_t s)
{
    if (N == 0 || D == 0) return;
    CT_ASSERT(D <= 0x7fffffff, "embedding_forward_cuda: D = %zu out of range", D);
    const int threads = threads_for(D, 256);
    const unsigned grid = grid_for(N, 1, 8 * MAX_GRID); /* a block per row */
    dispatch_float(dt, "embedding_forward_cuda", [&](auto tag) {
        using T = decltype(tag);
        emb_fwd_kernel<T><<<grid, threads, 0, s>>>((T *)out, table, ids, nbad, N, V, (int)D);
        CUDA_CHECK_LAUNCH();
    });
}

static void grouped_sums(float *dtable, float *rows, int32_t *ids_out, const void *dout, DType dt,
                         const int32_t *ids, size_t N, size_t V, size_t D, cudaStream_t s);

extern "C" void embedding_backward_cuda(float *dtable, const void *dout, DType dt,
                                        const int32_t *ids, size_t N, size_t V, size_t D,
                                        int accum, cudaStream_t s)
{
    if (V == 0 || D == 0) return;
    if (!accum) CUDA_CHECK(cudaMemsetAsync(dtable, 0, V * D * sizeof(float), s));
    if (N == 0) return;
    CT_ASSERT(N <= 0x7fffffff && V <= 0x7ffffffe && D <= 0x7fffffff,
              "embedding_backward_cuda: N = %zu, V = %zu, D = %zu out of range", N, V, D);
    const size_t chunks = (N + CHUNK - 1) / CHUNK;
    if (V <= SMALL_V && chunks <= MAX_GRID) {
        float *part = NULL;
        CUDA_CHECK(cudaMallocAsync((void **)&part, chunks * V * D * sizeof(float), s));
        dispatch_float(dt, "embedding_backward_cuda", [&](auto tag) {
            using T = decltype(tag);
            dim3 grid((unsigned)((D + SUM_COLS - 1) / SUM_COLS), (unsigned)V, (unsigned)chunks);
            emb_small_part_kernel<T><<<grid, dim3(SUM_COLS, SUM_SLICES), 0, s>>>(
                part, (const T *)dout, ids, N, (int)V, (int)D);
            CUDA_CHECK_LAUNCH();
        });
        emb_small_finish_kernel<<<grid_for(V * D, 256, 4096), 256, 0, s>>>(dtable, part, (int)chunks,
                                                                          (int)V, (int)D);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaFreeAsync(part, s));
        return;
    }
    grouped_sums(dtable, NULL, NULL, dout, dt, ids, N, V, D, s);
}

extern "C" void embedding_backward_compact_cuda(float *rows, int32_t *ids_out, const void *dout,
                                                DType dt, const int32_t *ids, size_t N, size_t V,
                                                size_t D, cudaStream_t s)
{
    if (N == 0 || D == 0) return;
    CT_ASSERT(V > SMALL_V && N <= 0x7fffffff && V <= 0x7ffffffe && D <= 0x7fffffff,
              "embedding_backward_compact_cuda: N = %zu, V = %zu, D = %zu out of range", N, V, D);
    CUDA_CHECK(cudaMemsetAsync(ids_out, 0xff, N * sizeof(int32_t), s));   /* -1: no id */
    grouped_sums(NULL, rows, ids_out, dout, dt, ids, N, V, D, s);
}

extern "C" void embedding_rows_add_cuda(float *dtable, const float *rows, const int32_t *ids,
                                        size_t K, size_t V, size_t D, float scale, cudaStream_t s)
{
    if (K == 0 || D == 0) return;
    CT_ASSERT(D <= 0x7fffffff, "embedding_rows_add_cuda: D = %zu out of range", D);
    emb_rows_add_kernel<<<grid_for(K, 1, MAX_GRID), threads_for(D, 256), 0, s>>>(
        dtable, rows, ids, K, V, (int)D, scale);
    CUDA_CHECK_LAUNCH();
}

/* Steps 1-5 of the top of the file: the per-id sums added to dtable, or
 * written compact (rows, ids_out) */
static void grouped_sums(float *dtable, float *rows, int32_t *ids_out, const void *dout, DType dt,
                         const int32_t *ids, size_t N, size_t V, size_t D, cudaStream_t s)
{
    const size_t NT = (N + TS - 1) / TS, NU = (N < V ? N : V) + 1;
    const size_t NH = N / (SUM_SLICES + 1) + 1;   /* heavy ids at most, + 1 */
    const size_t words = NT * V + (V + 1) + NU + 1 + NH + 1 + 2 * N;
    int32_t *scratch = NULL;
    CUDA_CHECK(cudaMallocAsync((void **)&scratch, words * sizeof(int32_t), s));
    int32_t *cnt = scratch, *start = cnt + NT * V, *used = start + V + 1;
    int32_t *n_used = used + NU, *heavy = n_used + 1, *n_heavy = heavy + NH;
    int32_t *rank = n_heavy + 1, *pos = rank + N;
    CUDA_CHECK(cudaMemsetAsync(cnt, 0, NT * V * sizeof(int32_t), s));

    emb_tile_rank_kernel<<<(unsigned)NT, TS, 0, s>>>(rank, cnt, ids, N, V);
    CUDA_CHECK_LAUNCH();
    emb_col_prefix_kernel<<<(unsigned)((V + 255) / 256), 256, 0, s>>>(cnt, start, NT, V);
    CUDA_CHECK_LAUNCH();
    emb_scan_kernel<<<1, SCAN_THREADS, 0, s>>>(start, used, n_used, heavy, n_heavy, V);
    CUDA_CHECK_LAUNCH();
    emb_scatter_kernel<<<(unsigned)((N + 255) / 256), 256, 0, s>>>(pos, ids, rank, cnt, start,
                                                                    N, V);
    CUDA_CHECK_LAUNCH();
    const size_t col_tiles = (D + SUM_COLS - 1) / SUM_COLS;
    const unsigned gl = (unsigned)(NU - 1 < MAX_GRID ? NU - 1 : MAX_GRID);
    const unsigned gh = (unsigned)(NH - 1 < MAX_GRID ? NH - 1 : MAX_GRID);   /* 0: N <= SL */
    CT_ASSERT(col_tiles <= 0x7fffffffu, "embedding_backward_cuda: D = %zu too wide", D);
    dispatch_float(dt, "embedding_backward_cuda", [&](auto tag) {
        using T = decltype(tag);
        emb_sum_light_kernel<T><<<gl, LIGHT_THREADS, 0, s>>>(dtable, (const T *)dout, pos, start,
                                                             used, n_used, (int)D, rows, ids_out);
        CUDA_CHECK_LAUNCH();
        if (!gh) return;   /* no id can have more than SUM_SLICES positions */
        dim3 grid((unsigned)col_tiles, gh), block(SUM_COLS, SUM_SLICES);
        emb_sum_heavy_kernel<T><<<grid, block, 0, s>>>(dtable, (const T *)dout, pos, start, used,
                                                       heavy, n_heavy, (int)D, rows, ids_out);
        CUDA_CHECK_LAUNCH();
    });
    CUDA_CHECK(cudaFreeAsync(scratch, s));
}
