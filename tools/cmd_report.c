/* tools/cmd_report.c — `ddpsim report DIR`: static HTML pages of the run
 * folders `ddpsim run --artifacts DIR` keeps (tools/artifacts.h). Each page
 * opens with the run's first error, the faults that acted and the replay
 * command, then a timeline of the ranks; one index page lists them all.
 * Everything is inline (CSS, SVG, a few lines of script): no network. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmds.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/host.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"
#include "opt.h"
#include "runtrace.h"

static void report_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpsim report DIR\n\n"
            "Writes DIR/report/: a static HTML page per run folder of DIR (what `ddpsim\n"
            "run --artifacts DIR` keeps: NAME/result.json and beside it), NAME.html, and\n"
            "index.html over them all. A page opens with the run's first error (its\n"
            "rank, when, in which phase), the faults that acted and the replay command,\n"
            "then a timeline: one lane per rank grouped by node, with its phases, store\n"
            "connects, fault hits and errors on a time axis. No network is needed to\n"
            "view it. DIR/report must not exist: nothing is ever replaced (remove it\n"
            "to write the pages again).\n\n"
            "Exit status: 0 written, 2 bad input (DIR holds no run folder, DIR/report\n"
            "exists, a folder cannot be read; one line naming it).\n");
}

/* ---- HTML text ---- */

static const char *STYLE =
    "body{font:14px/1.4 system-ui,sans-serif;margin:12px 16px;color:#222}"
    "h1{font-size:18px;margin:0 0 4px}h2{font-size:15px;margin:14px 0 4px}"
    ".verdict-FAIL,.out-FAIL,.out-CRASHED{color:#b00;font-weight:bold}"
    ".verdict-ok,.out-ok{color:#080}.verdict-vacuous,.verdict-skip{color:#a60}"
    "#first-error{border-left:4px solid #b00;background:#fff3f3;padding:6px 10px;"
    "margin:6px 0}#first-error .msg{font-family:monospace;font-size:12px}"
    "#faults{margin:4px 0;padding-left:20px}"
    ".replay{display:flex;gap:6px;align-items:center;margin:6px 0}"
    "#replay{flex:1;margin:0;background:#f4f4f4;border:1px solid #ccc;padding:4px 6px;"
    "font-size:12px;white-space:pre-wrap;word-break:break-all}"
    "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;"
    "padding:2px 6px;text-align:left;vertical-align:top}"
    "td.msg{font-family:monospace;max-width:700px}"
    "svg text{font:11px system-ui,sans-serif}.legend span{margin-right:12px}";

static void page_head(FILE *f, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
          "<title>", f);
    ddp_tool_xml_text(f, title);
    fprintf(f, "</title><style>%s</style></head>\n<body>\n", STYLE);
}

/* ---- one run folder ---- */

typedef struct rank_row {
    char task[64], outcome[16], msg[DDP_ERR_MSG_MAX];
    int rank, node;
    double end_s;
} rank_row_t;

typedef struct run {
    char name[256], dir[1200];
    ddp_shard_file_t rf; /* result.json: one row */
    const ddp_shard_row_t *row;
    char *trace_text, *replay;
    rt_trace_t tr;
    int have_trace;
    ddp_scenario_t *s;  /* scenario.scn (NULL: it did not load) */
    char scn_err[512];
    char *scn_text;
    rank_row_t *ranks;  /* the report's process lines */
    int nranks;
} run_t;

static char *read_text(const char *dir, const char *name)
{
    char path[1400], *data = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (ddp_sys_read_host_file(path, &data, NULL) != 0)
        return NULL;
    return data;
}

/* The report's process lines: "  TASK rank N node M OUTCOME ... ended T s  MSG". */
static void parse_ranks(run_t *u)
{
    const char *rep = u->row->report;
    for (const char *p = rep; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        rank_row_t rr = {0};
        char line[8192];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        if (sscanf(line, " %63s rank %d node %d %15s", rr.task, &rr.rank, &rr.node,
                   rr.outcome) == 4) {
            const char *e = strstr(line, " ended ");
            if (e && sscanf(e, " ended %lf s", &rr.end_s) == 1) {
                const char *m = strstr(e, " s  ");
                snprintf(rr.msg, sizeof rr.msg, "%s", m ? m + 4 : "");
            }
            rank_row_t *nr = realloc(u->ranks, (size_t)(u->nranks + 1) * sizeof *nr);
            if (nr) {
                u->ranks = nr;
                u->ranks[u->nranks++] = rr;
            }
        }
        p = nl ? nl + 1 : p + len;
    }
}

/* Pass 1: the run's record (what can be bad input). */
static int load_result(const char *dir, const char *name, run_t *u)
{
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
    snprintf(u->dir, sizeof u->dir, "%s/%s", dir, name);
    char path[1400];
    snprintf(path, sizeof path, "%s/result.json", u->dir);
    if (ddp_shard_read(path, &u->rf) != 0)
        return -1;
    if (u->rf.nrows != 1 || strcmp(u->rf.kind, "run"))
        return ddp_err_set(DDP_ECONFIG, "%s holds %d run(s) of kind %s; expected the one "
                           "run of an --artifacts folder", path, u->rf.nrows, u->rf.kind);
    u->row = &u->rf.rows[0];
    parse_ranks(u);
    return 0;
}

/* Pass 2, one run at a time: what its page shows beside the record
 * (each piece may be missing: the page says so). */
static void load_details(run_t *u)
{
    char path[1400];
    u->replay = read_text(u->dir, "replay");
    if (u->replay)
        u->replay[strcspn(u->replay, "\n")] = '\0';
    u->trace_text = read_text(u->dir, "trace.jsonl");
    if (u->trace_text && rt_parse(u->trace_text, &u->tr) == 0)
        u->have_trace = 1;
    snprintf(path, sizeof path, "%s/scenario.scn", u->dir);
    u->scn_text = read_text(u->dir, "scenario.scn");
    if (ddp_scenario_load(path, &u->s, u->scn_err, sizeof u->scn_err) != 0)
        u->s = NULL;
}

static void free_details(run_t *u)
{
    free(u->trace_text);
    free(u->replay);
    free(u->scn_text);
    rt_free(&u->tr);
    if (u->s)
        ddp_scenario_free(u->s);
    u->trace_text = u->replay = u->scn_text = NULL;
    u->have_trace = 0;
    u->s = NULL;
}

static void free_run(run_t *u)
{
    free_details(u);
    ddp_shard_file_free(&u->rf);
    free(u->ranks);
}

static const char *verdict(const ddp_scn_result_t *r)
{
    return r->skipped ? "skip" : r->pass ? "ok" : r->vacuous ? "vacuous" : "FAIL";
}

/* The phase task id was in at time t ("" none). */
static const char *phase_at(const rt_trace_t *tr, int id, long long t, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < tr->nlines && tr->lines[i].t <= t; i++)
        if (tr->lines[i].task == id && !strcmp(tr->lines[i].kind, "phase"))
            rt_str(&tr->lines[i], "phase", buf, n);
    return buf;
}

/* The lane task of a rank (-1 none). */
static int lane_of(const rt_trace_t *tr, int rank)
{
    for (int i = 0; i < tr->ntasks; i++)
        if (tr->tasks[i].lane && tr->tasks[i].rank == rank)
            return i;
    return -1;
}

/* The end of a task: its exit line's time (or the trace's end). */
static long long end_of(const rt_trace_t *tr, int id, int *crashed, int *rc)
{
    *crashed = 0;
    *rc = 0;
    for (int i = 0; i < tr->nlines; i++)
        if (tr->lines[i].task == id && !strcmp(tr->lines[i].kind, "exit")) {
            *crashed = rt_int(&tr->lines[i], "state", 0) == 3;
            *rc = (int)rt_int(&tr->lines[i], "rc", 0);
            return tr->lines[i].t;
        }
    return tr->end;
}

/* A rank's phase when it failed: its message's "rank N, PHASE: " prefix
 * (the plugin names the phase it failed in) or a real run's "last phase
 * PHASE: ", else the trace's phase at its end. */
static const char *rank_phase(const run_t *u, const rank_row_t *rr, char *buf, size_t n)
{
    buf[0] = '\0';
    int off = 0;
    const char *lp = strstr(rr->msg, ", last phase ");
    if (lp) {
        lp += strlen(", last phase ");
        size_t k = strcspn(lp, ":");
        if (lp[k] == ':' && k < n) {
            snprintf(buf, n, "%.*s", (int)k, lp);
            return buf;
        }
    }
    if (sscanf(rr->msg, "rank %*d, %n", &off) >= 0 && off > 0) {
        size_t k = strcspn(rr->msg + off, ":");
        if (rr->msg[off + k] == ':' && k < n) {
            snprintf(buf, n, "%.*s", (int)k, rr->msg + off);
            return buf;
        }
    }
    int id = u->have_trace ? lane_of(&u->tr, rr->rank) : -1;
    if (id >= 0) {
        int cr, rc;
        return phase_at(&u->tr, id, end_of(&u->tr, id, &cr, &rc), buf, n);
    }
    return buf;
}

/* The process whose message is the run's first error (the result file
 * keeps the message, the report each process's). */
static const rank_row_t *first_row(const run_t *u)
{
    const char *fe = u->row->r.first_error;
    for (int i = 0; *fe && i < u->nranks; i++)
        if (strstr(u->ranks[i].msg, fe))
            return &u->ranks[i];
    /* a rank a fault killed: the judge's words ("rank 5, barrier: killed
     * ..."), not the rank's own; the rank they name */
    int rk = -1;
    if (sscanf(fe, "rank %d,", &rk) == 1)
        for (int i = 0; i < u->nranks; i++)
            if (u->ranks[i].rank == rk)
                return &u->ranks[i];
    return NULL;
}

/* What the report says fault i acted on: its i-th "  fault KIND (line L)
 * TEXT" line's TEXT ("" none). */
static const char *fault_hits(const run_t *u, int i, char *buf, size_t n)
{
    buf[0] = '\0';
    int k = 0;
    for (const char *p = u->row->report; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (!strncmp(p, "  fault ", 8) && k++ == i) {
            const char *t = memmem(p, len, ")  ", 3);
            if (t)
                snprintf(buf, n, "%.*s", (int)(len - (size_t)(t + 3 - p)), t + 3);
            break;
        }
        p = nl ? nl + 1 : p + len;
    }
    return buf;
}

static const rank_row_t *rank_row(const run_t *u, int rank)
{
    for (int i = 0; i < u->nranks; i++)
        if (u->ranks[i].rank == rank)
            return &u->ranks[i];
    return NULL;
}

/* The faults of the scenario, with what each acted on. */
static void fault_text(const run_t *u, int i, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!u->s || !u->scn_text)
        return;
    int want = u->s->fault_line[i], line = 1;
    for (const char *p = u->scn_text; *p; line++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (line == want) {
            snprintf(buf, n, "%.*s", (int)len, p);
            return;
        }
        p = nl ? nl + 1 : p + len;
    }
}

/* The ranks fault i hit, from the trace (the first 8). */
static void write_fault_ranks(FILE *f, const run_t *u, int i)
{
    int shown = 0;
    for (int k = 0; u->have_trace && k < u->tr.nlines && shown < 8; k++) {
        const rt_line_t *l = &u->tr.lines[k];
        char fk[32], ph[64];
        if (strcmp(l->kind, "fault") || l->task < 0 ||
            strcmp(rt_str(l, "fault", fk, sizeof fk),
                   ddp_fault_kind_name(u->s->faults[i].kind)))
            continue;
        const rt_task_t *t = &u->tr.tasks[l->task];
        fprintf(f, "%s%s %d at %.6f s (phase ", shown++ ? "; " : ": ",
                t->rank >= 0 ? "rank" : "task", t->rank >= 0 ? t->rank : l->task,
                (double)l->t / 1e9);
        ddp_tool_xml_text(f, phase_at(&u->tr, l->task, l->t, ph, sizeof ph)[0] ? ph : "none");
        fputs(")", f);
    }
}

/* The first error: its rank, node, when, phase, class, message. */
static void write_first_error(FILE *f, const run_t *u)
{
    const ddp_scn_result_t *r = &u->row->r;
    fputs("<div id=\"first-error\">", f);
    const rank_row_t *fr = first_row(u);
    if (!r->first_error[0]) {
        fputs("<b>No error</b>: no process failed", f);
    } else if (fr) {
        char ph[64];
        rank_phase(u, fr, ph, sizeof ph);
        fprintf(f, "<b>First error: rank <span id=\"fe-rank\">%d</span></b> (node %d, "
                   "task %s) <b>%s</b> at <b><span id=\"fe-time\">%.6f</span> s</b>"
                   " in phase <b><span id=\"fe-phase\">", fr->rank, fr->node, fr->task,
                fr->outcome, fr->end_s);
        ddp_tool_xml_text(f, ph[0] ? ph : "(none)");
        fprintf(f, "</span></b>, %s", r->first_code ? ddp_scn_error_class(r->first_code)
                                                   : "error");
    } else {
        /* a launcher's: the rank that failed first in time beside it */
        const rank_row_t *e = NULL;
        for (int i = 0; i < u->nranks; i++)
            if (u->ranks[i].rank >= 0 && strcmp(u->ranks[i].outcome, "ok") &&
                (!e || u->ranks[i].end_s < e->end_s))
                e = &u->ranks[i];
        fprintf(f, "<b>First error</b> (of a process that is no rank)");
        if (e) {
            char ph[64];
            fprintf(f, "; the first rank to fail: <b>rank %d</b> (node %d) <b>%s</b> at "
                       "<b>%.6f s</b> in phase <b>", e->rank, e->node, e->outcome, e->end_s);
            ddp_tool_xml_text(f, rank_phase(u, e, ph, sizeof ph)[0] ? ph : "(none)");
            fputs("</b>", f);
        }
    }
    if (r->first_error[0]) {
        fputs("<div class=\"msg\">", f);
        ddp_tool_xml_text(f, r->first_error);
        fputs("</div>", f);
        if (strchr(r->classes, ',')) {
            fputs("<div>failures: ", f);
            ddp_tool_xml_text(f, r->classes);
            fputs("</div>", f);
        }
    }
    fputs("</div>\n", f);
}

/* The faults, with their hits: what acted, and on whom. */
static void write_faults(FILE *f, const run_t *u)
{
    int nf = u->s ? u->s->nfaults : 0;
    fprintf(f, "<h2>Faults</h2>\n<ul id=\"faults\">\n");
    if (!u->s)
        fprintf(f, "<li>scenario.scn did not load here: %s</li>\n", u->scn_err);
    else if (!nf)
        fputs("<li>none</li>\n", f);
    for (int i = 0; i < nf; i++) {
        char text[512];
        fault_text(u, i, text, sizeof text);
        char hits[256];
        fprintf(f, "<li class=\"fault\">fault %d (scenario.scn line %d): <code>", i + 1,
                u->s->fault_line[i]);
        ddp_tool_xml_text(f, text);
        fputs("</code>: <b>", f);
        ddp_tool_xml_text(f, fault_hits(u, i, hits, sizeof hits)[0] ? hits : "(hits not reported)");
        fputs("</b>", f);
        write_fault_ranks(f, u, i);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
}

/* The replay command, copyable. */
static void write_replay(FILE *f, const run_t *u)
{
    fputs("<h2>Replay</h2>\n<div class=\"replay\"><pre id=\"replay\">", f);
    ddp_tool_xml_text(f, u->replay ? u->replay : "(no replay file in the folder)");
    fputs("</pre><button type=\"button\" onclick=\"copyReplay(this)\">Copy</button></div>\n"
          "<script>function copyReplay(b){var t=document.getElementById('replay')"
          ".textContent;if(navigator.clipboard){navigator.clipboard.writeText(t)}"
          "var r=document.createRange();r.selectNodeContents(document.getElementById("
          "'replay'));var s=window.getSelection();s.removeAllRanges();s.addRange(r);"
          "b.textContent='Copied'}</script>\n", f);
}

static void write_header(FILE *f, const run_t *u)
{
    const ddp_shard_row_t *j = u->row;
    const ddp_scn_result_t *r = &j->r;
    fputs("<h1>", f);
    ddp_tool_xml_text(f, u->name);
    fprintf(f, ": <span id=\"verdict\" class=\"verdict-%s\">%s</span></h1>\n<p>", verdict(r),
            verdict(r));
    ddp_tool_xml_text(f, j->path);
    fprintf(f, " on <b>%s</b>: &#8220;", j->accel);
    ddp_tool_xml_text(f, j->title);
    fprintf(f, "&#8221;; expected %s, actual %s; %d rank(s), %d ok, %d failed, %d crashed;"
               " %s %.6f s</p>\n", j->expected[0] ? j->expected : "-",
            j->actual[0] ? j->actual : "-", r->ranks, r->ok, r->failed, r->crashed,
            u->have_trace ? "virtual end" : "ended after", (double)r->virtual_ns / 1e9);
    if (!r->pass && r->why[0]) {
        fputs("<p id=\"why\"><b>why:</b> ", f);
        ddp_tool_xml_text(f, r->why);
        fputs("</p>\n", f);
    }
    write_first_error(f, u);
    write_faults(f, u);
    write_replay(f, u);
}

/* ---- the timeline ---- */

#define TL_LEFT 170
#define TL_WIDTH 900
#define TL_LANE 18
#define TL_NODE 18

typedef struct axis {
    double t0, total; /* ns; x = log1p(t/t0)/log1p(total/t0) */
} axis_t;

static double ax(const axis_t *a, long long t)
{
    double v = t < 0 ? 0 : (double)t;
    return TL_LEFT + TL_WIDTH * log1p(v / a->t0) / log1p(a->total / a->t0);
}

static const char *fmt_time(double ns, char *buf, size_t n)
{
    if (ns >= 1e9)
        snprintf(buf, n, "%g s", ns / 1e9);
    else if (ns >= 1e6)
        snprintf(buf, n, "%g ms", ns / 1e6);
    else if (ns >= 1e3)
        snprintf(buf, n, "%g us", ns / 1e3);
    else
        snprintf(buf, n, "%g ns", ns);
    return buf;
}

/* A phase's fill: a fixed colour per name. */
static const char *phase_color(const char *ph)
{
    static const char *pal[] = {"#8ecae6", "#a8dadc", "#b5e48c", "#ffd166", "#cdb4db",
                                "#f4a261", "#90be6d", "#bde0fe", "#e9c46a", "#caffbf"};
    unsigned h = 2166136261u;
    for (; *ph; ph++)
        h = (h ^ (unsigned char)*ph) * 16777619u;
    return pal[h % (sizeof pal / sizeof pal[0])];
}

static int store_port(const run_t *u)
{
    return u->s && u->s->port ? u->s->port : 29500;
}

static void lane_events(FILE *f, const run_t *u, const axis_t *a, int id, double y)
{
    const rt_trace_t *tr = &u->tr;
    char ph[64] = "", buf[1024], when[32];
    long long since = 0;
    int open = 0;
    char sport[16];
    snprintf(sport, sizeof sport, ":%d", store_port(u));
    for (int i = 0; i <= tr->nlines; i++) {
        const rt_line_t *l = i < tr->nlines ? &tr->lines[i] : NULL;
        if (l && l->task != id)
            continue;
        int closes = !l || !strcmp(l->kind, "phase") || !strcmp(l->kind, "exit");
        if (open && closes) {
            long long end = l ? l->t : tr->end;
            double x0 = ax(a, since), x1 = ax(a, end);
            fprintf(f, "<rect class=\"phase\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                       "height=\"%d\" fill=\"%s\"><title>", x0, y + 2, x1 - x0 < 1 ? 1 : x1 - x0,
                    TL_LANE - 4, phase_color(ph));
            ddp_tool_xml_text(f, ph);
            fprintf(f, " %.6f s to %.6f s</title></rect>", (double)since / 1e9,
                    (double)end / 1e9);
            if (x1 - x0 > 7.0 * (double)strlen(ph)) {
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x0 + 3, y + TL_LANE - 5);
                ddp_tool_xml_text(f, ph);
                fputs("</text>", f);
            }
            open = 0;
        }
        if (!l)
            break;
        double x = ax(a, l->t);
        if (!strcmp(l->kind, "phase")) {
            rt_str(l, "phase", ph, sizeof ph);
            since = l->t;
            open = 1;
        } else if (!strncmp(l->kind, "connect", 7)) {
            rt_str(l, "to", buf, sizeof buf);
            size_t bl = strlen(buf), pl = strlen(sport);
            if (bl < pl || strcmp(buf + bl - pl, sport))
                continue; /* not the store */
            const char *col = !strcmp(l->kind, "connected_to") ? "#080"
                              : !strcmp(l->kind, "connect") ? "#666" : "#d00";
            fprintf(f, "<line class=\"store\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" "
                       "y2=\"%.1f\" stroke=\"%s\"><title>store %s %s at %.6f s</title></line>",
                    x, x, y + TL_LANE - 7, y + TL_LANE - 1, col, l->kind, buf,
                    (double)l->t / 1e9);
        } else if (!strcmp(l->kind, "fault")) {
            fprintf(f, "<path class=\"hit\" d=\"M%.1f %.1fl5 6l-5 6l-5 -6z\" fill=\"#f80\" "
                       "stroke=\"#000\"><title>fault %s at %.6f s (phase ", x, y + 3,
                    rt_str(l, "fault", buf, sizeof buf), (double)l->t / 1e9);
            ddp_tool_xml_text(f, ph);
            fputs(")</title></path>", f);
        } else if (!strcmp(l->kind, "log") && rt_int(l, "level", 1) == 0) {
            fprintf(f, "<circle class=\"error\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#d00\">"
                       "<title>error at %s: ", x, y + TL_LANE / 2.0,
                    fmt_time((double)l->t, when, sizeof when));
            ddp_tool_xml_text(f, rt_str(l, "msg", buf, sizeof buf));
            fputs("</title></circle>", f);
        } else if (!strcmp(l->kind, "exit")) {
            int crashed = rt_int(l, "state", 0) == 3, rc = (int)rt_int(l, "rc", 0);
            fprintf(f, "<text class=\"exit\" x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s<title>%s "
                       "at %.6f s (rc %d)</title></text>", x + 2, y + TL_LANE - 5,
                    crashed || rc ? "#b00" : "#080", crashed ? "&#10005;" : rc ? "!" : "&#10003;",
                    crashed ? "crashed" : rc ? "failed" : "ended", (double)l->t / 1e9, rc);
        }
    }
}

/* The timeline's svg element and its time axis: 0, then each power of
 * ten past t0, and the end. */
static void svg_axis(FILE *f, const axis_t *ap, int top, int h)
{
    const axis_t a = *ap;
    fprintf(f, "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\">\n", TL_LEFT + TL_WIDTH + 40, h,
            TL_LEFT + TL_WIDTH + 40, h);
    char lab[32];
    fprintf(f, "<g class=\"axis\"><line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" "
               "stroke=\"#999\"/>", TL_LEFT, TL_LEFT + TL_WIDTH, top - 4, top - 4);
    double last = -100;
    for (double t = 0; t <= a.total; t = t == 0 ? pow(10, ceil(log10(a.t0))) : t * 10) {
        double x = ax(&a, (long long)t);
        if (x - last < 45)
            continue;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>", x, x, top - 4,
                h - 10, x, top - 10, fmt_time(t, lab, sizeof lab));
        last = x;
    }
    double xe = ax(&a, (long long)a.total);
    if (xe - last >= 45)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>", xe,
                top - 10, fmt_time(a.total, lab, sizeof lab));
    fputs("</g>\n", f);
}

static void write_timeline(FILE *f, const run_t *u)
{
    const rt_trace_t *tr = &u->tr;
    axis_t a = {.total = tr->end > 0 ? (double)tr->end : 1};
    a.t0 = a.total / 1e5 > 1e3 ? a.total / 1e5 : 1e3;
    int nlanes = 0, maxnode = -1;
    for (int i = 0; i < tr->ntasks; i++)
        if (tr->tasks[i].lane) {
            nlanes++;
            maxnode = tr->tasks[i].node > maxnode ? tr->tasks[i].node : maxnode;
        }
    int nnodes = 0;
    for (int n = 0; n <= maxnode; n++)
        for (int i = 0; i < tr->ntasks; i++)
            if (tr->tasks[i].lane && tr->tasks[i].node == n) {
                nnodes++;
                break;
            }
    int top = 30, h = top + nnodes * TL_NODE + nlanes * TL_LANE + 10;
    fprintf(f, "<h2>Timeline</h2>\n<p class=\"legend\">one lane per rank, grouped by node; "
               "time on a log scale from 0 to %.6f s. <span>&#9632; phases (colour per "
               "phase)</span><span style=\"color:#666\">| store connect</span><span "
               "style=\"color:#080\">| connected</span><span style=\"color:#d00\">| refused or "
               "failed</span><span style=\"color:#f80\">&#9670; fault hit</span><span "
               "style=\"color:#d00\">&#9679; error</span><span>&#10005; crashed, ! failed, "
               "&#10003; ended</span><span style=\"background:#fdd\">fault window</span>"
               "</p>\n", a.total / 1e9);
    svg_axis(f, &a, top, h);
    /* the fault windows of time-triggered faults (event-triggered ones
     * and phase crashes show as their hits) */
    for (int i = 0; u->s && i < u->s->nfaults; i++) {
        const ddp_fault_t *ft = &u->s->faults[i];
        if (ddp_fault_has_event(ft) || ft->phase)
            continue;
        long long e = ft->end_ns > 0 && ft->end_ns < (long long)a.total ? ft->end_ns
                                                                   : (long long)a.total;
        double x0 = ax(&a, ft->start_ns), x1 = ax(&a, e);
        char text[512];
        fault_text(u, i, text, sizeof text);
        fprintf(f, "<rect class=\"window\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                   "fill=\"#f00\" fill-opacity=\"0.10\"><title>fault %d window %.6f s to %s: ",
                x0, top - 4, x1 - x0 < 2 ? 2 : x1 - x0, h - top - 6, i + 1,
                (double)ft->start_ns / 1e9, ft->end_ns > 0 ? "its end" : "the run's end");
        ddp_tool_xml_text(f, text);
        fprintf(f, "</title></rect><text x=\"%.1f\" y=\"%d\" fill=\"#b00\">fault %d</text>\n",
                x0 + 2, h - 1, i + 1);
    }
    double y = top;
    for (int n = 0; n <= maxnode; n++) {
        int any = 0;
        for (int i = 0; i < tr->ntasks && !any; i++)
            any = tr->tasks[i].lane && tr->tasks[i].node == n;
        if (!any)
            continue;
        fprintf(f, "<g class=\"node\" data-node=\"%d\"><text x=\"4\" y=\"%.1f\" "
                   "font-weight=\"bold\">node %d (", n, y + 13, n);
        ddp_tool_xml_text(f, n < tr->nhosts ? tr->host[n] : "");
        fprintf(f, ")</text><line x1=\"0\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#ccc\"/>\n", TL_LEFT + TL_WIDTH, y + TL_NODE - 1, y + TL_NODE - 1);
        y += TL_NODE;
        /* the node's ranks in rank order */
        for (int want = 0;; want++) {
            int id = -1, more = 0;
            for (int i = 0; i < tr->ntasks; i++)
                if (tr->tasks[i].lane && tr->tasks[i].node == n) {
                    if (tr->tasks[i].rank == want)
                        id = i;
                    else if (tr->tasks[i].rank > want)
                        more = 1;
                }
            if (id < 0 && !more)
                break;
            if (id < 0)
                continue;
            const rank_row_t *rr = rank_row(u, want);
            int cr, rc;
            end_of(tr, id, &cr, &rc);
            const char *out = rr ? rr->outcome : cr ? "CRASHED" : rc ? "FAIL" : "ok";
            fprintf(f, "<g class=\"lane\" data-rank=\"%d\" data-node=\"%d\" "
                       "data-outcome=\"%s\"><text x=\"14\" y=\"%.1f\" class=\"out-%s\">rank "
                       "%d %s</text>", want, n, out, y + TL_LANE - 5, out, want, out);
            lane_events(f, u, &a, id, y);
            fputs("</g>\n", f);
            y += TL_LANE;
        }
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
}

/* A run without a trace (a real one): a lane per rank from its process
 * line, from 0 to its end, grouped by node. */
static void write_end_lanes(FILE *f, const run_t *u)
{
    axis_t a = {.total = 1};
    int maxnode = -1, nnodes = 0;
    for (int i = 0; i < u->nranks; i++) {
        a.total = u->ranks[i].end_s * 1e9 > a.total ? u->ranks[i].end_s * 1e9 : a.total;
        maxnode = u->ranks[i].node > maxnode ? u->ranks[i].node : maxnode;
    }
    a.t0 = a.total / 1e5 > 1e3 ? a.total / 1e5 : 1e3;
    for (int n = 0; n <= maxnode; n++)
        for (int i = 0; i < u->nranks; i++)
            if (u->ranks[i].node == n) {
                nnodes++;
                break;
            }
    int top = 30, h = top + nnodes * TL_NODE + u->nranks * TL_LANE + 10;
    fprintf(f, "<h2>Timeline</h2>\n<p id=\"no-timeline\" class=\"legend\">the folder has no "
               "trace (a real run is not traced; see its README): each rank's lane runs "
               "from 0 to its end (wall time, log scale), from its process line. The "
               "replay command without --real or --netns, with --trace, has the "
               "simulator's.</p>\n");
    svg_axis(f, &a, top, h);
    double y = top;
    for (int n = 0; n <= maxnode; n++) {
        int any = 0;
        for (int i = 0; i < u->nranks && !any; i++)
            any = u->ranks[i].node == n;
        if (!any)
            continue;
        fprintf(f, "<g class=\"node\" data-node=\"%d\"><text x=\"4\" y=\"%.1f\" "
                   "font-weight=\"bold\">node %d</text>\n", n, y + 13, n);
        y += TL_NODE;
        for (int i = 0; i < u->nranks; i++) {
            const rank_row_t *rr = &u->ranks[i];
            if (rr->node != n)
                continue;
            double x1 = ax(&a, (long long)(rr->end_s * 1e9));
            int bad = strcmp(rr->outcome, "ok") != 0;
            fprintf(f, "<g class=\"lane\" data-rank=\"%d\" data-node=\"%d\" "
                       "data-outcome=\"%s\"><text x=\"14\" y=\"%.1f\" class=\"out-%s\">rank "
                       "%d %s</text><rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
                       "fill=\"%s\"><title>", rr->rank, n, rr->outcome, y + TL_LANE - 5,
                    rr->outcome, rr->rank, rr->outcome, TL_LEFT, y + 2,
                    x1 - TL_LEFT < 1 ? 1 : x1 - TL_LEFT, TL_LANE - 4, bad ? "#f4b4b4" : "#b5e48c");
            ddp_tool_xml_text(f, rr->msg);
            fputs("</title></rect></g>\n", f);
            y += TL_LANE;
        }
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
}

static void write_ranks_table(FILE *f, const run_t *u)
{
    fputs("<h2>Processes</h2>\n<table id=\"ranks\"><tr><th>rank</th><th>node</th>"
          "<th>task</th><th>outcome</th><th>ended</th><th>phase</th><th>message</th></tr>\n",
          f);
    for (int i = 0; i < u->nranks; i++) {
        const rank_row_t *rr = &u->ranks[i];
        char ph[64];
        fprintf(f, "<tr><td>%d</td><td>%d</td><td>", rr->rank, rr->node);
        ddp_tool_xml_text(f, rr->task);
        fprintf(f, "</td><td class=\"out-%s\">%s</td><td>%.6f s</td><td>", rr->outcome,
                rr->outcome, rr->end_s);
        ddp_tool_xml_text(f, rank_phase(u, rr, ph, sizeof ph));
        fputs("</td><td class=\"msg\">", f);
        ddp_tool_xml_text(f, rr->msg);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* A link to the run folder's file name, when it is there. */
static void file_link(FILE *f, const run_t *u, const char *name)
{
    char path[1400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", u->dir, name);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return;
    fprintf(f, "<a href=\"../");
    ddp_tool_xml_text(f, u->name);
    fprintf(f, "/%s\">%s</a> ", name, name);
}

static int fill_run_page(FILE *f, void *arg)
{
    const run_t *u = arg;
    char title[400];
    snprintf(title, sizeof title, "%s: %s", u->name, verdict(&u->row->r));
    page_head(f, title);
    fputs("<p><a href=\"index.html\">all runs</a></p>\n", f);
    write_header(f, u);
    if (u->have_trace && u->tr.nlines)
        write_timeline(f, u);
    else
        write_end_lanes(f, u);
    write_ranks_table(f, u);
    fputs("<h2>Files</h2>\n<p>", f);
    static const char *files[] = {"scenario.scn", "replay", "result.json", "ranks.txt",
                                  "trace.jsonl", "trace.chrome.json", "README"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        file_link(f, u, files[i]);
    /* each rank's log (simulated), or a foreign program's output (real) */
    for (int i = 0; i < u->nranks; i++) {
        static const char *const kinds[] = {"log", "out", "err"};
        for (int k = 0; k < 3; k++) {
            char name[48];
            snprintf(name, sizeof name, "rank%d.%s", u->ranks[i].rank, kinds[k]);
            file_link(f, u, name);
        }
    }
    /* Whether the first error, the faults, the replay command and the
     * timeline fit the window's first screen (body data-first-screen:
     * fits or scroll; tests/report/check.sh --chromium reads it). */
    fputs("</p>\n<script>(function(){var ok=1;['first-error','faults','replay','timeline']"
          ".forEach(function(id){var e=document.getElementById(id);if(e){var b=e."
          "getBoundingClientRect();if(b.bottom>window.innerHeight){ok=0}}});document.body."
          "setAttribute('data-first-screen',ok?'fits':'scroll')})()</script>\n"
          "</body></html>\n", f);
    return 0;
}

/* ---- the index ---- */

typedef struct index_arg {
    run_t *runs;
    int n;
    const char *dir;
} index_arg_t;

static int fill_index(FILE *f, void *arg)
{
    const index_arg_t *ix = arg;
    int failed = 0;
    for (int i = 0; i < ix->n; i++)
        failed += !ix->runs[i].row->r.pass && !ix->runs[i].row->r.skipped;
    page_head(f, "ddpsim runs");
    fprintf(f, "<h1>ddpsim runs in ");
    ddp_tool_xml_text(f, ix->dir);
    fprintf(f, "</h1>\n<p>%d run folder(s), %d failed or vacuous</p>\n<table id=\"runs\">"
               "<tr><th>run</th><th>scenario</th><th>accelerator</th><th>verdict</th>"
               "<th>first error</th></tr>\n", ix->n, failed);
    for (int i = 0; i < ix->n; i++) {
        const run_t *u = &ix->runs[i];
        const ddp_shard_row_t *j = u->row;
        fputs("<tr class=\"run\"><td><a href=\"", f);
        ddp_tool_xml_text(f, u->name);
        fputs(".html\">", f);
        ddp_tool_xml_text(f, u->name);
        fputs("</a></td><td>", f);
        ddp_tool_xml_text(f, j->path);
        fprintf(f, "</td><td>%s</td><td class=\"verdict-%s\">%s</td><td class=\"msg\">",
                j->accel, verdict(&j->r), verdict(&j->r));
        char m[200];
        snprintf(m, sizeof m, "%.160s%s", j->r.first_error[0] ? j->r.first_error : j->r.why,
                 strlen(j->r.first_error[0] ? j->r.first_error : j->r.why) > 160 ? "..." : "");
        ddp_tool_xml_text(f, m);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n</body></html>\n", f);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every run's page and the index into folder out; 0 or 2 (said). */
static int write_pages(const char *out, const char *dir, run_t *runs, char **names, int nn)
{
    int rc = 0;
    for (int i = 0; !rc && i < nn; i++) {
        load_details(&runs[i]);
        char page[1400];
        snprintf(page, sizeof page, "%s/%s.html", out, names[i]);
        if (ddp_out_write(page, "the run's page", fill_run_page, &runs[i]) != 0)
            rc = 2;
        free_details(&runs[i]);
    }
    if (!rc) {
        char page[1400];
        snprintf(page, sizeof page, "%s/index.html", out);
        index_arg_t ix = {.runs = runs, .n = nn, .dir = dir};
        if (ddp_out_write(page, "the index page", fill_index, &ix) != 0)
            rc = 2;
    }
    if (rc)
        fprintf(stderr, "ddpsim report: %s (nothing kept: %s/report/ was not made)\n",
                ddp_err_message(), dir);
    return rc;
}

/* DIR/report/ whole or not at all: written in a temporary twin renamed at
 * the end, removed on a failure (a retry finds no report/ in its way). */
static int write_report(const char *dir, run_t *runs, char **names, int nn)
{
    char out[1200], tmp[1300];
    snprintf(out, sizeof out, "%s/report", dir);
    struct stat sb;
    if (lstat(out, &sb) == 0) {
        fprintf(stderr, "ddpsim report: %s exists; expected a DIR without report/ (nothing "
                        "is ever replaced: remove it to write the pages again)\n", out);
        return 2;
    }
    if (ddp_tool_dir_begin(out, tmp, sizeof tmp) != 0) {
        fprintf(stderr, "ddpsim report: %s\n", ddp_err_message());
        return 2;
    }
    int rc = write_pages(tmp, dir, runs, names, nn);
    if (rc)
        ddp_tool_dir_discard(tmp);
    else if (ddp_tool_dir_commit(tmp, out) != 0) {
        fprintf(stderr, "ddpsim report: %s\n", ddp_err_message());
        rc = 2;
    } else {
        printf("ddpsim report: %d run page(s) and %s/index.html\n", nn, out);
    }
    return rc;
}

int ddp_cmd_report(ddp_sys_t *sys, int argc, char **argv)
{
    (void)sys;
    int n;
    const ddp_opt_t opts[] = {OPT_HELP};
    ddp_opt_spec_t sp = {DDP_OPT_SPEC("report", opts, report_usage), .min_operands = 1,
                         .max_operands = 1, .operands = "exactly one DIR (of run --artifacts)"};
    DDP_OPT_PARSE_OR_RETURN(&sp, argc, argv, &n);
    const char *dir = argv[1];
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "ddpsim report: cannot open %s: %s; expected the DIR of ddpsim run "
                        "--artifacts DIR\n", dir, strerror(errno));
        return 2;
    }
    char **names = NULL;
    int nn = 0, rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[1400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s/result.json", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        char **nw = realloc(names, (size_t)(nn + 1) * sizeof *nw);
        if (!nw || !(nw[nn] = strdup(e->d_name))) {
            free(nw ? nw : names);
            names = NULL;
            nn = 0;
            rc = 2;
            fprintf(stderr, "ddpsim report: out of memory\n");
            break;
        }
        names = nw;
        nn++;
    }
    closedir(d);
    if (!rc && nn == 0) {
        fprintf(stderr, "ddpsim report: %s holds no run folder (NAME/result.json); expected "
                        "the DIR of ddpsim run --artifacts DIR (a run that passed keeps "
                        "one only with --artifacts-all)\n", dir);
        rc = 2;
    }
    if (names)
        qsort(names, (size_t)nn, sizeof *names, by_name);
    run_t *runs = rc ? NULL : calloc((size_t)nn, sizeof *runs);
    if (!rc && !runs) {
        fprintf(stderr, "ddpsim report: out of memory\n");
        rc = 2;
    }
    for (int i = 0; !rc && i < nn; i++)
        if (load_result(dir, names[i], &runs[i]) != 0) {
            fprintf(stderr, "ddpsim report: %s/%s: %s\n", dir, names[i], ddp_err_message());
            rc = 2;
        }
    if (!rc)
        rc = write_report(dir, runs, names, nn);
    for (int i = 0; runs && i < nn; i++)
        free_run(&runs[i]); /* a run not loaded is zeroed */
    free(runs);
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    return rc;
}
