/*
 * bench_rload.h - a lean RESP load generator: one thread, epoll, C
 * connections each keeping P requests in flight (SET or GET of V-byte
 * values over K keys), latency per request from the send of its batch to
 * the arrival of its reply. It exists because redis-benchmark saturates
 * its own core first on a 2-core machine; this client needs a fraction of
 * that, so a ratio of two servers measured through it measures the servers.
 */
#ifndef BENCH_RLOAD_H
#define BENCH_RLOAD_H

#include <stdint.h>

enum { RLOAD_SET = 1, RLOAD_GET = 2, RLOAD_FILL = 3 };

typedef struct rload_opts {
    int port;
    int op;            /* RLOAD_SET, RLOAD_GET, or RLOAD_FILL (keys 0..keys-1 once, in order) */
    unsigned conns;    /* connections */
    unsigned pipeline; /* requests in flight per connection */
    unsigned value_size;
    uint64_t keys;  /* key space: "key:%010llu" */
    unsigned ttl_s; /* SET ... EX ttl_s when > 0 */
    double seconds; /* duration (ignored by FILL) */
} rload_opts;

typedef struct rload_result {
    uint64_t ops, errors, misses;
    double seconds, rate;
    double p50_us, p99_us, p999_us, max_us;
    double gen_cpu; /* set by the caller: the generator's CPU time / wall time */
    double srv_us;  /* set by the caller: the server's CPU us per request */
} rload_result;

/* Runs the load in the calling thread. Returns 0, or -1 when the server
 * cannot be reached or a connection fails (a message on stderr). */
int rload_run(const rload_opts *o, rload_result *r);

/* One command, one reply line back (for SAVE, DBSIZE, PING); returns the
 * first reply line in buf. -1 when unreachable. */
int rload_command(int port, const char *cmd, char *buf, unsigned cap, int timeout_ms);

#endif
