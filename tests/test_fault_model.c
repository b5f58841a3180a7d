/* tests/test_fault_model.c — the fault model of ddp/faults.h: rank sets,
 * triggers, faultset windows and hits, and what the simulator and the
 * scenario runner make of them (event windows, late starts, vacuous runs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/scenario.h"
#include "test.h"

static void test_rankset(void)
{
    static const struct {
        const char *text;
        int ok, max;
        int in[4], out[4]; /* ranks in / not in the set; -1 ends */
    } cases[] = {
        {NULL, 1, -1, {0, 7, 1000, -1}, {-1}},
        {"", 1, -1, {0, 3, -1}, {-1}}, /* empty: every rank, for faults and expects alike */
        {"3", 1, 3, {3, -1}, {2, 4, -1}},
        {"0,2-5", 1, 5, {0, 2, 5, -1}, {1, 6, -1}},
        {"7,1", 1, 7, {1, 7, -1}, {0, 2, -1}},
        {"1-", 0, 0, {-1}, {-1}},
        {"5-3", 0, 0, {-1}, {-1}},
        {"1,,2", 0, 0, {-1}, {-1}},
        {"a", 0, 0, {-1}, {-1}},
        {"2,", 0, 0, {-1}, {-1}},
        {"0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", 0, 0, {-1}, {-1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_rankset_t rs;
        int rc = ddp_rankset_parse(cases[i].text, &rs);
        CU_ASSERT_EQUAL(rc == 0, cases[i].ok);
        if (rc) {
            CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "expected"));
            continue;
        }
        CU_ASSERT_EQUAL(ddp_rankset_max(&rs), cases[i].max);
        for (int k = 0; cases[i].in[k] >= 0; k++)
            CU_ASSERT_TRUE(ddp_rankset_has(&rs, cases[i].in[k]));
        for (int k = 0; cases[i].out[k] >= 0; k++)
            CU_ASSERT_FALSE(ddp_rankset_has(&rs, cases[i].out[k]));
    }
}

static void test_triggers(void)
{
    static const struct {
        const char *text;
        ddp_trigger_kind_t kind;
        const char *back; /* NULL: an error */
    } cases[] = {
        {"enter:barrier", DDP_TRIG_ENTER, "enter:barrier"},
        {"leave:wait for workers@1", DDP_TRIG_LEAVE, "leave:wait for workers@1"},
        {"connect@0,2-3", DDP_TRIG_CONNECT, "connect@0,2-3"},
        {"joined:4", DDP_TRIG_JOINED, "joined:4"},
        {"set:default_pg/*", DDP_TRIG_SET, "set:default_pg/*"},
        {"wait:*@2", DDP_TRIG_WAIT, "wait:*@2"},
        {"barrier", DDP_TRIG_BARRIER, "barrier"},
        {"spawn@3", DDP_TRIG_SPAWN, "spawn@3"},
        {"exit@0", DDP_TRIG_EXIT, "exit@0"},
        {"mark:epoch1", DDP_TRIG_MARK, "mark:epoch1"},
        {"enter", 0, NULL},        /* enter needs a phase */
        {"barrier:x", 0, NULL},    /* barrier takes no argument */
        {"joined:0", 0, NULL},     /* a count of at least 1 */
        {"joined:4@1", 0, NULL},   /* the store sees joins for the whole job */
        {"spawn@x", 0, NULL},
        {"soon", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_fault_trigger_t t;
        int rc = ddp_trigger_parse(cases[i].text, &t);
        CU_ASSERT_EQUAL(rc == 0, cases[i].back != NULL);
        if (rc || !cases[i].back)
            continue;
        CU_ASSERT_EQUAL(t.kind, cases[i].kind);
        char buf[128];
        ddp_trigger_format(&t, buf, sizeof buf);
        CU_ASSERT_STRING_EQUAL(buf, cases[i].back);
    }
}

/* A window that opens on rank 1 entering the barrier (+50 ms) and closes
 * when it leaves; hits and count= along the way. */
static void test_faultset_windows(void)
{
    ddp_fault_t f[2];
    memset(f, 0, sizeof f);
    f[0] = (ddp_fault_t){.kind = DDP_FAULT_REFUSE, .node = -1, .task = -1, .peer_node = -1,
                         .start_ns = 50, .count = 2};
    ddp_trigger_parse("enter:barrier@1", &f[0].start_on);
    ddp_trigger_parse("leave:barrier@1", &f[0].end_on);
    f[1] = (ddp_fault_t){.kind = DDP_FAULT_RESOLVE, .node = -1, .task = -1, .peer_node = -1,
                         .start_ns = 100, .end_ns = 200, .ranks = "2"};
    ddp_faultset_t fs;
    CU_ASSERT_EQUAL_FATAL(ddp_faultset_init(&fs, f, 2, 1000, NULL, 4), 0);
    CU_ASSERT_EQUAL(fs.events, 1);
    ddp_fault_call_t c = {.point = DDP_FP_SYS_NET_CONNECT, .node = 0, .rank = 0, .task = 0,
                          .peer_node = 1, .port = 29500, .now = 1000};
    int err = 0;
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &c, &err), -1); /* not open yet */
    ddp_fault_event_t ev = {.kind = DDP_TRIG_ENTER, .rank = 0, .name = "barrier", .value = -1};
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 1100), 0); /* rank 0: not the trigger */
    ev.rank = 1;
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 1100), 1);
    c.now = 1149;
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &c, &err), -1); /* the offset */
    c.now = 1150;
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &c, &err), 0);
    CU_ASSERT_EQUAL(err, 111 /* ECONNREFUSED */);
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &c, &err), 0);
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &c, &err), -1); /* count=2 spent */
    CU_ASSERT_EQUAL(fs.st[0].hits, 2);
    ev.kind = DDP_TRIG_LEAVE;
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 1300), 1);
    CU_ASSERT_FALSE(ddp_faultset_active(&fs, 0, 1300));
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 0, 1299));
    /* a time window aimed at rank 2 only */
    ddp_fault_call_t r = {.point = DDP_FP_SYS_NET_RESOLVE, .node = 1, .rank = 1, .task = 1,
                          .peer_node = -1, .now = 1150};
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &r, &err), -1);
    r.rank = 2;
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &r, &err), 1);
    r.now = 1200;
    CU_ASSERT_EQUAL(ddp_faultset_match(&fs, &r, &err), -1);
    CU_ASSERT_EQUAL(fs.st[1].hits, 1);
    ddp_faultset_free(&fs);
}

/* The barrier and mark events come from store sets. */
static void test_faultset_store_events(void)
{
    ddp_fault_t f[2];
    memset(f, 0, sizeof f);
    for (int i = 0; i < 2; i++)
        f[i] = (ddp_fault_t){.kind = DDP_FAULT_PARTITION, .node = -1, .task = -1,
                             .peer_node = -1, .node_set = 1};
    ddp_trigger_parse("barrier", &f[0].start_on);
    f[0].end_ns = 100; /* with an event start, a time end is the length */
    ddp_trigger_parse("mark:epoch1", &f[1].start_on);
    ddp_faultset_t fs;
    CU_ASSERT_EQUAL_FATAL(ddp_faultset_init(&fs, f, 2, 0, NULL, 4), 0);
    ddp_fault_event_t ev = {.kind = DDP_TRIG_SET, .rank = -1,
                            .name = "default_pg/store_based_barrier_key:1", .value = 3};
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 10), 0); /* 3 of 4 */
    ev.value = 4;
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 20), 1);
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 0, 20));
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 0, 119));
    CU_ASSERT_FALSE(ddp_faultset_active(&fs, 0, 120));
    CU_ASSERT_FALSE(ddp_faultset_active(&fs, 1, 20));
    ev = (ddp_fault_event_t){.kind = DDP_TRIG_SET, .rank = -1, .name = "ddpsim/mark/epoch2",
                             .value = -1};
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 30), 0);
    ev.name = "/worker/attempt_0/xddpsim/mark/epoch1"; /* not a mark */
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 35), 0);
    ev.name = "/worker/attempt_0/ddpsim/mark/epoch1"; /* under torch's agent store prefix */
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 40), 1);
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 1, 40));
    ddp_faultset_free(&fs);
}

/* set:/wait: globs name the key as the program did: TCPStore sends "/"+key
 * on the wire, and a PrefixStore puts its prefix before that. */
static void test_faultset_key_globs(void)
{
    ddp_fault_t f[2];
    memset(f, 0, sizeof f);
    for (int i = 0; i < 2; i++)
        f[i] = (ddp_fault_t){.kind = DDP_FAULT_DELAY, .node = -1, .task = -1,
                             .peer_node = -1, .delay_ns = 1};
    ddp_trigger_parse("set:k0", &f[0].start_on);
    ddp_trigger_parse("wait:ready*", &f[1].start_on);
    ddp_faultset_t fs;
    CU_ASSERT_EQUAL_FATAL(ddp_faultset_init(&fs, f, 2, 0, NULL, 2), 0);
    ddp_fault_event_t ev = {.kind = DDP_TRIG_SET, .rank = -1, .name = "/xk0", .value = -1};
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 5), 0);
    ev.name = "/k01";
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 6), 0);
    ev.kind = DDP_TRIG_WAIT, ev.name = "/k0"; /* a wait is not a set */
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 7), 0);
    ev.kind = DDP_TRIG_SET;
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 10), 1);
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 0, 10));
    ev.kind = DDP_TRIG_WAIT, ev.name = "default_pg//ready3";
    CU_ASSERT_EQUAL(ddp_faultset_event(&fs, &ev, 20), 1);
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 1, 20));
    CU_ASSERT_FALSE(ddp_faultset_active(&fs, 1, 19));
    ddp_faultset_free(&fs);
}

static ddp_scenario_t *parse(const char *text)
{
    ddp_scenario_t *s = NULL;
    char err[512];
    int rc = ddp_scenario_parse(text, "t.scn", NULL, &s, err, sizeof err);
    if (rc)
        printf("\n  %s\n", err);
    return rc ? NULL : s;
}

static void test_scenario_syntax(void)
{
    ddp_scenario_t *s = parse("scenario \"events\"\nnodes 2\ndevices 2\n"
                              "fault partition nodes=1 start=\"enter:store connect@1+50ms\" "
                              "end=leave:barrier@1 may-miss\n"
                              "late ranks=3 by=20s\n"
                              "fault crash ranks=1 start=barrier\n"
                              "expect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->nfaults, 3);
    CU_ASSERT_EQUAL(s->faults[0].start_on.kind, DDP_TRIG_ENTER);
    CU_ASSERT_STRING_EQUAL(s->faults[0].start_on.arg, "store connect");
    CU_ASSERT_EQUAL(s->faults[0].start_ns, 50000000);
    CU_ASSERT_TRUE(s->faults[0].may_miss);
    CU_ASSERT_EQUAL(s->faults[1].kind, DDP_FAULT_LATE);
    CU_ASSERT_EQUAL(s->faults[1].delay_ns, 20000000000LL);
    char *text = ddp_scenario_text(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    ddp_scenario_t *back = parse(text);
    char why[256] = "";
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_TRUE(ddp_scenario_equal(s, back, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "late ranks=3 by=20s"));
    free(text);
    ddp_scenario_free(back);
    ddp_scenario_free(s);
    /* events the scenario can never produce are errors at their column */
    static const struct {
        const char *line, *want;
    } bad[] = {
        {"fault crash ranks=1 start=enter:nowhere", "1:33: expected a phase"},
        {"fault crash ranks=1 start=spawn@9", "expected an event of ranks 0..3"},
        {"fault crash ranks=1 start=soon", "expected a time or an event"},
        {"fault crash ranks=1 start=barrier+x", "1:35: expected"},
        {"late ranks=1", "expected by="},
        {"late ranks=1 by=1s start=2s", "expected ranks=, node= and by= on a late line"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text2[512], err[512];
        snprintf(text2, sizeof text2, "%s\nscenario \"x\"\nnodes 2\ndevices 2\nexpect invariants\n",
                 bad[i].line);
        ddp_scenario_t *x = NULL;
        CU_ASSERT_NOT_EQUAL(ddp_scenario_parse(text2, "b.scn", NULL, &x, err, sizeof err), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].want));
        if (!strstr(err, bad[i].want))
            printf("\n  case %zu: %s\n", i, err);
        ddp_scenario_free(x);
    }
}

static void run1(const char *text, const char *accel, ddp_scn_result_t *r)
{
    ddp_scenario_t *s = parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ddp_scenario_run(s, accel, NULL, r), 0);
    ddp_scenario_free(s);
}

/* In the simulator: a crash aimed at a phase by an event hits; a fault
 * whose window opens after the run is vacuous, unless may-miss. */
static void test_sim_events_and_vacuous(void)
{
    ddp_scn_result_t r;
    const char *base = "scenario \"x\"\nnodes 2\ndevices 2\n";
    char text[1024];
    snprintf(text, sizeof text,
             "%sfault crash ranks=1 start=enter:barrier@1\nexpect crashed ranks=1\n"
             "expect fail ranks=others\n", base);
    run1(text, "ddp", &r);
    CU_ASSERT_TRUE(r.pass);
    CU_ASSERT_EQUAL(r.crashed, 1);
    CU_ASSERT_EQUAL(r.nhits, 1);
    CU_ASSERT_EQUAL(r.hits[0], 1);
    /* mistimed: the run is over long before 100 s */
    snprintf(text, sizeof text, "%sfault refuse node=1 start=100s end=110s\nexpect ok\n", base);
    run1(text, "ddp", &r);
    CU_ASSERT_FALSE(r.pass);
    CU_ASSERT_TRUE(r.vacuous);
    CU_ASSERT_EQUAL(r.hits[0], 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.why, "vacuous: fault refuse (line 4) acted on nothing"));
    snprintf(text, sizeof text, "%sfault refuse node=1 start=100s end=110s may-miss\n"
                                "expect ok\n", base);
    run1(text, "ddp", &r);
    CU_ASSERT_TRUE(r.pass);
    CU_ASSERT_FALSE(r.vacuous);
    /* the same refusal aimed at rank 1's store connect hits it */
    snprintf(text, sizeof text,
             "%sfault refuse ranks=1 start=\"enter:store connect@1\" end=connect@1+1s count=3\n"
             "expect ok\n", base);
    run1(text, "ddp", &r);
    CU_ASSERT_TRUE(r.pass);
    CU_ASSERT_EQUAL(r.hits[0], 3);
    CU_ASSERT_TRUE(r.retries >= 3);
}

/* late ranks=3 by=20s: rank 3's process starts 20 s late, the others wait
 * for it; a partition an event ends holds segments until then. */
static void test_sim_late_and_held(void)
{
    ddp_scn_result_t r;
    run1("scenario \"x\"\nnodes 2\ndevices 2\nlauncher torchrun\nlate ranks=3 by=20s\n"
         "expect ok\n",
         "ddp", &r);
    CU_ASSERT_TRUE(r.pass);
    CU_ASSERT_EQUAL(r.hits[0], 1);
    CU_ASSERT_TRUE(r.virtual_ns >= 20000000000LL);
    run1("scenario \"x\"\nnodes 2\ndevices 2\n"
         "fault partition nodes=1 start=connect@2 end=connect@2+3s\nexpect ok\n",
         "ddp", &r);
    CU_ASSERT_TRUE(r.pass);
    CU_ASSERT_TRUE(r.hits[0] > 0);
    CU_ASSERT_TRUE(r.virtual_ns >= 3000000000LL);
}

/* A custom plugin's own phase aims a partition at its handshake under
 * every accelerator (scenarios/plugin-rpc-partition.scn). */
static void test_plugin_phase_partition(void)
{
    static const char *const accels[] = {"ddp", "ddp_spawn", "ddp_cpu", "ddp2", "ddp_hpc",
                                         "ddp_cpu_hpc"};
    ddp_scenario_t *s = NULL;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(
        ddp_scenario_load("scenarios/plugin-rpc-partition.scn", &s, err, sizeof err), 0);
    for (size_t i = 0; i < sizeof accels / sizeof accels[0]; i++) {
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, accels[i], NULL, &r), 0);
        CU_ASSERT_TRUE(r.pass);
        CU_ASSERT_TRUE(r.hits[0] > 0);
        /* healed 2 s after rank 0 entered rpc init: the SYNs got through */
        CU_ASSERT_TRUE(r.virtual_ns >= 2000000000LL);
        if (!r.pass || r.hits[0] <= 0)
            printf("\n  %s: %lld hits: %s\n", accels[i], r.hits[0], r.why);
    }
    ddp_scenario_free(s);
}

/* explore draws event windows too, and its scenarios keep them through
 * the writer and the parser (what a replay file holds). */
static void test_explore_draws_events(void)
{
    ddp_explore_opts_t o = {.ranks = 8, .seed = 1};
    int events = 0;
    for (int i = 0; i < 200; i++) {
        char accel[16];
        ddp_scenario_t *s = ddp_explore_draw(&o, i, accel, sizeof accel);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        int mine = 0;
        for (int k = 0; k < s->nfaults; k++)
            mine += ddp_fault_has_event(&s->faults[k]);
        if (mine) {
            events += mine;
            char *text = ddp_scenario_text(s), why[256] = "";
            ddp_scenario_t *back = text ? parse(text) : NULL;
            CU_ASSERT_PTR_NOT_NULL(back);
            CU_ASSERT_TRUE(back && ddp_scenario_equal(s, back, why, sizeof why));
            if (back && !ddp_scenario_equal(s, back, why, sizeof why))
                printf("\n  run %d: %s\n%s", i, why, text);
            ddp_scenario_free(back);
            free(text);
        }
        ddp_scenario_free(s);
    }
    CU_ASSERT_TRUE(events > 20);
}

DDP_SUITE("fault_model", NULL, NULL, {"rank sets: one parser, empty is every rank", test_rankset},
          {"triggers: parse, format, errors", test_triggers},
          {"faultset: event windows, offsets, count, aim", test_faultset_windows},
          {"faultset: barrier and mark events from store sets", test_faultset_store_events},
          {"faultset: set/wait globs match the program's key", test_faultset_key_globs},
          {"scenario syntax: events, may-miss, late; round trip; errors", test_scenario_syntax},
          {"simulator: event-aimed faults hit, mistimed ones are vacuous", test_sim_events_and_vacuous},
          {"simulator: late ranks, a partition held until its event", test_sim_late_and_held},
          {"a plugin's own phase aims a partition under every accelerator",
           test_plugin_phase_partition},
          {"explore draws event windows, and its files keep them", test_explore_draws_events})
