/* ddp/plan.h — a launch plan: one run as plain data.
 *
 * A plan says which nodes exist, which processes start on which node, when,
 * with exactly which environment, what each process runs (its entry: the
 * Trainer's accelerator and configuration, the plugin by name, or a port
 * holder, or a foreign program), and which faults hit whom and when. It is
 * built once, from a scenario for one accelerator (or from a launch
 * description in code), and then executed: by the simulator
 * (ddp_plan_simulate: nodes, tasks and faults of a fresh simulation) and by
 * the real runner (harness/real.c: processes, namespaces, signals). A real
 * child process reads its part back from the plan file the runner wrote
 * (ddp_plan_read + its process index): nothing about a run is encoded twice.
 *
 * Everything here is owned by the plan and freed by ddp_plan_free.
 */
#ifndef DDP_PLAN_H
#define DDP_PLAN_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ddp/env.h"
#include "ddp/plugin.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a process of the plan runs. */
typedef enum ddp_plan_kind {
    DDP_PLAN_TRAINER = 0, /* the "training script": ddp_accel_run(entry) */
    DDP_PLAN_PORT_HOLDER, /* listens on `port` and accepts nothing */
    DDP_PLAN_EXEC,        /* a foreign program (entry.exec; real runs only) */
    DDP_PLAN_STORE,       /* the job's store, hosted for a foreign program on
                             `port` (real runs, as torchrun's agent does) */
    DDP_PLAN_AGENT,       /* torchrun's elastic agent (harness/elastic.c):
                             rendezvous, then the entry's workers */
    DDP_PLAN_KIND_COUNT
} ddp_plan_kind_t;

DDP_API const char *ddp_plan_kind_name(ddp_plan_kind_t k);

/* The Trainer every DDP_PLAN_TRAINER process runs (and the command line
 * of DDP_PLAN_EXEC processes). Plain data: the plugin is named, and found
 * in the plugin registry when the process starts. */
typedef struct ddp_plan_entry {
    char accelerator[16];
    int num_nodes, num_processes, gpus;
    char backend[16];   /* "" = nccl on GPU, else tcp */
    char cluster[16];   /* "" = detect */
    char plugin[32];    /* "" = the default plugin */
    char plugin_lib[512]; /* its library's absolute path ("" built in): a
                             process loads it before it looks the plugin up */
    int64_t timeout_ns; /* group timeout; 0 = the default */
    int64_t store_timeout_ns; /* store requests; 0 = the default */
    int64_t train_ns;
    uint64_t seed;
    int store_protocol; /* ddp_store_proto_t of the store client */
    char exec[1024];    /* DDP_PLAN_EXEC: a shell command line */
} ddp_plan_entry_t;

typedef struct ddp_plan_node {
    char host[64];
    char addr[48]; /* numeric: the simulator's, or the real runner's */
} ddp_plan_node_t;

typedef struct ddp_plan_proc {
    char name[32];
    int node;
    int rank;          /* the launcher's global rank; -1: a per-node script */
    int64_t start_ns;  /* from the run's start */
    ddp_plan_kind_t kind;
    uint16_t port;     /* DDP_PLAN_PORT_HOLDER, DDP_PLAN_STORE */
    int job;           /* 0: the run's job; 1: a second job launched beside
                          it (scenario `second_job`), judged apart */
    ddp_env_t *env;    /* exactly the environment the process gets */
} ddp_plan_proc_t;

/* A node's own network: an interface address, a name its resolver answers
 * first, its listen backlog cap (scenario `iface`, `resolve`, `somaxconn`).
 * node -1: every node. */
typedef enum ddp_net_kind { DDP_NET_IFACE, DDP_NET_RESOLVE, DDP_NET_SOMAXCONN } ddp_net_kind_t;
typedef struct ddp_plan_net {
    int kind;              /* ddp_net_kind_t */
    int node;
    char name[64], value[64]; /* somaxconn: name "", value the number */
} ddp_plan_net_t;
DDP_API const char *ddp_net_kind_name(int kind); /* "iface", "resolve", "somaxconn" */

typedef struct ddp_plan_file {
    char *path, *content; /* a file the processes read (LSF's rank file) */
} ddp_plan_file_t;

typedef struct ddp_plan {
    char name[160];      /* the scenario's title */
    uint64_t seed;       /* the run's seed (simulation, fault draws) */
    int64_t latency_ns;  /* base one-way latency (0: the simulator's) */
    int expected_world;  /* ranks the Trainer asks for */
    int64_t limit_ns;    /* the run must be over by then (virtual or real) */
    size_t store_memory; /* the hosted store's max_memory (0: its default) */
    int discover;        /* every process records each distinct event it
                            sees (a key set or waited on, a join, a phase)
                            as an E record, wanted by a fault or not:
                            `ddpsim check --exec`'s discovery */
    ddp_plan_entry_t entry;
    ddp_plan_node_t *nodes;
    int nnodes;
    ddp_plan_proc_t *procs;
    int nprocs;
    ddp_fault_t *faults; /* .ranks and .phase owned by the plan */
    int *fault_line;         /* the scenario line of each (0: none) */
    int nfaults;
    ddp_plan_file_t *files;
    int nfiles;
    ddp_plan_net_t *net;
    int nnet;
    /* Real runs only: where processes append their result records, and
     * the runner's clock reading that is time 0 of the run. */
    char results[256];
    int64_t t0;
} ddp_plan_t;

/* An empty plan (no nodes, no processes). */
DDP_API ddp_plan_t *ddp_plan_new(void);
DDP_API void ddp_plan_free(ddp_plan_t *p);

DDP_API int ddp_plan_add_node(ddp_plan_t *p, const char *host, const char *addr);
/* Appends a process; env is copied (NULL: empty). Returns its index. */
DDP_API int ddp_plan_add_proc(ddp_plan_t *p, const char *name, int node, int rank,
                      int64_t start_ns, ddp_plan_kind_t kind,
                      const ddp_env_t *env);
/* Appends a copy of f (its ranks and phase strings copied). */
DDP_API int ddp_plan_add_fault(ddp_plan_t *p, const ddp_fault_t *f, int line);
DDP_API int ddp_plan_add_file(ddp_plan_t *p, const char *path, const char *content);
DDP_API int ddp_plan_add_net(ddp_plan_t *p, int kind, int node, const char *name,
                             const char *value);
/* The DDPSIM_HOSTS table of a process on `node`: that node's resolve
 * entries first, then every node's name and address (malloc'd). */
DDP_API char *ddp_plan_hosts_table(const ddp_plan_t *p, int node);

/* How an accelerator's processes are started (what launchers do). */
typedef enum ddp_launcher {
    DDP_LAUNCH_AUTO = 0,
    DDP_LAUNCH_PER_NODE, /* the user runs the script once per node */
    DDP_LAUNCH_SLURM,    /* srun */
    DDP_LAUNCH_TORCHRUN, /* torchrun / torch.distributed.run */
    DDP_LAUNCH_MPI,      /* mpirun (OpenMPI) */
    DDP_LAUNCH_LSF,      /* jsrun (LSF) */
    DDP_LAUNCH_KUBEFLOW, /* a Kubeflow PyTorchJob: one process per pod */
    DDP_LAUNCH_ELASTIC,  /* torchrun --rdzv_backend=c10d: an agent per node */
    DDP_LAUNCH_COUNT
} ddp_launcher_t;
DDP_API const char *ddp_launcher_name(ddp_launcher_t l);
DDP_API int ddp_launcher_parse(const char *name, ddp_launcher_t *out);
/* The launcher an accelerator is started by when none is asked for:
 * srun for ddp_hpc, torchrun for ddp_cpu_hpc, else once per node. */
DDP_API ddp_launcher_t ddp_launcher_for(const char *accelerator, ddp_launcher_t asked);

/* A launch: the processes an accelerator's launcher starts on `nodes`
 * nodes. DDP_LAUNCH_AUTO picks ddp_launcher_for(). Per-node launches run
 * one script per node (NODE_RANK set; ddp and the spawners start the rest
 * themselves); SLURM sets SLURM_* as srun would (one task per rank),
 * torchrun RANK, LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE, MPI
 * OpenMPI's OMPI_COMM_WORLD_* (+ PMIX_NAMESPACE), LSF jsrun's
 * JSM_NAMESPACE_*, LSB_JOBID and LSB_DJOB_RANKFILE (a plan file: the
 * launch node, then one line per rank slot). Every process also gets
 * MASTER_ADDR (node 0's host unless master_addr says otherwise) and
 * MASTER_PORT, as a user exports them. SLURM_NODELIST is the compressed
 * hostlist of the nodes' host names. */
typedef struct ddp_launch {
    int procs;              /* processes (devices) per node */
    ddp_launcher_t launcher;
    int tasks_per_node;     /* external launchers' tasks per node (0 ->
                               procs); a mismatch is SLURM's #4389 */
    uint16_t port;          /* MASTER_PORT; 0 -> 29500 */
    int no_port;            /* do not export MASTER_PORT */
    const char *master_addr; /* NULL -> node 0's host; "" -> not exported */
    int64_t master_start_ns; /* node 0's processes start late by this */
    uint16_t squat_port;     /* a port holder on node 0 holds this port */
    const ddp_env_t *extra_env; /* added to every process (may be NULL) */
    /* Last word on each process's environment (after everything above). */
    void (*edit_env)(ddp_env_t *env, int node, void *arg);
    void *edit_arg;
    int job;                 /* the processes' job (ddp_plan_proc_t.job):
                                1 names them j2.*, starts them job_start_ns
                                late and adds no port holder */
    int64_t job_start_ns;
} ddp_launch_t;

/* Adds the launch's processes to p, whose nodes and entry are set (the
 * entry's accelerator picks the launcher). */
DDP_API int ddp_plan_launch(ddp_plan_t *p, const ddp_launch_t *l);

/* The Trainer configuration of the plan's entry (cfg->plugin resolved by
 * name: DDP_ENOT_FOUND when no such plugin is registered). */
DDP_API int ddp_plan_trainer_cfg(const ddp_plan_t *p, ddp_trainer_cfg_t *cfg);
/* The entry of a Trainer configuration (the plugin must be registered). */
DDP_API int ddp_plan_entry_of(const ddp_trainer_cfg_t *cfg, ddp_plan_entry_t *e);

/* ---- executing a plan in the simulator ----
 * A fresh simulation with the plan's nodes, files and faults, and one task
 * per process (their ids are first_task + process index). Trainer tasks run
 * ddp_accel_run with the plan's entry; every process an accelerator starts
 * reports its own result (root cause, rank, world size) as its outcome.
 * so: the simulation options (seed and latency come from the plan when 0).
 * A DDP_PLAN_EXEC process (a foreign program) is modelled by the Trainer of
 * the entry, with the same environment. */
DDP_API int ddp_plan_simulate(const ddp_plan_t *p, const ddp_sim_opts_t *so,
                      ddp_sim_t **out, int *first_task);
/* The same tasks added to an existing simulation that has the nodes. */
DDP_API int ddp_plan_add_tasks(const ddp_plan_t *p, ddp_sim_t *sim, int *first_task);

/* ---- the plan file (real runs) ----
 * A line-based text form, written by the real runner and read back by each
 * process it starts (`ddpsim train --plan FILE --process N`). Reading
 * gives errors as "FILE:LINE: expected ..., got ...". */
DDP_API int ddp_plan_write(const ddp_plan_t *p, FILE *out);
DDP_API int ddp_plan_read(ddp_sys_t *sys, const char *path, ddp_plan_t **out);

#ifdef __cplusplus
}
#endif
#endif
