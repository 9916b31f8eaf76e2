/*
 * storecheck_int.h - internals of storage/storecheck/, the component that
 * reads LMDB's pages itself, above the store's core. Not installed, not
 * included outside storage/storecheck/.
 *
 * Files:
 *   store_walk.c     the structural walk of data.mdb that trusts none of
 *                    its bytes (pc_lw_*)
 *   store_check.c    the forked child every untrusted read runs in, the
 *                    check over the walk (pc_store_check) and its verdict
 *   store_checked.c  the core's open and compaction with the check
 *                    installed (pc_store_open_checked, pc_store_compact)
 *   store_salvage.c  pc_store_salvage
 *
 * It reaches the core through store_raw.h (the format codec, the
 * permission message, a raw write transaction) and the public header.
 */
#ifndef PC_STORECHECK_INT_H
#define PC_STORECHECK_INT_H

#include <stddef.h>
#include <stdint.h>

#include "pcache_storecheck.h"
#include "store_raw.h"

/* ---- store_walk.c: the structural walk of data.mdb ------------------------
 * Reads the file through a read-only map and checks every page LMDB would
 * use (docs/snapshot-format.md §12); never follows what it cannot trust and
 * goes on past every problem. One walk per pc_lw. */
#define PC_LW_TREE 1 /* pstate: a page of a tree (or a meta page) */
#define PC_LW_FREE 2 /* pstate: a page the free list names */
#define PC_LW_MAX_DBS 16
enum { PC_LW_FREEDB = 0, PC_LW_MAIN = 1, PC_LW_NAMED = 2 }; /* pc_lw_tree.kind */
typedef struct pc_lw_db {                                   /* an MDB_db record */
    unsigned flags, depth;
    uint64_t branch_pages, leaf_pages, overflow_pages, entries, root;
} pc_lw_db;
typedef struct pc_lw_meta {
    int ok;
    uint32_t version, psize;
    uint64_t mapsize, last_pg, txnid;
    pc_lw_db db[2]; /* free, main */
} pc_lw_meta;
typedef struct pc_lw_tree {
    char name[64];
    int kind;
    unsigned depth;
    int integer, walked;
    uint64_t branch_pages, leaf_pages, overflow_pages, entries;
    uint64_t problems; /* met while walking this tree (a named one: its own only) */
} pc_lw_tree;
struct pc_lw_idl { /* one free-list record: n page numbers (u64) in the map */
    const uint8_t *ids;
    uint64_t n;
};
typedef struct pc_lw {
    /* set by the caller (pc_lw_map sets map and fsize) */
    const uint8_t *map;
    uint64_t fsize;
    void (*on_problem)(void *ctx, int kind, const char *msg); /* enum pc_store_problem_kind */
    /* every record of a named database, in key order per database; key and
     * val point into the map and lie inside it */
    void (*on_record)(void *ctx, const char *db, const uint8_t *key, size_t klen,
                      const uint8_t *val, size_t vlen);
    void *ctx;
    int clamp; /* a salvage: walk a truncated file's meta over the pages that are left */
    /* results of pc_lw_run */
    pc_lw_meta meta; /* the meta walked */
    int meta_index;
    unsigned psize;
    uint64_t npages; /* last page + 1 */
    uint8_t *pstate; /* npages bytes: 0 (reached by nothing), PC_LW_TREE, PC_LW_FREE */
    uint64_t problems, overflow_pages, free_pages, unreached_pages;
    int free_ok;  /* the free list was walked without a problem: the pages it does not
                   * name and no tree reaches are no older snapshot's */
    int fallback; /* one meta page was unusable: the other was walked (it may be the
                   * transaction before the last) */
    int clamped;  /* the meta walked was cut to a truncated file (clamp) */
    pc_lw_tree dbs[PC_LW_MAX_DBS];
    unsigned ndbs;
    struct pc_lw_idl *free_lists;
    size_t nfree_lists, free_cap;
} pc_lw;
/* Maps dpath read-only into w (a zero-length file maps nothing). 0,
 * PC_ESTORE when it does not exist, PC_EIO. */
int pc_lw_map(pc_lw *w, const char *dpath);
/* Walks the meta with transaction id want_txnid (use_want) when it is
 * sound, else the newest sound one. 0 (problems went to on_problem),
 * PC_EHEAP. */
int pc_lw_run(pc_lw *w, uint64_t want_txnid, int use_want);
/* Unmaps and frees what pc_lw_map and pc_lw_run took. */
void pc_lw_release(pc_lw *w);

/* ---- store_check.c ---------------------------------------------------------- */
/* Writes all n bytes of p to fd (a pipe to the parent), again after EINTR:
 * 0, or -1 when the pipe failed. */
int pc_store_write_all(int fd, const void *p, size_t n);
/* Runs fn(ctx, fd) in a forked child, fd the write end of a pipe; the
 * parent collects everything written into *out (caller-owned, free) and
 * the child's wait status into *status. The child exits with _exit (no
 * atexit handlers, inherited handles left alone). 0, PC_EIO, PC_EHEAP. */
int pc_store_isolated(int (*fn)(void *ctx, int fd), void *ctx, uint8_t **out, size_t *outlen,
                      int *status);
typedef struct pc_store_check_info {
    uint64_t pages, free_pages; /* of the meta walked */
} pc_store_check_info;
/* pc_store_check on a directory (dir borrowed). info may be NULL. */
int pc_store_check_dir(const char *dir, unsigned flags, pc_store_problem **out, size_t *n,
                       pc_store_check_info *info);
/* What an open does with these problems: 0 (none that refuses),
 * PC_ESTORE (an environment that is not a pcache store), PC_EFORMAT (a
 * newer version: of a collection only with PC_CK_WRITER or
 * PC_STORE_CHECK_DEEP), PC_ECORRUPT (LMDB-level damage or a damaged store
 * header or database; with PC_STORE_CHECK_DEEP, any problem). */
int pc_store_problem_refuses(const pc_store_problem *list, size_t n, unsigned flags);
#define PC_CK_WRITER                                                                               \
    0x100u /* refuses: the opener will write (a collection's newer                                 \
            * meta or block refuses too) */
/* Runs the check on dir and turns what refuses (pc_store_problem_refuses)
 * into that code with the operator's message in why: pc_store_verdict's,
 * then ". Nothing was read or written". 0 when nothing refuses. */
int pc_store_check_refuse(const char *dir, unsigned flags, char *why, size_t cap);

#endif /* PC_STORECHECK_INT_H */
