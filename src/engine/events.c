/*
 * events.c - event subscription and delivery, and the hit-rate note.
 *
 * The subscription mask is shared (any process may subscribe for all); the
 * handler is process-local, because a callback is code in one address
 * space. An event is delivered in the process that observes it. A raise
 * site first checks pc_event_wanted() - one relaxed load of the mask - and
 * builds the event only when someone listens. No raise site is on the
 * get/set hit path; none runs under a bucket lock.
 */
#include "pc_int.h"

#include <stdlib.h>

/* "synced" is the name reloaded was released under, when the sync of the
 * persistence layer was its one raiser; hosts show it (MI, logs, tests). */
const char *pc_event_name(int type)
{
    static const char *const names[PC_EV_COUNT] = {"expired",      "nomem",  "grown",
                                                   "mem_degraded", "synced", "evicted"};
    return type >= 0 && type < PC_EV_COUNT ? names[type] : "unknown";
}

int pc_event_handler(pc_cache *c, pc_event_fn fn, void *ctx)
{
    if (c == NULL)
        return PC_EINVAL;
    c->ev_fn = fn;
    c->ev_ctx = ctx;
    return 0;
}

int pc_event_subscribe(pc_cache *c, int type, int on)
{
    if (c == NULL || type < 0 || type >= PC_EV_COUNT)
        return PC_EINVAL;
    if (on)
        atomic_fetch_or(&c->hdr->ev_mask, 1u << type);
    else
        atomic_fetch_and(&c->hdr->ev_mask, ~(1u << type));
    return 0;
}

int pc_event_expired(pc_coll *coll, int on)
{
    if (coll == NULL)
        return PC_EINVAL;
    atomic_store(&coll->shm->expired_events, on ? 1u : 0u);
    return 0;
}

int pc_event_evicted(pc_coll *coll, int on)
{
    if (coll == NULL)
        return PC_EINVAL;
    atomic_store(&coll->shm->evicted_events, on ? 1u : 0u);
    return 0;
}

void pc_event_raise_slow(pc_cache *c, const pc_event *ev)
{
    if (c->ev_fn != NULL)
        c->ev_fn(c->ev_ctx, ev);
}

void pc_event_reloaded(pc_coll *coll, const char *source)
{
    if (coll == NULL || !pc_event_wanted(coll->c, PC_EV_RELOADED))
        return;
    pc_event ev = {.type = PC_EV_RELOADED,
                   .collection = coll->shm->name,
                   .source = source != NULL ? source : ""};
    pc_event_raise_slow(coll->c, &ev);
}

/* The note reads the measured value; it never asserts a verdict the
 * numbers do not support. In particular a collection that was never
 * written to cannot be "losing" state (a collection with no entries, no
 * stores and only misses must not be told its state is being lost). */
const char *pc_hit_rate_note(const pc_coll_stats *st, double *rate)
{
    uint64_t reads = st->hits + st->misses;
    double r = reads == 0 ? -1.0 : (double)st->hits / (double)reads;
    if (rate != NULL)
        *rate = r;
    if (reads == 0)
        return "no reads in this interval: nothing to judge yet";
    if (st->stores == 0 && st->hits == 0)
        return "nothing has been stored in this collection in this interval: the misses are "
               "lookups of keys never written here (check which collection the writers use)";
    if (r >= 0.95)
        return "healthy: nearly every read finds its entry";
    if (r >= 0.80)
        return "good: most reads find their entry";
    if (r >= 0.50)
        return "mixed: many reads miss - entries may expire before they are read again, or "
               "are read before they are written";
    return "low: most reads miss - cached state is being lost or is expiring before it is "
           "used (check TTLs, nomem and the sweep)";
}
