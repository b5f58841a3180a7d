/* core/store_priv.h — what the store implementations share, not public.
 *
 * The tcp client gets two raw-key entry points because PyTorch's TCPStore
 * ADDs to its own "init/" counter without the "/" it puts in front of every
 * user key; a PyTorch master only counts our ranks if we do the same. */
#ifndef DDP_STORE_PRIV_H
#define DDP_STORE_PRIV_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "ddp/store.h"

/* The legacy ops that exist in the current table too (all but WATCH_KEY),
 * as (name, legacy opcode): kept next to DDP_STORE_LEGACY_OPCODES. */
#define DDP__STORE_SHARED_OPS(X)                                               \
    X(SET, DDP_STORE_LOP_SET)                                                  \
    X(COMPARE_SET, DDP_STORE_LOP_COMPARE_SET)                                  \
    X(GET, DDP_STORE_LOP_GET)                                                  \
    X(ADD, DDP_STORE_LOP_ADD)                                                  \
    X(CHECK, DDP_STORE_LOP_CHECK)                                              \
    X(WAIT, DDP_STORE_LOP_WAIT)                                                \
    X(GETNUMKEYS, DDP_STORE_LOP_GETNUMKEYS)                                    \
    X(DELETE_KEY, DDP_STORE_LOP_DELETE_KEY)

/* "[a, b, c]" (at most a few keys, then "... (+N more)") into buf. */
char *ddp__store_fmt_keys(const char *const *keys, size_t n, char *buf,
                          size_t len);
/* The keys a timed-out wait still misses, formatted as ddp__store_fmt_keys
 * does, with " (K of the N waited on)" when some were set: is_set(arg, key)
 * is 1 set, 0 not, < 0 could not tell. Every key, as waited on, when there
 * is one, when is_set fails, or when it finds none missing (the wait ended
 * for another reason: a queue that stayed empty). */
char *ddp__store_fmt_missing(const char *const *keys, size_t n,
                             int (*is_set)(void *arg, const char *key), void *arg,
                             char *buf, size_t len);
/* The smallest memory budget a size may name (a smaller one serves
 * nothing useful). */
#define DDP__STORE_MIN_MEMORY ((size_t)1 << 20)
/* A memory budget as written: decimal bytes with an optional K, M or G
 * (binary) suffix, at least DDP__STORE_MIN_MEMORY ("512M"). 0, or -1 (out
 * untouched). `store serve --max-memory` and the scenario's store_memory. */
int ddp__store_parse_memory(const char *text, size_t *out);
/* Seconds between two sys times, for messages. */
double ddp__store_secs(int64_t from, int64_t to);

/* 1 when an accept failed for want of descriptors or memory: the
 * connection waits in the backlog, and the listener should rest a while
 * (the server's, and a relay's: tools/store_relay.c) instead of spinning on it. */
static inline int ddp__store_accept_exhausted(int rc)
{
    return rc == -EMFILE || rc == -ENFILE || rc == -ENOBUFS || rc == -ENOMEM;
}

/* 1 when st is a tcp client (ddp_store_client_connect). */
int ddp__store_is_client(const ddp_store_t *st);
/* ADD on the key exactly as given (no "/" in front); tcp client only. */
int ddp__store_client_add_raw(ddp_store_t *st, const char *key, int64_t delta,
                              int64_t *out, int64_t deadline);
/* The legacy opcode of a current op (-1 if the legacy table has none) and
 * back (-1 for WATCH_KEY and unknown codes): one table, in store.h. */
static inline int ddp__store_op_to_legacy(int op)
{
    switch (op) {
#define DDP__STORE_TO_L(name, v)                                               \
    case DDP_STORE_OP_##name:                                                  \
        return v;
        DDP__STORE_SHARED_OPS(DDP__STORE_TO_L)
#undef DDP__STORE_TO_L
    default:
        return -1;
    }
}
static inline int ddp__store_op_from_legacy(int lop)
{
    switch (lop) {
#define DDP__STORE_FROM_L(name, v)                                             \
    case v:                                                                    \
        return DDP_STORE_OP_##name;
        DDP__STORE_SHARED_OPS(DDP__STORE_FROM_L)
#undef DDP__STORE_FROM_L
    default:
        return -1;
    }
}

/* The server's peer allowlist (store_acl.c): CIDR rules; empty = all. */
typedef struct ddp__store_cidr {
    int family; /* 4 or 6, as ddp_addr_t */
    int bits;   /* prefix length */
    uint8_t ip[16];
} ddp__store_cidr_t;
typedef struct ddp__store_acl {
    ddp__store_cidr_t *rules;
    size_t n;
} ddp__store_acl_t;
/* "CIDR[,CIDR...]" (NULL or "" = everyone): 0, or DDP_ECONFIG with an
 * error naming the bad entry. */
int ddp__store_acl_parse(const char *text, ddp__store_acl_t *out);
/* 1 when a peer at a may connect. */
int ddp__store_acl_allows(const ddp__store_acl_t *acl, const ddp_addr_t *a);
void ddp__store_acl_free(ddp__store_acl_t *acl);
/* 1 when the token sent (a) is the expected one (b), in time that does not
 * depend on where they differ. */
int ddp__store_token_eq(const uint8_t *a, size_t an, const uint8_t *b,
                        size_t bn);

/* "host:port" of a tcp client ("" for other stores). */
const char *ddp__store_client_addr(const ddp_store_t *st);

#endif
