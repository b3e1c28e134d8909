"""FISH §6: execution time and memory vs skew on a time-evolving ZF stream (Figs. 10, 11, 20)
and heuristic worker assignment with heterogeneous workers (Fig. 16).

§6.1's ZF stream: 10^5 keys, z in {1.0, ..., 2.0}; in every block of N tuples the first 0.8 N
follow one key ranking and the last 0.2 N another (the text prints the same law twice; we read
it as hot keys replaced). The paper uses 50 M tuples with N = 5 M; we keep its ten blocks and
scale the stream to 10 M tuples (N = 1 M) so the whole grid runs in minutes: every change point
becomes a fresh ranking (:func:`skewgroup.streams.drifting_zipf`).

"Execution time" (§6.1) is the processing time of the loads: with all tuples queued at the
start, the queueing model's makespan max_w L_w c / P_w; it is normalised to SG's, as the paper
does. Memory overhead is the keys held over all workers normalised to KG's (FG in the paper).
"""
import numpy as np

from skewgroup.app.reproduce import sim
from skewgroup.app.reproduce.report import Comparison, Section, fmt, grid_figure, index, table

KEY = "fish"
Z = (1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
N = (16, 32, 64, 128)
MESSAGES = 10_000_000
KEYS = 10**5
BLOCKS = 10
STRATEGIES = ("kg", "sg", "pkg", "dchoices", "wchoices", "fish")
HWA = "fish-hwa"         # FISH told the workers' speeds (Algorithm 3 with P_w)
# §6.2: FISH's execution time is at worst 1.32x SG's on ZF; it improves on D-C and W-C by up
# to 13.57x and 12.05x. Memory at 128 workers, normalised to FG: FISH 1.11x to 2.61x, SG 15.52x
# to 88.32x. §6.6 (Fig. 20): FISH < 16 % of SG's memory, 3.34 % at z = 1.0. §6.4 (Fig. 16):
# with half the workers twice as fast, heuristic assignment cuts execution time up to 2.61x.
FISH_VS_SG = 1.32
BEST_GAIN = {"dchoices": 13.57, "wchoices": 12.05}
MEMORY_128 = {"fish": (1.11, 2.61), "sg": (15.52, 88.32)}
FISH_OVER_SG_MEMORY = 0.16
FISH_OVER_SG_MEMORY_Z1 = 0.0334
HWA_GAIN = 2.61
TARGETS = {"dchoices": "its d choices", "wchoices": "all n workers"}


def changes(messages, blocks=BLOCKS):
    """The change points: 0.8 N and N of every block of N = messages / blocks tuples."""
    block = messages // blocks
    points = []
    for b in range(blocks):
        points += [b * block + int(0.8 * block), (b + 1) * block]
    return [p for p in points if 0 < p < messages]


def speeds(n):
    """§6.4: half of the workers process twice as fast as the others."""
    return np.where(np.arange(n) < n // 2, 1.0, 2.0)


def cells(opts):
    m = opts.m(MESSAGES)
    out = []
    for z in opts.zs(Z):
        stream = dict(kind="drift", z=z, messages=m, changes=changes(m), universe=KEYS,
                      seed=opts.seed)
        for n in sorted(opts.ns(N), reverse=True):
            for name in STRATEGIES:
                out.append(sim.cell(stream, name, n, seed=opts.seed, tags=dict(z=z, n=n)))
            # P_w of Algorithm 3 is the time per tuple (§4.2.1), so a worker twice as fast has
            # half the P_w.
            out.append(sim.cell(stream, "fish", n, label=HWA, seed=opts.seed,
                                params=dict(capacities=tuple(1.0 / speeds(n))),
                                tags=dict(z=z, n=n)))
    return out


def execution_time(r, heterogeneous=False):
    """Makespan with every tuple queued at time 0: max_w L_w / speed_w (cost 1)."""
    load = np.asarray(r["loads"], dtype=np.float64)
    return float((load / (speeds(r["workers"]) if heterogeneous else 1.0)).max())


def section(results, opts, out_dir):
    by = index(results, "z", "n", "label")
    zs = sorted({r["z"] for r in results})
    ns = sorted({r["n"] for r in results})
    comps = []
    rel = {}
    for (z, n, label), r in by.items():
        sg = by.get((z, n, "sg"))
        if sg:
            rel[(z, n, label)] = execution_time(r) / execution_time(sg)
    for n in ns:
        zn = [z for z in zs if (z, n, "fish") in rel]
        if zn:
            z = max(zn, key=lambda z: rel[(z, n, "fish")])
            comps.append(Comparison(
                "Fig. 10", f"n={n}, worst z={z}", "fish", "exec. time / SG's", None,
                rel[(z, n, "fish")], claim=f"≤ {FISH_VS_SG}",
                holds=rel[(z, n, "fish")] <= FISH_VS_SG,
                why="FISH's hot keys get d = n / 2^index candidates on the ring, so a key just "
                    "below the hottest gets n/2 workers; when the hottest keys' candidate sets "
                    "overlap, their workers end above the mean."))
    for name, want in BEST_GAIN.items():
        gains = [rel[(z, n, name)] / rel[(z, n, "fish")] for z in zs for n in ns
                 if (z, n, name) in rel and (z, n, "fish") in rel]
        if gains:
            comps.append(Comparison(
                "Fig. 10", "best (z, n)", "fish", f"{name} time / FISH's", want, max(gains),
                why=f"Execution time here is set by the final loads, and our {name} ends at "
                    f"most {max(v for k, v in rel.items() if k[2] == name):.2f}x SG's. It counts "
                    f"over the whole stream as the paper's does, so a new hot key waits θ·m / p "
                    f"tuples on its two PKG choices before it joins the head; from then on its "
                    f"tuples go to the least loaded of {TARGETS[name]}, which repays that early "
                    f"excess by the end. The paper does not say what its simulator charged "
                    f"beyond the loads."))
    if 128 in ns:
        for name, (lo, hi) in MEMORY_128.items():
            values = [by[(z, 128, name)]["rf"] for z in zs if (z, 128, name) in by]
            if values:
                why = (_fish_memory_why(by, zs) if name == "fish" else
                       f"SG puts a key on min(f_k, n) workers, so its memory grows with the "
                       f"stream: ours has {opts.m(MESSAGES):,} tuples over 10^5 keys, the "
                       f"paper's ZF 50 M.")
                comps.append(Comparison("Fig. 11", "n=128, min over z", name, "memory / KG's",
                                        lo, min(values), why=why))
                comps.append(Comparison("Fig. 11", "n=128, max over z", name, "memory / KG's",
                                        hi, max(values), why=why))
        ratios = {z: by[(z, 128, "fish")]["pairs"] / by[(z, 128, "sg")]["pairs"] for z in zs
                  if (z, 128, "fish") in by and (z, 128, "sg") in by}
        if ratios:
            z = max(ratios, key=ratios.get)
            comps.append(Comparison(
                "Fig. 20", f"n=128, worst z={z}", "fish", "memory / SG's", None, ratios[z],
                claim=f"< {FISH_OVER_SG_MEMORY}", holds=ratios[z] < FISH_OVER_SG_MEMORY,
                why=_sg_memory_why(opts)))
        if 1.0 in ratios:
            comps.append(Comparison("Fig. 20", "z=1.0, n=128", "fish", "memory / SG's",
                                    FISH_OVER_SG_MEMORY_Z1, ratios[1.0], why=_sg_memory_why(opts)))
    gains = []
    for z in zs:
        for n in ns:
            plain, hwa = by.get((z, n, "fish")), by.get((z, n, HWA))
            if plain and hwa:
                gains.append(execution_time(plain, True) / execution_time(hwa, True))
    if gains:
        comps.append(Comparison(
            "Fig. 16", "best (z, n)", HWA, "time w/o HWA / with", HWA_GAIN, max(gains),
            why="With half the workers twice as fast, the best any assignment can reach is a "
                "makespan of m / (1.5 n) against equal loads' m / n: a gain of 1.5x at most, "
                "which ours reaches. The paper's 2.61x is above that bound, so its execution "
                "time must charge more than the final loads (e.g. queues built while slow "
                "workers lag), which the paper does not describe."))

    s = Section(KEY, "FISH (Figs. 10, 11, 16, 20)", _setup(results, opts))
    s.comparisons = comps
    labels = list(STRATEGIES) + [HWA]
    rows = [[f"{z:.1f}", str(n)] + [fmt(rel.get((z, n, l))) for l in STRATEGIES]
            + [fmt(by[(z, n, l)]["rf"]) if (z, n, l) in by else "—" for l in STRATEGIES]
            for z in zs for n in ns]
    s.tables.append(("Execution time / SG's (Fig. 10), then memory / KG's (Fig. 11)",
                     table(["z", "n"] + [f"time {l}" for l in STRATEGIES]
                           + [f"mem {l}" for l in STRATEGIES], rows)))
    hrows = [[f"{z:.1f}", str(n), fmt(execution_time(by[(z, n, 'fish')], True)),
              fmt(execution_time(by[(z, n, HWA)], True))]
             for z in zs for n in ns if (z, n, "fish") in by and (z, n, HWA) in by]
    s.tables.append(("Heterogeneous workers (Fig. 16): makespan in tuple-times of a slow worker",
                     table(["z", "n", "fish (loads only)", "fish (told P_w)"], hrows)))
    for metric, name, title, logy in (
            ("time", "fish_time.png", "FISH Fig. 10: execution time / SG's", True),
            ("rf", "fish_memory.png", "FISH Fig. 11: memory / KG's", True)):
        source = rel if metric == "time" else {k: r["rf"] for k, r in by.items()}
        panels = {f"n = {n}": {l: (zs, [source[(z, n, l)] for z in zs])
                               for l in labels if all((z, n, l) in source for z in zs)}
                  for n in ns}
        grid_figure(panels, title, title.split(": ")[1], out_dir / name, logy=logy)
        s.figures.append((name, title + " (ours, drifting ZF)"))
    return s


def _fish_memory_why(by, zs):
    worst = max((by[(z, 128, "fish")] for z in zs if (z, 128, "fish") in by),
                key=lambda r: r["rf"])
    return (f"FISH's counters decay by α = 0.2 every 1,000 tuples, so the decayed total stays "
            f"near 1,250 and at n = 128 (θ = 1/512) a key is hot after about 3 occurrences in "
            f"the last epoch or two: mid-frequency keys turn hot by chance, get d ≥ 4 "
            f"candidates and keep them in M_k (at z = {worst['z']} ours ended with "
            f"{worst['stats'].get('head_keys', 0)} hot keys and memory {worst['rf']:.2f}x KG). "
            f"The paper's lower figure suggests its hot set was smaller; it gives no count.")


def _sg_memory_why(opts):
    return (f"SG's memory is every worker a key reached: over 10^5 keys and "
            f"{opts.m(MESSAGES):,} tuples most keys recur only a few times, so SG holds far "
            f"fewer copies than on the paper's 50 M-tuple streams (MT, AM), and FISH's share of "
            f"it is larger.")


def _setup(results, opts):
    m = results[0]["messages"] if results else 0
    return (f"Drifting Zipf over 10^5 keys, {m:,} tuples in {BLOCKS} blocks, the ranking replaced "
            f"at 0.8 N and N of every block (N = {m // BLOCKS:,}); one source; n workers; "
            f"`{HWA}` is FISH given P_w for half the workers twice as fast (§6.4). Execution "
            f"time = the queueing model's makespan with all tuples queued at once.")
