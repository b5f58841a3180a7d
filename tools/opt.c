/* tools/opt.c — the one option parser of every ddpsim subcommand: a table
 * per subcommand over getopt_long, strict numbers, one-line errors (opt.h). */
#include "opt.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ddp/accel.h"
#include "ddp/err.h"
#include "ddp/fmt.h"
#include "ddp/host.h"
#include "ddp/sys.h"
#include "ddp/plugin.h"
#include "ddp/scenario.h"

#define OPT_VAL_BASE 256 /* getopt_long's val for table entry i: BASE + i */

int ddp_opt_bad(const char *cmd, const char *what, const char *value, const char *form)
{
    char v[1024]; /* the value as typed, its bytes that are not UTF-8 escaped */
    snprintf(v, sizeof v, "%s", value ? value : "");
    ddp_utf8_escape(v, sizeof v);
    fprintf(stderr, "ddpsim %s: bad %s \"%s\"; expected %s\n", cmd, what, v, form);
    return 2;
}

/* Text strtoll & co. would accept but a user did not mean: "", " 5". */
static int blank_or_empty(const char *s)
{
    return !s || !*s || isspace((unsigned char)s[0]);
}

int ddp_opt_int(const char *s, long long lo, long long hi, long long *out)
{
    if (blank_or_empty(s))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int ddp_opt_u64(const char *s, uint64_t lo, uint64_t *out)
{
    /* strtoull takes "-1" for 2^64-1: only digits (and one '+') here */
    if (blank_or_empty(s) || !(isdigit((unsigned char)s[0]) || s[0] == '+'))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || end == s + (s[0] == '+') || v < lo)
        return -1;
    *out = v;
    return 0;
}

int ddp_opt_num(const char *s, double lo, double hi, int lo_open, double *out)
{
    if (blank_or_empty(s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v) || v > hi || (lo_open ? !(v > lo) : !(v >= lo)))
        return -1;
    *out = v;
    return 0;
}

/* The valid form of an option's value, for messages. */
static const char *form_of(const ddp_opt_t *o, char *buf, size_t n)
{
    if (o->form)
        return o->form;
    switch (o->kind) {
    case DDP_OPT_INT:
    case DDP_OPT_LONG:
        snprintf(buf, n, "an integer %.0f..%.0f", o->lo, o->hi);
        break;
    case DDP_OPT_U64:
        if (o->lo > 0)
            snprintf(buf, n, "an integer >= %.0f", o->lo);
        else
            snprintf(buf, n, "a non-negative integer");
        break;
    case DDP_OPT_SEC:
    case DDP_OPT_NS:
        snprintf(buf, n, "seconds %s %.15g (at most %.15g)", o->ival ? ">" : ">=", o->lo,
                 o->hi);
        break;
    case DDP_OPT_STR:
        snprintf(buf, n, "a non-empty value");
        break;
    default:
        snprintf(buf, n, "a value (see --help)");
    }
    return buf;
}

/* Stores value through o: 0, or 2 after the message. */
static int store(const ddp_opt_spec_t *sp, const ddp_opt_t *o, const char *value,
                 const char *origin)
{
    char what[96], form[160];
    snprintf(what, sizeof what, "--%s", o->name);
    long long ll;
    uint64_t u;
    double d;
    int ok = 0;
    switch (o->kind) {
    case DDP_OPT_FLAG:
        *(int *)o->dst = o->ival;
        return 0;
    case DDP_OPT_HELP:
        return 0;
    case DDP_OPT_STR:
        if ((ok = value && *value))
            *(const char **)o->dst = value;
        break;
    case DDP_OPT_INT:
        if ((ok = ddp_opt_int(value, (long long)o->lo, (long long)o->hi, &ll) == 0))
            *(int *)o->dst = (int)ll;
        break;
    case DDP_OPT_LONG:
        if ((ok = ddp_opt_int(value, (long long)o->lo, (long long)o->hi, &ll) == 0))
            *(long *)o->dst = (long)ll;
        break;
    case DDP_OPT_U64:
        if ((ok = ddp_opt_u64(value, (uint64_t)o->lo, &u) == 0))
            *(uint64_t *)o->dst = u;
        break;
    case DDP_OPT_SEC:
        if ((ok = ddp_opt_num(value, o->lo, o->hi, o->ival, &d) == 0))
            *(double *)o->dst = d;
        break;
    case DDP_OPT_NS:
        if ((ok = ddp_opt_num(value, o->lo, o->hi, o->ival, &d) == 0))
            *(int64_t *)o->dst = (int64_t)llround(d * 1e9);
        break;
    case DDP_OPT_FN: {
        int frc = o->fn(value, o->dst);
        if (frc < -1) { /* the function said why, in the error context */
            const ddp_errctx_t *c = ddp_err_ctx();
            fprintf(stderr, "ddpsim %s: bad %s \"%s\": %s%s%s\n", sp->cmd, what,
                    value ? value : "", c->what, c->hint[0] ? "; hint: " : "", c->hint);
            return 2;
        }
        ok = frc == 0;
        break;
    }
    }
    if (ok)
        return 0;
    if (origin) { /* "bad --nnodes "x" (from PET_NNODES); expected ..." */
        fprintf(stderr, "ddpsim %s: bad %s \"%s\" (from %s); expected %s\n", sp->cmd,
                what, value ? value : "", origin, form_of(o, form, sizeof form));
        return 2;
    }
    return ddp_opt_bad(sp->cmd, what, value, form_of(o, form, sizeof form));
}

int ddp_opt_apply(const ddp_opt_spec_t *spec, const char *name, const char *value,
                  const char *origin)
{
    for (size_t i = 0; i < spec->nopts; i++)
        if (!strcmp(spec->opts[i].name, name))
            return store(spec, &spec->opts[i], value, origin);
    fprintf(stderr, "ddpsim %s: internal error: no option --%s\n", spec->cmd, name);
    return 2;
}

static int takes_value(const ddp_opt_t *o)
{
    return o->kind != DDP_OPT_FLAG && o->kind != DDP_OPT_HELP;
}

/* "one of --a, --b, ..." */
static void list_options(const ddp_opt_spec_t *sp, FILE *f)
{
    for (size_t i = 0; i < sp->nopts; i++)
        fprintf(f, "%s--%s", i ? ", " : "", sp->opts[i].name);
}

/* The offending argument of an unknown or ambiguous option. */
static int unknown(const ddp_opt_spec_t *sp, const char *arg)
{
    char name[128];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    snprintf(name, sizeof name, "%.*s", (int)len, arg);
    if (!strncmp(name, "--", 2) && name[2]) {
        int hits = 0;
        for (size_t i = 0; i < sp->nopts; i++)
            hits += !strncmp(sp->opts[i].name, name + 2, strlen(name + 2));
        if (hits > 1) {
            fprintf(stderr, "ddpsim %s: ambiguous option \"%s\"; expected one of", sp->cmd,
                    name);
            for (size_t i = 0, k = 0; i < sp->nopts; i++)
                if (!strncmp(sp->opts[i].name, name + 2, strlen(name + 2)))
                    fprintf(stderr, "%s --%s", k++ ? "," : "", sp->opts[i].name);
            fprintf(stderr, "\n");
            return 2;
        }
    }
    fprintf(stderr, "ddpsim %s: unknown option \"%s\"; expected one of ", sp->cmd, name);
    list_options(sp, stderr);
    fprintf(stderr, " (see ddpsim %s --help)\n", sp->cmd);
    return 2;
}

static const ddp_opt_t *by_short(const ddp_opt_spec_t *sp, int c)
{
    for (size_t i = 0; i < sp->nopts; i++)
        if (sp->opts[i].short_name && sp->opts[i].short_name == c)
            return &sp->opts[i];
    return NULL;
}

static const ddp_opt_t *by_val(const ddp_opt_spec_t *sp, int c)
{
    if (c >= OPT_VAL_BASE && (size_t)(c - OPT_VAL_BASE) < sp->nopts)
        return &sp->opts[c - OPT_VAL_BASE];
    return c > 0 && c < OPT_VAL_BASE ? by_short(sp, c) : NULL;
}

int ddp_opt_parse(const ddp_opt_spec_t *sp, int argc, char **argv, int *noperands)
{
    size_t nlong = 0;
    struct option *lo = calloc(2 * sp->nopts + 1, sizeof *lo);
    char *names = calloc(sp->nopts, 128), *shorts = calloc(2 * sp->nopts + 3, 1);
    char **ops = calloc((size_t)argc + 1, sizeof *ops);
    int nops = 0, rc = 0;
    if (!lo || !names || !shorts || !ops) {
        fprintf(stderr, "ddpsim %s: out of memory\n", sp->cmd);
        rc = 2;
        goto out;
    }
    size_t ns = 0;
    shorts[ns++] = sp->in_order ? '+' : '-'; /* '-': operands in order, as 1 */
    shorts[ns++] = ':';                       /* ':': a missing value is ':' */
    for (size_t i = 0; i < sp->nopts; i++) {
        const ddp_opt_t *o = &sp->opts[i];
        int has = takes_value(o) ? required_argument : no_argument;
        lo[nlong++] = (struct option){o->name, has, NULL, OPT_VAL_BASE + (int)i};
        char *alias = names + i * 128;
        snprintf(alias, 128, "%s", o->name);
        if (sp->underscores && strchr(alias, '-')) {
            for (char *c = alias; *c; c++)
                *c = *c == '-' ? '_' : *c;
            lo[nlong++] = (struct option){alias, has, NULL, OPT_VAL_BASE + (int)i};
        }
        if (o->short_name) {
            shorts[ns++] = o->short_name;
            if (has == required_argument)
                shorts[ns++] = ':';
        }
    }
    opterr = 0;
    optind = 0; /* glibc: start over (and read the ordering flag again) */
    int c;
    while (rc == 0 && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        char form[160];
        const ddp_opt_t *o = by_val(sp, c == ':' || c == '?' ? optopt : c);
        if (c == 1) {
            ops[nops++] = optarg;
        } else if (c == ':' && o) {
            fprintf(stderr, "ddpsim %s: --%s needs a value; expected %s\n", sp->cmd,
                    o->name, form_of(o, form, sizeof form));
            rc = 2;
        } else if (c == '?' && o && optopt >= OPT_VAL_BASE) {
            fprintf(stderr, "ddpsim %s: --%s takes no value; expected --%s alone, got "
                            "\"%s\"\n", sp->cmd, o->name, o->name, argv[optind - 1]);
            rc = 2;
        } else if (c == '?' && optopt > 0 && optopt < OPT_VAL_BASE) {
            char s[3] = {'-', (char)optopt, '\0'};
            rc = unknown(sp, s);
        } else if (c == '?' || c == ':') {
            rc = unknown(sp, argv[optind - 1]);
        } else if (o && o->kind == DDP_OPT_HELP) {
            sp->usage(stdout);
            rc = 1;
        } else if (o) {
            rc = store(sp, o, optarg, NULL);
        }
    }
    for (int i = optind; rc == 0 && i < argc; i++)
        ops[nops++] = argv[i];
    if (rc == 0 && (nops < sp->min_operands ||
                    (sp->max_operands >= 0 && nops > sp->max_operands))) {
        fprintf(stderr, "ddpsim %s: expected %s, got %d argument(s)%s%s%s (see ddpsim %s "
                        "--help)\n",
                sp->cmd, sp->operands ? sp->operands : "no arguments", nops,
                nops ? " starting with \"" : "", nops ? ops[0] : "", nops ? "\"" : "",
                sp->cmd);
        rc = 2;
    }
    if (rc == 0) {
        for (int i = 0; i < nops; i++)
            argv[1 + i] = ops[i];
        *noperands = nops;
    }
out:
    free(lo);
    free(names);
    free(shorts);
    free(ops);
    return rc;
}

int ddp_opt_writable(const char *cmd, const char *opt, const char *path)
{
    if (!path)
        return 0;
    char form[300];
    if (!strcmp(path, "-"))
        return 0;
    if (ddp_out_check(path, opt) != 0) { /* a device, FIFO, folder, link */
        fprintf(stderr, "ddpsim %s: %s\n", cmd, ddp_err_message());
        return 2;
    }
    struct stat st;
    int existed = stat(path, &st) == 0;
    FILE *f = fopen(path, "a");
    if (!f) {
        snprintf(form, sizeof form, "a file that can be written (cannot open it: %s)",
                 strerror(errno));
        return ddp_opt_bad(cmd, opt, path, form);
    }
    fclose(f);
    if (!existed)
        remove(path);
    return 0;
}

/* ---- names ddpsim knows ---- */
int ddp_opt_accel(const char *value, void *dst)
{
    if (!value || !ddp_accel_find(value))
        return -1;
    *(const char **)dst = value;
    return 0;
}

int ddp_opt_accel_or_all(const char *value, void *dst)
{
    if (value && !strcmp(value, "all")) {
        *(const char **)dst = value;
        return 0;
    }
    return ddp_opt_accel(value, dst);
}

/* A plugin's name, or a plugin library's path (loaded and registered
 * here: every run of the command, and every process a real run starts,
 * finds it by name then). */
int ddp_opt_plugin(const char *value, void *dst)
{
    const ddp_plugin_t *p = NULL;
    int rc = !value ? -1
             : ddp_plugin_is_library_path(value) ? ddp_plugin_load(NULL, value, &p)
             : (p = ddp_plugin_find(value)) ? 0 : -1; /* the form lists them */
    if (rc)
        return rc;
    *(const ddp_plugin_t **)dst = p;
    return 0;
}

int ddp_opt_plugin_name(const char *value, void *dst)
{
    const ddp_plugin_t *p = NULL;
    int rc = ddp_opt_plugin(value, &p);
    if (rc)
        return rc;
    *(const char **)dst = p->name;
    return 0;
}

int ddp_opt_dir(const char *value, void *dst)
{
    struct stat sb;
    if (!value || !*value || (stat(value, &sb) != 0 && mkdir(value, 0777) != 0) ||
        stat(value, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return -1;
    *(const char **)dst = value;
    return 0;
}

_Static_assert(DDP_SHARD_MAX == 100000, "DDP_OPT_SHARD_FORM names DDP_SHARD_MAX");

int ddp_opt_shard(const char *value, void *dst)
{
    return ddp_shard_parse(value, dst);
}

/* "one of a, b or c" into buf. */
static const char *one_of(char *buf, size_t n, size_t count,
                          const char *(*name)(size_t), const char *extra)
{
    size_t off = (size_t)snprintf(buf, n, "one of ");
    size_t total = count + (extra != NULL);
    for (size_t i = 0; i < total && off < n; i++) {
        const char *sep = i == 0 ? "" : i + 1 == total ? " or " : ", ";
        off += (size_t)snprintf(buf + off, n - off, "%s%s", sep,
                                i < count ? name(i) : extra);
    }
    return buf;
}

static const char *accel_name(size_t i) { return ddp_accel_at(i)->name; }
static const char *plugin_name(size_t i) { return ddp_plugin_at(i)->name; }

const char *ddp_opt_accel_form(int with_all)
{
    static char buf[2][256];
    return one_of(buf[!!with_all], sizeof buf[0], ddp_accel_count(), accel_name,
                  with_all ? "all" : NULL);
}

const char *ddp_opt_plugin_form(void)
{
    static char buf[512];
    return one_of(buf, sizeof buf, ddp_plugin_count(), plugin_name,
                  "a plugin library's path (./libNAME.so)");
}
