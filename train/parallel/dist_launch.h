/* dist_launch.h — `--gpus N` on one machine: start N copies of a command
 * line, one per GPU, and watch them.
 *
 * Process i gets CTRAIN_RANK=i, CTRAIN_LOCAL_RANK=i, CTRAIN_WORLD_SIZE=N,
 * CTRAIN_MASTER_ADDR=127.0.0.1 and CTRAIN_MASTER_PORT=<a free port>; rank 0
 * also gets the already listening rendezvous socket (CTRAIN_RDZV_FD), so no
 * other program can take the port in between. Each child dies with the
 * launcher (PR_SET_PDEATHSIG).
 *
 * Watching: the launcher waits for its children. When one exits non-zero or
 * is killed by a signal, the launcher prints which rank and why, sends the
 * others SIGTERM, and SIGKILL after grace_s; its own exit status is then 1.
 * SIGINT or SIGTERM sent to the launcher alone is passed on to the ranks.
 * The launcher itself never touches CUDA or NCCL.
 */
#ifndef CTRAIN_TRAIN_DIST_LAUNCH_H
#define CTRAIN_TRAIN_DIST_LAUNCH_H

/* argv[0] is the program to run (a path: "/proc/self/exe" re-runs this
 * one), NULL-terminated. Returns 0 when every rank exited 0, else 1.
 * `what` names the job in messages ("ctrain train"). */
int dist_spawn(char *const argv[], int n, double grace_s, const char *what);

#endif
