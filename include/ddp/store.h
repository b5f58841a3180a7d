/* ddp/store.h — the rendezvous store.
 *
 * A key-value store with the operations of PyTorch's c10d::Store. Three
 * implementations share one ops table:
 *  - tcp:    a client speaking PyTorch's TCPStore wire protocol to any
 *            TCPStore-protocol server, including ours (ddp_store_server_*),
 *            in either generation (docs/store-protocol.md): "current" (the
 *            VALIDATE handshake, PyTorch >= 2.2 opcode table) or "legacy"
 *            (PyTorch 1.9 - 2.0, torch 1.13's table);
 *  - memory: in-process (thread-safe);
 *  - prefix: wraps another store and joins `prefix + "/" + key`.
 *
 * Every operation takes an absolute deadline (ddp_sys_now-based). A timeout
 * returns DDP_ETIMEOUT and the error context names the keys, the server
 * address and the time waited.
 */
#ifndef DDP_STORE_H
#define DDP_STORE_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ddp/sys.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Wire constants (PyTorch >= 2.4, libuv backend). One table, here. */
#define DDP_STORE_MAGIC 0x3C85F7CEu
#define DDP_STORE_DEFAULT_PORT 29500
#define DDP_STORE_DEFAULT_TIMEOUT_S 300
#define DDP_STORE_MAX_KEY (8 * 1024)
#define DDP_STORE_MAX_VALUE (8 * 1024 * 1024)
#define DDP_STORE_MAX_KEYS (128 * 1024)

#define DDP_STORE_OPCODES(X)                                                   \
    X(VALIDATE, 0)                                                             \
    X(SET, 1)                                                                  \
    X(COMPARE_SET, 2)                                                          \
    X(GET, 3)                                                                  \
    X(ADD, 4)                                                                  \
    X(CHECK, 5)                                                                \
    X(WAIT, 6)                                                                 \
    X(GETNUMKEYS, 7)                                                           \
    X(DELETE_KEY, 8)                                                           \
    X(APPEND, 9)                                                               \
    X(MULTI_GET, 10)                                                           \
    X(MULTI_SET, 11)                                                           \
    X(CANCEL_WAIT, 12)                                                         \
    X(PING, 13)                                                                \
    X(QUEUE_PUSH, 14)                                                          \
    X(QUEUE_POP, 15)                                                           \
    X(QUEUE_LEN, 16)                                                           \
    X(LIST_KEYS, 17)

enum ddp_store_op {
#define DDP__STORE_OP(name, v) DDP_STORE_OP_##name = (v),
    DDP_STORE_OPCODES(DDP__STORE_OP)
#undef DDP__STORE_OP
    DDP_STORE_OP_COUNT
};
DDP_API const char *ddp_store_op_name(int op); /* "SET", ... or "UNKNOWN" */

/* ddpsim's one extension frame (not TCPStore; docs/store-protocol.md,
 * "Access control"): a client of a server started with a token sends, as
 * its very first frame, u8 DDP_STORE_OP_AUTH, u32 DDP_STORE_AUTH_MAGIC,
 * then the token as bytes (u64 length + bytes); the server answers u8
 * DDP_STORE_AUTH_OK, or drops the connection when the token is wrong. A
 * server without a token drops a connection that sends it, as any
 * TCPStore server does an unknown opcode. */
#define DDP_STORE_OP_AUTH 0xDD
#define DDP_STORE_AUTH_MAGIC 0x31505344u /* "DSP1" on the wire */
#define DDP_STORE_AUTH_OK 0
#define DDP_STORE_MAX_TOKEN 1024

/* The legacy generation's table (PyTorch 1.9 - 2.0: no VALIDATE, no PING;
 * torch 1.13 speaks it). Requests and replies have the same layout as the
 * current op of the same name; WATCH_KEY exists only here. */
#define DDP_STORE_LEGACY_OPCODES(X)                                            \
    X(SET, 0)                                                                  \
    X(COMPARE_SET, 1)                                                          \
    X(GET, 2)                                                                  \
    X(ADD, 3)                                                                  \
    X(CHECK, 4)                                                                \
    X(WAIT, 5)                                                                 \
    X(GETNUMKEYS, 6)                                                           \
    X(WATCH_KEY, 7)                                                            \
    X(DELETE_KEY, 8)
enum ddp_store_legacy_op {
#define DDP__STORE_LOP(name, v) DDP_STORE_LOP_##name = (v),
    DDP_STORE_LEGACY_OPCODES(DDP__STORE_LOP)
#undef DDP__STORE_LOP
    DDP_STORE_LOP_COUNT
};
/* WATCH_KEY's replies: u8 KEY_CALLBACK_REGISTERED at once, later one
 * u8 type + key + old value + new value per change of the key. */
enum {
    DDP_STORE_KEY_UPDATED = 0,
    DDP_STORE_KEY_CREATED = 1,
    DDP_STORE_KEY_DELETED = 2,
    DDP_STORE_KEY_CALLBACK_REGISTERED = 3,
};

/* Which generation a connection speaks. */
typedef enum ddp_store_proto {
    DDP_STORE_PROTO_AUTO = 0,    /* client: current, legacy when the server
                                    turns VALIDATE down; server: detect per
                                    connection */
    DDP_STORE_PROTO_LEGACY = 1,  /* PyTorch 1.9 - 2.0 (torch 1.13) */
    DDP_STORE_PROTO_CURRENT = 2, /* VALIDATE handshake, PyTorch >= 2.2 */
} ddp_store_proto_t;
/* "auto", "legacy", "current" (or "unknown"). */
DDP_API const char *ddp_store_proto_name(int proto);
/* Parses one of those names: 0, or -EINVAL. */
DDP_API int ddp_store_proto_parse(const char *s, ddp_store_proto_t *out);

/* Reply codes. */
enum {
    DDP_STORE_READY = 0,         /* CHECK */
    DDP_STORE_NOT_READY = 1,     /* CHECK */
    DDP_STORE_STOP_WAITING = 0,  /* WAIT */
    DDP_STORE_WAIT_CANCELED = 1, /* CANCEL_WAIT */
};

/* A value returned by the store: malloc'd bytes, freed with ddp_buf_free. */
typedef struct ddp_buf {
    uint8_t *data;
    size_t len;
} ddp_buf_t;
DDP_API void ddp_buf_free(ddp_buf_t *b);

typedef struct ddp_store ddp_store_t;

typedef struct ddp_store_ops {
    const char *name;
    int (*set)(ddp_store_t *st, const char *key, const void *val, size_t n,
               int64_t deadline);
    /* Sets key to desired if its current value equals expected (missing key +
     * empty expected -> created); *out = the value after the operation. */
    int (*compare_set)(ddp_store_t *st, const char *key, const void *expected,
                       size_t en, const void *desired, size_t dn,
                       ddp_buf_t *out, int64_t deadline);
    /* Waits for the key to exist (until deadline), then returns its value. */
    int (*get)(ddp_store_t *st, const char *key, ddp_buf_t *out,
               int64_t deadline);
    /* Adds delta to a decimal-ASCII counter (missing = 0); *out = new value. */
    int (*add)(ddp_store_t *st, const char *key, int64_t delta, int64_t *out,
               int64_t deadline);
    /* 1 if every key exists, 0 if not (does not wait). */
    int (*check)(ddp_store_t *st, const char *const *keys, size_t n,
                 int64_t deadline);
    /* Waits until every key exists. */
    int (*wait)(ddp_store_t *st, const char *const *keys, size_t n,
                int64_t deadline);
    /* Number of keys. */
    int (*num_keys)(ddp_store_t *st, int64_t *out, int64_t deadline);
    /* 1 if it existed, 0 if not. */
    int (*delete_key)(ddp_store_t *st, const char *key, int64_t deadline);
    int (*append)(ddp_store_t *st, const char *key, const void *val, size_t n,
                  int64_t deadline);
    /* Waits for all keys, then returns their values in order (out[n]). */
    int (*multi_get)(ddp_store_t *st, const char *const *keys, size_t n,
                     ddp_buf_t *out, int64_t deadline);
    int (*multi_set)(ddp_store_t *st, const char *const *keys,
                     const ddp_buf_t *vals, size_t n, int64_t deadline);
    int (*queue_push)(ddp_store_t *st, const char *key, const void *val,
                      size_t n, int64_t deadline);
    /* Waits until the queue is non-empty, then pops the oldest element. */
    int (*queue_pop)(ddp_store_t *st, const char *key, ddp_buf_t *out,
                     int64_t deadline);
    int (*queue_len)(ddp_store_t *st, const char *key, int64_t *out,
                     int64_t deadline);
    /* All keys (malloc'd array of malloc'd strings; free with
     * ddp_store_free_keys). */
    int (*list_keys)(ddp_store_t *st, char ***keys, size_t *n,
                     int64_t deadline);
    /* Round trip; 0 when the server answered. */
    int (*ping)(ddp_store_t *st, int64_t deadline);
    void (*free)(ddp_store_t *st);
} ddp_store_ops_t;

struct ddp_store {
    const ddp_store_ops_t *ops;
    ddp_sys_t *sys; /* clock for deadlines and sockets */
    void *impl;
};

DDP_API void ddp_store_free_keys(char **keys, size_t n);
/* Frees the store and what it owns (a prefix store frees only itself). */
DDP_API void ddp_store_free(ddp_store_t *st);

/* Thin wrappers, one per op (contracts above). */
DDP_API int ddp_store_set(ddp_store_t *st, const char *key, const void *val, size_t n,
                  int64_t deadline);
DDP_API int ddp_store_set_str(ddp_store_t *st, const char *key, const char *val,
                      int64_t deadline);
DDP_API int ddp_store_compare_set(ddp_store_t *st, const char *key,
                          const void *expected, size_t en, const void *desired,
                          size_t dn, ddp_buf_t *out, int64_t deadline);
DDP_API int ddp_store_get(ddp_store_t *st, const char *key, ddp_buf_t *out,
                  int64_t deadline);
DDP_API int ddp_store_add(ddp_store_t *st, const char *key, int64_t delta,
                  int64_t *out, int64_t deadline);
DDP_API int ddp_store_check(ddp_store_t *st, const char *const *keys, size_t n,
                    int64_t deadline);
DDP_API int ddp_store_wait(ddp_store_t *st, const char *const *keys, size_t n,
                   int64_t deadline);
DDP_API int ddp_store_num_keys(ddp_store_t *st, int64_t *out, int64_t deadline);
DDP_API int ddp_store_delete_key(ddp_store_t *st, const char *key, int64_t deadline);
DDP_API int ddp_store_append(ddp_store_t *st, const char *key, const void *val,
                     size_t n, int64_t deadline);
DDP_API int ddp_store_multi_get(ddp_store_t *st, const char *const *keys, size_t n,
                        ddp_buf_t *out, int64_t deadline);
DDP_API int ddp_store_multi_set(ddp_store_t *st, const char *const *keys,
                        const ddp_buf_t *vals, size_t n, int64_t deadline);
DDP_API int ddp_store_queue_push(ddp_store_t *st, const char *key, const void *val,
                         size_t n, int64_t deadline);
DDP_API int ddp_store_queue_pop(ddp_store_t *st, const char *key, ddp_buf_t *out,
                        int64_t deadline);
DDP_API int ddp_store_queue_len(ddp_store_t *st, const char *key, int64_t *out,
                        int64_t deadline);
DDP_API int ddp_store_list_keys(ddp_store_t *st, char ***keys, size_t *n,
                        int64_t deadline);
DDP_API int ddp_store_ping(ddp_store_t *st, int64_t deadline);

/* ---- implementations ---- */

/* In-memory store (thread-safe). Blocking ops re-check every 1 ms on the sys
 * clock, so they also work on the simulator's virtual clock. */
DDP_API ddp_store_t *ddp_store_memory_new(ddp_sys_t *sys);

/* Prefix store over `base` (not owned). Keys become prefix + "/" + key. */
DDP_API ddp_store_t *ddp_store_prefix_new(ddp_store_t *base, const char *prefix);

/* TCP client options. */
typedef struct ddp_store_client_opts {
    const char *host;      /* master address (name or numeric) */
    uint16_t port;         /* default 29500 when 0 */
    int64_t connect_deadline; /* absolute; connect + VALIDATE + PING retried
                                 until then */
    uint64_t seed;         /* backoff jitter RNG seed */
    int64_t backoff_initial_ns; /* 0 -> DDP_STORE_BACKOFF_INITIAL_NS */
    double backoff_factor;      /* 0 -> DDP_STORE_BACKOFF_FACTOR */
    int64_t backoff_max_ns;     /* 0 -> DDP_STORE_BACKOFF_MAX_NS */
    double jitter;              /* 0 -> DDP_STORE_BACKOFF_JITTER (fraction
                                   of the delay) */
    ddp_store_proto_t protocol; /* 0 = auto */
    const char *token; /* NULL: none; else sent in an AUTH frame (ddpsim's
                          extension) first on every connection: only for a
                          ddpsim server started with the same token */
    const char *check_key; /* NULL: none; else CHECKed in the same round
                              trip as the connect's PING (current protocol):
                              ddp_store_client_checked says what it found */
} ddp_store_client_opts_t;

/* The connect retry schedule's defaults (docs/store-protocol.md): the n-th
 * wait is uniform in d * [1 - jitter, 1 + jitter], d = min(initial *
 * factor^(n-1), max). Small at first: ranks that start a moment before
 * rank 0 listens reconnect within tens of milliseconds. */
#define DDP_STORE_BACKOFF_INITIAL_NS (20 * DDP_NS_PER_MS)
#define DDP_STORE_BACKOFF_FACTOR 2.0
#define DDP_STORE_BACKOFF_MAX_NS ((int64_t)1000 * DDP_NS_PER_MS)
#define DDP_STORE_BACKOFF_JITTER 0.5

/* Connect (retrying with jittered exponential backoff on refused/reset/
 * timeout/resolution failure, VALIDATE and PING retried too). With protocol
 * auto, a server that resets the connection on VALIDATE/PING is probed with
 * a legacy request; one that answers only the legacy table is then spoken
 * to in legacy, and the log says so once. On failure NULL and *err holds
 * the code; the error context names the address, the number of attempts
 * and the time waited, and the hint names a protocol mismatch. */
DDP_API ddp_store_t *ddp_store_client_connect(ddp_sys_t *sys,
                                      const ddp_store_client_opts_t *opts,
                                      int *err);
/* Connection attempts the last connect needed (1 = first try). */
DDP_API int ddp_store_client_attempts(const ddp_store_t *st);
/* What the connect's CHECK of opts.check_key found: 1 set, 0 not set, -1
 * not asked (no check_key, a legacy server, or not a client): CHECK it
 * with ddp_store_check then. */
DDP_API int ddp_store_client_checked(const ddp_store_t *st);
/* The generation the client speaks (LEGACY or CURRENT; 0 if not a
 * client). */
DDP_API ddp_store_proto_t ddp_store_client_protocol(const ddp_store_t *st);

/* ---- server ---- */
typedef struct ddp_store_server ddp_store_server_t;

/* What a client of the server reached (ddp_store_server_opts_t.on_client),
 * in the order a rank reaches them. */
typedef enum ddp_store_client_phase {
    DDP_STORE_CLIENT_CONNECTED = 1, /* accepted */
    DDP_STORE_CLIENT_JOINED,        /* its first request completed */
    DDP_STORE_CLIENT_BARRIER,       /* its ADD to a store_based_barrier_key
                                       returned the world size */
    DDP_STORE_CLIENT_LEFT,          /* its connection closed */
} ddp_store_client_phase_t;

typedef struct ddp_store_client_note {
    unsigned long long id;      /* the connection's serial number, from 1 */
    ddp_store_client_phase_t phase;
    const ddp_addr_t *peer;     /* the client's address and port */
} ddp_store_client_note_t;

typedef struct ddp_store_server_opts {
    const char *host;   /* NULL or "" -> bind "::" then fall back to 0.0.0.0 */
    uint16_t port;      /* 0 -> a free port */
    int backlog;        /* 0 -> somaxconn */
    size_t max_clients; /* 0 -> 65536, or 4 x world when larger */
    size_t max_keys;    /* 0 -> DDP_STORE_MAX_KEYS, or 8 x world when larger */
    size_t max_key_len; /* 0 -> DDP_STORE_MAX_KEY */
    size_t max_value_len; /* 0 -> DDP_STORE_MAX_VALUE */
    int64_t validate_timeout_ns; /* drop connections that do not VALIDATE in
                                    time (auto/legacy: whose first request
                                    does not complete in time); 0 -> 30 s */
    ddp_store_proto_t protocol;  /* auto (0): detect per connection;
                                    current: VALIDATE required; legacy: the
                                    legacy table only, as torch 1.13 */
    /* Budgets (docs/store-protocol.md, "Memory budget"). */
    size_t max_memory;       /* everything held for clients (keys, values,
                                queues, waits, watches, request and reply
                                buffers); 0 -> DDP_STORE_DEFAULT_MAX_MEMORY */
    int64_t idle_timeout_ns; /* a connection with a request or replies in
                                flight that makes no progress this long is
                                dropped (one with nothing in flight never
                                is); 0 -> DDP_STORE_DEFAULT_IDLE_TIMEOUT_S */
    /* Opt-in access control beyond TCPStore ("Access control"). */
    const char *allow; /* "CIDR[,CIDR...]": only these peers (checked at
                          accept; works with any client); NULL = all */
    const char *token; /* NULL: none (TCPStore-compatible); else every
                          connection must send it first (ddpsim's AUTH
                          frame): PyTorch clients are then refused */
    size_t max_wait_keys; /* keys one connection may wait for that nobody
                             has set (a WAIT over it drops the client);
                             0 -> max_keys (as many as a request may name:
                             torch 1.13's server waits on any number).
                             Awaited keys count against max_memory, not
                             max_keys. */
    /* Each client's progress, for a host that tells its clients apart
     * (the real runner hosting a foreign job's store sees which rank's
     * process holds each connection): called on the server's thread.
     * world > 0 makes the barrier phase known (torch's and ddpsim's
     * store-based barrier counts to the world size). NULL: none. */
    void (*on_client)(void *arg, const ddp_store_client_note_t *note);
    void *on_client_arg;
    int world; /* the job's ranks (0: unknown); also scales the defaults of
                  max_clients and max_keys */
    /* The sys the server runs over, made from the one it was given: NULL,
     * that one. Called once by ddp_store_server_new, after the open-file
     * limit is raised (what it starts inherits the raised limit) and
     * before the listener is made; *out is then the server's, freed
     * (ddp_sys_free) last by ddp_store_server_free, or at once when the
     * server fails to start. A negative return, with the error set, is
     * ddp_store_server_new's. `ddpsim store serve --relays K` hands in
     * its relay processes this way (tools/store_relay.c): the library
     * forks none of its own. */
    int (*sys_hook)(ddp_sys_t *sys, void *arg, ddp_sys_t **out);
    void *sys_hook_arg;
} ddp_store_server_opts_t;

/* max_wait_keys of a server with the default max_keys (before: 16,384). */
#define DDP_STORE_MAX_WAIT_KEYS DDP_STORE_MAX_KEYS

#define DDP_STORE_DEFAULT_MAX_MEMORY ((size_t)1 << 30)
#define DDP_STORE_DEFAULT_IDLE_TIMEOUT_S 30

/* Binds and listens (-EADDRINUSE etc. with an error naming host:port). */
DDP_API int ddp_store_server_new(ddp_sys_t *sys, const ddp_store_server_opts_t *opts,
                         ddp_store_server_t **out);
/* The bound address (port filled in). */
DDP_API ddp_addr_t ddp_store_server_addr(const ddp_store_server_t *srv);
/* One pass of the event loop: waits until deadline for events, serves them.
 * Returns 0 or a negative code for a fatal server error. */
DDP_API int ddp_store_server_step(ddp_store_server_t *srv, int64_t deadline);
/* Runs steps until ddp_store_server_stop() or the deadline. */
DDP_API int ddp_store_server_run(ddp_store_server_t *srv, int64_t deadline);
/* Asks run() to return (safe from another thread or a signal handler). */
DDP_API void ddp_store_server_stop(ddp_store_server_t *srv);
/* Closes every socket and frees everything. */
DDP_API void ddp_store_server_free(ddp_store_server_t *srv);
/* Sets a key in-process, as a client's SET of `key` would (stored as
 * "/" + key, TCPStore's client prefix, so clients read it back). Only
 * before the server runs, not while run() serves on another thread. The
 * plugin's rank 0 claims its rank this way, before any other process can
 * reach the store. */
DDP_API int ddp_store_server_preset(ddp_store_server_t *srv, const char *key,
                            const void *val, size_t n);

typedef struct ddp_store_server_stats {
    size_t clients;       /* connected now */
    size_t keys;
    uint64_t requests;
    uint64_t protocol_errors; /* clients dropped for a protocol violation */
    uint64_t unvalidated_dropped;
    uint64_t rejected_clients; /* refused at accept: max_clients reached */
    uint64_t legacy_connections; /* served with the legacy table */
    size_t memory;             /* bytes held for clients now (max_memory) */
    size_t memory_peak;        /* the most it held */
    uint64_t memory_refused;   /* clients dropped: a request that cannot
                                  fit max_memory beside the store */
    uint64_t deferred;         /* times a connection was not read for
                                  want of memory (resumed later) */
    uint64_t idle_dropped;     /* dropped by idle_timeout_ns */
    uint64_t denied;           /* refused: not in allow, or no/bad token */
} ddp_store_server_stats_t;
DDP_API void ddp_store_server_stats(const ddp_store_server_t *srv,
                            ddp_store_server_stats_t *out);

/* Runs a server on its own thread (for real processes and tests). The sys
 * must be thread-safe (the POSIX one is). */
DDP_API int ddp_store_server_start_thread(ddp_store_server_t *srv);
/* Stops and joins the thread (does not free the server). */
DDP_API void ddp_store_server_join_thread(ddp_store_server_t *srv);

/* ---- rendezvous helpers the DDP plugin uses ---- */

/* Every rank ADDs 1 to "init/"; rank 0 waits until the count reaches world.
 * Timeout error: "Timed out after N seconds waiting for clients. k/N clients
 * joined." A count past world (a rank's own ADD, or rank 0's poll) is a
 * DDP_ECONFIG "worker_count K for world_size N": another job's ranks share
 * the store. */
/* The "init/" count so far (ADD 0: how many ranks have joined the store). */
DDP_API int ddp_store_worker_count(ddp_store_t *st, int64_t *out, int64_t deadline);
DDP_API int ddp_store_wait_for_workers(ddp_store_t *st, int rank, int world,
                               int64_t deadline);
/* Store-based barrier: ADD 1 to "store_based_barrier_key:<group>"; the rank
 * that sees world sets "...:last_worker"; all wait for it. Timeout error
 * reports world size, joined count and time waited. */
DDP_API int ddp_store_barrier(ddp_store_t *st, const char *group, int world,
                      int64_t deadline);

#ifdef __cplusplus
}
#endif
#endif
