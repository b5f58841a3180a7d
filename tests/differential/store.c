/* tests/differential/store.c — make differential, the store family:
 * COUNT generated request sequences (default 10000, seed SEED, default 41)
 * sent as the same bytes to torch 1.13's TCPStore server (a helper run with
 * scripts/torch-python) and to ddpsim's store server (in this process),
 * replies compared (tests/store_diff.c). PORT (default 0: any free port):
 * torch's server listens on PORT, ddpsim's on PORT + 1. Prints one line of
 * figures and one per named difference (docs/fidelity.md, "The store");
 * exit 1 on any other disagreement, 0 with "skipped: ..." without torch. */
#include <stdio.h>
#include <stdlib.h>

#include "ddp/err.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "../store_diff.h"

static int usage(const char *arg)
{
    fprintf(stderr, "differential store: \"%s\" is not a positive count, seed or port "
                    "(usage: store [COUNT [SEED [PORT]]])\n", arg);
    return 2;
}

static void report(const sd_stats_t *st)
{
    printf("store        %ld sequences, %ld requests, %ld closed by both, %ld WAITs on "
           ">= 16 Ki keys, %ld WAITs timed out client-side; %ld agreed throughout, "
           "%ld disagreements%s%s\n",
           st->sequences, st->requests, st->closes, st->waits_big, st->waits_open, st->agreed,
           st->disagreed, st->disagreed ? "; first: " : "", st->disagreed ? st->first : "");
    for (int i = 0; i < SD_NNAMED; i++)
        printf("  named difference: %-42s %ld sequence(s)\n", sd_named_name(i), st->named[i]);
}

static int run(ddp_sys_t *sys, long count, uint64_t seed, unsigned port)
{
    char why[300];
    sd_torch_t t;
    int rc = sd_torch_start(&t, "tests/differential/store_torch.py", (uint16_t)port, why,
                            sizeof why);
    if (rc == 1) {
        printf("store        skipped: %s\n", why);
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "differential store: %s\n", why);
        return 1;
    }
    ddp_store_server_opts_t o = {.host = "127.0.0.1", .port = (uint16_t)(port ? port + 1 : 0)};
    ddp_store_server_t *srv = NULL;
    if (ddp_store_server_new(sys, &o, &srv) != 0 || ddp_store_server_start_thread(srv) != 0) {
        fprintf(stderr, "differential store: ddpsim's store server did not start: %s\n",
                ddp_err_message());
        sd_torch_stop(&t);
        return 1;
    }
    ddp_addr_t a[2];
    ddp_addr_parse("127.0.0.1", t.port, &a[0]);
    a[1] = ddp_store_server_addr(srv);
    sd_stats_t st = {.verbose = 1};
    rc = sd_run(sys, a, seed, count, 1, &st);
    ddp_store_server_stop(srv);
    ddp_store_server_join_thread(srv);
    ddp_store_server_free(srv);
    sd_torch_stop(&t);
    report(&st);
    if (rc != 0)
        fprintf(stderr, "differential store: %s\n", st.first);
    return rc != 0 || st.disagreed ? 1 : 0;
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? atol(argv[1]) : 10000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 41;
    long port = argc > 3 ? atol(argv[3]) : 0;
    if (count < 1)
        return usage(argv[1]);
    if (port < 0 || port > 65534)
        return usage(argv[3]);
    ddp_log_set_level(DDP_LOG_ERROR);
    ddp_sys_t *sys = ddp_sys_posix_new(NULL);
    if (!sys) {
        fprintf(stderr, "differential store: cannot make a POSIX sys\n");
        return 1;
    }
    int rc = run(sys, count, seed, (unsigned)port);
    ddp_sys_free(sys);
    return rc;
}
