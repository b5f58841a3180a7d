/* plugins/plugins_priv.h — the shipped plugins (registry). */
#ifndef DDP_PLUGINS_PRIV_H
#define DDP_PLUGINS_PRIV_H
#include "ddp/plugin.h"
extern const ddp_plugin_t ddp__plugin_subgroups;
extern const ddp_plugin_t ddp__plugin_rpc;
#endif
