/* tests/test_real_exec.c — a foreign program's outcome class from its exit
 * status and stderr (harness/real_exec.c): torch 1.13's and 2.11's own
 * messages, as seen from real runs, map to the simulator's classes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/real_priv.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/real.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"
#include "test.h"

static void test_torch_messages(void)
{
    static const struct {
        int status;
        const char *err, *class, *line;
    } cases[] = {
        {0, "", "", ""},
        {1,
         "Traceback (most recent call last):\n  File \"x.py\", line 3\n"
         "RuntimeError: The server socket has failed to listen on any local network "
         "address. The server socket has failed to bind to [::]:31557 (errno: 98 - "
         "Address already in use).\n",
         "addrinuse", "RuntimeError: The server socket has failed to listen"},
        {1, "    return TCPStore(\n           ^^^\nTimeoutError: The client socket has "
            "timed out after 5s while trying to connect to (127.0.0.1, 31556).\n",
         "timeout", "TimeoutError: The client socket"},
        {1, "  pg = ProcessGroupGloo(...)\nRuntimeError: Socket Timeout\n", "timeout",
         "RuntimeError: Socket Timeout"},
        {1, "RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting "
            "10000ms for send operation to complete\n",
         "timeout", "RuntimeError: [./gloo"},
        {1, "RuntimeError: Connection reset by peer\n", "peer_lost",
         "RuntimeError: Connection reset by peer"},
        /* gloo's connect to a peer that is gone */
        {1, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
            "[127.0.0.1]:41235: Connection refused\n",
         "peer_lost", "RuntimeError: [../third_party/gloo"},
        /* torch 2.11, as its job said under torch-crash-joining on loopback */
        {1, "torch.distributed.DistStoreError: Timed out after 16 seconds waiting for "
            "clients. 3/4 clients joined.\n",
         "timeout", "DistStoreError: Timed out after 16 seconds"},
        {1, "  File \"x.py\", line 9\ntorch.distributed.DistNetworkError: Failed to recv, "
            "got 0 bytes. Connection was likely closed. Did the remote server shutdown "
            "or crash?\n",
         "peer_lost", "DistNetworkError: Failed to recv"},
        {1, "ValueError: Error initializing torch.distributed using env:// rendezvous: "
            "environment variable RANK expected, but not set\n",
         "config", "ValueError: Error initializing"},
        /* a warning after the exception does not hide it */
        {1, "RuntimeError: Socket Timeout\nwarning: leaked semaphore\n", "timeout",
         "RuntimeError: Socket Timeout"},
        /* nor does a log line whose words before a ':' end in Error */
        {1, "RuntimeError: Socket Timeout\nrank 1 saw an Error: giving up\n", "timeout",
         "RuntimeError: Socket Timeout"},
        /* a chained traceback: the last exception is the one that ended it */
        {1, "ConnectionResetError: [Errno 104] Connection reset by peer\n\nDuring handling "
            "of the above exception, another exception occurred:\n\nTraceback (most recent "
            "call last):\nRuntimeError: Socket Timeout\n",
         "timeout", "RuntimeError: Socket Timeout"},
        /* an exit 0 is a success, whatever was said on stderr */
        {0, "UserWarning: TypedStorage is deprecated\n", "", ""},
        {2, "something odd\n", "internal", "something odd"},
        {137, "", "internal", "nothing on stderr"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[600];
        int code = ddp__real_classify(cases[i].status, cases[i].err, msg, sizeof msg);
        if (!cases[i].status) {
            CU_ASSERT_EQUAL(code, 0);
            continue;
        }
        CU_ASSERT_STRING_EQUAL(ddp_scn_error_class(code), cases[i].class);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, cases[i].line));
        if (strcmp(ddp_scn_error_class(code), cases[i].class) || !strstr(msg, cases[i].line))
            printf("\n  case %zu: %s: %s\n", i, ddp_scn_error_class(code), msg);
    }
}

/* Issue 42 (the gloo hang under load): the runner read at most 64 ack
 * numbers a round and moved past the rest, so a process whose event came
 * 65th waited out its 10 s for an ack that never came (a hosted store's
 * clients with it). Events past the room are left for the next read. */
static void test_event_acks_never_dropped(void)
{
    char dir[64], path[128];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "acks"));
    snprintf(path, sizeof path, "%s/results", dir);
    for (int i = 1; i <= 100; i++) {
        ddp_fault_event_t ev = {.kind = DDP_TRIG_SET, .rank = 0, .name = "k", .value = -1};
        ddp__real_event_write(path, &ev, i, (unsigned long long)i);
    }
    ddp__real_acks_t acks;
    long off = 0;
    int seen = 0, rounds = 0;
    unsigned long long next = 1;
    for (; rounds < 5 && seen < 100; rounds++) {
        acks = (ddp__real_acks_t){0};
        ddp__real_events_read(path, &off, NULL, 0, 0, &acks);
        for (int i = 0; i < acks.n; i++)
            CU_ASSERT_EQUAL(acks.v[i], next++);
        seen += acks.n;
    }
    CU_ASSERT_EQUAL(seen, 100);
    CU_ASSERT_EQUAL(rounds, 2);
    unlink(path);
    rmdir(dir);
}

/* Issue 42: `pause ranks=3 start=set:*rank_3* end=5s` under load reported
 * "0 processes stopped": the runner read rank 3's SET 6 s after it was
 * written, when a window counted from the record's time had closed. The
 * process that saw the event waits for the runner's ack, so an acked
 * event read late opens its window when read; one nobody waits for keeps
 * its own time. */
static void test_event_read_late_opens_when_read(void)
{
    char dir[64], path[128];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "late"));
    snprintf(path, sizeof path, "%s/results", dir);
    ddp_fault_t fl[2];
    for (int i = 0; i < 2; i++) {
        fl[i] = (ddp_fault_t){.kind = DDP_FAULT_PAUSE, .node = -1, .task = -1,
                              .peer_node = -1, .end_ns = 5 * DDP_NS_PER_S};
        CU_ASSERT_EQUAL(ddp_trigger_parse(i ? "set:other*" : "set:*rank_3*", &fl[i].start_on), 0);
    }
    ddp_faultset_t fs;
    CU_ASSERT_EQUAL_FATAL(ddp_faultset_init(&fs, fl, 2, 0, NULL, 4), 0);
    ddp_fault_event_t ev = {.kind = DDP_TRIG_SET, .rank = 3, .name = "/pg/rank_3", .value = -1};
    ddp__real_event_write(path, &ev, 1 * DDP_NS_PER_S, 77); /* waits for ack 77 */
    ev.name = "other";
    ddp__real_event_write(path, &ev, 1 * DDP_NS_PER_S, 0); /* waits for nothing */
    ddp_faultset_t *fss[1] = {&fs};
    ddp__real_acks_t acks = {.now = 7 * DDP_NS_PER_S}; /* read 6 s late */
    long off = 0;
    ddp__real_events_read(path, &off, fss, 1, 0, &acks);
    CU_ASSERT_EQUAL(acks.n, 1);
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 0, 7 * DDP_NS_PER_S));
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 0, 11 * DDP_NS_PER_S + DDP_NS_PER_S / 2));
    CU_ASSERT_FALSE(ddp_faultset_active(&fs, 0, 12 * DDP_NS_PER_S + 1));
    CU_ASSERT_FALSE(ddp_faultset_active(&fs, 1, 7 * DDP_NS_PER_S)); /* 1 s to 6 s */
    CU_ASSERT_TRUE(ddp_faultset_active(&fs, 1, 5 * DDP_NS_PER_S));
    ddp_faultset_free(&fs);
    unlink(path);
    rmdir(dir);
}

static void test_check_exec(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    ddp_env_set(ddp_sys_env(sys), "PATH", "/usr/bin:/bin");
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "sh -c 'exit 0'"), 0);
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "FOO=1 BAR=2 sh -c true"), 0);
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "/bin/sh -c true"), 0);
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "no-such-prog-4711 x"), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "no-such-prog-4711"));
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "/no/such/file"), -ENOENT);
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "/etc/passwd"), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "not executable"));
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "   "), -ENOENT);
    /* no PATH: looked up as the shell would, in /usr/bin:/bin */
    ddp_env_unset(ddp_sys_env(sys), "PATH");
    CU_ASSERT_EQUAL(ddp_real_check_exec(sys, "sh -c true"), 0);
    ddp_sys_free(sys);
}

/* Which exec lines run without a shell: one simple command's words. */
static void test_exec_words(void)
{
    char buf[64], *w[8];
    CU_ASSERT_EQUAL(ddp__real_exec_words("  python3 train.py --lr=0.1\t-v ", buf, sizeof buf,
                                         w, 8), 4);
    CU_ASSERT_STRING_EQUAL(w[0], "python3");
    CU_ASSERT_STRING_EQUAL(w[2], "--lr=0.1");
    CU_ASSERT_STRING_EQUAL(w[3], "-v");
    CU_ASSERT_PTR_NULL(w[4]);
    const char *shell[] = {"sh -c 'exit 0'", "FOO=1 prog", "prog $HOME", "a; b", "a && b",
                           "prog >out", "prog *.py", "~/prog", "prog # note", "a | b", ""};
    for (size_t i = 0; i < sizeof shell / sizeof shell[0]; i++)
        CU_ASSERT_EQUAL(ddp__real_exec_words(shell[i], buf, sizeof buf, w, 8), 0);
    CU_ASSERT_EQUAL(ddp__real_exec_words("a b c d e f g h", buf, sizeof buf, w, 8), 0);
    CU_ASSERT_EQUAL(ddp__real_exec_words("a b", buf, 3, w, 8), 0);
}

/* On loopback a port somebody already listens on is refused before any
 * process starts: its holder would otherwise be the master the ranks
 * reach (or its ranks would join this run's store). */
static void test_taken_master_port(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    uint16_t port = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(sys, &port), 0);
    ddp_addr_t a;
    ddp_addr_parse("0.0.0.0", port, &a);
    int fd = ddp_sys_listen(sys, &a, 1);
    CU_ASSERT_FATAL(fd >= 0);
    char text[200], err[300];
    snprintf(text, sizeof text, "scenario \"taken\"\nnodes 1\ndevices 2\nport %u\n"
                                "expect ok\n", (unsigned)port);
    ddp_scenario_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_parse(text, "taken.scn", NULL, &s, err, sizeof err), 0);
    ddp_real_opts_t o = {.ddpsim = "/nonexistent/ddpsim"};
    ddp_scn_result_t r;
    CU_ASSERT_EQUAL(ddp_real_run(sys, s, "ddp", &o, &r), -EADDRINUSE);
    char want[64];
    snprintf(want, sizeof want, "port %u on this host was taken", (unsigned)port);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.why, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "--netns"));
    CU_ASSERT_FALSE(r.pass);
    ddp_sys_close(sys, fd);
    ddp_scenario_free(s);
    ddp_sys_free(sys);
}

/* The port the loopback pre-run check, the hosted store and the delay
 * proxy look at is the one the processes get: an out-of-range MASTER_PORT
 * or 0 (an ephemeral port) is no fixed port, not 29500 (where another job
 * might listen, and the run would be refused for it). */
static void test_job_port_as_given(void)
{
    static const struct {
        const char *value; /* NULL: unset */
        long want;
    } cases[] = {{NULL, 29500}, {"31000", 31000}, {"70000", -1}, {"0", -1},
                 {"-5", -1},    {"http", -1},     {"65535", 65535}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ddp_plan_t *p = ddp_plan_new();
        ddp_env_t *env = ddp_env_new();
        if (cases[i].value)
            ddp_env_set(env, "MASTER_PORT", cases[i].value);
        ddp_plan_add_node(p, "node0", "10.0.0.1");
        ddp_plan_add_proc(p, "rank0", 0, 0, 0, DDP_PLAN_TRAINER, env);
        long got = ddp__real_job_port(p, 0);
        if (got != cases[i].want)
            printf("\n  MASTER_PORT=%s: port %ld, want %ld\n",
                   cases[i].value ? cases[i].value : "(unset)", got, cases[i].want);
        CU_ASSERT_EQUAL(got, cases[i].want);
        ddp_env_free(env);
        ddp_plan_free(p);
    }
}

/* The retries column of a run's row ("NAME ACCEL ... RETRIES") in a run
 * table; -1 when there is no such row. */
static int row_retries(const char *table, const char *scenario, const char *accel)
{
    char head[128];
    snprintf(head, sizeof head, "\n%s ", scenario);
    for (const char *r = strstr(table, head); r; r = strstr(r + 1, head)) {
        const char *eol = strchr(r + 1, '\n');
        char row[256], a[32];
        snprintf(row, sizeof row, "%.*s", (int)(eol ? eol - r - 1 : 200), r + 1);
        const char *last = strrchr(row, ' ');
        if (sscanf(row, "%*s %31s", a) == 1 && !strcmp(a, accel) && last)
            return atoi(last + 1);
    }
    return -1;
}

/* The quick real runs' scenarios, each copied into dir with the port
 * this test owns: every "29500" of the file becomes it, an `include` names
 * its file by absolute path (the copy is elsewhere), and a last `port P`
 * line overrides what the file and its includes said (SLURM's `port none`
 * too). Its path into path. */
static void own_port_copy(char *path, size_t n, const char *dir, const char *name,
                          unsigned port)
{
    char src[128], cwd[512], line[512], pstr[8];
    snprintf(src, sizeof src, "scenarios/%s.scn", name);
    snprintf(pstr, sizeof pstr, "%u", port);
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    FILE *in = fopen(src, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    char file[128];
    snprintf(file, sizeof file, "%s.scn", name);
    FILE *out = fopen(ddp_test_in(path, n, dir, file), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    while (fgets(line, sizeof line, in)) {
        if (!strncmp(line, "include \"", 9) && line[9] != '/') {
            fprintf(out, "include \"%s/scenarios/%s", cwd, line + 9);
            continue;
        }
        for (char *at = strstr(line, "29500"); at; at = strstr(at + strlen(pstr), "29500")) {
            char rest[512];
            snprintf(rest, sizeof rest, "%s", at + 5);
            snprintf(at, sizeof line - (size_t)(at - line), "%s%s", pstr, rest);
        }
        fputs(line, out);
    }
    fprintf(out, "\nport %u\n", port);
    fclose(in);
    CU_ASSERT_EQUAL(fclose(out), 0);
}

static void remove_tree(const char *dir);
static uint16_t free_port(void);
__attribute__((format(printf, 5, 6))) static void write_file(char *path, size_t n,
                                                              const char *dir,
                                                              const char *name,
                                                              const char *fmt, ...);

/* What a test of a real run starts from: the ddpsim binary, a free port
 * of this host and a folder of its own under $TMPDIR; scn holds the path
 * of its scenario file once write_file wrote it there. */
typedef struct real_setup {
    char bin[400];
    uint16_t port;
    char dir[64];
    char scn[96];
} real_setup_t;

/* 1 with rs filled in (its folder named after tag); 0 when there is no
 * ddpsim binary (the test is reported skipped, and returns). No free port
 * or folder fails the test. */
static int real_setup(real_setup_t *rs, const char *tag)
{
    memset(rs, 0, sizeof *rs);
    if (!ddp_test_need_ddpsim(rs->bin, sizeof rs->bin))
        return 0;
    rs->port = free_port();
    CU_ASSERT_FATAL(rs->port > 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(rs->dir, sizeof rs->dir, tag));
    return 1;
}

/* Real runs on loopback, the quick ones (about 3 s): each launcher's
 * environment contract in real processes (torchrun, SLURM, mpirun), the
 * contract errors, and the faults a real run arms inside its processes
 * (reset and resolve through libfiu, pause by SIGSTOP). Every verdict must
 * hold, and every such fault must have fired (the run names one that did
 * not); the rest of the real set runs in CI (make real-scenarios). They run
 * on a port of their own (one the OS gave a moment ago: no fixed port,
 * so neither another job on 29500 nor a second copy of this test, make
 * mutate's parallel jobs, makes them skip or fail). Each command has 20 s
 * (they take under 4): a run that hangs (a fault that never stops firing)
 * fails here at once. */
#define REAL_QUICK_LIMIT_S 20
static const char *const quick_real[] = {
    "clean-start",        "torchrun",        "torchrun-bad-world", "slurm-hostlist",
    "slurm-interactive",  "slurm-bad-nodelist", "mpi-mpirun",       "mpi-no-master-addr",
    "resolve-flaky",      "reset-validate",  "pause-briefly",      "refuse-on-peer-phase"};

/* "run ... DIR/a.scn DIR/b.scn ..." for the named copies. */
static void quick_cmd(char *cmd, size_t n, const char *opts, const char *dir,
                      const char *const *names, size_t k)
{
    size_t off = (size_t)snprintf(cmd, n, "run %s", opts);
    for (size_t i = 0; i < k && off < n; i++)
        off += (size_t)snprintf(cmd + off, n - off, " %s/%s.scn", dir, names[i]);
}

static void test_quick_real_runs(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "quickreal"))
        return;
    static char out[1 << 16], cmd[4096];
    char path[256];
    for (size_t i = 0; i < sizeof quick_real / sizeof quick_real[0]; i++)
        own_port_copy(path, sizeof path, rs.dir, quick_real[i], rs.port);
    quick_cmd(cmd, sizeof cmd, "--real --tag real --no-progress", rs.dir, quick_real,
              sizeof quick_real / sizeof quick_real[0]);
    int st = ddp_test_ddpsim_io_within(REAL_QUICK_LIMIT_S, NULL, cmd, 0, out, sizeof out);
    const char *counts = strstr(out, " run(s) of 12 scenario file(s): ");
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(counts && strstr(counts, " ok, 0 failed, "));
    CU_ASSERT_PTR_NULL(strstr(out, "29500"));
    if (st != 0 || !counts || !strstr(counts, " ok, 0 failed, ")) {
        printf("\n  port %u, exit %d:\n%s", rs.port, st, out);
        goto out; /* a hang already cost 20 s */
    }
    /* The retries column counts the failed connects of a real run's ranks,
     * as the simulator does: reset-validate resets each process's first
     * three store connects (count= is per process for real), and its four
     * ranks are four processes under ddp. A count of connects, well under
     * a thousand in this 0.2 s run (not a time in ns). */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "    wall retries\n")); /* real time, not virtual */
    int retries = row_retries(out, "reset-validate", "ddp");
    CU_ASSERT(retries >= 12 && retries < 1000);
    if (retries < 12 || retries >= 1000)
        printf("\n  reset-validate ddp: %d retries, expected 12 or a few more:\n%s", retries,
               out);
    /* Every in-process fault acted (its hits come from the processes' F
     * records); one that cannot (its window opens after the run) makes the
     * run vacuous: not ok, exit 1, the fault named. */
    static char err[1 << 14];
    static const char *const two[] = {"resolve-flaky", "reset-validate"};
    quick_cmd(cmd, sizeof cmd, "--real --accelerator ddp --no-progress", rs.dir, two, 2);
    st = ddp_test_ddpsim_io_within(REAL_QUICK_LIMIT_S, NULL, cmd, 0, err, sizeof err);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NULL(strstr(err, "vacuous"));
    if (st != 0 || strstr(err, "vacuous"))
        printf("\n  exit %d:\n%s", st, err);
    write_file(path, sizeof path, rs.dir, "never-fires.scn",
               "scenario \"a resolve fault after the end\"\ntimeout 60s\nport %u\n"
               "fault resolve start=50s\nexpect ok\n", rs.port);
    snprintf(cmd, sizeof cmd, "run --real --accelerator ddp --no-progress %s", path);
    st = ddp_test_ddpsim_io_within(REAL_QUICK_LIMIT_S, NULL, cmd, 0, err, sizeof err);
    CU_ASSERT_EQUAL(st, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "vacuous: fault resolve (line 4) acted on nothing"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, ": 0 ok, 0 failed, 1 vacuous"));
out:
    remove_tree(rs.dir);
}


/* The processes whose command line holds `needle`; their pids into pids
 * (up to max). */
static int procs_with(const char *needle, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t got = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (got <= 0)
            continue; /* a zombie has none */
        for (ssize_t i = 0; i < got; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[got] = '\0';
        if (strstr(buf, needle) && n < max)
            pids[n++] = (pid_t)pid;
    }
    if (d)
        closedir(d);
    return n;
}

/* Waits (at most limit_s: a bound, not a measure) until the processes
 * holding needle number `want` or more (more: 1) or fewer (0). */
static int wait_procs(const char *needle, int want, int more, int limit_s)
{
    pid_t pids[64];
    int n = 0;
    for (int i = 0; i < ddp_test_wall_s(limit_s) * 50; i++) {
        n = procs_with(needle, pids, 64);
        if (more ? n >= want : n <= want)
            break;
        usleep(20000);
    }
    return n;
}

/* A free port of this host, for a real run of its own (0: none). */
static uint16_t free_port(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    uint16_t port = 0;
    if (!sys || ddp_sys_free_port(sys, &port) != 0)
        port = 0;
    ddp_sys_free(sys);
    return port;
}

/* Writes a file dir/name (a printf format and its arguments), its path in
 * path; a file that cannot be written fails the test. */
__attribute__((format(printf, 5, 6))) static void write_file(char *path, size_t n,
                                                              const char *dir,
                                                              const char *name,
                                                              const char *fmt, ...)
{
    FILE *f = fopen(ddp_test_in(path, n, dir, name), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    CU_ASSERT_EQUAL(fclose(f), 0);
}

/* Removes a test's folder and what is in it; failing to is a failure. */
static void remove_tree(const char *dir)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* The names in dir that start with prefix. */
static int files_with(const char *dir, const char *prefix)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.' && !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

/* Issue 34: SIGKILL of `ddpsim run --real` left every rank running,
 * holding the port, and its plan file in /tmp. The ranks die with their
 * runner (parent-death signal), the next run on the port starts cleanly
 * and sweeps the dead run's files. Ranks train for 60 s: still running
 * when their runner is killed. */
static void test_sigkill_leaves_no_rank(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "sigkill"))
        return;
    const char *scn = "build/test-real-sigkill.scn", *quick = "build/test-real-after.scn";
    FILE *f = fopen(scn, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "scenario \"killed while training\"\nnodes 1\ndevices 2\n"
               "accelerators ddp\nport %u\ntrain 60s\nexpect ok\n", (unsigned)rs.port);
    fclose(f);
    f = fopen(quick, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "scenario \"the next run\"\nnodes 1\ndevices 2\naccelerators ddp\n"
               "port %u\nexpect ok\n", (unsigned)rs.port);
    fclose(f);
    /* The runs' files in a folder of this test's own ($TMPDIR): nothing
     * else on the host sweeps them. */
    char env[96];
    snprintf(env, sizeof env, "TMPDIR=%s", rs.dir);
    fflush(NULL);
    pid_t runner = fork();
    CU_ASSERT_FATAL(runner >= 0);
    if (runner == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        setenv("TMPDIR", rs.dir, 1);
        execl(rs.bin, rs.bin, "run", "--real", "--no-progress", scn, (char *)NULL);
        _exit(127);
    }
    char needle[64];
    snprintf(needle, sizeof needle, "ddpsim-real-%ld-", (long)runner);
    int ranks = wait_procs(needle, 2, 1, 30);
    CU_ASSERT_EQUAL(ranks, 2);
    kill(runner, SIGKILL);
    waitpid(runner, NULL, 0);
    int left = wait_procs(needle, 0, 0, 10);
    CU_ASSERT_EQUAL(left, 0);
    if (left) { /* not ours to leave running */
        pid_t pids[64];
        int n = procs_with(needle, pids, 64);
        printf("\n  %d rank process(es) outlived their runner\n", n);
        for (int i = 0; i < n; i++)
            kill(pids[i], SIGKILL);
    }
    CU_ASSERT(files_with(rs.dir, needle) > 0); /* the killed run could not remove them */
    char args[256], out[1 << 14];
    snprintf(args, sizeof args, "run --real --no-progress %s", quick);
    int st = ddp_test_ddpsim_io_within(REAL_QUICK_LIMIT_S, env, args, 1, out, sizeof out);
    CU_ASSERT_EQUAL(st, 0);
    if (st)
        printf("\n  the next run: exit %d:\n%s", st, out);
    CU_ASSERT_EQUAL(files_with(rs.dir, needle), 0);
    CU_ASSERT_EQUAL(files_with(rs.dir, ""), 0); /* the next run's own are gone too */
    remove(scn);
    remove(quick);
    CU_ASSERT_EQUAL(rmdir(rs.dir), 0);
}

/* Runs of white space (the table wraps its why: lines) become one space. */
static void squeeze(char *t)
{
    char *o = t;
    for (char *p = t; *p; p++)
        if (!isspace((unsigned char)*p) || (o > t && o[-1] != ' '))
            *o++ = isspace((unsigned char)*p) ? ' ' : *p;
    *o = '\0';
}

/* Starts `BIN run --real --no-progress SCN` under `timeout`, its output to
 * out; the pid. */
static pid_t start_run(const char *bin, const char *scn, const char *out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout -k 5 %d '%s' run --real --no-progress '%s' >'%s' 2>&1",
             ddp_test_wall_s(REAL_QUICK_LIMIT_S), bin, scn, out);
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return p;
}

/* A foreign job's store is the run's: rank 0 of an exec program sets a
 * mark through ddpsim's own store client (no torch needed) at the hosted
 * store, the store's process writes the mark as an E record, and the
 * runner kills rank 1 on it (fault crash start=mark:go). With the job
 * hosting its own store (--no-host-store) nothing serves MASTER_PORT, the
 * mark cannot be set, and the crash never opens: vacuous. */
/* Runs `ddpsim run --real --grace 5 --no-progress EXTRA-v SCN` (60 s
 * bound): its exit status must be want_st and its output hold want. The
 * output, for more checks (valid until the next call). */
static const char *real_run_check(const char *scn, const char *extra, int want_st,
                                  const char *want)
{
    static char out[1 << 15];
    char args[400];
    snprintf(args, sizeof args, "run --real --grace 5 --no-progress %s-v %s", extra, scn);
    int st = ddp_test_ddpsim_io_within(60, NULL, args, 0, out, sizeof out);
    CU_ASSERT_EQUAL(st, want_st);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    if (st != want_st || !strstr(out, want))
        printf("\n  %s: exit %d:\n%s", args, st, out);
    return out;
}

static void test_hosted_store_events(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "hosted"))
        return;
    write_file(rs.scn, sizeof rs.scn, rs.dir, "mark.scn",
            "scenario \"a mark through the hosted store\"\nnodes 1\ndevices 2\n"
            "accelerators ddp\nlauncher torchrun\nport %u\ntimeout 20s\n"
            "exec \"sh -c 'if [ $RANK = 0 ]; then %s store --host $MASTER_ADDR --port "
            "$MASTER_PORT --timeout 2 set ddpsim/mark/go 1 || exit 1; fi; sleep 4'\"\n"
            "fault crash ranks=1 start=mark:go\n"
            "expect crashed ranks=1\nexpect ok ranks=0\n",
            (unsigned)rs.port, rs.bin);
    real_run_check(rs.scn, "", 0, "fault crash     (line 9)  1 processes killed");
    /* It fails: its ranks' output kept here, not in a folder of its own
     * under $TMPDIR that nobody removes. */
    char extra[128];
    snprintf(extra, sizeof extra, "--no-host-store --keep-output %s ", rs.dir);
    real_run_check(rs.scn, extra, 1, "fault crash     (line 9)  0 processes killed");
    remove_tree(rs.dir);
}

/* What the hosted store tells of a foreign job's ranks (issue 31): rank 0
 * joins the store and holds its connection (a WAIT that times out, then
 * exit 0); rank 1 exits 0 without ever joining: no_join, and only an
 * expect line naming it accepts that. The error names rank, node,
 * address, exit, time and last phase; -v shows each rank's phase; the
 * ranks' output is kept (--keep-output) and the user's environment
 * reaches them without the launchers' variables (an outer SLURM job's),
 * or not at all with --env-clear. */
static void test_hosted_store_progress(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "nojoin"))
        return;
    char args[600], kept[96], path[200];
    ddp_test_in(kept, sizeof kept, rs.dir, "kept");
    for (int named = 0; named < 2; named++) {
        FILE *f = fopen(ddp_test_in(rs.scn, sizeof rs.scn, rs.dir, "nojoin.scn"), "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fprintf(f,
                "scenario \"a rank that never joins\"\nnodes 1\ndevices 2\n"
                "accelerators ddp\nlauncher torchrun\nport %u\ntimeout 20s\n"
                "exec \"sh -c 'if [ $RANK = 0 ]; then %s store --host $MASTER_ADDR --port "
                "$MASTER_PORT --timeout 2 wait never; exit 0; fi; "
                "echo user=$T31_USER slurm=${SLURM_JOB_ID:-unset}'\"\n%s",
                (unsigned)rs.port, rs.bin,
                named ? "expect ok ranks=0\nexpect fail ranks=1 error=no_join\n"
                      : "expect ok\n");
        fclose(f);
        static char out[1 << 15];
        snprintf(args, sizeof args, "run --real --grace 5 --no-progress -v --keep-output %s %s",
                 kept, rs.scn);
        int st = ddp_test_ddpsim_io_within(60, "T31_USER=hello SLURM_JOB_ID=4242", args, 0,
                                           out, sizeof out);
        CU_ASSERT_EQUAL(st, named ? 0 : 1);
        squeeze(out);
        const char *want[] = {
            "rank 1 (node 0, 127.0.0.1), exit 0 after",
            "last phase none: exited 0 without ever joining the job's store",
            "[store: joined, left]", "[store: none]",
            named ? NULL : "an expect line accepts that only with error=no_join"};
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            if (want[k] && !strstr(out, want[k])) {
                printf("\n  expected \"%s\" in:\n%s", want[k], out);
                CU_FAIL("the hosted store's view of the ranks");
            }
        char *text = NULL;
        snprintf(path, sizeof path, "%s/nojoin.ddp/rank1.out", kept);
        CU_ASSERT_EQUAL(ddp_sys_read_host_file(path, &text, NULL), 0);
        CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, "user=hello slurm=unset") : NULL);
        free(text);
    }
    /* --env-clear: the user's variable stays out */
    snprintf(args, sizeof args,
             "run --real --grace 5 --no-progress --env-clear --keep-output %s %s", kept, rs.scn);
    static char out2[1 << 15];
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io_within(60, "T31_USER=hello", args, 0, out2,
                                              sizeof out2), 0);
    char *text = NULL;
    snprintf(path, sizeof path, "%s/nojoin.ddp/rank1.out", kept);
    CU_ASSERT_EQUAL(ddp_sys_read_host_file(path, &text, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, "user= slurm=unset") : NULL);
    free(text);
    remove_tree(rs.dir);
}

/* Issue 34: a second run of one scenario that started within ~50 ms of the
 * first joined the first run's store and failed "ranks are duplicated" (1
 * pair in 13), where it could as well have broken the first. Each run has
 * an identity now: two runs started together on one port, again and again,
 * never mix; one passes, and the other, if it fails, says the port serves
 * another ddpsim run (or was taken before it started). */
#define PAIRS 6
static void test_concurrent_runs_never_mix(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "pair"))
        return;
    char out[2][96];
    write_file(rs.scn, sizeof rs.scn, rs.dir, "pair.scn",
               "scenario \"two runs, one port\"\nnodes 1\ndevices 2\n"
               "accelerators ddp\nport %u\ntrain 1s\nexpect ok\n", (unsigned)rs.port);
    ddp_test_in(out[0], sizeof out[0], rs.dir, "a.out");
    ddp_test_in(out[1], sizeof out[1], rs.dir, "b.out");
    int refused = 0;
    for (int i = 0; i < PAIRS; i++) {
        pid_t p[2] = {start_run(rs.bin, rs.scn, out[0]), start_run(rs.bin, rs.scn, out[1])};
        int ok = 0;
        for (int k = 0; k < 2; k++) {
            int st = -1;
            CU_ASSERT_EQUAL(waitpid(p[k], &st, 0), p[k]);
            char *text = NULL;
            CU_ASSERT_EQUAL(ddp_sys_read_host_file(out[k], &text, NULL), 0);
            if (text)
                squeeze(text);
            int passed = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            int other = text && strstr(text, "is serving another ddpsim run (started at 20");
            int taken = text && strstr(text, "on this host was taken before the run");
            ok += passed;
            refused += other;
            CU_ASSERT(passed || other || taken);
            CU_ASSERT_PTR_NULL(text ? strstr(text, "duplicated") : NULL);
            if (!passed && !other && !taken)
                printf("\n  pair %d, run %d: status %d:\n%s", i, k, st, text ? text : "");
            free(text);
        }
        CU_ASSERT(ok >= 1); /* the run that owns the port is unharmed */
    }
    printf("\n  %d of %d pairs met in one store; every meeting was refused\n", refused,
           PAIRS);
    unlink(out[0]), unlink(out[1]), unlink(rs.scn);
    CU_ASSERT_EQUAL(rmdir(rs.dir), 0);
}

/* A second job on a port of its own gets a store of its own, and each
 * job's connections are its own ranks' (rank 0 of either job is a
 * different process): both jobs join, neither is no_join. */
static void test_hosted_store_two_jobs(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "twojobs"))
        return;
    uint16_t port2 = free_port();
    CU_ASSERT_FATAL(port2 > 0 && port2 != rs.port);
    write_file(rs.scn, sizeof rs.scn, rs.dir, "two.scn",
            "scenario \"two jobs, two ports, two hosted stores\"\nnodes 1\ndevices 1\n"
            "accelerators ddp\nlauncher torchrun\nport %u\ntimeout 20s\n"
            "exec \"%s store --host $MASTER_ADDR --port $MASTER_PORT --timeout 10 add j 1\"\n"
            "second_job start=1s port=%u\nexpect ok\nexpect ok job=2\n",
            (unsigned)rs.port, rs.bin, (unsigned)port2);
    real_run_check(rs.scn, "", 0, "1 ok, 0 failed");
    unlink(rs.scn);
    CU_ASSERT_EQUAL(rmdir(rs.dir), 0);
}

/* torch's own elastic agent (harness/real_agent.c): its command line from
 * exec, the failure table it prints, and the classes of its last words. */
static void test_torch_agent_parts(void)
{
    char out[1200];
    CU_ASSERT_EQUAL(ddp__real_agent_cmd("scripts/torch-python x.py --a 1", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "scripts/torch-python -m torch.distributed.run x.py --a 1");
    CU_ASSERT_EQUAL(ddp__real_agent_cmd("OMP=1 /usr/bin/python3 t.py", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "OMP=1 /usr/bin/python3 -m torch.distributed.run t.py");
    CU_ASSERT_EQUAL(ddp__real_agent_cmd("torchrun --nnodes 2 t.py", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "torchrun --nnodes 2 t.py");
    CU_ASSERT_EQUAL(ddp__real_agent_cmd("python3 -m torch.distributed.run t.py", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "python3 -m torch.distributed.run t.py");
    CU_ASSERT_EQUAL(ddp__real_agent_cmd("./train.sh", out, sizeof out), DDP_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "PYTHON SCRIPT ARGS"));
    const char *table =
        "[default1]:RuntimeError: boom\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "Failures:\n  <NO_OTHER_FAILURES>\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-06_18:00:00\n"
        "  host      : vm\n  rank      : 3 (local_rank: 1)\n"
        "  exitcode  : -9 (pid: 4242)\n  error_file: <N/A>\n";
    CU_ASSERT_EQUAL(ddp__real_agent_failure(table, out, sizeof out), 1);
    CU_ASSERT_STRING_EQUAL(out, "ChildFailedError: worker group failed: rank 3 (local_rank: "
                                "1), exitcode -9 (pid: 4242)");
    CU_ASSERT_EQUAL(ddp__real_agent_failure("RuntimeError: rank      : 1\n", out, sizeof out), 0);
    char msg[600];
    CU_ASSERT_STRING_EQUAL(ddp_scn_error_class(ddp__real_classify(1, table, msg, sizeof msg)),
                           "peer_lost");
    CU_ASSERT_STRING_EQUAL(
        ddp_scn_error_class(ddp__real_classify(
            1, "  raise RendezvousClosedError()\n"
               "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n",
            msg, sizeof msg)),
        "closed");
}

/* A stand-in for torch's agent (a shell script named torchrun-*): it
 * joins the run's store at PET_RDZV_ENDPOINT, checks is_host=0, starts two
 * workers with RANK, LOCAL_RANK and TORCHELASTIC_RESTART_COUNT in its
 * session and prints torch's failure table for one that died. The runner
 * finds the workers, kills rank 1 at its spawn (start=spawn@1) and judges
 * it crashed, node 0's agent failed with the table's root cause. */
static void test_torch_agent_workers(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "agent"))
        return;
    char agent[96];
    write_file(agent, sizeof agent, rs.dir, "torchrun-standin",
            "#!/bin/sh\n"
            "case \"$PET_RDZV_CONF\" in is_host=0*) ;; *) echo \"ValueError: $PET_RDZV_CONF\" >&2;"
            " exit 3;; esac\n"
            "%s store --host ${PET_RDZV_ENDPOINT%%:*} --port ${PET_RDZV_ENDPOINT##*:} "
            "--timeout 5 add agents 1 >/dev/null || exit 2\n"
            "G=$DDPSIM_AGENT\n"
            "RANK=$((2*G)) LOCAL_RANK=0 TORCHELASTIC_RESTART_COUNT=0 sleep 3 & p0=$!\n"
            "RANK=$((2*G+1)) LOCAL_RANK=1 TORCHELASTIC_RESTART_COUNT=0 sleep 3 & p1=$!\n"
            "fail=0\n"
            "for L in 0 1; do eval \"pid=\\$p$L\"; wait $pid; s=$?; if [ $s -ne 0 ]; then\n"
            "  printf 'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \\n"
            "Root Cause (first observed failure):\\n[0]:\\n  rank      : %%d (local_rank: "
            "%%d)\\n  exitcode  : -9 (pid: %%d)\\n' $((2*G+L)) $L $pid >&2; fail=1; fi; done\n"
            "exit $fail\n",
            rs.bin);
    CU_ASSERT_EQUAL(chmod(agent, 0755), 0);
    write_file(rs.scn, sizeof rs.scn, rs.dir, "agent.scn",
            "scenario \"a stand-in for torch's agent: rank 1 killed as it starts\"\n"
            "nodes 2\ndevices 2\naccelerators ddp\nlauncher torchrun-elastic\nport %u\n"
            "timeout 20s\nexec \"%s\"\n"
            "fault crash ranks=1 start=spawn@1\n"
            "expect crashed ranks=1\nexpect ok ranks=2-3\n"
            "expect fail ranks=agents error=peer_lost match=some\n",
            (unsigned)rs.port, agent);
    const char *out =
        real_run_check(rs.scn, "", 0, "fault crash     (line 9)  1 processes killed");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "rank 1 (node 0, attempt 0, pid "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "worker group failed: rank 1 (local_rank: 1), exitcode -9"));
    unlink(rs.scn), unlink(agent);
    CU_ASSERT_EQUAL(rmdir(rs.dir), 0);
}

/* The folder a run's "output:" line names, into dir ("" if none). */
static void output_folder(const char *out, char *dir, size_t n)
{
    const char *p = strstr(out, "output: ");
    dir[0] = '\0';
    if (p)
        snprintf(dir, n, "%.*s", (int)strcspn(p + 8, ":\n"), p + 8);
}

/* Issue 43: without --keep-output a failing foreign program's output went
 * to TMPDIR/ddpsim-output/SCENARIO.ACCEL/, one folder that every run of
 * the scenario shared (two at once wrote into each other's; a later run
 * replaced an earlier's). Each run has a folder of its own, which its
 * "output:" line names, and each holds its own rank's stderr. */
static void test_exec_output_per_run(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "exec-out"))
        return;
    char env[128], args[256], kept[2][256];
    static char out[1 << 14];
    for (int k = 0; k < 2; k++) { /* the same scenario file, its program's words new */
        write_file(rs.scn, sizeof rs.scn, rs.dir, "fails.scn",
                   "scenario \"a failing program\"\nnodes 1\ndevices 1\naccelerators ddp\n"
                   "port %u\ntimeout 20s\nexec \"sh -c 'echo boom-%d >&2; exit 3'\"\n"
                   "expect ok\n", (unsigned)rs.port, k);
        snprintf(env, sizeof env, "TMPDIR=%s", rs.dir);
        snprintf(args, sizeof args, "run --real --no-progress --grace 5 %s", rs.scn);
        CU_ASSERT_EQUAL(ddp_test_ddpsim_io(env, args, 0, out, sizeof out), 1);
        output_folder(out, kept[k], sizeof kept[k]);
        CU_ASSERT_EQUAL(strncmp(kept[k], rs.dir, strlen(rs.dir)), 0);
    }
    CU_ASSERT_STRING_NOT_EQUAL(kept[0], kept[1]);
    for (int k = 0; k < 2; k++) {
        char path[300], text[256], want[16];
        snprintf(path, sizeof path, "%srank0.err", kept[k]);
        snprintf(want, sizeof want, "boom-%d", k);
        ddp_test_read_file(path, text, sizeof text);
        if (!strstr(text, want))
            printf("\n  run %d: %s holds \"%s\", expected %s\n", k, path, text, want);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
    }
    remove_tree(rs.dir);
}

/* Issue 43: an exec run's hosted store had no budget but the default (1
 * GiB). `store_memory SIZE` sets it: rank 0 storing ten 120 KB values
 * (1.2 MB) is dropped by a 1 MiB store (the run fails, naming the lost
 * connection), and passes with 64M. */
static void test_exec_store_memory(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "store-mem"))
        return;
    char args[256];
    static char out[1 << 15];
    static const char *const sizes[] = {"1M", "64M"};
    for (int k = 0; k < 2; k++) {
        write_file(rs.scn, sizeof rs.scn, rs.dir, "budget.scn",
                   "scenario \"a hosted store's budget\"\nnodes 1\ndevices 1\n"
                   "accelerators ddp\nport %u\ntimeout 20s\nstore_memory %s\n"
                   "exec \"sh -c 'v=$(head -c 120000 /dev/zero | tr -c x x); for i in "
                   "0 1 2 3 4 5 6 7 8 9; do %s store --timeout 5 set /k$i $v || exit 1; "
                   "done'\"\nexpect ok\n", (unsigned)rs.port, sizes[k], rs.bin);
        snprintf(args, sizeof args, "run --real --no-progress --grace 5 --keep-output %s %s",
                 rs.dir, rs.scn);
        int st = ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out);
        CU_ASSERT_EQUAL(st, k == 0 ? 1 : 0);
        int lost = strstr(out, "lost the connection to the store") != NULL;
        CU_ASSERT_EQUAL(lost, k == 0);
        if (st != (k == 0 ? 1 : 0) || lost != (k == 0))
            printf("\n  store_memory %s: exit %d:\n%s", sizes[k], st, out);
    }
    remove_tree(rs.dir);
}

/* Starts `BIN run --real --grace 2 --no-progress SCN` with TMPDIR=tmp,
 * stdout and stderr into the file out; the runner's pid. */
static pid_t start_run_in(const char *bin, const char *scn, const char *tmp, const char *out)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("TMPDIR", tmp, 1);
        execl(bin, bin, "run", "--real", "--grace", "2", "--no-progress", scn, (char *)NULL);
        _exit(127);
    }
    return p;
}

/* Waits for pid (at most limit_s, scaled): its status, or -1 after
 * killing it when it did not end. */
static int wait_bounded(pid_t pid, int limit_s)
{
    int st = 0;
    for (int i = 0; i < ddp_test_wall_s(limit_s) * 50; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* The hosted store's idea of "joined" in a foreign job's verdict: a rank
 * that exits 0 with a connection that never completed a request (a TCP
 * connect, nothing sent) did not join: no_join. A joined connection that
 * belongs to no rank's session (a `setsid` child's) could be anybody's, so
 * no rank is then judged as never joined. */
static void test_hosted_store_joined_verdicts(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "joined"))
        return;
    static const struct {
        const char *rank1, *expect;
    } cases[] = {
        {"bash -c \\\"exec 3<>/dev/tcp/$MASTER_ADDR/$MASTER_PORT; sleep 1\\\"",
         "expect ok ranks=0\nexpect fail ranks=1 error=no_join\n"},
        {"setsid %s store --host $MASTER_ADDR --port $MASTER_PORT --timeout 5 set k1 v",
         "expect ok\n"},
    };
    char cmd[256], r1[600];
    static char out[1 << 15];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(r1, sizeof r1, cases[i].rank1, rs.bin);
        write_file(rs.scn, sizeof rs.scn, rs.dir, "joined.scn",
                   "scenario \"joined or not\"\nnodes 1\ndevices 2\naccelerators ddp\n"
                   "launcher torchrun\nport %u\ntimeout 20s\n"
                   "exec \"sh -c 'if [ $RANK = 0 ]; then %s store --host $MASTER_ADDR --port "
                   "$MASTER_PORT --timeout 5 set k0 v; sleep 1; else %s; fi; exit 0'\"\n%s",
                   (unsigned)rs.port, rs.bin, r1, cases[i].expect);
        snprintf(cmd, sizeof cmd, "run --real --grace 5 --no-progress -v %s", rs.scn);
        int st = ddp_test_ddpsim_io_within(60, NULL, cmd, 0, out, sizeof out);
        if (st != 0)
            printf("\n  rank 1 runs %s: exit %d:\n%s", r1, st, out);
        CU_ASSERT_EQUAL(st, 0);
    }
    remove_tree(rs.dir);
}

/* peer= in a real run: each process matches a connect by its destination
 * node (the plan's node table: node i is 127.0.0.(i+1) on loopback), as
 * the simulator does. Rank 1 (node 1) connects to node 0 only (the store,
 * rank 0 in the ring): peer=0 refuses it count= times, peer=1 nothing (a
 * vacuous run); rank 0 connects to node 1 in the ring: peer=1 refuses it. */
static void test_real_peer_faults(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "peer"))
        return;
    static const struct {
        int peer, rank, count, retries; /* retries -1: vacuous */
    } cases[] = {{0, 1, 3, 3}, {1, 1, 2, -1}, {1, 0, 2, 2}};
    char cmd[256];
    static char out[1 << 14];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(rs.scn, sizeof rs.scn, rs.dir, "peer.scn",
                   "scenario \"refuse peer=%d ranks=%d\"\nnodes 2\ndevices 1\n"
                   "accelerators ddp\nport %u\ntimeout 20s\n"
                   "fault refuse peer=%d ranks=%d count=%d\nexpect ok\n",
                   cases[i].peer, cases[i].rank, (unsigned)rs.port, cases[i].peer, cases[i].rank,
                   cases[i].count);
        snprintf(cmd, sizeof cmd, "run --real --no-progress %s", rs.scn);
        int st = ddp_test_ddpsim_io_within(REAL_QUICK_LIMIT_S, NULL, cmd, 0, out, sizeof out);
        int vacuous = strstr(out, "vacuous: fault refuse (line 7) acted on nothing") != NULL;
        int retries = row_retries(out, "peer", "ddp");
        /* at least the refusals aimed (a loaded host adds refused connects of
         * its own: a rank that connects before its peer listens), and not the
         * many of a fault that ignores count= */
        int ok = cases[i].retries < 0
                     ? st == 1 && vacuous
                     : st == 0 && !vacuous && retries >= cases[i].retries &&
                           retries <= cases[i].retries + 5;
        if (!ok)
            printf("\n  peer=%d ranks=%d: exit %d, %d retries:\n%s", cases[i].peer,
                   cases[i].rank, st, retries, out);
        CU_ASSERT_TRUE(ok);
    }
    remove_tree(rs.dir);
}

/* The hosted store's last event of a rank, the close of its connection,
 * comes after the rank's exit: the runner used to stop the store as soon as
 * the last rank was reaped, and at load the store had not yet read the
 * close (1 run in 24 at load 20: "[store: joined]", not "[store: joined,
 * left]"). Made certain here: the store is stopped (SIGSTOP) once the rank
 * has joined, and let go (SIGCONT) only once the rank has exited; the
 * runner must wait for the store's record of the close (bounded: a store
 * that never says is killed after a few seconds). */
static void test_hosted_store_last_event(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "lastleft"))
        return;
    char out[96], stop[128], needle[128], text[1 << 14];
    ddp_test_in(stop, sizeof stop, rs.dir, "stop");
    write_file(rs.scn, sizeof rs.scn, rs.dir, "left.scn",
               "scenario \"the store's last event\"\nnodes 1\ndevices 1\naccelerators ddp\n"
               "launcher torchrun\nport %u\ntimeout 30s\n"
               "exec \"sh -c '%s store --host $MASTER_ADDR --port $MASTER_PORT --timeout 2 "
               "wait never & sleep 1; touch %s; wait; exit 0'\"\nexpect ok\n",
               (unsigned)rs.port, rs.bin, stop);
    ddp_test_in(out, sizeof out, rs.dir, "run.out");
    fflush(NULL);
    pid_t runner = fork();
    if (runner == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("TMPDIR", rs.dir, 1);
        execl(rs.bin, rs.bin, "run", "--real", "--no-progress", "-v", rs.scn, (char *)NULL);
        _exit(127);
    }
    CU_ASSERT_FATAL(runner > 0);
    struct stat sb;
    for (int i = 0; i < ddp_test_wall_s(15) * 100 && stat(stop, &sb) != 0; i++)
        usleep(10000);
    snprintf(needle, sizeof needle, "train --plan %s/ddpsim-real-", rs.dir);
    pid_t store[4];
    int ns = procs_with(needle, store, 4);
    CU_ASSERT_EQUAL(ns, 1);
    if (ns == 1)
        kill(store[0], SIGSTOP);
    pid_t rank[4]; /* the rank: its command line names the stop file */
    for (int i = 0; i < ddp_test_wall_s(15) * 100 && procs_with(stop, rank, 4) > 0; i++)
        usleep(10000);
    /* Held a second more: the runner (polling every 5 ms) has seen the rank
     * exit and read the records while the store could not record the close;
     * only a runner that waits for it sees "left" (a mutant that reads once
     * survived when the store resumed first). */
    usleep(1000000);
    if (ns == 1)
        kill(store[0], SIGCONT);
    int st = wait_bounded(runner, 40);
    ddp_test_read_file(out, text, sizeof text);
    squeeze(text);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "[store: joined, left]"));
    if (st != 0 || !strstr(text, "[store: joined, left]"))
        printf("\n  exit %d:\n%s", st, text);
    remove_tree(rs.dir);
}

/* Every run of spaces and newlines in text one space. */
static void squeeze_spaces(char *text)
{
    char *w = text;
    for (const char *r = text; *r; r++)
        if (!(*r == ' ' || *r == '\n') || (w > text && w[-1] != ' '))
            *w++ = *r == '\n' ? ' ' : *r;
    *w = '\0';
}

/* Issue 42: the hosted store of an exec job, finding MASTER_PORT taken
 * (after the run's own check: node 0 starts 2 s late), disabled libfiu
 * points it had never initialised and died of SIGSEGV (status 139). It
 * must fail cleanly, naming the port. */
static void test_hosted_store_port_taken(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "storetaken"))
        return;
    char out[96], text[1 << 14], want[96];
    write_file(rs.scn, sizeof rs.scn, rs.dir, "taken.scn",
               "scenario \"the store's port taken\"\nnodes 1\ndevices 2\naccelerators ddp\n"
               "launcher torchrun\nport %u\nmaster_late 2s\ntimeout 5s\nexec \"sleep 1\"\n"
               "expect ok\n", (unsigned)rs.port);
    ddp_test_in(out, sizeof out, rs.dir, "run.out");
    pid_t runner = start_run_in(rs.bin, rs.scn, rs.dir, out);
    CU_ASSERT_FATAL(runner > 0);
    /* its plan file: the run checked the port and started */
    for (int i = 0; i < ddp_test_wall_s(10) * 100 && !files_with(rs.dir, "ddpsim-real-"); i++)
        usleep(10000);
    ddp_sys_t *sys = ddp_test_sys();
    ddp_addr_t a;
    ddp_addr_parse("0.0.0.0", rs.port, &a);
    int fd = ddp_sys_listen(sys, &a, 1);
    int st = wait_bounded(runner, 30);
    ddp_test_read_file(out, text, sizeof text);
    squeeze_spaces(text); /* the table wraps its lines where a path's length puts it */
    if (fd < 0) {
        ddp_test_skip("the store took port %u before this test could", (unsigned)rs.port);
    } else {
        CU_ASSERT_EQUAL(st, 1);
        snprintf(want, sizeof want, "cannot listen on [::]:%u: the port is already in use",
                 (unsigned)rs.port);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "exited with status 1 before it listened"));
        CU_ASSERT_PTR_NULL(strstr(text, "status 139"));
        if (st != 1 || !strstr(text, want) || strstr(text, "status 139") ||
            !strstr(text, "exited with status 1 before it listened"))
            printf("\n  exit %d:\n%s", st, text);
        ddp_sys_close(sys, fd);
    }
    ddp_sys_free(sys);
    remove_tree(rs.dir);
}

/* Kills (SIGKILL) the processes whose command line holds needle; how many
 * there were. */
static int kill_procs_with(const char *needle)
{
    pid_t pids[64];
    int n = procs_with(needle, pids, 64);
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    return n;
}

/* One run of `exec "CMD"` (2 ranks, each running `sleep 300.PORT`, the
 * token) SIGKILLed once both sleeps run: how many processes holding the
 * token, or the run's plan path, are left after a bounded wait. Whatever
 * is left is killed here. */
static int left_after_sigkill(const char *bin, const char *dir, const char *cmd_fmt)
{
    uint16_t port = free_port();
    CU_ASSERT_FATAL(port > 0);
    char token[32], cmd[200], scn[96], out[96];
    snprintf(token, sizeof token, "sleep 300.%u", (unsigned)port);
    snprintf(cmd, sizeof cmd, cmd_fmt, token);
    write_file(scn, sizeof scn, dir, "orphans.scn",
               "scenario \"no orphans\"\nnodes 1\ndevices 2\naccelerators ddp\n"
               "launcher torchrun\nport %u\ntimeout 60s\nexec \"%s\"\nexpect ok\n",
               (unsigned)port, cmd);
    ddp_test_in(out, sizeof out, dir, "run.out");
    pid_t runner = start_run_in(bin, scn, dir, out);
    CU_ASSERT_FATAL(runner > 0);
    int ranks = wait_procs(token, 2, 1, 30); /* with their shells: more */
    CU_ASSERT(ranks >= 2);
    kill(runner, SIGKILL);
    waitpid(runner, NULL, 0);
    char plan[64];
    snprintf(plan, sizeof plan, "ddpsim-real-%ld-", (long)runner);
    int left = wait_procs(token, 0, 0, 10) + wait_procs(plan, 0, 0, 2);
    if (left) /* not ours to leave running */
        printf("\n  exec \"%s\": %d process(es) outlived their runner\n", cmd,
               kill_procs_with(token) + kill_procs_with(plan));
    unlink(scn);
    return left;
}

/* Issue 42: SIGKILL of `ddpsim run --real` left the user's program
 * running: the parent-death signal reached only the `sh -c` the runner
 * started, and sh forks the command. A simple command is exec'd (no
 * shell), and a guard process kills each rank's process group once the
 * runner is gone, which also takes what a shell or the program forked. */
static void test_sigkill_leaves_no_orphan(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "orphans"))
        return;
    CU_ASSERT_EQUAL(left_after_sigkill(rs.bin, rs.dir, "%s"), 0);
    CU_ASSERT_EQUAL(left_after_sigkill(rs.bin, rs.dir, "sh -c '%s & wait'"), 0);
    remove_tree(rs.dir);
}

/* Issue 42: a rank's deadline was counted from the run's start: a rank
 * that took 3 s to reach the job's store, then timed out properly on its
 * 2 s wait (at about 5 s), lost its store at 4 s (timeout 2 s + grace 2 s,
 * the run's limit), or was killed then as hung. Each rank is judged on its
 * own clock: from its first store contact (its join), as within= is. */
static void test_slow_start_own_clock(void)
{
    real_setup_t rs;
    if (!real_setup(&rs, "ownclock"))
        return;
    char args[300];
    static char out[1 << 15];
    write_file(rs.scn, sizeof rs.scn, rs.dir, "slow.scn",
               "scenario \"slow to start, then a proper timeout\"\nnodes 1\ndevices 2\n"
               "accelerators ddp\nlauncher torchrun\nport %u\ntimeout 2s\n"
               "exec \"sh -c 'sleep 3; %s store --host $MASTER_ADDR --port $MASTER_PORT "
               "--timeout 2 wait never'\"\nexpect fail error=timeout within=4s\n",
               (unsigned)rs.port, rs.bin);
    snprintf(args, sizeof args, "run --real --grace 2 --no-progress -v %s", rs.scn);
    int st = ddp_test_ddpsim_io_within(60, NULL, args, 0, out, sizeof out);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_PTR_NULL(strstr(out, "hung"));
    if (st != 0 || strstr(out, "hung"))
        printf("\n  %s: exit %d:\n%s", args, st, out);
    remove_tree(rs.dir);
}

/* A fault of kind k aimed as its kind needs (a crash or pause at node 0,
 * a delay, a partition's side, a rate, a point). */
static ddp_fault_t aimed_fault(ddp_fault_kind_t k)
{
    ddp_fault_t f = {.kind = k, .node = -1, .task = -1, .peer_node = -1};
    if (k == DDP_FAULT_CRASH || k == DDP_FAULT_PAUSE || k == DDP_FAULT_BANDWIDTH)
        f.node = 0;
    f.delay_ns = 1000000;
    f.node_set = 1;
    f.rate_bps = 1000;
    f.point = "sys/net/send";
    return f;
}

/* Real runs pick each fault's executor from the kinds table's executors
 * column (harness/real_kinds.c): whatever they pick is one the table
 * lists for the kind, and a kind the table gives only the simulator gets
 * none, with a reason naming it, for every kind the table has. */
static void test_kinds_table_executors(void)
{
    char why[400], want[64];
    for (int k = 0; k < DDP_FAULT_KIND_COUNT; k++) {
        const ddp_fault_kind_info_t *info = ddp_fault_kind_info((ddp_fault_kind_t)k);
        ddp_fault_t f = aimed_fault((ddp_fault_kind_t)k);
        CU_ASSERT_EQUAL(info->kind, k); /* the enum and the rows in one order */
        for (int exec = 0; exec < 2; exec++) {
            unsigned ex = ddp__real_executor(&f, info->exec, exec);
            CU_ASSERT_EQUAL(ex & (ex - 1), 0); /* one executor at most */
            CU_ASSERT_EQUAL(ex & ~info->exec, 0);
            CU_ASSERT_EQUAL(ex & DDP_EXEC_SIM, 0);
            if (ex)
                CU_ASSERT_PTR_NULL(ddp__real_no_executor(&f, info->exec, exec, 7, why, sizeof why));
            /* the same kind, were its row only DDP_EXEC_SIM */
            CU_ASSERT_EQUAL(ddp__real_executor(&f, DDP_EXEC_SIM, exec), 0);
            const char *r = ddp__real_no_executor(&f, DDP_EXEC_SIM, exec, 7, why, sizeof why);
            snprintf(want, sizeof want, "fault %s (line 7): no executor", info->name);
            CU_ASSERT_PTR_NOT_NULL(r);
            CU_ASSERT_PTR_NOT_NULL(r ? strstr(r, want) : NULL);
            CU_ASSERT_PTR_NOT_NULL(r ? strstr(r, "gives it: sim); run it in the simulator") : NULL);
            if (!r || !strstr(r, want))
                printf("\n  %s (exec %d): %s\n", info->name, exec, r ? r : "(runs)");
        }
    }
    /* every kind but point has a real executor for ddpsim's own processes */
    for (int k = 0; k < DDP_FAULT_KIND_COUNT; k++) {
        ddp_fault_t f = aimed_fault((ddp_fault_kind_t)k);
        unsigned ex = ddp__real_executor(&f, ddp_fault_kind_info((ddp_fault_kind_t)k)->exec, 0);
        CU_ASSERT_EQUAL(!ex, k == DDP_FAULT_POINT);
    }
}

/* The refinements that need a fault's fields, and the run refused through
 * ddp_real_unsupported for one: a reset after N bytes has no real
 * executor; without after= it is libfiu in ddpsim's processes and an nft
 * rule for a foreign program. */
static void test_kinds_refinements(void)
{
    unsigned reset = ddp_fault_kind_info(DDP_FAULT_RESET)->exec;
    ddp_fault_t f = aimed_fault(DDP_FAULT_RESET);
    CU_ASSERT_EQUAL(ddp__real_executor(&f, reset, 0), DDP_EXEC_INPROC);
    CU_ASSERT_EQUAL(ddp__real_executor(&f, reset, 1), DDP_EXEC_NFT);
    f.after_bytes = 10;
    CU_ASSERT_EQUAL(ddp__real_executor(&f, reset, 0), 0);
    CU_ASSERT_EQUAL(ddp__real_executor(&f, reset, 1), 0);
    ddp_scenario_t *s = NULL;
    char err[300], why[400];
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_parse("scenario \"r\"\nfault reset after=10\nexpect ok\n",
                                             "r.scn", ".", &s, err, sizeof err), 0);
    const char *r = ddp_real_unsupported(s, "ddp", 1, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL(r ? strstr(r, "fault reset after=10 (line 2)") : NULL);
    ddp_scenario_free(s);
}

/* Lines of file path (0 when it is not there). */
static int lines_of(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    for (int c; f && (c = fgetc(f)) != EOF;)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

/* 1 when /usr/bin/python3 can run a Python job; else the test is skipped. */
static int have_python3(void)
{
    if (access("/usr/bin/python3", X_OK) == 0)
        return 1;
    ddp_test_skip("no /usr/bin/python3 to run a Python job");
    return 0;
}

/* A folder with a fake "torch" package whose import appends a line to
 * DIR/imports (extra: more of its __init__.py), a python3 job DIR/job.py
 * that imports it and checks that it runs as __main__ with its argv
 * (--x 1), its environment (RANK) and a session of its own (and, under
 * --netns, in a network namespace other than the runner's: DDPSIM_NS_OF,
 * the runner's /proc/PID/ns/net), and DIR/job.scn and DIR/job2.scn (2
 * nodes x 2 ranks each) running it on port and port + 1; DIR exists. */
static void python_job(const char *dir, uint16_t port, const char *extra)
{
    char path[160], scn[96];
    snprintf(path, sizeof path, "%s/torch", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
    write_file(path, sizeof path, dir, "torch/__init__.py",
               "import os, time\nwith open('%s/imports', 'a') as f:\n"
               "    f.write('%%d\\n' %% os.getpid())\ntime.sleep(0.2)\n%s", dir, extra);
    write_file(path, sizeof path, dir, "job.py",
               "import os, sys\nimport torch\n"
               "ns = os.environ.get('DDPSIM_NS_OF')\n"
               "ok = __name__ == '__main__' and sys.argv[1:] == ['--x', '1'] and "
               "os.getsid(0) == os.getpid() and "
               "(not ns or os.readlink('/proc/self/ns/net') != os.readlink(ns))\n"
               "print('rank', os.environ['RANK'], 'main' if ok else 'WRONG')\n"
               "sys.exit(0 if ok else 5)\n");
    for (int i = 0; i < 2; i++)
        write_file(scn, sizeof scn, dir, i ? "job2.scn" : "job.scn",
                   "scenario \"a python job%s\"\nnodes 2\ndevices 2\naccelerators ddp\n"
                   "launcher torchrun\nport %u\ntimeout 20s\nexec \"python3 %s --x 1\"\n"
                   "expect ok\n", i ? ", again" : "", (unsigned)(port + i), path);
}

/* Runs dir/job.scn (python_job; with both, job2.scn too, in one ddpsim
 * run) with opts; its exit status, and how many times torch was imported
 * in *imports. out: its stdout, or its stderr with want_stderr. */
static int run_python_job(const char *dir, const char *opts, int both, int *imports,
                          int want_stderr, char *out, size_t n)
{
    char path[160], env[200], args[400];
    remove(ddp_test_in(path, sizeof path, dir, "imports"));
    int n0 = snprintf(env, sizeof env, "PYTHONPATH=%s", dir);
    if (strstr(opts, "--netns"))
        snprintf(env + n0, sizeof env - (size_t)n0, " DDPSIM_NS_OF=/proc/%ld/ns/net",
                 (long)getpid());
    snprintf(args, sizeof args, "run --no-progress --no-host-store %s %s/job.scn%s%s%s", opts,
             dir, both ? " " : "", both ? dir : "", both ? "/job2.scn" : "");
    int st = ddp_test_ddpsim_io(env, args, want_stderr, out, n);
    *imports = lines_of(path);
    return st;
}

/* Runs both python_job scenarios in one ddpsim run with mode (--real,
 * --netns) warm and --cold; torch must be imported once (the run's fork
 * server) warm and once per rank (8) cold, each rank running as __main__
 * etc. (python_job). */
static void warm_imports(const char *mode)
{
    real_setup_t rs;
    if (!have_python3() || !real_setup(&rs, "warm"))
        return;
    static char out[1 << 14];
    python_job(rs.dir, rs.port, "");
    for (int cold = 0; cold < 2; cold++) {
        char opts[40];
        snprintf(opts, sizeof opts, "%s%s", mode, cold ? " --cold" : "");
        int n = 0, st = run_python_job(rs.dir, opts, 1, &n, 0, out, sizeof out);
        CU_ASSERT_EQUAL(st, 0);
        CU_ASSERT_EQUAL(n, cold ? 8 : 1);
        if (st != 0 || n != (cold ? 8 : 1))
            printf("\n  %s: exit %d, torch imported %d times (expected %d):\n%s", opts, st, n,
                   cold ? 8 : 1, out);
    }
    remove_tree(rs.dir);
}

/* Issue 42: every Python rank paid torch's import (2-4 s of CPU) in a
 * fresh interpreter, and then every node of every run (a fork server per
 * node per run). A fake "torch" on PYTHONPATH whose import leaves a line in
 * a marker file: two python3 jobs of 2 nodes x 2 ranks in one `ddpsim run`
 * import it once (the one fork server), and with --cold once per rank
 * (8). */
static void test_warm_start_imports_once_per_invocation(void)
{
    warm_imports("--real");
}

/* The same in network namespaces (root): one fork server, outside them,
 * and each warm rank joins its node's namespace (the job checks it is not
 * in the runner's). */
static void test_warm_start_netns_imports_once(void)
{
    if (geteuid() != 0 || system("command -v ip >/dev/null 2>&1") != 0) {
        ddp_test_skip("--netns needs root and ip(8)");
        return;
    }
    warm_imports("--netns");
}

/* Issue 42: a fork must not share an initialised CUDA. A fake torch whose
 * torch.cuda.is_initialized() is True: every rank starts cold (the server's
 * import and each rank's: 5), the runner saying why, and the job passes. */
static void test_warm_start_refused_after_cuda(void)
{
    real_setup_t rs;
    if (!have_python3() || !real_setup(&rs, "warm"))
        return;
    static char out[1 << 15];
    python_job(rs.dir, rs.port,
               "class cuda:\n    is_initialized = staticmethod(lambda: True)\n");
    int n = 0, st = run_python_job(rs.dir, "--real", 0, &n, 1, out, sizeof out);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CUDA is initialised in the fork server"));
    if (st != 0 || n != 5)
        printf("\n  exit %d, torch imported %d times (expected 5):\n%s", st, n, out);
    remove_tree(rs.dir);
}

/* Issue 42: SIGKILL of a warm run: its fork server and the ranks it
 * forked (the runner's children by then, in sessions of their own) go with
 * it. A warm rank's command line is its server's, which names the
 * runner's pid and the modules (torch). */
static void test_sigkill_warm_leaves_no_rank(void)
{
    real_setup_t rs;
    if (!have_python3() || !real_setup(&rs, "warmkill"))
        return;
    char path[120], out[96], needle[48];
    write_file(path, sizeof path, rs.dir, "sleeper.py", "import time\ntime.sleep(300)\n");
    write_file(rs.scn, sizeof rs.scn, rs.dir, "sleepers.scn",
               "scenario \"warm sleepers\"\nnodes 1\ndevices 2\naccelerators ddp\n"
               "launcher torchrun\nport %u\ntimeout 60s\nexec \"python3 %s\"\nexpect ok\n",
               (unsigned)rs.port, path);
    pid_t runner = start_run_in(rs.bin, rs.scn, rs.dir,
                                ddp_test_in(out, sizeof out, rs.dir, "run.out"));
    CU_ASSERT_FATAL(runner > 0);
    snprintf(needle, sizeof needle, " %ld torch", (long)runner);
    int n = wait_procs(needle, 3, 1, 30); /* the server and its two ranks */
    CU_ASSERT(n >= 3);
    kill(runner, SIGKILL);
    waitpid(runner, NULL, 0);
    int left = wait_procs(needle, 0, 0, 10);
    CU_ASSERT_EQUAL(left, 0);
    if (n < 3 || left) /* not ours to leave running */
        printf("\n  %d warm process(es) seen, %d outlived their runner\n", n,
               kill_procs_with(needle));
    remove_tree(rs.dir);
}

/* Which --exec lines start warm: a Python (any python3*, by path or not)
 * or scripts/torch-python running a *.py script. */
static void test_warm_start_commands(void)
{
    static const struct {
        const char *cmd;
        int warm;
    } cases[] = {
        {"python3 train.py --lr 1", 1},   {"/usr/bin/python3.11 t.py", 1},
        {"scripts/torch-python t.py", 1}, {"python3 -m torch.distributed.run t.py", 0},
        {"python3 -c pass", 0},           {"python3", 0},
        {"sh t.py", 0},                   {"python3 train", 0},
        {"pythonista t.py", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[128], *w[8];
        int n = ddp__real_exec_words(cases[i].cmd, buf, sizeof buf, w, 8);
        CU_ASSERT_EQUAL(ddp__real_warm_command(w, n), cases[i].warm);
        if (ddp__real_warm_command(w, n) != cases[i].warm)
            printf("\n  \"%s\": expected %s\n", cases[i].cmd, cases[i].warm ? "warm" : "cold");
    }
}

/* Issue 42: the runner woke every 5 ms for the whole run (4 s of CPU in
 * the torch scenarios, most of it waiting for a timeout or a late master).
 * Its sleep grows while nothing happens, back to 5 ms at once when
 * something does, and never past the next due start. */
static void test_run_loop_sleeps_longer_when_quiet(void)
{
    const int64_t ms = DDP_NS_PER_MS, none = INT64_MAX;
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(0, 0, none), 5 * ms);
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(5 * ms, 0, none), 10 * ms);
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(10 * ms, 0, none), 20 * ms);
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(20 * ms, 0, none), 20 * ms); /* at most */
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(20 * ms, 1, none), 5 * ms); /* something happened */
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(20 * ms, 0, 7 * ms), 7 * ms); /* a start due */
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(20 * ms, 1, 2 * ms), 2 * ms);
    CU_ASSERT_EQUAL(ddp__real_loop_sleep(10 * ms, 0, -3 * ms), 20 * ms); /* overdue: held */
}

/* `ip netns list` holds name (0/1). */
static int netns_exists(const char *name)
{
    char cmd[128], line[128];
    snprintf(cmd, sizeof cmd, "ip netns list 2>/dev/null");
    FILE *p = popen(cmd, "r");
    int found = 0;
    while (p && fgets(line, sizeof line, p))
        found |= strncmp(line, name, strlen(name)) == 0 &&
                 (line[strlen(name)] == ' ' || line[strlen(name)] == '\n');
    if (p)
        pclose(p);
    return found;
}

/* A run SIGKILLed in namespaces cannot delete them, and its bridge keeps
 * the runner's 10.213 address: the next run's sweep removes them (its
 * namespaces, bridge and record) by the dead runner's record, and leaves
 * a live runner's alone. The killed run is a child that brings 2 nodes up
 * and exits without taking them down. */
static void test_netns_of_a_killed_run_swept(void)
{
    if (geteuid() != 0 || system("command -v ip >/dev/null 2>&1") != 0) {
        ddp_test_skip("namespaces need root and iproute2");
        return;
    }
    ddp_sys_t *sys = ddp_sys_posix_new(ddp_env_new());
    CU_ASSERT_PTR_NOT_NULL_FATAL(sys);
    ddp_netns_t mine = {0};
    CU_ASSERT_EQUAL_FATAL(ddp__real_netns_up(sys, &mine, 1, 0), 0); /* alive: stays */
    int pipefd[2];
    CU_ASSERT_EQUAL_FATAL(pipe(pipefd), 0);
    fflush(NULL);
    pid_t killed = fork();
    CU_ASSERT_FATAL(killed >= 0);
    if (killed == 0) {
        ddp_netns_t ns = {0};
        int rc = ddp__real_netns_up(sys, &ns, 2, 0);
        if (write(pipefd[1], ns.tag, sizeof ns.tag) < 0 || rc)
            _exit(1);
        _exit(0); /* as SIGKILL would: nothing taken down */
    }
    char tag[16] = "", name[32], br[40];
    CU_ASSERT_EQUAL(read(pipefd[0], tag, sizeof tag), (ssize_t)sizeof tag);
    close(pipefd[0]);
    close(pipefd[1]);
    int st = -1;
    waitpid(killed, &st, 0);
    CU_ASSERT_EQUAL(st, 0);
    snprintf(name, sizeof name, "%sn1", tag);
    CU_ASSERT(netns_exists(name)); /* left behind */
    CU_ASSERT(ddp__real_netns_sweep(sys) >= 1);
    CU_ASSERT_FALSE(netns_exists(name));
    snprintf(name, sizeof name, "%sn0", tag);
    CU_ASSERT_FALSE(netns_exists(name));
    snprintf(br, sizeof br, "ip link show %sbr >/dev/null 2>&1", tag);
    CU_ASSERT_NOT_EQUAL(system(br), 0);
    snprintf(name, sizeof name, "%sn0", mine.tag);
    CU_ASSERT(netns_exists(name)); /* a live run's stay */
    ddp__real_netns_down(sys, &mine, NULL, 0);
    CU_ASSERT_FALSE(netns_exists(name));
    ddp_sys_free(sys);
}

DDP_SUITE("real_exec", NULL, NULL,
          {"the namespaces of a run killed by SIGKILL: swept by the next run",
           test_netns_of_a_killed_run_swept},
          {"the kinds table decides real runs' executors", test_kinds_table_executors},
          {"kinds: the refinements by a fault's fields", test_kinds_refinements},
          {"a master port taken before the run starts", test_taken_master_port},
          {"the master port checked is the one the processes get", test_job_port_as_given},
          {"torch's messages become outcome classes", test_torch_messages},
          {"an exec program that is not there", test_check_exec},
          {"the runner's event acks: none dropped past its 64 a round",
           test_event_acks_never_dropped},
          {"an event its process waits on, read late, opens its window when read",
           test_event_read_late_opens_when_read},
          {"torch's agent: its command, failure table and last words", test_torch_agent_parts},
          {"a second job on its own port: a hosted store of its own, its own ranks",
           test_hosted_store_two_jobs},
          {"torch's agent (a stand-in): workers found by RANK, one killed at its spawn",
           test_torch_agent_workers},
          {"a foreign job's hosted store: its mark opens a fault", test_hosted_store_events},
          {"a foreign job's hosted store: each rank's phase, no_join, output, environment",
           test_hosted_store_progress},
          {"quick real runs: launchers' contracts, reset, resolve, pause; faults fire",
           test_quick_real_runs},
          {"a foreign rank's join: a bare connect is no join, an unknown one spares all",
           test_hosted_store_joined_verdicts},
          {"peer= faults in real runs match the connect's destination node",
           test_real_peer_faults},
          {"the hosted store's last event (a rank's close) is waited for",
           test_hosted_store_last_event},
          {"SIGKILL of a real run: no rank outlives it, its files are swept",
           test_sigkill_leaves_no_rank},
          {"two real runs started together on one port never mix",
           test_concurrent_runs_never_mix},
          {"a failing foreign program's output: a folder per run",
           test_exec_output_per_run},
          {"store_memory: the hosted store's budget", test_exec_store_memory},
          {"an exec line that is one simple command runs without a shell", test_exec_words},
          {"a foreign job's hosted store on a taken port fails cleanly, naming it",
           test_hosted_store_port_taken},
          {"a foreign rank slow to start is judged on its own clock, not hung",
           test_slow_start_own_clock},
          {"SIGKILL of a real run with exec: no process of the user's program is left",
           test_sigkill_leaves_no_orphan},
          {"Python jobs start warm: torch imported once per ddpsim run, --cold once per rank",
           test_warm_start_imports_once_per_invocation},
          {"the same under --netns: each warm rank in its node's namespace",
           test_warm_start_netns_imports_once},
          {"no warm start once CUDA is initialised: each rank starts cold, saying why",
           test_warm_start_refused_after_cuda},
          {"which exec lines start warm", test_warm_start_commands},
          {"the run loop sleeps longer while nothing happens, never past a start",
           test_run_loop_sleeps_longer_when_quiet},
          {"SIGKILL of a warm run: no fork server or rank outlives it",
           test_sigkill_warm_leaves_no_rank})
