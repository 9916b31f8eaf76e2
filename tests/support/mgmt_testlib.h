/*
 * mgmt_testlib.h - what the management layer's tests (test_mgmt_*.c)
 * share: a strict JSON validator and a decoder of the byte convention, the
 * fixture (a cache with four collections, a pc_mgmt bound to "sessions",
 * a JSON builder), running a command line or an argument vector through
 * it, and checking a call that must fail: the right code and message,
 * nothing emitted, nothing changed in the table.
 *
 * Replies are checked two ways: the strict RFC 8259 validator (which also
 * requires every raw byte in a string to be well-formed UTF-8), and the
 * decoder of our byte convention (\u0000..\u00ff = one byte) that must give
 * the original bytes back. Expected fields are then found with plain
 * string searches, which the compact output makes exact.
 *
 * The including file includes cmocka.h first (the helpers assert).
 */
#ifndef MGMT_TESTLIB_H
#define MGMT_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pcache_mgmt.h"

#define S(lit) lit, (sizeof(lit) - 1)

/* ---- a strict JSON validator ---------------------------------------------- */
bool json_valid(const char *s, size_t n);
/* Decodes the JSON string starting at s (at its opening quote) by our byte
 * convention into out (cap bytes); returns the byte count. */
size_t json_decode(const char *s, unsigned char *out, size_t cap);

/* ---- the fixture ------------------------------------------------------------ */
struct fx {
    pc_cache *c;
    pc_mgmt *m;
    pc_json *j;
    const char *out; /* last reply (valid until the next run) */
    size_t outlen;
    pc_mgmt_err err;
};

pc_coll *coll(struct fx *f, const char *name);
void fx_put(struct fx *f, const char *cn, const void *k, size_t kl, const void *v, size_t vl,
            int64_t ttl_s);
/* The fixture with growth_load_factor growth (0: no growth). */
int fx_setup_cfg(void **state, unsigned growth);
int fx_setup(void **state);
int fx_teardown(void **state);

/* Runs a line / a command with arguments; a reply is checked to be valid
 * JSON (f->out), an error to carry a message (f->err). Returns rc. */
int run(struct fx *f, const char *line);
int runv(struct fx *f, const char *cmd, const pc_mgmt_arg *a, unsigned n);
/* run() that must succeed, and needles the reply must have / lack. */
void ok(struct fx *f, const char *line);
void has(struct fx *f, const char *needle);
void lacks(struct fx *f, const char *needle);

/* Every entry of every collection as sorted text, and the counter
 * baselines (malloc'd). */
char *snapshot(struct fx *f);
/* Runs a call that must fail with rc and a message containing want, emit
 * nothing, and change nothing. */
void bad(struct fx *f, const char *line, int rc, const char *want);
void badv(struct fx *f, const char *cmd, const pc_mgmt_arg *a, unsigned n, int rc,
          const char *want);

#endif
