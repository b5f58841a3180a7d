/* tools/cmds.h — the ddpsim subcommands. Each lives in tools/cmd_<name>.c and
 * returns the process exit status (0 ok, 1 failure, 2 bad input). */
#ifndef DDP_TOOLS_CMDS_H
#define DDP_TOOLS_CMDS_H

#include <stdint.h>
#include <stdio.h>

#include "ddp/scenario.h"
#include "harness/xml_priv.h"

struct ddp_sys;

/* argv[0] is the subcommand name ("hostlist", ...). */
int ddp_cmd_hostlist(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_env(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_store(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_demo(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_sim(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_run(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_replay(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_list(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_train(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_hold_port(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_launch(struct ddp_sys *sys, int argc, char **argv);

/* The path this ddpsim was started as (real runs start it again). */
extern const char *ddp_tool_self;
/* fn handles SIGINT and SIGTERM, and SIGHUP when hup (unless it is ignored,
 * as under nohup); fn NULL with the same hup restores the default actions. */
void ddp_tool_catch_signals(void (*fn)(int), int hup);
/* --trace-chrome: the simulator's trace tr as Chrome trace JSON at path
 * (ddp_out_write: replaced whole or not at all). 0 or a negative code. */
int ddp_tool_write_chrome(const char *tr, const char *path);
/* A folder that appears whole or not at all (`report`, `run --artifacts`):
 * ddp_tool_dir_begin makes its temporary twin FINAL's-folder/.NAME.XXXXXX
 * (into tmp, n bytes; mode 0777 less the umask) to write in; commit renames
 * it to final, never replacing anything there (else discards it);
 * discard removes it and all it holds. 0 or a negative code (ddp_err). */
int ddp_tool_dir_begin(const char *final, char *tmp, size_t n);
int ddp_tool_dir_commit(const char *tmp, const char *final);
void ddp_tool_dir_discard(const char *tmp);
/* s as XML/HTML text or attribute value (<, >, &, " escaped; control
 * characters but newline and tab left out); NULL writes nothing. */
#define ddp_tool_xml_text ddp__xml_text
int ddp_cmd_explore(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_check(struct ddp_sys *sys, int argc, char **argv);
/* `check --sanitize` (tools/check_sanitize.c): runs `ddpsim check ARGV`
 * again with the sanitizer runtimes preloaded; a report becomes a finding
 * (files in dir). The exit status to return, or < 0 with the error set. */
/* `check --coverage` (tools/check_coverage.c): `make coverage PLUGIN=lib`
 * of the source tree this ddpsim was built in; its log in dir. Its exit
 * status (0 parity holds, 1 a violation, 2 the pipeline failed), or < 0
 * with the error set. */
int ddp_check_coverage(struct ddp_sys *sys, const char *lib, const char *dir);
int ddp_check_sanitized(struct ddp_sys *sys, int argc, char **argv, const char *dir,
                        double budget_s, const char *lib);
int ddp_cmd_merge(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_report(struct ddp_sys *sys, int argc, char **argv);

/* What follows a list of runs (tools/cmd_run.c): the outcome table, the
 * counts line, JUnit, and the exit status ddpsim run documents. ddpsim run
 * calls it on its runs, ddpsim merge on the merged shards'. */
typedef struct ddp_run_report {
    const char *cmd;    /* "run", "replay", "merge": messages name it */
    int nfiles;         /* scenario files named on the command line */
    double wall_s;
    int verbose;        /* each row's per-process lines */
    int replay;         /* each row's seed and trace hash (rows have .s) */
    uint64_t seed;      /* replay: --seed (0: the scenario's) */
    const char *junit;  /* JUnit XML path (NULL: none) */
    int interrupted;    /* the signal that stopped the runs (0: none) */
    ddp_shard_t shard;  /* {0, 0}: the whole list; else the counts line says */
    long long total;    /* runs in the whole list */
    int real;           /* real runs: the time column is wall time */
    const struct ddp_art *art; /* --artifacts: rows name their folders (NULL: none) */
} ddp_run_report_t;
int ddp_run_report(struct ddp_sys *sys, const ddp_run_report_t *rep,
                   const ddp_shard_row_t *rows, int nrows);

#endif
