/* tests/test_cli.c — the ddpsim command line: every subcommand's bad options
 * (unknown option, missing value, junk, out of range) exit 2 with exactly
 * one line on stderr naming the subcommand, the option and its valid form;
 * the command-line bugs of issue 12; the run table (expected / actual /
 * verdict, titles, messages in full and wrapped to COLUMNS), output paths
 * checked before the first run, and an all-skipped run's exit status.
 *
 * It runs the built command ($DDPSIM, set by `make test`) and skips outside
 * `make test`. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp/faults.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"


/* One bad command line: exit 2, one line on stderr, naming "ddpsim CMD",
 * the option (want) and a valid form ("expected ..."). */
typedef struct bad_case {
    const char *args, *want;
} bad_case_t;

static int check_bad(const char *args, const char *want)
{
    char err[4096];
    /* Refused at once; 15 s, not the usual limit: an option wrongly taken
     * (a count out of range, a port of "abc") must not run a sweep or a
     * server until the suite's own bound stops it. */
    int st = ddp_test_ddpsim_io_within(15, NULL, args, 1, err, sizeof err);
    char sub[64];
    snprintf(sub, sizeof sub, "ddpsim %.*s", (int)strcspn(args, " "), args);
    const char *nl = strchr(err, '\n');
    int one_line = nl && nl[1] == '\0';
    int good = st == 2 && one_line && !strncmp(err, sub, strlen(sub)) &&
               strstr(err, want) && strstr(err, "expected");
    if (!good)
        printf("\n  ddpsim %s: exit %d (want 2), stderr (want one line with \"%s\", "
               "\"%s\" and \"expected\"):\n%s",
               args, st, sub, want, err);
    return good;
}

static void run_bad_cases(const bad_case_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_TRUE(check_bad(c[i].args, c[i].want));
}

#define RUN_BAD(table) run_bad_cases(table, sizeof table / sizeof table[0])

static void test_bad_run_replay_explore(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static const bad_case_t c[] = {
        {"run --bogus scenarios/clean-start.scn", "\"--bogus\""},
        {"run scenarios/clean-start.scn --jobs", "--jobs"},
        {"run scenarios/clean-start.scn --jobs abc", "--jobs \"abc\""},
        {"run scenarios/clean-start.scn --jobs 65", "--jobs \"65\""},
        {"run scenarios/clean-start.scn --jobs ' 2'", "--jobs \" 2\""}, /* strtol skips it */
        {"run scenarios/clean-start.scn --seed 0", "--seed \"0\""},
        {"run scenarios/clean-start.scn --seed -3", "--seed \"-3\""},
        {"run scenarios/clean-start.scn --seed 12x", "--seed \"12x\""},
        {"run scenarios/clean-start.scn --accelerator nope", "--accelerator \"nope\""},
        {"run scenarios/clean-start.scn --verbose=1", "--verbose"},
        {"run", "scenario FILE"},
        {"run scenarios/clean-start.scn -k", "--keyword"},
        {"run scenarios/clean-start.scn -k nothing-is-called-this", "-k nothing-is-called-this"},
        {"run scenarios/clean-start.scn --last-failed /nonexistent/r.res", "--last-failed"},
        {"replay scenarios/clean-start.scn -x", "-x"},
        {"replay --bogus scenarios/clean-start.scn", "\"--bogus\""},
        {"replay scenarios/clean-start.scn --seed", "--seed"},
        {"replay scenarios/clean-start.scn --seed x1", "--seed \"x1\""},
        {"replay scenarios/clean-start.scn scenarios/port-taken.scn", "one scenario FILE"},
        {"explore --bogus", "\"--bogus\""},
        {"explore --runs", "--runs"},
        {"explore --ranks abc", "--ranks \"abc\""},
        {"explore --ranks 5000 --runs 1", "--ranks \"5000\""},
        {"explore --max-faults 33 --runs 1", "--max-faults \"33\""},
        /* kinds explore cannot draw: refused, not a sweep without faults */
        {"explore --faults late --runs 1", "--faults \"late\""},
        {"explore --faults refuse,stall --runs 1", "point, bandwidth (or all"},
        {"explore --seed ' 5'", "--seed \" 5\""},
        {"explore --progress=1", "--progress"},
    };
    RUN_BAD(c);
}

static void test_bad_launch_train_hold_port(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    struct ddp_sys *sys = ddp_test_sys();
    uint16_t port = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(sys, &port), 0);
    ddp_sys_free(sys);
    char hp[4][96];
    snprintf(hp[0], sizeof hp[0], "hold-port %u --bogus", port);
    snprintf(hp[1], sizeof hp[1], "hold-port %u --seconds", port);
    snprintf(hp[2], sizeof hp[2], "hold-port %u --seconds abc", port); /* issue 12 */
    snprintf(hp[3], sizeof hp[3], "hold-port %u --seconds -1", port);
    const bad_case_t c[] = {
        {"launch --bogus -- true", "\"--bogus\""},
        {"launch --nproc-per-node", "--nproc-per-node"},
        {"launch --nproc-per-node abc -- true", "--nproc-per-node \"abc\""},
        {"launch --nproc_per_node 65 -- true", "--nproc-per-node \"65\""},
        {"launch --master-port 70000 -- true", "--master-port \"70000\""},
        {"launch --timeout 0 -- true", "--timeout \"0\""},
        {"launch --grace-period -1 -- true", "--grace-period \"-1\""},
        {"launch --grace-period=soon -- true", "--grace-period \"soon\""},
        {"launch --grace-period '' -- true", "--grace-period \"\""}, /* strtod: 0 */
        {"launch --timeout ' 5' -- true", "--timeout \" 5\""},
        {"launch --timeout 2 --nnodes 2 --node-rank 2 -- true", "--node-rank \"2\""},
        {"launch --nproc-per-node 2", "PROG"},
        {"train --bogus", "\"--bogus\""},
        {"train --devices", "--devices"},
        {"train --devices x", "--devices \"x\""},
        {"train --devices 65", "--devices \"65\""},
        {"train --timeout -1", "--timeout \"-1\""},
        {"train --seed 1.5", "--seed \"1.5\""},
        {"train --train abc", "--train \"abc\""},
        {"train --accelerator nope", "--accelerator \"nope\""},
        {hp[0], "\"--bogus\""},
        {hp[1], "--seconds"},
        {hp[2], "--seconds \"abc\""},
        {hp[3], "--seconds \"-1\""},
        {"hold-port 70000 --seconds 1", "PORT \"70000\""},
        {"hold-port abc", "PORT \"abc\""},
        {"hold-port", "PORT"},
    };
    RUN_BAD(c);
}

static void test_bad_list_demo_env_hostlist(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static const bad_case_t c[] = {
        {"list --bogus", "\"--bogus\""},
        {"list", "accelerators"},
        {"list nonsense", "\"nonsense\""},
        {"demo --bogus", "\"--bogus\""},
        {"demo --ranks", "--ranks"},
        {"demo --ranks x", "--ranks \"x\""},
        {"demo --ranks 2000", "--ranks \"2000\""},
        {"demo --timeout 0", "--timeout \"0\""},
        {"demo --timeout 1.5", "--timeout \"1.5\""},
        {"env --bogus", "\"--bogus\""},
        {"env --devices", "--devices"},
        {"env --devices=abc", "--devices \"abc\""},
        {"env --devices 0", "--devices \"0\""},
        {"env --num-nodes 2000000", "--num-nodes \"2000000\""},
        {"hostlist --bogus node1", "\"--bogus\""},
        {"hostlist", "EXPR"},
    };
    RUN_BAD(c);
}

static void test_bad_store(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    /* --timeout 1: an old binary that connects anyway fails fast. */
    static const bad_case_t c[] = {
        {"store --bogus get k", "\"--bogus\""},
        {"store --port", "--port needs a value"}, /* issue 12: not "unknown option" */
        {"store --timeout 1 --port 0 get k", "--port \"0\""}, /* issue 12: not 29500 */
        {"store --timeout 1 --port 70000 get k", "--port \"70000\""},
        {"store --timeout abc get k", "--timeout \"abc\""},
        {"store --timeout -1 get k", "--timeout \"-1\""},
        {"store --timeout 1 --port 1 add k 1x", "DELTA \"1x\""},
        {"store --timeout 1 --port 1 frobnicate k", "COMMAND \"frobnicate\""},
        {"store --timeout 1 --port 1 get", "get KEY"},
        {"store", "COMMAND"},
        {"store serve --bogus", "\"--bogus\""},
        {"store serve --port", "--port"},
        {"store serve --port abc", "--port \"abc\""},
        {"store serve --port 70000", "--port \"70000\""},
        {"store serve extra", "no arguments"},
        {"store serve --world 0", "--world \"0\""},
        {"store serve --world 2x", "--world \"2x\""},
    };
    RUN_BAD(c);
    /* MASTER_PORT is the default of --port: checked as strictly. */
    char err[2048];
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io("MASTER_PORT=abc", "store --timeout 1 get k", 1,
                                       err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--port \"abc\" (from MASTER_PORT)"));
}

/* The bugs issue 12 lists for `ddpsim sim`: each ran a clean cluster and
 * exited 0 (or printed "0 rank(s), 0 failed" with no message). */
static void test_bad_sim(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static const bad_case_t c[] = {
        {"sim --master-late abc", "--master-late \"abc\""},
        {"sim --timeout abc", "--timeout \"abc\""},
        {"sim --seed abc", "--seed \"abc\""},
        {"sim --seed a\xff", "--seed \"a\\xff\""}, /* not UTF-8: escaped */
        {"sim --fault delay,ms=abc", "--fault \"delay,ms=abc\""},
        {"sim --fault crash,phase=nonsense,ranks=1", "--fault \"crash,phase=nonsense"},
        {"sim --fault partition", "--fault \"partition\""},
        {"sim --procs 66", "--procs \"66\""},
        {"sim --bogus", "unknown option \"--bogus\""},
        {"sim --nodes 0", "--nodes \"0\""},
        {"sim --somaxconn 0", "--somaxconn \"0\""},
        {"sim --somaxconn 2147483648", "--somaxconn \"2147483648\""},
        {"sim --nodes", "--nodes needs a value"},
        {"sim --fault", "--fault"},
        {"sim --fault meteor", "--fault \"meteor\""},
        {"sim --fault crash,node=5", "--fault \"crash,node=5\""},
        {"sim --fault 'crash ranks=1 phase=\"nowhere\"'", "--fault \"crash ranks=1"},
        {"sim --fault refuse,when=now", "--fault \"refuse,when=now\""},
        {"sim --plugin nope", "--plugin \"nope\""},
        {"sim --backend nope", "--backend \"nope\""},
        {"sim --accelerator nope", "--accelerator \"nope\""},
        {"sim --t 5", "ambiguous option \"--t\""},
        {"sim --trace /nonexistent/dir/t.jsonl", "--trace \"/nonexistent/dir/t.jsonl\""},
    };
    RUN_BAD(c);
    char err[2048];
    /* an unknown option is not "missing value" */
    ddp_test_ddpsim_io(NULL, "sim --bogus", 1, err, sizeof err);
    CU_ASSERT_PTR_NULL(strstr(err, "missing value"));
}

/* The comma form of --fault and the scenario form are one syntax: the same
 * scenario statement, and a valid one runs. */
static void test_sim_faults(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char out[8192];
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "sim --print-scenario --fault "
                                             "'crash,phase=store connect,ranks=1,3' "
                                             "--fault delay,ms=5 --fault partition,nodes=1,"
                                             "end=20 --fault 'pause ranks=2 end=3s'",
                                       0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "fault crash phase=\"store connect\" ranks=1,3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "fault delay delay=5ms\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "fault partition nodes=1 end=20s\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "fault pause ranks=2 end=3s\n"));
    /* a value cannot add a statement of its own */
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "sim --print-scenario --fault "
                                             "'crash,phase=x\" expect ok #,ranks=1'",
                                       0, out, sizeof out), 2);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "sim --nodes 2 --procs 2 --fault "
                                             "crash,phase=barrier,ranks=3",
                                       0, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CRASHED"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "4 rank(s): 0 ok, 3 failed, 1 crashed"));
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "sim --nodes 2 --procs 2", 0, out, sizeof out),
                    0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "4 rank(s): 4 ok, 0 failed, 0 crashed"));
    /* --somaxconn: every node's backlog cap; 64 ranks past a cap of 16 join
     * after the dropped SYNs' retransmissions (1 s and more), not at once. */
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "sim --print-scenario --somaxconn 16", 0, out,
                                       sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nsomaxconn 16\n"));
    double vt[2] = {-1, -1};
    static char big[65536];
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, i ? "sim --nodes 8 --procs 8 --somaxconn 16"
                                                   : "sim --nodes 8 --procs 8",
                                           0, big, sizeof big), 0);
        const char *v = strstr(big, "; virtual ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        vt[i] = atof(v + strlen("; virtual "));
    }
    CU_ASSERT(vt[0] > 0 && vt[0] < 1.0);
    CU_ASSERT(vt[1] > 1.0);
    /* Within a deadline shorter than the retransmissions, rank 0's error
     * says why the ranks did not come: the backlog, not a missing rank. */
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "sim --nodes 8 --procs 8 --somaxconn 16 "
                                             "--timeout 0.5",
                                       0, big, sizeof big), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(big, "larger than this host's listen backlog "
                                       "(net.core.somaxconn = 16)"));
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "sim --nodes 8 --procs 8 --somaxconn 64 "
                                             "--fault 'crash ranks=5 phase=\"store connect\"' "
                                             "--timeout 0.5",
                                       0, big, sizeof big), 1);
    CU_ASSERT_PTR_NULL(strstr(big, "listen backlog"));
    CU_ASSERT_PTR_NOT_NULL(strstr(big, "never connected to the store: check"));
}

/* s with every run of blanks and newlines made one blank: what a reader
 * reads, however it was wrapped. */
static void squash(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++) {
        int blank = *s == ' ' || *s == '\n';
        if (!blank || (k && out[k - 1] != ' '))
            out[k++] = blank ? ' ' : *s;
    }
    out[k] = '\0';
}

/* The run table: expected, actual, verdict, the title, the messages in
 * full under the table and wrapped to COLUMNS, a legend. */
static void test_run_table(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char out[16384];
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io("COLUMNS=60", "run scenarios/port-taken.scn "
                                                     "--accelerator ddp --no-progress",
                                       0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "expected actual verdict"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "port-taken: \"rank 0's port is already taken\"\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "port-taken ddp         fail     fail   ok "));
    /* the legend, and the whole first error wrapped at 60: every word is
     * there, and no line but the table's is longer */
    static char flat[16384];
    squash(out, flat, sizeof flat);
    CU_ASSERT_PTR_NOT_NULL(strstr(flat, "verdict ok: the expected outcome happened"));
    CU_ASSERT_PTR_NOT_NULL(strstr(flat, "rank 0, store server: rank 0 could not bind "
                                        "node0:29500: address in use (EADDRINUSE: Address "
                                        "already in use); hint: another job or a stale "
                                        "master holds port 29500: pick a free MASTER_PORT "
                                        "(or unset it to get one)"));
    int longest = 0, len = 0;
    for (const char *p = out; *p; p++) {
        if (*p != '\n') {
            len++;
            continue;
        }
        if (strncmp(p - len, "port-taken ", 11) && strncmp(p - len, "scenario ", 9))
            longest = len > longest ? len : longest;
        len = 0;
    }
    CU_ASSERT_TRUE(longest <= 60);
    /* A failing expectation: FAIL, expected ok, actual fail, why wrapped. */
    FILE *f = fopen("build/test-cli-wrong.scn", "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("scenario \"wrong on purpose\"\nport_taken\nexpect ok\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "run build/test-cli-wrong.scn --accelerator "
                                             "ddp2",
                                       0, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "test-cli-wrong ddp2        ok       fail   FAIL"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "    why: line 3: expected rank 0 to connect"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0 ok, 1 failed"));
    remove("build/test-cli-wrong.scn");
}

/* Output paths are checked before the first run (exit 2, nothing run). */
static void test_run_output_paths(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static const char *const opts[] = {
        "--junit /nonexistent/dir/j.xml", "--trace /nonexistent/dir/t.jsonl",
        "--trace-chrome build", "--compare --markdown /nonexistent/dir/m.md"};
    static const char *const names[] = {"--junit", "--trace", "--trace-chrome",
                                        "--markdown"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        char args[256], out[8192];
        snprintf(args, sizeof args, "run scenarios/clean-start.scn --accelerator ddp %s",
                 opts[i]);
        CU_ASSERT_TRUE(check_bad(args, names[i]));
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 2);
        CU_ASSERT_PTR_NULL(strstr(out, "run(s) of")); /* no run started */
    }
    /* a writable path that did not exist is not left behind by the check */
    char out[8192];
    remove("build/test-cli-junit.xml");
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "run scenarios/clean-start.scn --accelerator "
                                             "ddp --junit build/test-cli-junit.xml --seed 3",
                                       0, out, sizeof out), 0);
    CU_ASSERT_EQUAL(access("build/test-cli-junit.xml", R_OK), 0);
    remove("build/test-cli-junit.xml");
}

/* Issue 34: `--results /dev/full` renamed a regular file over the device.
 * Every output option refuses a device, FIFO or symlink by name, before a
 * run, and leaves it as it was (the device node is made in the test's own
 * folder, never /dev). */
static void test_output_special_targets(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char dir[64], dev[96], fifo[96], link[96];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "cli-out"));
    int have_dev = ddp_test_mkdev(ddp_test_in(dev, sizeof dev, dir, "full"));
    CU_ASSERT(have_dev >= 0);
    CU_ASSERT_EQUAL(mkfifo(ddp_test_in(fifo, sizeof fifo, dir, "fifo"), 0600), 0);
    ddp_test_in(link, sizeof link, dir, "link");
    CU_ASSERT_EQUAL(symlink("results", link), 0);
    static const char *const cases[][2] = {
        {"run scenarios/clean-start.scn --accelerator ddp --results %s", "--results"},
        {"run scenarios/clean-start.scn --accelerator ddp --junit %s", "--junit"},
        {"run scenarios/clean-start.scn --accelerator ddp --trace %s", "--trace"},
        {"run scenarios/clean-start.scn --accelerator ddp --trace-chrome %s",
         "--trace-chrome"},
        {"sim --trace %s", "--trace"},
        {"explore --runs 1 --results %s", "--results"},
    };
    const char *targets[] = {dev, fifo, link};
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char args[512];
            snprintf(args, sizeof args, cases[i][0], targets[t]);
            CU_ASSERT_TRUE(check_bad(args, targets[t]));
        }
    struct stat st;
    CU_ASSERT_EQUAL(lstat(dev, &st), 0);
    CU_ASSERT(have_dev > 0 ? S_ISCHR(st.st_mode) : S_ISFIFO(st.st_mode));
    CU_ASSERT_EQUAL(lstat(fifo, &st), 0);
    CU_ASSERT(S_ISFIFO(st.st_mode));
    CU_ASSERT_EQUAL(lstat(link, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    /* "-" is standard output. */
    char out[16384];
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "run scenarios/clean-start.scn "
                                             "--accelerator ddp --results -",
                                       0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"ddpsim\":"));
    unlink(dev), unlink(fifo), unlink(link);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

/* Issue 34: `ddpsim --version extra` was accepted. */
static void test_top_level_extra(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    const char *cases[] = {"--version extra", "--help run", "help x"};
    for (size_t i = 0; i < 3; i++) {
        char err[1024];
        int st = ddp_test_ddpsim_io_within(15, NULL, cases[i], 1, err, sizeof err);
        CU_ASSERT_EQUAL(st, 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "takes no arguments"));
    }
    char out[1024];
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "--version", 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "ddpsim "));
}

/* Every run skipped: nothing tested, exit 3 with a line saying why. */
static void test_run_all_skipped(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char err[4096];
    const char *junit = "build/test-cli-skipped.xml";
    remove(junit);
    int st = ddp_test_ddpsim_io(NULL, "run --real scenarios/partition-heals.scn "
                                      "--accelerator ddp --no-progress "
                                      "--junit build/test-cli-skipped.xml",
                                1, err, sizeof err);
    CU_ASSERT_EQUAL(st, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "every run was skipped"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "needs --netns"));
    /* In JUnit a skip is a skip, not a failure: CI stays green. */
    char xml[4096] = "";
    FILE *f = fopen(junit, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    xml[fread(xml, 1, sizeof xml - 1, f)] = '\0';
    fclose(f);
    remove(junit);
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "<skipped message=\""));
    CU_ASSERT_PTR_NULL(strstr(xml, "<failure"));
}

/* A first error of some 700 characters (torchrun on 2 nodes without a
 * master address: its hint ends the message) reaches the table, --results
 * and JUnit whole; it was cut at 640. */
static void test_run_long_message_whole(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static const char tail[] = "say so with DDPSIM_HOSTS=node0=127.0.0.1,node1=127.0.0.1,...";
    char dir[256], res[320], junit[320], args[1024], text[16384];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "longmsg"));
    ddp_test_in(res, sizeof res, dir, "results.json");
    ddp_test_in(junit, sizeof junit, dir, "junit.xml");
    snprintf(args, sizeof args, "run scenarios/torchrun-multinode-localhost.scn --accelerator "
                                "ddp --no-progress --results %s --junit %s", res, junit);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io("COLUMNS=4000", args, 0, text, sizeof text), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, tail)); /* the table's message, on one line */
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_test_read_file(res, text, sizeof text), tail));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_test_read_file(junit, text, sizeof text), tail));
    remove(res);
    remove(junit);
    remove(dir);
}

/* --trace-chrome with several runs: one file per run, the scenario and
 * accelerator in its name, each a whole trace of that run. */
static void test_run_chrome_per_run(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static const char *const files[] = {"build/test-cli-c.clean-start.ddp.json",
                                        "build/test-cli-c.crash-joining.ddp.json",
                                        "build/test-cli-c.clean-start.ddp_spawn.json"};
    for (size_t i = 0; i < 3; i++)
        remove(files[i]);
    char out[8192];
    int st = ddp_test_ddpsim("run scenarios/clean-start.scn scenarios/crash-joining.scn "
                             "--accelerator ddp --no-progress "
                             "--trace-chrome build/test-cli-c.json", 1, out, sizeof out);
    CU_ASSERT_EQUAL(st, 0);
    static char json[1 << 16];
    for (size_t i = 0; i < 2; i++) {
        ddp_test_read_file(files[i], json, sizeof json);
        CU_ASSERT_EQUAL(strncmp(json, "{\"displayTimeUnit\"", 18), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"thread_name\""));
        /* the crash scenario's trace holds its fault, the clean one none */
        CU_ASSERT_EQUAL(strstr(json, "\"cat\":\"fault\"") != NULL, i == 1);
        remove(files[i]);
    }
    CU_ASSERT_NOT_EQUAL(access(files[2], F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access("build/test-cli-c.json", F_OK), 0);
}

/* Issue 43: a run's own --trace-chrome file that cannot be written (a
 * folder there, a name past NAME_MAX once the scenario and accelerator are
 * added) was found only after the run, exit 1; it is an unwritable path:
 * exit 2 before the first run, naming the file. */
static void test_run_chrome_per_run_unwritable(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char dir[64], taken[128], args[1024], out[8192];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "cli-chrome"));
    CU_ASSERT_EQUAL_FATAL(mkdir(ddp_test_in(taken, sizeof taken, dir, "t.crash-joining.ddp.json"),
                                0700), 0);
    char long_name[250];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *targets[][2] = {{"t.json", "t.crash-joining.ddp.json\": it is a directory"},
                                {long_name, "File name too long"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "run scenarios/clean-start.scn scenarios/crash-joining.scn "
                 "--accelerator ddp --no-progress --trace-chrome %s/%s", dir, targets[i][0]);
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 1, out, sizeof out), 2);
        if (!strstr(out, targets[i][1]))
            printf("\n  %s:\n  %s\n", args, out);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, targets[i][1]));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "--trace-chrome"));
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 2);
        CU_ASSERT_PTR_NULL(strstr(out, "run(s) of")); /* no run started */
    }
    CU_ASSERT_EQUAL(rmdir(taken), 0);
    CU_ASSERT_EQUAL(rmdir(dir), 0); /* nothing else left there */
}

/* The lines of out that contain word, each checked by ok(line). */
static int lines_with(const char *out, const char *word, int (*ok)(const char *line))
{
    int n = 0;
    for (const char *p = out; p && *p;) {
        const char *nl = strchr(p, '\n');
        char line[1024];
        snprintf(line, sizeof line, "%.*s", nl ? (int)(nl - p) : (int)strlen(p), p);
        if (strstr(line, word)) {
            CU_ASSERT_TRUE(ok(line));
            n++;
        }
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

static int clean_launcher(const char *line)
{
    return strstr(line, " ok ") && !strstr(line, "FAIL") && !strstr(line, "rank -1");
}

static int failed_launcher(const char *line)
{
    return strstr(line, " exited ") && strstr(line, "worker process(es) failed") &&
           !strstr(line, "FAIL");
}

/* ddp_spawn's and ddp_cpu's per-node launchers are labelled as such, ok
 * on a clean run, and never FAIL when their workers fail as expected. */
static void test_launcher_rows(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static char out[1 << 16];
    CU_ASSERT_EQUAL(ddp_test_ddpsim("sim --accelerator ddp_cpu --nodes 3 --procs 2", 0,
                                    out, sizeof out), 0);
    CU_ASSERT_EQUAL(lines_with(out, "launcher", clean_launcher), 3);
    CU_ASSERT_PTR_NULL(strstr(out, " FAIL ")); /* the legend says "FAIL:" */
    CU_ASSERT_EQUAL(ddp_test_ddpsim("run scenarios/clean-start.scn --accelerator ddp_spawn "
                                    "-v --no-progress", 0, out, sizeof out), 0);
    CU_ASSERT_EQUAL(lines_with(out, "launcher", clean_launcher), 2);
    CU_ASSERT_PTR_NULL(strstr(out, " FAIL ")); /* the legend says "FAIL:" */
    /* A passing run whose ranks fail as expected: FAIL only on rank rows. */
    CU_ASSERT_EQUAL(ddp_test_ddpsim("run scenarios/crash-joining.scn --accelerator ddp_spawn "
                                    "-v --no-progress", 0, out, sizeof out), 0);
    CU_ASSERT_EQUAL(lines_with(out, "launcher", failed_launcher), 2);
}

/* `list phases`: every phase a crash fault may name, and only those: each
 * line's phase parses in a scenario running its plugin, and the default
 * plugin's come first, all of them. */
static void test_list_phases(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static char out[8192];
    CU_ASSERT_EQUAL(ddp_test_ddpsim("list phases", 0, out, sizeof out), 0);
    size_t lines = 0, defaults = 0, others = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char plugin[64], text[512], err[512];
        int at = 0;
        CU_ASSERT_FATAL(sscanf(line, "%63s %n", plugin, &at) == 1 && at > 0);
        const char *phase = line + at;
        if (!strcmp(plugin, "default")) {
            CU_ASSERT_EQUAL(lines, defaults); /* the default plugin's first */
            CU_ASSERT_STRING_EQUAL(phase, ddp_scenario_phase_at(defaults));
            defaults++;
        } else {
            others++;
        }
        snprintf(text, sizeof text, "scenario \"p\"\nplugin %s\nfault crash ranks=1 "
                                    "phase=\"%s\"\nexpect invariants\n", plugin, phase);
        ddp_scenario_t *s = NULL;
        int rc = ddp_scenario_parse(text, "list", NULL, &s, err, sizeof err);
        if (rc != 0)
            printf("\n  listed phase \"%s\" of %s does not parse: %s\n", phase, plugin, err);
        CU_ASSERT_EQUAL(rc, 0);
        ddp_scenario_free(s);
    }
    CU_ASSERT_EQUAL(defaults, ddp_scenario_phase_count());
    CU_ASSERT(others >= 3); /* subgroups' and rpc's */
}

/* `list points`: each point of include/ddp/faults.h once, with its layer. */
static void test_list_points(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static char out[8192];
    CU_ASSERT_EQUAL(ddp_test_ddpsim("list points", 0, out, sizeof out), 0);
    int lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char name[64];
        int at = 0;
        CU_ASSERT_FATAL(sscanf(line, "%63s %n", name, &at) == 1 && at > 0);
        const ddp_fault_info_t *fi = ddp_fault_point_find(name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(fi);
        CU_ASSERT_EQUAL((int)fi->id, lines); /* the header's order */
        CU_ASSERT_STRING_EQUAL(line + at, ddp_fault_layer_name(fi->layer));
    }
    CU_ASSERT_EQUAL(lines, DDP_FP_COUNT);
}

/* The line of out that starts with prefix (copied into line), or NULL. */
static const char *line_of(const char *out, const char *prefix, char *line, size_t n)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) {
            snprintf(line, n, "%.*s", (int)strcspn(p, "\n"), p);
            return line;
        }
    return NULL;
}

/* -k: a part of the scenario file, its title or the accelerator, case
 * ignored; the other runs are not in the table. */
static void test_run_keyword(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static const struct {
        const char *args, *count, *row; /* row: the one run's row */
    } c[] = {
        {"-k TAKEN --accelerator ddp", "1 run(s) of 2 scenario file(s)", "port-taken ddp "},
        {"-k 'already taken' --accelerator ddp2", "1 run(s) of 2", "port-taken ddp2 "},
        {"-k cpu_hpc", "2 run(s) of 2", "clean-start ddp_cpu_hpc "},
        {"--keyword clean-start --accelerator ddp_spawn", "1 run(s) of 2",
         "clean-start ddp_spawn "},
    };
    static char out[1 << 15];
    char args[256], line[256];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        snprintf(args, sizeof args, "run scenarios/clean-start.scn scenarios/port-taken.scn "
                                    "--no-progress %s", c[i].args);
        CU_ASSERT_EQUAL(ddp_test_ddpsim(args, 0, out, sizeof out), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, c[i].count));
        CU_ASSERT_PTR_NOT_NULL(line_of(out, c[i].row, line, sizeof line));
    }
}

/* -x stops after the first failing run; --last-failed then runs only the
 * runs that failed, or every run when the file records no failure. */
static void test_run_exitfirst_last_failed(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    const char *wrong = "build/test-cli-x.scn", *res = "build/test-cli-x.res";
    CU_ASSERT_EQUAL_FATAL(ddp_test_write_file(wrong, DDP_TEST_WRONG_SCN), 0);
    static char out[1 << 15];
    char line[256];
    const char *files = "scenarios/clean-start.scn build/test-cli-x.scn "
                        "scenarios/crash-joining.scn --accelerator ddp --no-progress";
    char args[512];
    snprintf(args, sizeof args, "run %s -x --results %s", files, res);
    CU_ASSERT_EQUAL(ddp_test_ddpsim(args, 1, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-x: stopped after the first failure, 1 run(s) of 3 "
                                       "not run"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "2 run(s) of 3 scenario file(s): 1 ok, 1 failed"));
    CU_ASSERT_PTR_NULL(line_of(out, "crash-joining ddp", line, sizeof line));
    /* Without -x the third runs too. */
    snprintf(args, sizeof args, "run %s", files);
    CU_ASSERT_EQUAL(ddp_test_ddpsim(args, 0, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "3 run(s) of 3 scenario file(s): 2 ok, 1 failed"));
    /* Only what failed. */
    snprintf(args, sizeof args, "run %s --last-failed %s", files, res);
    CU_ASSERT_EQUAL(ddp_test_ddpsim(args, 0, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1 run(s) of 3 scenario file(s): 0 ok, 1 failed"));
    CU_ASSERT_PTR_NOT_NULL(line_of(out, "test-cli-x ddp ", line, sizeof line));
    /* A file without failures: every run, and a line saying so. */
    snprintf(args, sizeof args, "run scenarios/clean-start.scn --accelerator ddp "
                                "--no-progress --results %s", res);
    CU_ASSERT_EQUAL(ddp_test_ddpsim(args, 0, out, sizeof out), 0);
    snprintf(args, sizeof args, "run %s --last-failed %s", files, res);
    CU_ASSERT_EQUAL(ddp_test_ddpsim(args, 1, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "records no failed run; running every selected run"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "3 run(s) of 3 scenario file(s)"));
    remove(wrong);
    remove(res);
}

/* run --help's synopsis names every option, the selection ones too. */
static void test_run_synopsis(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    static char out[1 << 15];
    CU_ASSERT_EQUAL(ddp_test_ddpsim("run --help", 0, out, sizeof out), 0);
    char *end = strstr(out, "\n\n"); /* the synopsis ends at the first blank line */
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    *end = '\0';
    static const char *const want[] = {"--exec", "--wall-limit SEC", "--grace SEC",
                                       "-k PATTERN", "[-x]", "--last-failed FILE",
                                       "--results FILE", "--shard K/N"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i])) {
            printf("\n  run's synopsis lacks %s\n", want[i]);
            CU_FAIL("an option missing from the synopsis");
        }
}

/* run --compare: a real run that failed its own expectations is never
 * `same: yes`, even where its class is the simulator's; --repeat N runs
 * each real one N times and names the classes seen (here one: ok). Free
 * ports of their own, so it never meets another run's. */
static void test_run_compare_judged(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    uint16_t port[2] = {0, 0};
    ddp_sys_t *sys = ddp_test_sys();
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(sys, &port[i]), 0);
    ddp_sys_free(sys);
    char scn[2][256];
    snprintf(scn[0], sizeof scn[0], "scenario \"clean, judged wrongly\"\nnodes 1\ndevices 2\n"
             "accelerators ddp\ntimeout 20s\nport %u\nexpect fail ranks=0\n", port[0]);
    snprintf(scn[1], sizeof scn[1], "scenario \"clean\"\nnodes 1\ndevices 2\naccelerators ddp\n"
             "timeout 20s\nport %u\nexpect ok\n", port[1]);
    static const char *const path[] = {"build/test-compare-wrong.scn",
                                       "build/test-compare-ok.scn"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(path[i], "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs(scn[i], f);
        fclose(f);
    }
    remove("build/test-compare.md");
    static char out[1 << 15], md[1 << 14];
    int st = ddp_test_ddpsim_io_within(60, NULL,
                                       "run --compare --repeat 2 --no-progress --markdown "
                                       "build/test-compare.md build/test-compare-wrong.scn "
                                       "build/test-compare-ok.scn", 0, out, sizeof out);
    CU_ASSERT_EQUAL(st, 1);
    FILE *f = fopen("build/test-compare.md", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    md[fread(md, 1, sizeof md - 1, f)] = '\0';
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(md, "| test-compare-wrong | ddp | ok | ok | **no** | real run"));
    CU_ASSERT_PTR_NOT_NULL(strstr(md, "| test-compare-ok | ddp | ok | ok | yes |  |"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "2 pair(s): 1 same, 1 different, 0 race(s), 0 skipped"));
    if (!strstr(md, "| test-compare-ok | ddp | ok | ok | yes |"))
        printf("\n  exit %d:\n%s\n%s", st, out, md);
}

/* `make test` (like `make run` and plain `make`) leaves ./ddpsim. */
static void test_symlink(void)
{
    char bin[400];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    if (!strstr(bin, "/build/default/")) {
        ddp_test_skip("only the default build makes the ./ddpsim link (this is %s)", bin);
        return;
    }
    CU_ASSERT_EQUAL(access("ddpsim", X_OK), 0);
}

DDP_SUITE("cli", NULL, NULL,
          {"run, replay, explore: bad options exit 2, one line", test_bad_run_replay_explore},
          {"launch, train, hold-port: bad options exit 2, one line",
           test_bad_launch_train_hold_port},
          {"list, demo, env, hostlist: bad options exit 2, one line",
           test_bad_list_demo_env_hostlist},
          {"store: bad options, --port 0, MASTER_PORT", test_bad_store},
          {"sim: the bugs of issue 12 exit 2 naming the option", test_bad_sim},
          {"sim: --fault forms become one scenario statement", test_sim_faults},
          {"run table: expected, actual, verdict, title, messages", test_run_table},
          {"run: output paths checked before the first run", test_run_output_paths},
          {"output options refuse devices, FIFOs and symlinks",
           test_output_special_targets},
          {"--version and --help take no arguments", test_top_level_extra},
          {"run: every run skipped exits 3", test_run_all_skipped},
          {"run: a long first error reaches table, results and JUnit whole",
           test_run_long_message_whole},
          {"run: --trace-chrome with several runs, one file each", test_run_chrome_per_run},
          {"run: --trace-chrome with several runs, an unwritable one exits 2",
           test_run_chrome_per_run_unwritable},
          {"sim, run -v: launchers labelled, never FAIL on a passing run",
           test_launcher_rows},
          {"list phases: the default plugin's, then each plugin's; each parses",
           test_list_phases},
          {"list points: every fault point with its layer", test_list_points},
          {"run -k: scenario file, title or accelerator", test_run_keyword},
          {"run -x stops at the first failure; --last-failed reruns it",
           test_run_exitfirst_last_failed},
          {"run --help: the synopsis names every option", test_run_synopsis},
          {"run --compare: a real run failing its expectations is never same; --repeat",
           test_run_compare_judged},
          {"make test leaves ./ddpsim", test_symlink})
