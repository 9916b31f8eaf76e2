/*
 * pc_journal_testing.h - the journal's white-box interface for its own
 * tests (test_journal.c, test_journal_faults.c, test_journal_race.c,
 * test_journal_kill.c), through the INTERFACE target
 * pcache_journal_testing; no production target links it.
 *
 * Those tests check what the API cannot show: the segment and record codec
 * against hand-made bytes, a ring's head and tail and a segment's synced
 * bytes after a write of each mode, the process's own descriptors after a
 * rotation, the sync pass's list of files, a consumer killed while it
 * holds a slot's lock, and the epoch of the segment a process's last
 * record went to. So this header is the journal's private one,
 * journal_int.h, as it is: the tests follow its layout, and nothing else
 * may include it.
 */
#ifndef PC_JOURNAL_TESTING_H
#define PC_JOURNAL_TESTING_H

#include "../journal_int.h"

#endif /* PC_JOURNAL_TESTING_H */
