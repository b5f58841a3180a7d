/* tests/fake_clock.c — a fake clock over a real sys (tests/fake_clock.h). */
#include "fake_clock.h"

#include <errno.h>

#include "ddp/err.h"

static ddp_fake_clock_t *FC(ddp_sys_t *s) { return (ddp_fake_clock_t *)s; }

static int64_t fc_now(ddp_sys_t *s) { return FC(s)->now; }

static int fc_sleep_until(ddp_sys_t *s, int64_t deadline)
{
    ddp_fake_clock_t *fc = FC(s);
    if (deadline == DDP_DEADLINE_NEVER) /* as both real implementations */
        return ddp_err_set(-EINVAL, "sleep without a deadline");
    fc->sleeps++;
    if (!fc->first_sleep)
        fc->first_sleep = deadline;
    fc->last_sleep = deadline;
    if (deadline > fc->max_sleep)
        fc->max_sleep = deadline;
    if (deadline <= fc->now)
        fc->late_sleeps++;
    else
        fc->now = deadline;
    if (fc->sleeps > fc->max_sleeps && !fc->capped) {
        fc->capped = 1;
        if (fc->on_cap)
            fc->on_cap(fc->arg);
    }
    return 0;
}

static int fc_connect(ddp_sys_t *s, const ddp_addr_t *a, int64_t deadline)
{
    ddp_fake_clock_t *fc = FC(s);
    int rc = fc->real->connect(s, a, deadline);
    fc->connects++;
    fc->now += fc->connect_cost;
    return rc;
}

void ddp_fake_clock_init(ddp_fake_clock_t *fc, ddp_sys_t *real, int64_t start)
{
    *fc = (ddp_fake_clock_t){.sys = *real, .real = real->ops, .now = start,
                             .max_sleeps = 10000};
    fc->ops = *real->ops;
    fc->ops.now = fc_now;
    fc->ops.sleep_until = fc_sleep_until;
    fc->ops.connect = fc_connect;
    fc->sys.ops = &fc->ops;
}
