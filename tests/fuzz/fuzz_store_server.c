/* tests/fuzz/fuzz_store_server.c — libFuzzer harness for the store server's
 * request handling (core/store_server.c) through its public API over a
 * fake sys (fake_sys.c): the input is a script of client actions, so that
 * requests arrive split and pipelined over several connections, clients
 * hang up or vanish mid-request, read slowly, or never VALIDATE in time.
 *
 * Script: one opcode byte, then its arguments; C = a byte naming a client.
 *   op & 7 == 0  connect a client (at most 8; max_clients is 6)
 *             1  C LEN BYTES: client C sends LEN bytes (LEN * 16 if op & 0x80)
 *             2  C: client C sends VALIDATE with the right magic
 *             3  C: client C shuts down its sending side (EOF)
 *             4  C: client C vanishes (recv/send fail with ECONNRESET)
 *             5  C N: client C will read (N + 1) * 64 more bytes
 *             6  N: N * 250 ms pass (the validate timeout is 5 s)
 *             7  N: the server runs N % 8 + 1 steps
 * After every op the server runs one step; at the end every client reads
 * everything and the server runs until idle, then it is freed (LSan: no
 * leak). A step returning an error or more clients than max_clients is a
 * bug (abort). Wire format: docs/store-protocol.md. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/log.h"
#include "ddp/store.h"
#include "fake_sys.h"
#include "fuzz.h"

static int step(ddp_store_server_t *srv, fake_sys_t *f)
{
    if (ddp_store_server_step(srv, f->now) < 0)
        return 1;
    ddp_store_server_stats_t st;
    ddp_store_server_stats(srv, &st);
    return st.clients > 6;
}

static int fuzz_store_server_one(const uint8_t *d, size_t n)
{
    ddp_log_set_level(DDP_LOG_OFF);
    fake_sys_t *f = fake_sys_new();
    if (!f)
        return 0;
    ddp_store_server_opts_t o = {.max_clients = 6, .max_keys = 64, .max_key_len = 64,
                                 .max_value_len = 1024,
                                 .validate_timeout_ns = 5 * DDP_NS_PER_S};
    ddp_store_server_t *srv = NULL;
    if (ddp_store_server_new(&f->sys, &o, &srv) != 0) {
        fake_sys_free(f);
        return 1;
    }
    int bad = 0;
    size_t i = 0;
#define ARG() (i < n ? d[i++] : 0)
    while (i < n && !bad) {
        uint8_t op = d[i++];
        int c = 0;
        switch (op & 7) {
        case 0:
            fake_connect(f);
            break;
        case 1: {
            c = ARG() % FAKE_MAX_CONNS;
            size_t len = ARG();
            if (op & 0x80)
                len *= 16;
            if (len > n - i)
                len = n - i;
            if (f->conns[c].used)
                fake_send(f, c, d + i, len);
            i += len;
            break;
        }
        case 2: {
            c = ARG() % FAKE_MAX_CONNS;
            uint8_t v[5] = {DDP_STORE_OP_VALIDATE};
            uint32_t magic = DDP_STORE_MAGIC;
            memcpy(v + 1, &magic, 4);
            if (f->conns[c].used)
                fake_send(f, c, v, sizeof v);
            break;
        }
        case 3:
            f->conns[ARG() % FAKE_MAX_CONNS].eof = 1;
            break;
        case 4:
            f->conns[ARG() % FAKE_MAX_CONNS].reset = 1;
            break;
        case 5:
            c = ARG() % FAKE_MAX_CONNS;
            f->conns[c].window += ((size_t)ARG() + 1) * 64;
            break;
        case 6:
            f->now += (int64_t)ARG() * 250 * DDP_NS_PER_MS;
            break;
        default:
            for (int k = ARG() % 8; k >= 0 && !bad; k--)
                bad = step(srv, f);
        }
        bad = bad || step(srv, f);
    }
#undef ARG
    for (int round = 0; round < 16 && !bad; round++) {
        for (int k = 0; k < FAKE_MAX_CONNS; k++)
            f->conns[k].window = (size_t)1 << 30;
        bad = step(srv, f);
    }
    ddp_store_server_free(srv);
    fake_sys_free(f);
    return bad;
}

DDP_FUZZ_ENTRY(fuzz_store_server_one)
