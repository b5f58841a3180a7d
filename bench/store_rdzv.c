/* bench/store_rdzv.c — an N-client store rendezvous over real TCP, driven
 * by event-loop processes, against any TCPStore-protocol server.
 *
 *   store_rdzv --port P --clients N [--host A] [--server-pid PID]
 *              [--per-addr K] [--procs P|auto] [--timeout SEC] [--label NAME]
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
 * One thread per process, epoll (edge-triggered), non-blocking sockets;
 * connects are started in slices of 512 with the replies served in
 * between. A process holds one descriptor per client, and a host may cap
 * every process below N (a hard RLIMIT_NOFILE that only CAP_SYS_RESOURCE
 * raises), so --procs P splits the clients over P forked processes, each
 * an event loop over its contiguous share; client numbers stay global, so
 * source addresses stay distinct and the counter in the server still
 * names one barrier setter. The default, auto, is the smallest P whose
 * share plus 64 fits the hard limit; P = 1 is one process, no fork. The
 * forked processes set up, then wait on a pipe until all are ready, so
 * all start connecting at one moment the times are measured from; each
 * sends its figures back on a pipe and dies with this process.
 *
 * Printed (one line, "NAME N: ..."): all connected, all done (from the
 * first connect; the latest process), the generator's CPU (summed over
 * its processes), and with --server-pid the server's CPU over the run and
 * its peak RSS. The server is PID and its descendants (a server may fork
 * helpers; /proc's parent links, read at the start and the end, so one
 * forked during the run is counted): CPU is utime + stime of
 * /proc/X/stat (all threads) plus the cutime + cstime of children X has
 * reaped, summed, end minus start; peak RSS is the sum of each process's
 * VmHWM, reset through /proc/X/clear_refs before the run where the kernel
 * allows, so a Python server's import is not counted ("peak" says which,
 * and how many processes were summed: a sum of peaks, an upper bound when
 * they share pages or peak at different times). Exit 1 when a client
 * fails, a process is lost, or the timeout passes (the line then says how
 * many finished). Figures only.
 *
 * This is a load generator, a peer like redis-benchmark, not part of the
 * library: it makes its own socket calls (source-address binding with
 * IP_BIND_ADDRESS_NO_PORT has no sys-seam counterpart). Each process needs
 * its share + 16 file descriptors; bench/store_rdzv.sh sets the limits. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
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
    int port, n, per_addr, server_pid, procs; /* procs 0: auto */
    double timeout_s;
    struct sockaddr_in srv;
    /* This process's clients: lo .. hi - 1, c[i - lo]. */
    int lo, hi;
    client_t *c;
    int ep, connected, done, failed, first_err;
    double t_conn, t_done; /* CLOCK_MONOTONIC when all connected / done; -1 */
    uint8_t add_req[64], wait_req[64], set_wait_req[128];
    size_t add_len, wait_len, set_wait_len;
} run_t;

/* The figures of a run, of one process or summed over them. */
typedef struct tally {
    int connected, done, failed, first_err;
    double t_conn, t_done, elapsed, cpu; /* from the start; -1 */
} tally_t;

/* The server's figures: PID and its descendants. */
typedef struct server_use {
    int pid, peak_reset, nproc;
    double cpu0, cpu, hwm; /* cpu: over the run; -1 when unreadable */
} server_use_t;

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

/* /proc/PID/stat: the parent's pid and utime + stime + cutime + cstime
 * in seconds (the last two: children PID reaped, so a helper that exits
 * during the run still counts); 0, or -1 when unreadable. */
static int proc_stat(int pid, int *ppid, double *cpu)
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
    long long cut, cst;
    /* after "(comm) ": state, ppid (4), then fields 5..13; utime, stime,
     * cutime, cstime are 14 .. 17 */
    if (!p || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
                     ppid, &ut, &st, &cut, &cst) != 5)
        return -1;
    *cpu = (double)(ut + st) + (double)(cut + cst);
    *cpu /= (double)sysconf(_SC_CLK_TCK);
    return 0;
}

typedef struct proc_info {
    int pid, ppid, in_tree;
    double cpu;
} proc_info_t;

/* Every process of /proc, those of root's tree (root and its descendants,
 * by parent links) marked; *tab is the caller's to free. Returns the
 * tree's size, 0 when root is gone. */
static int scan_tree(int root, proc_info_t **tab, int *ntab)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0, cap = 0, size = 0;
    proc_info_t *t = NULL;
    while (d && (e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        proc_info_t pi = {.pid = (int)pid};
        if (*end || pid <= 0 || proc_stat(pi.pid, &pi.ppid, &pi.cpu) != 0)
            continue; /* not a process, or one that has gone */
        if (n == cap) {
            proc_info_t *g = realloc(t, (size_t)(cap = cap ? 2 * cap : 512) * sizeof *t);
            if (!g)
                break;
            t = g;
        }
        pi.in_tree = pi.pid == root;
        size += pi.in_tree;
        t[n++] = pi;
    }
    if (d)
        closedir(d);
    /* Parents may come after their children in /proc: mark until stable.
     * This generator and its processes are never the server's, even under
     * a --server-pid that is their ancestor (a shell). */
    int self = (int)getpid();
    for (int grew = size; grew;) {
        grew = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n && !t[i].in_tree && t[i].pid != self; j++)
                if (t[j].in_tree && t[j].pid == t[i].ppid)
                    grew = t[i].in_tree = 1, size++;
    }
    *tab = t;
    *ntab = n;
    return size;
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

/* Before the run: the server's peaks reset (peak_reset: all of them),
 * its CPU so far. */
static void server_begin(server_use_t *u, int pid)
{
    proc_info_t *t;
    int n, size = scan_tree(pid, &t, &n);
    *u = (server_use_t){.pid = pid, .peak_reset = size > 0, .cpu0 = size > 0 ? 0 : -1,
                        .cpu = -1, .hwm = -1};
    for (int i = 0; i < n; i++)
        if (t[i].in_tree) {
            u->peak_reset &= reset_peak(t[i].pid);
            u->cpu0 += t[i].cpu;
        }
    free(t);
}

/* After the run: its CPU over the run and the sum of its peaks, over the
 * processes of its tree now (those forked during the run included). */
static void server_end(server_use_t *u)
{
    proc_info_t *t;
    int n, size = scan_tree(u->pid, &t, &n);
    double cpu = 0, hwm = 0;
    for (int i = 0; i < n; i++)
        if (t[i].in_tree) {
            double m = proc_status_mib(t[i].pid, "VmHWM");
            cpu += t[i].cpu;
            hwm += m > 0 ? m : 0; /* a zombie has no memory left */
        }
    free(t);
    u->nproc = size;
    if (size > 0 && u->cpu0 >= 0)
        u->cpu = cpu - u->cpu0;
    if (size > 0)
        u->hwm = hwm;
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
static int start_client(run_t *r, int i)
{
    client_t *c = &r->c[i - r->lo];
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
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET,
                             .data.u32 = (uint32_t)(i - r->lo)};
    if (bind(c->fd, (const struct sockaddr *)&src, sizeof src) != 0 ||
        (connect(c->fd, (const struct sockaddr *)&r->srv, sizeof r->srv) != 0 &&
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

/* This process's clients and epoll set, the requests built: 0, or -1
 * with errno. */
static int setup(run_t *r, int lo, int hi)
{
    r->lo = lo;
    r->hi = hi;
    r->c = calloc((size_t)(hi - lo), sizeof *r->c);
    r->ep = r->c ? epoll_create1(EPOLL_CLOEXEC) : -1;
    if (r->ep < 0) {
        int e = r->c ? errno : ENOMEM;
        free(r->c);
        errno = e;
        return -1;
    }
    build_requests(r);
    r->t_conn = r->t_done = -1;
    return 0;
}

static void teardown(run_t *r)
{
    for (int i = 0; i < r->hi - r->lo; i++)
        if (r->c[i].fd > 0)
            close(r->c[i].fd);
    close(r->ep);
    free(r->c);
}

/* Runs this process's clients until all are done or failed, or the
 * timeout passes; 0, or -1 when epoll failed. */
static int drive(run_t *r)
{
    int count = r->hi - r->lo, started = r->lo, rc = 0;
    double limit = now_s() + r->timeout_s;
    struct epoll_event ev[512];
    while (r->done + r->failed < count) {
        int slice = started + CONNECT_SLICE < r->hi ? started + CONNECT_SLICE : r->hi;
        while (started < slice)
            start_client(r, started++);
        int k = epoll_wait(r->ep, ev, 512, started < r->hi ? 0 : 50);
        if (k < 0 && errno != EINTR) {
            fprintf(stderr, "store_rdzv: epoll_wait: %s\n", strerror(errno));
            rc = -1;
            break;
        }
        for (int e = 0; e < k; e++)
            on_event(r, &r->c[ev[e].data.u32], ev[e].events);
        if (r->t_conn < 0 && r->connected == count)
            r->t_conn = now_s();
        if (now_s() > limit)
            break;
    }
    if (r->done == count)
        r->t_done = now_s();
    return rc;
}

/* The one line: bench/store_rdzv.sh reads it with sed, so its fields and
 * words stay. */
static void report(const run_t *r, const tally_t *t, const server_use_t *u)
{
    printf("%s %d: ", r->label, r->n);
    if (t->t_done >= 0)
        printf("connected %.3f s, done %.3f s", t->t_conn, t->t_done);
    else
        printf("NOT DONE: %d of %d done, %d connected, %d failed (first: %s) after %.1f s",
               t->done, r->n, t->connected, t->failed,
               t->first_err ? strerror(t->first_err) : "timeout", t->elapsed);
    printf(", %s CPU %.3f s", r->cpu_name, t->cpu);
    if (r->procs > 1)
        printf(" (%d processes)", r->procs);
    if (u->cpu >= 0)
        printf(", server CPU %.3f s", u->cpu);
    if (u->hwm >= 0) {
        printf(", server peak RSS %.1f MiB (%s", u->hwm,
               u->peak_reset ? "during the run" : "since it started");
        if (u->nproc > 1)
            printf(", %d processes", u->nproc);
        printf(")");
    }
    printf("\n");
    fflush(stdout);
}

/* r->srv from --host and --port: 0, or 2 with a line. */
static int server_addr(run_t *r)
{
    r->srv = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
    if (inet_pton(AF_INET, r->host, &r->srv.sin_addr) == 1)
        return 0;
    fprintf(stderr, "store_rdzv: --host %s is not an IPv4 address\n", r->host);
    return 2;
}

/* All clients in this process (--procs 1, and the quick check). */
static int rendezvous(run_t *r)
{
    server_use_t u = {.cpu0 = -1, .cpu = -1, .hwm = -1};
    if (server_addr(r) != 0)
        return 2;
    if (setup(r, 0, r->n) != 0) {
        fprintf(stderr, "store_rdzv: out of memory or epoll: %s\n", strerror(errno));
        return 1;
    }
    if (r->server_pid > 0)
        server_begin(&u, r->server_pid);
    double cpu0 = bench_cpu(), t0 = now_s();
    drive(r);
    tally_t t = {.connected = r->connected, .done = r->done, .failed = r->failed,
                 .first_err = r->first_err, .cpu = bench_cpu() - cpu0,
                 .t_conn = r->t_conn - t0, .t_done = r->t_done >= 0 ? r->t_done - t0 : -1,
                 .elapsed = now_s() - t0};
    if (r->server_pid > 0)
        server_end(&u);
    report(r, &t, &u);
    teardown(r);
    return t.t_done >= 0 ? 0 : 1;
}

/* --procs P > 1: what a forked process sends back on the result pipe;
 * under PIPE_BUF, so each write arrives whole. Times are CLOCK_MONOTONIC,
 * one clock for all processes; -1 when not reached. */
typedef struct msg {
    int k, kind, connected, done, failed, first_err;
    double t_conn, t_done, cpu;
} msg_t;
enum { MSG_READY = 1, MSG_RESULT, MSG_SETUP_FAILED };

typedef struct kid {
    pid_t pid;
    int got, gone, status; /* got: the last message kind; gone: reaped */
    msg_t m;               /* its MSG_RESULT */
} kid_t;

/* Client k * N / P .. (k + 1) * N / P - 1 are process k's. */
static int share_lo(const run_t *r, int k)
{
    return (int)((long long)r->n * k / r->procs);
}

/* Forked process k: sets up, says ready, waits for the go byte, runs its
 * clients and sends its figures. Never returns. */
static void child(run_t *r, int k, pid_t parent, int go, int res)
{
    msg_t m = {.k = k, .kind = MSG_READY};
    char b;
    /* Dies with the parent: a timed-out or interrupted run leaves no
     * generator behind (one orphaned before prctl took effect goes now). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(1);
    if (setup(r, share_lo(r, k), share_lo(r, k + 1)) != 0)
        m = (msg_t){.k = k, .kind = MSG_SETUP_FAILED, .first_err = errno};
    /* No go byte (EOF): the parent gave up on the start. */
    if (write(res, &m, sizeof m) != (ssize_t)sizeof m || m.kind != MSG_READY ||
        read(go, &b, 1) != 1)
        _exit(1);
    double cpu0 = bench_cpu();
    drive(r);
    m = (msg_t){.k = k, .kind = MSG_RESULT, .connected = r->connected, .done = r->done,
                .failed = r->failed, .first_err = r->first_err, .t_conn = r->t_conn,
                .t_done = r->t_done, .cpu = bench_cpu() - cpu0};
    _exit(write(res, &m, sizeof m) == (ssize_t)sizeof m ? 0 : 1);
}

/* Waits until every process has sent a message of kind `want` or is gone,
 * or until the deadline: the number that sent it, or -1 when one could
 * not set up (a line says so). Reaps before reading, so a gone process's
 * last message is read before it counts as lost. */
static int collect(run_t *r, kid_t *kids, int fd, int want, double deadline)
{
    for (;;) {
        int st, have = 0, settled = 0;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
            for (int k = 0; k < r->procs; k++)
                if (kids[k].pid == pid)
                    kids[k].gone = 1, kids[k].status = st;
        msg_t m;
        while (read(fd, &m, sizeof m) == (ssize_t)sizeof m && m.k >= 0 && m.k < r->procs) {
            kids[m.k].got = m.kind;
            if (m.kind == MSG_RESULT)
                kids[m.k].m = m;
            if (m.kind == MSG_SETUP_FAILED) {
                fprintf(stderr, "store_rdzv: generator process %d cannot set up: %s\n", m.k,
                        strerror(m.first_err));
                return -1;
            }
        }
        for (int k = 0; k < r->procs; k++) {
            have += kids[k].got == want;
            settled += kids[k].got == want || kids[k].gone;
        }
        if (settled == r->procs || now_s() > deadline)
            return have;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        poll(&pfd, 1, 100);
    }
}

/* Kills the processes still running (a start given up, or past the
 * timeout; each one's clients counted as not done), and reaps them all. */
static void end_kids(const run_t *r, kid_t *kids)
{
    for (int k = 0; k < r->procs; k++) {
        if (!kids[k].pid || kids[k].gone)
            continue;
        if (kids[k].got != MSG_RESULT)
            kill(kids[k].pid, SIGKILL);
        waitpid(kids[k].pid, &kids[k].status, 0);
        kids[k].gone = 1;
    }
}

/* Forks the r->procs generator processes (each waits for its go byte on
 * go[0] and writes its messages to res[1]): how many started. */
static int fork_kids(run_t *r, kid_t *kids, const int go[2], const int res[2])
{
    int forked = 0;
    pid_t self = getpid();
    for (; forked < r->procs; forked++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(go[1]);
            close(res[0]);
            child(r, forked, self, go[0], res[1]);
        }
        if (pid < 0) {
            fprintf(stderr, "store_rdzv: fork: %s\n", strerror(errno));
            break;
        }
        kids[forked].pid = pid;
    }
    return forked;
}

/* The generator processes' figures added into t (t0: when they were
 * released); a process without its figures is named on stderr. */
static void tally_kids(run_t *r, const kid_t *kids, double t0, tally_t *t)
{
    int all_conn = 1, all_done = 1;
    for (int k = 0; k < r->procs; k++) {
        const msg_t *m = &kids[k].m;
        if (kids[k].got != MSG_RESULT) {
            fprintf(stderr, "store_rdzv: generator process %d (clients %d .. %d) %s\n", k,
                    share_lo(r, k), share_lo(r, k + 1) - 1,
                    WIFSIGNALED(kids[k].status) && WTERMSIG(kids[k].status) == SIGKILL
                        ? "was killed (past the timeout)"
                        : "ended without its figures");
            all_conn = all_done = 0;
            continue;
        }
        t->connected += m->connected;
        t->done += m->done;
        t->failed += m->failed;
        t->cpu += m->cpu;
        if (!t->first_err)
            t->first_err = m->first_err;
        all_conn &= m->t_conn >= 0;
        all_done &= m->t_done >= 0;
        if (m->t_conn - t0 > t->t_conn)
            t->t_conn = m->t_conn - t0;
        if (m->t_done - t0 > t->t_done)
            t->t_done = m->t_done - t0;
    }
    if (!all_conn)
        t->t_conn = -1;
    if (!all_done)
        t->t_done = -1;
}

/* --procs P > 1: P forked processes of share N / P each, started
 * together; one line for all of them. */
static int split(run_t *r)
{
    int go[2], res[2];
    kid_t *kids = calloc((size_t)r->procs, sizeof *kids);
    if (server_addr(r) != 0) {
        free(kids);
        return 2;
    }
    if (!kids || pipe2(go, O_CLOEXEC) != 0) {
        fprintf(stderr, "store_rdzv: out of memory or pipe: %s\n", strerror(errno));
        free(kids);
        return 1;
    }
    if (pipe2(res, O_CLOEXEC) != 0) {
        fprintf(stderr, "store_rdzv: pipe: %s\n", strerror(errno));
        close(go[0]);
        close(go[1]);
        free(kids);
        return 1;
    }
    fflush(stdout); /* nothing buffered is written twice */
    fflush(stderr);
    int forked = fork_kids(r, kids, go, res);
    /* go[0] stays open here: a go byte to processes that have died is
     * no SIGPIPE. */
    close(res[1]);
    fcntl(res[0], F_SETFL, O_NONBLOCK);
    int ready = forked == r->procs ? collect(r, kids, res[0], MSG_READY, now_s() + 60) : -1;
    if (ready != r->procs) {
        if (ready >= 0)
            fprintf(stderr, "store_rdzv: %d of %d generator processes got ready\n", ready,
                    r->procs);
        close(go[1]); /* EOF: those waiting leave */
        end_kids(r, kids);
        close(go[0]);
        close(res[0]);
        free(kids);
        return 1;
    }
    server_use_t u = {.cpu0 = -1, .cpu = -1, .hwm = -1};
    if (r->server_pid > 0)
        server_begin(&u, r->server_pid);
    static const char bytes[4096];
    double cpu0 = bench_cpu(), t0 = now_s();
    if (write(go[1], bytes, (size_t)r->procs) != (ssize_t)r->procs)
        fprintf(stderr, "store_rdzv: releasing the generator processes: %s\n", strerror(errno));
    close(go[1]);
    /* Each stops at its own timeout; some seconds more for its last
     * loop and its message. */
    collect(r, kids, res[0], MSG_RESULT, t0 + r->timeout_s + 10);
    tally_t t = {.cpu = bench_cpu() - cpu0, .elapsed = now_s() - t0};
    if (r->server_pid > 0)
        server_end(&u);
    end_kids(r, kids);
    tally_kids(r, kids, t0, &t);
    report(r, &t, &u);
    close(go[0]);
    close(res[0]);
    free(kids);
    return t.t_done >= 0 ? 0 : 1;
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
    fprintf(stderr, "store_rdzv: this run needs %ld file descriptors per process; the "
                    "limit is %llu, hard %llu (ulimit -n / -Hn; --procs splits the clients)\n",
            need,
            (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
    return 0;
}

/* --procs auto: the fewest processes whose share + 64 descriptors fits
 * the hard limit (the soft one can be raised to it); 1 when unlimited. */
static int auto_procs(int n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max == RLIM_INFINITY ||
        rl.rlim_max <= 64 + 16)
        return 1; /* fd_room says what is short */
    long room = (long)rl.rlim_max - 64, p = (n + room - 1) / room;
    p = p < n ? p : n;
    return (int)(p < 4096 ? p : 4096); /* --procs's bound; fd_room says the rest */
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
                    "[--server-pid PID] [--per-addr K] [--procs P|auto] [--timeout SEC] "
                    "[--label NAME]\n"
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
        else if (!strcmp(o, "--procs"))
            x = r.procs = strcmp(v, "auto") ? (int)parse_num(v, 1, 4096) : 0;
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
    if (r.procs > r.n) {
        fprintf(stderr, "store_rdzv: --procs %d is more than the %d clients\n", r.procs, r.n);
        return 2;
    }
    if (!r.procs)
        r.procs = auto_procs(r.n);
    if (!fd_room((r.n + r.procs - 1) / r.procs + 16))
        return 1;
    return r.procs > 1 ? split(&r) : rendezvous(&r);
}
