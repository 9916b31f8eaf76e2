/*
 * instance.c - one pcached per pidfile, per port and per socket.
 *
 * The store is locked by the persistence layer (pc_persist_open). What is
 * the server's own:
 *  - the pidfile: flock(LOCK_EX) on it before anything else, held for the
 *    life of the master and its children (inherited descriptor); a second
 *    instance reads the pid in it and refuses;
 *  - the RESP port: the workers' listeners join one SO_REUSEPORT group, and
 *    the kernel would let a second process of the same user join it and
 *    take half the connections. So before the master binds its group it
 *    binds the port once WITHOUT SO_REUSEPORT: that bind fails while any
 *    socket holds the port, the other instance's group included. The probe
 *    is closed just before the group is bound; two instances started in the
 *    same microsecond could both pass it, a window no operator's start or
 *    restart comes near, and every later start fails the probe;
 *  - the unix sockets (RESP's unixsocket, JSON-RPC's unix_socket): a path
 *    that a live server answers on is refused (connect() succeeds;
 *    SO_PEERCRED names the pid), a stale one is replaced, and at exit the
 *    path is unlinked only if it is still the socket this instance bound
 *    (same device and inode).
 */
#include "pcached.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int srv_pidfile_lock(srv *s)
{
    s->pid_fd = -1;
    if (s->cfg.pidfile[0] == '\0')
        return 0;
    int fd = open(s->cfg.pidfile, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        char hint[700] = "";
        if (srv_perm_errno(e))
            srv_perm_hint("pidfile", s->cfg.pidfile, hint, sizeof hint);
        srv_log(PC_LOG_ERR, "pidfile %s: %s%s%s", s->cfg.pidfile, strerror(e), hint[0] ? "; " : "",
                hint);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\r\n")] = '\0';
        srv_log(PC_LOG_ERR, "pidfile %s: another pcached is running (pid %s); not starting",
                s->cfg.pidfile, buf[0] ? buf : "unknown");
        close(fd);
        return -1;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        srv_log(PC_LOG_ERR, "pidfile %s: %m", s->cfg.pidfile);
        close(fd);
        return -1;
    }
    s->pid_fd = fd;
    return 0;
}

void srv_pidfile_release(srv *s)
{
    if (s->pid_fd < 0)
        return;
    unlink(s->cfg.pidfile); /* ours: the lock is still held */
    close(s->pid_fd);
    s->pid_fd = -1;
}

/* The inode of the socket listening on port, from /proc/net/tcp or tcp6;
 * 0 when none is found. */
static unsigned long listener_inode(const char *table, unsigned port)
{
    FILE *f = fopen(table, "re");
    if (f == NULL)
        return 0;
    char line[512];
    unsigned long inode = 0;
    while (inode == 0 && fgets(line, sizeof line, f) != NULL) {
        unsigned lport, state;
        unsigned long ino;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*d %*d %lu", &lport, &state,
                   &ino) == 3 &&
            lport == port && state == 0x0a)
            inode = ino;
    }
    fclose(f);
    return inode;
}

/* The pid of the process with a listening TCP socket on port: the socket's
 * inode from /proc/net/tcp (or tcp6), then the process whose descriptors
 * hold it. 0 when it cannot be told (another user's process, another
 * namespace). */
static long listener_pid(unsigned port)
{
    unsigned long inode = listener_inode("/proc/net/tcp", port);
    if (inode == 0)
        inode = listener_inode("/proc/net/tcp6", port);
    if (inode == 0)
        return 0;
    char want[64];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *proc = opendir("/proc");
    if (proc == NULL)
        return 0;
    long pid = 0;
    struct dirent *d;
    while (pid == 0 && (d = readdir(proc)) != NULL) {
        char *end;
        long p = strtol(d->d_name, &end, 10);
        if (*end != '\0' || p <= 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/fd", p);
        DIR *fds = opendir(path);
        if (fds == NULL)
            continue;
        struct dirent *e;
        while (pid == 0 && (e = readdir(fds)) != NULL) {
            char link[320], target[64];
            snprintf(link, sizeof link, "%s/%s", path, e->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n > 0) {
                target[n] = '\0';
                if (strcmp(target, want) == 0)
                    pid = p;
            }
        }
        closedir(fds);
    }
    closedir(proc);
    return pid;
}

/* "127.0.0.1:6380" or "[::1]:6380" */
static void addr_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof ip);
        port = ntohs(a6->sin6_port);
        snprintf(buf, cap, "[%s]:%u", ip, port);
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &a4->sin_addr, ip, sizeof ip);
        port = ntohs(a4->sin_port);
        snprintf(buf, cap, "%s:%u", ip, port);
    }
}

/* A listener of a killed master's children may outlive it for a moment:
 * how long a start waits for such a holder to go before it gives up. */
#define PORT_WAIT_MS 3000

/* One try: 0 free, -1 refused (logged), 1 held by a process on its way
 * out while wait allows (logged once through *said). */
static int port_probe1(const struct sockaddr *sa, socklen_t len, bool wait, bool *said)
{
    unsigned port = sa->sa_family == AF_INET6
                        ? ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port)
                        : ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
    if (port == 0)
        return 0; /* the kernel's choice is a free port */
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        return 0; /* the group's own bind reports it */
    /* SO_REUSEADDR: a previous run's TIME_WAIT connections do not hold it */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (sa->sa_family == AF_INET6) /* as the group binds it: "::" leaves 0.0.0.0 alone */
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    int rc = bind(fd, sa, len);
    int e = errno;
    close(fd);
    if (rc == 0)
        return 0;
    char addr[INET6_ADDRSTRLEN + 16];
    addr_text(sa, addr, sizeof addr);
    if (e != EADDRINUSE) {
        srv_log(PC_LOG_ERR, "listen on %s: %s", addr, strerror(e));
        errno = e;
        return -1;
    }
    long pid = listener_pid(port);
    if (wait && (pid == 0 || pc_pid_dying(pid))) {
        if (!*said)
            srv_log(PC_LOG_WARN,
                    "listen on %s: the port is held by a process on its way out (of an "
                    "earlier start?): waiting up to %d ms for it to exit",
                    addr, PORT_WAIT_MS);
        *said = true;
        return 1;
    }
    if (pid > 0)
        srv_log(PC_LOG_ERR,
                "listen on %s: the port is in use by another process (pid %ld); "
                "not starting",
                addr, pid);
    else
        srv_log(PC_LOG_ERR, "listen on %s: the port is in use by another process; not starting",
                addr);
    errno = e;
    return -1;
}

int srv_port_probe(const struct sockaddr *sa, socklen_t len)
{
    int64_t t0 = pc_mono_ms();
    for (bool said = false;;) {
        int rc = port_probe1(sa, len, pc_mono_ms() - t0 < PORT_WAIT_MS, &said);
        if (rc <= 0)
            return rc;
        struct timespec nap = {0, 10 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

int srv_unix_socket_free(const char *key, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode)) {
        srv_log(PC_LOG_ERR, "%s %s exists and is not a socket; not replacing it", key, path);
        return -1;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        struct ucred cr;
        socklen_t len = sizeof cr;
        long pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 ? (long)cr.pid : 0;
        close(fd);
        if (pid > 0)
            srv_log(PC_LOG_ERR,
                    "%s %s: another server answers on it (pid %ld); "
                    "not starting",
                    key, path, pid);
        else
            srv_log(PC_LOG_ERR, "%s %s: another server answers on it; not starting", key, path);
        return -1;
    }
    close(fd);
    unlink(path); /* nobody listens: a stale socket of a previous run */
    return 0;
}

int srv_unix_bind(const char *key, const char *path, unsigned perm, int nonblock, dev_t *dev,
                  ino_t *ino)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        srv_log(PC_LOG_ERR, "%s: path too long (%zu bytes, at most %zu): %s", key, strlen(path),
                sizeof sa.sun_path - 1, path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) {
        srv_log(PC_LOG_ERR, "%s %s: socket: %m", key, path);
        return -1;
    }
    if (srv_unix_socket_free(key, path) != 0) {
        close(fd);
        return -1;
    }
    /* born with no more than perm: never a window where others may connect */
    mode_t old = 0;
    if (perm != 0)
        old = umask((mode_t)(~perm & 0777));
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    if (perm != 0)
        umask(old);
    struct stat st;
    if (rc != 0 || (perm != 0 && chmod(path, perm) != 0) || stat(path, &st) != 0) {
        int e = errno;
        char hint[700] = "";
        if (srv_perm_errno(e))
            srv_perm_hint(key, path, hint, sizeof hint);
        srv_log(PC_LOG_ERR, "%s %s: %s%s%s", key, path, strerror(e), hint[0] ? "; " : "", hint);
        if (rc == 0)
            unlink(path);
        close(fd);
        return -1;
    }
    *dev = st.st_dev;
    *ino = st.st_ino;
    return fd;
}

void srv_unix_path_unlink(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;
    if (lstat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
        unlink(path);
}

void srv_unix_socket_unlink(const srv *s)
{
    if (s->unix_fd >= 0)
        srv_unix_path_unlink(s->cfg.unix_socket, s->unix_dev, s->unix_ino);
}
