/* harness/root_cause.c — which rank's error the run's summary shows.
 *
 * When one rank fails for a reason (a bad variable, a name that does not
 * resolve, a port taken), the others usually fail later and only because of
 * it: they time out waiting for the rank that stopped, or lose it. Showing
 * the lowest failing rank's message would then show an effect (rank 0's
 * 60 s timeout) and hide the cause another rank already named. So the
 * summary takes the failing rank whose error is highest in this table, and
 * among equals the lowest rank (then the lowest node). The order is
 * documented in docs/errors.md ("Root cause first"); keep the two alike.
 */
#include <errno.h>

#include "ddp/err.h"
#include "scenario_priv.h"

/* Most causal first. A code not listed ranks with "any other error". */
static const struct {
    int code;
    int tier;
} cause_table[] = {
    /* 0: the launch itself is wrong; nothing else can go right */
    {DDP_ECONFIG, 0},
    /* 1: a host name or key that does not exist */
    {DDP_ENOT_FOUND, 1},
    /* 2: rank 0 could not serve where everyone looks */
    {-EADDRINUSE, 2},
    /* 3: an address nobody can reach */
    {-EHOSTUNREACH, 3},
    {-ENETUNREACH, 3},
    {-EADDRNOTAVAIL, 3},
    /* 4 is any other error (protocol, limit, unsupported, internal, ...) */
    /* 5: nobody listening yet, or the listener went away: a symptom of a
     * peer that stopped */
    {-ECONNREFUSED, 5},
    {-ECONNRESET, 5},
    {-EPIPE, 5},
    {DDP_ECANCELED, 5},
    /* 6: the peer vanished mid-operation */
    {DDP_EPEER_LOST, 6},
    {DDP_ECLOSED, 6}, /* another agent's run ended and closed it */
    /* 7: waited for someone who never came: almost always an effect */
    {DDP_ETIMEOUT, 7},
    {DDP_EHUNG, 7},
};

#define OTHER_TIER 4

int ddp__scn_cause_tier(int code)
{
    for (size_t i = 0; i < sizeof cause_table / sizeof cause_table[0]; i++)
        if (cause_table[i].code == code)
            return cause_table[i].tier;
    return OTHER_TIER;
}

int ddp__scn_more_causal(int code, int rank, int node, int best_code,
                         int best_rank, int best_node)
{
    int a = ddp__scn_cause_tier(code), b = ddp__scn_cause_tier(best_code);
    if (a != b)
        return a < b;
    return rank < best_rank || (rank == best_rank && node < best_node);
}
