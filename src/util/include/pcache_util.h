/*
 * pcache_util.h - the small helpers every pcache component shares: the
 * logging funnel and its logger struct, monotonic and wall clocks,
 * byte-order codecs, hex digits, configuration values (byte counts, item
 * lists), whether a process is dying.
 *
 * The bottom of the component map (docs/architecture.md): libc only, no
 * state, nothing here knows a cache, a store or a host. Everything but the
 * log funnel is static inline: the engine's hot path reads the clock on
 * every TTL check and the journal encodes integers on every write, and
 * neither should pay a call for it.
 *
 * Thread and fork safety: every function is reentrant and keeps no state.
 * Hosts compile it with their own flags (the OpenSIPS module): plain C11,
 * no bool, no feature-test macros beyond POSIX clocks.
 */
#ifndef PCACHE_UTIL_H
#define PCACHE_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- logging -------------------------------------------------------------
 * Libraries never print: every configuration struct carries one pc_logger,
 * and every component formats its lines through pc_log_emit (or its
 * variants below), which checks the level before it formats anything, so a
 * disabled debug line costs a compare. Never called under a bucket lock
 * (engine invariant I5): the callback may do anything. */
enum pc_log_level { PC_LOG_ERR = 0, PC_LOG_WARN = 1, PC_LOG_INFO = 2, PC_LOG_DEBUG = 3 };
/* msg is borrowed for the call; it carries no trailing newline. */
typedef void (*pc_log_fn)(void *ctx, int level, const char *msg);

/* Where a component's log lines go. fn NULL = silent; lines with a level
 * above `level` are not formatted. ctx is handed to fn unchanged. */
typedef struct pc_logger {
    pc_log_fn fn;
    void *ctx;
    int level;
} pc_logger;

/* The longest line the funnel delivers, NUL included; longer lines are
 * truncated. */
#define PC_LOG_MSG_MAX 1024u

/* Non-zero when a line at `level` would reach lg's callback (lg may be
 * NULL). */
static inline int pc_log_enabled(const pc_logger *lg, int level)
{
    return lg != NULL && lg->fn != NULL && level <= lg->level;
}

/* Formats fmt and hands the line to lg->fn when pc_log_enabled(lg, level).
 * lg is borrowed for the call. */
void pc_log_emit(const pc_logger *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with `prefix` (borrowed, NULL = none) written before the text,
 * for components that name themselves ("journal: "). */
void pc_log_emitp(const pc_logger *lg, int level, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void pc_log_vemit(const pc_logger *lg, int level, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/* The funnel's formatting step alone, for a component that edits the line
 * before it is delivered (the ODBC exporter masks a password): writes
 * prefix and the formatted text to buf (cap > 0 bytes, always
 * NUL-terminated, truncated to fit). Returns the length written. */
size_t pc_log_vformat(char *buf, size_t cap, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/* Hands a line already made (borrowed) to lg->fn when
 * pc_log_enabled(lg, level). */
void pc_log_put(const pc_logger *lg, int level, const char *msg);

/* ---- invariants ------------------------------------------------------------
 * PC_INVARIANT(lg, inv, cond) states that invariant inv (a name such as S2,
 * listed at the top of the component's private header) holds where the
 * code relies on it. Checked when NDEBUG is not defined (the Debug build
 * type: the ASan tree); elsewhere cond sits in an unevaluated sizeof: no
 * code. A failed check logs through lg (may be NULL), writes the same line
 * to stderr and aborts: a broken invariant is a bug, never a state to run
 * on. The engine has its own PC_ASSERT over its handle; the store and the
 * journal define theirs on this. */
_Noreturn void pc_invariant_fail(const pc_logger *lg, const char *inv, const char *cond,
                                 const char *file, int line) __attribute__((cold));
#ifdef NDEBUG
#define PC_INVARIANT(lg, inv, cond) ((void)sizeof(lg), (void)sizeof(!(cond)))
#else
#define PC_INVARIANT(lg, inv, cond)                                                                \
    ((cond) ? (void)0 : pc_invariant_fail((lg), #inv, #cond, __FILE__, __LINE__))
#endif

/* ---- clocks ----------------------------------------------------------------
 * Milliseconds as int64_t. Monotonic for deadlines and intervals (never
 * jumps; its origin is unspecified, so its values do not leave the host's
 * uptime), wall clock (CLOCK_REALTIME, ms since the epoch) for what is
 * stored or shown: expiry stamps, creation times. */
static inline int64_t pc_clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static inline int64_t pc_mono_ms(void)
{
    return pc_clock_ms(CLOCK_MONOTONIC);
}
static inline int64_t pc_wall_ms(void)
{
    return pc_clock_ms(CLOCK_REALTIME);
}
/* CLOCK_MONOTONIC_COARSE: the last tick's time (a few ms behind), read
 * without the vDSO's hardware counter; for per-write timestamps where the
 * tick's resolution is enough. */
static inline int64_t pc_mono_coarse_ms(void)
{
    return pc_clock_ms(CLOCK_MONOTONIC_COARSE);
}
/* Monotonic seconds with nanosecond resolution, for timing an operation. */
static inline double pc_mono_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
/* The same clocks in finer units, for short intervals (microseconds) and
 * for what needs the nanoseconds themselves (a seed, a log stamp). */
static inline int64_t pc_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static inline int64_t pc_mono_us(void)
{
    return pc_clock_ns(CLOCK_MONOTONIC) / 1000;
}
static inline int64_t pc_wall_us(void)
{
    return pc_clock_ns(CLOCK_REALTIME) / 1000;
}
/* CLOCK_REALTIME as a timespec, for the absolute deadlines of
 * pthread_cond_timedwait and for broken-down time (gmtime_r). */
static inline struct timespec pc_wall_ts(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts;
}

/* ---- byte counts (units.c) -------------------------------------------------
 * A configuration value's byte count as Redis's memtoull reads it: digits
 * and an optional unit, any case: b, k (1000), kb (1024), m, mb, g, gb.
 * s (borrowed, NUL-terminated) holds nothing else: no sign, no blanks.
 * 0 with *out set, or -1 (not a count, or past 2^64 - 1). */
int pc_parse_bytes(const char *s, uint64_t *out);

/* ---- item lists (items.c) ---------------------------------------------------
 * A configuration value that lists items: entries separated by ',' or ';',
 * each "name" or "name=value", blanks (C's isspace) trimmed around the
 * entry, the name and the value; empty entries are skipped. fn is called
 * for each, in order, with name (len > 0) and val (NULL without '=',
 * vlen 0 for "name=") pointing into list, borrowed for the call. The first
 * non-zero fn return stops the walk and is returned; else 0. list NULL is
 * an empty list. */
typedef int (*pc_item_fn)(void *ctx, const char *name, size_t len, const char *val, size_t vlen);
int pc_list_items(const char *list, pc_item_fn fn, void *ctx);

/* ---- processes (procfs.c) ---------------------------------------------------
 * 1 when process pid is gone or on its way out (/proc/pid/status: no such
 * process, a zombie, dead, or a SIGKILL pending, as for a child of a killed
 * parent with PR_SET_PDEATHSIG), else 0. */
int pc_pid_dying(long pid);

/* ---- byte-order codecs -----------------------------------------------------
 * Integers at any alignment in on-disk and on-wire formats. memcpy plus a
 * swap only on a big-endian host: one unaligned load or store on x86-64 and
 * aarch64. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define PC_LE16(v) __builtin_bswap16(v)
#define PC_LE32(v) __builtin_bswap32(v)
#define PC_LE64(v) __builtin_bswap64(v)
#define PC_BE32(v) (v)
#define PC_BE64(v) (v)
#else
#define PC_LE16(v) (v)
#define PC_LE32(v) (v)
#define PC_LE64(v) (v)
#define PC_BE32(v) __builtin_bswap32(v)
#define PC_BE64(v) __builtin_bswap64(v)
#endif

static inline void pc_put_le16(uint8_t *p, uint16_t v)
{
    v = PC_LE16(v);
    memcpy(p, &v, 2);
}
static inline void pc_put_le32(uint8_t *p, uint32_t v)
{
    v = PC_LE32(v);
    memcpy(p, &v, 4);
}
static inline void pc_put_le64(uint8_t *p, uint64_t v)
{
    v = PC_LE64(v);
    memcpy(p, &v, 8);
}
static inline uint16_t pc_get_le16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return PC_LE16(v);
}
static inline uint32_t pc_get_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return PC_LE32(v);
}
static inline uint64_t pc_get_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return PC_LE64(v);
}
/* Big-endian, for keys that must sort as numbers under memcmp and for
 * network byte order. */
static inline void pc_put_be32(uint8_t *p, uint32_t v)
{
    v = PC_BE32(v);
    memcpy(p, &v, 4);
}
static inline void pc_put_be64(uint8_t *p, uint64_t v)
{
    v = PC_BE64(v);
    memcpy(p, &v, 8);
}
static inline uint32_t pc_get_be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return PC_BE32(v);
}
static inline uint64_t pc_get_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return PC_BE64(v);
}

/* ---- hex ------------------------------------------------------------------ */
/* The lowercase hex digit of v & 15. */
static inline char pc_hex_digit(unsigned v)
{
    return "0123456789abcdef"[v & 15u];
}
/* The value of hex digit c (either case), or -1 if c is not one. */
static inline int pc_hex_val(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#ifdef __cplusplus
}
#endif
#endif
