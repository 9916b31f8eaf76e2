/*
 * procs.c - process slots and owner-token locks.
 *
 * Every process that touches the cache claims a slot in the header's
 * process table. The slot gives it a cache line of statistics per
 * collection and an owner token (generation << 12 | slot index) that it
 * writes into any lock word it takes. A process that dies holding a lock
 * leaves its token behind; a waiter that has spun long enough looks the
 * token up, finds the owner dead (its slot was reclaimed, its pid is gone or
 * a zombie, or the pid now belongs to a process that started later) and
 * takes the lock over, telling its caller to repair what the dead writer
 * left half-done.
 *
 * A fork is noticed through a process-wide epoch bumped by a pthread_atfork
 * child handler: the first operation after the fork finds its handle's
 * epoch stale, drops the allocator state it inherited (never donating it:
 * those cells still belong to the parent) and claims its own slot.
 */
#include "pc_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

_Atomic uint64_t pc_fork_epoch = 1;
#if PC_DEBUG_ASSERTS
_Thread_local unsigned pc_dbg_bucket_locks, pc_dbg_chain_locks; /* I5, I7 */
#endif
static pthread_once_t pc_atfork_once = PTHREAD_ONCE_INIT;

static void pc_atfork_child(void)
{
    atomic_fetch_add_explicit(&pc_fork_epoch, 1, memory_order_relaxed);
}

static void pc_atfork_register(void)
{
    pthread_atfork(NULL, NULL, pc_atfork_child);
}

void pc_procs_init(struct pc_header_shm *h)
{
    (void)h; /* the table starts zeroed: every slot free */
    pthread_once(&pc_atfork_once, pc_atfork_register);
}

/* Reads field 3 (state) and 22 (starttime) of /proc/<pid>/stat. Returns 0
 * and fills them, or -1 when the process does not exist. */
static int pc_proc_stat(int pid, char *state, uint64_t *starttime)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* comm may contain spaces and parens */
    if (p == NULL)
        return -1;
    unsigned long long st = 0;
    char s = '?';
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime cutime cstime priority nice threads
     * itrealvalue starttime */
    if (sscanf(p + 1,
               " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
               &s, &st) != 2)
        return -1;
    *state = s;
    *starttime = st;
    return 0;
}

static bool pc_proc_alive(const struct pc_proc_shm *p)
{
    int pid = atomic_load_explicit(&p->pid, memory_order_relaxed);
    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    char state;
    uint64_t st;
    if (pc_proc_stat(pid, &state, &st) != 0)
        return false;
    if (state == 'Z' || state == 'X')
        return false;
    return st == atomic_load_explicit(&p->starttime, memory_order_relaxed);
}

static uint32_t pc_new_token(struct pc_header_shm *h, uint32_t idx)
{
    uint32_t gen = atomic_fetch_add_explicit(&h->token_gen, 1, memory_order_relaxed) + 1;
    uint32_t t = (gen << PC_TOKEN_IDX_BITS) | idx;
    if ((t >> PC_TOKEN_IDX_BITS) == 0) /* keep a nonzero generation */
        t |= 1u << PC_TOKEN_IDX_BITS;
    return t;
}

/* Whether slot p's owner is dead for a claim or a reap: its pid and
 * starttime must be its token's own (a slot being claimed still shows the
 * previous owner's pid: it is not dead, it is busy). */
static bool pc_slot_dead(const struct pc_proc_shm *p, uint32_t cur)
{
    if (cur == 0 || atomic_load_explicit(&p->pid_token, memory_order_acquire) != cur)
        return false;
    return !pc_proc_alive(p);
}

/* Takes slot i, whose token is cur, for this process under a new token:
 * pid and starttime first, then pid_token, which makes them count. */
static uint32_t pc_take_slot(struct pc_header_shm *h, uint32_t i, uint32_t cur)
{
    struct pc_proc_shm *p = &h->procs[i];
    char state;
    uint64_t st = 0;
    if (pc_proc_stat(getpid(), &state, &st) != 0)
        st = 0;
    uint32_t t = pc_new_token(h, i);
    if (!atomic_compare_exchange_strong(&p->token, &cur, t))
        return 0;
    /* a transaction the previous owner died inside will never be done:
     * pc_txn_quiesce must not wait for it under the new owner's token */
    atomic_store_explicit(&p->txn_done, atomic_load(&p->txn_begun), memory_order_release);
    atomic_store_explicit(&p->pid, (int32_t)getpid(), memory_order_relaxed);
    atomic_store_explicit(&p->starttime, st, memory_order_relaxed);
    atomic_store_explicit(&p->pid_token, t, memory_order_release);
    uint32_t hwm = atomic_load(&h->proc_hwm);
    while (hwm < i && !atomic_compare_exchange_weak(&h->proc_hwm, &hwm, i))
        ;
    return t;
}

static int pc_claim_slot(pc_cache *c)
{
    struct pc_header_shm *h = c->hdr;
    /* pass 0 takes a never-used or released slot, pass 1 reclaims a dead one */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 1; i < PC_MAX_PROCS; i++) {
            struct pc_proc_shm *p = &h->procs[i];
            uint32_t cur = atomic_load_explicit(&p->token, memory_order_acquire);
            if (pass == 0 ? cur != 0 : !pc_slot_dead(p, cur))
                continue;
            uint32_t t = pc_take_slot(h, i, cur);
            if (t == 0)
                continue;
            c->token = t;
            c->slot = i;
            if (atomic_load_explicit(&p->alloc_off, memory_order_acquire) == 0) {
                uint64_t bytes = (uint64_t)PC_MAX_CLASSES * sizeof(struct pc_alloc_shm);
                uint64_t off = i <= PC_RESERVED_SLOTS ? h->alloc_reserve_off + (i - 1) * bytes
                                                      : pc_region_carve(c, bytes, 64);
                if (off == 0) {
                    pc_log(c, PC_LOG_ERR, "pcache: no room for a process slot's allocator state");
                    c->token = 0;
                    atomic_store_explicit(&p->token, 0, memory_order_release);
                    return PC_ENOMEM;
                }
                atomic_store_explicit(&p->alloc_off, off, memory_order_release);
            }
            if (pass == 1)
                pc_slot_reap(c, i); /* the dead owner's cells go to the pools first */
            c->cls = pc_at(c, atomic_load_explicit(&p->alloc_off, memory_order_acquire));
            return 0;
        }
    }
    pc_log(c, PC_LOG_ERR, "pcache: all %u process slots are held by live processes",
           PC_MAX_PROCS - 1);
    return PC_EPROCS;
}

unsigned pc_procs_reap(pc_cache *c)
{
    struct pc_header_shm *h = c->hdr;
    unsigned n = 0;
    uint32_t hwm = atomic_load_explicit(&h->proc_hwm, memory_order_acquire);
    for (uint32_t i = 1; i <= hwm && i < PC_MAX_PROCS; i++) {
        struct pc_proc_shm *p = &h->procs[i];
        uint32_t cur = atomic_load_explicit(&p->token, memory_order_acquire);
        if (i == c->slot || !pc_slot_dead(p, cur))
            continue;
        if (pc_take_slot(h, i, cur) == 0)
            continue; /* somebody else took it first */
        pc_slot_reap(c, i);
        pc_log(c, PC_LOG_INFO, "pcache: process slot %u of a dead process reaped", i);
        atomic_store_explicit(&p->token, 0, memory_order_release); /* released: empty state */
        n++;
    }
    return n;
}

int pc_local_refresh(pc_cache *c)
{
    uint64_t epoch = atomic_load_explicit(&pc_fork_epoch, memory_order_relaxed);
    if (c->epoch != epoch) {
        /* A fork happened since this state was built: whatever we hold is a
         * copy of another process's private hoard. Drop it, never donate. */
        pc_arena_drop_local(c);
        c->token = 0;
        c->slot = 0;
        c->epoch = epoch;
    }
    if (c->token == 0)
        return pc_claim_slot(c);
    return 0;
}

/* Whether the owner named by token t is gone for good. */
static bool pc_owner_dead(pc_cache *c, uint32_t t)
{
    uint32_t idx = t & PC_TOKEN_IDX_MASK;
    if (idx == 0 || idx >= PC_MAX_PROCS)
        return true; /* not a token any process holds */
    struct pc_proc_shm *p = &c->hdr->procs[idx];
    if (atomic_load_explicit(&p->token, memory_order_acquire) != t)
        return true; /* slot reclaimed: only done once its owner died */
    return !pc_proc_alive(p);
}

bool pc_token_gone(pc_cache *c, uint32_t t)
{
    return pc_owner_dead(c, t);
}

/* Spins, then yields; every few milliseconds of waiting checks whether the
 * holder is still alive. Waits forever for a live holder: bucket critical
 * sections are a few hundred nanoseconds, so a long wait means a stopped
 * (SIGSTOP, debugger) process, not a reason to break the lock. */
int pc_lock_slow(pc_cache *c, _Atomic uint32_t *l)
{
    uint64_t spins = 0;
    int64_t next_check = 0;
    for (;;) {
        uint32_t cur = atomic_load_explicit(l, memory_order_relaxed);
        if (cur == 0) {
            if (atomic_compare_exchange_weak_explicit(l, &cur, c->token, memory_order_acquire,
                                                      memory_order_relaxed))
                return 0;
            continue;
        }
        spins++;
        if (spins < 256) {
            pc_cpu_relax();
            continue;
        }
        sched_yield();
        if ((spins & 63) != 0)
            continue;
        int64_t now = pc_mono_ms();
        if (next_check == 0) {
            next_check = now + 5;
            continue;
        }
        if (now < next_check)
            continue;
        next_check = now + 20;
        if (pc_owner_dead(c, cur) &&
            atomic_compare_exchange_strong_explicit(l, &cur, c->token, memory_order_acquire,
                                                    memory_order_relaxed)) {
            pc_log(c, PC_LOG_WARN, "pcache: took over a lock left by dead owner token %#x", cur);
            return PC_LOCK_RECOVERED;
        }
    }
}

int pc_trylock_word(pc_cache *c, _Atomic uint32_t *l)
{
    uint32_t cur = 0;
    if (atomic_compare_exchange_strong_explicit(l, &cur, c->token, memory_order_acquire,
                                                memory_order_relaxed))
        return 0;
    if (cur != 0 && pc_owner_dead(c, cur) &&
        atomic_compare_exchange_strong_explicit(l, &cur, c->token, memory_order_acquire,
                                                memory_order_relaxed))
        return 0;
    return PC_EBUSY;
}
