/* plugins/plugins_priv.h — the shipped plugins (registry). */
#ifndef DDP_PLUGINS_PRIV_H
#define DDP_PLUGINS_PRIV_H
#include "ddp/plugin.h"
extern const ddp_plugin_t ddp__plugin_subgroups;
extern const ddp_plugin_t ddp__plugin_rpc;
/* Joins a server thread told to stop (ddp_plugin.c): 10 s, twice.
 * DDP_ETIMEOUT: it still runs, its server must not be freed; else 0. */
int ddp__join_stopped(ddp_sys_t *sys, ddp_thread_t th);

#endif
