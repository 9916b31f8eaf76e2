/*
 * slowlog.c - SLOWLOG GET / LEN / RESET / HELP, as Redis 7.0 answers them,
 * across the workers (docs/pcached.md §3.1).
 *
 * Every worker times every command already (commandstats, commands.c); a
 * command that took at least slowlog_log_slower_than microseconds is
 * recorded here, off the fast path: the only cost on every command is one
 * comparison with a value held in the worker (srv_slowlog_threshold).
 *
 * The log is one ring per worker slot in a MAP_SHARED mapping made by the
 * master before the fork (SRV_SLOW_CAP entries each). A ring has one
 * writer, its worker; any worker reads every ring for SLOWLOG GET and LEN.
 * An entry's fields are a seqlock, as the client table's (clients_shm.c):
 * seq is odd while the owner writes; a reader copies the entry between two
 * equal even reads of seq, else skips it (a torn copy is never shown).
 * Entry ids come from one counter for the instance, so the merged log is
 * ordered by id as Redis's is. SLOWLOG RESET records the next id: entries
 * below it are hidden (each ring keeps writing where it was). The log
 * shows the slowlog_max_len newest entries of all workers.
 *
 * What an entry keeps is Redis's: at most 32 arguments (the last one then
 * "... (N more arguments)"), each cut at 128 bytes ("... (N more bytes)"),
 * the client's address and name; EXEC is not recorded, the commands it ran
 * are, one by one (Redis's SKIP_SLOWLOG). Passwords are "(redacted)" as
 * Redis redacts them: AUTH's arguments, HELLO's after AUTH, the value of
 * CONFIG SET requirepass / management_password.
 */
#include "resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SLOW_ARGS 32    /* arguments kept, as Redis's SLOWLOG_ENTRY_MAX_ARGC */
#define SLOW_STRING 128 /* bytes kept of one, as SLOWLOG_ENTRY_MAX_STRING */
#define SLOW_BLOB (SLOW_ARGS * (2 + SLOW_STRING + 32))

struct srv_slow_shm {
    _Atomic uint32_t seq; /* odd while the owner writes */
    uint32_t nargs;       /* arguments in blob */
    uint64_t id;
    int64_t time_s;
    uint64_t dur_us;
    uint32_t blob_len;
    char addr[112], name[SRV_CTAB_NAME];
    char blob[SLOW_BLOB]; /* nargs x (u16 length, bytes) */
};

struct srv_slow_ring {
    _Atomic uint64_t written; /* entries written; the next goes to written % SRV_SLOW_CAP */
    char pad[56];
};

static size_t ring_bytes(void)
{
    return sizeof(struct srv_slow_ring) + SRV_SLOW_CAP * sizeof(struct srv_slow_shm);
}

static struct srv_slow_ring *ring_of(const srv *s, unsigned slot)
{
    return (struct srv_slow_ring *)(void *)((char *)s->slowlog + (size_t)slot * ring_bytes());
}

static struct srv_slow_shm *entry_of(struct srv_slow_ring *r, uint64_t i)
{
    return (struct srv_slow_shm *)(void *)(r + 1) + i % SRV_SLOW_CAP;
}

int srv_slowlog_setup(srv *s)
{
    size_t len = (size_t)s->cfg.workers * ring_bytes();
    /* NORESERVE: only the entries written are ever backed */
    s->slowlog =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s->slowlog == MAP_FAILED) {
        s->slowlog = NULL;
        srv_log(PC_LOG_ERR, "cannot map the slow log (%zu bytes): %m", len);
        return -1;
    }
    return 0;
}

static size_t put_arg(char *p, size_t room, const char *a, size_t n)
{
    char buf[SLOW_STRING + 32];
    size_t len = n;
    if (n > SLOW_STRING) {
        memcpy(buf, a, SLOW_STRING);
        len = SLOW_STRING + (size_t)snprintf(buf + SLOW_STRING, sizeof buf - SLOW_STRING,
                                             "... (%zu more bytes)", n - SLOW_STRING);
        a = buf;
    }
    if (len + 2 > room)
        return 0;
    uint16_t l = (uint16_t)len;
    memcpy(p, &l, 2);
    memcpy(p + 2, a, len);
    return len + 2;
}

/* 1 when argument i of the command holds a password. */
static int secret_arg(unsigned argc, const char **argv, const size_t *argl, unsigned i)
{
    if (arg_eq(argv[0], argl[0], "AUTH"))
        return i >= 1;
    if (arg_eq(argv[0], argl[0], "HELLO")) /* HELLO 3 AUTH user pass */
        return i >= 3 && arg_eq(argv[i - (i >= 4 ? 2 : 1)], argl[i - (i >= 4 ? 2 : 1)], "AUTH");
    if (arg_eq(argv[0], argl[0], "CONFIG") && argc > 2 && arg_eq(argv[1], argl[1], "SET"))
        return i >= 3 && i % 2 == 1 &&
               (arg_eq(argv[i - 1], argl[i - 1], "requirepass") ||
                arg_eq(argv[i - 1], argl[i - 1], "management_password"));
    return 0;
}

void srv_slowlog_add(srv_worker *w, const conn *c, unsigned argc, const char **argv,
                     const size_t *argl, uint64_t dur_us)
{
    srv *s = w->s;
    if (s->slowlog == NULL || arg_eq(argv[0], argl[0], "EXEC"))
        return;
    struct srv_slow_ring *r = ring_of(s, w->slot);
    uint64_t n = atomic_load_explicit(&r->written, memory_order_relaxed);
    struct srv_slow_shm *e = entry_of(r, n);
    uint32_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq | 1u, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    e->id = atomic_fetch_add_explicit(&s->shm->slowlog_next, 1, memory_order_relaxed);
    e->time_s = (int64_t)time(NULL);
    e->dur_us = dur_us;
    unsigned keep = argc > SLOW_ARGS ? SLOW_ARGS - 1 : argc;
    size_t off = 0;
    for (unsigned i = 0; i < keep; i++) {
        int hide = secret_arg(argc, argv, argl, i);
        off += put_arg(e->blob + off, sizeof e->blob - off, hide ? "(redacted)" : argv[i],
                       hide ? 10 : argl[i]);
    }
    if (keep < argc) {
        char more[64];
        int ml = snprintf(more, sizeof more, "... (%u more arguments)", argc - keep);
        off += put_arg(e->blob + off, sizeof e->blob - off, more, (size_t)ml);
        keep++;
    }
    e->nargs = keep;
    e->blob_len = (uint32_t)off;
    snprintf(e->addr, sizeof e->addr, "%s", c->addr);
    snprintf(e->name, sizeof e->name, "%s", c->name != NULL ? c->name : "");
    atomic_store_explicit(&e->seq, (seq | 1u) + 1u, memory_order_release);
    atomic_store_explicit(&r->written, n + 1, memory_order_release);
}

/* A consistent copy of entry e into out; 0 when it is being written. */
static int entry_read(struct srv_slow_shm *e, struct srv_slow_shm *out)
{
    uint32_t a = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (a & 1u)
        return 0;
    memcpy((char *)out + sizeof out->seq, (const char *)e + sizeof e->seq,
           sizeof *e - sizeof e->seq);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&e->seq, memory_order_relaxed) == a;
}

static int by_id_desc(const void *a, const void *b)
{
    uint64_t x = (*(const struct srv_slow_shm *const *)a)->id;
    uint64_t y = (*(const struct srv_slow_shm *const *)b)->id;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The visible entries, newest first, at most max: copies in *out
 * (caller-owned, free()), their count returned; -1 on no memory. */
static long collect(const srv *s, unsigned max, struct srv_slow_shm **out)
{
    uint64_t floor = atomic_load(&s->shm->slowlog_reset);
    size_t cap = (size_t)s->cfg.workers * SRV_SLOW_CAP;
    struct srv_slow_shm *all = malloc(cap * sizeof *all);
    struct srv_slow_shm **ptr = malloc(cap * sizeof *ptr);
    long n = 0;
    if (all == NULL || ptr == NULL) {
        free(all);
        free(ptr);
        return -1;
    }
    for (unsigned w = 0; w < s->cfg.workers; w++) {
        struct srv_slow_ring *r = ring_of(s, w);
        uint64_t written = atomic_load_explicit(&r->written, memory_order_acquire);
        uint64_t first = written > SRV_SLOW_CAP ? written - SRV_SLOW_CAP : 0;
        for (uint64_t i = first; i < written; i++)
            if (entry_read(entry_of(r, i), &all[n]) && all[n].id >= floor)
                ptr[n] = &all[n], n++;
    }
    qsort(ptr, (size_t)n, sizeof *ptr, by_id_desc);
    if ((unsigned long)n > max)
        n = (long)max;
    struct srv_slow_shm *res = malloc((size_t)(n > 0 ? n : 1) * sizeof *res);
    if (res == NULL) {
        n = -1;
    } else {
        for (long i = 0; i < n; i++)
            res[i] = *ptr[i];
    }
    free(all);
    free(ptr);
    *out = res;
    return n;
}

static void reply_entry(conn *c, const struct srv_slow_shm *e)
{
    reply_array(c, 6);
    reply_int(c, (int64_t)e->id);
    reply_int(c, e->time_s);
    reply_int(c, (int64_t)e->dur_us);
    reply_array(c, e->nargs);
    size_t off = 0;
    for (unsigned i = 0; i < e->nargs; i++) {
        uint16_t l = 0;
        if (off + 2 <= e->blob_len)
            memcpy(&l, e->blob + off, 2);
        if (off + 2 + l > e->blob_len)
            l = 0;
        reply_bulk(c, e->blob + off + 2, l);
        off += 2 + (size_t)l;
    }
    reply_bulk(c, e->addr, strnlen(e->addr, sizeof e->addr));
    reply_bulk(c, e->name, strnlen(e->name, sizeof e->name));
}

static void slowlog_get(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    int64_t count = 10; /* Redis 7.0's default; -1: all */
    if (argc == 3 && (arg_i64(argv[2], argl[2], &count) != 0 || count < -1)) {
        reply_error(c, "ERR count should be greater than or equal to -1");
        return;
    }
    unsigned max = w->s->cfg.slowlog_max_len;
    if (count >= 0 && (uint64_t)count < max)
        max = (unsigned)count;
    struct srv_slow_shm *e = NULL;
    long n = collect(w->s, max, &e);
    if (n < 0) {
        reply_error(c, "ERR out of memory");
        return;
    }
    reply_array(c, n);
    for (long i = 0; i < n; i++)
        reply_entry(c, &e[i]);
    free(e);
}

static void cmd_slowlog(srv_worker *w, conn *c, unsigned argc, const char **argv,
                        const size_t *argl)
{
    static const char *help[] = {
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    };
    static const struct {
        const char *name;
        int arity; /* as Redis's subcommand table: n exact, -n at least n */
    } subs[] = {{"GET", -2}, {"LEN", 2}, {"RESET", 2}, {"HELP", 2}};
    if (srv_runtime_poll(w->s)) /* slowlog_max_len set by another worker's CONFIG SET */
        cmd_config_limits(w);
    unsigned i = 0;
    while (i < sizeof subs / sizeof subs[0] && !arg_eq(argv[1], argl[1], subs[i].name))
        i++;
    if (i == sizeof subs / sizeof subs[0]) {
        char sub[129];
        resp_sanitize(sub, sizeof sub, argv[1], argl[1]);
        reply_error(c, "ERR unknown subcommand '%s'. Try SLOWLOG HELP.", sub);
        return;
    }
    int a = subs[i].arity;
    if ((a > 0 && argc != (unsigned)a) || (a < 0 && argc < (unsigned)-a) || (i == 0 && argc > 3)) {
        char lower[8] = "";
        for (size_t j = 0; subs[i].name[j] != '\0' && j + 1 < sizeof lower; j++)
            lower[j] = (char)(subs[i].name[j] | 0x20);
        reply_error(c, "ERR wrong number of arguments for 'slowlog|%s' command", lower);
        return;
    }
    if (i == 0) {
        slowlog_get(w, c, argc, argv, argl);
    } else if (i == 1) {
        struct srv_slow_shm *e = NULL;
        long n = collect(w->s, w->s->cfg.slowlog_max_len, &e);
        free(e);
        if (n < 0)
            reply_error(c, "ERR out of memory");
        else
            reply_int(c, n);
    } else if (i == 2) {
        atomic_store(&w->s->shm->slowlog_reset, atomic_load(&w->s->shm->slowlog_next));
        reply_ok(c);
    } else {
        reply_array(c, (int64_t)(sizeof help / sizeof help[0]));
        for (unsigned j = 0; j < sizeof help / sizeof help[0]; j++)
            reply_simple(c, help[j]);
    }
}

const cmd_def cmd_slowlog_table[] = {
    {"SLOWLOG", -2, CMD_ADMIN, cmd_slowlog, 0, 0, 0},
};
const unsigned cmd_slowlog_count = sizeof cmd_slowlog_table / sizeof cmd_slowlog_table[0];
