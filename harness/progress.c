/* harness/progress.c — the progress line of long work (progress.h). */
#include "progress.h"

#include "ddp/host.h"
#include "ddp/sys.h"

static double real_clock(void) { return (double)ddp_sys_host_now() / 1e9; }

static void dur(char *b, size_t n, double s)
{
    long long t = (long long)(s + 0.5);
    if (t >= 3600)
        snprintf(b, n, "%lldh%02lldm", t / 3600, t % 3600 / 60);
    else if (t >= 60)
        snprintf(b, n, "%lldm%02llds", t / 60, t % 60);
    else
        snprintf(b, n, "%llds", t);
}

int ddp_progress_format(char *buf, size_t n, const char *what, const char *unit,
                        long long done, long long total, double elapsed_s,
                        const char *note)
{
    double rate = elapsed_s > 0 ? (double)done / elapsed_s : 0;
    char eta[32] = "?", el[32];
    if (done >= total)
        snprintf(eta, sizeof eta, "0s");
    else if (done > 0 && rate > 0)
        dur(eta, sizeof eta, (double)(total - done) / rate);
    dur(el, sizeof el, elapsed_s);
    return snprintf(buf, n, "%s %lld/%lld %s (%d%%), %.1f %s/s, ETA %s, %s elapsed%s%s",
                    what, done, total, unit,
                    total > 0 ? (int)(done * 100 / total) : 100, rate, unit, eta, el,
                    note && *note ? "; " : "", note ? note : "");
}

static double clock_of(const ddp_progress_t *p)
{
    return p->clock ? p->clock() : real_clock();
}

void ddp_progress_start(ddp_progress_t *p, const char *what, const char *unit,
                        long long total, int mode, FILE *out)
{
    double (*clk)(void) = p->clock;
    double iv = p->interval_s;
    *p = (ddp_progress_t){.what = what, .unit = unit, .total = total, .mode = mode,
                          .interval_s = iv > 0 ? iv : 10, .out = out ? out : stderr,
                          .clock = clk};
    p->t0 = p->last = clock_of(p);
}

void ddp_progress_update(ddp_progress_t *p, long long done, const char *note)
{
    p->done = done;
    if (p->mode == DDP_PROGRESS_OFF)
        return;
    double now = clock_of(p);
    char line[512];
    if (p->mode == DDP_PROGRESS_BAR) {
        if (now - p->last < 0.1 && done < p->total && p->shown)
            return;
        char bar[21];
        int fill = p->total > 0 ? (int)(done * 20 / p->total) : 20;
        for (int k = 0; k < 20; k++)
            bar[k] = k < fill ? '#' : '.';
        bar[20] = '\0';
        ddp_progress_format(line, sizeof line, p->what, p->unit, done, p->total,
                            now - p->t0, note);
        fprintf(p->out, "\r\033[K[%s] %s", bar, line);
        p->shown = 1;
    } else {
        if (now - p->last < p->interval_s)
            return;
        ddp_progress_format(line, sizeof line, p->what, p->unit, done, p->total,
                            now - p->t0, note);
        fprintf(p->out, "%s\n", line);
    }
    p->last = now;
    fflush(p->out);
}

void ddp_progress_clear(ddp_progress_t *p)
{
    if (p->mode == DDP_PROGRESS_BAR && p->shown) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
        p->shown = 0;
    }
}

void ddp_progress_end(ddp_progress_t *p, int keep)
{
    if (keep && p->mode == DDP_PROGRESS_BAR && p->shown) {
        fputc('\n', p->out);
        fflush(p->out);
        p->shown = 0;
    }
    ddp_progress_clear(p);
}
