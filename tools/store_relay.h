/* tools/store_relay.h — relay processes for `ddpsim store serve --relays
 * K` (tools/store_relay.c): the command hands them to the store server
 * through its sys hook (ddp_store_server_opts_t.sys_hook); the library's
 * core forks none. */
#ifndef DDP_TOOLS_STORE_RELAY_H
#define DDP_TOOLS_STORE_RELAY_H

#include "ddp/sys.h"

/* Relay processes a server may have: 1 to this many. */
#define DDP_STORE_MAX_RELAYS 64

/* The store server's sys hook for relay processes: arg points to an int,
 * their number (1 to DDP_STORE_MAX_RELAYS; else DDP_ECONFIG saying so).
 * *out is a sys whose listener and client sockets live in that many
 * processes forked at its listen, each sharing the real listener and
 * relaying its clients' bytes over a loopback link; the rest of its calls
 * go to base. ddp_sys_free (the server's, at its end) stops the relays. */
int ddp_store_relays_hook(ddp_sys_t *base, void *arg, ddp_sys_t **out);

/* Relay i's process id in a sys the hook made; -1 when there is none, or
 * relay is another sys (tests). */
long ddp_store_relay_pid(ddp_sys_t *relay, int i);

#endif
