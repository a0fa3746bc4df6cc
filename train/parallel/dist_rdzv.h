/* dist_rdzv.h — the rendezvous: rank 0 hands a small blob (the NCCL
 * unique id, 128 bytes) to every other rank over TCP, before NCCL itself can
 * talk. One exchange per run; every wait has a deadline and every failure a
 * message that says which side and what to check.
 *
 * Protocol (all integers little-endian int32):
 *   rank r > 0 -> rank 0:  "ctrain-rdzv-v1\0\0" (16 bytes), r, world, blob length
 *   rank 0 -> rank r:      status (0: ok, else a DistRdzvStatus), then the blob when ok
 * Rank 0 refuses a peer whose world size or blob length differ from its
 * own (two runs sharing a port, or mixed command lines) or whose rank is out
 * of range or already joined, and fails: the run cannot go on.
 * Ranks > 0 retry connecting until the deadline, so the order in which the
 * processes start does not matter.
 */
#ifndef CTRAIN_TRAIN_DIST_RDZV_H
#define CTRAIN_TRAIN_DIST_RDZV_H

#include <stddef.h>

typedef enum {
    RDZV_OK = 0,
    RDZV_BAD_WORLD = 1,
    RDZV_BAD_RANK = 2,
    RDZV_DUP_RANK = 3,
    RDZV_BAD_LEN = 4,
} DistRdzvStatus;

/* A TCP socket listening on addr ("0.0.0.0": every interface) at port (0:
 * a free one, written to *port_out). Returns the fd, or -1 with a message. */
int rdzv_listen(const char *addr, int port, int *port_out, char *err, size_t errlen);
/* Rank 0: accept world - 1 ranks on listen_fd and send each the blob;
 * returns 0 when all have it, -1 (message in err) on a refusal or when the
 * deadline passes first (the message counts who joined). Closes nothing. */
int rdzv_serve(int listen_fd, int world, const void *blob, size_t len, double timeout_s,
               char *err, size_t errlen);
/* Rank r > 0: connect to addr:port (retrying until timeout_s) and receive
 * the blob. Returns 0, or -1 with a message. */
int rdzv_fetch(const char *addr, int port, int rank, int world, void *blob, size_t len,
               double timeout_s, char *err, size_t errlen);

#endif
