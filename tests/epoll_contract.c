/* tests/epoll_contract.c — see epoll_contract.h. Every clause of the
 * contract in ddp/sys.h is one CHECK; the first that fails sets the error
 * context and the check returns. */
#include "epoll_contract.h"

#include <errno.h>
#include <string.h>

#include "ddp/err.h"

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            rc = ddp_err_set(DDP_EINTERNAL, __VA_ARGS__);                      \
            goto out;                                                          \
        }                                                                      \
    } while (0)

enum { NCONN = 5, LISTEN_DATA = 1000 };

typedef struct ctx {
    ddp_sys_t *sys;
    int ep, lfd;
    int cli[NCONN], srv[NCONN];
    ddp_epoll_event_t ev[8];
} ctx_t;

static int64_t in_ms(ctx_t *x, int64_t ms)
{
    return ddp_sys_deadline_in(x->sys, ms * DDP_NS_PER_MS);
}

/* A wait; the events land in x->ev. */
static int wait_for(ctx_t *x, int max, int64_t ms)
{
    return ddp_sys_epoll_wait(x->sys, x->ep, x->ev, max,
                              ms ? in_ms(x, ms) : 0);
}

/* The events reported for data d in the last wait of n (0: none). */
static short events_of(const ctx_t *x, int n, uint64_t d)
{
    for (int i = 0; i < n; i++)
        if (x->ev[i].data == d)
            return x->ev[i].events;
    return 0;
}

/* Connection i: client cli[i], accepted end srv[i]. */
static int open_pair(ctx_t *x, int i, uint16_t port)
{
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", port, &a);
    x->cli[i] = ddp_sys_connect(x->sys, &a, in_ms(x, 2000));
    if (x->cli[i] < 0)
        return x->cli[i];
    ddp_addr_t peer;
    x->srv[i] = ddp_sys_accept(x->sys, x->lfd, &peer, in_ms(x, 2000));
    return x->srv[i] < 0 ? x->srv[i] : 0;
}

/* A pending connection makes the listener readable; accepted, it is not. */
static int ph_listener(ctx_t *x, uint16_t port)
{
    int rc = 0, n;
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_ADD, x->lfd, DDP_POLLIN,
                            LISTEN_DATA) == 0,
          "ADD of the listener");
    CHECK(wait_for(x, 8, 0) == 0, "a wait with nothing ready reported "
                                   "something");
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", port, &a);
    x->cli[0] = ddp_sys_connect(x->sys, &a, in_ms(x, 2000));
    CHECK(x->cli[0] >= 0, "connect: %s", ddp_err_message());
    n = wait_for(x, 8, 2000);
    CHECK(n == 1 && (events_of(x, n, LISTEN_DATA) & DDP_POLLIN),
          "a pending connection: %d events, listener 0x%x", n,
          (unsigned)events_of(x, n, LISTEN_DATA));
    ddp_addr_t peer;
    x->srv[0] = ddp_sys_accept(x->sys, x->lfd, &peer, in_ms(x, 2000));
    CHECK(x->srv[0] >= 0, "accept: %s", ddp_err_message());
    CHECK(wait_for(x, 8, 0) == 0, "the listener is still reported after "
                                   "its only connection was accepted");
out:
    return rc;
}

/* ctl errors: ADD twice, MOD and DEL of a socket not in the set, a bad fd. */
static int ph_ctl_errors(ctx_t *x, int emulated)
{
    int rc = 0;
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_ADD, x->srv[0], DDP_POLLIN,
                            0) == 0,
          "ADD of a socket");
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_ADD, x->srv[0], DDP_POLLIN,
                            0) == -EEXIST,
          "a second ADD is not -EEXIST");
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_MOD, x->cli[0], DDP_POLLIN,
                            0) == -ENOENT,
          "MOD of a socket not in the set is not -ENOENT");
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_DEL, x->cli[0], 0, 0) ==
              -ENOENT,
          "DEL of a socket not in the set is not -ENOENT");
    if (!emulated)
        CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_ADD, 1 << 20, DDP_POLLIN,
                                0) == -EBADF,
              "ADD of a number that is no socket is not -EBADF");
out:
    return rc;
}

/* Level-triggered input: reported until read; MOD changes the interest
 * and the cookie, 0 means none. */
static int ph_level(ctx_t *x)
{
    int rc = 0, n;
    char buf[8];
    CHECK(ddp_sys_send_all(x->sys, x->cli[0], "ab", 2, in_ms(x, 2000)) == 0,
          "send");
    n = wait_for(x, 8, 2000);
    CHECK(n == 1 && x->ev[0].data == 0 && (x->ev[0].events & DDP_POLLIN),
          "input: %d events", n);
    n = wait_for(x, 8, 0);
    CHECK(n == 1 && (x->ev[0].events & DDP_POLLIN),
          "input not read is not reported again (level-triggered)");
    CHECK(ddp_sys_recv_all(x->sys, x->srv[0], buf, 2, in_ms(x, 2000)) == 0,
          "recv");
    CHECK(wait_for(x, 8, 0) == 0, "input already read is still reported");

    /* MOD changes the interest and the cookie; 0 means none. */
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_MOD, x->srv[0], DDP_POLLOUT,
                            7) == 0,
          "MOD to POLLOUT");
    n = wait_for(x, 8, 2000);
    CHECK(n == 1 && x->ev[0].data == 7 && (x->ev[0].events & DDP_POLLOUT) &&
              !(x->ev[0].events & DDP_POLLIN),
          "a writable socket with POLLOUT: %d events", n);
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_MOD, x->srv[0], 0, 7) == 0,
          "MOD to no interest");
    CHECK(ddp_sys_send_all(x->sys, x->cli[0], "c", 1, in_ms(x, 2000)) == 0,
          "send");
    CHECK(wait_for(x, 8, 200) == 0,
          "a socket registered with no interest reported input");
out:
    return rc;
}

/* More ready sockets than room: every one in turn (connections 1..NCONN-1
 * opened here). */
static int ph_many(ctx_t *x, uint16_t port)
{
    int rc = 0, n;
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_DEL, x->lfd, 0, 0) == 0,
          "DEL of the listener");
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_MOD, x->srv[0], DDP_POLLIN,
                            0) == 0,
          "MOD back to POLLIN");
    for (int i = 1; i < NCONN - 1; i++) {
        CHECK(open_pair(x, i, port) == 0, "connection %d: %s", i,
              ddp_err_message());
        CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_ADD, x->srv[i],
                                DDP_POLLIN, (uint64_t)i) == 0,
              "ADD of connection %d", i);
        CHECK(ddp_sys_send_all(x->sys, x->cli[i], "d", 1, in_ms(x, 2000)) == 0,
              "send");
    }
    /* Input that came before the ADD: the first wait after it reports it
     * (epoll_ctl looks at the socket's state, not only at what comes
     * later; a request that arrived before its connection was registered
     * would otherwise wait forever). */
    {
        int i = NCONN - 1;
        CHECK(open_pair(x, i, port) == 0, "connection %d: %s", i,
              ddp_err_message());
        CHECK(ddp_sys_send_all(x->sys, x->cli[i], "d", 1, in_ms(x, 2000)) == 0,
              "send");
        ddp_pollfd_t p = {.fd = x->srv[i], .events = DDP_POLLIN};
        CHECK(ddp_sys_poll(x->sys, &p, 1, in_ms(x, 2000)) == 1,
              "connection %d never became readable", i);
        CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_ADD, x->srv[i],
                                DDP_POLLIN, (uint64_t)i) == 0,
              "ADD of connection %d", i);
        n = wait_for(x, 8, 0);
        CHECK(events_of(x, n, (uint64_t)i) & DDP_POLLIN,
              "a socket added with input already waiting was not reported "
              "(%d events)", n);
    }
    /* Every byte there first (the simulator delivers only while tasks
     * wait, and these waits would not: ready sockets keep answering). */
    for (int i = 0; i < NCONN; i++) {
        ddp_pollfd_t p = {.fd = x->srv[i], .events = DDP_POLLIN};
        CHECK(ddp_sys_poll(x->sys, &p, 1, in_ms(x, 2000)) == 1,
              "connection %d never became readable", i);
    }
    unsigned seen = 0;
    for (int round = 0; round < 3 * NCONN && seen != (1u << NCONN) - 1;
         round++) {
        n = wait_for(x, 2, 2000);
        CHECK(n >= 1 && n <= 2, "a wait with max 2 returned %d", n);
        for (int i = 0; i < n; i++)
            seen |= 1u << x->ev[i].data;
    }
    CHECK(seen == (1u << NCONN) - 1,
          "with more ready sockets than room, waits reported only the set "
          "0x%x of 0x%x",
          seen, (1u << NCONN) - 1);
out:
    return rc;
}

/* DEL: no more events; the peer's close; a socket closed without DEL. */
static int ph_del_close(ctx_t *x, int emulated)
{
    int rc = 0, n;
    char buf[8];
    CHECK(ddp_sys_epoll_ctl(x->sys, x->ep, DDP_EPOLL_DEL, x->srv[1], 0, 0) == 0,
          "DEL");
    for (int round = 0; round < 2 * NCONN; round++) {
        n = wait_for(x, 8, 0);
        CHECK(!events_of(x, n, 1), "a socket taken out is reported");
    }

    /* The peer's close: input (EOF) is reported; recv says 0. */
    for (int i = 0; i < NCONN; i++)
        if (i != 1)
            CHECK(ddp_sys_recv_all(x->sys, x->srv[i], buf, 1, in_ms(x, 2000)) ==
                      0,
                  "recv on connection %d", i);
    CHECK(wait_for(x, 8, 0) == 0, "sockets read dry are still reported");
    ddp_sys_close(x->sys, x->cli[2]);
    x->cli[2] = -1;
    n = wait_for(x, 8, 2000);
    CHECK(n == 1 && (events_of(x, n, 2) & (DDP_POLLIN | DDP_POLLHUP)),
          "the peer's close: %d events, socket 0x%x", n,
          (unsigned)events_of(x, n, 2));
    CHECK(ddp_sys_recv(x->sys, x->srv[2], buf, 1, 0) == 0, "EOF after close");

    /* A socket closed without DEL leaves the set on its own. */
    if (!emulated) {
        ddp_sys_close(x->sys, x->srv[3]);
        x->srv[3] = -1;
        for (int round = 0; round < 2 * NCONN; round++) {
            n = wait_for(x, 8, 0);
            CHECK(!events_of(x, n, 3), "a closed socket is reported");
        }
    }
out:
    return rc;
}

int ddp_test_epoll_contract(ddp_sys_t *sys, int emulated)
{
    ctx_t x = {.sys = sys, .ep = -1, .lfd = -1};
    for (int i = 0; i < NCONN; i++)
        x.cli[i] = x.srv[i] = -1;
    int rc = 0;
    ddp_addr_t la, bound;
    ddp_addr_parse("0.0.0.0", 0, &la);
    x.lfd = ddp_sys_listen(sys, &la, 16);
    CHECK(x.lfd >= 0, "listen: %s", ddp_err_message());
    CHECK(ddp_sys_local_addr(sys, x.lfd, &bound) == 0, "local_addr");
    x.ep = ddp_sys_epoll_create(sys);
    CHECK(x.ep >= 0, "create returned %d", x.ep);
    if ((rc = ph_listener(&x, bound.port)) != 0 || (rc = ph_ctl_errors(&x, emulated)) != 0 ||
        (rc = ph_level(&x)) != 0 || (rc = ph_many(&x, bound.port)) != 0 ||
        (rc = ph_del_close(&x, emulated)) != 0)
        goto out;
    CHECK(ddp_sys_epoll_close(sys, x.ep) == 0, "close of the set");
    x.ep = -1;
out:
    if (x.ep >= 0)
        ddp_sys_epoll_close(sys, x.ep);
    for (int i = 0; i < NCONN; i++) {
        if (x.cli[i] >= 0)
            ddp_sys_close(sys, x.cli[i]);
        if (x.srv[i] >= 0)
            ddp_sys_close(sys, x.srv[i]);
    }
    if (x.lfd >= 0)
        ddp_sys_close(sys, x.lfd);
    return rc;
}
