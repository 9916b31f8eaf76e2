/*
 * pcached.h - internals of pcached, the standalone host (docs/pcached.md).
 *
 * pcached is one master process and its children, all forked from it after
 * the shared cache exists:
 *   master       creates the cache, warms it from the store (db_mode 1/2),
 *                opens one SO_REUSEPORT listener per worker slot, forks,
 *                restarts children that die, runs the shutdown save;
 *   workers      serve RESP2 on their listener (epoll, non-blocking,
 *                pipelined); they never save or load: those requests go to
 *                the maintenance process through a slot in shared memory;
 *   maintenance  pc_maintain (growth, sweep), the journal's fdatasync,
 *                periodic and requested saves and loads, the JSON-RPC door.
 * This header is the server's own: nothing outside src/server includes it.
 * The server uses the public headers of the engine, the management layer
 * and the persistence layer only.
 */
#ifndef PCACHED_H
#define PCACHED_H

#include "pcache.h"
#include "pcache_mgmt.h"
#include "pcache_persist.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#define SRV_VERSION pcache_version() /* the project version (src/engine/version.c) */
#define SRV_REDIS_VERSION "7.0.0"    /* what INFO and HELLO report as redis_version */
#define SRV_MAX_WORKERS 64u
#define SRV_MAX_DBS 64u
#define SRV_MAX_PEERS 64u
#define SRV_MAX_BINDS 16u /* addresses in `bind` */

#define SRV_SLOW_CAP 1024u       /* SLOWLOG entries kept per worker, slowlog_max_len's most */
#define SRV_SLOW_OFF 4294967295u /* slowlog_log_slower_than: Redis's -1, log nothing */

/* ---- configuration (config.c) ---------------------------------------------- */
typedef struct srv_config {
    char bind[1024]; /* RESP addresses, "127.0.0.1 ::1"; see listen.c */
    unsigned port;
    char unixsocket[108];    /* RESP on a unix socket (sun_path size); "" = off */
    unsigned unixsocketperm; /* its mode, octal in the file; 0 = as the umask leaves it */
    unsigned workers;
    char requirepass[256];
    char collections[2048];
    char select_collections[2048]; /* db index -> collection: "a,b,c"; "" = declaration order */
    unsigned mem_mb;
    unsigned hugepage_mb;
    unsigned growth_load_factor;
    unsigned maxclients;     /* per worker */
    unsigned max_args;       /* arguments in one command */
    unsigned max_bulk;       /* bytes in one argument */
    unsigned max_inline;     /* bytes in an inline command line */
    unsigned max_request_mb; /* bytes one command may occupy, all arguments */
    unsigned max_output_mb;  /* a client's unsent replies: reading pauses above it */
    unsigned idle_timeout_s; /* 0 = never */
    /* eviction (eviction.c): the cap on record cells in bytes (0 = the
     * arena), the policy of the collections `eviction` does not name, the
     * per-collection list "a=allkeys-lru;b=noeviction", and the
     * collections whose expired / evicted events are logged ("a,b") */
    uint64_t maxmemory;
    char maxmemory_policy[32];
    char eviction[2048];
    char event_expired_collections[2048];
    char event_evicted_collections[2048];
    char db_url[1024];
    unsigned db_mode;
    char persist_collections[2048];
    char journal[2048];
    unsigned snapshot_period_s;
    unsigned journal_rewrite_percent; /* the journal's bound (pc_persist_config) */
    unsigned journal_rewrite_min_mb;
    unsigned journal_max_mb;
    unsigned maint_interval_ms;
    unsigned maint_nice;
    unsigned drain_timeout_ms;
    char http_bind[64];
    unsigned http_port;            /* 0 = off */
    char unix_socket[512];         /* "" = off */
    char management_password[256]; /* JSON-RPC over TCP; "" = requirepass */
    unsigned metrics_auth;         /* 1 = GET /metrics and /health need it too */
    char store_root[1024];         /* where a [store] parameter may point; "" = db_url's parent */
    unsigned store_sql_targets;    /* 1 = a [store] parameter may be an SQL target */
    char log_file[1024];           /* "" = stderr */
    unsigned syslog;               /* 1 = log to syslog instead */
    char log_level[16];            /* err, warn, info, debug */
    char pidfile[1024];
    char node_id[64];      /* sync: this node's name; "" = hostname:port */
    char sync_peers[2048]; /* sync: peers' UDP addresses, "ip:port,ip:port" */
    char sync_bind[64];
    unsigned sync_port;     /* UDP port for notices; 0 = receive none */
    unsigned sync_poll_ms;  /* backstop poll; 0 = off */
    unsigned sync_check_ms; /* rate limit of notice-driven database reads */
    char metrics_bind[64];  /* the metrics-only HTTP listener (GET /metrics, /health) */
    unsigned metrics_port;  /* 0 = off */
    /* SLOWLOG (slowlog.c): commands that took at least this many
     * microseconds are logged (0 = every one, SRV_SLOW_OFF = none); the
     * log shows the newest slowlog_max_len (at most SRV_SLOW_CAP) */
    unsigned slowlog_log_slower_than;
    unsigned slowlog_max_len;
    /* which keys the file or the command line set (index: the key table's
     * order), so that a default may follow another key's value
     * (srv_config_store_defaults) */
    unsigned char given[96];
} srv_config;

void srv_config_defaults(srv_config *cfg);
/* Loads an INI file over cfg. Errors are written to err naming the file,
 * line and key. Returns 0 or -1. */
int srv_config_load(srv_config *cfg, const char *path, char *err, size_t errlen);
/* The same from an open stream (path names it in messages; f borrowed). */
int srv_config_read(srv_config *cfg, FILE *f, const char *path, char *err, size_t errlen);
/* One command-line override: a is "--KEY=VALUE", or "--KEY" with the
 * value in next (the following argument; NULL when there is none).
 * Returns the arguments used (1 or 2), or -1 with err set. */
int srv_config_arg(srv_config *cfg, const char *a, const char *next, char *err, size_t errlen);
/* Applies one "key=value" override (where names the source, e.g. "--port").
 * Returns 0 or -1 with err set. */
int srv_config_set(srv_config *cfg, const char *key, const char *value, const char *where,
                   char *err, size_t errlen);
/* Checks cross-key rules (a worker count in range, db_mode with a db_url,
 * the shared memory within what one cache can address...). */
int srv_config_check(const srv_config *cfg, char *err, size_t errlen);
/* 1 when the file or the command line set key (its pcached name). */
int srv_config_given(const srv_config *cfg, const char *key);
/* The defaults that keep data (docs/pcached.md §2.3): with a store
 * (db_url) and unless the configuration set them, db_mode 2,
 * persist_collections the default collection (SELECT 0's) and, for an
 * LMDB store (sql = 0), journal = everysec for each persisted collection.
 * Call after the file and the overrides. */
void srv_config_store_defaults(srv_config *cfg, int sql);
/* The collection SELECT 0 names (select_collections' first, else the
 * first declared) into buf. */
void srv_config_default_coll(const srv_config *cfg, char *buf, size_t cap);
/* Writes the effective configuration as INI text to f (requirepass masked). */
void srv_config_print(const srv_config *cfg, FILE *f);
/* The value of key as text (CONFIG GET); NULL when unknown. */
const char *srv_config_get(const srv_config *cfg, unsigned i, const char **name, char *buf,
                           size_t cap);
unsigned srv_config_count(void);
/* config_alias.c: Redis's name for a key (logfile -> log_file...). 1 with
 * *key and the value in pcached's words in vbuf; 0 when name is not one;
 * -1 (err) for a Redis key pcached names differently (databases, save...). */
int srv_config_alias(const char *name, const char *value, const char **key, char *vbuf, size_t vcap,
                     char *err, size_t errlen);
unsigned srv_config_alias_count(void);
const char *srv_config_alias_at(unsigned i, const char **key); /* Redis's name; NULL past end */
int srv_log_level_parse(const char *s);

/* evict_names.c: the policy of a name (Redis's spelling, any case); -1
 * with err naming what to write instead (Redis's LFU and TTL policies) or
 * the names there are. */
int srv_evict_policy(const char *name, size_t len, int *policy, char *err, size_t errlen);
/* The lists of the configuration ("a=x;b=y", "a,b") are read with util's
 * pc_list_items, as the persistence layer reads them. */
/* Checks an `eviction` list ("a=allkeys-lru;b=noeviction"): its policies,
 * no collection twice and, with cache (else NULL), only declared ones.
 * 0 or -1 with err. */
int srv_eviction_check(const char *spec, pc_cache *cache, char *err, size_t errlen);
/* 1 with *policy when the (checked) list spec names coll, else 0. */
int srv_eviction_lookup(const char *spec, const char *coll, int *policy);

/* ---- logging (log.c) ---------------------------------------------------------- */
void srv_log_init(const srv_config *cfg, const char *role);
void srv_log_role(const char *role);
void srv_log_reopen(void);
void srv_log_quiet(void); /* warnings and errors only from now on */
void srv_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* pc_log_fn for the libraries */
void srv_log_cb(void *ctx, int level, const char *msg);
int srv_log_level(void);
void srv_log_set_level(int level); /* PC_LOG_*: CONFIG SET loglevel */

/* ---- shared state (lives in one MAP_SHARED mapping made by the master) ---- */
#define SRV_SLOT_BUF (64u * 1024u)
enum { SRV_SLOT_FREE = 0, SRV_SLOT_PENDING = 1, SRV_SLOT_DONE = 2 };

/* A worker's request to the maintenance process (perf_save, perf_load,
 * SAVE, BGSAVE). The worker owns the slot while FREE (it fills buf and
 * stores PENDING with release order); the maintenance process owns it while
 * PENDING (it replaces buf with the answer, then stores DONE, or FREE for
 * an async request) and writes the worker's eventfd. */
struct srv_slot_shm {
    _Atomic uint32_t state;
    uint32_t async; /* 1 = nobody waits for the answer (BGSAVE) */
    int32_t rc;     /* answer: 0 or a PC_E* code */
    uint32_t len;   /* bytes used in buf */
    char buf[SRV_SLOT_BUF];
};

/* Counters of one worker slot: written by that worker only (relaxed),
 * summed by INFO. Two cache lines each, no line shared by two workers. */
struct srv_wstats_shm {
    _Atomic uint64_t commands, connections, rejected, proto_errors;
    _Atomic uint64_t clients; /* gauge */
    _Atomic int64_t pid;
    /* dbmap.c: the generation of the database map whose commands this
     * worker may be running, or UINT64_MAX between event-loop turns */
    _Atomic uint64_t dbmap_seen;
    _Atomic uint64_t net_in, net_out; /* bytes read from / written to RESP clients */
    char pad[56];
};
_Static_assert(sizeof(struct srv_wstats_shm) == 128, "two cache lines per worker");

/* INFO commandstats and /metrics' per-command figures: per worker slot and
 * per command (its index in the sorted command table, cmd_index), written
 * by that worker only (relaxed load + store, no locked instruction),
 * summed by the readers. usec is measured on every command (two vDSO
 * clock reads); lat[b] counts the commands that took at most 2^b
 * microseconds (b < SRV_LAT_BUCKETS - 1), the last bucket the rest: the
 * histogram of /metrics and LATENCY HISTOGRAM (Redis's power-of-two
 * buckets). */
#define SRV_CMD_SLOTS 256u
#define SRV_LAT_BUCKETS 24u /* <= 1 us, <= 2 us, ... <= 2^22 us (4.2 s), more */
struct srv_cmdstat_shm {
    _Atomic uint64_t calls, usec, rejected, failed;
    _Atomic uint64_t lat[SRV_LAT_BUCKETS];
    uint64_t pad[4]; /* 256 bytes: a command's counters never share a line with another's */
};
_Static_assert(sizeof(struct srv_cmdstat_shm) == 256, "four cache lines per command");
/* The latency bucket of a command that took us microseconds. */
static inline unsigned srv_lat_bucket(uint64_t us)
{
    if (us <= 1)
        return 0;
    unsigned b = 64u - (unsigned)__builtin_clzll(us - 1); /* 2^(b-1) < us <= 2^b */
    return b < SRV_LAT_BUCKETS - 1 ? b : SRV_LAT_BUCKETS - 1;
}
/* INFO errorstats: error replies by code (the first word of the error),
 * per worker slot; codes outside the list count under the last entry
 * (srv_err_codes, cmd_info.c). */
#define SRV_ERR_CODES 16u
struct srv_errstat_shm {
    _Atomic uint64_t count[SRV_ERR_CODES];
};

/* The settings CONFIG SET changes at run time (cmd_config.c): a seqlock.
 * gen is odd while the one writer that took it (CAS even -> odd) writes the
 * values, even after; a process applies them when gen is even and differs
 * from the one it applied last, and is unchanged after its reads. 0 = never
 * set (the configuration's values stand). */
struct srv_runtime_shm {
    _Atomic uint64_t gen;
    _Atomic uint32_t idle_timeout_s, maxclients, max_output_mb, max_args, max_bulk, max_inline,
        max_request_mb;
    _Atomic int32_t log_level; /* PC_LOG_* */
    /* the text of maxmemory / maxmemory_policy: the engine holds the
     * values that act (pc_maxmemory, pc_coll_eviction), set by the writer
     * while it holds gen odd, so two CONFIG SETs never interleave them */
    _Atomic uint64_t maxmemory;
    _Atomic int32_t maxmemory_policy; /* enum pc_evict_policy */
    _Atomic uint32_t slowlog_log_slower_than, slowlog_max_len;
};

/* The client table (clients_shm.c, docs/pcached.md "Connections"): one
 * table of s->ctab_cap entries per worker slot, in its own MAP_SHARED
 * mapping made by the master before the fork. Each table has one writer,
 * the worker of its slot; other workers read it for CLIENT LIST and
 * CLIENT KILL without locks. An entry's plain fields are a seqlock: seq is
 * odd while the owner writes them; a reader copies them between two equal
 * even reads of seq, else retries (a torn copy is never used). id (0 =
 * free), kill_id and act are atomics of their own. A new incarnation of a
 * worker clears its table before it accepts. */
#define SRV_CTAB_MAX 4096u /* entries per worker at most (and at most maxclients) */
#define SRV_CTAB_NAME 128u /* bytes of a name kept (with its NUL) */
struct srv_client_shm {
    _Atomic uint32_t seq;
    uint32_t fd;
    _Atomic uint64_t id;
    _Atomic uint64_t kill_id;     /* another worker asks the owner to close connection kill_id */
    _Atomic uint64_t act;         /* last command: monotonic ms << 16 | its cmd_at index + 1 */
    int64_t born_ms;              /* monotonic */
    uint32_t db, proto, name_len; /* name_len: the whole name's length (it may be cut) */
    char addr[112], laddr[112], name[SRV_CTAB_NAME];
};
struct srv_ctab_hdr {
    _Atomic uint32_t hi; /* entries [0, hi) may be in use */
    char pad[60];
};

/* SELECT index -> collection (dbmap.c, SWAPDB): gen is even while the map
 * is stable, odd while a swap runs; owner (a worker's pid, 0 = none) is the
 * lock of the one swap at a time, and a, b, old_a, old_b (written by the
 * owner) let the master undo the swap of an owner that died. */
struct srv_dbmap_shm {
    _Atomic uint64_t gen;
    _Atomic int64_t owner;
    uint32_t a, b, old_a, old_b;
    _Atomic uint32_t coll[SRV_MAX_DBS]; /* pc_coll_at index of each db's collection */
};

struct srv_shm {
    _Atomic int64_t start_unix;      /* master's start time */
    char run_id[48];                 /* 40 hex digits and a NUL, written before the fork */
    char replid[48];                 /* INFO master_replid: the same kind, another draw */
    _Atomic uint64_t next_client_id; /* CLIENT ID: one counter for every worker */
    _Atomic int64_t last_save;       /* unix seconds of the last successful save (LASTSAVE) */
    _Atomic int32_t last_save_rc;
    _Atomic uint32_t saving;         /* 1 while the maintenance process saves */
    _Atomic uint32_t bgsave_pending; /* BGSAVEs accepted, not yet finished */
    _Atomic uint64_t saves, save_failures;
    _Atomic int64_t maint_pid;
    _Atomic uint32_t shutdown;      /* SHUTDOWN's SRV_SHUT_* for the master's stop; 0 = a signal */
    _Atomic uint64_t slowlog_next;  /* SLOWLOG: the next entry's id */
    _Atomic uint64_t slowlog_reset; /* entries below this id were reset */
    struct srv_wstats_shm wstats[SRV_MAX_WORKERS];
    struct srv_slot_shm slots[SRV_MAX_WORKERS];
    struct srv_cmdstat_shm cmdstats[SRV_MAX_WORKERS][SRV_CMD_SLOTS];
    struct srv_errstat_shm errstats[SRV_MAX_WORKERS];
    struct srv_runtime_shm rt;
    struct srv_dbmap_shm dbmap;
};

/* SHUTDOWN's options (Redis 7.0): the save at the stop forced on or off
 * (neither: as db_mode says), a failed save not stopping the stop, and
 * NOW (no replicas to wait for: accepted, changes nothing). */
enum { SRV_SHUT_SAVE = 1, SRV_SHUT_NOSAVE = 2, SRV_SHUT_FORCE = 4, SRV_SHUT_NOW = 8 };

/* ---- the process-wide server context ------------------------------------------ */
typedef struct srv {
    srv_config cfg;
    pc_cache *cache;
    pc_persist *persist; /* NULL without db_url */
    struct srv_shm *shm;
    pc_coll *dbs[SRV_MAX_DBS];
    unsigned ndbs;
    /* RESP listeners (listen.c): per worker slot, one SO_REUSEPORT socket
     * per bind address (-1 = none: an optional address that is absent);
     * one unix socket shared by every worker (EPOLLEXCLUSIVE), -1 = off. */
    unsigned nbinds;
    int listen_fds[SRV_MAX_WORKERS][SRV_MAX_BINDS];
    int resp_unix_fd;
    dev_t resp_unix_dev; /* the RESP unix socket this instance bound */
    ino_t resp_unix_ino;
    int done_efd[SRV_MAX_WORKERS]; /* maintenance -> worker i: slot i answered */
    int maint_efd;                 /* worker -> maintenance: a slot is pending */
    int kill_efd[SRV_MAX_WORKERS]; /* any worker -> worker i: see your kill_id marks */
    struct srv_ctab_hdr *ctab_hdr; /* the client tables: one header per worker slot, */
    struct srv_client_shm *ctab;   /* then ctab_cap entries per worker slot */
    unsigned ctab_cap;
    void *slowlog;        /* SLOWLOG's rings, one per worker slot (slowlog.c), MAP_SHARED */
    int http_fd, unix_fd; /* JSON-RPC listeners (maintenance only), -1 = off */
    int metrics_fd;       /* GET /metrics and /health only (maintenance), -1 = off */
    dev_t unix_dev;       /* the unix socket this instance bound (instance.c) */
    ino_t unix_ino;
    int pid_fd; /* the pidfile, flock(LOCK_EX)ed; -1 = no pidfile */
    unsigned bound_port;
    int sync_fd; /* UDP notices (maintenance only), -1 = none */
    unsigned npeers;
    struct sockaddr_in peers[SRV_MAX_PEERS];
    char node_id[64];
} srv;

/* eviction.c: master (and --check), after the cache exists and before anything is
 * loaded or forked: maxmemory, every collection's policy, the expired and
 * evicted event opt-ins and the handler that logs them. 0 or -1 with err. */
int srv_eviction_setup(srv *s, char *err, size_t errlen);
/* CONFIG SET maxmemory-policy: policy for every collection that `eviction`
 * does not name; all or none (the ones changed go back on a failure).
 * 0, or -1 with err. */
int srv_eviction_set_default(srv *s, int policy, char *err, size_t errlen);
/* Logs an expired or evicted event (rate-limited); others are ignored. */
void srv_event_log(const pc_event *ev);

/* dbmap.c: the shared database map, set from s->dbs (master, before the
 * fork); a worker slot whose process pid is gone (the master's reap): its
 * commands are over, and a swap it left half done is undone. */
void srv_dbmap_setup(srv *s);
void srv_dbmap_worker_gone(srv *s, unsigned slot, int64_t pid);

/* sync_udp.c: perf_sync notices over UDP (docs/sync.md) */
int srv_sync_parse_peers(const char *list, struct sockaddr_in *out, unsigned max, unsigned *n,
                         char *err, size_t errlen);
int srv_sync_setup(srv *s, char *err, size_t errlen); /* master, before fork */
int srv_sync_push(void *ctx, const char *coll, uint64_t gen, const char *source);
void srv_sync_receive(srv *s); /* maintenance: drains the socket */
/* sql_odbc.c / sql_none.c: the SQL backend of db_url odbc://, or NULL */
const pc_persist_backend *srv_sql_backend(void);

/* cmd_config.c: applies the run-time settings CONFIG SET published in
 * s->shm->rt to s->cfg and this process's log level; 1 when it changed
 * something (a worker then recomputes its limits: cmd_config_limits). */
int srv_runtime_poll(srv *s);

/* master.c */
int srv_master_run(srv *s);
/* slowlog.c: maps SLOWLOG's rings (master, before the fork); 0 or -1 (logged). */
int srv_slowlog_setup(srv *s);
/* clients_shm.c: maps the client tables and the kill eventfds (master,
 * before the fork); 0 or -1 (logged). */
int srv_ctab_setup(srv *s);
/* Frees every entry of worker slot's table: by the master once it has
 * reaped that worker, by the worker's next incarnation before it accepts
 * (never while the worker of the slot runs). */
void srv_ctab_clear(srv *s, unsigned slot);
/* notify.c: systemd readiness and status (sd_notify; no-ops without
 * NOTIFY_SOCKET); master only. srv_notify("READY=1") etc.; busy_begin sets
 * STATUS= and keeps extending the manager's timeout until busy_end. */
void srv_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void srv_notify_busy_begin(const char *status);
void srv_notify_busy_end(void);
/* advice.c: what the start tells the operator (docs/pcached.md §2,
 * "Defaults that keep data"). srv_advise_data calls emit once per
 * configuration of cfg that loses data at a restart (sql: db_url is an
 * SQL store), each message naming the key to set; returns how many. */
typedef void (*srv_advice_fn)(void *ctx, const char *msg);
unsigned srv_advise_data(const srv_config *cfg, int sql, srv_advice_fn emit, void *ctx);
/* Logs (WARN) that the previous run of the store did not stop cleanly and
 * what this start recovered; nothing after a clean stop. Master, after
 * pc_persist_startup. */
void srv_advise_last_stop(const srv *s);
/* For a permission error on path (setting key): the user pcached runs as,
 * the owner and mode of the directory in the way, and the fix, into buf;
 * key may be "key" or "key: path" (the setting is named up to ": "). */
void srv_perm_hint(const char *key, const char *path, char *buf, size_t cap);
int srv_perm_errno(int e); /* EACCES or EPERM */
/* 1 when db_url is served by the SQL backend (no journal there). */
int srv_db_url_sql(const char *db_url);

/* check.c: pcached --check (every check of the start short of binding and
 * opening the store; prints the configuration); the exit status */
int srv_check_run(srv *s, const char *file);
/* the persistence policy of s->cfg, for pc_persist_open and --check */
void srv_persist_config_fill(srv *s, pc_persist_config *pc);
/* dirs.c: the directories pcached writes in, for the user it runs as
 * (docs/pcached.md "--check"). Each returns 0, or -1 with a message in err
 * that names the directory, the user and the fix.
 *   srv_dir_writable: dir exists and this user may create files in it;
 *     pfx starts each message ("db_url: lmdb:///var/lib/pcache/store").
 *   srv_file_dir_writable: path's directory exists and is writable, and
 *     path itself when it exists (log_file).
 *   srv_rundir_ready: path's directory (a runtime one: unix_socket,
 *     pidfile) exists and is writable, or is missing in a writable parent;
 *     make = 1 creates it (mode 0750), make = 0 only describes it in note
 *     ("" when nothing is to be made; note may be NULL).
 *   srv_rundirs_make: the start's runtime directories (pidfile,
 *     unix_socket, unixsocket), made or refused (logged). */
int srv_dir_writable(const char *pfx, const char *dir, char *err, size_t errlen);
int srv_file_dir_writable(const char *key, const char *path, char *err, size_t errlen);
int srv_rundir_ready(const char *key, const char *path, int make, char *note, size_t notelen,
                     char *err, size_t errlen);
int srv_rundirs_make(const srv *s);
/* cmd_info.c: 40 random hex digits (INFO run_id, master_replid) into buf
 * (at least 41 bytes), from getrandom, the clock and the pid otherwise. */
void srv_run_id(char *buf, size_t cap);
/* instance.c: one instance per pidfile, port and unix socket. Each logs
 * why it refuses (naming the other process's pid when it can be told) and
 * returns -1; 0 when the way is free. */
int srv_pidfile_lock(srv *s);     /* takes the pidfile and writes the pid */
void srv_pidfile_release(srv *s); /* at exit: unlinks it while still held */
int srv_port_probe(const struct sockaddr *sa, socklen_t len);
/* key names the setting in messages ("unix_socket", "unixsocket"). */
int srv_unix_socket_free(const char *key, const char *path); /* refuses a live one, removes a
                                                                stale one */
/* Binds a unix socket at path (after srv_unix_socket_free; listen() is
 * srv_listen_start's): mode perm from its birth (0 = what the umask
 * leaves), non-blocking when nonblock; its device and inode go to *dev,
 * *ino. Returns the fd or -1. */
int srv_unix_bind(const char *key, const char *path, unsigned perm, int nonblock, dev_t *dev,
                  ino_t *ino);
/* At exit: unlinks path only if it is still the socket (dev, ino). */
void srv_unix_path_unlink(const char *path, dev_t dev, ino_t ino);
void srv_unix_socket_unlink(const srv *s); /* the JSON-RPC one, likewise */

/* listen.c: the RESP listeners */
typedef struct srv_bind_addr {
    struct sockaddr_storage sa; /* port not set */
    socklen_t len;
    int optional;  /* "-addr": skipped when the machine lacks it (Redis 7) */
    char text[64]; /* as given, without '-' and brackets */
} srv_bind_addr;
/* Parses `bind`: addresses separated by blanks or commas, IPv4 or IPv6
 * ("::1" or "[::1]"), "*" = 0.0.0.0, "::*" = ::, a leading '-' marks one
 * optional. Returns 0 with *n set (out may be NULL), or -1 with err. */
int srv_bind_parse(const char *list, srv_bind_addr *out, unsigned max, unsigned *n, char *err,
                   size_t errlen);
int srv_resp_listen(srv *s); /* master, before the store: binds every RESP listener */
/* Master, once the store is loaded: listen() on every socket bound by
 * srv_resp_listen and srv_maint_listen. 0, or -1 logged. */
int srv_listen_start(srv *s);
/* Closes the RESP listeners of every slot but keep (-1: all, the unix one
 * too; a worker keeps the unix one). */
void srv_resp_close(srv *s, int keep);
void srv_resp_unlink(const srv *s); /* master at exit: the RESP unix socket */
/* A connection's address as Redis shows it: "ip:port", "[ip6]:port",
 * "/path:0" on the unix socket; local = the server's end (laddr). */
void srv_conn_addr(const srv *s, int fd, int local, char *buf, size_t cap);
/* "127.0.0.1:6380, [::1]:6380, unix socket /run/p.sock": what is served */
void srv_resp_describe(const srv *s, char *buf, size_t cap);
/* worker.c: never returns */
void srv_worker_main(srv *s, unsigned slot) __attribute__((noreturn));
/* maint.c: never returns */
void srv_maint_main(srv *s) __attribute__((noreturn));
/* maint.c: runs a slot's request (cmd, positional args) in this process,
 * the answer as JSON (or an error message) in the slot. */
void srv_maint_serve_slot(srv *s, pc_mgmt *m, struct srv_slot_shm *slot);
/* Encodes a request into a slot buffer: cmd NUL, u32 nargs, (u32 len,
 * bytes)*. Returns 0, or -1 when it does not fit. */
int srv_slot_encode(struct srv_slot_shm *slot, const char *cmd, unsigned nargs,
                    const char *const *argv, const size_t *argl);

/* jsonrpc_parse.c: a JSON-RPC request. Pointers (method aside) point into
 * body or scratch (at least len bytes). Returns 0 when the body is one JSON
 * object (members may still be missing or invalid: see the flags), -1 when
 * it is not JSON, -2 for a batch (an array). */
struct rpc_req {
    /* one request, as read; the strings point into doc, num or the scratch
     * buffer, valid until srv_rpc_release */
    char method[PC_MGMT_NAME_MAX + 1];
    int has_method, has_id, version_ok;
    const char *id; /* compact JSON text of the id (a scalar), NUL-terminated */
    size_t id_len;
    pc_mgmt_arg args[PC_MGMT_MAX_ARGS];
    unsigned nargs;
    int bad_params; /* 1: params not an object/array of scalars, or too many */
    int bad_b64;    /* 1: a "*_b64" or {"b64"} argument that is not canonical base64 */
    int duplicate;  /* 1: a member of the request or of params is named twice */
    char num[PC_MGMT_MAX_ARGS][32]; /* the decimal text of number arguments */
    void *doc;                      /* the parsed document (jansson), owned */
    char *id_text;                  /* owned */
};
/* Parses body (len bytes, borrowed) into *r; scratch (at least len bytes,
 * borrowed while *r is used) receives decoded base64. Returns 0 (then call
 * srv_rpc_release), -1 not JSON (or not an object), -2 a batch (an array),
 * -3 no memory. */
int srv_rpc_parse(const char *body, size_t len, char *scratch, struct rpc_req *r);
/* Frees what srv_rpc_parse kept; accepts a released or zeroed request. */
void srv_rpc_release(struct rpc_req *r);
/* jsonrpc_help.c: the door's own methods (help), beside the management
 * commands. srv_rpc_own: 1 when name is one. srv_rpc_own_run runs r's
 * method (one of them) with its result built in jb: *text (len bytes) is
 * valid until jb's next use. 0, or PC_EINVAL / PC_EHEAP with err set. */
int srv_rpc_own(const char *name);
int srv_rpc_own_run(pc_mgmt *m, pc_json *jb, const struct rpc_req *r, pc_mgmt_err *err,
                    const char **text, size_t *len);

/* metrics.c: the monitoring figures (docs/pcached.md, "Metrics and
 * health"). On success *out is caller-owned (free()), *len its length.
 * srv_metrics_text: Prometheus text 0.0.4, or OpenMetrics 1.0 when
 * openmetrics. srv_metrics_info: INFO's "# Metrics" section (flat
 * key:value lines, CRLF, ending with a blank line). Both return 0 or
 * PC_EHEAP. srv_health: the JSON body of GET /health; returns the HTTP
 * status (200 or 503) or PC_EHEAP. */
int srv_metrics_text(const srv *s, int openmetrics, char **out, size_t *len);
int srv_metrics_info(const srv *s, char **out, size_t *len);
int srv_health(const srv *s, char **out, size_t *len);

/* jsonrpc_http.c: the HTTP request framing of the management door, strict:
 * "POST <path> HTTP/1.0|1.1" with exactly one Content-Length (digits only,
 * at most max_body) and exactly Content-Length bytes of body, or
 * "GET <path> HTTP/1.0|1.1" with no body (Content-Length absent or 0); no
 * Transfer-Encoding, header lines without bare CR or NUL, nothing after
 * the request (one request per connection). Returns 0 while the request
 * is incomplete, 1 when buf[0, len) is exactly one request (get, path,
 * hdr_end, clen and the Authorization and Accept values set), or an HTTP
 * status (400, 405, 411, 413, 431, 501) with *why a static reason. */
struct http_req {
    int get;          /* 1: GET (no body), 0: POST */
    const char *path; /* the request target (not NUL-terminated), inside buf */
    size_t path_len;
    const char *accept; /* the Accept header's value (not NUL-terminated), or NULL */
    size_t accept_len;
    size_t hdr_end;   /* offset of the body */
    size_t clen;      /* its length */
    const char *auth; /* the Authorization header's value (not NUL-terminated), or NULL */
    size_t auth_len;
};
int srv_http_frame(const char *buf, size_t len, size_t max_hdr, size_t max_body, struct http_req *r,
                   const char **why);
/* Whether an Authorization value carries password pw: "Bearer <pw>" or
 * "Basic base64(<any user>:<pw>)"; compared in constant time. */
int srv_http_auth_ok(const char *auth, size_t len, const char *pw);
/* Compares a secret (an, not NUL-terminated) with b in time independent of
 * where they differ (cmd_server.c). */
int srv_secret_eq(const char *a, size_t an, const char *b);

/* jsonrpc.c (maintenance process): the management door, event-driven. The
 * maintenance loop adds its descriptors to its poll set, hands it the
 * listeners' readiness and the connections' events, and polls no longer
 * than srv_door_timeout. */
typedef struct srv_door srv_door;
srv_door *srv_door_create(void);
void srv_door_destroy(srv_door *d);
/* Accepts the connections waiting on listener lfd. tcp: 0 the unix
 * socket, 1 TCP (JSON-RPC needs the password), 2 metrics_port (GET
 * /metrics and /health only). */
void srv_door_accept(srv *s, srv_door *d, int lfd, int tcp);
/* Writes the connections' poll entries at pf (at most max); returns how many. */
unsigned srv_door_pollfds(const srv_door *d, struct pollfd *pf, unsigned max);
/* Serves the events of the n entries at pf (as filled by srv_door_pollfds)
 * and closes connections past their deadline. */
void srv_door_serve(srv *s, srv_door *d, pc_mgmt *m, const struct pollfd *pf, unsigned n);
/* Milliseconds until the next connection deadline, or -1 when none. */
int srv_door_timeout(const srv_door *d, int64_t now);

#endif /* PCACHED_H */
