/*
 * fuzz_url.c - the URL parsers: perf:// collection URLs (pc_url_parse,
 * src/mgmt/mgmt_url.c) against a cache that declares a few collections;
 * lmdb:// store URLs (the store's path parser, reached read-only through
 * pc_store_lock_owner, which opens nothing but "<dir>/lock.mdb"); and
 * odbc:// targets and connection strings (pc_odbc_is_url and the redaction
 * of passwords, odbc/odbc_conn.c) when the ODBC exporter is built. The
 * input is one URL (a NUL byte ends it, as it would a C string).
 *
 * Invariants: codes in range; pc_url_parse writes its out-parameter only
 * on success and then names a declared collection and a group of at most
 * 63 bytes; error messages are NUL-terminated inside their buffer; a
 * redacted string fits its buffer, shows no password value (after a
 * PWD= or PASSWORD= key only "***" or a braced value's redaction), and
 * redacting it again changes nothing.
 */
#include "fuzz_target.h"
#include "pcache_mgmt.h"
#include "pcache_store.h"
#ifdef PC_FUZZ_ODBC
#include "pcache_odbc.h"
#endif

#include <ctype.h>
#include <string.h>
#include <strings.h>

static pc_cache *cache(void)
{
    static pc_cache *c;
    if (c == NULL) {
        pc_config cfg;
        pc_config_init(&cfg);
        cfg.collections = "default;th;grp=4;a.b-c_d";
        cfg.mem_mb = 8;
        cfg.lock_memory = 0;
        if (pc_cache_create(&cfg, &c) != 0)
            abort(); /* a machine that cannot create 8 MiB: nothing to test */
    }
    return c;
}

static void perf_url(const char *url)
{
    pc_url u, before;
    memset(&u, 0x5a, sizeof u);
    before = u;
    char err[96];
    memset(err, 'x', sizeof err);
    int rc = pc_url_parse(cache(), url, &u, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == PC_EURL || rc == PC_ENOCOLL);
    if (rc != 0) {
        FUZZ_CHECK(memcmp(&u, &before, sizeof u) == 0);
        FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
        return;
    }
    FUZZ_CHECK(strncmp(url, "perf:", 5) == 0);
    FUZZ_CHECK(memchr(u.group, '\0', sizeof u.group) != NULL);
    int found = 0;
    for (unsigned i = 0; i < 4; i++)
        found |= u.coll == pc_coll_at(cache(), i);
    FUZZ_CHECK(found);
}

static void lmdb_url(const char *url)
{
    long pid = -1;
    int rc = pc_store_lock_owner(url, &pid);
    FUZZ_CHECK(rc == 0 || rc == PC_EURL || rc == PC_EINVAL || rc == PC_EIO || rc == PC_ELOCKED);
    if (rc == PC_EURL) /* only a scheme other than lmdb:/// is a bad URL; a path is a path */
        FUZZ_CHECK(strchr(url, ':') != NULL);
    if (rc == PC_ELOCKED)
        FUZZ_CHECK(pid > 0);
}

#ifdef PC_FUZZ_ODBC
/* 1 when s shows a password: a PWD= / PASSWORD= key (any case, at the
 * start or after ';' or ' ') whose value is not "***". */
static int shows_password(const char *s)
{
    for (const char *p = s; *p != '\0'; p++) {
        if (p != s && p[-1] != ';' && p[-1] != ' ')
            continue;
        size_t kl = strncasecmp(p, "PWD", 3) == 0 ? 3 : strncasecmp(p, "PASSWORD", 8) == 0 ? 8 : 0;
        if (kl == 0)
            continue;
        const char *q = p + kl;
        while (*q == ' ')
            q++;
        if (*q == '=' && strncmp(q + 1, "***", 3) != 0)
            return 1;
    }
    return 0;
}

static void odbc_url(const char *url, size_t n)
{
    int is = pc_odbc_is_url(url);
    FUZZ_CHECK(is == 0 || is == 1);
    size_t cap = 2 * n + 16;
    char *out = malloc(cap), *again = malloc(cap);
    if (out == NULL || again == NULL)
        goto out;
    pc_odbc_redact(url, out, cap);
    FUZZ_CHECK(memchr(out, '\0', cap) != NULL);
    if (strncmp(url, "odbc://", 7) == 0) {
        FUZZ_CHECK(strcmp(out, url) == 0); /* a DSN has nothing secret */
    } else if (strchr(url, '{') == NULL) {
        FUZZ_CHECK(!shows_password(out));
        pc_odbc_redact(out, again, cap);
        FUZZ_CHECK(strcmp(out, again) == 0);
    }
    char small[8];
    pc_odbc_redact(url, small, sizeof small);
    FUZZ_CHECK(memchr(small, '\0', sizeof small) != NULL);
out:
    free(out);
    free(again);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size + 1);
    if (url == NULL)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    perf_url(url);
    if (strncmp(url, "lmdb", 4) == 0)
        lmdb_url(url);
#ifdef PC_FUZZ_ODBC
    odbc_url(url, strlen(url));
#endif
    free(url);
    return 0;
}
