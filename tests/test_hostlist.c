/* tests/test_hostlist.c — SLURM hostlist expansion and compression.
 *
 * The expected outputs of the valid expressions are SLURM 22.05's
 * `scontrol show hostnames` / `scontrol show hostlist`: the rows below were
 * checked by hand, tests/hostlist/scontrol-22.05.txt was recorded from
 * scontrol (tests/hostlist/record.sh), and tests/hostlist/vs-scontrol.sh
 * compares against a live scontrol in CI. Rows marked "ddpsim extension"
 * (text after a name's last bracket group) are rejected by SLURM 22.05. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ddp/cluster.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/sys.h"
#include "test.h"

/* Joins hosts with ' ' into buf ("" on error). */
static const char *expand_joined(const char *expr, char *buf, size_t n,
                                 int *rc)
{
    char **hosts = NULL;
    size_t nh = 0;
    buf[0] = '\0';
    *rc = ddp_hostlist_expand(expr, 0, &hosts, &nh);
    if (*rc < 0)
        return buf;
    size_t off = 0;
    for (size_t i = 0; i < nh; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? " " : "",
                                hosts[i]);
    ddp_hostlist_free(hosts, nh);
    return buf;
}

static void test_expand_table(void)
{
    static const struct {
        const char *expr, *hosts;
    } rows[] = {
        {"node1", "node1"},
        {"node[001-004,007]", "node001 node002 node003 node004 node007"},
        {"node[8-10]", "node8 node9 node10"},
        {"node[08-10]", "node08 node09 node10"},
        {"n[1-010]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10"},
        {"n[001-4]", "n001 n002 n003 n004"},
        {"host[22]", "host22"},
        {"host[5-9,1]", "host5 host6 host7 host8 host9 host1"},
        {"1.2.3.[100-102]", "1.2.3.100 1.2.3.101 1.2.3.102"},
        {"alpha, host[5-6], gamma", "alpha host5 host6 gamma"},
        {"alpha[3,1], beta", "alpha3 alpha1 beta"},
        {"node[1-3],x", "node1 node2 node3 x"},
        {"a b", "a b"},              /* whitespace separates, as in SLURM */
        {"  a ,\tb  ", "a b"},
        {"[1-3]", "1 2 3"},
        {"n[1-2],n[1-2]", "n1 n2 n1 n2"}, /* duplicates kept, as SLURM */
        {"n[0-0]", "n0"},
        /* Several groups: the last turns fastest, then the first, ... */
        {"a[1-2]b[3-4]", "a1b3 a1b4 a2b3 a2b4"},
        {"a[1-2]b[3-4]c[5-6]",
         "a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 a2b4c6"},
        {"a[1-2][3-4][5]", "a135 a235 a145 a245"}, /* scontrol, yes */
        /* ddpsim extension: a suffix after the last group. */
        {"a[1-2]-ib", "a1-ib a2-ib"},
        {"a[1-2]b[3-4]c", "a1b3c a1b4c a2b3c a2b4c"},
        {"x[1-2]y[01-02]z", "x1y01z x1y02z x2y01z x2y02z"},
        {"x[1-2]y[1-2]z[1-2]w",
         "x1y1z1w x1y1z2w x2y1z1w x2y1z2w x1y2z1w x1y2z2w x2y2z1w x2y2z2w"},
        {"r[1-2]n[1,3],gpu[09-10]-ib",
         "r1n1 r1n3 r2n1 r2n3 gpu09-ib gpu10-ib"},
    };
    char buf[512];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc;
        expand_joined(rows[i].expr, buf, sizeof buf, &rc);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_STRING_EQUAL(buf, rows[i].hosts);
        if (rc != 0 || strcmp(buf, rows[i].hosts) != 0)
            fprintf(stderr, "\n  %s -> \"%s\" (%s), want \"%s\"\n",
                    rows[i].expr, buf, rc ? ddp_err_message() : "ok",
                    rows[i].hosts);
    }
}

/* Lightning's own table for the root (first) host of SLURM_NODELIST. */
static void test_lightning_root_table(void)
{
    static const struct {
        const char *expr, *first;
    } rows[] = {
        {"1.2.3.[100-110]", "1.2.3.100"}, {"host[22]", "host22"},
        {"host[1,5-9]", "host1"},         {"host[5-9,1]", "host5"},
        {"alpha, host[5-9], gamma", "alpha"},
        {"alpha[3,1], beta", "alpha3"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char **hosts = NULL;
        size_t n = 0;
        CU_ASSERT_EQUAL_FATAL(ddp_hostlist_expand(rows[i].expr, 0, &hosts, &n),
                              0);
        CU_ASSERT(n >= 1);
        CU_ASSERT_STRING_EQUAL(hosts[0], rows[i].first);
        ddp_hostlist_free(hosts, n);
    }
    /* The counts, so a row cannot pass by stopping after the first host. */
    char **hosts;
    size_t n;
    CU_ASSERT_EQUAL(ddp_hostlist_expand("1.2.3.[100-110]", 0, &hosts, &n), 0);
    CU_ASSERT_EQUAL(n, 11);
    CU_ASSERT_STRING_EQUAL(hosts[10], "1.2.3.110");
    ddp_hostlist_free(hosts, n);
    CU_ASSERT_EQUAL(ddp_hostlist_expand("alpha, host[5-9], gamma", 0, &hosts,
                                        &n),
                    0);
    CU_ASSERT_EQUAL(n, 7);
    CU_ASSERT_STRING_EQUAL(hosts[6], "gamma");
    ddp_hostlist_free(hosts, n);
}

static void test_invalid_table(void)
{
    static const struct {
        const char *expr;
        int code;
        const char *why;
    } rows[] = {
        {"node[1-", DDP_ECONFIG, "unbalanced '[' at position 5"},
        {"node[1-4", DDP_ECONFIG, "unbalanced '[' at position 5"},
        {"node[1", DDP_ECONFIG, "unbalanced '[' at position 5"},
        {"node[", DDP_ECONFIG, "unbalanced '[' at position 5"},
        {"n]", DDP_ECONFIG, "unbalanced ']' at position 2"},
        {"n[1-2]]", DDP_ECONFIG, "unbalanced ']' at position 7"},
        {"n[1[2]]", DDP_ECONFIG, "nested '[' at position 4"},
        {"n[]", DDP_ECONFIG, "empty range \"[]\" at position 2"},
        {"n[1,]", DDP_ECONFIG, "empty range element at position 5"},
        {"n[,1]", DDP_ECONFIG, "empty range element at position 3"},
        {"n[1,,2]", DDP_ECONFIG, "empty range element at position 5"},
        {"node[5-1]", DDP_ECONFIG, "reversed range at position 6"},
        {"node[5-]", DDP_ECONFIG, "range without an end at position 6"},
        {"n[a]", DDP_ECONFIG, "'a' in a range at position 3"},
        {"n[1-b]", DDP_ECONFIG, "'b' in a range at position 5"},
        {"n[1 ]", DDP_ECONFIG, "' ' in a range at position 4"},
        {"n[-3]", DDP_ECONFIG, "'-' in a range at position 3"},
        {"n[1-2-3]", DDP_ECONFIG, "'-' in a range at position 6"},
        {"", DDP_ECONFIG, "empty expression"},
        {"   ", DDP_ECONFIG, "empty expression"},
        {"a,,b", DDP_ECONFIG, "empty host name at position 3"},
        {",a", DDP_ECONFIG, "empty host name at position 1"},
        {"a,", DDP_ECONFIG, "empty host name at position 3"},
        {"n[1234567890123456789]", DDP_ECONFIG, "number too long"},
        {"n[1-2000000]", DDP_ELIMIT, "more than 1000000 hosts"},
        {"n[1-1000][1-1001]", DDP_ELIMIT, "more than 1000000 hosts"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char **hosts = (char **)1;
        size_t n = 99;
        int rc = ddp_hostlist_expand(rows[i].expr, 0, &hosts, &n);
        CU_ASSERT_EQUAL(rc, rows[i].code);
        CU_ASSERT_PTR_NULL(hosts);
        CU_ASSERT_EQUAL(n, 0);
        const char *m = ddp_err_message();
        CU_ASSERT_PTR_NOT_NULL(strstr(m, rows[i].why));
        if (rows[i].code == DDP_ECONFIG) {
            char quoted[64];
            snprintf(quoted, sizeof quoted, "\"%s\"", rows[i].expr);
            CU_ASSERT_PTR_NOT_NULL(strstr(m, quoted));
            CU_ASSERT_PTR_NOT_NULL(strstr(m, "expected e.g. node[1-4,7]"));
        }
        if (rc != rows[i].code || !strstr(m, rows[i].why))
            fprintf(stderr, "\n  %s -> %d %s\n", rows[i].expr, rc, m);
    }
    /* The exact sentence a user sees. */
    ddp_hostlist_expand("node[1-", 0, &(char **){NULL}, &(size_t){0});
    CU_ASSERT_STRING_EQUAL(ddp_err_ctx()->what,
                           "invalid hostlist \"node[1-\": unbalanced '[' at "
                           "position 5; expected e.g. node[1-4,7]");
    CU_ASSERT_EQUAL(ddp_hostlist_expand(NULL, 0, &(char **){NULL},
                                        &(size_t){0}),
                    DDP_ECONFIG);
}

static void test_max_hosts(void)
{
    char **hosts;
    size_t n;
    CU_ASSERT_EQUAL(ddp_hostlist_expand("n[1-10]", 10, &hosts, &n), 0);
    CU_ASSERT_EQUAL(n, 10);
    ddp_hostlist_free(hosts, n);
    CU_ASSERT_EQUAL(ddp_hostlist_expand("n[1-10]", 9, &hosts, &n), DDP_ELIMIT);
    CU_ASSERT_EQUAL(ddp_hostlist_expand("a[1-5],b[1-5]", 9, &hosts, &n),
                    DDP_ELIMIT);
    CU_ASSERT_EQUAL(ddp_hostlist_expand("a[1-3][1-3]", 9, &hosts, &n), 0);
    CU_ASSERT_EQUAL(n, 9);
    ddp_hostlist_free(hosts, n);
    CU_ASSERT_EQUAL(ddp_hostlist_expand("a[1-3][1-4]", 9, &hosts, &n),
                    DDP_ELIMIT);
}

/* Splits "a b c" into a static array of pointers into buf. */
static size_t split_words(char *buf, const char **out, size_t max)
{
    size_t n = 0;
    for (char *t = strtok(buf, " "); t && n < max; t = strtok(NULL, " "))
        out[n++] = t;
    return n;
}

static void check_round_trip(const char *const *hosts, size_t n,
                             const char *expr)
{
    char **back = NULL;
    size_t nb = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_hostlist_expand(expr, 0, &back, &nb), 0);
    CU_ASSERT_EQUAL(nb, n);
    for (size_t i = 0; i < n && i < nb; i++) {
        CU_ASSERT_STRING_EQUAL(back[i], hosts[i]);
        if (strcmp(back[i], hosts[i]) != 0) {
            fprintf(stderr, "\n  round trip of %s: host %zu is %s, want %s\n",
                    expr, i, back[i], hosts[i]);
            break;
        }
    }
    ddp_hostlist_free(back, nb);
}

static void test_compress_table(void)
{
    /* Every "want" is what scontrol show hostlist prints for the hosts. */
    static const struct {
        const char *hosts, *want;
    } rows[] = {
        {"node1", "node1"},
        {"node1 node2 node3 node5", "node[1-3,5]"},
        {"node9 node10", "node[9-10]"},
        {"node08 node9", "node[08,9]"},
        {"node1 node02", "node[1,02]"},
        {"node099 node100", "node[099-100]"},
        {"a1b a2b", "a1b,a2b"},
        {"1.2.3.100 1.2.3.101", "1.2.3.[100-101]"},
        {"n3 n1 n2", "n[3,1-2]"},
        {"1 2 3", "[1-3]"},
        {"n1 n2 n1", "n[1-2,1]"},
        {"x n1 n2 y n3", "x,n[1-2],y,n3"},
        {"n1 n2 m1 n3", "n[1-2],m1,n3"},
        {"n10 n9", "n[10,9]"},
        {"node001 node002 node003 node004 node007", "node[001-004,007]"},
        {"alpha host5 host6 host7 gamma", "alpha,host[5-7],gamma"},
        {"gpu09-ib gpu10-ib", "gpu09-ib,gpu10-ib"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char buf[256];
        const char *hosts[16];
        snprintf(buf, sizeof buf, "%s", rows[i].hosts);
        size_t n = split_words(buf, hosts, 16);
        char *out = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_hostlist_compress(hosts, n, &out), 0);
        CU_ASSERT_STRING_EQUAL(out, rows[i].want);
        check_round_trip(hosts, n, out);
        free(out);
    }
}

static void test_compress_invalid(void)
{
    char *out = (char *)1;
    const char *empty[] = {"a", ""};
    CU_ASSERT_EQUAL(ddp_hostlist_compress(empty, 2, &out), DDP_ECONFIG);
    CU_ASSERT_PTR_NULL(out);
    const char *bracket[] = {"a[1]"};
    CU_ASSERT_EQUAL(ddp_hostlist_compress(bracket, 1, &out), DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "'['"));
    const char *comma[] = {"a,b"};
    CU_ASSERT_EQUAL(ddp_hostlist_compress(comma, 1, &out), DDP_ECONFIG);
    CU_ASSERT_EQUAL(ddp_hostlist_compress(NULL, 0, &out), DDP_ECONFIG);
}

/* Seeded random host lists: compressing then expanding must give the list
 * back, in order, whatever mix of prefixes, padding and order it has. */
static void test_compress_round_trip_random(void)
{
    static const char *const prefixes[] = {"node", "gpu", "n", "1.2.3.", "",
                                           "a1b"};
    ddp_rng_t rng;
    ddp_rng_seed(&rng, 20240601);
    for (int iter = 0; iter < 300; iter++) {
        size_t n = 1 + (size_t)ddp_rng_below(&rng, 40);
        char **hosts = calloc(n, sizeof *hosts);
        unsigned long num = (unsigned long)ddp_rng_below(&rng, 120);
        for (size_t i = 0; i < n; i++) {
            const char *p = prefixes[ddp_rng_below(&rng, 6)];
            /* Mostly runs, sometimes jumps, sometimes padding. */
            uint64_t r = ddp_rng_below(&rng, 10);
            num = r < 6 ? num + 1 : r < 8 ? num + ddp_rng_below(&rng, 5) : 0;
            int width = ddp_rng_below(&rng, 4) == 0 ? 3 : 0;
            char h[64];
            if (ddp_rng_below(&rng, 15) == 0)
                snprintf(h, sizeof h, "%s%lux", p, num); /* no number */
            else
                snprintf(h, sizeof h, "%s%0*lu", p, width, num);
            hosts[i] = strdup(h);
        }
        char *expr = NULL;
        CU_ASSERT_EQUAL_FATAL(
            ddp_hostlist_compress((const char *const *)hosts, n, &expr), 0);
        check_round_trip((const char *const *)hosts, n, expr);
        free(expr);
        ddp_hostlist_free(hosts, n);
    }
}

/* The table recorded from scontrol (SLURM 22.05.8): each expression's
 * expansion and the compression of its hosts, byte for byte. */
static void test_scontrol_table(void)
{
    FILE *f = fopen("tests/hostlist/scontrol-22.05.txt", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char line[1 << 16];
    int rows = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || !line[0])
            continue;
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
        *t1 = *t2 = '\0';
        const char *expr = line, *want = t1 + 1, *want_c = t2 + 1;
        rows++;
        char **hosts = NULL;
        size_t n = 0;
        int rc = ddp_hostlist_expand(expr, 0, &hosts, &n);
        CU_ASSERT_EQUAL(rc, 0);
        char joined[1 << 14];
        size_t off = 0;
        joined[0] = '\0';
        for (size_t i = 0; i < n && off < sizeof joined; i++)
            off += (size_t)snprintf(joined + off, sizeof joined - off, "%s%s",
                                    i ? " " : "", hosts[i]);
        char *c = NULL;
        if (rc == 0)
            CU_ASSERT_EQUAL(ddp_hostlist_compress((const char *const *)hosts, n, &c), 0);
        if (rc || strcmp(joined, want) || !c || strcmp(c, want_c)) {
            if (bad++ < 5)
                printf("\n  %s\n    scontrol: %s | %s\n    ddpsim:   %s | %s\n", expr,
                       want, want_c, joined, c ? c : "(none)");
        }
        free(c);
        ddp_hostlist_free(hosts, n);
    }
    fclose(f);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(rows >= 250);
}

static int run_cmd(const char *args, char *out, size_t n)
{
    return ddp_test_ddpsim(args, 0, out, n);
}

static void test_cmd_hostlist(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    char out[512];
    CU_ASSERT_EQUAL(run_cmd("hostlist 'node[08-10],x'", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "node08\nnode09\nnode10\nx\n");
    CU_ASSERT_EQUAL(run_cmd("hostlist 'node[1-'", out, sizeof out), 2);
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_EQUAL(run_cmd("hostlist --compress node1,node2,node3 node5", out,
                            sizeof out),
                    0);
    CU_ASSERT_STRING_EQUAL(out, "node[1-3,5]\n");
    CU_ASSERT_EQUAL(run_cmd("hostlist --help", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ddpsim hostlist"));
    CU_ASSERT_EQUAL(run_cmd("hostlist", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_cmd("hostlist --bogus x", out, sizeof out), 2);
}

DDP_SUITE("hostlist", NULL, NULL,
          {"expand table", test_expand_table},
          {"expansion and compression table recorded from scontrol", test_scontrol_table},
          {"lightning root table", test_lightning_root_table},
          {"invalid expressions", test_invalid_table},
          {"max hosts", test_max_hosts},
          {"compress table", test_compress_table},
          {"compress invalid", test_compress_invalid},
          {"compress round trip (random)", test_compress_round_trip_random},
          {"ddpsim hostlist", test_cmd_hostlist})
