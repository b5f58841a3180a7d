/* tests/test_newest_idle.c — the store server's idle timeout against a
 * reader mid-transfer (core/store_server.c, `ddpsim store serve
 * --idle-timeout`), in the simulator: a 2 MiB reply to a GET (legacy
 * table, no handshake) through a 256 KiB receive window, idle timeout 3 s.
 *
 *  - a slow reader that takes 128 KiB a second keeps the reply moving:
 *    16 s, five idle timeouts, and it gets every byte;
 *  - a trickling reader, 1 KiB a second, moves less than the server's
 *    progress unit (64 KiB) in an idle timeout: dropped mid-reply;
 *  - a reader that stops reading halfway is dropped.
 * The idle clock starts over on progress, and only on progress: a reader
 * that makes none cannot hold the server's buffers forever, one that
 * makes enough is never cut. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/sim.h"
#include "ddp/store.h"
#include "test.h"

#define S DDP_NS_PER_S
#define BIG ((size_t)2 << 20)
#define IDLE (3 * S)

typedef struct idle_run {
    size_t per_second; /* bytes the reader takes a second (0: stops at half) */
    int64_t got;       /* value bytes read */
    int rc;            /* the reader's last recv result */
    uint64_t idle_dropped;
    atomic_int done;
} idle_run_t;

static int big_server(ddp_sys_t *sys, void *arg)
{
    idle_run_t *r = arg;
    ddp_store_server_opts_t o = {.port = 29400, .idle_timeout_ns = IDLE};
    ddp_store_server_t *srv;
    if (ddp_store_server_new(sys, &o, &srv))
        return 1;
    uint8_t *v = malloc(BIG);
    memset(v, 'b', BIG);
    int rc = ddp_store_server_preset(srv, "big", v, BIG);
    free(v);
    int64_t end = ddp_sys_deadline_in(sys, 60 * S);
    while (rc == 0 && !atomic_load(&r->done) && ddp_sys_now(sys) < end)
        ddp_store_server_run(srv, ddp_sys_deadline_in(sys, S / 10));
    ddp_store_server_stats_t st;
    ddp_store_server_stats(srv, &st);
    r->idle_dropped = st.idle_dropped;
    ddp_store_server_free(srv);
    return rc;
}

/* Reads n bytes or fewer (to the end), per_second of them a second. */
static int64_t read_slowly(ddp_sys_t *sys, int fd, idle_run_t *r, size_t n, int64_t dl)
{
    static uint8_t buf[256 << 10];
    size_t step = r->per_second ? r->per_second : sizeof buf;
    int64_t got = 0;
    while ((size_t)got < n) {
        size_t want = n - (size_t)got < step ? n - (size_t)got : step;
        r->rc = ddp_sys_recv_all(sys, fd, buf, want, dl);
        if (r->rc)
            break;
        got += (int64_t)want;
        if (r->per_second)
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, S));
    }
    return got;
}

static int reader(ddp_sys_t *sys, void *arg)
{
    idle_run_t *r = arg;
    int64_t dl = ddp_sys_deadline_in(sys, 50 * S);
    int fd = ddp_sys_connect_host(sys, "node0", 29400, dl);
    uint8_t get[1 + 8 + 4] = {DDP_STORE_LOP_GET};
    uint64_t klen = 4, len = 0;
    memcpy(get + 1, &klen, 8);
    memcpy(get + 9, "/big", 4);
    r->rc = fd < 0 ? fd : ddp_sys_send_all(sys, fd, get, sizeof get, dl);
    if (r->rc == 0)
        r->rc = ddp_sys_recv_all(sys, fd, &len, sizeof len, dl);
    if (r->rc == 0 && len == BIG) {
        r->got = read_slowly(sys, fd, r, r->per_second ? BIG : BIG / 2, dl);
        if (!r->per_second) { /* stopped: 10 s later, the rest */
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 10 * S));
            r->per_second = 64 << 10;
            r->got += read_slowly(sys, fd, r, BIG / 2, dl);
        }
    }
    if (fd >= 0)
        ddp_sys_close(sys, fd);
    atomic_store(&r->done, 1);
    return 0;
}

static void run(idle_run_t *r)
{
    ddp_sim_opts_t so = {.seed = 6};
    ddp_sim_t *sim = ddp_sim_new(&so);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    ddp_sim_add_node(sim, "node1", "10.0.0.2", 0);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "store", .rank = -1},
                     big_server, r);
    ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 1, .name = "reader", .rank = -1,
                                                 .start_ns = DDP_NS_PER_MS},
                     reader, r);
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    ddp_sim_free(sim);
}

static void test_slow_reader_served(void)
{
    idle_run_t r = {.per_second = 128 << 10};
    run(&r);
    int ok = r.rc == 0 && r.got == (int64_t)BIG && r.idle_dropped == 0;
    if (!ok)
        printf("\n  reading 128 KiB/s: %lld of %zu bytes, last %s, %llu idle drops\n",
               (long long)r.got, BIG, ddp_err_name(r.rc), (unsigned long long)r.idle_dropped);
    CU_ASSERT_TRUE(ok);
}

static void test_trickle_and_stop_dropped(void)
{
    static const size_t rates[] = {1 << 10, 0};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
        idle_run_t r = {.per_second = rates[i]};
        run(&r);
        int ok = r.rc != 0 && r.got < (int64_t)BIG && r.idle_dropped == 1;
        if (!ok)
            printf("\n  reading %zu B/s%s: %lld of %zu bytes, last %s, %llu idle drops\n",
                   rates[i], rates[i] ? "" : " (stopped at half)", (long long)r.got, BIG,
                   ddp_err_name(r.rc), (unsigned long long)r.idle_dropped);
        CU_ASSERT_TRUE(ok);
    }
}

DDP_SUITE("newest_idle", NULL, NULL,
          {"a slow reader mid-reply is progress: served whole", test_slow_reader_served},
          {"a trickling or stopped reader is dropped at the idle timeout",
           test_trickle_and_stop_dropped})
