/*
 * odbc_move.c - moving snapshots between the LMDB store and SQL, for the
 * pcache-snapshot tool's export and import verbs.
 *
 * Export reads each collection's snapshot with pc_store_iterate (one LMDB
 * read transaction per collection: a consistent snapshot of each) and
 * writes every collection inside ONE SQL transaction with the same writer
 * as a save: all collections land, or none does.
 *
 * Import cannot write records into the store directly (the store's only
 * writer is pc_store_save of a live collection, which owns the format), so
 * each collection is read in a REPEATABLE READ transaction into a private
 * cache created in this process for it, then saved with pc_store_save:
 * one LMDB transaction per collection. The private cache is sized from the
 * collection's row count and bytes (SQL aggregate query) and destroyed
 * before the next collection.
 */
#include "odbc_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct export_ctx {
    pc_odbc_writer *w;
    int64_t now_ms;
    uint64_t expired;
};

static int export_record(void *ctx, const pc_store_record *r)
{
    struct export_ctx *x = ctx;
    if (r->expires_ms != 0 && r->expires_ms <= x->now_ms) {
        x->expired++;
        return 0;
    }
    if (!r->is_counter)
        return pc_odbc_writer_add(x->w, r->key, r->klen, r->val, r->vlen, r->expires_ms, false);
    /* counters are 8 bytes little-endian in the store, decimal text in SQL */
    if (r->vlen != 8)
        return PC_ECORRUPT;
    const unsigned char *b = r->val;
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--)
        u = u << 8 | b[i];
    char dec[24];
    int n = snprintf(dec, sizeof dec, "%" PRId64, (int64_t)u);
    return pc_odbc_writer_add(x->w, r->key, r->klen, dec, (size_t)n, r->expires_ms, true);
}

int pc_odbc_export(pc_odbc *o, pc_store *s, const char *name, pc_odbc_result *result)
{
    int erc = pc_odbc_enter_args(o, s != NULL);
    if (erc != 0)
        return erc;
    double t0 = pc_mono_sec();
    pc_store_coll_meta *list = NULL, one;
    size_t n = 0;
    int rc;
    if (name != NULL) {
        rc = pc_store_coll_meta_get(s, name, &one);
        if (rc == PC_ENOTFOUND)
            snprintf(o->msg, sizeof o->msg, "export: collection \"%s\" has no snapshot in %s", name,
                     pc_store_path(s));
        if (rc != 0)
            return rc;
        n = 1;
    } else if ((rc = pc_store_list(s, &list, &n)) != 0) {
        return rc;
    }
    struct export_ctx x = {NULL, pc_wall_ms(), 0};
    uint64_t rows = 0, batches = 0, gen = 0;
    if ((rc = pc_odbc_writer_new(o, &x.w)) != 0)
        goto out;
    if ((rc = pc_odbc_begin(o, false)) != 0)
        goto out;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const pc_store_coll_meta *m = name != NULL ? &one : &list[i];
        rc = pc_odbc_writer_begin(x.w, m->name, m->count);
        if (rc == 0)
            rc = pc_store_iterate(s, m->name, 0, export_record, &x);
        if (rc == 0)
            rc = pc_odbc_writer_finish(x.w, &gen);
        if (rc != 0 && o->msg[0] == '\0')
            snprintf(o->msg, sizeof o->msg, "export of \"%s\" to %s failed: %s", m->name, o->target,
                     pc_store_strerror(rc));
        rows += pc_odbc_writer_rows(x.w);
        batches += pc_odbc_writer_batches(x.w);
    }
    if (rc == 0) {
        rc = pc_odbc_end(o, true);
    } else {
        pc_odbc_writer_stop(x.w); /* a batch may be in flight (the store's iteration failed) */
        pc_odbc_end(o, false);
    }
out:
    if (rc == 0 && result != NULL) {
        double secs = pc_mono_sec() - t0;
        pc_odbc_result r = {
            rows, x.expired, 0, batches, gen, secs, secs > 0 ? (double)rows / secs : 0};
        *result = r;
    }
    pc_odbc_writer_free(x.w);
    pc_store_list_free(list);
    return rc;
}

/* ---- import ---------------------------------------------------------------- */

static int import_row(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                      int64_t expires_ms, bool is_counter)
{
    pc_coll *coll = ctx;
    int64_t ttl = expires_ms == 0 ? 0 : expires_ms - pc_wall_ms();
    if (expires_ms != 0 && ttl <= 0)
        return 0; /* lapsed while importing */
    if (!is_counter)
        return pc_set(coll, key, klen, val, vlen, ttl, 0);
    char buf[24];
    if (vlen == 0 || vlen >= sizeof buf)
        return PC_ENOTNUM;
    memcpy(buf, val, vlen);
    buf[vlen] = '\0';
    char *end;
    long long v = strtoll(buf, &end, 10);
    return *end != '\0' ? PC_ENOTNUM : pc_set_counter(coll, key, klen, v, ttl);
}

static int import_one(pc_odbc *o, pc_store *s, const char *name, pc_odbc_result *sum)
{
    if (strpbrk(name, ";,= \t") != NULL || strlen(name) > PC_COLL_NAME_MAX)
        return pc_odbc_fail(o, PC_EINVAL, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                            "import: collection name \"%.80s\" cannot be declared", name);
    uint64_t gen = 0, rows = 0, mk = 0, mv = 0, bytes = 0, expired = 0;
    bool found = false;
    pc_cache *c = NULL;
    pc_coll *coll = NULL;
    int rc = pc_odbc_begin(o, true);
    if (rc != 0)
        return rc;
    rc = pc_odbc_read_generation(o, name, &gen, &found);
    if (rc == 0 && !found) {
        snprintf(o->msg, sizeof o->msg, "import: collection \"%s\" was never saved to %s", name,
                 o->target);
        rc = PC_ENOTFOUND;
    }
    if (rc == 0)
        rc = pc_odbc_coll_sizes(o, name, 0, &rows, &mk, &mv, &bytes);
    if (rc == 0) {
        unsigned log2 = PC_LOG2_MIN;
        while (log2 < PC_LOG2_MAX && (1ull << log2) * 4 < rows)
            log2++;
        char spec[PC_COLL_NAME_MAX + 8];
        snprintf(spec, sizeof spec, "%s=%u", name, log2);
        pc_config cfg;
        pc_config_init(&cfg);
        cfg.collections = spec;
        /* records + the engine's per-entry overhead (under 64 B) + tables */
        cfg.mem_mb = (size_t)((bytes + rows * 128) * 5 / 4 / (1024 * 1024)) + 32;
        cfg.lock_memory = 0;
        rc = pc_cache_create(&cfg, &c);
        if (rc == 0)
            rc = pc_coll_find(c, name, strlen(name), &coll);
        if (rc != 0)
            pc_odbc_fail(o, rc, SQL_HANDLE_ENV, SQL_NULL_HANDLE,
                         "import: cannot create a %zu MiB cache for \"%s\": %s", cfg.mem_mb, name,
                         pc_store_strerror(rc));
    }
    if (rc == 0)
        rc = pc_odbc_read_rows(o, name, pc_wall_ms(), import_row, coll, &expired);
    rc = pc_odbc_end_rc(o, rc);
    pc_store_save_result sr;
    if (rc == 0 && (rc = pc_store_save(s, coll, NULL, &sr)) != 0)
        snprintf(o->msg, sizeof o->msg, "import: saving \"%s\" into %s failed: %s", name,
                 pc_store_path(s), pc_store_strerror(rc));
    if (rc == 0) {
        sum->rows += sr.saved;
        sum->skipped_expired += expired + sr.skipped_expired;
        sum->generation = sr.generation;
    }
    pc_cache_destroy(c);
    return rc;
}

int pc_odbc_import(pc_odbc *o, pc_store *s, const char *name, pc_odbc_result *result)
{
    int erc = pc_odbc_enter_args(o, s != NULL);
    if (erc != 0)
        return erc;
    double t0 = pc_mono_sec();
    pc_odbc_result sum;
    memset(&sum, 0, sizeof sum);
    int rc = 0;
    if (name != NULL) {
        rc = import_one(o, s, name, &sum);
    } else {
        /* the names first (a handful), then one collection at a time */
        SQLHSTMT st;
        char(*names)[PC_COLL_NAME_MAX + 1] = NULL;
        size_t n = 0, cap = 0;
        if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, o->dbc, &st)))
            return pc_odbc_fail(o, PC_EIO, SQL_HANDLE_DBC, o->dbc, "import: no statement");
        SQLRETURN r = SQLExecDirect(
            st, (SQLCHAR *)"SELECT collection FROM " PC_ODBC_GENERATIONS " ORDER BY collection",
            SQL_NTS);
        while (SQL_SUCCEEDED(r) && rc == 0 && SQL_SUCCEEDED(r = SQLFetch(st))) {
            char nm[PC_COLL_NAME_MAX + 2];
            SQLLEN ind = 0;
            r = SQLGetData(st, 1, SQL_C_CHAR, nm, sizeof nm, &ind);
            if (!SQL_SUCCEEDED(r) || ind < 1 || (size_t)ind > PC_COLL_NAME_MAX)
                break;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                void *p = realloc(names, cap * sizeof *names);
                if (p == NULL) {
                    rc = PC_EHEAP;
                    break;
                }
                names = p;
            }
            memcpy(names[n++], nm, (size_t)ind + 1);
        }
        if (rc == 0 && r != SQL_NO_DATA)
            rc = pc_odbc_fail(o, PC_EIO, SQL_HANDLE_STMT, st, "%s: listing the saved collections",
                              o->target);
        SQLFreeHandle(SQL_HANDLE_STMT, st);
        for (size_t i = 0; rc == 0 && i < n; i++)
            rc = import_one(o, s, names[i], &sum);
        free(names);
    }
    if (rc == 0 && result != NULL) {
        sum.seconds = pc_mono_sec() - t0;
        sum.rate = sum.seconds > 0 ? (double)sum.rows / sum.seconds : 0;
        *result = sum;
    }
    return rc;
}
