/* tools/cmd_store.c — `ddpsim store`: run a TCPStore-protocol server, or
 * talk to one (ours or PyTorch's) from the shell.
 *
 *   ddpsim store serve [--host H] [--port P] [--protocol P] [--quiet]
 *                      [--max-memory BYTES] [--idle-timeout SEC]
 *                      [--allow CIDR[,CIDR...]] [--token TOKEN]
 *                      [--world N] [--relays K]
 *   ddpsim store [--host H] [--port P] [--timeout SEC] [--protocol P]
 *                [--token TOKEN] COMMAND ARGS
 *
 * Exit status: 0 ok, 1 failure (the error context is printed), 2 bad usage.
 * `check` exits 1 when a key is missing, so scripts can branch on it. */
#include <limits.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "opt.h"
#include "core/store_priv.h"
#include "store_relay.h"

#define CLI_DEFAULT_TIMEOUT_S 30
#define PROTO_FORM "auto, legacy or current"

static int parse_proto(const char *value, void *dst)
{
    return ddp_store_proto_parse(value, dst) == 0 ? 0 : -1;
}

#define BYTES_FORM "bytes >= 1 MiB, with an optional K, M or G (binary: 512M)"
#define TOKEN_ENV "DDPSIM_STORE_TOKEN"

/* A size: decimal bytes with an optional K/M/G (KiB/MiB/GiB) suffix, at
 * least 1 MiB (a smaller budget serves nothing useful). */
static int parse_bytes(const char *value, void *dst)
{
    return ddp__store_parse_memory(value, (size_t *)dst);
}

static void store_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim store serve [--host H] [--port P] [--protocol P] "
            "[--quiet]\n"
            "                          [--max-memory BYTES] [--idle-timeout "
            "SEC]\n"
            "                          [--allow CIDR[,CIDR...]] [--token "
            "TOKEN] [--world N]\n"
            "                          [--relays K]\n"
            "       ddpsim store [--host H] [--port P] [--timeout SEC] "
            "[--protocol P]\n"
            "                    [--token TOKEN] COMMAND ARGS\n\n"
            "serve     run a TCPStore-protocol server until SIGTERM/SIGINT; "
            "prints\n          \"listening on ADDR\". --host defaults to \"::\" "
            "(all IPv6 and IPv4\n          addresses), --port to %d (0 = a "
            "free port), --quiet logs errors only.\n"
            "          --max-memory BYTES (default 1G; K/M/G suffixes) bounds "
            "what the server\n          holds for all clients together; "
            "--idle-timeout SEC (default %d)\n          drops a connection "
            "stalled with a request or replies in flight.\n"
            "          --allow CIDR,... admits only those peers (any client, "
            "torch too);\n          --token TOKEN (or $%s) admits only "
            "ddpsim clients that send\n          it: PyTorch clients are "
            "then refused. --world N (the job's ranks) makes\n          room for "
            "4N connections and 8N keys where that is more than the\n"
            "          defaults (65536 connections, %d keys).\n"
            "          --relays K (1..%d): K processes hold the clients' "
            "connections and\n          relay their bytes to the server, "
            "for more clients than one process\n          may hold open "
            "files (ulimit -n): up to K times that limit.\n\n"
            "--protocol auto|legacy|current  the TCPStore generation: current "
            "= VALIDATE\n          handshake (PyTorch >= 2.2), legacy = "
            "PyTorch 1.9 - 2.0 (torch 1.13);\n          auto (default): the "
            "server detects it per connection, the client\n          falls "
            "back to legacy when the server drops VALIDATE.\n\n"
            "client commands (to any TCPStore-protocol server):\n"
            "  get KEY           wait for KEY, print its value\n"
            "  set KEY VALUE     set KEY\n"
            "  add KEY DELTA     add to a counter, print the new value\n"
            "  wait KEY...       wait until every KEY exists\n"
            "  check KEY...      print \"ready\" (exit 0) or \"not ready\" "
            "(exit 1)\n"
            "  delete KEY        delete KEY, print 1 if it existed, else 0\n"
            "  keys              list the keys, one per line\n"
            "  numkeys           print the number of keys\n\n"
            "--host defaults to $MASTER_ADDR or 127.0.0.1, --port (1..65535) to "
            "$MASTER_PORT or\n%d; --timeout SEC (>= 0, default %d s) bounds "
            "connecting and the command;\n--token TOKEN (or $%s) for a server "
            "started with one. Options come\nbefore COMMAND.\n\n"
            "Exit status: 0 ok, 1 failure (check: a key is missing), 2 bad usage.\n",
            DDP_STORE_DEFAULT_PORT, DDP_STORE_DEFAULT_IDLE_TIMEOUT_S, TOKEN_ENV,
            DDP_STORE_MAX_KEYS, DDP_STORE_MAX_RELAYS, DDP_STORE_DEFAULT_PORT, CLI_DEFAULT_TIMEOUT_S, TOKEN_ENV);
}

/* ---------------------------------------------------------------- serve */

/* The running server, for the signal handler (stop() is signal-safe). */
static ddp_store_server_t *volatile g_srv;

static void on_signal(int sig)
{
    (void)sig;
    if (g_srv)
        ddp_store_server_stop(g_srv);
}

static int cmd_serve(ddp_sys_t *sys, int argc, char **argv)
{
    ddp_store_server_opts_t o = {.port = DDP_STORE_DEFAULT_PORT,
                                 .token = ddp_env_get(ddp_sys_env(sys),
                                                      TOKEN_ENV)};
    int port = DDP_STORE_DEFAULT_PORT, quiet = 0, relays = 0, n;
    const ddp_opt_t opts[] = {
        OPT_STR("host", &o.host, "an address or host name to listen on"),
        OPT_FN("protocol", &o.protocol, parse_proto, PROTO_FORM),
        OPT_INT("port", &port, 0, 65535),
        OPT_FLAG("quiet", 0, &quiet, 1),
        OPT_FN("max-memory", &o.max_memory, parse_bytes, BYTES_FORM),
        OPT_NS_POS("idle-timeout", &o.idle_timeout_ns, 1e7),
        OPT_STR("allow", &o.allow,
                "addresses or ADDR/BITS, comma-separated (10.0.0.0/8,::1)"),
        OPT_STR("token", &o.token, "a token of 1 to 1024 bytes"),
        /* A torch 1.13 rank holds two connections and ddpsim's plugin
         * stores four keys a rank: 4N and 8N leave room for both. */
        OPT_INT("world", &o.world, 1, 1 << 24),
        OPT_INT("relays", &relays, 0, DDP_STORE_MAX_RELAYS),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("store serve", opts, store_usage),
                         .max_operands = 0};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    o.port = (uint16_t)port;
    if (relays > 0) { /* their processes: the command's, not the library's */
        o.sys_hook = ddp_store_relays_hook;
        o.sys_hook_arg = &relays;
    }
    if (quiet)
        ddp_log_set_level(DDP_LOG_ERROR);
    ddp_store_server_t *srv = NULL;
    int rc = ddp_store_server_new(sys, &o, &srv);
    if (rc != 0) {
        fprintf(stderr, "ddpsim store serve: %s\n", ddp_err_message());
        return rc == DDP_ECONFIG ? 2 : 1; /* a bad --allow or --token */
    }
    /* Handlers first: whoever reads "listening" may signal at once. */
    g_srv = srv;
    ddp_tool_catch_signals(on_signal, 0);
    ddp_addr_t a = ddp_store_server_addr(srv);
    char as[DDP_ADDR_STRLEN];
    printf("listening on %s\n", ddp_addr_format(&a, as, sizeof as));
    fflush(stdout);
    rc = ddp_store_server_run(srv, DDP_DEADLINE_NEVER);
    if (rc != 0)
        fprintf(stderr, "ddpsim store serve: %s\n", ddp_err_message());
    ddp_tool_catch_signals(NULL, 0);
    g_srv = NULL;
    ddp_store_server_free(srv);
    return rc == 0 ? 0 : 1;
}

/* --------------------------------------------------------------- client */

typedef struct client_cmd {
    const char *name;
    int min_args, max_args; /* after the command name; -1: any */
    const char *form;
} client_cmd_t;

static const client_cmd_t client_cmds[] = {
    {"get", 1, 1, "get KEY"},          {"set", 2, 2, "set KEY VALUE"},
    {"add", 2, 2, "add KEY DELTA"},    {"wait", 1, -1, "wait KEY..."},
    {"check", 1, -1, "check KEY..."},  {"delete", 1, 1, "delete KEY"},
    {"keys", 0, 0, "keys"},            {"numkeys", 0, 0, "numkeys"},
};

static int run_client_cmd(ddp_store_t *st, const char *cmd, int n,
                          char **args, long long delta, int64_t dl)
{
    const char *const *keys = (const char *const *)args;
    int64_t v = 0;
    int rc;
    if (!strcmp(cmd, "get")) {
        ddp_buf_t b = {0};
        if ((rc = ddp_store_get(st, args[0], &b, dl)) == 0) {
            fwrite(b.data, 1, b.len, stdout);
            putchar('\n');
            ddp_buf_free(&b);
        }
    } else if (!strcmp(cmd, "set")) {
        rc = ddp_store_set_str(st, args[0], args[1], dl);
        /* SET has no reply: a PING makes sure it arrived before we exit. */
        if (rc == 0)
            rc = ddp_store_ping(st, dl);
    } else if (!strcmp(cmd, "add")) {
        if ((rc = ddp_store_add(st, args[0], delta, &v, dl)) == 0)
            printf("%" PRId64 "\n", v);
    } else if (!strcmp(cmd, "wait")) {
        rc = ddp_store_wait(st, keys, (size_t)n, dl);
    } else if (!strcmp(cmd, "check")) {
        rc = ddp_store_check(st, keys, (size_t)n, dl);
        if (rc >= 0) {
            puts(rc ? "ready" : "not ready");
            return rc ? 0 : 1;
        }
    } else if (!strcmp(cmd, "delete")) {
        rc = ddp_store_delete_key(st, args[0], dl);
        if (rc >= 0) {
            printf("%d\n", rc);
            rc = 0;
        }
    } else if (!strcmp(cmd, "keys")) {
        char **ks = NULL;
        size_t nk = 0;
        if ((rc = ddp_store_list_keys(st, &ks, &nk, dl)) == 0) {
            for (size_t i = 0; i < nk; i++)
                puts(ks[i]);
            ddp_store_free_keys(ks, nk);
        }
    } else { /* numkeys */
        if ((rc = ddp_store_num_keys(st, &v, dl)) == 0)
            printf("%" PRId64 "\n", v);
    }
    if (rc < 0) {
        fprintf(stderr, "ddpsim store %s: %s\n", cmd, ddp_err_message());
        return 1;
    }
    return 0;
}

static int cmd_client(ddp_sys_t *sys, int argc, char **argv)
{
    const ddp_env_t *env = ddp_sys_env(sys);
    const char *host = ddp_env_get(env, "MASTER_ADDR");
    const char *port_s = ddp_env_get(env, "MASTER_PORT");
    int port = DDP_STORE_DEFAULT_PORT, n;
    double timeout_s = CLI_DEFAULT_TIMEOUT_S;
    ddp_store_proto_t proto = DDP_STORE_PROTO_AUTO;
    const char *token = ddp_env_get(env, TOKEN_ENV);
    if (!host || !host[0])
        host = "127.0.0.1";
    /* A client cannot connect to port 0 (serve's "a free port"). */
    const ddp_opt_t opts[] = {
        OPT_STR("host", &host, "the master's host name or address"),
        OPT_FN("protocol", &proto, parse_proto, PROTO_FORM),
        {"port", 0, DDP_OPT_INT, &port, 1, 65535, 0,
         "a port 1..65535 (0, a free port, is for serve only)", NULL},
        OPT_SEC("timeout", &timeout_s, 0, 1e9),
        OPT_STR("token", &token, "a token of 1 to 1024 bytes"),
        OPT_HELP,
    };
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("store", opts, store_usage), .in_order = 1,
                         .min_operands = 1, .max_operands = -1,
                         .operands = "a COMMAND (get, set, add, wait, check, delete, "
                                     "keys, numkeys) or serve"};
    /* An invalid MASTER_PORT is an error even when --port overrides it. */
    if (port_s && port_s[0] && ddp_opt_apply(&sp, "port", port_s, "MASTER_PORT") != 0)
        return 2;
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    int i = 1;
    argc = 1 + n;
    const char *cmd = argv[i];
    if (!strcmp(cmd, "serve"))
        return ddp_opt_bad("store", "COMMAND", "serve",
                           "serve first, then its options: ddpsim store serve [--host H] "
                           "[--port P] [--quiet]");
    int nargs = argc - i - 1;
    const client_cmd_t *cc = NULL;
    for (size_t k = 0; k < sizeof client_cmds / sizeof *client_cmds; k++)
        if (!strcmp(cmd, client_cmds[k].name))
            cc = &client_cmds[k];
    if (!cc)
        return ddp_opt_bad("store", "COMMAND", cmd, "one of get, set, add, wait, check, "
                                                    "delete, keys, numkeys or serve");
    if (nargs < cc->min_args || (cc->max_args >= 0 && nargs > cc->max_args)) {
        fprintf(stderr, "ddpsim store: wrong number of arguments for %s (%d); expected %s\n",
                cmd, nargs, cc->form);
        return 2;
    }

    long long delta = 0;
    if (!strcmp(cmd, "add") && ddp_opt_int(argv[i + 2], LLONG_MIN, LLONG_MAX, &delta))
        return ddp_opt_bad("store add", "DELTA", argv[i + 2], "an integer");
    int64_t dl = ddp_sys_deadline_in(sys, (int64_t)(timeout_s * 1e9));
    ddp_store_client_opts_t o = {.host = host,
                                 .port = (uint16_t)port,
                                 .connect_deadline = dl,
                                 .seed = (uint64_t)ddp_sys_now(sys),
                                 .protocol = proto,
                                 .token = token && *token ? token : NULL};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &err);
    if (!st) {
        fprintf(stderr, "ddpsim store: %s\n", ddp_err_message());
        return 1;
    }
    int rc = run_client_cmd(st, cmd, nargs, argv + i + 1, delta, dl);
    ddp_store_free(st);
    fflush(stdout);
    return rc;
}

int ddp_cmd_store(ddp_sys_t *sys, int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "serve"))
        return cmd_serve(sys, argc - 1, argv + 1);
    return cmd_client(sys, argc, argv);
}
