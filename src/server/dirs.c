/*
 * dirs.c - the directories pcached writes in, checked (and the runtime ones
 * made) before anything is created, so that a start on a machine without
 * systemd (an init script, a container, a terminal) either works or stops
 * at once with the directory, the user and the command that fixes it.
 *
 * Two kinds:
 *   - the runtime directory of a file the start creates (unix_socket,
 *     unixsocket, pidfile): made by pcached when it is missing and its
 *     parent is writable (mode 0750, owned by the user pcached runs as), as
 *     systemd's RuntimeDirectory= would make /run/pcache;
 *   - a directory pcached only writes in (the store's, log_file's): it
 *     must exist; pcached never makes it (the package's postinst or the
 *     unit's StateDirectory= / LogsDirectory= do).
 * "Writable" is asked of the kernel for the effective user (faccessat
 * AT_EACCESS), so a read-only mount (systemd's ProtectSystem=) counts too.
 * `pcached --check` runs the same checks without creating anything: the
 * unit's ExecStartPre and /etc/init.d/pcached run it as the service's user.
 */
#include "pcached.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SRV_RUNDIR_MODE 0750

/* The user this process runs as: its name, else "uid N". */
static void user_name(char *buf, size_t cap)
{
    struct passwd *pw = getpwuid(geteuid());
    if (pw != NULL)
        snprintf(buf, cap, "%s", pw->pw_name);
    else
        snprintf(buf, cap, "uid %u", (unsigned)geteuid());
}

/* dir = the directory part of path ("." for a bare name); -1 when too long. */
static int dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n >= cap)
        return -1;
    if (n == 0)
        snprintf(dir, cap, ".");
    else {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    return 0;
}

/* 0 when dir is a directory this user may create files in; else -1 with
 * why in err, each message after pfx ("unix_socket: /run/pcache/x.sock"),
 * and errno set (ENOENT: err is left to the caller). */
static int writable(const char *pfx, const char *dir, char *err, size_t errlen)
{
    char who[64];
    struct stat st;
    if (stat(dir, &st) != 0) {
        int e = errno;
        if (e != ENOENT) {
            user_name(who, sizeof who);
            snprintf(err, errlen, "%s: directory %.300s: %s (pcached runs as %s)", pfx, dir,
                     strerror(e), who);
        }
        errno = e;
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %.300s is not a directory", pfx, dir);
        errno = ENOTDIR;
        return -1;
    }
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0)
        return 0;
    int e = errno;
    user_name(who, sizeof who);
    if (e == EROFS)
        snprintf(err, errlen,
                 "%s: directory %.300s is on a read-only file system for %s (under systemd: "
                 "only the unit's StateDirectory, RuntimeDirectory and LogsDirectory are "
                 "writable)",
                 pfx, dir, who);
    else {
        char hint[900]; /* the one wording of pcached's permission errors */
        srv_perm_hint(pfx, dir, hint, sizeof hint);
        snprintf(err, errlen, "%s: directory %.300s is not writable: %s", pfx, dir, hint);
    }
    errno = e;
    return -1;
}

int srv_dir_writable(const char *pfx, const char *dir, char *err, size_t errlen)
{
    if (writable(pfx, dir, err, errlen) == 0)
        return 0;
    if (errno == ENOENT) {
        char who[64];
        user_name(who, sizeof who);
        snprintf(err, errlen,
                 "%s: directory %.300s does not exist (pcached makes no such directory: "
                 "create it, e.g. install -d -o %s -m 0750 %.300s)",
                 pfx, dir, who, dir);
    }
    return -1;
}

/* The directory of the file path into dir, and the prefix of every message
 * about it ("key: path") into pfx. -1 with err set when path is too long. */
static int file_dir(const char *key, const char *path, char dir[1100], char pfx[1200], char *err,
                    size_t errlen)
{
    if (dir_of(path, dir, 1100) != 0) {
        snprintf(err, errlen, "%s: '%.100s...': path too long", key, path);
        return -1;
    }
    snprintf(pfx, 1200, "%s: %.1000s", key, path);
    return 0;
}

int srv_file_dir_writable(const char *key, const char *path, char *err, size_t errlen)
{
    char dir[1100], pfx[1200];
    if (path[0] == '\0')
        return 0;
    if (file_dir(key, path, dir, pfx, err, errlen) != 0)
        return -1;
    if (srv_dir_writable(pfx, dir, err, errlen) != 0)
        return -1;
    /* an existing file is appended to (log_file): it must be writable itself */
    if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0 && errno != ENOENT) {
        int e = errno;
        char who[64];
        user_name(who, sizeof who);
        snprintf(err, errlen, "%s: %.300s is not writable by user %s, whom pcached runs as: %s",
                 key, path, who, strerror(e));
        return -1;
    }
    return 0;
}

int srv_rundir_ready(const char *key, const char *path, int make, char *note, size_t notelen,
                     char *err, size_t errlen)
{
    char dir[1100], parent[1100], pfx[1200];
    if (note != NULL && notelen > 0)
        note[0] = '\0';
    if (path[0] == '\0')
        return 0;
    if (file_dir(key, path, dir, pfx, err, errlen) != 0)
        return -1;
    if (writable(pfx, dir, err, errlen) == 0)
        return 0;
    if (errno != ENOENT)
        return -1;
    /* missing: made here when the parent lets this user, as RuntimeDirectory= */
    char who[64];
    user_name(who, sizeof who);
    if (dir_of(dir, parent, sizeof parent) != 0 || writable(pfx, parent, err, errlen) != 0) {
        int e = errno;
        snprintf(err, errlen,
                 "%.40s: %.200s: directory %.200s does not exist and user %.64s, whom pcached "
                 "runs as, cannot create it (%.200s: %.60s): create it as root: install -d -o "
                 "%.64s -m 0750 %.200s (the unit's RuntimeDirectory= and /etc/init.d/pcached "
                 "make /run/pcache)",
                 key, path, dir, who, parent, strerror(e), who, dir);
        return -1;
    }
    if (!make) {
        if (note != NULL)
            snprintf(note, notelen, "%.300s (created at start, mode 0750, owner %.64s)", dir, who);
        return 0;
    }
    /* the mode set again after mkdir: the umask (the unit's UMask=0077) applies to it */
    if ((mkdir(dir, SRV_RUNDIR_MODE) != 0 && errno != EEXIST) || chmod(dir, SRV_RUNDIR_MODE) != 0) {
        snprintf(err, errlen, "%.40s: %.300s: cannot create directory %.300s as user %.64s: %.60s",
                 key, path, dir, who, strerror(errno));
        return -1;
    }
    if (note != NULL)
        snprintf(note, notelen, "%.40s: created directory %.300s (mode 0750, owner %.64s)", key,
                 dir, who);
    return 0;
}

int srv_rundirs_make(const srv *s)
{
    const char *const keys[] = {"pidfile", "unix_socket", "unixsocket"};
    const char *const paths[] = {s->cfg.pidfile, s->cfg.unix_socket, s->cfg.unixsocket};
    char err[1400], note[600];
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (srv_rundir_ready(keys[i], paths[i], 1, note, sizeof note, err, sizeof err) != 0) {
            srv_log(PC_LOG_ERR, "%s", err);
            return -1;
        }
        if (note[0] != '\0')
            srv_log(PC_LOG_INFO, "%s", note);
    }
    return 0;
}
