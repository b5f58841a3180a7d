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

#ifdef __cplusplus
}
#endif
#endif
