/* tools/cmd_store.c — `ddpsim store`: run a TCPStore-protocol server, or
 * talk to one (ours or PyTorch's) from the shell.
 *
 *   ddpsim store serve [--host H] [--port P] [--protocol P] [--quiet]
 *   ddpsim store [--host H] [--port P] [--timeout SEC] [--protocol P]
 *                COMMAND ARGS
 *
 * Exit status: 0 ok, 1 failure (the error context is printed), 2 bad usage.
 * `check` exits 1 when a key is missing, so scripts can branch on it. */
#include <errno.h>
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

#define CLI_DEFAULT_TIMEOUT_S 30

static void store_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim store serve [--host H] [--port P] [--protocol P] "
            "[--quiet]\n"
            "       ddpsim store [--host H] [--port P] [--timeout SEC] "
            "[--protocol P] COMMAND ARGS\n\n"
            "serve     run a TCPStore-protocol server until SIGTERM/SIGINT; "
            "prints\n          \"listening on ADDR\". --host defaults to \"::\" "
            "(all IPv6 and IPv4\n          addresses), --port to %d (0 = a "
            "free port), --quiet logs errors only.\n\n"
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
            "--host defaults to $MASTER_ADDR or 127.0.0.1, --port to "
            "$MASTER_PORT or %d;\n--timeout (default %d s) bounds connecting "
            "and the command.\n",
            DDP_STORE_DEFAULT_PORT, DDP_STORE_DEFAULT_PORT,
            CLI_DEFAULT_TIMEOUT_S);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddpsim store: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see 'ddpsim store --help')\n");
    return 2;
}

static int parse_port(const char *s, uint16_t *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!s[0] || *end || v < 0 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
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
    ddp_store_server_opts_t o = {.port = DDP_STORE_DEFAULT_PORT};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--host") && i + 1 < argc) {
            o.host = argv[++i];
        } else if (!strcmp(argv[i], "--protocol") && i + 1 < argc) {
            if (ddp_store_proto_parse(argv[++i], &o.protocol) != 0)
                return usage_error("%s", ddp_err_message());
        } else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
            if (parse_port(argv[++i], &o.port) != 0)
                return usage_error("bad port \"%s\" (0..65535)", argv[i]);
        } else if (!strcmp(argv[i], "--quiet")) {
            ddp_log_set_level(DDP_LOG_ERROR);
        } else if (!strcmp(argv[i], "--help")) {
            store_usage(stdout);
            return 0;
        } else {
            return usage_error("unknown serve option \"%s\"", argv[i]);
        }
    }
    ddp_store_server_t *srv = NULL;
    if (ddp_store_server_new(sys, &o, &srv) != 0) {
        fprintf(stderr, "ddpsim store serve: %s\n", ddp_err_message());
        return 1;
    }
    /* Handlers first: whoever reads "listening" may signal at once. */
    g_srv = srv;
    ddp_tool_catch_signals(on_signal, 0);
    ddp_addr_t a = ddp_store_server_addr(srv);
    char as[DDP_ADDR_STRLEN];
    printf("listening on %s\n", ddp_addr_format(&a, as, sizeof as));
    fflush(stdout);
    int rc = ddp_store_server_run(srv, DDP_DEADLINE_NEVER);
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
} client_cmd_t;

static const client_cmd_t client_cmds[] = {
    {"get", 1, 1},   {"set", 2, 2},    {"add", 2, 2},  {"wait", 1, -1},
    {"check", 1, -1}, {"delete", 1, 1}, {"keys", 0, 0}, {"numkeys", 0, 0},
};

static int run_client_cmd(ddp_store_t *st, const char *cmd, int n,
                          char **args, int64_t dl)
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
        char *end = NULL;
        errno = 0;
        long long d = strtoll(args[1], &end, 10);
        if (!args[1][0] || *end || errno)
            return usage_error("bad DELTA \"%s\" (an integer)", args[1]);
        if ((rc = ddp_store_add(st, args[0], d, &v, dl)) == 0)
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
    uint16_t port = DDP_STORE_DEFAULT_PORT;
    double timeout_s = CLI_DEFAULT_TIMEOUT_S;
    ddp_store_proto_t proto = DDP_STORE_PROTO_AUTO;
    if (!host || !host[0])
        host = "127.0.0.1";
    if (port_s && port_s[0] && parse_port(port_s, &port) != 0)
        return usage_error("MASTER_PORT=\"%s\" is not a port (0..65535)",
                           port_s);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--host") && i + 1 < argc) {
            host = argv[++i];
        } else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
            if (parse_port(argv[++i], &port) != 0)
                return usage_error("bad port \"%s\" (0..65535)", argv[i]);
        } else if (!strcmp(argv[i], "--protocol") && i + 1 < argc) {
            if (ddp_store_proto_parse(argv[++i], &proto) != 0)
                return usage_error("%s", ddp_err_message());
        } else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
            char *end = NULL;
            timeout_s = strtod(argv[++i], &end);
            if (!argv[i][0] || *end || !(timeout_s >= 0 && timeout_s < 1e9))
                return usage_error("bad timeout \"%s\" (seconds >= 0)",
                                   argv[i]);
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            store_usage(stdout);
            return 0;
        } else {
            return usage_error("unknown option \"%s\"", argv[i]);
        }
    }
    if (i >= argc)
        return usage_error("%s", "missing COMMAND");
    const char *cmd = argv[i];
    if (!strcmp(cmd, "serve"))
        return usage_error("%s", "serve options go after \"serve\"");
    int nargs = argc - i - 1;
    const client_cmd_t *cc = NULL;
    for (size_t k = 0; k < sizeof client_cmds / sizeof *client_cmds; k++)
        if (!strcmp(cmd, client_cmds[k].name))
            cc = &client_cmds[k];
    if (!cc)
        return usage_error("unknown command \"%s\"", cmd);
    if (nargs < cc->min_args || (cc->max_args >= 0 && nargs > cc->max_args))
        return usage_error("wrong number of arguments for \"%s\"", cmd);

    int64_t dl = ddp_sys_deadline_in(sys, (int64_t)(timeout_s * 1e9));
    ddp_store_client_opts_t o = {.host = host,
                                 .port = port,
                                 .connect_deadline = dl,
                                 .seed = (uint64_t)ddp_sys_now(sys),
                                 .protocol = proto};
    int err = 0;
    ddp_store_t *st = ddp_store_client_connect(sys, &o, &err);
    if (!st) {
        fprintf(stderr, "ddpsim store: %s\n", ddp_err_message());
        return 1;
    }
    int rc = run_client_cmd(st, cmd, nargs, argv + i + 1, dl);
    ddp_store_free(st);
    fflush(stdout);
    return rc;
}

int ddp_cmd_store(ddp_sys_t *sys, int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "serve"))
        return cmd_serve(sys, argc - 1, argv + 1);
    if (argc < 2) {
        store_usage(stderr);
        return 2;
    }
    return cmd_client(sys, argc, argv);
}
