/* core/store_priv.h — what the store implementations share, not public.
 *
 * The tcp client gets two raw-key entry points because PyTorch's TCPStore
 * ADDs to its own "init/" counter without the "/" it puts in front of every
 * user key; a PyTorch master only counts our ranks if we do the same. */
#ifndef DDP_STORE_PRIV_H
#define DDP_STORE_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "ddp/store.h"

/* "[a, b, c]" (at most a few keys, then "... (+N more)") into buf. */
char *ddp__store_fmt_keys(const char *const *keys, size_t n, char *buf,
                          size_t len);
/* Seconds between two sys times, for messages. */
double ddp__store_secs(int64_t from, int64_t to);

/* 1 when st is a tcp client (ddp_store_client_connect). */
int ddp__store_is_client(const ddp_store_t *st);
/* ADD on the key exactly as given (no "/" in front); tcp client only. */
int ddp__store_client_add_raw(ddp_store_t *st, const char *key, int64_t delta,
                              int64_t *out, int64_t deadline);
/* "host:port" of a tcp client ("" for other stores). */
const char *ddp__store_client_addr(const ddp_store_t *st);

#endif
