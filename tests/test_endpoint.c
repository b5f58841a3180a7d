/* tests/test_endpoint.c — torch 1.13's own readings in ddpsim
 * (core/endpoint.c): the rendezvous endpoint, the store-hosting decision
 * and GLOO_SOCKET_IFNAME, as the elastic agent and the tcp backend use
 * them in the simulator, and a differential sample against torch itself
 * (the full run: make differential; skipped without torch). */
#include <stdio.h>
#include <string.h>

#include "ddp/scenario.h"
#include "ddp/sys.h"
#include "test.h"
#include "torch_gen.h"

/* What parse_rendezvous_endpoint(text, 29400) gives (host NULL: raises). */
static void test_endpoint_forms(void)
{
    static const struct {
        const char *text, *host;
        unsigned port;
    } cases[] = {
        {"", "localhost", 29400},          {" \t\n", "localhost", 29400},
        {" node1:80 \n", "node1", 80},     {"\xc2\xa0node1\xc2\x85", "node1", 29400},
        {"[fd00::1]", "fd00::1", 29400},   {"[fd00::1]:29500", "fd00::1", 29500},
        {"fd00::1", "fd00:", 1},           {"node1:0", "node1", 0},
        {"node1:00080", "node1", 80},      {"[a\n]", "a\n", 29400},
        {"node1:65536", NULL, 0},          {"node1:", NULL, 0},
        {":80", NULL, 0},                  {"[]", NULL, 0},
        {"node 1:80", NULL, 0},            {"n\xc3\xb6" "de:80", NULL, 0},
        {"node1:123456", NULL, 0},         {"node1:+1", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char host[256] = "";
        uint16_t port = 0;
        int rc = ddp_endpoint_parse(cases[i].text, 29400, host, sizeof host, &port);
        int good = cases[i].host ? rc == 0 && !strcmp(host, cases[i].host) &&
                                       port == cases[i].port
                                 : rc == DDP_ECONFIG;
        if (!good)
            printf("\n  \"%s\": rc %d host \"%s\" port %u\n", cases[i].text, rc, host,
                   (unsigned)port);
        CU_ASSERT(good);
    }
}

/* A host named node1, at 10.0.0.5 and fd00::5, whose canonical name is
 * node1.example.com (a Debian /etc/hosts line "10.0.0.5 node1.example.com
 * node1"). */
static int fk_hostname(ddp_sys_t *s, char *buf, size_t n)
{
    (void)s;
    snprintf(buf, n, "node1");
    return 0;
}

static int fk_resolve(ddp_sys_t *s, const char *host, uint16_t port, ddp_addr_t *out, int max)
{
    (void)s;
    if (strcmp(host, "node1") || max < 2 || ddp_addr_parse("10.0.0.5", port, out) ||
        ddp_addr_parse("fd00::5", port, out + 1))
        return DDP_ENOT_FOUND;
    return 2;
}

static int fk_canon(ddp_sys_t *s, const char *host, char *buf, size_t n)
{
    (void)s;
    snprintf(buf, n, "%s.example.com", host);
    return 0;
}

/* _matches_machine_hostname's yes and no: the canonical name and a zoned
 * ::1 are this host (they were not); 127.1 is no address to Python; an
 * address of this host with a zone is not (torch compares it as text). Each
 * answer is torch 1.13's own for the same host (socket.gethostname and
 * getaddrinfo replaced in Python). */
static void test_this_host(void)
{
    static const struct {
        const char *host;
        int yes;
    } cases[] = {{"node1.example.com", 1}, {"::1%lo", 1},     {"::1%7", 1},
                 {"node1", 1},             {"10.0.0.5", 1},   {"localhost", 1},
                 {"127.0.0.2", 1},         {"10.0.0.6", 0},   {"127.1", 0},
                 {"NODE1", 0},             {"node1.", 0},     {"node1.example.com.", 0},
                 {"::ffff:127.0.0.1", 0},  {"::1%", 0},       {"010.0.0.5", 0},
                 {"fd00::5", 1},           {"fd00::5%eth0", 0}};
    ddp_sys_t *real = ddp_test_sys();
    ddp_sys_ops_t ops = *real->ops;
    ops.hostname = fk_hostname, ops.resolve = fk_resolve, ops.canon_name = fk_canon;
    ddp_sys_t fake = *real;
    fake.ops = &ops;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = ddp_sys_is_this_host(&fake, cases[i].host);
        if (got != cases[i].yes)
            printf("\n  \"%s\": %d, torch says %d\n", cases[i].host, got, cases[i].yes);
        CU_ASSERT_EQUAL(got, cases[i].yes);
    }
    ddp_sys_free(real);
}

/* One scenario text run in the simulator for accel: it must pass. */
static void run_text(const char *text, const char *accel)
{
    ddp_scenario_t *s = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_parse(text, "x.scn", NULL, &s, err, sizeof err), 0);
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, accel, NULL, &r), 0);
    if (!r.pass)
        printf("\n  %s\n  %s\n", text, r.why);
    CU_ASSERT(r.pass);
    ddp_scenario_free(s);
}

/* The elastic agent reads --rdzv_endpoint as torch does: no endpoint (or
 * spaces around it) is localhost, which this node's agent serves; port 0
 * is refused, saying why (torch's store would pick a port nobody knows). */
static void test_elastic_endpoint(void)
{
    static const char *const head = "scenario \"x\"\nnodes %d\ndevices 1\nlauncher "
                                    "torchrun-elastic\naccelerators ddp_hpc\n"
                                    "env PET_MONITOR_INTERVAL=1\nenv PET_RDZV_ENDPOINT=%s\n";
    static const struct {
        int nodes;
        const char *ep, *expect;
    } cases[] = {{1, "\"\"", "expect ok\n"},
                 {1, "\" localhost \"", "expect ok\n"},
                 {2, "node0:0", "expect fail error=config mentions=\"port 0\"\n"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        int l = snprintf(text, sizeof text, head, cases[i].nodes, cases[i].ep);
        snprintf(text + l, sizeof text - (size_t)l, "%s", cases[i].expect);
        run_text(text, "ddp_hpc");
    }
}

/* GLOO_SOCKET_IFNAME as torch reads it: one character is ignored; every
 * item of a list must be an interface (gloo makes a device of each). */
static void test_gloo_ifname_list(void)
{
    static const char *const head = "scenario \"x\"\nnodes 1\ndevices 2\naccelerators ddp\n"
                                    "env GLOO_SOCKET_IFNAME=%s\n%s";
    static const char *const cases[][2] = {
        {"x", "expect ok\n"},
        {"eth0,", "expect ok\n"},
        {"eth0,ib0", "expect fail error=config mentions=\"ib0\"\n"},
        {",eth0", "expect fail error=config mentions=\"empty interface name\"\n"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, head, cases[i][0], cases[i][1]);
        run_text(text, "ddp");
    }
}

/* 300 generated inputs a family, ddpsim vs torch 1.13 (one Python process
 * a family). */
static void test_torch_sample(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    for (int f = 0; f < TORCH_NFAM; f++) {
        torch_diff_t d;
        if (torch_diff_run(f, 4100 + (uint64_t)f, 300, sys,
                           "tests/differential/torch_oracle.py", &d) != 0) {
            if (d.skipped) {
                ddp_test_skip("%s", d.why);
                break;
            }
            printf("\n  %s: %s\n", torch_family_name(f), d.why);
            CU_FAIL("the torch oracle did not run");
            continue;
        }
        ddp_test_diff_verdict(torch_family_name(f), d.tried, d.accepted, d.disagreed, d.first);
    }
    ddp_sys_free(sys);
}

DDP_SUITE("endpoint", NULL, NULL,
          {"parse_rendezvous_endpoint's forms", test_endpoint_forms},
          {"_matches_machine_hostname: canonical name, zones, Python's addresses",
           test_this_host},
          {"the elastic agent: no endpoint is localhost, port 0 refused", test_elastic_endpoint},
          {"GLOO_SOCKET_IFNAME: one character ignored, every item checked",
           test_gloo_ifname_list},
          {"differential sample against torch 1.13", test_torch_sample})
