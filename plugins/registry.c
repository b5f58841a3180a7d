/* plugins/registry.c — plugins by name. "default" is all-NULL members: the
 * shared defaults. Users add their own with ddp_plugin_register, or load
 * them from a shared library (ddp_plugin_load: its versioned descriptor,
 * read through the sys seam's lib_* ops). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/plugin.h"
#include "plugins_priv.h"

static const ddp_plugin_t plugin_default = {.name = "default"};

#define MAX_PLUGINS 64
#define NBUILTIN 3
static const ddp_plugin_t *registry[MAX_PLUGINS] = {
    &plugin_default, &ddp__plugin_subgroups, &ddp__plugin_rpc};
/* The library registry[i] came from (absolute path), NULL: not loaded. */
static char *libs[MAX_PLUGINS];
static size_t nplugins = NBUILTIN;

size_t ddp_plugin_count(void) { return nplugins; }
const ddp_plugin_t *ddp_plugin_at(size_t i)
{
    return i < nplugins ? registry[i] : NULL;
}

static long index_of(const char *name)
{
    for (size_t i = 0; name && i < nplugins; i++)
        if (!strcmp(registry[i]->name, name))
            return (long)i;
    return -1;
}

const ddp_plugin_t *ddp_plugin_find(const char *name)
{
    long i = index_of(name);
    if (i >= 0)
        return registry[i];
    char names[256] = "";
    size_t off = 0;
    for (size_t k = 0; k < nplugins && off < sizeof names; k++)
        off += (size_t)snprintf(names + off, sizeof names - off, "%s%s",
                                k ? ", " : "", registry[k]->name);
    ddp_err_set(DDP_ENOT_FOUND, "unknown plugin \"%s\" (the plugins here: %s)",
                name ? name : "", names);
    ddp_err_hint("a plugin of your own loads from its library: --plugin ./libNAME.so, "
                 "or a scenario line `plugin-library PATH` (docs/plugin.md)");
    return NULL;
}

const char *ddp_plugin_library(const ddp_plugin_t *p)
{
    for (size_t i = 0; p && i < nplugins; i++)
        if (registry[i] == p)
            return libs[i];
    return NULL;
}

int ddp_plugin_is_library_path(const char *v)
{
    size_t n = v ? strlen(v) : 0;
    return n && (strchr(v, '/') || (n > 3 && !strcmp(v + n - 3, ".so")));
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

/* The plugin loaded from the library at real (NULL: none yet). */
static const ddp_plugin_t *loaded(const char *real)
{
    for (size_t i = NBUILTIN; i < nplugins; i++)
        if (libs[i] && !strcmp(libs[i], real))
            return registry[i];
    return NULL;
}

/* A library without DDP_PLUGIN_SYMBOL may export another version's
 * descriptor (ddp_plugin_v2, ...): its first member is the version too. */
static int other_version(ddp_sys_t *sys, void *lib, char *sym, size_t n)
{
    for (int v = 2; v <= 9; v++) {
        snprintf(sym, n, "ddp_plugin_v%d", v);
        const uint32_t *d = ddp_sys_lib_sym(sys, lib, sym);
        if (d)
            return (int)*d;
    }
    return 0;
}

/* Checks the descriptor of the library at real: 0, or DDP_ECONFIG with
 * the error and its hint filled. */
static int check_descriptor(ddp_sys_t *sys, void *lib, const char *real,
                            const ddp_plugin_v1_t *d)
{
    char sym[32];
    int other = d ? 0 : other_version(sys, lib, sym, sizeof sym);
    if (!d && !other) {
        ddp_err_set(DDP_ECONFIG, "%s exports no %s: it is not a ddpsim plugin library",
                    real, DDP_PLUGIN_SYMBOL);
        return ddp_err_hint("define `DDP_PLUGIN_EXPORT const ddp_plugin_v1_t %s = "
                            "{DDP_PLUGIN_ABI_VERSION, \"NAME\", &your_plugin};` in it, "
                            "from <ddp/plugin.h> (docs/plugin.md)", DDP_PLUGIN_SYMBOL);
    }
    unsigned have = other ? (unsigned)other : d->abi_version;
    if (other || d->abi_version != DDP_PLUGIN_ABI_VERSION) {
        ddp_err_set(DDP_ECONFIG, "%s was built for plugin ABI version %u (%s), this "
                                 "ddpsim loads version %d",
                    real, have, other ? sym : DDP_PLUGIN_SYMBOL, DDP_PLUGIN_ABI_VERSION);
        return ddp_err_hint("rebuild the plugin against this ddpsim's headers "
                            "(cc -shared -fPIC $(pkg-config --cflags ddpsim) ...)");
    }
    if (!d->name || !*d->name || !d->plugin || !d->plugin->name ||
        strcmp(d->name, d->plugin->name)) {
        ddp_err_set(DDP_ECONFIG, "%s: its %s names plugin \"%s\" but its table %s%s%s",
                    real, DDP_PLUGIN_SYMBOL, d->name ? d->name : "(null)",
                    !d->plugin ? "is missing" : "is named \"",
                    d->plugin && d->plugin->name ? d->plugin->name : d->plugin ? "(null)" : "",
                    d->plugin ? "\"" : "");
        return ddp_err_hint("give the descriptor a non-empty name, the same as its table's "
                            ".name, and point .plugin at the table");
    }
    if (strlen(d->name) > DDP_PLUGIN_NAME_MAX) {
        ddp_err_set(DDP_ECONFIG, "%s: its plugin's name \"%.40s...\" is longer than %d "
                                 "characters", real, d->name, DDP_PLUGIN_NAME_MAX);
        return ddp_err_hint("give it a shorter name (scenarios and plans carry it)");
    }
    long at = index_of(d->name);
    if (at < 0)
        return 0;
    if (at < NBUILTIN)
        ddp_err_set(DDP_ECONFIG, "%s: its plugin \"%s\" has the name of a built-in plugin",
                    real, d->name);
    else if (libs[at])
        ddp_err_set(DDP_ECONFIG, "%s: its plugin \"%s\" has the name of the plugin "
                                 "loaded from %s", real, d->name, libs[at]);
    else
        ddp_err_set(DDP_ECONFIG, "%s: its plugin \"%s\" has the name of a plugin this "
                                 "program registered", real, d->name);
    return ddp_err_hint("plugins are found by name: rename yours (the descriptor's name and "
                        "its table's .name), or load one library of that name");
}

int ddp_plugin_load(ddp_sys_t *sys, const char *path, const ddp_plugin_t **out)
{
    *out = NULL;
    if (!path || !*path)
        return ddp_err_set(DDP_ECONFIG, "a plugin library needs a path");
    if ((*out = loaded(path))) /* the absolute path again: no OS call */
        return 0;
    ddp_sys_t *own = sys ? NULL : ddp_sys_posix_new(NULL);
    if (!sys && !(sys = own))
        return ddp_err_set(-ENOMEM, "out of memory loading %s", path);
    char real[1024], file[1024];
    void *lib = NULL;
    /* a file, never a name searched on the library path */
    snprintf(file, sizeof file, "%s%s", strchr(path, '/') ? "" : "./", path);
    int rc = ddp_sys_lib_open(sys, file, &lib, real, sizeof real);
    if (rc) {
        ddp_err_wrap("cannot load plugin library");
        if (rc == -ENOENT)
            ddp_err_hint("build it first, and give its path from the current directory (a "
                         "scenario's plugin-library line: from the scenario's folder)");
        else if (rc == DDP_ECONFIG)
            ddp_err_hint("build it with cc -shared -fPIC $(pkg-config --cflags ddpsim), "
                         "for this machine (docs/plugin.md)");
    } else if ((*out = loaded(real))) {
        ddp_sys_lib_close(sys, lib); /* loaded before, by another path */
    } else if ((rc = check_descriptor(sys, lib, real,
                                      ddp_sys_lib_sym(sys, lib, DDP_PLUGIN_SYMBOL))) == 0) {
        const ddp_plugin_v1_t *d = ddp_sys_lib_sym(sys, lib, DDP_PLUGIN_SYMBOL);
        char *copy = strdup(real);
        rc = !copy ? ddp_err_set(-ENOMEM, "out of memory loading %s", path)
                   : ddp_plugin_register(d->plugin);
        if (rc == 0) {
            libs[nplugins - 1] = copy; /* never unloaded: its code runs ranks */
            *out = d->plugin;
        } else {
            free(copy);
        }
    }
    if (rc && lib)
        ddp_sys_lib_close(sys, lib);
    ddp_sys_free(own);
    return rc;
}
