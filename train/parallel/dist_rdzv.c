/* dist_rdzv.c — the TCP rendezvous (protocol in dist_rdzv.h): blocking
 * sockets driven by poll() against one deadline per call. */
#include "dist_rdzv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RDZV_MAGIC "ctrain-rdzv-v1"
#define RDZV_MAGIC_LEN 16

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int ms_left(double deadline)
{
    double left = deadline - now_s();
    return left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
}

/* Wait until fd is ready for events; 0 ready, -1 deadline passed or error. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        int ms = ms_left(deadline);
        if (ms == 0) return -1;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, ms);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return -1;
    }
}

/* Send or receive exactly n bytes before the deadline; 0, or -1. */
static int xfer(int fd, void *buf, size_t n, int sending, double deadline)
{
    char *p = (char *)buf;
    while (n) {
        if (wait_fd(fd, sending ? POLLOUT : POLLIN, deadline)) return -1;
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void put32(unsigned char *b, int32_t v)
{
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(u >> (8 * i));
}

static int32_t get32(const unsigned char *b)
{
    uint32_t u = 0;
    for (int i = 0; i < 4; i++) u |= (uint32_t)b[i] << (8 * i);
    return (int32_t)u;
}

int rdzv_listen(const char *addr, int port, int *port_out, char *err, size_t errlen)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a TCP socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        snprintf(err, errlen, "'%s' is not an IPv4 address to listen on", addr);
        close(fd);
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0) {
        snprintf(err, errlen, "rank 0 cannot listen on %s:%d: %s", addr, port, strerror(errno));
        close(fd);
        return -1;
    }
    socklen_t len = sizeof sa;
    if (port_out) {
        if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
            snprintf(err, errlen, "getsockname: %s", strerror(errno));
            close(fd);
            return -1;
        }
        *port_out = ntohs(sa.sin_port);
    }
    return fd;
}

int rdzv_serve(int listen_fd, int world, const void *blob, size_t len, double timeout_s,
               char *err, size_t errlen)
{
    double deadline = now_s() + timeout_s;
    char *joined = (char *)calloc((size_t)world, 1);
    if (!joined) { snprintf(err, errlen, "out of host memory"); return -1; }
    int have = 0, rc = 0;
    while (have < world - 1) {
        if (wait_fd(listen_fd, POLLIN, deadline)) {
            char missing[256] = "";
            size_t n = 0;
            for (int r = 1; r < world && n + 16 < sizeof missing; r++)
                if (!joined[r]) n += (size_t)snprintf(missing + n, sizeof missing - n, "%s%d",
                                                      n ? ", " : "", r);
            snprintf(err, errlen, "rendezvous: %d of %d ranks joined rank 0 within %.0f s "
                     "(missing: rank %s)", have + 1, world, timeout_s, missing);
            rc = -1;
            break;
        }
        int c = accept(listen_fd, NULL, NULL);
        if (c < 0) continue;
        unsigned char h[RDZV_MAGIC_LEN + 12], st[4];
        /* a peer gets a few seconds to say who it is, within the deadline */
        double peer_deadline = now_s() + 5.0 < deadline ? now_s() + 5.0 : deadline;
        if (xfer(c, h, sizeof h, 0, peer_deadline) || memcmp(h, RDZV_MAGIC, sizeof RDZV_MAGIC)) {
            close(c);   /* not one of ours (a port scanner, a stale client): ignore it */
            continue;
        }
        int32_t r = get32(h + RDZV_MAGIC_LEN), w = get32(h + RDZV_MAGIC_LEN + 4);
        int32_t l = get32(h + RDZV_MAGIC_LEN + 8);
        DistRdzvStatus s = w != world ? RDZV_BAD_WORLD : (r < 1 || r >= world) ? RDZV_BAD_RANK
                         : joined[r] ? RDZV_DUP_RANK : (size_t)l != len ? RDZV_BAD_LEN : RDZV_OK;
        put32(st, (int32_t)s);
        int sent = xfer(c, st, 4, 1, peer_deadline) == 0 &&
                   (s != RDZV_OK || xfer(c, (void *)blob, len, 1, peer_deadline) == 0);
        close(c);
        if (s != RDZV_OK) {
            if (s == RDZV_BAD_WORLD)
                snprintf(err, errlen, "rendezvous: rank %d says the world has %d ranks, rank 0 "
                         "has %d", r, w, world);
            else if (s == RDZV_DUP_RANK)
                snprintf(err, errlen, "rendezvous: two processes both claim rank %d", r);
            else if (s == RDZV_BAD_RANK)
                snprintf(err, errlen, "rendezvous: a process claims rank %d of %d", r, world);
            else
                snprintf(err, errlen, "rendezvous: rank %d is a different ctrain build "
                         "(blob of %d bytes, rank 0 has %zu)", r, l, len);
            rc = -1;
            break;
        }
        if (sent) {
            joined[r] = 1;
            have++;
        }
    }
    free(joined);
    return rc;
}

static const char *status_text(int32_t s)
{
    switch (s) {
    case RDZV_BAD_WORLD: return "the world sizes differ";
    case RDZV_BAD_RANK: return "this rank is out of range";
    case RDZV_DUP_RANK: return "another process already has this rank";
    case RDZV_BAD_LEN: return "the ctrain builds differ";
    default: return "unknown refusal";
    }
}

int rdzv_fetch(const char *addr, int port, int rank, int world, void *blob, size_t len,
               double timeout_s, char *err, size_t errlen)
{
    double deadline = now_s() + timeout_s;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(addr, ports, &hints, &ai);
    if (g != 0) {
        snprintf(err, errlen, "rendezvous: cannot resolve rank 0's host '%s': %s", addr,
                 gai_strerror(g));
        return -1;
    }
    int last_errno = 0;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(err, errlen, "cannot create a TCP socket: %s", strerror(errno));
            freeaddrinfo(ai);
            return -1;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            unsigned char h[RDZV_MAGIC_LEN + 12], st[4];
            memset(h, 0, sizeof h);
            memcpy(h, RDZV_MAGIC, sizeof RDZV_MAGIC);
            put32(h + RDZV_MAGIC_LEN, rank);
            put32(h + RDZV_MAGIC_LEN + 4, world);
            put32(h + RDZV_MAGIC_LEN + 8, (int32_t)len);
            int ok = xfer(fd, h, sizeof h, 1, deadline) == 0 && xfer(fd, st, 4, 0, deadline) == 0;
            int32_t s = ok ? get32(st) : -1;
            if (ok && s == RDZV_OK) ok = xfer(fd, blob, len, 0, deadline) == 0;
            close(fd);
            freeaddrinfo(ai);
            if (ok && s == RDZV_OK) return 0;
            if (ok || s > 0)
                snprintf(err, errlen, "rendezvous: rank 0 at %s:%d refused rank %d of %d: %s",
                         addr, port, rank, world, status_text(s));
            else
                snprintf(err, errlen, "rendezvous: rank 0 at %s:%d closed the connection before "
                         "sending the NCCL id", addr, port);
            return -1;
        }
        last_errno = errno;
        close(fd);
        if (ms_left(deadline) == 0) break;
        struct timespec ts = {0, 200 * 1000 * 1000};   /* rank 0 may not listen yet */
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(ai);
    snprintf(err, errlen, "rendezvous: rank %d could not reach rank 0 at %s:%d within %.0f s "
             "(%s)", rank, addr, port, timeout_s, strerror(last_errno));
    return -1;
}
