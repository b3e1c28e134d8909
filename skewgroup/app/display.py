"""The job's live display (a rich table on a terminal, one line a batch elsewhere) and its
summary: per micro-batch figures from the query's progress, the comparison of the ways measured
on the same micro-batches (:mod:`skewgroup.app.baselines`), the top keys."""
import json
import time

import numpy as np

from skewgroup.app import baselines, figures
from skewgroup.app.query import FIRST_KEYS, GROUPBY_ROWS, QUERY_NAME, first_order, output_name


LEGEND = (
    "busiest worker: rows of the busiest of the n partitions, under plain groupBy (hash "
    "placement) and under skew_group; LI = (busiest - mean) / mean, 0 is perfect balance; RF = "
    "partial rows / keys, the extra merge work routing costs (1 = none); hot keys: keys with "
    ">= 1/(5n) of the batch's rows, and on how many workers each was spread")
# The columns shown when the job times its Python aggregate per task (``--agg score:COL``).
TIMED_LEGEND = (
    "; Python aggregate: its busiest task, measured under skew_group and projected for groupBy "
    "(the same cost per row on groupBy's busiest partition)")


def batch_figures(progress, timings=None):
    """One micro-batch's figures from a query progress: rows, time, LI, busiest worker under
    skew_group and under plain groupBy, and with ``timings`` (the Python aggregate's per-task
    seconds and rows, by batch and partition) its busiest task under both."""
    from skewgroup.spark import balance

    figures = balance(progress) or {}
    progress = json.loads(progress.json) if hasattr(progress, "json") else progress
    by_hash = (progress.get("observedMetrics") or {}).get(GROUPBY_ROWS) or {}
    batch = progress.get("batchId")
    result = {
        "batch": batch,
        "rows": progress.get("numInputRows", 0),
        "batch_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "load_imbalance": figures.get("load_imbalance"),
        "busiest_worker_rows": figures.get("busiest_worker_rows"),
        "groupby_busiest_rows": max((int(v or 0) for v in by_hash.values()), default=None),
        "replication_factor": figures.get("replication_factor"),
        "hot_keys": figures.get("hot_keys"),
        "hot_key_replication": figures.get("hot_key_replication"),
        "rows_per_worker": figures.get("rows_per_worker"),
        "python_busiest_s": None,
        "python_groupby_busiest_s": None,
    }
    tasks = [v for (b, _), v in (timings or {}).items() if b == str(batch)]
    rows = sum(r for _, r in tasks)
    if rows and result["groupby_busiest_rows"] is not None:
        # Measured: the busiest task's seconds in the Python aggregate. Projected: groupBy's
        # busiest partition at this batch's mean cost per row of the same function.
        result["python_busiest_s"] = max(s for s, _ in tasks)
        result["python_groupby_busiest_s"] = (sum(s for s, _ in tasks) / rows
                                              * result["groupby_busiest_rows"])
    return result


class Display:
    """Live per-batch progress: a rich table on a terminal, one line per batch elsewhere."""

    HEADERS = ("batch", "plan", "rows", "batch ms", "busiest worker\ngroupBy", "busiest worker\n"
               "skew_group", "LI", "RF", "hot keys", "workers/\nhot key")
    # Shown when the job times its Python aggregate per task (``--agg score:COL``).
    TIMED_HEADERS = ("Python agg ms\ngroupBy (proj.)", "Python agg ms\nskew_group",
                     "speed-up\n(n cores)")

    def __init__(self, args, total, timed=False):
        from skewgroup.app.console import console

        self.console = console()
        self.quiet = args.quiet
        self.workers = args.workers
        self.timed = timed
        self.total = total
        self.plan, reason = getattr(args, "chosen_plan", None) or ("-", "")
        self.rows = []
        self.live = None
        if not self.quiet:
            self.console.print(f"skew_group plan={self.plan}: {reason}", style="dim",
                               highlight=False, soft_wrap=True)
            self.console.print(LEGEND + (TIMED_LEGEND if timed else "") + ".", style="dim",
                               highlight=False)
        if not self.quiet and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=self.console, refresh_per_second=4)
            self.live.start()

    def _render(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        table = Table(title="skewgroup: per micro-batch", title_justify="left")
        for name in self.HEADERS + (self.TIMED_HEADERS if self.timed else ()):
            table.add_column(name, justify="right")
        for f in self.rows[-12:]:
            table.add_row(*_cells(f, self.plan, self.timed))
        done = len(self.rows)
        if self.total:
            return Group(ProgressBar(total=self.total, completed=done, width=40),
                         f"{done}/{self.total} batches", table)
        return Group(f"{done} batches", table)

    def add(self, figures):
        self.rows.append(figures)
        if self.live is not None:
            self.live.update(self._render())
        elif not self.quiet:
            line = ("batch {} | plan {} | {} rows | {} ms | busiest worker: groupBy {}, skew_group {} "
                    "(LI {}) | RF {} | {} hot keys on {} workers each")
            if self.timed:
                line += (" | Python aggregate's busiest task: groupBy ~{} ms, skew_group {} ms "
                         "({}x on {} cores)")
            self.console.print(line.format(*_cells(figures, self.plan, self.timed),
                                           self.workers),
                               highlight=False, soft_wrap=True)

    def close(self):
        if self.live is not None:
            self.live.stop()


def _cells(f, plan, timed=False):
    def number(value, pattern, scale=1):
        return "-" if value is None else format(value * scale, pattern)
    cells = (str(f["batch"]), plan, number(f["rows"], ","), number(f["batch_ms"], ","),
             number(f["groupby_busiest_rows"], ","), number(f["busiest_worker_rows"], ","),
             number(f["load_imbalance"], ".4f"), number(f["replication_factor"], ".3f"),
             number(f["hot_keys"], ","), number(f["hot_key_replication"], ".1f"))
    if not timed:
        return cells
    return cells + (number(f["python_groupby_busiest_s"], ",.0f", 1000),
                    number(f["python_busiest_s"], ",.0f", 1000), number(_speedup(f), ".1f"))


def _speedup(f):
    if not f["python_busiest_s"] or f["python_groupby_busiest_s"] is None:
        return None
    return f["python_groupby_busiest_s"] / f["python_busiest_s"]


def follow(query, args, display, poll=0.25, stop=None, timings=None, on_batch=None):
    """Show each new micro-batch until the query ends or ``--batches`` have run; ``on_batch``
    (if given) is called with each new micro-batch's id as it is shown."""
    seen = set()
    metrics = open(args.metrics, "a") if args.metrics else None

    def report_new_batches():
        for progress in query.recentProgress:
            figures = batch_figures(progress, timings.value if timings is not None else None)
            if figures["batch"] in seen or (figures["rows"] == 0
                                            and figures["load_imbalance"] is None):
                continue
            seen.add(figures["batch"])
            if on_batch is not None:
                on_batch(figures["batch"])
            display.add(figures)
            if metrics:
                metrics.write(json.dumps(figures) + "\n")
                metrics.flush()

    try:
        while True:
            active = query.isActive
            report_new_batches()
            if args.batches is not None and len(seen) >= args.batches:
                (stop or query.stop)()
                query.awaitTermination()
                break
            if not active:
                # A query that ends by itself (availableNow, a bounded source) may record its
                # last batch's progress after isActive turned false: one CI run's restarted
                # job lost its last batch's metrics line that way. Once the query thread has
                # ended, every progress it made is there.
                query.awaitTermination()
                report_new_batches()
                break
            time.sleep(poll)
    finally:
        if metrics:
            metrics.close()
    return len(seen)


def summary(spark, args, display, batches, seconds, checkpoint, latest=None, measured=None):
    console = display.console
    rows = sum(f["rows"] or 0 for f in display.rows)
    imbalances = [f["load_imbalance"] for f in display.rows if f["load_imbalance"] is not None]
    worst = f"{max(imbalances):.4f}" if imbalances else "-"
    console.print(f"skewgroup run: {batches} micro-batches, {rows:,} rows in {seconds:.1f} s; "
                  f"strategy {args.strategy}, {args.workers} workers; worst batch LI {worst}",
                  highlight=False, soft_wrap=True)
    if measured is not None:
        for line in measured_comparison(measured, args, batches):
            console.print(line, highlight=False, soft_wrap=True)
    else:
        console.print(comparison(display.rows, args.workers), highlight=False, soft_wrap=True)
    if args.sink == "memory":
        _top_keys(spark, args, console, latest)
    elif args.sink == "parquet":
        console.print(f"output: {args.output} (skewgroup.app.query.final_result reads it); "
                      f"checkpoint: {checkpoint}")


def comparison(batch_rows, workers):
    """The summary's line on what plain groupBy would have cost, from the batches' figures."""
    timed = [f for f in batch_rows if f["python_busiest_s"] is not None]
    if timed:
        groupby = sum(f["python_groupby_busiest_s"] for f in timed)
        ours = sum(f["python_busiest_s"] for f in timed)
        return (f"plain groupBy: the Python aggregate's busiest task {groupby:.2f} s "
                f"(projected); skew_group: {ours:.2f} s (measured); "
                f"{groupby / ours:.1f}x faster on {workers} cores")
    placed = [f for f in batch_rows if f["groupby_busiest_rows"] is not None
              and f["busiest_worker_rows"] is not None]
    groupby = sum(f["groupby_busiest_rows"] for f in placed)
    ours = sum(f["busiest_worker_rows"] for f in placed)
    if not ours:
        return "plain groupBy: no batch to compare"
    return (f"plain groupBy: busiest worker {groupby:,} rows; skew_group: {ours:,} rows. "
            f"Built-in aggregates only: Spark's groupBy combines them map-side, so its busiest "
            f"task is not that slow, and skew_group's default plan (auto) would run Spark's "
            f"own groupBy; routed here to show the balance.")


def measured_comparison(measured, args, batches):
    """The summary's lines on the ways measured after the run (``measured``: way -> its
    :class:`skewgroup.app.figures.Measurement`, :func:`skewgroup.app.baselines.measure`, over the
    run's ``batches`` micro-batches): each way's figures (:mod:`skewgroup.app.figures`), then the
    best way on each figure, whichever it is, and how far skew_group is from it."""
    rows = [figures.way_figures(way, m) for way, m in measured.items()]
    # The late medians only where they are over fewer micro-batches than all.
    late = batches > figures.LATE
    shown = [f for f in figures.FIGURES if late or not f[0].startswith("late_")]
    lines = [f"the same {batches} micro-batches again, each way from a fresh checkpoint into "
             f"Spark's noop sink, measured:"]
    width = max(map(len, measured))
    pair = f"{'median':>7}{'last ' + str(figures.LATE):>8}" if late else f"{'median':>7}"
    span = len(pair)
    lines.append(f"  {'':<{width}}  {'micro-batch':>{span}}  {'critical path':>{span}}  "
                 f"{'total task':>{span}}  state held")
    lines.append(f"  {'way':<{width}}  {pair}  {pair}  {pair}  after the last micro-batch")
    for row in rows:
        m = measured[row["way"]]
        cells = []
        for key in ("micro_batch_s", "critical_path_s", "task_s"):
            values = [row[key]] + ([row["late_" + key]] if late else [])
            widths = (7, 8)
            cells.append("".join(f"{'-' if v is None else format(v, '.2f'):>{w}}"
                                 for v, w in zip(values, widths)))
        state = figures.show(row["state_bytes"], "bytes")
        if row["way"] == "foreachBatch" and m.table_versions:
            state += (f" (its table's {m.table_versions} versions, all kept; the latest alone "
                      f"{figures.show(m.latest_table_bytes, 'bytes')})")
        note = f" (over {row['micro_batches']})" if row["micro_batches"] != batches else ""
        lines.append(f"  {row['way']:<{width}}  {'  '.join(cells)}  {state}{note}")
    lines.append("seconds; critical path: each stage's slowest task (executorRunTime) summed over "
                 "the micro-batch's stages, what a cluster with a core per task would take; "
                 "total task: every task's executorRunTime summed, the cores' work; "
                 "state: the state store's files under the way's checkpoint")
    missing = {m.unavailable for m in measured.values() if m.unavailable}
    if missing:
        lines.append(f"critical path and total task time unavailable: "
                     f"{'; '.join(sorted(missing))}")
    for way in measured:
        lines.append(f"  {way}: {baselines.label(way, args)}")
    lines += [figures.verdict(rows, key, what, unit, digits)
              for key, what, unit, digits in shown]
    return lines


def _top_keys(spark, args, console, latest=None):
    """The ten keys with the largest first aggregate, numbers rounded for reading."""
    from rich.table import Table

    first = output_name(*args.agg[0])
    if latest is not None:
        # A sketch or a fit has no order worth ranking by: the first keys (a generated
        # stream's rank 0 is its hottest key).
        table = Table(title=f"first keys by {', '.join(args.key)}", title_justify="left")
        columns = next(iter(latest.values())).__fields__ if latest else []
        rows = [latest[k] for k in sorted(latest, key=first_order)][:FIRST_KEYS]
    else:
        table = Table(title=f"top keys by {first}", title_justify="left")
        result = spark.table(QUERY_NAME)
        columns = result.columns
        rows = result.orderBy(result[first].desc()).limit(10).collect()
    for name in columns:
        table.add_column(name, justify="left" if name in args.key else "right")
    for row in rows:
        table.add_row(*(_readable(v) for v in row))
    console.print(table)


def _readable(value):
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e15 else f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_readable(v) for v in value) + "]"
    return str(value)
