/*
 * sync_udp.c - pcached's transport of perf_sync notices (docs/sync.md):
 * one UDP socket, opened by the master before it forks (a bad address is a
 * startup error) and used by the maintenance process only. It sends a
 * notice datagram (sync_wire.h) to every configured peer after a perf_sync
 * - the library calls srv_sync_push - and receives the peers' notices,
 * handing each well-formed one to pc_persist_sync_notice.
 *
 * Datagrams are outside bytes from anyone who can reach the port: a
 * malformed one is counted and logged (the first, then at powers of two, so
 * a flood cannot flood the log) and dropped. A well-formed one is not
 * trusted either: it only asks the library to look at the database, at most
 * once per sync_check_ms per collection (docs/sync.md "Guarantees"), so the
 * sender's address is not checked - on a network where it can be forged,
 * checking it would promise what it cannot keep.
 */
#include "pcached.h"
#include "sync_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int srv_sync_setup(srv *s, char *err, size_t errlen)
{
    s->sync_fd = -1;
    if (srv_sync_parse_peers(s->cfg.sync_peers, s->peers, SRV_MAX_PEERS, &s->npeers, err, errlen) !=
        0)
        return -1;
    /* The default must differ between nodes - a node never reloads its own
     * generations - so it is the host name and the RESP port, not the
     * (usually loopback) bind address. */
    if (s->cfg.node_id[0] != '\0') {
        snprintf(s->node_id, sizeof s->node_id, "%s", s->cfg.node_id);
    } else {
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
            snprintf(host, sizeof host, "pcached");
        for (char *c = host; *c != '\0'; c++)
            if (*c <= ' ' || *c > '~')
                *c = '_';
        snprintf(s->node_id, sizeof s->node_id, "%.50s:%u", host, s->cfg.port);
    }
    if (s->cfg.sync_port == 0 && s->npeers == 0)
        return 0;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "sync: socket: %s", strerror(errno));
        return -1;
    }
    if (s->cfg.sync_port != 0) {
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)s->cfg.sync_port);
        if (inet_pton(AF_INET, s->cfg.sync_bind, &sa.sin_addr) != 1) {
            snprintf(err, errlen, "sync_bind: '%s' is not an IPv4 address", s->cfg.sync_bind);
            close(fd);
            return -1;
        }
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            snprintf(err, errlen, "sync: UDP %s:%u: %s", s->cfg.sync_bind, s->cfg.sync_port,
                     strerror(errno));
            close(fd);
            return -1;
        }
    }
    s->sync_fd = fd;
    return 0;
}

/* pc_sync_push_fn: runs in the maintenance process after a perf_sync. */
int srv_sync_push(void *ctx, const char *coll, uint64_t gen, const char *source)
{
    srv *s = ctx;
    if (s->npeers == 0 || s->sync_fd < 0)
        return 0;
    sync_notice n;
    memset(&n, 0, sizeof n);
    snprintf(n.coll, sizeof n.coll, "%s", coll);
    snprintf(n.source, sizeof n.source, "%s", source);
    n.generation = gen;
    unsigned char buf[SYNC_WIRE_MAX];
    size_t len;
    if (sync_wire_encode(&n, buf, sizeof buf, &len) != 0) {
        srv_log(PC_LOG_ERR, "sync: cannot encode a notice for %s (a name outside printable ASCII)",
                coll);
        return PC_EINVAL;
    }
    int sent = 0;
    for (unsigned i = 0; i < s->npeers; i++) {
        ssize_t r = sendto(s->sync_fd, buf, len, 0, (const struct sockaddr *)&s->peers[i],
                           sizeof s->peers[i]);
        if (r == (ssize_t)len) {
            sent++;
            continue;
        }
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &s->peers[i].sin_addr, a, sizeof a);
        srv_log(PC_LOG_WARN, "sync: notice to %s:%u not sent: %s", a, ntohs(s->peers[i].sin_port),
                r < 0 ? strerror(errno) : "short send");
    }
    return sent > 0 ? sent : PC_ESYS;
}

/* Drains the socket (maintenance process). */
void srv_sync_receive(srv *s)
{
    static uint64_t bad, rx;
    for (int budget = 0; budget < 256; budget++) {
        unsigned char buf[SYNC_WIRE_MAX + 1]; /* + 1: an oversized datagram shows as such */
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t r = recvfrom(s->sync_fd, buf, sizeof buf, MSG_TRUNC, (struct sockaddr *)&from, &fl);
        if (r < 0)
            return; /* EAGAIN: drained; anything else: try again on the next wake-up */
        rx++;
        char a[INET_ADDRSTRLEN] = "?";
        if (fl >= sizeof from)
            inet_ntop(AF_INET, &from.sin_addr, a, sizeof a);
        sync_notice n;
        /* MSG_TRUNC: r is the datagram's real size, possibly above the buffer */
        int v =
            (size_t)r > SYNC_WIRE_MAX ? SYNC_WIRE_LENGTH_BAD : sync_wire_decode(buf, (size_t)r, &n);
        if (v != SYNC_WIRE_OK) {
            bad++;
            if ((bad & (bad - 1)) == 0)
                srv_log(PC_LOG_WARN,
                        "sync: dropped a datagram of %zd bytes from %s:%u: %s (%llu dropped of "
                        "%llu received)",
                        r, a, ntohs(from.sin_port), sync_wire_strerror(v), (unsigned long long)bad,
                        (unsigned long long)rx);
            continue;
        }
        int rc = s->persist != NULL ? pc_persist_sync_notice(s->persist, n.coll, strlen(n.coll),
                                                             n.generation, n.source)
                                    : PC_ESTORE;
        if (rc != 0) {
            bad++;
            if ((bad & (bad - 1)) == 0)
                srv_log(PC_LOG_WARN, "sync: notice from %s:%u (node %s) for %s refused: %s", a,
                        ntohs(from.sin_port), n.source, n.coll, pc_store_strerror(rc));
            continue;
        }
        srv_log(PC_LOG_DEBUG, "sync: notice from %s:%u: %s generation %llu by node %s", a,
                ntohs(from.sin_port), n.coll, (unsigned long long)n.generation, n.source);
    }
}
