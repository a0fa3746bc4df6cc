/* dist_env.h — where this process sits in a data-parallel run: the
 * multi-GPU options, and the rank, world size and rendezvous address read
 * from the environment (the launchers set them; train/parallel/dist.h uses them).
 *
 * Three ways to start ranks, all reading the same variables in the end:
 *   ctrain train --gpus N ...   this machine: the launcher (dist_launch.h)
 *                               starts N copies with the CTRAIN_* variables
 *   CTRAIN_* by hand or a job scheduler, one process per GPU, any machines:
 *     CTRAIN_RANK          0 .. CTRAIN_WORLD_SIZE - 1            (required)
 *     CTRAIN_WORLD_SIZE    number of processes, all machines      (required)
 *     CTRAIN_LOCAL_RANK    the GPU on this machine (default: CTRAIN_RANK)
 *     CTRAIN_MASTER_ADDR   host of rank 0 (default 127.0.0.1)
 *     CTRAIN_MASTER_PORT   TCP port rank 0 listens on for the rendezvous
 *                          (default 29500)
 *   torchrun: RANK, WORLD_SIZE, LOCAL_RANK give the first three and
 *     MASTER_ADDR rank 0's host; torchrun's own store already listens on
 *     MASTER_PORT, so rank 0's rendezvous takes MASTER_PORT + 1 (unless
 *     CTRAIN_MASTER_PORT says otherwise):
 *       torchrun --nproc-per-node 8 --nnodes 2 --node-rank R
 *                --master-addr host0 $(which ctrain) train ...
 *   mpirun (Open MPI): OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK give the
 *     first three; CTRAIN_MASTER_ADDR / _PORT still name rank 0's host
 *     (mpirun -x CTRAIN_MASTER_ADDR=host0 ...); on one machine
 *     (OMPI_COMM_WORLD_LOCAL_SIZE = SIZE) 127.0.0.1 is the default.
 *   srun (SLURM): SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS),
 *     SLURM_LOCALID, read only inside a job step (SLURM_STEP_ID set: a
 *     batch script's own SLURM_PROCID = 0 is not a rank); rank 0's host is
 *     the step's first node (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST)
 *     when the step spans several nodes:
 *       srun --nodes 2 --ntasks-per-node 8 --gpus-per-node 8 ctrain train ...
 *     (every task sees the node's GPUs and takes GPU SLURM_LOCALID; with
 *     --gpus-per-task 1 each task would see one GPU and ranks past the
 *     first of a node would find no GPU of their index.)
 * When several are set, the first in this order wins: CTRAIN_*, torchrun,
 * Open MPI, SLURM (mpirun inside a SLURM job sees both; its own variables
 * are per process). CTRAIN_RDZV_FD is internal: the launcher hands rank 0
 * an already listening socket.
 */
#ifndef CTRAIN_TRAIN_DIST_ENV_H
#define CTRAIN_TRAIN_DIST_ENV_H

#include <stddef.h>
#include "engine/dtype.h"

#define DIST_DEFAULT_PORT 29500
#define DIST_DEFAULT_BUCKET_MB (-1.0f)   /* auto: dist_bucket_mb_auto (dist_bucket.h) */
#define DIST_DEFAULT_TIMEOUT_S 60

/* The command-line side (ctrain train / bench). */
typedef struct DistOptions {
    int gpus;            /* --gpus N: start N processes on this machine (0: not given) */
    float bucket_mb;     /* --bucket-mb: gradient all-reduce bucket size (0: one, after
                            backward; < 0: auto, from the gradients' size) */
    int sync_bn;         /* --sync-bn: batch norm statistics over all GPUs */
    int timeout_s;       /* --dist-timeout: a rank stops when no progress for this long */
    DType grad_reduce;   /* --grad-reduce: the gradient all-reduce's type, DT_F32 or DT_BF16
                            (bf16: a shadow copy goes over NCCL, train/parallel/dist.h) */
} DistOptions;

void dist_options_default(DistOptions *o);
/* "f32" -> DT_F32, "bf16" -> DT_BF16 (the values of --grad-reduce); -1 otherwise. */
int dist_grad_reduce_parse(const char *s);

typedef enum {
    DIST_ENV_NONE = 0,
    DIST_ENV_CTRAIN,
    DIST_ENV_TORCHRUN,
    DIST_ENV_OMPI,
    DIST_ENV_SLURM
} DistEnvSource;

typedef struct DistEnv {
    DistEnvSource source;
    int rank, world, local_rank;
    char master_addr[256];
    int master_port;
    int rdzv_fd;         /* -1, or the listening socket the launcher gave rank 0 */
} DistEnv;

/* Looks up one variable (NULL when unset): getenv, or a table in tests. */
typedef const char *(*DistGetenv)(const char *name, void *user);

/* Returns 0 when no rank variables are set (one process), 1 with *e filled,
 * -1 with what is wrong in err and what to do in hint. */
int dist_env_parse(DistEnv *e, DistGetenv get, void *user, char *err, size_t errlen, char *hint,
                   size_t hintlen);
/* The same over the process environment; a bad value is fatal. */
int dist_env_read(DistEnv *e);
const char *dist_env_source_name(DistEnvSource s);
/* The first host of a SLURM node list ("node[01-04,07],gpu2" -> "node01")
 * into out; 0 when the list is empty or not understood. */
int dist_first_host(const char *list, char *out, size_t len);

#endif
