"""DKG §4.3 and §5: Table 1 (thresholds), Table 3 (twitter-election), the skewness-ratio
streams (Figs. 10-11) and the worker count (Fig. 12).

DKG's metrics (§4.7): StdDev of the loads in % (eq. 7), DistCost = keys held / distinct keys
(eq. 8, = RF), latency = time from the first to the last output and throughput = tuples /
latency (eq. 6). Latency and throughput come from the queueing model with every tuple queued
at the start (Storm reading a Kafka topic as fast as it can), whose makespan is then the busiest
worker's load (``makespan`` below, the model's closed form); only ratios between strategies are
compared: our time unit is one tuple's processing time.

twitter-election (5 M tuples, 68 % one key) is not public here: we stand in a stream with one
key at 68 % and a Zipf(1.0) tail whose universe is set so that SG's DistCost equals the
paper's 2.4491 (the tail's shape decides DistCost, which the paper does not describe).
The synthetic streams are the paper's: 204 country keys, one of them taking r % of the tuples.
All runs: 5 spouts (sources) and 10 workers unless Fig. 12 varies the workers.
"""
import numpy as np

from skewgroup.app.reproduce import sim
from skewgroup.app.reproduce.report import Comparison, Section, fmt, grid_figure, index, table

KEY = "dkg"
SOURCES = 5
N = 10
STRATEGIES = ("sg", "kg", "pkg", "dkg")
# Table 1: machines -> (ideal load %, threshold load %, max machines).
TABLE_1 = {5: (20.00, 24.47, 5), 10: (10.00, 13.16, 8), 20: (5.00, 7.24, 14),
           50: (2.00, 3.41, 30), 100: (1.00, 2.00, 51)}
# Table 3: twitter-election, 5 spouts, 10 workers.
TABLE_3 = {"sg": dict(latency=559_329, stddev=0.0001, distcost=2.4491, throughput=9_511),
           "kg": dict(latency=3_955_045, stddev=20.3202, distcost=1.0000, throughput=1_344),
           "pkg": dict(latency=1_941_879, stddev=12.3513, distcost=1.1647, throughput=2_739),
           "dkg": dict(latency=1_174_979, stddev=4.0972, distcost=1.2414, throughput=4_529)}
ELECTION = dict(ratio=0.68, messages=5_000_000, tail_z=1.0)
RATIOS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
COUNTRY = dict(messages=10_000_000, keys=204)
WORKERS_FIG12 = (10, 50, 100)
# Abstract and §6: against PKG, DKG improves throughput by up to 8 % (latency 7 %) at 30 %
# skewness and by up to 93 % (latency 48 %) above 80 %.
DKG_OVER_PKG = {0.3: (1.08, 0.07), 0.9: (1.93, 0.48)}


def makespan(r):
    """Every tuple queued at time 0, one tuple-time each: the busiest worker's load
    (``skewgroup.metrics.queue_model``'s batch closed form, without its per-tuple latencies)."""
    return max(r["loads"])


def election_universe(distcost=TABLE_3["sg"]["distcost"], n=N, ratio=ELECTION["ratio"],
                      messages=ELECTION["messages"], tail_z=ELECTION["tail_z"]):
    """The tail universe U for which SG's expected DistCost equals ``distcost``.

    Under SG a key seen f times lands on n (1 - (1 - 1/n)^f) workers on average; with Poisson
    counts of mean μ_k that is n (1 - e^(-μ_k / n)) over 1 - e^(-μ_k) keys seen. DistCost
    falls as U grows (more keys seen once), so bisect log U.
    """
    def expected(universe):
        w = np.arange(1, universe + 1, dtype=np.float64) ** -tail_z
        mu = messages * (1 - ratio) * w / w.sum()
        return ((n * -np.expm1(-mu / n)).sum() + n) / ((-np.expm1(-mu)).sum() + 1)

    lo, hi = 3.0, 6.5
    for _ in range(20):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected(int(10**mid)) > distcost else (lo, mid)
    return int(10 ** ((lo + hi) / 2))


def cells(opts):
    out = []
    m = opts.m(ELECTION["messages"])
    election = dict(kind="hot_tail", ratio=ELECTION["ratio"], messages=m,
                    tail_z=ELECTION["tail_z"], universe=election_universe(messages=m),
                    seed=opts.seed)
    for n in sorted(set(opts.ns(WORKERS_FIG12)) | {N}, reverse=True):
        for name in STRATEGIES:
            out.append(sim.cell(election, name, n, sources=SOURCES, seed=opts.seed,
                                tags=dict(part="election", n=n, r=0.68)))
    for r in RATIOS:
        stream = dict(kind="skewed", ratio=r, messages=opts.m(COUNTRY["messages"]),
                      keys=COUNTRY["keys"], seed=opts.seed)
        for name in STRATEGIES:
            out.append(sim.cell(stream, name, N, sources=SOURCES, seed=opts.seed,
                                tags=dict(part="country", n=N, r=r)))
    return out


def section(results, opts, out_dir):
    from skewgroup._routing._dkg import dkg_table      # the core's own Table 1

    comps = []
    t1_rows = []
    for machines, (li, ls, mx) in TABLE_1.items():
        ours = dkg_table(machines)
        t1_rows.append([str(machines), f"{li:.2f} / {ours[0]:.2f}", f"{ls:.2f} / {ours[1]:.2f}",
                        f"{mx} / {ours[2]}"])
        for metric, want, got in zip(("L_i %", "L_s %", "max machines"), (li, ls, mx), ours):
            comps.append(Comparison("Table 1", f"{machines} machines", "dkg", metric, want,
                                    float(got), why="Table 1 is a formula; a gap is a bug."))
    election = [r for r in results if r["part"] == "election"]
    country = [r for r in results if r["part"] == "country"]
    eby = index(election, "n", "label")
    sg = eby.get((N, "sg"))
    for name, want in TABLE_3.items():
        r = eby.get((N, name))
        if r is None:
            continue
        if name == "sg":
            comps.append(Comparison("Table 3", "election, n=10", name, "StdDev", None, r["stddev"],
                                    claim="≈ 0 (paper 0.0001)", holds=r["stddev"] < 0.01,
                                    why="SG should balance to the tuple."))
        else:
            comps.append(Comparison(
                "Table 3", "election, n=10", name, "StdDev", want["stddev"], r["stddev"],
                why=_stddev_why(name, r)))
        comps.append(Comparison(
            "Table 3", "election, n=10", name, "DistCost", want["distcost"], r["rf"],
            why="DistCost depends on the tail of twitter-election, which we match only through "
                "SG's DistCost; DKG spreads the keys of its Old space, and how many tail keys "
                "reach it depends on the tail we could not see."))
        if sg and name != "sg":
            paper_tp = want["throughput"] / TABLE_3["sg"]["throughput"]
            ours_tp = makespan(sg) / makespan(r)
            comps.append(Comparison(
                "Table 3", "election, n=10", name, "throughput / SG's", paper_tp, ours_tp,
                why=f"In the model throughput is set by the busiest worker alone: {name}'s holds "
                    f"{max(r['loads']) / r['messages']:.1%} of the tuples against the mean "
                    f"{1 / N:.0%}. On Storm the spouts, splitters and acking take time for every "
                    f"strategy, which kept the measured ratios closer together than the loads "
                    f"alone would."))
    ns12 = sorted({r["n"] for r in election})
    if len(ns12) > 1:
        for name in STRATEGIES:
            values = [eby[(n, name)]["stddev"] for n in ns12 if (n, name) in eby]
            if len(values) < 2:
                continue
            comps.append(Comparison(
                "Fig. 12", f"election, n={ns12}", name, "StdDev", None, values[-1],
                claim="falls as workers are added",
                holds=all(a >= b - 1e-9 for a, b in zip(values, values[1:])),
                why="With one key at 68 % the hot key's workers keep most of the load whatever "
                    "n is; the StdDev in % then stops falling."))
    cby = index(country, "r", "label")
    above = [r for r in RATIOS if r > 0.3 and (r, "dkg") in cby and (r, "pkg") in cby]
    if above:
        worst = max(above, key=lambda r: cby[(r, "dkg")]["stddev"] / cby[(r, "pkg")]["stddev"])
        ratio = cby[(worst, "dkg")]["stddev"] / cby[(worst, "pkg")]["stddev"]
        comps.append(Comparison(
            "Fig. 11b", f"r = 40-100 %, worst r={worst:.0%}", "dkg", "StdDev / PKG's", None,
            ratio, claim="below PKG's (< 1) above 30 % skew", holds=ratio < 1,
            why="DKG only scales a key out once it reached the Old space and the warm-up "
                "passed."))
    full = [r for r in RATIOS if all((r, l) in cby for l in STRATEGIES)]
    if full:
        def margin(r):
            return cby[(r, "sg")]["rf"] / max(cby[(r, l)]["rf"] for l in STRATEGIES if l != "sg")

        closest = min(full, key=margin)
        comps.append(Comparison(
            "Fig. 11c", f"every r, closest r={closest:.0%}", "sg", "DistCost / next highest",
            None, margin(closest), claim="SG the highest (≥ 1)", holds=margin(closest) >= 1,
            why="With one key left (r = 100 %) every strategy that splits it reaches as many "
                "workers as SG."))
    for r, (tp, cut) in DKG_OVER_PKG.items():
        d, p = cby.get((r, "dkg")), cby.get((r, "pkg"))
        if not (d and p):
            continue
        why = (f"Throughput = tuples / makespan and the makespan is the busiest worker's load: "
               f"PKG's busiest holds {max(p['loads']) / p['messages']:.1%} of the tuples, DKG's "
               f"{max(d['loads']) / d['messages']:.1%}. On Storm, spouts, splitters, acking and "
               f"the network cost the same for both and dilute the ratio; the model leaves them "
               f"out and shows the balance alone.")
        comps.append(Comparison("abstract", f"r={r:.0%}", "dkg", "throughput / PKG's", tp,
                                makespan(p) / makespan(d), why=why))
        comps.append(Comparison("abstract", f"r={r:.0%}", "dkg", "latency cut vs PKG", cut,
                                1 - makespan(d) / makespan(p), why=why))

    s = Section(KEY, "DKG (Tables 1, 3; Figs. 10-12)", _setup(election, country))
    s.comparisons = comps
    s.tables.append(("Table 1: paper / ours", table(["machines", "L_i %", "L_s %", "max machines"],
                                                    t1_rows)))
    rows = []
    for n in ns12:
        for name in STRATEGIES:
            r = eby.get((n, name))
            if r:
                rows.append([str(n), name, fmt(r["stddev"]), fmt(r["rf"]),
                             fmt(makespan(r)),
                             fmt(makespan(sg) / makespan(r))
                             if n == N and sg else "—"])
    s.tables.append(("election stand-in (Table 3, Fig. 12)",
                     table(["n", "strategy", "StdDev %", "DistCost", "makespan (tuple-times)",
                            "throughput / SG's"], rows)))
    crow = [[f"{r:.0%}"] + [f"{fmt(cby[(r, l)]['stddev'])} / {fmt(cby[(r, l)]['rf'])}"
                            if (r, l) in cby else "—" for l in STRATEGIES]
            for r in RATIOS if any((r, l) in cby for l in STRATEGIES)]
    s.tables.append(("Country streams (Figs. 10-11): StdDev % / DistCost",
                     table(["skewness"] + list(STRATEGIES), crow)))
    if country:
        names = [l for l in STRATEGIES if all((r, l) in cby for r in RATIOS)]

        def series(get):
            return {l: (list(RATIOS), [get(cby[(r, l)]) for r in RATIOS]) for l in names}

        panels = {"StdDev %": series(lambda c: c["stddev"]),
                  "DistCost": series(lambda c: c["rf"]),
                  "throughput (tuples per tuple-time)":
                      series(lambda c: c["messages"] / makespan(c)),
                  "latency = makespan (tuple-times)": series(makespan)}
        grid_figure(panels, f"DKG Fig. 11: 204 country keys, {SOURCES} spouts, {N} workers",
                    "", out_dir / "dkg_country.png", xlabel="skewness ratio")
        s.figures.append(("dkg_country.png", "DKG Fig. 11 on the country streams (ours)"))
    return s


def _stddev_why(name, r):
    if name == "kg":
        return ("KG's StdDev is fixed by the hot key's 68 % on one worker: ours matches the "
                "paper's within the tail's share.")
    if name == "pkg":
        return ("PKG splits the 68 % key over its two choices, 34 % each plus the tail: the "
                "formula gives 13.6 %, ours is close to it; the paper's lower value means its "
                "hot key's two workers got less of the tail.")
    return ("DKG scales a key out only after warm-up, once it is in the Old space and all its "
            "candidates are above L_s, and at most to Table 1's limit; how the 68 % key's "
            "candidates and the tail share workers decides the last few % of StdDev, and our "
            "tail is a stand-in.")


def _setup(election, country):
    text = ""
    if election:
        text += (f"election stand-in: {election[0]['messages']:,} tuples, one key at 68 %, a "
                 f"Zipf(1.0) tail ({election[0]['distinct']:,} distinct keys), {SOURCES} spouts, "
                 f"n in {sorted({r['n'] for r in election})}. ")
    if country:
        text += (f"Country streams: {country[0]['messages']:,} tuples over 204 keys, one key "
                 f"at r % of them, {SOURCES} spouts, {N} workers. ")
    from skewgroup._routing.config import make_config

    params = ", ".join(f"{k} = {v:,}" for k, v in make_config("dkg", {}).params().items())
    return text + f"DKG runs with skewgroup's defaults ({params})."
