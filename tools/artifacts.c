/* tools/artifacts.c — `ddpsim run --artifacts DIR`: a folder per failing
 * or vacuous run (tools/artifacts.h). */
#include "artifacts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmds.h"
#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/sys.h"
#include "runtrace.h"

const char *ddp_art_name(const ddp_art_t *a, const ddp_shard_row_t *j, char *buf, size_t n)
{
    const char *b = strrchr(j->path, '/');
    b = b ? b + 1 : j->path;
    size_t len = strlen(b);
    if (len > 4 && !strcmp(b + len - 4, ".scn"))
        len -= 4;
    snprintf(buf, n, "%.*s.%s%s", (int)len, b, j->accel, a->netns ? ".netns" : "");
    return buf;
}

int ddp_art_check(const ddp_art_t *a, const ddp_shard_row_t *jobs, int njobs, const char *cmd)
{
    for (int i = 0; a->dir && i < njobs; i++) {
        char name[400], other[400], path[1200];
        ddp_art_name(a, &jobs[i], name, sizeof name);
        for (int k = 0; k < i; k++)
            if (!strcmp(ddp_art_name(a, &jobs[k], other, sizeof other), name)) {
                fprintf(stderr, "ddpsim %s: --artifacts: %s and %s would share the folder "
                                "%s; expected scenario files with distinct names\n",
                        cmd, jobs[k].path, jobs[i].path, name);
                return 2;
            }
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", a->dir, name);
        if (lstat(path, &sb) == 0) {
            fprintf(stderr, "ddpsim %s: --artifacts: %s exists (a run's folder is never "
                            "replaced); expected a DIR without it (remove it, or choose "
                            "another DIR)\n", cmd, path);
            return 2;
        }
    }
    return 0;
}

int ddp_art_keeps(const ddp_art_t *a, const ddp_shard_row_t *j)
{
    if (!a->dir || !strncmp(j->r.why, "not run", 7))
        return 0;
    return a->all || j->r.vacuous || (!j->r.pass && !j->r.skipped);
}

/* ---- the files ---- */

static int fill_text(FILE *f, void *arg)
{
    fputs(arg, f);
    return 0;
}

static int put(const char *dir, const char *name, const char *what, const char *text)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return ddp_out_write(path, what, fill_text, (void *)text);
}

/* s, shell-quoted when it needs it. */
static const char *sh_quote(const char *s, char *buf, size_t n)
{
    if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                        "0123456789_./-+=:,@") == strlen(s)) {
        snprintf(buf, n, "%s", s);
        return buf;
    }
    size_t o = 0;
    buf[o++] = '\'';
    for (; *s && o + 6 < n; s++) {
        if (*s == '\'') {
            memcpy(buf + o, "'\\''", 4);
            o += 4;
        } else {
            buf[o++] = *s;
        }
    }
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

/* Per-rank logs of a simulated run: each rank's log lines (its tasks and
 * their threads) in rankN.log, then its processes' outcome lines (of
 * report: "  TASK rank N ..."); the other tasks' (launchers) in other.log. */
static int put_rank_logs(const char *dir, const char *trace, const char *report)
{
    rt_trace_t tr;
    if (rt_parse(trace, &tr))
        return ddp_err_set(-12, "out of memory reading the trace");
    int rc = 0, maxrank = -1;
    for (int i = 0; i < tr.ntasks; i++)
        if (tr.tasks[i].seen && tr.tasks[i].rank > maxrank)
            maxrank = tr.tasks[i].rank;
    for (int r = -1; rc == 0 && r <= maxrank; r++) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (!m) {
            rc = ddp_err_set(-12, "out of memory for a rank's log");
            break;
        }
        int any = 0;
        for (int i = 0; i < tr.nlines; i++) {
            const rt_line_t *l = &tr.lines[i];
            if (strcmp(l->kind, "log") || l->task < 0 || tr.tasks[l->task].rank != r)
                continue;
            char msg[1024];
            fprintf(m, "%14.6f s  %-16s %s\n", (double)l->t / 1e9, tr.tasks[l->task].name,
                    rt_str(l, "msg", msg, sizeof msg));
            any = 1;
        }
        for (const char *p = report; r >= 0 && p && *p;) {
            const char *nl = strchr(p, '\n');
            int ll = nl ? (int)(nl - p) : (int)strlen(p), rank;
            if (sscanf(p, " %*s rank %d", &rank) == 1 && rank == r) {
                fprintf(m, "outcome: %.*s\n", ll - (int)strspn(p, " "), p + strspn(p, " "));
                any = 1;
            }
            p = nl ? nl + 1 : p + ll;
        }
        fclose(m);
        char name[32];
        snprintf(name, sizeof name, r < 0 ? "other.log" : "rank%d.log", r);
        if (any)
            rc = put(dir, name, "a rank's log", text);
        free(text);
    }
    rt_free(&tr);
    return rc;
}

static int fill_chrome_file(const char *dir, const char *trace)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/trace.chrome.json", dir);
    return ddp_tool_write_chrome(trace, path);
}

/* The run's files into dir (its temporary twin); final is where it will
 * be (the replay command names it). */
static int fill_folder(const ddp_art_t *a, const ddp_shard_row_t *j, const char *trace,
                       const char *dir, const char *final, const char *name)
{
    char path[1400], q[1400];
    uint64_t seed = a->seed ? a->seed : j->s->seed;
    /* The scenario as run: includes inlined, --exec and --plugin applied,
     * the seed it ran with. */
    ddp_scenario_t *copy = malloc(sizeof *copy);
    if (!copy)
        return ddp_err_set(-12, "out of memory");
    memcpy(copy, j->s, sizeof *copy);
    copy->seed = seed;
    char *scn = ddp_scenario_text(copy);
    free(copy); /* a shallow copy: its pointers are j->s's */
    if (!scn)
        return -1;
    int rc = put(dir, "scenario.scn", "the scenario", scn);
    free(scn);
    char text[8192];
    snprintf(text, sizeof text, "%llu\n", (unsigned long long)seed);
    rc = rc ? rc : put(dir, "seed", "the seed", text);
    /* The replay command (explore's form: FILE --seed N [--plugin LIB]). */
    snprintf(path, sizeof path, "%s/scenario.scn", final);
    char self[600];
    int off = snprintf(text, sizeof text, "%s replay ", sh_quote(ddp_tool_self, self, sizeof self));
    off += snprintf(text + off, sizeof text - (size_t)off, "%s --accelerator %s --seed %llu",
                    sh_quote(path, q, sizeof q), j->accel, (unsigned long long)seed);
    if (j->s->plugin_lib[0])
        off += snprintf(text + off, sizeof text - (size_t)off, " --plugin %s",
                        sh_quote(j->s->plugin_lib, q, sizeof q));
    snprintf(text + off, sizeof text - (size_t)off, "%s\n",
             !a->real ? "" : a->netns ? " --netns" : " --real");
    rc = rc ? rc : put(dir, "replay", "the replay command", text);
    /* The results record: a result file of this run alone. */
    ddp_shard_file_t f = {.shard = {1, 1}, .total = 1, .runs = 1, .files = 1,
                          .wall_s = j->r.wall_s, .rows = (ddp_shard_row_t *)j, .nrows = 1,
                          .cap = 1};
    snprintf(f.kind, sizeof f.kind, "run");
    snprintf(f.sweep, sizeof f.sweep, "artifact %s", name);
    snprintf(path, sizeof path, "%s/result.json", dir);
    rc = rc ? rc : ddp_shard_write(&f, path);
    rc = rc ? rc : put(dir, "ranks.txt", "the per-process outcomes",
                       j->report[0] ? j->report : "(no process ran)\n");
    if (trace) {
        rc = rc ? rc : put(dir, "trace.jsonl", "the trace", trace);
        rc = rc ? rc : fill_chrome_file(dir, trace);
        rc = rc ? rc : put_rank_logs(dir, trace, j->report);
    }
    snprintf(text, sizeof text,
             "A run of ddpsim run --artifacts: %s on %s, seed %llu (%s).\n\n"
             "scenario.scn       the scenario as run (includes inlined, --exec and\n"
             "                   --plugin applied, its seed)\n"
             "seed               the seed\n"
             "replay             the command that runs it again\n"
             "result.json        its record, as ddpsim run --results writes it\n"
             "ranks.txt          every process's outcome\n%s"
             "\nddpsim report %s writes an HTML page of it (a timeline of its ranks).\n",
             j->path, j->accel, (unsigned long long)seed,
             j->r.skipped ? "skipped" : j->r.pass ? "passed" : j->r.vacuous ? "vacuous" : "failed",
             trace ? "trace.jsonl        the simulator's trace (JSON lines)\n"
                     "trace.chrome.json  the same for Perfetto or chrome://tracing\n"
                     "rankN.log          each rank's log lines and outcome (other.log: the\n"
                     "                   launchers' log lines)\n"
                   : j->s->exec[0]
                   ? "rankN.out, .err    each foreign rank's stdout and stderr\n"
                     "not here: a trace and per-rank logs of ddpsim's own: a real run is\n"
                     "not traced (the simulator's trace: the replay command without\n"
                     "--real/--netns, and --trace)\n"
                   : "not here: a trace and per-rank logs: a real run is not traced, and\n"
                     "its ddpsim processes log to the runner (ranks.txt has each one's\n"
                     "error); the simulator's trace: the replay command without\n"
                     "--real/--netns, and --trace\n",
             a->dir);
    rc = rc ? rc : put(dir, "README", "the folder's README", text);
    return rc;
}

/* Whole or not at all: the files go to a temporary twin of the folder
 * (taking over what a real run's runner put there: its ranks' outputs),
 * renamed to DIR/NAME at the end; a failure removes it. */
int ddp_art_write(const ddp_art_t *a, const ddp_shard_row_t *j, const char *trace)
{
    char name[400], final[1200], tmp[1300];
    snprintf(final, sizeof final, "%s/%s", a->dir, ddp_art_name(a, j, name, sizeof name));
    if (ddp_sys_make_dirs(a->dir) != 0 || ddp_tool_dir_begin(final, tmp, sizeof tmp) != 0)
        return -1;
    struct stat sb;
    if (lstat(final, &sb) == 0 && (rmdir(tmp) != 0 || rename(final, tmp) != 0)) {
        int e = errno;
        ddp_tool_dir_discard(tmp);
        return ddp_err_set(-e, "cannot take over the run's outputs in %s: %s", final,
                           strerror(e));
    }
    if (fill_folder(a, j, trace, tmp, final, name) != 0) {
        ddp_tool_dir_discard(tmp);
        return -1;
    }
    return ddp_tool_dir_commit(tmp, final);
}
