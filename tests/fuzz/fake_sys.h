/* tests/fuzz/fake_sys.h — a ddp_sys_t with no OS behind it, for driving the
 * store server from a fuzzer: one listener, up to FAKE_MAX_CONNS clients
 * whose bytes, hang-ups and read windows the harness scripts, and a clock
 * that moves only when the server waits. Everything is deterministic. */
#ifndef DDP_FUZZ_FAKE_SYS_H
#define DDP_FUZZ_FAKE_SYS_H

#include <stddef.h>
#include <stdint.h>

#include "ddp/sys.h"

#define FAKE_MAX_CONNS 8

typedef struct fake_conn {
    int used;          /* the client connected (accepted or not yet) */
    int accepted;      /* the server has it as fd FAKE_FD0 + index */
    int server_closed; /* the server closed its end */
    int eof;           /* the client shut down its sending side */
    int reset;         /* the client vanished: recv/send fail */
    uint8_t *in;       /* what the client sent */
    size_t in_len, in_off, in_cap;
    size_t window;     /* bytes the client will still read */
    size_t received;   /* bytes the server sent it */
    size_t recvs;      /* the server's reads that took bytes from it */
} fake_conn_t;

typedef struct fake_sys {
    ddp_sys_t sys; /* first: the server sees this */
    int64_t now;
    fake_conn_t conns[FAKE_MAX_CONNS];
    const char *file; /* what read_file gives for any path (NULL: -ENOENT) */
    size_t file_len;
} fake_sys_t;

#define FAKE_LISTEN_FD 3
#define FAKE_FD0 10

fake_sys_t *fake_sys_new(void);
void fake_sys_free(fake_sys_t *f);
/* A new client in the accept queue; its index, or -1 when all are used. */
int fake_connect(fake_sys_t *f);
void fake_send(fake_sys_t *f, int conn, const void *p, size_t n);

#endif
