/* tests/test_plugin_lib.c — plugins loaded from shared libraries
 * (ddp_plugin_load, docs/plugin.md): a good library, a missing file, a
 * library without the descriptor, another ABI version, a name clash with a
 * built-in plugin, the unknown-plugin message; then the command with a
 * loaded plugin: run (--plugin, and a scenario's plugin-library line
 * relative to its file), a real run (its processes load the library from
 * the plan), and explore's printed replay command, pasted.
 *
 * The libraries are tests/plugin_lib/ddptest_plugin.c, built by the
 * Makefile into $(B)/test_plugins ($DDP_TEST_PLUGIN_DIR under make test;
 * else next to this program). */
#include "test.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"

static ddp_sys_t *g_sys;

static int suite_init(void) { return ddp_test_suite_sys_init(&g_sys, 1); }
static int suite_cleanup(void) { return ddp_test_suite_sys_cleanup(&g_sys); }

/* DIR/NAME of a test plugin library. */
static const char *lib_path(char *buf, size_t n, const char *name)
{
    return ddp_test_plugin_lib(buf, n, name);
}

/* A failed load: its code, nothing registered, the sentence and the hint
 * holding what they must. */
static void check_refused(const char *name, int want_rc, const char *what1, const char *what2,
                          const char *hint)
{
    char path[1200];
    lib_path(path, sizeof path, name);
    size_t before = ddp_plugin_count();
    const ddp_plugin_t *p = (const ddp_plugin_t *)1;
    int rc = ddp_plugin_load(g_sys, path, &p);
    const ddp_errctx_t *c = ddp_err_ctx();
    int good = rc == want_rc && p == NULL && ddp_plugin_count() == before &&
               strstr(c->what, what1) && (!what2 || strstr(c->what, what2)) &&
               strstr(c->hint, hint);
    if (!good)
        printf("\n  %s: rc %d (want %d), plugins %zu -> %zu\n  what: %s\n  hint: %s\n", name,
               rc, want_rc, before, ddp_plugin_count(), c->what, c->hint);
    CU_ASSERT_TRUE(good);
}

static void test_load_ok(void)
{
    char path[1200], again[1300], copy[1200];
    lib_path(path, sizeof path, "libddptest.so");
    const ddp_plugin_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_plugin_load(g_sys, path, &p), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(p->name, "ddptest");
    CU_ASSERT_PTR_EQUAL(ddp_plugin_find("ddptest"), p);
    CU_ASSERT_STRING_EQUAL(p->phases[0], "ddptest step");
    const char *lib = ddp_plugin_library(p);
    CU_ASSERT_TRUE_FATAL(lib && lib[0] == '/');
    CU_ASSERT_STRING_EQUAL(lib + strlen(lib) - strlen("/libddptest.so"), "/libddptest.so");
    CU_ASSERT_PTR_NULL(ddp_plugin_library(ddp_plugin_find("subgroups")));
    /* The same file again, by another path: the same plugin, nothing new. */
    size_t n = ddp_plugin_count();
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(again, sizeof again, "%s/../test_plugins/libddptest.so", dirname(copy));
    const ddp_plugin_t *q = NULL;
    CU_ASSERT_EQUAL(ddp_plugin_load(g_sys, again, &q), 0);
    CU_ASSERT_PTR_EQUAL(q, p);
    CU_ASSERT_EQUAL(ddp_plugin_count(), n);
    CU_ASSERT_TRUE(ddp_plugin_is_library_path("./libx.so"));
    CU_ASSERT_TRUE(ddp_plugin_is_library_path("libx.so"));
    CU_ASSERT_FALSE(ddp_plugin_is_library_path("subgroups"));
}

static void test_missing_file(void)
{
    check_refused("libddptest-not-built.so", -ENOENT, "no such file", "cannot load plugin library",
                  "build it first");
}

static void test_no_symbol(void)
{
    check_refused("libddptest-nosym.so", DDP_ECONFIG, "exports no ddp_plugin_v1",
                  "not a ddpsim plugin library", "DDP_PLUGIN_EXPORT const ddp_plugin_v1_t");
}

static void test_abi_mismatch(void)
{
    char want[64];
    snprintf(want, sizeof want, "this ddpsim loads version %d", DDP_PLUGIN_ABI_VERSION);
    check_refused("libddptest-abi.so", DDP_ECONFIG, "built for plugin ABI version 99", want,
                  "rebuild the plugin against this ddpsim's headers");
}

static void test_name_clash(void)
{
    const ddp_plugin_t *builtin = ddp_plugin_find("subgroups");
    check_refused("libddptest-clash.so", DDP_ECONFIG,
                  "its plugin \"subgroups\" has the name of a built-in plugin", NULL, "rename");
    CU_ASSERT_PTR_EQUAL(ddp_plugin_find("subgroups"), builtin);
}

/* The registry's message, the scenario parser's and the command's: the
 * names once, no error code inside the list, a way to a plugin of one's own. */
static void test_unknown_plugin_message(void)
{
    CU_ASSERT_PTR_NULL(ddp_plugin_find("nosuch"));
    const ddp_errctx_t *c = ddp_err_ctx();
    CU_ASSERT_EQUAL(c->code, DDP_ENOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(c->what, "unknown plugin \"nosuch\" (the plugins here: "
                                           "default, subgroups, rpc"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c->hint, "--plugin ./libNAME.so"));

    ddp_scenario_t *s = NULL;
    char err[512];
    CU_ASSERT_EQUAL(ddp_scenario_parse("scenario \"x\"\nplugin nosuch\nexpect ok\n", "x.scn",
                                       NULL, &s, err, sizeof err),
                    DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "x.scn:2:8: expected a plugin (default, subgroups, rpc"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "plugin-library PATH"));
    CU_ASSERT_PTR_NULL(strstr(err, "DDP_ENOT_FOUND"));
    CU_ASSERT_PTR_NULL(strstr(err, "))"));
    if (!strstr(err, "expected a plugin (default"))
        printf("\n  parse error: %s\n", err);

    char out[2048];
    if (ddp_test_ddpsim_io_within(15, NULL, "run --plugin nosuch scenarios/clean-start.scn", 1,
                                  out, sizeof out) == -1) {
        ddp_test_skip(DDP_TEST_NO_DDPSIM);
        return;
    }
    CU_ASSERT_STRING_EQUAL(out, "ddpsim run: bad --plugin \"nosuch\"; expected one of default, "
                                "subgroups, rpc or a plugin library's path (./libNAME.so)\n");
}

/* A scenario's plugin-library line: relative to the scenario's folder,
 * and written back (absolute) so that parse(write(s)) is s. */
static void test_scenario_line(void)
{
    char dir[256], scn[400], lib[1200], link[400], err[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "plugin-lib"));
    lib_path(lib, sizeof lib, "libddptest.so");
    ddp_test_in(link, sizeof link, dir, "mine.so");
    CU_ASSERT_EQUAL_FATAL(symlink(lib, link), 0);
    ddp_test_in(scn, sizeof scn, dir, "s.scn");
    FILE *f = fopen(scn, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("scenario \"lib\"\nnodes 2\ndevices 2\nplugin-library mine.so\n"
          "fault crash ranks=1 phase=\"ddptest step\"\nexpect crashed ranks=1\n"
          "expect fail ranks=others\n", f);
    fclose(f);
    ddp_scenario_t *s = NULL, *t = NULL;
    int rc = ddp_scenario_load(scn, &s, err, sizeof err);
    if (rc)
        printf("\n  %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(s->plugin, "ddptest");
    CU_ASSERT_EQUAL(s->plugin_lib[0], '/');
    char *text = ddp_scenario_text(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "plugin-library \""));
    CU_ASSERT_EQUAL(ddp_scenario_parse(text, "w.scn", "/nonexistent", &t, err, sizeof err), 0);
    char why[256] = "";
    CU_ASSERT_TRUE(t && ddp_scenario_equal(s, t, why, sizeof why));
    free(text);
    ddp_scenario_free(t);
    ddp_scenario_free(s);
    /* every accelerator, the plugin's own phase hit, by the command */
    char args[600], out[1 << 14];
    snprintf(args, sizeof args, "run --no-progress %s", scn);
    int st = ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
    if (st != -1) {
        CU_ASSERT_EQUAL(st, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "6 run(s) of 1 scenario file(s): 6 ok, 0 failed"));
    }
    /* a line naming a file that is not there */
    f = fopen(scn, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("scenario \"lib\"\nplugin-library gone.so\nexpect ok\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(ddp_scenario_load(scn, &s, err, sizeof err), DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "s.scn:2:16: expected a plugin library, got "
                                       "\"gone.so\": cannot load plugin library"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "hint: build it first"));
    remove(scn);
    remove(link);
    rmdir(dir);
}

/* `ddpsim run --plugin PATH`: scenarios naming no plugin run it, one that
 * names it finds it, in the simulator and as real processes (each loads
 * the library from its plan). Without --plugin the scenario is refused. */
static void test_cmd_run(void)
{
    char lib[1200], args[1600], out[1 << 14];
    lib_path(lib, sizeof lib, "libddptest.so");
    snprintf(args, sizeof args, "run --no-progress --plugin %s tests/plugin_lib/ddptest-step.scn "
                                "scenarios/clean-start.scn", lib);
    int st = ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
    if (st == -1) {
        ddp_test_skip(DDP_TEST_NO_DDPSIM);
        return;
    }
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "12 run(s) of 2 scenario file(s): 12 ok, 0 failed"));
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, "run tests/plugin_lib/ddptest-step.scn", 0, out,
                                       sizeof out), 2);
    /* shards and their merge, the Chrome trace: the plugin's own phase is
     * in the trace, the library's path in each shard's sweep line */
    char tdir[256], res[2][400], chrome[400], body[1 << 14];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(tdir, sizeof tdir, "plugin-shards"));
    for (int k = 0; k < 2; k++) {
        char name[16];
        snprintf(name, sizeof name, "r%d.res", k + 1);
        ddp_test_in(res[k], sizeof res[k], tdir, name);
        snprintf(args, sizeof args, "run --no-progress --plugin %s --shard %d/2 --results %s "
                                    "tests/plugin_lib/ddptest-step.scn scenarios/clean-start.scn",
                 lib, k + 1, res[k]);
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 0);
        ddp_test_read_file(res[k], body, sizeof body);
        CU_ASSERT_PTR_NOT_NULL(strstr(body, " --plugin /"));
    }
    snprintf(args, sizeof args, "merge %s %s", res[0], res[1]);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "12 run(s) of 2 scenario file(s): 12 ok, 0 failed"));
    ddp_test_in(chrome, sizeof chrome, tdir, "t.json");
    snprintf(args, sizeof args, "replay --plugin %s --accelerator ddp --trace-chrome %s "
                                "tests/plugin_lib/ddptest-step.scn", lib, chrome);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_test_read_file(chrome, body, sizeof body), "ddptest step"));
    remove(res[0]);
    remove(res[1]);
    remove(chrome);
    rmdir(tdir);
    /* real processes, on a free port (another run may hold the default) */
    char dir[256], scn[400], text[4096];
    uint16_t port = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(g_sys, &port), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "plugin-real"));
    ddp_test_in(scn, sizeof scn, dir, "step.scn");
    ddp_test_read_file("tests/plugin_lib/ddptest-step.scn", text, sizeof text);
    FILE *f = fopen(scn, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "%sport %u\n", text, (unsigned)port);
    fclose(f);
    snprintf(args, sizeof args, "run --real --no-progress --accelerator ddp_cpu --plugin %s %s",
             lib, scn);
    st = ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "crash+fail crash+fail ok"));
    if (st != 0)
        printf("\n%s\n", out);
    remove(scn);
    rmdir(dir);
}

/* explore with a library plugin that leaks a socket: the violation's
 * replay command names --plugin PATH, and pasted as printed (ddpsim ->
 * the built command) it reproduces the violation. */
static void test_explore_replay_command(void)
{
    char lib[1200], dir[256], args[1600], bin[400];
    static char out[1 << 16];
    if (!ddp_test_need_ddpsim(bin, sizeof bin))
        return;
    lib_path(lib, sizeof lib, "libddptest-leak.so");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "plugin-explore"));
    snprintf(args, sizeof args, "explore --runs 1 --ranks 2 --no-progress --out %s --plugin %s",
             dir, lib);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 1);
    const char *r = strstr(out, "  replay: ddpsim replay ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    r += strlen("  replay: ddpsim ");
    size_t len = strcspn(r, "\n");
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "%.*s", (int)len, r);
    CU_ASSERT_PTR_NOT_NULL(strstr(cmd, " --plugin /"));
    /* pasted from another folder: the scenario file is absolute, so is
     * the library's path */
    snprintf(args, sizeof args, "%s", cmd);
    char cwd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    CU_ASSERT_EQUAL_FATAL(chdir("/"), 0);
    int st = ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
    CU_ASSERT_EQUAL(chdir(cwd), 0);
    CU_ASSERT_EQUAL(st, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "socket(s) still open (leaked)"));
    if (st != 1)
        printf("\n  ddpsim %s: exit %d\n%s\n", cmd, st, out);
    char rm[400];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(rm), 0);
}

/* A plugin library's code is not the project's: its runs get 64 KiB
 * stacks (DDP_SIM_STACK_FOREIGN), not the 32 KiB default, so a plugin
 * that uses 40 KiB of stack connects instead of dying on a guard page. */
static void test_foreign_stack(void)
{
    char lib[1200], args[1400], bin[400];
    static char out[1 << 16];
    if (!ddp_test_ddpsim_bin(bin, sizeof bin))
        return; /* outside make test */
    lib_path(lib, sizeof lib, "libddptest-deep.so");
    snprintf(args, sizeof args, "sim --nodes 2 --procs 2 --plugin %s", lib);
    int st = ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "4 rank(s): 4 ok, 0 failed"));
    if (st != 0)
        printf("\n  ddpsim %s: exit %d\n%s\n", args, st, out);
}

DDP_SUITE("plugin_lib", suite_init, suite_cleanup,
          {"a plugin library loads, once per file", test_load_ok},
          {"a missing file: no such file, with a hint", test_missing_file},
          {"a library without ddp_plugin_v1: refused, with a hint", test_no_symbol},
          {"another ABI version: both versions named", test_abi_mismatch},
          {"a built-in plugin's name: refused, the built-in stays", test_name_clash},
          {"an unknown plugin's message: the names, no code inside, a hint",
           test_unknown_plugin_message},
          {"plugin-library: relative to the scenario, written back", test_scenario_line},
          {"ddpsim run --plugin PATH: table, shards, merge, trace, replay, real",
           test_cmd_run},
          {"explore's replay command with --plugin, pasted", test_explore_replay_command},
          {"a plugin library's runs get 64 KiB stacks", test_foreign_stack});
