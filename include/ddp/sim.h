/* ddp/sim.h — the fake cluster.
 *
 * A simulation holds nodes (hostname, address, clock skew) and tasks. Every
 * task — a rank, the store server, a launcher — is a user-space context on
 * the thread that calls ddp_sim_run (the default), or a pthread of its own
 * (DDP_SIM_TASKS_THREADS in ddp_sim_opts_t.tasks), but either way exactly
 * one runs at a time: the running task holds a baton and passes it when it
 * blocks in a sim call. The next task is drawn by the run's seeded PRNG
 * among the runnable ones. Virtual time moves only when every task is
 * parked: it jumps to the next timer or network delivery. Each task sees
 * the world through its own ddp_sys_t (the "sim sys"), so code above the
 * seam runs unchanged.
 *
 * Same cluster + faults + seed => byte-identical trace.
 */
#ifndef DDP_SIM_H
#define DDP_SIM_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddp_sim ddp_sim_t;
typedef struct ddp_sim_task ddp_sim_task_t;

/* The stack of a task running code the project did not write (a plugin
 * library's): what every task had before the default became 32 KiB. */
#define DDP_SIM_STACK_FOREIGN ((size_t)64 * 1024)

typedef struct ddp_sim_opts {
    uint64_t seed;
    int64_t latency_ns;   /* one-way link latency; 0 -> 100 us */
    int64_t jitter_ns;    /* uniform extra latency per message; default 0 */
    double bandwidth_Bps; /* bytes/s per stream; 0 -> 10 GB/s */
    size_t stack_size;    /* per task; 0 (or less) -> 16 KiB, 512 KiB under
                             ASan/TSan; DDP_SIM_STACK_FOREIGN for code of
                             unknown depth (a user's plugin library) */
    int64_t time_limit_ns; /* stop the run at this virtual time; 0 -> 4 h */
    int short_io;          /* split deliveries into random pieces */
    FILE *trace;           /* JSON lines written here as they happen (or NULL) */
    int keep_trace;        /* also keep the trace in memory (ddp_sim_trace) */
    int somaxconn;         /* listen backlog cap; 0 -> 4096 */
    size_t rcvbuf;         /* receive window of every stream: bytes sent and
                              not yet read; 0 -> 256 KiB */
    /* Bounds on the run itself, beside the virtual time limit. A run whose
     * virtual time does not move while its tasks keep making sim calls
     * (livelock_calls of them at one virtual instant; 0 -> 10,000,000) is
     * stopped: DDP_SIM_LIVELOCK. With a wall clock (a POSIX sys: the
     * simulator reads no clock of its own), a run still going after
     * wall_limit_ns of real time is stopped: DDP_SIM_WALL_LIMIT; with
     * wall_stall set, only real time spent while virtual time stands still
     * counts (the clock restarts whenever virtual time moves), so a run
     * that makes progress is never stopped by the wall clock, however
     * large its world or slow its host. Either way every task is cancelled
     * and the report names those that were running. The livelock bound is
     * a count, so it stops a run at the same point in every replay. The
     * wall clock is read once every 4096 sim calls at one virtual instant. */
    uint64_t livelock_calls;
    int world; /* the world the job expects (a fault's `barrier` event:
                  the store barrier counts to it); 0: unknown */
    ddp_sys_t *wall_clock;
    int64_t wall_limit_ns; /* 0: no wall limit */
    int wall_stall;        /* 1: wall_limit_ns bounds a stall, not the run */
    /* NCCL: every node has `gpus` virtual GPUs, and the sys hands the nccl
     * backend the simulated NCCL (sim/sim_nccl.c). host_nccl: hand it the
     * POSIX sys's library instead (the process's libnccl.so.2, e.g. the
     * fakes of tests/fake_nccl). */
    int gpus;
    int host_nccl;
    /* How tasks run (docs/simulator.md § 1); both make the same scheduling
     * decisions, so a seed gives the same trace either way. */
    enum ddp_sim_tasks {
        DDP_SIM_TASKS_DEFAULT = 0,  /* = CONTEXTS */
        DDP_SIM_TASKS_CONTEXTS = 1, /* user-space contexts, all on the thread
                                       that calls ddp_sim_run */
        DDP_SIM_TASKS_THREADS = 2,  /* one pthread per task, passed a baton */
    } tasks;
    /* Every event of the job as it happens (phases entered and left, the
     * store's connects, joins, keys set and waited on, processes spawned
     * and exited), with the node of the task that produced it (the store
     * server's for store events) and the virtual time: `ddpsim check`
     * lists what a plugin does from it. It decides nothing: a run with a
     * tap makes the same trace. NULL: none. */
    void (*tap)(void *arg, const ddp_fault_event_t *ev, int node, int64_t vt);
    void *tap_arg;
} ddp_sim_opts_t;
typedef enum ddp_sim_tasks ddp_sim_tasks_t;

DDP_API ddp_sim_t *ddp_sim_new(const ddp_sim_opts_t *opts);
DDP_API void ddp_sim_free(ddp_sim_t *sim);

/* Adds a node; returns its index. addr is numeric IPv4 ("10.0.0.1"). */
DDP_API int ddp_sim_add_node(ddp_sim_t *sim, const char *hostname, const char *addr,
                     int64_t clock_skew_ns);
DDP_API int ddp_sim_node_count(const ddp_sim_t *sim);
DDP_API const char *ddp_sim_node_hostname(const ddp_sim_t *sim, int node);
/* Extra host-table names resolving to a node ("master" -> node 0). */
DDP_API int ddp_sim_add_alias(ddp_sim_t *sim, const char *name, int node);
/* Adds an address "ADDR/PREFIX" (IPv4 or IPv6) to interface `name` of a
 * node (-1: every node). The first eth0 address of a node replaces its
 * default eth0 (the node's address); lo is always there. */
DDP_API int ddp_sim_add_iface(ddp_sim_t *sim, int node, const char *name, const char *cidr);
/* On a node (-1: every node), `name` resolves to addr before the cluster's
 * host table; several calls for one name give several answers, in order. */
DDP_API int ddp_sim_add_hostent(ddp_sim_t *sim, int node, const char *name, const char *addr);
/* A node's (-1: every node's) net.core.somaxconn: every listen backlog
 * there is capped at it (1..DDP_SIM_SOMAXCONN_MAX, the sysctl's own range
 * on this kernel: 65535 was the limit while the backlog was 16 bits, and a
 * million ranks connecting at once need more). */
#define DDP_SIM_SOMAXCONN_MAX 2147483647
DDP_API int ddp_sim_set_somaxconn(ddp_sim_t *sim, int node, int somaxconn);
/* A virtual file readable with ddp_sys_read_file on every node. */
DDP_API int ddp_sim_add_file(ddp_sim_t *sim, const char *path, const char *content);

typedef int (*ddp_sim_main_fn)(ddp_sys_t *sys, void *arg);

typedef struct ddp_sim_task_opts {
    int node;
    const char *name;     /* "rank3", "store" ... (copied) */
    int rank;             /* -1: not a rank; else used in errors/outcomes */
    const ddp_env_t *env; /* copied; NULL = empty */
    int64_t start_ns;     /* virtual start time (late start) */
    int job;              /* which job it belongs to (ddp_plan_proc_t.job);
                             what it spawns, and its threads, inherit it */
    int agent;            /* an elastic agent (launcher torchrun-elastic) */
} ddp_sim_task_opts_t;

/* Adds a task that runs fn(sys, arg) from start_ns on. Returns its id. */
DDP_API int ddp_sim_add_task(ddp_sim_t *sim, const ddp_sim_task_opts_t *o,
                     ddp_sim_main_fn fn, void *arg);

typedef enum ddp_sim_result {
    DDP_SIM_DONE = 0,     /* every task finished */
    DDP_SIM_DEADLOCK = 1, /* every task parked, nothing pending */
    DDP_SIM_TIME_LIMIT = 2,
    DDP_SIM_LIVELOCK = 3,   /* virtual time stood still (livelock_calls) */
    DDP_SIM_WALL_LIMIT = 4, /* the run took more than wall_limit_ns */
} ddp_sim_result_t;

/* Runs to completion. Tasks still parked at a deadlock or limit are
 * cancelled (their sim calls return DDP_ECANCELED) and unwound. */
DDP_API ddp_sim_result_t ddp_sim_run(ddp_sim_t *sim);

/* 1 when this build has the simulated NCCL (nccl.h was found at build
 * time, so the nccl backend exists); else 0: GPU scenarios cannot run. */
DDP_API int ddp_sim_has_nccl(void);

/* Frees ptr (malloc'd) with the sim: for task arguments. */
DDP_API void ddp_sim_own(ddp_sim_t *sim, void *ptr);

/* Per-task outcome after the run. */
typedef enum ddp_sim_state {
    DDP_SIM_TASK_NEW,
    DDP_SIM_TASK_RUNNING,
    DDP_SIM_TASK_EXITED,
    DDP_SIM_TASK_CRASHED,  /* killed by a fault */
    DDP_SIM_TASK_CANCELED, /* still waiting at a deadlock / time limit */
} ddp_sim_state_t;

typedef struct ddp_sim_outcome {
    const char *name;
    int node, rank;
    ddp_sim_state_t state;
    int rc;                 /* fn's return value */
    int code;               /* the error code (rc, or the error context's
                               when rc is an exit status) */
    const char *message;    /* the task's error message when rc != 0: ""
                               for none, never NULL; at most
                               DDP_ERR_MSG_MAX - 1 bytes. A simulation's
                               are its own (ddp_sim_free frees them); an
                               outcome filled elsewhere is set up and set
                               with ddp_sim_outcome_init / _set_message */
    int64_t end_ns;         /* virtual time it ended */
    int64_t connect_ns;     /* set by ddp_sim_mark_connected (-1 never) */
    int retries;            /* failed connect attempts */
    int thread;             /* a thread of another task's process */
    int world;              /* world size the rank believed in (-1 unknown) */
    int leaked_socks;       /* sockets its process left open at a normal exit */
    int spawned;            /* processes it spawned: a process that spawned
                               some and is no rank is a launcher */
    int64_t held_ns;        /* how long a late or pause fault held it
                               before its first instruction */
    int64_t join_ns;        /* its first store contact: the simulator's rank
                               connected its store client, a foreign
                               program's connection was accepted by the
                               hosted store (<= 0: none seen) */
    int foreign;            /* a foreign program's (a real exec run): its
                               words are its own (mentions= do not apply)
                               and its start-up is not the job's (within=
                               counts from its first store contact) */
    char progress[32];      /* a foreign program's furthest phase at the
                               store the run hosts ("joined", "barrier
                               passed, left"); "" elsewhere */
    int job;                /* 0: the run's job; 1: the second job */
    int attempt;            /* an elastic agent's worker: which start of its
                               group (0 first; restarts and membership
                               changes count) */
    int agent;              /* an elastic agent's process */
    char phase[48];         /* the phase it was in when a fault crashed it
                               ("" unknown, e.g. a real run's) */
} ddp_sim_outcome_t;

/* An outcome a caller fills (the real runner, a test of the judge):
 * ddp_sim_outcome_init zeroes it, with no message (""); set_message
 * formats one (printf; cut at DDP_ERR_MSG_MAX - 1 bytes), replacing the
 * last; clear frees it and leaves "". A message is stored only when set,
 * on the heap: a task that ends well costs no 2 KiB. A copy of the struct
 * shares the string: clear one of them only. */
DDP_API void ddp_sim_outcome_init(ddp_sim_outcome_t *o);
DDP_API void ddp_sim_outcome_set_message(ddp_sim_outcome_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
DDP_API void ddp_sim_outcome_clear(ddp_sim_outcome_t *o);

DDP_API int ddp_sim_task_count(const ddp_sim_t *sim);
DDP_API const ddp_sim_outcome_t *ddp_sim_outcome(const ddp_sim_t *sim, int task);

/* A task's environment and asked-for start time (what the real scenario
 * runner starts as a real process). */
DDP_API const ddp_env_t *ddp_sim_task_env(const ddp_sim_t *sim, int task);
DDP_API int64_t ddp_sim_task_start(const ddp_sim_t *sim, int task);

/* Sets the task's outcome: its error code and message (else the return
 * value and the error context at exit are used). A process reports the
 * first error it met, which its teardown must not overwrite. */
DDP_API void ddp_sim_report(ddp_sys_t *sys, int code, const char *message);
/* Called by a task (through its sys) to record when it finished connecting. */
DDP_API void ddp_sim_mark_connected(ddp_sys_t *sys);
/* The sim behind a sim sys (NULL for any other sys). */
DDP_API ddp_sim_t *ddp_sim_of(ddp_sys_t *sys);
/* The task id behind a sim sys (-1 for any other sys). */
DDP_API int ddp_sim_task_of(ddp_sys_t *sys);

/* Figures of the run. */
typedef struct ddp_sim_stats {
    int64_t virtual_ns;  /* virtual time at the end */
    uint64_t handoffs;   /* baton passes between tasks */
    uint64_t events;     /* timers + deliveries processed */
    uint64_t trace_hash; /* FNV-1a 64 over the trace bytes */
    uint64_t trace_lines;
    uint64_t rx_peak_bytes; /* most bytes ever held in receive queues at once
                               (delivered, not yet read), all sockets */
} ddp_sim_stats_t;
DDP_API void ddp_sim_stats(const ddp_sim_t *sim, ddp_sim_stats_t *out);

/* The deadlock report (empty when none): one line per parked task; after
 * a livelock or the wall limit, one line per task that was running. */
DDP_API const char *ddp_sim_deadlock_report(const ddp_sim_t *sim);
/* The in-memory trace (opts.keep_trace), NUL-terminated. */
DDP_API const char *ddp_sim_trace(const ddp_sim_t *sim, size_t *len);
/* Converts a JSON-lines trace to Chrome trace format (opens in Perfetto or
 * chrome://tracing): phases become duration slices per task, every other
 * event an instant with its fields as args. */
DDP_API int ddp_sim_export_chrome(const char *trace, FILE *out);
/* A readable timeline: one line per event, virtual seconds first. */
DDP_API int ddp_sim_export_timeline(const char *trace, FILE *out);
/* Adds a line to the trace from inside a task ("kind" + JSON fields). */
DDP_API void ddp_sim_trace_event(ddp_sys_t *sys, const char *kind, const char *fmt,
                         ...) __attribute__((format(printf, 3, 4)));

/* ---- faults ---- */
/* The fault spec and kinds are ddp/faults.h's (ddp_fault_t). */
/* The highest rate_bps a bandwidth fault may have: 10 gbit/s. */
#define DDP_SIM_RATE_MAX 10000000000ull

/* Adds a fault; returns its index, or DDP_ECONFIG (error set) for a kind
 * out of range or a POINT fault whose point the simulator never checks. */
DDP_API int ddp_sim_add_fault(ddp_sim_t *sim, const ddp_fault_t *f);
/* 0 when a point fault may name this point (listed in ddp/faults.h and
 * checked in the simulator); else DDP_ECONFIG with an error saying why. */
DDP_API int ddp_sim_fault_point_check(const char *name);
/* What fault i (ddp_sim_add_fault's index) acted on in the run so far:
 * calls failed, segments dropped or delayed, tasks stopped or killed. */
DDP_API long long ddp_sim_fault_hits(const ddp_sim_t *sim, int i);

#ifdef __cplusplus
}
#endif
#endif
