/*
 * pcache_mgmt.h - the management command layer of pcache: one table of
 * commands (perf_stats, perf_keys, perf_get, ...), one parameter machinery
 * and one result-builder interface shared by every host.
 *
 * The layer does not own an output format. A command describes its result
 * through a pc_result_ops builder that the host implements: pcached maps it
 * to JSON (the JSON backend below does that), the OpenSIPS module maps it to
 * MI items. A command is found by name in a context (pc_mgmt) and called
 * with arguments that are positional or named (pc_mgmt_arg). Every argument
 * is parsed and checked against the command's declarative parameter table
 * before the command runs, so a bad argument never changes anything. Other
 * components (the storage layer's perf_save / perf_load / perf_sync) register
 * their own commands into a context with the same machinery. The layer also
 * owns the perf:// URLs by which hosts name a collection (pc_url_parse) and
 * the error code for a malformed URL (PC_EURL).
 *
 * docs/management.md is the user's manual: every command with a real
 * invocation and its real output, checked by tests/unit/test_mgmt_docs.c.
 *
 * Conventions are libpcache's (pcache.h): every function returns int, 0 on
 * success or a negative PC_E* code; "borrowed" pointers are read during the
 * call only; nothing here is thread-safe within one process (a context is
 * used from one thread at a time); the library never prints.
 */
#ifndef PCACHE_MGMT_H
#define PCACHE_MGMT_H

#include <stddef.h>
#include <stdint.h>

#include "pcache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes of this layer (the scheme: pcache.h) ------------------- */
#define PC_EURL (-10) /* a malformed URL (perf://, a db_url, a store URL) */

/* Names a code of this layer or of the engine (pc_strerror below it);
 * static, never NULL. */
const char *pc_mgmt_strerror(int err);

/* ---- URLs: perf://, perf:///name, perf://name, perf:group:///name ---------- */
typedef struct pc_url {
    char group[PC_COLL_NAME_MAX + 1]; /* "" when the URL has no group */
    pc_coll *coll;                    /* the resolved collection */
} pc_url;
/* Parses url (borrowed) against the declared collections. Errors:
 * PC_EURL (malformed, or the cachedb_local "/r" replication marker),
 * PC_ENOCOLL (names an undeclared collection). On error, if errbuf is not
 * NULL, a message naming the problem is written there (NUL-terminated). */
int pc_url_parse(pc_cache *c, const char *url, pc_url *out, char *errbuf, size_t errlen);

/* ---- the result builder ---------------------------------------------------
 * A command's result is exactly one object: its first call is
 * obj_begin(rctx, NULL) and its last the matching obj_end. Inside an object
 * every value carries its member name (a static ASCII identifier such as
 * "entries"); inside an array the name is NULL. Strings are binary-safe
 * (pointer + length, may hold NUL and any byte). Every callback returns 0 or
 * a negative PC_E* code; the first failure aborts the command, which returns
 * that code. The built-in commands report every other error before their
 * first builder call, so on a validation error the builder received nothing.
 * Pointers passed to the callbacks are borrowed for the call. */
typedef struct pc_result_ops {
    int (*obj_begin)(void *rctx, const char *name);
    int (*obj_end)(void *rctx);
    int (*arr_begin)(void *rctx, const char *name);
    int (*arr_end)(void *rctx);
    int (*str)(void *rctx, const char *name, const void *s, size_t len);
    int (*i64)(void *rctx, const char *name, int64_t v);
    int (*u64)(void *rctx, const char *name, uint64_t v);
    int (*dbl)(void *rctx, const char *name, double v); /* NaN/inf: the host's choice */
    int (*boolean)(void *rctx, const char *name, int v);
    int (*null)(void *rctx, const char *name);
} pc_result_ops;

/* ---- byte strings in JSON: the one convention ----------------------------
 * Keys and values are byte strings; JSON strings are Unicode. Every host
 * (pcached's JSON-RPC, the OpenSIPS module's MI replies, pcache-snapshot)
 * writes a byte string the same way (docs/management.md, "Strings in
 * JSON"):
 *  - text (pc_text_ok: well-formed UTF-8, RFC 3629, without a NUL byte) is
 *    a standard JSON string, "key":"café" or the UTF-8 as it is;
 *  - anything else is standard base64 (RFC 4648 §4, padded) under the field
 *    name with "_b64" appended ("key_b64":"/w=="), or, where the string has
 *    no field name (an array element), the object {"b64":"/w=="}.
 * A reader therefore never sees a byte string it must unescape by a private
 * rule, and any language's standard JSON encoder produces what pcached
 * reads back. */

/* 1 when s (n bytes, borrowed) is text by the rule above, else 0. */
int pc_text_ok(const void *s, size_t n);
/* The base64 length of n bytes (padded): 4 * ceil(n / 3). */
size_t pc_b64_len(size_t n);
/* Writes the padded base64 of src (n bytes) into out (cap bytes, no NUL
 * added); *len = pc_b64_len(n). PC_ETOOBIG when cap is short, PC_EINVAL on
 * NULL arguments. */
int pc_b64_encode(const void *src, size_t n, char *out, size_t cap, size_t *len);
/* Decodes padded base64 src (n bytes) into out (cap bytes); *len = the
 * byte count. Only the canonical form is accepted (length a multiple of 4,
 * '=' only at the end, zero padding bits): PC_EINVAL otherwise; PC_ETOOBIG
 * when cap is short. */
int pc_b64_decode(const char *src, size_t n, void *out, size_t cap, size_t *len);

/* ---- the JSON backend -----------------------------------------------------
 * Builds compact JSON text (no whitespace) into a growing buffer. A string
 * member follows the convention above: text as a JSON string ('"' and '\'
 * as \" and \\; \b \f \n \r \t by their short escapes; every other byte
 * below 0x20 and 0x7f as \u00XX, lower-case hex; UTF-8 copied as it is),
 * anything else as "<name>_b64":"<base64>" (or {"b64":"<base64>"} in an
 * array). Doubles are written with 15 significant digits and always
 * with '.', whatever the locale; NaN and infinities as null. */
typedef struct pc_json pc_json;

/* The builder callbacks; rctx is a pc_json *. Static, never NULL. */
const pc_result_ops *pc_json_ops(void);

/* On success *out is caller-owned: pc_json_destroy. */
int pc_json_create(pc_json **out);
/* Accepts NULL. */
void pc_json_destroy(pc_json *j);
/* Empties the buffer and clears a sticky error, ready for a new document. */
void pc_json_reset(pc_json *j);
/* The finished document: *text is NUL-terminated (the NUL not counted in
 * *len) and valid until the next call on j. PC_EINVAL while a container is
 * still open or nothing was written; the code of the first failed builder
 * call (PC_EHEAP: out of memory, PC_EINVAL: a misuse such as a member
 * without a name, a second root value, more than 32 levels) if one failed. */
int pc_json_text(const pc_json *j, const char **text, size_t *len);

/* ---- the command context -------------------------------------------------- */
typedef struct pc_mgmt pc_mgmt; /* process-local; one per host is typical */

/* Creates a context over cache c (borrowed; must outlive the context) with
 * every built-in command registered. default_coll (borrowed, NUL-terminated)
 * names the collection a command uses when its collection parameter is
 * omitted; NULL means "default", the collection of a bare perf:// URL.
 * PC_ENOCOLL when it is not declared. On success *out is caller-owned:
 * pc_mgmt_destroy. */
int pc_mgmt_create(pc_cache *c, const char *default_coll, pc_mgmt **out);
/* Accepts NULL. */
void pc_mgmt_destroy(pc_mgmt *m);
/* The context's cache and default collection (valid as long as the cache). */
pc_cache *pc_mgmt_cache(const pc_mgmt *m);
pc_coll *pc_mgmt_default_coll(const pc_mgmt *m);

/* An error: code is the negative PC_E* code the call returned, msg a
 * NUL-terminated sentence naming the command and the problem, e.g.
 * 'perf_keys: parameter "limit": out of range [1, 100000]: "0"'. Bytes of
 * user input that are not printable ASCII appear in msg as \xNN. */
#define PC_MGMT_MSG_MAX 512u
typedef struct pc_mgmt_err {
    int code;
    char msg[PC_MGMT_MSG_MAX];
} pc_mgmt_err;

/* One argument. name == NULL: positional; otherwise the parameter's name
 * (nlen bytes, no NUL needed). val is binary-safe (len bytes). Borrowed. */
typedef struct pc_mgmt_arg {
    const char *name;
    size_t nlen;
    const void *val;
    size_t len;
} pc_mgmt_arg;

#define PC_MGMT_MAX_ARGS 32u

/* Runs command cmd (NUL-terminated name) with nargs arguments (borrowed).
 * Binding: named arguments go to the parameter of that name; positional
 * ones then fill, in order, the parameters not given by name. Every
 * argument is parsed and checked, the collection resolved, before the
 * command acts. The result goes to ops (every callback must be set) with
 * rctx passed through. err may be NULL; it is written only on failure.
 * Errors: PC_EINVAL (unknown command, unknown or repeated parameter name,
 * too many positional arguments, a missing required parameter, a value
 * that does not parse or is out of range, a malformed glob or cursor),
 * PC_ETOOBIG (a key, value or glob past its limit), PC_ENOCOLL (unknown
 * collection), PC_ENOTFOUND (perf_get of an absent key), PC_ENOMEM (the
 * arena is full: perf_set dropped the write), PC_EHEAP (out of memory), or
 * whatever a builder callback returned. */
int pc_mgmt_run(pc_mgmt *m, const char *cmd, const pc_mgmt_arg *args, unsigned nargs,
                const pc_result_ops *ops, void *rctx, pc_mgmt_err *err);

/* ---- command lines -------------------------------------------------------
 * A command line as typed in a CLI or written in docs/management.md:
 *     perf_keys "session-*" th limit=50
 * The first word is the command. Words are separated by blanks (space, tab,
 * CR, LF). A word of the form NAME=VALUE, with NAME an identifier
 * ([A-Za-z_][A-Za-z0-9_]*), is a named argument; any other word, and every
 * word that starts with a quote, is positional (so "a=b" quoted is the
 * value a=b). A value is bare (its bytes as written, up to the next blank),
 * '...' (literal, no escapes) or "..." (escapes \" \\ \n \r \t \0 and \xHH
 * for any byte; any other backslash is kept with the byte after it, so a
 * glob's "\*" reaches the glob intact). */
typedef struct pc_mgmt_line pc_mgmt_line; /* a tokenized line */

/* Tokenizes line (len bytes, borrowed). On success *out is caller-owned
 * (pc_mgmt_line_free). PC_EINVAL with err set on an empty line, an
 * unterminated quote, a bad \x escape, a quote inside a bare word, text
 * glued to a closing quote, or more than PC_MGMT_MAX_ARGS arguments. */
int pc_mgmt_line_parse(const char *line, size_t len, pc_mgmt_line **out, pc_mgmt_err *err);
/* The command word (NUL-terminated) and the arguments; both valid until
 * pc_mgmt_line_free. */
const char *pc_mgmt_line_cmd(const pc_mgmt_line *l);
unsigned pc_mgmt_line_args(const pc_mgmt_line *l, const pc_mgmt_arg **args);
/* Accepts NULL. */
void pc_mgmt_line_free(pc_mgmt_line *l);

/* pc_mgmt_line_parse + pc_mgmt_run. */
int pc_mgmt_run_line(pc_mgmt *m, const char *line, size_t len, const pc_result_ops *ops, void *rctx,
                     pc_mgmt_err *err);

/* ---- the command table ---------------------------------------------------- */
enum pc_mgmt_ptype {
    PC_MP_STRING = 1,  /* bytes, at most max of them (min is ignored) */
    PC_MP_GLOB = 2,    /* a glob accepted by pc_glob_check (<= PC_GLOB_MAX bytes) */
    PC_MP_UINT = 3,    /* a decimal integer in [min, max] */
    PC_MP_TTL = 4,     /* seconds in [0, max], 0 = never expires */
    PC_MP_CURSOR = 5,  /* a perf_scan cursor: a decimal uint64 */
    PC_MP_COLL = 6,    /* a collection name; omitted = the context's default */
    PC_MP_COLL_ALL = 7 /* a collection name; omitted = every collection */
};

#define PC_MGMT_MAX_PARAMS 8u
#define PC_MGMT_NAME_MAX 63u        /* bytes in a command or parameter name */
#define PC_MGMT_TTL_MAX 315360000u  /* ten years, in seconds */
#define PC_MGMT_LIMIT_DEFAULT 1000u /* perf_keys / perf_dump / perf_mget */
#define PC_MGMT_LIMIT_MAX 100000u
#define PC_MGMT_SCAN_COUNT_DEFAULT 10u /* buckets per perf_scan call */
#define PC_MGMT_SCAN_COUNT_MAX 65536u

/* One parameter. def is the default as text, parsed by the same rules as an
 * argument (checked at registration); NULL = absent when omitted. A
 * required parameter has no default; collection parameters take none (their
 * default is the context's). All pointers static (they must outlive every
 * context the command is registered in). */
typedef struct pc_mgmt_param {
    const char *name;
    int type; /* enum pc_mgmt_ptype */
    int required;
    const char *def;
    uint64_t min, max; /* PC_MP_UINT: range; PC_MP_STRING, PC_MP_TTL: max */
    const char *help;  /* one line for docs and CLI help */
} pc_mgmt_param;

typedef struct pc_mgmt_call pc_mgmt_call; /* a bound, validated invocation */

/* A command's body. cmd_ctx is pc_mgmt_cmd.ctx; call, ops, rctx and err are
 * borrowed for the call. Returns 0 or a negative PC_E* code; on failure it
 * fills err (pc_mgmt_errorf) unless a builder callback failed. */
typedef int (*pc_mgmt_fn)(void *cmd_ctx, const pc_mgmt_call *call, const pc_result_ops *ops,
                          void *rctx, pc_mgmt_err *err);

typedef struct pc_mgmt_cmd {
    const char *name;    /* [a-z0-9_]+, unique in the context */
    const char *summary; /* one line */
    const pc_mgmt_param *params;
    unsigned nparams; /* <= PC_MGMT_MAX_PARAMS */
    pc_mgmt_fn run;
    void *ctx; /* passed to run; owned by the registering component */
} pc_mgmt_cmd;

/* Adds a command to m. *cmd is copied; its strings and params are borrowed
 * for the context's life. PC_EEXIST if the name is taken, PC_EINVAL for a
 * malformed table (bad or repeated names, unknown type, a default that does
 * not parse, a required parameter with a default, min > max). */
int pc_mgmt_register(pc_mgmt *m, const pc_mgmt_cmd *cmd);
/* The registered commands in registration order (built-ins first), and a
 * lookup by name: NULL when absent. Valid as long as the context. */
unsigned pc_mgmt_cmd_count(const pc_mgmt *m);
const pc_mgmt_cmd *pc_mgmt_cmd_at(const pc_mgmt *m, unsigned i);
const pc_mgmt_cmd *pc_mgmt_cmd_find(const pc_mgmt *m, const char *name);

/* ---- inside a command: the bound arguments, by parameter index -------------
 * All results are valid during the command's run only. */
pc_mgmt *pc_mgmt_call_mgmt(const pc_mgmt_call *call);
/* 1 when the caller passed parameter i, 0 when it was omitted. */
int pc_mgmt_call_given(const pc_mgmt_call *call, unsigned i);
/* PC_MP_STRING / PC_MP_GLOB: the bytes (given or default); NULL (and *len
 * 0) when omitted without a default. */
const void *pc_mgmt_call_bytes(const pc_mgmt_call *call, unsigned i, size_t *len);
/* PC_MP_UINT / PC_MP_TTL / PC_MP_CURSOR: the number (0 when absent). */
uint64_t pc_mgmt_call_uint(const pc_mgmt_call *call, unsigned i);
/* PC_MP_COLL: the collection (never NULL). PC_MP_COLL_ALL: the collection,
 * or NULL when omitted (= every collection). */
pc_coll *pc_mgmt_call_coll(const pc_mgmt_call *call, unsigned i);

/* Writes a message into err (may be NULL) and returns code. */
int pc_mgmt_errorf(pc_mgmt_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- extending perf_stats ------------------------------------------------
 * The storage layer adds last save / load / sync members to each
 * collection's object of perf_stats. fn runs inside that object, after the
 * engine's members, once per listed collection; it emits members through
 * ops/rctx and returns 0 or a negative code (which fails perf_stats). One
 * hook per context; fn NULL removes it. ctx is borrowed for the context's
 * life. */
typedef int (*pc_mgmt_stats_fn)(void *ctx, pc_coll *coll, const pc_result_ops *ops, void *rctx);
int pc_mgmt_stats_hook(pc_mgmt *m, pc_mgmt_stats_fn fn, void *ctx);

/* ---- multi-get as one JSON object ----------------------------------------
 * The object form of perf_mget (the OpenSIPS perf_mget_json script
 * function): {"key":"value",...} for the live keys of coll matching glob
 * (glen bytes; a well-formed glob, see pc_glob_check), values as read
 * (counters as decimal), by the JSON backend's convention: "key":"text" or
 * "key":{"b64":...}; a key that is not text names its member by its base64,
 * whose value is {"key_b64":...,"value"|"value_b64":...}. At most limit
 * keys (0 = no limit); *truncated (may be NULL) is set to 1 when more
 * matched. A key moved by a concurrent table split may appear twice. On
 * success *json is caller-owned (free()), NUL-terminated, *len its length.
 * Errors: PC_EINVAL / PC_ETOOBIG (glob), PC_EHEAP (memory). */
int pc_mget_json(pc_coll *coll, const void *glob, size_t glen, uint64_t limit, char **json,
                 size_t *len, int *truncated);

#ifdef __cplusplus
}
#endif
#endif /* PCACHE_MGMT_H */
