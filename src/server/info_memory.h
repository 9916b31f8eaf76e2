/*
 * info_memory.h - the arena's fields of INFO's memory section (issue 21):
 * one call that cmd_info.c makes, kept apart so the section's other fields
 * can change without touching these.
 */
#ifndef INFO_MEMORY_H
#define INFO_MEMORY_H

#include "pcache.h"

#include <stddef.h>

/* Writes "name:value\r\n" lines into buf (cap bytes, NUL-terminated):
 * used_memory's parts, the fragmentation ratio, allocations refused and one
 * pcache_class_<cell bytes> line per class in use. Returns the length
 * written, or the length it needs (>= cap) when buf is too small, as
 * snprintf does; 0 when the cache cannot be read. */
size_t info_memory_arena(pc_cache *c, char *buf, size_t cap);

#endif
