/*
 * cmd_object.c - what Redis tells about one key's storage: MEMORY USAGE,
 * STATS, DOCTOR, MALLOC-STATS, PURGE, HELP and OBJECT ENCODING, REFCOUNT,
 * IDLETIME, FREQ, HELP (docs/pcached.md, "Introspection").
 *
 * pcached stores a value as one record in the shared arena, not as a Redis
 * object, so these answers are translations:
 *  - MEMORY USAGE is an estimate from the record: its 16-byte header, the
 *    key and the stored value (8 bytes for a native counter), rounded up to
 *    16 bytes, plus the 8-byte slot of its bucket;
 *  - OBJECT ENCODING names what Redis 7.0 would use for the same bytes
 *    (tryObjectEncoding): "int" for a counter and for a canonical int64 of
 *    at most 20 bytes, "embstr" up to 44 bytes, "raw" above;
 *  - OBJECT REFCOUNT is Redis's 2147483647 for the shared integers 0..9999
 *    and 1 otherwise; IDLETIME is 0 (the engine keeps no access time);
 *    FREQ is Redis's error for a policy other than LFU.
 */
#include "resp.h"

#include <stdio.h>
#include <string.h>

/* Reads key into the worker's scratch buffer. Returns 1 and sets *meta on
 * a hit, else 0 with the reply queued: nil on a miss, else the error. */
static int read_key(srv_worker *w, conn *c, const char *key, size_t klen, size_t *vlen,
                    pc_meta *meta)
{
    size_t needed = 0;
    int rc = pc_get_buf(c->coll, key, klen, w->scratch, w->scratch_cap, vlen, &needed, meta);
    if (rc == 0)
        return 1;
    if (rc == PC_ENOTFOUND || rc == PC_ETOOBIG)
        reply_nil(c);
    else
        reply_pc_error(c, rc);
    return 0;
}

/* Redis's tryObjectEncoding for a string of n bytes. */
static const char *encoding_of(const char *v, size_t n, int counter, int64_t *ival)
{
    *ival = -1;
    if (counter || (n <= 20 && arg_i64(v, n, ival) == 0)) {
        if (counter)
            (void)arg_i64(v, n, ival);
        return "int";
    }
    return n <= 44 ? "embstr" : "raw";
}

static void reply_sub_unknown(conn *c, const char *cmd, const char *p, size_t n)
{
    char sub[130];
    resp_sanitize(sub, sizeof sub, p, n);
    reply_error(c, "ERR unknown subcommand '%s'. Try %s HELP.", sub, cmd);
}

static void reply_lines(conn *c, const char *const *lines, unsigned n)
{
    reply_array(c, n);
    for (unsigned i = 0; i < n; i++)
        reply_simple(c, lines[i]);
}

static const char *const object_help[] = {
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
};

void cmd_object(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (arg_eq(argv[1], argl[1], "HELP") && argc == 2) {
        reply_lines(c, object_help, sizeof object_help / sizeof object_help[0]);
        return;
    }
    int enc = arg_eq(argv[1], argl[1], "ENCODING"), ref = arg_eq(argv[1], argl[1], "REFCOUNT");
    int idle = arg_eq(argv[1], argl[1], "IDLETIME"), freq = arg_eq(argv[1], argl[1], "FREQ");
    if (!(enc || ref || idle || freq)) {
        reply_sub_unknown(c, "OBJECT", argv[1], argl[1]);
        return;
    }
    if (argc != 3) {
        char lower[16];
        size_t i = 0;
        for (; i < argl[1] && i + 1 < sizeof lower; i++)
            lower[i] = (char)(argv[1][i] | 0x20);
        lower[i] = '\0';
        reply_error(c, "ERR wrong number of arguments for 'object|%s' command", lower);
        return;
    }
    size_t vlen = 0;
    pc_meta meta;
    if (!read_key(w, c, argv[2], argl[2], &vlen, &meta))
        return;
    int64_t ival;
    const char *e = encoding_of(w->scratch, vlen, meta.is_counter, &ival);
    if (enc)
        reply_bulk_str(c, e);
    else if (ref)
        reply_int(c, strcmp(e, "int") == 0 && ival >= 0 && ival < 10000 ? 2147483647 : 1);
    else if (idle)
        reply_int(c, 0);
    else
        reply_error(c, "ERR An LFU maxmemory policy is not selected, access frequency not "
                       "tracked. Please note that when switching between policies at runtime LRU "
                       "and LFU data will take some time to adjust.");
}

static const char *const memory_help[] = {
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
};

/* The estimate documented at the top of this file. */
static int64_t usage_estimate(size_t klen, size_t vlen, int counter)
{
    size_t rec = 16 + klen + (counter ? 8 : vlen);
    return (int64_t)(((rec + 15) / 16) * 16 + 8);
}

static void memory_stats(srv_worker *w, conn *c)
{
    pc_mem_stats m;
    memset(&m, 0, sizeof m);
    (void)pc_mem_stats_get(w->s->cache, &m);
    uint64_t keys = 0;
    for (unsigned i = 0; i < pc_coll_count(w->s->cache); i++) {
        pc_coll_stats st;
        if (pc_coll_stats_get(pc_coll_at(w->s->cache, i), &st) == 0)
            keys += st.entries;
    }
    uint64_t used = (uint64_t)m.chunk_bytes + m.table_bytes;
    uint64_t total = (uint64_t)m.hugepage_bytes + m.plain_bytes;
    reply_map(c, 8);
    reply_bulk_str(c, "peak.allocated");
    reply_int(c, (int64_t)used);
    reply_bulk_str(c, "total.allocated");
    reply_int(c, (int64_t)used);
    reply_bulk_str(c, "startup.allocated");
    reply_int(c, (int64_t)m.table_bytes);
    reply_bulk_str(c, "keys.count");
    reply_int(c, (int64_t)keys);
    reply_bulk_str(c, "keys.bytes-per-key");
    reply_int(c, keys ? (int64_t)(m.chunk_bytes / keys) : 0);
    reply_bulk_str(c, "dataset.bytes");
    reply_int(c, (int64_t)m.chunk_bytes);
    reply_bulk_str(c, "dataset.percentage");
    reply_double(c, used ? 100.0 * (double)m.chunk_bytes / (double)used : 0.0);
    reply_bulk_str(c, "pcache.mapped");
    reply_int(c, (int64_t)total);
}

void cmd_memory(srv_worker *w, conn *c, unsigned argc, const char **argv, const size_t *argl)
{
    if (arg_eq(argv[1], argl[1], "USAGE") && argc >= 3) {
        if (argc != 3 && !(argc == 5 && arg_eq(argv[3], argl[3], "SAMPLES"))) {
            reply_error(c, "ERR syntax error");
            return;
        }
        int64_t samples;
        if (argc == 5 && arg_i64(argv[4], argl[4], &samples) != 0) {
            reply_error(c, "ERR value is not an integer or out of range");
            return;
        }
        size_t vlen = 0;
        pc_meta meta;
        if (read_key(w, c, argv[2], argl[2], &vlen, &meta))
            reply_int(c, usage_estimate(argl[2], vlen, meta.is_counter));
    } else if (arg_eq(argv[1], argl[1], "STATS") && argc == 2) {
        memory_stats(w, c);
    } else if (arg_eq(argv[1], argl[1], "DOCTOR") && argc == 2) {
        static const char ok[] = "Hi Sam, I can't find any memory issue in your instance. I can "
                                 "only account for what occurs on this base.\n";
        reply_verbatim(c, ok, sizeof ok - 1);
    } else if (arg_eq(argv[1], argl[1], "MALLOC-STATS") && argc == 2) {
        static const char no[] = "Stats not supported for the current allocator";
        reply_verbatim(c, no, sizeof no - 1);
    } else if (arg_eq(argv[1], argl[1], "PURGE") && argc == 2) {
        reply_ok(c);
    } else if (arg_eq(argv[1], argl[1], "HELP") && argc == 2) {
        reply_lines(c, memory_help, sizeof memory_help / sizeof memory_help[0]);
    } else if (arg_eq(argv[1], argl[1], "USAGE") || arg_eq(argv[1], argl[1], "STATS") ||
               arg_eq(argv[1], argl[1], "DOCTOR") || arg_eq(argv[1], argl[1], "MALLOC-STATS") ||
               arg_eq(argv[1], argl[1], "PURGE") || arg_eq(argv[1], argl[1], "HELP")) {
        char lower[16];
        size_t i = 0;
        for (; i < argl[1] && i + 1 < sizeof lower; i++)
            lower[i] = (char)(argv[1][i] | 0x20);
        lower[i] = '\0';
        reply_error(c, "ERR wrong number of arguments for 'memory|%s' command", lower);
    } else {
        reply_sub_unknown(c, "MEMORY", argv[1], argl[1]);
    }
}
