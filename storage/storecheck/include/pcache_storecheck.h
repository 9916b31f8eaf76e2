/*
 * pcache_storecheck.h - the structural check of a store's LMDB pages, the
 * open and the compaction that run it first, and salvage: the one public
 * header of storage/storecheck/.
 *
 * This component reads data.mdb itself, page by page, trusting none of its
 * bytes (LMDB checksums nothing and follows every page number it reads).
 * It sits above the store's core (pcache_store.h), which knows nothing of
 * it: the core's open and compaction call the check only when their caller
 * hands it over, which the two functions below do. Every program that
 * opens an existing store links it: the persistence layer (so pcached and
 * the OpenSIPS module), pcache-snapshot, the tests.
 *
 * Conventions are those of pcache_store.h: 0 or a negative PC_E* code
 * (pc_store_strerror names it), out-parameters written only on success,
 * pointer parameters borrowed for the call unless documented.
 */
#ifndef PCACHE_STORECHECK_H
#define PCACHE_STORECHECK_H

#include <stddef.h>
#include <stdint.h>

#include "pcache.h"
#include "pcache_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- opening an existing store ---------------------------------------------- */
/* pc_store_open with the structural check below run on an existing
 * environment before LMDB reads it (without PC_STORE_CHECK_DEEP; skipped
 * under PC_STORE_NOCHECK), refusing with pc_store_verdict's code and words
 * followed by ". Nothing was read or written". Every other contract, the
 * arguments, *out and the errors, is pc_store_open's. */
int pc_store_open_checked(const char *where, const pc_store_config *cfg, pc_store **out,
                          char *errbuf, size_t errlen);

/* ---- the structural check (store_check.c, docs/snapshot-format.md §12) ------
 * LMDB checksums none of its pages and follows every page number it reads:
 * a damaged branch, leaf, overflow, free-list or meta page makes it fault
 * (SIGSEGV, SIGBUS) or hand live pages to the next write as free. So before
 * a store is read or written through LMDB, a walk that trusts no byte
 * checks every page LMDB would use: both meta pages, every branch, leaf
 * and overflow page of the main database and of every named one, and the
 * free list (page numbers in range, no page both free and in use, none
 * named twice), then the pcache layer's headers over what it reached (store
 * header, every collection meta, every block header, each meta's count and
 * content checksum re-derived from its block headers). It runs in a forked
 * child: a fault there is a reported problem, never a crash of the caller.
 * It never writes data.mdb.
 *
 * pc_store_open_checked runs it (without DEEP) before it opens an
 * existing environment, read-only or not, and refuses what
 * pc_store_verdict refuses for a reader (a writer: a collection's newer
 * meta or block too), with its code and words. */
#define PC_STORE_CHECK_DEEP 0x1u /* also every block's payload checksum */
#define PC_STORE_CHECK_NOLOCK                                                                      \
    0x2u /* walk without opening LMDB: for a caller that holds                                     \
          * the store's lock.mdb exclusively (no writer can run) */

/* The verdict on a store from the problems pc_store_check found in it, in
 * the words every caller uses (pcached, the OpenSIPS module, every verb of
 * pcache-snapshot): 0 when nothing refuses under flags, else the class and
 * in msg (may be NULL) the sentence that names it and the first problem of
 * that class:
 *   PC_ESTORE   "store DIR is not a pcache store: ..." (PC_SP_FOREIGN);
 *   PC_EFORMAT  "store DIR was written by a newer format version: ...";
 *   PC_ECORRUPT "store DIR is damaged: <problem> (and N more problems).
 *               'pcache-snapshot verify DIR' lists the damage;
 *               'pcache-snapshot salvage DIR NEWDIR' copies ...".
 * flags 0 is a reader's verdict (LMDB's pages, the file, the store header
 * and databases, a newer store refuse; a collection's own damage is met by
 * its reads); PC_STORE_CHECK_DEEP is a writer's before its first write and
 * a verifier's: every problem refuses. where and list are borrowed;
 * PC_EINVAL for a NULL where (or list with n > 0). */
int pc_store_verdict(const char *where, const pc_store_problem *list, size_t n, unsigned flags,
                     char *msg, size_t cap);

/* Checks the store at where (a path or lmdb:/// URL, borrowed). Returns 0
 * with *out (caller-owned: pc_store_problems_free; NULL when *n is 0) the
 * problems found, at most 1000, key always NULL; *n == 0: sound. Errors:
 * PC_ESTORE (no directory or no data.mdb: a zero-length data.mdb is not an
 * error but a PC_SP_FILE problem), PC_EURL, PC_EIO / PC_EHEAP (the check
 * could not run), each with a message in errbuf (may be NULL). */
int pc_store_check(const char *where, unsigned flags, pc_store_problem **out, size_t *n,
                   char *errbuf, size_t errlen);

/* ---- salvage (store_salvage.c) ------------------------------------------------
 * Copies every block of src that still verifies (header, payload,
 * decompression, raw checksum, every record) into a new store dst, with a
 * collection meta re-derived from what was copied, and reports what was
 * lost. It reads src without LMDB, in a forked child: the trees as far as
 * they can be trusted and, when anything is damaged, every page of the
 * file for the blocks the trees no longer reach (below a damaged leaf or
 * branch, before the cut of a truncated file). A block of format version 2
 * names its collection and generation itself, so only the blocks of each
 * collection's snapshot generation are taken (the meta's, else the newest
 * found), and none from a page a sound free list names; a version 1 block
 * is taken outside the trees only from a page no tree and no free-list
 * entry reaches, when the free list is sound. A block found outside the
 * trees is taken only when it overlaps none the trees hold. src is never written. dst must not
 * exist or be an empty directory; the journal of src is not copied. The operator then points db_url
 * at dst (docs/pcache-snapshot.md, "salvage"; the method: docs/snapshot-format.md §13). */
typedef struct pc_store_salvage_coll {
    char name[PC_COLL_NAME_MAX + 1];
    int meta_found;         /* the source meta decoded: the *_meta fields are its */
    uint64_t count_meta;    /* records the source meta said */
    uint64_t blocks_meta;   /* blocks the source meta said */
    uint64_t count;         /* records copied */
    uint64_t blocks;        /* blocks copied */
    uint64_t blocks_bad;    /* blocks the trees reach that failed a check (not copied) */
    uint64_t blocks_orphan; /* of the copied, found outside the trees */
    uint64_t generation;    /* the generation copied (0: blocks of format version 1 only,
                             * without a meta) */
    uint64_t blocks_stale;  /* blocks of other (older) generations found and left out */
} pc_store_salvage_coll;
typedef struct pc_store_salvage_result {
    uint64_t problems;       /* structural problems the walk met */
    uint64_t pages_scanned;  /* pages outside every tree that were read for blocks */
    int older_meta;          /* one LMDB meta page was unusable and the other was read:
                              * the copy may be the snapshot before the last save */
    int free_unknown;        /* the free list is damaged: blocks of format version 1
                              * outside the trees were not taken (they may be older
                              * snapshots'), so those below damaged pages are lost */
    uint64_t blocks_unnamed; /* blocks of format version 1 found outside the trees and
                              * not copied: no collection or generation can be told */
    size_t ncolls;
    pc_store_salvage_coll *colls; /* caller-owned: pc_store_salvage_free */
} pc_store_salvage_result;
/* 0 when the new store was written (even if nothing could be copied);
 * PC_EEXIST when dst holds something; PC_ESTORE when src holds no data.mdb;
 * PC_EIO / PC_EHEAP; a message in errbuf (may be NULL). */
int pc_store_salvage(const char *src, const char *dst, pc_store_salvage_result *result,
                     char *errbuf, size_t errlen);
void pc_store_salvage_free(pc_store_salvage_result *r); /* frees colls; accepts NULL */

/* ---- whole-store maintenance (store_compact.c) ---------------------------- */
/* Takes a path or URL, not a handle: it concerns the other processes that
 * have the store open. The structure is checked first (the check runs
 * without LMDB: the caller holds the lock) and a store it refuses is left
 * alone.
 *
 * Rewrites data.mdb without its free pages (LMDB's compacting copy), checks
 * that the copy holds every record of the store byte for byte, and renames
 * it over data.mdb: at every instant data.mdb is the old file or the
 * complete new one. The store must not be open in any other process (nor
 * in this one): PC_EBUSY otherwise, with the holder's pid in errbuf; no
 * process can open it while the compaction runs (openers wait). Errors,
 * each with a message in errbuf (may be NULL): PC_ESTORE (not a store),
 * PC_EFORMAT (newer format), PC_ECORRUPT (truncated data.mdb, bad header),
 * PC_EIO (a system call failed; the store is unchanged unless the message
 * says it was compacted). result may be NULL. */
int pc_store_compact(const char *where, pc_store_compact_result *result, char *errbuf,
                     size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* PCACHE_STORECHECK_H */
