/* harness/real_kinds.c — which executor of a real run realises a fault.
 *
 * The kinds table (DDP_FAULT_KINDS in include/ddp/faults.h) names, per
 * kind, the executors that can realise it. A real run reads that column
 * here and nowhere else; the code below only refines it where a fault's
 * fields decide (a reset after N bytes, a crash at a phase, a fault point
 * aimed at one process) and picks one executor where a kind lists several
 * (nft for a foreign program, which has no libfiu points). A kind whose
 * row lists no executor of a real run gets none: the run is refused with
 * the kind named (ddp__real_no_executor), never run as if it had acted. */
#include <stdio.h>

#include "real_priv.h"

static unsigned kind_exec(const ddp_fault_t *f)
{
    const ddp_fault_kind_info_t *k = ddp_fault_kind_info(f->kind);
    return k ? k->exec : 0;
}

/* The refinements of the INPROC column that need a fault's fields. */
static int inproc_fields(const ddp_fault_t *f)
{
    switch (f->kind) {
    case DDP_FAULT_RESET: return f->after_bytes <= 0; /* mid-stream: the simulator's */
    case DDP_FAULT_CRASH: return f->phase != NULL;    /* else the runner's SIGKILL */
    case DDP_FAULT_POINT: return 0; /* one point would fire in every process */
    default: return 1;
    }
}

int ddp__real_signal(const ddp_fault_t *f)
{
    return f->kind == DDP_FAULT_CRASH ? 9 : f->kind == DDP_FAULT_PAUSE ? 19 : 0;
}

unsigned ddp__real_executor(const ddp_fault_t *f, unsigned mask, int exec)
{
    int inproc = (mask & DDP_EXEC_INPROC) && inproc_fields(f);
    if ((mask & DDP_EXEC_NFT) && (!(mask & DDP_EXEC_INPROC) || (exec && inproc)))
        return DDP_EXEC_NFT;
    if (inproc)
        return exec ? 0 : DDP_EXEC_INPROC; /* a foreign program has no libfiu points */
    if ((mask & DDP_EXEC_SIGNAL) && ddp__real_signal(f))
        return DDP_EXEC_SIGNAL;
    if ((mask & DDP_EXEC_PROXY) && exec)
        return DDP_EXEC_PROXY;
    if (mask & DDP_EXEC_LINK)
        return DDP_EXEC_LINK;
    return mask & DDP_EXEC_RUNNER;
}

int ddp__real_in_process(const ddp_fault_t *f)
{
    return ddp__real_executor(f, kind_exec(f), 0) == DDP_EXEC_INPROC;
}

int ddp__real_nft_fault(const ddp_fault_t *f)
{
    unsigned m = kind_exec(f);
    return (m & DDP_EXEC_NFT) && !(m & DDP_EXEC_INPROC);
}

const char *ddp__real_no_executor(const ddp_fault_t *f, unsigned mask, int exec, int line,
                                  char *buf, size_t n)
{
    if (ddp__real_executor(f, mask, exec))
        return NULL;
    char names[160];
    const char *kind = ddp_fault_kind_name(f->kind);
    if (f->kind == DDP_FAULT_POINT && (mask & DDP_EXEC_INPROC))
        snprintf(buf, n, "fault point point=%s (line %d): real runs do not aim fault "
                         "points (fiu-run -c 'enable name=%s' hits every process)",
                 f->point ? f->point : "?", line, f->point ? f->point : "?");
    else if (f->kind == DDP_FAULT_RESET && f->after_bytes > 0)
        snprintf(buf, n, "fault reset after=%lld (line %d): a mid-stream reset "
                         "needs the simulator", (long long)f->after_bytes, line);
    else
        snprintf(buf, n, "fault %s (line %d): no executor of a %s realises it (the kinds "
                         "table, include/ddp/faults.h, gives it: %s); run it in the simulator",
                 kind, line, exec ? "foreign program's real run" : "real run",
                 ddp_fault_exec_names(mask, names, sizeof names));
    return buf;
}
