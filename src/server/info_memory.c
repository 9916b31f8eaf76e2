/*
 * info_memory.c - the arena's fields of INFO memory: how much of the carved
 * memory holds data, how much is free and in which size class, and which
 * classes were refused memory. Field list: docs/pcached.md (INFO).
 */
#include "info_memory.h"

#include <stdarg.h>
#include <stdio.h>

struct im_buf {
    char *p;
    size_t cap, len; /* len counts what was wanted, even past cap */
};

__attribute__((format(printf, 2, 3))) static void im_add(struct im_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->len < b->cap ? b->cap - b->len : 0;
    int n = vsnprintf(room > 0 ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len += (size_t)n;
}

size_t info_memory_arena(pc_cache *c, char *buf, size_t cap)
{
    pc_mem_stats m;
    pc_mem_class cl[96];
    unsigned n = 0;
    if (cap > 0)
        buf[0] = '\0';
    if (pc_mem_stats_get(c, &m) != 0 || pc_mem_classes(c, cl, 96, &n) != 0)
        return 0;
    struct im_buf b = {buf, cap, 0};
    uint64_t carved = m.used_cell_bytes + m.free_cell_bytes;
    /* carved cell bytes per byte of cells in use: 1.00 = nothing stranded */
    double frag = m.used_cell_bytes > 0 ? (double)carved / (double)m.used_cell_bytes : 1.0;
    im_add(&b,
           "pcache_used_cell_bytes:%llu\r\npcache_free_cell_bytes:%llu\r\n"
           "pcache_cell_fragmentation_ratio:%.2f\r\npcache_alloc_refused:%llu\r\n",
           (unsigned long long)m.used_cell_bytes, (unsigned long long)m.free_cell_bytes, frag,
           (unsigned long long)m.starved);
    for (unsigned i = 0; i < n; i++)
        im_add(&b, "pcache_class_%u:chunks=%llu,cells=%llu,free=%llu,starved=%llu\r\n",
               cl[i].cell_bytes, (unsigned long long)cl[i].chunks, (unsigned long long)cl[i].cells,
               (unsigned long long)cl[i].free_cells, (unsigned long long)cl[i].starved);
    return b.len;
}
