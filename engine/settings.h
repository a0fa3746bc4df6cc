/* settings.h — the settings table: every environment variable ctrain reads,
 * declared once (engine/settings.c) with its kind, default, audience and a
 * one-line doc, and read through one parser.
 *
 * What a run should do is a command-line flag. The environment holds what
 * lies outside one command, for four audiences:
 *   SA_USER      logging, a memory limit, the timeline, the rank and
 *                rendezvous of a multi-GPU run, library and script paths
 *   SA_DEV       developers' A/B switches: a measured alternative kept in
 *                reach; the default is what measured best
 *   SA_INTERNAL  set by ctrain for its own child processes
 *   SA_FOREIGN   other software's variables that ctrain reads or sets
 *                (NCCL, Open MPI, the system), declared so the list is whole
 * docs/env.md is generated from the table (`ctrain env --markdown`), and
 * tests/test_settings.c fails when the two differ.
 *
 * Reading. Unset and empty mean the default. A value that does not parse
 * is fatal, naming the variable and what to set, so a typo never falls
 * back silently. The accessors read the environment on every call (tests
 * change variables between calls); a caller on a hot path keeps a copy.
 *
 *   kind       accepted text                         accessor: returns
 *   SK_SWITCH  0 or 1                                setting_switch: 0 / 1
 *   SK_INT     a whole number in [lo, hi]            setting_int: the number
 *   SK_SIZE    a number > 0, then K, M or G (and B)   setting_size: bytes
 *              optionally; a bare number counts `unit` bytes (1, or 1 MiB
 *              for the *_MB variables)
 *   SK_CHOICE  one of the words in `choices`         setting_choice: its index
 *   SK_STRING  any text                              setting_str
 *   SK_PATH    a file or folder                      setting_str
 * A variable with no default (dflt NULL) gives, while unset, -1 (switch,
 * int, choice), 0 (size) or NULL (str): the caller decides ("auto"), and
 * the table's `unset` text says what it decides.
 */
#ifndef CTRAIN_ENGINE_SETTINGS_H
#define CTRAIN_ENGINE_SETTINGS_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One id per variable: the name without its CTRAIN_ prefix (foreign ones
 * whole), so a misspelt setting is a compile error. The order is the
 * order of docs/env.md within each audience. */
typedef enum SettingId {
    /* users */
    SET_LOG, SET_MEM_LIMIT, SET_TIMELINE,
    SET_RANK, SET_WORLD_SIZE, SET_LOCAL_RANK, SET_MASTER_ADDR, SET_MASTER_PORT,
    SET_NVML_LIB, SET_CUPTI_LIB, SET_NVJPEG_LIB, SET_SCRIPTS,
    /* developers' A/B switches */
    SET_LINEAR_EPILOGUE, SET_LINEAR_BGRAD, SET_LINEAR_ACT_BGRAD, SET_LOGITS_PAD, SET_LN_KERNELS,
    SET_ADD_NORM,
    SET_FP8_CAST_VEC, SET_FP8_FAST_ACCUM, SET_FP8_WEIGHT_CODES, SET_FP8_DZ_CODES,
    SET_FP8_NORM_CODES, SET_LN_BWD_CHUNKS,
    SET_JPEG_PLANES, SET_JPEG_DECODERS,
    SET_JPEG_PRIORITY, SET_BN, SET_BN_PAIR, SET_CONV_BN, SET_CONV_BN_1X1,
    SET_ATTN, SET_ATTN_SM90_DQ, SET_ATTN_SAVE_MASK, SET_ADD_NORM_BITS, SET_QKV_PROJ,
    SET_QKV_PROJ_FP8,
    SET_CONV_SEARCH_WS_MB, SET_CONV_WS, SET_CONV_NONDETERMINISTIC, SET_CONV_ENGINES, SET_CONV_PAD,
    SET_CONV_STEM,
    SET_CONV_GEMM,
    SET_GEMM_SEARCH, SET_PLAN_CACHE,
    SET_GRAPH_NODE_PRIORITY, SET_GRAD_FRESH,
    SET_OVERLAP_UPDATE, SET_OVERLAP_BUCKET_MB,
    SET_DIST_GRAPH, SET_DIST_SHARD, SET_DIST_SHARD_WINDOW, SET_DIST_SPARSE_EMB, SET_DIST_TAPER,
    SET_DIST_TRACE,
    /* internal */
    SET_RDZV_FD, SET_BENCH_FD, SET_BENCH_CONFIG,
    /* other software's */
    SET_OMPI_COMM_WORLD_RANK, SET_OMPI_COMM_WORLD_SIZE, SET_OMPI_COMM_WORLD_LOCAL_RANK,
    SET_OMPI_COMM_WORLD_LOCAL_SIZE, SET_TORCH_RANK, SET_TORCH_WORLD_SIZE, SET_TORCH_LOCAL_RANK,
    SET_TORCH_MASTER_ADDR, SET_TORCH_MASTER_PORT, SET_SLURM_PROCID, SET_SLURM_STEP_ID,
    SET_SLURM_STEP_NUM_TASKS, SET_SLURM_NTASKS, SET_SLURM_LOCALID, SET_SLURM_STEP_NUM_NODES,
    SET_SLURM_NNODES, SET_SLURM_STEP_NODELIST, SET_SLURM_JOB_NODELIST,
    SET_NCCL_CTA_POLICY, SET_NCCL_PROTO, SET_NCCL_ALGO, SET_NCCL_MAX_CTAS,
    SET_CUDA_DEVICE_MAX_CONNECTIONS,
    SET_TMPDIR, SET_XDG_CACHE_HOME, SET_HOME,
    SET_COUNT
} SettingId;

typedef enum { SK_SWITCH, SK_INT, SK_SIZE, SK_CHOICE, SK_STRING, SK_PATH } SettingKind;
typedef enum { SA_USER, SA_DEV, SA_INTERNAL, SA_FOREIGN, SA_COUNT } SettingAudience;

typedef struct Setting {
    const char *name;         /* the variable, e.g. "CTRAIN_LOG" */
    SettingKind kind;
    SettingAudience audience;
    const char *dflt;         /* the default as it would be written; NULL: none */
    const char *unset;        /* with no default: what an unset variable means (docs) */
    long long lo, hi;         /* SK_INT: the range */
    size_t unit;              /* SK_SIZE: the bytes a bare number counts */
    const char *choices;      /* SK_CHOICE: the words, '|' between them */
    const char *form;         /* SK_STRING, SK_PATH: the value's form (docs), or NULL */
    const char *doc;          /* one line; for a switch, what 1 does */
} Setting;

const Setting *setting_info(SettingId id);
const char *setting_name(SettingId id);

/* The variable's text, NULL when unset or empty; not parsed (for echoing
 * what a run was told, or testing whether a variable is set at all). */
const char *setting_text(SettingId id);

/* A foreign variable another library reads (CUDA's, NCCL's) set to `value`
 * (a literal) when unset or empty, remembered as ctrain's choice rather
 * than the user's; a value the user gave is parsed (fatal when bad) and
 * kept. Before any thread starts. */
void setting_default_env(SettingId id, const char *value);
/* 1: the variable holds what setting_default_env put there. */
int setting_by_ctrain(SettingId id);

/* Parses text (NULL or "" : the default) as id's kind without exiting:
 * 0 with *value set (switch 0/1, int, size in bytes, choice index; -1, or
 * 0 for a size, when there is no default; strings leave it alone), or -1
 * with what is wrong in err and what to set in hint. The accessors below
 * are this on the environment, fatal on -1. */
int setting_parse(long long *value, SettingId id, const char *text, char *err, size_t errlen,
                  char *hint, size_t hintlen);

int setting_switch(SettingId id);
long long setting_int(SettingId id);
size_t setting_size(SettingId id);
int setting_choice(SettingId id);
const char *setting_str(SettingId id);   /* the text, or the default (NULL without one) */

/* docs/env.md: the table as markdown, users' variables first. */
void settings_markdown(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
