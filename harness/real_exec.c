/* harness/real_exec.c — foreign programs (a user's real PyTorch job, say)
 * as the processes of a real run: finding the program, and turning a
 * process's exit status and stderr into an outcome of the same classes the
 * simulator reports (docs/real-runs.md, "Foreign programs").
 *
 * The rules below are the one table of what torch's messages (1.13, and
 * 2.11 where it words them otherwise) mean; the first rule whose text
 * occurs in the process's exception line wins. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ddp/env.h"
#include "ddp/err.h"
#include "ddp/real.h"
#include "real_priv.h"

typedef struct rule {
    const char *text; /* occurs in the exception line (case-insensitive) */
    int code;         /* the outcome's code: its class is ddp_scn_error_class(code) */
} rule_t;

/* torch 1.13 (TCPStore, ProcessGroupGloo, env:// rendezvous), as seen here:
 *   bind on a taken MASTER_PORT: "... failed to bind to [::]:P (errno: 98 -
 *     Address already in use)"
 *   a master that never listens: "TimeoutError: The client socket has timed
 *     out after Ns while trying to connect to (A, P)."
 *   ranks missing at the store: "RuntimeError: Socket Timeout"
 *   a peer dead in a collective: "... Timed out waiting Nms for send
 *     operation to complete" or "Connection reset by peer"
 *   a bad or missing variable: "ValueError: Error initializing
 *     torch.distributed using env:// rendezvous: environment variable RANK
 *     expected, but not set"
 * torch 2.11 (run on the GPU machine, docs/real-runs.md):
 *   ranks missing at the store: "torch.distributed.DistStoreError: Timed out
 *     after 16 seconds waiting for clients. 3/4 clients joined."
 *   the store went away under a client: "torch.distributed.DistNetworkError:
 *     Failed to recv, got 0 bytes. Connection was likely closed. Did the
 *     remote server shutdown or crash?" */
static const rule_t rules[] = {
    /* torch's elastic agent (torch.distributed.run): a later round of a
     * rendezvous another agent shut down; a worker group out of restarts */
    {"RendezvousClosedError", DDP_ECLOSED},
    {"ChildFailedError", DDP_EPEER_LOST},
    {"address already in use", -EADDRINUSE},
    {"errno: 98", -EADDRINUSE},
    {"environment variable", DDP_ECONFIG},
    {"ValueError", DDP_ECONFIG},
    {"KeyError", DDP_ECONFIG},
    {"timed out", DDP_ETIMEOUT},
    {"timeout", DDP_ETIMEOUT},
    {"connection reset by peer", DDP_EPEER_LOST},
    {"connection closed by peer", DDP_EPEER_LOST},
    {"broken pipe", DDP_EPEER_LOST},
    {"connection was likely closed", DDP_EPEER_LOST},
    {"failed to recv", DDP_EPEER_LOST},
    {"connection refused", DDP_EPEER_LOST},
    {"name or service not known", DDP_ENOT_FOUND},
    {"temporary failure in name resolution", DDP_ENOT_FOUND},
};

/* 1 if line (len bytes) is a Python exception line: one word ending in
 * Error or Exception, then ':' ("RuntimeError: ...",
 * "torch.distributed.DistStoreError: ..."). */
static int exception_line(const char *l, size_t len)
{
    const char *colon = memchr(l, ':', len);
    if (!colon || memchr(l, ' ', (size_t)(colon - l)))
        return 0;
    size_t w = (size_t)(colon - l);
    return (w >= 5 && !strncmp(colon - 5, "Error", 5)) ||
           (w >= 9 && !strncmp(colon - 9, "Exception", 9));
}

/* The line that says why: the last exception line, else the last
 * non-blank line. */
static void why_line(const char *text, char *out, size_t n)
{
    const char *best = NULL, *last = NULL;
    size_t best_len = 0, last_len = 0;
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        size_t lead = strspn(l, " \t\r");
        if (lead < len) {
            last = l + lead, last_len = len - lead;
            if (exception_line(l + lead, len - lead))
                best = last, best_len = last_len;
        }
        l = e ? e + 1 : l + len;
    }
    if (!best)
        best = last, best_len = last_len;
    snprintf(out, n, "%.*s", best ? (int)best_len : 0, best ? best : "");
}

int ddp__real_classify(int status, const char *stderr_text, char *message, size_t n)
{
    char line[600];
    why_line(stderr_text ? stderr_text : "", line, sizeof line);
    if (status == 0) {
        message[0] = '\0';
        return 0;
    }
    int code = DDP_EINTERNAL;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcasestr(line, rules[i].text)) {
            code = rules[i].code;
            break;
        }
    if (line[0])
        snprintf(message, n, "exit status %d: %s", status, line);
    else
        snprintf(message, n, "exit status %d, nothing on stderr", status);
    return code;
}

const char *ddp__real_program_word(const char *cmd, size_t *len)
{
    const char *c = cmd + strspn(cmd, " \t");
    /* VAR=value words before the program, as sh takes them */
    for (;;) {
        size_t w = strcspn(c, " \t");
        const char *eq = memchr(c, '=', w);
        if (!eq || eq == c || !w)
            break;
        c += w;
        c += strspn(c, " \t");
    }
    *len = strcspn(c, " \t");
    return c;
}

int ddp__real_exec_words(const char *cmd, char *buf, size_t n, char **words, int max)
{
    if (strpbrk(cmd, "'\"\\$`*?[]<>|&;()#~{}!\n\r") || n == 0)
        return 0;
    size_t used = 0;
    int k = 0;
    for (const char *c = cmd + strspn(cmd, " \t"); *c; c += strspn(c, " \t")) {
        size_t w = strcspn(c, " \t");
        if ((k == 0 && memchr(c, '=', w)) || k + 1 >= max || used + w + 1 > n)
            return 0;
        memcpy(buf + used, c, w);
        buf[used + w] = '\0';
        words[k++] = buf + used;
        used += w + 1;
        c += w;
    }
    words[k] = NULL;
    return k;
}

int ddp_real_check_exec(ddp_sys_t *sys, const char *cmd)
{
    char prog[256];
    size_t w;
    const char *c = ddp__real_program_word(cmd, &w);
    if (!w || w >= sizeof prog)
        return ddp_err_set(-ENOENT, "--exec \"%s\": no program to run", cmd);
    memcpy(prog, c, w);
    prog[w] = '\0';
    if (strchr(prog, '/')) {
        if (access(prog, X_OK) == 0)
            return 0;
        return ddp_err_set(-ENOENT, "--exec: %s: %s", prog,
                           access(prog, F_OK) ? "no such file" : "not executable");
    }
    const char *path = ddp_env_get(ddp_sys_env(sys), "PATH");
    if (!path)
        path = "/usr/bin:/bin";
    for (const char *d = path; *d;) {
        size_t dl = strcspn(d, ":");
        char full[1024];
        snprintf(full, sizeof full, "%.*s/%s", (int)dl, dl ? d : ".", prog);
        if (access(full, X_OK) == 0)
            return 0;
        d += dl;
        if (*d)
            d++;
    }
    return ddp_err_set(-ENOENT, "--exec: %s: command not found (not in PATH=%s)", prog,
                       path);
}
