/*
 * odbc_save.c - saving a live collection to SQL and loading it back, and
 * the cheap generation query that replicas poll (perf_sync's backstop).
 *
 * A save is the transaction of pcache_odbc.h: the writer bumps the
 * generation row and deletes the rows, the ordered walk (lock-free; each
 * key once) feeds the writer, the generation row gets the entry count, and
 * the transaction commits; on any error it rolls back. A load reads the
 * generation row and the rows in one REPEATABLE READ transaction.
 */
#include "odbc_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct save_ctx {
    pc_odbc_writer *w;
    int64_t now_ms;
    uint64_t expired;
};

static int save_entry(void *ctx, const pc_entry *e)
{
    struct save_ctx *s = ctx;
    if (e->ttl_ms == 0) { /* lapsing now: a load would skip it */
        s->expired++;
        return 0;
    }
    int64_t expires = e->ttl_ms < 0 ? 0 : s->now_ms + e->ttl_ms;
    return pc_odbc_writer_add(s->w, e->key, e->klen, e->val, e->vlen, expires, e->is_counter != 0);
}

int pc_odbc_save(pc_odbc *o, pc_coll *coll, pc_odbc_result *result)
{
    return pc_odbc_save_as(o, coll, NULL, result);
}

int pc_odbc_save_as(pc_odbc *o, pc_coll *coll, const char *source, pc_odbc_result *result)
{
    int erc = pc_odbc_enter_args(o, coll != NULL);
    if (erc != 0)
        return erc;
    double t0 = pc_mono_sec();
    const char *name = pc_coll_name(coll);
    struct save_ctx s = {NULL, pc_wall_ms(), 0};
    uint64_t gen = 0;
    int rc = pc_odbc_writer_new(o, &s.w);
    if (rc != 0)
        return rc;
    /* phase ends, for the debug log: generation row + DELETE, rows, the
     * entry count (+ source), commit */
    double t[4] = {0, 0, 0, 0};
    if ((rc = pc_odbc_begin(o, false)) != 0)
        goto out;
    rc = pc_odbc_writer_begin(s.w, name, 0);
    t[0] = pc_mono_sec();
    if (rc == 0)
        rc = pc_walk_ordered(coll, PC_WALK_VALUES, save_entry, &s);
    t[1] = pc_mono_sec();
    if (rc == 0)
        rc = pc_odbc_writer_finish(s.w, &gen);
    if (rc == 0 && source != NULL)
        rc = pc_odbc_set_source(o, name, source);
    t[2] = pc_mono_sec();
    if (rc == 0) {
        rc = pc_odbc_end(o, true);
    } else {
        pc_odbc_writer_stop(s.w); /* a batch may be in flight (an engine error of the walk) */
        pc_odbc_end(o, false);
    }
    t[3] = pc_mono_sec();
out:
    if (rc == 0) {
        double secs = pc_mono_sec() - t0;
        pc_odbc_result r = {pc_odbc_writer_rows(s.w),
                            s.expired,
                            0,
                            pc_odbc_writer_batches(s.w),
                            gen,
                            secs,
                            secs > 0 ? (double)pc_odbc_writer_rows(s.w) / secs : 0};
        pc_odbc_log(
            o, PC_LOG_INFO, "pcache: %s: saved %s: %llu rows in %.3f s (%.0f/s), generation %llu",
            o->target, name, (unsigned long long)r.rows, secs, r.rate, (unsigned long long)gen);
        pc_odbc_log(
            o, PC_LOG_DEBUG,
            "pcache: %s: save of %s: generation row and DELETE %.3f s, %llu rows in %llu "
            "statements (with the walk) %.3f s, last batch and entry count %.3f s, commit %.3f s",
            o->target, name, t[0] - t0, (unsigned long long)r.rows, (unsigned long long)r.batches,
            t[1] - t[0], t[2] - t[1], t[3] - t[2]);
        if (result != NULL)
            *result = r;
    } else {
        if (o->msg[0] == '\0')
            snprintf(o->msg, sizeof o->msg, "%s: save of \"%s\" failed: %s", o->target, name,
                     pc_store_strerror(rc));
        pc_odbc_log(o, PC_LOG_ERR, "pcache: %s: save of %s rolled back (its previous rows stand)",
                    o->target, name);
    }
    pc_odbc_writer_free(s.w);
    return rc;
}

struct load_ctx {
    pc_odbc *o;
    pc_coll *coll;
    int64_t now_ms;
    uint64_t loaded, expired, failed;
};

static int load_row(void *ctx, const void *key, size_t klen, const void *val, size_t vlen,
                    int64_t expires_ms, bool is_counter)
{
    struct load_ctx *l = ctx;
    int64_t ttl = 0;
    if (expires_ms != 0) {
        ttl = expires_ms - l->now_ms;
        if (ttl <= 0) {
            l->expired++;
            return 0;
        }
    }
    int rc;
    int64_t v;
    if (is_counter) {
        rc = pc_parse_i64(val, vlen, &v);
        if (rc == 0)
            rc = pc_set_counter(l->coll, key, klen, v, ttl);
    } else {
        rc = pc_set(l->coll, key, klen, val, vlen, ttl, 0);
    }
    if (rc != 0) { /* like the LMDB load: log, count, go on */
        l->failed++;
        pc_odbc_log(l->o, PC_LOG_ERR,
                    "pcache: %s: loading %s: a row (key of %zu bytes) was "
                    "refused: %s",
                    l->o->target, pc_coll_name(l->coll), klen, pc_store_strerror(rc));
        return 0;
    }
    l->loaded++;
    return 0;
}

int pc_odbc_load(pc_odbc *o, pc_coll *coll, pc_odbc_result *result)
{
    int erc = pc_odbc_enter_args(o, coll != NULL);
    if (erc != 0)
        return erc;
    double t0 = pc_mono_sec();
    const char *name = pc_coll_name(coll);
    struct load_ctx l = {o, coll, pc_wall_ms(), 0, 0, 0};
    uint64_t gen = 0, expired = 0;
    bool found = false;
    int rc = pc_odbc_begin(o, true);
    if (rc != 0)
        return rc;
    rc = pc_odbc_read_generation(o, name, &gen, &found);
    if (rc == 0 && !found) {
        snprintf(o->msg, sizeof o->msg, "%s: collection \"%s\" was never saved there", o->target,
                 name);
        rc = PC_ENOTFOUND;
    }
    if (rc == 0)
        rc = pc_odbc_read_rows(o, name, l.now_ms, load_row, &l, &expired);
    rc = pc_odbc_end_rc(o, rc);
    if (rc != 0)
        return rc;
    double secs = pc_mono_sec() - t0;
    pc_odbc_result r = {l.loaded,
                        expired + l.expired,
                        l.failed,
                        0,
                        gen,
                        secs,
                        secs > 0 ? (double)l.loaded / secs : 0};
    pc_odbc_log(o, PC_LOG_INFO,
                "pcache: %s: loaded %s: %llu rows (%llu expired skipped) in %.3f s, generation "
                "%llu",
                o->target, name, (unsigned long long)r.rows, (unsigned long long)r.skipped_expired,
                secs, (unsigned long long)gen);
    if (result != NULL)
        *result = r;
    return 0;
}

int pc_odbc_generation(pc_odbc *o, const char *name, uint64_t *gen)
{
    uint64_t g = 0;
    bool found = false;
    int rc = pc_odbc_enter_args(o, name != NULL && gen != NULL);
    if (rc == 0)
        rc = pc_odbc_read_generation(o, name, &g, &found);
    if (rc == 0 && !found)
        rc = PC_ENOTFOUND;
    if (rc == 0)
        *gen = g;
    return rc;
}
