/* ddp/scenario.h — scenario files: a cluster, the accelerators to drive
 * through the shared plugin, faults and the expected outcome
 * (docs/scenario-format.md), run in the simulator with the invariants of
 * DESIGN §5 checked on every run.
 */
#ifndef DDP_SCENARIO_H
#define DDP_SCENARIO_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ddp/launch.h"
#include "ddp/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DDP_SCN_MAX_FAULTS 32
#define DDP_SCN_MAX_EXPECT 16
#define DDP_SCN_MAX_MENTIONS 4
#define DDP_SCN_MAX_ACCELS 8
#define DDP_SCN_MAX_TAGS 8

typedef enum ddp_scn_expect_kind {
    DDP_EXPECT_OK,         /* the ranks connected and finished cleanly */
    DDP_EXPECT_FAIL,       /* the ranks failed (error class, mentions) */
    DDP_EXPECT_CRASHED,    /* the ranks were killed by a fault */
    DDP_EXPECT_INVARIANTS, /* nothing beyond the invariants */
} ddp_scn_expect_kind_t;

typedef struct ddp_scn_expect {
    ddp_scn_expect_kind_t kind;
    char ranks[128];  /* "" = every rank (fail: every rank not crashed);
                         "others" = ranks no other expect line names;
                         else a list "0,3-5" */
    char error[32];   /* error class ("timeout", "addrinuse"...); "" any */
    char mentions[DDP_SCN_MAX_MENTIONS][160];
    int nmentions;
    char excludes[DDP_SCN_MAX_MENTIONS][160]; /* texts the message must not
                                                 contain (excludes=) */
    int nexcludes;
    int64_t within_ns; /* the ranks end by this virtual time (0: no bound) */
    int from_join;     /* from=join: within= counts from each rank's first
                          store contact (ddp_sim_outcome_t.join_ns) */
    int some;          /* match=some: one covered process suffices */
    int job;           /* job=2: the second job's processes (1); else the
                          run's job (0) */
    int restarts;      /* restarts=N, as N + 1: the covered ranks ended in
                          their worker group's N-th restart (0: not asked) */
    int line;          /* in the file, for reports */
} ddp_scn_expect_t;

typedef struct ddp_scn_env {
    int node;       /* -1: every process */
    char key[64];
    char *value;    /* NULL: unset */
} ddp_scn_env_t;

/* `iface` and `resolve` lines: a node's network as it sees it. */
#define DDP_SCN_MAX_NET 32
typedef struct ddp_scn_net {
    int kind;        /* ddp_net_kind_t: iface NAME CIDR, resolve NAME ADDR,
                        somaxconn N (name "") */
    int node;        /* -1: every node */
    char name[64];   /* the interface, or the host name */
    char value[64];  /* ADDR/PREFIX, or ADDR */
} ddp_scn_net_t;

typedef struct ddp_scenario {
    char file[256];   /* where it was loaded from ("" when built in code) */
    char name[160];
    char tags[DDP_SCN_MAX_TAGS][24];
    int ntags;
    /* cluster */
    int nodes;          /* simulated nodes (default 2) */
    int devices;        /* the Trainer's devices per node (default 2) */
    int num_nodes;      /* the Trainer's num_nodes (0: = nodes) */
    int tasks_per_node; /* external launchers' tasks per node (0: devices) */
    char **hosts;       /* nodes' host names (NULL: node0, node1, ...) */
    int nhosts;
    ddp_sim_launcher_t launcher;
    int gpus;
    /* what runs */
    char accels[DDP_SCN_MAX_ACCELS][16];
    int naccels;        /* 0: all */
    char backend[16];   /* "" default */
    char plugin[32];    /* "" default */
    char plugin_lib[512]; /* the library plugin came from (absolute path;
                             `plugin-library`), "" built in */
    char exec[512];     /* `exec "CMD ARGS"`: every rank's process runs this
                           foreign program instead (real runs only) */
    char cluster[16];   /* "" detect */
    int64_t timeout_ns, store_timeout_ns;
    size_t store_memory; /* `store_memory SIZE`: the memory budget of the
                            store a real run hosts for an exec program
                            (0: the server's default, 1 GiB) */
    int64_t train_ns;   /* `train D`: each rank's training time (0: none) */
    uint64_t seed;
    uint16_t port;      /* exported MASTER_PORT (0: 29500) */
    int no_port;        /* `port none` */
    char master_addr[64]; /* "" node 0's host; "-" not exported */
    int64_t master_late_ns;
    uint16_t port_taken; /* a squatter holds this port (0: none) */
    /* `second_job`: the same job launched again on the same nodes, start
     * late, on MASTER_PORT job2_port (0: the scenario's port) */
    int second_job;
    int64_t job2_start_ns;
    uint16_t job2_port;
    int64_t latency_ns;
    ddp_scn_env_t *env;
    int nenv;
    ddp_scn_net_t net[DDP_SCN_MAX_NET]; /* in file order */
    int nnet;
    /* faults and expectations */
    ddp_fault_t faults[DDP_SCN_MAX_FAULTS]; /* .ranks owned; .phase
                                                   points at a static name
                                                   (the parser's table or a
                                                   plugin's `phases`) */
    int fault_line[DDP_SCN_MAX_FAULTS];
    int nfaults;
    ddp_scn_expect_t expect[DDP_SCN_MAX_EXPECT];
    int nexpect;
} ddp_scenario_t;

/* Loads a scenario file (with its includes). On a parse error returns
 * DDP_ECONFIG and writes "file:line:col: expected ..., got ..." into err. */
DDP_API int ddp_scenario_load(const char *path, ddp_scenario_t **out, char *err,
                      size_t errlen);
/* The same from text; `name` is used as the file name in errors and
 * includes are resolved relative to `dir` (NULL: the current directory). */
DDP_API int ddp_scenario_parse(const char *text, const char *name, const char *dir,
                       ddp_scenario_t **out, char *err, size_t errlen);
/* A scenario with every default and no expectation (explore builds on it). */
DDP_API ddp_scenario_t *ddp_scenario_new(void);
DDP_API void ddp_scenario_free(ddp_scenario_t *s);
/* Writes s in the file format. For every scenario the parser accepts,
 * parse(write(s)) is s again (ddp_scenario_equal): quoting, zero values a
 * kind needs, long host lists (several `hosts` lines) included. */
DDP_API int ddp_scenario_write(const ddp_scenario_t *s, FILE *out);
/* The same into a malloc'd string (NULL, with the error set, on failure). */
DDP_API char *ddp_scenario_text(const ddp_scenario_t *s);
/* 1 when a and b describe the same scenario (every field but `file` and
 * the line numbers), else 0 with the first difference in why. */
DDP_API int ddp_scenario_equal(const ddp_scenario_t *a, const ddp_scenario_t *b, char *why,
                       size_t n);
/* Makes s run plugin p (its name, and its library's path when it was
 * loaded from one): `ddpsim run --plugin`, explore. */
DDP_API void ddp_scenario_use_plugin(ddp_scenario_t *s, const ddp_plugin_t *p);
/* 1 if the scenario runs this accelerator. */
DDP_API int ddp_scenario_has_accel(const ddp_scenario_t *s, const char *accel);
DDP_API int ddp_scenario_has_tag(const ddp_scenario_t *s, const char *tag);
/* The phases of the default plugin a `fault crash phase=` may name, in the
 * order it enters them: i < ddp_scenario_phase_count(), else NULL. (A
 * plugin's own phases are its ddp_plugin_t.phases.) */
DDP_API size_t ddp_scenario_phase_count(void);
DDP_API const char *ddp_scenario_phase_at(size_t i);
/* The error class of a code: "timeout", "peer_lost", "addrinuse", ... */
DDP_API const char *ddp_scn_error_class(int code);

/* The launch plan of s for accel (ddp/plan.h): what every runner executes.
 * seed 0: the scenario's. */
struct ddp_plan;
DDP_API int ddp_scenario_plan(const ddp_scenario_t *s, const char *accel, uint64_t seed,
                      struct ddp_plan **out);

/* One run: the scenario for one accelerator. */
typedef struct ddp_scn_result {
    char accelerator[16];
    int pass;            /* every expectation and invariant held */
    int skipped;         /* real runs: cannot be realised (why says why) */
    int vacuous;         /* the expectations held, but a fault (not may-miss)
                            acted on nothing: not a pass (why says which) */
    long long hits[DDP_SCN_MAX_FAULTS]; /* what each fault acted on */
    int nhits;
    int expect_ok;       /* the expectations held */
    int invariants_ok;   /* the invariants held */
    char why[DDP_ERR_MSG_MAX + 256]; /* the first expectation or invariant that did not
                                        (a rank's whole message in it) */
    char first_error[DDP_ERR_MSG_MAX + 256]; /* the most causal failing rank's message ("" none;
                              order: harness/root_cause.c) */
    int first_code;      /* its error code (0 none) */
    int first_rank;      /* its rank (-1: a process that is no rank, or none) */
    char rank_error[DDP_ERR_MSG_MAX]; /* the message of rank ddp_scn_run_opts_t.explain_rank
                             ("" where that rank did not fail) */
    char classes[160];   /* every failing process's error class, most causal
                            first, with how many ("addrinuse 1, hung 3") */
    char output[640];    /* real runs of a foreign program: where its ranks'
                            output was kept, each failing rank's file
                            ("" none kept) */
    int ranks, ok, failed, crashed;
    int stopped;         /* ranks the harness cancelled when it stopped the
                            run (a wall-clock limit, a livelock): neither ok
                            nor failed; first_error says why */
    int retries;         /* connect retries of all ranks */
    int64_t virtual_ns;  /* when the last task ended */
    uint64_t trace_hash;
    uint64_t handoffs;   /* the simulator's hand-offs between tasks: what
                            the run cost, the same for the same run */
    ddp_sim_result_t sim_result;
    double wall_s;
} ddp_scn_result_t;

typedef struct ddp_scn_run_opts {
    uint64_t seed;      /* 0: the scenario's */
    FILE *trace;        /* JSON lines (or NULL) */
    int keep_trace;     /* keep it in memory for *trace_out */
    char **trace_out;   /* receives a malloc'd copy of the trace */
    char *report;       /* per-rank lines of the run (or NULL) */
    size_t report_len;
    /* The run's real-time budget beside its virtual deadline: a run still
     * going after it is stopped and fails as a harness failure naming the
     * tasks that were running (< 0: none; 0: no budget for the run, but
     * 600 s of real time at one virtual instant, ddp_sim_opts_t.wall_stall,
     * so a run that makes progress is never stopped). A run whose virtual
     * time stands still (a livelock) is stopped whatever this says. */
    int64_t wall_limit_ns;
    /* rank + 1 whose message r->rank_error gets (0: none): `--compare` sets
     * the simulator's prediction beside the real run's failing rank */
    int explain_rank;
    /* Every event of the job (ddp_sim_opts_t.tap): `ddpsim check`'s
     * discovery. NULL: none. */
    void (*tap)(void *arg, const ddp_fault_event_t *ev, int node, int64_t vt);
    void *tap_arg;
} ddp_scn_run_opts_t;

/* Runs s for accel in a fresh simulation; fills r. Returns 0 when it ran
 * (whatever the verdict in r), < 0 when it could not be built. */
DDP_API int ddp_scenario_run(const ddp_scenario_t *s, const char *accel,
                     const ddp_scn_run_opts_t *o, ddp_scn_result_t *r);

/* ---- sharded sweeps (harness/shard.c, docs/sweeps.md) ----
 *
 * A sweep is a list of runs numbered 0, 1, 2, ... in a fixed order: `ddpsim
 * run`'s scenario files in the order given, each times the accelerators in
 * the registry's order (after --tag and --accelerator), or `ddpsim
 * explore`'s run indices 0..runs-1. Shard K of N holds the runs i with
 * i mod N = K - 1: shards are disjoint, their union is the whole list, and
 * which shard holds a run depends on nothing but i, K and N. */
#define DDP_SHARD_MAX 100000

typedef struct ddp_shard {
    int k, n; /* shard k of n, 1 <= k <= n; {0, 0}: the whole list */
} ddp_shard_t;

/* "K/N", decimal, 1 <= K <= N <= DDP_SHARD_MAX. 0, or -1 (out untouched). */
DDP_API int ddp_shard_parse(const char *text, ddp_shard_t *out);
/* 1 when run i belongs to s (always for the whole list), else 0. */
DDP_API int ddp_shard_owns(const ddp_shard_t *s, long long i);
/* How many of the runs 0..total-1 belong to s. */
DDP_API long long ddp_shard_size(const ddp_shard_t *s, long long total);

/* One row of a result file: a run of `ddpsim run`, or a violation of
 * `ddpsim explore`. */
typedef struct ddp_shard_row {
    long long index; /* its place in the whole sweep */
    /* ddpsim run */
    const ddp_scenario_t *s; /* the scenario (not in the file: NULL when read) */
    int file;                /* its file's place on the command line */
    char path[512], title[160], accel[16];
    char expected[32], actual[32]; /* the table's columns */
    ddp_scn_result_t r;
    int rc;                  /* ddp_scenario_run's (or the real run's) return */
    char report[8192];       /* per-process lines */
    /* ddpsim explore */
    char name[64];           /* explore-S-I */
    char *text;              /* the violation's report as explore printed it */
    char *shrunk, *original; /* the scenario files (NULL: none) */
} ddp_shard_row_t;

/* A result file (JSON lines: a header object, then one object per row;
 * docs/sweeps.md has every key). */
typedef struct ddp_shard_file {
    char kind[16];      /* "run" or "explore" */
    ddp_shard_t shard;  /* {0, 0} after ddp_shard_merge */
    char sweep[1024];   /* what shards of one sweep share (their options) */
    long long total;    /* runs in the whole sweep */
    long long runs;     /* runs this file covers */
    int files;          /* run: scenario files named */
    int ranks;          /* explore: world size */
    uint64_t seed;      /* explore: --seed */
    int interrupted;    /* run: the signal that stopped it (0: none) */
    double wall_s;      /* its wall time (merged: the sum) */
    /* explore: the hand-offs of all its runs, and the run that made the
     * most (the lowest index of a tie; costliest_handoffs 0: none), with
     * its accelerator and its scenario as drawn (malloc'd, or NULL) */
    uint64_t handoffs, costliest_handoffs;
    long long costliest;
    char costliest_accel[16];
    char *costliest_scn;
    ddp_shard_row_t *rows; /* in index order */
    int nrows, cap;
} ddp_shard_file_t;

/* A new zeroed row at the end of f; NULL when out of memory. */
DDP_API ddp_shard_row_t *ddp_shard_add_row(ddp_shard_file_t *f);
/* Writes f to path (through path.tmp and a rename: a reader never sees half
 * a file). 0, or < 0 with the error set. */
DDP_API int ddp_shard_write(const ddp_shard_file_t *f, const char *path);
/* Reads a file ddp_shard_write wrote into *f (zeroed first). 0, or < 0
 * with the error set to "PATH:LINE: expected ...". */
DDP_API int ddp_shard_read(const char *path, ddp_shard_file_t *f);
/* Combines the result files parts[0..n) (names: their paths, for messages)
 * of one sweep into *out, rows in index order; parts' rows move to out.
 * Checks that they are of one kind and one sweep, that shards 1..N are all
 * there once each, and that every run of the sweep is in exactly one of
 * them. 0, or DDP_ECONFIG with the error saying which shard or run. */
DDP_API int ddp_shard_merge(ddp_shard_file_t *parts, int n, const char *const *names,
                    ddp_shard_file_t *out);
DDP_API void ddp_shard_file_free(ddp_shard_file_t *f);

/* ---- exploration (harness/explore.c, docs/explore.md) ---- */
typedef struct ddp_explore_opts {
    int ranks;          /* world size to explore (0: 16); split over 1..4
                           nodes of at most 64 processes (more nodes when
                           that is the only way) */
    int runs;           /* 0: 100 */
    uint64_t seed;
    unsigned kinds;     /* bit per ddp_fault_kind_t; 0: all those of
                           DDP_EXPLORE_KINDS_ALL */
    int max_faults;     /* per run (0: 3; < 0: none) */
    const char *accelerator; /* NULL: drawn per run */
    const char *plugin;      /* NULL: default */
    int progress;       /* 1: progress bar on stderr; 0: a line per 10 %
                           of the runs on log; 2: those lines, and one on
                           stderr every 10 s (not a terminal) */
    const char *out_dir; /* write each violation as explore-S-I.scn (shrunk)
                            and explore-S-I-original.scn here (NULL: none) */
    FILE *log;          /* violations, replay commands, quiet progress
                           lines, the summary (NULL: stdout) */
    ddp_shard_t shard;  /* only the runs i this shard owns ({0, 0}: all) */
    ddp_shard_file_t *results; /* NULL, or filled: the header, and a row per
                                  violation (its report as printed, the
                                  shrunk and the drawn scenario) */
} ddp_explore_opts_t;
/* The kinds explore draws by default (`--faults all`): every kind but
 * bandwidth, which a sweep draws only when asked (--faults bandwidth), so
 * that sweeps keep the runs they had before it existed. */
#define DDP_EXPLORE_KINDS_ALL (((1u << DDP_FAULT_BANDWIDTH) - 1))
/* The kinds explore can draw at all (harness/explore.c's draw_fault):
 * --faults refuses the others (late, stall), which would draw nothing. */
#define DDP_EXPLORE_KINDS_DRAWN (DDP_EXPLORE_KINDS_ALL | 1u << DDP_FAULT_BANDWIDTH)

typedef struct ddp_explore_stats {
    int runs, violations;
    double wall_s;
    /* hand-offs of all runs; the run that made the most (lowest index of
     * a tie) and how many (0: no run) */
    uint64_t handoffs, costliest_handoffs;
    long long costliest;
} ddp_explore_stats_t;

/* Draws run i's scenario (deterministic in seed and i; the other options
 * shape it). Writes the accelerator it runs into accel. NULL (with the
 * error set) when opts->ranks cannot be split into nodes. */
DDP_API ddp_scenario_t *ddp_explore_draw(const ddp_explore_opts_t *o, int i,
                                 char *accel, size_t accel_len);
/* Shrinks a violating scenario, greedily and deterministically: drops
 * faults, lowers the ranks and nodes faults aim at, then the node and
 * device counts (re-aiming or dropping faults past the cluster), then
 * simplifies faults (from t = 0, one firing, shorter windows, smaller
 * delays) and timing (latency, late master), keeping each change only
 * while ddp_scenario_run still reports a violation of the same invariant
 * as s (one run of s finds out which). *steps: the changes kept. Returns a
 * new scenario (a copy of s when nothing could be removed). */
DDP_API ddp_scenario_t *ddp_explore_shrink(const ddp_scenario_t *s, const char *accel,
                                   int *steps);
/* Runs opts->runs drawn scenarios; shrinks, reports and (with out_dir)
 * writes each violation. 0 when every run ran (st->violations says how
 * many violated), < 0 when a run could not be drawn. */
DDP_API int ddp_explore(const ddp_explore_opts_t *o, ddp_explore_stats_t *st);
/* Prints a merged explore result file as ddp_explore printed the whole
 * sweep (each violation's report in run order, then the summary line) and,
 * with out_dir, writes each violation's scenario files there. Returns the
 * number of violations, or < 0 when a file could not be written. */
DDP_API int ddp_explore_print_merged(const ddp_shard_file_t *m, FILE *log, const char *out_dir);

#ifdef __cplusplus
}
#endif
#endif
