/* examples/stages/stages_plugin.h — the example plugin. */
#ifndef STAGES_PLUGIN_H
#define STAGES_PLUGIN_H

#include <ddp/plugin.h>

extern const ddp_plugin_t stages_plugin;

#endif
