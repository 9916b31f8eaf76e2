/*
 * store_raw.h - what the store's core offers the one component above it
 * that reads LMDB's pages itself: storage/storecheck/ (the structural
 * check, the checked open and compaction, salvage). Not installed; no
 * other component includes it (scripts/check-boundaries.py lets
 * storecheck alone, and links pcache_store_raw into nothing else).
 *
 * The core never calls the check itself: an open or a compaction that
 * meets an existing environment calls the pc_store_check_fn it was given,
 * at the point where LMDB would first read the file, and refuses with the
 * code and the words it returns. So the dependency points one way: the
 * check depends on the core, the core on nothing of the check.
 *
 * It also holds the format codec (store_format.h), which the check and
 * salvage decode every record with.
 */
#ifndef PC_STORE_RAW_H
#define PC_STORE_RAW_H

#include <lmdb.h>
#include <stddef.h>

#include "pcache_store.h"
#include "store_format.h"

/* What the caller of a pc_store_check_fn is about to do with the store. */
enum pc_store_check_how {
    PC_SCK_READER = 0, /* open it read-only: LMDB's pages and the store's own
                        * header and databases must be sound */
    PC_SCK_WRITER = 1, /* open it read-write: also no collection of a newer
                        * format version */
    PC_SCK_LOCKED = 2  /* compact it: the caller holds lock.mdb exclusively,
                        * so the check must not open LMDB */
};

/* Checks the store in directory dir (borrowed) for how (enum
 * pc_store_check_how): 0 when nothing refuses, else PC_ESTORE,
 * PC_EFORMAT, PC_ECORRUPT (or the code of a check that could not run)
 * with the operator's sentence in why (cap bytes, NUL-terminated). */
typedef int (*pc_store_check_fn)(const char *dir, int how, char *why, size_t cap);

/* pc_store_open, with check run on an existing environment before LMDB
 * reads it (unless cfg->flags holds PC_STORE_NOCHECK). check NULL: an
 * existing environment is refused with PC_EINVAL unless PC_STORE_NOCHECK
 * is set; the data.mdb this open creates (a missing or blank directory
 * with PC_STORE_CREATE) is read without one. */
int pc_store_open_with(const char *where, const pc_store_config *cfg, pc_store_check_fn check,
                       pc_store **out, char *errbuf, size_t errlen);

/* Compaction (store_compact.c), with check (how PC_SCK_LOCKED) run once
 * the caller holds the store's lock; check must not be NULL. The contract
 * is pc_store_compact's (pcache_storecheck.h). */
int pc_store_compact_with(const char *where, pc_store_check_fn check,
                          pc_store_compact_result *result, char *errbuf, size_t errlen);

/* The message for a permission refused on file of the store in dir
 * ("data.mdb", "lock.mdb"; NULL: the directory itself): the process's ids
 * and the file's mode and owner. Returns PC_EIO, the code it goes with. */
int pc_store_perm_msg(const char *dir, const char *file, char *buf, size_t cap);

/* Begins a write transaction on s (read-write, opened in this process)
 * and gives the handles of its "meta" and "blocks" databases, for a
 * caller that writes records it already encoded (salvage). The caller
 * commits or aborts *txn with LMDB. 0, or PC_EINVAL / PC_EIO (logged). */
int pc_store_write_begin(pc_store *s, MDB_txn **txn, MDB_dbi *meta, MDB_dbi *blocks);

#endif /* PC_STORE_RAW_H */
