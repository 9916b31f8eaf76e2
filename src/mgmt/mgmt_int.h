/*
 * mgmt_int.h - what the files of the management layer share and nothing
 * outside src/mgmt/ may use: the context and call structures, the built-in
 * command bodies, the JSON backend's binary-name member, the collector the
 * listing commands walk with, and the quoting of user bytes in messages.
 */
#ifndef PC_MGMT_INT_H
#define PC_MGMT_INT_H

#include <stdbool.h>

#include "pcache_mgmt.h"

struct pc_mgmt {
    pc_cache *c;       /* borrowed */
    pc_coll *def;      /* the default collection */
    pc_mgmt_cmd *cmds; /* owned array of copies, registration order */
    unsigned ncmds, capcmds;
    pc_mgmt_stats_fn stats_fn; /* perf_stats extension, may be NULL */
    void *stats_ctx;
};

struct pc_mgmt_val {
    bool given;   /* passed by the caller */
    bool present; /* given, or defaulted */
    const void *p;
    size_t len;
    uint64_t u;
    pc_coll *coll;
};

struct pc_mgmt_call {
    pc_mgmt *m;
    const pc_mgmt_cmd *cmd;
    struct pc_mgmt_val v[PC_MGMT_MAX_PARAMS];
};

/* The built-in command table (mgmt_table.c). */
extern const pc_mgmt_cmd pc_mgmt_builtins[];
extern const unsigned pc_mgmt_nbuiltins;

/* Parameter indices of the built-in commands (the order of mgmt_table.c). */
enum { PC_LA_GLOB = 0, PC_LA_COLL = 1, PC_LA_LIMIT = 2 }; /* keys, dump, mget, mget_json */
enum { PC_SA_CURSOR = 0, PC_SA_GLOB = 1, PC_SA_COUNT = 2, PC_SA_COLL = 3 }; /* scan */
enum { PC_GA_KEY = 0, PC_GA_COLL = 1 };                                     /* get */
enum { PC_WA_KEY = 0, PC_WA_VALUE = 1, PC_WA_TTL = 2, PC_WA_COLL = 3 };     /* set */
enum { PC_TA_GLOB = 0, PC_TA_TTL = 1, PC_TA_COLL = 2 };                     /* ttl */
enum { PC_DA_GLOB = 0, PC_DA_COLL = 1 };                                    /* del */

/* Built-in command bodies (mgmt_cmd_*.c). */
int pc_mgmt_perf_stats(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_stats_reset(void *, const pc_mgmt_call *, const pc_result_ops *, void *,
                             pc_mgmt_err *);
int pc_mgmt_perf_keys(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_scan(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_dump(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_mget(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_mget_json(void *, const pc_mgmt_call *, const pc_result_ops *, void *,
                           pc_mgmt_err *);
int pc_mgmt_perf_get(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_set(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_ttl(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);
int pc_mgmt_perf_del(void *, const pc_mgmt_call *, const pc_result_ops *, void *, pc_mgmt_err *);

/* Parses one argument of parameter p (len bytes at v) into out; on failure
 * fills err with a message prefixed by cmd's name. The collection of a
 * PC_MP_COLL* parameter is resolved against m. */
int pc_mgmt_parse_value(const pc_mgmt *m, const char *cmd, const pc_mgmt_param *p, const void *v,
                        size_t len, struct pc_mgmt_val *out, pc_mgmt_err *err);

/* Writes s (len bytes) into buf as a double-quoted excerpt of at most
 * about 48 bytes: printable ASCII as is, '"' and '\' backslashed, other
 * bytes as \xNN, "..." appended when cut. Always NUL-terminates. Returns
 * buf. */
char *pc_mgmt_quote(char *buf, size_t cap, const void *s, size_t len);
#define PC_MGMT_QUOTE_CAP 224u

/* The JSON backend, from the inside: an object member whose name is any
 * byte string (escaped like a value) and whose value is a string. */
int pc_json_member_bin(pc_json *j, const void *name, size_t nlen, const void *v, size_t vlen);
/* Moves the finished text out of j (caller-owned, free()); j is reset. */
int pc_json_take(pc_json *j, char **text, size_t *len);

/* Returns from the calling function with x's code when x fails: the result
 * builders chain many pc_result_ops calls, each of which can fail. */
#define TRY(x)                                                                                     \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_ != 0)                                                                              \
            return rc_;                                                                            \
    } while (0)

/* ---- the collector: entries copied out of a walk, bounded -------------- */
struct pc_mgmt_item {
    size_t koff, klen, voff, vlen; /* offsets into bytes */
    int64_t ttl_s;                 /* remaining seconds rounded up, -1 = never */
    bool counter;
};
struct pc_mgmt_list {
    uint64_t limit; /* 0 = unbounded */
    bool values;    /* copy values too */
    bool truncated; /* more entries matched than limit */
    int err;
    unsigned char *bytes;
    size_t used, cap;
    struct pc_mgmt_item *items;
    size_t n, icap;
};
/* pc_walk_fn that appends an entry to a struct pc_mgmt_list. */
int pc_mgmt_collect(void *ctx, const pc_entry *e);
void pc_mgmt_list_free(struct pc_mgmt_list *l);
/* Walks coll for glob into l (limit and values set by the caller). */
int pc_mgmt_list_walk(pc_coll *coll, const void *glob, size_t glen, struct pc_mgmt_list *l);
/* ms remaining (-1 = never) to whole seconds, rounded up. */
int64_t pc_mgmt_ttl_s(int64_t ttl_ms);

#endif
