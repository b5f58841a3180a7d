/* tests/test_scenario.c — scenario files: every malformed input gives its
 * documented file:line:col error (library and `ddpsim run`, exit 2); the
 * bundled library round-trips through ddp_scenario_write and meets every
 * expectation for every accelerator; verdicts can fail; runs repeat. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ddp/accel.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "test.h"

#define BAD_DIR "tests/scenarios/bad"
#define GOOD_DIR "scenarios"

/* Sorted *.scn paths of dir. */
static int list_scn(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    int n = 0;
    *out = NULL;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".scn"))
            continue;
        *out = realloc(*out, sizeof **out * (size_t)(n + 1));
        if (asprintf(&(*out)[n], "%s/%s", dir, e->d_name) < 0)
            break;
        n++;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp((*out)[j - 1], (*out)[j]) > 0; j--) {
            char *t = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = t;
        }
    return n;
}

static void free_list(char **l, int n)
{
    for (int i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

/* "# error: 3:7: expected ..." -> the full expected message prefix. */
static int expected_error(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    char line[600] = "";
    if (!f)
        return -1;
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    if (!ok || strncmp(line, "# error: ", 9))
        return -1;
    line[strcspn(line, "\n")] = '\0';
    const char *e = line + 9;
    if (!strncmp(e, "tests/", 6))
        snprintf(out, n, "%s", e); /* an error inside an included file */
    else
        snprintf(out, n, "%s:%s", path, e);
    return 0;
}

static void test_bad_inputs_library(void)
{
    char **files;
    int n = list_scn(BAD_DIR, &files);
    CU_ASSERT_TRUE(n >= 20);
    for (int i = 0; i < n; i++) {
        char want[700], err[1024] = "";
        CU_ASSERT_EQUAL_FATAL(expected_error(files[i], want, sizeof want), 0);
        ddp_scenario_t *s = NULL;
        int rc = ddp_scenario_load(files[i], &s, err, sizeof err);
        int good = rc == DDP_ECONFIG && s == NULL && !strncmp(err, want, strlen(want));
        if (!good)
            printf("\n  %s\n    want: %s\n    got:  %s (rc %d)\n", files[i], want, err, rc);
        CU_ASSERT_TRUE(good);
        ddp_scenario_free(s);
    }
    free_list(files, n);
}

static int run_cmd(const char *args, char *out, size_t n)
{
    return ddp_test_ddpsim(args, 1, out, n);
}

static void test_bad_inputs_cli(void)
{
    char bin[400];
    if (!ddp_test_ddpsim_bin(bin, sizeof bin))
        return; /* outside `make test`: no command to run */
    char **files;
    int n = list_scn(BAD_DIR, &files);
    for (int i = 0; i < n; i++) {
        char want[700], out[4096], args[600];
        expected_error(files[i], want, sizeof want);
        snprintf(args, sizeof args, "run %s", files[i]);
        int st = run_cmd(args, out, sizeof out);
        int good = st == 2 && strstr(out, want) != NULL;
        if (!good)
            printf("\n  ddpsim %s: exit %d\n    want: %s\n    got:  %s\n", args, st, want, out);
        CU_ASSERT_TRUE(good);
    }
    free_list(files, n);
}

static char *write_mem(const ddp_scenario_t *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ddp_scenario_write(s, f);
    fclose(f);
    return buf;
}

/* Every bundled scenario: write -> parse -> write is a fixed point, and the
 * rewritten scenario runs the same (same trace hash). */
static void test_round_trip(void)
{
    char **files;
    int n = list_scn(GOOD_DIR, &files);
    CU_ASSERT_TRUE(n >= 30);
    for (int i = 0; i < n; i++) {
        char err[1024];
        ddp_scenario_t *a = NULL, *b = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_scenario_load(files[i], &a, err, sizeof err), 0);
        char *t1 = write_mem(a);
        int rc = ddp_scenario_parse(t1, "rewritten", NULL, &b, err, sizeof err);
        if (rc)
            printf("\n  %s rewritten does not parse: %s\n%s", files[i], err, t1);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        char *t2 = write_mem(b);
        CU_ASSERT_STRING_EQUAL(t1, t2);
        if (!strstr(files[i], "scale")) {
            const char *acc = a->naccels ? a->accels[0] : "ddp_hpc";
            ddp_scn_result_t ra, rb;
            CU_ASSERT_EQUAL(ddp_scenario_run(a, acc, NULL, &ra), 0);
            CU_ASSERT_EQUAL(ddp_scenario_run(b, acc, NULL, &rb), 0);
            CU_ASSERT_EQUAL(ra.trace_hash, rb.trace_hash);
            CU_ASSERT_EQUAL(ra.pass, rb.pass);
        }
        free(t1);
        free(t2);
        ddp_scenario_free(a);
        ddp_scenario_free(b);
    }
    free_list(files, n);
}

/* The bundled library meets every expectation and invariant for every
 * accelerator it lists (what `make run` shows as a table). Sanitizer builds
 * skip the 512-rank scenario to stay within the test budget. */
static void test_bundled_library(void)
{
    char **files;
    int n = list_scn(GOOD_DIR, &files), runs = 0;
    for (int i = 0; i < n; i++) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        if (strstr(files[i], "scale-"))
            continue;
#endif
        char err[1024];
        ddp_scenario_t *s = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_scenario_load(files[i], &s, err, sizeof err), 0);
        static const char *const accels[] = {"ddp", "ddp_spawn", "ddp_cpu",
                                             "ddp2", "ddp_hpc", "ddp_cpu_hpc"};
        for (int a = 0; a < 6; a++) {
            if (!ddp_scenario_has_accel(s, accels[a]))
                continue;
            ddp_scn_result_t r;
            CU_ASSERT_EQUAL(ddp_scenario_run(s, accels[a], NULL, &r), 0);
            if (!r.pass)
                printf("\n  %s x %s: %s\n", files[i], accels[a], r.why);
            CU_ASSERT_TRUE(r.pass);
            runs++;
        }
        ddp_scenario_free(s);
    }
    CU_ASSERT_TRUE(runs >= 100);
    free_list(files, n);
}

static ddp_scenario_t *parse(const char *text)
{
    char err[1024];
    ddp_scenario_t *s = NULL;
    if (ddp_scenario_parse(text, "inline.scn", NULL, &s, err, sizeof err) != 0)
        printf("\n  parse: %s\n", err);
    return s;
}

/* A wrong expectation is reported, with its line: the judge is not vacuous. */
static void test_wrong_expectations_fail(void)
{
    static const char *const cases[][2] = {
        {"scenario \"x\"\nport_taken\nexpect ok\n", "line 3: expected rank 0 to connect"},
        {"scenario \"x\"\nexpect fail\n", "expected rank"},
        {"scenario \"x\"\nfault crash ranks=1 phase=\"barrier\"\nexpect fail ranks=0\n"
         "expect crashed ranks=2\n", "line 4: expected rank 2 to be crashed"},
        {"scenario \"x\"\nmaster_late 20s\nexpect ok within=10s\n", "to end within 10.000 s"},
        {"scenario \"x\"\nport_taken\nexpect fail ranks=0 error=timeout\n",
         "expected rank 0 to fail with error=timeout, got addrinuse"},
        {"scenario \"x\"\nport_taken\nexpect fail ranks=0 mentions=\"meteor\"\n",
         "to mention \"meteor\""},
        {"scenario \"x\"\nexpect ok ranks=7\n", "expected rank 7, but no process had that rank"},
        {"scenario \"x\"\ntrain 20s\nexpect ok within=10s\n", "to end within 10.000 s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_scenario_t *s = parse(cases[i][0]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ddp_scn_result_t r;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
        CU_ASSERT_FALSE(r.pass);
        CU_ASSERT_FALSE(r.expect_ok);
        if (!strstr(r.why, cases[i][1]))
            printf("\n  case %zu: want \"%s\" in: %s\n", i, cases[i][1], r.why);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.why, cases[i][1]));
        ddp_scenario_free(s);
    }
}

/* `train D`: every rank trains D after connecting, with every accelerator;
 * training longer than the group timeout still ends cleanly, D later. */
static void test_train(void)
{
    ddp_scenario_t *s = parse("scenario \"x\"\ntimeout 10s\ntrain 25s\nexpect ok\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->train_ns, 25 * DDP_NS_PER_S);
    for (size_t i = 0; i < ddp_accel_count(); i++) {
        ddp_scn_result_t r;
        const char *acc = ddp_accel_at(i)->name;
        CU_ASSERT_EQUAL(ddp_scenario_run(s, acc, NULL, &r), 0);
        if (!r.pass)
            printf("\n  %s: %s\n", acc, r.why);
        CU_ASSERT_TRUE(r.pass);
        CU_ASSERT_TRUE(r.virtual_ns >= 25 * DDP_NS_PER_S);
    }
    ddp_scenario_free(s);
}

/* A plugin that leaks a socket after connecting (a raw connection to the
 * store it never closes): the leaked-socket invariant catches it although
 * every expectation holds. */
static int leaky_init(const ddp_plugin_t *self, ddp_ctx_t *ctx, ddp_cluster_t *env,
                      int rank, int world)
{
    int rc = ddp_plugin_default_init_ddp_connection(self, ctx, env, rank, world);
    if (rc == 0 && rank == 1) {
        char addr[64];
        uint16_t port = 0;
        ddp_cluster_main_address(env, addr, sizeof addr);
        ddp_cluster_main_port(env, &port);
        (void)ddp_sys_connect_host(ctx->sys, addr, port, ctx->deadline); /* never closed */
    }
    return rc;
}

static void test_leak_invariant(void)
{
    static const ddp_plugin_t leaky = {.name = "test-leaky", .init_ddp_connection = leaky_init};
    CU_ASSERT_EQUAL(ddp_plugin_register(&leaky), 0);
    ddp_scenario_t *s = parse("scenario \"leak\"\nplugin test-leaky\nexpect ok\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp_hpc", NULL, &r), 0);
    CU_ASSERT_TRUE(r.expect_ok);
    CU_ASSERT_FALSE(r.invariants_ok);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.why, "socket(s) still open"));
    ddp_scenario_free(s);
}

/* Same seed, same trace; another seed, another schedule. */
static void test_determinism(void)
{
    ddp_scenario_t *s = parse("scenario \"d\"\nnodes 3\ndevices 2\nfault reset port=29500 "
                              "count=2\nfault delay delay=3ms\nexpect invariants\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ddp_scn_result_t a, b, c;
    ddp_scn_run_opts_t o = {.seed = 11};
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", &o, &a), 0);
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", &o, &b), 0);
    o.seed = 12;
    CU_ASSERT_EQUAL(ddp_scenario_run(s, "ddp", &o, &c), 0);
    CU_ASSERT_EQUAL(a.trace_hash, b.trace_hash);
    CU_ASSERT_NOT_EQUAL(a.trace_hash, c.trace_hash);
    ddp_scenario_free(s);
}

static void test_cli(void)
{
    char bin[400];
    if (!ddp_test_ddpsim_bin(bin, sizeof bin))
        return;
    char out[16384];
    CU_ASSERT_EQUAL(run_cmd("run scenarios/clean-start.scn scenarios/port-taken.scn "
                            "--junit build/test-scenarios.xml --no-progress",
                            out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "12 run(s) of 2 scenario file(s): 12 ok, 0 failed"));
    FILE *f = fopen("build/test-scenarios.xml", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t len = fread(out, 1, sizeof out - 1, f);
    out[len] = '\0';
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "<testsuite name=\"scenarios\" tests=\"12\" failures=\"0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "classname=\"port-taken\" name=\"ddp_cpu_hpc\""));
    /* A failing expectation: exit 1, the row and why. */
    f = fopen("build/test-wrong.scn", "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("scenario \"wrong\"\nport_taken\nexpect ok\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(run_cmd("run build/test-wrong.scn --accelerator ddp2", out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "FAIL"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "why: line 3: expected rank 0 to connect"));
    /* replay prints the hash, identical twice. */
    char out2[16384];
    CU_ASSERT_EQUAL(run_cmd("replay scenarios/crash-joining.scn --seed 5 --accelerator ddp",
                            out, sizeof out), 0);
    CU_ASSERT_EQUAL(run_cmd("replay scenarios/crash-joining.scn --seed 5 --accelerator ddp",
                            out2, sizeof out2), 0);
    /* Same rows and hash; only the closing wall time may differ. */
    char *h1 = strstr(out, "trace hash "), *h2 = strstr(out2, "trace hash ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h2);
    CU_ASSERT_EQUAL(strncmp(out, out2, (size_t)(h1 - out) + 27), 0);
    CU_ASSERT_EQUAL(run_cmd("list faults", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "refuse\nreset\nblackhole\ndelay\npartition\ncrash\npause\nresolve\npoint\n");
    CU_ASSERT_EQUAL(run_cmd("list nonsense", out, sizeof out), 2);
    CU_ASSERT_EQUAL(run_cmd("run --help", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ddpsim run FILE..."));
    CU_ASSERT_EQUAL(run_cmd("run scenarios/clean-start.scn --jobs 0", out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--jobs"));
    CU_ASSERT_EQUAL(run_cmd("run scenarios/clean-start.scn scenarios/master-late.scn --jobs 2",
                            out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "12 ok, 0 failed"));
}

DDP_SUITE("scenario", NULL, NULL,
          {"malformed files: file:line:col errors (library)", test_bad_inputs_library},
          {"malformed files: ddpsim run exits 2 with the error", test_bad_inputs_cli},
          {"bundled scenarios round-trip through write", test_round_trip},
          {"bundled scenarios x accelerators meet their expectations", test_bundled_library},
          {"wrong expectations are reported with their line", test_wrong_expectations_fail},
          {"train D: every rank trains D, then ends cleanly", test_train},
          {"leaked socket invariant", test_leak_invariant},
          {"same seed same trace, other seed other trace", test_determinism},
          {"ddpsim run / replay / list", test_cli})
