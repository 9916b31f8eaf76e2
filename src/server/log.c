/*
 * log.c - pcached's log: stderr, a file (reopened on SIGHUP, for logrotate)
 * or syslog. One line per message: time, role[pid], level, text. The level
 * is checked before anything is formatted. A process-wide state: each
 * process of the server has exactly one log.
 *
 * Under systemd, stderr is a stream to the journal, which the manager says
 * by JOURNAL_STREAM=<dev>:<inode> of that stream. A line there starts with
 * its syslog priority, sd-daemon(3)'s "<3>" (ERR), "<4>" (WARN), "<6>"
 * (INFO), "<7>" (DEBUG), which journald strips and keeps as the entry's
 * priority, so `journalctl -u pcached -p err` finds the errors. The check
 * compares the stream with stderr itself: a stderr redirected by the
 * service's own command line gets no prefix.
 */
#include "pcached.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static struct {
    int fd;
    int use_syslog;
    int journal; /* stderr is the journal's stream: lines carry "<N>" */
    int level;
    char path[1024];
    char role[16];
} lg = {2, 0, 0, PC_LOG_INFO, "", "pcached"};

static const char *const lvl_names[] = {"ERR", "WARN", "INFO", "DEBUG"};

/* 1 when fd is the stream JOURNAL_STREAM names ("<dev>:<inode>"). */
static int is_journal_stream(int fd)
{
    const char *e = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char tail;
    struct stat st;
    if (e == NULL || sscanf(e, "%llu:%llu%c", &dev, &ino, &tail) != 2 || fstat(fd, &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void srv_log_init(const srv_config *cfg, const char *role)
{
    lg.level = srv_log_level_parse(cfg->log_level);
    if (lg.level < 0)
        lg.level = PC_LOG_INFO;
    snprintf(lg.role, sizeof lg.role, "%s", role);
    lg.use_syslog = cfg->syslog != 0;
    snprintf(lg.path, sizeof lg.path, "%s", cfg->log_file);
    if (lg.use_syslog)
        openlog("pcached", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    srv_log_reopen();
    lg.journal = !lg.use_syslog && lg.fd == 2 && is_journal_stream(2);
}

void srv_log_role(const char *role)
{
    snprintf(lg.role, sizeof lg.role, "%s", role);
}

void srv_log_reopen(void)
{
    if (lg.use_syslog || lg.path[0] == '\0')
        return;
    int fd = open(lg.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        int e = errno;
        char hint[700] = "";
        if (srv_perm_errno(e))
            srv_perm_hint("log_file", lg.path, hint, sizeof hint);
        srv_log(PC_LOG_ERR, "cannot open log file %s: %s (keeping the previous one)%s%s", lg.path,
                strerror(e), hint[0] ? "; " : "", hint);
        return;
    }
    int old = lg.fd;
    lg.fd = fd;
    if (old > 2)
        close(old);
}

void srv_log_quiet(void)
{
    lg.level = PC_LOG_WARN;
}

void srv_log_set_level(int level)
{
    if (level >= PC_LOG_ERR && level <= PC_LOG_DEBUG)
        lg.level = level;
}

int srv_log_level(void)
{
    return lg.level;
}

static void log_write(int level, const char *msg)
{
    if (lg.use_syslog) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        syslog(prio[level], "%s: %s", lg.role, msg);
        return;
    }
    char line[1400];
    struct timespec ts = pc_wall_ts();
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    static const char *const prio[] = {"<3>", "<4>", "<6>", "<7>"}; /* sd-daemon(3) */
    int n = snprintf(line, sizeof line, "%s%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %s %s\n",
                     lg.journal ? prio[level] : "", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, lg.role, (int)getpid(),
                     lvl_names[level], msg);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t w = write(lg.fd, line, (size_t)n); /* one write: lines of processes never mix */
    (void)w;
}

static void log_sink(void *ctx, int level, const char *msg)
{
    (void)ctx;
    log_write(level, msg);
}

void srv_log(int level, const char *fmt, ...)
{
    if (level < 0)
        return;
    const pc_logger out = {log_sink, NULL, lg.level};
    va_list ap;
    va_start(ap, fmt);
    pc_log_vemit(&out, level, NULL, fmt, ap);
    va_end(ap);
}

void srv_log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level > lg.level || level < 0)
        return;
    log_write(level, msg);
}
