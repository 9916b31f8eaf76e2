/*
 * listen.c - the RESP listeners: every address of `bind` (IPv4 and IPv6)
 * and the unix socket `unixsocket`, opened by the master before the first
 * fork.
 *
 * TCP: per worker slot, one SO_REUSEPORT socket per address, so the kernel
 * spreads the connections of each address over the workers and a worker
 * that dies leaves its accept queues to its replacement (the master keeps
 * them open). Before a group is bound, instance.c's probe binds each
 * address once without SO_REUSEPORT, so no second instance joins it. An
 * IPv6 socket is IPV6_V6ONLY (as Redis), so "0.0.0.0 ::" are two sockets
 * that do not collide. With port 0 the first address's kernel-chosen port
 * is used for every other address.
 *
 * `bind` is Redis 7's: addresses separated by blanks (commas too), "*" for
 * 0.0.0.0, "::*" for ::, and a leading '-' for an address the machine may
 * lack (no IPv6 loopback, an interface that is down): its EADDRNOTAVAIL or
 * EAFNOSUPPORT is logged and skipped instead of refusing to start. When no
 * address at all could be bound, the start fails.
 *
 * Everything is bound here, before the store is opened or loaded, and
 * listens only once it is loaded (srv_listen_start): a start that would
 * fail on a busy port fails before it creates or loads anything, and a
 * client that connects while the store loads is refused, not left waiting.
 *
 * Unix socket: one listening socket, non-blocking, inherited by every
 * worker, each of which polls it with EPOLLEXCLUSIVE (one worker woken per
 * connection, no thundering herd; the others' accept4 gets EAGAIN when two
 * race) and balances its share (worker.c, unix_balance). One socket instead of one per worker
 * because a path holds a single listener; the exclusivity rules are instance.c's (a live socket
 * refuses the start, a stale one is removed, unlinked at exit only if it
 * is still ours). Clients on it AUTH as on TCP: requirepass is not
 * skipped (Redis does not skip it either).
 */
#include "pcached.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void set_port(struct sockaddr_storage *sa, unsigned port)
{
    if (sa->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)(void *)sa)->sin_port = htons((uint16_t)port);
}

static unsigned get_port(const struct sockaddr_storage *sa)
{
    if (sa->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
    return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
}

/* The errors that make an optional address absent rather than wrong. */
static int absent_errno(int e)
{
    return e == EADDRNOTAVAIL || e == EAFNOSUPPORT || e == EPROTONOSUPPORT;
}

/* Binds one SO_REUSEPORT socket of a's group (listen() comes later:
 * srv_listen_start); -1 with errno. */
static int open_tcp(const srv_bind_addr *a)
{
    int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        (a->sa.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(fd, (const struct sockaddr *)&a->sa, a->len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int srv_resp_listen(srv *s)
{
    for (unsigned i = 0; i < SRV_MAX_WORKERS; i++)
        for (unsigned j = 0; j < SRV_MAX_BINDS; j++)
            s->listen_fds[i][j] = -1;
    s->resp_unix_fd = -1;
    s->nbinds = 0;
    srv_bind_addr binds[SRV_MAX_BINDS];
    unsigned n, bound = 0;
    char err[256];
    if (srv_bind_parse(s->cfg.bind, binds, SRV_MAX_BINDS, &n, err, sizeof err) != 0) {
        srv_log(PC_LOG_ERR, "%s", err);
        return -1;
    }
    s->nbinds = n;
    unsigned port = s->cfg.port;
    for (unsigned j = 0; j < n; j++) {
        srv_bind_addr *a = &binds[j];
        if (a->optional) { /* absent here: skipped before the probe can call it an error */
            int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            int e = fd < 0 ? errno : 0;
            if (fd >= 0 && bind(fd, (const struct sockaddr *)&a->sa, a->len) != 0)
                e = errno;
            if (fd >= 0)
                close(fd);
            if (absent_errno(e)) {
                srv_log(PC_LOG_WARN, "bind: optional address %s skipped: %s", a->text, strerror(e));
                continue;
            }
        }
        set_port(&a->sa, port);
        /* never join another instance's SO_REUSEPORT group */
        if (srv_port_probe((const struct sockaddr *)&a->sa, a->len) != 0)
            return -1;
        for (unsigned i = 0; i < s->cfg.workers; i++) {
            int fd = open_tcp(a);
            if (fd < 0) {
                int e = errno;
                if (i == 0 && a->optional && absent_errno(e)) {
                    srv_log(PC_LOG_WARN, "bind: optional address %s skipped: %s", a->text,
                            strerror(e));
                    break;
                }
                srv_log(PC_LOG_ERR, "listen on %s port %u: %s", a->text, port, strerror(e));
                return -1;
            }
            if (port == 0) { /* the kernel's choice, shared by every slot and address */
                struct sockaddr_storage got;
                socklen_t len = sizeof got;
                if (getsockname(fd, (struct sockaddr *)&got, &len) != 0) {
                    srv_log(PC_LOG_ERR, "getsockname: %m");
                    close(fd);
                    return -1;
                }
                port = get_port(&got);
                set_port(&a->sa, port);
            }
            s->listen_fds[i][j] = fd;
        }
        bound += s->listen_fds[0][j] >= 0;
    }
    if (bound == 0) {
        srv_log(PC_LOG_ERR, "bind: none of '%s' could be bound", s->cfg.bind);
        return -1;
    }
    s->bound_port = port;
    if (s->cfg.unixsocket[0] != '\0') {
        s->resp_unix_fd = srv_unix_bind("unixsocket", s->cfg.unixsocket, s->cfg.unixsocketperm, 1,
                                        &s->resp_unix_dev, &s->resp_unix_ino);
        if (s->resp_unix_fd < 0)
            return -1;
    }
    return 0;
}

/* listen() on one bound socket; 0, or -1 logged. */
static int start_one(int fd, const char *what)
{
    if (fd < 0 || listen(fd, 511) == 0)
        return 0;
    srv_log(PC_LOG_ERR, "listen (%s): %m", what);
    return -1;
}

int srv_listen_start(srv *s)
{
    for (unsigned i = 0; i < s->cfg.workers; i++)
        for (unsigned j = 0; j < s->nbinds; j++)
            if (start_one(s->listen_fds[i][j], "RESP") != 0)
                return -1;
    if (start_one(s->resp_unix_fd, "RESP unixsocket") != 0 ||
        start_one(s->http_fd, "JSON-RPC http_port") != 0 ||
        start_one(s->unix_fd, "JSON-RPC unix_socket") != 0 ||
        start_one(s->metrics_fd, "metrics_port") != 0)
        return -1;
    return 0;
}

void srv_resp_close(srv *s, int keep)
{
    for (unsigned i = 0; i < SRV_MAX_WORKERS; i++) {
        if ((int)i == keep)
            continue;
        for (unsigned j = 0; j < SRV_MAX_BINDS; j++)
            if (s->listen_fds[i][j] >= 0) {
                close(s->listen_fds[i][j]);
                s->listen_fds[i][j] = -1;
            }
    }
    if (keep < 0 && s->resp_unix_fd >= 0) {
        close(s->resp_unix_fd);
        s->resp_unix_fd = -1;
    }
}

void srv_resp_unlink(const srv *s)
{
    if (s->cfg.unixsocket[0] != '\0' && s->resp_unix_ino != 0)
        srv_unix_path_unlink(s->cfg.unixsocket, s->resp_unix_dev, s->resp_unix_ino);
}

void srv_conn_addr(const srv *s, int fd, int local, char *buf, size_t cap)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    int rc = local ? getsockname(fd, (struct sockaddr *)&sa, &len)
                   : getpeername(fd, (struct sockaddr *)&sa, &len);
    char ip[INET6_ADDRSTRLEN];
    if (rc != 0) {
        snprintf(buf, cap, "?:0");
    } else if (sa.ss_family == AF_UNIX) {
        snprintf(buf, cap, "%s:0", s->cfg.unixsocket); /* as Redis: the server's path */
    } else if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)(const void *)&sa;
        inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof ip);
        snprintf(buf, cap, "[%s]:%u", ip, ntohs(a6->sin6_port));
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)(const void *)&sa;
        inet_ntop(AF_INET, &a4->sin_addr, ip, sizeof ip);
        snprintf(buf, cap, "%s:%u", ip, ntohs(a4->sin_port));
    }
}

void srv_resp_describe(const srv *s, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (unsigned j = 0; j < s->nbinds && off < cap; j++) {
        if (s->listen_fds[0][j] < 0)
            continue;
        char one[160];
        srv_conn_addr(s, s->listen_fds[0][j], 1, one, sizeof one);
        int n = snprintf(buf + off, cap - off, "%s%s", off ? ", " : "", one);
        off += n > 0 ? (size_t)n : 0;
    }
    if (s->resp_unix_fd >= 0 && off < cap)
        snprintf(buf + off, cap - off, "%sunix socket %s", off ? ", " : "", s->cfg.unixsocket);
}
