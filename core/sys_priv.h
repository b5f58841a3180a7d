/* core/sys_priv.h — what core/endpoint.c shares with core/sys.c. Not
 * installed, not public. */
#ifndef DDP_CORE_SYS_PRIV_H
#define DDP_CORE_SYS_PRIV_H

#include "ddp/sys.h"

/* "lo, eth0": each name of ifs once, or "none"; returns names (or the
 * literal "none"). */
const char *ddp__iface_names(const ddp_ifaddr_t *ifs, int n, char *names, size_t size);

#endif
