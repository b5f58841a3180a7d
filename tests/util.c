/* tests/util.c — helpers shared by the suites. */
#include "test.h"

#include "ddp/env.h"
#include "ddp/sys.h"

struct ddp_sys *ddp_test_sys(void) { return ddp_sys_posix_new(ddp_env_new()); }

long long ddp_test_deadline_ms(struct ddp_sys *sys, long long ms)
{
    return ddp_sys_deadline_in(sys, ms * DDP_NS_PER_MS);
}
