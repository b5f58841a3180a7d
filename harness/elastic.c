/* harness/elastic.c — torchrun's elastic agent with --rdzv_backend=c10d,
 * as torch 1.13 runs it (LocalElasticAgent over DynamicRendezvousHandler),
 * for the `torchrun-elastic` launcher: one agent per node. It reads
 * torchrun's own PET_* variables (torchrun takes every option from them),
 * meets the other agents in rendezvous rounds kept in one state value on
 * the c10d store (compare_set on "torch.rendezvous.<run id>"; the agent on
 * the endpoint's host serves that store), starts its node's workers with
 * RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, MASTER_ADDR/PORT (group rank 0
 * picks a free port) and TORCHELASTIC_*, watches them every monitor
 * interval, and on a failure stops them and rendezvouses again while
 * restarts are left; a node waiting to join restarts the group without
 * costing one. When its run ends, failed or not, it closes the rendezvous
 * (a crashed agent does not: 1.13 keeps it open on a signal), so another
 * agent that later rendezvouses fails with DDP_ECLOSED (pytorch #91943,
 * #147064). docs/scenario-format.md, "Launchers". */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/log.h"
#include "ddp/store.h"
#include "ddp/sys.h"
#include "elastic_priv.h"
#include "worker_env.h"

#define MAXN 64
#define ID_LEN 72
#define KEEP_ALIVE_NS (5 * DDP_NS_PER_S)  /* keep_alive_interval */
#define HEARTBEAT_DEAD_NS (3 * KEEP_ALIVE_NS) /* x keep_alive_max_attempt */
#define ROLLBACK_NS (5 * DDP_NS_PER_S)
#define SYNC_NS DDP_NS_PER_S                  /* a waiting join polls */
#define EXIT_BARRIER_NS (300 * DDP_NS_PER_S)

typedef struct rd_node {
    char id[ID_LEN];
    int64_t hb; /* last heartbeat */
} rd_node_t;

/* torch's _RendezvousState, less what this model does not use. */
typedef struct rd_state {
    int round, complete, closed;
    int64_t deadline; /* last call (0: none) */
    int np, nw;
    rd_node_t p[MAXN], w[MAXN]; /* participants (sorted once complete), wait list */
} rd_state_t;

typedef struct agent {
    ddp_sys_t *sys;
    ddp_store_t *st;
    ddp_store_server_t *srv;
    ddp_thread_t srv_th;
    char key[160], id[ID_LEN], host[200], ep_host[256], run_id[64];
    uint16_t ep_port;
    int min_nodes, max_nodes, nproc, max_restarts;
    int64_t monitor_ns, join_ns, last_call_ns;
    int group_rank, group_world, round;
} agent_t;

/* ---- configuration: torchrun's PET_* variables ---- */

static int bad_var(const char *var, const char *v, const char *form)
{
    ddp_err_set(DDP_ECONFIG, "%s=\"%s\": expected %s", var, v ? v : "", form);
    return ddp_err_hint("the torchrun-elastic launcher sets it; an env line of the "
                        "scenario may change it");
}

static int secs(const char *text, int64_t *out)
{
    char *e;
    double d = strtod(text, &e);
    if (e == text || *e || !(d > 0) || d > 1e6)
        return -1;
    *out = (int64_t)(d * 1e9);
    return 0;
}

/* --rdzv_endpoint as torch reads it (ddp_endpoint_parse; 29400 is c10d's
 * default port), but not port 0: torch's store would bind a free port no
 * other agent knows (docs/fidelity.md). */
static int read_endpoint(agent_t *a, const char *v)
{
    if (ddp_endpoint_parse(v, 29400, a->ep_host, sizeof a->ep_host, &a->ep_port) != 0)
        return ddp_err_wrap("PET_RDZV_ENDPOINT (torchrun --rdzv_endpoint)"); /* DDP_ECONFIG */
    if (a->ep_port != 0)
        return 0;
    ddp_err_set(DDP_ECONFIG, "PET_RDZV_ENDPOINT=\"%s\": port 0, where torch's store would "
                "listen on a free port that no other agent can know", v);
    return ddp_err_hint("give a fixed port, e.g. --rdzv_endpoint=%s:29400", a->ep_host);
}

static int read_config(agent_t *a)
{
    const ddp_env_t *env = ddp_sys_env(a->sys);
    const char *v = ddp_env_get(env, "PET_NNODES");
    long lo, hi, x;
    int rc;
    char *e;
    if (!v || (lo = strtol(v, &e, 10)) < 1 || lo > MAXN ||
        (*e == ':' ? (hi = strtol(e + 1, &e, 10), *e || hi < lo || hi > MAXN) : (hi = lo, *e)))
        return bad_var("PET_NNODES", v, "N or MIN:MAX nodes, 1..64 (torchrun --nnodes)");
    a->min_nodes = (int)lo;
    a->max_nodes = (int)hi;
    if (ddp_env_get_long(env, "PET_NPROC_PER_NODE", 1, 64, &x))
        return bad_var("PET_NPROC_PER_NODE", ddp_env_get(env, "PET_NPROC_PER_NODE"),
                       "1..64 workers per node");
    a->nproc = (int)x;
    x = 0;
    if (ddp_env_has(env, "PET_MAX_RESTARTS") &&
        ddp_env_get_long(env, "PET_MAX_RESTARTS", 0, 1000, &x))
        return bad_var("PET_MAX_RESTARTS", ddp_env_get(env, "PET_MAX_RESTARTS"), "0..1000");
    a->max_restarts = (int)x;
    a->monitor_ns = 5 * DDP_NS_PER_S;
    v = ddp_env_get(env, "PET_MONITOR_INTERVAL");
    if (v && secs(v, &a->monitor_ns))
        return bad_var("PET_MONITOR_INTERVAL", v, "seconds > 0");
    v = ddp_env_get(env, "PET_RDZV_ENDPOINT");
    if ((rc = read_endpoint(a, v)))
        return rc;
    v = ddp_env_get(env, "PET_RDZV_ID");
    snprintf(a->run_id, sizeof a->run_id, "%s", v && *v ? v : "none");
    a->join_ns = 600 * DDP_NS_PER_S;
    a->last_call_ns = 30 * DDP_NS_PER_S;
    /* --rdzv_conf join_timeout=S,last_call_timeout=S (others ignored) */
    for (v = ddp_env_get(env, "PET_RDZV_CONF"); v && *v;) {
        size_t n = strcspn(v, ",");
        char item[64];
        snprintf(item, sizeof item, "%.*s", (int)(n < 63 ? n : 63), v);
        char *eq = strchr(item, '=');
        int64_t *to = !eq                                        ? NULL
                      : !strncmp(item, "join_timeout=", 13)      ? &a->join_ns
                      : !strncmp(item, "last_call_timeout=", 18) ? &a->last_call_ns
                                                                 : NULL;
        if (to && secs(eq + 1, to))
            return bad_var("PET_RDZV_CONF", ddp_env_get(env, "PET_RDZV_CONF"),
                           "KEY=SECONDS,... (join_timeout, last_call_timeout)");
        v += n + (v[n] == ',');
    }
    return 0;
}

/* ---- the state value ---- */

static int find(const rd_node_t *v, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].id, id))
            return i;
    return -1;
}

static void drop(rd_node_t *v, int *n, int i)
{
    memmove(&v[i], &v[i + 1], sizeof *v * (size_t)(*n - i - 1));
    (*n)--;
}

static size_t put_nodes(char *b, size_t n, const char *tag, const rd_node_t *v, int k)
{
    size_t off = (size_t)snprintf(b, n, " %s=", tag);
    for (int i = 0; i < k && off < n; i++)
        off += (size_t)snprintf(b + off, n - off, "%s%s@%" PRId64, i ? "," : "", v[i].id,
                                v[i].hb);
    return off;
}

static void format_state(const rd_state_t *s, char *b, size_t n)
{
    size_t off = (size_t)snprintf(b, n, "ddpsim-rdzv round=%d complete=%d closed=%d "
                                        "deadline=%" PRId64,
                                  s->round, s->complete, s->closed, s->deadline);
    if (off < n)
        off += put_nodes(b + off, n - off, "p", s->p, s->np);
    if (off < n)
        put_nodes(b + off, n - off, "w", s->w, s->nw);
}

static int parse_nodes(const char *t, const char *tag, rd_node_t *v, int *k)
{
    char want[8];
    snprintf(want, sizeof want, " %s=", tag);
    const char *c = strstr(t, want);
    *k = 0;
    if (!c)
        return -1;
    for (c += strlen(want); *c && *c != ' ';) {
        size_t l = strcspn(c, "@");
        long long hb;
        int used = 0;
        if (*k >= MAXN || l >= ID_LEN || !c[l] || sscanf(c + l + 1, "%lld%n", &hb, &used) != 1)
            return -1;
        memcpy(v[*k].id, c, l);
        v[*k].id[l] = '\0';
        v[(*k)++].hb = hb;
        c += l + 1 + used;
        c += *c == ',';
    }
    return 0;
}

static int parse_state(const char *t, rd_state_t *s)
{
    memset(s, 0, sizeof *s);
    long long dl;
    if (sscanf(t, "ddpsim-rdzv round=%d complete=%d closed=%d deadline=%lld", &s->round,
               &s->complete, &s->closed, &dl) != 4 ||
        parse_nodes(t, "p", s->p, &s->np) || parse_nodes(t, "w", s->w, &s->nw))
        return ddp_err_set(DDP_EPROTOCOL, "the rendezvous state is not an agent's: \"%.80s\"",
                           t);
    s->deadline = dl;
    return 0;
}

typedef struct held {
    rd_state_t s;
    char raw[8192]; /* as read: compare_set's expected value */
} held_t;

static int load(agent_t *a, held_t *h, int64_t deadline)
{
    const char *k[1] = {a->key};
    int rc = ddp_store_check(a->st, k, 1, deadline);
    if (rc < 0)
        return rc;
    h->raw[0] = '\0';
    if (rc == 0) {
        memset(&h->s, 0, sizeof h->s);
        return 0;
    }
    ddp_buf_t b = {0};
    if ((rc = ddp_store_get(a->st, a->key, &b, deadline)) == 0) {
        snprintf(h->raw, sizeof h->raw, "%.*s", (int)b.len, (const char *)b.data);
        rc = parse_state(h->raw, &h->s);
    }
    ddp_buf_free(&b);
    return rc;
}

/* Writes h->s if the store still holds h->raw: 1 won, 0 lost a race. */
static int swap(agent_t *a, const held_t *h, int64_t deadline)
{
    /* On the heap: 8 KiB here was the deepest frame of an agent's stack
     * (docs/simulator.md § 1, the stack margin check). */
    enum { NEXT_MAX = sizeof h->raw };
    char *next = malloc(NEXT_MAX);
    if (!next)
        return ddp_err_set(-ENOMEM, "elastic agent: out of memory for the next "
                                    "rendezvous state (%d bytes)", (int)NEXT_MAX);
    format_state(&h->s, next, NEXT_MAX);
    ddp_buf_t out = {0};
    int rc = ddp_store_compare_set(a->st, a->key, h->raw, strlen(h->raw), next, strlen(next),
                                   &out, deadline);
    int won = rc == 0 && out.len == strlen(next) && !memcmp(out.data, next, out.len);
    ddp_buf_free(&out);
    free(next);
    return rc ? rc : won;
}

/* A participant left: the round ends when the last of a complete one has. */
static void left(rd_state_t *s, int min_nodes)
{
    if (s->complete && !s->np) {
        s->complete = 0;
        s->round++;
    } else if (!s->complete && s->np < min_nodes) {
        s->deadline = 0;
    }
}

/* Nodes whose heartbeat stopped are dropped (torch's _sanitize). */
static int sanitize(rd_state_t *s, int64_t now, int min_nodes)
{
    int changed = 0;
    for (int i = s->np - 1; i >= 0; i--)
        if (s->p[i].hb < now - HEARTBEAT_DEAD_NS) {
            drop(s->p, &s->np, i);
            left(s, min_nodes);
            changed = 1;
        }
    for (int i = s->nw - 1; i >= 0; i--)
        if (s->w[i].hb < now - HEARTBEAT_DEAD_NS) {
            drop(s->w, &s->nw, i);
            changed = 1;
        }
    return changed;
}

static int by_id(const void *x, const void *y)
{
    return strcmp(((const rd_node_t *)x)->id, ((const rd_node_t *)y)->id);
}

static void mark_complete(rd_state_t *s)
{
    s->complete = 1;
    s->deadline = 0;
    qsort(s->p, (size_t)s->np, sizeof *s->p, by_id); /* ranks: sorted ids */
}

static int closed_error(const agent_t *a)
{
    ddp_err_set(DDP_ECLOSED, "agent %s: the rendezvous %s is closed: RendezvousClosedError "
                             "(an agent whose run ended closed it)",
                a->id, a->key);
    return ddp_err_hint("torch 1.13 closes a c10d rendezvous when any agent's run ends, "
                        "failed or not; a new attempt needs a new --rdzv_id (pytorch "
                        "#91943, #147064)");
}

/* One rendezvous round (torch's exit op, then join op): 0 with group_rank,
 * group_world and round set. */
static int rendezvous(agent_t *a)
{
    ddp_sys_t *sys = a->sys;
    int64_t deadline = ddp_sys_deadline_in(sys, a->join_ns);
    int64_t hard = deadline + ROLLBACK_NS;
    held_t *h = malloc(sizeof *h);
    if (!h)
        return ddp_err_set(-ENOMEM, "out of memory");
    int rc, exited = 0;
    for (;;) {
        if ((rc = load(a, h, hard)) < 0)
            break;
        int64_t now = ddp_sys_now(sys);
        rd_state_t *s = &h->s;
        if (sanitize(s, now, a->min_nodes)) {
            if ((rc = swap(a, h, hard)) < 0)
                break;
            continue;
        }
        int pi = find(s->p, s->np, a->id), wi = find(s->w, s->nw, a->id);
        if (!exited) { /* exit op: leave what this node held */
            if (pi < 0 && wi < 0) {
                exited = 1;
                continue;
            }
            if (pi >= 0) {
                drop(s->p, &s->np, pi);
                left(s, a->min_nodes);
            } else {
                drop(s->w, &s->nw, wi);
            }
        } else if (s->closed) {
            rc = closed_error(a);
            break;
        } else if (s->complete && pi >= 0) {
            a->group_rank = pi;
            a->group_world = s->np;
            a->round = s->round;
            rc = 0;
            break;
        } else if (now > deadline) {
            if (now <= hard && pi >= 0) {
                drop(s->p, &s->np, pi);
                left(s, a->min_nodes);
            } else if (now <= hard && wi >= 0) {
                drop(s->w, &s->nw, wi);
            } else {
                ddp_err_set(DDP_ETIMEOUT, "agent %s: rendezvous round %d not complete after "
                                          "%.0f s: %d of %d..%d node(s) joined",
                            a->id, s->round, (double)a->join_ns / 1e9, s->np, a->min_nodes,
                            a->max_nodes);
                ddp_err_hint("start the other nodes' torchrun, or lower --nnodes MIN");
                rc = DDP_ETIMEOUT;
                break;
            }
        } else if (s->complete && s->np < a->max_nodes && wi < 0) {
            s->w[s->nw++] = (rd_node_t){.hb = now};
            snprintf(s->w[s->nw - 1].id, ID_LEN, "%s", a->id);
        } else if (!s->complete && pi >= 0 && s->np >= a->min_nodes && s->deadline &&
                   s->deadline < now) {
            mark_complete(s);
        } else if (!s->complete && pi < 0 && s->np < MAXN) {
            if (wi >= 0)
                drop(s->w, &s->nw, wi);
            s->p[s->np++] = (rd_node_t){.hb = now};
            snprintf(s->p[s->np - 1].id, ID_LEN, "%s", a->id);
            if (s->np == a->min_nodes)
                s->deadline = now + a->last_call_ns;
            if (s->np == a->max_nodes)
                mark_complete(s);
        } else if (pi >= 0 && s->p[pi].hb < now - KEEP_ALIVE_NS) {
            s->p[pi].hb = now;
        } else if (wi >= 0 && s->w[wi].hb < now - KEEP_ALIVE_NS) {
            s->w[wi].hb = now;
        } else { /* wait for the others, or for the next round */
            int64_t wake = now + SYNC_NS;
            if (s->deadline && !s->complete && s->deadline + 1 < wake)
                wake = s->deadline + 1;
            if ((rc = ddp_sys_sleep_until(sys, wake < hard ? wake : hard)) != 0)
                break;
            continue;
        }
        if ((rc = swap(a, h, hard)) < 0)
            break;
    }
    free(h);
    return rc;
}

/* One try at a state change made by fn (keep-alive, close): lost races
 * are retried until deadline. */
static int update(agent_t *a, int (*fn)(agent_t *, rd_state_t *), int64_t deadline)
{
    held_t *h = malloc(sizeof *h);
    if (!h)
        return ddp_err_set(-ENOMEM, "out of memory");
    int rc;
    do {
        if ((rc = load(a, h, deadline)) < 0 || !h->raw[0] || !fn(a, &h->s))
            break;
    } while ((rc = swap(a, h, deadline)) == 0);
    free(h);
    return rc < 0 ? rc : 0;
}

static int beat(agent_t *a, rd_state_t *s)
{
    int i = find(s->p, s->np, a->id);
    if (i < 0)
        return 0;
    s->p[i].hb = ddp_sys_now(a->sys);
    return 1;
}

static int close_op(agent_t *a, rd_state_t *s)
{
    (void)a;
    if (s->closed)
        return 0;
    s->closed = 1;
    return 1;
}

static int nodes_waiting(agent_t *a, int64_t deadline)
{
    held_t *h = malloc(sizeof *h);
    int n = 0;
    if (h && load(a, h, deadline) == 0) {
        sanitize(&h->s, ddp_sys_now(a->sys), a->min_nodes);
        n = h->s.closed ? 0 : h->s.nw;
    }
    free(h);
    return n;
}

/* ---- workers ---- */

typedef struct group {
    ddp_pid_t pid[64];
    int status[64]; /* -1: running */
    int n, restarts; /* restarts: after a failure (TORCHELASTIC_RESTART_COUNT) */
    int starts;      /* every start of the group (membership changes too) */
} group_t;

/* Group rank 0 publishes where the workers' store will be: its host and a
 * port the OS picked (torch's _get_socket_with_port). */
static int master_of_round(agent_t *a, char *addr, size_t an, uint16_t *port)
{
    char ka[200], kp[200];
    ddp_fmt(ka, sizeof ka, "torch.rendezvous.%s.%d/MASTER_ADDR", a->run_id, a->round);
    ddp_fmt(kp, sizeof kp, "torch.rendezvous.%s.%d/MASTER_PORT", a->run_id, a->round);
    int64_t dl = ddp_sys_deadline_in(a->sys, a->join_ns);
    int rc;
    if (a->group_rank == 0) {
        ddp_addr_t any, got;
        ddp_addr_parse("0.0.0.0", 0, &any);
        int fd = ddp_sys_listen(a->sys, &any, 1);
        if (fd < 0)
            return fd;
        rc = ddp_sys_local_addr(a->sys, fd, &got);
        ddp_sys_close(a->sys, fd);
        char p[8];
        ddp_fmt(p, sizeof p, "%u", (unsigned)got.port);
        if (rc || (rc = ddp_store_set_str(a->st, ka, a->host, dl)) ||
            (rc = ddp_store_set_str(a->st, kp, p, dl)))
            return rc;
    }
    ddp_buf_t b = {0}, c = {0};
    const char *keys[2] = {ka, kp};
    if ((rc = ddp_store_wait(a->st, keys, 2, dl)) == 0 &&
        (rc = ddp_store_get(a->st, ka, &b, dl)) == 0 &&
        (rc = ddp_store_get(a->st, kp, &c, dl)) == 0) {
        snprintf(addr, an, "%.*s", (int)b.len, (const char *)b.data);
        *port = (uint16_t)atoi((const char *)c.data);
    }
    ddp_buf_free(&b);
    ddp_buf_free(&c);
    return rc;
}

static int start_workers(agent_t *a, const ddp_elastic_worker_t *w, group_t *g)
{
    char maddr[200] = "";
    uint16_t mport = 0;
    int rc = master_of_round(a, maddr, sizeof maddr, &mport);
    if (rc)
        return rc;
    g->n = 0;
    for (int l = 0; l < a->nproc && rc == 0; l++) {
        ddp_env_t *env = ddp_env_clone(ddp_sys_env(a->sys));
        int rank = a->group_rank * a->nproc + l;
        ddp_worker_place_t p = {.local_rank = l, .nproc = a->nproc,
                                .group_rank = a->group_rank, .group_world = a->group_world,
                                .master_addr = maddr, .master_port = mport,
                                .restarts = g->restarts, .max_restarts = a->max_restarts,
                                .run_id = a->run_id};
        if (!env || ddp_worker_env(env, &p) != 0) {
            ddp_env_free(env);
            return ddp_err_set(-ENOMEM, "out of memory");
        }
        ddp_env_setf(env, "DDPSIM_WORKER_ATTEMPT", "%d", g->starts);
        char name[32];
        snprintf(name, sizeof name, "worker%d", rank);
        ddp_spawn_t sp = {.env = env, .entry = w->fn, .arg = w->arg, .name = name,
                          .die_with_parent = 1, .attempt = g->starts};
        rc = ddp_sys_spawn(a->sys, &sp, &g->pid[g->n]);
        ddp_env_free(env);
        g->status[g->n] = -1;
        g->n += rc == 0;
    }
    g->starts++;
    return rc;
}

/* Reaps what has exited (at once: deadline now). */
static void reap(agent_t *a, group_t *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->status[i] < 0 &&
            ddp_sys_wait(a->sys, g->pid[i], &g->status[i], ddp_sys_now(a->sys)) != 0)
            g->status[i] = -1;
}

/* torch stops a group with SIGTERM, then SIGKILL after 30 s; the model
 * kills at once. */
static void stop_workers(agent_t *a, group_t *g)
{
    reap(a, g);
    for (int i = 0; i < g->n; i++)
        if (g->status[i] < 0) {
            ddp_sys_kill(a->sys, g->pid[i], SIGKILL);
            ddp_sys_wait(a->sys, g->pid[i], &g->status[i],
                         ddp_sys_deadline_in(a->sys, 30 * DDP_NS_PER_S));
        }
    g->n = 0;
}

/* 1 all succeeded, -1 one failed (*who, *status), 0 running. */
static int monitor(agent_t *a, group_t *g, int *who, int *status)
{
    int done = 0;
    reap(a, g);
    for (int i = 0; i < g->n; i++) {
        if (g->status[i] > 0) {
            *who = i;
            *status = g->status[i];
            return -1;
        }
        done += g->status[i] == 0;
    }
    return done == g->n ? 1 : 0;
}

static int serve_thread(ddp_sys_t *sys, void *arg)
{
    (void)sys;
    return ddp_store_server_run(arg, DDP_DEADLINE_NEVER);
}

/* The endpoint (an address, or a name resolving to one) is an address of
 * one of this host's interfaces that torch's test does not take for this
 * host: not one its host name resolves to (a second NIC: pytorch #69197;
 * its own name, "gpu01i": #73656). No agent would serve the store, and
 * every one would wait its join timeout for it. Said at once, with the fix. */
static int endpoint_on_other_nic(agent_t *a)
{
    ddp_addr_t ep[8];
    ddp_ifaddr_t ifs[32];
    ddp_errsave_t *saved = ddp_err_save();
    int nep = ddp_sys_resolve(a->sys, a->ep_host, 0, ep, 8);
    int n = nep > 0 ? ddp_sys_ifaddrs(a->sys, ifs, 32) : 0;
    ddp_err_restore(saved);
    for (int i = 0; i < n * nep; i++) {
        const ddp_ifaddr_t *f = &ifs[i / nep];
        if (!ddp_addr_equal(&f->addr, &ep[i % nep]) || ddp_addr_is_loopback(&f->addr))
            continue;
        char as[64];
        ddp_addr_format_host(&f->addr, as, sizeof as);
        ddp_err_set(DDP_ECONFIG,
                    "agent %s: the rendezvous endpoint %s:%u is %s, an address of this "
                    "host's interface %s, but not one its host name %s resolves to: "
                    "torch's agent serves the c10d store only for localhost, a "
                    "loopback address, its host name or an address that name "
                    "resolves to, so no agent serves it and every agent would "
                    "wait %.0f s for it",
                    a->id, a->ep_host, (unsigned)a->ep_port, as, f->name, a->host,
                    (double)a->join_ns / 1e9);
        return ddp_err_hint("give the host's name: --rdzv-endpoint=%s:%u "
                            "(PET_RDZV_ENDPOINT), with that name resolving to an "
                            "address the other nodes reach",
                            a->host, (unsigned)a->ep_port);
    }
    return 0;
}

/* The agent on the endpoint's host serves the c10d store (torch: is_host,
 * else _matches_machine_hostname, ddp_sys_is_this_host; a port already taken makes it a client, as torch
 * retries). */
static int connect_store(agent_t *a)
{
    int rc = 0;
    if (ddp_sys_is_this_host(a->sys, a->ep_host)) {
        ddp_store_server_opts_t so = {.port = a->ep_port};
        if (ddp_store_server_new(a->sys, &so, &a->srv) == 0) {
            if ((rc = ddp_sys_thread_start(a->sys, serve_thread, a->srv, "c10d store",
                                           &a->srv_th))) {
                ddp_store_server_free(a->srv);
                a->srv = NULL;
                return rc;
            }
        }
    } else if ((rc = endpoint_on_other_nic(a)) != 0) {
        return rc;
    }
    ddp_store_client_opts_t o = {.host = a->ep_host, .port = a->ep_port,
                                 .connect_deadline = ddp_sys_deadline_in(a->sys, a->join_ns),
                                 .seed = 7};
    a->st = ddp_store_client_connect(a->sys, &o, &rc);
    return a->st ? 0 : rc;
}

/* torch's _exit_barrier: every agent of the round, however its group
 * ended, waits up to exit_barrier_timeout (300 s) for the others; a
 * timeout is logged, not fatal. */
static void exit_barrier(agent_t *a)
{
    char k[200], kd[220];
    ddp_fmt(k, sizeof k, "torchelastic/agent/exit/%s.%d", a->run_id, a->round);
    ddp_fmt(kd, sizeof kd, "%s/done", k);
    int64_t n = 0, edl = ddp_sys_deadline_in(a->sys, EXIT_BARRIER_NS);
    const char *keys[1] = {kd};
    if (ddp_store_add(a->st, k, 1, &n, edl) == 0 && n == a->group_world)
        ddp_store_set_str(a->st, kd, "1", edl);
    ddp_store_wait(a->st, keys, 1, edl);
}

int ddp__elastic_agent(ddp_sys_t *sys, const ddp_elastic_worker_t *w, int *restarts)
{
    agent_t *a = calloc(1, sizeof *a);
    group_t g = {.n = 0};
    if (!a)
        return ddp_err_set(-ENOMEM, "out of memory");
    a->sys = sys;
    *restarts = 0;
    int rc = read_config(a);
    if (rc == 0) {
        ddp_sys_hostname(sys, a->host, sizeof a->host);
        long idx = 0;
        ddp_env_get_long(ddp_sys_env(sys), "DDPSIM_AGENT", 0, 1 << 20, &idx);
        ddp_fmt(a->id, sizeof a->id, "%s_%ld", a->host, idx);
        ddp_fmt(a->key, sizeof a->key, "torch.rendezvous.%s", a->run_id);
        rc = connect_store(a);
    }
    if (rc == 0)
        rc = rendezvous(a);
    if (rc == 0)
        rc = start_workers(a, w, &g);
    while (rc == 0) {
        int64_t wake = ddp_sys_deadline_in(sys, a->monitor_ns);
        if ((rc = ddp_sys_sleep_until(sys, wake)) != 0)
            break;
        int who = -1, status = 0, m = monitor(a, &g, &who, &status);
        int64_t dl = ddp_sys_deadline_in(sys, a->join_ns);
        if (m == 1) { /* succeeded: the exit barrier, then done */
            exit_barrier(a);
            break;
        }
        if (m == -1 && g.restarts >= a->max_restarts) {
            int rank = a->group_rank * a->nproc + who;
            stop_workers(a, &g);
            /* torch 1.13 waits at the exit barrier on failure too: the
             * rendezvous closes only after it (300 s when another agent
             * has restarts left and is back in a round) */
            ddp_errsave_t *saved = ddp_err_save();
            exit_barrier(a);
            ddp_err_restore(saved);
            ddp_err_set(DDP_EPEER_LOST, "agent %s: worker group failed: rank %d (local rank "
                                        "%d) exited with %s %d, %d of %d restart(s) used",
                        a->id, rank, who, status > 128 ? "signal" : "status",
                        status > 128 ? status - 128 : status, g.restarts, a->max_restarts);
            rc = ddp_err_hint("the worker's own error says why; --max-restarts allows more "
                              "attempts");
            break;
        }
        if (m == -1 || nodes_waiting(a, dl) > 0) { /* restart the group */
            g.restarts += m == -1;
            *restarts = g.restarts;
            ddp_info("agent %s: %s: restarting the worker group (%d of %d restarts used)",
                     a->id, m == -1 ? "a worker failed" : "a node waits to join",
                     g.restarts, a->max_restarts);
            stop_workers(a, &g);
            if ((rc = rendezvous(a)) == 0)
                rc = start_workers(a, w, &g);
            continue;
        }
        update(a, beat, dl); /* keep-alive */
    }
    stop_workers(a, &g);
    /* Its run ended, failed or not: torch 1.13's launcher shuts the
     * rendezvous down (not after a signal: a crashed agent closes nothing). */
    if (a->st) {
        ddp_errsave_t *saved = ddp_err_save();
        update(a, close_op, ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S));
        ddp_err_restore(saved);
        ddp_store_free(a->st);
    }
    if (a->srv) { /* serve the others a little longer: they read the close */
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 2 * a->monitor_ns + SYNC_NS));
        ddp_store_server_stop(a->srv);
        int trc;
        ddp_sys_thread_join(sys, a->srv_th, &trc, ddp_sys_deadline_in(sys, 10 * DDP_NS_PER_S));
        ddp_store_server_free(a->srv);
    }
    free(a);
    return rc;
}
