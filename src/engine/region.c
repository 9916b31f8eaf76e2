/*
 * region.c - the shared region: one reservation made before fork, never
 * unmapped while the cache lives (I1), laid out as an optional huge-page
 * extent followed by a plain 4 KiB extent, carved by two bump pointers.
 *
 * The huge-page extent climbs a ladder detected by trying, never by kernel
 * version:
 *   1 hugetlb    MAP_HUGETLB; with vm.nr_overcommit_hugepages the pages are
 *                taken at fault time and nothing is held while the cache is
 *                small. Unswappable, so no mlock is needed.
 *   2 thp        a shared anonymous (shmem) mapping at a 2 MiB-aligned
 *                address - shmem THP needs the address and the shmem offset
 *                congruent mod 2 MiB, which an aligned MAP_FIXED inside a
 *                PROT_NONE reservation guarantees - plus MADV_HUGEPAGE.
 *   3 collapse   the same mapping pre-faulted and MADV_COLLAPSEd.
 *   4 4k         the same mapping, demand-faulted.
 * Success of 2 and 3 is read from the ShmemHugePages delta in /proc/meminfo:
 * a collapse does not PMD-map the caller, so smaps would lie.
 */
#include "pc_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PC_HUGE (2u * 1024u * 1024u)

static uint64_t pc_round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static long pc_meminfo_kb(const char *field)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
            v = strtol(line + fl + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

/* Maps the huge-page extent at addr and returns the tier achieved. */
static int pc_map_huge(pc_cache *c, void *addr, size_t len)
{
    void *p = mmap(addr, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB | MAP_FIXED, -1, 0);
    if (p == addr)
        return PC_TIER_HUGETLB;
    pc_log(c, PC_LOG_INFO,
           "pcache: hugetlb unavailable (%s); to get it: sysctl -w "
           "vm.nr_overcommit_hugepages=%zu",
           strerror(errno), len / PC_HUGE + 8);

    p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != addr)
        return -1;
    long before = pc_meminfo_kb("ShmemHugePages");
    if (madvise(addr, len, MADV_HUGEPAGE) == 0) {
        *(volatile char *)addr = 0; /* fault the first 2 MiB */
        long after = pc_meminfo_kb("ShmemHugePages");
        if (before >= 0 && after > before)
            return PC_TIER_THP;
    }
    pc_log(c, PC_LOG_INFO,
           "pcache: shmem THP not granted; to get it: echo advise > "
           "/sys/kernel/mm/transparent_hugepage/shmem_enabled");

    before = pc_meminfo_kb("ShmemHugePages");
    if (madvise(addr, len, MADV_POPULATE_WRITE) == 0 && madvise(addr, len, MADV_COLLAPSE) == 0) {
        long after = pc_meminfo_kb("ShmemHugePages");
        if (before >= 0 && after > before)
            return PC_TIER_COLLAPSE;
    }
    return PC_TIER_4K;
}

int pc_region_create(pc_cache *c, const pc_config *cfg, size_t meta_bytes)
{
    uint64_t huge = (uint64_t)cfg->hugepage_mb << 20;
    uint64_t plain = pc_round_up((uint64_t)cfg->mem_mb << 20, 4096);
    plain += pc_round_up(meta_bytes, 4096);
    uint64_t total = huge + plain;
    if (total > PC_MAX_REGION_BYTES || cfg->mem_mb == 0) {
        pc_log(c, PC_LOG_ERR,
               "pcache: region of %llu bytes (mem_mb + hugepage_mb + the tables) is outside "
               "(0, 32 GiB]: records are addressed by 32-bit offsets in 8-byte units",
               (unsigned long long)total);
        return PC_ECONFIG;
    }
    /* Reserve address space with room to align the start to 2 MiB. */
    size_t resv = (size_t)(total + PC_HUGE);
    void *r = mmap(NULL, resv, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        pc_log(c, PC_LOG_ERR, "pcache: cannot reserve %zu bytes: %s", resv, strerror(errno));
        return PC_ESYS;
    }
    unsigned char *base = (unsigned char *)pc_round_up((uintptr_t)r, PC_HUGE);
    int tier = PC_TIER_4K, pinned = 0;
    if (huge > 0) {
        tier = pc_map_huge(c, base, (size_t)huge);
        if (tier < 0) {
            pc_log(c, PC_LOG_ERR, "pcache: cannot map the huge-page extent: %s", strerror(errno));
            munmap(r, resv);
            return PC_ESYS;
        }
        if (tier != PC_TIER_HUGETLB && cfg->lock_memory) {
            pinned = mlock(base, (size_t)huge) == 0;
            if (!pinned)
                pc_log(c, PC_LOG_WARN,
                       "pcache: mlock of %llu bytes failed (%s): running "
                       "unpinned; raise LimitMEMLOCK",
                       (unsigned long long)huge, strerror(errno));
        } else if (tier == PC_TIER_HUGETLB) {
            pinned = 1; /* hugetlb pages are never swapped */
        }
    }
    void *p = mmap(base + huge, (size_t)plain, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p != base + huge) {
        pc_log(c, PC_LOG_ERR, "pcache: cannot map %llu bytes of shared memory: %s",
               (unsigned long long)plain, strerror(errno));
        munmap(r, resv);
        return PC_ESYS;
    }
    c->map_addr = r;
    c->map_len = resv;
    c->base = base;
    c->region_bytes = total;
    c->hdr = (struct pc_header_shm *)base;
    struct pc_header_shm *h = c->hdr;
    h->region_bytes = total;
    h->huge_end = huge;
    h->plain_end = total;
    h->tier = tier;
    h->pinned = pinned;
    /* The header occupies the first bytes of the region (offset 0, which
     * doubles as NULL for every later carve). */
    uint64_t hdr_bytes = pc_round_up(sizeof *h, 64);
    atomic_store(&h->bump_huge, huge > 0 ? hdr_bytes : 0);
    atomic_store(&h->bump_plain, huge > 0 ? huge : hdr_bytes);
    if (huge > 0 && tier != PC_TIER_HUGETLB)
        pc_log(c, PC_LOG_WARN,
               "pcache: huge pages requested (%zu MB) but the arena landed on "
               "tier %d (%s)",
               cfg->hugepage_mb, tier, pc_tier_name(tier));
    else
        pc_log(c, PC_LOG_INFO, "pcache: memory tier %d (%s), %llu bytes, pinned=%d", tier,
               pc_tier_name(tier), (unsigned long long)total, pinned);
    return 0;
}

void pc_region_destroy(pc_cache *c)
{
    if (c->map_addr != NULL)
        munmap(c->map_addr, c->map_len);
    c->map_addr = NULL;
}

/* Bump allocation with a CAS loop that never moves a bump pointer past its
 * extent's end, so free space (end - bump) can never go negative. */
static uint64_t pc_bump(_Atomic uint64_t *bump, uint64_t end, uint64_t bytes, uint64_t align)
{
    uint64_t cur = atomic_load_explicit(bump, memory_order_relaxed);
    for (;;) {
        uint64_t start = pc_round_up(cur, align);
        if (start > end || bytes > end - start)
            return UINT64_MAX;
        if (atomic_compare_exchange_weak_explicit(bump, &cur, start + bytes, memory_order_relaxed,
                                                  memory_order_relaxed))
            return start;
    }
}

void pc_region_populate(pc_cache *c, uint64_t off, uint64_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    static _Atomic int unsupported;
    if (atomic_load_explicit(&unsupported, memory_order_relaxed) || off < c->hdr->huge_end)
        return;
    const uint64_t pg = 4096;
    uint64_t lo = off & ~(pg - 1), hi = (off + bytes + pg - 1) & ~(pg - 1);
    if (hi > c->region_bytes)
        hi = c->region_bytes & ~(pg - 1);
    if (hi > lo && madvise(c->base + lo, hi - lo, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
        atomic_store_explicit(&unsupported, 1, memory_order_relaxed);
#else
    (void)c, (void)off, (void)bytes;
#endif
}

uint64_t pc_region_carve(pc_cache *c, uint64_t bytes, uint64_t align)
{
    PC_ASSERT(c, I5, pc_dbg_bucket_locks + pc_dbg_chain_locks == 0);
    struct pc_header_shm *h = c->hdr;
    uint64_t off = UINT64_MAX;
    if (h->huge_end > 0)
        off = pc_bump(&h->bump_huge, h->huge_end, bytes, align);
    if (off == UINT64_MAX)
        off = pc_bump(&h->bump_plain, h->plain_end, bytes, align);
    return off == UINT64_MAX ? 0 : off;
}
