/* harness/real_net.c — the network side of real runs in network
 * namespaces: one namespace per node on a bridge, nft rules for refuse,
 * reset, blackhole and partition faults, netem delays for ddpsim's own
 * processes, tbf bandwidth limits for every process, and a userspace TCP
 * proxy that delays a foreign program's store traffic (this kernel has no
 * sch_netem). Everything is done through
 * the sys seam or the `ip`, `nft` and `tc` commands it spawns. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp/err.h"
#include "ddp/host.h"
#include "ddp/plan.h"
#include "ddp/scenario.h"
#include "ddp/sys.h"
#include "real_priv.h"

int ddp__real_run_argv(ddp_sys_t *sys, char *const *argv, int quiet_fail)
{
    ddp_spawn_t sp = {.argv = argv, .env = ddp_sys_env(sys), .name = argv[0]};
    if (quiet_fail == 2)
        sp.stdout_path = sp.stderr_path = "/dev/null";
    ddp_pid_t pid;
    int st = -1, rc = ddp_sys_spawn(sys, &sp, &pid);
    if (rc == 0)
        rc = ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S));
    if (rc == 0 && st != 0 && !quiet_fail)
        rc = ddp_err_set(DDP_EUNSUPPORTED, "`%s %s %s ...` exited with status %d", argv[0],
                         argv[1] ? argv[1] : "", argv[1] && argv[2] ? argv[2] : "", st);
    return rc ? rc : st;
}



void ddp__real_ns_name(const ddp_netns_t *ns, int i, char *buf, size_t n)
{
    snprintf(buf, n, "%sn%d", ns->tag, i);
}

/* Each run's namespaces are recorded while they exist, in a file named
 * PID-TAG (the runner's pid, "nodes N" inside): a run killed by SIGKILL
 * cannot delete them, and its bridge keeps 10.213.255.254/16, which takes
 * the next run's traffic to the namespaces (a run beside 20 such bridges
 * took 132 s instead of 2). The next run sweeps the records of dead pids
 * (ddp_sys_sweep_stale_each) and what they name. */
#define NETNS_RECORDS "/run/ddpsim-netns"

static void netns_record_path(const ddp_netns_t *ns, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%ld-%s", NETNS_RECORDS, ddp_sys_pid(), ns->tag);
}

static void netns_record(const ddp_netns_t *ns, int nodes)
{
    char path[96];
    netns_record_path(ns, path, sizeof path);
    FILE *f = ddp_sys_make_dirs(NETNS_RECORDS) == 0 ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "nodes %d\n", nodes);
        fclose(f);
    }
}

/* A dead run's record: its namespaces, /etc/netns files and bridge go. */
static void netns_sweep_one(void *arg, const char *path)
{
    ddp_sys_t *sys = arg;
    const char *name = strrchr(path, '/'), *tag = name ? strchr(name, '-') : NULL;
    FILE *f = fopen(path, "r");
    int nodes = 0;
    if (!f || fscanf(f, "nodes %d", &nodes) != 1 || !tag || strlen(tag + 1) >= 16 ||
        nodes < 1 || nodes > 4096)
        nodes = 0;
    if (f)
        fclose(f);
    if (!nodes)
        return;
    ddp_netns_t dead = {.on = 1, .nodes = nodes, .hosts = 1};
    snprintf(dead.tag, sizeof dead.tag, "%s", tag + 1);
    fprintf(stderr, "ddpsim: removing the %d network namespace(s) %sn* and bridge %sbr of a "
                    "run that was killed (pid %.*s)\n", nodes, dead.tag, dead.tag,
            (int)(tag - name - 1), name + 1);
    ddp__real_netns_down(sys, &dead, NULL, 0);
}

int ddp__real_netns_sweep(ddp_sys_t *sys)
{
    return ddp_sys_sweep_stale_each(NETNS_RECORDS, "", netns_sweep_one, sys);
}

/* A namespace `ip netns del` fails on is retried for a second, then named
 * on stderr with the command that removes it (no such failure was seen
 * here; a killed run is what left namespaces behind). Returns how many
 * could not be deleted; the first one's name goes to left (the run then
 * fails on it). */
int ddp__real_netns_down(ddp_sys_t *sys, ddp_netns_t *ns, char *left, size_t left_len)
{
    int nleft = 0;
    if (!ns->on)
        return 0;
    char name[32], br[32];
    for (int i = 0; i < ns->nodes; i++) {
        ddp__real_ns_name(ns, i, name, sizeof name);
        int rc = 1;
        for (int tries = 0; rc && tries < 5; tries++) {
            if (tries)
                ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 200 * DDP_NS_PER_MS));
            rc = RUN_QUIET("ip", "netns", "del", name);
        }
        if (rc) {
            fprintf(stderr, "ddpsim: could not delete network namespace %s; remove it "
                            "with `ip netns del %s` (or `make netns-clean`)\n", name, name);
            if (!nleft++ && left)
                snprintf(left, left_len, "%s", name);
        }
    }
    for (int i = 0; ns->hosts && i < ns->nodes; i++) { /* ddp__real_netns_hosts' files */
        char path[96];
        ddp__real_ns_name(ns, i, name, sizeof name);
        snprintf(path, sizeof path, "/etc/netns/%s/hosts", name);
        remove(path);
        snprintf(path, sizeof path, "/etc/netns/%s", name);
        rmdir(path);
    }
    snprintf(br, sizeof br, "%sbr", ns->tag);
    RUN_QUIET("ip", "link", "del", br);
    char rec[96];
    netns_record_path(ns, rec, sizeof rec);
    if (!nleft)
        remove(rec);
    ns->on = ns->hosts = 0;
    return nleft;
}

void ddp__real_node_ip(int netns, int i, char *buf, size_t n)
{
    if (netns)
        snprintf(buf, n, "10.213.%d.%d", i / 250, i % 250 + 1);
    else
        snprintf(buf, n, "127.0.%d.%d", i / 250, i % 250 + 1);
}

/* A bridge and one namespace per node, each with a veth on the bridge. */
int ddp__real_netns_up(ddp_sys_t *sys, ddp_netns_t *ns, int nodes, int64_t latency_ns)
{
    ddp_rng_t r;
    ddp_rng_seed(&r, (uint64_t)ddp_sys_now(sys));
    char br[32], name[32], veth[32], cidr[40], ms[32];
    int rc = 1;
    ddp__real_netns_sweep(sys);
    /* a few tags: one may be taken by a run that was killed */
    for (int tries = 0; rc && tries < 4; tries++) {
        snprintf(ns->tag, sizeof ns->tag, "ddps%04x", (unsigned)(ddp_rng_next(&r) & 0xffff));
        snprintf(br, sizeof br, "%sbr", ns->tag);
        rc = RUN_QUIET("ip", "link", "add", br, "type", "bridge");
    }
    ns->nodes = 0;
    ns->on = rc == 0;
    if (rc)
        return ddp_err_wrap("--netns needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and "
                            "iproute2: cannot create bridge %s", br);
    netns_record(ns, nodes);
    if ((rc = RUN("ip", "link", "set", br, "up")) ||
        (rc = RUN("ip", "addr", "add", DDP_REAL_BRIDGE_ADDR "/16", "dev", br)))
        return rc;
    for (int i = 0; i < nodes; i++) {
        ddp__real_ns_name(ns, i, name, sizeof name);
        snprintf(veth, sizeof veth, "%sv%d", ns->tag, i);
        ddp__real_node_ip(1, i, cidr, sizeof cidr - 4);
        strcat(cidr, "/16");
        if ((rc = RUN("ip", "netns", "add", name)))
            return ddp_err_wrap("--netns: cannot create namespace %s (root needed)", name);
        ns->nodes = i + 1;
        if ((rc = RUN("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                      "netns", name)) ||
            (rc = RUN("ip", "link", "set", veth, "master", br, "up")) ||
            (rc = RUN("ip", "-n", name, "addr", "add", cidr, "dev", "eth0")) ||
            (rc = RUN("ip", "-n", name, "link", "set", "eth0", "up")) ||
            (rc = RUN("ip", "-n", name, "link", "set", "lo", "up")))
            return rc;
        if (latency_ns) {
            snprintf(ms, sizeof ms, "%.3fms", (double)latency_ns / 1e6);
            if ((rc = RUN("tc", "-n", name, "qdisc", "add", "dev", "eth0", "root", "netem",
                          "delay", ms)))
                return ddp_err_wrap("--netns: netem (tc qdisc ... netem) is not available");
        }
    }
    return 0;
}

int ddp__real_netns_hosts(ddp_netns_t *ns, const ddp_plan_t *p)
{
    for (int i = 0; i < ns->nodes; i++) {
        char name[32], path[96];
        ddp__real_ns_name(ns, i, name, sizeof name);
        snprintf(path, sizeof path, "/etc/netns/%s", name);
        int rc = ddp_sys_make_dirs(path);
        if (rc)
            return rc;
        ns->hosts = 1;
        snprintf(path, sizeof path, "/etc/netns/%s/hosts", name);
        FILE *f = fopen(path, "w");
        if (!f)
            return ddp_err_set(-errno, "--netns: cannot write %s: %s", path, strerror(errno));
        fprintf(f, "127.0.0.1 localhost\n");
        for (int k = 0; k < p->nnodes && k < ns->nodes; k++)
            fprintf(f, "%s %s\n", p->nodes[k].addr, p->nodes[k].host);
        if (fclose(f))
            return ddp_err_set(-EIO, "--netns: cannot write %s", path);
    }
    return 0;
}

int ddp__real_netns_ifaces(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_plan_t *p)
{
    for (int j = 0; j < p->nnet; j++) {
        const ddp_plan_net_t *e = &p->net[j];
        if (e->kind == DDP_NET_RESOLVE)
            continue;
        if (e->kind == DDP_NET_SOMAXCONN) { /* a per-namespace sysctl */
            char kv[48];
            snprintf(kv, sizeof kv, "net.core.somaxconn=%d", atoi(e->value));
            for (int i = e->node < 0 ? 0 : e->node; i < (e->node < 0 ? ns->nodes : e->node + 1);
                 i++) {
                char name[32];
                ddp__real_ns_name(ns, i, name, sizeof name);
                if (RUN_QUIET("ip", "netns", "exec", name, "sysctl", "-q", "-w", kv))
                    return ddp_err_wrap("--netns: cannot set %s in %s", kv, name);
            }
            continue;
        }
        for (int i = e->node < 0 ? 0 : e->node; i < (e->node < 0 ? ns->nodes : e->node + 1);
             i++) {
            char name[32], cidr[72], dev[64];
            ddp__real_ns_name(ns, i, name, sizeof name);
            snprintf(cidr, sizeof cidr, "%s", e->value);
            snprintf(dev, sizeof dev, "%s", e->name);
            int rc = 0, v6 = strchr(cidr, ':') != NULL;
            if (strcmp(dev, "eth0")) {
                /* a second line for the same interface finds it there */
                RUN_SILENT("ip", "-n", name, "link", "add", dev, "type", "bridge");
                rc = RUN("ip", "-n", name, "link", "set", dev, "up");
            }
            if (!rc)
                rc = v6 ? RUN("ip", "-n", name, "addr", "add", cidr, "dev", dev, "nodad")
                        : RUN("ip", "-n", name, "addr", "add", cidr, "dev", dev);
            if (rc)
                return ddp_err_wrap("--netns: cannot put %s on %s in %s", cidr, dev, name);
        }
    }
    return 0;
}

/* The tbf words after "tc ... root" for a bandwidth fault: its rate; a
 * burst of 10 ms at the rate but at least 1600 bytes (one full Ethernet
 * frame must fit in the bucket, or tbf drops it); a queue (limit) of the
 * burst plus 1 s at the rate, at least 64 KiB, so that TCP's window queues
 * rather than being dropped (the simulator serialises, never drops). */
static void tbf_words(uint64_t bps, char rate[32], char burst[32], char limit[32])
{
    uint64_t b = bps / 8 / 100, l;
    b = b < 1600 ? 1600 : b;
    l = b + bps / 8;
    l = l < 65536 ? 65536 : l;
    snprintf(rate, 32, "%llubit", (unsigned long long)bps);
    snprintf(burst, 32, "%llu", (unsigned long long)b);
    snprintf(limit, 32, "%llu", (unsigned long long)l);
}

int ddp__real_netem_probe(ddp_sys_t *sys, const ddp_netns_t *ns)
{
    char name[32];
    ddp__real_ns_name(ns, 0, name, sizeof name);
    /* tc's complaint ("Specified qdisc kind is unknown") is the answer,
     * not news: discarded. */
    if (RUN_SILENT("tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                   "1ms") != 0)
        return ddp_err_set(DDP_EUNSUPPORTED, "tc netem is not available in %s", name);
    RUN_QUIET("tc", "-n", name, "qdisc", "del", "dev", "lo", "root");
    return 0;
}

int ddp__real_link_cmd(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_fault_t *f,
                       int on_off)
{
    int failed = 0;
    for (int i = 0; i < ns->nodes; i++) {
        char veth[32], name[32], ms[32], rate[32], burst[32], limit[32];
        snprintf(veth, sizeof veth, "%sv%d", ns->tag, i);
        ddp__real_ns_name(ns, i, name, sizeof name);
        if (f->kind == DDP_FAULT_PARTITION) {
            if (f->node_set >> i & 1)
                RUN_QUIET("ip", "link", "set", veth, on_off ? "up" : "down");
            continue;
        }
        if (f->kind == DDP_FAULT_BANDWIDTH && f->node >= 0 && f->node != i)
            continue;
        if (!on_off) {
            RUN_QUIET("tc", "-n", name, "qdisc", "del", "dev", "eth0", "root");
        } else if (f->kind == DDP_FAULT_DELAY) {
            snprintf(ms, sizeof ms, "%.3fms", (double)f->delay_ns / 1e6);
            RUN_QUIET("tc", "-n", name, "qdisc", "replace", "dev", "eth0", "root", "netem",
                      "delay", ms);
        } else {
            tbf_words(f->rate_bps, rate, burst, limit);
            failed |= RUN("tc", "-n", name, "qdisc", "replace", "dev", "eth0", "root", "tbf",
                          "rate", rate, "burst", burst, "limit", limit) != 0;
        }
    }
    return failed ? ddp_err_wrap("--netns: tc could not put the tbf of a bandwidth fault "
                                 "on eth0 (is sch_tbf available?)")
                  : 0;
}

/* ---- nft rules ---- */

/* The rule's words after "nft add rule inet ddpsim fI" for node i, or 0
 * words when the fault does not apply there. */
static int nft_words(const ddp_plan_t *p, const ddp_fault_t *f, int i, char w[][48],
                     int max)
{
    int k = 0;
    if (f->kind == DDP_FAULT_PARTITION) {
        /* Drop what leaves for the other side: both sides do it. */
        int side = (int)(f->node_set >> i & 1), others = 0;
        for (int j = 0; j < p->nnodes; j++)
            others += (int)(f->node_set >> j & 1) != side;
        if (!others || max < 5)
            return 0;
        snprintf(w[k++], 48, "ip");
        snprintf(w[k++], 48, "daddr");
        snprintf(w[k++], 48, "@set"); /* the other side's addresses: ddp__real_nft */
        snprintf(w[k++], 48, "counter"); /* the fault's hits (ddp__real_nft_hits) */
        snprintf(w[k++], 48, "drop");
        return k;
    }
    if (f->node >= 0 && f->node != i)
        return 0;
    if (f->peer_node >= 0) {
        snprintf(w[k++], 48, "ip");
        snprintf(w[k++], 48, "daddr");
        snprintf(w[k++], 48, "%s", p->nodes[f->peer_node].addr);
    }
    if (f->port) {
        snprintf(w[k++], 48, "tcp");
        snprintf(w[k++], 48, "dport");
        snprintf(w[k++], 48, "%u", (unsigned)f->port);
    } else {
        snprintf(w[k++], 48, "meta");
        snprintf(w[k++], 48, "l4proto");
        snprintf(w[k++], 48, "tcp");
    }
    snprintf(w[k++], 48, "ct");
    snprintf(w[k++], 48, "state");
    snprintf(w[k++], 48, "new");
    snprintf(w[k++], 48, "counter"); /* the fault's hits (ddp__real_nft_hits) */
    if (f->kind == DDP_FAULT_BLACKHOLE) {
        snprintf(w[k++], 48, "drop");
    } else { /* refuse, reset: the SYN is answered with a reset */
        snprintf(w[k++], 48, "reject");
        snprintf(w[k++], 48, "with");
        snprintf(w[k++], 48, "tcp");
        snprintf(w[k++], 48, "reset");
    }
    return k;
}

int ddp__real_nft(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_plan_t *p, int fault,
                  int on)
{
    const ddp_fault_t *f = &p->faults[fault];
    char chain[16], name[32];
    snprintf(chain, sizeof chain, "f%d", fault);
    int failed = 0;
    for (int i = 0; i < ns->nodes && i < p->nnodes; i++) {
        char w[16][48];
        int k = nft_words(p, f, i, w, 16);
        if (!k)
            continue;
        ddp__real_ns_name(ns, i, name, sizeof name);
        if (!on) {
            failed |= RUN_QUIET("ip", "netns", "exec", name, "nft", "delete", "table", "inet",
                                chain) != 0;
            continue;
        }
        /* One table per fault: deleting it takes its chain and rule along. */
        if (RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "table", "inet", chain) ||
            RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "chain", "inet", chain, "out",
                      "{", "type", "filter", "hook", "output", "priority", "0", ";", "}")) {
            failed = 1;
            continue;
        }
        char *argv[40];
        int a = 0;
        char set[2048] = "";
        argv[a++] = "ip", argv[a++] = "netns", argv[a++] = "exec", argv[a++] = name;
        argv[a++] = "nft", argv[a++] = "add", argv[a++] = "rule", argv[a++] = "inet";
        argv[a++] = chain, argv[a++] = "out";
        for (int j = 0; j < k; j++) {
            if (!strcmp(w[j], "@set")) { /* the partition's other side */
                int side = (int)(f->node_set >> i & 1), members = 0;
                size_t off = snprintf(set, sizeof set, "{ ");
                for (int x = 0; x < p->nnodes && off + 48 < sizeof set; x++)
                    if ((int)(f->node_set >> x & 1) != side)
                        off += (size_t)snprintf(set + off, sizeof set - off, "%s%s",
                                                members++ ? ", " : "", p->nodes[x].addr);
                snprintf(set + off, sizeof set - off, " }");
                argv[a++] = set;
            } else {
                argv[a++] = w[j];
            }
        }
        argv[a] = NULL;
        failed |= ddp__real_run_argv(sys, argv, 0) != 0;
    }
    return failed ? ddp_err_set(DDP_EUNSUPPORTED, "nft could not %s the rules of fault %s "
                                                  "(line %d): is nftables installed?",
                                on ? "add" : "delete", ddp_fault_kind_name(f->kind),
                                p->fault_line[fault])
                  : 0;
}

/* Runs argv with its stdout in scratch and sums the number after each
 * `key` in that output; with `section`, only the keys in the lines from
 * one that names section up to the next line that names `qdisc ` (tc -s
 * prints one qdisc's counters under its line). */
static long long capture_sum(ddp_sys_t *sys, char **argv, const char *scratch,
                             const char *section, const char *key)
{
    ddp_spawn_t sp = {.argv = argv, .env = ddp_sys_env(sys), .name = argv[0],
                      .stdout_path = scratch, .stderr_path = "/dev/null"};
    ddp_pid_t pid;
    int st = -1;
    if (ddp_sys_spawn(sys, &sp, &pid) ||
        ddp_sys_wait(sys, pid, &st, ddp_sys_deadline_in(sys, 30 * DDP_NS_PER_S)) || st) {
        remove(scratch);
        return 0;
    }
    long long sum = 0;
    int in = section == NULL;
    FILE *f = fopen(scratch, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (section && strstr(line, "qdisc "))
            in = strstr(line, section) != NULL;
        for (const char *c = in ? strstr(line, key) : NULL; c; c = strstr(c + 1, key))
            sum += strtoll(c + strlen(key), NULL, 10);
    }
    if (f)
        fclose(f);
    remove(scratch);
    return sum;
}

int ddp__real_silence(ddp_sys_t *sys, const ddp_netns_t *ns, int node, int fault)
{
    char table[16], name[32];
    snprintf(table, sizeof table, "c%d", fault);
    ddp__real_ns_name(ns, node, name, sizeof name);
    if (RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "table", "inet", table) ||
        RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "chain", "inet", table, "out", "{",
                  "type", "filter", "hook", "output", "priority", "0", ";", "policy", "drop",
                  ";", "}") ||
        RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "chain", "inet", table, "in", "{",
                  "type", "filter", "hook", "input", "priority", "0", ";", "policy", "drop",
                  ";", "}"))
        return ddp_err_set(DDP_EUNSUPPORTED, "nft could not drop node %d's traffic in %s "
                           "(is nftables installed?): its processes are killed, and their "
                           "peers see the sockets close", node, name);
    return 0;
}

long long ddp__real_nft_hits(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_plan_t *p,
                             int fault, const char *scratch)
{
    char chain[16], name[32];
    snprintf(chain, sizeof chain, "f%d", fault);
    long long packets = 0;
    for (int i = 0; i < ns->nodes && i < p->nnodes; i++) {
        char w[16][48];
        if (!nft_words(p, &p->faults[fault], i, w, 16))
            continue;
        ddp__real_ns_name(ns, i, name, sizeof name);
        char *argv[] = {"ip", "netns", "exec", name, "nft", "list", "table", "inet", chain, NULL};
        packets += capture_sum(sys, argv, scratch, NULL, "counter packets ");
    }
    return packets;
}

long long ddp__real_link_hits(ddp_sys_t *sys, const ddp_netns_t *ns, const ddp_fault_t *f,
                              const char *scratch)
{
    /* netem delays every packet it sends ("Sent B bytes P pkt": P follows
     * "bytes "); tbf's overlimits are the packets that found its bucket
     * empty and waited behind the limit */
    int delay = f->kind == DDP_FAULT_DELAY;
    long long hits = 0;
    for (int i = 0; i < ns->nodes; i++) {
        if (!delay && f->node >= 0 && f->node != i)
            continue;
        char name[32];
        ddp__real_ns_name(ns, i, name, sizeof name);
        char *argv[] = {"tc", "-s", "-n", name, "qdisc", "show", "dev", "eth0", NULL};
        hits += capture_sum(sys, argv, scratch, delay ? "qdisc netem" : "qdisc tbf",
                            delay ? "bytes " : "overlimits ");
    }
    return hits;
}

/* ---- the delay proxy ---- */

#define PROXY_CONNS 256
#define PROXY_CHUNK 65536

typedef struct chunk {
    struct chunk *next;
    int64_t due;
    size_t len, off;
    char data[];
} chunk_t;

typedef struct pconn {
    int fd[2];       /* 0: the client, 1: the store */
    chunk_t *q[2];   /* q[d]: read from fd[d], to be written to fd[1 - d] */
    chunk_t *tail[2];
    int eof[2];
    int node;        /* the client's node (-1 unknown) */
} pconn_t;

struct ddp_real_proxy {
    ddp_sys_t *sys;
    const ddp_plan_t *p;
    int64_t t0;
    int lfd;           /* -1 until the store listens (see proxy_main) */
    ddp_addr_t listen; /* its port chosen at start */
    ddp_addr_t target;
    volatile int stop;
    ddp_thread_t th;
    int running;
    pconn_t c[PROXY_CONNS];
    int n;
    /* on[i]: the runner's view of fault i's window (ddp__real_proxy_set);
     * hits[i]: the chunks it delayed, read once the thread is joined */
    unsigned char on[DDP_SCN_MAX_FAULTS];
    long long hits[DDP_SCN_MAX_FAULTS];
};

/* One way's delay now, for a client on `node`: the base latency and every
 * delay fault whose window the runner has open and that aims at that node
 * (or at every node); each such fault counts the chunk as a hit. */
static int64_t proxy_delay(ddp_real_proxy_t *x, int node)
{
    int64_t d = x->p->latency_ns;
    for (int i = 0; i < x->p->nfaults && i < DDP_SCN_MAX_FAULTS; i++) {
        const ddp_fault_t *f = &x->p->faults[i];
        if (f->kind == DDP_FAULT_DELAY && __atomic_load_n(&x->on[i], __ATOMIC_ACQUIRE) &&
            (f->node < 0 || f->node == node)) {
            d += f->delay_ns;
            x->hits[i]++;
        }
    }
    return d;
}

void ddp__real_proxy_set(ddp_real_proxy_t *x, int fault, int on)
{
    if (x && fault >= 0 && fault < DDP_SCN_MAX_FAULTS)
        __atomic_store_n(&x->on[fault], (unsigned char)(on != 0), __ATOMIC_RELEASE);
}

static void pconn_close(ddp_real_proxy_t *x, int i)
{
    pconn_t *c = &x->c[i];
    for (int d = 0; d < 2; d++) {
        ddp_sys_close(x->sys, c->fd[d]);
        while (c->q[d]) {
            chunk_t *k = c->q[d];
            c->q[d] = k->next;
            free(k);
        }
    }
    x->c[i] = x->c[--x->n];
}

static void proxy_accept(ddp_real_proxy_t *x)
{
    ddp_addr_t peer;
    int fd = ddp_sys_accept(x->sys, x->lfd, &peer, 0);
    if (fd < 0)
        return;
    int up = x->n < PROXY_CONNS
                 ? ddp_sys_connect(x->sys, &x->target, ddp_sys_deadline_in(x->sys, 2 * DDP_NS_PER_S))
                 : -EMFILE;
    if (up < 0) { /* the client sees what a refused store looks like */
        ddp_sys_close(x->sys, fd);
        return;
    }
    pconn_t *c = &x->c[x->n++];
    memset(c, 0, sizeof *c);
    c->fd[0] = fd;
    c->fd[1] = up;
    c->node = -1;
    char host[DDP_ADDR_STRLEN];
    ddp_addr_format_host(&peer, host, sizeof host);
    for (int i = 0; i < x->p->nnodes; i++)
        if (!strcmp(x->p->nodes[i].addr, host))
            c->node = i;
}

/* Reads what fd[d] has into a chunk due after the delay. 0, or -1 when
 * the connection is done with. */
static int pconn_read(ddp_real_proxy_t *x, pconn_t *c, int d)
{
    chunk_t *k = malloc(sizeof *k + PROXY_CHUNK);
    if (!k)
        return -1;
    ssize_t r = ddp_sys_recv(x->sys, c->fd[d], k->data, PROXY_CHUNK, 0);
    if (r <= 0) {
        free(k);
        if (r == -EAGAIN || r == DDP_ETIMEOUT)
            return 0;
        c->eof[d] = 1;
        return r == 0 ? 0 : -1;
    }
    k->next = NULL;
    k->len = (size_t)r;
    k->off = 0;
    k->due = ddp_sys_now(x->sys) + proxy_delay(x, c->node);
    if (c->tail[d])
        c->tail[d]->next = k;
    else
        c->q[d] = k;
    c->tail[d] = k;
    return 0;
}

/* Writes the due chunks read from fd[d] to fd[1 - d]. */
static int pconn_write(ddp_real_proxy_t *x, pconn_t *c, int d)
{
    int64_t now = ddp_sys_now(x->sys);
    while (c->q[d] && c->q[d]->due <= now) {
        chunk_t *k = c->q[d];
        ssize_t w = ddp_sys_send(x->sys, c->fd[1 - d], k->data + k->off, k->len - k->off, 0);
        if (w == -EAGAIN || w == DDP_ETIMEOUT)
            return 0;
        if (w < 0)
            return -1;
        k->off += (size_t)w;
        if (k->off < k->len)
            return 0;
        c->q[d] = k->next;
        if (!c->q[d])
            c->tail[d] = NULL;
        free(k);
    }
    return 0;
}

/* 1 once the store behind the proxy accepts a connection. Until then the
 * proxy does not listen, so a client's connect is refused (and retried,
 * as torch retries a refused connect) instead of being accepted here and
 * reset once the store turns out not to be there: torch gives up on a
 * reset. */
static int store_up(ddp_real_proxy_t *x)
{
    int fd = ddp_sys_connect(x->sys, &x->target,
                             ddp_sys_deadline_in(x->sys, 200 * DDP_NS_PER_MS));
    if (fd < 0)
        return 0;
    ddp_sys_close(x->sys, fd);
    x->lfd = ddp_sys_listen(x->sys, &x->listen, 128);
    return x->lfd >= 0;
}

static int proxy_main(ddp_sys_t *sys, void *arg)
{
    ddp_real_proxy_t *x = arg;
    ddp_pollfd_t pf[1 + 2 * PROXY_CONNS];
    while (!x->stop && x->lfd < 0 && !store_up(x))
        ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 50 * DDP_NS_PER_MS));
    while (!x->stop) {
        int64_t now = ddp_sys_now(sys), wake = now + 20 * DDP_NS_PER_MS;
        int n = 0;
        pf[n++] = (ddp_pollfd_t){.fd = x->lfd, .events = DDP_POLLIN};
        for (int i = 0; i < x->n; i++)
            for (int d = 0; d < 2; d++) {
                pconn_t *c = &x->c[i];
                short ev = c->eof[d] ? 0 : DDP_POLLIN;
                const chunk_t *due = c->q[1 - d];
                if (due && due->due <= now)
                    ev |= DDP_POLLOUT;
                else if (due && due->due < wake)
                    wake = due->due;
                pf[n++] = (ddp_pollfd_t){.fd = c->fd[d], .events = ev};
            }
        if (ddp_sys_poll(sys, pf, n, wake) < 0)
            ddp_sys_sleep_until(sys, ddp_sys_deadline_in(sys, 5 * DDP_NS_PER_MS));
        for (int i = x->n - 1; i >= 0; i--) {
            pconn_t *c = &x->c[i];
            int bad = 0;
            for (int d = 0; d < 2 && !bad; d++) {
                short re = pf[1 + 2 * i + d].revents;
                if (re & (DDP_POLLIN | DDP_POLLHUP | DDP_POLLERR))
                    bad = pconn_read(x, c, d);
            }
            for (int d = 0; d < 2 && !bad; d++)
                bad = pconn_write(x, c, d);
            /* a side that ended ends the other once its data went out */
            if (bad || ((c->eof[0] || c->eof[1]) && !c->q[0] && !c->q[1]))
                pconn_close(x, i);
        }
        if (pf[0].revents & DDP_POLLIN)
            proxy_accept(x);
    }
    while (x->n)
        pconn_close(x, x->n - 1);
    return 0;
}

int ddp__real_proxy_start(ddp_sys_t *sys, const ddp_plan_t *p, int64_t t0,
                          const ddp_addr_t *listen, const ddp_addr_t *target,
                          ddp_real_proxy_t **out, uint16_t *port)
{
    ddp_real_proxy_t *x = calloc(1, sizeof *x);
    if (!x)
        return ddp_err_set(-ENOMEM, "out of memory");
    x->sys = sys;
    x->p = p;
    x->t0 = t0;
    x->target = *target;
    x->listen = *listen;
    x->lfd = -1;
    /* The port is fixed now (the nft rules name it); it is listened on
     * once the store is up. */
    int rc = ddp_sys_free_port(sys, &x->listen.port);
    if (rc == 0)
        rc = ddp_sys_thread_start(sys, proxy_main, x, "delay-proxy", &x->th);
    if (rc) {
        free(x);
        return ddp_err_wrap("the delay proxy in front of the store");
    }
    x->running = 1;
    *port = x->listen.port;
    *out = x;
    return 0;
}

void ddp__real_proxy_stop(ddp_real_proxy_t *x, long long *hits, int n)
{
    if (!x)
        return;
    x->stop = 1;
    int joined = !x->running ||
                 ddp_sys_thread_join(x->sys, x->th, NULL,
                                     ddp_sys_deadline_in(x->sys, 5 * DDP_NS_PER_S)) == 0;
    for (int i = 0; joined && hits && i < n && i < DDP_SCN_MAX_FAULTS; i++)
        if (hits[i] >= 0 && x->p->faults[i].kind == DDP_FAULT_DELAY)
            hits[i] += x->hits[i];
    if (x->lfd >= 0)
        ddp_sys_close(x->sys, x->lfd);
    free(x);
}

int ddp__real_dnat(ddp_sys_t *sys, const ddp_netns_t *ns, int node, const char *master,
                   uint16_t master_port, uint16_t proxy_port)
{
    char name[32], mp[16], to[48];
    ddp__real_ns_name(ns, node, name, sizeof name);
    snprintf(mp, sizeof mp, "%u", (unsigned)master_port);
    snprintf(to, sizeof to, "%s:%u", DDP_REAL_BRIDGE_ADDR, (unsigned)proxy_port);
    if (RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "table", "ip", "ddpsim_proxy") ||
        RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "chain", "ip", "ddpsim_proxy",
                  "out", "{", "type", "nat", "hook", "output", "priority", "-100", ";", "}") ||
        RUN_QUIET("ip", "netns", "exec", name, "nft", "add", "rule", "ip", "ddpsim_proxy",
                  "out", "ip", "daddr", (char *)master, "tcp", "dport", mp, "dnat", "to", to))
        return ddp_err_set(DDP_EUNSUPPORTED, "nft could not send node %d's store traffic "
                                             "through the delay proxy (nat): is nftables "
                                             "installed?", node);
    return 0;
}
