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
 *  - the JSON-RPC unix socket: a path that a live server answers on is
 *    refused (connect() succeeds; SO_PEERCRED names the pid), a stale one
 *    is replaced, and at exit the path is unlinked only if it is still the
 *    socket this instance bound (same device and inode).
 */
#include "pcached.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int srv_pidfile_lock(srv *s)
{
    s->pid_fd = -1;
    if (s->cfg.pidfile[0] == '\0')
        return 0;
    int fd = open(s->cfg.pidfile, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        srv_log(PC_LOG_ERR, "pidfile %s: %m", s->cfg.pidfile);
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

/* The pid of the process with a listening TCP socket on port: the socket's
 * inode from /proc/net/tcp, then the process whose descriptors hold it.
 * 0 when it cannot be told (another user's process, another namespace). */
static long listener_pid(unsigned port)
{
    FILE *f = fopen("/proc/net/tcp", "re");
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

int srv_port_probe(const struct sockaddr_in *sa)
{
    if (sa->sin_port == 0)
        return 0; /* the kernel's choice is a free port */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        return 0; /* the group's own bind reports it */
    /* SO_REUSEADDR: a previous run's TIME_WAIT connections do not hold it */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = bind(fd, (const struct sockaddr *)sa, sizeof *sa);
    int e = errno;
    close(fd);
    if (rc == 0)
        return 0;
    char addr[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa->sin_addr, addr, sizeof addr);
    unsigned port = ntohs(sa->sin_port);
    if (e != EADDRINUSE) {
        srv_log(PC_LOG_ERR, "listen on %s:%u: %s", addr, port, strerror(e));
        return -1;
    }
    long pid = listener_pid(port);
    if (pid > 0)
        srv_log(PC_LOG_ERR,
                "listen on %s:%u: the port is in use by another process (pid %ld); "
                "not starting",
                addr, port, pid);
    else
        srv_log(PC_LOG_ERR, "listen on %s:%u: the port is in use by another process; not starting",
                addr, port);
    return -1;
}

int srv_unix_socket_free(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode)) {
        srv_log(PC_LOG_ERR, "unix_socket %s exists and is not a socket; not replacing it", path);
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
                    "unix_socket %s: another server answers on it (pid %ld); "
                    "not starting",
                    path, pid);
        else
            srv_log(PC_LOG_ERR, "unix_socket %s: another server answers on it; not starting", path);
        return -1;
    }
    close(fd);
    unlink(path); /* nobody listens: a stale socket of a previous run */
    return 0;
}

void srv_unix_socket_unlink(const srv *s)
{
    struct stat st;
    if (s->unix_fd < 0 || lstat(s->cfg.unix_socket, &st) != 0)
        return;
    if (st.st_dev == s->unix_dev && st.st_ino == s->unix_ino)
        unlink(s->cfg.unix_socket);
}
