/* ddp/plugin.h — the shared DDP plugin (Lightning PR #4407).
 *
 * Every accelerator reaches the network only through these three members.
 * A NULL member means the shared default; a custom plugin overrides one
 * member and may call the default from it (see plugins/subgroups.c and
 * plugins/rpc.c). Behaviour of the default: docs/plugin.md.
 */
#ifndef DDP_PLUGIN_H
#define DDP_PLUGIN_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ddp/cluster.h"
#include "ddp/pg.h"
#include "ddp/store.h"
#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DDP_DEFAULT_PG_TIMEOUT_S 1800 /* init_process_group (Lightning 1.7+) */
#define DDP_DEFAULT_STORE_TIMEOUT_S 300 /* TCPStore's own timeout */
#define DDP_DEFAULT_RPC_PORT 15000    /* RPC_MASTER_PORT */
/* A run's identity ("ID@STARTED", set by `ddpsim run --real` for every
 * process): rank 0 leaves it in its store, every rank compares it there
 * first, and a rank that reached another run's store is refused ("port P
 * is serving another ddpsim run (started at T)"). Unset: no check. */
#define DDP_RUN_ID_ENV "DDPSIM_RUN"

typedef struct ddp_plugin ddp_plugin_t;
struct ddp_run_result;

/* What the user's Trainer(...) asked for. */
typedef struct ddp_trainer_cfg {
    const char *accelerator; /* ddp, ddp_spawn, ddp_cpu, ddp2, ddp_hpc,
                                ddp_cpu_hpc; NULL = "ddp" */
    int num_nodes;           /* 0 -> 1 */
    int num_processes;       /* devices (or CPU processes) per node; 0 -> 1 */
    int gpus;                /* > 0: GPU training (nccl by default) */
    const char *backend;     /* NULL = nccl on GPU, else tcp */
    const char *cluster;     /* cluster environment name; NULL = detect */
    const ddp_plugin_t *plugin; /* NULL = the default plugin */
    int64_t timeout_ns;       /* the group timeout: every wait of the
                                 connection (store connect, wait for workers,
                                 backend init, barriers); 0 -> 1800 s */
    int64_t store_timeout_ns; /* each single store request (SET, ADD, CHECK,
                                 GET of a key that exists), bounded by the
                                 group deadline too; 0 -> 300 s */
    int64_t train_ns;         /* after configure_ddp, "trains" (sleeps on the
                                 sys clock) this long before teardown, with
                                 the store up; 0: none */
    size_t model_bytes;       /* the "model": a parameter buffer; 0 -> 4096 */
    uint64_t seed;            /* backoff jitter etc. */
    ddp_store_proto_t store_protocol; /* the store client's generation;
                                         0 = auto */
    /* Called at the end of ddp_accel_run in every process that runs it,
     * workers an accelerator launched included (they share this cfg): a
     * harness collects outcomes here. NULL: none. */
    void (*on_result)(ddp_sys_t *sys, const struct ddp_run_result *res,
                      void *arg);
    void *on_result_arg;
} ddp_trainer_cfg_t;

/* A parameter buffer standing in for the model DDP wraps. */
typedef struct ddp_model {
    uint8_t *params;
    size_t bytes;
    uint64_t checksum; /* after configure_ddp: identical on every rank */
} ddp_model_t;

/* One rank's connection state, shared by accelerator and plugin. */
typedef struct ddp_ctx {
    ddp_sys_t *sys;
    const ddp_trainer_cfg_t *cfg;
    ddp_cluster_t *cluster;
    const char *accelerator; /* the one chosen */
    int global_rank, local_rank, node_rank, world_size;
    int on_gpu;
    char backend[16];        /* chosen by init_ddp_connection */
    int64_t deadline;        /* the group deadline (absolute) */
    ddp_store_t *store;      /* client of the rendezvous store */
    ddp_store_t *pg_store;   /* prefix store "default_pg" over it */
    ddp_store_server_t *server; /* rank 0's server */
    ddp_thread_t server_thread;
    int server_running;
    ddp_pg_t *pg;            /* the default process group */
    ddp_pg_t *ddp_group;     /* group configure_ddp uses (NULL = pg) */
    void *plugin_state;      /* owned by a custom plugin: a plugin that sets
                                it overrides teardown and frees it there */
    int init_calls;          /* how many times init_ddp_connection ran */
    int status;              /* the run's first error when teardown starts
                                (0: none); teardown records its own failure
                                here when it is the first */
    int barrier_done;        /* the teardown barrier ran (ddp_plugin_teardown_barrier) */
    ddp_pid_t children[64];  /* processes this one launched */
    int nchildren;
} ddp_ctx_t;

struct ddp_plugin {
    const char *name;
    int (*init_ddp_connection)(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                               ddp_cluster_t *cluster_env, int global_rank,
                               int world_size);
    int (*configure_ddp)(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                         ddp_model_t *model);
    void (*teardown)(const ddp_plugin_t *self, ddp_ctx_t *ctx);
    void *data; /* for the plugin's own use */
    /* The plugin's own phases (NULL-terminated; NULL: none), the names it
     * passes to ddp_ident_set_phase: a scenario running this plugin may aim
     * `fault crash phase="NAME"` at them (docs/scenario-format.md). Static
     * storage, names of at most 47 characters. */
    const char *const *phases;
};

/* The shared defaults (callable from custom members). */
DDP_API int ddp_plugin_default_init_ddp_connection(const ddp_plugin_t *self,
                                           ddp_ctx_t *ctx,
                                           ddp_cluster_t *cluster_env,
                                           int global_rank, int world_size);
DDP_API int ddp_plugin_default_configure_ddp(const ddp_plugin_t *self, ddp_ctx_t *ctx,
                                     ddp_model_t *model);
DDP_API void ddp_plugin_default_teardown(const ddp_plugin_t *self, ddp_ctx_t *ctx);

/* The timeouts of a Trainer configuration, defaults applied (the one
 * place they are resolved). */
DDP_API int64_t ddp_trainer_timeout_ns(const ddp_trainer_cfg_t *cfg);
DDP_API int64_t ddp_trainer_store_timeout_ns(const ddp_trainer_cfg_t *cfg);
/* The deadline of one store request: now + the store timeout, but never
 * past the group deadline. */
DDP_API int64_t ddp_plugin_store_deadline(const ddp_ctx_t *ctx);

/* Teardown's barrier: every rank waits for every other (all ranks in the
 * default group), bounded by ctx->deadline, so that rank 0 takes the store
 * down only when everyone is done with it. Runs once per teardown (a
 * custom teardown that must stop something of its own after everyone is
 * done calls it first); skipped after a failed run (ctx->status), as
 * Lightning's teardown is after an exception. A failure is recorded in
 * ctx->status when it is the first. */
DDP_API int ddp_plugin_teardown_barrier(ddp_ctx_t *ctx);

/* Dispatch: the plugin's member, or the default where it is NULL. The
 * dispatcher sets the rank's identity (ctx and the thread's ddp_ident_*:
 * rank, world size) and phase before each member, and gives teardown a
 * fresh group deadline. */
DDP_API int ddp_plugin_init_ddp_connection(const ddp_plugin_t *p, ddp_ctx_t *ctx,
                                   ddp_cluster_t *cluster_env, int global_rank,
                                   int world_size);
DDP_API int ddp_plugin_configure_ddp(const ddp_plugin_t *p, ddp_ctx_t *ctx,
                             ddp_model_t *model);
DDP_API void ddp_plugin_teardown(const ddp_plugin_t *p, ddp_ctx_t *ctx);

/* ---- plugin libraries (docs/plugin.md) ----
 * A plugin of your own, built as a shared library, exports one versioned
 * descriptor named DDP_PLUGIN_SYMBOL, as NCCL's net plugins do:
 *
 *   DDP_PLUGIN_EXPORT const ddp_plugin_v1_t ddp_plugin_v1 = {
 *       DDP_PLUGIN_ABI_VERSION, "mine", &mine_plugin};
 *
 * ddpsim reads abi_version first and refuses another version, naming both.
 * The version changes whenever ddp_plugin_t, ddp_ctx_t or the descriptor
 * change their layout. Build the library without -lddpsim (cc -shared
 * -fPIC $(pkg-config --cflags ddpsim)): its ddp_* calls bind to the
 * ddpsim that loads it. */
#define DDP_PLUGIN_ABI_VERSION 1
#define DDP_PLUGIN_SYMBOL "ddp_plugin_v1"
#define DDP_PLUGIN_NAME_MAX 31 /* characters of a loaded plugin's name */
#if defined(__GNUC__) || defined(__clang__)
#define DDP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define DDP_PLUGIN_EXPORT
#endif
typedef struct ddp_plugin_v1 {
    uint32_t abi_version;       /* DDP_PLUGIN_ABI_VERSION it was built with */
    const char *name;           /* the plugin's name: plugin->name */
    const ddp_plugin_t *plugin; /* its table (static storage) */
} ddp_plugin_v1_t;

/* Loads the plugin library at path (a file path; relative paths from the
 * current directory) through sys (NULL: a POSIX sys of this host), checks
 * its descriptor and registers its plugin under its name. Loading the
 * same file again gives the same plugin. 0 and *out, or a negative code
 * with the error context and a hint filled: -ENOENT (no such file),
 * DDP_ECONFIG (not a loadable library, no DDP_PLUGIN_SYMBOL, another
 * ABI version, an empty descriptor, a name clash with a built-in or
 * registered plugin). */
DDP_API int ddp_plugin_load(ddp_sys_t *sys, const char *path, const ddp_plugin_t **out);
/* The absolute path of the library p was loaded from; NULL for a plugin
 * built in or registered by the program. */
DDP_API const char *ddp_plugin_library(const ddp_plugin_t *p);
/* 1 when value names a plugin library rather than a plugin (it has a '/'
 * or ends in ".so"), else 0: how options taking either tell them apart. */
DDP_API int ddp_plugin_is_library_path(const char *value);

/* Registry: "default", "subgroups", "rpc". */
DDP_API size_t ddp_plugin_count(void);
DDP_API const ddp_plugin_t *ddp_plugin_at(size_t i);
/* NULL when no plugin has that name, with DDP_ENOT_FOUND, the names and a
 * hint in the error context. */
DDP_API const ddp_plugin_t *ddp_plugin_find(const char *name);
/* Adds a plugin (static storage; not thread-safe: call before running).
 * At most 64, the three built in included (DDP_ELIMIT beyond). */
DDP_API int ddp_plugin_register(const ddp_plugin_t *p);

/* Model helpers. */
DDP_API int ddp_model_init(ddp_model_t *m, size_t bytes, uint64_t seed);
DDP_API void ddp_model_free(ddp_model_t *m);
DDP_API uint64_t ddp_model_checksum(const ddp_model_t *m);

#ifdef __cplusplus
}
#endif
#endif
