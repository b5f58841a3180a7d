/* tests/test_addr.c — numeric addresses as glibc reads them (core/addr.c),
 * in the simulator's and the POSIX resolver alike, and a differential
 * sample against this host's libc (the full run: make differential). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "addr_gen.h"
#include "ddp/err.h"
#include "ddp/sim.h"
#include "ddp/sys.h"
#include "test.h"

static const char *host_of(const char *text, char *buf, size_t n)
{
    ddp_addr_t a;
    if (ddp_addr_try_parse(text, 0, &a) != 0)
        return "not numeric";
    return ddp_addr_format_host(&a, buf, n);
}

/* inet_aton's numbers-and-dots forms are addresses (getaddrinfo gives
 * them), brackets are not. */
static void test_numeric_forms(void)
{
    static const char *const cases[][2] = {
        {"189", "0.0.0.189"},        {"10.1", "10.0.0.1"},
        {"0x7f.1", "127.0.0.1"},     {"010.0.0.1", "8.0.0.1"},
        {"10.0.258", "10.0.1.2"},    {"4294967295", "255.255.255.255"},
        {"4294967296", "not numeric"}, {"08.0.0.1", "not numeric"},
        {"1.2.3.4.", "not numeric"},  {"1.2.3.4 ", "not numeric"},
        {"[fd00::1]", "not numeric"}, {"[::1]", "not numeric"},
        {"fd00::1", "fd00::1"},       {"::ffff:1.2.3.4", "::ffff:1.2.3.4"},
        {"fe80::1%7", "fe80::1"},     {"fe80::1%", "not numeric"},
        {"1.2.3.4%1", "not numeric"}, {"node1", "not numeric"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[DDP_ADDR_STRLEN];
        const char *got = host_of(cases[i][0], buf, sizeof buf);
        if (strcmp(got, cases[i][1]))
            fprintf(stderr, "\n  \"%s\": %s, expected %s", cases[i][0], got, cases[i][1]);
        CU_ASSERT_STRING_EQUAL(got, cases[i][1]);
    }
    uint8_t ip[4];
    CU_ASSERT_EQUAL(ddp_inet_aton("1.2.3.4 junk", 0, ip), 1); /* inet_aton's own laxness */
    CU_ASSERT_EQUAL(ddp_inet_aton("1.2.3.4 junk", 1, ip), 0);
}

typedef struct probe {
    const char *host;
    int n;
    ddp_addr_t first;
    char msg[640];
} probe_t;

static int resolve_task(ddp_sys_t *sys, void *arg)
{
    probe_t *p = arg;
    ddp_addr_t a[4];
    p->n = ddp_sys_resolve(sys, p->host, 29999, a, 4);
    if (p->n > 0)
        p->first = a[0];
    else
        snprintf(p->msg, sizeof p->msg, "%s", ddp_err_message());
    return 0;
}

static probe_t probes[] = {{.host = "[fd00::1]"},    {.host = "189"},
                           {.host = "fe80::1%eth0"}, {.host = "fe80::1%eth9"},
                           {.host = "fd00::1%eth0"}, {.host = "fd00::1%3"},
                           {.host = "10.1"}};
enum { NPROBES = sizeof probes / sizeof probes[0] };

static void check_probes(unsigned eth0_ix)
{
    char a[DDP_ADDR_STRLEN];
    CU_ASSERT_EQUAL(probes[0].n, DDP_ENOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(probes[0].msg, "brackets"));
    CU_ASSERT_PTR_NOT_NULL(strstr(probes[0].msg, "MASTER_ADDR=fd00::1"));
    CU_ASSERT_EQUAL(probes[1].n, 1);
    CU_ASSERT_STRING_EQUAL(ddp_addr_format_host(&probes[1].first, a, sizeof a), "0.0.0.189");
    CU_ASSERT_EQUAL(probes[2].n, 1);
    CU_ASSERT_EQUAL(probes[2].first.scope, eth0_ix);
    CU_ASSERT_EQUAL(probes[3].n, DDP_ENOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(probes[3].msg, "link-local"));
    CU_ASSERT_PTR_NOT_NULL(strstr(probes[3].msg, "\"eth9\""));
    CU_ASSERT_EQUAL(probes[4].n, DDP_ENOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(probes[4].msg, "only for a link-local"));
    CU_ASSERT_EQUAL(probes[5].n, 1);
    CU_ASSERT_EQUAL(probes[5].first.scope, 3);
    CU_ASSERT_EQUAL(probes[6].n, 1);
    CU_ASSERT_STRING_EQUAL(ddp_addr_format_host(&probes[6].first, a, sizeof a), "10.0.0.1");
}

/* The simulator resolves as getaddrinfo would: eth0 is a node's second
 * interface (index 2, after lo). */
static void test_sim_resolve(void)
{
    ddp_sim_opts_t o = {.seed = 41};
    ddp_sim_t *sim = ddp_sim_new(&o);
    ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
    for (int i = 0; i < NPROBES; i++) {
        memset(&probes[i].first, 0, sizeof probes[i].first);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "r", .rank = -1},
                         resolve_task, &probes[i]);
    }
    CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
    check_probes(2);
    ddp_sim_free(sim);
}

/* The same answers over POSIX, where this host has an eth0 (else skipped). */
static void test_posix_resolve(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    ddp_ifaddr_t ifs[64];
    int n = ddp_sys_ifaddrs(sys, ifs, 64);
    unsigned eth0 = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(ifs[i].name, "eth0"))
            eth0 = ifs[i].index;
    if (!eth0) {
        ddp_sys_free(sys);
        printf("\n  skipped: this host has no eth0\n");
        return;
    }
    for (int i = 0; i < NPROBES; i++)
        resolve_task(sys, &probes[i]);
    check_probes(eth0);
    ddp_sys_free(sys);
}

/* 500 generated strings a family, ddpsim vs this host's libc. */
static void test_differential_sample(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    ddp_ifaddr_t ifs[64];
    int n = ddp_sys_ifaddrs(sys, ifs, 64);
    for (int f = 0; f < ADDR_NFAM; f++) {
        addr_diff_t d;
        addr_diff_run(f, 4100 + (uint64_t)f, 500, ifs, n > 0 ? n : 0, &d);
        ddp_test_diff_verdict(addr_family_name(f), d.tried, d.accepted, d.disagreed, d.first);
    }
    ddp_sys_free(sys);
}

DDP_SUITE("addr", NULL, NULL,
          {"numeric forms follow inet_aton, brackets are a name", test_numeric_forms},
          {"simulator resolve: brackets, short forms, zones", test_sim_resolve},
          {"POSIX resolve: the same answers", test_posix_resolve},
          {"differential sample against this host's libc", test_differential_sample})
