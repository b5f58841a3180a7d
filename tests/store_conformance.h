/* tests/store_conformance.h — one table of store semantics, run against
 * every store implementation (memory, prefix, tcp client on our server), so
 * they cannot drift apart. */
#ifndef DDP_TEST_STORE_CONFORMANCE_H
#define DDP_TEST_STORE_CONFORMANCE_H

#include "ddp/store.h"

/* Runs every op on st. `other` is a second handle on the same data that a
 * helper thread may use while st blocks (the same store for thread-safe
 * ones, a second connection for tcp). `tag` keeps key names unique when
 * several runs share one server. */
void ddp_test_store_conformance(ddp_store_t *st, ddp_store_t *other,
                                const char *tag);

/* Sets key on st (a string value) after ms, from a helper thread. */
typedef struct ddp_test_later ddp_test_later_t;
ddp_test_later_t *ddp_test_set_later(ddp_store_t *st, const char *key,
                                     const char *val, int ms);
ddp_test_later_t *ddp_test_push_later(ddp_store_t *st, const char *key,
                                      const char *val, int ms);
/* Joins the helper; returns the rc of its store call. */
int ddp_test_later_join(ddp_test_later_t *l);

#endif
