/* tests/test_store_client.c — the TCPStore client against our server on a
 * thread (127.0.0.1, port 0): every op (shared conformance table), WAIT
 * timeout + CANCEL_WAIT and its race, the bytes it puts on the wire, connect
 * retries (refused, late master, faults), lost connections and bad replies
 * from fake servers. */
#include <errno.h>
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "fake_clock.h"
#include "store_conformance.h"
#include "test.h"

static ddp_sys_t *g_sys;

static int suite_init(void)
{
    fiu_init(0);
    /* Servers here warn about the clients these tests break on purpose. */
    return ddp_test_suite_sys_init(&g_sys, 1);
}

static int suite_cleanup(void) { return ddp_test_suite_sys_cleanup(&g_sys); }

static int64_t dl(int ms) { return ddp_test_deadline_ms(g_sys, ms); }

static ddp_store_server_t *srv_start_on(uint16_t port)
{
    return ddp_test_server_start_loopback(g_sys, port);
}

static ddp_store_server_t *srv_start(void) { return srv_start_on(0); }

static void srv_end(ddp_store_server_t *srv) { ddp_test_server_end(srv); }

static uint16_t srv_port(ddp_store_server_t *srv)
{
    return ddp_store_server_addr(srv).port;
}

static ddp_store_client_opts_t opts(uint16_t port, int deadline_ms)
{
    return (ddp_store_client_opts_t){.host = "127.0.0.1",
                                     .port = port,
                                     .connect_deadline = dl(deadline_ms),
                                     .seed = 7,
                                     .backoff_initial_ns =
                                         20 * DDP_NS_PER_MS};
}

static ddp_store_t *cl_open_proto(uint16_t port, ddp_store_proto_t proto)
{
    ddp_store_client_opts_t o = opts(port, 5000);
    o.protocol = proto;
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
    if (!st)
        fprintf(stderr, "connect: %s\n", ddp_err_message());
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_EQUAL(err, 0);
    return st;
}

static ddp_store_t *cl_open(uint16_t port)
{
    return cl_open_proto(port, DDP_STORE_PROTO_AUTO);
}

static ddp_store_server_t *srv_start_proto(ddp_store_proto_t proto)
{
    ddp_store_server_opts_t o = {.host = "127.0.0.1", .protocol = proto};
    return ddp_test_server_start(g_sys, &o);
}

static ddp_store_server_stats_t stats(ddp_store_server_t *srv)
{
    ddp_store_server_stats_t s;
    ddp_store_server_stats(srv, &s);
    return s;
}

/* ------------------------------------------------------------ every op */

static void test_conformance(void)
{
    ddp_store_server_t *srv = srv_start();
    ddp_store_t *a = cl_open(srv_port(srv)), *b = cl_open(srv_port(srv));
    CU_ASSERT_STRING_EQUAL(a->ops->name, "tcp");
    CU_ASSERT_EQUAL(ddp_store_client_attempts(a), 1);
    ddp_test_store_conformance(a, b, "tcp");
    /* Our client never breaks the protocol. */
    CU_ASSERT_EQUAL(stats(srv).protocol_errors, 0);
    ddp_store_free(a);
    ddp_store_free(b);
    srv_end(srv);
}

/* The same table, our client in the legacy generation against our (auto)
 * server: both generations keep the same semantics. */
static void test_conformance_legacy(void)
{
    ddp_store_server_t *srv = srv_start();
    ddp_store_t *a = cl_open_proto(srv_port(srv), DDP_STORE_PROTO_LEGACY);
    ddp_store_t *b = cl_open_proto(srv_port(srv), DDP_STORE_PROTO_LEGACY);
    CU_ASSERT_EQUAL(ddp_store_client_protocol(a), DDP_STORE_PROTO_LEGACY);
    ddp_test_store_conformance(a, b, "legacy");
    /* A current client sees what the legacy ones stored. */
    ddp_store_t *c = cl_open(srv_port(srv));
    CU_ASSERT_EQUAL(ddp_store_client_protocol(c), DDP_STORE_PROTO_CURRENT);
    ddp_buf_t v = {0};
    CU_ASSERT_EQUAL(ddp_store_get(c, "legacy/cas", &v, dl(3000)), 0);
    CU_ASSERT(v.len == 6 && memcmp(v.data, "second", 6) == 0);
    ddp_buf_free(&v);
    ddp_store_server_stats_t st = stats(srv);
    CU_ASSERT(st.legacy_connections >= 2);
    CU_ASSERT_EQUAL(st.protocol_errors, 0);
    ddp_store_free(a);
    ddp_store_free(b);
    ddp_store_free(c);
    srv_end(srv);
}

/* opts.check_key: the connect CHECKs that key in its PING's round trip
 * and ddp_store_client_checked says what it found. A client without the
 * key, a legacy master (no PING: nothing is asked) and a store that is not
 * a client say -1. */
static void test_connect_check_key(void)
{
    ddp_store_server_t *srv = srv_start();
    uint16_t port = srv_port(srv);
    ddp_store_t *a = cl_open(port);
    CU_ASSERT_EQUAL(ddp_store_client_checked(a), -1);
    CU_ASSERT_EQUAL(ddp_store_set_str(a, "present", "1", dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(3000)), 0); /* the SET was served */
    ddp_store_client_opts_t o = opts(port, 5000);
    o.check_key = "present";
    ddp_store_t *b = ddp_store_client_connect(g_sys, &o, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(ddp_store_client_checked(b), 1);
    o.check_key = "absent";
    ddp_store_t *c = ddp_store_client_connect(g_sys, &o, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(ddp_store_client_checked(c), 0);
    /* The connection is in step after it: the next reply is the next op's. */
    ddp_buf_t v = {0};
    CU_ASSERT_EQUAL(ddp_store_get(c, "present", &v, dl(3000)), 0);
    CU_ASSERT(v.len == 1 && v.data[0] == '1');
    ddp_buf_free(&v);
    CU_ASSERT_EQUAL(stats(srv).protocol_errors, 0);
    ddp_store_free(a);
    ddp_store_free(b);
    ddp_store_free(c);
    srv_end(srv);

    srv = srv_start_proto(DDP_STORE_PROTO_LEGACY);
    o = opts(srv_port(srv), 5000);
    o.check_key = "present";
    ddp_store_t *d = ddp_store_client_connect(g_sys, &o, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(ddp_store_client_protocol(d), DDP_STORE_PROTO_LEGACY);
    CU_ASSERT_EQUAL(ddp_store_client_checked(d), -1);
    ddp_store_free(d);
    srv_end(srv);
    ddp_store_t *m = ddp_store_memory_new(g_sys);
    CU_ASSERT_EQUAL(ddp_store_client_checked(m), -1);
    ddp_store_free(m);
}

/* protocol auto against a legacy-only master (our server in legacy mode
 * behaves as torch 1.13's: it drops the VALIDATE/PING handshake): the
 * probe finds legacy, the client speaks it; what that table has works,
 * what it lacks fails naming the reason. */
static void test_auto_finds_legacy_master(void)
{
    ddp_store_server_t *srv = srv_start_proto(DDP_STORE_PROTO_LEGACY);
    ddp_store_t *a = cl_open(srv_port(srv));
    CU_ASSERT_EQUAL(ddp_store_client_protocol(a), DDP_STORE_PROTO_LEGACY);
    CU_ASSERT_EQUAL(ddp_store_client_attempts(a), 2);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(a, 1, 2, dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(a, "k", "v", dl(3000)), 0);
    ddp_buf_t v = {0};
    CU_ASSERT_EQUAL(ddp_store_get(a, "k", &v, dl(3000)), 0);
    CU_ASSERT(v.len == 1 && v.data[0] == 'v');
    ddp_buf_free(&v);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(3000)), 0);
    const char *k = "k", *missing = "missing";
    CU_ASSERT_EQUAL(ddp_store_check(a, &k, 1, dl(3000)), 1);
    CU_ASSERT_EQUAL(ddp_store_wait(a, &missing, 1, dl(100)), DDP_ETIMEOUT);
    /* legacy was found, not asked for: the protocol is not suspected */
    CU_ASSERT_PTR_NULL(strstr(ddp_err_ctx()->hint, "protocol"));
    CU_ASSERT_EQUAL(ddp_store_delete_key(a, "k", dl(3000)), 1);
    int64_t n = -1;
    CU_ASSERT_EQUAL(ddp_store_num_keys(a, &n, dl(3000)), 0);
    CU_ASSERT_EQUAL(n, 1); /* init/ */
    CU_ASSERT_EQUAL(ddp_store_append(a, "k", "x", 1, dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(3000)), DDP_EPEER_LOST);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_ctx()->hint, "legacy"));
    ddp_store_free(a);
    srv_end(srv);
}

/* protocol current against that master: it fails, and the hint names the
 * mismatch instead of blaming a master that is up. */
static void test_current_vs_legacy_master(void)
{
    ddp_store_server_t *srv = srv_start_proto(DDP_STORE_PROTO_LEGACY);
    ddp_store_client_opts_t o = opts(srv_port(srv), 300);
    o.protocol = DDP_STORE_PROTO_CURRENT;
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_EQUAL(err, DDP_EPEER_LOST);
    const char *hint = ddp_err_ctx()->hint;
    CU_ASSERT_PTR_NOT_NULL(strstr(hint, "legacy"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hint, "VALIDATE/PING"));
    CU_ASSERT_PTR_NULL(strstr(hint, "running and reachable"));
    ddp_store_free(st);
    srv_end(srv);
}

/* protocol legacy against a current-only master: the first request gets
 * the connection dropped, and the hint says which protocol to use. */
static void test_legacy_vs_current_master(void)
{
    ddp_store_server_t *srv = srv_start_proto(DDP_STORE_PROTO_CURRENT);
    ddp_store_t *a = cl_open_proto(srv_port(srv), DDP_STORE_PROTO_LEGACY);
    int64_t n = 0;
    CU_ASSERT_EQUAL(ddp_store_num_keys(a, &n, dl(3000)), DDP_EPEER_LOST);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_ctx()->hint, "protocol auto or "
                                                       "current"));
    ddp_store_free(a);
    srv_end(srv);
}

/* protocol legacy asked for: a wait that times out may be a current master
 * that never answers legacy frames (torch 2.11's server does that: seen on
 * the GPU machine), and the hint says so; protocol auto's does not. */
static void test_legacy_wait_timeout_hint(void)
{
    ddp_store_server_t *srv = srv_start();
    const char *missing = "missing";
    ddp_store_t *a = cl_open_proto(srv_port(srv), DDP_STORE_PROTO_LEGACY);
    CU_ASSERT_EQUAL(ddp_store_wait(a, &missing, 1, dl(100)), DDP_ETIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_ctx()->hint, "use protocol auto or current"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_ctx()->hint, "the rank that sets these keys"));
    ddp_store_t *b = cl_open(srv_port(srv));
    CU_ASSERT_EQUAL(ddp_store_wait(b, &missing, 1, dl(100)), DDP_ETIMEOUT);
    CU_ASSERT_PTR_NULL(strstr(ddp_err_ctx()->hint, "protocol"));
    ddp_store_free(a);
    ddp_store_free(b);
    srv_end(srv);
}

/* A reset on VALIDATE/PING from a server that speaks both generations
 * (ours, with a fault) is not mistaken for a legacy master: the probe gets
 * both answers and the client stays current. */
static void test_auto_reset_stays_current(void)
{
    ddp_store_server_t *srv = srv_start();
    fiu_enable("store/server/validate", 1, NULL, FIU_ONETIME);
    ddp_store_t *a = cl_open(srv_port(srv));
    fiu_disable("store/server/validate");
    CU_ASSERT_EQUAL(ddp_store_client_protocol(a), DDP_STORE_PROTO_CURRENT);
    CU_ASSERT_EQUAL(ddp_store_client_attempts(a), 2);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(3000)), 0);
    ddp_store_free(a);
    srv_end(srv);
}

static void test_prefix_over_tcp(void)
{
    ddp_store_server_t *srv = srv_start();
    ddp_store_t *a = cl_open(srv_port(srv)), *b = cl_open(srv_port(srv));
    ddp_store_t *pa = ddp_store_prefix_new(a, "default_pg");
    ddp_store_t *pb = ddp_store_prefix_new(b, "default_pg");
    ddp_test_store_conformance(pa, pb, "ptcp");
    /* The base sees the joined keys. */
    const char *full = "default_pg/ptcp/la";
    CU_ASSERT_EQUAL(ddp_store_check(a, &full, 1, dl(3000)), 1);
    CU_ASSERT_EQUAL(stats(srv).protocol_errors, 0);
    ddp_store_free(pa);
    ddp_store_free(pb);
    ddp_store_free(a);
    ddp_store_free(b);
    srv_end(srv);
}

/* ------------------------------------------------- WAIT, CANCEL_WAIT */

static void test_wait_timeout_cancel(void)
{
    ddp_store_server_t *srv = srv_start();
    ddp_store_t *a = cl_open(srv_port(srv)), *b = cl_open(srv_port(srv));
    const char *keys[2] = {"cw/present", "cw/missing"};
    CU_ASSERT_EQUAL(ddp_store_set_str(a, keys[0], "1", dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_wait(a, keys, 2, dl(150)), DDP_ETIMEOUT);
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%u", srv_port(srv));
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Timed out after"));
    /* Only the key still missing, asked after the cancel. */
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "waiting for keys [cw/missing] (1 of the 2 "
                                       "waited on) on"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, where));
    CU_ASSERT_STRING_EQUAL(ddp_err_ctx()->addr, where);
    CU_ASSERT(ddp_err_ctx()->waited_ns > 0);
    /* The cancelled WAIT left nothing behind: when the key appears now, no
     * stray STOP_WAITING may land in the next reply. */
    CU_ASSERT_EQUAL(ddp_store_set_str(b, keys[1], "2", dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_ping(b, dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_check(a, keys, 2, dl(3000)), 1);
    ddp_buf_t v = {0};
    CU_ASSERT_EQUAL(ddp_store_get(a, keys[1], &v, dl(3000)), 0);
    CU_ASSERT(v.len == 1 && v.data[0] == '2');
    ddp_buf_free(&v);
    CU_ASSERT_EQUAL(stats(srv).protocol_errors, 0);
    ddp_store_free(a);
    ddp_store_free(b);
    srv_end(srv);
}

/* STOP_WAITING crossing CANCEL_WAIT on the wire: the fault point makes the
 * client cancel a WAIT the server has already answered, so it must read
 * STOP_WAITING, then WAIT_CANCELED, and stay in step. */
static void test_wait_cancel_race(void)
{
    ddp_store_server_t *srv = srv_start();
    ddp_store_t *a = cl_open(srv_port(srv));
    const char *k = "race/k";
    CU_ASSERT_EQUAL(ddp_store_set_str(a, k, "v", dl(3000)), 0);
    fiu_enable("store/client/wait", 1, NULL, FIU_ONETIME);
    CU_ASSERT_EQUAL(ddp_store_wait(a, &k, 1, dl(3000)), DDP_ETIMEOUT);
    fiu_disable("store/client/wait");
    int64_t v = 0;
    CU_ASSERT_EQUAL(ddp_store_add(a, "race/ctr", 5, &v, dl(3000)), 0);
    CU_ASSERT_EQUAL(v, 5);
    CU_ASSERT_EQUAL(ddp_store_wait(a, &k, 1, dl(3000)), 0);
    CU_ASSERT_EQUAL(stats(srv).protocol_errors, 0);
    ddp_store_free(a);
    srv_end(srv);
}

/* ------------------------------------------------- the bytes on the wire */

static int raw_connect(uint16_t port)
{
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", port, &a);
    int fd = ddp_sys_connect(g_sys, &a, dl(3000));
    CU_ASSERT_FATAL(fd >= 0);
    return fd;
}

/* CHECK of one raw key on a fresh raw connection: the reply code. */
static int raw_check(uint16_t port, const char *key)
{
    int fd = raw_connect(port);
    uint8_t m[64];
    size_t n = 0, kl = strlen(key);
    uint32_t magic = DDP_STORE_MAGIC;
    uint64_t one = 1, len = kl;
    m[n++] = DDP_STORE_OP_VALIDATE;
    memcpy(m + n, &magic, 4), n += 4;
    m[n++] = DDP_STORE_OP_CHECK;
    memcpy(m + n, &one, 8), n += 8;
    memcpy(m + n, &len, 8), n += 8;
    memcpy(m + n, key, kl), n += kl;
    CU_ASSERT_EQUAL(ddp_sys_send_all(g_sys, fd, m, n, dl(3000)), 0);
    uint8_t r = 0xEE;
    CU_ASSERT_EQUAL(ddp_sys_recv_all(g_sys, fd, &r, 1, dl(3000)), 0);
    ddp_sys_close(g_sys, fd);
    return r;
}

/* User keys go out as "/" + key (TCPStore's keyPrefix_); the init counter
 * goes out raw as "init/", so a PyTorch master counts our ranks. */
static void test_wire_keys(void)
{
    ddp_store_server_t *srv = srv_start();
    uint16_t port = srv_port(srv);
    ddp_store_t *a = cl_open(port);
    CU_ASSERT_EQUAL(ddp_store_wait_for_workers(a, 0, 1, dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_set_str(a, "a", "1", dl(3000)), 0);
    CU_ASSERT_EQUAL(ddp_store_ping(a, dl(3000)), 0);
    CU_ASSERT_EQUAL(raw_check(port, "/a"), DDP_STORE_READY);
    CU_ASSERT_EQUAL(raw_check(port, "a"), DDP_STORE_NOT_READY);
    CU_ASSERT_EQUAL(raw_check(port, "init/"), DDP_STORE_READY);
    CU_ASSERT_EQUAL(raw_check(port, "/init/"), DDP_STORE_NOT_READY);
    /* list_keys shows user keys only, num_keys counts everything. */
    char **ks = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_store_list_keys(a, &ks, &n, dl(3000)), 0);
    CU_ASSERT(n == 1 && !strcmp(ks[0], "a"));
    ddp_store_free_keys(ks, n);
    int64_t nk = 0;
    CU_ASSERT_EQUAL(ddp_store_num_keys(a, &nk, dl(3000)), 0);
    CU_ASSERT_EQUAL(nk, 2);
    ddp_store_free(a);
    srv_end(srv);
}

/* A key preset in-process reads back through a client as the client's own
 * key ("/" + key on the wire), and an ADD on a preset counter goes on from
 * it: the plugin's rank 0 claims its rank this way. Bad arguments say so. */
static void test_preset(void)
{
    ddp_store_server_opts_t so = {.host = "127.0.0.1", .max_key_len = 8};
    ddp_store_server_t *srv = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_new(g_sys, &so, &srv), 0);
    CU_ASSERT_EQUAL(ddp_store_server_preset(srv, "tok", "abc", 3), 0);
    CU_ASSERT_EQUAL(ddp_store_server_preset(srv, "n/0", "1", 1), 0);
    CU_ASSERT_EQUAL(ddp_store_server_preset(srv, "", "x", 1), -EINVAL);
    CU_ASSERT_EQUAL(ddp_store_server_preset(srv, "8bytes!!", "x", 1), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "1..7 bytes"));
    CU_ASSERT_EQUAL(ddp_store_server_preset(NULL, "k", "x", 1), -EINVAL);
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_start_thread(srv), 0);
    uint16_t port = srv_port(srv);
    ddp_store_t *a = cl_open(port);
    ddp_buf_t v = {0};
    CU_ASSERT_EQUAL(ddp_store_get(a, "tok", &v, dl(3000)), 0);
    CU_ASSERT(v.len == 3 && memcmp(v.data, "abc", 3) == 0);
    ddp_buf_free(&v);
    int64_t n = 0;
    CU_ASSERT_EQUAL(ddp_store_add(a, "n/0", 1, &n, dl(3000)), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(raw_check(port, "/tok"), DDP_STORE_READY);
    CU_ASSERT_EQUAL(raw_check(port, "tok"), DDP_STORE_NOT_READY);
    ddp_store_free(a);
    srv_end(srv);
}

/* -------------------------------------------------------------- connect */

static void test_connect_refused(void)
{
    uint16_t port = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(g_sys, &port), 0);
    ddp_store_client_opts_t o = opts(port, 300);
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_EQUAL(err, -ECONNREFUSED);
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%u", port);
    const char *msg = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, where));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "attempts"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "ECONNREFUSED"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "MASTER_ADDR/MASTER_PORT"));
    CU_ASSERT_STRING_EQUAL(ddp_err_ctx()->addr, where);
    CU_ASSERT(ddp_err_ctx()->waited_ns > 0);
    ddp_store_free(st);
}

static void test_connect_bad_opts(void)
{
    int err = 0;
    ddp_store_client_opts_t o = {.host = NULL};
    CU_ASSERT_PTR_NULL(ddp_store_client_connect(g_sys, &o, &err));
    CU_ASSERT_EQUAL(err, DDP_ECONFIG);
    CU_ASSERT_PTR_NULL(ddp_store_client_connect(g_sys, NULL, &err));
    CU_ASSERT_EQUAL(ddp_store_client_attempts(NULL), 0);
}

typedef struct {
    uint16_t port;
    int delay_ms;
    ddp_store_server_t *srv;
} late_t;

static void *late_master(void *arg)
{
    late_t *l = arg;
    ddp_sys_sleep_until(g_sys, dl(l->delay_ms));
    ddp_store_server_opts_t o = {.host = "127.0.0.1", .port = l->port};
    if (ddp_store_server_new(g_sys, &o, &l->srv) == 0 &&
        ddp_store_server_start_thread(l->srv) != 0) {
        ddp_store_server_free(l->srv);
        l->srv = NULL;
    }
    return NULL;
}

static void test_master_starts_late(void)
{
    late_t l = {.delay_ms = 200};
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(g_sys, &l.port), 0);
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, late_master, &l), 0);
    ddp_store_client_opts_t o = opts(l.port, 10000);
    o.host = "localhost"; /* resolved on every attempt */
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
    pthread_join(th, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l.srv); /* else the port was taken */
    if (!st)
        fprintf(stderr, "late master: %s\n", ddp_err_message());
    CU_ASSERT_PTR_NOT_NULL(st);
    CU_ASSERT(ddp_store_client_attempts(st) > 1);
    CU_ASSERT_EQUAL(ddp_store_ping(st, dl(3000)), 0);
    ddp_store_free(st);
    srv_end(l.srv);
}

/* Each connect-side fault point fails one attempt; the retry succeeds. */
static void test_connect_fault_points(void)
{
    static const struct {
        const char *name;
        int err;
    } pts[] = {
        {"store/client/connect", ECONNREFUSED},
        {"store/client/validate", ECONNRESET},
        {"sys/net/resolve", EHOSTUNREACH},
        {"sys/net/connect", ETIMEDOUT},
    };
    ddp_store_server_t *srv = srv_start();
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        fiu_enable(pts[i].name, 1, (void *)(intptr_t)pts[i].err, FIU_ONETIME);
        ddp_store_t *st = cl_open(srv_port(srv));
        fiu_disable(pts[i].name);
        CU_ASSERT_EQUAL(ddp_store_client_attempts(st), 2);
        if (ddp_store_client_attempts(st) != 2)
            fprintf(stderr, "fault %s: %d attempts\n", pts[i].name,
                    ddp_store_client_attempts(st));
        CU_ASSERT_EQUAL(ddp_store_ping(st, dl(3000)), 0);
        ddp_store_free(st);
    }
    srv_end(srv);
}

/* ----------------------------------------------------- lost connections */

static void test_op_fault_points(void)
{
    static const char *const pts[] = {"store/client/send",
                                      "store/client/recv"};
    ddp_store_server_t *srv = srv_start();
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%u", srv_port(srv));
    for (size_t i = 0; i < 2; i++) {
        ddp_store_t *st = cl_open(srv_port(srv));
        fiu_enable(pts[i], 1, NULL, FIU_ONETIME);
        int64_t v = 0;
        CU_ASSERT_EQUAL(ddp_store_add(st, "f", 1, &v, dl(3000)),
                        DDP_EPEER_LOST);
        fiu_disable(pts[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), where));
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "ADD"));
        /* The connection is closed now; later ops say so at once. */
        CU_ASSERT_EQUAL(ddp_store_ping(st, dl(3000)), DDP_EPEER_LOST);
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "gone"));
        ddp_store_free(st);
    }
    srv_end(srv);
}

typedef struct {
    ddp_store_server_t *srv;
    int ms;
} killer_t;

static void *kill_server(void *arg)
{
    killer_t *k = arg;
    ddp_sys_sleep_until(g_sys, dl(k->ms));
    srv_end(k->srv);
    return NULL;
}

/* The master dies while a WAIT is pending: the client learns at once (EOF),
 * not at its deadline. */
static void test_server_dies_during_wait(void)
{
    killer_t k = {srv_start(), 100};
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%u", srv_port(k.srv));
    ddp_store_t *st = cl_open(srv_port(k.srv));
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, kill_server, &k), 0);
    const char *key = "never/set";
    int rc = ddp_store_wait(st, &key, 1, dl(10000));
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(rc, DDP_EPEER_LOST);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), where));
    CU_ASSERT_EQUAL(ddp_store_set_str(st, "x", "y", dl(100)),
                    DDP_EPEER_LOST);
    ddp_store_free(st);
}

/* The server drops the connection instead of replying. */
static void test_server_drops_reply(void)
{
    ddp_store_server_t *srv = srv_start();
    ddp_store_t *st = cl_open(srv_port(srv));
    fiu_enable("store/server/reply", 1, NULL, FIU_ONETIME);
    int64_t n = 0;
    CU_ASSERT_EQUAL(ddp_store_num_keys(st, &n, dl(3000)), DDP_EPEER_LOST);
    fiu_disable("store/server/reply");
    ddp_store_free(st);
    srv_end(srv);
}

/* ------------------------------------------------------- fake servers */

typedef struct fake {
    int lfd;
    uint16_t port;
    int mode; /* 0: handshake then a bad CHECK reply; 1: close at once */
    atomic_int stop;
    pthread_t th;
} fake_t;

static void *fake_main(void *arg)
{
    fake_t *f = arg;
    while (!atomic_load(&f->stop)) {
        int c = ddp_sys_accept(g_sys, f->lfd, NULL, dl(20));
        if (c < 0)
            continue;
        if (f->mode == 0) {
            uint8_t hs[10]; /* VALIDATE u32 + PING u32 */
            if (ddp_sys_recv_all(g_sys, c, hs, 10, dl(3000)) == 0) {
                ddp_sys_send_all(g_sys, c, hs + 6, 4, dl(3000));
                uint8_t req[1 + 8 + 8 + 2]; /* CHECK ["/k"] */
                if (ddp_sys_recv_all(g_sys, c, req, sizeof req, dl(3000)) ==
                    0) {
                    uint8_t bad = 7;
                    ddp_sys_send_all(g_sys, c, &bad, 1, dl(3000));
                }
                uint8_t rest[64]; /* until the client hangs up */
                while (ddp_sys_recv(g_sys, c, rest, sizeof rest, dl(3000)) > 0)
                    ;
            }
        }
        ddp_sys_close(g_sys, c);
    }
    return NULL;
}

static void fake_start(fake_t *f, int mode)
{
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", 0, &a);
    f->lfd = ddp_sys_listen(g_sys, &a, 16);
    CU_ASSERT_FATAL(f->lfd >= 0);
    ddp_addr_t b;
    ddp_sys_local_addr(g_sys, f->lfd, &b);
    f->port = b.port;
    f->mode = mode;
    atomic_store(&f->stop, 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(fake_t *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->th, NULL);
    ddp_sys_close(g_sys, f->lfd);
}

static void test_bad_reply_is_protocol_error(void)
{
    fake_t f;
    fake_start(&f, 0);
    ddp_store_t *st = cl_open(f.port);
    const char *k = "k";
    CU_ASSERT_EQUAL(ddp_store_check(st, &k, 1, dl(3000)), DDP_EPROTOCOL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "CHECK"));
    CU_ASSERT_EQUAL(ddp_store_ping(st, dl(100)), DDP_EPEER_LOST);
    ddp_store_free(st);
    fake_stop(&f);
}

/* Something that accepts and hangs up (a crashing or foreign master): the
 * handshake fails every time, is retried, and fails at the deadline. */
static void test_server_hangs_up(void)
{
    fake_t f;
    fake_start(&f, 1);
    ddp_store_client_opts_t o = opts(f.port, 300);
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT(err == DDP_EPEER_LOST || err == -ECONNRESET ||
              err == -EPIPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "attempts"));
    ddp_store_free(st);
    fake_stop(&f);
}

/* ddpsim's token (the AUTH extension frame): the same token connects in
 * both generations; a wrong one, none, or one for a server without a
 * token fails with a hint that names the token. */
static void test_token(void)
{
    ddp_store_server_opts_t so = {.host = "127.0.0.1", .token = "s3cret"};
    ddp_store_server_t *srv = ddp_test_server_start(g_sys, &so);
    ddp_store_server_t *open = srv_start();
    for (int proto = DDP_STORE_PROTO_LEGACY; proto <= DDP_STORE_PROTO_CURRENT;
         proto++) {
        ddp_store_client_opts_t o = opts(srv_port(srv), 5000);
        o.token = "s3cret";
        o.protocol = (ddp_store_proto_t)proto;
        int err = 0;
        ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(st);
        CU_ASSERT_EQUAL(ddp_store_client_protocol(st), proto);
        CU_ASSERT_EQUAL(ddp_store_set_str(st, "tk", "v", dl(3000)), 0);
        ddp_buf_t b = {0};
        CU_ASSERT_EQUAL(ddp_store_get(st, "tk", &b, dl(3000)), 0);
        CU_ASSERT_EQUAL(b.len, 1);
        ddp_buf_free(&b);
        ddp_store_free(st);
    }
    struct {
        ddp_store_server_t *to;
        const char *token, *hint;
    } bad[] = {
        {srv, "wrong", "token"},
        {srv, NULL, "--token"}, /* refused before VALIDATE */
        {open, "s3cret", "token"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ddp_store_client_opts_t o = opts(srv_port(bad[i].to), 300);
        o.token = bad[i].token;
        int err = 0;
        ddp_store_t *st = ddp_store_client_connect(g_sys, &o, &err);
        CU_ASSERT_PTR_NULL(st);
        CU_ASSERT(err < 0);
        const char *m = ddp_err_message();
        if (!strstr(m, bad[i].hint))
            printf("\n  token case %zu: %s\n", i, m);
        CU_ASSERT_PTR_NOT_NULL(strstr(m, bad[i].hint));
        ddp_store_free(st);
    }
    ddp_store_server_stats_t s;
    ddp_store_server_stats(srv, &s);
    CU_ASSERT(s.denied >= 2);
    /* A token too long is a configuration error, at once. */
    char longtok[DDP_STORE_MAX_TOKEN + 2];
    memset(longtok, 't', sizeof longtok - 1);
    longtok[sizeof longtok - 1] = '\0';
    ddp_store_client_opts_t o = opts(srv_port(srv), 300);
    o.token = longtok;
    int err = 0;
    CU_ASSERT_PTR_NULL(ddp_store_client_connect(g_sys, &o, &err));
    CU_ASSERT_EQUAL(err, DDP_ECONFIG);
    srv_end(open);
    srv_end(srv);
}

/* A WAIT the server drops for its max_wait_keys: TCPStore has no error
 * reply, so the client's error names the limit beside a dead master, and
 * how many keys this WAIT named. */
static void test_wait_over_limit_named(void)
{
    ddp_store_server_opts_t o = {.host = "127.0.0.1", .max_wait_keys = 4};
    ddp_store_server_t *srv = ddp_test_server_start(g_sys, &o);
    ddp_store_t *st = cl_open(srv_port(srv));
    const char *keys[5] = {"/a", "/b", "/c", "/d", "/e"};
    CU_ASSERT_EQUAL(ddp_store_wait(st, keys, 5, dl(5000)), DDP_EPEER_LOST);
    const char *m = ddp_err_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "max_wait_keys"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "this WAIT named 5 keys"));
    ddp_store_free(st);
    srv_end(srv);
}

/* ---- the connect retries on a fake clock (issue 43: every retry loop
 * bounded by its deadline in a way a test observes) ---- */

#define FAKE_T0 (1000 * DDP_NS_PER_S)

/* A client over fc to 127.0.0.1:port, retrying for budget ns of fc's time
 * from 100 ms on; NULL (it failed) is what these tests expect. */
static ddp_store_t *connect_on(ddp_fake_clock_t *fc, uint16_t port, int64_t budget)
{
    ddp_store_client_opts_t o = {.host = "127.0.0.1", .port = port,
                                 .connect_deadline = fc->now + budget, .seed = 7,
                                 .backoff_initial_ns = 100 * DDP_NS_PER_MS};
    int err = 0;
    return ddp_store_client_connect(&fc->sys, &o, &err);
}

/* Refused attempts at a port nobody listens on: each is followed by one
 * backoff sleep, none past the deadline and the last cut to it, and the
 * client gives up there, at the deadline exactly (no attempt at it), the
 * error counting the attempts. An attempt that ends at the deadline is the
 * last (no sleep after it). A loop that sleeps past its deadline, sleeps
 * once it passed or tries again at it fails here. */
static void test_connect_retries_fake_clock(void)
{
    uint16_t port = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(g_sys, &port), 0);
    ddp_fake_clock_t fc;
    ddp_fake_clock_init(&fc, g_sys, FAKE_T0);
    int64_t budget = 5 * DDP_NS_PER_S;
    ddp_store_t *st = connect_on(&fc, port, budget);
    CU_ASSERT_PTR_NULL_FATAL(st);
    char want[48];
    snprintf(want, sizeof want, "(%d attempts;", fc.connects);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), want));
    CU_ASSERT_EQUAL(ddp_err_ctx()->waited_ns, budget);
    CU_ASSERT_EQUAL(fc.now, FAKE_T0 + budget);
    CU_ASSERT(fc.connects >= 4);
    CU_ASSERT_EQUAL(fc.connects, fc.sleeps);
    CU_ASSERT_EQUAL(fc.last_sleep, FAKE_T0 + budget);
    CU_ASSERT_EQUAL(fc.max_sleep, FAKE_T0 + budget);
    CU_ASSERT_EQUAL(fc.late_sleeps, 0);

    ddp_fake_clock_init(&fc, g_sys, FAKE_T0);
    fc.connect_cost = DDP_NS_PER_S;
    st = connect_on(&fc, port, DDP_NS_PER_S);
    CU_ASSERT_PTR_NULL_FATAL(st);
    CU_ASSERT_EQUAL(fc.connects, 1);
    CU_ASSERT_EQUAL(fc.sleeps, 0);
    CU_ASSERT_EQUAL(fc.now, FAKE_T0 + DDP_NS_PER_S);
}

DDP_SUITE("store_client", suite_init, suite_cleanup,
          {"connect_retries_fake_clock", test_connect_retries_fake_clock},
          {"conformance", test_conformance},
          {"a WAIT over the server's max_wait_keys names the limit", test_wait_over_limit_named},
          {"conformance_legacy", test_conformance_legacy},
          {"auto_finds_legacy_master", test_auto_finds_legacy_master},
          {"current_vs_legacy_master", test_current_vs_legacy_master},
          {"legacy_vs_current_master", test_legacy_vs_current_master},
          {"legacy_wait_timeout_hint", test_legacy_wait_timeout_hint},
          {"auto_reset_stays_current", test_auto_reset_stays_current},
          {"prefix_over_tcp", test_prefix_over_tcp},
          {"wait_timeout_cancel", test_wait_timeout_cancel},
          {"wait_cancel_race", test_wait_cancel_race},
          {"wire_keys", test_wire_keys},
          {"preset", test_preset},
          {"connect_refused", test_connect_refused},
          {"connect_bad_opts", test_connect_bad_opts},
          {"master_starts_late", test_master_starts_late},
          {"connect_fault_points", test_connect_fault_points},
          {"op_fault_points", test_op_fault_points},
          {"server_dies_during_wait", test_server_dies_during_wait},
          {"server_drops_reply", test_server_drops_reply},
          {"bad_reply_is_protocol_error", test_bad_reply_is_protocol_error},
          {"server_hangs_up", test_server_hangs_up},
          {"token", test_token},
          {"connect_check_key", test_connect_check_key})
