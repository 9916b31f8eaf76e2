/*
 * persist_lock.c - one host per store: the exclusive lock that
 * pc_persist_open takes on an LMDB store's directory before it opens the
 * store.
 *
 * LMDB lets any number of processes open one environment, and it must: the
 * offline tool reads a store while the server saves. But two hosts that
 * both load, journal and save the same store each overwrite the other's
 * snapshots and replay the other's journal segments. So the host that
 * serves a store holds flock(LOCK_EX) on its directory for as long as it
 * runs. The lock belongs to the open file description, so the processes the
 * host forks share it through the inherited descriptor, and the kernel
 * drops it when the last of them exits, however it exits: a store is never
 * left locked by a dead host. Readers (pcache-snapshot, a perf_save to
 * another store) take no lock.
 *
 * The directory is the lock's object, not a file inside it: a store
 * directory holds only what docs/snapshot-format.md lists.
 */
#include "persist_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* The pid that holds a flock on the file (dev, ino), read from
 * /proc/locks; 0 when it cannot be told. */
static long pp_flock_holder(dev_t dev, ino_t ino)
{
    FILE *f = fopen("/proc/locks", "re");
    if (f == NULL)
        return 0;
    char line[256];
    long pid = 0;
    while (pid == 0 && fgets(line, sizeof line, f) != NULL) {
        char kind[16];
        long p;
        unsigned maj, min;
        unsigned long long i;
        /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
        if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min, &i) == 5 &&
            strcmp(kind, "FLOCK") == 0 && maj == major(dev) && min == minor(dev) && (ino_t)i == ino)
            pid = p;
    }
    fclose(f);
    return pid;
}

/* How long a start waits for the processes of an earlier one to exit: the
 * children of a master killed with SIGKILL die with it (pcached sets
 * PR_SET_PDEATHSIG), but their exit - tearing down the shared mappings -
 * may take a moment on a busy machine, and only then is the lock dropped. */
#define PP_LOCK_WAIT_MS 3000

/* flock(LOCK_EX) on fd, waiting up to PP_LOCK_WAIT_MS while another
 * process holds it (saying so once); 0, or -1 with errno set. */
static int pp_flock_wait(pc_persist *p, int fd, const char *path)
{
    int64_t t0 = pc_mono_ms();
    for (bool said = false;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK)
            return -1;
        int64_t ms = pc_mono_ms() - t0;
        struct stat st;
        long holder = fstat(fd, &st) == 0 ? pp_flock_holder(st.st_dev, st.st_ino) : 0;
        /* the lock's recorded owner (the master that took it) alive and
         * not being killed: another server, refused at once */
        if (ms >= PP_LOCK_WAIT_MS || (holder > 0 && !pc_pid_dying(holder))) {
            errno = EWOULDBLOCK;
            return -1;
        }
        if (!said) {
            pc_log_emit(&p->log, PC_LOG_WARN,
                        "db_url '%.200s': the store is held by process %ld (a process of an "
                        "earlier start may still be exiting): waiting up to %d ms for it to exit",
                        path, holder, PP_LOCK_WAIT_MS);
            said = true;
        }
        struct timespec nap = {0, 10 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

int pp_lock_store(pc_persist *p, const char *db_url, char *err, size_t errlen)
{
    const char *path = strncmp(db_url, "lmdb://", 7) == 0 ? db_url + 7 : db_url;
    /* pc_store_open creates a missing directory (one level, 0750) too; it
     * is made here first so that it can be locked before anything else */
    if (mkdir(path, 0750) != 0 && errno != EEXIST)
        return pp_fail(err, errlen, PC_EIO, "db_url '%.200s': cannot create the store: %s", path,
                       strerror(errno));
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return pp_fail(err, errlen, errno == ENOTDIR ? PC_ESTORE : PC_EIO,
                       "db_url '%.200s': cannot open the store directory: %s", path,
                       strerror(errno));
    if (pp_flock_wait(p, fd, path) != 0) {
        int e = errno;
        struct stat st;
        long holder = fstat(fd, &st) == 0 ? pp_flock_holder(st.st_dev, st.st_ino) : 0;
        close(fd);
        if (e != EWOULDBLOCK)
            return pp_fail(err, errlen, PC_EIO, "db_url '%.200s': cannot lock the store: %s", path,
                           strerror(e));
        if (holder > 0)
            return pp_fail(err, errlen, PC_ELOCKED,
                           "db_url '%.200s': the store is in use by another process (pid %ld); "
                           "one server per store: stop it or use another store",
                           path, holder);
        return pp_fail(err, errlen, PC_ELOCKED,
                       "db_url '%.200s': the store is in use by another process; one server "
                       "per store: stop it or use another store",
                       path);
    }
    p->lock_fd = fd;
    return 0;
}
