/*
 * consumer.c - a program outside the project built against an installed
 * pcache (find_package or pkg-config): creates a cache, writes and reads a
 * key through libpcache.so, names a storage error through
 * libpcache_storage.so and prints the library's version.
 */
#include <pcache.h>
#include <pcache_store.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.mem_mb = 16;
    pc_cache *c = NULL;
    pc_coll *coll = NULL;
    char buf[16];
    size_t n = 0, needed = 0;
    int rc = pc_cache_create(&cfg, &c);
    if (rc == 0)
        rc = pc_coll_find(c, "default", 7, &coll);
    if (rc == 0)
        rc = pc_set(coll, "k", 1, "value", 5, 0, 0);
    if (rc == 0)
        rc = pc_get_buf(coll, "k", 1, buf, sizeof buf, &n, &needed, NULL);
    if (rc != 0 || n != 5 || memcmp(buf, "value", 5) != 0) {
        fprintf(stderr, "consumer: %s\n", pc_store_strerror(rc));
        pc_cache_destroy(c);
        return 1;
    }
    pc_cache_destroy(c);
    printf("pcache %s ok (%s)\n", pcache_version(), pc_store_strerror(PC_ENOTFOUND));
    return 0;
}
