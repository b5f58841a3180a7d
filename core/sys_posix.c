/* core/sys_posix.c — the real OS seam: the only file in the library that
 * calls the clock, socket, process and environment functions of the OS
 * (with sys_posix_nccl.c, which loads the real NCCL).
 * Sockets are non-blocking; every wait is a poll(2) bounded by the deadline.
 * The waits read the clock and sleep through s's own ops (ddp_sys_now,
 * ddp_sys_sleep_until), not this file's directly: a copy of a POSIX sys
 * with a test's clock runs every wait loop here in that clock's time
 * (tests/test_sys_posix.c, "fake clock").
 * Each op is a libfiu fault point (docs/fault-points.md): when enabled it
 * fails with the errno given as failinfo (or the op's usual failure). */
#include "ddp/sys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/host.h"
#include "sys_nccl_priv.h"

extern char **environ;

/* Fail with -failinfo (or the point's default errno) when the fault point
 * (ddp/faults.h) is enabled. */
#define SYS_FAULT(id)                                                          \
    do {                                                                       \
        int fe_ = ddp_fault_fire(DDP_FP_##id);                                 \
        if (fe_)                                                               \
            return fe_;                                                        \
    } while (0)

static int64_t px_now(ddp_sys_t *s)
{
    (void)s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * DDP_NS_PER_S + ts.tv_nsec;
}

/* poll(2) timeout in ms for a deadline: -1 never, 0 passed, else rounded up
 * so that we never wake before the deadline and spin. */
static int timeout_ms(ddp_sys_t *s, int64_t deadline)
{
    if (deadline == DDP_DEADLINE_NEVER)
        return -1;
    int64_t left = deadline - ddp_sys_now(s);
    if (left <= 0)
        return 0;
    int64_t ms = (left + DDP_NS_PER_MS - 1) / DDP_NS_PER_MS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

static int px_sleep_until(ddp_sys_t *s, int64_t deadline)
{
    (void)s;
    SYS_FAULT(SYS_TIME_SLEEP);
    if (deadline == DDP_DEADLINE_NEVER)
        return ddp_err_set(-EINVAL, "sleep without a deadline");
    struct timespec ts = {.tv_sec = deadline / DDP_NS_PER_S,
                          .tv_nsec = deadline % DDP_NS_PER_S};
    int rc;
    while ((rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) ==
           EINTR)
        ;
    return rc ? -rc : 0;
}

static void to_addr(const struct sockaddr *sa, ddp_addr_t *out)
{
    memset(out, 0, sizeof *out);
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        /* Report IPv4 peers of a dual-stack socket as IPv4. */
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            out->family = 4;
            memcpy(out->ip, &s6->sin6_addr.s6_addr[12], 4);
        } else {
            out->family = 6;
            memcpy(out->ip, &s6->sin6_addr, 16);
            out->scope = s6->sin6_scope_id;
        }
        out->port = ntohs(s6->sin6_port);
    } else {
        const struct sockaddr_in *s4 = (const void *)sa;
        out->family = 4;
        memcpy(out->ip, &s4->sin_addr, 4);
        out->port = ntohs(s4->sin_port);
    }
}

static socklen_t to_sockaddr(const ddp_addr_t *a, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (a->family == 6) {
        struct sockaddr_in6 *s6 = (void *)ss;
        s6->sin6_family = AF_INET6;
        memcpy(&s6->sin6_addr, a->ip, 16);
        s6->sin6_port = htons(a->port);
        s6->sin6_scope_id = a->scope;
        return sizeof *s6;
    }
    struct sockaddr_in *s4 = (void *)ss;
    s4->sin_family = AF_INET;
    memcpy(&s4->sin_addr, a->ip, 4);
    s4->sin_port = htons(a->port);
    return sizeof *s4;
}

/* DDPSIM_HOSTS="name=addr,name=addr": a static host table consulted before
 * the resolver (real scenario runs on loopback give each simulated host
 * name an address of 127/8 this way). A name listed several times has
 * several answers, in order. The count found (0: not listed). */
static int hosts_table(ddp_sys_t *s, const char *host, uint16_t port, ddp_addr_t *out,
                       int max)
{
    const char *t = ddp_env_get(ddp_sys_env(s), "DDPSIM_HOSTS");
    size_t hl = strlen(host);
    int n = 0;
    while (t && *t && n < max) {
        const char *eq = strchr(t, '='), *end = strchr(t, ',');
        if (!end)
            end = t + strlen(t);
        if (eq && eq < end && (size_t)(eq - t) == hl && !strncmp(t, host, hl)) {
            char addr[64];
            snprintf(addr, sizeof addr, "%.*s", (int)(end - eq - 1), eq + 1);
            n += ddp_addr_parse(addr, port, &out[n]) == 0;
        }
        t = *end ? end + 1 : end;
    }
    return n;
}

static int px_resolve(ddp_sys_t *s, const char *host, uint16_t port,
                      ddp_addr_t *out, int max)
{
    ddp_fault_call_t call = {.point = DDP_FP_SYS_NET_RESOLVE, .node = -1,
                             .rank = ddp_ident_rank(), .task = -1, .peer_node = -1,
                             .port = port, .now = ddp_sys_now(s)};
    int fe = ddp_fault_fire_call(&call);
    if (fe)
        return fe;
    if (max <= 0)
        return ddp_err_set(-EINVAL, "resolve: no room for addresses");
    int num = ddp_sys_resolve_numeric(s, host, port, &out[0]);
    if (num != 0)
        return num;
    int listed = hosts_table(s, host, port, out, max);
    if (listed)
        return listed;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return ddp_err_set(DDP_ENOT_FOUND, "cannot resolve host \"%s\": %s",
                           host, gai_strerror(rc));
    int n = 0;
    /* IPv4 first: a name that resolves to ::1 and 127.0.0.1 should reach an
     * IPv4-only listener at once (pytorch#121807 looped here). */
    for (int pass = 0; pass < 2; pass++)
        for (struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next) {
            if ((pass == 0) != (ai->ai_family == AF_INET))
                continue;
            to_addr(ai->ai_addr, &out[n]);
            out[n].port = port;
            int dup = 0;
            for (int j = 0; j < n; j++)
                dup |= ddp_addr_equal(&out[j], &out[n]);
            if (!dup)
                n++;
        }
    freeaddrinfo(res);
    if (n == 0)
        return ddp_err_set(DDP_ENOT_FOUND, "host \"%s\" has no address", host);
    return n;
}

static int px_hostname(ddp_sys_t *s, char *buf, size_t n)
{
    SYS_FAULT(SYS_NET_HOSTNAME);
    /* a real scenario run's process: its node's host name (DDPSIM_HOSTS
     * is that run's host table) */
    const char *node = ddp_env_get(ddp_sys_env(s), "DDPSIM_HOSTNAME");
    if (node && node[0]) {
        snprintf(buf, n, "%s", node);
        return 0;
    }
    if (gethostname(buf, n) != 0)
        return ddp_err_set(-errno, "gethostname: %s", strerror(errno));
    buf[n - 1] = '\0';
    return 0;
}

/* getaddrinfo(AI_CANONNAME)'s name for host; a name of the DDPSIM_HOSTS
 * table (a real scenario run's node) is its own. */
static int px_canon_name(ddp_sys_t *s, const char *host, char *buf, size_t n)
{
    ddp_addr_t a;
    if (hosts_table(s, host, 0, &a, 1)) {
        snprintf(buf, n, "%s", host);
        return 0;
    }
    struct addrinfo hints = {.ai_flags = AI_CANONNAME, .ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return ddp_err_set(DDP_ENOT_FOUND, "cannot resolve host \"%s\": %s", host,
                           gai_strerror(rc));
    snprintf(buf, n, "%s", res->ai_canonname ? res->ai_canonname : "");
    freeaddrinfo(res);
    return 0;
}

static int mask_len(const struct sockaddr *m)
{
    const uint8_t *b = NULL;
    int n = 0, len = 0;
    if (m && m->sa_family == AF_INET)
        b = (const uint8_t *)&((const struct sockaddr_in *)m)->sin_addr, n = 4;
    else if (m && m->sa_family == AF_INET6)
        b = ((const struct sockaddr_in6 *)m)->sin6_addr.s6_addr, n = 16;
    for (int i = 0; i < n; i++)
        for (int k = 7; k >= 0 && (b[i] >> k & 1); k--)
            len++;
    return len;
}

/* Every interface's IPv4 and IPv6 address, as `ip addr` lists them. */
static int px_ifaddrs(ddp_sys_t *s, ddp_ifaddr_t *out, int max)
{
    (void)s;
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0)
        return ddp_err_set(-errno, "getifaddrs: %s", strerror(errno));
    int n = 0;
    for (struct ifaddrs *i = all; i && n < max; i = i->ifa_next)
        if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
                            i->ifa_addr->sa_family == AF_INET6)) {
            snprintf(out[n].name, sizeof out[n].name, "%s", i->ifa_name ? i->ifa_name : "?");
            to_addr(i->ifa_addr, &out[n].addr);
            out[n].addr.port = 0;
            out[n].index = if_nametoindex(out[n].name);
            out[n++].prefix = mask_len(i->ifa_netmask);
        }
    freeifaddrs(all);
    return n;
}

/* Loopback is this host's alone, except where a DDPSIM_HOSTS table puts
 * several simulated hosts on this machine's loopback (real scenario runs
 * without namespaces: node i at 127.0.0.(i+1)): there it is the network
 * that every "node" shares. */
static int px_node_local(ddp_sys_t *s, const ddp_addr_t *a)
{
    const char *t = ddp_env_get(ddp_sys_env(s), "DDPSIM_HOSTS");
    return !(t && *t) && ddp_addr_is_loopback(a);
}

static long rlim_long(rlim_t v) { return v == RLIM_INFINITY ? -1 : (long)v; }

/* The soft RLIMIT_NOFILE up to the hard one. An unlimited hard limit is
 * not a soft one Linux takes for open files (nr_open caps it): refused
 * with the values, as any other failure. */
int ddp_sys_host_fd_limit_raise(long *before, long *after)
{
    struct rlimit rl;
    *before = *after = -1;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return ddp_err_set(-errno, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    *before = *after = rlim_long(rl.rlim_cur);
    if (rl.rlim_cur == rl.rlim_max)
        return 0;
    struct rlimit want = {rl.rlim_max, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
        char hard[24] = "unlimited";
        if (rl.rlim_max != RLIM_INFINITY)
            snprintf(hard, sizeof hard, "%ld", (long)rl.rlim_max);
        return ddp_err_set(-errno,
                           "cannot raise the soft open-file limit %ld to the hard limit %s: "
                           "%s (give a number with `ulimit -n N` before the start)",
                           *before, hard, strerror(errno));
    }
    *after = rlim_long(rl.rlim_max);
    return 0;
}

long long ddp_sys_host_as_limit_kib(void)
{
    struct rlimit rl;
    return getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
               ? (long long)(rl.rlim_cur / 1024)
               : -1;
}

static int px_fd_limit_raise(ddp_sys_t *s, long *before, long *after)
{
    (void)s;
    return ddp_sys_host_fd_limit_raise(before, after);
}

static int px_listen(ddp_sys_t *s, const ddp_addr_t *a, int backlog)
{
    (void)s;
    char as[DDP_ADDR_STRLEN];
    ddp_addr_format(a, as, sizeof as);
    SYS_FAULT(SYS_NET_LISTEN);
    int fd = socket(a->family == 6 ? AF_INET6 : AF_INET,
                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ddp_err_set(-errno, "socket for %s: %s", as, strerror(errno));
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->family == 6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    struct sockaddr_storage ss;
    socklen_t sl = to_sockaddr(a, &ss);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 ||
        listen(fd, backlog > 0 ? backlog : SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        ddp_err_set(-e, "could not bind %s: %s", as, strerror(e));
        ddp_err_addr("%s", as);
        return -e;
    }
    return fd;
}

static int wait_fd(ddp_sys_t *s, int fd, short ev, int64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = ev};
    for (;;) {
        int ms = timeout_ms(s, deadline);
        int rc = poll(&p, 1, ms);
        if (rc > 0)
            return 0;
        if (rc == 0)
            return DDP_ETIMEOUT;
        if (errno != EINTR)
            return -errno;
    }
}

static int px_accept(ddp_sys_t *s, int fd, ddp_addr_t *peer, int64_t deadline)
{
    SYS_FAULT(SYS_NET_ACCEPT);
    int64_t start = ddp_sys_now(s);
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int c = accept4(fd, (struct sockaddr *)&ss, &sl,
                        SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0) {
            int one = 1;
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (peer)
                to_addr((struct sockaddr *)&ss, peer);
            return c;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return ddp_err_set(-errno, "accept: %s", strerror(errno));
        if (deadline <= ddp_sys_now(s))
            return deadline <= start ? -EAGAIN : DDP_ETIMEOUT;
        int rc = wait_fd(s, fd, POLLIN, deadline);
        if (rc == DDP_ETIMEOUT) {
            ddp_err_set(DDP_ETIMEOUT, "no connection arrived in time");
            return ddp_err_waited(ddp_sys_now(s) - start);
        }
        if (rc < 0)
            return rc;
    }
}

static int connect_once(ddp_sys_t *s, const ddp_addr_t *a, int64_t deadline)
{
    char as[DDP_ADDR_STRLEN];
    ddp_addr_format(a, as, sizeof as);
    /* the fault executor aims by the call's details, handed to it here */
    ddp_fault_call_t call = {.point = DDP_FP_SYS_NET_CONNECT, .node = -1,
                             .rank = ddp_ident_rank(), .task = -1, .peer_node = -1,
                             .port = a->port, .addr = a, .now = ddp_sys_now(s)};
    int fe = ddp_fault_fire_call(&call);
    if (fe)
        return fe;
    int64_t start = ddp_sys_now(s);
    int fd = socket(a->family == 6 ? AF_INET6 : AF_INET,
                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ddp_err_set(-errno, "socket for %s: %s", as, strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_storage ss;
    socklen_t sl = to_sockaddr(a, &ss);
    int e = 0;
    if (connect(fd, (struct sockaddr *)&ss, sl) != 0) {
        e = errno;
        if (e == EINPROGRESS || e == EINTR) {
            int rc = wait_fd(s, fd, POLLOUT, deadline);
            if (rc < 0) {
                close(fd);
                if (rc == DDP_ETIMEOUT)
                    ddp_err_set(rc, "connect to %s did not complete in time", as);
                else
                    ddp_err_set(rc, "connect to %s: waiting failed: %s", as,
                                ddp_strerror(rc));
                ddp_err_addr("%s", as);
                return ddp_err_waited(ddp_sys_now(s) - start);
            }
            socklen_t el = sizeof e;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
                e = errno;
        }
    }
    if (e != 0) {
        close(fd);
        ddp_err_set(-e, "connect to %s failed: %s", as, strerror(e));
        return ddp_err_addr("%s", as);
    }
    return fd;
}

/* A POSIX sys: the failed connects made through it (a real run's
 * "retries", as the simulator counts a rank's failed connects). */
typedef struct {
    ddp_sys_t base;
    atomic_int failed_connects;
} px_sys_t;

static int px_connect(ddp_sys_t *s, const ddp_addr_t *a, int64_t deadline)
{
    int fd = connect_once(s, a, deadline);
    if (fd < 0)
        atomic_fetch_add(&((px_sys_t *)s->impl)->failed_connects, 1);
    return fd;
}

/* One sendmsg of m's pieces, waiting for room until the deadline: the
 * loop of px_send and px_sendv. */
static ssize_t px_sendmsg(ddp_sys_t *s, int fd, const struct msghdr *m,
                          int64_t deadline)
{
    SYS_FAULT(SYS_NET_SEND);
    int64_t start = ddp_sys_now(s);
    for (;;) {
        ssize_t w = sendmsg(fd, m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return ddp_err_set(-errno, "send: %s", strerror(errno));
        if (deadline <= ddp_sys_now(s))
            return deadline <= start ? -EAGAIN : DDP_ETIMEOUT;
        int rc = wait_fd(s, fd, POLLOUT, deadline);
        if (rc == DDP_ETIMEOUT) {
            ddp_err_set(DDP_ETIMEOUT, "send blocked until the deadline");
            return ddp_err_waited(ddp_sys_now(s) - start);
        }
        if (rc < 0)
            return rc;
    }
}

static ssize_t px_send(ddp_sys_t *s, int fd, const void *buf, size_t n,
                       int64_t deadline)
{
    struct iovec v = {.iov_base = (void *)buf, .iov_len = n};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
    return px_sendmsg(s, fd, &m, deadline);
}

static ssize_t px_sendv(ddp_sys_t *s, int fd, const ddp_iov_t *iov, int n,
                        int64_t deadline)
{
    struct iovec v[DDP_IOV_MAX];
    if (n < 1 || n > DDP_IOV_MAX)
        return ddp_err_set(-EINVAL, "sendv: %d pieces (1 to %d)", n, DDP_IOV_MAX);
    for (int i = 0; i < n; i++)
        v[i] = (struct iovec){.iov_base = (void *)iov[i].base, .iov_len = iov[i].len};
    struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)n};
    return px_sendmsg(s, fd, &m, deadline);
}

static ssize_t px_recv(ddp_sys_t *s, int fd, void *buf, size_t n,
                       int64_t deadline)
{
    SYS_FAULT(SYS_NET_RECV);
    int64_t start = ddp_sys_now(s);
    for (;;) {
        ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return ddp_err_set(-errno, "recv: %s", strerror(errno));
        if (deadline <= ddp_sys_now(s))
            return deadline <= start ? -EAGAIN : DDP_ETIMEOUT;
        int rc = wait_fd(s, fd, POLLIN, deadline);
        if (rc == DDP_ETIMEOUT) {
            ddp_err_set(DDP_ETIMEOUT, "nothing received before the deadline");
            return ddp_err_waited(ddp_sys_now(s) - start);
        }
        if (rc < 0)
            return rc;
    }
}

static int px_poll(ddp_sys_t *s, ddp_pollfd_t *fds, int nfds, int64_t deadline)
{
    SYS_FAULT(SYS_NET_POLL);
    struct pollfd stackp[64], *p = stackp;
    if (nfds > 64 && !(p = malloc(sizeof *p * (size_t)nfds)))
        return -ENOMEM;
    for (int i = 0; i < nfds; i++) {
        p[i].fd = fds[i].fd;
        p[i].events = (short)(((fds[i].events & DDP_POLLIN) ? POLLIN : 0) |
                              ((fds[i].events & DDP_POLLOUT) ? POLLOUT : 0));
        p[i].revents = 0;
    }
    int rc;
    do
        rc = poll(p, (nfds_t)nfds, timeout_ms(s, deadline));
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        rc = ddp_err_set(-errno, "poll: %s", strerror(errno));
    for (int i = 0; rc >= 0 && i < nfds; i++) {
        short r = p[i].revents;
        fds[i].revents =
            (short)(((r & POLLIN) ? DDP_POLLIN : 0) |
                    ((r & POLLOUT) ? DDP_POLLOUT : 0) |
                    ((r & (POLLERR | POLLNVAL)) ? DDP_POLLERR : 0) |
                    ((r & POLLHUP) ? DDP_POLLHUP : 0));
    }
    if (p != stackp)
        free(p);
    return rc;
}

/* Readiness sets: epoll(7), level-triggered. The kernel keeps the interest
 * list, so a wait costs O(ready sockets). */
static int px_epoll_create(ddp_sys_t *s)
{
    (void)s;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return ddp_err_set(-errno, "epoll_create1: %s", strerror(errno));
    return ep;
}

static int px_epoll_ctl(ddp_sys_t *s, int ep, int op, int fd, short events,
                        uint64_t data)
{
    (void)s;
    struct epoll_event e = {
        .events = ((events & DDP_POLLIN) ? EPOLLIN : 0u) |
                  ((events & DDP_POLLOUT) ? EPOLLOUT : 0u),
        .data.u64 = data};
    int o = op == DDP_EPOLL_ADD   ? EPOLL_CTL_ADD
            : op == DDP_EPOLL_MOD ? EPOLL_CTL_MOD
            : op == DDP_EPOLL_DEL ? EPOLL_CTL_DEL
                                  : -1;
    if (o < 0)
        return ddp_err_set(-EINVAL, "epoll_ctl: unknown operation %d", op);
    if (epoll_ctl(ep, o, fd, &e) != 0)
        return ddp_err_set(-errno, "epoll_ctl(%s) of socket %d: %s",
                           op == DDP_EPOLL_ADD   ? "add"
                           : op == DDP_EPOLL_MOD ? "mod"
                                                 : "del",
                           fd, strerror(errno));
    return 0;
}

static int px_epoll_wait(ddp_sys_t *s, int ep, ddp_epoll_event_t *out,
                         int max, int64_t deadline)
{
    SYS_FAULT(SYS_NET_EPOLL);
    struct epoll_event evs[256];
    if (max <= 0)
        return ddp_err_set(-EINVAL, "epoll_wait: no room for events");
    if (max > (int)(sizeof evs / sizeof evs[0]))
        max = (int)(sizeof evs / sizeof evs[0]);
    int rc;
    do
        rc = epoll_wait(ep, evs, max, timeout_ms(s, deadline));
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return ddp_err_set(-errno, "epoll_wait: %s", strerror(errno));
    for (int i = 0; i < rc; i++) {
        uint32_t r = evs[i].events;
        out[i].data = evs[i].data.u64;
        out[i].events = (short)(((r & EPOLLIN) ? DDP_POLLIN : 0) |
                                ((r & EPOLLOUT) ? DDP_POLLOUT : 0) |
                                ((r & EPOLLERR) ? DDP_POLLERR : 0) |
                                ((r & EPOLLHUP) ? DDP_POLLHUP : 0));
    }
    return rc;
}

static int px_epoll_close(ddp_sys_t *s, int ep)
{
    (void)s;
    return close(ep) == 0 ? 0 : -errno;
}

static int px_close(ddp_sys_t *s, int fd)
{
    (void)s;
    return close(fd) == 0 ? 0 : -errno;
}

static int px_local_addr(ddp_sys_t *s, int fd, ddp_addr_t *out)
{
    (void)s;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return ddp_err_set(-errno, "getsockname: %s", strerror(errno));
    to_addr((struct sockaddr *)&ss, out);
    return 0;
}

/* What a non-regular file is, for the error. */
static const char *file_kind(mode_t m)
{
    return S_ISFIFO(m)  ? "a FIFO (named pipe)"
           : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

static int too_big(const char *path, const char *size)
{
    return ddp_err_set(DDP_ELIMIT,
                       "cannot read \"%s\": it holds %s, more than the %d MiB "
                       "ddpsim reads from one file; expected a scenario, "
                       "include or rank file (check that the path names the "
                       "file you meant)",
                       path, size, DDP_SYS_READ_MAX >> 20);
}

/* Bounded and non-blocking: O_NONBLOCK so that opening a FIFO without a
 * writer returns at once, fstat before the first byte so that a FIFO,
 * device or directory is refused by type, and never more than
 * DDP_SYS_READ_MAX bytes even from a file whose size says 0 (procfs) or
 * that grows while we read. */
static int px_read_file(ddp_sys_t *s, const char *path, char **data,
                        size_t *len)
{
    (void)s;
    SYS_FAULT(SYS_FS_READ);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return ddp_err_set(-errno, "cannot open \"%s\": %s", path,
                           strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ddp_err_set(-e, "cannot stat \"%s\": %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return ddp_err_set(-EISDIR, "cannot read \"%s\": it is a directory; "
                                    "expected a file",
                           path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ddp_err_set(DDP_EUNSUPPORTED,
                           "cannot read \"%s\": it is %s; expected a regular "
                           "file (ddpsim reads whole files, and this one may "
                           "never end or block)",
                           path, file_kind(st.st_mode));
    }
    if (st.st_size > DDP_SYS_READ_MAX) {
        close(fd);
        char size[48];
        snprintf(size, sizeof size, "%lld bytes", (long long)st.st_size);
        return too_big(path, size);
    }
    /* One byte past the cap tells a file at the cap from a longer one. */
    size_t cap = (size_t)st.st_size + 2, n = 0;
    if (cap < 4096)
        cap = 4096;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            close(fd);
            return ddp_err_set(-ENOMEM, "out of memory reading \"%s\"", path);
        }
        if (n + 1 == cap) {
            if (n > DDP_SYS_READ_MAX)
                break;
            size_t ncap = cap * 2 > (size_t)DDP_SYS_READ_MAX + 2
                              ? (size_t)DDP_SYS_READ_MAX + 2
                              : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb)
                free(buf);
            buf = nb;
            cap = ncap;
            continue;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return ddp_err_set(-e, "error reading \"%s\": %s", path,
                               strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > DDP_SYS_READ_MAX) {
        free(buf);
        return too_big(path, "more bytes than that as it was read");
    }
    buf[n] = '\0';
    *data = buf;
    if (len)
        *len = n;
    return 0;
}

long ddp_sys_pid(void) { return (long)getpid(); }

int64_t ddp_sys_host_now(void) { return px_now(NULL); }

uint64_t ddp_sys_random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
        return v;
    /* No entropy source (an old kernel): the clock and pid still set two
     * runs of one host apart. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
           ((uint64_t)getpid() << 40);
}

void ddp_sys_wall_text(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(buf, n, "%lld s after the epoch", (long long)t);
}

int ddp_sys_read_host_file(const char *path, char **data, size_t *len)
{
    return px_read_file(NULL, path, data, len);
}

int ddp_sys_sweep_stale(const char *dir, const char *prefix)
{
    return ddp_sys_sweep_stale_each(dir, prefix, NULL, NULL);
}

int ddp_sys_sweep_stale_each(const char *dir, const char *prefix,
                             void (*fn)(void *arg, const char *path), void *arg)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t plen = strlen(prefix);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, plen))
            continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        /* Only a dead owner's: a live run's files (or a name not ours) stay;
         * EPERM means somebody else's live process. */
        if (end == e->d_name + plen || *end != '-' || pid <= 0 ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        if (fn)
            fn(arg, path);
        if (unlink(path) == 0)
            n++;
    }
    closedir(d);
    return n;
}

int ddp_sys_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ddp_err_set(-ENAMETOOLONG, "folder name too long: %.80s...", path);
    for (char *p = buf + 1;; p++) {
        char c = *p;
        if (c != '/' && c != '\0')
            continue;
        *p = '\0';
        struct stat sb;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ddp_err_set(-errno, "cannot make folder %s: %s", buf, strerror(errno));
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return ddp_err_set(-ENOTDIR, "%s is not a folder", buf);
        *p = c;
        if (!c)
            return 0;
    }
}

/* The TCP sockets in /proc/<pid>/net/tcp{,6} (the view of pid's network
 * namespace) whose remote port is rport: up to max of them into out. Reading the table costs the kernel a walk of
 * its whole hash (milliseconds on a large host): read it seldom. */
typedef struct {
    unsigned long inode;
    unsigned lport;
} tcp_conn_t;

static int tcp_conns(long pid, uint16_t rport, tcp_conn_t *out, int max)
{
    int n = 0;
    for (int v6 = 0; v6 < 2; v6++) {
        char path[64], line[512];
        snprintf(path, sizeof path, "/proc/%ld/net/tcp%s", pid, v6 ? "6" : "");
        FILE *f = fopen(path, "r");
        while (f && n < max && fgets(line, sizeof line, f)) {
            char la[64], ra[64];
            unsigned lp, rp;
            unsigned long inode;
            /* sl local:port rem:port st tx:rx tr:when retrnsmt uid timeout inode */
            if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %63[0-9A-Fa-f]:%x %*s %*s %*s %*s %*s %*s %lu",
                       la, &lp, ra, &rp, &inode) == 5 &&
                rp == rport && inode)
                out[n++] = (tcp_conn_t){inode, lp};
        }
        if (f)
            fclose(f);
    }
    return n;
}

static long proc_session(long pid);

/* fn(arg, inode) for each socket descriptor of process pid, until fn
 * returns nonzero: that value (0 when it never did). */
static int each_socket(long pid, int (*fn)(void *, unsigned long), void *arg)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd", pid);
    DIR *fd = opendir(path);
    int r = 0;
    for (struct dirent *x; fd && !r && (x = readdir(fd));) {
        char link[300], target[64];
        unsigned long inode;
        if (x->d_name[0] == '.')
            continue;
        snprintf(link, sizeof link, "/proc/%ld/fd/%s", pid, x->d_name);
        ssize_t tl = readlink(link, target, sizeof target - 1);
        if (tl <= 0)
            continue;
        target[tl] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) == 1)
            r = fn(arg, inode);
    }
    if (fd)
        closedir(fd);
    return r;
}

/* The index (ddp_sys_tcp_owner): which session holds each socket inode,
 * as of the last /proc scan. */
struct ddp_sys_tcp_owners {
    struct owned {
        unsigned long inode;
        long sid;
    } *v;
    int n, cap;
    long scan_sid; /* the session being scanned (add_owned) */
    tcp_conn_t *conn; /* the connections to the last remote port asked for, */
    int nconn;        /* as the sessions' namespaces showed them last */
    unsigned rport;
};

ddp_sys_tcp_owners_t *ddp_sys_tcp_owners_new(void)
{
    return calloc(1, sizeof(ddp_sys_tcp_owners_t));
}

void ddp_sys_tcp_owners_free(ddp_sys_tcp_owners_t *t)
{
    if (t)
        free(t->v), free(t->conn);
    free(t);
}

static int add_owned(void *arg, unsigned long inode)
{
    ddp_sys_tcp_owners_t *t = arg;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 256;
        struct owned *v = realloc(t->v, sizeof *v * (size_t)cap);
        if (!v)
            return -ENOMEM;
        t->v = v, t->cap = cap;
    }
    t->v[t->n++] = (struct owned){inode, t->scan_sid};
    return 0;
}

/* The index again, from one pass over /proc: the sockets of every process
 * of the sessions sids[0..n). */
static int rescan_owners(ddp_sys_tcp_owners_t *t, const long *sids, int n)
{
    t->n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10), sid;
        if (end == e->d_name || *end || (sid = proc_session(pid)) < 0)
            continue;
        for (int i = 0; i < n && !rc; i++)
            if (sids[i] == sid) {
                t->scan_sid = sid;
                rc = each_socket(pid, add_owned, t);
                break;
            }
    }
    closedir(d);
    return rc;
}

/* The index in sids of the session the index says holds one of ino. */
static int owner_of(const ddp_sys_tcp_owners_t *t, const long *sids, int n,
                    const unsigned long *ino, int nino)
{
    for (int k = 0; k < t->n; k++)
        for (int j = 0; j < nino; j++)
            for (int i = 0; t->v[k].inode == ino[j] && i < n; i++)
                if (sids[i] == t->v[k].sid)
                    return i;
    return -1;
}

#define OWNER_CONNS 4096
/* The connections to rport again, from each network namespace of the
 * sessions sids[0..n) once (sessions on loopback share one). */
static int reread_conns(ddp_sys_tcp_owners_t *t, const long *sids, int n, uint16_t rport)
{
    if (!t->conn && !(t->conn = malloc(sizeof *t->conn * OWNER_CONNS)))
        return -ENOMEM;
    unsigned long ns[64];
    int nns = 0;
    t->nconn = 0;
    t->rport = rport;
    for (int i = 0; i < n && t->nconn < OWNER_CONNS; i++) {
        char path[64];
        struct stat sb;
        snprintf(path, sizeof path, "/proc/%ld/ns/net", sids[i]);
        if (stat(path, &sb) != 0)
            continue;
        int seen = 0;
        for (int k = 0; k < nns && !seen; k++)
            seen = ns[k] == (unsigned long)sb.st_ino;
        if (seen)
            continue;
        if (nns < 64)
            ns[nns++] = (unsigned long)sb.st_ino;
        t->nconn += tcp_conns(sids[i], rport, t->conn + t->nconn, OWNER_CONNS - t->nconn);
    }
    return 0;
}

/* The inodes of the known connections from lport to t->rport. */
static int conn_inodes(const ddp_sys_tcp_owners_t *t, uint16_t lport, unsigned long *ino,
                       int max)
{
    int n = 0;
    for (int i = 0; i < t->nconn && n < max; i++)
        if (t->conn[i].lport == lport)
            ino[n++] = t->conn[i].inode;
    return n;
}

int ddp_sys_tcp_owner(ddp_sys_tcp_owners_t *t, const long *sids, int n, uint16_t local_port,
                      uint16_t remote_port)
{
    unsigned long ino[8];
    int nino = t->rport == remote_port ? conn_inodes(t, local_port, ino, 8) : 0;
    int who = nino ? owner_of(t, sids, n, ino, nino) : -1;
    if (who >= 0)
        return who;
    /* a connection, or a socket, newer than what was read */
    int rc = reread_conns(t, sids, n, remote_port);
    if (rc < 0)
        return rc;
    if (!(nino = conn_inodes(t, local_port, ino, 8)))
        return -ENOENT; /* in none of their namespaces: asking again won't find it */
    if ((who = owner_of(t, sids, n, ino, nino)) >= 0)
        return who;
    rc = rescan_owners(t, sids, n);
    return rc < 0 ? rc : owner_of(t, sids, n, ino, nino);
}

int ddp_sys_session_holds_tcp(long sid, uint16_t local_port, uint16_t remote_port)
{
    ddp_sys_tcp_owners_t *t = ddp_sys_tcp_owners_new();
    if (!t)
        return -ENOMEM;
    int who = ddp_sys_tcp_owner(t, &sid, 1, local_port, remote_port);
    ddp_sys_tcp_owners_free(t);
    return who == 0 ? 1 : who == -1 ? 0 : who;
}

/* The session of /proc/PID/stat (pid (comm) state ppid pgrp session: comm
 * may hold blanks), or -1. */
static long proc_session(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[len] = '\0';
    const char *rp = strrchr(buf, ')');
    long session = -1;
    if (!rp || sscanf(rp + 1, " %*c %*d %*d %ld", &session) != 1)
        return -1;
    return session;
}

int ddp_sys_session_pids(long sid, long *pids, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    int n = 0;
    for (struct dirent *e; n < max && (e = readdir(d));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (end != e->d_name && !*end && proc_session(pid) == sid)
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

int ddp_sys_proc_getenv(long pid, const char *name, char *buf, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    size_t nl = strlen(name);
    int found = 0, c = 0;
    while (!found && c != EOF) { /* NUL-separated NAME=VALUE entries */
        char var[4096];
        size_t k = 0;
        while ((c = fgetc(f)) != EOF && c != '\0')
            if (k < sizeof var - 1)
                var[k++] = (char)c;
        var[k] = '\0';
        if (k > nl && !strncmp(var, name, nl) && var[nl] == '=') {
            snprintf(buf, n, "%s", var + nl + 1);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

int ddp_sys_proc_fd_path(long pid, int fd, char *buf, size_t n)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/%ld/fd/%d", pid, fd);
    ssize_t len = readlink(link, buf, n ? n - 1 : 0);
    if (len < 0)
        return -errno;
    buf[len] = '\0';
    return 0;
}

/* ---- output files (ddp_out_*; contract in ddp/sys.h) ---- */

struct ddp_out {
    FILE *f;
    int fd;   /* the temporary file's; 1 for "-" */
    int err;  /* the first write's errno, kept: stdio's error flag has none */
    const char *what;
    char *path, *tmp; /* tmp NULL for "-" */
};

/* The stream's writes go straight to fd, so a failure's errno is ours to
 * keep (a later fclose would report EIO or nothing at all). */
static ssize_t out_write(void *cookie, const char *buf, size_t n)
{
    ddp_out_t *o = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!o->err)
                o->err = w < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

static int out_target_ok(const char *path, const char *what, mode_t *mode)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return ddp_err_set(-errno, "cannot write %s \"%s\": %s", what, path,
                           strerror(errno));
    }
    if (S_ISREG(st.st_mode)) {
        if (mode)
            *mode = st.st_mode & 07777;
        return 0;
    }
    const char *kind = S_ISDIR(st.st_mode)   ? "a directory"
                       : S_ISLNK(st.st_mode) ? "a symbolic link"
                                             : file_kind(st.st_mode);
    return ddp_err_set(DDP_EUNSUPPORTED,
                       "cannot write %s \"%s\": it is %s; expected a regular "
                       "file or a new path (ddpsim replaces the file whole, "
                       "and would replace that; name a file, or \"-\" for "
                       "standard output)",
                       what, path, kind);
}

int ddp_out_check(const char *path, const char *what)
{
    if (!strcmp(path, "-"))
        return 0;
    return out_target_ok(path, what, NULL);
}

static void out_free(ddp_out_t *o)
{
    free(o->path);
    free(o->tmp);
    free(o);
}

int ddp_out_open(const char *path, const char *what, ddp_out_t **out)
{
    *out = NULL;
    mode_t mode = 0666; /* narrowed by the umask, as a plain fopen would */
    int keep_mode = 0;
    if (strcmp(path, "-")) {
        mode_t m = 0;
        int rc = out_target_ok(path, what, &m);
        if (rc)
            return rc;
        if (m)
            mode = m, keep_mode = 1;
    }
    ddp_out_t *o = calloc(1, sizeof *o);
    if (!o || !(o->path = strdup(path))) {
        free(o);
        return ddp_err_set(-ENOMEM, "out of memory opening %s", what);
    }
    o->what = what;
    o->fd = 1;
    fflush(stdout); /* what stdout buffered comes first */
    if (strcmp(path, "-")) {
        /* In the target's folder, so the rename stays on one file system. */
        const char *slash = strrchr(path, '/');
        int dlen = slash ? (int)(slash - path) + 1 : 0;
        static atomic_uint seq;
        for (int tries = 0; o->fd == 1 && tries < 100; tries++) {
            free(o->tmp);
            o->tmp = NULL;
            if (asprintf(&o->tmp, "%.*s.%s.%ld.%u.tmp", dlen, path,
                         path + dlen, (long)getpid(),
                         atomic_fetch_add(&seq, 1)) < 0) {
                o->tmp = NULL;
                out_free(o);
                return ddp_err_set(-ENOMEM, "out of memory opening %s", what);
            }
            int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
            if (fd >= 0) {
                o->fd = fd;
            } else if (errno != EEXIST) {
                int e = errno;
                int rc = ddp_err_set(-e, "cannot write %s \"%s\": creating "
                                         "\"%s\" beside it failed: %s",
                                     what, path, o->tmp, strerror(e));
                out_free(o);
                return rc;
            }
        }
        if (o->fd == 1) {
            out_free(o);
            return ddp_err_set(-EEXIST, "cannot write %s \"%s\": no free "
                               "temporary name beside it", what, path);
        }
        if (keep_mode) /* a replaced file keeps its permissions */
            (void)fchmod(o->fd, mode);
    }
    o->f = fopencookie(o, "w", (cookie_io_functions_t){.write = out_write});
    if (!o->f) {
        int e = errno;
        ddp_out_abort(o);
        return ddp_err_set(-e, "cannot write %s \"%s\": %s", what, path,
                           strerror(e));
    }
    *out = o;
    return 0;
}

FILE *ddp_out_file(ddp_out_t *o) { return o->f; }

void ddp_out_abort(ddp_out_t *o)
{
    if (!o)
        return;
    if (o->f)
        fclose(o->f);
    if (o->tmp) {
        close(o->fd);
        unlink(o->tmp);
    }
    out_free(o);
}

int ddp_out_commit(ddp_out_t *o)
{
    int e = 0;
    if (fflush(o->f) != 0 && !o->err)
        o->err = errno ? errno : EIO;
    if (!o->err && ferror(o->f))
        o->err = EIO;
    if (!o->err && o->tmp && fsync(o->fd) != 0)
        o->err = errno;
    int rc = 0;
    if (o->err) {
        e = o->err;
        rc = ddp_err_set(-e, "writing %s \"%s\" failed: %s%s", o->what,
                         o->path, strerror(e),
                         o->tmp ? " (nothing was written under that name)" : "");
    } else if (o->tmp) {
        /* The target may have changed since it was opened. */
        rc = out_target_ok(o->path, o->what, NULL);
        if (!rc && rename(o->tmp, o->path) != 0) {
            e = errno;
            rc = ddp_err_set(-e, "cannot write %s \"%s\": renaming \"%s\" "
                                 "onto it failed: %s",
                             o->what, o->path, o->tmp, strerror(e));
        }
        if (!rc) {
            free(o->tmp);
            o->tmp = NULL; /* renamed: nothing to remove */
        }
    }
    fclose(o->f);
    o->f = NULL;
    if (o->tmp) {
        close(o->fd);
        unlink(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
    } else if (o->fd != 1) {
        close(o->fd);
    }
    out_free(o);
    return rc;
}

static int px_somaxconn(ddp_sys_t *s)
{
    char *txt = NULL;
    int v = 4096; /* Linux >= 5.4 default */
    if (px_read_file(s, "/proc/sys/net/core/somaxconn", &txt, NULL) == 0) {
        int x = atoi(txt);
        if (x > 0)
            v = x;
        free(txt);
    }
    return v;
}

/* In a new child: PR_SET_PDEATHSIG, unless the parent is gone already
 * (it died before the prctl: the signal would never come). Only
 * async-signal-safe calls: the parent may have threads. */
static void child_die_with(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);
}

static void close_pair(int *fd)
{
    for (int i = 0; i < 2; i++)
        if (fd[i] >= 0)
            close(fd[i]);
}

/* In a new child with a guard: wait until the parent has told the guard
 * about it (one byte on go); EOF means the parent died first: exit. */
static void child_wait_go(int *go)
{
    if (go[0] < 0)
        return;
    close(go[1]);
    char c;
    ssize_t r;
    do
        r = read(go[0], &c, 1);
    while (r < 0 && errno == EINTR);
    if (r != 1)
        _exit(127);
    close(go[0]);
}

/* posix_spawn cannot set a parent-death signal: fork, set it, exec. An exec
 * that fails sends its errno up a close-on-exec pipe, so the caller sees
 * "could not start" as with posix_spawn. */
static int spawn_argv_dying(const ddp_spawn_t *w, char **envp, pid_t *out)
{
    int pfd[2], go[2] = {-1, -1};
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -errno;
    if (w->guard && pipe2(go, O_CLOEXEC) != 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return -e;
    }
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        close_pair(go);
        return -e;
    }
    if (p == 0) {
        close(pfd[0]);
        child_die_with(parent);
        child_wait_go(go);
        const char *paths[2] = {w->stdout_path, w->stderr_path};
        int e = 0;
        for (int k = 0; k < 2 && !e; k++) {
            if (!paths[k])
                continue;
            int fd = open(paths[k], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, k + 1) < 0)
                e = errno;
            if (fd >= 0 && fd != k + 1)
                close(fd);
        }
        if (!e) {
            if (strchr(w->argv[0], '/'))
                execve(w->argv[0], w->argv, envp);
            else
                execvpe(w->argv[0], w->argv, envp);
            e = errno;
        }
        ssize_t wr = write(pfd[1], &e, sizeof e);
        (void)wr;
        _exit(127);
    }
    close(pfd[1]);
    if (w->guard) { /* watched before it can exec: then it may go */
        ddp_sys_guard_watch(w->guard, (long)p, 1);
        close(go[0]);
        ssize_t g = write(go[1], "g", 1);
        (void)g;
        close(go[1]);
    }
    int e = 0;
    ssize_t r;
    do
        r = read(pfd[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof e) {
        waitpid(p, NULL, 0);
        return -e;
    }
    *out = p;
    return 0;
}

static int px_spawn(ddp_sys_t *s, const ddp_spawn_t *w, ddp_pid_t *pid)
{
    SYS_FAULT(SYS_PROC_SPAWN);
    char **envp = ddp_env_to_array(w->env ? w->env : s->env);
    if (!envp)
        return -ENOMEM;
    pid_t p;
    if (w->argv && w->die_with_parent) {
        int rc = spawn_argv_dying(w, envp, &p);
        ddp_env_free_array(envp);
        if (rc)
            return ddp_err_set(rc, "could not start \"%s\": %s", w->argv[0],
                               strerror(-rc));
    } else if (w->argv) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        if (w->stdout_path)
            posix_spawn_file_actions_addopen(&fa, 1, w->stdout_path,
                                             O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (w->stderr_path)
            posix_spawn_file_actions_addopen(&fa, 2, w->stderr_path,
                                             O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int rc = strchr(w->argv[0], '/')
                     ? posix_spawn(&p, w->argv[0], &fa, NULL, w->argv, envp)
                     : posix_spawnp(&p, w->argv[0], &fa, NULL, w->argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        ddp_env_free_array(envp);
        if (rc != 0)
            return ddp_err_set(-rc, "could not start \"%s\": %s", w->argv[0],
                               strerror(rc));
    } else if (w->entry) {
        ddp_env_free_array(envp);
        fflush(NULL);
        pid_t parent = getpid();
        p = fork();
        if (p < 0)
            return ddp_err_set(-errno, "fork: %s", strerror(errno));
        if (p == 0) {
            if (w->die_with_parent)
                child_die_with(parent);
            ddp_sys_t *child = ddp_sys_posix_new(
                ddp_env_clone(w->env ? w->env : s->env));
            int rc = child ? w->entry(child, w->arg) : 1;
            ddp_sys_free(child);
            fflush(NULL);
            /* exit(), not _exit(): gcov must write the child's counters. */
            exit(rc < 0 ? 1 : rc > 255 ? 255 : rc);
        }
    } else {
        ddp_env_free_array(envp);
        return ddp_err_set(-EINVAL, "spawn: neither argv nor entry given");
    }
    *pid = p;
    return 0;
}

int ddp_sys_child_subreaper(int on)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int users;
    pthread_mutex_lock(&mu);
    int was = users > 0;
    users += on > 0 ? 1 : users > 0 ? -1 : 0;
    int rc = 0;
    if ((users > 0) != was && prctl(PR_SET_CHILD_SUBREAPER, users > 0 ? 1L : 0L) != 0)
        rc = ddp_err_set(-errno, "prctl(PR_SET_CHILD_SUBREAPER, %d): %s", users > 0,
                         strerror(errno));
    pthread_mutex_unlock(&mu);
    return rc;
}

static int px_wait(ddp_sys_t *s, ddp_pid_t pid, int *status, int64_t deadline)
{
    SYS_FAULT(SYS_PROC_WAIT);
    int64_t start = ddp_sys_now(s);
    for (;;) {
        int st;
        pid_t r = waitpid((pid_t)pid, &st, WNOHANG);
        if (r == (pid_t)pid) {
            if (status)
                *status = WIFEXITED(st)     ? WEXITSTATUS(st)
                          : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
                                            : 255;
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return ddp_err_set(-errno, "waitpid %ld: %s", pid, strerror(errno));
        int64_t now = ddp_sys_now(s);
        if (now >= deadline) {
            ddp_err_set(DDP_ETIMEOUT, "process %ld still running at deadline",
                        pid);
            return ddp_err_waited(now - start);
        }
        /* Child exit has no pollable fd here; 2 ms steps bound the latency. */
        int64_t next = now + 2 * DDP_NS_PER_MS;
        ddp_sys_sleep_until(s, next < deadline ? next : deadline);
    }
}

static int px_kill(ddp_sys_t *s, ddp_pid_t pid, int sig)
{
    (void)s;
    SYS_FAULT(SYS_PROC_KILL);
    if (pid == DDP_PID_SELF)
        return raise(sig) == 0 ? 0 : ddp_err_set(-errno, "raise: %s", strerror(errno));
    return kill((pid_t)pid, sig) == 0 ? 0
                                      : ddp_err_set(-errno, "kill %ld: %s", pid,
                                                    strerror(errno));
}

typedef struct {
    pthread_t th;
    ddp_sys_t *sys;
    ddp_thread_fn fn;
    void *arg;
    int rc;
    atomic_int done;
} px_thread_t;

static void *px_thread_main(void *p)
{
    px_thread_t *t = p;
    t->rc = t->fn(t->sys, t->arg);
    atomic_store(&t->done, 1);
    return NULL;
}

static int px_thread_start(ddp_sys_t *s, ddp_thread_fn fn, void *arg,
                           const char *name, ddp_thread_t *out)
{
    SYS_FAULT(SYS_PROC_THREAD);
    px_thread_t *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    *t = (px_thread_t){.sys = s, .fn = fn, .arg = arg};
    int rc = pthread_create(&t->th, NULL, px_thread_main, t);
    if (rc) {
        free(t);
        return ddp_err_set(-rc, "could not start thread %s: %s",
                           name ? name : "", strerror(rc));
    }
    *out = (ddp_thread_t)(intptr_t)t;
    return 0;
}

static int px_thread_join(ddp_sys_t *s, ddp_thread_t th, int *rc,
                          int64_t deadline)
{
    px_thread_t *t = (px_thread_t *)(intptr_t)th;
    int64_t start = ddp_sys_now(s);
    while (!atomic_load(&t->done)) {
        int64_t now = ddp_sys_now(s);
        if (now >= deadline) {
            ddp_err_set(DDP_ETIMEOUT, "thread still running at deadline");
            return ddp_err_waited(now - start);
        }
        int64_t next = now + DDP_NS_PER_MS;
        ddp_sys_sleep_until(s, next < deadline ? next : deadline);
    }
    pthread_join(t->th, NULL);
    if (rc)
        *rc = t->rc;
    free(t);
    return 0;
}

/* Shared libraries: a path (with a '/') is a file, made absolute first;
 * a bare name (a soname: libnccl.so.2) is searched on the library path, as
 * dlopen does. RTLD_NOW so that a missing symbol is an error here, not a
 * crash mid-run; RTLD_LOCAL so that two libraries' own symbols never mix. */
static int px_lib_open(ddp_sys_t *s, const char *path, void **lib, char *real, size_t n)
{
    (void)s;
    char abs[PATH_MAX];
    struct stat sb;
    int file = strchr(path, '/') != NULL;
    if (file && (!realpath(path, abs) || stat(abs, &sb) != 0)) {
        int e = errno;
        return ddp_err_set(-e, "%s: %s", path, e == ENOENT ? "no such file" : strerror(e));
    }
    if (file && S_ISDIR(sb.st_mode))
        return ddp_err_set(-EISDIR, "%s is a directory", path);
    if (!file)
        snprintf(abs, sizeof abs, "%s", path);
    if (strlen(abs) >= n)
        return ddp_err_set(DDP_ELIMIT, "%s: its path is longer than %zu bytes", abs, n - 1);
    dlerror();
    void *h = dlopen(abs, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return ddp_err_set(DDP_ECONFIG, "%s", why ? why : "dlopen failed");
    }
    snprintf(real, n, "%s", abs);
    *lib = h;
    return 0;
}

static void *px_lib_sym(ddp_sys_t *s, void *lib, const char *name)
{
    (void)s;
    return dlsym(lib, name);
}

static void px_lib_close(ddp_sys_t *s, void *lib)
{
    (void)s;
    dlclose(lib);
}

static void px_destroy(ddp_sys_t *s)
{
    ddp_env_free(s->env);
    free((px_sys_t *)s);
}

static int px_nccl_api(ddp_sys_t *s, const struct ddp_nccl_api **out)
{
    (void)s;
    return ddp__nccl_api_posix(out);
}

static const ddp_sys_ops_t posix_ops = {
    .name = "posix",
    .now = px_now,
    .sleep_until = px_sleep_until,
    .resolve = px_resolve,
    .hostname = px_hostname,
    .listen = px_listen,
    .accept = px_accept,
    .connect = px_connect,
    .send = px_send,
    .recv = px_recv,
    .sendv = px_sendv,
    .poll = px_poll,
    .epoll_create = px_epoll_create,
    .epoll_ctl = px_epoll_ctl,
    .epoll_wait = px_epoll_wait,
    .epoll_close = px_epoll_close,
    .close = px_close,
    .local_addr = px_local_addr,
    .somaxconn = px_somaxconn,
    .spawn = px_spawn,
    .wait = px_wait,
    .kill = px_kill,
    .thread_start = px_thread_start,
    .thread_join = px_thread_join,
    .read_file = px_read_file,
    .destroy = px_destroy,
    .ifaddrs = px_ifaddrs,
    .node_local = px_node_local,
    .fd_limit_raise = px_fd_limit_raise,
    .lib_open = px_lib_open,
    .lib_sym = px_lib_sym,
    .lib_close = px_lib_close,
    .nccl_api = px_nccl_api,
    .canon_name = px_canon_name,
};

ddp_sys_t *ddp_sys_posix_new(ddp_env_t *env)
{
    px_sys_t *px = calloc(1, sizeof *px);
    if (!px)
        return NULL;
    ddp_sys_t *s = &px->base;
    s->ops = &posix_ops;
    s->impl = px; /* a copy of s with other ops (a test's clock) counts here too */
    s->env = env ? env : ddp_env_from_array(environ);
    if (!s->env) {
        free(px);
        return NULL;
    }
    return s;
}

int ddp_sys_posix_failed_connects(ddp_sys_t *s)
{
    return s && s->ops == &posix_ops ? atomic_load(&((px_sys_t *)s)->failed_connects) : 0;
}
