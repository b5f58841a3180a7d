/* tools/cmds.h — the ddpsim subcommands. Each lives in tools/cmd_<name>.c and
 * returns the process exit status (0 ok, 1 failure, 2 bad input). */
#ifndef DDP_TOOLS_CMDS_H
#define DDP_TOOLS_CMDS_H

struct ddp_sys;

/* argv[0] is the subcommand name ("hostlist", ...). */
int ddp_cmd_hostlist(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_env(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_store(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_demo(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_sim(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_run(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_replay(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_list(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_train(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_hold_port(struct ddp_sys *sys, int argc, char **argv);
int ddp_cmd_launch(struct ddp_sys *sys, int argc, char **argv);

/* The path this ddpsim was started as (real runs start it again). */
extern const char *ddp_tool_self;
/* fn handles SIGINT and SIGTERM, and SIGHUP when hup (unless it is ignored,
 * as under nohup); fn NULL with the same hup restores the default actions. */
void ddp_tool_catch_signals(void (*fn)(int), int hup);
int ddp_cmd_explore(struct ddp_sys *sys, int argc, char **argv);

#endif
