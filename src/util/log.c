/*
 * log.c - the logging funnel (pcache_util.h): the one place a component's
 * log line is formatted and handed to its logger's callback. The level is
 * checked before anything is formatted; the line lives on the stack, so the
 * funnel allocates nothing and may be called from any process or thread.
 */
#include "pcache_util.h"

#include <stdio.h>
#include <stdlib.h>

size_t pc_log_vformat(char *buf, size_t cap, const char *prefix, const char *fmt, va_list ap)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    if (prefix != NULL) {
        int k = snprintf(buf, cap, "%s", prefix);
        n = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
    }
    int k = vsnprintf(buf + n, cap - n, fmt, ap);
    if (k > 0)
        n = n + (size_t)k < cap ? n + (size_t)k : cap - 1;
    return n;
}

void pc_log_vemit(const pc_logger *lg, int level, const char *prefix, const char *fmt, va_list ap)
{
    if (!pc_log_enabled(lg, level))
        return;
    char buf[PC_LOG_MSG_MAX];
    pc_log_vformat(buf, sizeof buf, prefix, fmt, ap);
    lg->fn(lg->ctx, level, buf);
}

void pc_log_emit(const pc_logger *lg, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pc_log_vemit(lg, level, NULL, fmt, ap);
    va_end(ap);
}

void pc_log_emitp(const pc_logger *lg, int level, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pc_log_vemit(lg, level, prefix, fmt, ap);
    va_end(ap);
}

void pc_log_put(const pc_logger *lg, int level, const char *msg)
{
    if (pc_log_enabled(lg, level))
        lg->fn(lg->ctx, level, msg);
}

void pc_invariant_fail(const pc_logger *lg, const char *inv, const char *cond, const char *file,
                       int line)
{
    char buf[512];
    snprintf(buf, sizeof buf, "pcache: invariant %s violated at %s:%d: %s", inv, file, line, cond);
    pc_log_put(lg, PC_LOG_ERR, buf);
    fprintf(stderr, "%s\n", buf);
    abort();
}
