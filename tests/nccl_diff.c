/* tests/nccl_diff.c — see nccl_diff.h. */
#include "nccl_diff.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp/sys.h"
#include "../sim/sim_priv.h"

typedef int (*uid_fn_t)(void *id); /* ncclGetUniqueId(ncclUniqueId *) */

int nd_open(void **uid_fn, char *why, size_t n)
{
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    *uid_fn = lib ? dlsym(lib, "ncclGetUniqueId") : NULL;
    if (!*uid_fn)
        snprintf(why, n, "no libnccl.so.2 here (%s)", dlerror());
    return *uid_fn != NULL;
}

/* One generated NCCL_SOCKET_IFNAME (NULL: unset) and NCCL_SOCKET_FAMILY. */
typedef struct input {
    char spec[160];
    int has_spec;
    const char *fam;
} input_t;

static void gen(ddp_rng_t *rng, input_t *in)
{
    static const char *const atoms[] = {
        "lo", "eth0", "eth", "e", "l", "lo0", "eth1", "ib", "ib0", "docker0", "docker", "en",
        "", " eth0", "eth0 ", "LO", "eth0:1234", "lo:99", "*", "e*", "eth0,", "=lo", "^lo"};
    static const char *const heads[] = {"", "", "", "^", "=", "^=", "=^", "^^", "=="};
    static const char *const fams[] = {NULL, NULL, NULL, "AF_INET", "AF_INET6", "AF_UNIX",
                                       "af_inet", ""};
    const size_t na = sizeof atoms / sizeof atoms[0];
    in->has_spec = ddp_rng_below(rng, 8) != 0;
    in->fam = fams[ddp_rng_below(rng, sizeof fams / sizeof fams[0])];
    size_t off = (size_t)snprintf(in->spec, sizeof in->spec, "%s",
                                  heads[ddp_rng_below(rng, sizeof heads / sizeof heads[0])]);
    int k = 1 + (int)ddp_rng_below(rng, 4);
    for (int i = 0; i < k && off < sizeof in->spec; i++)
        off += (size_t)snprintf(in->spec + off, sizeof in->spec - off, "%s%s", i ? "," : "",
                                atoms[ddp_rng_below(rng, na)]);
}

/* The child: this input's environment, then ncclGetUniqueId, whose
 * NCCL_DEBUG=INFO lines go up out. */
static void child(uid_fn_t fn, const input_t *in, int out)
{
    dup2(out, 1);
    dup2(out, 2);
    if (in->has_spec)
        setenv("NCCL_SOCKET_IFNAME", in->spec, 1);
    else
        unsetenv("NCCL_SOCKET_IFNAME");
    if (in->fam)
        setenv("NCCL_SOCKET_FAMILY", in->fam, 1);
    else
        unsetenv("NCCL_SOCKET_FAMILY");
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP", 1);
    unsetenv("NCCL_COMM_ID");
    char id[128];
    fn(id);
    fflush(NULL); /* NCCL's lines are stdio's (stdout) */
    _exit(0);
}

/* The child's lines (10 s at most), then the child reaped. */
static void read_child(int fd, pid_t pid, char *text, size_t n)
{
    size_t len = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 10000);
        ssize_t got = r > 0 ? read(fd, text + len, n - 1 - len) : -1;
        if (got <= 0 || (len += (size_t)got) >= n - 1)
            break;
    }
    text[len] = '\0';
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Real NCCL's pick, from a child's NCCL_DEBUG=INFO line, into name/addr
 * ("" and "" for "no socket interface found"); -1 when the child said
 * neither. */
static int real_pick(uid_fn_t fn, const input_t *in, char *name, char *addr, char *text,
                     size_t n)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        child(fn, in, pfd[1]);
    }
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return -1;
    }
    read_child(pfd[0], pid, text, n);
    close(pfd[0]);
    const char *u = strstr(text, "Bootstrap: Using ");
    name[0] = addr[0] = '\0';
    if (u && sscanf(u + 17, "%15[^:]:%63[^<\n]", name, addr) >= 1) {
        char *pct = strchr(addr, '%'); /* fe80::1%eth0: the address alone */
        if (pct)
            *pct = '\0';
        if (addr[0] == '[')
            memmove(addr, addr + 1, strlen(addr)), addr[strcspn(addr, "]")] = '\0';
        return 0;
    }
    return strstr(text, "no socket interface found") ? 0 : -1;
}

static void ours(const ddp_ifaddr_t *ifs, int nifs, const input_t *in, char *name, char *addr)
{
    int i = ddp__nccl_boot_iface(ifs, nifs, in->has_spec ? in->spec : NULL, in->fam);
    name[0] = addr[0] = '\0';
    if (i >= 0) {
        snprintf(name, 16, "%s", ifs[i].name);
        ddp_addr_format_host(&ifs[i].addr, addr, DDP_ADDR_STRLEN);
    }
}

static int one(uid_fn_t fn, const ddp_ifaddr_t *ifs, int nifs, const input_t *in,
               nd_stats_t *st)
{
    char rn[16], ra[DDP_ADDR_STRLEN], on[16], oa[DDP_ADDR_STRLEN], text[8192];
    if (real_pick(fn, in, rn, ra, text, sizeof text) != 0) {
        snprintf(st->first, sizeof st->first, "NCCL_SOCKET_IFNAME=\"%s\": the child said "
                 "neither which interface nor none: %.200s", in->spec, text);
        return -1;
    }
    ours(ifs, nifs, in, on, oa);
    st->tried++;
    st->found += rn[0] != '\0';
    if (!strcmp(rn, on) && !strcmp(ra, oa))
        return 0;
    char said[400];
    snprintf(said, sizeof said,
                 "NCCL_SOCKET_IFNAME%s%s%s NCCL_SOCKET_FAMILY%s%s: NCCL uses %s %s, ddpsim %s %s",
                 in->has_spec ? "=\"" : " unset", in->has_spec ? in->spec : "",
                 in->has_spec ? "\"" : "", in->fam ? "=" : " unset", in->fam ? in->fam : "",
                 rn[0] ? rn : "none", ra, on[0] ? on : "none", oa);
    if (!st->disagreed++)
        snprintf(st->first, sizeof st->first, "%s", said);
    if (getenv("ND_VERBOSE"))
        fprintf(stderr, "%s\n", said);
    return 0;
}

int nd_run(void *uid_fn, uint64_t seed, long count, nd_stats_t *st)
{
    ddp_sys_t *sys = ddp_sys_posix_new(NULL);
    ddp_ifaddr_t ifs[64];
    int nifs = sys ? ddp_sys_ifaddrs(sys, ifs, 64) : 0;
    if (sys)
        ddp_sys_free(sys);
    ddp_rng_t rng;
    ddp_rng_seed(&rng, seed);
    for (long i = 0; i < count; i++) {
        input_t in;
        gen(&rng, &in);
        if (one((uid_fn_t)uid_fn, ifs, nifs > 0 ? nifs : 0, &in, st) != 0)
            return -1;
    }
    return 0;
}
