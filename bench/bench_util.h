/*
 * bench_util.h - helpers shared by every pcache-bench subcommand: the clock,
 * the PRNGs, medians, the precomputed key set, and a flat JSON writer.
 *
 * Nothing here knows about the engine or the anchors; a subcommand combines
 * these with bench_pool.h (forked workers) and its own systems under test.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- time ------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* Sleeps for ns nanoseconds (restarts on EINTR). */
void bench_sleep_ns(uint64_t ns);

/* ---- PRNG: xorshift64* for the op streams, splitmix64 for seeding ------ */

static inline uint64_t bench_xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A bijection on 64-bit integers (splitmix64's finaliser): distinct inputs
 * give distinct outputs, which is what makes the generated keys unique. */
static inline uint64_t bench_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* Maps a uniformly random 64-bit word onto [0, n) without a division
 * (Lemire's multiply-shift; bias is below 2^-32 for n < 2^32). */
static inline size_t bench_pick(uint64_t r, size_t n)
{
    return (size_t)(((r >> 32) * (uint64_t)n) >> 32);
}

/* ---- statistics -------------------------------------------------------- */

/* Median of v[0..n) (sorts v in place). n == 0 gives 0. */
double bench_median(double *v, size_t n);
/* The smallest and largest of v[0..n) (the spread of per-round ratios). */
void bench_minmax(const double *v, size_t n, double *lo, double *hi);

/* ---- the key set ------------------------------------------------------- */

/* n keys of klen bytes each, packed back to back with no terminator. Key i
 * is the lowercase hex of bench_mix64(i + salt), truncated or zero-padded
 * to klen: th_store-shaped thids (16 hex digits) when klen is 16. */
typedef struct bench_keys {
    char *buf; /* caller-owned: bench_keys_free() */
    size_t n;
    size_t klen;
} bench_keys;

int bench_keys_make(bench_keys *k, size_t n, size_t klen, uint64_t salt);
void bench_keys_free(bench_keys *k); /* accepts a zeroed struct */

static inline const char *bench_key(const bench_keys *k, size_t i)
{
    return k->buf + i * k->klen;
}

/* Fills val[0..vlen) with a deterministic pattern derived from tag. */
void bench_fill_value(char *val, size_t vlen, uint64_t tag);

/* ---- output ------------------------------------------------------------ */

/* A flat JSON object written to out: bench_json_begin, any number of
 * fields, bench_json_end. Keys are borrowed and must not need escaping. */
typedef struct bench_json {
    FILE *out;
    int fields;
} bench_json;

void bench_json_begin(bench_json *j, FILE *out);
void bench_json_num(bench_json *j, const char *key, double v);
void bench_json_int(bench_json *j, const char *key, long long v);
void bench_json_bool(bench_json *j, const char *key, int v);
void bench_json_str(bench_json *j, const char *key, const char *v);
void bench_json_end(bench_json *j);

/* Writes the current UTC time as "YYYY-MM-DDTHH:MM:SSZ" into buf. */
void bench_utc_now(char *buf, size_t len);

#endif
