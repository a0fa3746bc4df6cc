/* settings.c — the settings table and its one parser (contract in
 * settings.h). The only file under engine ops models data train that calls
 * getenv(), apart from the data-parallel parser's lookup callback
 * (train/parallel/dist_env.c, which tests feed a table instead).
 *
 * To add a variable: an id in settings.h, a line in the table below (the
 * doc is one line; for a switch it says what 1 does), then
 * `build/ctrain env --markdown > docs/env.md`.
 */
#include "settings.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"

#define MIB ((size_t)1 << 20)
#define SIZE_MAX_BYTES 1e18   /* a larger size is a typo, not a card */

/* name, audience, default (NULL: none), what unset means when there is no
 * default, then the kind's own fields, then the doc */
#define V_SWITCH(n, a, d, u, doc)         {n, SK_SWITCH, a, d, u, 0, 1, 0, NULL, NULL, doc}
#define V_INT(n, a, d, u, lo, hi, doc)    {n, SK_INT, a, d, u, lo, hi, 0, NULL, NULL, doc}
#define V_SIZE(n, a, d, u, unit, doc)     {n, SK_SIZE, a, d, u, 0, 0, unit, NULL, NULL, doc}
#define V_CHOICE(n, a, d, u, words, doc)  {n, SK_CHOICE, a, d, u, 0, 0, 0, words, NULL, doc}
#define V_STRING(n, a, d, u, form, doc)   {n, SK_STRING, a, d, u, 0, 0, 0, NULL, form, doc}
#define V_PATH(n, a, d, u, form, doc)     {n, SK_PATH, a, d, u, 0, 0, 0, NULL, form, doc}

static const Setting table[SET_COUNT] = {
    /* ---- users ---- */
    [SET_LOG] = V_CHOICE("CTRAIN_LOG", SA_USER, "info", NULL, "error|warn|info|debug|trace",
        "the level of the messages on stderr; ranks other than 0 of a multi-GPU run log "
        "errors only unless it is set"),
    [SET_MEM_LIMIT] = V_SIZE("CTRAIN_MEM_LIMIT", SA_USER, NULL, "no limit", 1,
        "behave as a card with this much memory for what ctrain allocates (the CUDA context "
        "and the libraries' own memory not counted), e.g. to find with `ctrain bench "
        "--max-batch` the batch that fits a smaller card"),
    [SET_TIMELINE] = V_STRING("CTRAIN_TIMELINE", SA_USER, NULL, "off", "FILE[:START[:STEPS]]",
        "record every kernel and copy of steps START .. START+STEPS-1 (default 10 and 5) with "
        "CUPTI: FILE a Chrome trace, FILE.txt a summary; %r in FILE is the rank, %p the "
        "process id"),
    [SET_RANK] = V_INT("CTRAIN_RANK", SA_USER, NULL, "one process", 0, 65535,
        "this process's rank in a multi-GPU run, below CTRAIN_WORLD_SIZE (`ctrain train --gpus "
        "N` sets the rank variables; set them by hand or from a job scheduler across machines)"),
    [SET_WORLD_SIZE] = V_INT("CTRAIN_WORLD_SIZE", SA_USER, NULL, "one process", 1, 65536,
        "the number of processes in the run, on all machines"),
    [SET_LOCAL_RANK] = V_INT("CTRAIN_LOCAL_RANK", SA_USER, NULL, "CTRAIN_RANK", 0, 1023,
        "the GPU this process uses on its machine"),
    [SET_MASTER_ADDR] = V_STRING("CTRAIN_MASTER_ADDR", SA_USER, "127.0.0.1", NULL, "host",
        "the host of rank 0, where the ranks meet (the rendezvous)"),
    [SET_MASTER_PORT] = V_INT("CTRAIN_MASTER_PORT", SA_USER, "29500", NULL, 1, 65535,
        "the TCP port rank 0 listens on for the rendezvous"),
    [SET_NVML_LIB] = V_PATH("CTRAIN_NVML_LIB", SA_USER, "libnvidia-ml.so.1", NULL, NULL,
        "the NVML library `ctrain bench` reads power, temperature and clocks from"),
    [SET_CUPTI_LIB] = V_PATH("CTRAIN_CUPTI_LIB", SA_USER, NULL,
        "libcupti.so, then the CUDA toolkit's folders", NULL,
        "the CUPTI library CTRAIN_TIMELINE records with"),
    [SET_NVJPEG_LIB] = V_PATH("CTRAIN_NVJPEG_LIB", SA_USER, NULL,
        "libnvjpeg.so.13, then .so.12, .so.11, .so on the loader's path", NULL,
        "the nvJPEG library the GPU JPEG decoder loads (only this file when set)"),
    [SET_SCRIPTS] = V_PATH("CTRAIN_SCRIPTS", SA_USER, NULL,
        "scripts/ beside the binary's folder, then ./scripts", "folder",
        "where `ctrain report` finds report.py"),

    /* ---- developers' A/B switches ---- */
    [SET_LINEAR_EPILOGUE] = V_SWITCH("CTRAIN_LINEAR_EPILOGUE", SA_DEV, "1", NULL,
        "Linear's bias added in the cuBLASLt GEMM's epilogue, FP8 Linear's too (0: a separate "
        "bias add)"),
    [SET_LINEAR_BGRAD] = V_SWITCH("CTRAIN_LINEAR_BGRAD", SA_DEV, "0", NULL,
        "Linear's bias gradient summed in the weight gradient's cuBLASLt GEMM (its BGRADB "
        "epilogue) instead of a separate pass over dy; off until measured (docs/kernels.md)"),
    [SET_LINEAR_ACT_BGRAD] = V_SWITCH("CTRAIN_LINEAR_ACT_BGRAD", SA_DEV, "1", NULL,
        "Linear + ReLU/GELU (op_linear_act: BERT's intermediate layer): the bias gradient summed "
        "in the activation's backward pass (1) or a separate pass over its result (0, the "
        "composed ops' bits); on: BERT-large bf16 on an H100 +1.0% at bs 32, +0.7% at bs 256 "
        "(docs/kernels.md)"),
    [SET_LOGITS_PAD] = V_SWITCH("CTRAIN_LOGITS_PAD", SA_DEV, "1", NULL,
        "BERT's MLM logits stored with rows padded to a multiple of 8 (30,522 words 30,528 apart: "
        "the vocabulary GEMMs on cuBLASLt's 16-byte-aligned kernels instead of its 2-byte ones; "
        "the padding gets probability 0), on CUDA when neither label smoothing nor evaluation "
        "reads the logits (0: packed rows); predicted -3.7 ms a BERT-large step, docs/kernels.md"),
    [SET_LN_KERNELS] = V_CHOICE("CTRAIN_LN_KERNELS", SA_DEV, "row", NULL,
        "row|vec|auto|split",
        "LayerNorm's CUDA kernels: one element per lane per access (row), 16-byte vectors "
        "with each row held in registers (vec: +5% at BERT-large bs 256, -6% at bs 32 with the "
        "fused add_norm, docs/kernels.md), vec only for calls of at least 16,384 rows (auto; "
        "unmeasured), or vec with the backward's dx and its dgamma / dbeta in two lean passes "
        "(split; unmeasured)"),
    [SET_ADD_NORM] = V_CHOICE("CTRAIN_ADD_NORM", SA_DEV, "auto", NULL, "composed|fused|auto",
        "BERT's dropout + residual add + LayerNorm as three ops (composed), one CUDA kernel "
        "each way (fused: same values, fewer passes), or fused for calls of at least 16,384 "
        "rows (auto: BERT-large bf16 on an H100 +2.9% fused at 32,768 rows, -18% at 4,096; "
        "docs/kernels.md)"),
    [SET_FP8_CAST_VEC] = V_SWITCH("CTRAIN_FP8_CAST_VEC", SA_DEV, "1", NULL,
        "FP8 cast-transposes 16 bytes a thread each way where the shape and alignment allow (1), "
        "or one element a thread (0: the first kernel, kept for the A/B and for other shapes)"),
    [SET_FP8_FAST_ACCUM] = V_SWITCH("CTRAIN_FP8_FAST_ACCUM", SA_DEV, "1", NULL,
        "FP8 Linear forward GEMMs with cuBLASLt's fast accumulation (partial sums kept in the "
        "tensor cores' own accumulator, as Transformer Engine's forward does; the gradient GEMMs "
        "keep promoting to f32). BERT-large fp8 seq 128 bs 256 on an H100: +0.5%, BERT-small's "
        "fp8 convergence within its bars (0: promoted every few steps, docs/kernels.md)"),
    [SET_FP8_WEIGHT_CODES] = V_SWITCH("CTRAIN_FP8_WEIGHT_CODES", SA_DEV, "1", NULL,
        "--precision fp8 with AdamW: the optimizer's kernel writes the FP8 Linear weights' E4M3 "
        "codes (both ways) and their amaxes as it updates them, and the forward reads them "
        "instead of casting the f32 weight each micro-batch (the same training bit for bit; "
        "the update after backward only). BERT-large fp8 on an H100: +0.7% at seq 128 bs 256 "
        "and seq 512 bs 32, +0.25 GiB (0: the forward casts, docs/kernels.md)"),
    [SET_FP8_DZ_CODES] = V_SWITCH("CTRAIN_FP8_DZ_CODES", SA_DEV, "1", NULL,
        "--precision fp8: the add_norm backward hands the FP8 Linear before it the E5M2 codes "
        "of its output's gradient (and the bias gradient's column partials) instead of the "
        "bf16 gradient the Linear would cast: one write of R x D bf16 and its read fewer a "
        "call, the same codes and amax, the bias gradient summed in another fixed order "
        "(BERT-large fp8 seq 128 bs 256 on an H100: +0.2%; 0: the Linear casts dy)"),
    [SET_FP8_NORM_CODES] = V_SWITCH("CTRAIN_FP8_NORM_CODES", SA_DEV, "1", NULL,
        "--precision fp8: BERT's add_norm forward also writes its output's E4M3 codes (both "
        "ways) for the FP8 Linear that reads it next (the feed-forward block's, the next "
        "layer's q, k, v), which then does not cast it: one read of R x D bf16 fewer a call, "
        "the same codes and amax. BERT-large fp8 on an H100: +1.0% at seq 128 bs 256, +0.6% "
        "at seq 512 bs 32 (0: the Linears cast, docs/kernels.md)"),
    [SET_LN_BWD_CHUNKS] = V_INT("CTRAIN_LN_BWD_CHUNKS", SA_DEV, "264", NULL, 1, 65536,
        "LayerNorm's and add_norm's vector backward: about this many blocks a call, each a "
        "chunk of consecutive rows with its own dgamma / dbeta partials (fewer: more rows a "
        "block over the same per-block cost of zeroing and adding its partials; the sums' "
        "order follows it). 264 against 1024 on an H100, BERT-large: fp8 seq 128 bs 256 "
        "+0.5%, seq 512 bs 32 +1.4%, bf16 seq 128 bs 256 +0.5% (docs/kernels.md)"),
    [SET_JPEG_PLANES] = V_SWITCH("CTRAIN_JPEG_PLANES", SA_DEV, "0", NULL,
        "--decode gpu: nvJPEG writes 4:2:0 images as Y, Cb, Cr planes and ctrain's resample "
        "kernel converts them (no nvJPEG colour-conversion kernels on the SMs; other layouts go "
        "to the CPU); unmeasured, docs/kernels.md"),
    [SET_JPEG_DECODERS] = V_INT("CTRAIN_JPEG_DECODERS", SA_DEV, "2", NULL, 1, 4,
        "--decode gpu: decode threads, each with its own nvJPEG decoder and stream, so that "
        "as many batches decode at once beside the step; one staging buffer more than "
        "threads. ResNet-50 bs 256 bf16 on an H100: 97% of synthetic with two (capacity "
        "~14,000 img/s); the 82-88% measured for one to four before CUDA_DEVICE_MAX_CONNECTIONS "
        "was raised were that cap's (docs/results.md)"),
    [SET_JPEG_PRIORITY] = V_SWITCH("CTRAIN_JPEG_PRIORITY", SA_DEV, "0", NULL,
        "--decode gpu: the decode threads' streams at the device's highest priority (1), so "
        "that their kernels run ahead of the step's as SMs free up, or at its lowest (0, "
        "behind the step); measured alike on an H100 (86.1% against 86.7% of synthetic)"),
    [SET_BN] = V_CHOICE("CTRAIN_BN", SA_DEV, "cudnn", NULL, "cudnn|own",
        "the training batch norm: cuDNN's fused NHWC kernels, or ours"),
    [SET_BN_PAIR] = V_CHOICE("CTRAIN_BN_PAIR", SA_DEV, "add_relu", NULL, "off|add_relu|all",
        "the training batch norm's forward as ours before cuDNN's backward: add_relu for "
        "batch norm + add + ReLU (y and the ReLU's mask written in the layout cuDNN's reserve "
        "space holds, each shape checked against cuDNN's own forward on its first call), all "
        "for batch norm + ReLU too (no reserve: cuDNN's backward reads y); off keeps cuDNN's "
        "forward (ResNet-50 bs 256 on an H100: add_relu +2.25% bf16, +1.5% tf32; all 0.5% "
        "below add_relu in bf16)"),
    [SET_CONV_BN] = V_CHOICE("CTRAIN_CONV_BN", SA_DEV, "separate", NULL, "separate|unit|fused",
        "ResNet's batch norm + ReLU before a convolution: separate ops (batch norm as "
        "CTRAIN_BN picks it, then the convolution), or one unit (ops/conv_bn.h: the statistics handed on from the "
        "convolution that made its input, the normalised activation made again in the backward "
        "instead of kept: two activations less a bottleneck block; our batch-norm kernels), or "
        "the unit with its convolutions' statistics reduced in cuDNN fused graphs where they "
        "are faster (fused, ops/conv_bn_cudnn.h, unmeasured); unit measured on an H200 at "
        "ResNet-50 bs 256 bf16: -1.6 GiB peak, 23% slower (docs/results.md)"),
    [SET_CONV_BN_1X1] = V_CHOICE("CTRAIN_CONV_BN_1X1", SA_DEV, "own", NULL,
        "library|own|backward",
        "the conv + batch-norm unit's 1 x 1 convolutions at ResNet's stages 1-2 (C, K <= 512; "
        "f16, bf16; CTRAIN_CONV_BN=unit): ours (own, ops/conv1x1_bn.h): the forward with the "
        "apply + ReLU in its prologue and the statistics in its epilogue, the data gradient "
        "with the ReLU's mask and batch norm's sums in its epilogue, the filter gradient with "
        "the forward's prologue; the two gradients alone (backward); or cuDNN's convolutions "
        "with batch norm's passes around them (library). H100, ResNet-50 bs 256 bf16 unit: "
        "own 42.8 ms a step, backward 42.85, library 43.13 (docs/kernels.md)"),
    [SET_ATTN] = V_CHOICE("CTRAIN_ATTN", SA_DEV, "auto", NULL, "cublas|cudnn|flash|sm90|auto",
        "auto: sm90 where its kernels take the call, else cudnn (H100, BERT-large fp8, sm90 "
        "against cudnn: +2.3% at seq 512 bs 32, +0.9% at seq 128 bs 256); cudnn: cuDNN's fused "
        "flash attention (graph API, f16/bf16, its own dropout mask) where cuDNN plans both "
        "directions, else flash (BERT-large bf16 on an H100: +3.4% at seq 128 bs 256, +8.6% at "
        "seq 512 bs 32 over flash); flash: ctrain's fused tensor-core kernels where they run "
        "(f16/bf16, head size 32, 64 or 128, sm_80+; the CPU reference's dropout mask), else "
        "cublas; cublas: attention always as cuBLASLt GEMMs around the softmax kernel; sm90: "
        "ctrain's wgmma kernels (ops/attention_sm90.h: sm_90, head size 64, T a multiple of 64, "
        "f16/bf16; the CPU reference's dropout mask) for attention read from one q/k/v "
        "projection, elsewhere as flash (one dropout mask throughout)"),
    [SET_ATTN_SM90_DQ] = V_CHOICE("CTRAIN_ATTN_SM90_DQ", SA_DEV, "auto", NULL,
        "kernel|cluster|auto",
        "the sm90 attention backward's dq: a kernel of its own that computes S and dP again "
        "(kernel), or inside the dk/dv kernel, whose blocks of a head form one thread-block "
        "cluster summing their shares in a fixed order through each other's shared memory "
        "(cluster: T <= 512, the forward's dropout bits kept); auto: cluster where T <= 128, "
        "else kernel. H100, BERT-large fp8: the backward 0.53 ms (cluster) against 0.44 "
        "(kernel) at seq 512 bs 32; at seq 128 bs 256 the step +1.3% (docs/kernels.md)"),
    [SET_ATTN_SAVE_MASK] = V_SWITCH("CTRAIN_ATTN_SAVE_MASK", SA_DEV, "1", NULL,
        "the fused attention forward keeps its dropout mask for the backward, B H T^2/8 bytes a "
        "layer (0: the backward draws it again)"),
    [SET_ADD_NORM_BITS] = V_SWITCH("CTRAIN_ADD_NORM_BITS", SA_DEV, "1", NULL,
        "the fused add_norm's forward keeps its dropout mask as bits (R D / 8 bytes a call in "
        "f16 / bf16) and its backward reads them instead of drawing the mask again (BERT-large "
        "on an H100: +1.0% bf16 and fp8 at seq 128 bs 256, +0.8% at seq 512 bs 32, +0.19 / +0.10 "
        "GiB; 0: drawn again)"),
    [SET_QKV_PROJ] = V_SWITCH("CTRAIN_QKV_PROJ", SA_DEV, "1", NULL,
        "BERT's q, k and v Linears as one projection [3 D, D] that cuDNN's attention reads in "
        "place, where cuDNN plans it (one data-gradient GEMM for three; not under fp8; "
        "BERT-large bf16 on an H100: +1.0% at seq 128 bs 256, +1.4% at seq 512 bs 32; 0: three "
        "projections)"),
    [SET_QKV_PROJ_FP8] = V_SWITCH("CTRAIN_QKV_PROJ_FP8", SA_DEV, "1", NULL,
        "under --precision fp8 too: the joined projection one FP8 Linear, Wqkv with one scale "
        "and dqkv with one (Transformer Engine's fused QKV; BERT-large fp8 seq 128 bs 256 on an "
        "H100: +2.7%; 0: q, k and v as three FP8 Linears scaled apart)"),
    [SET_CONV_SEARCH_WS_MB] = V_SIZE("CTRAIN_CONV_SEARCH_WS_MB", SA_DEV, "4096", NULL, MIB,
        "the workspace cuDNN's algorithm search may use (at most half the free memory, and half "
        "of what CTRAIN_MEM_LIMIT leaves)"),
    [SET_CONV_WS] = V_CHOICE("CTRAIN_CONV_WS", SA_DEV, "per_call", NULL, "shared|per_call",
        "a convolution's workspace (legacy call or cuDNN graph; not attention's) above the shared "
        "one's size: the shared workspace grown to it and held for the run (shared), or a pool "
        "block taken for that call alone (per_call: ResNet-50 bs 256 fp16 on an H100 peaks "
        "0.44 GiB lower, at the same speed; strict fp32 0.3 GB lower)"),
    [SET_CONV_NONDETERMINISTIC] = V_SWITCH("CTRAIN_CONV_NONDETERMINISTIC", SA_DEV, "0", NULL,
        "the convolutions' backward passes may take the fastest algorithm even when it is not "
        "bit-reproducible"),
    [SET_CONV_ENGINES] = V_CHOICE("CTRAIN_CONV_ENGINES", SA_DEV, "fastest", NULL,
        "fastest|legacy|graph",
        "which cuDNN API's engines the convolution search times: both, the faster kept "
        "(fastest), the legacy algorithms only, or the graph API's engines only (a shape "
        "without one is an error)"),
    [SET_CONV_PAD] = V_CHOICE("CTRAIN_CONV_PAD", SA_DEV, "auto", NULL, "auto|always",
        "convolutions whose channel rows are not 16 bytes (ResNet's stem: C = 3): searched as "
        "they are and padded with zero channels only when cuDNN has no algorithm (auto), or "
        "always run on padded copies, where cuDNN's tensor-core kernels may be faster "
        "(always; slower in bf16, and ResNet-50 tf32 bs 256 on an H100 -3.5%, docs/kernels.md)"),
    [SET_CONV_STEM] = V_CHOICE("CTRAIN_CONV_STEM", SA_DEV, "own", NULL, "cudnn|own|all",
        "ResNet's stem convolution (7 x 7, stride 2, 3 channels in, 64 out, outputs up to 128 "
        "wide) and its weight gradient: ctrain's implicit GEMM on the tensor cores (own: bf16, "
        "and f32 where TF32 is allowed; ResNet-50 bs 256 on an H100 +1.4% tf32, +2.7% bf16; "
        "all: f16 too, unmeasured; ops/conv_stem.h), or cuDNN's (cudnn; strict f32 always)"),
    [SET_CONV_GEMM] = V_CHOICE("CTRAIN_CONV_GEMM", SA_DEV, "f32", NULL,
        "off|f32|search|always",
        "1 x 1 convolutions (no padding, any stride) as cuBLASLt GEMMs on the NHWC rows "
        "(ops/conv_gemm.h): timed beside cuDNN's choice in each plan's search and kept when "
        "3% faster, in strict f32 only (f32; ResNet-50 fp32 bs 256 on an H100 932.9 -> 1,403.9 "
        "img/s) or in every precision (search, unmeasured); never (off); or for every such "
        "plan (always: tests, comparisons)"),
    [SET_GEMM_SEARCH] = V_SWITCH("CTRAIN_GEMM_SEARCH", SA_DEV, "1", NULL,
        "each cuBLASLt matmul shape of 2^34 FLOP or more times the heuristic's first eight "
        "algorithms on its first call and keeps the fastest when it beats the first by 3%, kept "
        "in the plan store so a later run takes the same one (BERT-large bf16 seq 128 bs 256 on "
        "an H100: +1.9%; 0: the heuristic's first)"),
    [SET_PLAN_CACHE] = V_PATH("CTRAIN_PLAN_CACHE", SA_DEV, NULL,
        "$XDG_CACHE_HOME/ctrain, else ~/.cache/ctrain", "folder, or off",
        "where the convolution plans and matmul algorithms a search chose are kept, one file "
        "per card, library and driver, so a later run on the same machine skips the search "
        "(off: search every run and keep nothing; tests that time the search set it)"),
    [SET_GRAPH_NODE_PRIORITY] = V_SWITCH("CTRAIN_GRAPH_NODE_PRIORITY", SA_DEV, "1", NULL,
        "kernels in a CUDA graph keep their capture stream's priority (communication high, "
        "the overlapped update low)"),
    [SET_GRAD_FRESH] = V_SWITCH("CTRAIN_GRAD_FRESH", SA_DEV, "1", NULL,
        "instead of zeroing every gradient after the update (one memset of the buffer), each "
        "parameter's first contribution of a step writes its gradient and the ones no op "
        "reached are zeroed after backward (the same bits where the adding plans are known: a "
        "written gradient's convolution or searched GEMM takes the adding one's algorithm, from "
        "the run or the plan store); one GPU, one micro-batch a step, "
        "the update after backward, else the memset (H100: BERT-large fp8 +0.3% seq 128, "
        "+0.7% seq 512; ResNet-50 bs 256 tf32 +0.45%; 0: always the memset)"),
    [SET_OVERLAP_UPDATE] = V_SWITCH("CTRAIN_OVERLAP_UPDATE", SA_DEV, "0", NULL,
        "the optimizer updates each bucket of weights as soon as backward has finished its "
        "gradients, on a low-priority stream"),
    [SET_OVERLAP_BUCKET_MB] = V_SIZE("CTRAIN_OVERLAP_BUCKET_MB", SA_DEV, NULL,
        "a twelfth of the gradients, 25 to 100 MiB", MIB,
        "the bucket size of the overlapped update on one GPU"),
    [SET_DIST_GRAPH] = V_SWITCH("CTRAIN_DIST_GRAPH", SA_DEV, "1", NULL,
        "with --graph, data-parallel steps are captured too, their all-reduces included (0: "
        "they stay eager)"),
    [SET_DIST_SHARD] = V_SWITCH("CTRAIN_DIST_SHARD", SA_DEV, NULL,
        "on for models of 100M parameters or more",
        "each rank updates its share of the weights: reduce-scatter, update, all-gather, next "
        "to backward"),
    [SET_DIST_SHARD_WINDOW] = V_SWITCH("CTRAIN_DIST_SHARD_WINDOW", SA_DEV, "1", NULL,
        "the sharded update's weights in symmetric NCCL windows, as the gradients"),
    [SET_DIST_SPARSE_EMB] = V_SWITCH("CTRAIN_DIST_SPARSE_EMB", SA_DEV, NULL,
        "on with f32 gradient reduction in buckets",
        "a large embedding table's lookup gradient is sent as rows, once its other uses are done"),
    [SET_DIST_TAPER] = V_SWITCH("CTRAIN_DIST_TAPER", SA_DEV, NULL,
        "on from buckets of 50 MB",
        "the gradient buckets shrink towards the end of backward"),
    [SET_DIST_TRACE] = V_SWITCH("CTRAIN_DIST_TRACE", SA_DEV, "0", NULL,
        "each rank times forward, backward, communication and update of its eager steps and "
        "logs the means at the end"),

    /* ---- internal ---- */
    [SET_RDZV_FD] = V_INT("CTRAIN_RDZV_FD", SA_INTERNAL, NULL, "none", 0, 1 << 20,
        "the listening socket ctrain's launcher hands rank 0"),
    [SET_BENCH_FD] = V_INT("CTRAIN_BENCH_FD", SA_INTERNAL, NULL, "none", 0, 1 << 20,
        "the file descriptor rank 0 of `ctrain bench --gpus N` writes its result to"),
    [SET_BENCH_CONFIG] = V_STRING("CTRAIN_BENCH_CONFIG", SA_INTERNAL, NULL, "none", "hex",
        "the configuration a `ctrain bench-rank` process measures"),

    /* ---- other software's ---- */
    [SET_OMPI_COMM_WORLD_RANK] = V_INT("OMPI_COMM_WORLD_RANK", SA_FOREIGN, NULL, "not mpirun",
        0, 65535, "Open MPI's rank, used when CTRAIN_RANK and CTRAIN_WORLD_SIZE are unset"),
    [SET_OMPI_COMM_WORLD_SIZE] = V_INT("OMPI_COMM_WORLD_SIZE", SA_FOREIGN, NULL, "not mpirun",
        1, 65536, "Open MPI's number of processes"),
    [SET_OMPI_COMM_WORLD_LOCAL_RANK] = V_INT("OMPI_COMM_WORLD_LOCAL_RANK", SA_FOREIGN, NULL,
        "the rank", 0, 1023, "Open MPI's rank on this machine: the GPU"),
    [SET_OMPI_COMM_WORLD_LOCAL_SIZE] = V_INT("OMPI_COMM_WORLD_LOCAL_SIZE", SA_FOREIGN, NULL,
        "the number of processes", 1, 65536,
        "Open MPI's processes on this machine; all of them on one: CTRAIN_MASTER_ADDR may be "
        "left unset"),
    [SET_TORCH_RANK] = V_INT("RANK", SA_FOREIGN, NULL, "not torchrun", 0, 65535,
        "torchrun's rank, used with WORLD_SIZE when CTRAIN_RANK and CTRAIN_WORLD_SIZE are unset"),
    [SET_TORCH_WORLD_SIZE] = V_INT("WORLD_SIZE", SA_FOREIGN, NULL, "not torchrun", 1, 65536,
        "torchrun's number of processes"),
    [SET_TORCH_LOCAL_RANK] = V_INT("LOCAL_RANK", SA_FOREIGN, NULL, "the rank", 0, 1023,
        "torchrun's rank on this machine: the GPU"),
    [SET_TORCH_MASTER_ADDR] = V_STRING("MASTER_ADDR", SA_FOREIGN, NULL, "127.0.0.1", "host",
        "torchrun's rank-0 host, used when CTRAIN_MASTER_ADDR is unset"),
    [SET_TORCH_MASTER_PORT] = V_INT("MASTER_PORT", SA_FOREIGN, NULL, "29500", 1, 65534,
        "torchrun's store port: ctrain's rendezvous takes the next one when CTRAIN_MASTER_PORT "
        "is unset"),
    [SET_SLURM_PROCID] = V_INT("SLURM_PROCID", SA_FOREIGN, NULL, "not srun", 0, 65535,
        "SLURM's task rank, read inside a job step when no other launcher's variables are set"),
    [SET_SLURM_STEP_ID] = V_STRING("SLURM_STEP_ID", SA_FOREIGN, NULL, "not in a job step", NULL,
        "set by srun: only then is SLURM_PROCID a rank (a batch script has SLURM_PROCID = 0)"),
    [SET_SLURM_STEP_NUM_TASKS] = V_INT("SLURM_STEP_NUM_TASKS", SA_FOREIGN, NULL,
        "SLURM_NTASKS", 1, 65536, "the job step's number of tasks: the world size"),
    [SET_SLURM_NTASKS] = V_INT("SLURM_NTASKS", SA_FOREIGN, NULL, "not srun", 1, 65536,
        "the job's number of tasks, when SLURM_STEP_NUM_TASKS is unset"),
    [SET_SLURM_LOCALID] = V_INT("SLURM_LOCALID", SA_FOREIGN, NULL, "the rank", 0, 1023,
        "SLURM's task index on this node: the GPU"),
    [SET_SLURM_STEP_NUM_NODES] = V_INT("SLURM_STEP_NUM_NODES", SA_FOREIGN, NULL, "SLURM_NNODES",
        1, 65536, "the job step's nodes; more than one: rank 0's host from the node list"),
    [SET_SLURM_NNODES] = V_INT("SLURM_NNODES", SA_FOREIGN, NULL, "1", 1, 65536,
        "the job's nodes, when SLURM_STEP_NUM_NODES is unset"),
    [SET_SLURM_STEP_NODELIST] = V_STRING("SLURM_STEP_NODELIST", SA_FOREIGN, NULL,
        "SLURM_JOB_NODELIST", "hostlist",
        "the job step's nodes: the first is task 0's host when CTRAIN_MASTER_ADDR is unset"),
    [SET_SLURM_JOB_NODELIST] = V_STRING("SLURM_JOB_NODELIST", SA_FOREIGN, NULL, "none",
        "hostlist", "the job's nodes, when SLURM_STEP_NODELIST is unset"),
    [SET_NCCL_CTA_POLICY] = V_STRING("NCCL_CTA_POLICY", SA_FOREIGN, NULL, "NCCL's", NULL,
        "NCCL's CTA policy: ctrain sets 2 (zero-CTA) when it is unset and the gradients sit in "
        "a symmetric window (NCCL 2.28+)"),
    [SET_NCCL_PROTO] = V_STRING("NCCL_PROTO", SA_FOREIGN, NULL, "NCCL's", NULL,
        "NCCL tuning; `ctrain bench --gpus N` prints it under its scaling table when set"),
    [SET_NCCL_ALGO] = V_STRING("NCCL_ALGO", SA_FOREIGN, NULL, "NCCL's", NULL,
        "NCCL tuning; printed as NCCL_PROTO is"),
    [SET_NCCL_MAX_CTAS] = V_STRING("NCCL_MAX_CTAS", SA_FOREIGN, NULL, "NCCL's", NULL,
        "NCCL tuning; printed as NCCL_PROTO is"),
    [SET_CUDA_DEVICE_MAX_CONNECTIONS] = V_INT("CUDA_DEVICE_MAX_CONNECTIONS", SA_FOREIGN, NULL,
        "CUDA's 8", 1, 32,
        "the device's hardware work queues that CUDA maps streams onto: ctrain sets 32 when it "
        "is unset, since nvJPEG's hardware decoder runs on ~14 streams of its own and on 8 "
        "queues some of them share one with the step, whose CUDA graph their copies then wait "
        "behind (--decode gpu on an H100: 87% of synthetic with 8, 97% with 32)"),
    [SET_TMPDIR] = V_PATH("TMPDIR", SA_FOREIGN, "/tmp", NULL, "folder",
        "where `ctrain bench` keeps each child process's output while it runs"),
    [SET_XDG_CACHE_HOME] = V_PATH("XDG_CACHE_HOME", SA_FOREIGN, NULL, "~/.cache", "folder",
        "the cache folder CTRAIN_PLAN_CACHE defaults into (its ctrain/ subfolder)"),
    [SET_HOME] = V_PATH("HOME", SA_FOREIGN, NULL, "no default plan cache", "folder",
        "the home folder: the plan cache's default is ~/.cache/ctrain when XDG_CACHE_HOME is "
        "unset"),
};

#undef V_SWITCH
#undef V_INT
#undef V_SIZE
#undef V_CHOICE
#undef V_STRING
#undef V_PATH

const Setting *setting_info(SettingId id)
{
    CT_ASSERT((int)id >= 0 && id < SET_COUNT && table[id].name, "settings: no setting %d",
              (int)id);
    return &table[id];
}

const char *setting_name(SettingId id) { return setting_info(id)->name; }

const char *setting_text(SettingId id)
{
    const char *s = getenv(setting_info(id)->name);
    return s && *s ? s : NULL;
}

/* ---- the parser ---- */

typedef struct Msg { char *err, *hint; size_t errlen, hintlen; } Msg;

static int fail(Msg *m, const char *hint, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Msg *m, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
    snprintf(m->hint, m->hintlen, "%s", hint);
    return -1;
}

/* "0" or "1"; meaning says what 1 does (the hint repeats it). */
static int parse_switch(long long *v, const char *name, const char *meaning, const char *text,
                        Msg *m)
{
    if (!strcmp(text, "0") || !strcmp(text, "1")) { *v = text[0] == '1'; return 0; }
    char hint[640];
    snprintf(hint, sizeof hint, "set %s to 1 (%s) or 0, or leave it unset for the default", name,
             meaning);
    return fail(m, hint, "%s=%.200s is not 0 or 1", name, text);
}

static int parse_int(long long *v, const Setting *s, const char *text, Msg *m)
{
    char *end;
    errno = 0;
    long long x = strtoll(text, &end, 10);
    if (errno || end == text || *end || x < s->lo || x > s->hi) {
        char hint[640];
        snprintf(hint, sizeof hint, "set %s to a whole number in %lld..%lld (%s), or unset it",
                 s->name, s->lo, s->hi, s->doc);
        return fail(m, hint, "%s='%.200s' is not a whole number in %lld..%lld", s->name, text,
                    s->lo, s->hi);
    }
    *v = x;
    return 0;
}

/* A number > 0, then K, M or G (powers of 1024) and an optional B; a bare
 * number counts s->unit bytes, a lone B bytes. */
static int parse_size(long long *v, const Setting *s, const char *text, Msg *m)
{
    char *end;
    double x = strtod(text, &end);
    double mult = (double)s->unit;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0; end++; break;
    case 'M': case 'm': mult = 1024.0 * 1024; end++; break;
    case 'G': case 'g': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'B': case 'b': mult = 1; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    double bytes = x * mult;
    if (end == text || *end || !(x > 0) || !(bytes >= 1) || bytes > SIZE_MAX_BYTES) {
        char hint[640];
        snprintf(hint, sizeof hint, "set %s to a size such as 24G or 512M (a bare number counts "
                 "%s), or unset it", s->name, s->unit == 1 ? "bytes" : "MiB");
        return fail(m, hint, "%s='%.200s' is not a memory size", s->name, text);
    }
    *v = (long long)bytes;
    return 0;
}

/* The words of a choice as "a, b or c" (into out). */
static void words_list(char *out, size_t len, const char *choices)
{
    size_t n = 0, k = 0, words = 1;
    for (const char *p = choices; *p; p++) words += *p == '|';
    out[0] = 0;
    for (const char *p = choices; *p && n + 8 < len; p++) {
        if (*p != '|') { out[n++] = *p; continue; }
        k++;
        const char *sep = k + 1 == words ? " or " : ", ";
        n += (size_t)snprintf(out + n, len - n, "%s", sep);
    }
    out[n < len ? n : len - 1] = 0;
}

static int parse_choice(long long *v, const Setting *s, const char *text, Msg *m)
{
    size_t len = strlen(text);
    int i = 0;
    for (const char *w = s->choices;; i++) {
        const char *bar = strchr(w, '|');
        size_t wl = bar ? (size_t)(bar - w) : strlen(w);
        if (wl == len && !strncmp(w, text, len)) { *v = i; return 0; }
        if (!bar) break;
        w = bar + 1;
    }
    char words[256], hint[640];
    words_list(words, sizeof words, s->choices);
    snprintf(hint, sizeof hint, "set %s to %s (%s), or leave it unset for the default", s->name,
             words, s->doc);
    return fail(m, hint, "%s=%.200s is not one of %s", s->name, text, words);
}

int setting_parse(long long *value, SettingId id, const char *text, char *err, size_t errlen,
                  char *hint, size_t hintlen)
{
    const Setting *s = setting_info(id);
    Msg m = {err, hint, errlen, hintlen};
    if (errlen) err[0] = 0;
    if (hintlen) hint[0] = 0;
    if (!text || !*text) text = s->dflt;
    if (!text) {
        if (s->kind != SK_STRING && s->kind != SK_PATH) *value = s->kind == SK_SIZE ? 0 : -1;
        return 0;
    }
    switch (s->kind) {
    case SK_SWITCH: return parse_switch(value, s->name, s->doc, text, &m);
    case SK_INT: return parse_int(value, s, text, &m);
    case SK_SIZE: return parse_size(value, s, text, &m);
    case SK_CHOICE: return parse_choice(value, s, text, &m);
    case SK_STRING: case SK_PATH: return 0;
    }
    return 0;
}

static const char *kind_name(SettingKind k)
{
    static const char *names[] = {"a switch", "an integer", "a size", "a choice", "a string",
                                  "a path"};
    return names[k];
}

/* The environment's value of id, which must be of kind `want`; fatal when
 * it does not parse. */
static long long read_checked(SettingId id, SettingKind want)
{
    const Setting *s = setting_info(id);
    CT_ASSERT(s->kind == want, "settings: %s is %s, read as %s", s->name, kind_name(s->kind),
              kind_name(want));
    long long v = 0;
    char err[512], hint[1024];
    if (setting_parse(&v, id, getenv(s->name), err, sizeof err, hint, sizeof hint) < 0)
        ct_fatal_hint(hint, "%s", err);
    return v;
}

int setting_switch(SettingId id) { return (int)read_checked(id, SK_SWITCH); }
long long setting_int(SettingId id) { return read_checked(id, SK_INT); }
size_t setting_size(SettingId id) { return (size_t)read_checked(id, SK_SIZE); }
int setting_choice(SettingId id) { return (int)read_checked(id, SK_CHOICE); }

const char *setting_str(SettingId id)
{
    const Setting *s = setting_info(id);
    CT_ASSERT(s->kind == SK_STRING || s->kind == SK_PATH, "settings: %s is %s, read as a string",
              s->name, kind_name(s->kind));
    const char *t = setting_text(id);
    return t ? t : s->dflt;
}

/* ---- variables ctrain sets for other libraries ---- */

static const char *ours[SET_COUNT];   /* the value ctrain set (a literal), or NULL */

int setting_by_ctrain(SettingId id)
{
    const char *t = setting_text(id);
    return ours[id] && t && !strcmp(t, ours[id]);
}

void setting_default_env(SettingId id, const char *value)
{
    if (setting_by_ctrain(id)) return;
    if (setting_text(id)) {   /* the user's: checked, kept */
        long long v = 0;
        char err[512], hint[1024];
        if (setting_parse(&v, id, setting_text(id), err, sizeof err, hint, sizeof hint) < 0)
            ct_fatal_hint(hint, "%s", err);
        return;
    }
    setenv(setting_info(id)->name, value, 1);
    ours[id] = value;
}

/* ---- docs/env.md ---- */

static void md_value(FILE *out, const Setting *s)
{
    char words[256];
    switch (s->kind) {
    case SK_SWITCH: fprintf(out, "0 or 1"); break;
    case SK_INT: fprintf(out, "%lld .. %lld", s->lo, s->hi); break;
    case SK_SIZE:
        fprintf(out, "size: %s", s->unit == 1 ? "24G, 512M, bytes" : "MiB, or 512K, 2G");
        break;
    case SK_CHOICE:
        words_list(words, sizeof words, s->choices);
        fprintf(out, "%s", words);
        break;
    case SK_STRING: fprintf(out, "%s", s->form ? s->form : "text"); break;
    case SK_PATH: fprintf(out, "%s", s->form ? s->form : "path"); break;
    }
}

static void md_section(FILE *out, SettingAudience a, const char *title, const char *intro)
{
    fprintf(out, "## %s\n\n%s\n\n", title, intro);
    fprintf(out, "| Variable | Value | Default | What it does |\n|---|---|---|---|\n");
    for (int i = 0; i < SET_COUNT; i++) {
        const Setting *s = &table[i];
        if (s->audience != a) continue;
        fprintf(out, "| `%s` | ", s->name);
        md_value(out, s);
        if (s->dflt) fprintf(out, " | `%s` | %s |\n", s->dflt, s->doc);
        else fprintf(out, " | %s | %s |\n", s->unset, s->doc);
    }
    fprintf(out, "\n");
}

void settings_markdown(FILE *out)
{
    fprintf(out,
        "# Environment variables\n\n"
        "<!-- Generated from the table in engine/settings.c: "
        "build/ctrain env --markdown > docs/env.md (tests/test_settings.c checks it). -->\n\n"
        "What a run does is chosen with command-line flags (`ctrain train --help`, "
        "`ctrain bench --help`); the environment holds what lies outside one command. "
        "Every variable ctrain reads is declared once, in `engine/settings.c`, and read "
        "through one parser: unset and empty mean the default, and a value that does not "
        "parse stops ctrain with the variable's name and what to set. `ctrain env` shows "
        "the values this shell gives them.\n\n");
    md_section(out, SA_USER, "For users",
               "Logging, a memory limit, a GPU timeline, where a process sits in a multi-GPU "
               "run, and where libraries and scripts are.");
    md_section(out, SA_DEV, "Developer A/B switches",
               "Each keeps a measured alternative in reach for A/B runs; the default is what "
               "measured best. Training and benchmarking need none of them.");
    md_section(out, SA_INTERNAL, "Internal",
               "Set by ctrain for its own child processes; not for setting by hand.");
    md_section(out, SA_FOREIGN, "Other software's variables",
               "Read, or set, by ctrain; their own documentation is the reference.");
}
