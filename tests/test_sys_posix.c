/* tests/test_sys_posix.c — the POSIX OS seam over loopback: sockets with
 * deadlines, errors that name the address, processes, fault points, and
 * its wait loops run on a fake clock (each stops at its deadline). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fiu-control.h>
#include <fiu.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/host.h"
#include "ddp/sys.h"
#include "epoll_contract.h"
#include "fake_clock.h"
#include "test.h"

static ddp_sys_t *S;

static int suite_init(void)
{
    fiu_init(0);
    S = ddp_test_sys();
    return S ? 0 : 1;
}
static int suite_cleanup(void)
{
    ddp_sys_free(S);
    return 0;
}

static int listen_loopback(uint16_t *port)
{
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", 0, &a);
    int lfd = ddp_sys_listen(S, &a, 16);
    ddp_addr_t bound;
    if (lfd >= 0 && ddp_sys_local_addr(S, lfd, &bound) == 0)
        *port = bound.port;
    return lfd;
}

/* A connection on loopback: the listener, the connecting end and the
 * accepted end (each >= 0, or the test stops); *port is the listener's. */
static void loopback_pair(int *lfd, int *c, int *a, uint16_t *port)
{
    uint16_t p = 0;
    *lfd = listen_loopback(&p);
    CU_ASSERT_FATAL(*lfd >= 0);
    *c = ddp_sys_connect_host(S, "127.0.0.1", p, ddp_test_deadline_ms(S, 2000));
    *a = ddp_sys_accept(S, *lfd, NULL, ddp_test_deadline_ms(S, 2000));
    CU_ASSERT_FATAL(*c >= 0 && *a >= 0);
    if (port)
        *port = p;
}

/* The host's clock for code without a rank's sys (progress lines): the
 * POSIX sys's own monotonic clock, read in order. */
static void test_host_clock(void)
{
    int64_t a = ddp_sys_host_now();
    int64_t b = ddp_sys_now(S);
    int64_t c = ddp_sys_host_now();
    CU_ASSERT(a > 0);
    CU_ASSERT(a <= b);
    CU_ASSERT(b <= c);
}

static void test_stream_roundtrip(void)
{
    uint16_t port = 0;
    int lfd = listen_loopback(&port);
    CU_ASSERT_FATAL(lfd >= 0);
    CU_ASSERT(port > 0);
    int64_t dl = ddp_test_deadline_ms(S, 2000);
    int c = ddp_sys_connect_host(S, "127.0.0.1", port, dl);
    CU_ASSERT_FATAL(c >= 0);
    ddp_addr_t peer;
    int a = ddp_sys_accept(S, lfd, &peer, dl);
    CU_ASSERT_FATAL(a >= 0);
    CU_ASSERT_EQUAL(peer.family, 4);
    char big[100000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 7);
    /* Nothing buffered: a past deadline means "try once". */
    char tmp[16];
    CU_ASSERT_EQUAL(ddp_sys_recv(S, a, tmp, sizeof tmp, 0), -EAGAIN);
    CU_ASSERT_EQUAL(ddp_sys_send_all(S, c, big, sizeof big, dl), 0);
    char got[sizeof big];
    CU_ASSERT_EQUAL(ddp_sys_recv_all(S, a, got, sizeof got, dl), 0);
    CU_ASSERT_EQUAL(memcmp(big, got, sizeof big), 0);
    /* poll reports readability only after data arrives. */
    ddp_pollfd_t p = {.fd = a, .events = DDP_POLLIN};
    CU_ASSERT_EQUAL(ddp_sys_poll(S, &p, 1, 0), 0);
    CU_ASSERT_EQUAL(ddp_sys_send_all(S, c, "x", 1, dl), 0);
    CU_ASSERT_EQUAL(ddp_sys_poll(S, &p, 1, dl), 1);
    CU_ASSERT(p.revents & DDP_POLLIN);
    /* EOF after close, and recv_all reports the peer lost. */
    ddp_sys_close(S, c);
    char one[2];
    CU_ASSERT_EQUAL(ddp_sys_recv_all(S, a, one, 2, dl), DDP_EPEER_LOST);
    ddp_sys_close(S, a);
    ddp_sys_close(S, lfd);
}

static void test_recv_deadline(void)
{
    int lfd, c, a;
    loopback_pair(&lfd, &c, &a, NULL);
    char b[4];
    int64_t t0 = ddp_sys_now(S);
    int64_t dl = ddp_test_deadline_ms(S, 50);
    CU_ASSERT_EQUAL(ddp_sys_recv(S, a, b, sizeof b, dl), DDP_ETIMEOUT);
    CU_ASSERT(ddp_sys_now(S) >= dl);      /* never wakes early */
    CU_ASSERT(ddp_err_ctx()->waited_ns >= ddp_sys_now(S) - t0 - 5 * DDP_NS_PER_MS);
    CU_ASSERT_EQUAL(ddp_sys_accept(S, lfd, NULL, ddp_test_deadline_ms(S, 20)),
                    DDP_ETIMEOUT);
    ddp_sys_close(S, c);
    ddp_sys_close(S, a);
    ddp_sys_close(S, lfd);
}

static void test_refused_names_address(void)
{
    uint16_t port = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(S, &port), 0);
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", port, &a);
    int rc = ddp_sys_connect(S, &a, ddp_test_deadline_ms(S, 1000));
    CU_ASSERT_EQUAL(rc, -ECONNREFUSED);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%u", port);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), want));
}

static void test_addr_in_use(void)
{
    uint16_t port = 0;
    int lfd = listen_loopback(&port);
    CU_ASSERT_FATAL(lfd >= 0);
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", port, &a);
    CU_ASSERT_EQUAL(ddp_sys_listen(S, &a, 4), -EADDRINUSE);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "could not bind"));
    ddp_sys_close(S, lfd);
}

static void test_dual_stack_listener(void)
{
    ddp_addr_t any6;
    ddp_addr_parse("::", 0, &any6);
    int lfd = ddp_sys_listen(S, &any6, 8);
    if (lfd < 0) /* no IPv6 on this machine: nothing to test */
        return;
    ddp_addr_t bound;
    ddp_sys_local_addr(S, lfd, &bound);
    int c = ddp_sys_connect_host(S, "127.0.0.1", bound.port,
                                 ddp_test_deadline_ms(S, 1000));
    CU_ASSERT(c >= 0);
    ddp_addr_t peer;
    int a = ddp_sys_accept(S, lfd, &peer, ddp_test_deadline_ms(S, 1000));
    CU_ASSERT(a >= 0);
    CU_ASSERT_EQUAL(peer.family, 4); /* v4-mapped reported as IPv4 */
    ddp_sys_close(S, a);
    ddp_sys_close(S, c);
    ddp_sys_close(S, lfd);
}

static void test_resolve(void)
{
    ddp_addr_t out[4];
    int n = ddp_sys_resolve(S, "localhost", 80, out, 4);
    CU_ASSERT(n >= 1);
    if (n >= 1) {
        CU_ASSERT_EQUAL(out[0].port, 80);
        CU_ASSERT_EQUAL(out[0].family, 4); /* IPv4 first */
    }
    CU_ASSERT_EQUAL(ddp_sys_resolve(S, "10.1.2.3", 5, out, 4), 1);
    CU_ASSERT_EQUAL(ddp_sys_resolve(S, "no-such-host.invalid", 5, out, 4),
                    DDP_ENOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "no-such-host.invalid"));
    char h[256];
    CU_ASSERT_EQUAL(ddp_sys_hostname(S, h, sizeof h), 0);
    CU_ASSERT(strlen(h) > 0);
}

static int child_entry(ddp_sys_t *child, void *arg)
{
    (void)arg;
    const char *v = ddp_env_get(ddp_sys_env(child), "DDP_TEST_CHILD");
    return v && strcmp(v, "seven") == 0 ? 7 : 1;
}

static void test_spawn_wait_kill(void)
{
    ddp_env_t *env = ddp_env_new();
    ddp_env_set(env, "DDP_TEST_CHILD", "seven");
    ddp_spawn_t sp = {.entry = child_entry, .env = env};
    ddp_pid_t pid;
    int status = -1;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_spawn(S, &sp, &pid), 0);
    CU_ASSERT_EQUAL(ddp_sys_wait(S, pid, &status, ddp_test_bound(S, 5)), 0);
    CU_ASSERT_EQUAL(status, 7);
    /* argv form: the child's environment is exactly the map. */
    char *argv[] = {"/bin/sh", "-c", "test \"$DDP_TEST_CHILD\" = seven && exit 3", NULL};
    ddp_spawn_t sp2 = {.argv = argv, .env = env};
    CU_ASSERT_EQUAL_FATAL(ddp_sys_spawn(S, &sp2, &pid), 0);
    CU_ASSERT_EQUAL(ddp_sys_wait(S, pid, &status, ddp_test_bound(S, 5)), 0);
    CU_ASSERT_EQUAL(status, 3);
    char *argv3[] = {"sleep", "10", NULL};
    ddp_spawn_t sp3 = {.argv = argv3, .env = env};
    CU_ASSERT_EQUAL_FATAL(ddp_sys_spawn(S, &sp3, &pid), 0);
    CU_ASSERT_EQUAL(ddp_sys_wait(S, pid, &status, ddp_test_deadline_ms(S, 30)),
                    DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(ddp_sys_kill(S, pid, SIGKILL), 0);
    CU_ASSERT_EQUAL(ddp_sys_wait(S, pid, &status, ddp_test_bound(S, 5)), 0);
    CU_ASSERT_EQUAL(status, 128 + SIGKILL);
    char *bad[] = {"/nonexistent/prog", NULL};
    ddp_spawn_t sp4 = {.argv = bad, .env = env};
    int rc = ddp_sys_spawn(S, &sp4, &pid);
    if (rc == 0) { /* glibc may report exec failure as exit 127 */
        ddp_sys_wait(S, pid, &status, ddp_test_bound(S, 5));
        CU_ASSERT_EQUAL(status, 127);
    } else {
        CU_ASSERT_EQUAL(rc, -ENOENT);
    }
    ddp_env_free(env);
}

static void test_read_file(void)
{
    char path[] = "/tmp/ddpsim-test-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, "host0\nhost1\n", 12), 12);
    close(fd);
    char *data = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(ddp_sys_read_file(S, path, &data, &len), 0);
    CU_ASSERT_EQUAL(len, 12);
    CU_ASSERT_STRING_EQUAL(data, "host0\nhost1\n");
    free(data);
    unlink(path);
    CU_ASSERT_EQUAL(ddp_sys_read_file(S, path, &data, &len), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), path));
}

/* Bounded reads: what is not a regular file is refused by type before any
 * byte is read (a FIFO without a writer must not block: the alarm turns a
 * hang into a failed run), and no file yields more than DDP_SYS_READ_MAX
 * bytes, whatever its size claims. */
static void expect_refused(const char *path, int code, const char *why)
{
    char *data = (char *)1;
    size_t len = 99;
    alarm(20);
    int rc = ddp_sys_read_file(S, path, &data, &len);
    alarm(0);
    CU_ASSERT_EQUAL(rc, code);
    CU_ASSERT_PTR_EQUAL(data, (char *)1); /* nothing handed out */
    const char *m = ddp_err_message();
    if (rc != code || !strstr(m, path) || !strstr(m, why))
        printf("\n  %s: rc %d (%s): %s\n", path, rc, ddp_err_name(rc), m);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, why));
}

static void test_read_file_bounded(void)
{
    char dir[] = "/tmp/ddpsim-read-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char fifo[64], big[64], at_cap[64];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(big, sizeof big, "%s/big", dir);
    snprintf(at_cap, sizeof at_cap, "%s/at-cap", dir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    expect_refused(fifo, DDP_EUNSUPPORTED, "a FIFO (named pipe)");
    expect_refused(dir, -EISDIR, "it is a directory");
    expect_refused("/dev/zero", DDP_EUNSUPPORTED, "a character device");
    expect_refused("/dev/null", DDP_EUNSUPPORTED, "a character device");
    /* Sparse files: sizes without the disk space. */
    int fd = open(big, O_CREAT | O_WRONLY, 0600);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(ftruncate(fd, (off_t)DDP_SYS_READ_MAX + 1), 0);
    close(fd);
    expect_refused(big, DDP_ELIMIT, "more than the 16 MiB ddpsim reads");
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "16777217 bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "check that the path"));
    fd = open(at_cap, O_CREAT | O_WRONLY, 0600);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(ftruncate(fd, (off_t)DDP_SYS_READ_MAX), 0);
    close(fd);
    char *data = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(ddp_sys_read_file(S, at_cap, &data, &len), 0);
    CU_ASSERT_EQUAL(len, (size_t)DDP_SYS_READ_MAX);
    CU_ASSERT_PTR_NOT_NULL(data);
    free(data);
    /* procfs says size 0 and still has content. */
    data = NULL;
    CU_ASSERT_EQUAL(ddp_sys_read_file(S, "/proc/self/status", &data, &len), 0);
    CU_ASSERT_PTR_NOT_NULL(data ? strstr(data, "Name:") : NULL);
    CU_ASSERT_EQUAL(len, data ? strlen(data) : 0);
    free(data);
    unlink(fifo);
    unlink(big);
    unlink(at_cap);
    rmdir(dir);
}

/* ---- output files (ddp_out_*: issue 34) ---- */

static int write_text(const char *path, const char *text)
{
    ddp_out_t *o;
    int rc = ddp_out_open(path, "the test output", &o);
    if (rc)
        return rc;
    fputs(text, ddp_out_file(o));
    return ddp_out_commit(o);
}

/* Names in dir other than . and .. (a temporary file left behind shows). */
static int dir_entries(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* A regular target is replaced whole and keeps its mode; a device, FIFO,
 * directory or symlink is refused by name and left as it was (renaming
 * over /dev/full replaced the machine's device). The device node is made
 * in the test's own folder. */
static void test_output_targets(void)
{
    char dir[64], reg[96], dev[96], fifo[96], sub[96], link[96];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "out"));
    ddp_test_in(reg, sizeof reg, dir, "results");
    ddp_test_in(dev, sizeof dev, dir, "full");
    ddp_test_in(fifo, sizeof fifo, dir, "fifo");
    ddp_test_in(sub, sizeof sub, dir, "sub");
    ddp_test_in(link, sizeof link, dir, "link");
    CU_ASSERT_EQUAL(write_text(reg, "first\n"), 0);
    CU_ASSERT_EQUAL(chmod(reg, 0640), 0);
    CU_ASSERT_EQUAL(write_text(reg, "second\n"), 0);
    char *data = NULL;
    CU_ASSERT_EQUAL(ddp_sys_read_file(S, reg, &data, NULL), 0);
    CU_ASSERT_STRING_EQUAL(data ? data : "", "second\n");
    free(data);
    struct stat st;
    CU_ASSERT_EQUAL(lstat(reg, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0640);
    CU_ASSERT_EQUAL(mkfifo(fifo, 0600), 0);
    CU_ASSERT_EQUAL(mkdir(sub, 0700), 0);
    CU_ASSERT_EQUAL(symlink(reg, link), 0);
    int have_dev = ddp_test_mkdev(dev) == 1;
    if (!have_dev) {
        unlink(dev); /* the FIFO standing in: the FIFO case has its own */
        printf("\n  mknod not permitted here: the device target is skipped\n");
    }
    struct {
        const char *path, *kind;
        int have;
    } bad[] = {{dev, "a character device", have_dev},
               {fifo, "a FIFO (named pipe)", 1},
               {sub, "a directory", 1},
               {link, "a symbolic link", 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (!bad[i].have)
            continue;
        CU_ASSERT_EQUAL(write_text(bad[i].path, "x\n"), DDP_EUNSUPPORTED);
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), bad[i].path));
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), bad[i].kind));
        CU_ASSERT_EQUAL(ddp_out_check(bad[i].path, "x"), DDP_EUNSUPPORTED);
        CU_ASSERT_EQUAL(lstat(bad[i].path, &st), 0);
        CU_ASSERT(!S_ISREG(st.st_mode)); /* still what it was */
    }
    CU_ASSERT_EQUAL(ddp_out_check(reg, "x"), 0);
    CU_ASSERT_EQUAL(ddp_out_check("-", "x"), 0);
    /* An aborted output leaves the target as it was, and no temporary. */
    ddp_out_t *o;
    CU_ASSERT_EQUAL_FATAL(ddp_out_open(reg, "x", &o), 0);
    fputs("third\n", ddp_out_file(o));
    ddp_out_abort(o);
    data = NULL;
    CU_ASSERT_EQUAL(ddp_sys_read_file(S, reg, &data, NULL), 0);
    CU_ASSERT_STRING_EQUAL(data ? data : "", "second\n");
    free(data);
    CU_ASSERT_EQUAL(dir_entries(dir), 4 + have_dev);
    unlink(reg), unlink(dev), unlink(fifo), rmdir(sub), unlink(link);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

/* A full disk: the error says so in its own words, and nothing is left
 * under the final name (an existing file keeps its old content). In a
 * child of its own, in a mount namespace of its own, on a 16 KiB tmpfs. */
static int full_disk_child(const char *dir)
{
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, "size=16k") != 0)
        return 77;
    char path[96], old[96];
    ddp_test_in(path, sizeof path, dir, "new");
    ddp_test_in(old, sizeof old, dir, "old");
    int bad = write_text(old, "old\n") != 0;
    static char big[256 << 10];
    memset(big, 'x', sizeof big - 1);
    for (int k = 0; k < 2; k++) {
        const char *p = k ? old : path;
        int rc = write_text(p, big);
        if (rc != -ENOSPC ||
            !strstr(ddp_err_message(), "No space left on device") ||
            !strstr(ddp_err_message(), p)) {
            fprintf(stderr, "  %s: rc %d: %s\n", p, rc, ddp_err_message());
            bad = 1;
        }
    }
    char *data = NULL;
    struct stat st;
    bad |= lstat(path, &st) == 0; /* no partial file */
    bad |= ddp_sys_read_file(S, old, &data, NULL) != 0 ||
           strcmp(data, "old\n") != 0;
    free(data);
    bad |= dir_entries(dir) != 1; /* only "old": no temporary left */
    umount(dir);
    return bad;
}

static void test_output_full_disk(void)
{
    char dir[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "full"));
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0)
        _exit(full_disk_child(dir));
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        ddp_test_skip("no mount namespace here (not root?): no full tmpfs to write to");
    else
        CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

static void test_fault_points(void)
{
    uint16_t port = 0;
    int lfd = listen_loopback(&port);
    CU_ASSERT_FATAL(lfd >= 0);
    /* failinfo carries the errno to fail with. */
    CU_ASSERT_EQUAL(fiu_enable("sys/net/connect", 1, (void *)(intptr_t)ETIMEDOUT, 0), 0);
    ddp_addr_t a;
    ddp_addr_parse("127.0.0.1", port, &a);
    CU_ASSERT_EQUAL(ddp_sys_connect(S, &a, ddp_test_deadline_ms(S, 500)), -ETIMEDOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), "sys/net/connect"));
    fiu_disable("sys/net/connect");
    int c = ddp_sys_connect(S, &a, ddp_test_deadline_ms(S, 500));
    CU_ASSERT(c >= 0);
    /* Only once: the point fires on the first call, then is off. */
    CU_ASSERT_EQUAL(fiu_enable("sys/net/send", 1, NULL, FIU_ONETIME), 0);
    CU_ASSERT_EQUAL(ddp_sys_send(S, c, "x", 1, ddp_test_deadline_ms(S, 500)), -ECONNRESET);
    CU_ASSERT_EQUAL(ddp_sys_send(S, c, "x", 1, ddp_test_deadline_ms(S, 500)), 1);
    fiu_disable("sys/net/send");
    ddp_sys_close(S, c);
    ddp_sys_close(S, lfd);
}

/* A forked entry: its sys's count of failed connects (a refused one first
 * when arg is non-NULL). */
static int failed_connects_entry(ddp_sys_t *child, void *arg)
{
    if (arg)
        (void)ddp_sys_connect(child, arg, ddp_test_deadline_ms(child, 1000));
    return ddp_sys_posix_failed_connects(child);
}

/* A real run's retries: the connects through a sys that failed, refused or
 * injected, not the ones that succeeded; a forked entry's sys counts its own
 * from 0. */
static void test_failed_connects_counted(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    CU_ASSERT_FATAL(sys != NULL);
    uint16_t port = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_free_port(sys, &port), 0);
    ddp_addr_t closed;
    ddp_addr_parse("127.0.0.1", port, &closed);
    int others = ddp_sys_posix_failed_connects(S);
    CU_ASSERT_EQUAL(ddp_sys_posix_failed_connects(sys), 0);
    CU_ASSERT_EQUAL(ddp_sys_connect(sys, &closed, ddp_test_deadline_ms(sys, 1000)),
                    -ECONNREFUSED);
    CU_ASSERT_EQUAL(ddp_sys_posix_failed_connects(sys), 1);
    uint16_t lport = 0;
    int lfd = listen_loopback(&lport);
    CU_ASSERT_FATAL(lfd >= 0);
    ddp_addr_t open_;
    ddp_addr_parse("127.0.0.1", lport, &open_);
    CU_ASSERT_EQUAL(fiu_enable("sys/net/connect", 1, (void *)(intptr_t)ECONNRESET, 0), 0);
    CU_ASSERT_EQUAL(ddp_sys_connect(sys, &open_, ddp_test_deadline_ms(sys, 500)), -ECONNRESET);
    fiu_disable("sys/net/connect");
    CU_ASSERT_EQUAL(ddp_sys_posix_failed_connects(sys), 2);
    int c = ddp_sys_connect(sys, &open_, ddp_test_deadline_ms(sys, 1000));
    CU_ASSERT(c >= 0);
    CU_ASSERT_EQUAL(ddp_sys_posix_failed_connects(sys), 2);
    CU_ASSERT_EQUAL(ddp_sys_posix_failed_connects(S), others); /* another sys: its own */
    ddp_spawn_t sp = {.entry = failed_connects_entry, .arg = &closed};
    ddp_pid_t pid;
    int status = -1;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_spawn(sys, &sp, &pid), 0);
    CU_ASSERT_EQUAL(ddp_sys_wait(sys, pid, &status, ddp_test_bound(sys, 5)), 0);
    CU_ASSERT_EQUAL(status, 1);
    CU_ASSERT_EQUAL(ddp_sys_posix_failed_connects(NULL), 0);
    if (c >= 0)
        ddp_sys_close(sys, c);
    ddp_sys_close(sys, lfd);
    ddp_sys_free(sys);
}

/* ---- the wait loops on a fake clock (issue 43: every loop bounded by
 * its deadline in a way a test observes) ---- */

#define FAKE_T0 (1000 * DDP_NS_PER_S)

static void kill_pid(void *arg)
{
    ddp_sys_kill(S, *(ddp_pid_t *)arg, SIGKILL);
}

/* wait polls a running child in 2 ms steps and gives up at its deadline
 * exactly, in the clock's time: 101 ms is 50 steps and a last one of 1 ms
 * clipped to the deadline. A loop that sleeps past it, or on and on (the
 * child is killed after 10,000 sleeps: wait then returns 0), fails. */
static void test_wait_fake_clock(void)
{
    char *argv[] = {"sleep", "30", NULL};
    ddp_spawn_t sp = {.argv = argv};
    ddp_pid_t pid;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_spawn(S, &sp, &pid), 0);
    ddp_fake_clock_t fc;
    ddp_fake_clock_init(&fc, S, FAKE_T0);
    fc.on_cap = kill_pid;
    fc.arg = &pid;
    int64_t deadline = FAKE_T0 + 101 * DDP_NS_PER_MS;
    int waited = ddp_sys_wait(&fc.sys, pid, NULL, deadline);
    CU_ASSERT_EQUAL(waited, DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(fc.now, deadline);
    CU_ASSERT_EQUAL(fc.sleeps, 51);
    CU_ASSERT_EQUAL(fc.first_sleep, FAKE_T0 + 2 * DDP_NS_PER_MS);
    CU_ASSERT_EQUAL(fc.max_sleep, deadline);
    CU_ASSERT_EQUAL(fc.late_sleeps, 0);
    CU_ASSERT_EQUAL(fc.capped, 0);
    CU_ASSERT_EQUAL(ddp_err_ctx()->waited_ns, 101 * DDP_NS_PER_MS);
    if (waited == 0) /* reaped: nothing left to look at */
        return;
    /* A deadline already passed: one look, no sleep. */
    fc.sleeps = 0;
    CU_ASSERT_EQUAL(ddp_sys_wait(&fc.sys, pid, NULL, FAKE_T0), DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(fc.sleeps, 0);
    ddp_sys_kill(S, pid, SIGKILL);
    CU_ASSERT_EQUAL(ddp_sys_wait(S, pid, NULL, ddp_test_bound(S, 5)), 0);
}

static int until_released(ddp_sys_t *sys, void *arg)
{
    while (!atomic_load((atomic_int *)arg))
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, DDP_NS_PER_MS));
    return 5;
}

static void release(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
}

/* thread_join looks at a running thread in 1 ms steps and gives up at its
 * deadline exactly (10.5 ms: 10 steps and a last one of 0.5 ms); the
 * thread keeps running and a later join gets its code. A loop that does
 * not stop releases the thread after 10,000 sleeps (join then returns 0). */
static void test_thread_join_fake_clock(void)
{
    atomic_int released = 0;
    ddp_thread_t th;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_thread_start(S, until_released, &released, "held", &th), 0);
    ddp_fake_clock_t fc;
    ddp_fake_clock_init(&fc, S, FAKE_T0);
    fc.on_cap = release;
    fc.arg = &released;
    int64_t deadline = FAKE_T0 + 10 * DDP_NS_PER_MS + DDP_NS_PER_MS / 2;
    int rc = -1, joined = ddp_sys_thread_join(&fc.sys, th, &rc, deadline);
    CU_ASSERT_EQUAL(joined, DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(fc.now, deadline);
    CU_ASSERT_EQUAL(fc.sleeps, 11);
    CU_ASSERT_EQUAL(fc.first_sleep, FAKE_T0 + DDP_NS_PER_MS);
    CU_ASSERT_EQUAL(fc.max_sleep, deadline);
    CU_ASSERT_EQUAL(fc.late_sleeps, 0);
    CU_ASSERT_EQUAL(fc.capped, 0);
    CU_ASSERT_EQUAL(ddp_err_ctx()->waited_ns, deadline - FAKE_T0);
    atomic_store(&released, 1);
    if (joined != 0) /* joined, the handle is gone */
        joined = ddp_sys_thread_join(S, th, &rc, ddp_test_deadline_ms(S, 5000));
    CU_ASSERT_EQUAL(joined, 0);
    CU_ASSERT_EQUAL(rc, 5);
}

/* recv, send and accept look once when the deadline is the clock's now
 * (-EAGAIN, nothing waited), and wait no longer than a deadline 1 ms
 * ahead (DDP_ETIMEOUT): the deadline is read on the clock of the sys they
 * are called with. */
static void test_socket_waits_fake_clock(void)
{
    int lfd, c, a;
    loopback_pair(&lfd, &c, &a, NULL);
    ddp_fake_clock_t fc;
    ddp_fake_clock_init(&fc, S, FAKE_T0);
    char b[16];
    CU_ASSERT_EQUAL(ddp_sys_recv(&fc.sys, a, b, sizeof b, FAKE_T0), -EAGAIN);
    CU_ASSERT_EQUAL(ddp_sys_accept(&fc.sys, lfd, NULL, FAKE_T0), -EAGAIN);
    CU_ASSERT_EQUAL(ddp_sys_recv(&fc.sys, a, b, sizeof b, FAKE_T0 + DDP_NS_PER_MS),
                    DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(ddp_sys_accept(&fc.sys, lfd, NULL, FAKE_T0 + DDP_NS_PER_MS),
                    DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(fc.sleeps, 0);
    ddp_sys_close(S, a);
    ddp_sys_close(S, c);
    ddp_sys_close(S, lfd);
}

static void test_sleep_until(void)
{
    int64_t dl = ddp_test_deadline_ms(S, 10);
    CU_ASSERT_EQUAL(ddp_sys_sleep_until(S, dl), 0);
    CU_ASSERT(ddp_sys_now(S) >= dl);
    CU_ASSERT(ddp_sys_somaxconn(S) > 0);
    CU_ASSERT_EQUAL(ddp_sys_deadline_in(S, DDP_DEADLINE_NEVER), DDP_DEADLINE_NEVER);
}

/* Both ends of a connection have Nagle's algorithm off, as TCPStore's do:
 * a small reply after a small request must not wait for a delayed ACK. */
static void test_nodelay_both_ends(void)
{
    int lfd, c, a;
    loopback_pair(&lfd, &c, &a, NULL);
    int fds[2] = {c, a};
    for (int i = 0; i < 2; i++) {
        int v = 0;
        socklen_t l = sizeof v;
        CU_ASSERT_EQUAL(getsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &v, &l), 0);
        if (!v)
            printf("\n  the %s end has Nagle on\n", i ? "accepted" : "connecting");
        CU_ASSERT(v != 0);
    }
    ddp_sys_close(S, c);
    ddp_sys_close(S, a);
    ddp_sys_close(S, lfd);
}

/* A master port is free again as soon as its run ends: the listener's end
 * of a connection it closed first sits in TIME_WAIT for 60 s, and a
 * restarted job must still bind it (SO_REUSEADDR, as TCPStore sets). */
static void test_port_reused_after_close(void)
{
    int lfd, c, a;
    uint16_t port;
    loopback_pair(&lfd, &c, &a, &port);
    int64_t dl = ddp_test_deadline_ms(S, 2000);
    ddp_sys_close(S, a); /* the server's end closes first: its TIME_WAIT */
    char b[1];
    CU_ASSERT_EQUAL(ddp_sys_recv(S, c, b, 1, dl), 0); /* the FIN arrived */
    ddp_sys_close(S, c);
    ddp_sys_close(S, lfd);
    ddp_addr_t addr;
    ddp_addr_parse("127.0.0.1", port, &addr);
    int again = ddp_sys_listen(S, &addr, 16);
    if (again < 0)
        printf("\n  %s\n", ddp_err_message());
    CU_ASSERT(again >= 0);
    if (again >= 0)
        ddp_sys_close(S, again);
}

/* A signal that arrives while a rank waits (a launcher's SIGCHLD, a
 * profiler's SIGPROF; poll(2), epoll_wait(2) and clock_nanosleep(2) are
 * never restarted) does not end the wait: each of these still runs to its
 * deadline. The main thread signals the waiting thread every millisecond
 * until it is done. */
typedef struct {
    int fd, ep;
    atomic_int done;
    int recv_rc, poll_rc, epoll_rc, sleep_rc, slept_to_deadline;
} sig_waits_t;

static void on_sigusr1(int sig) { (void)sig; }

static void *sig_waiter(void *arg)
{
    sig_waits_t *w = arg;
    char b[4];
    w->recv_rc = (int)ddp_sys_recv(S, w->fd, b, sizeof b, ddp_test_deadline_ms(S, 60));
    ddp_pollfd_t p = {.fd = w->fd, .events = DDP_POLLIN};
    w->poll_rc = ddp_sys_poll(S, &p, 1, ddp_test_deadline_ms(S, 60));
    ddp_epoll_event_t ev;
    w->epoll_rc = ddp_sys_epoll_wait(S, w->ep, &ev, 1, ddp_test_deadline_ms(S, 60));
    int64_t dl = ddp_test_deadline_ms(S, 60);
    w->sleep_rc = ddp_sys_sleep_until(S, dl);
    w->slept_to_deadline = ddp_sys_now(S) >= dl;
    atomic_store(&w->done, 1);
    return NULL;
}

static void test_signals_do_not_end_waits(void)
{
    int lfd, c, a;
    loopback_pair(&lfd, &c, &a, NULL);
    sig_waits_t w = {.fd = a, .ep = ddp_sys_epoll_create(S)};
    CU_ASSERT_FATAL(w.ep >= 0);
    CU_ASSERT_EQUAL(ddp_sys_epoll_ctl(S, w.ep, DDP_EPOLL_ADD, a, DDP_POLLIN, 1), 0);
    struct sigaction sa = {.sa_handler = on_sigusr1}, old;
    sigemptyset(&sa.sa_mask); /* no SA_RESTART */
    CU_ASSERT_FATAL(sigaction(SIGUSR1, &sa, &old) == 0);
    pthread_t th;
    CU_ASSERT_FATAL(pthread_create(&th, NULL, sig_waiter, &w) == 0);
    int sent = 0;
    while (!atomic_load(&w.done)) {
        pthread_kill(th, SIGUSR1);
        sent++;
        ddp_sys_sleep_until(S, ddp_test_deadline_ms(S, 1));
    }
    pthread_join(th, NULL);
    sigaction(SIGUSR1, &old, NULL);
    CU_ASSERT(sent > 0);
    CU_ASSERT_EQUAL(w.recv_rc, DDP_ETIMEOUT);
    CU_ASSERT_EQUAL(w.poll_rc, 0);
    CU_ASSERT_EQUAL(w.epoll_rc, 0);
    CU_ASSERT_EQUAL(w.sleep_rc, 0);
    CU_ASSERT(w.slept_to_deadline);
    if (w.recv_rc != DDP_ETIMEOUT || w.poll_rc || w.epoll_rc || !w.slept_to_deadline)
        printf("\n  after %d signals: recv %d, poll %d, epoll_wait %d, sleep %d%s\n", sent,
               w.recv_rc, w.poll_rc, w.epoll_rc, w.sleep_rc,
               w.slept_to_deadline ? "" : " (woke before its deadline)");
    ddp_sys_epoll_close(S, w.ep);
    ddp_sys_close(S, c);
    ddp_sys_close(S, a);
    ddp_sys_close(S, lfd);
}

/* Readiness sets: epoll(7) itself, and the emulation over poll that a sys
 * without epoll ops gets (here: the POSIX ops with the four taken out). */
static void test_epoll_contract(void)
{
    int rc = ddp_test_epoll_contract(S, 0);
    if (rc)
        printf("\n  epoll (POSIX): %s\n", ddp_err_message());
    CU_ASSERT_EQUAL(rc, 0);
}

static void test_epoll_emulated(void)
{
    ddp_sys_ops_t ops = *S->ops;
    ops.epoll_create = NULL;
    ops.epoll_ctl = NULL;
    ops.epoll_wait = NULL;
    ops.epoll_close = NULL;
    ddp_sys_t emu = *S;
    emu.ops = &ops;
    int rc = ddp_test_epoll_contract(&emu, 1);
    if (rc)
        printf("\n  epoll (emulated over poll): %s\n", ddp_err_message());
    CU_ASSERT_EQUAL(rc, 0);
    /* Handles of closed sets are refused, and slots are reused. */
    int a = ddp_sys_epoll_create(&emu);
    CU_ASSERT(a >= 0);
    CU_ASSERT_EQUAL(ddp_sys_epoll_close(&emu, a), 0);
    CU_ASSERT_EQUAL(ddp_sys_epoll_close(&emu, a), -EBADF);
    ddp_epoll_event_t ev;
    CU_ASSERT_EQUAL(ddp_sys_epoll_wait(&emu, a, &ev, 1, 0), -EBADF);
    CU_ASSERT_EQUAL(ddp_sys_epoll_create(&emu), a);
    CU_ASSERT_EQUAL(ddp_sys_epoll_close(&emu, a), 0);
}

/* sys/net/epoll fails a wait with its errno (EINTR by default). */
static void test_epoll_fault_point(void)
{
    int ep = ddp_sys_epoll_create(S);
    CU_ASSERT_FATAL(ep >= 0);
    ddp_epoll_event_t ev;
    CU_ASSERT_EQUAL(fiu_enable("sys/net/epoll", 1, NULL, FIU_ONETIME), 0);
    CU_ASSERT_EQUAL(ddp_sys_epoll_wait(S, ep, &ev, 1, 0), -EINTR);
    CU_ASSERT_EQUAL(ddp_sys_epoll_wait(S, ep, &ev, 1, 0), 0);
    fiu_disable("sys/net/epoll");
    CU_ASSERT_EQUAL(ddp_sys_epoll_close(S, ep), 0);
}

/* Issue 42: no lock across fork. A thread that arms fault points (libfiu's
 * write lock) and one that evaluates them (its read lock, a ONETIME
 * point's mutex) run while the main thread forks workers as the elastic
 * agent does (ddp_sys_spawn of a function); each worker arms, evaluates
 * and disarms a point of its own and must exit within its deadline. A fork
 * that copied a held lock leaves a worker blocked forever. 2,000 forks
 * (DDP_TEST_FORKS, e.g. 10000, for more). */
static atomic_int fork_stress_stop;

static int fork_stress_armer(ddp_sys_t *sys, void *arg)
{
    (void)sys, (void)arg;
    while (!atomic_load(&fork_stress_stop)) {
        ddp_fault_enable("test/fork/armed", 1, NULL, FIU_ONETIME);
        ddp_fault_point("test/fork/armed", EIO);
        ddp_fault_disable("test/fork/armed");
    }
    return 0;
}

static int fork_stress_reader(ddp_sys_t *sys, void *arg)
{
    (void)sys, (void)arg;
    while (!atomic_load(&fork_stress_stop)) {
        ddp_fault_point("test/fork/armed", EIO);
        ddp_fault_point("test/fork/never", EIO);
    }
    return 0;
}

static int fork_stress_worker(ddp_sys_t *sys, void *arg)
{
    (void)sys, (void)arg;
    ddp_fault_enable("test/fork/worker", 1, NULL, 0);
    int fired = ddp_fault_point("test/fork/worker", EIO) != 0;
    ddp_fault_point("test/fork/armed", EIO);
    ddp_fault_disable("test/fork/worker");
    return fired ? 0 : 3;
}

/* n workers forked at once, then each waited for (5 s, scaled): the
 * stuck ones (blocked on a lock their fork copied held: not ours to leave)
 * are killed. */
#define FORK_BATCH 25
static void fork_batch(int n, long *stuck, long *failed)
{
    ddp_pid_t pids[FORK_BATCH];
    int started = 0;
    for (; started < n; started++) {
        ddp_spawn_t sp = {.entry = fork_stress_worker, .name = "worker", .die_with_parent = 1};
        if (ddp_sys_spawn(S, &sp, &pids[started]) != 0) {
            (*failed)++;
            break;
        }
    }
    int64_t deadline = ddp_sys_deadline_in(S, ddp_test_wall_s(5) * DDP_NS_PER_S);
    for (int k = 0; k < started; k++) {
        int st = -1;
        if (ddp_sys_wait(S, pids[k], &st, deadline) != 0) {
            (*stuck)++;
            ddp_sys_kill(S, pids[k], SIGKILL);
            ddp_sys_wait(S, pids[k], &st, DDP_DEADLINE_NEVER);
        } else if (st != 0) {
            (*failed)++;
        }
    }
}

static void test_fork_while_faults_armed(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* Each forked child's exit runs the sanitizer's checks, which stop a
     * world whose other threads the child does not have: seconds per child,
     * and children "stuck" for reasons of the sanitizer's own. The plain
     * build runs the test. */
    ddp_test_skip("a sanitizer's checks at each forked child's exit stall it for seconds; "
                  "the plain build runs this stress test");
    return;
#endif
    long forks = 2000;
    ddp_sys_t *host = ddp_sys_posix_new(NULL); /* this process's environment */
    if (host && ddp_env_get(ddp_sys_env(host), "DDP_TEST_FORKS"))
        CU_ASSERT_EQUAL(ddp_env_get_long(ddp_sys_env(host), "DDP_TEST_FORKS", 1, 10000000,
                                         &forks), 0);
    ddp_sys_free(host);
    atomic_store(&fork_stress_stop, 0);
    ddp_thread_t th[2];
    CU_ASSERT_EQUAL_FATAL(ddp_sys_thread_start(S, fork_stress_armer, NULL, "armer", &th[0]), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_sys_thread_start(S, fork_stress_reader, NULL, "reader", &th[1]),
                          0);
    long stuck = 0, failed = 0, i;
    for (i = 0; i < forks && !stuck && !failed; i += FORK_BATCH)
        fork_batch(forks - i < FORK_BATCH ? (int)(forks - i) : FORK_BATCH, &stuck, &failed);
    atomic_store(&fork_stress_stop, 1);
    for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL(ddp_sys_thread_join(S, th[k], NULL, DDP_DEADLINE_NEVER), 0);
    if (stuck || failed)
        printf("\n  by fork %ld of %ld: %ld worker(s) stuck past 5 s, %ld failed\n", i, forks,
               stuck, failed);
    CU_ASSERT_EQUAL(stuck, 0);
    CU_ASSERT_EQUAL(failed, 0);
}

/* A process in a session of its own that connects to port and stays
 * until gate (a pipe's read end) closes; its pid (= its session). */
static pid_t session_client(uint16_t port, int gate[2])
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        close(gate[1]);
        setsid();
        int fd = ddp_sys_connect_host(S, "127.0.0.1", port, ddp_test_deadline_ms(S, 5000));
        char b;
        while (fd >= 0 && read(gate[0], &b, 1) > 0)
            ;
        _exit(fd >= 0 ? 0 : 1);
    }
    return p;
}

/* The accepted end's peer port for the next client. */
static uint16_t accepted_port(int lfd)
{
    ddp_addr_t peer;
    int a = ddp_sys_accept(S, lfd, &peer, ddp_test_deadline_ms(S, 5000));
    CU_ASSERT_FATAL(a >= 0);
    ddp_sys_close(S, a);
    return peer.port;
}

/* Issue 42: the hosted store attributes each client to a rank's session;
 * one index of the sessions' sockets (ddp_sys_tcp_owner) serves many
 * lookups: each client's session, a client newer than the index (read
 * again), -1 for a session that holds no such socket, -ENOENT for a
 * connection no namespace has (the runner stops asking about it: a delay
 * proxy's connections cost it 20 reads of the TCP tables each, 4 s of CPU
 * in torch-delay). */
static void test_tcp_owner_index(void)
{
    uint16_t port = 0;
    int lfd = listen_loopback(&port), gate[2];
    CU_ASSERT_FATAL(lfd >= 0);
    CU_ASSERT_EQUAL_FATAL(pipe(gate), 0);
    long sids[3];
    uint16_t cport[3];
    for (int i = 0; i < 2; i++) {
        sids[i] = session_client(port, gate);
        cport[i] = accepted_port(lfd);
    }
    ddp_sys_tcp_owners_t *t = ddp_sys_tcp_owners_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(ddp_sys_tcp_owner(t, sids, 2, cport[0], port), 0);
    CU_ASSERT_EQUAL(ddp_sys_tcp_owner(t, sids, 2, cport[1], port), 1);
    CU_ASSERT_EQUAL(ddp_sys_session_holds_tcp(sids[0], cport[0], port), 1);
    sids[2] = session_client(port, gate);
    cport[2] = accepted_port(lfd);
    CU_ASSERT_EQUAL(ddp_sys_tcp_owner(t, sids, 3, cport[2], port), 2);
    CU_ASSERT_EQUAL(ddp_sys_tcp_owner(t, &sids[1], 1, cport[0], port), -1);
    /* no such client: not "not known yet", which a caller asks again */
    CU_ASSERT_EQUAL(ddp_sys_tcp_owner(t, sids, 3, 1, port), -ENOENT);
    ddp_sys_tcp_owners_free(t);
    close(gate[0]);
    close(gate[1]);
    for (int i = 0; i < 3; i++) {
        int st = -1;
        CU_ASSERT_EQUAL(ddp_sys_wait(S, sids[i], &st, ddp_test_bound(S, 5)), 0);
        CU_ASSERT_EQUAL(st, 0);
    }
    ddp_sys_close(S, lfd);
}

/* A process group of its own (setsid) whose leader forks a member; both
 * sleep. The leader's pid (= the group's id). */
static pid_t sleeping_group(void)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        setsid();
        if (fork() == 0)
            pause();
        pause();
        _exit(0);
    }
    return p;
}

/* 1 when every process of group pgid is gone (a bounded wait, 5 s). */
static int group_gone(pid_t pgid)
{
    for (int i = 0; i < ddp_test_wall_s(5) * 100; i++) {
        if (kill(-pgid, 0) != 0 && errno == ESRCH)
            return 1;
        waitpid(pgid, NULL, WNOHANG); /* the leader is ours to reap */
        usleep(10000);
    }
    return 0;
}

/* Issue 42: the guard of a real run kills the groups it watches, what
 * their leaders forked too, once its owner ends it (or dies: the real-run
 * test SIGKILLs a runner), and leaves a group it was told to forget. */
static void test_guard_kills_watched_groups(void)
{
    ddp_sys_guard_t *g = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_sys_guard_start(&g), 0);
    pid_t watched = sleeping_group(), forgotten = sleeping_group();
    CU_ASSERT_FATAL(watched > 0 && forgotten > 0);
    ddp_sys_guard_watch(g, watched, 1);
    ddp_sys_guard_watch(g, forgotten, 1);
    ddp_sys_guard_watch(g, forgotten, 0);
    usleep(100000); /* both have forked their member (no harm if not yet) */
    ddp_sys_guard_end(g);
    CU_ASSERT(group_gone(watched));
    CU_ASSERT_EQUAL(kill(-forgotten, 0), 0); /* still there */
    kill(-forgotten, SIGKILL);
    CU_ASSERT(group_gone(forgotten));
    kill(-watched, SIGKILL); /* whatever happened: none of them is left */
    ddp_sys_guard_end(NULL); /* a guard that does nothing */
}

/* A runner that spawns `setsid sh -c 'sleep ... & ...'` with its guard in
 * the spawn and dies as soon as the sleep runs, before it could tell the
 * guard anything itself; it hands the group's id up pfd first. */
static void die_after_guarded_spawn(int pfd, const char *mark)
{
    ddp_sys_t *sys = ddp_sys_posix_new(NULL);
    ddp_sys_guard_t *g = NULL;
    if (!sys || ddp_sys_guard_start(&g) != 0)
        _exit(2);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "sleep 300.4711 & echo up > %s; wait", mark);
    char *argv[] = {"setsid", "sh", "-c", cmd, NULL};
    ddp_spawn_t sp = {.argv = argv, .die_with_parent = 1, .guard = g};
    ddp_pid_t pid = 0;
    if (ddp_sys_spawn(sys, &sp, &pid) != 0)
        _exit(3);
    int32_t v = (int32_t)pid;
    if (write(pfd, &v, sizeof v) != (ssize_t)sizeof v)
        _exit(4);
    for (int i = 0; i < 500 && access(mark, F_OK) != 0; i++)
        usleep(10000);
    _exit(0); /* like a SIGKILL: nothing more said to the guard */
}

/* Issue 42: a real run watched each rank's group only after its spawn
 * returned: a runner killed between the two (a loaded host) left that
 * rank's shell and what it forked running. A spawn with a guard has the
 * group watched before the child execs. */
static void test_guard_watches_before_exec(void)
{
    char mark[] = "/tmp/ddpsim-guard-spawn-XXXXXX";
    int mfd = mkstemp(mark);
    CU_ASSERT_FATAL(mfd >= 0);
    close(mfd);
    unlink(mark);
    int pfd[2];
    CU_ASSERT_FATAL(pipe(pfd) == 0);
    pid_t runner = fork();
    if (runner == 0) {
        close(pfd[0]);
        die_after_guarded_spawn(pfd[1], mark);
    }
    close(pfd[1]);
    int32_t pgid = 0;
    ssize_t r = read(pfd[0], &pgid, sizeof pgid);
    close(pfd[0]);
    int st = -1;
    waitpid(runner, &st, 0);
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_FATAL(r == (ssize_t)sizeof pgid && pgid > 0);
    CU_ASSERT(group_gone(pgid));
    kill(-pgid, SIGKILL); /* whatever happened: none of them is left */
    unlink(mark);
}

DDP_SUITE("sys_posix", suite_init, suite_cleanup,
          {"wait_fake_clock", test_wait_fake_clock},
          {"thread_join_fake_clock", test_thread_join_fake_clock},
          {"socket_waits_fake_clock", test_socket_waits_fake_clock},
          {"output_targets", test_output_targets},
          {"output_full_disk", test_output_full_disk},
          {"host clock: the POSIX sys's own", test_host_clock},
          {"loopback stream round trip", test_stream_roundtrip},
          {"recv and accept honour deadlines", test_recv_deadline},
          {"refused connect names the address", test_refused_names_address},
          {"taken port gives EADDRINUSE", test_addr_in_use},
          {"dual-stack :: listener accepts IPv4", test_dual_stack_listener},
          {"name resolution", test_resolve},
          {"spawn, wait, kill", test_spawn_wait_kill},
          {"a run's guard kills the groups it watches, members too, at its end",
           test_guard_kills_watched_groups},
          {"a spawn with a guard: its group watched before it execs",
           test_guard_watches_before_exec},
          {"which session holds a TCP connection: one index for many lookups",
           test_tcp_owner_index},
          {"read file", test_read_file},
          {"read file: bounded, regular files only", test_read_file_bounded},
          {"libfiu fault points", test_fault_points},
          {"forks while other threads arm and evaluate fault points: no worker blocks",
           test_fork_while_faults_armed},
          {"clock and sleep", test_sleep_until},
          {"failed connects counted per sys (a real run's retries)",
           test_failed_connects_counted},
          {"TCP_NODELAY on both ends of a connection", test_nodelay_both_ends},
          {"a port is listened on again at once after its run (SO_REUSEADDR)",
           test_port_reused_after_close},
          {"a signal does not end a wait (recv, poll, epoll_wait, sleep)",
           test_signals_do_not_end_waits},
          {"readiness sets: the epoll contract", test_epoll_contract},
          {"readiness sets emulated over poll", test_epoll_emulated},
          {"readiness sets: the sys/net/epoll fault point",
           test_epoll_fault_point})
