/* tests/test_store_hostile.c — the store server under the hostile clients
 * of issue 15, over the fuzzers' fake sys (tests/fuzz/fake_sys.h: scripted
 * clients whose read windows the test sets, a clock that moves only when
 * the test or the server's wait moves it), so every case is deterministic:
 *  - MULTI_GET amplification: clients that never read ask for an 8 MiB
 *    value 31 times each;
 *  - stalled partial requests: clients send part of a large SET and stop;
 *  - WAIT entries on keys nobody sets, against max_keys and the budget;
 *  - a flood of broken clients: the warnings are rate limited.
 * Under each, the server's own count of what it holds stays within
 * max_memory plus the per-connection floors, a normal client's GET is still
 * answered, and the stalled ones are dropped after the idle timeout while
 * a silent connection is kept. (Real processes and RSS: the hostile-client
 * script of `make real-test`, tests/real/store-hostile-test.sh.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/log.h"
#include "ddp/store.h"
#include "fuzz/fake_sys.h"
#include "store_wire.h"
#include "test.h"

/* The floors a connection is served below whatever the budget says, plus
 * its own structures: what the budget may be passed by, per connection. */
#define PER_CONN_SLACK ((size_t)64 << 10)

typedef struct hx {
    fake_sys_t *f;
    ddp_store_server_t *srv;
} hx_t;

static int64_t s_ns(double s) { return (int64_t)(s * 1e9); }

/* A server over a new fake sys: that budget (0: the default) and max_keys
 * (0: the default), as many clients as the fake has, 5 s idle timeout. */
static void hx_start(hx_t *h, size_t max_memory, size_t max_keys)
{
    h->f = fake_sys_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(h->f);
    ddp_store_server_opts_t o = {.max_memory = max_memory,
                                 .max_keys = max_keys,
                                 .max_clients = FAKE_MAX_CONNS,
                                 .idle_timeout_ns = s_ns(5)};
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_new(&h->f->sys, &o, &h->srv), 0);
}

static void hx_end(hx_t *h)
{
    ddp_store_server_free(h->srv);
    fake_sys_free(h->f);
}

static ddp_store_server_stats_t hx_stats(hx_t *h)
{
    ddp_store_server_stats_t s;
    ddp_store_server_stats(h->srv, &s);
    return s;
}

/* n steps that do not wait (the clock stands still). */
static void hx_steps(hx_t *h, int n)
{
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL(ddp_store_server_step(h->srv, h->f->now), 0);
}

/* Lets `s` seconds pass, then a few steps. */
static void hx_wait(hx_t *h, double s)
{
    h->f->now += s_ns(s);
    hx_steps(h, 4);
}

static void hx_send(hx_t *h, int c, const msg_t *m)
{
    fake_send(h->f, c, m->b, m->n);
}

/* A client that VALIDATEd, reading everything (window: 1 GiB). */
static int hx_client(hx_t *h, size_t window)
{
    int c = fake_connect(h->f);
    CU_ASSERT_FATAL(c >= 0);
    h->f->conns[c].window = window;
    msg_t m = {.n = 0};
    m_u8(&m, DDP_STORE_OP_VALIDATE);
    m_u32(&m, DDP_STORE_MAGIC);
    hx_send(h, c, &m);
    return c;
}

/* SET key to n bytes of 'x', sent in pieces (a msg holds 64 KiB). */
static void hx_set_big(hx_t *h, int c, const char *key, size_t n, size_t sent)
{
    msg_t m = {.n = 0};
    m_u8(&m, DDP_STORE_OP_SET);
    m_str(&m, key);
    m_u64(&m, n);
    hx_send(h, c, &m);
    static uint8_t chunk[1 << 16];
    memset(chunk, 'x', sizeof chunk);
    for (size_t off = 0; off < sent; off += sizeof chunk)
        fake_send(h->f, c, chunk,
                  sent - off < sizeof chunk ? sent - off : sizeof chunk);
}

static void hx_key_req(hx_t *h, int c, int op, const char *key)
{
    msg_t m = {.n = 0};
    m_u8(&m, (uint8_t)op);
    m_str(&m, key);
    hx_send(h, c, &m);
}

/* A normal client's GET of a small key is answered: its reply (8 + vlen
 * bytes) arrives within a few steps. */
static int get_answered(hx_t *h, int c, const char *key, size_t vlen)
{
    size_t before = h->f->conns[c].received;
    hx_key_req(h, c, DDP_STORE_OP_GET, key);
    hx_steps(h, 16);
    return h->f->conns[c].received - before == 8 + vlen;
}

static void set_small(hx_t *h, int c, const char *key, const char *val)
{
    msg_t m = {.n = 0};
    m_u8(&m, DDP_STORE_OP_SET);
    m_str(&m, key);
    m_str(&m, val);
    hx_send(h, c, &m);
    hx_steps(h, 2);
}

/* Issue 15, case 1: one MULTI_GET naming an 8 MiB value 31 times, from
 * clients that never read, made the server hold 248 MiB each. Replies
 * reference the stored value: they cost no copy. */
static void test_multi_get_amplification(void)
{
    hx_t h;
    hx_start(&h, (size_t)64 << 20, 0);
    int normal = hx_client(&h, (size_t)1 << 30);
    hx_set_big(&h, normal, "/big", (size_t)8 << 20, (size_t)8 << 20);
    set_small(&h, normal, "/small", "v");
    hx_steps(&h, 32);
    CU_ASSERT_EQUAL_FATAL(hx_stats(&h).keys, 2);
    size_t base = hx_stats(&h).memory;
    for (int i = 0; i < 6; i++) {
        int c = hx_client(&h, 0); /* never reads */
        msg_t m = {.n = 0};
        m_u8(&m, DDP_STORE_OP_MULTI_GET);
        m_u64(&m, 31);
        for (int k = 0; k < 31; k++)
            m_str(&m, "/big");
        hx_send(&h, c, &m);
    }
    hx_steps(&h, 16);
    ddp_store_server_stats_t s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.clients, 7);
    /* 6 x 248 MiB of replies queued; held: a few KiB more than before. */
    CU_ASSERT(s.memory < base + ((size_t)1 << 20));
    CU_ASSERT(s.memory_peak <= ((size_t)64 << 20) + 8 * PER_CONN_SLACK);
    CU_ASSERT(get_answered(&h, normal, "/small", 1));
    CU_ASSERT(get_answered(&h, normal, "/big", (size_t)8 << 20));
    /* Overwriting the value while they hold it: the old one lives on,
     * counted, until they are dropped. */
    hx_set_big(&h, normal, "/big", (size_t)8 << 20, (size_t)8 << 20);
    hx_steps(&h, 32);
    CU_ASSERT(hx_stats(&h).memory >= base + ((size_t)8 << 20));
    /* No progress for the idle timeout: the six are dropped, the normal
     * client (nothing in flight) is kept, the pinned value is freed. */
    hx_wait(&h, 6);
    s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.idle_dropped, 6);
    CU_ASSERT_EQUAL(s.clients, 1);
    CU_ASSERT(s.memory < base + ((size_t)1 << 20));
    CU_ASSERT(get_answered(&h, normal, "/small", 1));
    hx_end(&h);
}

/* Issue 15, case 2: stalled partial requests held up to 64 MiB each, for
 * as long as they liked, and validated clients had no idle timeout. */
static void test_stalled_partial_requests(void)
{
    hx_t h;
    size_t budget = (size_t)4 << 20;
    hx_start(&h, budget, 0);
    int normal = hx_client(&h, (size_t)1 << 30);
    set_small(&h, normal, "/k", "value");
    int silent = fake_connect(h.f); /* torch's callback socket: no byte */
    hx_steps(&h, 2);
    int slow[5];
    for (int i = 0; i < 5; i++) {
        slow[i] = hx_client(&h, (size_t)1 << 30);
        /* 768 KiB of a 1 MiB value, then nothing: together more than
         * the budget, each alone not. */
        hx_set_big(&h, slow[i], "/stall", (size_t)1 << 20, (size_t)768 << 10);
    }
    hx_steps(&h, 32);
    ddp_store_server_stats_t s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.clients, 7);
    CU_ASSERT(s.deferred > 0); /* some were not read for want of memory */
    CU_ASSERT(s.memory_peak <= budget + 8 * PER_CONN_SLACK);
    CU_ASSERT(get_answered(&h, normal, "/k", 5));
    /* Within the idle timeout nobody is dropped ... */
    hx_wait(&h, 4);
    CU_ASSERT_EQUAL(hx_stats(&h).clients, 7);
    /* ... past it, the five stalled ones are (also those not read for want
     * of memory: they are stalled mid-request all the same), not the
     * silent one nor the normal client. */
    hx_wait(&h, 2);
    s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.idle_dropped, 5);
    CU_ASSERT_EQUAL(s.clients, 2);
    CU_ASSERT(!h.f->conns[silent].server_closed);
    CU_ASSERT(h.f->conns[slow[0]].server_closed);
    CU_ASSERT(get_answered(&h, normal, "/k", 5));
    /* Hours of silence cost nothing either. */
    hx_wait(&h, 7200);
    CU_ASSERT_EQUAL(hx_stats(&h).clients, 2);
    hx_end(&h);
}

/* Issue 34: every byte restarted the idle clock, so clients trickling one
 * byte a second held their connections forever, and at the connection
 * limit kept every normal client out. The clock runs from the start of a
 * request until it is complete: tricklers at the limit are dropped one
 * idle timeout after they began, the normal client is served meanwhile,
 * and their places go to new clients. */
static void test_trickling_clients_dropped(void)
{
    hx_t h;
    hx_start(&h, 0, 0);
    int normal = hx_client(&h, (size_t)1 << 30);
    set_small(&h, normal, "/k", "value");
    int tr[FAKE_MAX_CONNS - 1];
    for (int i = 0; i < FAKE_MAX_CONNS - 1; i++) {
        tr[i] = hx_client(&h, (size_t)1 << 30);
        CU_ASSERT_FATAL(tr[i] >= 0);
    }
    hx_steps(&h, 4);
    CU_ASSERT_EQUAL(hx_stats(&h).clients, FAKE_MAX_CONNS);
    CU_ASSERT_EQUAL(fake_connect(h.f), -1); /* every place is taken */
    /* A SET of a 64-byte key, one byte a second: 1 + 4 + 64 bytes (never
     * complete within the test) — 9 s of it, past the 5 s timeout. */
    msg_t m = {.n = 0};
    m_u8(&m, DDP_STORE_OP_SET);
    char key[65];
    memset(key, 'k', 64);
    key[64] = '\0';
    m_str(&m, key);
    for (size_t b = 0; b < 9; b++) {
        for (int i = 0; i < FAKE_MAX_CONNS - 1; i++)
            if (!h.f->conns[tr[i]].server_closed)
                fake_send(h.f, tr[i], m.b + b, 1);
        hx_wait(&h, 1);
        CU_ASSERT(get_answered(&h, normal, "/k", 5));
        ddp_store_server_stats_t s = hx_stats(&h);
        if (b < 4) /* within the timeout nobody goes */
            CU_ASSERT_EQUAL(s.clients, FAKE_MAX_CONNS);
    }
    ddp_store_server_stats_t s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.idle_dropped, FAKE_MAX_CONNS - 1);
    CU_ASSERT_EQUAL(s.clients, 1);
    for (int i = 0; i < FAKE_MAX_CONNS - 1; i++)
        CU_ASSERT(h.f->conns[tr[i]].server_closed);
    /* Their places serve new clients. */
    free(h.f->conns[tr[0]].in);
    h.f->conns[tr[0]] = (fake_conn_t){0};
    int late = hx_client(&h, (size_t)1 << 30);
    hx_steps(&h, 4);
    CU_ASSERT(get_answered(&h, late, "/k", 5));
    hx_end(&h);
}

/* Issue 34: a 32 MiB MULTI_SET into an empty store with a 64 MiB budget
 * was refused: its request buffer and the values it stores were both
 * counted, though the buffer goes when the request is done. */
static void test_large_write_counted_once(void)
{
    hx_t h;
    size_t budget = (size_t)64 << 20, vlen = (size_t)8 << 20;
    hx_start(&h, budget, 0);
    int c = hx_client(&h, (size_t)1 << 30);
    msg_t m = {.n = 0};
    m_u8(&m, DDP_STORE_OP_MULTI_SET);
    m_u64(&m, 4);
    hx_send(&h, c, &m);
    static uint8_t chunk[1 << 16];
    memset(chunk, 'x', sizeof chunk);
    for (int k = 0; k < 4; k++) {
        char key[8];
        snprintf(key, sizeof key, "/m%d", k);
        m.n = 0;
        m_str(&m, key);
        m_u64(&m, vlen);
        hx_send(&h, c, &m);
        for (size_t off = 0; off < vlen; off += sizeof chunk)
            fake_send(h.f, c, chunk, sizeof chunk);
        hx_steps(&h, 8);
    }
    hx_steps(&h, 64);
    ddp_store_server_stats_t s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.memory_refused, 0);
    CU_ASSERT_EQUAL(s.keys, 4);
    CU_ASSERT_EQUAL(s.clients, 1);
    CU_ASSERT(!h.f->conns[c].server_closed);
    CU_ASSERT(s.memory_peak <= budget + 2 * PER_CONN_SLACK);
    CU_ASSERT(s.memory <= budget);
    CU_ASSERT(get_answered(&h, c, "/m3", vlen));
    hx_end(&h);
}

/* WAIT on n keys "/w<tag>/<i>", nobody sets them. */
static void wait_many(hx_t *h, int c, int tag, int n, size_t klen)
{
    msg_t m = {.n = 0};
    m_u8(&m, DDP_STORE_OP_WAIT);
    m_u64(&m, (uint64_t)n);
    hx_send(h, c, &m);
    for (int i = 0; i < n; i++) {
        char key[256];
        snprintf(key, sizeof key, "/w%d/%0*d", tag, (int)klen, i);
        m.n = 0;
        m_str(&m, key);
        hx_send(h, c, &m);
    }
}

/* Issue 15, case 2: WAIT on missing keys made entries nobody counted
 * (100 clients x 10k keys: +225 MB). Issue 34: counted against max_keys,
 * they filled the key table (14 connections waiting on 131,072 keys made
 * the store refuse every new key). They count against the memory budget,
 * each connection may wait for max_wait_keys, and they go with their
 * connection. */
static void test_wait_entries_count(void)
{
    hx_t h;
    h.f = fake_sys_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(h.f);
    ddp_store_server_opts_t o = {.max_keys = 2500, .max_wait_keys = 1000,
                                 .max_clients = FAKE_MAX_CONNS,
                                 .idle_timeout_ns = s_ns(5)};
    CU_ASSERT_EQUAL_FATAL(ddp_store_server_new(&h.f->sys, &o, &h.srv), 0);
    size_t base = hx_stats(&h).memory;
    int c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = hx_client(&h, (size_t)1 << 30);
        wait_many(&h, c[i], i, 1000, 8);
        hx_steps(&h, 4);
    }
    ddp_store_server_stats_t s = hx_stats(&h);
    /* 4,000 awaited keys beside a 2,500-key table: all four wait. */
    CU_ASSERT_EQUAL(s.protocol_errors, 0);
    CU_ASSERT_EQUAL(s.clients, 4);
    CU_ASSERT(s.memory > base + 4000 * 64);
    /* ... and the table still takes every key it has room for. */
    int setter = hx_client(&h, (size_t)1 << 30);
    for (int i = 0; i < 2500; i++) {
        char key[32];
        snprintf(key, sizeof key, "/k%d", i);
        set_small(&h, setter, key, "v");
    }
    s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.keys, 2500);
    CU_ASSERT_EQUAL(s.clients, 5);
    /* A client over its share is dropped, the others wait on. */
    int greedy = hx_client(&h, (size_t)1 << 30);
    wait_many(&h, greedy, 9, 1001, 8);
    hx_steps(&h, 4);
    s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.protocol_errors, 1);
    CU_ASSERT(h.f->conns[greedy].server_closed);
    CU_ASSERT_EQUAL(s.clients, 5);
    for (int i = 0; i < 4; i++)
        h.f->conns[c[i]].eof = 1;
    h.f->conns[setter].eof = 1;
    hx_steps(&h, 4);
    CU_ASSERT_EQUAL(hx_stats(&h).clients, 0);
    hx_end(&h);

    /* The same against the memory budget: 10,000 awaited keys take more
     * than 1.5 MiB (a 200 KiB request), which a 1 MiB budget refuses. */
    hx_start(&h, (size_t)1 << 20, 0);
    int w = hx_client(&h, (size_t)1 << 30);
    wait_many(&h, w, 0, 10000, 8);
    hx_steps(&h, 64);
    s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.memory_refused, 1);
    CU_ASSERT_EQUAL(s.clients, 0);
    CU_ASSERT(s.memory_peak <= ((size_t)1 << 20) + 8 * PER_CONN_SLACK);
    hx_end(&h);
}

/* torch 1.13's server waits on any number of keys: a WAIT on 32,768 keys
 * nobody has set (more than the old 16,384 max_wait_keys) is served by a
 * server with the default limits, not dropped. */
static void test_wait_32k_keys_served(void)
{
    hx_t h;
    hx_start(&h, 0, 0);
    int c = hx_client(&h, (size_t)1 << 30);
    wait_many(&h, c, 1, 32768, 8);
    hx_steps(&h, 64);
    ddp_store_server_stats_t s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.protocol_errors, 0);
    CU_ASSERT_EQUAL(s.clients, 1);
    CU_ASSERT_FALSE(h.f->conns[c].server_closed);
    h.f->conns[c].eof = 1;
    hx_steps(&h, 4);
    CU_ASSERT_EQUAL(hx_stats(&h).clients, 0);
    hx_end(&h);
}

/* A legacy watcher that never reads pins every old value it is told of:
 * the memory it holds stops the writes (deferred, not refused) until the
 * idle timeout drops it; then they go on. */
static void test_watcher_not_reading(void)
{
    hx_t h;
    size_t budget = (size_t)2 << 20;
    hx_start(&h, budget, 0);
    int w = fake_connect(h.f); /* legacy: its first request is WATCH_KEY */
    hx_key_req(&h, w, DDP_STORE_LOP_WATCH_KEY, "/w");
    hx_steps(&h, 2);
    int setter = hx_client(&h, (size_t)1 << 30);
    for (int i = 0; i < 40; i++) {
        hx_set_big(&h, setter, "/w", (size_t)100 << 10, (size_t)100 << 10);
        hx_steps(&h, 2);
    }
    ddp_store_server_stats_t s = hx_stats(&h);
    CU_ASSERT(s.deferred > 0);
    CU_ASSERT_EQUAL(s.clients, 2);
    CU_ASSERT(s.memory_peak <= budget + 2 * PER_CONN_SLACK);
    hx_wait(&h, 6);
    hx_steps(&h, 64);
    s = hx_stats(&h);
    CU_ASSERT(h.f->conns[w].server_closed);
    CU_ASSERT_EQUAL(s.idle_dropped, 1);
    CU_ASSERT_EQUAL(s.clients, 1);
    CU_ASSERT(s.requests >= 40); /* every SET went through in the end */
    CU_ASSERT(s.memory < (size_t)1 << 20);
    hx_end(&h);
}

/* Two clients whose whole SETs are buffered and wait for memory held only
 * by each other: the first is dropped so that the second goes on (they
 * would wait for each other forever). A SET is counted once, its buffer
 * or its value (2 MiB fits a 3 MiB budget); one that cannot fit even so
 * is refused at once. */
static void test_waiting_requests_do_not_deadlock(void)
{
    hx_t h;
    hx_start(&h, (size_t)5 << 20, 0);
    int a = hx_client(&h, (size_t)1 << 30), b = hx_client(&h, (size_t)1 << 30);
    hx_set_big(&h, a, "/a", (size_t)1500 << 10, (size_t)1500 << 10);
    hx_set_big(&h, b, "/b", (size_t)1500 << 10, (size_t)1500 << 10);
    hx_steps(&h, 64);
    ddp_store_server_stats_t s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.keys, 1 + (s.memory_refused == 0));
    CU_ASSERT(s.memory_refused <= 1);
    CU_ASSERT(s.memory_peak <= ((size_t)5 << 20) + 2 * PER_CONN_SLACK);
    hx_end(&h);

    hx_start(&h, (size_t)3 << 20, 0);
    a = hx_client(&h, (size_t)1 << 30);
    hx_set_big(&h, a, "/a", (size_t)2 << 20, (size_t)2 << 20);
    hx_steps(&h, 64);
    s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.memory_refused, 0);
    CU_ASSERT_EQUAL(s.keys, 1);
    CU_ASSERT(!h.f->conns[a].server_closed);
    /* (held twice only while it is copied from the buffer) */
    CU_ASSERT(s.memory_peak <= ((size_t)5 << 20) + PER_CONN_SLACK);
    CU_ASSERT(s.memory <= ((size_t)3 << 20));
    b = hx_client(&h, (size_t)1 << 30);
    hx_set_big(&h, b, "/b", (size_t)4 << 20, (size_t)4 << 20);
    hx_steps(&h, 64);
    s = hx_stats(&h);
    CU_ASSERT_EQUAL(s.memory_refused, 1);
    CU_ASSERT_EQUAL(s.keys, 1);
    CU_ASSERT(h.f->conns[b].server_closed);
    hx_end(&h);
}

static int g_warns, g_dropping, g_summaries;

static void count_sink(void *arg, ddp_log_level_t level, const char *line)
{
    (void)arg;
    if (level != DDP_LOG_WARN)
        return;
    g_warns++;
    g_dropping += strstr(line, "dropping client") != NULL;
    g_summaries += strstr(line, "more like it") != NULL;
}

/* Issue 15, case 6: a warning per event floods the log. One per kind per
 * 10 s now, and the next one says how many were held back. */
static void test_warnings_rate_limited(void)
{
    ddp_log_set_level(DDP_LOG_WARN);
    ddp_log_set_sink(count_sink, NULL);
    g_warns = g_dropping = g_summaries = 0;
    hx_t h;
    hx_start(&h, 0, 0);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 7; i++) {
            int c = fake_connect(h.f);
            CU_ASSERT_FATAL(c >= 0);
            fake_send(h.f, c, "GET / HTTP/1.1\r\n\r\n", 18);
            hx_steps(&h, 2);
        }
        CU_ASSERT_EQUAL(hx_stats(&h).clients, 0);
        if (round == 0) {
            CU_ASSERT_EQUAL(g_dropping, 1);
            hx_wait(&h, 11);
            for (int i = 0; i < 8; i++) { /* slots for round 2 */
                free(h.f->conns[i].in);
                h.f->conns[i] = (fake_conn_t){0};
            }
        }
    }
    CU_ASSERT_EQUAL(hx_stats(&h).protocol_errors, 14);
    CU_ASSERT_EQUAL(g_dropping, 2);
    CU_ASSERT_EQUAL(g_summaries, 1);
    hx_end(&h);
    ddp_log_set_sink(NULL, NULL);
    ddp_log_set_level(DDP_LOG_ERROR);
}

static void add_req(hx_t *h, int c, const char *key, int64_t delta)
{
    msg_t m = {.n = 0};
    m_u8(&m, DDP_STORE_OP_ADD);
    m_str(&m, key);
    m_u64(&m, (uint64_t)delta);
    hx_send(h, c, &m);
}

/* A rendezvous client's requests are a few dozen bytes: its connection
 * must not hold a 4 KiB read buffer for them (a simulated world has one
 * connection per rank; 4 KiB each was a fifth of a rank's memory at
 * 16,384 ranks). What the server holds per such client, after its
 * requests are answered, stays under 2 KiB: its structures and small
 * buffers. */
static void test_idle_clients_stay_small(void)
{
    hx_t h;
    hx_start(&h, 0, 0);
    hx_steps(&h, 2);
    size_t base = hx_stats(&h).memory;
    int cs[FAKE_MAX_CONNS];
    for (int i = 0; i < FAKE_MAX_CONNS; i++) {
        cs[i] = hx_client(&h, (size_t)1 << 30);
        add_req(&h, cs[i], "/joined", 1);
    }
    hx_steps(&h, 16);
    for (int i = 0; i < FAKE_MAX_CONNS; i++)
        CU_ASSERT_EQUAL(h.f->conns[cs[i]].received, 8); /* the ADD's reply */
    size_t held = hx_stats(&h).memory - base;
    CU_ASSERT(held < FAKE_MAX_CONNS * (size_t)2048);
    hx_end(&h);
}

/* A client that pipelines is read in growing pieces (the first read's
 * room doubles after every read that filled it): 400 ADDs sent at once
 * (about 11 KiB) take a handful of reads, not one per 512 bytes, and are
 * all answered in order. */
static void test_pipelined_requests_read_in_large_pieces(void)
{
    hx_t h;
    hx_start(&h, 0, 0);
    int c = hx_client(&h, (size_t)1 << 30);
    hx_steps(&h, 4);
    size_t before = h.f->conns[c].recvs;
    msg_t m = {.n = 0};
    for (int i = 0; i < 400; i++) {
        m_u8(&m, DDP_STORE_OP_ADD);
        m_str(&m, "/counter");
        m_u64(&m, 1);
    }
    CU_ASSERT_FATAL(m.n > 8 * 1024);
    hx_send(&h, c, &m);
    hx_steps(&h, 16);
    CU_ASSERT_EQUAL(h.f->conns[c].received, 400 * 8);
    size_t reads = h.f->conns[c].recvs - before;
    CU_ASSERT(reads >= 1 && reads <= 6);
    hx_end(&h);
}

/* A client that pipelines GETs and reads none of the replies: once a
 * megabyte of replies waits for it (1 MiB, SRV_OUT_HIGH), the server stops asking to read its
 * requests (the interest drops to POLLOUT), so it sleeps until the client
 * reads instead of waking at once, over and over, for requests it will not
 * take; the client is slowed, not dropped, and gets every reply once it
 * reads. */
static void test_unread_replies_pause_reading(void)
{
    hx_t h;
    hx_start(&h, 0, 0);
    static char key[3001]; /* long keys: the requests outgrow one read pass */
    key[0] = '/';
    memset(key + 1, 'k', sizeof key - 2);
    int setter = hx_client(&h, (size_t)1 << 30);
    hx_set_big(&h, setter, key, 8192, 8192);
    hx_steps(&h, 4);
    int c = hx_client(&h, 0); /* reads nothing for now */
    enum { GETS = 600 };      /* 1.8 MB of requests, 4.9 MB of replies */
    for (int i = 0; i < GETS; i++)
        hx_key_req(&h, c, DDP_STORE_OP_GET, key);
    hx_steps(&h, 64);
    CU_ASSERT(h.f->conns[c].in_off < h.f->conns[c].in_len); /* some not read */
    int64_t t0 = h.f->now;
    CU_ASSERT_EQUAL(ddp_store_server_step(h.srv, t0 + s_ns(1)), 0);
    if (h.f->now != t0 + s_ns(1))
        printf("\n  the server woke at once (clock moved %lld ns of 1 s)\n",
               (long long)(h.f->now - t0));
    CU_ASSERT_EQUAL(h.f->now, t0 + s_ns(1)); /* it waited: nothing to do */
    h.f->conns[c].window = (size_t)1 << 30;
    hx_steps(&h, 256);
    CU_ASSERT_EQUAL(h.f->conns[c].received, (size_t)GETS * (8 + 8192));
    CU_ASSERT_FALSE(h.f->conns[c].server_closed);
    hx_end(&h);
}

/* The server warns about every client these tests drop on purpose (the
 * suite's POSIX sys is unused: the fake one serves). */
static struct ddp_sys *g_quiet_sys;
static int suite_init(void) { return ddp_test_suite_sys_init(&g_quiet_sys, 1); }
static int suite_cleanup(void)
{
    return ddp_test_suite_sys_cleanup(&g_quiet_sys);
}

DDP_SUITE("store_hostile", suite_init, suite_cleanup,
          {"MULTI_GET amplification costs references, not copies",
           test_multi_get_amplification},
          {"stalled partial requests: budget, deferral, idle timeout",
           test_stalled_partial_requests},
          {"trickling clients are dropped at the idle timeout",
           test_trickling_clients_dropped},
          {"a large write counts against the budget once",
           test_large_write_counted_once},
          {"WAIT entries count against max_keys and the budget",
           test_wait_entries_count},
          {"a WAIT on 32,768 missing keys is served, as by torch 1.13", test_wait_32k_keys_served},
          {"a watcher that never reads is bounded", test_watcher_not_reading},
          {"requests waiting for memory do not deadlock",
           test_waiting_requests_do_not_deadlock},
          {"warnings are rate limited", test_warnings_rate_limited},
          {"an answered rendezvous client holds no 4 KiB buffer",
           test_idle_clients_stay_small},
          {"a pipelining client is read in growing pieces",
           test_pipelined_requests_read_in_large_pieces},
          {"replies not read: the server stops reading, sleeps, serves all later",
           test_unread_replies_pause_reading})
