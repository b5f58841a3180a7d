/* ddp/faults.h — every libfiu fault point of ddpsim, in one list.
 *
 * A fault point is a named libfiu point (fiu_fail) guarding one step: an OS
 * call of the sys seam, a store request, a ring handshake. The list below is
 * the only place the names are spelled: the POSIX sys (core/sys_posix.c), the
 * simulator's sys (sim/sim_net.c), the store, the backends and the phase
 * hook refer to a point by its id, the scenario validator looks a name up
 * with ddp_fault_point_find, and docs/fault-points.md is generated from the
 * list (`make fault-points-doc`; `make test` checks that it is current).
 *
 * X(ID, name, layer, where, default errno, what it fails)
 *  - layer: the DDP_FP_LAYER_* the point belongs to (its table in the doc);
 *  - where: which sys implementations check it (DDP_FP_POSIX, DDP_FP_SIM;
 *    0 for points above the seam, which run on either);
 *  - default errno: what the point fails with when failinfo is not a
 *    positive errno; 0 where the point ignores failinfo (it drops a
 *    connection or cuts a wait short instead of returning an errno).
 *
 * Armed points. In a simulated task (the simulator's threads), a point
 * consults libfiu only while it is armed: enabled through the functions
 * below or by the simulator's fault engine. Every other point costs one
 * thread-local and one array read, so a run with no fault on a point pays
 * nothing for it. Everywhere else (real processes, tests on real sockets)
 * every point consults libfiu, since fiu-run and fiu-ctrl enable points from
 * outside the program, where ddpsim cannot see it; there a point costs a
 * read lock next to a system call.
 */
#ifndef DDP_FAULTS_H
#define DDP_FAULTS_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ddp_fault_layer {
    DDP_FP_LAYER_SYS = 0,     /* the OS seam (ddp/sys.h) */
    DDP_FP_LAYER_PHASE,       /* phase changes (ddp_ident_set_phase) */
    DDP_FP_LAYER_STORE_CLIENT,
    DDP_FP_LAYER_STORE_SERVER,
    DDP_FP_LAYER_PG_TCP,      /* the tcp process-group backend */
    DDP_FP_LAYER_PG_NCCL,     /* the nccl process-group backend */
    DDP_FP_LAYER_COUNT
} ddp_fault_layer_t;

enum { DDP_FP_POSIX = 1, DDP_FP_SIM = 2 };

/* clang-format off */
#define DDP_FAULT_POINTS(X)                                                    \
    X(SYS_TIME_SLEEP, "sys/time/sleep", DDP_FP_LAYER_SYS, DDP_FP_POSIX, EINTR, \
      "`sleep_until`. The store client's backoff between connect attempts "   \
      "stops the retry loop, and connect fails with that errno. Rank 0 of "   \
      "`ddp_store_wait_for_workers` returns it. The memory store's blocking " \
      "ops and `queue_pop` also sleep. **Pitfall:** `px_wait` sleeps 2 ms "   \
      "between `waitpid` polls and ignores the result, so this point turns "  \
      "every `wait` into a busy loop; `thread_join` sleeps 1 ms between "     \
      "checks, and turns into a busy loop as well.")                          \
    X(SYS_NET_RESOLVE, "sys/net/resolve", DDP_FP_LAYER_SYS,                    \
      DDP_FP_POSIX | DDP_FP_SIM, EHOSTUNREACH,                                 \
      "`resolve`. Fires before the numeric-address check, so `127.0.0.1` "    \
      "\"fails to resolve\" too. The store client treats `EHOSTUNREACH` as "  \
      "retryable and keeps trying until its deadline. "                       \
      "`ddp_store_server_new` with a host fails. In the simulator it always " \
      "fails with `DDP_ENOT_FOUND` (\"cannot resolve host ... (injected)\"); " \
      "the errno only appears in the message. The fault engine's `resolve` "  \
      "faults go through it.")                                                 \
    X(SYS_NET_HOSTNAME, "sys/net/hostname", DDP_FP_LAYER_SYS, DDP_FP_POSIX,    \
      EFAULT,                                                                  \
      "`hostname`. The LSF environment's `node_rank` and the tcp backend's "  \
      "listen address use it (the backend then publishes 127.0.0.1 with a "   \
      "warning).")                                                             \
    X(SYS_NET_LISTEN, "sys/net/listen", DDP_FP_LAYER_SYS,                      \
      DDP_FP_POSIX | DDP_FP_SIM, EADDRINUSE,                                   \
      "`listen`. `ddp_store_server_new`: with the default host `::`, "        \
      "`EADDRINUSE` fails at once (no IPv4 retry), and any other errno falls " \
      "back to `0.0.0.0`, which fails too. `ddp_sys_free_port` uses it as "   \
      "well, and so do the Lightning environment's `main_port` when "         \
      "`MASTER_PORT` is unset and the tcp backend's listener.")                \
    X(SYS_NET_ACCEPT, "sys/net/accept", DDP_FP_LAYER_SYS,                      \
      DDP_FP_POSIX | DDP_FP_SIM, ECONNABORTED,                                 \
      "`accept`. The store server's accept loop: most errnos are logged at "  \
      "debug level and the listener is polled again. Because the pending "    \
      "connection stays queued, the server **spins at high CPU** without "    \
      "ever accepting. With `failinfo=24` (`EMFILE`), `23`, `105` or `12`, "  \
      "the server takes its \"raise ulimit -n\" path instead: a warning, "    \
      "then a 100 ms accept pause. The tcp backend retries `ECONNABORTED` "   \
      "until its deadline.")                                                   \
    X(SYS_NET_CONNECT, "sys/net/connect", DDP_FP_LAYER_SYS,                    \
      DDP_FP_POSIX | DDP_FP_SIM, ECONNREFUSED,                                 \
      "`connect`. Fires before any OS call, so a fired connect opens no "     \
      "socket. The store client retries the attempt with jittered backoff "   \
      "(`retryable()` in `core/store_client.c`: refused, reset, aborted, "    \
      "`EPIPE`, `ETIMEDOUT`, unreachable, `EAGAIN`, `EINTR`, "                \
      "`EADDRNOTAVAIL`, and others); a non-retryable errno such as 13 "       \
      "`EACCES` fails at once. In the simulator, failinfo 110 (`ETIMEDOUT`) " \
      "**black-holes** the connect: no SYN is sent and the call waits until " \
      "its deadline, then returns `DDP_ETIMEOUT`. The fault engine's "        \
      "`refuse`, `reset` and `blackhole` faults go through it.")              \
    X(SYS_NET_SEND, "sys/net/send", DDP_FP_LAYER_SYS,                          \
      DDP_FP_POSIX | DDP_FP_SIM, ECONNRESET,                                   \
      "`send`. The store client's request sends (VALIDATE, PING, every op), " \
      "the store server's reply writes and every tcp ring send.")             \
    X(SYS_NET_RECV, "sys/net/recv", DDP_FP_LAYER_SYS,                          \
      DDP_FP_POSIX | DDP_FP_SIM, ECONNRESET,                                   \
      "`recv`. The store client's reply reads, the store server's request "   \
      "reads and every tcp ring receive.")                                     \
    X(SYS_NET_POLL, "sys/net/poll", DDP_FP_LAYER_SYS,                          \
      DDP_FP_POSIX | DDP_FP_SIM, EINTR,                                        \
      "`poll`. The store client's wait for a reply (a hint only: the recv "   \
      "that follows still has the deadline), the tcp backend's ring steps "   \
      "(it retries `EINTR` and `EAGAIN` until its deadline), the real runs' " \
      "delay proxy, and the store server where the sys has no epoll ops.")    \
    X(SYS_NET_EPOLL, "sys/net/epoll", DDP_FP_LAYER_SYS,                        \
      DDP_FP_POSIX | DDP_FP_SIM, EINTR,                                        \
      "`epoll_wait`. The store server's event loop treats `EINTR` and "       \
      "`EAGAIN` as \"no events\", so with the default errno the server "       \
      "**spins** and serves nobody. Any other errno is fatal: "               \
      "`ddp_store_server_run` returns it and `ddpsim store serve` exits 1. "  \
      "A sys without epoll ops gets the wait emulated over `poll`, so "       \
      "`sys/net/poll` applies there instead.")                                \
    X(SYS_FS_READ, "sys/fs/read", DDP_FP_LAYER_SYS, DDP_FP_POSIX | DDP_FP_SIM, \
      EIO,                                                                     \
      "`read_file`. The LSF rank file (`LSB_DJOB_RANKFILE`), scenario files " \
      "and their includes (`ddp_scenario_load`), plan files of real runs. "   \
      "`somaxconn` "                                                           \
      "reads `/proc/sys/net/core/somaxconn` through this op and quietly "     \
      "falls back to 4096 on failure.")                                        \
    X(SYS_PROC_SPAWN, "sys/proc/spawn", DDP_FP_LAYER_SYS,                      \
      DDP_FP_POSIX | DDP_FP_SIM, EAGAIN,                                       \
      "`spawn`. `ddpsim demo` when it starts each rank, and the accelerators " \
      "that start their own worker processes (`ddp_accel_launch`).")        \
    X(SYS_PROC_WAIT, "sys/proc/wait", DDP_FP_LAYER_SYS, DDP_FP_POSIX, ECHILD,  \
      "`wait`. `ddpsim demo` when it collects ranks. After a failed wait it " \
      "kills the rank (signal 9) and waits again, which fails again.")        \
    X(SYS_PROC_KILL, "sys/proc/kill", DDP_FP_LAYER_SYS, DDP_FP_POSIX, ESRCH,   \
      "`kill`. `ddpsim demo`, only after a wait failed.")                     \
    X(SYS_PROC_THREAD, "sys/proc/thread", DDP_FP_LAYER_SYS,                    \
      DDP_FP_POSIX | DDP_FP_SIM, EAGAIN,                                       \
      "`thread_start`. Rank 0's store server thread: init_ddp_connection "    \
      "fails with that errno. `thread_join` has no point of its own.")        \
    X(DDP_PHASE_ENTER, "ddp/phase/enter", DDP_FP_LAYER_PHASE, 0, 0,            \
      "Nothing by itself: `ddp_ident_set_phase()` runs "                      \
      "`fiu_do_on(name, (void)0)`, so that the simulator's callback can "     \
      "record every phase change in the trace and crash a task as it enters " \
      "a phase (a `crash` fault with `phase=`). Setting the phase a rank is " \
      "already in is no change and does not reach the point. Enabling it "   \
      "with `fiu-run` changes nothing visible.")                               \
    X(STORE_CLIENT_CONNECT, "store/client/connect", DDP_FP_LAYER_STORE_CLIENT, \
      0, ECONNREFUSED,                                                         \
      "Fires once per connect attempt, after name resolution and before the " \
      "TCP connect. Retried if `retryable()`.")                               \
    X(STORE_CLIENT_VALIDATE, "store/client/validate",                          \
      DDP_FP_LAYER_STORE_CLIENT, 0, ECONNRESET,                                \
      "Fires after the TCP connect and before VALIDATE is sent. The "         \
      "connection is closed (\"handshake fault\") and the attempt is "        \
      "retried.")                                                              \
    X(STORE_CLIENT_WAIT, "store/client/wait", DDP_FP_LAYER_STORE_CLIENT, 0, 0, \
      "A WAIT behaves as if its deadline had already passed: the client "     \
      "sends CANCEL_WAIT and re-syncs the reply stream. `get`, `wait`, "      \
      "`multi_get`, `queue_pop` and the store barrier then fail with "        \
      "`DDP_ETIMEOUT` after 0.0 s, even when the key exists.")                \
    X(STORE_CLIENT_SEND, "store/client/send", DDP_FP_LAYER_STORE_CLIENT, 0,    \
      ECONNRESET,                                                              \
      "Fires before every request is sent. The connection is marked lost: "   \
      "the op fails with `DDP_EPEER_LOST` (or `DDP_ETIMEOUT` when failinfo "  \
      "is `EAGAIN`), and later ops on the same client fail at once. During "  \
      "connect (VALIDATE/PING) the attempt is retried.")                      \
    X(STORE_CLIENT_RECV, "store/client/recv", DDP_FP_LAYER_STORE_CLIENT, 0,    \
      ECONNRESET,                                                              \
      "Fires before every reply read, including the one-byte WAIT reply. "    \
      "Same effect as `store/client/send`.")                                  \
    X(STORE_SERVER_ACCEPT, "store/server/accept", DDP_FP_LAYER_STORE_SERVER,   \
      0, 0,                                                                    \
      "A freshly accepted connection is closed at once. The client sees EOF " \
      "or a reset on its PING.")                                               \
    X(STORE_SERVER_VALIDATE, "store/server/validate",                          \
      DDP_FP_LAYER_STORE_SERVER, 0, 0,                                         \
      "A correct VALIDATE is refused and the connection is dropped.")         \
    X(STORE_SERVER_RECV, "store/server/recv", DDP_FP_LAYER_STORE_SERVER, 0, 0, \
      "The connection is dropped when it next becomes readable, before "      \
      "anything is read.")                                                     \
    X(STORE_SERVER_REPLY, "store/server/reply", DDP_FP_LAYER_STORE_SERVER, 0,  \
      0,                                                                       \
      "The request takes effect but its reply is never sent, and the "        \
      "connection is dropped (a master dying mid-request). It applies to "    \
      "every op that has a reply: COMPARE_SET, GET, ADD, CHECK, WAIT (when "  \
      "it completes), GETNUMKEYS, DELETE_KEY, MULTI_GET, CANCEL_WAIT, PING, " \
      "QUEUE_POP, QUEUE_LEN, LIST_KEYS; not to VALIDATE, SET, APPEND, "       \
      "QUEUE_PUSH, MULTI_SET. Because the client's handshake PING has a "     \
      "reply, enabling this point permanently makes every new client fail "   \
      "to connect.")                                                           \
    X(STORE_SERVER_SEND, "store/server/send", DDP_FP_LAYER_STORE_SERVER, 0, 0, \
      "The connection is dropped just before queued replies would be "        \
      "written.")                                                              \
    X(PG_TCP_CONNECT, "pg/tcp/connect", DDP_FP_LAYER_PG_TCP, 0, ECONNREFUSED,  \
      "Each connect attempt to the ring successor during bootstrap. Retried " \
      "with backoff until the group deadline.")                               \
    X(PG_TCP_HANDSHAKE, "pg/tcp/handshake", DDP_FP_LAYER_PG_TCP, 0, EPROTO,    \
      "Connecting side: the hello (magic, rank, world, group hash) send "     \
      "fails and the connect is retried. Accepting side: the hello is judged " \
      "a stray and the connection is closed; the accept goes on until the "   \
      "deadline, and the successor, which sees its connection closed, "       \
      "connects again.")                                                       \
    X(PG_NCCL_UID, "pg/nccl/uid", DDP_FP_LAYER_PG_NCCL, 0, ECONNRESET,         \
      "The unique-id exchange through the store fails before touching the "   \
      "store.")                                                                \
    X(PG_NCCL_INIT, "pg/nccl/init", DDP_FP_LAYER_PG_NCCL, 0, 0,                \
      "Checked just before `ncclCommInitRankConfig`. With failinfo > 0 the "  \
      "rank fails with that errno without joining; with failinfo 0 the "      \
      "communicator is created but never treated as ready, so it is aborted " \
      "(`ncclCommAbort`) at the deadline. Needs a GPU.")
/* clang-format on */

typedef enum ddp_fault_id {
#define DDP__FP_ENUM(id, name, layer, where, deferr, fails) DDP_FP_##id,
    DDP_FAULT_POINTS(DDP__FP_ENUM)
#undef DDP__FP_ENUM
    DDP_FP_COUNT
} ddp_fault_id_t;

typedef struct ddp_fault_info {
    ddp_fault_id_t id;
    const char *name;       /* "sys/net/connect" */
    ddp_fault_layer_t layer;
    int where;              /* DDP_FP_POSIX | DDP_FP_SIM, or 0 */
    int deferr;             /* default errno (positive), 0: ignores failinfo */
    const char *fails;      /* what a fault there does (Markdown) */
} ddp_fault_info_t;

/* The point's row (id < DDP_FP_COUNT), NULL otherwise. */
DDP_API const ddp_fault_info_t *ddp_fault_info(ddp_fault_id_t id);
static inline const char *ddp_fault_name(ddp_fault_id_t id)
{
    const ddp_fault_info_t *i = ddp_fault_info(id);
    return i ? i->name : "?";
}
/* The point named exactly `name` (case-sensitive, as libfiu), NULL when
 * there is none: what the scenario validator checks a fault's point with. */
DDP_API const ddp_fault_info_t *ddp_fault_point_find(const char *name);
/* 1 when `pattern` names point id: the exact name, or a libfiu wildcard
 * ("sys/net/" followed by a star, or a star alone), which matches every
 * name starting with what comes before the star. */
DDP_API int ddp_fault_point_matches(const char *pattern, ddp_fault_id_t id);
/* "sys", "phase", "store client", "store server", "tcp backend",
 * "nccl backend". */
DDP_API const char *ddp_fault_layer_name(ddp_fault_layer_t layer);

/* ---- checking a point (the call sites) ---- */

/* 1 when the point fires now (armed, or consulted, and libfiu says so);
 * for points that ignore failinfo. fiu_failinfo() holds the failinfo. */
DDP_API int ddp_fault_hit(ddp_fault_id_t id);
/* 0 when the point is off; when it fires, -failinfo (or the point's default
 * errno when failinfo is not a positive errno), with the error context set
 * to "fault point NAME fired (strerror)". */
DDP_API int ddp_fault_fire(ddp_fault_id_t id);
/* 1 when a check of the point consults libfiu in this thread. */
DDP_API int ddp_fault_armed(ddp_fault_id_t id);

/* ---- arming (tests, the fault engine, harnesses) ----
 * The same arguments as libfiu's fiu_enable*, fiu_disable (fiu-control.h):
 * they arm every listed point the name matches (wildcards too), then call
 * libfiu. A name of a point not in the list (a plugin's own) is passed on
 * to libfiu as it is. Returns libfiu's result (0 ok, -1 failed). */
typedef int (*ddp_fault_cb_t)(const char *name, int *failnum, void **failinfo,
                              unsigned int *flags);
DDP_API int ddp_fault_enable(const char *name, int failnum, void *failinfo,
                     unsigned int flags);
DDP_API int ddp_fault_enable_random(const char *name, int failnum, void *failinfo,
                            unsigned int flags, float probability);
DDP_API int ddp_fault_enable_external(const char *name, int failnum, void *failinfo,
                              unsigned int flags, ddp_fault_cb_t cb);
DDP_API int ddp_fault_disable(const char *name);

/* In the calling thread only: 1 makes unarmed points skip libfiu (the
 * simulator's tasks: each task thread, or the thread that runs the tasks as
 * contexts, for the length of the run), 0 (every thread's default) consults
 * libfiu at every point. Returns the thread's previous setting. */
DDP_API int ddp_fault_thread_armed_only(int on);

/* ==== the fault model: one spec, one matcher, every executor ====
 *
 * A fault (ddp_fault_t) is what a scenario's `fault` line says: a kind, its
 * targets, a window that opens and closes on a time or on an event the job
 * produces, a count and a probability. Every executor (the simulator, the
 * real processes' in-process points, the real runner's nft rules, delay
 * proxy and signals) holds the run's faults in a ddp_faultset_t, feeds it
 * the events it observes (ddp_faultset_event), asks it whether a call is
 * hit (ddp_faultset_match, with the call's details passed in), and counts
 * what each fault acted on (its hits). A fault that acted on nothing in a
 * run makes the run vacuous (docs/scenario-format.md). */

typedef enum ddp_fault_kind {
    DDP_FAULT_REFUSE,     /* connects to the target are refused */
    DDP_FAULT_RESET,      /* connects reset (after_bytes: after N bytes) */
    DDP_FAULT_BLACKHOLE,  /* connects hang until the caller's deadline */
    DDP_FAULT_DELAY,      /* extra latency (+ jitter) on matching links */
    DDP_FAULT_PARTITION,  /* nodes in set A cannot reach nodes outside it */
    DDP_FAULT_CRASH,      /* a rank (task) or node dies */
    DDP_FAULT_PAUSE,      /* a task is alive but silent for a window */
    DDP_FAULT_RESOLVE,    /* name resolution fails */
    DDP_FAULT_POINT,      /* a fault point of ddp/faults.h fires (.point) */
    DDP_FAULT_BANDWIDTH,  /* a node's uplink sends at most .rate_bps */
    DDP_FAULT_LATE,       /* the targets' processes start .delay_ns late */
    DDP_FAULT_STALL,      /* a rank's thread is held at a phase change */
    DDP_FAULT_KIND_COUNT
} ddp_fault_kind_t;

/* The executors a kind can be realised by (ddp_fault_kind_info.exec). */
enum {
    DDP_EXEC_SIM = 1 << 0,    /* the simulator */
    DDP_EXEC_INPROC = 1 << 1, /* libfiu points inside ddpsim's own processes */
    DDP_EXEC_NFT = 1 << 2,    /* nft rules in the nodes' namespaces */
    DDP_EXEC_PROXY = 1 << 3,  /* the runner's delay proxy */
    DDP_EXEC_SIGNAL = 1 << 4, /* signals to processes (SIGKILL, SIGSTOP/CONT) */
    DDP_EXEC_LINK = 1 << 5,   /* tc / links of the namespaces */
    DDP_EXEC_RUNNER = 1 << 6, /* the runner itself (when it starts processes) */
};

/* One row per kind: the table every parser, writer, executor and doc reads. */
typedef struct ddp_fault_kind_info {
    ddp_fault_kind_t kind;
    const char *name;    /* "refuse" */
    const char *acts_on; /* "connects", "links", "processes", ... */
    const char *effects; /* what a hit does ("ECONNREFUSED") */
    unsigned exec;       /* DDP_EXEC_* that can realise it */
    const char *hits;    /* what the hit count counts */
} ddp_fault_kind_info_t;

/* X(ID, name, acts on, effects, executors, what a hit is) */
/* clang-format off */
#define DDP_FAULT_KINDS(X)                                                     \
    X(REFUSE, "refuse", "connects", "ECONNREFUSED",                           \
      DDP_EXEC_SIM | DDP_EXEC_INPROC | DDP_EXEC_NFT, "connects refused")      \
    X(RESET, "reset", "connects", "ECONNRESET (after=N: after N bytes)",      \
      DDP_EXEC_SIM | DDP_EXEC_INPROC | DDP_EXEC_NFT, "connections reset")     \
    X(BLACKHOLE, "blackhole", "connects", "no answer until the deadline",     \
      DDP_EXEC_SIM | DDP_EXEC_NFT, "connects swallowed")                      \
    X(DELAY, "delay", "links", "extra latency",                                \
      DDP_EXEC_SIM | DDP_EXEC_PROXY | DDP_EXEC_LINK, "segments delayed")      \
    X(PARTITION, "partition", "links", "segments dropped between two sides",  \
      DDP_EXEC_SIM | DDP_EXEC_NFT | DDP_EXEC_LINK, "segments dropped")        \
    X(CRASH, "crash", "processes",                                            \
      "the process dies (SIGKILL); node=: silent, a power loss (mode=kill: "  \
      "its processes die, their sockets close)",                              \
      DDP_EXEC_SIM | DDP_EXEC_INPROC | DDP_EXEC_SIGNAL, "processes killed")   \
    X(PAUSE, "pause", "processes", "the process stops (SIGSTOP..SIGCONT)",    \
      DDP_EXEC_SIM | DDP_EXEC_SIGNAL, "processes stopped")                    \
    X(RESOLVE, "resolve", "name lookups", "EHOSTUNREACH",                     \
      DDP_EXEC_SIM | DDP_EXEC_INPROC, "lookups failed")                       \
    X(POINT, "point", "a fault point", "the point's default errno",           \
      DDP_EXEC_SIM | DDP_EXEC_INPROC, "point firings")                        \
    X(BANDWIDTH, "bandwidth", "uplinks", "a rate limit",                       \
      DDP_EXEC_SIM | DDP_EXEC_LINK, "segments queued behind the limit")      \
    X(LATE, "late", "process starts", "the process starts late",              \
      DDP_EXEC_SIM | DDP_EXEC_RUNNER, "processes held")                       \
    X(STALL, "stall", "phase changes",                                         \
      "the rank's thread waits there while the window is open; its process, " \
      "store and sockets go on", DDP_EXEC_SIM | DDP_EXEC_INPROC, "threads held")
/* clang-format on */

DDP_API const ddp_fault_kind_info_t *ddp_fault_kind_info(ddp_fault_kind_t k);
DDP_API const char *ddp_fault_kind_name(ddp_fault_kind_t k);
/* The kinds' names in the table's order, ", "-separated ("refuse, reset,
 * ..."), into buf (cut at n); returns buf. Every message that lists the
 * kinds writes this. */
DDP_API const char *ddp_fault_kind_list(char *buf, size_t n);
/* The DDP_EXEC_* names of mask ("sim, inproc, nft"; "none" for 0) into
 * buf; returns buf. */
DDP_API const char *ddp_fault_exec_names(unsigned mask, char *buf, size_t n);
/* 0 and *out, or DDP_ECONFIG with the error listing the kinds. */
DDP_API int ddp_fault_kind_parse(const char *name, ddp_fault_kind_t *out);

/* A set of global ranks ("3", "0,2-5"), parsed once. n == 0: any rank. */
#define DDP_RANKSET_MAX 16
typedef struct ddp_rankset {
    int n;
    struct {
        int lo, hi;
    } r[DDP_RANKSET_MAX];
} ddp_rankset_t;
/* NULL or "" is the empty text: any rank. Else comma-separated ranks and
 * ranges a-b (a <= b, each 0..2^30). DDP_ECONFIG with the error naming the
 * offending part; *out is then "any". */
DDP_API int ddp_rankset_parse(const char *text, ddp_rankset_t *out);
DDP_API int ddp_rankset_has(const ddp_rankset_t *s, int rank);
/* The highest rank listed (-1 for "any"). */
DDP_API int ddp_rankset_max(const ddp_rankset_t *s);

/* What opens or closes a fault's window. */
typedef enum ddp_trigger_kind {
    DDP_TRIG_TIME = 0, /* a time from the run's start (start_ns/end_ns) */
    DDP_TRIG_ENTER,    /* enter:PHASE  a rank enters the phase */
    DDP_TRIG_LEAVE,    /* leave:PHASE  a rank leaves it */
    DDP_TRIG_CONNECT,  /* connect      a rank's first store connect */
    DDP_TRIG_JOINED,   /* joined:N     the N-th client joined the store */
    DDP_TRIG_SET,      /* set:GLOB     a key matching GLOB is set */
    DDP_TRIG_WAIT,     /* wait:GLOB    a key matching GLOB is waited on */
    DDP_TRIG_BARRIER,  /* barrier      the store barrier is complete */
    DDP_TRIG_SPAWN,    /* spawn        a rank's process is spawned */
    DDP_TRIG_EXIT,     /* exit         a rank's process exits */
    DDP_TRIG_MARK,     /* mark:NAME    ddpsim/mark/NAME is set */
    DDP_TRIG_COUNT
} ddp_trigger_kind_t;

/* The key prefix of marks: a program sets ddpsim/mark/NAME to start a
 * fault on mark:NAME. */
#define DDP_MARK_PREFIX "ddpsim/mark/"

/* A trigger: KIND[:ARG][@RANKS][+OFFSET] ("enter:barrier@1+50ms"). The
 * offset is the fault's start_ns (end_ns for end=). */
typedef struct ddp_fault_trigger {
    ddp_trigger_kind_t kind;
    char arg[48];   /* the phase, glob or mark name */
    char ranks[48]; /* the ranks whose event counts ("" any) */
    int n;          /* joined:N */
} ddp_fault_trigger_t;

DDP_API const char *ddp_trigger_kind_name(ddp_trigger_kind_t k);
/* Parses an event of a start= or end= value, KIND[:ARG][@RANKS] (the
 * caller splits off a +OFFSET). DDP_ECONFIG with the error saying what was
 * expected. A plain duration is not a trigger (DDP_ECONFIG). */
DDP_API int ddp_trigger_parse(const char *text, ddp_fault_trigger_t *out);
/* The trigger's text without its offset ("enter:barrier@1"). */
DDP_API int ddp_trigger_format(const ddp_fault_trigger_t *t, char *buf, size_t n);

/* The spec of one fault. */
typedef struct ddp_fault {
    ddp_fault_kind_t kind;
    int node;          /* target node (-1 any); CRASH: whole node */
    int task;          /* target task (-1 any) */
    int peer_node;     /* link's other end (-1 any) */
    uint16_t port;     /* target port (0 any) */
    uint64_t node_set; /* PARTITION: bit i = node i on side A */
    int64_t start_ns;  /* opens at this time, or this long after start_on */
    int64_t end_ns;    /* closes at this time (0 = never, for a time
                          window), this long after end_on, or, with an event
                          start_on and a time end, this long after it opened */
    ddp_fault_trigger_t start_on, end_on; /* kind TIME: start_ns/end_ns */
    int count;         /* fire at most this many times (0 = unlimited) */
    double probability; /* 0 -> 1.0; drawn from the run's PRNG */
    int64_t delay_ns;  /* DELAY; LATE: by how much */
    int64_t after_bytes; /* RESET after N bytes on the connection */
    const char *phase; /* CRASH: fire when the task enters this phase */
    const char *ranks; /* also aim at these global ranks ("5" or "5,9";
                          NULL = any) */
    const char *point; /* POINT: the point's name ("pg/tcp/handshake"); it
                          fails with its default errno (ddp/faults.h) */
    uint64_t rate_bps; /* BANDWIDTH: bits per second (> 0) that the uplink of
                          node (every node's when -1) carries to other nodes;
                          its segments are serialised one after another */
    int may_miss;      /* a run where it acts on nothing is not vacuous */
    int kill_mode;     /* CRASH of a node (node=, no ranks= or phase=):
                          0 silent, as a power loss (nothing more leaves
                          or reaches it: peers wait for their timeouts);
                          1 mode=kill (its processes die, and their
                          sockets close as the kernel closes them) */
} ddp_fault_t;

/* 1 when the fault's window has an event at either end. */
static inline int ddp_fault_has_event(const ddp_fault_t *f)
{
    return f->start_on.kind != DDP_TRIG_TIME || f->end_on.kind != DDP_TRIG_TIME;
}

/* An event of the job, as an executor observed it. */
typedef struct ddp_fault_event {
    ddp_trigger_kind_t kind; /* ENTER, LEAVE, CONNECT, JOINED, SET, WAIT,
                                SPAWN, EXIT (BARRIER and MARK are derived
                                from SET) */
    int rank;                /* -1 unknown */
    const char *name;        /* phase or key */
    long long value;         /* JOINED: clients; SET by ADD: the new value
                                (-1 for other sets) */
} ddp_fault_event_t;

/* The executor's observer: the code that produces events (phase changes,
 * the store server and client) calls ddp_fault_notify; the executor that
 * registered an observer feeds its faultset. One observer per process;
 * NULL turns it off. */
typedef void (*ddp_fault_observer_fn)(void *arg, const ddp_fault_event_t *ev);
DDP_API void ddp_fault_observe(ddp_fault_observer_fn fn, void *arg);
DDP_API void ddp_fault_notify(const ddp_fault_event_t *ev);
/* 1 when an observer is registered (a producer may skip building events). */
DDP_API int ddp_fault_observed(void);

/* One call at a fault point, with everything a fault may be aimed by. */
typedef struct ddp_fault_call {
    ddp_fault_id_t point; /* sys/net/connect, sys/net/resolve, ddp/phase/enter,
                             or the point of a POINT fault */
    int node, rank, task; /* the caller (-1 unknown) */
    int peer_node;        /* connect: the node of the address (-1 none) */
    uint16_t port;        /* connect: the port */
    const ddp_addr_t *addr; /* connect: the address (NULL none) */
    const char *phase;    /* phase enter: the phase entered */
    int64_t now;          /* the executor's clock */
} ddp_fault_call_t;

/* The executor's call hook: the sys seam hands each connect and resolve to
 * it with the call's details; it returns 1 and *err (a positive errno) when
 * a fault hits the call. One hook per process; NULL turns it off. */
typedef int (*ddp_fault_call_fn)(void *arg, const ddp_fault_call_t *c, int *err);
DDP_API void ddp_fault_on_call(ddp_fault_call_fn fn, void *arg);
/* A point whose aim depends on the call: the hook decides first, then
 * libfiu (fiu-run, fiu-ctrl, tests) as ddp_fault_fire does. 0, or -errno
 * with the error context set to "fault point NAME fired (strerror)". */
DDP_API int ddp_fault_fire_call(const ddp_fault_call_t *c);

/* A run's faults and their state in one executor. */
typedef struct ddp_fault_state {
    int64_t open_at, close_at; /* on the executor's clock; INT64_MAX: not
                                  yet (open) / never (close) */
    int fired;                 /* draws taken (count=) */
    long long hits;            /* what it acted on */
    ddp_rankset_t ranks, start_ranks, end_ranks;
} ddp_fault_state_t;

typedef struct ddp_faultset {
    const ddp_fault_t *faults; /* not owned */
    ddp_fault_state_t *st;
    int n;
    ddp_rng_t *rng; /* count/probability draws */
    int world;      /* the expected world (the barrier event) */
    int events;     /* faults whose window has an event at either end */
} ddp_faultset_t;

#define DDP_FAULT_NEVER INT64_MAX

/* t0: time 0 of the run on the executor's clock (time windows count from
 * it). 0, or DDP_ECONFIG (error set) when a rank set does not parse. */
DDP_API int ddp_faultset_init(ddp_faultset_t *fs, const ddp_fault_t *faults, int n, int64_t t0,
                              ddp_rng_t *rng, int world);
DDP_API void ddp_faultset_free(ddp_faultset_t *fs);
/* Feeds an event at time now; returns how many windows opened or closed. */
DDP_API int ddp_faultset_event(ddp_faultset_t *fs, const ddp_fault_event_t *ev, int64_t now);
/* 1 when the event would open or close a window still waiting for one:
 * what an executor passes on to the others (real runs' E records). */
DDP_API int ddp_faultset_wants(const ddp_faultset_t *fs, const ddp_fault_event_t *ev);
/* 1 when fault i's window holds now. */
DDP_API int ddp_faultset_active(const ddp_faultset_t *fs, int i, int64_t now);
/* 1 when fault i aims at a caller (node, rank, task; -1 unknown). */
DDP_API int ddp_faultset_aims(const ddp_faultset_t *fs, int i, int node, int rank, int task);
/* Count and probability: may fault i fire once more? (Counts the draw.) */
DDP_API int ddp_faultset_draw(ddp_faultset_t *fs, int i);
/* The fault that hits this call (its index; it is drawn and its hit
 * counted), or -1. *err: the errno the call fails with (positive). */
DDP_API int ddp_faultset_match(ddp_faultset_t *fs, const ddp_fault_call_t *c, int *err);
static inline void ddp_faultset_hit(ddp_faultset_t *fs, int i, long long n)
{
    fs->st[i].hits += n;
}

#ifdef __cplusplus
}
#endif
#endif
