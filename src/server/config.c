/*
 * config.c - pcached's configuration: one declarative table of keys (name,
 * type, default, bounds, help) serves the INI reader, the command-line
 * overrides, --check, CONFIG GET and docs/pcached.md (which lists the same
 * keys; tests/server/test_pcached.py checks the two agree).
 *
 * The file format is deliberately small: "key = value" lines, '#' or ';'
 * comments on their own line, blank lines. No sections, no continuation
 * lines, no quoting: a value is the rest of the line with surrounding blanks
 * trimmed. Anything else - an unknown key, a bad value, a key given twice,
 * a line past 4 KiB - is an error naming the file, the line and the key.
 */
#include "pcached.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { CK_STR, CK_UINT, CK_OCTAL, CK_BYTES }; /* CK_BYTES: a uint64_t, Redis's units */

typedef struct srv_key {
    const char *name;
    int type;
    size_t off, size; /* CK_STR: char array of size bytes */
    const char *def;
    unsigned min, max; /* CK_UINT bounds */
    const char *help;
} srv_key;

#define STR(f, d, h)                                                                               \
    {                                                                                              \
#f, CK_STR, offsetof(srv_config, f), sizeof(((srv_config *)0)->f), d, 0, 0, h              \
    }
#define OCTAL(f, d, hi, h)                                                                         \
    {                                                                                              \
#f, CK_OCTAL, offsetof(srv_config, f), 0, d, 0, hi, h                                      \
    }
#define BYTES(f, d, h)                                                                             \
    {                                                                                              \
#f, CK_BYTES, offsetof(srv_config, f), 0, d, 0, 0, h                                       \
    }
#define UINT(f, d, lo, hi, h)                                                                      \
    {                                                                                              \
#f, CK_UINT, offsetof(srv_config, f), 0, d, lo, hi, h                                      \
    }

static const srv_key srv_keys[] = {
    STR(bind, "127.0.0.1",
        "RESP listener addresses (IPv4, IPv6), blank or comma separated; '-addr' = optional"),
    UINT(port, "6380", 0, 65535, "TCP port of the RESP listener (0 = any free port, logged)"),
    STR(unixsocket, "", "RESP on this unix socket too (as Redis's); empty = off"),
    OCTAL(unixsocketperm, "0", 0777, "mode of unixsocket, octal; 0 = as the umask leaves it"),
    UINT(workers, "2", 1, 64, "worker processes serving RESP (SO_REUSEPORT)"),
    STR(requirepass, "", "password clients send with AUTH; empty = no AUTH"),
    STR(collections, "default", "collections: name or name=log2size, separated by ';'"),
    STR(select_collections, "",
        "SELECT index -> collection, comma separated; empty = declaration order"),
    /* 32702: the most that fits 32 GiB with the default collection's
     * tables (PC_REGION_MAX_BYTES; tests/server/test_start_messages.py) */
    UINT(mem_mb, "256", 8, 32702,
         "shared memory for records and tables, MiB (with hugepage_mb and the tables: 32 GiB)"),
    UINT(hugepage_mb, "0", 0, 32694, "huge-page reservation in front of it, MiB"),
    /* a bucket has PC_SLOTS (11) slots, and the buckets a growing table has
     * not split yet hold twice the average: past 6 so many keys overflow
     * into the collection's 1024 chains that a read walks dozens of nodes
     * (docs/operations.md §8 has the measurement) */
    UINT(growth_load_factor, "4", 1, 6,
         "keys per bucket the tables grow toward: higher uses less memory, more keys overflow"),
    BYTES(maxmemory, "0",
          "cap on the bytes of record cells, Redis's units (512mb, 2gb); 0 = the arena is the cap"),
    STR(maxmemory_policy, "noeviction",
        "full cache: noeviction, allkeys-lru, allkeys-s3fifo, allkeys-random, volatile-*"),
    STR(eviction, "", "per collection, over maxmemory_policy: 'a=allkeys-lru;b=noeviction'"),
    STR(event_expired_collections, "", "log an 'event expired' line per expired key ('a,b')"),
    STR(event_evicted_collections, "", "log an 'event evicted' line per evicted key ('a,b')"),
    UINT(maxclients, "10000", 1, 1000000, "connections per worker"),
    UINT(max_args, "65536", 1, 1048576, "arguments in one command"),
    UINT(max_bulk, "1048576", 1024, 536870912, "bytes in one argument"),
    UINT(max_inline, "65536", 64, 16777216, "bytes in one inline (telnet) command line"),
    UINT(max_request_mb, "512", 1, 4096, "bytes one command may occupy, all its arguments, MiB"),
    UINT(max_output_mb, "64", 1, 65536, "a client's unsent replies: reading pauses above it"),
    UINT(idle_timeout_s, "0", 0, 31536000, "close idle client connections after this; 0 = never"),
    STR(db_url, "", "snapshot store: lmdb:///path or a directory; empty = no persistence"),
    UINT(db_mode, "0", 0, 2,
         "0 on demand, 1 load at startup, 2 load + save at shutdown (2 with a db_url)"),
    STR(persist_collections, "",
        "collections db_mode and periodic saves cover ('a,b'); with a db_url: SELECT 0's"),
    STR(journal, "",
        "write-ahead journal per collection: 'a=everysec;b=always'; with an lmdb db_url: "
        "the persisted ones' everysec"),
    UINT(snapshot_period_s, "0", 0, 31536000, "periodic snapshot of persist_collections; 0 = off"),
    UINT(journal_rewrite_percent, "100", 0, 100000,
         "save a collection when its journal passes this % of its snapshot's size; 0 = off"),
    UINT(journal_rewrite_min_mb, "64", 0, 1048576,
         "... and is at least this many MiB (journal_rewrite_percent's floor)"),
    UINT(journal_max_mb, "0", 0, 1048576,
         "save a collection when its journal passes this many MiB; 0 = no cap"),
    UINT(maint_interval_ms, "100", 10, 10000, "period of the maintenance process's pc_maintain"),
    UINT(maint_nice, "10", 0, 19,
         "nice value of the maintenance process (saves yield the CPU to workers)"),
    UINT(drain_timeout_ms, "5000", 0, 600000, "SIGTERM: time workers get to flush replies"),
    STR(http_bind, "127.0.0.1", "IPv4 address of the JSON-RPC HTTP listener"),
    UINT(http_port, "0", 0, 65535, "JSON-RPC over HTTP port; 0 = off"),
    STR(unix_socket, "",
        "JSON-RPC (not RESP: see unixsocket) over HTTP on this unix socket, mode 0600; empty = "
        "off"),
    STR(management_password, "",
        "password JSON-RPC over TCP requires (HTTP Basic or Bearer); empty = requirepass"),
    UINT(metrics_auth, "0", 0, 1,
         "1 = GET /metrics and /health over TCP also require the management password"),
    STR(store_root, "",
        "perf_save/perf_load [store] must be under this directory; empty = db_url's parent"),
    UINT(store_sql_targets, "0", 0, 1, "1 = perf_save/perf_load [store] may be an SQL target"),
    STR(log_file, "", "log file (reopened on SIGHUP); empty = stderr"),
    UINT(syslog, "0", 0, 1, "1 = log to syslog (daemon facility) instead"),
    STR(log_level, "info", "err, warn, info or debug"),
    STR(pidfile, "", "write the master's pid here; empty = none"),
    STR(node_id, "", "perf_sync: this node's name (printable, no spaces); empty = hostname:port"),
    STR(sync_peers, "", "perf_sync: peers' UDP notice addresses 'ip:port,ip:port'; empty = none"),
    STR(sync_bind, "127.0.0.1", "IPv4 address of the UDP notice socket"),
    UINT(sync_port, "0", 0, 65535, "UDP port receiving perf_sync notices; 0 = receive none"),
    UINT(sync_poll_ms, "5000", 0, 86400000,
         "backstop poll of the shared database's generations (odbc db_url); 0 = off"),
    UINT(sync_check_ms, "1000", 10, 3600000,
         "at most one notice-driven database read per collection per this interval"),
    STR(metrics_bind, "127.0.0.1", "IPv4 address of the metrics-only HTTP listener"),
    UINT(metrics_port, "0", 0, 65535,
         "GET /metrics and /health only (no JSON-RPC) on this port; 0 = off"),
    UINT(slowlog_log_slower_than, "10000", 0, SRV_SLOW_OFF,
         "SLOWLOG: log commands that took at least this many microseconds; 0 = every one, "
         "-1 = none"),
    UINT(slowlog_max_len, "128", 0, SRV_SLOW_CAP, "SLOWLOG: entries kept (the newest)"),
};
#define SRV_NKEYS (sizeof srv_keys / sizeof srv_keys[0])
_Static_assert(SRV_NKEYS <= sizeof(((srv_config *)0)->given), "a given flag per key");

unsigned srv_config_count(void)
{
    return SRV_NKEYS;
}

static int cfg_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cfg_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int srv_log_level_parse(const char *s)
{
    static const char *names[] = {"err", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static const srv_key *cfg_find(const char *name)
{
    for (unsigned i = 0; i < SRV_NKEYS; i++)
        if (strcmp(srv_keys[i].name, name) == 0)
            return &srv_keys[i];
    return NULL;
}

/* ---- hints for a key pcached does not know ----------------------------------- */

static char key_letter(char c)
{
    return (char)tolower((unsigned char)(c == '-' ? '_' : c));
}

/* Edit distance of a and b (at most 63 bytes each are compared; two
 * neighbours swapped count as one edit, "prot" is one from "port"), '-'
 * and '_' the same letter, case ignored: Redis writes its keys with
 * dashes, pcached with underscores. */
static unsigned key_distance(const char *a, const char *b)
{
    size_t la = strnlen(a, 63), lb = strnlen(b, 63);
    unsigned d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            char ca = key_letter(a[i - 1]), cb = key_letter(b[j - 1]);
            unsigned best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == key_letter(b[j - 2]) && key_letter(a[i - 2]) == cb &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The key (pcached's name, or Redis's alias) nearest to name; with
 * near_only, NULL unless it is close (a typo, not another word). */
static const char *cfg_closest(const char *name, int near_only)
{
    const char *best = NULL;
    unsigned bd = UINT32_MAX;
    for (unsigned i = 0; i < SRV_NKEYS; i++) {
        unsigned d = key_distance(name, srv_keys[i].name);
        if (d < bd)
            bd = d, best = srv_keys[i].name;
    }
    const char *key, *alias;
    for (unsigned i = 0; (alias = srv_config_alias_at(i, &key)) != NULL; i++) {
        unsigned d = key_distance(name, alias);
        if (d < bd)
            bd = d, best = alias;
    }
    size_t n = strlen(name);
    if (near_only && bd > (n < 6 ? 1 : n / 3))
        return NULL;
    return best;
}

/* A line without '=': redis.conf's "key value" form, most likely. The
 * error says how pcached spells it: the same line with " = " when the
 * first word is a key (or Redis's alias of one), else the closest key. */
static int cfg_redis_line(const char *line, const char *path, unsigned lineno, char *err,
                          size_t errlen)
{
    char word[64];
    size_t n = strcspn(line, " \t");
    snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), line);
    const char *rest = line + n;
    rest += strspn(rest, " \t");
    const char *key = NULL;
    char vbuf[8], aerr[400];
    int alias = srv_config_alias(word, "", &key, vbuf, sizeof vbuf, aerr, sizeof aerr);
    if (alias < 0) /* Redis's key of another shape: what pcached has instead */
        return cfg_err(err, errlen,
                       "%s:%u: expected 'key = value', got '%.100s' (redis.conf's form); %s", path,
                       lineno, line, aerr);
    if (cfg_find(word) != NULL || alias == 1)
        return cfg_err(err, errlen,
                       "%s:%u: expected 'key = value', got '%.100s' (redis.conf's form): write "
                       "'%s = %.100s'",
                       path, lineno, line, word, rest);
    const char *best = cfg_closest(word, 0);
    return cfg_err(err, errlen,
                   "%s:%u: expected 'key = value', got '%.100s'; '%s' is not a key (the closest "
                   "is '%s': '%s = %.100s'; pcached --help-keys lists them)",
                   path, lineno, line, word, best, best, rest);
}

/* name's key, or Redis's name for it (config_alias.c): *value is then
 * the value in pcached's words (in vbuf). NULL with err set when neither. */
static const srv_key *cfg_lookup(const char *name, const char **value, char *vbuf, size_t vcap,
                                 const char *where, char *err, size_t errlen)
{
    const srv_key *k = cfg_find(name);
    if (k != NULL)
        return k;
    const char *key;
    char aerr[400];
    int rc = srv_config_alias(name, *value, &key, vbuf, vcap, aerr, sizeof aerr);
    if (rc < 0) {
        cfg_err(err, errlen, "%s: %s", where, aerr);
        return NULL;
    }
    if (rc == 0 || (k = cfg_find(key)) == NULL) {
        char near[160] = "";
        const char *best = cfg_closest(name, 1);
        if (best != NULL)
            snprintf(near, sizeof near, " (the closest key is '%s')", best);
        cfg_err(err, errlen, "%s: unknown key '%.100s'%s", where, name, near);
        return NULL;
    }
    *value = vbuf;
    return k;
}

static int cfg_apply(srv_config *cfg, const srv_key *k, const char *value, const char *where,
                     char *err, size_t errlen)
{
    char *field = (char *)cfg + k->off;
    if (k->type == CK_STR) {
        size_t n = strlen(value);
        if (n >= k->size)
            return cfg_err(err, errlen, "%s: %s: value too long (%zu bytes, at most %zu)", where,
                           k->name, n, k->size - 1);
        memcpy(field, value, n + 1);
        if (strcmp(k->name, "log_level") == 0 && srv_log_level_parse(value) < 0)
            return cfg_err(err, errlen, "%s: log_level: '%s' is not one of err, warn, info, debug",
                           where, value);
        char perr[512];
        int policy;
        if (strcmp(k->name, "maxmemory_policy") == 0) {
            if (srv_evict_policy(value, n, &policy, perr, sizeof perr) != 0)
                return cfg_err(err, errlen, "%s: maxmemory_policy: %s", where, perr);
            /* kept as the engine spells it: CONFIG GET shows one name */
            snprintf(field, k->size, "%s", pc_evict_policy_name(policy));
        }
        if (strcmp(k->name, "eviction") == 0 &&
            srv_eviction_check(value, NULL, perr, sizeof perr) != 0)
            return cfg_err(err, errlen, "%s: %s", where, perr);
        return 0;
    }
    if (k->type == CK_BYTES) {
        uint64_t b;
        if (pc_parse_bytes(value, &b) != 0)
            return cfg_err(err, errlen,
                           "%s: %s: '%.100s' is not a byte count (digits and an optional unit: b, "
                           "k, kb, m, mb, g, gb)",
                           where, k->name, value);
        memcpy(field, &b, sizeof b);
        return 0;
    }
    char *end;
    errno = 0;
    if (k->type == CK_OCTAL) {
        unsigned long o = strtoul(value, &end, 8);
        if (!isdigit((unsigned char)value[0]) || errno != 0 || *end != '\0' || o > k->max)
            return cfg_err(err, errlen, "%s: %s: '%.100s' is not an octal mode (0 to %o)", where,
                           k->name, value, k->max);
        *(unsigned *)(void *)field = (unsigned)o;
        return 0;
    }
    /* Redis's slowlog-log-slower-than: a negative value logs nothing */
    if (strcmp(k->name, "slowlog_log_slower_than") == 0 && value[0] == '-' &&
        isdigit((unsigned char)value[1]) && strspn(value + 1, "0123456789") == strlen(value + 1))
        value = "4294967295";
    if (!isdigit((unsigned char)value[0]))
        return cfg_err(err, errlen, "%s: %s: '%.100s' is not a non-negative integer", where,
                       k->name, value);
    unsigned long long v = strtoull(value, &end, 10);
    if (errno != 0 || *end != '\0')
        return cfg_err(err, errlen, "%s: %s: '%.100s' is not a non-negative integer", where,
                       k->name, value);
    if (v < k->min || v > k->max) {
        /* the ceiling of the shared memory is the engine's, not a choice */
        int mem = strcmp(k->name, "mem_mb") == 0 || strcmp(k->name, "hugepage_mb") == 0;
        return cfg_err(err, errlen, "%s: %s: %llu is out of range [%u, %u]%s", where, k->name, v,
                       k->min, k->max,
                       mem && v > k->max ? " (one cache maps at most 32 GiB, mem_mb + hugepage_mb "
                                           "+ the tables: records are addressed by 32-bit "
                                           "offsets in 8-byte units)"
                                         : "");
    }
    *(unsigned *)(void *)field = (unsigned)v;
    return 0;
}

void srv_config_defaults(srv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char err[256];
    for (unsigned i = 0; i < SRV_NKEYS; i++)
        (void)cfg_apply(cfg, &srv_keys[i], srv_keys[i].def, "default", err, sizeof err);
}

int srv_config_set(srv_config *cfg, const char *key, const char *value, const char *where,
                   char *err, size_t errlen)
{
    char vbuf[4100];
    const srv_key *k = cfg_lookup(key, &value, vbuf, sizeof vbuf, where, err, errlen);
    if (k == NULL)
        return -1;
    if (cfg_apply(cfg, k, value, where, err, errlen) != 0)
        return -1;
    cfg->given[k - srv_keys] = 1;
    return 0;
}

int srv_config_given(const srv_config *cfg, const char *key)
{
    const srv_key *k = cfg_find(key);
    return k != NULL && cfg->given[k - srv_keys];
}

/* The first item of a "a,b" / "a;b" list, without a "=..." part. */
static void first_item(const char *list, char *buf, size_t cap)
{
    list += strspn(list, " \t,;");
    size_t n = strcspn(list, " \t,;=");
    snprintf(buf, cap, "%.*s", (int)n, list);
}

void srv_config_default_coll(const srv_config *cfg, char *buf, size_t cap)
{
    first_item(cfg->select_collections[0] ? cfg->select_collections : cfg->collections, buf, cap);
    if (buf[0] == '\0')
        snprintf(buf, cap, "default"); /* the engine's name for an empty list */
}

void srv_config_store_defaults(srv_config *cfg, int sql)
{
    if (cfg->db_url[0] == '\0')
        return;
    char coll[PC_COLL_NAME_MAX + 1];
    srv_config_default_coll(cfg, coll, sizeof coll);
    if (!srv_config_given(cfg, "db_mode"))
        cfg->db_mode = 2;
    if (!srv_config_given(cfg, "persist_collections"))
        snprintf(cfg->persist_collections, sizeof cfg->persist_collections, "%s", coll);
    if (sql || srv_config_given(cfg, "journal"))
        return;
    /* every persisted collection, everysec */
    size_t off = 0;
    cfg->journal[0] = '\0';
    for (const char *p = cfg->persist_collections; *p != '\0';) {
        p += strspn(p, " \t,;");
        size_t n = strcspn(p, " \t,;");
        if (n > 0 && off + n + 11 < sizeof cfg->journal)
            off += (size_t)snprintf(cfg->journal + off, sizeof cfg->journal - off,
                                    "%s%.*s=everysec", off ? ";" : "", (int)n, p);
        p += n;
    }
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

int srv_config_load(srv_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return cfg_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    int rc = srv_config_read(cfg, f, path, err, errlen);
    fclose(f);
    return rc;
}

int srv_config_read(srv_config *cfg, FILE *f, const char *path, char *err, size_t errlen)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    unsigned lineno = 0;
    unsigned char seen[SRV_NKEYS];
    memset(seen, 0, sizeof seen);
    int rc = 0;
    /* getline counts every byte it read, NULs included: a line is judged
     * by its real length, so a NUL byte (where the string functions below
     * would stop and drop the rest of the line) and a line past 4096
     * bytes (which a fixed buffer would split, reading its tail as a line
     * of its own) are errors, never read in part. */
    while ((got = getline(&line, &cap, f)) > 0) {
        lineno++;
        size_t n = (size_t)got;
        if (n - (line[n - 1] == '\n') > 4096) {
            rc = cfg_err(err, errlen, "%s:%u: line longer than 4096 bytes", path, lineno);
            break;
        }
        if (memchr(line, '\0', n) != NULL) {
            rc = cfg_err(err, errlen, "%s:%u: NUL byte in line", path, lineno);
            break;
        }
        char *s = trim(line);
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            rc = cfg_err(err, errlen, "%s:%u: sections are not used: '%.100s'", path, lineno, s);
            break;
        }
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            rc = cfg_redis_line(s, path, lineno, err, errlen);
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        char where[1200];
        snprintf(where, sizeof where, "%s:%u", path, lineno);
        char vbuf[4100];
        const char *value = val;
        const srv_key *k = cfg_lookup(key, &value, vbuf, sizeof vbuf, where, err, errlen);
        if (k == NULL) {
            rc = -1;
            break;
        }
        if (seen[k - srv_keys]++) {
            rc = cfg_err(err, errlen, "%s: %s%s%s%s: given twice", where, key,
                         strcmp(key, k->name) != 0 ? " (" : "",
                         strcmp(key, k->name) != 0 ? k->name : "",
                         strcmp(key, k->name) != 0 ? ")" : "");
            break;
        }
        if ((rc = cfg_apply(cfg, k, value, where, err, errlen)) != 0)
            break;
        cfg->given[k - srv_keys] = 1;
    }
    if (rc == 0 && ferror(f))
        rc = cfg_err(err, errlen, "%s: read error", path);
    free(line);
    return rc;
}

int srv_config_arg(srv_config *cfg, const char *a, const char *next, char *err, size_t errlen)
{
    char key[128];
    const char *eq = strchr(a + 2, '='), *val;
    size_t kl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    int used = 1;
    if (strncmp(a, "--", 2) != 0)
        return cfg_err(err, errlen, "unexpected argument '%.100s'", a);
    if (kl >= sizeof key)
        return cfg_err(err, errlen, "%s: option name too long", a);
    memcpy(key, a + 2, kl);
    key[kl] = '\0';
    if (eq != NULL) {
        val = eq + 1;
    } else if (next != NULL) {
        val = next;
        used = 2;
    } else {
        return cfg_err(err, errlen, "%s: needs a value", a);
    }
    char where[160];
    snprintf(where, sizeof where, "command line --%s", key);
    if (srv_config_set(cfg, key, val, where, err, errlen) != 0)
        return -1;
    return used;
}

int srv_sync_parse_peers(const char *list, struct sockaddr_in *out, unsigned max, unsigned *n,
                         char *err, size_t errlen)
{
    unsigned k = 0;
    const char *p = list;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        const char *a = p, *e = p + len;
        while (a < e && (*a == ' ' || *a == '\t'))
            a++;
        while (e > a && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (a < e) {
            char item[64];
            const char *colon = memchr(a, ':', (size_t)(e - a));
            if ((size_t)(e - a) >= sizeof item || colon == NULL) {
                snprintf(err, errlen, "sync_peers: '%.*s': expected IPv4:port", (int)(e - a), a);
                return -1;
            }
            memcpy(item, a, (size_t)(colon - a));
            item[colon - a] = '\0';
            char port[16];
            size_t pl = (size_t)(e - colon - 1);
            char *end;
            unsigned long pv = 0;
            if (pl > 0 && pl < sizeof port) {
                memcpy(port, colon + 1, pl);
                port[pl] = '\0';
                errno = 0;
                pv = strtoul(port, &end, 10);
                if (errno != 0 || *end != '\0' || port[0] < '0' || port[0] > '9')
                    pv = 0;
            }
            struct sockaddr_in sa;
            memset(&sa, 0, sizeof sa);
            sa.sin_family = AF_INET;
            if (inet_pton(AF_INET, item, &sa.sin_addr) != 1 || pv == 0 || pv > 65535) {
                snprintf(err, errlen, "sync_peers: '%.*s': expected IPv4:port (port 1..65535)",
                         (int)(e - a), a);
                return -1;
            }
            if (k == max) {
                snprintf(err, errlen, "sync_peers: more than %u peers", max);
                return -1;
            }
            sa.sin_port = htons((uint16_t)pv);
            if (out != NULL)
                out[k] = sa;
            k++;
        }
        p = p[len] == '\0' ? p + len : p + len + 1;
    }
    *n = k;
    return 0;
}

/* ---- bind: the RESP listen addresses (listen.c binds them) ---------------- */

static int bind_one(const char *tok, size_t n, srv_bind_addr *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (n > 0 && tok[0] == '-') {
        a->optional = 1;
        tok++;
        n--;
    }
    if (n >= 2 && tok[0] == '[' && tok[n - 1] == ']') {
        tok++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof a->text) {
        snprintf(err, errlen, "bind: '%.*s' is not an IPv4 or IPv6 address", (int)(n > 80 ? 80 : n),
                 tok);
        return -1;
    }
    memcpy(a->text, tok, n);
    a->text[n] = '\0';
    const char *ip = a->text;
    if (strcmp(ip, "*") == 0)
        ip = "0.0.0.0";
    else if (strcmp(ip, "::*") == 0)
        ip = "::";
    struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)&a->sa;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)&a->sa;
    if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a->len = sizeof *a4;
    } else if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a->len = sizeof *a6;
    } else {
        snprintf(err, errlen, "bind: '%s' is not an IPv4 or IPv6 address", a->text);
        return -1;
    }
    return 0;
}

int srv_bind_parse(const char *list, srv_bind_addr *out, unsigned max, unsigned *n, char *err,
                   size_t errlen)
{
    static const char seps[] = " \t,";
    unsigned k = 0;
    for (const char *p = list + strspn(list, seps); *p != '\0'; p += strspn(p, seps)) {
        size_t len = strcspn(p, seps);
        srv_bind_addr a;
        if (bind_one(p, len, &a, err, errlen) != 0)
            return -1;
        if (k == max) {
            snprintf(err, errlen, "bind: more than %u addresses", max);
            return -1;
        }
        for (unsigned i = 0; out != NULL && i < k; i++)
            if (out[i].len == a.len && memcmp(&out[i].sa, &a.sa, a.len) == 0) {
                snprintf(err, errlen, "bind: '%s' is given twice", a.text);
                return -1;
            }
        if (out != NULL)
            out[k] = a;
        k++;
        p += len;
    }
    if (k == 0) {
        snprintf(err, errlen, "bind: no address (Redis's empty bind, no TCP, is not supported)");
        return -1;
    }
    *n = k;
    return 0;
}

/* The shared memory of mem_mb + hugepage_mb + the collections' tables
 * against what one cache can address (pc_cache_region_bytes): said when
 * the configuration is read, not when the region is mapped. A collections
 * list that does not parse is left to the cache's creation, which names
 * it. */
static int check_region(const srv_config *cfg, char *err, size_t errlen)
{
    pc_config pc;
    pc_config_init(&pc);
    pc.collections = cfg->collections;
    pc.mem_mb = cfg->mem_mb;
    pc.hugepage_mb = cfg->hugepage_mb;
    pc.log.fn = NULL;
    uint64_t bytes;
    if (pc_cache_region_bytes(&pc, &bytes) != 0 || bytes <= PC_REGION_MAX_BYTES)
        return 0;
    /* the largest mem_mb that fits with these collections and hugepage_mb */
    size_t lo = 0, hi = cfg->mem_mb;
    while (lo + 1 < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t b;
        pc.mem_mb = mid;
        if (pc_cache_region_bytes(&pc, &b) == 0 && b <= PC_REGION_MAX_BYTES)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t tables = bytes - ((uint64_t)cfg->mem_mb << 20) - ((uint64_t)cfg->hugepage_mb << 20);
    return cfg_err(err, errlen,
                   "mem_mb: %u MiB + hugepage_mb %u MiB + %llu MiB of tables is more than one "
                   "cache can address (32 GiB in all: records are addressed by 32-bit offsets "
                   "in 8-byte units); with these collections and hugepage_mb, mem_mb can be at "
                   "most %zu",
                   cfg->mem_mb, cfg->hugepage_mb,
                   (unsigned long long)((tables + (1u << 20) - 1) >> 20), lo);
}

int srv_config_check(const srv_config *cfg, char *err, size_t errlen)
{
    if (check_region(cfg, err, errlen) != 0)
        return -1;
    if (cfg->db_mode > 0 && cfg->db_url[0] == '\0')
        return cfg_err(err, errlen, "db_mode: %u needs a db_url", cfg->db_mode);
    if (cfg->snapshot_period_s > 0 && cfg->db_url[0] == '\0')
        return cfg_err(err, errlen, "snapshot_period_s: needs a db_url");
    if (cfg->journal[0] != '\0' && cfg->db_url[0] == '\0')
        return cfg_err(err, errlen, "journal: needs a db_url");
    if (cfg->persist_collections[0] != '\0' && cfg->db_url[0] == '\0')
        return cfg_err(err, errlen, "persist_collections: needs a db_url");
    srv_bind_addr binds[SRV_MAX_BINDS];
    unsigned nbinds;
    if (srv_bind_parse(cfg->bind, binds, SRV_MAX_BINDS, &nbinds, err, errlen) != 0)
        return -1;
    for (unsigned i = 0; i < nbinds; i++) {
        if (strcmp(binds[i].text, cfg->http_bind) == 0 && cfg->http_port != 0 &&
            cfg->http_port == cfg->port)
            return cfg_err(err, errlen, "http_port: %u is also the RESP port", cfg->http_port);
        if (strcmp(binds[i].text, cfg->metrics_bind) == 0 && cfg->metrics_port != 0 &&
            cfg->metrics_port == cfg->port)
            return cfg_err(err, errlen, "metrics_port: %u is also the RESP port",
                           cfg->metrics_port);
    }
    if (cfg->metrics_port != 0 && cfg->metrics_port == cfg->http_port &&
        strcmp(cfg->metrics_bind, cfg->http_bind) == 0)
        return cfg_err(err, errlen,
                       "metrics_port: %u is also http_port (which serves /metrics and /health "
                       "too): set one of them",
                       cfg->metrics_port);
    if (cfg->unixsocket[0] != '\0' && strcmp(cfg->unixsocket, cfg->unix_socket) == 0)
        return cfg_err(err, errlen,
                       "unixsocket: '%s' is also unix_socket (JSON-RPC); RESP needs its own path",
                       cfg->unixsocket);
    for (const char *c = cfg->node_id; *c != '\0'; c++)
        if (*c <= ' ' || *c > '~')
            return cfg_err(err, errlen, "node_id: '%s': printable characters without spaces only",
                           cfg->node_id);
    unsigned npeers;
    if (srv_sync_parse_peers(cfg->sync_peers, NULL, SRV_MAX_PEERS, &npeers, err, errlen) != 0)
        return -1;
    return 0;
}

const char *srv_config_get(const srv_config *cfg, unsigned i, const char **name, char *buf,
                           size_t cap)
{
    if (i >= SRV_NKEYS)
        return NULL;
    const srv_key *k = &srv_keys[i];
    *name = k->name;
    const char *field = (const char *)cfg + k->off;
    if (k->type == CK_STR)
        return field;
    if (k->type == CK_BYTES) {
        uint64_t b;
        memcpy(&b, field, sizeof b);
        snprintf(buf, cap, "%llu", (unsigned long long)b);
        return buf;
    }
    unsigned v = *(const unsigned *)(const void *)field;
    if (v == SRV_SLOW_OFF && strcmp(k->name, "slowlog_log_slower_than") == 0)
        return "-1"; /* as it is written (Redis's "none") */
    snprintf(buf, cap, k->type == CK_OCTAL ? "%o" : "%u", v);
    return buf;
}

void srv_config_print(const srv_config *cfg, FILE *f)
{
    char buf[32];
    for (unsigned i = 0; i < SRV_NKEYS; i++) {
        const char *name;
        const char *v = srv_config_get(cfg, i, &name, buf, sizeof buf);
        if ((strcmp(name, "requirepass") == 0 || strcmp(name, "management_password") == 0) &&
            v[0] != '\0')
            v = "(set, not shown)";
        fprintf(f, "# %s (default: %s)\n%s = %s\n", srv_keys[i].help,
                srv_keys[i].def[0] ? srv_keys[i].def : "empty", name, v);
    }
}
