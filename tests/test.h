/* tests/test.h — self-registering CUnit suites.
 *
 * Each tests/test_*.c file declares its suite with DDP_SUITE(name, init,
 * cleanup, {"test name", fn}, ...): a constructor adds it to the list that
 * tests/main.c registers, so no central list has to be edited.
 */
#ifndef DDP_TEST_H
#define DDP_TEST_H

#include <CUnit/CUnit.h>
#include <stddef.h>

typedef struct ddp_test_case {
    const char *name;
    void (*fn)(void);
} ddp_test_case_t;

typedef struct ddp_test_suite {
    const char *name;
    int (*init)(void);
    int (*cleanup)(void);
    const ddp_test_case_t *cases;
    size_t ncases;
    struct ddp_test_suite *next;
} ddp_test_suite_t;

void ddp_test_add_suite(ddp_test_suite_t *s);

#define DDP_SUITE(sname, sinit, scleanup, ...)                                 \
    static const ddp_test_case_t ddp__cases_[] = {__VA_ARGS__};               \
    static ddp_test_suite_t ddp__suite_ = {                                    \
        sname, sinit, scleanup, ddp__cases_,                                   \
        sizeof(ddp__cases_) / sizeof(ddp__cases_[0]), NULL};                   \
    __attribute__((constructor)) static void ddp__register_suite_(void)        \
    {                                                                          \
        ddp_test_add_suite(&ddp__suite_);                                      \
    }

/* Helpers shared by the suites (tests/util.c). */
struct ddp_sys;
/* A POSIX sys with an empty environment (tests must not depend on the CI's). */
struct ddp_sys *ddp_test_sys(void);
/* now + ms on that sys. */
long long ddp_test_deadline_ms(struct ddp_sys *sys, long long ms);

/* Suite init/cleanup for suites on one such sys: *sys is made (0, or -1
 * when it cannot be) and freed again; with quiet, log levels below ERROR
 * are muted in between (servers warn about clients tests drop on purpose). */
int ddp_test_suite_sys_init(struct ddp_sys **sys, int quiet);
int ddp_test_suite_sys_cleanup(struct ddp_sys **sys);

/* A store server on its own thread (o NULL: the defaults), asserted to
 * start; ddp_test_server_end joins and frees it, and
 * ddp_test_suite_sys_cleanup ends any a failed test left running. */
struct ddp_store_server;
struct ddp_store_server_opts;
struct ddp_store_server *
ddp_test_server_start(struct ddp_sys *sys,
                      const struct ddp_store_server_opts *o);
/* The same on 127.0.0.1 (port 0: any free one). */
struct ddp_store_server *ddp_test_server_start_loopback(struct ddp_sys *sys,
                                                        unsigned short port);
void ddp_test_server_end(struct ddp_store_server *srv);

/* Records the running test as skipped (tests/main.c): it prints
 * "skipped: WHY", counts in the run's "N skipped" and is marked
 * <skipped message="WHY"/> in the JUnit file. The test returns after it.
 * CUnit itself has no skip: a test that returns early without this
 * counts as a pass. */
void ddp_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The ddpsim command the Makefile's test target names in $DDPSIM, read
 * through the env map like everything else: copied into buf, or NULL
 * outside `make test`. */
const char *ddp_test_ddpsim_bin(char *buf, size_t n);
/* The same, but NULL also records the test as skipped (with why): a test
 * that needs the command returns when it gets NULL. */
const char *ddp_test_need_ddpsim(char *buf, size_t n);
/* 1 when the command is there; else 0, the test recorded as skipped. */
int ddp_test_have_ddpsim(void);
/* The text of the skip of a test outside `make test`. */
#define DDP_TEST_NO_DDPSIM "no ddpsim command ($DDPSIM is set by `make test`; run the suite there)"
/* Runs `ddpsim ARGS` through the shell; its stdout (and stderr too with
 * with_stderr) into out, NUL-terminated; returns the exit status, -1 when
 * there is no command or it did not exit. */
int ddp_test_ddpsim(const char *args, int with_stderr, char *out, size_t n);
/* The same under `timeout` (DDP_TEST_DDPSIM_LIMIT_S, then exit 124) with
 * the variables env ("A=1 B=2", or NULL) set, and only one stream into
 * out: stderr when want_stderr (stdout then goes to /dev/null), else
 * stdout. */
#define DDP_TEST_DDPSIM_LIMIT_S 120
int ddp_test_ddpsim_io(const char *env, const char *args, int want_stderr, char *out,
                       size_t n);
/* DIR/NAME of a plugin library the Makefile built for the tests
 * ($DDP_TEST_PLUGIN_DIR under make test; else test_plugins/ next to this
 * program). */
const char *ddp_test_plugin_lib(char *buf, size_t n, const char *name);
/* A differential sample's verdict (tests/addr_gen.c, tests/torch_gen.c):
 * no disagreement (the first printed), and both answers seen: the
 * reference accepted more than 20 and fewer than tried - 20. */
void ddp_test_diff_verdict(const char *family, long tried, long accepted, long disagreed,
                           const char *first);
/* A fresh folder /tmp/ddpsim-TAG-XXXXXX into dir (n bytes); NULL when it
 * cannot be made. */
const char *ddp_test_tmpdir(char *dir, size_t n, const char *tag);
/* "DIR/NAME" into buf; returns buf. */
const char *ddp_test_in(char *buf, size_t n, const char *dir, const char *name);
/* A character device at path (mknod: root only), else a FIFO standing in
 * for it: 1 device, 0 FIFO, -1 neither. */
int ddp_test_mkdev(const char *path);
/* A wall-clock limit of base_s seconds for a test that spawns processes,
 * scaled for this build (ASan 3x, TSan 5x), by the host's load (the
 * 1-minute load average per CPU, from 1x to 20x: at load 30 on 2 CPUs a
 * process gets a fifteenth of one, and fixed limits killed runs that were
 * only starved) and by $DDP_TEST_WALL_SCALE (a positive factor). Limits
 * bound a hang; they never measure. _for: with the knob's text (NULL:
 * unset) and the load per CPU given. */
int ddp_test_wall_s(int base_s);
int ddp_test_wall_s_for(int base_s, const char *knob, double load_per_cpu);
/* The deadline on sys ddp_test_wall_s(base_s) seconds from now. */
long long ddp_test_bound(struct ddp_sys *sys, int base_s);
/* The same within limit_s seconds (scaled by ddp_test_wall_s): for a command line that must be refused
 * at once (a bad option), so that one wrongly accepted fails in seconds
 * rather than running a whole sweep or a server. */
int ddp_test_ddpsim_io_within(int limit_s, const char *env, const char *args,
                              int want_stderr, char *out, size_t n);

/* The planted leak of several suites' plugins: a connection to the main
 * address and port of env that is never closed (the leaked-socket
 * invariant must name it). */
struct ddp_ctx;
struct ddp_cluster;
void ddp_test_leak_store_connection(struct ddp_ctx *ctx, struct ddp_cluster *env);

/* A scenario parsed from text (as file "inline.scn"), or NULL with the
 * parser's message printed. */
struct ddp_scenario;
struct ddp_scenario *ddp_test_scenario(const char *text);

/* Runs a subcommand (tools/cmds.h: ddp_cmd_run, ddp_cmd_explore, ...) in a
 * child of this process, so that plugins only the tests register are
 * there: args is its command line from the subcommand's name on ("explore
 * --runs 3", split at spaces); its stdout and stderr into out; returns the
 * exit status, or -1. */
int ddp_test_cmd_inproc(int (*cmd)(struct ddp_sys *, int, char **), const char *args,
                        char *out, size_t n);

/* Runs this test program again, on `selection` (SUITE/TEST; no single
 * quotes), with the variables env ("A=1 B=2") added, under `timeout`
 * (DDP_TEST_DDPSIM_LIMIT_S); its stdout and stderr into out. Returns the
 * exit status, -1 when it did not exit or cannot be found: the suites that
 * need a process of their own (a fake library loaded) use it. */
int ddp_test_run_self(const char *env, const char *selection, char *out, size_t n);
/* The same with its JUnit XML written to junit (--junit). */
int ddp_test_run_self_junit(const char *env, const char *junit, const char *selection,
                            char *out, size_t n);

/* Reads "host:port" under key from the store (waiting for it until the
 * deadline) and connects there: the descriptor, or a negative error. The
 * strays of the tcp backend's tests use it on a rank's listen address. */
struct ddp_store;
int ddp_test_connect_published(struct ddp_sys *sys, struct ddp_store *st, const char *key,
                               long long deadline);

/* Runs cmd through the shell; its stdout into out (n bytes at most,
 * NUL-terminated); the exit status, -1 when it did not exit. */
int ddp_test_shell_read(const char *cmd, char *out, size_t n);

/* A whole file (at most n - 1 bytes) into buf, NUL-terminated; "" when it
 * cannot be read. Returns buf. */
const char *ddp_test_read_file(const char *path, char *buf, size_t n);

/* Writes text to path (a scenario a test made): 0, or -1. */
int ddp_test_write_file(const char *path, const char *text);
/* A scenario that fails on purpose: it expects ok of a run whose port is
 * taken (so "line 3: expected rank 0 to connect"). */
#define DDP_TEST_WRONG_SCN "scenario \"wrong on purpose\"\nport_taken\nexpect ok\n"

/* How many file descriptors this process has open (/proc/self/fd), -1
 * when it cannot tell: tests that count what a run left open. */
int ddp_test_open_fds(void);

#endif
