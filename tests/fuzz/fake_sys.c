/* tests/fuzz/fake_sys.c — see fake_sys.h. Socket calls answer as a
 * non-blocking socket would (EAGAIN when there is nothing to do): the
 * server calls every one with a deadline of "now" and polls to wait. */
#include "fake_sys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ddp/env.h"

static fake_sys_t *F(ddp_sys_t *s) { return (fake_sys_t *)s; }

static fake_conn_t *conn_of(ddp_sys_t *s, int fd)
{
    int i = fd - FAKE_FD0;
    if (i < 0 || i >= FAKE_MAX_CONNS || !F(s)->conns[i].accepted ||
        F(s)->conns[i].server_closed)
        return NULL;
    return &F(s)->conns[i];
}

static int64_t fk_now(ddp_sys_t *s) { return F(s)->now; }

static int fk_sleep_until(ddp_sys_t *s, int64_t deadline)
{
    if (deadline > F(s)->now && deadline != DDP_DEADLINE_NEVER)
        F(s)->now = deadline;
    return 0;
}

static int fk_resolve(ddp_sys_t *s, const char *host, uint16_t port, ddp_addr_t *out,
                      int max)
{
    (void)s, (void)host;
    if (max < 1)
        return 0;
    return ddp_addr_parse("127.0.0.1", port, out) == 0 ? 1 : -EINVAL;
}

static int fk_hostname(ddp_sys_t *s, char *buf, size_t n)
{
    (void)s;
    if (n < 5)
        return -ENAMETOOLONG;
    memcpy(buf, "fake", 5);
    return 0;
}

static int fk_listen(ddp_sys_t *s, const ddp_addr_t *a, int backlog)
{
    (void)s, (void)a, (void)backlog;
    return FAKE_LISTEN_FD;
}

static int fk_accept(ddp_sys_t *s, int fd, ddp_addr_t *peer, int64_t deadline)
{
    (void)deadline;
    if (fd != FAKE_LISTEN_FD)
        return -EBADF;
    for (int i = 0; i < FAKE_MAX_CONNS; i++) {
        fake_conn_t *c = &F(s)->conns[i];
        if (c->used && !c->accepted) {
            c->accepted = 1;
            char ip[32] = "10.0.0.";
            ip[7] = (char)('1' + i);
            ip[8] = '\0';
            ddp_addr_parse(ip, (uint16_t)(40000 + i), peer);
            return FAKE_FD0 + i;
        }
    }
    return -EAGAIN;
}

static int fk_connect(ddp_sys_t *s, const ddp_addr_t *a, int64_t deadline)
{
    (void)s, (void)a, (void)deadline;
    return -ECONNREFUSED;
}

static ssize_t fk_send(ddp_sys_t *s, int fd, const void *buf, size_t n, int64_t deadline)
{
    (void)buf, (void)deadline;
    fake_conn_t *c = conn_of(s, fd);
    if (!c)
        return -EBADF;
    if (c->reset)
        return -ECONNRESET;
    if (c->window == 0)
        return -EAGAIN;
    size_t w = n < c->window ? n : c->window;
    c->window -= w;
    c->received += w;
    return (ssize_t)w;
}

static ssize_t fk_recv(ddp_sys_t *s, int fd, void *buf, size_t n, int64_t deadline)
{
    (void)deadline;
    fake_conn_t *c = conn_of(s, fd);
    if (!c)
        return -EBADF;
    if (c->reset)
        return -ECONNRESET;
    size_t left = c->in_len - c->in_off;
    if (left == 0)
        return c->eof ? 0 : -EAGAIN;
    size_t r = n < left ? n : left;
    memcpy(buf, c->in + c->in_off, r);
    c->in_off += r;
    c->recvs++;
    return (ssize_t)r;
}

static int fk_poll(ddp_sys_t *s, ddp_pollfd_t *fds, int nfds, int64_t deadline)
{
    int ready = 0;
    for (int i = 0; i < nfds; i++) {
        ddp_pollfd_t *p = &fds[i];
        p->revents = 0;
        if (p->fd == FAKE_LISTEN_FD) {
            for (int k = 0; k < FAKE_MAX_CONNS; k++)
                if (F(s)->conns[k].used && !F(s)->conns[k].accepted && (p->events & DDP_POLLIN))
                    p->revents = DDP_POLLIN;
        } else {
            fake_conn_t *c = conn_of(s, p->fd);
            if (!c) {
                p->revents = DDP_POLLERR;
            } else {
                if ((p->events & DDP_POLLIN) && (c->in_off < c->in_len || c->eof || c->reset))
                    p->revents |= DDP_POLLIN;
                if (c->eof || c->reset)
                    p->revents |= DDP_POLLHUP;
                if ((p->events & DDP_POLLOUT) && (c->window > 0 || c->reset))
                    p->revents |= DDP_POLLOUT;
            }
        }
        ready += p->revents != 0;
    }
    if (!ready)
        fk_sleep_until(s, deadline); /* nothing happens until the deadline */
    return ready;
}

static int fk_close(ddp_sys_t *s, int fd)
{
    if (fd == FAKE_LISTEN_FD)
        return 0;
    fake_conn_t *c = conn_of(s, fd);
    if (!c)
        return -EBADF;
    c->server_closed = 1;
    return 0;
}

static int fk_local_addr(ddp_sys_t *s, int fd, ddp_addr_t *out)
{
    (void)s, (void)fd;
    return ddp_addr_parse("0.0.0.0", 29500, out);
}

static int fk_somaxconn(ddp_sys_t *s)
{
    (void)s;
    return 128;
}

static int fk_spawn(ddp_sys_t *s, const ddp_spawn_t *w, ddp_pid_t *pid)
{
    (void)s, (void)w, (void)pid;
    return -ENOSYS;
}

static int fk_wait(ddp_sys_t *s, ddp_pid_t pid, int *st, int64_t deadline)
{
    (void)s, (void)pid, (void)st, (void)deadline;
    return -ECHILD;
}

static int fk_kill(ddp_sys_t *s, ddp_pid_t pid, int sig)
{
    (void)s, (void)pid, (void)sig;
    return -ESRCH;
}

static int fk_thread_start(ddp_sys_t *s, ddp_thread_fn fn, void *arg, const char *name,
                           ddp_thread_t *out)
{
    (void)s, (void)fn, (void)arg, (void)name, (void)out;
    return -ENOSYS;
}

static int fk_thread_join(ddp_sys_t *s, ddp_thread_t th, int *rc, int64_t deadline)
{
    (void)s, (void)th, (void)rc, (void)deadline;
    return -ESRCH;
}

static int fk_read_file(ddp_sys_t *s, const char *path, char **data, size_t *len)
{
    (void)path;
    fake_sys_t *f = (fake_sys_t *)s;
    if (!f->file)
        return -ENOENT;
    if (!(*data = malloc(f->file_len + 1)))
        return -ENOMEM;
    memcpy(*data, f->file, f->file_len);
    (*data)[f->file_len] = '\0';
    *len = f->file_len;
    return 0;
}

static void fk_destroy(ddp_sys_t *s) { (void)s; /* fake_sys_free */ }

static const ddp_sys_ops_t fake_ops = {
    .name = "fake",
    .now = fk_now,
    .sleep_until = fk_sleep_until,
    .resolve = fk_resolve,
    .hostname = fk_hostname,
    .listen = fk_listen,
    .accept = fk_accept,
    .connect = fk_connect,
    .send = fk_send,
    .recv = fk_recv,
    .poll = fk_poll,
    .close = fk_close,
    .local_addr = fk_local_addr,
    .somaxconn = fk_somaxconn,
    .spawn = fk_spawn,
    .wait = fk_wait,
    .kill = fk_kill,
    .thread_start = fk_thread_start,
    .thread_join = fk_thread_join,
    .read_file = fk_read_file,
    .destroy = fk_destroy,
};

fake_sys_t *fake_sys_new(void)
{
    fake_sys_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->sys.ops = &fake_ops;
    f->sys.env = ddp_env_new();
    f->now = DDP_NS_PER_S; /* not 0: some code reads 0 as "unset" */
    if (!f->sys.env) {
        free(f);
        return NULL;
    }
    return f;
}

void fake_sys_free(fake_sys_t *f)
{
    if (!f)
        return;
    for (int i = 0; i < FAKE_MAX_CONNS; i++)
        free(f->conns[i].in);
    ddp_env_free(f->sys.env);
    free(f);
}

int fake_connect(fake_sys_t *f)
{
    for (int i = 0; i < FAKE_MAX_CONNS; i++)
        if (!f->conns[i].used) {
            f->conns[i].used = 1;
            return i;
        }
    return -1;
}

void fake_send(fake_sys_t *f, int i, const void *p, size_t n)
{
    fake_conn_t *c = &f->conns[i];
    if (c->eof || c->reset || !n)
        return;
    if (c->in_len + n > c->in_cap) {
        size_t cap = (c->in_len + n) * 2;
        uint8_t *b = realloc(c->in, cap);
        if (!b)
            return;
        c->in = b;
        c->in_cap = cap;
    }
    memcpy(c->in + c->in_len, p, n);
    c->in_len += n;
}
