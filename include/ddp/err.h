/* ddp/err.h — error codes and the error context.
 *
 * Every ddpsim function returns 0 (or a non-negative count) on success and a
 * negative code on failure: -errno for OS failures, or one of the DDP_E* codes
 * below, which live in a reserved band far away from any errno value.
 *
 * A failing call also fills the calling thread's error context with a sentence
 * a user can act on: which rank, which phase, which peer and address, how long
 * it waited, and what to change. The context is per thread, and per task
 * in the simulator (ddp_ident_state_use below), so each rank keeps its own.
 */
#ifndef DDP_ERR_H
#define DDP_ERR_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one list of ddpsim's own codes: X(NAME, value, description). */
#define DDP_ERR_LIST(X)                                                        \
    X(TIMEOUT, -10001, "deadline expired")                                     \
    X(PEER_LOST, -10002, "peer lost")                                          \
    X(PROTOCOL, -10003, "protocol error")                                      \
    X(CONFIG, -10004, "invalid configuration")                                 \
    X(UNSUPPORTED, -10005, "not supported")                                    \
    X(NOT_FOUND, -10006, "not found")                                          \
    X(LIMIT, -10007, "limit exceeded")                                         \
    X(CANCELED, -10008, "canceled")                                            \
    X(NOT_BUILT, -10009, "not built into this binary")                         \
    X(INTERNAL, -10010, "internal error")                                      \
    X(HUNG, -10011, "still running past its deadline")                         \
    X(NO_JOIN, -10012, "exited without joining the job's store")              \
    X(CLOSED, -10013, "rendezvous closed")                                     \
    X(KILLED, -10014, "killed by a fault")

enum ddp_err_code {
    DDP_OK = 0,
#define DDP__ERR_ENUM(name, value, desc) DDP_E##name = (value),
    DDP_ERR_LIST(DDP__ERR_ENUM)
#undef DDP__ERR_ENUM
};

/* Human description of a code: ddpsim's own, else strerror(-code). Never NULL. */
DDP_API const char *ddp_strerror(int code);
/* Symbolic name: "DDP_ETIMEOUT", "ECONNREFUSED", ... ("E?" + number if unknown). */
DDP_API const char *ddp_err_name(int code);

/* The error context: what the last failing call of this thread said. */
typedef struct ddp_errctx {
    int code;          /* the negative code returned */
    int rank;          /* -1: unknown */
    char phase[48];    /* "store connect", "barrier", ... ("" unknown) */
    int peer;          /* -1: unknown */
    char addr[96];     /* "host:port" ("" unknown) */
    int64_t waited_ns; /* -1: unknown */
    char what[1024];   /* the main sentence, without rank/phase prefix */
    char hint[512];    /* what to change ("" none) */
} ddp_errctx_t;

/* The room for one whole error message (ddp_err_format of a full context
 * fits), and so for every copy of one: a rank's result, a run's first
 * error, the table, result.json and JUnit carry it whole. A sentence or
 * hint longer than its field ends in "..." where it was cut. */
#define DDP_ERR_MSG_MAX 2048

/* The calling thread's context (never NULL). */
DDP_API ddp_errctx_t *ddp_err_ctx(void);
/* Reset the context, set code and the main sentence (printf format); rank and
 * phase are taken from the thread's identity (ddp_ident_*). Returns code, so a
 * caller writes `return ddp_err_set(-ECONNREFUSED, "...", ...);`. */
DDP_API int ddp_err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Add details to the current context (each returns the current code). */
DDP_API int ddp_err_addr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
DDP_API int ddp_err_hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
DDP_API int ddp_err_waited(int64_t waited_ns);
DDP_API int ddp_err_peer(int peer);
/* Prefix the main sentence with more context ("while X: " + old sentence),
 * keep the code. Returns the code. */
DDP_API int ddp_err_wrap(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Format the whole context as one actionable line into buf; returns buf.
 * "rank 3, store connect: could not connect to 10.0.0.1:29500 after 30.0 s
 *  (ECONNREFUSED: Connection refused); hint: start the master first" */
DDP_API char *ddp_err_format(const ddp_errctx_t *ctx, char *buf, size_t n);
/* Shortcut: format this thread's context into a thread-local buffer. */
DDP_API const char *ddp_err_message(void);

/* Keeps the context across calls whose failure is not the caller's to
 * report (a probe, a best-effort publish, a pause between retries):
 *
 *     ddp_errsave_t *keep = ddp_err_save();
 *     ... calls that may fail ...
 *     ddp_err_restore(keep);   (the context is as it was, to the byte of
 *                               every field a message shows)
 *
 * ddp_err_save copies the context to the heap, and only when it holds
 * something (NULL: it was empty, as most are); nothing lands on the
 * caller's stack, which in the simulator is a rank's 16 KiB (the context
 * is 1.7 KiB). Saves nest; each ends in exactly one ddp_err_restore or
 * ddp_err_forget, which frees it. Should the copy fail for want of
 * memory, the restore leaves an -ENOMEM error that says so. */
typedef struct ddp_errsave ddp_errsave_t;
DDP_API ddp_errsave_t *ddp_err_save(void);
DDP_API void ddp_err_restore(ddp_errsave_t *saved);
/* Ends a save without restoring it: the context keeps what the calls since
 * left in it (a path whose own error is the one to report). */
DDP_API void ddp_err_forget(ddp_errsave_t *saved);

/* A named libfiu fault point guarding one step: 0 when it is off; when it
 * fires, -failinfo (or -deferr when failinfo is not a positive errno), with
 * an error naming the point. ddpsim's own points are listed in
 * ddp/faults.h (ddp_fault_fire takes their ids); this form is for a
 * plugin's own points. See docs/fault-points.md. */
DDP_API int ddp_fault_point(const char *name, int deferr);

/* Thread identity used by errors and logging (thread-local). */
DDP_API void ddp_ident_set_rank(int rank);
DDP_API int ddp_ident_rank(void);
/* The world size this thread's rank believes in (-1 unknown). */
DDP_API void ddp_ident_set_world(int world);
DDP_API int ddp_ident_world(void);
DDP_API void ddp_ident_set_phase(const char *phase); /* copied; NULL clears */
DDP_API const char *ddp_ident_phase(void);

/* The identity and the error context above, with the buffers that
 * ddp_err_message and ddp_err_name return, form one state per thread. A
 * user-space scheduler that runs many tasks on one thread (the simulator's
 * contexts) gives each task its own: ddp_ident_state_size() bytes, aligned
 * as malloc aligns, set up by ddp_ident_state_init as a new thread's (rank
 * and world -1, no phase, an empty context). ddp_ident_state_use(s) makes s
 * the calling thread's current state, NULL its own again, and returns the
 * one that was current (NULL: the thread's own). Cost: one store.
 * ddp_ident_state_init_zeroed does the same for memory known to hold only
 * zero bytes (a fresh anonymous mapping), writing only the fields that are
 * not zero: a few cache lines instead of the whole state.
 * A state's error context (ddp_err_ctx, 1.7 KiB) is allocated when first
 * written and ddp_err_message's buffer (DDP_ERR_MSG_MAX) on the first
 * call, so a state that never fails stays small (~110 bytes);
 * ddp_ident_state_fini frees them, and must be called before the state's
 * memory is freed or set up again (a no-op for one that never had them). */
typedef struct ddp_ident_state ddp_ident_state_t;
DDP_API size_t ddp_ident_state_size(void);
DDP_API void ddp_ident_state_init(ddp_ident_state_t *s);
DDP_API void ddp_ident_state_init_zeroed(ddp_ident_state_t *s);
DDP_API void ddp_ident_state_fini(ddp_ident_state_t *s);
DDP_API ddp_ident_state_t *ddp_ident_state_use(ddp_ident_state_t *s);

#ifdef __cplusplus
}
#endif
#endif
