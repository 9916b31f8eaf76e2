/*
 * demo.c - a small live demonstration of the engine until pcached exists:
 * creates a cache, forks two workers that write and read for a few
 * seconds while the parent runs maintenance, then prints what it saw.
 */
#include "pcache.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void demo_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "[%d] %s\n", level, msg);
}

static void worker(pc_coll *coll, int id, int seconds)
{
    char key[32], val[64], buf[64];
    time_t end = time(NULL) + seconds;
    uint64_t ops = 0, hits = 0;
    unsigned x = (unsigned)id * 2654435761u + 1;
    while (time(NULL) < end) {
        for (int i = 0; i < 1000; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            int kl = snprintf(key, sizeof key, "key-%u", (x >> 8) % 100000);
            if (x % 20 == 0) {
                int vl = snprintf(val, sizeof val, "value of %s from worker %d", key, id);
                pc_set(coll, key, (size_t)kl, val, (size_t)vl, 30000, 0);
            } else {
                size_t vlen, need;
                hits += pc_get_buf(coll, key, (size_t)kl, buf, sizeof buf, &vlen, &need, NULL) == 0;
            }
            ops++;
        }
    }
    printf("worker %d: %" PRIu64 " ops, %" PRIu64 " hits\n", id, ops, hits);
    exit(0);
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 5;
    pc_config cfg;
    pc_config_init(&cfg);
    cfg.collections = "demo=10";
    cfg.mem_mb = 128;
    cfg.log = demo_log;
    pc_cache *c;
    int rc = pc_cache_create(&cfg, &c);
    if (rc != 0) {
        fprintf(stderr, "pc_cache_create: %s\n", pc_strerror(rc));
        return 1;
    }
    pc_coll *coll;
    pc_coll_find(c, "demo", 4, &coll);
    printf("pcache demo: 2 workers for %d s on collection 'demo' (starts at 1024 buckets)\n",
           seconds);
    fflush(stdout);
    for (int i = 0; i < 2; i++)
        if (fork() == 0)
            worker(coll, i + 1, seconds);
    for (int t = 0; t < seconds * 10; t++) {
        pc_maint_report r;
        pc_maintain(c, PC_MAINT_ALL, &r);
        usleep(100000);
    }
    while (wait(NULL) > 0)
        ;
    pc_coll_stats st;
    pc_coll_stats_get(coll, &st);
    pc_mem_stats m;
    pc_mem_stats_get(c, &m);
    printf("entries %" PRIu64 ", buckets %" PRIu64 ", overflow %" PRIu64 ", hits %" PRIu64
           ", misses %" PRIu64 ", stores %" PRIu64 ", seqlock retries %" PRIu64 "\n",
           st.entries, st.buckets, st.overflow, st.hits, st.misses, st.stores, st.seqlock_retries);
    printf("memory tier %d (%s), chunks %" PRIu64 ", %" PRIu64 " bytes in chunks\n", m.tier,
           pc_tier_name(m.tier), m.chunks, m.chunk_bytes);
    pc_cache_destroy(c);
    return 0;
}
