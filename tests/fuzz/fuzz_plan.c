/* tests/fuzz/fuzz_plan.c — libFuzzer harness for what a real run's
 * processes read back: the plan file (harness/plan.c, read by every
 * process the runner starts) and the run's shared records (the E records
 * of harness/real_child.c, read by every process and the runner). Any
 * input is a plan file; when it reads, writing it and reading that must
 * give the same text (read -> write -> read -> write is the identity). The
 * same input, as a results file, goes through the event reader, which
 * must never move past the file's end nor back. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../harness/real_priv.h"
#include "ddp/err.h"
#include "ddp/faults.h"
#include "ddp/plan.h"
#include "fake_sys.h"
#include "fuzz.h"

static char *plan_text(const ddp_plan_t *p)
{
    char *t = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&t, &n);
    if (!m)
        return NULL;
    int rc = ddp_plan_write(p, m);
    if (fclose(m) || rc) {
        free(t);
        return NULL;
    }
    return t;
}

static int events_ok(const uint8_t *d, size_t n)
{
    static char path[64];
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/ddpsim-fuzz-events-%ld", (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    fwrite(d, 1, n, f);
    fclose(f);
    ddp_fault_t fl = {.kind = DDP_FAULT_DELAY, .node = -1, .task = -1, .peer_node = -1,
                      .delay_ns = 1};
    ddp_trigger_parse("set:k*", &fl.start_on);
    ddp_faultset_t fs;
    if (ddp_faultset_init(&fs, &fl, 1, 0, NULL, 4))
        return 0;
    ddp_faultset_t *fss[1] = {&fs};
    ddp__real_acks_t acks = {.now = 1};
    int bad = 0;
    long off = 0, before;
    do { /* as the runner reads: until nothing more is taken */
        before = off;
        ddp__real_events_read(path, &off, fss, 1, 0, &acks);
        bad |= off < before || off > (long)n || acks.n > 64 || acks.n < 0;
    } while (!bad && off != before);
    ddp_faultset_free(&fs);
    remove(path);
    return bad;
}

static int fuzz_plan_one(const uint8_t *d, size_t n)
{
    if (n > 1 << 16)
        return 0;
    fake_sys_t *f = fake_sys_new();
    if (!f)
        return 0;
    f->file = (const char *)d;
    f->file_len = n;
    ddp_plan_t *a = NULL, *b = NULL;
    int bad = 0;
    if (ddp_plan_read(&f->sys, "fuzz.plan", &a) == 0) {
        char *t1 = plan_text(a), *t2 = NULL;
        f->file = t1;
        f->file_len = t1 ? strlen(t1) : 0;
        bad = !t1 || ddp_plan_read(&f->sys, "written.plan", &b) != 0 ||
              !(t2 = plan_text(b)) || strcmp(t1, t2) != 0;
        if (bad)
            fprintf(stderr, "plan round trip broke: %s\n--- written:\n%s",
                    ddp_err_message(), t1 ? t1 : "(none)\n");
        free(t1);
        free(t2);
    }
    ddp_plan_free(a);
    ddp_plan_free(b);
    fake_sys_free(f);
    return bad || events_ok(d, n);
}

DDP_FUZZ_ENTRY(fuzz_plan_one)
