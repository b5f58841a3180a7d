/* plugins/registry.c — plugins by name. "default" is all-NULL members: the
 * shared defaults. */
#include <string.h>

#include "ddp/err.h"
#include "ddp/plugin.h"
#include "plugins_priv.h"

static const ddp_plugin_t plugin_default = {.name = "default"};

static const ddp_plugin_t *const registry[] = {
    &plugin_default, &ddp__plugin_subgroups, &ddp__plugin_rpc};
#define NPLUGINS (sizeof registry / sizeof registry[0])

size_t ddp_plugin_count(void) { return NPLUGINS; }
const ddp_plugin_t *ddp_plugin_at(size_t i)
{
    return i < NPLUGINS ? registry[i] : NULL;
}
const ddp_plugin_t *ddp_plugin_find(const char *name)
{
    for (size_t i = 0; name && i < NPLUGINS; i++)
        if (!strcmp(registry[i]->name, name))
            return registry[i];
    ddp_err_set(DDP_ENOT_FOUND, "unknown plugin \"%s\"; expected one of "
                                "default, subgroups, rpc", name ? name : "");
    return NULL;
}
