/* tests/test_plan.c — launch plans: what a scenario's plan holds (one
 * process per launcher task, their exact environment, the faults), the
 * plan file round trip (write -> read -> write is the identity over every
 * bundled scenario and accelerator), and errors that name file and line. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp/accel.h"
#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/plan.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"
#include "test.h"

static char *plan_text(const ddp_plan_t *p)
{
    char *t = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&t, &n);
    CU_ASSERT_EQUAL(ddp_plan_write(p, m), 0);
    fclose(m);
    return t;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static void test_round_trip_corpus(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    DIR *d = opendir("scenarios");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct dirent *e;
    int plans = 0;
    char path[] = "/tmp/ddpsim-plan-test-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_TRUE_FATAL(fd >= 0);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".scn"))
            continue;
        char file[512], err[512];
        snprintf(file, sizeof file, "scenarios/%s", e->d_name);
        ddp_scenario_t *s = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_scenario_load(file, &s, err, sizeof err), 0);
        for (size_t a = 0; a < ddp_accel_count(); a++) {
            const char *accel = ddp_accel_at(a)->name;
            if (!ddp_scenario_has_accel(s, accel))
                continue;
            ddp_plan_t *p = NULL, *q = NULL;
            CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, accel, 0, &p), 0);
            snprintf(p->results, sizeof p->results, "/tmp/results \"quoted\"\n");
            p->t0 = 123456789;
            char *t1 = plan_text(p);
            CU_ASSERT_EQUAL(write_file(path, t1), 0);
            CU_ASSERT_EQUAL(ddp_plan_read(sys, path, &q), 0);
            if (!q) {
                printf("\n  %s %s: %s\n", file, accel, ddp_err_message());
            } else {
                char *t2 = plan_text(q);
                CU_ASSERT_STRING_EQUAL(t1, t2);
                CU_ASSERT_EQUAL(q->nprocs, p->nprocs);
                CU_ASSERT_EQUAL(q->nfaults, p->nfaults);
                free(t2);
                plans++;
            }
            free(t1);
            ddp_plan_free(p);
            ddp_plan_free(q);
        }
        ddp_scenario_free(s);
    }
    closedir(d);
    close(fd);
    remove(path);
    CU_ASSERT_TRUE(plans > 150);
    ddp_sys_free(sys);
}

/* What a plan says of a SLURM launch with a late master, a port holder
 * and a fault: checked against what srun would give, not the code's output. */
static void test_plan_contents(void)
{
    char err[512];
    ddp_scenario_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(
        ddp_scenario_parse("scenario \"x\"\nnodes 2\ndevices 2\nhosts gpu[01-02]\n"
                           "master_late 3s\nport 29555\nport_taken 29555\n"
                           "env EXTRA=1\nfault crash ranks=3 phase=barrier\nexpect invariants\n",
                           "x.scn", NULL, &s, err, sizeof err),
        0);
    ddp_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, "ddp_hpc", 0, &p), 0);
    CU_ASSERT_EQUAL(p->nnodes, 2);
    CU_ASSERT_STRING_EQUAL(p->nodes[1].host, "gpu02");
    CU_ASSERT_EQUAL_FATAL(p->nprocs, 5); /* a port holder + 4 srun tasks */
    CU_ASSERT_EQUAL(p->procs[0].kind, DDP_PLAN_PORT_HOLDER);
    CU_ASSERT_EQUAL(p->procs[0].port, 29555);
    CU_ASSERT_EQUAL(p->expected_world, 4);
    for (int r = 0; r < 4; r++) {
        const ddp_plan_proc_t *x = &p->procs[1 + r];
        CU_ASSERT_EQUAL(x->kind, DDP_PLAN_TRAINER);
        CU_ASSERT_EQUAL(x->rank, r);
        CU_ASSERT_EQUAL(x->node, r / 2);
        CU_ASSERT_EQUAL(x->start_ns, (r < 2 ? 3 * DDP_NS_PER_S : 0) + DDP_NS_PER_MS);
        char want[16];
        snprintf(want, sizeof want, "%d", r);
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "SLURM_PROCID"), want);
        snprintf(want, sizeof want, "%d", r % 2);
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "SLURM_LOCALID"), want);
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "SLURM_NTASKS"), "4");
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "SLURM_NODELIST"), "gpu[01-02]");
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "MASTER_ADDR"), "gpu01");
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "MASTER_PORT"), "29555");
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "EXTRA"), "1");
    }
    CU_ASSERT_EQUAL_FATAL(p->nfaults, 1);
    CU_ASSERT_STRING_EQUAL(p->faults[0].ranks, "3");
    CU_ASSERT_STRING_EQUAL(p->faults[0].phase, "barrier");
    CU_ASSERT_STRING_EQUAL(p->entry.accelerator, "ddp_hpc");
    CU_ASSERT_EQUAL(p->entry.num_processes, 2);
    ddp_plan_free(p);
    ddp_scenario_free(s);
}

/* second_job: the same launch again, named j2.*, late by start=, on its
 * port, with no second port holder; the plan file keeps each process's job. */
static void test_plan_second_job(void)
{
    char err[512];
    ddp_scenario_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(
        ddp_scenario_parse("scenario \"x\"\nnodes 2\ndevices 2\nport_taken\n"
                           "second_job start=5s port=29501\nexpect invariants\n",
                           "x.scn", NULL, &s, err, sizeof err),
        0);
    ddp_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, "ddp_hpc", 0, &p), 0);
    CU_ASSERT_EQUAL_FATAL(p->nprocs, 9); /* a port holder + 2 x 4 srun tasks */
    CU_ASSERT_EQUAL(p->procs[0].kind, DDP_PLAN_PORT_HOLDER);
    for (int i = 1; i < 9; i++) {
        const ddp_plan_proc_t *x = &p->procs[i];
        int j2 = i >= 5;
        CU_ASSERT_EQUAL(x->job, j2);
        CU_ASSERT_EQUAL(x->rank, (i - 1) % 4);
        CU_ASSERT_EQUAL(x->start_ns, (j2 ? 5 * DDP_NS_PER_S : 0) + DDP_NS_PER_MS);
        CU_ASSERT_STRING_EQUAL(ddp_env_get(x->env, "MASTER_PORT"), j2 ? "29501" : "29500");
        CU_ASSERT_EQUAL(strncmp(x->name, "j2.", 3) == 0, j2);
    }
    char path[] = "/tmp/ddpsim-plan-job-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_TRUE_FATAL(fd >= 0);
    FILE *f = fdopen(fd, "w");
    CU_ASSERT_EQUAL(ddp_plan_write(p, f), 0);
    fclose(f);
    ddp_plan_t *q = NULL;
    ddp_sys_t *sys = ddp_test_sys();
    CU_ASSERT_EQUAL_FATAL(ddp_plan_read(sys, path, &q), 0);
    ddp_sys_free(sys);
    for (int i = 0; i < 9; i++)
        CU_ASSERT_EQUAL(q->procs[i].job, p->procs[i].job);
    remove(path);
    ddp_plan_free(q);
    ddp_plan_free(p);
    ddp_scenario_free(s);
}

/* env and unset lines, job-wide and per node, come after the launcher's
 * variables: a set wins, an unset removes the launcher's own value. */
/* v is set, to want (a missing variable fails the check, not the run). */
static int is(const char *v, const char *want) { return v && !strcmp(v, want); }

static void test_plan_env_lines(void)
{
    char err[512];
    ddp_scenario_t *s = NULL;
    CU_ASSERT_EQUAL_FATAL(
        ddp_scenario_parse("scenario \"x\"\nnodes 2\ndevices 2\n"
                           "env SLURM_JOB_NAME=mine\nenv node=1 ONLY_ONE=1\n"
                           "unset SLURM_JOB_ID\nunset node=0 SLURM_NNODES\n"
                           "expect invariants\n",
                           "x.scn", NULL, &s, err, sizeof err),
        0);
    ddp_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_scenario_plan(s, "ddp_hpc", 0, &p), 0);
    CU_ASSERT_EQUAL_FATAL(p->nprocs, 4);
    for (int r = 0; r < 4; r++) {
        const ddp_env_t *e = p->procs[r].env;
        int node = p->procs[r].node;
        CU_ASSERT_TRUE(is(ddp_env_get(e, "SLURM_JOB_NAME"), "mine"));
        CU_ASSERT_PTR_NULL(ddp_env_get(e, "SLURM_JOB_ID"));
        if (node == 0) {
            CU_ASSERT_PTR_NULL(ddp_env_get(e, "SLURM_NNODES"));
            CU_ASSERT_PTR_NULL(ddp_env_get(e, "ONLY_ONE"));
        } else {
            CU_ASSERT_TRUE(is(ddp_env_get(e, "SLURM_NNODES"), "2"));
            CU_ASSERT_TRUE(is(ddp_env_get(e, "ONLY_ONE"), "1"));
        }
    }
    ddp_plan_free(p);
    ddp_scenario_free(s);
}

static void test_read_errors(void)
{
    ddp_sys_t *sys = ddp_test_sys();
    char path[] = "/tmp/ddpsim-plan-bad-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_TRUE_FATAL(fd >= 0);
    close(fd);
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"something else\n", ":1: expected \"ddpsim-plan 1\""},
        {"ddpsim-plan 1\nname \"x\"\n", ":2: expected a last line \"end\""},
        {"ddpsim-plan 1\nbogus 1\nend\n", ":2: expected a plan statement"},
        {"ddpsim-plan 1\nenv \"A\" \"B\"\nend\n", ":2: expected a proc line before env"},
        {"ddpsim-plan 1\nnode \"a\" \"10.0.0.1\"\nproc trainer node=7 rank=0 start=0 port=0 "
         "job=0 name=\"p\"\nend\n",
         "process p on node 7"},
        /* a fault line's errors are the fault parser's own, at plan:LINE:COL */
        {"ddpsim-plan 1\nfault line=1 task=-1 fault point point=no/such\nend\n",
         ":2:40: expected the name of a fault point"},
        {"ddpsim-plan 1\nfault line=1 task=-1 fault bogus\nend\n",
         ":2:28: expected a fault kind"},
        {"ddpsim-plan 1\nfault line=1 task=-1 late ranks=0\nend\n", ":2:34: expected by="},
        {"ddpsim-plan 1\nfault line=1 task=-1 fault crash ranks=9\nend\n",
         ":2:40: expected ranks 0..0 (the plan's 1 node x 1 rank per node), got rank 9"},
        {"ddpsim-plan 1\nfault line=1 task=-1 fault  crash \"ranks=1\nend\n",
         ":2:35: expected a closing '\"'"},
        {"ddpsim-plan 1\nname \"unterminated\nend\n", ":2: expected a closing quote"},
        {"ddpsim-plan 1\nnode \"a\" \"10.0.0.1\"\nproc trainer node=0 rank=0 start=0 port=0 "
         "job=2 name=\"p\"\nend\n",
         ":3: expected job=0 or job=1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CU_ASSERT_EQUAL(write_file(path, cases[i].text), 0);
        ddp_plan_t *p = NULL;
        CU_ASSERT_NOT_EQUAL(ddp_plan_read(sys, path, &p), 0);
        CU_ASSERT_PTR_NULL(p);
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_err_message(), cases[i].want));
        if (!strstr(ddp_err_message(), cases[i].want))
            printf("\n  case %zu: %s\n", i, ddp_err_message());
    }
    remove(path);
    ddp_sys_free(sys);
}

DDP_SUITE("plan", NULL, NULL, {"plan file round trip over the corpus", test_round_trip_corpus},
          {"env and unset lines: job-wide and per node, after the launcher", test_plan_env_lines},
          {"a plan holds what the launcher gives", test_plan_contents},
          {"second_job: the same launch again, judged as job 2", test_plan_second_job},
          {"plan file errors name the file and line (a fault line's, the column)", test_read_errors})
