/* tests/test_newest_ifaces.c — which interface a rank's bootstrap uses
 * when a node has more than lo and eth0, in the simulator:
 *
 *  - the simulated NCCL (sim/sim_nccl.c): unset NCCL_SOCKET_IFNAME is
 *    NCCL's default order (an ib interface first, wherever it is listed;
 *    then anything but docker* and lo; lo last), filtered by
 *    NCCL_SOCKET_FAMILY; a list picks by prefix, "=" exactly, "^"
 *    excludes. The unique id carries the chosen address: the test looks
 *    for its bytes there;
 *  - the tcp backend's GLOO_SOCKET_IFNAME (backends/tcp.c, core/endpoint.c):
 *    every name of a list must be an interface with an address (gloo makes
 *    a device per name), the first decides, a bad one is a config error
 *    naming the variable; TP_SOCKET_IFNAME stands in when it is unset. */
#include <stdio.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/scenario.h"
#include "ddp/sim.h"
#include "ddp/sys.h"
#include "nccl_diff.h"
#include "test.h"

#ifdef DDP_HAVE_NCCL_H
#include "ddp/nccl_api.h"

typedef struct ifrow {
    const char *ifaces;  /* "NAME CIDR;..." added to node 0 */
    const char *spec;    /* NCCL_SOCKET_IFNAME (NULL: unset) */
    const char *family;  /* NCCL_SOCKET_FAMILY (NULL: unset) */
    const char *want;    /* the address chosen (NULL: none matches) */
} ifrow_t;

typedef struct ifrun {
    const ifrow_t *row;
    ncclResult_t res;
    ncclUniqueId uid;
} ifrun_t;

static int uid_main(ddp_sys_t *sys, void *arg)
{
    ifrun_t *r = arg;
    ddp_env_t *env = ddp_sys_env(sys);
    if (r->row->spec)
        ddp_env_set(env, "NCCL_SOCKET_IFNAME", r->row->spec);
    if (r->row->family)
        ddp_env_set(env, "NCCL_SOCKET_FAMILY", r->row->family);
    const ddp_nccl_api_t *a = NULL;
    if (ddp_sys_nccl_api(sys, &a) || !a)
        return 1;
    r->res = a->get_unique_id(&r->uid);
    if (r->res == ncclSuccess) { /* the root waits for a rank: be it */
        ncclComm_t c = NULL;
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        a->init_rank_config(&c, 1, r->uid, 0, &cfg);
        ncclResult_t st = ncclInProgress;
        while (c && a->get_async_error(c, &st) == ncclSuccess && st == ncclInProgress)
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_MS));
        a->comm_destroy(c);
    }
    return 0;
}

static void add_ifaces(ddp_sim_t *sim, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    for (char *save = NULL, *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        char name[16], cidr[64];
        if (sscanf(t, "%15s %63s", name, cidr) == 2)
            CU_ASSERT_EQUAL(ddp_sim_add_iface(sim, 0, name, cidr), 0);
    }
}

static void test_nccl_default_order(void)
{
    static const ifrow_t rows[] = {
        /* ib first although eth0 is listed before it */
        {"docker0 172.17.0.1/16;ib0 192.168.0.1/24", NULL, NULL, "192.168.0.1"},
        /* no ib: eth0, not docker0 */
        {"docker0 172.17.0.1/16", NULL, NULL, "10.0.0.1"},
        /* eth0 IPv6 only, IPv4 asked: docker0 before lo (NCCL's
         * ncclFindInterfaces: ^docker,lo,virbr, then docker, then lo) */
        {"eth0 fd00::1/64;docker0 172.17.0.1/16", NULL, "AF_INET", "172.17.0.1"},
        /* ... but any other interface first, though docker0 is listed before it */
        {"eth0 fd00::1/64;docker0 172.17.0.1/16;eth1 10.1.0.1/16", NULL, "AF_INET", "10.1.0.1"},
        /* IPv6 asked: eth0's, not lo's ::1 */
        {"eth0 10.0.0.1/8;eth0 fd00::1/64", NULL, "AF_INET6", "fd00::1"},
        /* a list: prefixes, first listed interface that matches */
        {"docker0 172.17.0.1/16;ib0 192.168.0.1/24", "ib,docker", NULL, "172.17.0.1"},
        {"docker0 172.17.0.1/16;ib0 192.168.0.1/24", "ib", NULL, "192.168.0.1"},
        {"eth10 10.10.0.1/16", "=eth10", NULL, "10.10.0.1"},
        {"eth10 10.10.0.1/16", "=eth1", NULL, NULL},
        {"eth10 10.10.0.1/16", "eth1", NULL, "10.10.0.1"},
        {"docker0 172.17.0.1/16;ib0 192.168.0.1/24", "^lo,eth", NULL, "172.17.0.1"},
        {"docker0 172.17.0.1/16;ib0 192.168.0.1/24", "^=docker0,lo,eth0", NULL, "192.168.0.1"},
        /* IPv6 loopback never qualifies (make differential's nccl family) */
        {"docker0 172.17.0.1/16", "^docker", "AF_INET6", NULL},
        /* one character is no setting; a list left empty matches all */
        {"docker0 172.17.0.1/16", "d", NULL, "10.0.0.1"},
        {"docker0 172.17.0.1/16", "^=", NULL, NULL},
        {"docker0 172.17.0.1/16", "=,", NULL, "127.0.0.1"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ifrun_t r = {.row = &rows[i], .res = ncclInternalError};
        ddp_sim_opts_t so = {.seed = 5, .gpus = 1};
        ddp_sim_t *sim = ddp_sim_new(&so);
        ddp_sim_add_node(sim, "node0", "10.0.0.1", 0);
        add_ifaces(sim, rows[i].ifaces);
        ddp_sim_add_task(sim, &(ddp_sim_task_opts_t){.node = 0, .name = "rank0", .rank = 0},
                         uid_main, &r);
        CU_ASSERT_EQUAL(ddp_sim_run(sim), DDP_SIM_DONE);
        int ok;
        if (!rows[i].want) {
            ok = r.res == ncclInvalidUsage;
        } else {
            ddp_addr_t w;
            CU_ASSERT_EQUAL_FATAL(ddp_addr_parse(rows[i].want, 0, &w), 0);
            ok = r.res == ncclSuccess &&
                 memmem(&r.uid, sizeof r.uid, w.ip, w.family == 6 ? 16 : 4) != NULL;
        }
        if (!ok)
            printf("\n  ifaces %s, NCCL_SOCKET_IFNAME=%s NCCL_SOCKET_FAMILY=%s: result %d, "
                   "wanted %s\n",
                   rows[i].ifaces, rows[i].spec ? rows[i].spec : "(unset)",
                   rows[i].family ? rows[i].family : "(unset)", (int)r.res,
                   rows[i].want ? rows[i].want : "no interface");
        CU_ASSERT_TRUE(ok);
        ddp_sim_free(sim);
    }
}

#else

static void test_nccl_default_order(void)
{
    ddp_test_skip("no nccl.h at build time: no simulated NCCL");
}

#endif

/* GLOO_SOCKET_IFNAME lists, through a whole scenario under ddp: eth1 is
 * the nodes' second network. Every item must be an interface with an
 * address (torch 1.13: gloo makes a device per name), the first decides
 * (eth1,lo: eth1, not loopback); TP_SOCKET_IFNAME (tensorpipe's) is read
 * only when GLOO_SOCKET_IFNAME is unset or empty, and a bad one is named
 * by its own variable. */
static void test_gloo_list_first(void)
{
    static const struct {
        const char *env, *why; /* why: NULL ok, else the config error's variable */
    } cases[] = {{"GLOO_SOCKET_IFNAME=eth1", NULL},
                 {"GLOO_SOCKET_IFNAME=eth1,lo", NULL},
                 {"GLOO_SOCKET_IFNAME=eth1,eth0", NULL},
                 {"GLOO_SOCKET_IFNAME=eth1,ib9", "GLOO_SOCKET_IFNAME=\\\"eth1,ib9\\\""},
                 {"GLOO_SOCKET_IFNAME=ib9,eth1", "GLOO_SOCKET_IFNAME=\\\"ib9,eth1\\\""},
                 {"TP_SOCKET_IFNAME=eth1", NULL},
                 {"TP_SOCKET_IFNAME=ib9", "TP_SOCKET_IFNAME=\\\"ib9\\\""},
                 {"GLOO_SOCKET_IFNAME= TP_SOCKET_IFNAME=ib9", "TP_SOCKET_IFNAME"},
                 {"GLOO_SOCKET_IFNAME=eth1 TP_SOCKET_IFNAME=ib9", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[640], expect[160];
        if (cases[i].why)
            snprintf(expect, sizeof expect, "expect fail error=config mentions=\"%s\"",
                     cases[i].why);
        else
            snprintf(expect, sizeof expect, "expect ok");
        snprintf(text, sizeof text,
                 "scenario \"gloo list\"\nnodes 2\ndevices 1\ntimeout 10s\n"
                 "iface node=0 eth1 192.168.1.1/24\niface node=1 eth1 192.168.1.2/24\n"
                 "env %s\n%s\n",
                 cases[i].env, expect);
        ddp_scenario_t *s = ddp_test_scenario(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t res;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &res), 0);
        if (!res.pass)
            printf("\n  %s: %s\n", cases[i].env, res.why);
        CU_ASSERT_TRUE(res.pass);
        ddp_scenario_free(s);
    }
}

/* make differential's nccl family, a sample: the simulated NCCL's choice
 * of interface against the real libnccl.so.2's on this host, under 300
 * generated NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY settings (30 under
 * TSan, where each input's fork of the instrumented process took 0.7 s:
 * 210 s of CI's TSan suite; make differential runs 10,000). */
#if defined(__SANITIZE_THREAD__)
#define NCCL_SAMPLE 30
#else
#define NCCL_SAMPLE 300
#endif
static void test_nccl_iface_vs_libnccl(void)
{
    void *fn;
    char why[200];
    if (!nd_open(&fn, why, sizeof why)) {
        ddp_test_skip("%s", why);
        return;
    }
    nd_stats_t st = {0};
    CU_ASSERT_EQUAL(nd_run(fn, 7, NCCL_SAMPLE, &st), 0);
    CU_ASSERT_EQUAL(st.tried, NCCL_SAMPLE);
    CU_ASSERT_EQUAL(st.disagreed, 0);
    if (st.disagreed || st.tried != NCCL_SAMPLE)
        printf("\n  %ld of %ld disagree; first: %s\n", st.disagreed, st.tried, st.first);
}

DDP_SUITE("newest_ifaces", NULL, NULL,
          {"simulated NCCL: default order and lists over many interfaces",
           test_nccl_default_order},
          {"GLOO_SOCKET_IFNAME: every item an interface, the first decides",
           test_gloo_list_first},
          {"simulated NCCL's interface against libnccl.so.2 (make differential sample)",
           test_nccl_iface_vs_libnccl})
