/*
 * mgmt_table.c - the built-in command table: every command of
 * docs/management.md that the engine alone can serve, with its parameters, in one declarative
 * place. perf_save / perf_load / perf_sync are not here: the storage layer registers them into a
 * context with pc_mgmt_register.
 *
 * Parameter order is the positional order, and it carries the trap the
 * docs warn about: the glob-taking commands take the glob first and the
 * collection second, so "perf_dump th" looks for a key named th. The order
 * of each array must match the PC_*A_* indices of mgmt_int.h.
 */
#include "mgmt_int.h"

#define STR_(x) #x
#define STR(x) STR_(x)

#define P_COLL                                                                                     \
    {                                                                                              \
        "collection", PC_MP_COLL, 0, NULL, 0, 0, "collection (default: the context's)"             \
    }
#define P_COLL_ALL                                                                                 \
    {                                                                                              \
        "collection", PC_MP_COLL_ALL, 0, NULL, 0, 0, "collection (default: all)"                   \
    }
#define P_GLOB_REQ                                                                                 \
    {                                                                                              \
        "glob", PC_MP_GLOB, 1, NULL, 0, 0, "shell glob over key bytes"                             \
    }
#define P_LIMIT                                                                                    \
    {                                                                                              \
        "limit", PC_MP_UINT, 0, STR(PC_MGMT_LIMIT_DEFAULT_N), 1, PC_MGMT_LIMIT_MAX,                \
            "most keys returned; the reply flags truncation"                                       \
    }

/* The numbers as literals for the defaults (a default is text). */
#define PC_MGMT_LIMIT_DEFAULT_N 1000
#define PC_MGMT_SCAN_COUNT_DEFAULT_N 10
_Static_assert(PC_MGMT_LIMIT_DEFAULT_N == PC_MGMT_LIMIT_DEFAULT, "limit default");
_Static_assert(PC_MGMT_SCAN_COUNT_DEFAULT_N == PC_MGMT_SCAN_COUNT_DEFAULT, "count default");

static const pc_mgmt_param pc_p_stats[] = {P_COLL_ALL};

static const pc_mgmt_param pc_p_list[] = {P_GLOB_REQ, P_COLL, P_LIMIT};

static const pc_mgmt_param pc_p_scan[] = {
    {"cursor", PC_MP_CURSOR, 1, NULL, 0, 0, "0 to start, then the cursor the last call returned"},
    {"glob", PC_MP_GLOB, 0, NULL, 0, 0, "shell glob over key bytes (default: every key)"},
    {"count", PC_MP_UINT, 0, STR(PC_MGMT_SCAN_COUNT_DEFAULT_N), 1, PC_MGMT_SCAN_COUNT_MAX,
     "buckets visited by this call"},
    P_COLL,
};

static const pc_mgmt_param pc_p_get[] = {
    {"key", PC_MP_STRING, 1, NULL, 0, PC_KEY_MAX, "the key (bytes)"},
    P_COLL,
};

static const pc_mgmt_param pc_p_set[] = {
    {"key", PC_MP_STRING, 1, NULL, 0, PC_KEY_MAX, "the key (bytes)"},
    {"value", PC_MP_STRING, 1, NULL, 0, PC_VALUE_MAX, "the value (bytes)"},
    {"ttl", PC_MP_TTL, 0, "0", 0, PC_MGMT_TTL_MAX, "seconds to live, 0 = never expires"},
    P_COLL,
};

static const pc_mgmt_param pc_p_ttl[] = {
    P_GLOB_REQ,
    {"ttl", PC_MP_TTL, 1, NULL, 0, PC_MGMT_TTL_MAX, "seconds to live, 0 = never expires"},
    P_COLL,
};

static const pc_mgmt_param pc_p_del[] = {P_GLOB_REQ, P_COLL};

#define N(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

const pc_mgmt_cmd pc_mgmt_builtins[] = {
    {"perf_stats", "per-collection gauges and counters, plus the memory tier", pc_p_stats,
     N(pc_p_stats), pc_mgmt_perf_stats, NULL},
    {"perf_stats_reset", "re-baseline the counters (gauges are unaffected)", pc_p_stats,
     N(pc_p_stats), pc_mgmt_perf_stats_reset, NULL},
    {"perf_keys", "names and TTLs of the keys matching a glob, bounded", pc_p_list, N(pc_p_list),
     pc_mgmt_perf_keys, NULL},
    {"perf_scan", "cursor-based incremental iteration over key names", pc_p_scan, N(pc_p_scan),
     pc_mgmt_perf_scan, NULL},
    {"perf_dump", "names, values and TTLs of the keys matching a glob, bounded", pc_p_list,
     N(pc_p_list), pc_mgmt_perf_dump, NULL},
    {"perf_mget", "index-paired key and value lists for a glob, bounded", pc_p_list, N(pc_p_list),
     pc_mgmt_perf_mget, NULL},
    {"perf_mget_json", "the keys matching a glob as one JSON object text", pc_p_list, N(pc_p_list),
     pc_mgmt_perf_mget_json, NULL},
    {"perf_get", "one key: value, TTL, size, counter flag", pc_p_get, N(pc_p_get), pc_mgmt_perf_get,
     NULL},
    {"perf_set", "write one key, optionally with a TTL", pc_p_set, N(pc_p_set), pc_mgmt_perf_set,
     NULL},
    {"perf_ttl", "re-arm the TTL of every key matching a glob", pc_p_ttl, N(pc_p_ttl),
     pc_mgmt_perf_ttl, NULL},
    {"perf_del", "delete every key matching a glob", pc_p_del, N(pc_p_del), pc_mgmt_perf_del, NULL},
};

const unsigned pc_mgmt_nbuiltins = N(pc_mgmt_builtins);
