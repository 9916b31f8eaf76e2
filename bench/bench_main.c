/*
 * bench_main.c - pcache-bench: side-by-side measurements of pcache against
 * its anchors (docs/benchmarks.md). This file only
 * dispatches; each subcommand is one entry of the table below and one file.
 */
#include "bench_cmds.h"

#include <stdio.h>
#include <string.h>

struct bench_cmd {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
};

static const struct bench_cmd cmds[] = {
    {"engine", bench_cmd_engine,
     "engine [--quick] [--json] [--runs N] [--ms N] [--profile SYSTEM:MIX:SIZE]\n"
     "      the engine vs the cachedb_local model (512 and 65536 buckets) and a\n"
     "      dependent pointer chase; 50k and 1M entries, 1 and 2 processes\n"
     "      (--profile: one cell, one process, no figure: for a profiler)"},
    {"store", bench_cmd_store,
     "store [--quick] [--json] [--entries N] [--runs N] [--redis PATH] [--only journal]\n"
     "      the snapshot store's save, load, size, p99.9 during a save and journal\n"
     "      cost, against raw LMDB, SQLite and redis-server (when installed)"},
#ifdef PCACHE_BENCH_ODBC /* the one optional subcommand: odbc/ is a build option */
    {"odbc", bench_cmd_odbc,
     "odbc [--quick] [--json]\n"
     "      the ODBC exporter's save and load on SQLite, PostgreSQL and MariaDB servers\n"
     "      it starts, vs row-by-row autocommit and psql \\copy; 100k and 1M rows"},
#endif
    {"evict", bench_cmd_evict,
     "evict [--quick] [--json] [--runs N]\n"
     "      GET hit cost with the access bit (allkeys-lru, allkeys-s3fifo) vs noeviction,\n"
     "      steady and on a first read; SET of new keys at the cap vs with room"},
    {"server", bench_cmd_server,
     "server [--quick] [--json] [--pcached PATH] [--redis-server PATH] [--pogocache PATH]\n"
     "      [--seconds S] [--rounds N] [--keys N] [--no-redis-benchmark]\n"
     "      pcached vs redis-server through a lean pipelined RESP client and\n"
     "      redis-benchmark; GET p99.9 during saves, shutdown save, restart"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: pcache-bench <subcommand> [options]\n\nsubcommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(out, "  %s\n", cmds[i].usage);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0) {
            for (int a = 2; a < argc; a++) /* every subcommand answers --help */
                if (strcmp(argv[a], "-h") == 0 || strcmp(argv[a], "--help") == 0) {
                    printf("usage: pcache-bench %s\n", cmds[i].usage);
                    return 0;
                }
            return cmds[i].run(argc - 2, argv + 2);
        }
    fprintf(stderr, "pcache-bench: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
