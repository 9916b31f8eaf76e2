/*
 * journal_testlib.c - the fixtures and table comparison the journal's test
 * programs share (journal_testlib.h says what each one does).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h> /* after the four headers it needs */

#include "journal_testlib.h"

#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

/* ---- fixtures ------------------------------------------------------------------ */

char logbuf[1 << 16];
size_t loglen;

void log_capture(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    size_t n = strlen(msg);
    if (loglen + n + 2 < sizeof logbuf) {
        memcpy(logbuf + loglen, msg, n);
        loglen += n;
        logbuf[loglen++] = '\n';
        logbuf[loglen] = '\0';
    }
    if (getenv("PCJ_VERBOSE") != NULL)
        fprintf(stderr, "[%d] %s\n", level, msg);
}

void log_reset(void)
{
    loglen = 0;
    logbuf[0] = '\0';
}

char tmpdir[200];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

int setup_dir(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/pcj.XXXXXX", base != NULL ? base : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
    log_reset();
    return 0;
}

int teardown_dir(void **state)
{
    (void)state;
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

void child_init(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

pc_cache *new_cache_grow(const char *colls, size_t mem_mb, unsigned load_factor, unsigned budget)
{
    pc_config cfg;
    pc_fx_config(&cfg, colls, mem_mb);
    cfg.hugepage_mb = 0;
    cfg.lock_memory = 0;
    if (load_factor != 0)
        cfg.growth_load_factor = load_factor;
    if (budget != 0)
        cfg.growth_budget = budget;
    return pc_fx_create(&cfg);
}

pc_cache *new_cache(const char *colls, size_t mem_mb)
{
    return new_cache_grow(colls, mem_mb, 0, 0);
}

pc_journal *new_journal_cfg(pc_cache *c, uint64_t boot_gen, size_t ring, unsigned procs)
{
    pc_journal_config cfg;
    pc_journal_config_init(&cfg);
    cfg.dir = tmpdir;
    cfg.boot_gen = boot_gen;
    cfg.log.fn = log_capture;
    cfg.log.level = PC_LOG_DEBUG;
    cfg.buffer_bytes = ring;
    cfg.max_procs = procs;
    pc_journal *j = NULL;
    assert_int_equal(pc_journal_open(c, &cfg, &j), 0);
    return j;
}

pc_coll *journal_on(pc_cache *c, pc_journal *j, const char *name, unsigned mode)
{
    pc_coll *co = pc_fx_coll(c, name);
    assert_int_equal(pc_journal_install(j), 0);
    assert_int_equal(pc_journal_set_mode(co, mode), 0);
    return co;
}

pc_journal *new_journal(pc_cache *c, uint64_t boot_gen)
{
    return new_journal_cfg(c, boot_gen, 0, 0);
}

uint64_t rng_state = 0x9e3779b97f4a7c15ull;
uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

unsigned list_segments(const char *coll, char names[][256], unsigned max)
{
    char path[300];
    snprintf(path, sizeof path, "%s/journal", tmpdir);
    DIR *d = opendir(path);
    assert_non_null(d);
    unsigned n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char cn[PC_COLL_NAME_MAX + 1];
        uint64_t e;
        if (pc_journal_segment_name_parse(de->d_name, cn, sizeof cn, &e) != 0)
            continue;
        if (coll != NULL && strcmp(cn, coll) != 0)
            continue;
        if (n < max)
            snprintf(names[n], 256, "%s", de->d_name);
        n++;
    }
    closedir(d);
    for (unsigned a = 1; a < n && a < max; a++)
        for (unsigned b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
            char t[256];
            memcpy(t, names[b], 256);
            memcpy(names[b], names[b - 1], 256);
            memcpy(names[b - 1], t, 256);
        }
    return n;
}

/* ---- table comparison ---------------------------------------------------------- */

static int kv_collect(void *ctx, const pc_entry *e)
{
    struct kvset *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        assert_non_null(s->v);
    }
    struct kv *k = &s->v[s->n++];
    k->key = malloc(e->klen + 1);
    k->val = malloc(e->vlen + 1);
    assert_true(k->key != NULL && k->val != NULL);
    memcpy(k->key, e->key, e->klen);
    if (e->vlen)
        memcpy(k->val, e->val, e->vlen);
    k->klen = e->klen;
    k->vlen = e->vlen;
    k->ttl_ms = e->ttl_ms;
    k->is_counter = e->is_counter;
    k->stamp = e->stamp;
    return 0;
}

void kv_free(struct kvset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        free(s->v[i].val);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

void kv_snapshot(pc_coll *co, unsigned flags, struct kvset *out)
{
    memset(out, 0, sizeof *out);
    assert_int_equal(pc_walk_ordered(co, flags, kv_collect, out), 0);
}

void assert_same_table(pc_coll *a, pc_coll *b)
{
    struct kvset sa, sb;
    kv_snapshot(a, PC_WALK_VALUES, &sa);
    kv_snapshot(b, PC_WALK_VALUES, &sb);
    size_t bad = 0;
    for (size_t i = 0; i < sa.n; i++) {
        struct kv *k = &sa.v[i];
        void *val = NULL;
        size_t vlen = 0;
        pc_meta m;
        int rc = pc_get(b, k->key, k->klen, &val, &vlen, &m);
        if (rc != 0 || vlen != k->vlen || memcmp(val, k->val, vlen) != 0 ||
            m.is_counter != k->is_counter || (k->ttl_ms < 0) != (m.ttl_ms < 0) ||
            (k->ttl_ms >= 0 && llabs(k->ttl_ms - m.ttl_ms) > 2000)) {
            if (bad++ < 10)
                fprintf(stderr,
                        "mismatch key %.*s: live %.*s ctr %d ttl %lld | replayed rc %d %.*s "
                        "ctr %d ttl %lld\n",
                        (int)k->klen, (char *)k->key, (int)k->vlen, (char *)k->val, k->is_counter,
                        (long long)k->ttl_ms, rc, rc == 0 ? (int)vlen : 0,
                        rc == 0 ? (char *)val : "", rc == 0 ? m.is_counter : -1,
                        rc == 0 ? (long long)m.ttl_ms : 0ll);
        }
        free(val);
    }
    if (sb.n != sa.n)
        fprintf(stderr, "live table %zu keys, replayed %zu\n", sa.n, sb.n);
    assert_int_equal(bad, 0);
    assert_int_equal(sb.n, sa.n);
    kv_free(&sa);
    kv_free(&sb);
}
