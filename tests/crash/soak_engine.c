/*
 * soak_engine.c - the multi-process soak: forked workers on one cache while
 * a maintenance process splits buckets and sweeps expired entries.
 *
 * A lock-free read path over a table that resizes itself under live traffic
 * passes every single-process test and still corrupts memory in production,
 * so this runs the real shape. The parent creates the cache, stores the
 * "immortal" keys and leaves a hoard of cells on its private free stacks,
 * then forks NWORKERS workers and one maintainer. Workers run a
 * get/set/remove/add mix on collection "soak" (declared with 16 buckets;
 * the key range they draw from widens all run, so it keeps growing) and
 * write bursts of 2 s-TTL keys into "churn", every 8th chosen to collide on
 * the low hash bits so buckets overflow into side chains all run long. The
 * maintainer grows every 5 ms and sweeps every 1 s: overflow + expiry
 * reclamation + growth together, the shape production caught and a
 * generous-TTL soak did not. The checks:
 *  - no torn read: every value is all-bytes-equal and its length is a
 *    function of (key, byte), so a mix of two writes is visible;
 *  - no lost update: counters hammered with pc_add(+1) by every worker sum
 *    to the successful adds the workers report;
 *  - no lost key: immortal keys (stored before the fork, or added during
 *    the run and never removed) read back throughout and at the end; a
 *    churn key read well inside its TTL is there, one read a second past
 *    it is not;
 *  - no crash and no wedge: every child exits 0 within its deadline;
 *  - pc__test_verify() is 0 at quiescent checkpoints and at the end.
 * Before all that, two short focused stages: the drain race (below) for a
 * key in transit from an overflow chain to its bucket, found by every
 * lookup; the sweep race for keys that live on TTL re-arms while the sweep
 * reaps their buckets' neighbours. Plain main, no cmocka:
 * one PASS/FAIL line per check, and "N passed, N failed" last.
 */
#include "pc_testhooks.h"
#include "pcache.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NWORKERS 4
#define NIMMORTAL 4000u
#define NCOUNTERS 32u
#define KEYS_START 2000u   /* soak key range at t = 0 ... */
#define KEYS_END 120000u   /* ... widening to this at the end of the run */
#define CHURN_BURST 64u    /* keys per burst, every CHURN_PERIOD_MS per worker */
#define CHURN_HOT_EVERY 8u /* every 8th churn key collides on the low bits */
#define CHURN_PERIOD_MS 20
#define CHURN_TTL_MS 2000
#define CHURN_YOUNG_MS 1000 /* younger than this: must read back */
#define CHURN_STALE_MS 3000 /* older than this (ttl + 1 s): must be gone */
#define CHURN_RING 256u     /* bursts remembered: > CHURN_STALE_MS / period */
#define CHECKPOINT_MS 10000
#define RACE_MS 2500       /* the drain race before the soak proper */
#define SWEEP_RACE_MS 2500 /* then the sweep race */
#define SWEEP_KEYS 2000u
#define SWEEP_TTL_MS 1500   /* refreshed keys: every pass re-arms this TTL */
#define SWEEP_FRESH_MS 1000 /* a key re-armed less than this ago must be there */
#define RACE_KEYS 3000u
#define RACE_MAINT_CALLS 1400
#define VBUF 8192u
#define MAX_REPORTS 12 /* diagnostic lines per process */

enum { PH_RUN, PH_PAUSE, PH_STOP };

struct wstats { /* one per worker, written only by it */
    uint64_t ops, gets, hits, sets, removes, adds, getctr, churn_sets, churn_checked;
    uint64_t nomem, torn, lost_immortal, lost_churn, stale_churn, stale_checked, resurrected;
    uint64_t counter_regress, elocked, unexpected;
    uint64_t ctr_adds[NCOUNTERS];
};

struct mstats { /* written only by the maintenance process */
    uint64_t grow_calls, sweep_calls, splits, late_splits, drained, reaped, probed;
    uint64_t busy, errors, max_ovf_soak, max_ovf_churn;
};

struct shared { /* MAP_SHARED anonymous, mapped before the fork */
    _Atomic int phase;
    _Atomic int paused;
    _Atomic uint32_t grown[NWORKERS]; /* immortal keys worker w has added */
    _Atomic int race_stop;
    _Atomic uint64_t race_miss, race_drained;
    _Atomic int64_t sweep_pass_ms; /* start of the refresher's last complete pass */
    _Atomic uint64_t sweep_passes, sweep_reaped, sweep_probed, sweep_splits, sweep_stale;
    int64_t t0_ms, run_ms;
    struct wstats w[NWORKERS];
    struct mstats m;
};

static int reports; /* per process */

static void report(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(const char *who, const char *fmt, ...)
{
    if (reports++ >= MAX_REPORTS)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s %d] %s\n", who, (int)getpid(), line);
}

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "[pcache %d L%d] %s\n", (int)getpid(), level, msg);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rng_next(uint64_t *s) /* xorshift64* */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* ---- the value shapes: byte and length are functions of the key --------- */
static size_t soak_len(uint32_t ki, unsigned b)
{
    uint32_t h = ki * 2654435761u ^ b * 40503u;
    return b % 32 == 0 ? 1024 + h % 2048 : 1 + h % 400;
}
/* Immortal keys are never removed: NIMMORTAL stored before the fork
 * (w = -1), and more that each worker w adds as it runs, so keys keep
 * landing in full buckets, spilling to overflow and being drained back
 * while other workers read them. */
static unsigned imm_byte(int w, uint32_t n)
{
    return 1 + (n + (uint32_t)(w + 1) * 71u) % 251;
}
static size_t imm_len(int w, uint32_t n)
{
    if (w >= 0)
        return 1 + (n * 37 + (uint32_t)w) % 120;
    return n % 64 == 0 ? 2000 : 1 + (n * 37) % 300;
}
static unsigned churn_byte(int w, uint64_t seq)
{
    return 1 + (unsigned)((seq * 7 + (uint64_t)w * 13) % 255);
}
static size_t churn_len(int w, uint64_t seq)
{
    return 1 + (size_t)((seq * 53 + (uint64_t)w * 11) % 700);
}

/* 0 when buf[0..n) is n bytes, all equal to b (b = 0: any non-zero byte). */
static int all_bytes(const unsigned char *buf, size_t n, unsigned b)
{
    if (n == 0 || buf[0] == 0 || (b != 0 && buf[0] != b))
        return -1;
    for (size_t i = 1; i < n; i++)
        if (buf[i] != buf[0])
            return -1;
    return 0;
}

static size_t key_soak(char *k, uint32_t i)
{
    return (size_t)sprintf(k, "k%" PRIu32, i);
}
static size_t key_imm(char *k, int w, uint32_t n)
{
    if (w < 0)
        return (size_t)sprintf(k, "imm%" PRIu32, n);
    return (size_t)sprintf(k, "imm%d.%" PRIu32, w, n);
}
static size_t key_ctr(char *k, uint32_t i)
{
    return (size_t)sprintf(k, "ctr%" PRIu32, i);
}

/* Churn keys: "ch<w>.<seq>"; a hot one carries the smallest nonce that puts
 * the low 14 hash bits below 16, so hot keys of every worker crowd into at
 * most 16 buckets until the table passes 16384 buckets and into 16 overflow
 * chains for good: overflow nodes are linked and reaped all run long. */
static int churn_hot(uint64_t seq)
{
    return seq % CHURN_HOT_EVERY == 0;
}
#define NO_NONCE UINT32_MAX
static size_t key_churn(char *k, int w, uint64_t seq, uint32_t *nonce)
{
    size_t n = (size_t)sprintf(k, "ch%d.%" PRIu64, w, seq);
    if (!churn_hot(seq))
        return n;
    if (*nonce != NO_NONCE)
        return n + (size_t)sprintf(k + n, ".%" PRIu32, *nonce);
    for (*nonce = 0;; ++*nonce) {
        size_t m = n + (size_t)sprintf(k + n, ".%" PRIu32, *nonce);
        if ((pc_hash(k, m) & 0x3fffu) < 16)
            return m;
    }
}

/* Reads a soak-shaped value and checks it; 1 hit, 0 miss, <0 error. */
static int check_soak(pc_coll *coll, uint32_t ki, unsigned char *buf, struct wstats *st,
                      const char *who)
{
    char k[32];
    size_t kl = key_soak(k, ki), vlen, needed;
    int rc = pc_get_buf(coll, k, kl, buf, VBUF, &vlen, &needed, NULL);
    if (rc == PC_ENOTFOUND)
        return 0;
    if (rc != 0) {
        report(who, "get %s: %s", k, pc_strerror(rc));
        return rc;
    }
    if (all_bytes(buf, vlen, 0) != 0 || vlen != soak_len(ki, buf[0])) {
        st->torn++;
        report(who, "TORN read %s: vlen %zu first 0x%02x last 0x%02x (want len %zu)", k, vlen,
               buf[0], vlen ? buf[vlen - 1] : 0, soak_len(ki, buf[0]));
        return -100;
    }
    return 1;
}

/* Immortal keys must be there, with their one value. */
static void check_immortal(pc_coll *coll, int w, uint32_t i, unsigned char *buf, struct wstats *st,
                           const char *who)
{
    char k[32];
    size_t kl = key_imm(k, w, i), vlen, needed;
    int rc = pc_get_buf(coll, k, kl, buf, VBUF, &vlen, &needed, NULL);
    if (rc != 0) {
        st->lost_immortal++;
        report(who, "LOST immortal %s: %s", k, pc_strerror(rc));
    } else if (vlen != imm_len(w, i) || all_bytes(buf, vlen, imm_byte(w, i)) != 0) {
        st->torn++;
        report(who, "TORN immortal %s: vlen %zu byte 0x%02x (want %zu x 0x%02x)", k, vlen, buf[0],
               imm_len(w, i), imm_byte(w, i));
    }
}

/* Pause protocol: a checkpoint stops everybody so pc__test_verify sees a
 * table nobody writes. Returns 1 when the run is over. */
static int phase_check(struct shared *sh)
{
    int ph = atomic_load(&sh->phase);
    if (ph == PH_PAUSE) {
        atomic_fetch_add(&sh->paused, 1);
        while ((ph = atomic_load(&sh->phase)) == PH_PAUSE)
            usleep(200);
        atomic_fetch_sub(&sh->paused, 1);
    }
    return ph == PH_STOP;
}

/* ---- churn: bursts of 2 s-TTL keys, read back young, checked gone old ---- */
struct burst {
    uint64_t seq0;
    int64_t t_begin, t_end;
    int valid, complete;
    uint32_t nonce[CHURN_BURST / CHURN_HOT_EVERY]; /* of its hot keys, found once */
};

static uint32_t *burst_nonce(struct burst *b, uint64_t seq)
{
    return &b->nonce[(seq - b->seq0) / CHURN_HOT_EVERY];
}

static int churn_read(pc_coll *churn, int w, struct burst *b, uint64_t seq, unsigned char *buf,
                      int *found)
{
    char k[64];
    size_t kl = key_churn(k, w, seq, burst_nonce(b, seq)), vlen, needed;
    int rc = pc_get_buf(churn, k, kl, buf, VBUF, &vlen, &needed, NULL);
    *found = rc == 0;
    if (rc == PC_ENOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    if (vlen != churn_len(w, seq) || all_bytes(buf, vlen, churn_byte(w, seq)) != 0)
        return -100;
    return 0;
}

/* Bursts written more than ttl + 1 s ago must read as absent: each burst
 * is checked once, oldest first, before its ring slot is reused. */
static void churn_stale(pc_coll *churn, int w, struct burst *ring, uint64_t nb, uint64_t *cur,
                        unsigned char *buf, struct wstats *st, const char *who)
{
    for (; *cur < nb; (*cur)++) {
        struct burst *o = &ring[*cur % CHURN_RING];
        int64_t age = now_ms() - o->t_end;
        if (nb - *cur < CHURN_RING && age < CHURN_STALE_MS)
            return; /* not old enough yet, and its slot is not needed */
        for (unsigned i = 0; i < CHURN_BURST && age >= CHURN_STALE_MS; i += 5) {
            int found, rc = churn_read(churn, w, o, o->seq0 + i, buf, &found);
            st->stale_checked++;
            if (rc == 0 && found) {
                st->stale_churn++;
                report(who, "STALE churn ch%d.%" PRIu64 " read %" PRId64 " ms after its write", w,
                       o->seq0 + i, age);
            }
        }
    }
}

static void churn_step(pc_coll *churn, int w, struct burst *ring, uint64_t *nb, uint64_t *seq,
                       uint64_t *stale_cur, unsigned char *buf, struct wstats *st, const char *who)
{
    churn_stale(churn, w, ring, *nb, stale_cur, buf, st, who);
    struct burst *b = &ring[*nb % CHURN_RING];
    char k[64];
    b->seq0 = *seq;
    b->t_begin = now_ms();
    b->complete = 1;
    b->valid = 0;
    for (unsigned i = 0; i < CHURN_BURST / CHURN_HOT_EVERY; i++)
        b->nonce[i] = NO_NONCE;
    for (unsigned i = 0; i < CHURN_BURST; i++) {
        uint64_t s = b->seq0 + i;
        size_t kl = key_churn(k, w, s, burst_nonce(b, s)), len = churn_len(w, s);
        memset(buf, (int)churn_byte(w, s), len);
        int rc = pc_set(churn, k, kl, buf, len, CHURN_TTL_MS, 0);
        st->churn_sets++;
        if (rc == PC_ENOMEM) {
            st->nomem++;
            b->complete = 0;
        } else if (rc != 0) {
            st->unexpected++;
            b->complete = 0;
            report(who, "churn set %s: %s", k, pc_strerror(rc));
        }
    }
    /* Every 8th key (offset 3: never a hot one) is removed straight away. */
    for (unsigned i = 3; i < CHURN_BURST && b->complete; i += 8) {
        size_t kl = key_churn(k, w, b->seq0 + i, burst_nonce(b, b->seq0 + i));
        int rc = pc_remove(churn, k, kl);
        if (rc == PC_ENOTFOUND && now_ms() - b->t_begin < CHURN_YOUNG_MS) {
            st->lost_churn++;
            report(who, "LOST churn %s: remove found nothing", k);
        } else if (rc != 0 && rc != PC_ENOTFOUND) {
            st->unexpected++;
        }
    }
    b->t_end = now_ms();
    b->valid = 1;
    *seq += CHURN_BURST;
    (*nb)++;

    /* The previous burst: every kept key present, every removed one gone. */
    struct burst *p = *nb >= 2 ? &ring[(*nb - 2) % CHURN_RING] : NULL;
    if (p && p->valid && p->complete) {
        for (unsigned i = 0; i < CHURN_BURST; i++) {
            int found, rc = churn_read(churn, w, p, p->seq0 + i, buf, &found);
            int64_t age = now_ms() - p->t_begin;
            st->churn_checked++;
            if (rc == -100) {
                st->torn++;
                report(who, "TORN churn ch%d.%" PRIu64, w, p->seq0 + i);
            } else if (rc != 0) {
                st->unexpected++;
            } else if (i % 8 == 3 && found) {
                st->resurrected++;
                report(who, "RESURRECTED churn ch%d.%" PRIu64, w, p->seq0 + i);
            } else if (i % 8 != 3 && !found && age < CHURN_YOUNG_MS) {
                st->lost_churn++;
                report(who, "LOST churn ch%d.%" PRIu64 " at age %" PRId64 " ms", w, p->seq0 + i,
                       age);
            }
        }
    }
}

/* A hot key of one of our last 25 bursts (half a second): it most likely
 * sits in an overflow chain that the sweep and the drain are working on,
 * and it must read back. */
static void churn_young_read(pc_coll *churn, int w, struct burst *ring, uint64_t nb, uint64_t r,
                             unsigned char *buf, struct wstats *st, const char *who)
{
    if (nb == 0)
        return;
    struct burst *b = &ring[(nb - 1 - (r >> 8) % (nb < 25 ? nb : 25)) % CHURN_RING];
    uint64_t seq = b->seq0 + CHURN_HOT_EVERY * ((r >> 16) % (CHURN_BURST / CHURN_HOT_EVERY));
    if (!b->valid || !b->complete)
        return;
    int found, rc = churn_read(churn, w, b, seq, buf, &found);
    int64_t age = now_ms() - b->t_begin;
    st->churn_checked++;
    if (rc == -100) {
        st->torn++;
        report(who, "TORN hot churn ch%d.%" PRIu64, w, seq);
    } else if (rc != 0) {
        st->unexpected++;
    } else if (!found && age < CHURN_YOUNG_MS) {
        st->lost_churn++;
        report(who, "LOST hot churn ch%d.%" PRIu64 " at age %" PRId64 " ms", w, seq, age);
    }
}

/* ---- a worker: the get/set/remove/add mix --------------------------------- */
static int worker_main(pc_cache *c, struct shared *sh, int w)
{
    struct wstats *st = &sh->w[w];
    char who[16], k[64];
    snprintf(who, sizeof who, "worker%d", w);
    pc_coll *soak, *churn;
    if (pc_coll_find(c, "soak", 4, &soak) != 0 || pc_coll_find(c, "churn", 5, &churn) != 0)
        return 2;
    unsigned char *buf = malloc(VBUF);
    struct burst *ring = calloc(CHURN_RING, sizeof *ring);
    if (!buf || !ring)
        return 2;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(w + 1), nb = 0, seq = 0, stale_cur = 0;
    int64_t last_ctr[NCOUNTERS] = {0}, next_burst = now_ms(), now = 0;
    uint32_t range = KEYS_START;
    size_t kl, vlen, needed;

    for (;; st->ops++) {
        if ((st->ops & 63) == 0) {
            if (phase_check(sh))
                break;
            now = now_ms();
            int64_t el = now - sh->t0_ms;
            if (el > sh->run_ms)
                el = sh->run_ms;
            range = KEYS_START + (uint32_t)((uint64_t)(KEYS_END - KEYS_START) * (uint64_t)el /
                                            (uint64_t)sh->run_ms);
            if (now >= next_burst) {
                churn_step(churn, w, ring, &nb, &seq, &stale_cur, buf, st, who);
                next_burst = now + CHURN_PERIOD_MS;
            }
            if ((st->ops & 1023) == 0) { /* one more immortal key, published once stored */
                uint32_t n = atomic_load_explicit(&sh->grown[w], memory_order_relaxed);
                kl = key_imm(k, w, n);
                memset(buf, (int)imm_byte(w, n), imm_len(w, n));
                int rc = pc_set(soak, k, kl, buf, imm_len(w, n), 0, PC_SET_NX);
                if (rc == 0)
                    atomic_store_explicit(&sh->grown[w], n + 1, memory_order_release);
                else if (rc == PC_ENOMEM)
                    st->nomem++;
                else if (st->unexpected++ == 0)
                    report(who, "immortal %s: %s", k, pc_strerror(rc));
            }
        }
        uint64_t r = rng_next(&rng);
        uint32_t op = (uint32_t)(r % 1000), ki = (uint32_t)((r >> 10) % range);
        uint32_t ci = (uint32_t)((r >> 40) % NCOUNTERS), ii = (uint32_t)((r >> 20) % NIMMORTAL);
        unsigned b = 1 + (unsigned)((r >> 50) % 255);
        int rc = 0;
        if (op < 300) { /* lock-free read into our buffer */
            st->gets++;
            rc = check_soak(soak, ki, buf, st, who);
            st->hits += rc == 1;
            rc = rc < 0 && rc != -100 ? rc : 0;
        } else if (op < 350) {
            churn_young_read(churn, w, ring, nb, r, buf, st, who);
        } else if (op < 400) { /* read into a malloc'd buffer */
            void *v = NULL;
            kl = key_soak(k, ki);
            st->gets++;
            rc = pc_get(soak, k, kl, &v, &vlen, NULL);
            if (rc == 0) {
                st->hits++;
                const unsigned char *u = v;
                if (all_bytes(u, vlen, 0) != 0 || vlen != soak_len(ki, u[0]) || u[vlen] != 0) {
                    st->torn++;
                    report(who, "TORN pc_get %s: vlen %zu", k, vlen);
                }
                free(v);
            }
            rc = rc == PC_ENOTFOUND ? 0 : rc;
        } else if (op < 420) { /* a buffer too small for most values */
            kl = key_soak(k, ki);
            rc = pc_get_buf(soak, k, kl, buf, 16, &vlen, &needed, NULL);
            if (rc == PC_ETOOSMALL && (needed <= 16 || needed > 3072 || vlen != 0)) {
                st->torn++;
                report(who, "ETOOSMALL %s: needed %zu vlen %zu", k, needed, vlen);
            } else if (rc == 0 && (vlen > 16 || all_bytes(buf, vlen, 0) != 0 ||
                                   vlen != soak_len(ki, buf[0]))) {
                st->torn++;
                report(who, "TORN small read %s: vlen %zu", k, vlen);
            }
            rc = rc == PC_ENOTFOUND || rc == PC_ETOOSMALL ? 0 : rc;
        } else if (op < 640) { /* writes: plain, NX, or with a TTL */
            unsigned flags = op < 600 ? 0 : op < 620 ? PC_SET_NX : PC_SET_XX;
            int64_t ttl = op >= 630 ? 300 + (int64_t)(r >> 54) % 1500 : 0;
            size_t len = soak_len(ki, b);
            kl = key_soak(k, ki);
            memset(buf, (int)b, len);
            st->sets++;
            rc = pc_set(soak, k, kl, buf, len, ttl, flags);
            rc = rc == PC_EEXIST || rc == PC_ENOTFOUND ? 0 : rc;
        } else if (op < 700) {
            kl = key_soak(k, ki);
            st->removes++;
            rc = pc_remove(soak, k, kl);
            rc = rc == PC_ENOTFOUND ? 0 : rc;
        } else if (op < 820) { /* the lost-update counters */
            int64_t res = 0;
            kl = key_ctr(k, ci);
            rc = pc_add(soak, k, kl, 1, 0, &res);
            if (rc == 0) {
                st->adds++;
                st->ctr_adds[ci]++;
                if (res <= last_ctr[ci]) {
                    st->counter_regress++;
                    report(who, "counter %s went %" PRId64 " -> %" PRId64 " on +1", k, last_ctr[ci],
                           res);
                }
                last_ctr[ci] = res;
            }
        } else if (op < 850) {
            int64_t v = 0;
            kl = key_ctr(k, ci);
            st->getctr++;
            rc = pc_get_counter(soak, k, kl, &v);
            if (rc == 0 && v < last_ctr[ci]) {
                st->counter_regress++;
                report(who, "counter %s read %" PRId64 " after %" PRId64, k, v, last_ctr[ci]);
            }
            if (rc == 0)
                last_ctr[ci] = v;
            rc = rc == PC_ENOTFOUND ? 0 : rc;
        } else if (op < 910) {
            check_immortal(soak, -1, ii, buf, st, who);
        } else if (op < 970) { /* one of the last 64 some worker added: likely in overflow */
            int w2 = (int)((r >> 33) % NWORKERS);
            uint32_t cnt = atomic_load_explicit(&sh->grown[w2], memory_order_acquire);
            if (cnt > 0)
                check_immortal(soak, w2, cnt - 1 - (uint32_t)((r >> 44) % (cnt < 64 ? cnt : 64)),
                               buf, st, who);
        } else if (op < 980) { /* rewrite an immortal key with its own value */
            kl = key_imm(k, -1, ii);
            memset(buf, (int)imm_byte(-1, ii), imm_len(-1, ii));
            rc = pc_set(soak, k, kl, buf, imm_len(-1, ii), 0, 0);
        } else {
            pc_meta m;
            kl = key_soak(k, ki);
            rc = pc_probe(soak, k, kl, &m);
            rc = rc == PC_ENOTFOUND ? 0 : rc;
        }
        if (rc == PC_ENOMEM) {
            st->nomem++;
        } else if (rc == PC_ELOCKED) {
            st->elocked++;
            report(who, "op %" PRIu32 " on key %" PRIu32 ": PC_ELOCKED", op, ki);
        } else if (rc != 0) {
            st->unexpected++;
            report(who, "op %" PRIu32 " on key %" PRIu32 ": %s", op, ki, pc_strerror(rc));
        }
    }
    free(ring);
    free(buf);
    return 0;
}

/* ---- the maintenance process ---------------------------------------------- */
static int maint_main(pc_cache *c, struct shared *sh)
{
    struct mstats *m = &sh->m;
    pc_coll *soak, *churn;
    if (pc_coll_find(c, "soak", 4, &soak) != 0 || pc_coll_find(c, "churn", 5, &churn) != 0)
        return 2;
    int64_t next_sweep = now_ms() + 1000;
    for (unsigned n = 0; !phase_check(sh); n++) {
        unsigned what = PC_MAINT_GROW;
        int64_t now = now_ms();
        if (now >= next_sweep) {
            what = PC_MAINT_ALL;
            next_sweep = now + 1000;
            m->sweep_calls++;
        }
        pc_maint_report r;
        int rc = pc_maintain(c, what, &r);
        m->grow_calls++;
        if (rc == 0) {
            m->splits += r.splits;
            if (now - sh->t0_ms > sh->run_ms / 2)
                m->late_splits += r.splits;
            m->drained += r.drained;
            m->reaped += r.reaped;
            m->probed += r.buckets_probed;
        } else if (rc == PC_EBUSY) {
            m->busy++;
        } else {
            m->errors++;
            report("maint", "pc_maintain: %s", pc_strerror(rc));
        }
        if (n % 16 == 0) {
            pc_coll_stats s;
            if (pc_coll_stats_get(soak, &s) == 0 && s.overflow > m->max_ovf_soak)
                m->max_ovf_soak = s.overflow;
            if (pc_coll_stats_get(churn, &s) == 0 && s.overflow > m->max_ovf_churn)
                m->max_ovf_churn = s.overflow;
        }
        usleep(5000);
    }
    return 0;
}

/* ---- the drain race: keys in transit from overflow to their bucket ----------
 * A focused stage before the soak proper: the soak reads any one key too
 * rarely to land in the microseconds a drain takes to move it. A 16-bucket
 * table holds RACE_KEYS keys, nearly all in overflow chains; a forked reader
 * reads them all over and over while a forked maintainer grows the table
 * two splits per call and drains chain entries into the room each split
 * makes. The parent stops the maintainer (SIGSTOP) for a moment at random
 * points, which stretches whatever window it is in from microseconds to
 * milliseconds. Nothing is removed, so any miss is a key lost in transit
 * (as when the drain unlinked the node before opening the bucket's version
 * bracket: ~1 round in 6 missed). Every way of finding a key takes its
 * turn, key by key: pc_get_buf (and with a buffer too small: the size it
 * needs), pc_get, pc_probe, pc_get_counter (a string: PC_ENOTNUM, never
 * PC_ENOTFOUND), and the writes' locked lookup - an identical XX set (the
 * TTL-only refresh), an NX set (PC_EEXIST), pc_expire, pc_add of 0 on a
 * counter (its value, not a restart from 0). One key in four is a native
 * counter. A fresh cache per round, as many rounds as fit budget_ms. */
#define RACE_WAYS 8u

static int race_is_counter(uint32_t i)
{
    return i % 4 == 3;
}

/* Finds key i the way number `way` does; 0 when it is there as stored. */
static int race_find(pc_coll *coll, uint32_t i, unsigned way, const char **what)
{
    char k[32], want[32], v[32];
    size_t kl = (size_t)sprintf(k, "race%" PRIu32, i), vlen = 0, needed = 0;
    int ctr = race_is_counter(i);
    size_t wl = ctr ? (size_t)sprintf(want, "%" PRIu32, i) : (size_t)sprintf(want, "%s", k);
    int rc;
    pc_meta m;
    void *got = NULL;
    int64_t n = -1;
    switch (way) {
    case 0:
        *what = "pc_get_buf";
        rc = pc_get_buf(coll, k, kl, v, sizeof v, &vlen, &needed, &m);
        return rc != 0 ? rc : vlen != wl || memcmp(v, want, wl) != 0 || m.is_counter != ctr;
    case 1:
        *what = "pc_get_buf (too small)";
        rc = pc_get_buf(coll, k, kl, v, 2, &vlen, &needed, NULL);
        if (wl <= 2) /* counters 3 and 7 fit */
            return rc != 0 ? rc : vlen != wl || memcmp(v, want, wl) != 0;
        return rc != PC_ETOOSMALL ? (rc != 0 ? rc : -100) : needed != wl;
    case 2:
        *what = "pc_get";
        if ((rc = pc_get(coll, k, kl, &got, &vlen, NULL)) == 0) {
            rc = vlen != wl || memcmp(got, want, wl) != 0;
            free(got);
        }
        return rc;
    case 3:
        *what = "pc_probe";
        rc = pc_probe(coll, k, kl, &m);
        return rc != 0 ? rc : m.is_counter != ctr || m.vlen != (ctr ? 8 : wl);
    case 4:
        *what = "pc_get_counter";
        rc = pc_get_counter(coll, k, kl, &n);
        return ctr                ? (rc != 0 ? rc : n != (int64_t)i)
               : rc != PC_ENOTNUM ? (rc != 0 ? rc : -100)
                                  : 0;
    case 5:
        *what = ctr ? "pc_add 0" : "pc_set XX (identical: TTL refresh)";
        if (ctr)
            return (rc = pc_add(coll, k, kl, 0, 0, &n)) != 0 ? rc : n != (int64_t)i;
        return pc_set(coll, k, kl, want, wl, 0, PC_SET_XX);
    case 6:
        *what = "pc_set NX";
        rc = pc_set(coll, k, kl, "nx", 2, 0, PC_SET_NX);
        return rc == PC_EEXIST ? 0 : rc != 0 ? rc : -100;
    default:
        *what = "pc_expire";
        return pc_expire(coll, k, kl, 0);
    }
}

static void race_reader(pc_coll *coll, struct shared *sh, int up)
{
    uint64_t miss = 0;
    if (write(up, "r", 1) != 1)
        _exit(2);
    for (unsigned pass = 0; !atomic_load_explicit(&sh->race_stop, memory_order_relaxed); pass++)
        for (uint32_t i = 0; i < RACE_KEYS; i++) {
            const char *what = "";
            int rc = race_find(coll, i, (i + pass) % RACE_WAYS, &what);
            if (rc != 0 && miss++ == 0)
                report("race", "race%" PRIu32 " by %s: %s", i, what,
                       rc < 0 && rc != -100 ? pc_strerror(rc) : "wrong answer");
        }
    atomic_fetch_add(&sh->race_miss, miss);
    _exit(0);
}

static void race_maintainer(pc_cache *c, struct shared *sh)
{
    for (int i = 0; i < RACE_MAINT_CALLS; i++) {
        pc_maint_report r;
        if (pc_maintain(c, PC_MAINT_GROW, &r) != 0)
            _exit(2);
        atomic_fetch_add(&sh->race_drained, r.drained);
    }
    _exit(0);
}

static int drain_race(struct shared *sh, int64_t budget_ms, uint64_t *rounds)
{
    int64_t end = now_ms() + budget_ms;
    unsigned seed = 1;
    int ok = 1;
    while (ok && now_ms() < end) {
        pc_config cfg;
        pc_config_init(&cfg);
        cfg.collections = "race=4";
        cfg.mem_mb = 16;
        cfg.growth_budget = 2;
        cfg.log.fn = log_cb;
        cfg.log.level = PC_LOG_WARN;
        pc_cache *c = NULL;
        pc_coll *coll;
        int up[2] = {-1, -1}, st = 0;
        char k[32], ready;
        ok = pc_cache_create(&cfg, &c) == 0 && pc_coll_find(c, "race", 4, &coll) == 0 &&
             pipe(up) == 0;
        for (uint32_t i = 0; ok && i < RACE_KEYS; i++) {
            size_t kl = (size_t)sprintf(k, "race%" PRIu32, i);
            ok = (race_is_counter(i) ? pc_set_counter(coll, k, kl, i, 0)
                                     : pc_set(coll, k, kl, k, kl, 0, 0)) == 0;
        }
        atomic_store(&sh->race_stop, 0);
        fflush(NULL);
        pid_t rd = ok ? fork() : -1, mt = -1;
        if (rd == 0)
            race_reader(coll, sh, up[1]);
        ok = rd > 0 && read(up[0], &ready, 1) == 1;
        if (ok && (mt = fork()) == 0)
            race_maintainer(c, sh);
        while (mt > 0 && waitpid(mt, &st, WNOHANG) == 0) {
            usleep(100 + rand_r(&seed) % 400);
            kill(mt, SIGSTOP);
            usleep(1000);
            kill(mt, SIGCONT);
        }
        ok = ok && mt > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
        atomic_store(&sh->race_stop, 1);
        if (rd > 0)
            ok = waitpid(rd, &st, 0) == rd && WIFEXITED(st) && WEXITSTATUS(st) == 0 && ok;
        (*rounds)++;
        close(up[0]);
        close(up[1]);
        pc_cache_destroy(c);
    }
    return ok ? 0 : -1;
}

/* ---- the sweep race: reclamation against TTL re-arms -------------------------
 * The soak's refreshed keys are few; here every key lives on re-arms. A
 * 16-bucket table holds SWEEP_KEYS keys with a SWEEP_TTL_MS TTL (one in four
 * a native counter). A refresher process re-arms them all, pass after pass,
 * each key by one of four writes in turn: pc_expire, an identical pc_set
 * (the versionless TTL-only refresh), pc_add of 0 with a TTL on a counter,
 * and a pc_set_counter / different-value pc_set (a new record). A
 * maintainer inserts bursts of 20 ms keys into the same table (their
 * buckets' hints pass all the time, so the sweep locks the refreshed keys'
 * buckets and reads their deadlines) and calls pc_maintain(PC_MAINT_ALL):
 * splits, drains and a sweep every call. It also reads its own bursts back
 * 50 ms after their TTL: an expired key must never be returned. The parent
 * reads every refreshed key; one re-armed less than SWEEP_FRESH_MS ago has
 * a deadline at least SWEEP_TTL_MS - SWEEP_FRESH_MS ahead, so the sweep
 * must not have taken it. A stalled refresher only makes the parent check
 * less. */
static size_t sweep_key(char *k, uint32_t i)
{
    return (size_t)sprintf(k, "ttl%" PRIu32, i);
}

static void sweep_refresher(pc_coll *coll, struct shared *sh)
{
    static char cur[SWEEP_KEYS]; /* a string key's stored value: 'a' or 'b' */
    memset(cur, 'a', sizeof cur);
    char k[32];
    for (unsigned pass = 0; !atomic_load(&sh->race_stop); pass++) {
        int64_t t = now_ms();
        for (uint32_t i = 0; i < SWEEP_KEYS; i++) {
            size_t kl = sweep_key(k, i);
            int rc, ctr = i % 4 == 3;
            switch ((i + pass) % 4) {
            case 0: /* a refresher stalled past the TTL finds it gone: set it again */
                rc = pc_expire(coll, k, kl, SWEEP_TTL_MS);
                if (rc == PC_ENOTFOUND)
                    rc = ctr ? pc_set_counter(coll, k, kl, 0, SWEEP_TTL_MS)
                             : pc_set(coll, k, kl, &cur[i], 1, SWEEP_TTL_MS, 0);
                break;
            case 1: /* the same value: the TTL-only refresh (a counter: pc_add 0) */
                rc = ctr ? pc_add(coll, k, kl, 0, SWEEP_TTL_MS, NULL)
                         : pc_set(coll, k, kl, &cur[i], 1, SWEEP_TTL_MS, 0);
                break;
            default: /* a new record */
                cur[i] = cur[i] == 'a' ? 'b' : 'a';
                rc = ctr ? pc_set_counter(coll, k, kl, (int64_t)pass, SWEEP_TTL_MS)
                         : pc_set(coll, k, kl, &cur[i], 1, SWEEP_TTL_MS, 0);
                break;
            }
            if (rc != 0) {
                report("sweep", "re-arm %s: %s", k, pc_strerror(rc));
                _exit(3);
            }
        }
        atomic_store(&sh->sweep_pass_ms, t);
    }
    _exit(0);
}

static void sweep_maintainer(pc_cache *c, pc_coll *coll, struct shared *sh)
{
    enum { RING = 256 };
    static struct {
        uint64_t seq0;
        int64_t t;
    } ring[RING];
    char k[32];
    uint64_t seq = 0, stale = 0;
    for (unsigned n = 0; !atomic_load(&sh->race_stop); n++) {
        ring[n % RING].seq0 = seq;
        ring[n % RING].t = now_ms();
        for (int j = 0; j < 32; j++, seq++) {
            size_t kl = (size_t)sprintf(k, "short%" PRIu64, seq);
            if (pc_set(coll, k, kl, "x", 1, 20, 0) != 0)
                _exit(3);
        }
        unsigned old = (n + 1) % RING; /* the oldest burst remembered */
        if (n >= RING && now_ms() - ring[old].t >= 70)
            for (int j = 0; j < 32; j += 4) {
                size_t kl = (size_t)sprintf(k, "short%" PRIu64, ring[old].seq0 + (uint64_t)j);
                if (pc_probe(coll, k, kl, NULL) != PC_ENOTFOUND && stale++ == 0)
                    report("sweep", "%s read 50 ms past its TTL", k);
            }
        pc_maint_report r;
        if (pc_maintain(c, PC_MAINT_ALL, &r) != 0)
            _exit(4);
        atomic_fetch_add(&sh->sweep_reaped, r.reaped);
        atomic_fetch_add(&sh->sweep_probed, r.buckets_probed);
        atomic_fetch_add(&sh->sweep_splits, r.splits);
        usleep(1000);
    }
    atomic_fetch_add(&sh->sweep_stale, stale);
    _exit(0);
}

/* Returns the refreshed keys the sweep took while fresh; -1 on a setup or
 * child failure. *checked counts the reads that made a claim. */
static int64_t sweep_race(struct shared *sh, int64_t budget_ms, uint64_t *checked)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "sweep=4";
    cfg.mem_mb = 32;
    cfg.growth_budget = 2;
    cfg.log.fn = log_cb;
    cfg.log.level = PC_LOG_WARN;
    pc_cache *c = NULL;
    pc_coll *coll = NULL;
    char k[32], buf[64];
    int ok = pc_cache_create(&cfg, &c) == 0 && pc_coll_find(c, "sweep", 5, &coll) == 0;
    for (uint32_t i = 0; ok && i < SWEEP_KEYS; i++) {
        size_t kl = sweep_key(k, i);
        ok = (i % 4 == 3 ? pc_set_counter(coll, k, kl, 0, SWEEP_TTL_MS)
                         : pc_set(coll, k, kl, "a", 1, SWEEP_TTL_MS, 0)) == 0;
    }
    atomic_store(&sh->race_stop, 0);
    atomic_store(&sh->sweep_pass_ms, now_ms());
    fflush(NULL);
    pid_t rf = ok ? fork() : -1;
    if (rf == 0)
        sweep_refresher(coll, sh);
    pid_t mt = rf > 0 ? fork() : -1;
    if (mt == 0)
        sweep_maintainer(c, coll, sh);
    int64_t lost = 0;
    for (int64_t end = now_ms() + budget_ms; mt > 0 && now_ms() < end;)
        for (uint32_t i = 0; i < SWEEP_KEYS; i++) {
            int64_t pass = atomic_load(&sh->sweep_pass_ms);
            size_t kl = sweep_key(k, i), vlen, needed;
            int rc = pc_get_buf(coll, k, kl, buf, sizeof buf, &vlen, &needed, NULL);
            if (now_ms() - pass >= SWEEP_FRESH_MS)
                continue; /* the refresher stalled: no claim */
            (*checked)++;
            if (rc != 0 && lost++ == 0)
                report("sweep", "%s re-armed < %d ms ago: %s", k, SWEEP_FRESH_MS, pc_strerror(rc));
        }
    atomic_store(&sh->race_stop, 1);
    int st = 0;
    ok = ok && rf > 0 && waitpid(rf, &st, 0) == rf && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    ok = mt > 0 && waitpid(mt, &st, 0) == mt && WIFEXITED(st) && WEXITSTATUS(st) == 0 && ok;
    /* everything lapses now: the sweep must take it all, and the table
     * must be whole */
    for (uint32_t i = 0; ok && i < SWEEP_KEYS; i++)
        ok = pc_expire(coll, k, sweep_key(k, i), 1) == 0;
    usleep(30000);
    pc_maint_report r;
    pc_coll_stats st2;
    ok = ok && pc_maintain(c, PC_MAINT_ALL, &r) == 0 && pc_coll_stats_get(coll, &st2) == 0 &&
         st2.entries == 0 && pc__test_verify(c, buf, sizeof buf) == 0;
    pc_cache_destroy(c);
    return ok ? lost : -1;
}

/* ---- the parent ------------------------------------------------------------ */
static int passed, failed;

static void check(int ok, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(int ok, const char *what, const char *fmt, ...)
{
    char detail[256] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("%s %-34s %s\n", ok ? "PASS" : "FAIL", what, detail);
    ok ? passed++ : failed++;
}

static pid_t kids[NWORKERS + 1];
static int kid_status[NWORKERS + 1], kid_done[NWORKERS + 1];

/* Reaps whatever has exited; returns how many children are still running. */
static int reap(int block_ms)
{
    int64_t until = now_ms() + block_ms;
    for (;;) {
        int running = 0;
        for (int i = 0; i <= NWORKERS; i++) {
            if (kid_done[i])
                continue;
            pid_t p = waitpid(kids[i], &kid_status[i], WNOHANG);
            if (p == kids[i])
                kid_done[i] = 1;
            else
                running++;
        }
        if (running == 0 || now_ms() >= until)
            return running;
        usleep(10000);
    }
}

static int verify(pc_cache *c, const char *when)
{
    char msg[256] = "";
    int rc = pc__test_verify(c, msg, sizeof msg);
    check(rc == 0, when, "%s", rc == 0 ? "pc__test_verify 0" : msg);
    return rc;
}

/* The run is wedged (a lock nobody releases, a corrupt chain): say so and
 * end with the summary line, counting the wedge as one more failure. */
static void on_alarm(int sig)
{
    (void)sig;
    char line[96];
    int n = snprintf(line, sizeof line, "FAIL watchdog: the run is wedged\n%d passed, %d failed\n",
                     passed, failed + 1);
    if (n > 0 && write(1, line, (size_t)n) < 0) {
    }
    _exit(3);
}

/* Before the fork: the immortal keys, and - like a host that loads and
 * prunes before it forks - cells left on the parent's private free stacks,
 * which each child must drop, never use or donate. */
static int setup_data(pc_coll *soak, unsigned char *buf)
{
    char k[64];
    int ok = 1;
    for (uint32_t i = 0; ok && i < NIMMORTAL; i++) {
        memset(buf, (int)imm_byte(-1, i), imm_len(-1, i));
        ok = pc_set(soak, k, key_imm(k, -1, i), buf, imm_len(-1, i), 0, 0) == 0;
    }
    for (uint32_t i = 0; ok && i < 2 * KEYS_START; i++) {
        memset(buf, 'w', soak_len(i, 'w'));
        ok = pc_set(soak, k, key_soak(k, i), buf, soak_len(i, 'w'), 0, 0) == 0;
    }
    for (uint32_t i = 0; ok && i < 2 * KEYS_START; i++)
        ok = pc_remove(soak, k, key_soak(k, i)) == 0;
    return ok;
}

/* Pauses everyone, verifies, resumes. Returns 0, or -1 if someone never
 * reached the pause (wedged or dead). */
static int checkpoint(pc_cache *c, struct shared *sh)
{
    char when[64];
    atomic_store(&sh->phase, PH_PAUSE);
    int64_t limit = now_ms() + 10000;
    while (atomic_load(&sh->paused) < NWORKERS + 1 && now_ms() < limit && reap(0) == NWORKERS + 1)
        usleep(1000);
    snprintf(when, sizeof when, "checkpoint at %" PRId64 " s: verify",
             (now_ms() - sh->t0_ms) / 1000);
    int all = atomic_load(&sh->paused) == NWORKERS + 1;
    if (all)
        verify(c, when);
    else
        check(0, when, "only %d of %d processes reached the pause (wedged?)",
              atomic_load(&sh->paused), NWORKERS + 1);
    atomic_store(&sh->phase, PH_RUN);
    return all ? 0 : -1;
}

/* Forks the workers and the maintainer, supervises them for the run and
 * reaps them. Returns 1 when every child ran to the end and exited 0. */
static int run_children(pc_cache *c, struct shared *sh, unsigned char *buf)
{
    int early = 0;
    fflush(NULL);
    for (int i = 0; i <= NWORKERS; i++) {
        if ((kids[i] = fork()) == 0) {
            signal(SIGALRM, SIG_DFL);
            alarm(0);
            int code = i < NWORKERS ? worker_main(c, sh, i) : maint_main(c, sh);
            pc_cache_destroy(c);
            free(buf);
            exit(code);
        }
        if (kids[i] < 0) {
            perror("fork");
            kid_done[i] = early = 1;
        }
    }
    int64_t next_cp = sh->t0_ms + CHECKPOINT_MS;
    while (!early && now_ms() - sh->t0_ms < sh->run_ms) {
        early = reap(0) < NWORKERS + 1; /* somebody died */
        if (!early && now_ms() >= next_cp && now_ms() - sh->t0_ms < sh->run_ms - 2000) {
            early = checkpoint(c, sh) != 0;
            next_cp = now_ms() + CHECKPOINT_MS;
        }
        usleep(50000);
    }
    atomic_store(&sh->phase, PH_STOP);
    int still = reap(10000), clean = !early && !still;
    for (int i = 0; i <= NWORKERS; i++) {
        if (!kid_done[i]) {
            fprintf(stderr, "child %d (pid %d) did not stop within 10 s: killed\n", i,
                    (int)kids[i]);
            kill(kids[i], SIGKILL);
            waitpid(kids[i], &kid_status[i], 0);
        }
        int st = kid_status[i];
        if (kids[i] > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            clean = 0;
            fprintf(stderr, "child %d (pid %d): %s %d\n", i, (int)kids[i],
                    WIFSIGNALED(st) ? "killed by signal" : "exit status",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
    }
    return clean;
}

/* Sums the counters against the adds the workers report; returns how many
 * counters are off and the sum in *sum. */
static uint64_t check_counters(pc_coll *soak, const struct shared *sh, uint64_t *sum)
{
    char k[32];
    uint64_t off = 0;
    *sum = 0;
    for (uint32_t i = 0; i < NCOUNTERS; i++) {
        int64_t v = 0, want = 0;
        for (int w = 0; w < NWORKERS; w++)
            want += (int64_t)sh->w[w].ctr_adds[i];
        int rc = pc_get_counter(soak, k, key_ctr(k, i), &v);
        v = rc == PC_ENOTFOUND ? 0 : v;
        *sum += (uint64_t)v;
        if (v != want && off++ < MAX_REPORTS)
            fprintf(stderr, "counter %s = %" PRId64 ", workers added %" PRId64 " (%s)\n", k, v,
                    want, pc_strerror(rc));
    }
    return off;
}

/* After the run: the parent reads everything back from a handle that sat
 * out the run, lets the churn lapse and be reaped, and checks it all. */
static void final_checks(pc_cache *c, pc_coll *soak, pc_coll *churn, struct shared *sh,
                         int64_t t_stop, unsigned char *buf)
{
    struct wstats t = {0};
    for (int w = 0; w < NWORKERS; w++) {
        const uint64_t *src = (const uint64_t *)&sh->w[w];
        uint64_t *dst = (uint64_t *)&t;
        for (size_t f = 0; f < sizeof t / sizeof(uint64_t); f++)
            dst[f] += src[f];
    }
    const struct mstats *m = &sh->m;
    uint64_t grown = 0, final_soak = 0, sum = 0, final_reaped = 0;
    for (uint32_t i = 0; i < NIMMORTAL; i++)
        check_immortal(soak, -1, i, buf, &t, "final");
    for (int w = 0; w < NWORKERS; w++)
        for (uint32_t n = 0; n < atomic_load(&sh->grown[w]); n++, grown++)
            check_immortal(soak, w, n, buf, &t, "final");
    for (uint32_t i = 0; i < KEYS_END; i++)
        final_soak += check_soak(soak, i, buf, &t, "final") == 1;
    uint64_t ctr_off = check_counters(soak, sh, &sum);

    /* Everything in churn has a 2 s TTL: once it lapsed, sweeps reap it all. */
    int64_t wait = t_stop + CHURN_TTL_MS + 100 - now_ms();
    if (wait > 0)
        usleep((useconds_t)wait * 1000);
    pc_maint_report r;
    for (int i = 0; i < 20 && pc_maintain(c, PC_MAINT_ALL, &r) == 0; i++) {
        final_reaped += r.reaped;
        if (r.reaped == 0 && r.drained == 0 && r.splits == 0)
            break;
    }
    pc_coll_stats cs, cc;
    pc_coll_stats_get(soak, &cs);
    pc_coll_stats_get(churn, &cc);

    check(t.torn == 0, "no torn read", "%" PRIu64 " torn", t.torn);
    check(ctr_off == 0 && sum == t.adds && t.adds > 0, "no lost update: counters sum == adds",
          "sum %" PRIu64 ", adds %" PRIu64 ", %" PRIu64 " counters off", sum, t.adds, ctr_off);
    check(t.counter_regress == 0, "counters never went backwards", "%" PRIu64, t.counter_regress);
    check(t.lost_immortal == 0, "no lost key: immortal keys",
          "%" PRIu64 " misses (%u stored before the fork, %" PRIu64 " added during the run)",
          t.lost_immortal, NIMMORTAL, grown);
    check(t.lost_churn == 0 && t.resurrected == 0, "no lost key: young churn keys",
          "%" PRIu64 " lost, %" PRIu64 " removed-but-read, %" PRIu64 " checked", t.lost_churn,
          t.resurrected, t.churn_checked);
    check(t.stale_churn == 0 && t.stale_checked > 0, "expired churn keys read as absent",
          "%" PRIu64 " stale reads of %" PRIu64, t.stale_churn, t.stale_checked);
    check(t.unexpected == 0 && t.elocked == 0 && m->errors == 0, "no unexpected error",
          "%" PRIu64 " unexpected, %" PRIu64 " PC_ELOCKED, %" PRIu64 " maintain errors",
          t.unexpected, t.elocked, m->errors);
    check(m->late_splits > 0 && cc.buckets > 16, "growth ran throughout, in both",
          "%" PRIu64 " splits, %" PRIu64 " in the second half; churn at %" PRIu64 " buckets",
          m->splits, m->late_splits, cc.buckets);
    check(m->max_ovf_churn > 0 && m->reaped > 0, "overflow + sweep shape exercised",
          "max overflow churn %" PRIu64 " soak %" PRIu64 ", reaped %" PRIu64, m->max_ovf_churn,
          m->max_ovf_soak, m->reaped);
    check(cc.entries == 0 && cc.overflow == 0, "expired churn fully reclaimed",
          "entries %" PRIu64 ", overflow %" PRIu64 ", final sweep reaped %" PRIu64, cc.entries,
          cc.overflow, final_reaped);
    verify(c, "final: verify");

    pc_mem_stats ms;
    pc_mem_stats_get(c, &ms);
    printf("ops %" PRIu64 " (gets %" PRIu64 " hits %" PRIu64 " sets %" PRIu64 " removes %" PRIu64
           " adds %" PRIu64 " churn sets %" PRIu64 ") in %.1f s, %" PRIu64 " nomem\n",
           t.ops, t.gets, t.hits, t.sets, t.removes, t.adds, t.churn_sets,
           (double)sh->run_ms / 1000.0, t.nomem);
    printf("maintenance: %" PRIu64 " calls, %" PRIu64 " sweeps, %" PRIu64 " splits, %" PRIu64
           " drained, %" PRIu64 " reaped, %" PRIu64 " busy\n",
           m->grow_calls, m->sweep_calls, m->splits, m->drained, m->reaped, m->busy);
    printf("soak: %" PRIu64 " entries (%" PRIu64 " read back), %" PRIu64 " buckets, %" PRIu64
           " seqlock retries, %" PRIu64 " lock fallbacks; churn: %" PRIu64 " buckets, %" PRIu64
           " expired\n",
           cs.entries, final_soak, cs.buckets, cs.seqlock_retries, cs.lock_fallbacks, cc.buckets,
           cc.expired);
    printf("memory: tier %s, %" PRIu64 " chunks, %zu of %zu plain bytes free\n",
           pc_tier_name(ms.tier), ms.chunks, ms.plain_free, ms.plain_bytes);
}

int main(void)
{
    const char *env = getenv("PCACHE_SOAK_SECONDS");
    long secs = env ? strtol(env, NULL, 10) : 30;
    secs = secs < 12 ? 12 : secs; /* the run must outlast a churn key's TTL + 1 s */
    signal(SIGALRM, on_alarm);
    alarm((unsigned)(secs * 3 + 60));
    struct shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned char *buf = malloc(VBUF);
    if (sh == MAP_FAILED || buf == NULL) {
        printf("out of memory\n0 passed, 1 failed\n");
        return 1;
    }
    memset(sh, 0, sizeof *sh);

    uint64_t race_rounds = 0;
    int rc = drain_race(sh, RACE_MS, &race_rounds);
    check(rc == 0 && sh->race_miss == 0 && race_rounds > 0, "drain race: no key lost in transit",
          "%" PRIu64 " misses in %" PRIu64 " rounds, %" PRIu64 " entries drained",
          (uint64_t)sh->race_miss, race_rounds, (uint64_t)sh->race_drained);
    uint64_t sweep_checked = 0;
    int64_t sweep_lost = sweep_race(sh, SWEEP_RACE_MS, &sweep_checked);
    check(sweep_lost == 0 && sh->sweep_stale == 0 && sweep_checked > 0 && sh->sweep_reaped > 0,
          "sweep race: no re-armed key reaped",
          "%" PRId64 " lost of %" PRIu64 " checked reads, %" PRIu64 " stale; %" PRIu64
          " reaped, %" PRIu64 " buckets probed, %" PRIu64 " splits",
          sweep_lost, sweep_checked, (uint64_t)sh->sweep_stale, (uint64_t)sh->sweep_reaped,
          (uint64_t)sh->sweep_probed, (uint64_t)sh->sweep_splits);

    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "soak=4;churn=4";
    cfg.mem_mb = 256;
    cfg.growth_budget = 256; /* per call, every 5 ms: splits spread over the run */
    cfg.log.fn = log_cb;
    cfg.log.level = PC_LOG_WARN;
    pc_cache *c = NULL;
    pc_coll *soak = NULL, *churn = NULL;
    rc = pc_cache_create(&cfg, &c);
    int ok = rc == 0 && pc_coll_find(c, "soak", 4, &soak) == 0 &&
             pc_coll_find(c, "churn", 5, &churn) == 0 && setup_data(soak, buf);
    check(ok, "setup: cache and data before the fork", "%s; %u immortal keys, a private hoard",
          pc_strerror(rc), NIMMORTAL);
    if (ok) {
        /* Total ~secs: the two races, the run, ~3 s of setup, reaping, checks. */
        sh->t0_ms = now_ms();
        sh->run_ms = (int64_t)secs * 1000 - 3000 - RACE_MS - SWEEP_RACE_MS;
        int clean = run_children(c, sh, buf);
        int64_t t_stop = now_ms();
        check(clean, "no crash: every child exited 0", "%d workers + maintenance", NWORKERS);
        final_checks(c, soak, churn, sh, t_stop, buf);
    }
    free(buf);
    munmap(sh, sizeof *sh);
    pc_cache_destroy(c);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
