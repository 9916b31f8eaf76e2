/*
 * snap_main.c - pcache-snapshot: main, the verb table, opening a store and
 * turning errors into messages and exit codes (docs/pcache-snapshot.md).
 *
 * The tool is read-only except `compact`: every store is opened with
 * PC_STORE_RDONLY, which never blocks a process that saves into it, and
 * every verb reads each collection in one read transaction, so it sees one
 * complete snapshot even while a save commits. The one way a reader can be
 * kept out is a process holding LMDB's lock file exclusively (an opener
 * waits for it without a timeout): snap_open asks first and reports the
 * holder after --wait milliseconds instead of hanging.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "snap.h"

struct snap_verb {
    const char *name;
    int (*run)(snap_ctx *cx, int argc, char **argv);
    const char *synopsis;
    const char *help;
};

/* The verb table. export / import (ODBC) will be two more rows. */
static const struct snap_verb snap_verbs[] = {
    {"info", snap_cmd_info, "info STORE",
     "Shows the store: format version, creation time, boot generation, file and map sizes,\n"
     "readers, dictionary, journal segments pending and quarantined, and per collection\n"
     "its generation, records, blocks, raw and stored bytes, saved-at time and pending\n"
     "journal segments."},
    {"quarantine", snap_cmd_quarantine, "quarantine STORE",
     "Lists the journal segments a save moved aside instead of retiring them because the\n"
     "replay cannot read them (damaged header, newer version): file, size and reason."},
    {"ls", snap_cmd_ls, "ls STORE [COLLECTION [GLOB]] [--limit N] [--expired]",
     "Without COLLECTION: lists the collections. With it: lists the keys (matching GLOB)\n"
     "with their type, size and TTL, in snapshot order."},
    {"keys", snap_cmd_keys, "keys STORE COLLECTION [GLOB] [--limit N] [--expired]",
     "Prints the keys of COLLECTION (matching GLOB), one per line, escaped reversibly."},
    {"get", snap_cmd_get, "get STORE COLLECTION KEY [--escaped] [--raw] [--expired]",
     "Shows one key: type (string or counter), size, TTL and value. --escaped reads KEY\n"
     "with \\xNN escapes (binary keys); --raw writes only the value's bytes."},
    {"dump", snap_cmd_dump, "dump STORE [COLLECTION...] [--format json|csv] [--expired]",
     "Writes every record (of every collection, or the ones named) as JSON lines (default)\n"
     "or CSV, binary keys and values escaped reversibly (docs/pcache-snapshot.md)."},
    {"verify", snap_cmd_verify, "verify STORE [COLLECTION]",
     "Walks every LMDB page of the store (meta, branch, leaf, overflow, free list), then\n"
     "checks every block and record checksum, that every record decodes and is in order,\n"
     "and re-derives each collection's count and content checksum. Exit 0 when clean,\n"
     "1 with the list of what is wrong."},
    {"salvage", snap_cmd_salvage, "salvage STORE NEWDIR",
     "Copies every block of a damaged STORE that still verifies into a new store NEWDIR\n"
     "(which must not exist or be empty), re-deriving each collection's meta, and reports\n"
     "per collection what was copied and what was lost. STORE is read without LMDB and\n"
     "never written. Exit 0 when nothing was lost, 1 when something was."},
    {"diff", snap_cmd_diff,
     "diff STORE1 STORE2 [-c COLLECTION] | diff STORE -a COLL1 -b COLL2 | diff STORE1 STORE2 "
     "-a COLL1 -b COLL2",
     "Compares two snapshots key by key: added (only on the right), removed (only on the\n"
     "left), changed (value, type or expiry). Exit 0 when identical, 1 when they differ."},
    {"compact", snap_cmd_compact, "compact STORE [--force]",
     "Rewrites data.mdb without free pages, atomically (verify first; --force skips the\n"
     "refusal of a store with problems). The store must not be open in another process."},
    {"export", snap_cmd_export,
     "export STORE TARGET [COLLECTION] [--create-tables] [--no-progress]",
     "Copies the snapshot of COLLECTION (default: every collection) into the SQL database\n"
     "TARGET (odbc://DSN, odbc:CONNSTR, DSN=..., DRIVER=...) in ONE SQL transaction: each\n"
     "collection's rows replaced and its generation bumped; any error rolls all of it back.\n"
     "Expired records are skipped. A progress bar runs on a terminal."},
    {"import", snap_cmd_import, "import STORE TARGET [COLLECTION] [--create-store] [--no-progress]",
     "Copies the rows of COLLECTION (default: every collection of the database's generation\n"
     "table) from TARGET into STORE as new snapshots, one LMDB transaction per collection.\n"
     "Expired rows are skipped. Writes to STORE (--create-store makes a new one)."},
};
#define SNAP_NVERBS (sizeof snap_verbs / sizeof *snap_verbs)

static const struct snap_verb *snap_find(const char *name)
{
    for (size_t i = 0; i < SNAP_NVERBS; i++)
        if (strcmp(snap_verbs[i].name, name) == 0)
            return &snap_verbs[i];
    return NULL;
}

static void snap_usage(FILE *f)
{
    fprintf(f, "usage: pcache-snapshot VERB [options] ...\n\nverbs:\n");
    for (size_t i = 0; i < SNAP_NVERBS; i++)
        fprintf(f, "  %s\n", snap_verbs[i].synopsis);
    fprintf(f, "\ncommon options: --json (machine-readable output), -q (no store log lines),\n"
               "  --wait MS (how long a locked store may delay opening, default 2000),\n"
               "  --help (per verb: pcache-snapshot VERB --help), --version\n"
               "STORE is a directory or lmdb:///absolute/path. Manual: docs/pcache-snapshot.md\n");
}

int snap_verb_help(snap_ctx *cx, int code)
{
    const struct snap_verb *v = snap_find(cx->verb);
    FILE *f = code == 0 ? cx->out : stderr;
    if (v == NULL)
        snap_usage(f);
    else
        fprintf(f,
                "usage: pcache-snapshot %s\n\n%s\n\noptions: --json, -q, --wait MS, --help\n"
                "exit codes: docs/pcache-snapshot.md\n",
                v->synopsis, v->help);
    return code;
}

static const char *snap_code_name(int code)
{
    static const char *const names[] = {"ok",
                                        "found",
                                        "usage",
                                        "no_such_path",
                                        "not_a_store",
                                        "newer_format",
                                        "no_such_collection",
                                        "no_such_key",
                                        "corrupt",
                                        "locked",
                                        "io",
                                        "database"};
    return code >= 0 && code <= SNAP_DB ? names[code] : "error";
}

int snap_fail(snap_ctx *cx, int code, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(cx->last_error, sizeof cx->last_error, "%s", msg);
    fflush(cx->out);
    if (cx->json) {
        fprintf(stderr, "{\"error\":{\"verb\":");
        snap_jstr(stderr, cx->verb, strlen(cx->verb));
        fprintf(stderr, ",\"exit\":%d,\"code\":\"%s\",\"message\":", code, snap_code_name(code));
        snap_jstr(stderr, msg, strlen(msg));
        fprintf(stderr, "}}\n");
    } else {
        fprintf(stderr, "%s %s: %s\n", cx->prog, cx->verb, msg);
    }
    return code;
}

int snap_exit_of(int rc)
{
    switch (rc) {
    case 0:
        return SNAP_OK;
    case PC_ESTORE:
        return SNAP_NOTSTORE;
    case PC_EFORMAT:
        return SNAP_NEWER;
    case PC_ECORRUPT:
        return SNAP_CORRUPT;
    case PC_ELOCKED:
    case PC_EBUSY:
        return SNAP_LOCKED;
    case PC_EURL:
    case PC_EINVAL:
        return SNAP_USAGE;
    case PC_ENOTFOUND:
        return SNAP_NOCOLL;
    default:
        return SNAP_IO;
    }
}

int snap_finish(snap_ctx *cx, int code)
{
    if (fflush(cx->out) != 0 || ferror(cx->out))
        return snap_fail(cx, SNAP_IO, "writing the output failed: %s: the output is incomplete",
                         strerror(errno));
    return code;
}

int snap_common_opt(snap_ctx *cx, int c, const char *arg)
{
    long long v;
    switch (c) {
    case 'J':
        cx->json = 1;
        return -1;
    case 'q':
        cx->quiet = 1;
        return -1;
    case 'W':
        if ((v = snap_parse_count(arg)) < 0 || v > 3600000)
            return snap_fail(cx, SNAP_USAGE, "--wait takes milliseconds (0..3600000), not '%s'",
                             arg);
        cx->wait_ms = (int)v;
        return -1;
    case 'h':
        return snap_verb_help(cx, SNAP_OK);
    default: /* getopt printed what was wrong */
        return snap_verb_help(cx, SNAP_USAGE);
    }
}

int snap_common_args(snap_ctx *cx, int argc, char **argv, int min, int max)
{
    static const struct option opts[] = {SNAP_COMMON_OPTS, {NULL, 0, NULL, 0}};
    int c, r;
    while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1)
        if ((r = snap_common_opt(cx, c, optarg)) >= 0)
            return r;
    if (argc - optind < min || argc - optind > max)
        return snap_verb_help(cx, SNAP_USAGE);
    return -1;
}

long long snap_parse_count(const char *s)
{
    char *end;
    errno = 0;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    long long v = strtoll(s, &end, 10);
    return errno != 0 || *end != 0 ? -1 : v;
}

/* Store log lines (the library never prints): errors and warnings to
 * stderr, since they name the corrupt block or key. */
static void snap_log(void *ctx, int level, const char *msg)
{
    snap_ctx *cx = ctx;
    if (level == PC_LOG_ERR)
        cx->nlogs++;
    if (!cx->quiet && level <= PC_LOG_WARN) {
        fflush(cx->out);
        fprintf(stderr, "%s %s: %s\n", cx->prog, cx->verb, msg);
    }
}

static const char *snap_dir_of(const char *path)
{
    return strncmp(path, "lmdb:///", 8) == 0 ? path + 7 : path;
}

/* The path is a directory holding data.mdb that no process holds locked
 * (waiting up to cx->wait_ms): SNAP_OK, else the error printed and its exit
 * code. A data.mdb that cannot be looked at is left to the store's check
 * or open, which name the permission problem. */
static int snap_precheck(snap_ctx *cx, const char *dir)
{
    struct stat st;
    char data[4200];
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return snap_fail(cx, SNAP_NOPATH, "%s: no such file or directory", dir);
        return snap_fail(cx, SNAP_IO, "%s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return snap_fail(cx, SNAP_NOTSTORE,
                         "%s is not a pcache store: not a directory (a store is a directory "
                         "holding data.mdb)",
                         dir);
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    if (stat(data, &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return snap_fail(cx, SNAP_NOTSTORE, "%s is not a pcache store: it holds no data.mdb", dir);
    /* an opener of LMDB waits without a timeout for a process that holds
     * lock.mdb exclusively: ask first, and name the holder after --wait */
    long pid = 0;
    int rc, waited = 0;
    while ((rc = pc_store_lock_owner(dir, &pid)) == PC_ELOCKED && waited < cx->wait_ms) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        waited += 10;
    }
    if (rc == PC_ELOCKED)
        return snap_fail(cx, SNAP_LOCKED,
                         "store %s is locked exclusively by process %ld (fcntl lock on lock.mdb, "
                         "held for more than %d ms): no reader can open it until that process "
                         "releases the lock",
                         dir, pid, cx->wait_ms);
    /* PC_EIO: lock.mdb cannot be read here; then LMDB cannot open it either
     * (no wait), and the open names the permission problem */
    return SNAP_OK;
}

int snap_exit_of_verdict(int verdict)
{
    return verdict == PC_ESTORE    ? SNAP_NOTSTORE
           : verdict == PC_EFORMAT ? SNAP_NEWER
           : verdict != 0          ? SNAP_CORRUPT
                                   : SNAP_OK;
}

int snap_check(snap_ctx *cx, const char *path, snap_check_result *cr)
{
    memset(cr, 0, sizeof *cr);
    int r = snap_precheck(cx, snap_dir_of(path));
    if (r != SNAP_OK)
        return r;
    char err[700];
    int rc = pc_store_check(path, PC_STORE_CHECK_DEEP, &cr->list, &cr->n, err, sizeof err);
    if (rc != 0)
        return snap_fail(cx, snap_exit_of(rc), "%s", err[0] ? err : pc_store_strerror(rc));
    cr->verdict =
        pc_store_verdict(path, cr->list, cr->n, PC_STORE_CHECK_DEEP, cr->msg, sizeof cr->msg);
    cr->reader = pc_store_verdict(path, cr->list, cr->n, 0, NULL, 0);
    return SNAP_OK;
}

void snap_check_free(snap_check_result *cr)
{
    pc_store_problems_free(cr->list, cr->n);
    cr->list = NULL;
    cr->n = 0;
}

int snap_open(snap_ctx *cx, const char *path, pc_store **out)
{
    const char *dir = snap_dir_of(path);
    int rc, r = snap_precheck(cx, dir);
    if (r != SNAP_OK)
        return r;
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_RDONLY | (cx->nocheck ? PC_STORE_NOCHECK : 0);
    sc.log.fn = snap_log;
    sc.log.ctx = cx;
    sc.log.level = PC_LOG_WARN;
    sc.threads = 1;
    char err[700];
    int saved_quiet = cx->quiet;
    cx->quiet = 1; /* the open's error comes back in err: print it once */
    rc = pc_store_open_checked(path, &sc, out, err, sizeof err);
    cx->quiet = saved_quiet;
    if (rc != 0) {
        int code = snap_exit_of(rc);
        if (rc == PC_ESTORE && strstr(err, "not a pcache store") == NULL)
            return snap_fail(cx, code, "%s is not a pcache store: %s", dir, err);
        /* a lock.mdb this user may not write keeps every reader out: as a
         * lock would (a data.mdb or directory it may not read is an I/O
         * error, with the permission named) */
        if (rc == PC_EIO && strstr(err, "permission denied") != NULL &&
            strstr(err, "lock.mdb") != NULL)
            return snap_fail(cx, SNAP_LOCKED, "%s", err);
        return snap_fail(cx, code, "%s", err);
    }
    return SNAP_OK;
}

int snap_open_maybe_same(snap_ctx *cx, const char *path, const char *other_path, pc_store *other,
                         pc_store **out, int *shared)
{
    struct stat a, b;
    *shared = 0;
    if (other != NULL && stat(snap_dir_of(path), &a) == 0 &&
        stat(snap_dir_of(other_path), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        *shared = 1;
        *out = other;
        return SNAP_OK;
    }
    return snap_open(cx, path, out);
}

int snap_coll_meta(snap_ctx *cx, pc_store *s, const char *name, pc_store_coll_meta *m)
{
    size_t n = strlen(name);
    if (n == 0 || n > PC_COLL_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
                     "WXYZ0123456789_.-") != n)
        return snap_fail(cx, SNAP_NOCOLL,
                         "'%s' is not a collection name (1-63 bytes of [A-Za-z0-9_.-])", name);
    int rc = pc_store_coll_meta_get(s, name, m);
    if (rc == PC_ENOTFOUND)
        return snap_fail(cx, SNAP_NOCOLL, "store %s has no collection '%s' (see: info)",
                         pc_store_path(s), name);
    if (rc == PC_EFORMAT)
        return snap_fail(cx, SNAP_NEWER,
                         "store %s: collection %s was written by a newer format version",
                         pc_store_path(s), name);
    if (rc == PC_ECORRUPT)
        return snap_fail(cx, SNAP_CORRUPT,
                         "store %s: collection %s: its meta record is corrupt (run verify)",
                         pc_store_path(s), name);
    if (rc != 0)
        return snap_fail(cx, snap_exit_of(rc), "store %s: collection %s: %s", pc_store_path(s),
                         name, pc_store_strerror(rc));
    return SNAP_OK;
}

/* Runs the verb in a forked child. The store is checked before LMDB reads
 * it (pc_store_open), but a store can change under a reader and LMDB trusts
 * every page: if the reader dies of a signal, this process is still here to
 * say so, instead of the shell reporting a segmentation fault after output
 * that looked whole. */
static int snap_run_isolated(snap_ctx *cx, const struct snap_verb *v, int argc, char **argv)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) /* no isolation to be had: run it here */
        return v->run(cx, argc - 1, argv + 1);
    if (pid == 0) {
        /* the verb sees argv[0] = its name, then its own arguments */
        int code = v->run(cx, argc - 1, argv + 1);
        fflush(NULL);
        exit(code);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return snap_fail(cx, SNAP_IO, "waiting for the reader process: %s", strerror(errno));
    }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    return snap_fail(cx, SNAP_CORRUPT,
                     "the store is damaged: the process reading it died of signal %d (%s); "
                     "any output above is incomplete. Run 'pcache-snapshot verify STORE' to "
                     "name the damage and 'pcache-snapshot salvage STORE NEWDIR' to copy what "
                     "still verifies",
                     sig, strsignal(sig));
}

int main(int argc, char **argv)
{
    snap_ctx cx = {.prog = "pcache-snapshot", .verb = "", .out = stdout, .wait_ms = 2000};
    if (argc < 2) {
        snap_usage(stderr);
        return SNAP_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        if (argc >= 3 && snap_find(argv[2]) != NULL) {
            cx.verb = argv[2];
            return snap_verb_help(&cx, 0);
        }
        snap_usage(stdout);
        return SNAP_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("pcache-snapshot %s\n", pcache_version());
        return SNAP_OK;
    }
    const struct snap_verb *v = snap_find(argv[1]);
    if (v == NULL) {
        fprintf(stderr, "pcache-snapshot: unknown verb '%s'\n", argv[1]);
        snap_usage(stderr);
        return SNAP_USAGE;
    }
    cx.verb = v->name;
    return snap_run_isolated(&cx, v, argc, argv);
}
