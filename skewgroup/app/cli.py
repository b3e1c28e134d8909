"""The skewgroup command line (also python -m skewgroup); its help text is DESCRIPTION."""
import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from skewgroup import STRATEGIES
from skewgroup._routing.config import make_config
from skewgroup._routing.partitioner import MAX_WORKERS
from skewgroup.app.options import (comma_list, count_arg, int_in, nonneg_float, parse_job_args,
                               positive_float, strategy_list, strategy_setting)

GENERATED = ("zipf", "drift", "skewed")

DESCRIPTION = """\
Load-balanced keyed grouping: compare the routing strategies on a stream, regenerate the
papers' experiments, or run the streaming job on Spark.

examples:
  skewgroup simulate --stream zipf --z 1.4 --workers 64 --messages 10M --strategies all
  skewgroup simulate --stream events.parquet --column user_id --workers 32 --sources 4
  skewgroup reproduce pd-stream --out docs/reproduction
  skewgroup run          the streaming job on local Spark (needs pyspark)

simulate routes one stream with each strategy and prints load imbalance (LI), replication
(RF) and routing cost, and writes a JSON file and PNG plots to --out. reproduce regenerates
the papers' simulated experiments with the papers' numbers beside ours. run starts a
streaming query grouped by key with skew_group and shows each micro-batch's balance beside
what plain groupBy would have done.
"""

SIMULATE_DESCRIPTION = """\
Route one stream with each strategy and compare them: LI = (max - mean) / mean of the
workers' loads (0 is perfect balance), I(m) the imbalance at the stream's end, RF = (worker,
key) pairs / distinct keys (1 is no replication), the routing cost in ns per tuple, and the
routers' state. Streams: a generated Zipf stream, a drifting one (its hot keys replaced
--changes times), one with a single hot key, or a column of a parquet/CSV file.
"""


# --- simulate --------------------------------------------------------------------------------


def _stream_spec(args, parser):
    if args.stream in GENERATED:
        if args.universe is None:
            args.universe = {"zipf": 10**7, "drift": 10**5, "skewed": 204}[args.stream]
        if args.column:
            parser.error(f"argument --column: only for --stream FILE; got --stream {args.stream}")
        if args.stream == "zipf":
            return dict(kind="zipf", z=args.z, messages=args.messages, universe=args.universe,
                        seed=args.seed)
        if args.stream == "drift":
            m = args.messages
            points = [m * (i + 1) // (args.changes + 1) for i in range(args.changes)]
            return dict(kind="drift", z=args.z, messages=m, changes=points,
                        universe=args.universe, ramp=int(args.ramp * m), seed=args.seed)
        return dict(kind="skewed", ratio=args.ratio, messages=args.messages, keys=args.universe,
                    seed=args.seed)
    from skewgroup.streams import FILE_FORMATS

    path = args.stream
    if not path.lower().endswith(FILE_FORMATS):
        parser.error(f"argument --stream: expected one of {list(GENERATED)} or a file ending in "
                     f"{list(FILE_FORMATS)}, got {path!r}")
    if not os.path.exists(path):
        parser.error(f"argument --stream: no such file {path!r}")
    if not args.column:
        parser.error(f"argument --column: required with --stream FILE (the key column of {path})")
    columns = _file_columns(path)
    for option, name in (("--column", args.column), ("--split", args.split)):
        if name != "roundrobin" and name not in columns:
            parser.error(f"argument {option}: expected a column of {path}: {columns}; "
                         f"got {name!r}")
    spec = dict(kind="file", path=os.path.abspath(path), column=args.column,
                split=args.split if args.split != "roundrobin" else None,
                limit=args.messages_given and args.messages or None)
    return spec


def _file_columns(path):
    """Column names of a parquet or CSV file, reading only its schema or header."""
    if path.lower().endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        return pq.read_schema(path).names
    import pyarrow.csv as pacsv

    parse = pacsv.ParseOptions(delimiter="\t" if path.lower().endswith(".tsv") else ",")
    with pacsv.open_csv(path, parse_options=parse) as reader:
        return reader.schema.names


def simulate(args, parser, out=None):
    """Run ``simulate``: one cell per strategy on one stream; returns the results."""
    from skewgroup.app.console import console as make_console
    from skewgroup.app.reproduce import sim

    out = out or sys.stdout
    console = make_console(out)
    if not console.is_terminal:
        console = make_console(out, width=140)    # a log or a pipe: keep the table whole
    spec = _stream_spec(args, parser)
    params = {}
    for strategy, name, value in args.set or ():
        params.setdefault(strategy, {})[name] = value
    for strategy, values in params.items():
        try:
            make_config(strategy, values)
        except (TypeError, ValueError) as exc:
            parser.error(f"argument --set: {exc}")
    queue = None
    if args.cost is not None:
        # Default arrival rate: the cluster's capacity n / c, the papers' saturation point.
        queue = dict(cost=args.cost, rate=args.rate or args.workers / args.cost)
    cells = [sim.cell(spec, name, args.workers, params=params.get(name), sources=args.sources,
                      seed=args.seed, queue=queue) for name in args.strategies]
    results = _run_with_progress(cells, args.jobs, console, "simulate")
    first = results[0]
    console.print(f"[bold]{_describe(spec)}[/bold]: {first['messages']:,} tuples, "
                  f"{first['distinct']:,} distinct keys, p1 = {first['p1']:.1%}, "
                  f"n = {args.workers} workers, s = {args.sources} source(s)")
    console.print(_table(results, queue))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = dict(command="skewgroup " + " ".join(shlex.quote(a) for a in args.argv),
                   stream=spec, workers=args.workers, sources=args.sources, results=results)
    (out_dir / "simulate.json").write_text(json.dumps(payload, indent=1))
    written = ["simulate.json"]
    if not args.no_plots:
        written += _plots(results, out_dir)
    console.print(f"wrote {', '.join(str(out_dir / w) for w in written)}")
    return results


def _describe(spec):
    kind = spec["kind"]
    if kind == "zipf":
        return f"Zipf z = {spec['z']} over {spec['universe']:,} keys"
    if kind == "drift":
        return (f"drifting Zipf z = {spec['z']} over {spec['universe']:,} keys, hot keys "
                f"replaced {len(spec['changes'])} time(s)")
    if kind == "skewed":
        return f"one key at {spec['ratio']:.0%} of {spec['keys']} keys"
    return f"{spec['path']} column {spec['column']!r}"


def _run_with_progress(cells, jobs, console, what):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from skewgroup.app.reproduce import sim

    # auto_refresh=False: no refresh thread may be running when the simulator forks workers.
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True, auto_refresh=False,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task(what, total=len(cells))

        def done(result):
            progress.update(task, advance=1, description=f"{what}: {result['label']}",
                            refresh=True)

        return sim.run_cells(cells, jobs=jobs, on_result=done)


def _table(results, queue):
    from rich.table import Table

    table = Table(show_header=True, header_style="bold")
    for name in ("strategy", "LI", "I(m)", "RF", "StdDev %", "ns/tuple", "state bytes"):
        table.add_column(name, justify="left" if name == "strategy" else "right")
    if queue:
        for name in ("tuples/s", "p50", "p99", "makespan"):
            table.add_column(name, justify="right")
    for r in results:
        row = [r["label"], f"{r['li']:.3g}", f"{r['i_final']:.3g}", f"{r['rf']:.3f}",
               f"{r['stddev']:.3g}", f"{r['ns_per_tuple']:.1f}", f"{r['state_bytes']:,}"]
        if queue:
            q = r["queue"]
            row += [f"{q['throughput']:.4g}", f"{q['latency_p50']:.3g}",
                    f"{q['latency_p99']:.3g}", f"{q['makespan']:.4g}"]
        table.add_row(*row)
    return table


def _plots(results, out_dir):
    from skewgroup.app.reproduce.report import pyplot

    plt = pyplot()
    labels = [r["label"] for r in results]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    half = 0.5 * results[0]["workers"] / max(1, results[0]["messages"])    # half a tuple
    ax1.bar(labels, [max(r["li"], half) for r in results])
    ax1.axhline(2 * half, color="grey", linestyle=":", linewidth=1)
    ax1.set(yscale="log", ylabel="LI = (max − avg) / avg (dots: 1 tuple)", title="Load imbalance")
    ax2.bar(labels, [r["rf"] for r in results], color="tab:orange")
    ax2.set(ylabel="RF = keys held / distinct keys", title="Replication factor")
    for ax in (ax1, ax2):
        ax.tick_params(axis="x", rotation=45)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out_dir / "li_rf.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in results:
        t = np.asarray(r["imbalance_t"], dtype=float)
        # 0 (balanced to the tuple) is drawn at half a tuple, 0.5/t, to stay on the log axis.
        ax.plot(t, np.maximum(r["imbalance"], 0.5 / t), label=r["label"])
    ax.set(yscale="log", xlabel="tuples t", ylabel="I(t) = max_w L_w(t)/t − 1/n (0 → ½ tuple)",
           title="Imbalance over the stream")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_dir / "imbalance.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in results:
        load = np.asarray(r["loads"], dtype=float)
        ax.plot(np.arange(load.size), load / load.mean(), marker=".", label=r["label"])
    ax.set(yscale="log", xlabel="worker", ylabel="load / mean load", title="Loads per worker")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_dir / "loads.png", dpi=110)
    plt.close(fig)
    return ["li_rf.png", "imbalance.png", "loads.png"]


# --- reproduce -------------------------------------------------------------------------------


def reproduce(args, parser, out=None):
    from skewgroup.app.console import console as make_console
    from skewgroup.app.reproduce import EXPERIMENTS, Options, reproduce as run

    console = make_console(out or sys.stdout)
    names = (list(EXPERIMENTS) if "all" in args.experiments
             else list(dict.fromkeys(args.experiments)))
    opts = Options(messages=args.messages, z=args.z, workers=args.workers, seed=args.seed,
                   jobs=args.jobs, strategies=tuple(args.strategies) if args.strategies else None)
    command = "skewgroup " + " ".join(shlex.quote(a) for a in args.argv)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    start = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True, auto_refresh=False,
                  disable=not console.is_terminal) as progress:
        tasks = {}

        def on_start(name, count):
            tasks["current"] = progress.add_task(name, total=count)
            console.print(f"{name}: {count} cells")
            progress.refresh()

        def on_result(result):
            progress.update(tasks["current"], advance=1, refresh=True)

        report = run(names, args.out, opts, on_start=on_start, on_result=on_result,
                     command=command)
    console.print(f"wrote {report} and results.json, figures beside it "
                  f"({time.perf_counter() - start:.0f} s)")
    return report


# --- entry point -----------------------------------------------------------------------------


def build_parser():
    from skewgroup.app.reproduce import EXPERIMENTS
    from skewgroup.app.reproduce.sim import default_jobs

    parser = argparse.ArgumentParser(prog="skewgroup", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="route one stream with each strategy; LI, RF, cost",
                         description=SIMULATE_DESCRIPTION,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    sim.add_argument("--stream", default="zipf",
                     help="zipf, drift (hot keys replaced), skewed (one hot key), or a "
                          ".parquet/.csv file (default zipf)")
    sim.add_argument("--column", help="key column of --stream FILE (required with a file; default none)")
    sim.add_argument("--split", default="roundrobin",
                     help="how tuples reach the sources: roundrobin, or a column of --stream "
                          "FILE whose values pick the source (default roundrobin)")
    sim.add_argument("--z", type=nonneg_float, default=1.4, help="Zipf exponent (default 1.4)")
    sim.add_argument("--universe", type=count_arg, default=None,
                     help="distinct keys drawn from (default: zipf 10M as Pd-Stream Table IV, "
                          "drift 100k as FISH, skewed 204 as DKG)")
    sim.add_argument("--messages", type=count_arg, default=None,
                     help="stream length, e.g. 10M (default 2M; for a file: at most this many)")
    sim.add_argument("--changes", type=int_in(1, 1000), default=2,
                     help="--stream drift: times the hot keys are replaced (default 2)")
    sim.add_argument("--ramp", type=nonneg_float, default=0.0,
                     help="--stream drift: share of the stream each change takes to blend in "
                          "(default 0, abrupt)")
    sim.add_argument("--ratio", type=nonneg_float, default=0.68,
                     help="--stream skewed: share of the hot key (default 0.68)")
    sim.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=64,
                     help="downstream workers n (default 64)")
    sim.add_argument("--sources", type=int_in(1, 4096), default=1,
                     help="upstream routers s, each with its own state (default 1)")
    sim.add_argument("--strategies", type=strategy_list, default=sorted(STRATEGIES),
                     help="'all' or a comma list (default all)")
    sim.add_argument("--set", type=strategy_setting, action="append",
                     metavar="STRATEGY.PARAM=VALUE",
                     help="a strategy parameter, e.g. pdstream.window=256 (repeatable; default: "
                          "the papers' defaults, docs/simulator.md)")
    sim.add_argument("--cost", type=positive_float, default=None,
                     help="queueing model: seconds of work per tuple (adds throughput and "
                          "latency columns; default none, no queueing model)")
    sim.add_argument("--rate", type=positive_float, default=None,
                     help="queueing model: tuples per second arriving (default n / cost)")
    sim.add_argument("--seed", type=int_in(0), default=0,
                     help="seed of the generated stream and the key hash (default 0)")
    sim.add_argument("--jobs", type=int_in(1, 64), default=default_jobs(),
                     help="processes (default: the machine's cores)")
    sim.add_argument("--out", default="skewgroup-simulate",
                     help="directory for simulate.json and the PNG plots (default "
                          "skewgroup-simulate)")
    sim.add_argument("--no-plots", action="store_true",
                     help="write no PNG plots (default: write them)")
    sim.set_defaults(subparser=sim)

    rep = sub.add_parser("reproduce",
                         help="regenerate the papers' experiments beside their numbers")
    rep.add_argument("experiments", nargs="+", choices=list(EXPERIMENTS) + ["all"],
                     metavar="EXPERIMENT",
                     help=f"one or more of {', '.join(EXPERIMENTS)}, or all")
    rep.add_argument("--out", required=True, help="directory for README.md, results.json, PNGs")
    rep.add_argument("--messages", type=count_arg, default=None,
                     help="override every stream's length (default: each paper's)")
    rep.add_argument("--z", type=comma_list(nonneg_float), default=None,
                     help="override the Zipf exponents, e.g. 1.0,2.0")
    rep.add_argument("--workers", type=comma_list(int_in(1, MAX_WORKERS)), default=None,
                     help="override the worker counts, e.g. 16,64")
    rep.add_argument("--strategies", type=strategy_list, default=None,
                     help="run only these strategies: 'all' or a comma list (default all)")
    rep.add_argument("--seed", type=int_in(0), default=0,
                     help="seed of the generated streams and the key hash (default 0)")
    rep.add_argument("--jobs", type=int_in(1, 64), default=default_jobs(),
                     help="processes (default: the machine's cores)")
    rep.set_defaults(subparser=rep)

    # `run` is parsed by the job itself (skewgroup.app), which needs pyspark; it is listed
    # here for `skewgroup --help`.
    sub.add_parser("run", add_help=False,
                   help="the streaming job on Spark (skewgroup run --help for its options)")
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        # The job's options are checked (and --help printed) before pyspark is imported.
        job_args = parse_job_args(argv[1:])
        try:
            from skewgroup.app.main import run
        except ImportError as error:
            if (error.name or "").split(".")[0] not in ("pyspark", "py4j"):
                raise       # not a missing extra: a broken install, shown as it is
            sys.exit(f"skewgroup run needs pyspark: pip install 'skewgroup[spark]' ({error})")
        return run(job_args)
    args = build_parser().parse_args(argv)
    args.argv = argv
    sub = args.subparser          # errors print this command's usage
    if args.command == "reproduce":
        reproduce(args, sub)
        return 0
    args.messages_given = args.messages is not None
    if args.messages is None:
        args.messages = count_arg("2M")
    if args.split != "roundrobin":
        if args.stream in GENERATED:
            sub.error(f"argument --split: a column split needs --stream FILE; "
                      f"got --stream {args.stream}")
        if args.sources == 1:
            sub.error("argument --split: splitting by a column needs --sources > 1; got 1")
    if args.stream == "skewed" and args.ratio > 1:
        sub.error(f"argument --ratio: expected a share in [0, 1], got {args.ratio}")
    simulate(args, sub)
    return 0


if __name__ == "__main__":
    sys.exit(main())
