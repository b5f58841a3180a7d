/* ddp/sim.h — the fake cluster.
 *
 * A simulation holds nodes (hostname, address, clock skew) and tasks. Every
 * task — a rank, the store server, a launcher — is a pthread, but exactly one
 * runs at a time: the running task holds a baton and passes it when it blocks
 * in a sim call. The next task is drawn by the run's seeded PRNG among the
 * runnable ones. Virtual time moves only when every task is parked: it jumps
 * to the next timer or network delivery. Each task sees the world through its
 * own ddp_sys_t (the "sim sys"), so code above the seam runs unchanged.
 *
 * Same cluster + faults + seed => byte-identical trace.
 */
#ifndef DDP_SIM_H
#define DDP_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ddp/env.h"
#include "ddp/plugin.h"
#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddp_sim ddp_sim_t;
typedef struct ddp_sim_task ddp_sim_task_t;

typedef struct ddp_sim_opts {
    uint64_t seed;
    int64_t latency_ns;   /* one-way link latency; 0 -> 100 us */
    int64_t jitter_ns;    /* uniform extra latency per message; default 0 */
    double bandwidth_Bps; /* bytes/s per stream; 0 -> 10 GB/s */
    size_t stack_size;    /* per task; 0 -> 64 KiB (+ sanitizer headroom) */
    int64_t time_limit_ns; /* stop the run at this virtual time; 0 -> 4 h */
    int short_io;          /* split deliveries into random pieces */
    FILE *trace;           /* JSON lines written here as they happen (or NULL) */
    int keep_trace;        /* also keep the trace in memory (ddp_sim_trace) */
    int somaxconn;         /* listen backlog cap; 0 -> 4096 */
} ddp_sim_opts_t;

ddp_sim_t *ddp_sim_new(const ddp_sim_opts_t *opts);
void ddp_sim_free(ddp_sim_t *sim);

/* Adds a node; returns its index. addr is numeric IPv4 ("10.0.0.1"). */
int ddp_sim_add_node(ddp_sim_t *sim, const char *hostname, const char *addr,
                     int64_t clock_skew_ns);
int ddp_sim_node_count(const ddp_sim_t *sim);
const char *ddp_sim_node_hostname(const ddp_sim_t *sim, int node);
/* Extra host-table names resolving to a node ("master" -> node 0). */
int ddp_sim_add_alias(ddp_sim_t *sim, const char *name, int node);
/* A virtual file readable with ddp_sys_read_file on every node. */
int ddp_sim_add_file(ddp_sim_t *sim, const char *path, const char *content);

typedef int (*ddp_sim_main_fn)(ddp_sys_t *sys, void *arg);

typedef struct ddp_sim_task_opts {
    int node;
    const char *name;     /* "rank3", "store" ... (copied) */
    int rank;             /* -1: not a rank; else used in errors/outcomes */
    const ddp_env_t *env; /* copied; NULL = empty */
    int64_t start_ns;     /* virtual start time (late start) */
} ddp_sim_task_opts_t;

/* Adds a task that runs fn(sys, arg) from start_ns on. Returns its id. */
int ddp_sim_add_task(ddp_sim_t *sim, const ddp_sim_task_opts_t *o,
                     ddp_sim_main_fn fn, void *arg);

typedef enum ddp_sim_result {
    DDP_SIM_DONE = 0,     /* every task finished */
    DDP_SIM_DEADLOCK = 1, /* every task parked, nothing pending */
    DDP_SIM_TIME_LIMIT = 2,
} ddp_sim_result_t;

/* Runs to completion. Tasks still parked at a deadlock or limit are
 * cancelled (their sim calls return DDP_ECANCELED) and unwound. */
ddp_sim_result_t ddp_sim_run(ddp_sim_t *sim);

/* Frees ptr (malloc'd) with the sim: for task arguments. */
void ddp_sim_own(ddp_sim_t *sim, void *ptr);

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
    char message[512];      /* the task's error message when rc != 0 */
    int64_t end_ns;         /* virtual time it ended */
    int64_t connect_ns;     /* set by ddp_sim_mark_connected (-1 never) */
    int retries;            /* failed connect attempts */
    int thread;             /* a thread of another task's process */
    int world;              /* world size the rank believed in (-1 unknown) */
    int leaked_socks;       /* sockets its process left open at a normal exit */
} ddp_sim_outcome_t;

int ddp_sim_task_count(const ddp_sim_t *sim);
const ddp_sim_outcome_t *ddp_sim_outcome(const ddp_sim_t *sim, int task);

/* A task's environment and asked-for start time (what the real scenario
 * runner starts as a real process). */
const ddp_env_t *ddp_sim_task_env(const ddp_sim_t *sim, int task);
int64_t ddp_sim_task_start(const ddp_sim_t *sim, int task);

/* Sets the task's outcome message (else the error context at exit is used). */
void ddp_sim_report(ddp_sys_t *sys, const char *message);
/* Called by a task (through its sys) to record when it finished connecting. */
void ddp_sim_mark_connected(ddp_sys_t *sys);
/* The sim behind a sim sys (NULL for any other sys). */
ddp_sim_t *ddp_sim_of(ddp_sys_t *sys);
/* The task id behind a sim sys (-1 for any other sys). */
int ddp_sim_task_of(ddp_sys_t *sys);

/* Figures of the run. */
typedef struct ddp_sim_stats {
    int64_t virtual_ns;  /* virtual time at the end */
    uint64_t handoffs;   /* baton passes between tasks */
    uint64_t events;     /* timers + deliveries processed */
    uint64_t trace_hash; /* FNV-1a 64 over the trace bytes */
    uint64_t trace_lines;
} ddp_sim_stats_t;
void ddp_sim_stats(const ddp_sim_t *sim, ddp_sim_stats_t *out);

/* The deadlock report (empty when none): one line per parked task. */
const char *ddp_sim_deadlock_report(const ddp_sim_t *sim);
/* The in-memory trace (opts.keep_trace), NUL-terminated. */
const char *ddp_sim_trace(const ddp_sim_t *sim, size_t *len);
/* Converts a JSON-lines trace to Chrome trace format (opens in Perfetto or
 * chrome://tracing): phases become duration slices per task, every other
 * event an instant with its fields as args. */
int ddp_sim_export_chrome(const char *trace, FILE *out);
/* A readable timeline: one line per event, virtual seconds first. */
int ddp_sim_export_timeline(const char *trace, FILE *out);
/* Adds a line to the trace from inside a task ("kind" + JSON fields). */
void ddp_sim_trace_event(ddp_sys_t *sys, const char *kind, const char *fmt,
                         ...) __attribute__((format(printf, 3, 4)));

/* ---- faults ---- */
typedef enum ddp_sim_fault_kind {
    DDP_FAULT_REFUSE,     /* connects to the target are refused */
    DDP_FAULT_RESET,      /* connects reset (after_bytes: after N bytes) */
    DDP_FAULT_BLACKHOLE,  /* connects hang until the caller's deadline */
    DDP_FAULT_DELAY,      /* extra latency (+ jitter) on matching links */
    DDP_FAULT_PARTITION,  /* nodes in set A cannot reach nodes outside it */
    DDP_FAULT_CRASH,      /* a rank (task) or node dies */
    DDP_FAULT_PAUSE,      /* a task is alive but silent for a window */
    DDP_FAULT_RESOLVE,    /* name resolution fails */
    DDP_FAULT_KIND_COUNT
} ddp_sim_fault_kind_t;

typedef struct ddp_sim_fault {
    ddp_sim_fault_kind_t kind;
    int node;          /* target node (-1 any); CRASH: whole node */
    int task;          /* target task (-1 any) */
    int peer_node;     /* link's other end (-1 any) */
    uint16_t port;     /* target port (0 any) */
    uint64_t node_set; /* PARTITION: bit i = node i on side A */
    int64_t start_ns;  /* active from (virtual) */
    int64_t end_ns;    /* active until (0 = forever); PARTITION heals here */
    int count;         /* fire at most this many times (0 = unlimited) */
    double probability; /* 0 -> 1.0; drawn from the run's PRNG */
    int64_t delay_ns;  /* DELAY */
    int64_t after_bytes; /* RESET after N bytes on the connection */
    const char *phase; /* CRASH: fire when the task enters this phase */
    const char *ranks; /* also aim at these global ranks ("5" or "5,9";
                          NULL = any): matched against the task's identity */
} ddp_sim_fault_t;

/* Adds a fault; returns its index. */
int ddp_sim_add_fault(ddp_sim_t *sim, const ddp_sim_fault_t *f);
const char *ddp_sim_fault_kind_name(ddp_sim_fault_kind_t k);
int ddp_sim_fault_kind_parse(const char *name, ddp_sim_fault_kind_t *out);

/* ---- accelerators on a simulated cluster ----
 * Starts the processes the way a real launcher would. DDP_SIM_LAUNCH_AUTO
 * picks the accelerator's usual one: for ddp, ddp_spawn, ddp_cpu and ddp2
 * one script process per node (NODE_RANK set; ddp and the spawners launch
 * the rest themselves); for ddp_hpc a SLURM job (one task per rank with
 * SLURM_* set, as srun would) and for ddp_cpu_hpc a torchrun job (RANK,
 * LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE). MPI sets OpenMPI's
 * OMPI_COMM_WORLD_* (+ PMIX_NAMESPACE), LSF jsrun's JSM_NAMESPACE_*, LSB_JOBID
 * and LSB_DJOB_RANKFILE (a virtual file: the launch node, then one line per
 * rank slot). Every process is also given MASTER_ADDR (node 0's host name
 * unless master_addr says otherwise) and MASTER_PORT, as a user exports
 * them, and runs ddp_accel_run. SLURM_NODELIST is the compressed hostlist of
 * the nodes' host names. */
typedef enum ddp_sim_launcher {
    DDP_SIM_LAUNCH_AUTO = 0,
    DDP_SIM_LAUNCH_PER_NODE, /* the user runs the script once per node */
    DDP_SIM_LAUNCH_SLURM,    /* srun */
    DDP_SIM_LAUNCH_TORCHRUN, /* torchrun / torch.distributed.run */
    DDP_SIM_LAUNCH_MPI,      /* mpirun (OpenMPI) */
    DDP_SIM_LAUNCH_LSF,      /* jsrun (LSF) */
    DDP_SIM_LAUNCH_COUNT
} ddp_sim_launcher_t;
const char *ddp_sim_launcher_name(ddp_sim_launcher_t l);
int ddp_sim_launcher_parse(const char *name, ddp_sim_launcher_t *out);

typedef struct ddp_sim_launch {
    const char *accelerator;
    int nodes, procs;        /* procs = processes (devices) per node */
    ddp_trainer_cfg_t cfg;   /* accelerator/num_nodes/num_processes are set
                                from the fields above unless already set */
    ddp_sim_launcher_t launcher;
    int tasks_per_node;      /* external launchers: tasks per node (0 ->
                                procs); a mismatch is SLURM's #4389 */
    uint16_t port;           /* MASTER_PORT; 0 -> 29500 */
    int no_port;             /* do not export MASTER_PORT */
    const char *master_addr; /* NULL -> node 0's host; "" -> not exported */
    int64_t master_start_ns; /* node 0's processes start late by this */
    int squat_port;          /* another process already listens on it */
    const ddp_env_t *extra_env; /* added to every process (may be NULL) */
    /* Last word on each process's environment (after everything above). */
    void (*edit_env)(ddp_env_t *env, int node, void *arg);
    void *edit_arg;
    int first_task;          /* filled: first task id it added */
} ddp_sim_launch_t;

int ddp_sim_launch_build(ddp_sim_t *sim, ddp_sim_launch_t *l);

/* ---- a store rendezvous workload (tests, benchmarks) ----
 * Adds a store-server task on node 0 (started at server_start_ns, or never
 * when server_start_ns < 0) and `ranks` rank tasks in equal blocks over the
 * nodes (rank r on node r * nodes / ranks); each rank connects to the store through the sim
 * sys (the real TCPStore client), runs wait-for-workers and the store
 * barrier, and records its outcome (rc, message, connect time). */
typedef struct ddp_sim_rendezvous {
    int ranks;
    const char *master; /* host name or address of the store; "node0"... */
    uint16_t port;      /* 0 -> 29500 */
    int64_t timeout_ns; /* each rank's deadline; 0 -> 300 s */
    int64_t server_start_ns; /* < 0: the server never starts */
    int64_t rank_start_ns;   /* every rank starts then */
    /* filled by the run */
    int done;                /* ranks that finished (ok or not) */
    int server_task;
    int first_rank_task;
} ddp_sim_rendezvous_t;

int ddp_sim_rendezvous_build(ddp_sim_t *sim, ddp_sim_rendezvous_t *rv);

#ifdef __cplusplus
}
#endif
#endif
