/*
 * bench_cmds.h - the subcommands of pcache-bench. Each lives in its own
 * bench_<name>.c, takes the arguments after its name and returns the
 * process exit status. bench_main.c lists them in one table.
 */
#ifndef BENCH_CMDS_H
#define BENCH_CMDS_H

/* pcache-bench engine [--quick] [--json] [--runs N] [--ms N] */
int bench_cmd_engine(int argc, char **argv);
/* pcache-bench odbc [--quick] [--json] (bench_odbc.c; built with odbc/) */
int bench_cmd_odbc(int argc, char **argv);

/* pcache-bench store [--quick] [--json] [--entries N] [--runs N] [--redis PATH] */
int bench_cmd_store(int argc, char **argv);

/* pcache-bench server [--quick] [--json] [--pcached PATH] [--redis-server PATH] ... */
int bench_cmd_server(int argc, char **argv);

/* pcache-bench evict [--quick] [--json] [--runs N] (bench_evict.c) */
int bench_cmd_evict(int argc, char **argv);

#endif
