/*
 * snap.h - internals of pcache-snapshot, the offline tool for snapshot
 * stores (docs/pcache-snapshot.md). Not a library: shared by the files of
 * src/tools/snapshot/ only. The tool uses the public headers pcache_store.h and
 * pcache_journal.h and nothing inside storage/.
 *
 * Files:
 *   snap_main.c   main, the verb table, options, opening a store, errors
 *   snap_out.c    output: JSON writer, reversible escaping, base64, times
 *   snap_info.c   info, ls, keys, get
 *   snap_dump.c   dump (JSON lines, CSV)
 *   snap_check.c  verify, diff, compact
 *   snap_salvage.c salvage
 *   snap_move.c   export, import (to and from SQL through odbc/)
 *
 * Adding a verb: write
 * `int snap_cmd_NAME(snap_ctx *cx, int argc, char **argv)` in its own file,
 * declare it below and add one row to snap_verbs[] in snap_main.c.
 */
#ifndef PC_SNAP_H
#define PC_SNAP_H

#include <stdint.h>
#include <stdio.h>

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

/* Exit codes: fixed, documented in docs/pcache-snapshot.md. */
enum snap_exit {
    SNAP_OK = 0,
    SNAP_FOUND = 1,    /* verify: problems found; diff: differences found */
    SNAP_USAGE = 2,    /* bad command line */
    SNAP_NOPATH = 3,   /* the path does not exist */
    SNAP_NOTSTORE = 4, /* the path is not a pcache store */
    SNAP_NEWER = 5,    /* written by a newer format version */
    SNAP_NOCOLL = 6,   /* the collection does not exist in the store */
    SNAP_NOKEY = 7,    /* get: the key is not in the collection */
    SNAP_CORRUPT = 8,  /* corrupt data met (details on stderr) */
    SNAP_LOCKED = 9,   /* the store is locked (or in use, for compact) */
    SNAP_IO = 10,      /* I/O or system error, out of memory */
    SNAP_DB = 11       /* export / import: the database refused or failed (ODBC) */
};

typedef struct snap_ctx {
    const char *prog; /* "pcache-snapshot" */
    const char *verb;
    int json;              /* --json */
    int wait_ms;           /* --wait: how long an exclusive lock may delay opening */
    int quiet;             /* -q: no store log lines on stderr */
    int nocheck;           /* snap_open: the verb ran pc_store_check itself */
    FILE *out;             /* stdout */
    unsigned nlogs;        /* store log lines of level ERR seen */
    char last_error[1200]; /* the last message snap_fail printed */
} snap_ctx;

/* ---- snap_main.c -------------------------------------------------------- */
/* Prints "pcache-snapshot VERB: message" on stderr (a JSON object with
 * --json) and returns code, so that `return snap_fail(...)` ends a verb. */
int snap_fail(snap_ctx *cx, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The exit code for a store error code. */
int snap_exit_of(int pc_rc);
/* The structural check of pcached, run by verify and info so that the
 * three classify a store alike and in the same words (pc_store_verdict). */
typedef struct snap_check_result {
    pc_store_problem *list; /* pc_store_check's, PC_STORE_CHECK_DEEP: snap_check_free */
    size_t n;
    int verdict;    /* a writer's (pcached's) verdict: 0, PC_ESTORE, PC_EFORMAT, PC_ECORRUPT */
    int reader;     /* a reader's: non-zero when LMDB must not read the store at all */
    char msg[1000]; /* the verdict's words, when verdict != 0 */
} snap_check_result;
/* Runs the check on path (after snap_open's checks of the path): SNAP_OK
 * with *cr filled, else the error printed and its exit code. */
int snap_check(snap_ctx *cx, const char *path, snap_check_result *cr);
void snap_check_free(snap_check_result *cr);
/* The exit code of a verdict: 0, SNAP_NOTSTORE, SNAP_NEWER, SNAP_CORRUPT. */
int snap_exit_of_verdict(int verdict);
/* Opens the store at path read-only, after checking that the path exists
 * and that no process holds its lock exclusively (waiting up to
 * cx->wait_ms). On failure prints the error and returns its exit code. */
int snap_open(snap_ctx *cx, const char *path, pc_store **out);
/* As snap_open, but a store already opened as `other` (same directory) is
 * returned as is and *shared is set: a process must not open one LMDB
 * environment twice. */
int snap_open_maybe_same(snap_ctx *cx, const char *path, const char *other_path, pc_store *other,
                         pc_store **out, int *shared);
/* Reads a collection's meta, with the error message and exit code for a
 * missing or unreadable one (0 when found). */
int snap_coll_meta(snap_ctx *cx, pc_store *s, const char *name, pc_store_coll_meta *m);
/* Flushes cx->out and turns a write error into SNAP_IO (never a silently
 * truncated output). Returns code when the flush succeeded. */
int snap_finish(snap_ctx *cx, int code);
/* Parses a non-negative decimal; -1 when it is not one. */
long long snap_parse_count(const char *s);
/* The options every verb takes, for its getopt_long table (short options
 * "hq"), and their handling: snap_common_opt returns -1 when it consumed c
 * (go on), else the exit code the verb returns (0 after --help, SNAP_USAGE
 * for an unknown option). */
#define SNAP_COMMON_OPTS                                                                           \
    {"json", no_argument, NULL, 'J'}, {"help", no_argument, NULL, 'h'},                            \
        {"quiet", no_argument, NULL, 'q'},                                                         \
    {                                                                                              \
        "wait", required_argument, NULL, 'W'                                                       \
    }
int snap_common_opt(snap_ctx *cx, int c, const char *arg);
/* The options of a verb that takes only the common ones, then its operands
 * (from argv[optind], min to max of them): -1 to go on, else the exit code
 * the verb returns (its help, or a usage error). */
int snap_common_args(snap_ctx *cx, int argc, char **argv, int min, int max);
/* Prints the verb's help (stdout when code is 0, else stderr); returns code. */
int snap_verb_help(snap_ctx *cx, int code);

/* ---- snap_out.c --------------------------------------------------------- */
/* Writes bytes escaped reversibly: 0x20..0x7e except '\' as themselves,
 * '\' as "\\", every other byte as "\xNN" (lowercase hex). */
void snap_esc(FILE *f, const void *p, size_t n);
/* Decodes that escaping: *out (caller-owned, free) receives the bytes.
 * -1 on a malformed escape (a lone '\', "\x" without two hex digits). */
int snap_unesc(const char *s, size_t n, uint8_t **out, size_t *outlen);
/* 1 when p[0..n) is well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
int snap_utf8_ok(const void *p, size_t n);
void snap_b64(FILE *f, const void *p, size_t n);
/* A JSON string literal of UTF-8 text (control characters escaped). */
void snap_jstr(FILE *f, const void *p, size_t n);
/* "name":"text" when the bytes are UTF-8 without NUL, else "name_b64":"base64". */
void snap_jbytes(FILE *f, const char *name, const void *p, size_t n);
/* Unix ms as "2026-11-30T09:00:00.123Z" into buf; "never" for 0. */
const char *snap_time(int64_t ms, char *buf, size_t cap);
/* A byte count as "1.5 MiB". */
const char *snap_size(uint64_t n, char *buf, size_t cap);

/* ---- verbs -------------------------------------------------------------- */
int snap_cmd_info(snap_ctx *cx, int argc, char **argv);
int snap_cmd_quarantine(snap_ctx *cx, int argc, char **argv);
int snap_cmd_ls(snap_ctx *cx, int argc, char **argv);
int snap_cmd_keys(snap_ctx *cx, int argc, char **argv);
int snap_cmd_get(snap_ctx *cx, int argc, char **argv);
int snap_cmd_dump(snap_ctx *cx, int argc, char **argv);
int snap_cmd_verify(snap_ctx *cx, int argc, char **argv);
int snap_cmd_salvage(snap_ctx *cx, int argc, char **argv);
int snap_cmd_diff(snap_ctx *cx, int argc, char **argv);
int snap_cmd_compact(snap_ctx *cx, int argc, char **argv);
int snap_cmd_export(snap_ctx *cx, int argc, char **argv);
int snap_cmd_import(snap_ctx *cx, int argc, char **argv);

#endif /* PC_SNAP_H */
