/*
 * cdbp_pull.c - cross-node pull-on-miss (read repair) over the clusterer's
 * BIN links (README "Cross-node pull").
 *
 * Nodes behind a load balancer each hold their own cache, so a key written
 * on one node is a miss on the others. For a collection named in
 * replicate_collections, a miss can ask the cluster: the asker takes a slot
 * of a small pool in shared memory, sends (slot, tag, collection, key) to
 * every reachable peer of sync_cluster_id, and waits at most
 * pull_timeout_ms on a futex in the slot; a peer holding the key answers
 * with the value and its remaining TTL, the others with "not here". The
 * first positive answer, or the last negative one, ends the wait. A
 * positive answer is stored locally with its TTL, so the next read is a
 * local hit; a key no peer holds is remembered for pull_negative_ms (the
 * negative cache), so a key that exists nowhere does not ask the cluster
 * on every read.
 *
 * Who runs what: the asker is a SIP worker (pull_on_miss=1, cache_fetch)
 * or the MI process (perf_pull); the answers arrive in whichever process
 * clusterer delivers in (a BIN reader), which writes them into the slot
 * under the pool lock and wakes the asker. A slot carries a tag that
 * changes each time it is taken, so an answer for an earlier use of the
 * slot is recognised and dropped.
 *
 * Slots never leak: a waiter that times out leaves its slot "orphaned"
 * rather than free, so a late positive answer is still stored (pulls_late
 * _stored; the key is converging, not re-asked forever) and the slot is
 * freed by that answer, by a later negative one, or by the reaper in the
 * maintenance process once deadline + PULL_LINGER_MS passed (which also
 * frees the slot of an asker that died while waiting). With the pool full,
 * a pull is not made (pull_no_slot) and the read is a plain miss.
 *
 * Nothing here runs on a hit, and a miss in a collection that does not
 * replicate costs one test of a process-local bit.
 */
#include <dprint.h>
#include <locking.h>
#include <mem/mem.h>
#include <mem/shm_mem.h>
#include <modules/clusterer/api.h>
#include <statistics.h>
#include <ut.h>

#include "cdbp.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The capability and its packets (BIN version PULL_BIN_VERSION; the README
 * has the table):
 *   ASK      int slot, int tag, str collection, str key
 *   ANSWER   int slot, int tag, int status, str ttl_ms (decimal, -1 = none),
 *            str value (empty unless status is PULL_FOUND)
 *   PROBE    int slot, int tag, str collection
 *   PROBED   int slot, int tag, int replicates (1 when the peer replicates
 *            the collection)
 * followed by the clusterer's own trailer. */
#define PULL_CAP "cachedb-perf-pull"
#define PULL_BIN_VERSION 1
enum { PULL_ASK = 1, PULL_ANSWER = 2, PULL_PROBE = 3, PULL_PROBED = 4 };
enum { PULL_NOT_HERE = 0, PULL_FOUND = 1, PULL_TOO_BIG = 2 };

#define PULL_LINGER_MS 1000 /* an orphan waits this long for a late answer */
#define PULL_NEG_SLOTS 1024 /* the negative cache: direct-mapped entries */
#define PULL_MAX_PEERS 64   /* probe replies remembered per slot */

/* slot states */
enum { SLOT_FREE = 0, SLOT_WAIT = 1, SLOT_DONE = 2, SLOT_ORPHAN = 3 };

struct pull_slot {
    _Atomic uint32_t state; /* the futex word */
    uint32_t tag;
    unsigned coll;
    int probe;        /* a probe: answers are counted, not stored */
    int64_t deadline; /* CLOCK_MONOTONIC ms */
    unsigned asked, answered, negatives;
    int status; /* the answer: PULL_FOUND / PULL_TOO_BIG / PULL_NOT_HERE */
    int src_node;
    int64_t ttl_ms;
    unsigned klen, vlen;
    int probed[PULL_MAX_PEERS]; /* probe: node ids that replicate it */
    unsigned nprobed;
    /* then key[pull_max_key], value[pull_max_value] */
};

struct pull_neg {
    uint64_t hash;
    int64_t until; /* CLOCK_MONOTONIC ms */
};

/* Counters, in shared memory (the answers are counted where they arrive). */
struct pull_counters {
    _Atomic unsigned long requested, answered, served, timeouts, negative_hits, late_stored,
        late_dropped, send_failed, no_slot, reaped;
    _Atomic unsigned long pulled_in[PC_MAX_COLLECTIONS], served_out[PC_MAX_COLLECTIONS];
};

struct pull_shared {
    gen_lock_t lock; /* the slots' fields other than state, and the negative cache */
    uint32_t next_tag;
    struct pull_counters n;
    struct pull_neg neg[PULL_NEG_SLOTS];
};

static struct clusterer_binds pull_cl;
static int pull_ready;      /* the capability is registered */
static uint64_t pull_colls; /* bit i: collection i replicates */
static struct pull_shared *pull_sh;
static unsigned char *pull_slots; /* cdbp_pull_slots slots of pull_stride bytes */
static size_t pull_stride;
static str pull_cap = str_init(PULL_CAP);

static struct pull_slot *slot_at(unsigned i)
{
    return (struct pull_slot *)(void *)(pull_slots + (size_t)i * pull_stride);
}

static char *slot_key(struct pull_slot *s)
{
    return (char *)(s + 1);
}

static char *slot_val(struct pull_slot *s)
{
    return slot_key(s) + cdbp_pull_max_key;
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_ms(_Atomic uint32_t *w, uint32_t val, int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    syscall(SYS_futex, w, FUTEX_WAIT, val, &ts, NULL, 0);
}

#define COUNT(f) atomic_fetch_add_explicit(&pull_sh->n.f, 1, memory_order_relaxed)

/* ---- the negative cache (under the pool lock) ------------------------------ */
static uint64_t neg_hash(unsigned coll, const char *key, size_t klen)
{
    uint64_t h = 1469598103934665603ull ^ coll;
    for (size_t i = 0; i < klen; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    return h | 1; /* 0 marks an empty entry */
}

static int neg_hit(uint64_t h, int64_t now)
{
    struct pull_neg *e = &pull_sh->neg[h % PULL_NEG_SLOTS];
    return e->hash == h && e->until > now;
}

static void neg_put(uint64_t h, int64_t now)
{
    if (cdbp_pull_negative_ms <= 0)
        return;
    struct pull_neg *e = &pull_sh->neg[h % PULL_NEG_SLOTS];
    e->hash = h;
    e->until = now + cdbp_pull_negative_ms;
}

/* ---- slots ------------------------------------------------------------------ */
/* Takes a free slot (under the lock): returns its index or -1. */
static int slot_take(unsigned coll, int probe, int64_t now)
{
    for (unsigned i = 0; i < (unsigned)cdbp_pull_slots; i++) {
        struct pull_slot *s = slot_at(i);
        if (atomic_load(&s->state) != SLOT_FREE)
            continue;
        s->tag = ++pull_sh->next_tag;
        s->coll = coll;
        s->probe = probe;
        s->deadline = now + cdbp_pull_timeout_ms;
        s->asked = s->answered = s->negatives = 0;
        s->status = PULL_NOT_HERE;
        s->src_node = 0;
        s->ttl_ms = -1;
        s->klen = s->vlen = 0;
        s->nprobed = 0;
        atomic_store(&s->state, SLOT_WAIT);
        return (int)i;
    }
    return -1;
}

static void slot_free(struct pull_slot *s)
{
    atomic_store(&s->state, SLOT_FREE);
}

/* Frees the slots whose asker is gone: deadline + linger passed (the
 * maintenance process, every second). */
void cdbp_pull_reap(void)
{
    if (!pull_ready)
        return;
    int64_t now = pc_mono_ms();
    lock_get(&pull_sh->lock);
    for (unsigned i = 0; i < (unsigned)cdbp_pull_slots; i++) {
        struct pull_slot *s = slot_at(i);
        uint32_t st = atomic_load(&s->state);
        if (st != SLOT_FREE && now > s->deadline + PULL_LINGER_MS) {
            slot_free(s);
            COUNT(reaped);
        }
    }
    lock_release(&pull_sh->lock);
}

/* ---- sending ------------------------------------------------------------------ */
/* How many peers are reachable now (the answers a pull can expect). */
static unsigned peers_up(void)
{
    return cdbp_cluster_nodes_up(&pull_cl, cdbp_sync_cluster_id);
}

static int send_packet(bin_packet_t *pkt, int dst)
{
    enum clusterer_send_ret r = dst > 0 ? pull_cl.send_to(pkt, cdbp_sync_cluster_id, dst)
                                        : pull_cl.send_all(pkt, cdbp_sync_cluster_id);
    if (r == CLUSTERER_SEND_SUCCESS)
        return 0;
    COUNT(send_failed);
    /* a send that fails means no peer was asked: say so where operators look */
    LM_WARN("cross-node pull: sending to %s of cluster %d failed (%s)\n",
            dst > 0 ? "a node" : "the nodes", cdbp_sync_cluster_id,
            r == CLUSTERER_CURR_DISABLED ? "this node is disabled"
            : r == CLUSTERER_DEST_DOWN   ? "destination down"
                                         : "error");
    return -1;
}

/* ---- the asking side ------------------------------------------------------------ */
/* Waits for slot i to be answered or time out; under no lock. */
static void slot_wait(struct pull_slot *s)
{
    for (;;) {
        uint32_t st = atomic_load(&s->state);
        int64_t left = s->deadline - pc_mono_ms();
        if (st != SLOT_WAIT || left <= 0)
            return;
        futex_wait_ms(&s->state, SLOT_WAIT, left);
    }
}

int cdbp_pull_replicates(pc_coll *coll)
{
    if (!pull_ready || coll == NULL)
        return 0;
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++)
        if (pc_coll_at(cdbp_cache, i) == coll)
            return (pull_colls >> i) & 1;
    return 0;
}

static unsigned coll_index(pc_coll *coll)
{
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++)
        if (pc_coll_at(cdbp_cache, i) == coll)
            return i;
    return 0;
}

/* Sends the ask for key, waited for in slot si, to every node. Returns 0
 * when it left. */
static int pull_send_ask(pc_coll *coll, const char *key, size_t klen, int si,
                         const struct pull_slot *s)
{
    bin_packet_t pkt;
    str cn = {(char *)pc_coll_name(coll), (int)strlen(pc_coll_name(coll))};
    str k = {(char *)key, (int)klen};
    int sent = -1;
    if (bin_init(&pkt, &pull_cap, PULL_ASK, PULL_BIN_VERSION, 0) == 0) {
        if (bin_push_int(&pkt, si) >= 0 && bin_push_int(&pkt, (int)s->tag) >= 0 &&
            bin_push_str(&pkt, &cn) >= 0 && bin_push_str(&pkt, &k) >= 0)
            sent = send_packet(&pkt, 0);
        bin_free_packet(&pkt);
    }
    return sent;
}

/* Waits for slot s's answers, then under the pool lock takes what they
 * said into res and frees the slot; a found value is copied into buf,
 * which res->value then owns. Returns 0 on a timeout, else 1. buf
 * (caller-owned, cdbp_pull_max_value + 1 bytes) is freed unless res took
 * it. */
static int pull_answer(struct pull_slot *s, uint64_t h, char *buf, cdbp_pull_result *res)
{
    uint32_t tag = s->tag;
    slot_wait(s);
    lock_get(&pull_sh->lock);
    uint32_t st = atomic_load(&s->state);
    int answered = 1;
    if (st == SLOT_FREE || s->tag != tag) {
        /* this process was stopped past deadline + linger and the reaper
         * freed the slot (another pull may own it now): not ours to read */
        answered = 0;
    } else if (st == SLOT_WAIT) { /* timed out: a late answer may still store it */
        atomic_store(&s->state, SLOT_ORPHAN);
        answered = 0;
    }
    if (!answered) {
        lock_release(&pull_sh->lock);
        pkg_free(buf);
        return 0;
    }
    res->status = s->status;
    res->src_node = s->src_node;
    res->ttl_ms = s->ttl_ms;
    if (s->status == PULL_FOUND) {
        res->vlen = s->vlen;
        memcpy(buf, slot_val(s), s->vlen);
        buf[s->vlen] = '\0';
        res->value = buf;
        buf = NULL;
    } else if (s->status == PULL_NOT_HERE) {
        neg_put(h, pc_mono_ms());
    }
    slot_free(s);
    lock_release(&pull_sh->lock);
    if (buf != NULL)
        pkg_free(buf);
    return 1;
}

/* The outcome of an answered pull; a value found is stored here, outside
 * the pool lock, so the next read is a local hit. */
static void pull_settle(pc_coll *coll, const char *key, size_t klen, unsigned ci,
                        cdbp_pull_result *res)
{
    if (res->status != PULL_FOUND) {
        res->outcome = res->status == PULL_TOO_BIG ? CDBP_PULL_HELD_TOO_BIG : CDBP_PULL_NOT_FOUND;
        return;
    }
    int rc = pc_set(coll, key, klen, res->value, res->vlen, res->ttl_ms > 0 ? res->ttl_ms : 0, 0);
    if (rc != 0)
        LM_WARN("cross-node pull: storing %.*s in %s: %s\n", (int)klen, key, pc_coll_name(coll),
                pc_store_strerror(rc));
    atomic_fetch_add_explicit(&pull_sh->n.pulled_in[ci], 1, memory_order_relaxed);
    res->outcome = CDBP_PULL_SERVED;
}

int cdbp_pull(pc_coll *coll, const char *key, size_t klen, cdbp_pull_result *res)
{
    memset(res, 0, sizeof *res);
    res->ttl_ms = -1;
    if (!cdbp_pull_replicates(coll)) {
        res->outcome = CDBP_PULL_OFF;
        return -1;
    }
    if (klen > (size_t)cdbp_pull_max_key) {
        res->outcome = CDBP_PULL_KEY_TOO_LONG;
        return -1;
    }
    unsigned ci = coll_index(coll);
    int64_t now = pc_mono_ms();
    uint64_t h = neg_hash(ci, key, klen);
    lock_get(&pull_sh->lock);
    if (neg_hit(h, now)) {
        lock_release(&pull_sh->lock);
        COUNT(negative_hits);
        res->outcome = CDBP_PULL_NEGATIVE;
        return 0;
    }
    int si = slot_take(ci, 0, now);
    lock_release(&pull_sh->lock);
    if (si < 0) {
        COUNT(no_slot);
        res->outcome = CDBP_PULL_NO_SLOT;
        return -1;
    }
    struct pull_slot *s = slot_at((unsigned)si);
    unsigned peers = peers_up();
    if (peers == 0) {
        slot_free(s);
        res->outcome = CDBP_PULL_NO_PEERS;
        return 0;
    }
    /* asked and the key are set before the packet leaves: an answer counts
     * against the one, a late answer stores under the other */
    s->asked = peers;
    s->klen = (unsigned)klen;
    memcpy(slot_key(s), key, klen);
    /* room for the answer, taken before the lock */
    char *buf = pkg_malloc((size_t)cdbp_pull_max_value + 1);
    if (buf == NULL) {
        slot_free(s);
        LM_ERR("cross-node pull: no pkg memory\n");
        res->outcome = CDBP_PULL_ERROR;
        return -1;
    }
    if (pull_send_ask(coll, key, klen, si, s) != 0) {
        slot_free(s);
        pkg_free(buf);
        res->outcome = CDBP_PULL_SEND_FAILED;
        return -1;
    }
    COUNT(requested);
    if (!pull_answer(s, h, buf, res)) {
        COUNT(timeouts);
        res->outcome = CDBP_PULL_TIMEOUT;
        return 0;
    }
    pull_settle(coll, key, klen, ci, res);
    return 0;
}

int cdbp_pull_probe(pc_coll *coll, int *ids, unsigned cap, unsigned *n, unsigned *asked)
{
    *n = *asked = 0;
    if (!pull_ready)
        return -1;
    unsigned ci = coll_index(coll);
    lock_get(&pull_sh->lock);
    int si = slot_take(ci, 1, pc_mono_ms());
    lock_release(&pull_sh->lock);
    if (si < 0) {
        COUNT(no_slot);
        return -2;
    }
    struct pull_slot *s = slot_at((unsigned)si);
    unsigned peers = peers_up();
    s->asked = peers;
    int sent = peers == 0 ? 0 : -1;
    bin_packet_t pkt;
    str cn = {(char *)pc_coll_name(coll), (int)strlen(pc_coll_name(coll))};
    if (peers > 0 && bin_init(&pkt, &pull_cap, PULL_PROBE, PULL_BIN_VERSION, 0) == 0) {
        if (bin_push_int(&pkt, si) >= 0 && bin_push_int(&pkt, (int)s->tag) >= 0 &&
            bin_push_str(&pkt, &cn) >= 0)
            sent = send_packet(&pkt, 0);
        bin_free_packet(&pkt);
    }
    uint32_t tag = s->tag;
    if (sent == 0 && peers > 0)
        slot_wait(s);
    lock_get(&pull_sh->lock);
    *asked = peers;
    if (atomic_load(&s->state) != SLOT_FREE && s->tag == tag) { /* not reaped meanwhile */
        for (unsigned i = 0; i < s->nprobed && i < cap; i++)
            ids[(*n)++] = s->probed[i];
        slot_free(s);
    }
    lock_release(&pull_sh->lock);
    return sent == 0 ? 0 : -1;
}

/* ---- the answering side (a BIN reader process) ----------------------------------- */
static pc_coll *coll_named(const str *name, unsigned *idx)
{
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++) {
        const char *n = pc_coll_name(pc_coll_at(cdbp_cache, i));
        if (strlen(n) == (size_t)name->len && memcmp(n, name->s, (size_t)name->len) == 0) {
            *idx = i;
            return pc_coll_at(cdbp_cache, i);
        }
    }
    return NULL;
}

static void answer_ask(bin_packet_t *in, int slot, int tag)
{
    str cn, key;
    if (bin_pop_str(in, &cn) < 0 || bin_pop_str(in, &key) < 0 || key.len < 0) {
        LM_WARN("cross-node pull: malformed ask from node %d, ignored\n", in->src_id);
        return;
    }
    unsigned ci = 0;
    pc_coll *coll = coll_named(&cn, &ci);
    int status = PULL_NOT_HERE;
    size_t vlen = 0, need = 0;
    pc_meta meta;
    char *val = NULL;
    /* only a replicated collection answers: a key means the same on every
     * node only where the operator said so */
    if (coll != NULL && ((pull_colls >> ci) & 1) && key.len <= cdbp_pull_max_key &&
        (val = pkg_malloc((size_t)cdbp_pull_max_value + 1)) != NULL) {
        int rc = pc_get_buf(coll, key.s, (size_t)key.len, val, (size_t)cdbp_pull_max_value, &vlen,
                            &need, &meta);
        if (rc == 0)
            status = PULL_FOUND;
        else if (rc == PC_ETOOSMALL)
            status = PULL_TOO_BIG; /* held, but over what a pull carries */
    }
    char ttl[24];
    str sttl = {ttl, snprintf(ttl, sizeof ttl, "%lld",
                              status == PULL_FOUND ? (long long)meta.ttl_ms : -1LL)};
    str sval = {val, status == PULL_FOUND ? (int)vlen : 0};
    bin_packet_t out;
    if (bin_init(&out, &pull_cap, PULL_ANSWER, PULL_BIN_VERSION, 0) == 0) {
        if (bin_push_int(&out, slot) >= 0 && bin_push_int(&out, tag) >= 0 &&
            bin_push_int(&out, status) >= 0 && bin_push_str(&out, &sttl) >= 0 &&
            bin_push_str(&out, &sval) >= 0 && send_packet(&out, in->src_id) == 0 &&
            status == PULL_FOUND) {
            COUNT(served);
            atomic_fetch_add_explicit(&pull_sh->n.served_out[ci], 1, memory_order_relaxed);
        }
        bin_free_packet(&out);
    }
    if (val != NULL)
        pkg_free(val);
}

/* An answer to this node's ask: into its slot, or, for an orphan, straight
 * into the cache. */
static void take_answer(bin_packet_t *in, int slot, int tag)
{
    int status;
    str sttl, val;
    if (bin_pop_int(in, &status) < 0 || bin_pop_str(in, &sttl) < 0 || bin_pop_str(in, &val) < 0 ||
        sttl.len <= 0 || sttl.len > 20 || val.len < 0 || val.len > cdbp_pull_max_value ||
        status < PULL_NOT_HERE || status > PULL_TOO_BIG) {
        LM_WARN("cross-node pull: malformed answer from node %d, ignored\n", in->src_id);
        return;
    }
    char tb[24];
    memcpy(tb, sttl.s, (size_t)sttl.len);
    tb[sttl.len] = '\0';
    long long ttl = strtoll(tb, NULL, 10);
    COUNT(answered);
    if (slot < 0 || slot >= cdbp_pull_slots) {
        COUNT(late_dropped);
        return;
    }
    struct pull_slot *s = slot_at((unsigned)slot);
    /* a late positive answer for an orphan is stored after the lock: copies */
    char kcopy[256], *late_val = NULL;
    unsigned late_klen = 0, late_coll = 0;
    lock_get(&pull_sh->lock);
    uint32_t st = atomic_load(&s->state);
    if ((st != SLOT_WAIT && st != SLOT_ORPHAN) || s->tag != (uint32_t)tag || s->probe) {
        lock_release(&pull_sh->lock);
        COUNT(late_dropped); /* an earlier use of the slot, or a probe's */
        return;
    }
    s->answered++;
    if (status == PULL_FOUND || status == PULL_TOO_BIG) {
        if (st == SLOT_ORPHAN) {
            if (status == PULL_FOUND && s->klen <= sizeof kcopy &&
                (late_val = pkg_malloc(val.len ? (size_t)val.len : 1)) != NULL) {
                memcpy(kcopy, slot_key(s), s->klen);
                memcpy(late_val, val.s, (size_t)val.len);
                late_klen = s->klen;
                late_coll = s->coll;
            }
            slot_free(s);
        } else if (s->status != PULL_FOUND) { /* the first positive answer wins */
            s->status = status;
            s->src_node = in->src_id;
            s->ttl_ms = ttl;
            s->vlen = (unsigned)val.len;
            memcpy(slot_val(s), val.s, (size_t)val.len);
            atomic_store(&s->state, SLOT_DONE);
            futex_wake(&s->state);
        }
    } else if (s->answered >= s->asked) { /* every peer said "not here" */
        if (st == SLOT_ORPHAN) {
            slot_free(s);
        } else {
            atomic_store(&s->state, SLOT_DONE);
            futex_wake(&s->state);
        }
    }
    lock_release(&pull_sh->lock);
    if (late_val != NULL) {
        pc_coll *coll = pc_coll_at(cdbp_cache, late_coll);
        int rc = pc_set(coll, kcopy, late_klen, late_val, (size_t)val.len, ttl > 0 ? ttl : 0, 0);
        if (rc == 0) {
            COUNT(late_stored);
            atomic_fetch_add_explicit(&pull_sh->n.pulled_in[late_coll], 1, memory_order_relaxed);
        }
        pkg_free(late_val);
    }
}

static void answer_probe(bin_packet_t *in, int slot, int tag)
{
    str cn;
    if (bin_pop_str(in, &cn) < 0) {
        LM_WARN("cross-node pull: malformed probe from node %d, ignored\n", in->src_id);
        return;
    }
    unsigned ci = 0;
    int rep = coll_named(&cn, &ci) != NULL && ((pull_colls >> ci) & 1);
    bin_packet_t out;
    if (bin_init(&out, &pull_cap, PULL_PROBED, PULL_BIN_VERSION, 0) == 0) {
        if (bin_push_int(&out, slot) >= 0 && bin_push_int(&out, tag) >= 0 &&
            bin_push_int(&out, rep) >= 0)
            (void)send_packet(&out, in->src_id);
        bin_free_packet(&out);
    }
}

static void take_probed(bin_packet_t *in, int slot, int tag)
{
    int rep;
    if (bin_pop_int(in, &rep) < 0 || slot < 0 || slot >= cdbp_pull_slots)
        return;
    struct pull_slot *s = slot_at((unsigned)slot);
    lock_get(&pull_sh->lock);
    if (atomic_load(&s->state) == SLOT_WAIT && s->tag == (uint32_t)tag && s->probe) {
        s->answered++;
        if (rep && s->nprobed < PULL_MAX_PEERS)
            s->probed[s->nprobed++] = in->src_id;
        if (s->answered >= s->asked) {
            atomic_store(&s->state, SLOT_DONE);
            futex_wake(&s->state);
        }
    }
    lock_release(&pull_sh->lock);
}

static void pull_recv(bin_packet_t *pkt)
{
    ensure_bin_version(pkt, PULL_BIN_VERSION);
    int slot, tag;
    if (bin_pop_int(pkt, &slot) < 0 || bin_pop_int(pkt, &tag) < 0) {
        LM_WARN("cross-node pull: malformed packet from node %d, ignored\n", pkt->src_id);
        return;
    }
    switch (pkt->type) {
    case PULL_ASK:
        answer_ask(pkt, slot, tag);
        break;
    case PULL_ANSWER:
        take_answer(pkt, slot, tag);
        break;
    case PULL_PROBE:
        answer_probe(pkt, slot, tag);
        break;
    case PULL_PROBED:
        take_probed(pkt, slot, tag);
        break;
    default:
        LM_WARN("cross-node pull: unknown packet type %d from node %d, ignored\n", pkt->type,
                pkt->src_id);
    }
}

static void pull_cl_event(enum clusterer_event ev, int node_id)
{
    if (ev == CLUSTER_NODE_UP || ev == CLUSTER_NODE_DOWN)
        LM_DBG("cross-node pull: node %d is %s\n", node_id, ev == CLUSTER_NODE_UP ? "up" : "down");
}

/* ---- statistics -------------------------------------------------------------------- */
#define PULL_STAT_FN(field)                                                                        \
    static unsigned long pull_stat_##field(void *ctx)                                              \
    {                                                                                              \
        (void)ctx;                                                                                 \
        return pull_sh ? atomic_load(&pull_sh->n.field) : 0;                                       \
    }
PULL_STAT_FN(requested)
PULL_STAT_FN(answered)
PULL_STAT_FN(served)
PULL_STAT_FN(timeouts)
PULL_STAT_FN(negative_hits)
PULL_STAT_FN(late_stored)
PULL_STAT_FN(late_dropped)
PULL_STAT_FN(send_failed)
PULL_STAT_FN(no_slot)

static unsigned long pull_stat_slots_in_use(void *ctx)
{
    (void)ctx;
    unsigned long n = 0;
    for (unsigned i = 0; pull_sh != NULL && i < (unsigned)cdbp_pull_slots; i++)
        n += atomic_load(&slot_at(i)->state) != SLOT_FREE;
    return n;
}

static unsigned long pull_stat_pulled_in(void *ctx)
{
    return pull_sh ? atomic_load(&pull_sh->n.pulled_in[(uintptr_t)ctx]) : 0;
}

static unsigned long pull_stat_served_out(void *ctx)
{
    return pull_sh ? atomic_load(&pull_sh->n.served_out[(uintptr_t)ctx]) : 0;
}

static int pull_register_stats(void)
{
    static const struct {
        const char *name;
        stat_function fn;
    } all[] = {{"pull_requested", pull_stat_requested},
               {"pull_answered", pull_stat_answered},
               {"pull_served", pull_stat_served},
               {"pull_timeouts", pull_stat_timeouts},
               {"pull_negative_hits", pull_stat_negative_hits},
               {"pull_late_stored", pull_stat_late_stored},
               {"pull_late_dropped", pull_stat_late_dropped},
               {"pull_send_failed", pull_stat_send_failed},
               {"pull_no_slot", pull_stat_no_slot},
               {"pull_slots_in_use", pull_stat_slots_in_use}};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++)
        if (register_stat2("cachedb_perf", (char *)all[i].name, (stat_var **)all[i].fn,
                           STAT_IS_FUNC | STAT_NO_RESET, NULL, 0) != 0)
            return -1;
    /* per collection: pulled_in_<collection>, served_out_<collection> */
    for (unsigned i = 0; i < pc_coll_count(cdbp_cache); i++) {
        if (!((pull_colls >> i) & 1))
            continue;
        for (int w = 0; w < 2; w++) {
            char name[96];
            snprintf(name, sizeof name, "%s_%s", w ? "served_out" : "pulled_in",
                     pc_coll_name(pc_coll_at(cdbp_cache, i)));
            char *shared = shm_malloc(strlen(name) + 1); /* the core keeps the pointer */
            if (shared == NULL)
                return -1;
            memcpy(shared, name, strlen(name) + 1);
            if (register_stat2("cachedb_perf", shared,
                               (stat_var **)(w ? pull_stat_served_out : pull_stat_pulled_in),
                               STAT_IS_FUNC | STAT_NO_RESET, (void *)(uintptr_t)i, 0) != 0)
                return -1;
        }
    }
    return 0;
}

/* ---- setup (mod_init) ---------------------------------------------------------------- */
int cdbp_pull_setup(void)
{
    if (cdbp_replicate_colls == NULL || cdbp_replicate_colls[0] == '\0') {
        if (cdbp_pull_on_miss)
            LM_WARN("pull_on_miss is set but replicate_collections is empty: nothing is "
                    "pulled\n");
        return 0;
    }
    if (cdbp_pull_timeout_ms <= 0 || cdbp_pull_timeout_ms > 10000 || cdbp_pull_negative_ms < 0 ||
        cdbp_pull_max_key <= 0 || cdbp_pull_max_key > 255 || cdbp_pull_max_value <= 0 ||
        cdbp_pull_max_value > 65536 || cdbp_pull_slots <= 0 || cdbp_pull_slots > 4096) {
        LM_ERR("cross-node pull: pull_timeout_ms must be 1..10000, pull_negative_ms >= 0, "
               "pull_max_key 1..255, pull_max_value 1..65536, pull_slots 1..4096\n");
        return -1;
    }
    /* the list: collection names separated by ',' or ';' */
    const char *p = cdbp_replicate_colls;
    while (*p != '\0') {
        while (*p == ',' || *p == ';' || *p == ' ')
            p++;
        const char *e = p;
        while (*e != '\0' && *e != ',' && *e != ';' && *e != ' ')
            e++;
        if (e > p) {
            str name = {(char *)p, (int)(e - p)};
            unsigned ci = 0;
            if (coll_named(&name, &ci) == NULL) {
                LM_ERR("replicate_collections names \"%.*s\", which is not declared in "
                       "cache_collections\n",
                       name.len, name.s);
                return -1;
            }
            pull_colls |= 1ull << ci;
        }
        p = e;
    }
    if (cdbp_sync_cluster_id == 0 || load_clusterer_api(&pull_cl) < 0) {
        LM_WARN("replicate_collections is set but %s: cross-node pull disabled, the cache "
                "serves node-local\n",
                cdbp_sync_cluster_id == 0 ? "sync_cluster_id is 0"
                                          : "the clusterer module is not loaded");
        pull_colls = 0;
        return 0;
    }
    pull_stride =
        (sizeof(struct pull_slot) + (size_t)cdbp_pull_max_key + (size_t)cdbp_pull_max_value + 63) &
        ~(size_t)63;
    pull_sh = shm_malloc(sizeof *pull_sh);
    pull_slots = shm_malloc(pull_stride * (size_t)cdbp_pull_slots);
    if (pull_sh == NULL || pull_slots == NULL) {
        LM_ERR("cross-node pull: no shared memory for %d slots\n", cdbp_pull_slots);
        return -1;
    }
    memset(pull_sh, 0, sizeof *pull_sh);
    memset(pull_slots, 0, pull_stride * (size_t)cdbp_pull_slots);
    if (lock_init(&pull_sh->lock) == NULL) {
        LM_ERR("cross-node pull: cannot initialise its lock\n");
        return -1;
    }
    if (pull_cl.register_capability(&pull_cap, pull_recv, pull_cl_event, cdbp_sync_cluster_id, 0,
                                    NODE_CMP_ANY) < 0) {
        LM_ERR("cannot register the clusterer capability %s in cluster %d\n", PULL_CAP,
               cdbp_sync_cluster_id);
        return -1;
    }
    if (pull_register_stats() != 0) {
        LM_ERR("cross-node pull: cannot register its statistics\n");
        return -1;
    }
    pull_ready = 1;
    LM_INFO("cross-node pull: capability %s in cluster %d, %d slots (keys <= %d B, values <= "
            "%d B), timeout %d ms, negative cache %d ms, on a miss: %s\n",
            PULL_CAP, cdbp_sync_cluster_id, cdbp_pull_slots, cdbp_pull_max_key, cdbp_pull_max_value,
            cdbp_pull_timeout_ms, cdbp_pull_negative_ms,
            cdbp_pull_on_miss ? "a SIP worker waits for the answer (pull_on_miss=1)"
                              : "nothing (pull_on_miss=0; perf_pull drives it)");
    return 0;
}

const char *cdbp_pull_outcome_name(int outcome)
{
    static const char *names[] = {"off",       "key-too-long", "negative-cache", "no-slot",
                                  "no-peers",  "send-failed",  "no-answer",      "served",
                                  "not-found", "held-too-big", "error"};
    return outcome >= 0 && outcome < (int)(sizeof names / sizeof names[0]) ? names[outcome] : "?";
}
