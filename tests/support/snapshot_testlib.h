/*
 * snapshot_testlib.h - what the tests of pcache-snapshot share
 * (test_snapshot_tool.c, test_snapshot_move.c): running the real binary
 * (PCACHE_SNAPSHOT_BIN, compiled into each test) with its output captured,
 * making stores through the library, and comparing the records of two
 * snapshots. cmocka assertions: include after cmocka.h.
 */
#ifndef SNAPSHOT_TESTLIB_H
#define SNAPSHOT_TESTLIB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "pc_fixture.h"
#include "pcache.h"
#include "pcache_store.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != (want))                                                                         \
            fail_msg("%s = %d (%s), want %d", #expr, rc_, pc_store_strerror(rc_), (want));         \
    } while (0)

/* The scratch directory of the test program (snap_test_setup makes it). */
extern char root[256];
/* The last run's stdout (tool_outlen bytes) and stderr, NUL-terminated. */
extern char tool_out[1 << 22], tool_err[1 << 16];
extern size_t tool_outlen;

int snap_test_setup(void **state);    /* cmocka group setup: mkdtemp root */
int snap_test_teardown(void **state); /* rm -rf root */

size_t slurp(int fd, char *buf, size_t cap);
/* Runs pcache-snapshot with the NULL-terminated arguments; stdout and
 * stderr land in tool_out / tool_err. Returns the exit code. When
 * run_as_uid >= 0 the tool runs as that user and group (a root test that
 * needs permissions enforced); 126 when it could not become it. */
int run(const char *arg, ...);
extern int run_as_uid;
#define expect_exit(want, ...)                                                                     \
    do {                                                                                           \
        int got_ = run(__VA_ARGS__, NULL);                                                         \
        if (got_ != (want))                                                                        \
            fail_msg("exit %d, want %d; stdout:\n%.2000s\nstderr:\n%s", got_, (want), tool_out,    \
                     tool_err);                                                                    \
    } while (0)

void expect_in(const char *hay, const char *needle);
json_t *parse_json(const char *text);

/* ---- stores ----------------------------------------------------------------- */
void mk_dir(char *out, size_t cap, const char *tag);
pc_cache *mk_cache(const char *colls);
pc_store *open_store(const char *dir, unsigned flags);
void save(const char *dir, pc_coll *co);

struct kv {
    const char *key;
    size_t klen;
    const char *val;
    size_t vlen;
    int counter;
    int64_t num, ttl;
};
#define NMIXED 13u
#define NFILL 3000u /* plus this many sip-like entries: several blocks */
#define NC (NMIXED + 1 + NFILL)
extern const struct kv mixed[NMIXED];
extern unsigned char big[200000];

/* The mixed entries, "big" (200000 binary bytes) and NFILL sip-like ones. */
void put_mixed(pc_coll *co);
/* A store with collection "c" (the mixed entries) and "d" (three keys). */
void mk_store(char *dir, size_t cap, const char *tag);

/* ---- records of a store, for comparisons ---------------------------------- */
struct rec {
    uint8_t *key, *val;
    size_t klen, vlen;
    int64_t expires;
    int counter;
};
struct recs {
    struct rec *v;
    size_t n;
};
int collect_cb(void *ctx, const pc_store_record *r);
struct recs collect(const char *dir, const char *name);
void recs_free(struct recs *rs);
/* Same keys in the same order, same bytes, same types; expiry equal within
 * tol ms (a re-import sets a TTL relative to the clock). */
void same_records(const struct recs *a, const struct recs *b, int64_t tol);
int64_t now_ms(void);

#endif
