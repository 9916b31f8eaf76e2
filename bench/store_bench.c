/*
 * store_bench.c - pcache-store-bench: measures the snapshot store on
 * SIP-like data (sipgen.h). Not installed; what it prints and the runs
 * recorded are in docs/benchmarks.md, "store format study".
 *
 *   pcache-store-bench study [N]        compression study: block size x
 *                                        zstd level x dictionary, on N
 *                                        entries encoded as snapshot records
 *   pcache-store-bench save DIR [N [R [B:L:T,...]]]
 *                                        fill a cache with N entries, then per
 *                                        configuration (block bytes, zstd
 *                                        level, threads as in
 *                                        pc_store_config) save and load R
 *                                        times through a store under DIR and
 *                                        print medians
 *   pcache-store-bench check DIR [N [R]] the structural check of a healthy
 *                                        store of N entries (16-byte keys,
 *                                        200-byte values) against its load
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zdict.h>
#include <zstd.h>

#include "pcache.h"
#include "pcache_store.h"
#include "pcache_storecheck.h"
#include "sipgen.h"

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
#include "store_format.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- study ------------------------------------------------------------------ */
struct st_rec {
    uint64_t order;
    uint32_t off, len;
};

static int st_cmp(const void *a, const void *b)
{
    const struct st_rec *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

struct st_data {
    uint8_t *raw; /* records in order key order */
    size_t raw_len;
    struct st_rec *recs;
    size_t n;
    uint64_t value_bytes, key_bytes;
};

/* The absolute expiry bench_put gives entry i (0 for a fifth: never). */
static uint64_t bench_expires(int64_t now, uint64_t i, int kind)
{
    static const int64_t base[] = {3600000, 7200000, 60000, 3600000};
    return i % 5 == 0 ? 0 : (uint64_t)(now + base[kind] + (int64_t)((i * 7919) % 600000));
}

static int st_build(struct st_data *d, size_t n)
{
    memset(d, 0, sizeof *d);
    uint8_t *tmp = malloc(n * 640);
    d->recs = calloc(n, sizeof *d->recs);
    if (tmp == NULL || d->recs == NULL)
        return -1;
    size_t off = 0;
    int64_t now = wall_ms();
    for (size_t i = 0; i < n; i++) {
        pc_sipgen_entry e;
        pc_sipgen_entry_make(7, i, &e);
        pc_sf_rec r = {.key = (const uint8_t *)e.key,
                       .klen = (uint32_t)e.klen,
                       .val = (const uint8_t *)e.val,
                       .vlen = (uint32_t)e.vlen,
                       .expires_ms = bench_expires(now, i, e.kind),
                       .stamp = (uint32_t)(2 + 2 * (i % 8)), /* bucket versions of a fresh table */
                       .flags = e.kind == PC_SIPGEN_COUNTER ? PC_SF_REC_COUNTER : 0};
        d->recs[i].order = pc_sf_order(e.key, e.klen);
        d->recs[i].off = (uint32_t)off;
        d->recs[i].len = (uint32_t)pc_sf_rec_encode(tmp + off, &r);
        off += d->recs[i].len;
        d->value_bytes += e.vlen;
        d->key_bytes += e.klen;
    }
    qsort(d->recs, n, sizeof *d->recs, st_cmp);
    d->raw = malloc(off);
    if (d->raw == NULL)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(d->raw + o, tmp + d->recs[i].off, d->recs[i].len);
        d->recs[i].off = (uint32_t)o;
        o += d->recs[i].len;
    }
    d->raw_len = o;
    d->n = n;
    free(tmp);
    return 0;
}

/* Block boundaries: cut after the record that reaches target bytes. */
static size_t st_blocks(const struct st_data *d, size_t target, size_t *cuts, size_t max)
{
    size_t nb = 0, start = 0;
    for (size_t i = 0; i < d->n; i++) {
        size_t end = d->recs[i].off + d->recs[i].len;
        if (end - start >= target || i + 1 == d->n) {
            if (nb < max)
                cuts[nb++] = end;
            start = end;
        }
    }
    return nb;
}

static int st_columns; /* study: compress the column layout of each block */

/* Rewrites the records of [p, p + len) as columns: the 17 fixed header
 * bytes transposed byte-plane by byte-plane, then the length varints, the
 * keys, the values. Returns the length (== len). */
static size_t st_colify(const uint8_t *p, size_t len, uint8_t *out)
{
    size_t n = 0, o = 0;
    const uint8_t *q = p;
    while (q < p + len) {
        pc_sf_rec r;
        size_t used;
        int kok;
        const char *why;
        if (pc_sf_rec_decode(q, (size_t)(p + len - q), &used, &r, &kok, &why) != 0)
            abort();
        q += used;
        n++;
    }
    /* plane b of the fixed header */
    for (int b = 0; b < 17; b++) {
        q = p;
        while (q < p + len) {
            pc_sf_rec r;
            size_t used;
            int kok;
            const char *why;
            (void)pc_sf_rec_decode(q, (size_t)(p + len - q), &used, &r, &kok, &why);
            out[o++] = q[b];
            q += used;
        }
    }
    for (int pass = 0; pass < 3; pass++) {
        q = p;
        while (q < p + len) {
            pc_sf_rec r;
            size_t used;
            int kok;
            const char *why;
            (void)pc_sf_rec_decode(q, (size_t)(p + len - q), &used, &r, &kok, &why);
            if (pass == 0) {
                o += pc_sf_varint_put(out + o, r.klen);
                o += pc_sf_varint_put(out + o, r.vlen);
            } else if (pass == 1) {
                memcpy(out + o, r.key, r.klen);
                o += r.klen;
            } else {
                memcpy(out + o, r.val, r.vlen);
                o += r.vlen;
            }
            q += used;
        }
    }
    (void)n;
    return o;
}

static void st_run(const struct st_data *d, size_t target, int level, const ZSTD_CDict *cd,
                   const ZSTD_DDict *dd, const char *label, size_t dict_len)
{
    size_t maxb = d->raw_len / 16 + 16;
    size_t *cuts = malloc(maxb * sizeof *cuts);
    size_t nb = st_blocks(d, target, cuts, maxb);
    size_t cap = ZSTD_compressBound(target + 65536 + 1024);
    uint8_t *out = malloc(cap * 2), *back = malloc(target * 2 + 1024 * 1024);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0);
    if (cd != NULL)
        ZSTD_CCtx_refCDict(cc, cd);
    uint64_t stored = 0, pages = 0;
    double tc = 0, td = 0;
    size_t start = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t len = cuts[b] - start;
        const uint8_t *src = d->raw + start;
        static uint8_t colbuf[4 << 20];
        if (st_columns) {
            st_colify(src, len, colbuf);
            src = colbuf;
        }
        double t0 = now_s();
        size_t z = ZSTD_compress2(cc, out, cap * 2, src, len);
        double t1 = now_s();
        size_t r = dd != NULL
                       ? ZSTD_decompress_usingDDict(dc, back, target * 2 + 1024 * 1024, out, z, dd)
                       : ZSTD_decompressDCtx(dc, back, target * 2 + 1024 * 1024, out, z);
        double t2 = now_s();
        if (ZSTD_isError(z) || ZSTD_isError(r) || r != len || memcmp(back, src, len) != 0) {
            fprintf(stderr, "study: round trip failed\n");
            exit(1);
        }
        tc += t1 - t0;
        td += t2 - t1;
        size_t val = z + PC_SF_BLOCK_HDR;
        stored += val;
        /* LMDB puts a value above ~2 KiB on its own overflow pages (4 KiB) */
        pages += val > 2000 ? (val + 16 + 4095) / 4096 : 0;
        start = cuts[b];
    }
    printf("%-10s %7zu %4d %6zu %7zu %7.3f %7.3f %7.3f %8.0f %8.0f %8.1f\n", label, target, level,
           dict_len, nb, (double)stored / (double)d->value_bytes,
           (double)stored / (double)d->raw_len, (double)(pages * 4096) / (double)d->value_bytes,
           (double)d->raw_len / tc / 1e6, (double)d->raw_len / td / 1e6, td / (double)nb * 1e6);
    ZSTD_freeCCtx(cc);
    ZSTD_freeDCtx(dc);
    free(out);
    free(back);
    free(cuts);
}

static int study(size_t n)
{
    struct st_data d;
    if (st_build(&d, n) != 0)
        return 1;
    printf("# %zu SIP-like entries: %" PRIu64 " key bytes, %" PRIu64
           " value bytes, %zu raw record bytes"
           " (%.1f per record)\n",
           n, d.key_bytes, d.value_bytes, d.raw_len, (double)d.raw_len / (double)n);
    /* the whole stream, as a yardstick */
    {
        size_t cap = ZSTD_compressBound(d.raw_len);
        void *out = malloc(cap);
        for (int lv = 1; lv <= 3; lv += 2) {
            double t0 = now_s();
            size_t z = ZSTD_compress(out, cap, d.raw, d.raw_len, lv);
            double t1 = now_s();
            printf("# whole stream level %d: %.3f of value bytes, %.3f of raw, %.0f MB/s\n", lv,
                   (double)z / (double)d.value_bytes, (double)z / (double)d.raw_len,
                   (double)d.raw_len / (t1 - t0) / 1e6);
        }
        free(out);
    }
    /* the generator's own compressibility, to compare with real data: each
     * value on its own, and the values as one stream */
    {
        size_t vcap = d.value_bytes, vo = 0, alone = 0;
        uint8_t *vs = malloc(vcap);
        size_t zc = ZSTD_compressBound(vcap);
        uint8_t *z = malloc(zc);
        ZSTD_CCtx *cc = ZSTD_createCCtx();
        for (size_t i = 0; i < d.n; i++) {
            pc_sipgen_entry e;
            pc_sipgen_entry_make(7, i, &e);
            memcpy(vs + vo, e.val, e.vlen);
            alone += ZSTD_compressCCtx(cc, z, zc, e.val, e.vlen, 1);
            vo += e.vlen;
        }
        double t0 = now_s();
        size_t zz = ZSTD_compressCCtx(cc, z, zc, vs, vo, 1);
        double t1 = now_s();
        /* the same values in snapshot (order key) order */
        size_t vo2 = 0;
        for (size_t i = 0; i < d.n; i++) {
            pc_sf_rec r;
            size_t used;
            int kok;
            const char *why;
            (void)pc_sf_rec_decode(d.raw + d.recs[i].off, d.recs[i].len, &used, &r, &kok, &why);
            memcpy(vs + vo2, r.val, r.vlen);
            vo2 += r.vlen;
        }
        size_t zo = ZSTD_compressCCtx(cc, z, zc, vs, vo2, 1);
        printf("# values in order-key order: one stream level 1 %.2fx\n", (double)vo2 / (double)zo);
        printf("# values alone: each %.2fx, one stream level 1 %.2fx at %.0f MB/s\n",
               (double)vo / (double)alone, (double)vo / (double)zz, (double)vo / (t1 - t0) / 1e6);
        FILE *f = getenv("STUDY_DUMP") ? fopen(getenv("STUDY_DUMP"), "wb") : NULL;
        if (f != NULL) {
            fwrite(vs, 1, vo, f);
            fclose(f);
        }
        ZSTD_freeCCtx(cc);
        free(vs);
        free(z);
    }
    printf("%-10s %7s %4s %6s %7s %7s %7s %7s %8s %8s %8s\n", "mode", "block", "lvl", "dict",
           "blocks", "st/val", "st/raw", "pg/val", "comp", "decomp", "us/blk");
    static const size_t targets[] = {4096, 16384, 65536, 131072, 262144};
    static const int levels[] = {-3, -1, 1, 2, 3};
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++)
        for (size_t l = 0; l < sizeof levels / sizeof *levels; l++)
            st_run(&d, targets[t], levels[l], NULL, NULL, "plain", 0);
    /* the same records regrouped as columns: fixed fields byte-plane by
     * byte-plane, then lengths, keys, values */
    st_columns = 1;
    for (size_t t = 2; t < 4; t++)
        for (size_t l = 2; l < 4; l++)
            st_run(&d, targets[t], levels[l], NULL, NULL, "columns", 0);
    st_columns = 0;
    /* dictionaries trained on a sample of whole records */
    static const size_t dsz[] = {16384, 65536};
    for (size_t k = 0; k < 2; k++) {
        size_t ns = d.n < 20000 ? d.n : 20000;
        static const size_t dtargets[] = {4096, 16384, 65536, 131072};
        static const int dlevels[] = {1, 2};
        size_t *sizes = malloc(ns * sizeof *sizes);
        uint8_t *samples = malloc(ns * 700);
        size_t so = 0, step = d.n / ns;
        for (size_t i = 0; i < ns; i++) {
            const struct st_rec *r = &d.recs[i * step];
            memcpy(samples + so, d.raw + r->off, r->len);
            sizes[i] = r->len;
            so += r->len;
        }
        void *dict = malloc(dsz[k]);
        double t0 = now_s();
        size_t dl = ZDICT_trainFromBuffer(dict, dsz[k], samples, sizes, (unsigned)ns);
        double t1 = now_s();
        if (ZDICT_isError(dl)) {
            fprintf(stderr, "train: %s\n", ZDICT_getErrorName(dl));
            return 1;
        }
        printf("# dictionary %zu bytes trained on %zu records (%zu bytes) in %.3f s\n", dl, ns, so,
               t1 - t0);
        for (size_t t = 0; t < sizeof dtargets / sizeof *dtargets; t++)
            for (size_t l = 0; l < sizeof dlevels / sizeof *dlevels; l++) {
                ZSTD_CDict *cd = ZSTD_createCDict(dict, dl, dlevels[l]);
                ZSTD_DDict *dd = ZSTD_createDDict(dict, dl);
                st_run(&d, dtargets[t], dlevels[l], cd, dd, "dict", dl);
                ZSTD_freeCDict(cd);
                ZSTD_freeDDict(dd);
            }
        free(dict);
        free(sizes);
        free(samples);
    }
    free(d.raw);
    free(d.recs);
    return 0;
}

/* ---- save / load through a real store ------------------------------------------ */
static void bench_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= PC_LOG_WARN)
        fprintf(stderr, "[store] %s\n", msg);
}

static pc_cache *bench_cache(size_t n, pc_coll **coll)
{
    pc_config cfg;
    pc_config_init(&cfg);
    unsigned l2 = 4;
    while (l2 < 24 && (1ull << l2) * 4 < n)
        l2++;
    char spec[64];
    snprintf(spec, sizeof spec, "sip=%u", l2);
    cfg.collections = spec;
    cfg.mem_mb = 256 + n / 1500;
    if (getenv("BENCH_HUGE") != NULL) { /* the region in (transparent) huge pages */
        cfg.hugepage_mb = cfg.mem_mb;
        cfg.mem_mb = 64;
    }
    cfg.log.fn = bench_log;
    pc_cache *c = NULL;
    if (pc_cache_create(&cfg, &c) != 0 || pc_coll_find(c, "sip", 3, coll) != 0) {
        fprintf(stderr, "cannot create a cache of %zu MB\n", cfg.mem_mb);
        exit(1);
    }
    return c;
}

/* Entry i: the sipgen entry with a TTL by kind (a fifth never expire). */
static int bench_put(pc_coll *coll, uint64_t i)
{
    pc_sipgen_entry e;
    pc_sipgen_entry_make(7, i, &e);
    int64_t ttl = 0;
    if (i % 5 != 0) {
        static const int64_t base[] = {3600000, 7200000, 60000, 3600000};
        ttl = base[e.kind] + (int64_t)((i * 7919) % 600000);
    }
    if (e.kind == PC_SIPGEN_COUNTER)
        return pc_set_counter(coll, e.key, e.klen, e.counter, ttl);
    return pc_set(coll, e.key, e.klen, e.val, e.vlen, ttl, 0);
}

static int bench_count(void *ctx, const pc_entry *e)
{
    (void)e;
    ++*(uint64_t *)ctx;
    return 0;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One configuration: a fresh store under dir, rounds saves and rounds
 * loads (each into an empty cache), medians printed. */
static int bench_config(const char *dir, pc_coll *coll, size_t n, unsigned rounds, unsigned threads,
                        size_t block, int level)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/b%zu-l%d-t%u", dir, block, level, threads);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        return 1;
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.log.fn = bench_log;
    sc.threads = threads;
    sc.block_bytes = block;
    sc.zstd_level = level;
    char err[256];
    pc_store *s = NULL;
    int rc = pc_store_open_checked(path, &sc, &s, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    double sv[16], wk[16], cm[16], ld[16], scpu[16], lcpu[16];
    pc_store_save_result res;
    if (rounds > 16)
        rounds = 16;
    for (unsigned r = 0; r < rounds; r++) {
        double c0 = cpu_s();
        if ((rc = pc_store_save(s, coll, NULL, &res)) != 0) {
            fprintf(stderr, "save: %s\n", pc_store_strerror(rc));
            return 1;
        }
        scpu[r] = cpu_s() - c0;
        sv[r] = res.seconds;
        wk[r] = res.walk_seconds;
        cm[r] = res.commit_seconds;
    }
    pc_store_load_result lr;
    for (unsigned r = 0; r < rounds; r++) {
        pc_coll *c2coll;
        pc_cache *c2 = bench_cache(n, &c2coll);
        pc_store_load_opts lo = {.no_prune = 1};
        double c0 = cpu_s();
        if ((rc = pc_store_load(s, c2coll, &lo, &lr)) != 0) {
            fprintf(stderr, "load: %s\n", pc_store_strerror(rc));
            return 1;
        }
        lcpu[r] = cpu_s() - c0;
        ld[r] = lr.seconds;
        pc_cache_destroy(c2);
    }
    double g0 = now_s();
    uint64_t hits = 0;
    for (uint64_t i = 0; i < 2000; i++) {
        pc_sipgen_entry e;
        pc_sipgen_entry_make(7, (i * 104729) % n, &e);
        void *v;
        size_t vl;
        if (pc_store_get(s, "sip", e.key, e.klen, 0, &v, &vl, NULL) == 0) {
            hits++;
            free(v);
        }
    }
    double g1 = now_s();
    pc_store_info in;
    memset(&in, 0, sizeof in);
    (void)pc_store_info_get(s, &in);
    pc_store_close(s);
    qsort(sv, rounds, sizeof *sv, dcmp);
    qsort(wk, rounds, sizeof *wk, dcmp);
    qsort(cm, rounds, sizeof *cm, dcmp);
    qsort(ld, rounds, sizeof *ld, dcmp);
    qsort(scpu, rounds, sizeof *scpu, dcmp);
    qsort(lcpu, rounds, sizeof *lcpu, dcmp);
    unsigned m = rounds / 2;
    printf("%7zu %3d %2u | %6.3f %6.3f %6.3f %8.0f %5.2f | %6.3f %8.0f %5.2f | %5llu %6.3f %6.3f "
           "%6.3f | %6.1f %4llu\n",
           block, level, threads, sv[m], wk[m], cm[m], (double)res.saved / sv[m], scpu[m], ld[m],
           (double)lr.loaded / ld[m], lcpu[m], (unsigned long long)res.blocks,
           (double)res.stored_bytes / (double)res.value_bytes,
           (double)res.stored_bytes / (double)res.raw_bytes,
           (double)(in.overflow_pages * in.page_size) / (double)res.value_bytes,
           (g1 - g0) / 2000 * 1e6, (unsigned long long)hits);
    fflush(stdout);
    return 0;
}

static int bench_save(const char *dir, size_t n, unsigned rounds, const char *configs)
{
    pc_coll *coll;
    pc_cache *c = bench_cache(n, &coll);
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++)
        if (bench_put(coll, i) != 0) {
            fprintf(stderr, "fill failed at %llu\n", (unsigned long long)i);
            return 1;
        }
    double t1 = now_s();
    printf("# fill: %zu entries in %.3f s (sipgen + pc_set: %.0f/s)\n", n, t1 - t0,
           (double)n / (t1 - t0));
    { /* the load's floor: pc_set of the same entries into an empty cache,
       * the bytes already in memory */
        pc_sipgen_entry *es = malloc(n * sizeof *es);
        if (es != NULL) {
            for (uint64_t i = 0; i < n; i++)
                pc_sipgen_entry_make(7, i, &es[i]);
            pc_coll *fc;
            pc_cache *fcache = bench_cache(n, &fc);
            double f0 = now_s();
            for (uint64_t i = 0; i < n; i++) {
                if (es[i].kind == PC_SIPGEN_COUNTER)
                    pc_set_counter(fc, es[i].key, es[i].klen, es[i].counter, 3600000);
                else
                    pc_set(fc, es[i].key, es[i].klen, es[i].val, es[i].vlen, 3600000, 0);
            }
            double f1 = now_s();
            printf("# pc_set alone into an empty cache: %zu entries in %.3f s (%.0f/s)\n", n,
                   f1 - f0, (double)n / (f1 - f0));
            pc_cache_destroy(fcache);
            free(es);
        }
    }
    if (getenv("BENCH_PAUSE") != NULL) { /* attach a profiler to the saves */
        fprintf(stderr, "pid %d: saving in 3 s\n", (int)getpid());
        sleep(3);
    }
    for (unsigned r = 0; r < 3; r++) {
        uint64_t cnt = 0;
        double w0 = now_s();
        pc_walk_ordered(coll, PC_WALK_VALUES | PC_WALK_RAW, bench_count, &cnt);
        double w1 = now_s();
        printf("# walk: pc_walk_ordered alone, %llu entries in %.3f s (%.0f ns/entry)\n",
               (unsigned long long)cnt, w1 - w0, (w1 - w0) / (double)cnt * 1e9);
    }
    printf("# medians of %u rounds; load = into an empty cache; pages = LMDB overflow pages of "
           "the last snapshot / value bytes\n",
           rounds);
    printf("#  block lvl th |   save   walk commit  entry/s   cpu |   load  entry/s   cpu | blocks "
           "st/val st/raw pg/val | get us hits\n");
    /* configs: "block:level:threads,..." */
    char *list = strdup(configs), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        size_t block = 65536;
        int level = 1;
        unsigned threads = 0;
        sscanf(t, "%zu:%d:%u", &block, &level, &threads);
        if (bench_config(dir, coll, n, rounds, threads, block, level) != 0)
            return 1;
    }
    free(list);
    pc_cache_destroy(c);
    return 0;
}

/* ---- check: the structural check's cost against a load ------------------------
 * N entries of 16-byte keys and 200-byte values (xorshift bytes: they do not
 * compress, so the file is as large as the data), saved once; then per
 * round: pc_store_check (LMDB pages + the pcache headers), the same with
 * PC_STORE_CHECK_DEEP (every payload checksum: what pcached's start runs),
 * a read-only pc_store_open (which runs the first), and a pc_store_load
 * into an empty cache. Medians in ms; --json-like line at the end. */
static double ms_since(double t0)
{
    return (now_s() - t0) * 1e3;
}

static int bench_check(const char *dir, size_t n, unsigned rounds)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/check-%zu", dir, n);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        return 1;
    pc_coll *coll;
    pc_cache *c = bench_cache(n, &coll);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        char key[32];
        uint8_t val[200];
        snprintf(key, sizeof key, "k%015zu", i % 1000000000000000u);
        for (size_t j = 0; j < sizeof val; j += 8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            memcpy(val + j, &x, 8);
        }
        if (pc_set(coll, key, 16, val, sizeof val, 0, 0) != 0) {
            fprintf(stderr, "set %zu failed\n", i);
            return 1;
        }
    }
    pc_store_config sc;
    pc_store_config_init(&sc);
    sc.flags = PC_STORE_CREATE;
    sc.log.fn = bench_log;
    pc_store *s = NULL;
    char err[700];
    pc_store_save_result sr;
    if (pc_store_open_checked(path, &sc, &s, err, sizeof err) != 0 ||
        pc_store_save(s, coll, NULL, &sr)) {
        fprintf(stderr, "save failed: %s\n", err);
        return 1;
    }
    pc_store_info info;
    pc_store_info_get(s, &info);
    pc_store_close(s);
    pc_cache_destroy(c);
    double *t = calloc(4 * (size_t)rounds, sizeof *t);
    if (t == NULL)
        return 1;
    for (unsigned r = 0; r < rounds; r++) {
        pc_store_problem *pr;
        size_t np;
        double t0 = now_s();
        if (pc_store_check(path, 0, &pr, &np, err, sizeof err) != 0 || np != 0)
            return fprintf(stderr, "check: %s (%zu problems)\n", err, np), 1;
        t[0 * rounds + r] = ms_since(t0);
        t0 = now_s();
        if (pc_store_check(path, PC_STORE_CHECK_DEEP, &pr, &np, err, sizeof err) != 0 || np != 0)
            return fprintf(stderr, "deep check: %s (%zu problems)\n", err, np), 1;
        t[1 * rounds + r] = ms_since(t0);
        sc.flags = PC_STORE_RDONLY;
        t0 = now_s();
        if (pc_store_open_checked(path, &sc, &s, err, sizeof err) != 0)
            return fprintf(stderr, "open: %s\n", err), 1;
        t[2 * rounds + r] = ms_since(t0);
        pc_store_close(s);
        c = bench_cache(n, &coll);
        sc.flags = PC_STORE_NOCHECK; /* the load alone */
        if (pc_store_open_checked(path, &sc, &s, err, sizeof err) != 0)
            return fprintf(stderr, "open: %s\n", err), 1;
        pc_store_load_opts lo = {.no_prune = 1};
        pc_store_load_result lr;
        t0 = now_s();
        if (pc_store_load(s, coll, &lo, &lr) != 0 || lr.loaded != n)
            return fprintf(stderr, "load failed\n"), 1;
        t[3 * rounds + r] = ms_since(t0);
        pc_store_close(s);
        pc_cache_destroy(c);
    }
    double med[4];
    for (int k = 0; k < 4; k++) {
        qsort(t + k * rounds, rounds, sizeof *t, dcmp);
        med[k] = t[k * rounds + rounds / 2];
    }
    printf("entries %zu, data.mdb %.1f MiB (%llu pages), %u rounds, medians:\n", n,
           (double)info.file_bytes / 1048576.0,
           (unsigned long long)(info.used_bytes / info.page_size), rounds);
    printf("  structural check      %8.1f ms  (%.1f%% of the load)\n", med[0],
           100.0 * med[0] / med[3]);
    printf("  deep check (pcached)  %8.1f ms  (%.1f%% of the load)\n", med[1],
           100.0 * med[1] / med[3]);
    printf("  read-only open        %8.1f ms\n", med[2]);
    printf("  load                  %8.1f ms\n", med[3]);
    printf("{\"entries\":%zu,\"file_mib\":%.1f,\"check_ms\":%.1f,\"deep_check_ms\":%.1f,"
           "\"open_rdonly_ms\":%.1f,\"load_ms\":%.1f,\"check_pct_of_load\":%.1f,"
           "\"deep_check_pct_of_load\":%.1f}\n",
           n, (double)info.file_bytes / 1048576.0, med[0], med[1], med[2], med[3],
           100.0 * med[0] / med[3], 100.0 * med[1] / med[3]);
    free(t);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd) != 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "study") == 0)
        return study(argc >= 3 ? strtoull(argv[2], NULL, 10) : 200000);
    if (argc >= 3 && strcmp(argv[1], "save") == 0)
        return bench_save(argv[2], argc >= 4 ? strtoull(argv[3], NULL, 10) : 1000000,
                          argc >= 5 ? (unsigned)atoi(argv[4]) : 3,
                          argc >= 6 ? argv[5] : "65536:1:0");
    if (argc >= 3 && strcmp(argv[1], "check") == 0)
        return bench_check(argv[2], argc >= 4 ? strtoull(argv[3], NULL, 10) : 1000000,
                           argc >= 5 ? (unsigned)atoi(argv[4]) : 5);
    int help = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    fprintf(help ? stdout : stderr,
            "usage: %s study [N]\n"
            "       %s save DIR [N [ROUNDS [BLOCK:LEVEL:THREADS,...]]]\n"
            "       %s check DIR [N [ROUNDS]]\n",
            argv[0], argv[0], argv[0]);
    return help ? 0 : 2;
}
