/*
 * bench_util.c - clock, medians, key generation and the JSON writer shared
 * by the pcache-bench subcommands. See bench_util.h.
 */
#include "bench_util.h"

#include "pcache_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bench_sleep_ns(uint64_t ns)
{
    struct timespec req = {.tv_sec = (time_t)(ns / 1000000000ull),
                           .tv_nsec = (long)(ns % 1000000000ull)};

    while (nanosleep(&req, &req) != 0 && errno == EINTR)
        ;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    if (n % 2)
        return v[n / 2];
    return (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

void bench_minmax(const double *v, size_t n, double *lo, double *hi)
{
    *lo = *hi = n ? v[0] : 0.0;
    for (size_t i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

int bench_keys_make(bench_keys *k, size_t n, size_t klen, uint64_t salt)
{
    memset(k, 0, sizeof *k);
    k->buf = malloc(n * klen);
    if (k->buf == NULL)
        return -1;
    k->n = n;
    k->klen = klen;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = bench_mix64(i + salt);
        char *p = k->buf + i * klen;

        for (size_t d = 0; d < klen; d++)
            p[d] = d < 16 ? pc_hex_digit((unsigned)(h >> (60 - 4 * d))) : '0';
    }
    return 0;
}

void bench_keys_free(bench_keys *k)
{
    free(k->buf);
    memset(k, 0, sizeof *k);
}

void bench_fill_value(char *val, size_t vlen, uint64_t tag)
{
    uint64_t s = bench_mix64(tag) | 1;

    for (size_t i = 0; i < vlen; i++)
        val[i] = (char)('a' + bench_xorshift(&s) % 26);
}

static void json_key(bench_json *j, const char *key)
{
    fprintf(j->out, "%s\n  \"%s\": ", j->fields ? "," : "", key);
    j->fields++;
}

void bench_json_begin(bench_json *j, FILE *out)
{
    j->out = out;
    j->fields = 0;
    fputc('{', out);
}

void bench_json_num(bench_json *j, const char *key, double v)
{
    json_key(j, key);
    if (v != v || v - v != 0)
        fputs("null", j->out); /* NaN or infinite: not representable in JSON */
    else if (v < 9007199254740992.0 && v > -9007199254740992.0 && v == (double)(long long)v)
        fprintf(j->out, "%lld", (long long)v); /* integral: print every digit */
    else
        fprintf(j->out, "%.6g", v);
}

void bench_json_int(bench_json *j, const char *key, long long v)
{
    json_key(j, key);
    fprintf(j->out, "%lld", v);
}

void bench_json_bool(bench_json *j, const char *key, int v)
{
    json_key(j, key);
    fputs(v ? "true" : "false", j->out);
}

void bench_json_str(bench_json *j, const char *key, const char *v)
{
    json_key(j, key);
    fputc('"', j->out);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', j->out);
        if ((unsigned char)*p >= 0x20)
            fputc(*p, j->out);
    }
    fputc('"', j->out);
}

void bench_json_end(bench_json *j)
{
    fputs("\n}\n", j->out);
    fflush(j->out);
}

void bench_utc_now(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
