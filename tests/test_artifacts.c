/* tests/test_artifacts.c — the folders ddpsim writes (issue 43): `ddpsim
 * report`'s report/ and `run --artifacts`' run folders appear whole or not
 * at all, so a failure leaves nothing in the way of the retry. Real files,
 * real write failures (a name past NAME_MAX, RLIMIT_FSIZE); it runs the
 * built command ($DDPSIM) and skips outside `make test`. */
#include "test.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* How many entries of dir start with prefix (-1: dir cannot be read). */
static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += !strncmp(e->d_name, prefix, strlen(prefix)) && strcmp(e->d_name, ".") &&
             strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* A report that fails half way (the second run's page cannot be written:
 * its name is past NAME_MAX) leaves no report/ (it left one with the first
 * page, which made the retry exit 2), and no temporary folder; the retry
 * once the cause is gone writes it. */
static void test_report_whole_or_nothing(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char dir[64], art[96], args[512], out[8192], from[128], to[512], rep[128];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "art-report"));
    ddp_test_in(art, sizeof art, dir, "a");
    snprintf(args, sizeof args, "run tests/report/rank5-crash.scn tests/report/vacuous.scn "
             "--accelerator ddp --no-progress --artifacts %s", art);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 1);
    ddp_test_in(from, sizeof from, art, "vacuous.ddp");
    snprintf(to, sizeof to, "%s/%0250d", art, 0); /* + ".html": 255 is the most */
    CU_ASSERT_EQUAL_FATAL(rename(from, to), 0);
    snprintf(args, sizeof args, "report %s", art);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 1, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "File name too long"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "nothing kept"));
    ddp_test_in(rep, sizeof rep, art, "report");
    CU_ASSERT_NOT_EQUAL(access(rep, F_OK), 0);
    CU_ASSERT_EQUAL(count_prefixed(art, ".report"), 0);
    CU_ASSERT_EQUAL_FATAL(rename(to, from), 0);
    CU_ASSERT_EQUAL(ddp_test_ddpsim_io(NULL, args, 0, out, sizeof out), 0);
    ddp_test_in(rep, sizeof rep, art, "report/vacuous.ddp.html");
    CU_ASSERT_EQUAL(access(rep, R_OK), 0);
    ddp_test_in(rep, sizeof rep, art, "report/index.html");
    CU_ASSERT_EQUAL(access(rep, R_OK), 0);
    rm_tree(dir);
}

/* `ddpsim run ... --artifacts art` in a child whose files may not grow past
 * limit bytes (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails with
 * EFBIG, as on a full disk); its exit status, -1 if it did not exit. */
static int run_artifacts_limited(const char *art, rlim_t limit)
{
    char bin[400];
    if (!ddp_test_ddpsim_bin(bin, sizeof bin))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {limit, limit};
        int null = open("/dev/null", O_WRONLY);
        signal(SIGXFSZ, SIG_IGN);
        if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
            setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(99);
        alarm((unsigned)ddp_test_wall_s(60)); /* bounds a hang, measures nothing */
        execl(bin, "ddpsim", "run", "tests/report/rank5-crash.scn", "--accelerator", "ddp",
              "--no-progress", "--artifacts", art, (char *)NULL);
        _exit(98);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A run's folder whose writing fails half way (its trace is past the file
 * size limit) is not there at all: it was left with the files written
 * before (scenario, seed, replay, result.json), a folder that looked kept
 * and made `--artifacts` refuse the retry. No temporary folder is left;
 * the retry without the limit keeps the whole folder. */
static void test_artifacts_whole_or_nothing(void)
{
    if (!ddp_test_have_ddpsim())
        return;
    char dir[64], art[96], run[128], readme[160];
    CU_ASSERT_PTR_NOT_NULL_FATAL(ddp_test_tmpdir(dir, sizeof dir, "art-full"));
    ddp_test_in(art, sizeof art, dir, "a");
    ddp_test_in(run, sizeof run, art, "rank5-crash.ddp");
    CU_ASSERT_EQUAL(run_artifacts_limited(art, 8192), 1);
    CU_ASSERT_NOT_EQUAL(access(run, F_OK), 0);
    CU_ASSERT_EQUAL(count_prefixed(art, "."), 0);
    CU_ASSERT_EQUAL(run_artifacts_limited(art, RLIM_INFINITY), 1); /* the run fails */
    ddp_test_in(readme, sizeof readme, run, "README");
    CU_ASSERT_EQUAL(access(readme, R_OK), 0);
    ddp_test_in(readme, sizeof readme, run, "trace.jsonl");
    CU_ASSERT_EQUAL(access(readme, R_OK), 0);
    CU_ASSERT_EQUAL(count_prefixed(art, "."), 0);
    rm_tree(dir);
}

DDP_SUITE("artifacts", NULL, NULL,
          {"report: a failure leaves no report/ in the retry's way",
           test_report_whole_or_nothing},
          {"run --artifacts: a folder whose writing fails is not kept at all",
           test_artifacts_whole_or_nothing})
