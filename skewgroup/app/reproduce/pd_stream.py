"""Pd-Stream §VI: Table IV's Zipf streams, load imbalance (Fig. 8) and replication (Fig. 10).

The grid is the paper's: z in {1.0, 1.2, ..., 2.0} x n in {16, 32, 64, 128}, 10 M messages over
a universe of 10^7 keys, one source per run (the paper's LI of 10^-6 at n = 16 is one tuple out
of m / n, which a single router reaches; s routers would each add their own tuple). Every
strategy of skewgroup runs, plus Pd-Stream with the window N = 4n beside the default 2n
(docs/algorithms.md#pdstream: the paper's RF figures fit 4n better).
"""
import numpy as np

from skewgroup import STRATEGIES
from skewgroup.app.reproduce import sim
from skewgroup.app.reproduce.report import Comparison, Section, fmt, grid_figure, index, pyplot, table

KEY = "pd-stream"
Z = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
N = (16, 32, 64, 128)
MESSAGES = 10_000_000
UNIVERSE = 10**7

# Table IV: z -> (distinct keys, p_1st).
TABLE_IV = {1.0: (1.9e6, 0.059), 1.2: (563e3, 0.185), 1.4: (127e3, 0.322),
            1.6: (33.1e3, 0.437), 1.8: (10.7e3, 0.532), 2.0: (4.3e3, 0.607)}
# §VI-D (the text of Fig. 8): PKG's load imbalance at (z, n).
PKG_LI = {(1.0, 64): 0.97, (2.0, 64): 18.45, (1.6, 16): 3.85, (1.6, 128): 27.01}
# §VI-D: Pd-Stream and W-C "stabilise at 10^-6" for n = 16, 32 and "remain at 10^-5" for 64, 128.
LI_ORDER = {16: 1e-6, 32: 1e-6, 64: 1e-5, 128: 1e-5}
# §VI-E (the text of Fig. 10): replication factors at (z, n).
PD_RF = {(1.2, 16): 1.05, (1.4, 64): 1.19, (1.8, 64): 1.35, (2.0, 128): 1.74}
WC_RF = {(1.0, 16): 1.18, (2.0, 128): 7.97}
PKG_RF = {1.0: 1.15, 2.0: 1.03}          # "from approximately 1.15 to around 1.03", every n
GROUPING_US = (11.72, 21.26)             # §VI-F, Fig. 13: Pd-Stream's grouping latency (DS)
WIDE = "pdstream-4n"                     # Pd-Stream with the window N = 4n


def cells(opts):
    m = opts.m(MESSAGES)
    out = []
    for z in opts.zs(Z):
        stream = dict(kind="zipf", z=z, messages=m, universe=UNIVERSE, seed=opts.seed)
        for n in sorted(opts.ns(N), reverse=True):      # the costly cells first
            for name in sorted(STRATEGIES):
                out.append(sim.cell(stream, name, n, seed=opts.seed, tags=dict(z=z, n=n)))
            out.append(sim.cell(stream, "pdstream", n, params=dict(window=4 * n), label=WIDE,
                                seed=opts.seed, tags=dict(z=z, n=n)))
    return out


def expected_distinct(z, m=MESSAGES, universe=UNIVERSE):
    """(E[distinct keys], p_1) of m draws from the exact Zipf law over the universe."""
    p = expected_law(z, universe)
    return float(-np.expm1(-m * p).sum()), float(p[0])


def section(results, opts, out_dir):
    m = opts.m(MESSAGES)
    by = index(results, "z", "n", "label")
    zs, ns = opts.zs(Z), opts.ns(N)
    labels = sorted(STRATEGIES) + [WIDE]
    comps = []

    # Table IV, only meaningful at the paper's 10 M messages.
    stream_rows = []
    for z in zs:
        r = next(r for r in results if r["z"] == z)
        stream_rows.append([f"{z:.1f}", fmt(r["messages"]), fmt(r["distinct"]), fmt(r["p1"])])
        if m == MESSAGES and z in TABLE_IV:
            want_keys, want_p1 = TABLE_IV[z]
            law_keys, law_p1 = expected_distinct(z)
            why = (f"The exact Zipf law over 10^7 keys expects {law_keys:,.0f} distinct keys "
                   f"({law_keys / want_keys - 1:+.1%} from the table) and p1 = {law_p1:.2%}; our "
                   f"sample has {r['distinct']:,} ({r['distinct'] / law_keys - 1:+.1%} from the "
                   f"law: sampling noise) and {r['p1']:.2%}. The gap is between the law and the "
                   f"table, whose figures are cut to 2-3 digits (5.99 % printed as 5.9 %).")
            comps.append(Comparison("Table IV", f"z={z}", "stream", "distinct keys", want_keys,
                                    r["distinct"], why=why))
            comps.append(Comparison("Table IV", f"z={z}", "stream", "p1", want_p1, r["p1"],
                                    why=why))
            worst = max(abs(r["distinct"] / want_keys - 1), abs(r["p1"] / want_p1 - 1))
            comps.append(Comparison("our target", f"z={z}", "stream", "distinct keys and p1",
                                    None, worst, claim="both within 2 % of Table IV",
                                    holds=worst <= 0.02, why=why))

    for (z, n), want in PKG_LI.items():
        r = by.get((z, n, "pkg"))
        if r:
            analytic = r["p1"] * n / 2 - 1
            comps.append(Comparison(
                "Fig. 8", f"z={z}, n={n}", "pkg", "LI", want, r["li"],
                why=f"PKG's LI is set by the hottest key, p1·n/2 − 1 = {analytic:.2f} for this "
                    f"stream (docs/algorithms.md#pkg), and ours is {r['li']:.2f}: the gap is in "
                    f"the paper's measurement, not in the routing."))
    # §VI-D gives W-C's and Pd-Stream's LI as an order of magnitude per n: one row per n with
    # the worst z.
    for n in ns:
        for name in ("pdstream", "wchoices"):
            rs = [by[(z, n, name)] for z in zs if (z, n, name) in by]
            if not rs:
                continue
            worst = max(rs, key=lambda r: r["li"])
            order = LI_ORDER.get(n, 1e-5)
            one = n / worst["messages"]
            comps.append(Comparison(
                "Fig. 8", f"n={n}, worst z={worst['z']}", name, "LI", None, worst["li"],
                claim=f"order {order:.0e} (< {10 * order:.0e})", holds=worst["li"] < 10 * order,
                why=f"One tuple above the mean is n/m = {one:.1e} at this n and m; ours is "
                    f"{worst['li'] / one:.0f} tuple(s) above it."))
    rs = [by[(z, n, "pdstream")] for z in zs for n in ns if (z, n, "pdstream") in by]
    if rs:
        worst = max(rs, key=lambda r: r["li"])
        comps.append(Comparison("our target", f"all {len(rs)} cells, worst z={worst['z']}, "
                                f"n={worst['n']}", "pdstream", "LI", None, worst["li"],
                                claim="≤ 1e-4 in every cell", holds=worst["li"] <= 1e-4,
                                why=f"At {worst['messages']:,} messages one tuple is already "
                                    f"n/m = {worst['n'] / worst['messages']:.1e}."))

    for (z, n), want in PD_RF.items():
        r, wide = by.get((z, n, "pdstream")), by.get((z, n, WIDE))
        if r and wide:
            closes = abs(wide["rf"] - want) <= 0.05 * want
            why = (f"§V-B's window N = 2n splits a key as soon as it recurs within 2n tuples; "
                   f"with N = 4n ours is {wide['rf']:.2f} ({(wide['rf'] - want) / want:+.0%}). "
                   f"We keep 2n as the default and expose the window "
                   f"(docs/algorithms.md#pdstream); "
                   + ("the paper's figure fits the longer window." if closes else
                      "here the longer window does not close the gap either (next row)."))
            comps.append(Comparison("Fig. 10", f"z={z}, n={n}", "pdstream (N=2n)", "RF", want,
                                    r["rf"], why=why))
            floor = by.get((z, n, "wchoices"))
            comps.append(Comparison(
                "Fig. 10", f"z={z}, n={n}", "pdstream (N=4n)", "RF", want, wide["rf"],
                why=_tail_floor_why(z, want, floor, by.get((z, n, "pkg")))
                if floor and wide["rf"] > want else
                "The longer window splits fewer mid-frequency keys than the paper's curve."))
    for (z, n), want in WC_RF.items():
        r = by.get((z, n, "wchoices"))
        if r:
            comps.append(Comparison("Fig. 10", f"z={z}, n={n}", "wchoices", "RF", want, r["rf"],
                                    why=_wc_why(r)))
    for z, want in PKG_RF.items():
        for n in ns:
            r = by.get((z, n, "pkg"))
            if r:
                comps.append(Comparison(
                    "Fig. 10", f"z={z}, n={n}", "pkg", "RF", want, r["rf"],
                    why="The paper gives PKG's RF only as 'approximately'; PKG's RF is 1 plus the "
                        "share of keys whose two choices both got tuples, which grows with the "
                        "keys seen more than once (our stream: "
                        f"{r['distinct']:,} keys)."))
    for n in ns:
        worst = max((by[(z, n, "pdstream")]["ns_per_tuple"] for z in zs
                     if (z, n, "pdstream") in by), default=None)
        if worst is not None:
            comps.append(Comparison("Fig. 13", f"n={n}", "pdstream", "routing ns/tuple", None,
                                    worst, claim=f"{GROUPING_US[0]}–{GROUPING_US[1]} µs on Storm; "
                                    "ours must be far below (< 1 µs)", holds=worst < 1000,
                                    why="Routing was slower than 1 µs per tuple on this run."))

    s = Section(KEY, "Pd-Stream (Table IV, Fig. 8, Fig. 10)", _setup(m, opts))
    s.comparisons = comps
    s.tables.append(("Table IV streams (ours)", table(["z", "messages", "distinct keys", "p1"],
                                                      stream_rows)))
    for metric, caption in (("li", "Load imbalance LI (Fig. 8)"),
                            ("rf", "Replication factor RF (Fig. 10)"),
                            ("ns_per_tuple", "Routing ns per tuple (native, one call per source)")):
        rows = []
        for z in zs:
            for n in ns:
                rows.append([f"{z:.1f}", str(n)] + [_cell(by.get((z, n, l)), metric, z, n, l)
                                                   for l in labels])
        s.tables.append((caption, table(["z", "n"] + labels, rows)))
    s.figures += _figures(results, zs, ns, labels, by, out_dir)
    return s


def _tail_floor_why(z, want, wc, pkg):
    return (f"Even with N = 4n: most keys at z = {z} are tail keys that Pd-Stream routes on "
            f"PKG's two choices (n_k = 1); with the loads balanced to the tuple, a tail key seen "
            f"twice lands on both choices about half the time, which alone gives RF ≈ "
            f"{wc['rf']:.2f} here (our W-C, whose tail is PKG too; our PKG shows "
            f"{pkg['rf'] if pkg else float('nan'):.2f} only because its overloaded hot workers "
            f"make every tail key pick the same choice). The paper's {want} is below that floor, "
            f"which no window length reaches.")


def _wc_why(r):
    z, n, m = r["z"], r["n"], r["messages"]
    head = r["stats"].get("head_keys", 0)
    # How many of the hottest keys would have to reach min(f_k, n) workers for the paper's RF:
    # expected counts f_k from the law; keys past our head gain min(f_k, n) - 1 workers each.
    f = m * expected_law(z)[:100_000]
    want = WC_RF.get((z, n), r["rf"])
    gain = np.cumsum(np.maximum(np.minimum(f[head:], n) - 1, 0)) / r["distinct"]
    if want <= r["rf"] or gain[-1] < want - r["rf"]:
        return (f"Our W-C spreads the {head} keys whose SpaceSaving estimate reaches θ = 1/(5n) "
                f"(d-choices §III-A's head); the paper's W-C spread a different set.")
    k = head + int(np.searchsorted(gain, want - r["rf"])) + 1
    return (f"Our W-C spreads only the {head} keys whose SpaceSaving estimate reaches θ = 1/(5n) "
            f"of the stream (d-choices §III-A's head); they lift RF to {r['rf']:.2f}. RF {want} "
            f"is about {want:.0f} workers per key: on this stream the hottest ~{k:,} keys would "
            f"all have to reach min(f_k, n) workers, i.e. the paper's W-C treated keys down to "
            f"f ≈ {f[k - 1] / m:.1e} (θ ≈ 1/({m / f[k - 1] / n:.0f}n)) as hot.")


def expected_law(z, universe=UNIVERSE):
    w = np.arange(1, universe + 1, dtype=np.float64) ** -z
    return w / w.sum()


def _cell(r, metric, z, n, label):
    if r is None:
        return "—"
    text = fmt(r[metric])
    paper = None
    if metric == "li" and label == "pkg":
        paper = PKG_LI.get((z, n))
    elif metric == "rf" and label in ("pdstream", WIDE):
        paper = PD_RF.get((z, n))
    elif metric == "rf" and label == "wchoices":
        paper = WC_RF.get((z, n))
    elif metric == "rf" and label == "pkg":
        paper = PKG_RF.get(z)
    return f"{text} (paper {fmt(paper)})" if paper is not None else text


def _setup(m, opts):
    scaled = "" if m == MESSAGES else (f" **This run used {m:,} messages instead of the paper's "
                                       f"10 M; Table IV is not compared.**")
    return (f"Zipf streams over 10^7 keys (`skewgroup.streams.zipf`, exact law), {m:,} messages "
            f"each, hash seed {opts.seed}, one source, n workers; LI = (max − avg)/avg of the "
            f"final loads, RF = distinct (key, worker) pairs / distinct keys. `{WIDE}` is "
            f"Pd-Stream with the window N = 4n instead of §V-B's 2n.{scaled}")


def _figures(results, zs, ns, labels, by, out_dir):
    figs = []
    for metric, name, title, ylabel, logy, points in (
            ("li", "pd_stream_li.png", "Pd-Stream Fig. 8: load imbalance", "LI", True,
             lambda n: [(z, v, f"pkg {v}") for (z, nn), v in PKG_LI.items() if nn == n]),
            ("rf", "pd_stream_rf.png", "Pd-Stream Fig. 10: replication factor", "RF", False,
             lambda n: [(z, v, f"pd {v}") for (z, nn), v in PD_RF.items() if nn == n]
             + [(z, v, f"w-c {v}") for (z, nn), v in WC_RF.items() if nn == n])):
        panels = {f"n = {n}": {l: (list(zs), [by[(z, n, l)][metric] for z in zs])
                               for l in labels if all((z, n, l) in by for z in zs)}
                  for n in ns}
        grid_figure(panels, title, ylabel, out_dir / name, logy=logy,
                    paper_points={f"n = {n}": points(n) for n in ns},
                    floors={f"n = {n}": n / results[0]["messages"] for n in ns} if logy else None)
        figs.append((name, title + " per strategy and n (ours; ★ the paper's printed values)"))
    plt = pyplot()
    z_it = 1.4 if 1.4 in zs else zs[len(zs) // 2]
    n_it = 64 if 64 in ns else ns[-1]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    for l in labels:
        r = by.get((z_it, n_it, l))
        if r:
            floor = 0.5 / np.asarray(r["imbalance_t"], dtype=float)    # half a tuple
            ax1.plot(r["imbalance_t"], np.maximum(r["imbalance"], floor), label=l)
            load = np.sort(np.asarray(r["loads"], dtype=float))[::-1]
            ax2.plot(load / load.mean(), label=l)
    ax1.set(yscale="log", xlabel="tuples t", ylabel="I(t) = max − avg of L_w(t)/t (0 → ½ tuple)",
            title=f"I(t), z = {z_it}, n = {n_it}")
    ax2.set(xlabel="workers, most loaded first", ylabel="load / mean load",
            title=f"Loads per worker, z = {z_it}, n = {n_it}")
    ax2.set_yscale("log")
    ax1.legend(fontsize=7, ncol=2)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_dir / "pd_stream_it.png", dpi=110)
    plt.close(fig)
    figs.append(("pd_stream_it.png", f"Nasir's I(t) over the stream and the final loads per "
                                     f"worker at z = {z_it}, n = {n_it} (ours)"))
    return figs
