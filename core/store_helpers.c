/* core/store_helpers.c — the two store rendezvous steps PyTorch runs during
 * init, on any store (tcp, memory, prefix):
 *  - wait_for_workers: TCPStore(wait_for_workers=True). Every rank ADDs 1
 *    to "init/"; only rank 0 waits, polling the count every 10 ms as
 *    TCPStore's master does. On a tcp client the key goes out raw (no "/"),
 *    as TCPStore sends its own init key, so a PyTorch master counts us.
 *  - barrier: distributed_c10d._store_based_barrier. ADD 1 to
 *    "store_based_barrier_key:<group>"; the rank whose ADD returns the world
 *    size sets "<key>:last_worker"; everyone WAITs for that key.
 * Both cost O(1) round trips per rank (plus rank 0's polls), so 1,000 ranks
 * on one server take a few thousand requests. */
#include "ddp/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/log.h"
#include "store_priv.h"

#define INIT_KEY "init/"
#define BARRIER_PREFIX "store_based_barrier_key"
/* Rank 0's poll interval for the init count (TCPStore: 10 ms). */
#define WORKERS_POLL_NS (10 * DDP_NS_PER_MS)
/* How long the count may take to read back once a wait has timed out. */
#define REPORT_GRACE_NS DDP_NS_PER_S
/* The barrier logs progress this often (PyTorch: 10 s + 1 s per 1,000). */
#define BARRIER_LOG_NS (10 * DDP_NS_PER_S)

static int init_add(ddp_store_t *st, int64_t delta, int64_t *out,
                    int64_t deadline)
{
    if (ddp__store_is_client(st))
        return ddp__store_client_add_raw(st, INIT_KEY, delta, out, deadline);
    return ddp_store_add(st, INIT_KEY, delta, out, deadline);
}

/* More ranks counted in than the world holds: TCPStore's worker_count past
 * world_size. Two jobs on one MASTER_ADDR:MASTER_PORT (or one job whose
 * ranks disagree on WORLD_SIZE) share the store's counters; waiting on
 * would only time out (torch 1.13's store barrier: "worker_count=8"). */
static int too_many(ddp_store_t *st, const char *key, int64_t count, int world)
{
    ddp_err_set(DDP_ECONFIG, "worker_count %" PRId64 " for world_size %d on %s: another "
                             "job's ranks joined this store",
                count, world, key);
    ddp_err_hint("give each job its own MASTER_PORT (two jobs on one node both take "
                 "29500 by default), or make every rank agree on WORLD_SIZE");
    const char *addr = ddp__store_client_addr(st);
    if (addr[0])
        ddp_err_addr("%s", addr);
    return DDP_ECONFIG;
}

int ddp_store_worker_count(ddp_store_t *st, int64_t *out, int64_t deadline)
{
    return init_add(st, 0, out, deadline);
}

static int bad_args(const char *what, int rank, int world)
{
    return ddp_err_set(DDP_ECONFIG, "%s: rank %d / world size %d is not a "
                                    "valid rank assignment",
                       what, rank, world);
}

int ddp_store_wait_for_workers(ddp_store_t *st, int rank, int world,
                               int64_t deadline)
{
    if (!st || world < 1 || rank < 0 || rank >= world)
        return bad_args("wait_for_workers", rank, world);
    ddp_sys_t *sys = st->sys;
    int64_t start = ddp_sys_now(sys), joined = 0;
    int rc = init_add(st, 1, &joined, deadline);
    if (rc == 0 && joined > world)
        return too_many(st, INIT_KEY, joined, world);
    if (rc || rank != 0)
        return rc;
    for (;;) {
        if (joined > world)
            return too_many(st, INIT_KEY, joined, world);
        if (joined == world)
            return 0;
        int64_t now = ddp_sys_now(sys);
        if (now >= deadline)
            break;
        int64_t wake = deadline - now > WORKERS_POLL_NS
                           ? now + WORKERS_POLL_NS
                           : deadline;
        if ((rc = ddp_sys_sleep_until(sys, wake)) != 0)
            return rc;
        /* ADD 0 reads the count in one round trip (GET would need WAIT +
         * GET and a parse). */
        if ((rc = init_add(st, 0, &joined, deadline)) != 0) {
            if (rc != DDP_ETIMEOUT)
                return rc;
            break; /* the deadline fell inside the poll: report the count */
        }
    }
    int64_t now = ddp_sys_now(sys);
    ddp_err_set(DDP_ETIMEOUT, "Timed out after %.1f seconds waiting for "
                              "clients. %" PRId64 "/%d clients joined.",
                ddp__store_secs(start, now), joined, world);
    /* Rank 0 runs on the master's host: its somaxconn is the server's. */
    int backlog = ddp_sys_somaxconn(sys);
    if (backlog > 0 && world - joined > 0 && world > backlog)
        ddp_err_hint("%" PRId64 " rank(s) never connected to the store: the "
                     "world (%d) is larger than this host's listen backlog "
                     "(net.core.somaxconn = %d), so a burst of connects past "
                     "it has its SYNs dropped and retransmitted after 1, 3, "
                     "7, 15 ... s; raise somaxconn above the world size or "
                     "the timeout",
                     (int64_t)world - joined, world, backlog);
    else
        ddp_err_hint("%" PRId64 " rank(s) never connected to the store: check "
                     "that every rank was started, uses the same "
                     "MASTER_ADDR/MASTER_PORT and WORLD_SIZE, and that its host "
                     "reaches this one on that port (no firewall or security "
                     "group dropping it)",
                     (int64_t)world - joined);
    ddp_err_waited(now - start);
    const char *addr = ddp__store_client_addr(st);
    if (addr[0])
        ddp_err_addr("%s", addr);
    return DDP_ETIMEOUT;
}

int ddp_store_barrier(ddp_store_t *st, const char *group, int world,
                      int64_t deadline)
{
    if (!st || !group || world < 1)
        return ddp_err_set(DDP_ECONFIG, "store barrier needs a store, a "
                                        "group name and world size >= 1 "
                                        "(got %d)",
                           world);
    ddp_sys_t *sys = st->sys;
    size_t gl = strlen(group);
    /* One allocation: "<prefix>:<group>:last_worker"; key ends at the
     * second ':' (cut with a NUL into a copy). */
    size_t kl = sizeof BARRIER_PREFIX + gl; /* with ':' */
    char *key = malloc(2 * kl + 1 + sizeof ":last_worker");
    if (!key)
        return ddp_err_set(-ENOMEM, "store barrier: out of memory");
    ddp_fmt(key, kl + 1, BARRIER_PREFIX ":%s", group);
    char *last = key + kl + 1;
    memcpy(last, key, kl);
    memcpy(last + kl, ":last_worker", sizeof ":last_worker");

    int64_t start = ddp_sys_now(sys), joined = 0;
    int rc = ddp_store_add(st, key, 1, &joined, deadline);
    /* Exactly one rank sees the world size: it releases everyone. */
    if (rc == 0 && joined == world)
        rc = ddp_store_set(st, last, "1", 1, deadline);
    if (rc == 0 && joined > world) {
        rc = too_many(st, key, joined, world);
        free(key);
        return rc;
    }
    const char *const lk[1] = {last};
    int64_t slice = BARRIER_LOG_NS + (int64_t)world * DDP_NS_PER_MS;
    while (rc == 0) {
        int64_t now = ddp_sys_now(sys);
        int64_t until = deadline - now > slice ? now + slice : deadline;
        rc = ddp_store_wait(st, lk, 1, until);
        /* A slice's wait times out at its end. One that gave up before
         * half of it did not wait (store/client/wait, a broken store): a
         * failure the next slice would repeat, as a spin of ADD round
         * trips and progress lines until the deadline. */
        int64_t after = ddp_sys_now(sys);
        if (rc != DDP_ETIMEOUT || after >= deadline || after - now < (until - now) / 2)
            break;
        int64_t n = -1;
        ddp_store_add(st, key, 0, &n,
                      ddp_sys_deadline_in(sys, REPORT_GRACE_NS));
        ddp_info("store barrier %s: %" PRId64 "/%d ranks joined after %.0f s",
                 key, n, world, ddp__store_secs(start, ddp_sys_now(sys)));
        rc = 0;
    }
    if (rc == DDP_ETIMEOUT) {
        /* Read who made it, for the message (the wait is cancelled, so
         * the connection is still in step). */
        int64_t n = -1;
        ddp_store_add(st, key, 0, &n,
                      ddp_sys_deadline_in(sys, REPORT_GRACE_NS));
        int64_t now = ddp_sys_now(sys);
        char joined_s[24] = "unknown";
        if (n >= 0)
            ddp_fmt(joined_s, sizeof joined_s, "%" PRId64, n);
        ddp_err_set(DDP_ETIMEOUT, "Timed out after %.1f s in the store-based "
                                  "barrier for key %s (world_size=%d, "
                                  "num_workers_joined=%s)",
                    ddp__store_secs(start, now), key, world, joined_s);
        ddp_err_hint("a rank never reached the barrier: check that every "
                     "rank started and agrees on WORLD_SIZE");
        ddp_err_waited(now - start);
        const char *addr = ddp__store_client_addr(st);
        if (addr[0])
            ddp_err_addr("%s", addr);
    }
    free(key);
    return rc;
}
