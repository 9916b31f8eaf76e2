/*
 * store_testlib.h - what the snapshot store's tests (test_store_*.c) share:
 * the format's byte tables read from docs/snapshot-format.md alone (these
 * tests do not include the store's internals), a log sink, a temporary
 * root per program, opening stores, fingerprints of files that must stay
 * untouched, raw LMDB access for making corruption, the collection with
 * every kind of entry, SIP-like entries, and the corruptible store.
 *
 * The including file includes cmocka.h first (the helpers assert).
 */
#ifndef STORE_TESTLIB_H
#define STORE_TESTLIB_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#include "pc_fixture.h"
#include "pcache.h"
#include "pcache_store.h"

#define check_rc(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            fail_msg("%s = %d (%s), want %d (%s)", #expr, rc_, pc_store_strerror(rc_), want_,      \
                     pc_store_strerror(want_));                                                    \
    } while (0)

/* ---- the format, from docs/snapshot-format.md ------------------------------ */
#define DOC_HDR_KEY "\0store"
#define DOC_HDR_KEYLEN 6
#define DOC_BLOCK_HDR_V1 64  /* §5.1: a version 1 block header */
#define DOC_BLOCK_HDR_V2 144 /* version 2: + generation, collection name, checksum */
#define DOC_META_SIZE 128

uint64_t le64(const uint8_t *p);
uint32_t le32(const uint8_t *p);
void put64(uint8_t *p, uint64_t v);
void put32(uint8_t *p, uint32_t v);
/* §2.3: a key's order key, the hash with its bits reversed */
uint64_t order_of(const void *k, size_t n);
/* §5.1: the header length of a block value (its version at offset 4). */
size_t doc_block_hdr(const uint8_t *h);
/* Recomputes a block header's checksums: bytes 0..55 at 56 and, in
 * version 2, bytes 0..135 at 136. */
void doc_block_seal(uint8_t *h);
/* A varint of at most 5 bytes at p (n readable); its length, 0 if malformed. */
size_t varint_get(const uint8_t *p, size_t n, uint32_t *v);

/* ---- scaffolding ----------------------------------------------------------- */
/* Every message of the stores opened below, one a line, since log_reset();
 * PCACHE_STORE_VERBOSE=1 also prints the errors. */
extern char logbuf[1 << 16];
extern size_t loglen;
void log_cb(void *ctx, int level, const char *msg);
void log_reset(void);

/* A temporary root for the program (cmocka group setup / teardown) and a
 * fresh path under it per call, named after tag. */
int setup_root(void **state);
int teardown_root(void **state);
void mk_tmp(char *out, size_t cap, const char *tag);

/* Opens path with flags, logging to log_cb at debug; fails the test on error. */
pc_store *open_store(const char *path, unsigned flags);
/* pc_store_open and close: its result and message. */
int try_open(const char *path, unsigned flags, char *err, size_t errlen);

/* XXH3 of a file's bytes plus its size and mtime: "untouched" means equal. */
uint64_t file_fingerprint(const char *path);
/* Every file of a directory, fingerprinted into one value. */
uint64_t dir_fingerprint(const char *dir);

/* ---- raw LMDB access (the store's handle must be closed meanwhile) ------ */
typedef struct raw_env {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, blocks;
} raw_env;

void raw_open(raw_env *r, const char *path);
void raw_close(raw_env *r, int commit);
/* The nth block of collection name: key copied out, value borrowed. */
int raw_block(raw_env *r, const char *name, unsigned nth, uint8_t *key, size_t *klen, MDB_val *val);

/* ---- a collection with every kind of entry ----------------------------------- */
struct kv {
    const char *key;
    size_t klen;
    const char *val;
    size_t vlen;
    int counter;
    int64_t num;
    int64_t ttl;
};

extern const struct kv mixed[];
extern const size_t nmixed;
#define NMIXED nmixed

/* The mixed entries plus "big" (200 kB, every byte value) into co. */
void put_mixed(pc_coll *co);
/* Checks them in co, elapsed_ms after they were written (the TTLs). */
void check_mixed(pc_coll *co, int64_t elapsed_ms);

int64_t mono_ms(void);

/* SIP-like entry i of sequence seed (sipgen.h) into co; one in three with no
 * TTL, the others about an hour. */
int sip_put(pc_coll *co, uint64_t seed, uint64_t i);

/* ---- corruption ----------------------------------------------------------------------- */
/* A store with collection "c" of 3000 SIP entries in several blocks. */
void mk_corruptible(char *dir, size_t cap, const char *tag, pc_store_save_result *sr);

#endif
