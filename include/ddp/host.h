/* ddp/host.h — this host's process, files and /proc, outside the seam.
 *
 * What a tool or the real runner asks of the machine it runs on, where no
 * rank's sys is at hand and the simulator could not answer: the host's
 * clock, this process's id, limits and children, stale files, /proc (which
 * process holds which socket, a process's environment and descriptors),
 * and output files replaced whole. All of it is the POSIX implementation's
 * (core/sys_posix*.c, core/sys.c); code that runs on a ddp_sys_t (ranks,
 * plugins, backends, the store) uses ddp/sys.h and never this header
 * (docs/architecture.md § 2). */
#ifndef DDP_HOST_H
#define DDP_HOST_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ddp_sys_read_file of the POSIX sys, for a tool's own inputs (result
 * files to merge) where no rank's sys is at hand: the same cap and the
 * same refusal of FIFOs, devices and directories. */
DDP_API int ddp_sys_read_host_file(const char *path, char **data, size_t *len);
/* The host's monotonic clock in ns (the POSIX sys's now), for a tool's
 * own wall times (progress lines) where no rank's sys is at hand. */
DDP_API int64_t ddp_sys_host_now(void);
/* The POSIX sys's fd_limit_raise (ddp_sys_fd_limit_raise) where no rank's
 * sys is at hand: the simulator's own process, whose tasks' batons are
 * descriptors. */
DDP_API int ddp_sys_host_fd_limit_raise(long *before, long *after);
/* This process's address-space limit (RLIMIT_AS, `ulimit -v`) in KiB, -1
 * when unlimited or unknown (the simulator's out-of-memory advice). */
DDP_API long long ddp_sys_host_as_limit_kib(void);
/* This process's id (names of per-run files; ddp_sys_sweep_stale). */
DDP_API long ddp_sys_pid(void);
/* 64 random bits from the kernel (a run's identity, never a decision a
 * seed should reproduce). */
DDP_API uint64_t ddp_sys_random_u64(void);
/* The wall-clock time now, "2026-12-06 07:30:01 UTC", for messages. */
DDP_API void ddp_sys_wall_text(char *buf, size_t n);
/* Removes the files in dir named PREFIX<pid>-... whose process <pid> no
 * longer exists: what a run killed by SIGKILL left behind, swept by the
 * next one. Returns how many were removed. */
DDP_API int ddp_sys_sweep_stale(const char *dir, const char *prefix);
/* The same, calling fn(arg, path) for each such file before it is removed
 * (what it records goes with it: a dead run's network namespaces). */
DDP_API int ddp_sys_sweep_stale_each(const char *dir, const char *prefix,
                                     void (*fn)(void *arg, const char *path), void *arg);

/* A guard for a real run's processes (core/sys_posix_guard.c): a process
 * of its own that SIGKILLs every process group it watches once the
 * caller is gone, at its end (ddp_sys_guard_end) or at its death, SIGKILL
 * included. A parent-death signal reaches only the caller's children; the
 * guard reaches what they forked too, as long as it stays in their group.
 * start: 0 and *out, or a negative code (no fork). watch: on 1 a group to
 * kill, on 0 one that is gone (killed and reaped: its id may be reused).
 * end: the guard kills what it still watches and is waited for. NULL is a
 * guard that does nothing. */
typedef struct ddp_sys_guard ddp_sys_guard_t;
DDP_API int ddp_sys_guard_start(ddp_sys_guard_t **out);
DDP_API void ddp_sys_guard_watch(ddp_sys_guard_t *g, long pgid, int on);
DDP_API void ddp_sys_guard_end(ddp_sys_guard_t *g);

/* This process as a child subreaper (Linux PR_SET_CHILD_SUBREAPER):
 * on > 0 adds a user, on <= 0 drops one; the flag is set while any user
 * holds it. An orphan among its descendants becomes its child, so a rank
 * that a warm-start fork server forked and left (harness/real_warm.c) is
 * waited for and killed as the runner's own. 0, or a negative code. */
DDP_API int ddp_sys_child_subreaper(int on);

/* Makes the folder path and the folders above it (mkdir -p): 0, or a
 * negative code with the error context naming the folder. */
DDP_API int ddp_sys_make_dirs(const char *path);

/* 1 when a process of session sid holds a TCP socket whose local port is
 * local_port and whose peer's is remote_port (as sid's network namespace
 * sees it, Linux /proc), 0 when none does, or a negative code. The real
 * runner tells by this which rank's process a connection to the store it
 * hosts came from. */
DDP_API int ddp_sys_session_holds_tcp(long sid, uint16_t local_port, uint16_t remote_port);
/* The same question for many connections at the cost of few /proc scans
 * (the hosted store attributes each client to a rank): an index of which
 * session holds which socket, renewed by one pass over /proc when a socket
 * is not in it yet. ddp_sys_tcp_owner: the index in sids[0..n) of the
 * session holding a TCP socket with this local and remote port (as each
 * session's network namespace sees it), -1 when the connection is there
 * but none of them holds it (yet), -ENOENT when no namespace of theirs has
 * the connection (it closed, or it is another's: a proxy's), or another
 * negative code (-ENOMEM, ...). */
typedef struct ddp_sys_tcp_owners ddp_sys_tcp_owners_t;
DDP_API ddp_sys_tcp_owners_t *ddp_sys_tcp_owners_new(void);
DDP_API void ddp_sys_tcp_owners_free(ddp_sys_tcp_owners_t *t);
DDP_API int ddp_sys_tcp_owner(ddp_sys_tcp_owners_t *t, const long *sids, int n,
                              uint16_t local_port, uint16_t remote_port);

/* The processes of session sid (Linux /proc): up to max pids in pids, the
 * number found (at most max), or a negative code. With
 * ddp_sys_proc_getenv and ddp_sys_proc_fd_path the real runner finds the
 * workers a foreign launcher (torch's elastic agent) started in its
 * session, their rank, and where their stderr goes. */
DDP_API int ddp_sys_session_pids(long sid, long *pids, int max);

/* Variable name of process pid's initial environment (/proc/PID/environ)
 * into buf: 1 found, 0 not set, or a negative code (-ENOENT: gone). */
DDP_API int ddp_sys_proc_getenv(long pid, const char *name, char *buf, size_t n);

/* The path process pid's descriptor fd is open on (/proc/PID/fd/FD) into
 * buf: 0, or a negative code. */
DDP_API int ddp_sys_proc_fd_path(long pid, int fd, char *buf, size_t n);

/* Output files (every file ddpsim writes for a user: results, JUnit,
 * traces, reports). A target is replaced whole or left as it was: the
 * bytes go to a temporary file in the target's folder, which is flushed,
 * fsynced, checked and renamed over the target at ddp_out_commit. Only a
 * regular file or a missing path is a target; a device, FIFO, socket,
 * directory or symlink is refused, naming it (renaming over /dev/null
 * would replace the device). "-" is standard output. Every write error is
 * kept with its own errno (ENOSPC reads "No space left on device"), and a
 * failed output leaves no file under the final name. what: how errors
 * name the file ("the result file"). */
typedef struct ddp_out ddp_out_t;
/* Is path a target ddp_out_open would take? 0, or a negative code with
 * the error context filled (for checking options before a long run). */
DDP_API int ddp_out_check(const char *path, const char *what);
DDP_API int ddp_out_open(const char *path, const char *what, ddp_out_t **out);
/* The stream to write to (valid until commit or abort). */
DDP_API FILE *ddp_out_file(ddp_out_t *o);
/* Flush, fsync, rename: 0, or the first error (the temporary file is
 * removed). Frees o either way. */
DDP_API int ddp_out_commit(ddp_out_t *o);
/* Drop what was written (the target stays as it was); frees o. NULL: no-op. */
DDP_API void ddp_out_abort(ddp_out_t *o);
/* The whole cycle: open, fill(stream, arg) (0, or a negative code with
 * the error context filled, which aborts), commit. */
DDP_API int ddp_out_write(const char *path, const char *what,
                          int (*fill)(FILE *f, void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif
