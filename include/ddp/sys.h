/* ddp/sys.h — the OS seam.
 *
 * Everything in ddpsim that touches the world goes through a ddp_sys_t: the
 * clock, sockets, name resolution, process launch and the rank's environment.
 * Two implementations exist: `posix` (real, core/sys_posix.c) and `sim`
 * (virtual, sim/). Code above the seam never knows which one it runs on.
 *
 * Conventions for every member:
 * - Times are monotonic nanoseconds (ddp_sys_now). A `deadline` is an absolute
 *   time; DDP_DEADLINE_NEVER waits without limit (only for tests that plant a
 *   hang); a deadline at or before now means "try once, do not wait".
 * - Return 0 / a non-negative count on success, a negative code on failure
 *   (-errno such as -ECONNREFUSED, or DDP_ETIMEOUT when the deadline passed),
 *   and fill the thread's error context.
 * - Socket handles are small non-negative ints owned by the implementation.
 * - Every call is a named libfiu fault point (see docs/fault-points.md), e.g.
 *   "sys/net/connect": when enabled it fails with the errno given as failinfo.
 */
#ifndef DDP_SYS_H
#define DDP_SYS_H

#include "ddp/export.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ddp_env;
struct ddp_nccl_api;
struct ddp_sys;

#define DDP_DEADLINE_NEVER INT64_MAX
#define DDP_NS_PER_MS INT64_C(1000000)
#define DDP_NS_PER_S INT64_C(1000000000)

/* An IPv4 or IPv6 address with port. */
typedef struct ddp_addr {
    int family;     /* 4 or 6 */
    uint8_t ip[16]; /* network order; IPv4 uses ip[0..3] */
    uint16_t port;  /* host order */
    uint32_t scope; /* IPv6 zone ("fe80::1%eth0": eth0's index), 0 none */
} ddp_addr_t;

/* One address of one network interface: "eth0" 10.0.0.2/24. */
typedef struct ddp_ifaddr {
    char name[16];
    ddp_addr_t addr; /* port 0 */
    int prefix;      /* the netmask's length */
    uint32_t index;  /* the interface's index (if_nametoindex), 0 unknown */
} ddp_ifaddr_t;

/* Numeric addresses as glibc reads them (core/addr.c; docs/architecture.md
 * § 2). inet_aton: "a.b.c.d", "a.b.c", "a.b" or "a", parts decimal, 0x hex
 * or 0 octal; exact 0 lets text go on after a white-space character (as
 * inet_aton does), exact 1 not (as getaddrinfo). 1 and ip, or 0. */
DDP_API int ddp_inet_aton(const char *text, int exact, uint8_t ip[4]);
/* inet_pton(AF_INET6) of text's first len characters: 1 and ip, or 0. */
DDP_API int ddp_inet_pton6(const char *text, size_t len, uint8_t ip[16]);
/* getaddrinfo(AI_NUMERICHOST)'s reading of text: 0 when numeric, with
 * *zone NULL or the text after an IPv6 address's '%' (not yet checked:
 * ddp_addr_zone), or -1 (a host name, or junk). Brackets are not numeric. */
DDP_API int ddp_addr_numeric(const char *text, uint16_t port, ddp_addr_t *out,
                             const char **zone);
/* glibc's zone rules: the name of one of ifs (its index) for a link-local
 * address, or a decimal number of 32 bits for any IPv6 address. 0 and
 * *scope, or -1. */
DDP_API int ddp_addr_zone(const ddp_addr_t *addr, const char *zone, const ddp_ifaddr_t *ifs,
                          int nifs, uint32_t *scope);
/* fe80::/10, or a multicast address of node or link scope: the addresses
 * whose zone may name an interface. */
DDP_API int ddp_addr_is_link_local(const ddp_addr_t *addr);
/* Parse a numeric address (ddp_addr_numeric; a zone only as a number)
 * "10.0.0.1" or "::1" (no port) -> 0 or DDP_ECONFIG. */
DDP_API int ddp_addr_parse(const char *text, uint16_t port, ddp_addr_t *out);
/* ddp_addr_parse without the error: 0, or -1 when text is not a numeric
 * address (a host name to resolve, say), with the error context untouched. */
DDP_API int ddp_addr_try_parse(const char *text, uint16_t port, ddp_addr_t *out);
/* "10.0.0.1:29500" or "[::1]:29500"; returns buf. */
DDP_API char *ddp_addr_format(const ddp_addr_t *addr, char *buf, size_t n);
/* Only the host part: "10.0.0.1" / "::1". */
DDP_API char *ddp_addr_format_host(const ddp_addr_t *addr, char *buf, size_t n);
/* Same family, address and port (a zone's scope is not compared: fe80::1
 * is the node's own address with or without its %eth0). */
DDP_API int ddp_addr_equal(const ddp_addr_t *a, const ddp_addr_t *b);
DDP_API int ddp_addr_is_any(const ddp_addr_t *addr);
/* 127.0.0.0/8 or ::1. */
DDP_API int ddp_addr_is_loopback(const ddp_addr_t *addr);

#define DDP_ADDR_STRLEN 64

/* poll() events. */
enum { DDP_POLLIN = 1, DDP_POLLOUT = 2, DDP_POLLERR = 4, DDP_POLLHUP = 8 };

typedef struct ddp_pollfd {
    int fd;
    short events;  /* requested */
    short revents; /* returned */
} ddp_pollfd_t;

/* One piece of a gathered send (ddp_sys_sendv). */
typedef struct ddp_iov {
    const void *base;
    size_t len;
} ddp_iov_t;

/* A readiness set (ddp_sys_epoll_*): what one registered socket reports. */
typedef struct ddp_epoll_event {
    uint64_t data; /* what ddp_sys_epoll_ctl registered with the socket */
    short events;  /* DDP_POLL* that hold now (ERR/HUP always reported) */
} ddp_epoll_event_t;

/* ddp_sys_epoll_ctl operations. */
enum { DDP_EPOLL_ADD = 1, DDP_EPOLL_MOD = 2, DDP_EPOLL_DEL = 3 };

typedef long ddp_pid_t;
/* ddp_sys_kill(sys, DDP_PID_SELF, sig): the calling process. */
#define DDP_PID_SELF ((ddp_pid_t)-2)

/* What to launch. Real processes run argv (execve; argv[0] searched in PATH
 * when it has no '/'); when argv is NULL the POSIX sys forks and calls entry
 * in the child; the simulator always runs entry as a new task on the same
 * node. The child's environment is exactly `env` (the parent's map when NULL). */
typedef struct ddp_spawn {
    char *const *argv;
    const struct ddp_env *env;
    int (*entry)(struct ddp_sys *child_sys, void *arg);
    void *arg;
    const char *name; /* for traces/logs, optional */
    /* Real processes with argv: files their stdout / stderr go to
     * (created or truncated; NULL: inherited). The simulator ignores them. */
    const char *stdout_path, *stderr_path;
    /* Real processes: the child is killed (SIGKILL) when the thread that
     * spawned it ends, however it ends (SIGKILL of the process included:
     * Linux's parent-death signal), so no rank outlives its runner. The
     * simulator's tasks die with their process anyway. */
    int die_with_parent;
    /* Real processes with die_with_parent: the run's guard
     * (ddp_sys_guard_start) watches the child's group, named by its pid,
     * before the child execs, so a runner killed right after the spawn
     * leaves no group unwatched (the child must lead its group: `setsid`).
     * NULL: none. */
    struct ddp_sys_guard *guard;
    /* Which start of its group this process is (an elastic agent's worker
     * group, started again: 1, 2, ...); the simulator reports it in the
     * outcome (ddp_sim_outcome_t.attempt). */
    int attempt;
} ddp_spawn_t;

typedef struct ddp_sys ddp_sys_t;

/* A thread of the calling process (POSIX: a pthread sharing the sys; sim: a
 * task on the same node that dies with its process). */
typedef long ddp_thread_t;
typedef int (*ddp_thread_fn)(ddp_sys_t *sys, void *arg);

/* The ops table. Use the inline wrappers below, which carry the contracts. */
typedef struct ddp_sys_ops {
    const char *name;
    int64_t (*now)(ddp_sys_t *sys);
    int (*sleep_until)(ddp_sys_t *sys, int64_t deadline);
    /* Up to max addresses for host (numeric or a name). */
    int (*resolve)(ddp_sys_t *sys, const char *host, uint16_t port,
                   ddp_addr_t *out, int max);
    int (*hostname)(ddp_sys_t *sys, char *buf, size_t n);
    int (*listen)(ddp_sys_t *sys, const ddp_addr_t *addr, int backlog);
    int (*accept)(ddp_sys_t *sys, int fd, ddp_addr_t *peer, int64_t deadline);
    int (*connect)(ddp_sys_t *sys, const ddp_addr_t *addr, int64_t deadline);
    ssize_t (*send)(ddp_sys_t *sys, int fd, const void *buf, size_t n,
                    int64_t deadline);
    ssize_t (*recv)(ddp_sys_t *sys, int fd, void *buf, size_t n,
                    int64_t deadline);
    /* May be NULL: ddp_sys_sendv then sends the first non-empty piece. */
    ssize_t (*sendv)(ddp_sys_t *sys, int fd, const ddp_iov_t *iov, int n,
                     int64_t deadline);
    int (*poll)(ddp_sys_t *sys, ddp_pollfd_t *fds, int nfds, int64_t deadline);
    /* Readiness sets (contract: ddp_sys_epoll_create below). An
     * implementation may leave all four NULL: the wrappers then emulate
     * them over poll (core/sys_epoll.c). */
    int (*epoll_create)(ddp_sys_t *sys);
    int (*epoll_ctl)(ddp_sys_t *sys, int ep, int op, int fd, short events,
                     uint64_t data);
    int (*epoll_wait)(ddp_sys_t *sys, int ep, ddp_epoll_event_t *out,
                      int max, int64_t deadline);
    int (*epoll_close)(ddp_sys_t *sys, int ep);
    int (*close)(ddp_sys_t *sys, int fd);
    int (*local_addr)(ddp_sys_t *sys, int fd, ddp_addr_t *out);
    int (*somaxconn)(ddp_sys_t *sys);
    int (*spawn)(ddp_sys_t *sys, const ddp_spawn_t *what, ddp_pid_t *pid);
    /* Waits for the child to exit; *status = its exit code, or 128 + signal. */
    int (*wait)(ddp_sys_t *sys, ddp_pid_t pid, int *status, int64_t deadline);
    int (*kill)(ddp_sys_t *sys, ddp_pid_t pid, int sig);
    int (*thread_start)(ddp_sys_t *sys, ddp_thread_fn fn, void *arg,
                        const char *name, ddp_thread_t *out);
    /* Waits for the thread to return; *rc = its return value. */
    int (*thread_join)(ddp_sys_t *sys, ddp_thread_t th, int *rc,
                       int64_t deadline);
    /* Whole regular file into a malloc'd, NUL-terminated buffer (*len
     * excludes it), bounded: see ddp_sys_read_file. */
    int (*read_file)(ddp_sys_t *sys, const char *path, char **data,
                     size_t *len);
    void (*destroy)(ddp_sys_t *sys);
    /* This host's interfaces' addresses, in `ip addr` order
     * (ddp_sys_ifaddrs). May be NULL. */
    int (*ifaddrs)(ddp_sys_t *sys, struct ddp_ifaddr *out, int max);
    /* 1 when addr can be reached from this host only (ddp_sys_node_local).
     * May be NULL: the loopback rule. */
    int (*node_local)(ddp_sys_t *sys, const ddp_addr_t *addr);
    /* Shared libraries (ddp_sys_lib_open below). May be NULL: no library
     * can be loaded (DDP_EUNSUPPORTED). */
    int (*lib_open)(ddp_sys_t *sys, const char *path, void **lib, char *real,
                    size_t n);
    void *(*lib_sym)(ddp_sys_t *sys, void *lib, const char *name);
    void (*lib_close)(ddp_sys_t *sys, void *lib);
    /* The NCCL + CUDA runtime calls (ddp_sys_nccl_api). May be NULL. */
    int (*nccl_api)(ddp_sys_t *sys, const struct ddp_nccl_api **out);
    /* This process's soft open-file limit raised to its hard limit
     * (ddp_sys_fd_limit_raise). May be NULL: DDP_EUNSUPPORTED. */
    int (*fd_limit_raise)(ddp_sys_t *sys, long *before, long *after);
    /* host's canonical name (ddp_sys_canon_name). May be NULL. */
    int (*canon_name)(ddp_sys_t *sys, const char *host, char *buf, size_t n);
} ddp_sys_ops_t;

/* An instance: ops + the rank's environment + implementation state. */
struct ddp_sys {
    const ddp_sys_ops_t *ops;
    struct ddp_env *env; /* owned by the instance */
    void *impl;
};

/* The real implementation. env: taken over (NULL: built from environ). */
DDP_API ddp_sys_t *ddp_sys_posix_new(struct ddp_env *env);
/* The connects through this POSIX sys that failed (injected, refused,
 * timed out ...); 0 for any other sys. A forked entry's sys starts at 0. */
DDP_API int ddp_sys_posix_failed_connects(ddp_sys_t *sys);
DDP_API void ddp_sys_free(ddp_sys_t *sys);

/* Monotonic now in ns. */
static inline int64_t ddp_sys_now(ddp_sys_t *s) { return s->ops->now(s); }
/* Sleep until deadline; 0 or a negative code (interrupted, killed task). */
static inline int ddp_sys_sleep_until(ddp_sys_t *s, int64_t deadline)
{
    return s->ops->sleep_until(s, deadline);
}
/* Number of addresses written (>= 1) or -EHOSTUNREACH / DDP_ENOT_FOUND. */
static inline int ddp_sys_resolve(ddp_sys_t *s, const char *host, uint16_t port,
                                  ddp_addr_t *out, int max)
{
    return s->ops->resolve(s, host, port, out, max);
}
static inline int ddp_sys_hostname(ddp_sys_t *s, char *buf, size_t n)
{
    return s->ops->hostname(s, buf, n);
}
/* host's canonical name, as getaddrinfo(AI_CANONNAME) gives it (torch's
 * _matches_machine_hostname takes it as this host too): 0 and buf,
 * DDP_ENOT_FOUND, or DDP_EUNSUPPORTED from a sys without canonical names
 * (the simulator's nodes have one name each). */
DDP_API int ddp_sys_canon_name(ddp_sys_t *s, const char *host, char *buf, size_t n);
/* Up to max of this host's own addresses, every interface's, loopback
 * included (port 0): the count, or a negative code; DDP_EUNSUPPORTED from a
 * sys that cannot tell (then a check that needs them is skipped). Rank 0
 * uses them to see that MASTER_ADDR names its own host. */
DDP_API int ddp_sys_local_addrs(ddp_sys_t *s, ddp_addr_t *out, int max);
/* Up to max of this host's interface addresses with their interface names
 * and prefixes, in the order `ip addr` lists them: the count, or a negative
 * code (DDP_EUNSUPPORTED from a sys that cannot tell). What gloo's
 * GLOO_SOCKET_IFNAME and NCCL's NCCL_SOCKET_IFNAME choose among. */
DDP_API int ddp_sys_ifaddrs(ddp_sys_t *s, ddp_ifaddr_t *out, int max);
/* The first step of every sys's resolve: 1 and out[0] when host is a
 * numeric address as getaddrinfo(AI_NUMERICHOST) reads it (ddp_addr_numeric;
 * a zone's interface among this host's, ddp_sys_ifaddrs), 0 when it is a
 * host name to look up, or DDP_ENOT_FOUND for what getaddrinfo refuses and
 * a name would not fix: a bad zone, an address in brackets. */
DDP_API int ddp_sys_resolve_numeric(ddp_sys_t *s, const char *host, uint16_t port,
                                    ddp_addr_t *out);
/* The first address of interface `name` (family 4 or 6 first when prefer is
 * 4 or 6, else the first listed): 0, or DDP_ENOT_FOUND naming the
 * interface and the ones there are. */
DDP_API int ddp_sys_iface_addr(ddp_sys_t *s, const char *name, int prefer, ddp_addr_t *out);
/* torch 1.13's parse_rendezvous_endpoint(text, default_port) (core/endpoint.c,
 * docs/fidelity.md): strip, "" is localhost, "[v6]" or HOST[:PORT] with the
 * port 0..65535 (1 to 5 digits), the host of letters, digits, _ . : - (ASCII
 * only; at most n - 1 bytes). 0 with host and *port, or DDP_ECONFIG saying
 * which part was wrong. Port 0 is torch's too: a caller that must connect
 * refuses it. */
DDP_API int ddp_endpoint_parse(const char *text, uint16_t default_port, char *host, size_t n,
                               uint16_t *port);
/* torch 1.13's _matches_machine_hostname(host): 1 when host is "localhost",
 * a loopback address as Python's ipaddress reads one, this host's name, or
 * an address that name resolves to (through s); else 0. */
DDP_API int ddp_sys_is_this_host(ddp_sys_t *s, const char *host);
/* GLOO_SOCKET_IFNAME (var) as torch 1.13's ProcessGroupGloo reads it: unset
 * or one character is ignored (0: the host name's device); else one device
 * per comma-separated item, each an interface of ifs with an address (a
 * final comma ends the list): the number of items and the first in first,
 * or DDP_ECONFIG naming the empty or unknown item. */
DDP_API int ddp_gloo_ifnames(const char *var, const char *value, const ddp_ifaddr_t *ifs,
                             int nifs, char *first, size_t n);
/* 1 when a and b are in the same prefix-bit network. */
DDP_API int ddp_addr_in_net(const ddp_addr_t *a, const ddp_addr_t *net, int prefix);
/* 1 when addr, an address as this host sees it, reaches this host only, so
 * that no other node can use it (a loopback address: 127/8, ::1); else 0.
 * A sys whose "nodes" share one loopback (real runs on one machine) says 0. */
DDP_API int ddp_sys_node_local(ddp_sys_t *s, const ddp_addr_t *addr);
/* Raises this process's soft open-file limit (RLIMIT_NOFILE) to its hard
 * limit, which only CAP_SYS_RESOURCE raises: 0 with the soft limit before
 * and after (-1: unlimited; equal when it was the hard limit already), or
 * a negative code naming the limits (*after then the limit in force).
 * DDP_EUNSUPPORTED on a sys without it (the simulator: no host limit). */
DDP_API int ddp_sys_fd_limit_raise(ddp_sys_t *s, long *before, long *after);
/* Loads a shared library, resolving every symbol now; its own undefined
 * symbols bind to the running program's exports first. path with a '/' is
 * a file (relative to the current directory); a bare name (a soname,
 * "libnccl.so.2") is searched on the library path. *lib: a handle for
 * ddp_sys_lib_sym / _close; real (n bytes) gets the file's absolute path
 * (a bare name: the name). 0, or -ENOENT (no such file), -EISDIR,
 * DDP_ECONFIG (not loadable, or no such name: the loader's reason), with
 * the error context filled; DDP_EUNSUPPORTED from a sys without libraries. */
DDP_API int ddp_sys_lib_open(ddp_sys_t *s, const char *path, void **lib, char *real,
                             size_t n);
/* The address of the library's symbol name, or NULL when it has none. */
DDP_API void *ddp_sys_lib_sym(ddp_sys_t *s, void *lib, const char *name);
/* Unloads a library from ddp_sys_lib_open (NULL: no-op). */
DDP_API void ddp_sys_lib_close(ddp_sys_t *s, void *lib);
/* The NCCL library this sys offers (ddp/nccl_api.h): the POSIX sys loads
 * the real libnccl.so.2 and libcudart, the simulator gives its simulated
 * NCCL over the virtual network. 0 and *out set, or a negative code with
 * the error context set (DDP_ENOT_FOUND: no library; a sys without the op:
 * DDP_EUNSUPPORTED). */
DDP_API int ddp_sys_nccl_api(ddp_sys_t *s, const struct ddp_nccl_api **out);
/* A listening socket bound to addr (port 0 picks a free one; read it back with
 * local_addr). SO_REUSEADDR; an IPv6 "::" listener also accepts IPv4.
 * -EADDRINUSE when the port is taken. */
static inline int ddp_sys_listen(ddp_sys_t *s, const ddp_addr_t *addr,
                                 int backlog)
{
    return s->ops->listen(s, addr, backlog);
}
/* A connected socket, or DDP_ETIMEOUT / -EAGAIN (nothing pending, deadline
 * passed immediately) / ... */
static inline int ddp_sys_accept(ddp_sys_t *s, int fd, ddp_addr_t *peer,
                                 int64_t deadline)
{
    return s->ops->accept(s, fd, peer, deadline);
}
/* A connected socket (TCP_NODELAY), or -ECONNREFUSED, -ECONNRESET,
 * DDP_ETIMEOUT (connect still in flight at the deadline), -EHOSTUNREACH... */
static inline int ddp_sys_connect(ddp_sys_t *s, const ddp_addr_t *addr,
                                  int64_t deadline)
{
    return s->ops->connect(s, addr, deadline);
}
/* Sends at least one byte, possibly fewer than n (short write); waits for
 * buffer space until the deadline. -EPIPE / -ECONNRESET when the peer is gone;
 * DDP_ETIMEOUT; -EAGAIN when the deadline is already past and nothing fits. */
static inline ssize_t ddp_sys_send(ddp_sys_t *s, int fd, const void *buf,
                                   size_t n, int64_t deadline)
{
    return s->ops->send(s, fd, buf, n, deadline);
}
/* ddp_sys_send of n pieces one after the other, as one stream, in one call
 * (sendmsg): a small header and the data behind it leave together instead
 * of as two segments. Returns the bytes taken, counted across the pieces
 * in order (a short write may end inside any piece); the pieces' total is
 * at least one byte. 1 <= n <= DDP_IOV_MAX. */
#define DDP_IOV_MAX 8
static inline ssize_t ddp_sys_sendv(ddp_sys_t *s, int fd, const ddp_iov_t *iov,
                                    int n, int64_t deadline)
{
    if (s->ops->sendv)
        return s->ops->sendv(s, fd, iov, n, deadline);
    int i = 0;
    while (i < n - 1 && iov[i].len == 0)
        i++;
    return s->ops->send(s, fd, iov[i].base, iov[i].len, deadline);
}
/* Receives at least one byte, possibly fewer than n (short read); 0 = EOF.
 * DDP_ETIMEOUT; -EAGAIN when the deadline is already past and nothing is
 * buffered; -ECONNRESET when the peer reset. */
static inline ssize_t ddp_sys_recv(ddp_sys_t *s, int fd, void *buf, size_t n,
                                   int64_t deadline)
{
    return s->ops->recv(s, fd, buf, n, deadline);
}
/* Number of fds with revents != 0; 0 when the deadline passed with none. */
static inline int ddp_sys_poll(ddp_sys_t *s, ddp_pollfd_t *fds, int nfds,
                               int64_t deadline)
{
    return s->ops->poll(s, fds, nfds, deadline);
}

/* Readiness sets: epoll's contract, level-triggered, on every sys. A
 * socket is registered once (ADD) with the DDP_POLLIN / DDP_POLLOUT it is
 * interested in and a 64-bit cookie; a wait then reports the registered
 * sockets that are ready, at a cost that depends on how many are ready,
 * not on how many are registered (POSIX: epoll(7); the simulator: a ready
 * list fed by socket state changes; emulated over poll for a sys without
 * the ops, at O(registered) per wait).
 * - create: a handle >= 0 (not a socket: close it with epoll_close).
 * - ctl ADD: -EEXIST when fd is already in the set, -EBADF when fd is not
 *   an open socket of the caller; MOD / DEL: -ENOENT when fd is not in it.
 *   events may be 0: the socket then reports only DDP_POLLERR/HUP.
 * - wait: fills out[0..n) with the registered sockets whose state meets
 *   their events (or is ERR/HUP), n <= max, one entry per socket; returns
 *   n, or 0 when the deadline passed with none ready (deadline rules as
 *   poll's). Level-triggered: a socket is reported again by every wait
 *   while its condition holds; when more than max are ready, successive
 *   waits report every one of them in turn (none starves). -EINTR when
 *   interrupted (fault point sys/net/epoll).
 * - DEL a socket before closing it. (POSIX and the simulator also drop a
 *   closed socket from its sets on their own; the emulation cannot.)
 * A set is used by one thread at a time. */
DDP_API int ddp_sys_epoll_create(ddp_sys_t *s);
DDP_API int ddp_sys_epoll_ctl(ddp_sys_t *s, int ep, int op, int fd, short events,
                      uint64_t data);
DDP_API int ddp_sys_epoll_wait(ddp_sys_t *s, int ep, ddp_epoll_event_t *out, int max,
                       int64_t deadline);
DDP_API int ddp_sys_epoll_close(ddp_sys_t *s, int ep);

static inline int ddp_sys_close(ddp_sys_t *s, int fd)
{
    return s->ops->close(s, fd);
}
static inline int ddp_sys_local_addr(ddp_sys_t *s, int fd, ddp_addr_t *out)
{
    return s->ops->local_addr(s, fd, out);
}
/* The listen backlog to use for a server (Linux: net.core.somaxconn). */
static inline int ddp_sys_somaxconn(ddp_sys_t *s)
{
    return s->ops->somaxconn(s);
}
static inline int ddp_sys_spawn(ddp_sys_t *s, const ddp_spawn_t *what,
                                ddp_pid_t *pid)
{
    return s->ops->spawn(s, what, pid);
}
static inline int ddp_sys_wait(ddp_sys_t *s, ddp_pid_t pid, int *status,
                               int64_t deadline)
{
    return s->ops->wait(s, pid, status, deadline);
}
static inline int ddp_sys_kill(ddp_sys_t *s, ddp_pid_t pid, int sig)
{
    return s->ops->kill(s, pid, sig);
}
/* Runs fn(sys', arg) concurrently in this process (a server loop, say). */
static inline int ddp_sys_thread_start(ddp_sys_t *s, ddp_thread_fn fn,
                                       void *arg, const char *name,
                                       ddp_thread_t *out)
{
    return s->ops->thread_start(s, fn, arg, name, out);
}
/* DDP_ETIMEOUT if it has not returned by the deadline (it keeps running). */
static inline int ddp_sys_thread_join(ddp_sys_t *s, ddp_thread_t th, int *rc,
                                      int64_t deadline)
{
    return s->ops->thread_join(s, th, rc, deadline);
}
/* Reads a whole regular file of at most DDP_SYS_READ_MAX bytes (scenario
 * files, includes, rank files such as LSB_DJOB_RANKFILE). Never blocks and
 * never reads more than the cap: a larger file is DDP_ELIMIT, a directory
 * -EISDIR, a FIFO, device or socket DDP_EUNSUPPORTED (refused before any
 * byte is read), else -ENOENT etc.; each error names the path. */
#define DDP_SYS_READ_MAX (16 << 20)
static inline int ddp_sys_read_file(ddp_sys_t *s, const char *path,
                                    char **data, size_t *len)
{
    return s->ops->read_file(s, path, data, len);
}
/* The rank's environment map (never NULL). */
static inline struct ddp_env *ddp_sys_env(ddp_sys_t *s) { return s->env; }

/* Helpers built on the ops (core/sys.c), shared by every implementation. */
/* Send all n bytes or fail (DDP_ETIMEOUT, -EPIPE, ...). */
DDP_API int ddp_sys_send_all(ddp_sys_t *s, int fd, const void *buf, size_t n,
                     int64_t deadline);
/* Receive exactly n bytes or fail; EOF before n -> DDP_EPEER_LOST. */
DDP_API int ddp_sys_recv_all(ddp_sys_t *s, int fd, void *buf, size_t n,
                     int64_t deadline);
/* Resolve host and connect to the first address that accepts. */
DDP_API int ddp_sys_connect_host(ddp_sys_t *s, const char *host, uint16_t port,
                         int64_t deadline);
/* Bind port 0 on host ("" = any), read the port back, close. */
DDP_API int ddp_sys_free_port(ddp_sys_t *s, uint16_t *port);
/* Deadline `ns` from now, saturating. */
DDP_API int64_t ddp_sys_deadline_in(ddp_sys_t *s, int64_t ns);

/* A seedable PRNG (splitmix64 seeding xoshiro256**): all randomness that can
 * change a decision comes from one of these, so runs are reproducible. */
typedef struct ddp_rng {
    uint64_t s[4];
} ddp_rng_t;
DDP_API void ddp_rng_seed(ddp_rng_t *rng, uint64_t seed);
DDP_API uint64_t ddp_rng_next(ddp_rng_t *rng);
/* n pseudo-random bytes for bulk use: one ddp_rng_next draw keys a
 * counter-based stream (wyrand), so the same state gives the same bytes
 * and the state advances by one draw. */
DDP_API void ddp_rng_fill(ddp_rng_t *rng, void *buf, size_t n);
/* Uniform in [0, 1). */
DDP_API double ddp_rng_double(ddp_rng_t *rng);
/* Uniform in [0, n). n > 0. */
DDP_API uint64_t ddp_rng_below(ddp_rng_t *rng, uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
