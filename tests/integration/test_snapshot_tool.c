/*
 * test_snapshot_tool.c - pcache-snapshot (src/tools/snapshot/) run as a program
 * against stores the library made, and the store functions it added
 * (pc_store_lock_owner, pc_store_compact).
 *
 * Every test forks the real binary (PCACHE_SNAPSHOT_BIN) and asserts on its
 * exit code, stdout and stderr. JSON output is parsed with jansson, an
 * independent parser, so a malformed document fails the test. The dump
 * round trip re-imports the JSON lines and the CSV through the engine
 * (pc_set / pc_set_counter), saves, and compares record by record with the
 * original snapshot. Corruption is made with raw LMDB from the byte tables
 * of docs/snapshot-format.md, as tests/integration/test_store_corrupt.c does.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "pc_testrun.h"
#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"

#include "snapshot_testlib.h"

/* Re-imports one record through the engine with the TTL its absolute expiry
 * leaves. */
static void import_one(pc_coll *co, const uint8_t *k, size_t kl, int counter, int64_t num,
                       const uint8_t *v, size_t vl, int64_t expires)
{
    int64_t ttl = 0;
    if (expires != 0) {
        ttl = expires - now_ms();
        assert_true(ttl > 0);
    }
    if (counter)
        check_rc(pc_set_counter(co, k, kl, num, ttl), PC_OK);
    else
        check_rc(pc_set(co, k, kl, v, vl, ttl, 0), PC_OK);
}

/* ---- independent decoders of the dump formats (docs/pcache-snapshot.md) --- */
static int b64v(int c)
{
    const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(t, c) : NULL;
    return p ? (int)(p - t) : -1;
}

static uint8_t *b64dec(const char *s, size_t *outlen)
{
    size_t n = strlen(s), k = 0;
    assert_int_equal(n % 4, 0);
    uint8_t *o = malloc(n / 4 * 3 + 1);
    for (size_t i = 0; i < n; i += 4) {
        int a = b64v(s[i]), b = b64v(s[i + 1]), c = s[i + 2] == '=' ? 0 : b64v(s[i + 2]),
            d = s[i + 3] == '=' ? 0 : b64v(s[i + 3]);
        assert_true(a >= 0 && b >= 0 && c >= 0 && d >= 0);
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        o[k++] = (uint8_t)(v >> 16);
        if (s[i + 2] != '=')
            o[k++] = (uint8_t)(v >> 8);
        if (s[i + 3] != '=')
            o[k++] = (uint8_t)v;
    }
    *outlen = k;
    return o;
}

/* The bytes of field name or name_b64 of a JSON object. */
static uint8_t *jbytes(json_t *o, const char *name, size_t *len)
{
    json_t *t = json_object_get(o, name);
    if (t != NULL) {
        assert_true(json_is_string(t));
        *len = json_string_length(t);
        uint8_t *b = malloc(*len + 1);
        memcpy(b, json_string_value(t), *len);
        return b;
    }
    char nb[64];
    snprintf(nb, sizeof nb, "%s_b64", name);
    t = json_object_get(o, nb);
    if (t == NULL)
        fail_msg("neither %s nor %s", name, nb);
    return b64dec(json_string_value(t), len);
}

/* \\ and \xNN, as the tool escapes. */
static uint8_t *unesc(const char *s, size_t n, size_t *len)
{
    uint8_t *o = malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            o[k++] = (uint8_t)s[i];
        } else if (s[i + 1] == '\\') {
            o[k++] = '\\';
            i++;
        } else {
            assert_int_equal(s[i + 1], 'x');
            unsigned v;
            char h[3] = {s[i + 2], s[i + 3], 0};
            assert_int_equal(sscanf(h, "%2x", &v), 1);
            o[k++] = (uint8_t)v;
            i += 3;
        }
    }
    *len = k;
    return o;
}

/* Splits one CSV line (RFC 4180 quoting) into at most max fields, each
 * malloc'd and unquoted (still escaped). */
static size_t csv_split(const char *line, char **f, size_t max)
{
    size_t n = 0;
    const char *p = line;
    for (;;) {
        assert_true(n < max);
        char *o = malloc(strlen(p) + 1);
        size_t k = 0;
        if (*p == '"') {
            p++;
            for (;;) {
                assert_true(*p != 0);
                if (*p == '"' && p[1] == '"') {
                    o[k++] = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    o[k++] = *p++;
                }
            }
        } else {
            while (*p != ',' && *p != 0)
                o[k++] = *p++;
        }
        o[k] = 0;
        f[n++] = o;
        if (*p == 0)
            return n;
        assert_int_equal(*p, ',');
        p++;
    }
}

/* Re-imports a dump (JSON lines or CSV) of collection "c" into a fresh
 * cache, saves it into a new store and returns that store's directory. */
static void reimport(const char *dump, int csv, char *dir, size_t cap)
{
    pc_cache *c = mk_cache("c");
    pc_coll *co = pc_fx_coll(c, "c");
    char *copy = strdup(dump), *save_p = NULL;
    size_t lines = 0;
    for (char *line = strtok_r(copy, "\n", &save_p); line != NULL;
         line = strtok_r(NULL, "\n", &save_p)) {
        if (csv && lines++ == 0) {
            assert_string_equal(line, "collection,key,type,value,expires_ms,stamp");
            continue;
        }
        size_t kl, vl;
        uint8_t *k, *v;
        int counter;
        int64_t num = 0, exp;
        if (csv) {
            char *f[8];
            size_t nf = csv_split(line, f, 8);
            assert_int_equal(nf, 6);
            assert_string_equal(f[0], "c");
            k = unesc(f[1], strlen(f[1]), &kl);
            counter = strcmp(f[2], "counter") == 0;
            assert_true(counter || strcmp(f[2], "string") == 0);
            if (counter) {
                num = strtoll(f[3], NULL, 10);
                v = NULL;
                vl = 0;
            } else {
                v = unesc(f[3], strlen(f[3]), &vl);
            }
            exp = strtoll(f[4], NULL, 10);
            for (size_t i = 0; i < nf; i++)
                free(f[i]);
        } else {
            json_t *o = parse_json(line);
            assert_string_equal(json_string_value(json_object_get(o, "collection")), "c");
            k = jbytes(o, "key", &kl);
            const char *type = json_string_value(json_object_get(o, "type"));
            counter = strcmp(type, "counter") == 0;
            if (counter) {
                num = json_integer_value(json_object_get(o, "value"));
                v = NULL;
                vl = 0;
            } else {
                v = jbytes(o, "value", &vl);
            }
            exp = json_integer_value(json_object_get(o, "expires_ms"));
            json_decref(o);
        }
        import_one(co, k, kl, counter, num, v, vl, exp);
        free(k);
        free(v);
    }
    free(copy);
    mk_dir(dir, cap, "reimport");
    save(dir, co);
    pc_cache_destroy(c);
}

/* ---- corruption through the byte tables of docs/snapshot-format.md -------- */
static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static size_t varint_get(const uint8_t *p, size_t n, uint32_t *v)
{
    uint32_t x = 0;
    for (size_t i = 0; i < n && i < 5; i++) {
        x |= (uint32_t)(p[i] & 0x7f) << (7 * i);
        if ((p[i] & 0x80) == 0) {
            *v = x;
            return i + 1;
        }
    }
    fail_msg("bad varint");
    return 0;
}

typedef struct raw_env {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, blocks;
} raw_env;

static void raw_open(raw_env *r, const char *path)
{
    memset(r, 0, sizeof *r);
    assert_int_equal(mdb_env_create(&r->env), 0);
    mdb_env_set_maxdbs(r->env, 4);
    mdb_env_set_mapsize(r->env, 1ull << 30);
    assert_int_equal(mdb_env_open(r->env, path, 0, 0640), 0);
    assert_int_equal(mdb_txn_begin(r->env, NULL, 0, &r->txn), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "meta", 0, &r->meta), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "blocks", 0, &r->blocks), 0);
}

static void raw_close(raw_env *r)
{
    assert_int_equal(mdb_txn_commit(r->txn), 0);
    mdb_env_close(r->env);
}

/* Block nth of "c": its key copied out, its value borrowed. */
static int raw_block(raw_env *r, unsigned nth, uint8_t *key, size_t *klen, MDB_val *val)
{
    MDB_cursor *c;
    assert_int_equal(mdb_cursor_open(r->txn, r->blocks, &c), 0);
    MDB_val k = {2, (void *)"c"}, v;
    int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    for (unsigned i = 0; rc == 0 && i < nth; i++)
        rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    if (rc == 0 && (k.mv_size != 10 || memcmp(k.mv_data, "c", 2) != 0))
        rc = MDB_NOTFOUND;
    if (rc == 0) {
        memcpy(key, k.mv_data, k.mv_size);
        *klen = k.mv_size;
        *val = v;
    }
    mdb_cursor_close(c);
    return rc;
}

/* Flips the first value byte of the first record of block 1 of "c" and
 * recomputes every block checksum and the meta, so that only the record's
 * own checksum can tell (§5.1, §6). The record's key goes to key_out. */
static void flip_record_byte(const char *dir, char *key_out, size_t cap)
{
    raw_env r;
    raw_open(&r, dir);
    uint8_t key[80];
    size_t klen;
    MDB_val v;
    assert_int_equal(raw_block(&r, 1, key, &klen, &v), 0);
    const uint8_t *h = v.mv_data;
    uint32_t raw_len = le32(h + 12), pl = le32(h + 16);
    size_t hl = (h[4] | h[5] << 8) >= 2 ? 144 : 64; /* the header of version 2, or 1 */
    uint8_t *raw = malloc(raw_len);
    assert_int_equal(h[6], 1);
    assert_int_equal(ZSTD_decompress(raw, raw_len, h + hl, pl), raw_len);
    uint32_t kl = 0, vl = 0;
    size_t a = varint_get(raw + 17, raw_len - 17, &kl);
    size_t c = varint_get(raw + 17 + a, raw_len - 17 - a, &vl);
    snprintf(key_out, cap, "%.*s", (int)kl, (const char *)raw + 17 + a + c);
    assert_true(vl > 0);
    raw[17 + a + c + kl] ^= 0x01;
    size_t bound = ZSTD_compressBound(raw_len);
    uint8_t *nv = malloc(hl + bound);
    memcpy(nv, h, hl);
    size_t z = ZSTD_compress(nv + hl, bound, raw, raw_len, 1);
    assert_false(ZSTD_isError(z));
    put32(nv + 16, (uint32_t)z);
    put64(nv + 40, XXH3_64bits(nv + hl, z));
    put64(nv + 48, XXH3_64bits(raw, raw_len));
    put64(nv + 56, XXH3_64bits(nv, 56));
    if (hl == 144) /* version 2: the header extension's checksum */
        put64(nv + 136, XXH3_64bits(nv, 136));
    MDB_val k = {klen, key}, val = {hl + z, nv};
    assert_int_equal(mdb_put(r.txn, r.blocks, &k, &val, 0), 0);
    free(raw);
    free(nv);
    /* the meta re-derived from the blocks (§4.1) */
    XXH3_state_t *cs = XXH3_createState();
    XXH3_64bits_reset(cs);
    uint64_t stored = 0, rawb = 0;
    MDB_val bv;
    for (unsigned b = 0; raw_block(&r, b, key, &klen, &bv) == 0; b++) {
        uint8_t w[8];
        put64(w, le64((const uint8_t *)bv.mv_data + 48));
        XXH3_64bits_update(cs, w, 8);
        stored += bv.mv_size;
        rawb += le32((const uint8_t *)bv.mv_data + 12);
    }
    MDB_val mk = {3, (void *)"c:c"}, mv;
    assert_int_equal(mdb_get(r.txn, r.meta, &mk, &mv), 0);
    uint8_t m[128];
    memcpy(m, mv.mv_data, sizeof m);
    put64(m + 32, rawb);
    put64(m + 40, stored);
    put64(m + 64, XXH3_64bits_digest(cs));
    put64(m + 120, XXH3_64bits(m, 120));
    XXH3_freeState(cs);
    MDB_val nm = {sizeof m, m};
    assert_int_equal(mdb_put(r.txn, r.meta, &mk, &nm, 0), 0);
    raw_close(&r);
}

/* The meta of "c" with its record count + 1 and its own checksum fixed. */
static void meta_count_plus_one(const char *dir)
{
    raw_env r;
    raw_open(&r, dir);
    MDB_val k = {3, (void *)"c:c"}, v;
    assert_int_equal(mdb_get(r.txn, r.meta, &k, &v), 0);
    uint8_t m[128];
    assert_int_equal(v.mv_size, 128);
    memcpy(m, v.mv_data, 128);
    put64(m + 16, le64(m + 16) + 1);
    put64(m + 120, XXH3_64bits(m, 120));
    MDB_val nv = {128, m};
    assert_int_equal(mdb_put(r.txn, r.meta, &k, &nv, 0), 0);
    raw_close(&r);
}

/* The store header with the format version after this build's (§3). */
static void header_version_newer(const char *dir)
{
    raw_env r;
    raw_open(&r, dir);
    MDB_val k = {6, (void *)"\0store"}, v;
    assert_int_equal(mdb_get(r.txn, r.meta, &k, &v), 0);
    uint8_t h[48];
    memcpy(h, v.mv_data, 48);
    put32(h + 8, PC_STORE_FORMAT_VERSION + 1);
    put64(h + 40, XXH3_64bits(h, 40));
    MDB_val nv = {48, h};
    assert_int_equal(mdb_put(r.txn, r.meta, &k, &nv, 0), 0);
    raw_close(&r);
}

/* Counts the lines of tool_out. */
static size_t out_lines(void)
{
    size_t n = 0;
    for (size_t i = 0; i < tool_outlen; i++)
        n += tool_out[i] == '\n';
    return n;
}

/* A child that holds byte 0 of dir/lock.mdb exclusively (what LMDB's first
 * opener does while it initialises) until killed. */
static pid_t hold_lock(const char *dir)
{
    char p[400];
    snprintf(p, sizeof p, "%s/lock.mdb", dir);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(p, O_RDWR | O_CREAT, 0640);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        char ok = fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? 'y' : 'n';
        if (write(pfd[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char ok = 0;
    assert_int_equal(read(pfd[0], &ok, 1), 1);
    close(pfd[0]);
    assert_int_equal(ok, 'y');
    return pid;
}

static void stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* ---- info --------------------------------------------------------------------- */
static json_t *coll_in(json_t *info, const char *name)
{
    json_t *arr = json_object_get(info, "collections"), *o;
    size_t i;
    json_array_foreach(arr, i, o) if (strcmp(json_string_value(json_object_get(o, "name")), name) ==
                                      0) return o;
    fail_msg("collection %s not in info", name);
    return NULL;
}

static void test_info(void **state)
{
    (void)state;
    char dir[300], seg[400];
    mk_store(dir, sizeof dir, "info");
    /* a journal segment of "c" newer than its snapshot: pending */
    snprintf(seg, sizeof seg, "%s/journal", dir);
    mkdir(seg, 0750);
    snprintf(seg, sizeof seg, "%s/journal/c.%016llx.4242.wal", dir, 5ull);
    FILE *f = fopen(seg, "w");
    assert_non_null(f);
    fputs("0123456789", f);
    fclose(f);
    expect_exit(0, "info", dir);
    expect_in(tool_out, "format       version 2");
    expect_in(tool_out, "dictionary   none");
    expect_in(tool_out, "journal      1 segments pending (10 B)");
    expect_in(tool_out, "collections  2");
    expect_exit(0, "info", dir, "--json");
    json_t *j = parse_json(tool_out);
    assert_int_equal(json_integer_value(json_object_get(j, "format_version")), 2);
    assert_true(json_is_null(json_object_get(j, "dictionary")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "journal"), "segments_pending")), 1);
    json_t *c = coll_in(j, "c"), *d = coll_in(j, "d");
    assert_int_equal(json_integer_value(json_object_get(c, "count")), NC);
    assert_int_equal(json_integer_value(json_object_get(c, "generation")), 1);
    assert_true(json_integer_value(json_object_get(c, "blocks")) >= 2);
    assert_true(json_is_null(json_object_get(c, "dictionary")));
    assert_int_equal(json_integer_value(json_object_get(c, "journal_segments_pending")), 1);
    assert_int_equal(json_integer_value(json_object_get(d, "count")), 3);
    assert_int_equal(json_integer_value(json_object_get(d, "journal_segments_pending")), 0);
    json_decref(j);
    /* the URL form names the same store */
    char url[320];
    snprintf(url, sizeof url, "lmdb://%s", dir);
    expect_exit(0, "info", url);
    expect_in(tool_out, "collections  2");
    expect_in(tool_out, "quarantine   0 segments (0 B)");
    expect_exit(0, "quarantine", dir);
    expect_in(tool_out, "no quarantined journal segments");
    /* a segment a save moved aside (journal-format.md §4), with its reason */
    snprintf(seg, sizeof seg, "%s/journal/quarantine", dir);
    mkdir(seg, 0750);
    snprintf(seg, sizeof seg, "%s/journal/quarantine/c.%016llx.7.wal", dir, 3ull);
    assert_non_null(f = fopen(seg, "w"));
    fputs("0123456789abcdef", f);
    fclose(f);
    snprintf(seg, sizeof seg, "%s/journal/quarantine/c.%016llx.7.wal.reason", dir, 3ull);
    assert_non_null(f = fopen(seg, "w"));
    fputs("segment header checksum mismatch\n", f);
    fclose(f);
    expect_exit(0, "info", dir);
    expect_in(tool_out, "journal      1 segments pending (10 B)");
    expect_in(tool_out, "quarantine   1 segments (16 B)");
    expect_exit(0, "quarantine", dir);
    expect_in(tool_out, "c.0000000000000003.7.wal");
    expect_in(tool_out, "segment header checksum mismatch");
    expect_exit(0, "quarantine", dir, "--json");
    j = parse_json(tool_out);
    assert_int_equal(json_integer_value(json_object_get(j, "segments")), 1);
    json_t *q = json_array_get(json_object_get(j, "quarantine"), 0);
    assert_int_equal(json_integer_value(json_object_get(q, "bytes")), 16);
    assert_string_equal(json_string_value(json_object_get(q, "reason")),
                        "segment header checksum mismatch");
    json_decref(j);
}

/* ---- ls / keys ---------------------------------------------------------------- */
static void test_ls_keys(void **state)
{
    (void)state;
    char dir[300];
    mk_store(dir, sizeof dir, "ls");
    expect_exit(0, "ls", dir);
    expect_in(tool_out, "\nc ");
    expect_in(tool_out, "\nd ");
    assert_int_equal(out_lines(), 3); /* header + 2 */
    expect_exit(0, "keys", dir, "c", "ttl-*");
    assert_int_equal(out_lines(), 2);
    expect_in(tool_out, "ttl-long\n");
    expect_in(tool_out, "ttl-day\n");
    expect_exit(0, "keys", dir, "c", "--limit", "5");
    assert_int_equal(out_lines(), 5);
    expect_exit(0, "keys", dir, "c");
    assert_int_equal(out_lines(), NC);
    expect_in(tool_out, "\n\\xff\\xfe\\x00\\x01\n");
    expect_in(tool_out, "bin\\x00key\n");
    expect_in(tool_out, "comma,\"quote\"\\\\back\n");
    expect_exit(0, "ls", dir, "c", "counter-*");
    expect_in(tool_out, "counter         8 ");
    expect_exit(0, "ls", dir, "c", "--json");
    json_t *j = parse_json(tool_out);
    assert_int_equal(json_array_size(json_object_get(j, "keys")), NC);
    assert_int_equal(json_integer_value(json_object_get(j, "shown")), NC);
    assert_true(json_is_false(json_object_get(j, "truncated")));
    json_decref(j);
    /* the one JSON convention: text is "key", a NUL byte makes it "key_b64"
     * (base64 of "bin\0key"), like pcached's JSON-RPC and the MI replies */
    expect_exit(0, "ls", dir, "c", "bin*", "--json");
    expect_in(tool_out, "\"key_b64\":\"YmluAGtleQ==\"");
    expect_exit(0, "ls", dir, "c", "alpha", "--json");
    expect_in(tool_out, "\"key\":\"alpha\"");
    expect_exit(0, "keys", dir, "c", "u*", "--limit", "7", "--json");
    j = parse_json(tool_out);
    assert_int_equal(json_array_size(json_object_get(j, "keys")), 7);
    assert_true(json_is_true(json_object_get(j, "truncated")));
    json_decref(j);
    expect_exit(2, "keys", dir, "c", "[abc");
    expect_in(tool_err, "not a well-formed glob");
    expect_exit(2, "keys", dir, "c", "--limit", "x");
}

/* ---- get ---------------------------------------------------------------------- */
static void test_get(void **state)
{
    (void)state;
    char dir[300];
    mk_store(dir, sizeof dir, "get");
    expect_exit(0, "get", dir, "c", "alpha");
    expect_in(tool_out, "type     string\nsize     3\nttl      never\nvalue    one\n");
    expect_exit(0, "get", dir, "c", "counter-neg");
    expect_in(tool_out, "type     counter");
    expect_in(tool_out, "value    -42\n");
    expect_in(tool_out, "ttl      35");
    expect_exit(0, "get", dir, "c", "--escaped", "\\xff\\xfe\\x00\\x01", "--json");
    json_t *j = parse_json(tool_out);
    size_t l;
    uint8_t *b = jbytes(j, "value", &l);
    assert_int_equal(l, 3);
    assert_memory_equal(b, "\x00\x00\xff", 3);
    free(b);
    b = jbytes(j, "key", &l);
    assert_int_equal(l, 4);
    assert_memory_equal(b, "\xff\xfe\x00\x01", 4);
    free(b);
    assert_true(json_is_null(json_object_get(j, "ttl_ms")));
    json_decref(j);
    expect_exit(0, "get", dir, "c", "counter-min", "--json");
    j = parse_json(tool_out);
    assert_true(json_integer_value(json_object_get(j, "value")) == INT64_MIN);
    assert_string_equal(json_string_value(json_object_get(j, "type")), "counter");
    assert_true(json_integer_value(json_object_get(j, "ttl_ms")) == 0 ||
                json_is_null(json_object_get(j, "ttl_ms")));
    json_decref(j);
    expect_exit(0, "get", dir, "c", "ttl-long", "--json");
    j = parse_json(tool_out);
    json_int_t ttl = json_integer_value(json_object_get(j, "ttl_ms"));
    assert_true(ttl > 3500000 && ttl <= 3600000);
    json_decref(j);
    /* --raw: the exact bytes of a 200 000-byte binary value */
    expect_exit(0, "get", dir, "c", "big", "--raw");
    assert_int_equal(tool_outlen, sizeof big);
    assert_memory_equal(tool_out, big, sizeof big);
    expect_exit(7, "get", dir, "c", "nope");
    expect_in(tool_err, "collection c (generation 1) has no key 'nope'");
    expect_exit(6, "get", dir, "zz", "alpha");
    expect_in(tool_err, "has no collection 'zz'");
    expect_exit(2, "get", dir, "c", "--escaped", "bad\\q");
    expect_in(tool_err, "malformed escape");
}

/* ---- dump and re-import --------------------------------------------------------- */
static void test_dump_reimport(void **state)
{
    (void)state;
    char dir[300], back[300];
    mk_store(dir, sizeof dir, "dump");
    struct recs orig = collect(dir, "c");
    assert_int_equal(orig.n, NC);
    /* JSON lines */
    expect_exit(0, "dump", dir, "c");
    assert_int_equal(out_lines(), NC);
    reimport(tool_out, 0, back, sizeof back);
    struct recs again = collect(back, "c");
    same_records(&orig, &again, 1000);
    recs_free(&again);
    /* CSV */
    expect_exit(0, "dump", dir, "c", "--format", "csv");
    assert_int_equal(out_lines(), NC + 1);
    reimport(tool_out, 1, back, sizeof back);
    again = collect(back, "c");
    same_records(&orig, &again, 1000);
    recs_free(&again);
    recs_free(&orig);
    /* every collection by default */
    expect_exit(0, "dump", dir, "--json");
    assert_int_equal(out_lines(), NC + 3);
    expect_in(tool_out, "{\"collection\":\"d\",\"key\":\"only-d\",\"type\":\"string\"");
    expect_exit(6, "dump", dir, "c", "nope");
    assert_int_equal(tool_outlen, 0); /* checked before any output */
    expect_exit(2, "dump", dir, "--format", "xml");
    expect_exit(2, "dump", dir, "--format", "csv", "--json");
}

/* ---- verify on sound and damaged stores --------------------------------------- */
static void test_verify_corrupt(void **state)
{
    (void)state;
    char dir[300], key[128], want[200];
    mk_store(dir, sizeof dir, "verify");
    expect_exit(0, "verify", dir);
    expect_in(tool_out, ": clean");
    expect_exit(0, "verify", dir, "--json");
    json_t *j = parse_json(tool_out);
    assert_true(json_is_true(json_object_get(j, "clean")));
    assert_int_equal(json_integer_value(json_object_get(j, "records")), NC + 3);
    json_decref(j);
    /* a flipped byte in a record: verify names the collection and the key */
    flip_record_byte(dir, key, sizeof key);
    expect_exit(1, "verify", dir);
    snprintf(want, sizeof want, "record   collection c, block ");
    expect_in(tool_out, want);
    snprintf(want, sizeof want, "key '%s': record 0: record fails its checksum", key);
    expect_in(tool_out, want);
    expect_exit(1, "verify", dir, "c", "--json");
    j = parse_json(tool_out);
    json_t *p = json_array_get(json_object_get(j, "problems"), 0);
    assert_string_equal(json_string_value(json_object_get(p, "kind")), "record");
    assert_string_equal(json_string_value(json_object_get(p, "key")), key);
    json_decref(j);
    expect_exit(0, "verify", dir, "d"); /* the other collection is sound */
    /* the readers name the key too, and keep what is sound */
    expect_exit(8, "get", dir, "c", key);
    snprintf(want, sizeof want, "collection c: key '%s': record fails its checksum", key);
    expect_in(tool_err, want);
    expect_exit(8, "dump", dir, "c");
    assert_int_equal(out_lines(), NC - 1);
    expect_in(tool_err, "collection c: block ");
    snprintf(want, sizeof want, "key '%s': record fails its checksum", key);
    expect_in(tool_err, want);
    expect_in(tool_err, "not in the dump");
    expect_exit(8, "keys", dir, "c");
    assert_int_equal(out_lines(), NC - 1);
    expect_exit(8, "compact", dir);
    expect_in(tool_err, "problems (see: verify)");

    /* a meta record count that disagrees with the blocks */
    mk_store(dir, sizeof dir, "verify-count");
    meta_count_plus_one(dir);
    expect_exit(1, "verify", dir, "--json");
    j = parse_json(tool_out);
    p = json_array_get(json_object_get(j, "problems"), 0);
    assert_int_equal(json_array_size(json_object_get(j, "problems")), 1);
    assert_string_equal(json_string_value(json_object_get(p, "kind")), "count");
    expect_in(json_string_value(json_object_get(p, "message")), "the meta says");
    json_decref(j);
    expect_exit(1, "verify", dir);
    expect_in(tool_out, "count    collection c: the blocks hold");

    /* a truncated data.mdb */
    mk_store(dir, sizeof dir, "verify-trunc");
    char data[340];
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    struct stat st;
    assert_int_equal(stat(data, &st), 0);
    assert_int_equal(truncate(data, st.st_size / 2), 0);
    /* the structural walk reports it as a problem of the file (stdout) */
    expect_exit(1, "verify", dir);
    expect_in(tool_out, "the file is truncated");
    expect_in(tool_out, "file ");
    expect_exit(1, "verify", dir, "--json");
    j = parse_json(tool_out);
    assert_true(json_is_false(json_object_get(j, "clean")));
    assert_string_equal(json_string_value(json_object_get(j, "structure")), "damaged");
    json_decref(j);
    expect_exit(8, "info", dir);
    expect_in(tool_err, "truncated");
    assert_int_equal(stat(data, &st), 0); /* read-only: nothing rewritten */
}

/* ---- diff ----------------------------------------------------------------------- */
static void test_diff(void **state)
{
    (void)state;
    char a[300], b[300];
    mk_store(a, sizeof a, "diff-a");
    mk_dir(b, sizeof b, "diff-b");
    {
        pc_cache *c = mk_cache("c");
        pc_coll *co = pc_fx_coll(c, "c");
        put_mixed(co);
        check_rc(pc_remove(co, "alpha", 5), PC_OK);
        check_rc(pc_set(co, "new\n", 4, "n", 1, 0, 0), PC_OK);
        check_rc(pc_set(co, "empty-value", 11, "now set", 7, 0, 0), PC_OK);
        check_rc(pc_set_counter(co, "counter-max", 11, 5, 0), PC_OK);
        check_rc(pc_set_counter(co, "sip:alice@example.com", 21, 1, 0), PC_OK);
        save(b, co);
        pc_cache_destroy(c);
    }
    expect_exit(1, "diff", a, b, "-c", "c");
    expect_in(tool_out, "+ c: new\\x0a\n");
    expect_in(tool_out, "- c: alpha\n");
    expect_in(tool_out, "~ c: empty-value (value)\n");
    expect_in(tool_out, "~ c: counter-max (value)\n");
    expect_in(tool_out, "~ c: sip:alice@example.com (type,value,expiry)\n");
    /* ttl'd fill entries were written with relative TTLs at different
     * moments: their absolute expiry differs between the two saves */
    expect_exit(1, "diff", a, b, "-c", "c", "--json");
    json_t *j = parse_json(tool_out);
    json_t *c0 = json_array_get(json_object_get(j, "collections"), 0);
    assert_int_equal(json_integer_value(json_object_get(c0, "added")), 1);
    assert_int_equal(json_integer_value(json_object_get(c0, "removed")), 1);
    assert_true(json_is_false(json_object_get(j, "identical")));
    json_decref(j);
    /* every collection: d is only on the left */
    expect_exit(1, "diff", a, b);
    expect_in(tool_out, "- d: the collection is only in the left store\n");
    /* a store against itself, and two collections of one store */
    expect_exit(0, "diff", a, a);
    expect_in(tool_out, "c: 0 added, 0 removed, 0 changed");
    expect_exit(1, "diff", a, "-a", "c", "-b", "d", "--json");
    j = parse_json(tool_out);
    c0 = json_array_get(json_object_get(j, "collections"), 0);
    assert_int_equal(json_integer_value(json_object_get(c0, "added")), 1);   /* only-d */
    assert_int_equal(json_integer_value(json_object_get(c0, "changed")), 1); /* counter-neg */
    assert_int_equal(json_integer_value(json_object_get(c0, "same")), 1);    /* alpha */
    assert_int_equal(json_integer_value(json_object_get(c0, "removed")), NC - 2);
    json_decref(j);
    expect_exit(6, "diff", a, b, "-c", "d");
    expect_exit(2, "diff", a);
}

/* ---- compact -------------------------------------------------------------------- */
static void test_compact(void **state)
{
    (void)state;
    char dir[300], data[340];
    mk_store(dir, sizeof dir, "compact");
    /* more saves of "c": the old pages become free pages */
    pc_cache *c = mk_cache("c");
    put_mixed(pc_fx_coll(c, "c"));
    for (int i = 0; i < 4; i++)
        save(dir, pc_fx_coll(c, "c"));
    pc_cache_destroy(c);
    expect_exit(0, "dump", dir, "--expired");
    char *before = strdup(tool_out);
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    struct stat st0, st1;
    assert_int_equal(stat(data, &st0), 0);
    /* refused while another process has the store open */
    pid_t holder = fork();
    if (holder == 0) { /* a reader that keeps the store open */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pc_store *s = open_store(dir, PC_STORE_RDONLY);
        (void)s;
        pause();
        _exit(0);
    }
    assert_true(holder > 0);
    for (int i = 0; i < 200; i++) { /* until the child has opened it */
        char lp[340];
        snprintf(lp, sizeof lp, "%s/lock.mdb", dir);
        int fd = open(lp, O_RDONLY);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
        int busy = fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
        if (fd >= 0)
            close(fd);
        if (busy)
            break;
        usleep(10000);
    }
    expect_exit(9, "compact", dir);
    char want[80];
    snprintf(want, sizeof want, "is open in another process (pid %d)", (int)holder);
    expect_in(tool_err, want);
    assert_int_equal(stat(data, &st1), 0);
    assert_true(st1.st_ino == st0.st_ino && st1.st_size == st0.st_size); /* untouched */
    stop(holder);
    /* a copy left by a compaction that crashed before its rename: replaced */
    char tmp[360];
    snprintf(tmp, sizeof tmp, "%s/data.mdb.compact", dir);
    FILE *junk = fopen(tmp, "w");
    assert_non_null(junk);
    fputs("half a copy", junk);
    fclose(junk);
    /* compacted: smaller, same content, verifies, readable by the library */
    expect_exit(0, "compact", dir, "--json");
    json_t *j = parse_json(tool_out);
    json_int_t b0 = json_integer_value(json_object_get(j, "bytes_before")),
               b1 = json_integer_value(json_object_get(j, "bytes_after"));
    assert_int_equal(b0, st0.st_size);
    assert_true(b1 < b0);
    assert_true(json_integer_value(json_object_get(j, "entries")) > 4);
    json_decref(j);
    assert_int_equal(stat(data, &st1), 0);
    assert_int_equal(st1.st_size, b1);
    assert_true((st1.st_mode & 0777) == (st0.st_mode & 0777));
    expect_exit(0, "verify", dir);
    expect_exit(0, "dump", dir, "--expired");
    assert_string_equal(tool_out, before);
    free(before);
    assert_int_equal(access(tmp, F_OK), -1);
    /* and the library writes into it again */
    c = mk_cache("c");
    check_rc(pc_set(pc_fx_coll(c, "c"), "after", 5, "compact", 7, 0, 0), PC_OK);
    save(dir, pc_fx_coll(c, "c"));
    pc_cache_destroy(c);
    expect_exit(0, "get", dir, "c", "after");
    expect_exit(0, "verify", dir);
    /* the store function refuses what is not a store, or is newer */
    char err[600], other[300];
    pc_store_compact_result res;
    check_rc(pc_store_compact("/nonexistent/pcache", &res, err, sizeof err), PC_ESTORE);
    expect_in(err, "data.mdb");
    check_rc(pc_store_compact("mysql://x", &res, err, sizeof err), PC_EURL);
    mk_store(other, sizeof other, "compact-newer");
    header_version_newer(other);
    snprintf(data, sizeof data, "%s/data.mdb", other);
    assert_int_equal(stat(data, &st0), 0);
    check_rc(pc_store_compact(other, &res, err, sizeof err), PC_EFORMAT);
    expect_in(err, "newer format version");
    assert_int_equal(stat(data, &st1), 0);
    assert_true(st1.st_ino == st0.st_ino); /* not replaced */
}

/* ---- info while another process saves in a loop ---------------------------------- */
#define LOOP_BASE 100
#define LOOP_SPAN 37

static void saver_loop(const char *dir)
{
    /* save i (generation i + 1) holds LOOP_BASE + i % LOOP_SPAN records */
    pc_cache *c = mk_cache("c");
    pc_coll *co = pc_fx_coll(c, "c");
    pc_store *s = open_store(dir, PC_STORE_CREATE);
    for (unsigned i = 0;; i++) {
        uint64_t n;
        pc_del_glob(co, "*", 1, &n);
        unsigned want = LOOP_BASE + i % LOOP_SPAN;
        for (unsigned k = 0; k < want; k++) {
            char key[32], val[64];
            int kl = snprintf(key, sizeof key, "k%u", k);
            int vl = snprintf(val, sizeof val, "save %u value %u", i, k);
            if (pc_set(co, key, (size_t)kl, val, (size_t)vl, 0, 0) != 0)
                _exit(3);
        }
        if (pc_store_save(s, co, NULL, NULL) != 0)
            _exit(4);
    }
}

static void test_info_during_saves(void **state)
{
    (void)state;
    char dir[300];
    mk_dir(dir, sizeof dir, "loop");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        saver_loop(dir);
        _exit(0);
    }
    /* wait for the first commit */
    for (int i = 0; i < 500; i++) {
        if (run("info", dir, "--json", "-q", NULL) == 0 && strstr(tool_out, "\"name\":\"c\""))
            break;
        usleep(20000);
    }
    json_int_t last_gen = 0, gens_seen = 0;
    /* at least 30 looks, and on until three different saves were seen */
    for (int round = 0; (round < 30 || gens_seen < 3) && round < 1000; round++) {
        expect_exit(0, "info", dir, "--json");
        json_t *j = parse_json(tool_out);
        json_t *c = coll_in(j, "c");
        json_int_t gen = json_integer_value(json_object_get(c, "generation")),
                   count = json_integer_value(json_object_get(c, "count"));
        if (count != LOOP_BASE + (gen - 1) % LOOP_SPAN)
            fail_msg("info shows generation %lld with %lld records: not one save's", (long long)gen,
                     (long long)count);
        assert_true(gen >= last_gen);
        gens_seen += gen != last_gen;
        last_gen = gen;
        json_decref(j);
        if (round % 5 == 0) /* the whole snapshot, block by block, is one save too */
            expect_exit(0, "verify", dir, "c");
    }
    int st;
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* the saver is still saving */
    stop(pid);
    assert_true(gens_seen >= 3); /* saves did commit while info ran */
}

/* ---- the error messages and exit codes ------------------------------------------ */
static void test_errors(void **state)
{
    (void)state;
    char dir[300], path[340];
    expect_exit(3, "info", "/nonexistent/pcache/store");
    expect_in(tool_err, "/nonexistent/pcache/store: no such file or directory");
    expect_exit(3, "info", "--json", "/nonexistent/x");
    json_t *j = parse_json(tool_err);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "no_such_path");
    assert_int_equal(json_integer_value(json_object_get(e, "exit")), 3);
    json_decref(j);
    /* not a store: a file, an empty directory, a directory of other things,
     * an LMDB environment that is not ours */
    mk_dir(dir, sizeof dir, "notstore");
    assert_int_equal(mkdir(dir, 0750), 0);
    expect_exit(4, "info", dir);
    expect_in(tool_err, "is not a pcache store: it holds no data.mdb");
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    FILE *f = fopen(path, "w");
    fputs("this is not LMDB at all, just some text that is long enough to be read", f);
    fclose(f);
    expect_exit(4, "ls", dir);
    expect_in(tool_err, "is not a pcache store: store");
    expect_in(tool_err, "data.mdb is not an LMDB file");
    expect_exit(4, "info", path);
    expect_in(tool_err, "not a directory");
    mk_dir(dir, sizeof dir, "foreign");
    assert_int_equal(mkdir(dir, 0750), 0);
    {
        MDB_env *env;
        MDB_txn *t;
        MDB_dbi d;
        assert_int_equal(mdb_env_create(&env), 0);
        assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &t), 0);
        assert_int_equal(mdb_dbi_open(t, NULL, 0, &d), 0);
        MDB_val k = {3, (void *)"foo"}, v = {3, (void *)"bar"};
        assert_int_equal(mdb_put(t, d, &k, &v, 0), 0);
        assert_int_equal(mdb_txn_commit(t), 0);
        mdb_env_close(env);
    }
    expect_exit(4, "verify", dir);
    expect_in(tool_err, "not a pcache store");
    /* a newer format version */
    mk_store(dir, sizeof dir, "newer");
    header_version_newer(dir);
    expect_exit(5, "info", dir);
    expect_in(tool_err, "newer format version (version 3; this build reads version 2)");
    expect_exit(5, "dump", dir);
    /* a collection that does not exist */
    mk_store(dir, sizeof dir, "nocoll");
    expect_exit(6, "keys", dir, "nope");
    expect_in(tool_err, "has no collection 'nope'");
    expect_exit(6, "verify", dir, "no/such");
    expect_in(tool_err, "'no/such' is not a collection name");
    /* a store locked exclusively: a clear error, not a hang */
    pid_t pid = hold_lock(dir);
    long owner = 0;
    check_rc(pc_store_lock_owner(dir, &owner), PC_ELOCKED);
    assert_int_equal(owner, pid);
    expect_exit(9, "info", dir, "--wait", "200");
    char want[120];
    snprintf(want, sizeof want, "is locked exclusively by process %d", (int)pid);
    expect_in(tool_err, want);
    expect_exit(9, "compact", dir, "--wait", "0");
    stop(pid);
    check_rc(pc_store_lock_owner(dir, &owner), PC_OK);
    expect_exit(0, "info", dir);
    /* usage */
    expect_exit(2, "frobnicate");
    expect_in(tool_err, "unknown verb 'frobnicate'");
    expect_exit(2, "info");
    expect_exit(2, "info", dir, "--bogus");
    expect_exit(2, "info", dir, "--wait", "soon");
}

/* ---- a store this user may not read (issue 34, F4) ------------------------------- */
/* Runs verb on dir as run_as_uid: exit want, the permission problem named
 * with what and mode, never taken for "not a store". */
static void expect_denied(const char *verb, const char *dir, int want, const char *what,
                          const char *mode)
{
    char dst[400];
    snprintf(dst, sizeof dst, "%s.salvaged", dir);
    int rc = strcmp(verb, "salvage") == 0 ? run(verb, dir, dst, NULL) : run(verb, dir, NULL);
    if (rc == 126)
        pc_skip("[permission] cannot become uid %d", run_as_uid);
    if (rc != want)
        fail_msg("%s: exit %d, want %d; stderr: %s", verb, rc, want, tool_err);
    expect_in(tool_err, "permission denied");
    expect_in(tool_err, what);
    expect_in(tool_err, mode);
    if (strstr(tool_err, "not a pcache store") != NULL || strstr(tool_err, "no data.mdb") != NULL)
        fail_msg("%s: a permission problem taken for no store: %s", verb, tool_err);
    assert_int_equal(access(dst, F_OK), -1); /* salvage wrote nothing */
}

static void test_permission(void **state)
{
    (void)state;
    char dir[300], data[340], lock[340];
    mk_store(dir, sizeof dir, "perm");
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    snprintf(lock, sizeof lock, "%s/lock.mdb", dir);
    expect_exit(0, "info", dir); /* lock.mdb exists */
    /* root ignores permission bits: the tool runs as nobody; another user
     * is refused by the bits of its own files */
    int root_user = geteuid() == 0;
    static const char *const verbs[] = {"info", "verify", "ls", "dump", "salvage"};
    assert_int_equal(chmod(root, 0755), 0);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(chmod(lock, 0666), 0);
    run_as_uid = root_user ? 65534 : -1;
    /* data.mdb that only its owner may read: exit 10 (a system error) */
    assert_int_equal(chmod(data, root_user ? 0600 : 0), 0);
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
        expect_denied(verbs[i], dir, 10, "may not read data.mdb",
                      root_user ? "mode 0600" : "mode 0000");
    /* a directory it may not look inside */
    assert_int_equal(chmod(data, 0644), 0);
    assert_int_equal(chmod(dir, root_user ? 0700 : 0), 0);
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
        expect_denied(verbs[i], dir, 10, "may not look inside the directory",
                      root_user ? "mode 0700" : "mode 0000");
    /* a lock.mdb it may not write keeps a reader out as a lock would: 9 */
    assert_int_equal(chmod(dir, root_user ? 0755 : 0555), 0);
    assert_int_equal(chmod(lock, 0444), 0);
    expect_denied("info", dir, 9, "may not write lock.mdb", "mode 0444");
    run_as_uid = -1;
    assert_int_equal(chmod(dir, 0750), 0);
    assert_int_equal(chmod(lock, 0640), 0);
    assert_int_equal(chmod(root, 0700), 0);
    expect_exit(0, "verify", dir);
}

/* ---- --help of every verb --------------------------------------------------------- */
static void test_help(void **state)
{
    (void)state;
    static const char *const verbs[] = {"info",   "ls",   "keys",    "get",    "dump",
                                        "verify", "diff", "compact", "export", "import"};
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
        char want[64];
        snprintf(want, sizeof want, "usage: pcache-snapshot %s", verbs[i]);
        expect_exit(0, verbs[i], "--help");
        expect_in(tool_out, want);
        expect_exit(0, "help", verbs[i]);
        expect_in(tool_out, want);
    }
    expect_exit(0, "--help");
    expect_in(tool_out, "compact STORE");
}

/* The manual names every verb in its synopsis, every exit code in its
 * table and every JSON error code the tool emits. */
static void test_manual(void **state)
{
    (void)state;
    FILE *f = fopen(PCACHE_DOCS_DIR "/pcache-snapshot.md", "r");
    assert_non_null(f);
    static char doc[1 << 17];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof doc - 1);
    doc[n] = 0;
    static const char *const verbs[] = {"info",   "ls",   "keys",    "get",    "dump",
                                        "verify", "diff", "compact", "export", "import"};
    char want[64];
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
        snprintf(want, sizeof want, "    pcache-snapshot %s ", verbs[i]);
        expect_in(doc, want);
    }
    for (int code = 0; code <= 11; code++) {
        snprintf(want, sizeof want, "\n| %d | ", code);
        expect_in(doc, want);
    }
    static const char *const codes[] = {
        "usage",       "no_such_path", "not_a_store", "newer_format", "no_such_collection",
        "no_such_key", "corrupt",      "locked",      "io",           "database"};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
        snprintf(want, sizeof want, "`%s`", codes[i]);
        expect_in(doc, want);
    }
}

int main(int argc, char **argv)
{
    pc_test_args(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_ls_keys),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_dump_reimport),
        cmocka_unit_test(test_verify_corrupt),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_compact),
        cmocka_unit_test(test_info_during_saves),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_permission),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_manual),
    };
    return pc_test_exit(
        PC_RUN_GROUP("test_snapshot_tool", tests, snap_test_setup, snap_test_teardown));
}
