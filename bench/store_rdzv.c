/* bench/store_rdzv.c — an N-client store rendezvous over real TCP, driven
 * by one event-loop thread, against any TCPStore-protocol server.
 *
 *   store_rdzv --port P --clients N [--host A] [--server-pid PID]
 *              [--per-addr K] [--timeout SEC] [--label NAME]
 *   store_rdzv                 (no argument: ddpsim's server on a thread of
 *                               this process, 1,024 clients; a quick check)
 *
 * Client i connects from source address 127.X.Y.Z (K clients per address,
 * default 256, spread over 127.0.0.0/8 from 127.0.1.0; the server is on
 * --host, default 127.0.0.1), so no source address runs short of ports. It
 * sends ADD(counter, 1); the client whose reply is N sets the barrier key;
 * every client then WAITs on it. The rendezvous is done when every client
 * has its WAIT reply. These are torch's legacy opcodes (torch 1.9 - 2.0:
 * ADD 3, SET 0, WAIT 5, no handshake): torch 1.13's TCPStore master speaks
 * only those, and ddpsim's server detects them per connection, so both
 * servers get the same bytes.
 *
 * One thread, epoll (edge-triggered), non-blocking sockets; connects are
 * started in slices of 512 with the replies served in between. Printed
 * (one line, "NAME N: ..."): all connected, all done (from the first
 * connect), this process's CPU, and with --server-pid the server's CPU
 * over the run (utime + stime of /proc/PID/stat, all threads) and its
 * peak RSS (VmHWM, reset through /proc/PID/clear_refs before the run where
 * the kernel allows, so a Python server's import is not counted; "peak"
 * says which). Exit 1 when a client fails or the timeout passes (the line
 * then says how many finished). Figures only.
 *
 * This is a load generator, a peer like redis-benchmark, not part of the
 * library: it makes its own socket calls (source-address binding with
 * IP_BIND_ADDRESS_NO_PORT has no sys-seam counterpart). The process needs
 * N + 16 file descriptors; bench/store_rdzv.sh sets the limits. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "ddp/store.h"
#include "ddp/sys.h"

#include "bench_cpu.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

/* Torch's legacy opcodes (docs/store-protocol.md, "The legacy generation"). */
enum { OP_SET = 0, OP_ADD = 3, OP_WAIT = 5 };
enum { ST_CONNECTING, ST_ADD, ST_WAIT, ST_DONE, ST_FAILED };

#define CONNECT_SLICE 512
static const char KEY_COUNT[] = "rdzv/count";
static const char KEY_DONE[] = "rdzv/done";

typedef struct client {
    int fd;
    uint8_t state, got;
    uint8_t reply[8];
} client_t;

typedef struct run {
    const char *label, *host, *cpu_name; /* cpu_name: whose RUSAGE_SELF */
    int port, n, per_addr, server_pid;
    double timeout_s;
    client_t *c;
    int ep, connected, done, failed, first_err;
    uint8_t add_req[64], wait_req[64], set_wait_req[128];
    size_t add_len, wait_len, set_wait_len;
} run_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t put_str(uint8_t *p, const char *s, size_t len)
{
    uint64_t l = len;
    memcpy(p, &l, 8);
    memcpy(p + 8, s, len);
    return 8 + len;
}

static void build_requests(run_t *r)
{
    uint8_t *p = r->add_req;
    int64_t one = 1;
    uint64_t nkeys = 1;
    *p++ = OP_ADD;
    p += put_str(p, KEY_COUNT, strlen(KEY_COUNT));
    memcpy(p, &one, 8);
    r->add_len = (size_t)(p + 8 - r->add_req);
    p = r->wait_req;
    *p++ = OP_WAIT;
    memcpy(p, &nkeys, 8);
    p += 8;
    p += put_str(p, KEY_DONE, strlen(KEY_DONE));
    r->wait_len = (size_t)(p - r->wait_req);
    p = r->set_wait_req; /* SET has no reply: SET and WAIT in one write */
    *p++ = OP_SET;
    p += put_str(p, KEY_DONE, strlen(KEY_DONE));
    p += put_str(p, "1", 1);
    memcpy(p, r->wait_req, r->wait_len);
    r->set_wait_len = (size_t)(p - r->set_wait_req) + r->wait_len;
}

/* /proc/PID/stat utime + stime in seconds, -1 when unreadable. */
static double proc_cpu(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut, st;
    /* after "(comm) ": state, then fields 4..13; utime and stime are 14, 15 */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                     &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A "Name:   N kB" line of /proc/PID/status in MiB, -1 when unreadable. */
static double proc_status_mib(int pid, const char *name)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    double v = -1;
    size_t nl = strlen(name);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, name, nl) && line[nl] == ':')
            v = strtod(line + nl + 1, NULL) / 1024.0;
    if (f)
        fclose(f);
    return v;
}

/* Resets the peak RSS to the current one (clear_refs "5"); 1 when done. */
static int reset_peak(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", pid);
    FILE *f = fopen(path, "w");
    if (!f)
        return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void fail(run_t *r, client_t *c, int err)
{
    if (c->state == ST_FAILED)
        return;
    c->state = ST_FAILED;
    r->failed++;
    if (!r->first_err)
        r->first_err = err ? err : EPROTO;
}

static void send_req(run_t *r, client_t *c, const uint8_t *req, size_t len)
{
    /* A request of under 128 bytes into an empty socket buffer: one send
     * takes all of it, or the connection is broken. */
    ssize_t w = send(c->fd, req, len, MSG_NOSIGNAL);
    if (w != (ssize_t)len)
        fail(r, c, w < 0 ? errno : EPROTO);
}

/* Starts client i's connect: 1 when started, 0 when it failed. */
static int start_client(run_t *r, int i, const struct sockaddr_in *srv)
{
    client_t *c = &r->c[i];
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        fail(r, c, errno);
        return 0;
    }
    /* 127.0.1.0 onwards: K clients per address, up to 127.255.255.255. */
    uint32_t a = (127u << 24) + 256u + (uint32_t)(i / r->per_addr);
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(a)};
    int one = 1;
    setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u32 = (uint32_t)i};
    if (bind(c->fd, (const struct sockaddr *)&src, sizeof src) != 0 ||
        (connect(c->fd, (const struct sockaddr *)srv, sizeof *srv) != 0 &&
         errno != EINPROGRESS) ||
        epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        fail(r, c, errno);
        return 0;
    }
    return 1;
}

/* One event of client c: connect finished, or a reply (part) arrived. */
static void on_event(run_t *r, client_t *c, uint32_t events)
{
    if (c->state == ST_CONNECTING) {
        int err = 0;
        socklen_t l = sizeof err;
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err || (events & (EPOLLERR | EPOLLHUP))) {
            fail(r, c, err ? err : ECONNRESET);
            return;
        }
        r->connected++;
        c->state = ST_ADD;
        c->got = 0;
        send_req(r, c, r->add_req, r->add_len);
        return;
    }
    if (c->state != ST_ADD && c->state != ST_WAIT)
        return;
    uint8_t want = c->state == ST_ADD ? 8 : 1;
    for (;;) {
        ssize_t k = recv(c->fd, c->reply + c->got, want - c->got, 0);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k <= 0) {
            fail(r, c, k < 0 ? errno : ECONNRESET);
            return;
        }
        c->got = (uint8_t)(c->got + k);
        if (c->got < want)
            continue;
        c->got = 0;
        if (c->state == ST_WAIT) {
            /* STOP_WAITING (0) */
            if (c->reply[0] != 0) {
                fail(r, c, EPROTO);
                return;
            }
            c->state = ST_DONE;
            r->done++;
            return;
        }
        int64_t v;
        memcpy(&v, c->reply, 8);
        c->state = ST_WAIT;
        if (v == r->n)
            send_req(r, c, r->set_wait_req, r->set_wait_len);
        else
            send_req(r, c, r->wait_req, r->wait_len);
        want = 1;
    }
}

static int rendezvous(run_t *r)
{
    struct sockaddr_in srv = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
    if (inet_pton(AF_INET, r->host, &srv.sin_addr) != 1) {
        fprintf(stderr, "store_rdzv: --host %s is not an IPv4 address\n", r->host);
        return 2;
    }
    r->c = calloc((size_t)r->n, sizeof *r->c);
    r->ep = epoll_create1(EPOLL_CLOEXEC);
    if (!r->c || r->ep < 0) {
        fprintf(stderr, "store_rdzv: out of memory or epoll: %s\n", strerror(errno));
        free(r->c);
        return 1;
    }
    build_requests(r);
    int peak_reset = r->server_pid > 0 && reset_peak(r->server_pid);
    double scpu0 = r->server_pid > 0 ? proc_cpu(r->server_pid) : -1;
    double cpu0 = bench_cpu(), t0 = now_s(), t_conn = -1, t_done = -1;
    double limit = t0 + r->timeout_s;
    int started = 0;
    struct epoll_event ev[512];
    while (r->done + r->failed < r->n) {
        int slice = started + CONNECT_SLICE < r->n ? started + CONNECT_SLICE : r->n;
        while (started < slice)
            start_client(r, started++, &srv);
        int k = epoll_wait(r->ep, ev, 512, started < r->n ? 0 : 50);
        if (k < 0 && errno != EINTR) {
            fprintf(stderr, "store_rdzv: epoll_wait: %s\n", strerror(errno));
            break;
        }
        for (int e = 0; e < k; e++)
            on_event(r, &r->c[ev[e].data.u32], ev[e].events);
        if (t_conn < 0 && r->connected == r->n)
            t_conn = now_s() - t0;
        if (now_s() > limit)
            break;
    }
    if (r->done == r->n)
        t_done = now_s() - t0;
    double cpu = bench_cpu() - cpu0;
    double scpu1 = r->server_pid > 0 ? proc_cpu(r->server_pid) : -1;
    double hwm = r->server_pid > 0 ? proc_status_mib(r->server_pid, "VmHWM") : -1;
    printf("%s %d: ", r->label, r->n);
    if (t_done >= 0)
        printf("connected %.3f s, done %.3f s", t_conn, t_done);
    else
        printf("NOT DONE: %d of %d done, %d connected, %d failed (first: %s) after %.1f s",
               r->done, r->n, r->connected, r->failed,
               r->first_err ? strerror(r->first_err) : "timeout", now_s() - t0);
    printf(", %s CPU %.3f s", r->cpu_name, cpu);
    if (scpu0 >= 0 && scpu1 >= 0)
        printf(", server CPU %.3f s", scpu1 - scpu0);
    if (hwm >= 0)
        printf(", server peak RSS %.1f MiB (%s)", hwm,
               peak_reset ? "during the run" : "since it started");
    printf("\n");
    fflush(stdout);
    for (int i = 0; i < r->n; i++)
        if (r->c[i].fd > 0)
            close(r->c[i].fd);
    close(r->ep);
    free(r->c);
    return t_done >= 0 ? 0 : 1;
}

/* Raises the soft descriptor limit to `need` if the hard one allows:
 * 1 when there is room, else 0 with a line saying so. */
static int fd_room(long need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur >= (rlim_t)need)
        return 1;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= (rlim_t)need) {
        rl.rlim_cur = (rlim_t)need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            return 1;
    }
    fprintf(stderr, "store_rdzv: this run needs %ld file descriptors; the limit is "
                    "%llu, hard %llu (ulimit -n / -Hn)\n", need,
            (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
    return 0;
}

/* No argument: ddpsim's server on a thread here, 1,024 clients. */
static int self_check(run_t *r)
{
    ddp_sys_t *sys = ddp_sys_posix_new(NULL);
    ddp_store_server_opts_t o = {.host = "127.0.0.1"};
    ddp_store_server_t *srv = NULL;
    if (!sys || ddp_store_server_new(sys, &o, &srv) != 0 ||
        ddp_store_server_start_thread(srv) != 0) {
        fprintf(stderr, "store_rdzv: cannot start the store server\n");
        ddp_store_server_free(srv);
        ddp_sys_free(sys);
        return 1;
    }
    r->port = ddp_store_server_addr(srv).port;
    r->label = "ddpsim (server thread in this process)";
    r->cpu_name = "process (generator and server)";
    int rc = rendezvous(r);
    ddp_store_server_stop(srv);
    ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
    ddp_sys_free(sys);
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: store_rdzv --port P --clients N [--host IPV4] "
                    "[--server-pid PID] [--per-addr K] [--timeout SEC] [--label NAME]\n"
                    "       store_rdzv      (ddpsim's server on a thread, 1,024 clients)\n");
    return 2;
}

/* A whole number in [lo, hi] from s, or -1. */
static long parse_num(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

int main(int argc, char **argv)
{
    run_t r = {.label = "store", .host = "127.0.0.1", .cpu_name = "generator", .n = 1024, .per_addr = 256,
               .timeout_s = 120};
    if (argc == 1)
        return fd_room(2 * r.n + 64) ? self_check(&r) : 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage();
            return 0;
        }
        if (!v) {
            fprintf(stderr, "store_rdzv: %s needs a value\n", o);
            return usage();
        }
        i++;
        if (!strcmp(o, "--host") || !strcmp(o, "--label")) {
            *(!strcmp(o, "--host") ? &r.host : &r.label) = v;
            continue;
        }
        if (!strcmp(o, "--port"))
            x = r.port = (int)parse_num(v, 1, 65535);
        else if (!strcmp(o, "--clients"))
            x = r.n = (int)parse_num(v, 1, 1 << 24);
        else if (!strcmp(o, "--per-addr"))
            x = r.per_addr = (int)parse_num(v, 1, 60000);
        else if (!strcmp(o, "--server-pid"))
            x = r.server_pid = (int)parse_num(v, 1, 1 << 30);
        else if (!strcmp(o, "--timeout"))
            r.timeout_s = (double)(x = parse_num(v, 1, 86400));
        else {
            fprintf(stderr, "store_rdzv: unknown option %s\n", o);
            return usage();
        }
        if (x < 0) {
            fprintf(stderr, "store_rdzv: bad value for %s: \"%s\"\n", o, v);
            return usage();
        }
    }
    if (!r.port) {
        fprintf(stderr, "store_rdzv: --port is required\n");
        return usage();
    }
    /* 127.0.1.0 + N / K addresses must stay inside 127.0.0.0/8. */
    if ((long)r.n / r.per_addr >= (1L << 24) - 256) {
        fprintf(stderr, "store_rdzv: %d clients at %d per address leave 127.0.0.0/8\n",
                r.n, r.per_addr);
        return 2;
    }
    if (!fd_room(r.n + 16))
        return 1;
    return rendezvous(&r);
}
