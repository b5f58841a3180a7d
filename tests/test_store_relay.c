/* tests/test_store_relay.c — the store server with relay processes
 * (`ddpsim store serve --relays K`, tools/store_relay.c, handed to the
 * server as its sys hook, ddp_store_relays_hook): the
 * same semantics as without them (the shared conformance table, both
 * protocol generations), values past the relays' flow-control window both
 * ways, a client that stops reading dropped by the idle timeout as over a
 * socket, a client's hang-up reaching the server and the server's drop
 * reaching the client, the client's own address reaching the allow list,
 * the relays gone (the port closed) once the server is freed, a relay
 * killed taking its own clients only, a relay count out of range refused,
 * and the soft open-file limit raised to the hard one before the relays
 * fork (they inherit it), said once. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "../core/store_priv.h"
#include "../tools/store_relay.h"
#include "store_conformance.h"
#include "test.h"

static ddp_sys_t *g_sys;

static int suite_init(void) { return ddp_test_suite_sys_init(&g_sys, 1); }
static int suite_cleanup(void) { return ddp_test_suite_sys_cleanup(&g_sys); }

static int64_t dl(int ms) { return ddp_test_deadline_ms(g_sys, ms); }

/* The relays' sys the hook made last (the server's, while it runs). */
static ddp_sys_t *g_relay_sys;

static int relay_hook(ddp_sys_t *base, void *arg, ddp_sys_t **out)
{
    int rc = ddp_store_relays_hook(base, arg, out);
    g_relay_sys = rc == 0 ? *out : NULL;
    return rc;
}

/* Options for a server on 127.0.0.1 with *relays relay processes (read
 * by ddp_store_server_new only). */
static ddp_store_server_opts_t relay_opts(int *relays)
{
    return (ddp_store_server_opts_t){.host = "127.0.0.1", .sys_hook = relay_hook,
                                     .sys_hook_arg = relays};
}

/* Relay i's process id in the server started last. */
static long relay_pid(int i)
{
    return ddp_store_relay_pid(g_relay_sys, i);
}

static ddp_store_server_t *relayed(int relays, const char *allow)
{
    ddp_store_server_opts_t o = relay_opts(&relays);
    o.allow = allow;
    return ddp_test_server_start(g_sys, &o);
}

static uint16_t port_of(ddp_store_server_t *srv)
{
    return ddp_store_server_addr(srv).port;
}

static ddp_store_t *cl_open(uint16_t port, ddp_store_proto_t proto)
{
    ddp_store_client_opts_t o = {.host = "127.0.0.1", .port = port,
                                 .connect_deadline = dl(5000), .seed = 7,
                                 .protocol = proto};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
    if (!st)
        fprintf(stderr, "connect: %s\n", ddp_err_message());
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    return st;
}

static ddp_store_server_stats_t stats(ddp_store_server_t *srv)
{
    ddp_store_server_stats_t s;
    ddp_store_server_stats(srv, &s);
    return s;
}

/* Waits (bounded) until the server counts `want` clients. */
static size_t clients_settle(ddp_store_server_t *srv, size_t want)
{
    int64_t end = dl(5000);
    while (stats(srv).clients != want && ddp_sys_now(g_sys) < end)
        ddp_sys_sleep_until(g_sys, dl(10));
    return stats(srv).clients;
}

static void test_conformance(void)
{
    ddp_store_server_t *srv = relayed(2, NULL);
    ddp_store_t *a = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    ddp_store_t *b = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    ddp_test_store_conformance(a, b, "relay");
    ddp_store_t *la = cl_open(port_of(srv), DDP_STORE_PROTO_LEGACY);
    ddp_store_t *lb = cl_open(port_of(srv), DDP_STORE_PROTO_LEGACY);
    CU_ASSERT_EQUAL(ddp_store_client_protocol(la), DDP_STORE_PROTO_LEGACY);
    ddp_test_store_conformance(la, lb, "relay-legacy");
    CU_ASSERT_EQUAL(stats(srv).protocol_errors, 0);
    CU_ASSERT_EQUAL(clients_settle(srv, 4), 4);
    ddp_store_free(a);
    ddp_store_free(b);
    ddp_store_free(la);
    ddp_store_free(lb);
    ddp_test_server_end(srv);
}

/* 3 MiB each way: twelve times a connection's window, in 64 KiB frames. */
static void test_large_values(void)
{
    ddp_store_server_t *srv = relayed(1, NULL);
    ddp_store_t *a = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    ddp_store_t *b = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    size_t n = (size_t)3 << 20;
    uint8_t *v = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 2654435761u >> 13);
    /* SET has no reply: a PING behind it says the server has it. */
    CU_ASSERT_EQUAL_FATAL(ddp_store_set(a, "big", v, n, dl(10000)), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_store_ping(a, dl(10000)), 0);
    ddp_buf_t got = {0};
    CU_ASSERT_EQUAL(ddp_store_get(b, "big", &got, dl(20000)), 0);
    CU_ASSERT_EQUAL(got.len, n);
    CU_ASSERT(got.len == n && memcmp(got.data, v, n) == 0);
    ddp_buf_free(&got);
    /* The same connection again, after its windows were used up. */
    v[n / 2] ^= 0xff;
    CU_ASSERT_EQUAL(ddp_store_set(b, "big", v, n, dl(20000)), 0);
    CU_ASSERT_EQUAL(ddp_store_ping(b, dl(20000)), 0);
    CU_ASSERT_EQUAL(ddp_store_get(a, "big", &got, dl(20000)), 0);
    CU_ASSERT(got.len == n && memcmp(got.data, v, n) == 0);
    ddp_buf_free(&got);
    free(v);
    ddp_store_free(a);
    ddp_store_free(b);
    ddp_test_server_end(srv);
}

/* A client that stops reading stalls its replies in the server, as over a
 * socket (the relays pass on no more than a window), so the idle timeout
 * drops it: six pipelined GETs of an 8 MiB value, 48 MiB, far past what
 * the window and the kernel's buffers hold. */
static void stalled_reader_check(ddp_store_server_t *srv, ddp_store_t *a);
static void test_stalled_reader_dropped(void)
{
    int one = 1;
    ddp_store_server_opts_t o = relay_opts(&one);
    o.idle_timeout_ns = DDP_NS_PER_S;
    ddp_store_server_t *srv = ddp_test_server_start(g_sys, &o);
    ddp_store_t *a = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    size_t n = DDP_STORE_MAX_VALUE;
    uint8_t *v = calloc(1, n);
    /* 8 MiB through a relay: 10 s bounds it on a quiet host, more at load
     * or under a sanitizer; a failure here fails this test alone */
    int ok = v && ddp_store_set(a, "big", v, n, ddp_test_bound(g_sys, 10)) == 0 &&
             ddp_store_ping(a, ddp_test_bound(g_sys, 10)) == 0;
    CU_ASSERT_TRUE(ok);
    free(v);
    if (ok)
        stalled_reader_check(srv, a);
    ddp_store_free(a);
    ddp_test_server_end(srv);
}

/* Six pipelined legacy GETs of "/big" that are never read: the server
 * drops that connection at its idle timeout and serves a on. */
static void stalled_reader_check(ddp_store_server_t *srv, ddp_store_t *a)
{
    ddp_addr_t at;
    ddp_addr_parse("127.0.0.1", port_of(srv), &at);
    int fd = ddp_sys_connect(g_sys, &at, dl(5000));
    CU_ASSERT(fd >= 0);
    if (fd < 0)
        return;
    /* Our client stores user keys under "/" as torch's does. */
    uint8_t get[1 + 8 + 4] = {DDP_STORE_LOP_GET};
    uint64_t klen = 4;
    memcpy(get + 1, &klen, 8);
    memcpy(get + 9, "/big", 4);
    for (int i = 0; i < 6; i++) /* the legacy table: no handshake */
        CU_ASSERT_EQUAL(ddp_sys_send_all(g_sys, fd, get, sizeof get, dl(5000)), 0);
    int64_t end = dl(15000);
    while (stats(srv).idle_dropped == 0 && ddp_sys_now(g_sys) < end)
        ddp_sys_sleep_until(g_sys, dl(20));
    CU_ASSERT_EQUAL(stats(srv).idle_dropped, 1);
    ddp_sys_close(g_sys, fd);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(5000)), 0); /* the others are served */
}

/* A client that goes away is gone for the server too; one the server
 * drops (a first message no protocol has) reads the end of the stream. */
static void test_hangups_both_ways(void)
{
    ddp_store_server_t *srv = relayed(2, NULL);
    ddp_store_t *a = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    ddp_store_t *b = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    CU_ASSERT_EQUAL(clients_settle(srv, 2), 2);
    ddp_store_free(b);
    CU_ASSERT_EQUAL(clients_settle(srv, 1), 1);

    ddp_addr_t at;
    ddp_addr_parse("127.0.0.1", port_of(srv), &at);
    int fd = ddp_sys_connect(g_sys, &at, dl(5000));
    CU_ASSERT_FATAL(fd >= 0);
    uint8_t junk[32];
    memset(junk, 0xee, sizeof junk);
    CU_ASSERT_EQUAL(ddp_sys_send_all(g_sys, fd, junk, sizeof junk, dl(5000)), 0);
    uint8_t r[16];
    ssize_t k = ddp_sys_recv(g_sys, fd, r, sizeof r, dl(5000));
    CU_ASSERT(k == 0 || k == -ECONNRESET);
    ddp_sys_close(g_sys, fd);
    CU_ASSERT(stats(srv).protocol_errors >= 1);
    CU_ASSERT_EQUAL(clients_settle(srv, 1), 1);
    /* The others are served as before. */
    int64_t v = 0;
    CU_ASSERT_EQUAL(ddp_store_add(a, "n", 2, &v, dl(5000)), 0);
    CU_ASSERT_EQUAL(v, 2);
    ddp_store_free(a);
    ddp_test_server_end(srv);
}

/* The allow list sees the client's address, not the relay's. */
static void test_allow_sees_client(void)
{
    ddp_store_server_t *srv = relayed(1, "10.0.0.0/8");
    ddp_addr_t at;
    ddp_addr_parse("127.0.0.1", port_of(srv), &at);
    int fd = ddp_sys_connect(g_sys, &at, dl(5000));
    CU_ASSERT_FATAL(fd >= 0);
    uint8_t r[16];
    ssize_t k = ddp_sys_recv(g_sys, fd, r, sizeof r, dl(5000));
    CU_ASSERT(k == 0 || k == -ECONNRESET);
    ddp_sys_close(g_sys, fd);
    CU_ASSERT_EQUAL(stats(srv).denied, 1);
    ddp_test_server_end(srv);

    srv = relayed(1, "127.0.0.0/8");
    ddp_store_t *a = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    CU_ASSERT_EQUAL(ddp_store_set_str(a, "k", "v", dl(5000)), 0);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(5000)), 0);
    CU_ASSERT_EQUAL(stats(srv).denied, 0);
    ddp_store_free(a);
    ddp_test_server_end(srv);
}

/* Freed, the server takes its relays with it: nobody listens any more. */
static void test_free_stops_relays(void)
{
    ddp_store_server_t *srv = relayed(3, NULL);
    uint16_t port = port_of(srv);
    ddp_store_t *a = cl_open(port, DDP_STORE_PROTO_AUTO);
    CU_ASSERT_EQUAL(ddp_store_set_str(a, "k", "v", dl(5000)), 0);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(5000)), 0);
    ddp_test_server_end(srv);
    /* Its client reads the end, and a new one is refused. */
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(5000)), DDP_EPEER_LOST);
    ddp_store_free(a);
    ddp_addr_t at;
    ddp_addr_parse("127.0.0.1", port, &at);
    int fd = ddp_sys_connect(g_sys, &at, dl(2000));
    CU_ASSERT_EQUAL(fd, -ECONNREFUSED);
    if (fd >= 0)
        ddp_sys_close(g_sys, fd);
}

/* A relay that dies takes its clients with it, and only those: the
 * server counts them gone, the other relay's clients and new ones are
 * served. */
static void test_relay_dies(void)
{
    ddp_store_server_t *srv = relayed(2, NULL);
    enum { N = 8 };
    ddp_store_t *c[N];
    for (int i = 0; i < N; i++) {
        c[i] = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
        CU_ASSERT_EQUAL(ddp_store_ping(c[i], dl(5000)), 0);
    }
    long pid = relay_pid(0);
    CU_ASSERT_FATAL(pid > 0);
    CU_ASSERT_EQUAL(ddp_sys_kill(g_sys, pid, 9), 0);
    int ok = 0, lost = 0;
    for (int i = 0; i < N; i++) {
        int rc = ddp_store_ping(c[i], dl(5000));
        ok += rc == 0;
        lost += rc == DDP_EPEER_LOST;
    }
    CU_ASSERT_EQUAL(ok + lost, N);
    CU_ASSERT_EQUAL(clients_settle(srv, (size_t)ok), (size_t)ok);
    ddp_store_t *late = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    int64_t v = 0;
    CU_ASSERT_EQUAL(ddp_store_add(late, "after", 1, &v, dl(5000)), 0);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(clients_settle(srv, (size_t)ok + 1), (size_t)ok + 1);
    ddp_store_free(late);
    for (int i = 0; i < N; i++)
        ddp_store_free(c[i]);
    ddp_test_server_end(srv);
}

/* 1 when process pid is gone (reaped), waiting up to ms; 0 while it is
 * there (a zombie too: /proc lists it until its parent reaps it). */
static int reaped_within(long pid, int64_t ms)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld", pid);
    for (int64_t end = dl((int)ms); ddp_sys_now(g_sys) < end;) {
        if (access(path, F_OK) != 0)
            return 1;
        ddp_sys_sleep_until(g_sys, dl(20));
    }
    return access(path, F_OK) != 0;
}

/* Issue 43: a relay that died stayed a zombie until the server exited
 * (nobody waited for it). The server reaps it once its link is lost, and
 * serves on through the other relay. */
static void test_dead_relay_reaped(void)
{
    ddp_store_server_t *srv = relayed(2, NULL);
    ddp_store_t *a = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(5000)), 0);
    long pid = relay_pid(0);
    CU_ASSERT_FATAL(pid > 0);
    CU_ASSERT_EQUAL(ddp_sys_kill(g_sys, pid, 9), 0);
    CU_ASSERT(reaped_within(pid, 5000));
    ddp_store_free(a);
    ddp_store_t *late = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    CU_ASSERT_EQUAL(ddp_store_ping(late, dl(5000)), 0);
    ddp_store_free(late);
    ddp_test_server_end(srv);
}

/* A man in the middle on the sys seam: the server's recv of the relay
 * link gets one forged OPEN frame for connection id 2^24 - 1 (the largest
 * a relay may name) behind the first real OPEN. */
static const ddp_sys_ops_t *g_real_ops;
static int g_forged;

static ssize_t forging_recv(ddp_sys_t *s, int fd, void *buf, size_t n, int64_t deadline)
{
    ddp_sys_t real = *s;
    real.ops = g_real_ops;
    ssize_t got = ddp_sys_recv(&real, fd, buf, n, deadline);
    uint8_t *b = buf;
    enum { HDR = 12, OPEN_LEN = HDR + sizeof(ddp_addr_t) };
    if (got < OPEN_LEN || g_forged || b[0] != 2 /* OPEN */ || (size_t)got + OPEN_LEN > n)
        return got;
    memcpy(b + got, b, OPEN_LEN); /* the same frame, another id */
    uint32_t id = (1u << 24) - 1;
    memcpy(b + got + 4, &id, 4);
    g_forged = 1;
    return got + OPEN_LEN;
}

/* Issue 43: one OPEN frame naming id 2^24 - 1 made the server's id table
 * for that relay 2^24 entries (128 MiB, outside the memory budget). The
 * table holds what is open: the forged OPEN costs one entry. */
static void test_open_id_costs_one_entry(void)
{
    ddp_sys_ops_t ops = *g_sys->ops;
    g_real_ops = g_sys->ops;
    ops.recv = forging_recv;
    ddp_sys_t mitm = *g_sys;
    mitm.ops = &ops;
    g_forged = 0;
    int one = 1;
    ddp_store_server_opts_t o = relay_opts(&one);
    struct mallinfo2 before = mallinfo2();
    ddp_store_server_t *srv = ddp_test_server_start(&mitm, &o);
    ddp_store_t *a = cl_open(port_of(srv), DDP_STORE_PROTO_AUTO);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(5000)), 0);
    struct mallinfo2 after = mallinfo2();
    CU_ASSERT(g_forged);
    size_t grew = (after.arena + after.hblkhd) - (before.arena + before.hblkhd);
    if (grew >= ((size_t)16 << 20))
        printf("\n  the heap grew by %zu bytes\n", grew);
    CU_ASSERT(grew < ((size_t)16 << 20));
    ddp_store_free(a);
    ddp_test_server_end(srv);
}

static void test_bad_count(void)
{
    int many = DDP_STORE_MAX_RELAYS + 1;
    ddp_store_server_opts_t o = relay_opts(&many);
    ddp_store_server_t *srv = NULL;
    CU_ASSERT_EQUAL(ddp_store_server_new(g_sys, &o, &srv), DDP_ECONFIG);
    CU_ASSERT_PTR_NULL(srv);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "give 1 to 64"));
}

/* ---- the open-file limit ---- */

enum { LOW_NOFILE = 64, FDL_RAISED = 0, FDL_LOW = 1, FDL_RELAY_LOW = 2, FDL_SAID = 3,
       FDL_NO_SERVER = 4, FDL_CANNOT = 5 };

static void count_limit_lines(void *arg, ddp_log_level_t level, const char *line)
{
    (void)level;
    if (strstr(line, "open-file limit") && strstr(line, "64"))
        ++*(int *)arg;
}

/* The soft limit in /proc/PID/limits ("Max open files  SOFT  HARD  files"), or -1. */
static long proc_soft_nofile(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/limits", pid);
    FILE *f = fopen(path, "r");
    long soft = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Max open files", 14) == 0)
            soft = strtol(line + 14, NULL, 10);
    if (f)
        fclose(f);
    return soft;
}

/* In a process of its own (the limit is the process's): soft limit
 * LOW_NOFILE, then two servers with a relay each. The exit code says
 * what held (FDL_*). */
static int fd_limit_child(ddp_sys_t *sys, void *arg)
{
    (void)arg;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max <= LOW_NOFILE)
        return FDL_CANNOT;
    rl.rlim_cur = LOW_NOFILE;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return FDL_CANNOT;
    int said = 0;
    ddp_log_set_level(DDP_LOG_INFO);
    ddp_log_set_sink(count_limit_lines, &said);
    long relay_soft = -1;
    for (int i = 0; i < 2; i++) {
        int one = 1;
        ddp_store_server_opts_t o = relay_opts(&one);
        ddp_store_server_t *srv = NULL;
        if (ddp_store_server_new(sys, &o, &srv) != 0)
            return FDL_NO_SERVER;
        if (i == 0)
            relay_soft = proc_soft_nofile(relay_pid(0));
        ddp_store_server_free(srv);
    }
    ddp_log_set_sink(NULL, NULL);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != rl.rlim_max)
        return FDL_LOW;
    if (rl.rlim_max != RLIM_INFINITY && relay_soft != (long)rl.rlim_max)
        return FDL_RELAY_LOW;
    return said == 1 ? FDL_RAISED : FDL_SAID;
}

static void test_fd_limit_raised(void)
{
    ddp_spawn_t sp = {.entry = fd_limit_child, .name = "fd-limit"};
    ddp_pid_t pid;
    int status = -1;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_spawn(g_sys, &sp, &pid), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_sys_wait(g_sys, pid, &status, dl(30000)), 0);
    if (status == FDL_CANNOT) {
        ddp_test_skip("the hard open-file limit is %d or less, or cannot be lowered to it",
                      LOW_NOFILE);
        return;
    }
    static const char *const what[] = {
        [FDL_LOW] = "the server left the soft open-file limit at 64 (want: the hard limit)",
        [FDL_RELAY_LOW] = "the relay was forked before the limit was raised",
        [FDL_SAID] = "the before/after was not logged exactly once for two servers",
        [FDL_NO_SERVER] = "the server did not start",
    };
    if (status != FDL_RAISED)
        fprintf(stderr, "fd_limit_raised: exit %d: %s\n", status,
                status > 0 && status <= FDL_NO_SERVER ? what[status] : "the child crashed");
    CU_ASSERT_EQUAL(status, FDL_RAISED);
}

DDP_SUITE("store_relay", suite_init, suite_cleanup,
          {"conformance", test_conformance},
          {"large_values", test_large_values},
          {"stalled_reader_dropped", test_stalled_reader_dropped},
          {"hangups_both_ways", test_hangups_both_ways},
          {"allow_sees_client", test_allow_sees_client},
          {"free_stops_relays", test_free_stops_relays},
          {"relay_dies", test_relay_dies},
          {"dead_relay_reaped", test_dead_relay_reaped},
          {"open_id_costs_one_entry", test_open_id_costs_one_entry},
          {"bad_count", test_bad_count},
          {"fd_limit_raised", test_fd_limit_raised})
