/* tests/test_newest_addr.c — IPv6 addresses compared, classified and
 * matched against networks (core/sys.c, core/addr.c): every byte of the
 * 16 counts, the port and the family count, a prefix that is no multiple
 * of 8 splits a byte, the link-local and loopback ranges end where RFC
 * 4291 ends them, and a zone names an interface only of a link-local
 * address. Each case names what it pins. */
#include <stdio.h>
#include <string.h>

#include "ddp/scenario.h"
#include "ddp/sys.h"
#include "test.h"

static ddp_addr_t A(const char *text, uint16_t port)
{
    ddp_addr_t a;
    memset(&a, 0, sizeof a);
    CU_ASSERT_EQUAL(ddp_addr_parse(text, port, &a), 0);
    return a;
}

static void test_equal(void)
{
    static const struct {
        const char *x, *y;
        int px, py, want;
    } cases[] = {
        {"fd00::1", "fd00:0:0:0:0:0:0:1", 1, 1, 1}, /* one address, two spellings */
        {"fd00::1", "fd00::2", 1, 1, 0},            /* the last byte */
        {"fd00::1", "fd00::1:0:0:1", 1, 1, 0},      /* byte 10: past an IPv4 length */
        {"fd00::1", "fd01::1", 1, 1, 0},            /* the first group */
        {"fd00:1::1", "fd00::1", 1, 1, 0},          /* bytes 2-3 */
        {"fd00::1", "fd00::1", 1, 2, 0},            /* the port */
        {"::", "0.0.0.0", 1, 1, 0},                 /* the family */
        {"::ffff:10.0.0.1", "10.0.0.1", 1, 1, 0},   /* mapped is not the same family */
        {"10.0.0.1", "10.0.0.1", 5, 5, 1},
        {"10.0.0.1", "10.0.0.2", 5, 5, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_addr_t x = A(cases[i].x, (uint16_t)cases[i].px),
                   y = A(cases[i].y, (uint16_t)cases[i].py);
        int got = ddp_addr_equal(&x, &y), back = ddp_addr_equal(&y, &x);
        if (got != cases[i].want || back != cases[i].want)
            printf("\n  equal(%s:%d, %s:%d) = %d/%d, want %d\n", cases[i].x, cases[i].px,
                   cases[i].y, cases[i].py, got, back, cases[i].want);
        CU_ASSERT_EQUAL(got, cases[i].want);
        CU_ASSERT_EQUAL(back, cases[i].want);
    }
}

/* is_any, is_loopback, is_link_local over the edges of their ranges. */
static void test_classes(void)
{
    static const struct {
        const char *text;
        int any, loop, ll;
    } cases[] = {
        {"::", 1, 0, 0},          {"0.0.0.0", 1, 0, 0},     {"::1", 0, 1, 0},
        {"::2", 0, 0, 0},         {"1::1", 0, 0, 0},        {"::1:0:0:0", 0, 0, 0},
        {"0:0:0:0:1::", 0, 0, 0}, {"::100:0:0:0:0", 0, 0, 0},
        {"127.0.0.1", 0, 1, 0},   {"127.255.3.4", 0, 1, 0}, {"128.0.0.1", 0, 0, 0},
        {"126.0.0.1", 0, 0, 0},   {"fe80::1", 0, 0, 1},     {"febf:ffff::1", 0, 0, 1},
        {"fec0::1", 0, 0, 0},     {"fe7f::1", 0, 0, 0},     {"ff02::1", 0, 0, 1},
        {"ff12::1", 0, 0, 1},     {"ff01::1", 0, 0, 1},     {"ff05::1", 0, 0, 0},
        {"ff0e::1", 0, 0, 0},     {"169.254.1.1", 0, 0, 0}, {"fd00::1", 0, 0, 0},
        {"ff00::1", 0, 0, 0},     {"ff03::1", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_addr_t a = A(cases[i].text, 0);
        int any = ddp_addr_is_any(&a), loop = ddp_addr_is_loopback(&a),
            ll = ddp_addr_is_link_local(&a);
        if (any != cases[i].any || loop != cases[i].loop || ll != cases[i].ll)
            printf("\n  %s: any %d loopback %d link-local %d, want %d %d %d\n", cases[i].text,
                   any, loop, ll, cases[i].any, cases[i].loop, cases[i].ll);
        CU_ASSERT_EQUAL(any, cases[i].any);
        CU_ASSERT_EQUAL(loop, cases[i].loop);
        CU_ASSERT_EQUAL(ll, cases[i].ll);
    }
}

/* A network match: whole bytes, then the prefix's bits of the next. */
static void test_in_net(void)
{
    static const struct {
        const char *a, *net;
        int prefix, want;
    } cases[] = {
        {"fd00::1", "fd00::", 64, 1},
        {"fd00:0:0:1::1", "fd00::", 64, 0},     /* byte 7 */
        {"fd00:0:0:0:8000::1", "fd00::", 65, 0}, /* bit 64, the first of byte 8 */
        {"fd00:0:0:0:7fff::1", "fd00::", 65, 1},
        {"fd00:0:0:0:8000::1", "fd00::", 64, 1},
        {"::1", "::", 127, 1},
        {"::2", "::", 127, 0},                   /* bit 126 */
        {"::3", "::2", 127, 1},
        {"fd00::1", "fd00::2", 128, 0},
        {"fd00::1", "fd00::1", 128, 1},
        {"fd00::1", "fd00::2", 200, 0},          /* past 128: the whole address */
        {"fd00::1", "fe00::", 0, 1},             /* /0 holds everything of the family */
        {"fd00::1", "fe00::", 6, 1},             /* fd and fe differ in bits 6-7 */
        {"fd00::1", "fe00::", 7, 0},
        {"10.0.0.1", "::", 0, 0},                /* another family */
        {"10.1.2.3", "10.1.0.0", 16, 1},
        {"10.1.2.3", "10.1.0.0", 22, 1},
        {"10.1.2.3", "10.1.0.0", 23, 0},
        {"10.1.2.3", "10.1.0.0", 24, 0},
        {"10.1.128.1", "10.1.0.0", 17, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_addr_t a = A(cases[i].a, 0), net = A(cases[i].net, 0);
        int got = ddp_addr_in_net(&a, &net, cases[i].prefix);
        if (got != cases[i].want)
            printf("\n  %s in %s/%d: %d, want %d\n", cases[i].a, cases[i].net, cases[i].prefix,
                   got, cases[i].want);
        CU_ASSERT_EQUAL(got, cases[i].want);
    }
}

/* A zone: an interface name of a link-local address (at most 15
 * characters; "eth0:1" is eth0), else a number. */
static void test_zone(void)
{
    ddp_ifaddr_t ifs[3];
    memset(ifs, 0, sizeof ifs);
    static const char *const names[] = {"lo", "eth0", "eth10"};
    for (int i = 0; i < 3; i++) {
        snprintf(ifs[i].name, sizeof ifs[i].name, "%s", names[i]);
        ifs[i].index = (unsigned)(i + 1);
    }
    static const struct {
        const char *addr, *zone;
        int rc;
        unsigned scope;
    } cases[] = {
        {"fe80::1", "eth0", 0, 2},   {"fe80::1", "eth10", 0, 3}, {"fe80::1", "eth0:1", 0, 2},
        {"fe80::1", "eth1", -1, 0},  {"fe80::1", "eth", -1, 0},  {"fe80::1", "7", 0, 7},
        {"fd00::1", "eth0", -1, 0},  {"fd00::1", "7", 0, 7},     {"fe80::1", "7x", -1, 0},
        {"fe80::1", "4294967295", 0, 4294967295u},               {"fe80::1", "4294967296", -1, 0},
        {"ff02::1", "lo", 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_addr_t a = A(cases[i].addr, 0);
        uint32_t scope = 0;
        int rc = ddp_addr_zone(&a, cases[i].zone, ifs, 3, &scope);
        int ok = rc == cases[i].rc && (rc || scope == cases[i].scope);
        if (!ok)
            printf("\n  %s%%%s: rc %d scope %u, want %d %u\n", cases[i].addr, cases[i].zone, rc,
                   (unsigned)scope, cases[i].rc, cases[i].scope);
        CU_ASSERT_TRUE(ok);
    }
}

/* Where "::" stands the zeros go, and the groups after it move to the end. */
static void test_pton6_positions(void)
{
    static const struct {
        const char *text;
        unsigned char ip[16];
        int ok;
    } cases[] = {
        {"1::2:3", {0, 1, [12] = 0, 2, 0, 3}, 1},
        {"1:2:3:4:5:6:7::", {0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 0}, 1},
        {"::2:3:4:5:6:7:8", {0, 0, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8}, 1},
        {"::ffff:1.2.3.4", {[10] = 0xff, 0xff, 1, 2, 3, 4}, 1},
        {"abcd::ef01", {0xab, 0xcd, [14] = 0xef, 0x01}, 1},
        {"1:2:3:4:5:6:7:8:9", {0}, 0},
        {"1::2::3", {0}, 0},
        {"12345::", {0}, 0},
        {"1:2:3:4:5:6:7:8::", {0}, 0},
        {"1:", {0}, 0},
        {":1::", {0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t ip[16];
        memset(ip, 0xee, sizeof ip);
        int ok = ddp_inet_pton6(cases[i].text, strlen(cases[i].text), ip);
        int same = !ok || !memcmp(ip, cases[i].ip, 16);
        if (ok != cases[i].ok || !same)
            printf("\n  %s: ok %d, bytes %s\n", cases[i].text, ok, same ? "as wanted" : "wrong");
        CU_ASSERT_EQUAL(ok, cases[i].ok);
        CU_ASSERT_TRUE(same);
    }
}

/* Rank 0's master-address check compares IPv6 addresses with its node's:
 * node 1's fd00::2 is not node 0's fd00::1 (they share 15 bytes), another
 * spelling of fd00::1 is. */
static void test_master_check_v6(void)
{
    static const struct {
        const char *master, *expect;
    } cases[] = {
        {"fd00::2", "expect fail ranks=0 error=config mentions=\"not an address of node0\""},
        {"fd00::1", "expect ok"},
        {"fd00:0:0:0:0:0:0:1", "expect ok"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "scenario \"v6 master\"\nnodes 2\ndevices 1\ntimeout 10s\n"
                 "iface node=0 eth0 10.0.0.1/8 fd00::1/64\n"
                 "iface node=1 eth0 10.0.0.2/8 fd00::2/64\nmaster_addr %s\n%s\n",
                 cases[i].master, cases[i].expect);
        ddp_scenario_t *s = ddp_test_scenario(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", NULL, &r), 0);
        if (!r.pass)
            printf("\n  MASTER_ADDR=%s: %s\n", cases[i].master, r.why);
        CU_ASSERT_TRUE(r.pass);
        ddp_scenario_free(s);
    }
}

DDP_SUITE("newest_addr", NULL, NULL,
          {"rank 0's master check compares IPv6 addresses whole", test_master_check_v6},
          {"IPv6 equality: every byte, the port, the family", test_equal},
          {"any, loopback, link-local at the edges of their ranges", test_classes},
          {"network match: whole bytes, then the prefix's bits", test_in_net},
          {"zones: interface names of link-local addresses, else numbers", test_zone},
          {"inet_pton6 puts the groups where they belong", test_pton6_positions})
