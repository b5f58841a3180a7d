# tests/hostlist/gen.awk — random SLURM hostlist expressions, one per line,
# from the grammar SLURM 22.05 and ddpsim both accept (no text after a
# name's last bracket group: SLURM 22.05 rejects that suffix, ddpsim's
# extension). Deterministic in -v seed=S; -v n=N lines (default 1000).
#   awk -v seed=1 -v n=1000 -f tests/hostlist/gen.awk
function rnd(k) { return int(rand() * k) }
function pad(v, w,   s) {
    s = sprintf("%d", v)
    while (length(s) < w)
        s = "0" s
    return s
}
function lit(allow_empty,   s, k, i, a) {
    a = "abcnxyz-_."
    k = allow_empty ? rnd(4) : 1 + rnd(4)
    s = ""
    for (i = 0; i < k; i++)
        s = s (rnd(5) ? substr(a, 1 + rnd(length(a)), 1) : rnd(10))
    return s
}
# One bracket group; sets G_COUNT to the hosts it gives.
function group(   nr, i, lo, hi, span, w, s) {
    nr = 1 + rnd(3)
    s = "["
    G_COUNT = 0
    for (i = 0; i < nr; i++) {
        lo = rnd(4) ? rnd(20) : rnd(1200)
        span = rnd(3) ? rnd(4) : rnd(12)
        hi = lo + span
        w = rnd(3) ? 0 : length(lo "") + 1 + rnd(2)
        s = s (i ? "," : "") pad(lo, w)
        if (span || rnd(2))
            s = s "-" pad(hi, rnd(4) ? 0 : length(hi "") + rnd(2))
        G_COUNT += span + 1
    }
    return s "]"
}
function element(   ng, i, s, total) {
    for (;;) {
        ng = rnd(6) ? 1 + rnd(rnd(3) ? 3 : 6) : 0
        s = lit(ng > 0 && rnd(8) == 0)
        total = 1
        for (i = 0; i < ng; i++) {
            if (i > 0)
                s = s lit(1)
            s = s group()
            total *= G_COUNT
        }
        if (total <= 400)
            return s
    }
}
BEGIN {
    srand(seed ? seed : 1)
    if (!n)
        n = 1000
    for (l = 0; l < n; l++) {
        ne = 1 + rnd(rnd(2) ? 1 : 4)
        e = ""
        for (j = 0; j < ne; j++) {
            sep = rnd(6) ? "," : (rnd(2) ? ", " : " ")
            e = e (j ? sep : "") element()
        }
        # A leading '-' would read as an option to both commands.
        if (substr(e, 1, 1) == "-")
            e = "n" e
        print e
    }
}
