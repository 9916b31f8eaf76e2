/*
 * snap_salvage.c - salvage: a new store made of every block of a damaged
 * one that still verifies (pc_store_salvage), and the report of what was
 * lost, per collection (docs/pcache-snapshot.md, "salvage").
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

/* The report's head: the store, the copy, the structural damage met and
 * the warnings it calls for. 1 when it already means a loss. */
static int salvage_head(snap_ctx *cx, const char *src, const char *dst,
                        const pc_store_salvage_result *res)
{
    FILE *f = cx->out;
    if (cx->json) {
        fprintf(f, "{\"store\":");
        snap_jstr(f, src, strlen(src));
        fprintf(f, ",\"salvaged_to\":");
        snap_jstr(f, dst, strlen(dst));
        fprintf(f,
                ",\"structural_problems\":%llu,\"pages_scanned\":%llu,\"older_meta\":%s,"
                "\"free_list_unknown\":%s,\"blocks_unnamed\":%llu,\"collections\":[",
                (unsigned long long)res->problems, (unsigned long long)res->pages_scanned,
                res->older_meta ? "true" : "false", res->free_unknown ? "true" : "false",
                (unsigned long long)res->blocks_unnamed);
        return res->blocks_unnamed > 0 || res->older_meta;
    }
    fprintf(f,
            "salvage %s -> %s: %llu structural problems met, %llu pages outside the trees "
            "read\n",
            src, dst, (unsigned long long)res->problems, (unsigned long long)res->pages_scanned);
    if (res->older_meta)
        fprintf(f, "  warning: one LMDB meta page is damaged; the other was read, and it may "
                   "hold the snapshot before the last save (older data)\n");
    if (res->free_unknown && res->blocks_unnamed > 0)
        fprintf(f, "  warning: the free list is damaged: blocks of format version 1 outside the "
                   "trees were not read (they may be older snapshots'; version 2 blocks name "
                   "their generation)\n");
    if (res->blocks_unnamed > 0)
        fprintf(f,
                "  warning: %llu blocks of format version 1 found outside the trees were not "
                "copied: version 1 does not name a block's collection or generation (some may "
                "be older snapshots')\n",
                (unsigned long long)res->blocks_unnamed);
    return res->blocks_unnamed > 0 || res->older_meta;
}

/* One collection's line (or JSON object, the i-th). 1 when some of it was
 * lost, or how much cannot be known. */
static int salvage_coll(snap_ctx *cx, size_t i, const pc_store_salvage_coll *k)
{
    FILE *f = cx->out;
    int64_t lost_rec = k->meta_found ? (int64_t)k->count_meta - (int64_t)k->count : -1;
    int64_t lost_blk = k->meta_found ? (int64_t)k->blocks_meta - (int64_t)k->blocks : -1;
    int complete = k->meta_found && lost_rec == 0 && lost_blk == 0 && k->blocks_bad == 0;
    if (cx->json) {
        fprintf(f, "%s{\"name\":", i ? "," : "");
        snap_jstr(f, k->name, strlen(k->name));
        fprintf(f,
                ",\"meta_found\":%s,\"generation\":%llu,\"records\":%llu,\"blocks\":%llu,"
                "\"blocks_failed\":%llu,\"blocks_outside_trees\":%llu,"
                "\"blocks_other_generations\":%llu",
                k->meta_found ? "true" : "false", (unsigned long long)k->generation,
                (unsigned long long)k->count, (unsigned long long)k->blocks,
                (unsigned long long)k->blocks_bad, (unsigned long long)k->blocks_orphan,
                (unsigned long long)k->blocks_stale);
        if (k->meta_found)
            fprintf(f, ",\"records_meta\":%llu,\"blocks_meta\":%llu,\"records_lost\":%lld",
                    (unsigned long long)k->count_meta, (unsigned long long)k->blocks_meta,
                    (long long)lost_rec);
        fprintf(f, ",\"complete\":%s}", complete ? "true" : "false");
        return !complete;
    }
    fprintf(f, "  collection %s: %llu records in %llu blocks copied", k->name,
            (unsigned long long)k->count, (unsigned long long)k->blocks);
    if (k->generation != 0)
        fprintf(f, ", generation %llu", (unsigned long long)k->generation);
    if (k->blocks_orphan)
        fprintf(f, " (%llu of them found outside the trees)", (unsigned long long)k->blocks_orphan);
    if (k->meta_found)
        fprintf(f, "; the snapshot had %llu in %llu: %s", (unsigned long long)k->count_meta,
                (unsigned long long)k->blocks_meta, complete ? "nothing lost" : "some LOST");
    else
        fprintf(f, "; its meta is lost: how much is missing is not known%s",
                k->generation != 0 ? ", and a newer generation may have been lost whole" : "");
    if (k->blocks_bad)
        fprintf(f, "; %llu blocks failed their checks", (unsigned long long)k->blocks_bad);
    if (k->blocks_stale)
        fprintf(f, "; %llu blocks of older generations left out",
                (unsigned long long)k->blocks_stale);
    fputc('\n', f);
    return !complete;
}

int snap_cmd_salvage(snap_ctx *cx, int argc, char **argv)
{
    int r = snap_common_args(cx, argc, argv, 2, 2);
    if (r >= 0)
        return r;
    const char *src = argv[optind], *dst = argv[optind + 1];
    pc_store_salvage_result res;
    char err[700];
    int rc = pc_store_salvage(src, dst, &res, err, sizeof err);
    if (rc == PC_EEXIST)
        return snap_fail(cx, SNAP_USAGE, "%s", err);
    if (rc != 0)
        return snap_fail(cx, snap_exit_of(rc), "%s", err[0] ? err : pc_store_strerror(rc));
    FILE *f = cx->out;
    int lost = salvage_head(cx, src, dst, &res);
    for (size_t i = 0; i < res.ncolls; i++)
        lost |= salvage_coll(cx, i, &res.colls[i]);
    if (res.ncolls == 0 && res.problems > 0) {
        lost = 1; /* damage and nothing found: the loss cannot even be counted */
        if (!cx->json)
            fprintf(f, "  no collection could be found in %s\n", src);
    }
    if (cx->json)
        fprintf(f, "],\"complete\":%s}\n", lost ? "false" : "true");
    else
        fprintf(f,
                "%s. Start pcached on it with db_url = lmdb://%s (the journal of the damaged "
                "store is not carried over)\n",
                lost ? "Some records were lost" : "Every record was recovered", dst);
    pc_store_salvage_free(&res);
    return snap_finish(cx, lost ? SNAP_FOUND : SNAP_OK);
}
