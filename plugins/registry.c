/* plugins/registry.c — plugins by name. "default" is all-NULL members: the
 * shared defaults. Users add their own with ddp_plugin_register. */
#include <stdio.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/plugin.h"
#include "plugins_priv.h"

static const ddp_plugin_t plugin_default = {.name = "default"};

#define MAX_PLUGINS 64
static const ddp_plugin_t *registry[MAX_PLUGINS] = {
    &plugin_default, &ddp__plugin_subgroups, &ddp__plugin_rpc};
static size_t nplugins = 3;

size_t ddp_plugin_count(void) { return nplugins; }
const ddp_plugin_t *ddp_plugin_at(size_t i)
{
    return i < nplugins ? registry[i] : NULL;
}
const ddp_plugin_t *ddp_plugin_find(const char *name)
{
    for (size_t i = 0; name && i < nplugins; i++)
        if (!strcmp(registry[i]->name, name))
            return registry[i];
    char names[256] = "";
    size_t off = 0;
    for (size_t i = 0; i < nplugins && off < sizeof names; i++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s",
                                i ? ", " : "", registry[i]->name);
    ddp_err_set(DDP_ENOT_FOUND, "unknown plugin \"%s\"; expected one of %s",
                name ? name : "", names);
    return NULL;
}

int ddp_plugin_register(const ddp_plugin_t *p)
{
    if (!p || !p->name || !*p->name)
        return ddp_err_set(DDP_ECONFIG, "a plugin needs a name");
    for (size_t i = 0; i < nplugins; i++)
        if (registry[i] == p)
            return 0;
        else if (!strcmp(registry[i]->name, p->name))
            return ddp_err_set(DDP_ECONFIG, "plugin \"%s\" is already registered",
                               p->name);
    if (nplugins == MAX_PLUGINS)
        return ddp_err_set(DDP_ELIMIT, "at most %d plugins", MAX_PLUGINS);
    registry[nplugins++] = p;
    return 0;
}
