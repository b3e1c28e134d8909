"""Python aggregators whose merge is Python (Spark cannot combine them): skew_group against what a
Spark user or expert writes, batch and streaming, every plan of a cell in the same run.

    cd /tmp && python -m pytest /work/main/bench/bench_aggregators_spark.py --benchmark-only \\
        -s -p no:cacheprovider                                  (the whole grid)
    ... -k batch / -k streaming / -k "batch and 1.4"            (a part)
    python /work/main/bench/bench_aggregators_spark.py bench/results/<date>-figures.json
                                                                (the markdown tables)

Run it from outside the checkout (Spark's Python workers import the installed skewgroup). The
workload (sizes, aggregators, data, references, each plan's and method's query) is
bench/_aggregators_grid.py; the expert's hand-written plans and methods are
bench/_baselines.py's (``OneAggregator``). The sizes and the grid come from the
environment (defaults in brackets):

* ``SKEWGROUP_BENCH_AGGS_BATCH_ROWS`` [2000000] rows of the batch DataFrame;
  ``SKEWGROUP_BENCH_AGGS_FILES`` [8] its input partitions (parquet files, arrival order);
* ``SKEWGROUP_BENCH_AGGS_STREAM_ROWS`` [200000] rows per micro-batch;
  ``SKEWGROUP_BENCH_AGGS_STREAM_BATCHES`` [5] micro-batches (the first is not measured);
  ``SKEWGROUP_BENCH_AGGS_FILES_PER_BATCH`` [1] parquet files per micro-batch (input partitions);
* ``SKEWGROUP_BENCH_AGGS_ROUNDS`` [2] rounds of the batch plans,
  ``SKEWGROUP_BENCH_AGGS_STREAM_ROUNDS`` [1] of the streaming methods;
* ``SKEWGROUP_BENCH_AGGS_Z`` [1.0,1.4,2.0], ``SKEWGROUP_BENCH_AGGS_UNIVERSES`` [100000,1000000];
* ``SKEWGROUP_BENCH_AGGS_AGGREGATES`` [cheap,expensive,kll], or any of those and ``plain``;
  ``SKEWGROUP_BENCH_AGGS_BATCH_PLANS`` / ``SKEWGROUP_BENCH_AGGS_STREAM_METHODS`` [all] subsets;
* ``SKEWGROUP_BENCH_AGGS_WORKERS`` [16] skew_group's workers and the shuffle partitions;
  ``SKEWGROUP_BENCH_AGGS_STATE_PARTITIONS`` [the workers] the shuffle partitions apart (every
  stateful stage's tasks, the hand-written ways' too);
* ``SKEWGROUP_BENCH_AGGS_CHEAP_WIDTH`` [48] / ``SKEWGROUP_BENCH_AGGS_EXPENSIVE_WIDTH`` [8700]
  lanes of the mix per row of the two reduce costs.

Workload. Keys ``skewgroup.streams.zipf(z, rows, universe=U, seed=21)``, z in {1.0, 1.4, 2.0},
U in {10^5, 10^6}; a value column x (float64, lognormal). 16 workers (``workers=16`` and 16
shuffle partitions), local[2], AQE off. Three aggregators by default, each a Python object with
Spark's Aggregator protocol and the vectorized ``reduce_groups``/``merge_groups``, and a plain
one on demand:

* ``cheap``     -- ``MixSum(48)``: per row the splitmix64 finaliser over 48 lanes of x's 64
  bits (``wide_mix``: the value plus lane x golden ratio, xor-reduced, top 31 bits), summed per
  key (numpy ``reduceat``), and the rows: about 0.1 µs/row. Buffer (score, n), merge in Python
  (numpy over the buffers' tuples); result ``array<bigint>`` [score, n]: integers, checked bit
  for bit;
* ``expensive`` -- ``MixSum(8700)``: the same at about 10 µs/row. The width comes from the
  ratio to bench_plans' ``mixed`` (900 rounds = 0.957 µs/row on a quiet machine, RESULTS.md)
  measured interleaved on this machine; the µs/row of each aggregate's reduce alone
  (``reduce_groups``, numpy: 20,000 rows in groups of 10, best of 3) is measured at the start
  and recorded per row as ``cost_per_row_us``. Not ``mixed`` itself: its cost is ``rounds``
  numpy calls per call, about 0.1 s per call at 10 µs/row however few rows, which every per-key
  baseline would pay per key (the first smoke run: 228 s of task time for 1,483 keys and
  20,000 rows);
* ``kll``       -- ``skewgroup.aggregators.KllQuantiles((0.5, 0.9, 0.99))`` (k = 200): a
  realistic sketch. Not bit for bit (merge order changes a sketch): each returned quantile's
  true rank among the key's values is checked, exactly (error 0) for keys of at most k values
  (the sketch is exact there), within 2x the sketch's 99 % rank error for the others (the
  maximum error, over its rank error, and the share beyond 1x are recorded);
* ``plain``     -- ``PlainSum()``: a user's plain per-row Aggregator, ``zero``/``reduce``/
  ``merge``/``finish`` only (no batch method): per row ``int(x * 1024)`` summed per key, and the
  rows, one Python ``reduce`` call per row. Buffer (score, n), result [score, n], checked bit
  for bit against numpy's ``trunc(x * 1024)`` (the same truncation toward zero). skew_group
  runs it through its adapter; the hand-written plans and methods through the Python loops a
  user writes around its methods (_baselines' ``grouped_form``: ``zero`` per group, ``reduce``
  per row, ``merge`` per extra buffer). Its ``cost_per_row_us`` is that loop's (20,000 rows in
  groups of 10, best of 3). Not in the default aggregates (``SKEWGROUP_BENCH_AGGS_AGGREGATES``).

Exactness: every run's result is collected (``toArrow``, the measured action of every plan) and
compared with a single-process numpy reference of the same data (per-key sums of the same mix
and row counts; for the stream, of every row of every micro-batch): keys, scores and counts
equal, or the test fails.

Batch plans (``test_batch``), per (z, U) cell, every aggregator and plan in the same run, rounds
outermost, after an unmeasured warm-up (the cheap aggregator once routed, once as pandas UDF):

* ``auto``, ``local``, ``hash``, ``split``, ``routed`` -- ``skew_group("k",
  agg.aggregator(obj, "x", name="a"), workers=16, plan=...)``; routed with the default strategy
  (adaptive); auto's log line (which plan and why) is recorded;
* ``pandas_udf``    -- Spark's grouped-aggregate pandas UDF (``pd.Series -> list``, i.e.
  ``PandasUDFType.GROUPED_AGG``) in ``groupBy("k").agg(udf("x"))``: the aggregate of a key's
  whole Series, ``finish(reduce_groups(rows, [0, n])[0])``, one call per key after a shuffle by
  key (no partial aggregation: Spark cannot combine it);
* ``applyInPandas`` -- ``groupBy("k").applyInPandas(fn, "k long, a <type>")``: the same per key
  on its pandas DataFrame;
* ``local-global``  -- what an expert writes: ``mapInArrow`` partial per key inside each input
  partition (argsort the keys, one ``reduce_groups`` call, buffers pickled as skew_group pickles
  them), then ``repartition(16, "k")`` and one ``mapInArrow`` merge per partition (one
  ``merge_groups`` call, ``finish``).

Per run, from Spark's REST API over the run's job group (bench/_rest.py): the critical
path (sum over stages of the slowest task's ``executorRunTime``), the total task time, the wall
time; min over rounds, max kept as the spread; per stage its tasks, slowest task and rows.

Streaming methods (``test_streaming``), per (z, U) cell: a parquet file source, one file per
micro-batch (``maxFilesPerTrigger``), ``trigger(availableNow=True)``, a fresh checkpoint per
run; the same files for every method. Each method runs on the state store its user gets:
RocksDB for skew_group (which sets it) and the tws methods, Spark's default for the others.
Stateful methods write to the memory sink in update mode
(every batch's updated keys collected, the same for each; the last row per key is checked
against the reference):

* ``skew_group``   -- ``skew_group("k", agg.aggregator(obj, "x", name="a"), workers=16)``: auto
  on a stream without ``sample=``, what a user gets who writes no ``plan=``: the partial timed
  on rows made from the stream's schema, local or spread (docs/plans.md, "auto"); the merge
  ``transformWithStateInPandas`` over 64 buckets of key hashes, each bucket's keys as runs in
  RocksDB (docs/stream.md);
* ``sampled``      -- the same with ``sample=`` the batch read of the stream's first file (one
  micro-batch's rows): auto samples it and times the partial as in batch;
* ``spread``       -- the same with ``plan="spread"`` (round robin on a stream, no tag stage);
* ``local``        -- the same with ``plan="local"``: the partial inside the input tasks (the
  read stage), no shuffle before it, so one Python stage fewer; a hot key's rows stay in the
  input task that read them;
* ``per-key``      -- ``groupBy("k").applyInPandasWithState`` over the raw rows, one call per key
  and micro-batch, state the key's pickled buffer;
* ``bucketed``     -- the expert's: ``groupBy(pmod(xxhash64(k), 64)).applyInPandasWithState``,
  one call per bucket: the bucket's new rows reduced per key in one ``reduce_groups`` call, then
  merged into the stored buffers of the keys they touch (only those decoded), state one Arrow
  IPC blob (k, pickled buffer) per bucket; emits the touched keys;
* ``partial``      -- the sharper expert's (the job's ``partial`` way, the same code):
  ``repartition(16)`` (round robin), a ``mapInArrow`` partial (one ``reduce_groups`` call a
  partition: one (k, pickled buffer) row per partition and key), then the bucketed method's
  ``applyInPandasWithState`` over those partials, its first step one ``merge_groups`` call over
  the keys with several partials instead of the reduce: the per-row work is balanced before
  the shuffle by key: a hot key reaches its bucket's call as one partial a partition;
* ``tws-blob``     -- the bucketed method in ``transformWithStateInPandas`` (Spark >= 4.1;
  RocksDB's state store, which it requires): the same function, the
  bucket's blob a ValueState;
* ``tws-map``      -- ``transformWithStateInPandas`` per bucket with a MapState from key to
  pickled buffer: only the keys a batch touches are read and written, one ``getValue`` and
  one ``updateValue`` per key (each a request to the JVM). These two answer which stateful API
  the merge should use; not in the default methods (``SKEWGROUP_BENCH_AGGS_STREAM_METHODS``);
* ``foreachBatch`` -- each micro-batch as a batch DataFrame: ``repartition(16)`` (round robin:
  the batch is one input partition), ``mapInArrow`` partial, union with the previous state table,
  ``repartition(16, "k")``, ``mapInArrow`` merge (keys with one buffer pass through undecoded),
  written as the next version of a parquet state table (the MERGE pattern without Delta, one
  directory per batch id, so a replayed batch rewrites its own version). No rows are emitted:
  the table is the result (finished on the driver for the check).

Per method: micro-batch time (progress ``durationMs.triggerExecution``) min over the batches
after the first (and over rounds), max kept as the spread; per batch the critical path and total
task time (REST API: a stream's jobs carry its run id as job group and ``batch = N``, also
the jobs foreachBatch starts); distinct keys per batch (from the data); state bytes per key:
for the stateful methods ``stateOperators[0].customMetrics.stateOnCurrentVersionSizeBytes``
of the last batch (the state store's current version, blob bytes and row overhead) over the
keys seen so far (``memoryUsedBytes``, which also counts the versions cached in memory, and
``numRowsTotal`` are recorded too); for foreachBatch the last state table's parquet bytes on disk
over its rows. Also recorded: each batch of the first round (micro-batch, critical path, total
task time: a cost that grows with the state shows there) and the stages of the fastest batch.

The targets (recorded, not asserted: task times on a shared 2-core machine are noise-prone):
batch critical path >= 3x shorter than pandas_udf's at z >= 1.4; stream micro-batch >= 3x
shorter than per-key's where a batch holds >= 5,000 distinct keys, and never longer; stream
critical path <= 1.1x bucketed's at z = 1.0 and >= 2x shorter at z >= 1.4 with the expensive
reduce; skew_group's micro-batch and critical path <= 1.0x the best of the hand-written methods
that ran (``bucketed``, ``partial``, ``foreachBatch``; the best named) in every cell. ``plain`` has its own targets, judged in the same columns of its row: micro-batch
>= 2x shorter than per-key's, and <= 1.0x bucketed's micro-batch (the ratio shown in the
bucketed target's cell).

Runtime (extrapolated from a 1/10-size run of the z = 1.0, 10^6-key cell on 2 cores at load
average 7-10): about 3 h 10 min for the batch cells (z = 1.0 over 10^6 keys alone ~100 min: its
342,000 keys cost pandas_udf and applyInPandas milliseconds each; 10^5 keys ~35 min; z = 1.4
~18 min; z = 2.0 ~10 min per cell, 2 rounds) and 1 h 40 min for the streaming cells (z = 1.0:
~42 and ~26 min, per-key applyInPandasWithState most of it; z = 1.4 ~9 min, z = 2.0 ~6 min
per cell); perhaps half on a quiet machine. ``SKEWGROUP_BENCH_AGGS_BATCH_PLANS`` without
applyInPandas roughly halves the z = 1.0 batch cells; the data and the references are written
once under /tmp/skewgroup-bench-aggregators (the expensive reference: 2 M rows of the mix, ~1 min).
"""
import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import pytest

import _aggregators_grid
from _aggregators_grid import (BATCH_ROWS, CHEAP_WIDTH, EXPENSIVE_WIDTH, FILES, FILES_PER_BATCH,
                               HAND_PLANS, HAND_STREAM_METHODS, HDFS, SCHEMA, SKEW_PLANS,
                               STREAM_BATCHES, STREAM_ROWS, TWS_METHODS, WORKERS, Reference,
                               batch_dataset, batch_query, env, last_per_key, make_aggregator,
                               one_batch_sample, result_columns, stream_dataset, stream_query)
from _baselines import OneAggregator, decode, grouped_form
from _figures import AutoLog, spread, summarize, timed, zipf_p1
from _rest import batch_stages, group_stages, run_in_group
from skewgroup.app.baselines import foreach_batch, state_version

ROUNDS = int(env("ROUNDS", 2))
STREAM_ROUNDS = int(env("STREAM_ROUNDS", 1))
ZS = tuple(float(z) for z in env("Z", "1.0,1.4,2.0").split(","))
UNIVERSES = tuple(int(u) for u in env("UNIVERSES", "100000,1000000").split(","))
AGGREGATES = tuple(env("AGGREGATES", "cheap,expensive,kll").split(","))
BATCH_PLANS = tuple(env("BATCH_PLANS", ",".join(SKEW_PLANS + HAND_PLANS)).split(","))
STREAM_METHODS = tuple(env("STREAM_METHODS",
                           "skew_group,spread,per-key,bucketed,partial,foreachBatch").split(","))
# The shuffle partitions, hence every stateful stage's tasks (skew_group's and the hand-written
# ways' alike); skew_group's partial keeps WORKERS.
STATE_PARTITIONS = int(env("STATE_PARTITIONS", WORKERS))
UI_PORT = 4080
SNAPSHOTS = pathlib.Path(tempfile.gettempdir()) / "skewgroup-bench-aggregators-routers"


# --- Spark -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from _session import local_session

    # the grid's aggregators run in the Python workers: shipped by value too
    session = local_session(sys.modules[__name__], "skewgroup-bench-aggregators", UI_PORT,
                            {"spark.sql.adaptive.enabled": "false",
                             "spark.sql.shuffle.partitions": str(STATE_PARTITIONS),
                             "spark.skewgroup.routerSnapshots": str(SNAPSHOTS)},
                            by_value=(_aggregators_grid,))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def costs():
    """µs per row of each aggregate's reduce alone (one process; its ``reduce_groups``, or for
    a plain aggregator the loop calling ``reduce`` per row): 20,000 rows in 2,000 groups, best
    of 3."""
    import pyarrow as pa

    rng = np.random.default_rng(0)
    rows = pa.table({"x": rng.lognormal(0.0, 1.0, 20_000)})
    offsets = np.arange(0, 20_001, 10, dtype=np.int64)
    out = {}
    for name in AGGREGATES:
        obj = grouped_form(make_aggregator(name))
        best = min(timed(obj.reduce_groups, rows, offsets) for _ in range(3))
        out[name] = round(best / rows.num_rows * 1e6, 3)
    return out


def _cells():
    return [(z, u) for z in ZS for u in UNIVERSES]


def _cell_id(cell):
    return f"z{cell[0]}-u{cell[1]}"


@pytest.mark.parametrize("cell", _cells(), ids=_cell_id)
def test_batch(benchmark, figures, spark, costs, cell):
    z, universe = cell
    directory = batch_dataset(z, universe)
    reference = Reference(directory, AGGREGATES)
    df = spark.read.parquet(str(directory))
    assert df.rdd.getNumPartitions() == FILES
    runs = {(a, p): [] for a in AGGREGATES for p in BATCH_PLANS}
    checks = {}
    log = AutoLog()

    def every_plan():
        for plan in ("routed", "pandas_udf"):   # warm-up: the JVM, the page cache, workers
            batch_query(df, "cheap", plan).toArrow()
        for round_ in range(ROUNDS):   # rounds outermost: a burst of load hits one run per plan
            for aggregate, plan in runs:
                log.current = aggregate
                label = f"aggs-z{z}-u{universe}-{aggregate}-{plan}-{round_}"
                table, wall = run_in_group(spark, label,
                                           lambda: batch_query(df, aggregate, plan).toArrow())
                runs[aggregate, plan].append((None, wall, group_stages(spark, label)))
                checks[aggregate, plan] = reference.check(aggregate, *result_columns(table))

    with log:
        benchmark.pedantic(every_plan, rounds=1, iterations=1)
    for aggregate in AGGREGATES:
        figures.add(what="aggregators batch", z=z, universe=universe, aggregate=aggregate,
                    rows=BATCH_ROWS, files=FILES, workers=WORKERS, rounds=ROUNDS,
                    distinct_keys=reference.distinct(), p1=round(zipf_p1(z, universe), 4),
                    cost_per_row_us=costs[aggregate],
                    mix_width={"cheap": CHEAP_WIDTH,
                               "expensive": EXPENSIVE_WIDTH}.get(aggregate),
                    auto_said=log.said.get(aggregate, ""),
                    exact={p: checks[aggregate, p] for p in BATCH_PLANS},
                    plans={p: summarize(runs[aggregate, p]) for p in BATCH_PLANS})


# --- streaming ---------------------------------------------------------------------------------


def run_stream(spark, directory, aggregate, method, label):
    """One run of ``method`` over the stream in ``directory``: (non-empty progresses, per-batch
    stages from the REST API, final (keys, values), state figures)."""
    from skewgroup.spark._stream_merge import PROVIDER, ROCKSDB

    source = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", FILES_PER_BATCH)
              .parquet(str(directory / "input")))
    checkpoint = tempfile.mkdtemp(prefix="sg-bench-aggs-ck-")
    state_dir = pathlib.Path(tempfile.mkdtemp(prefix="sg-bench-aggs-state-"))
    name = label.replace("-", "_").replace(".", "_")
    try:
        # Each method on the state store its user gets: skew_group sets RocksDB for the
        # session (its transformWithStateInPandas needs it), so the others are set back to
        # Spark's default before they start.
        spark.conf.set(PROVIDER, ROCKSDB if method in TWS_METHODS else HDFS)
        if method == "foreachBatch":
            writer = source.writeStream.foreachBatch(
                foreach_batch(OneAggregator(make_aggregator(aggregate)), WORKERS, state_dir))
        else:
            sample = one_batch_sample(spark, directory, SCHEMA)
            writer = (stream_query(spark, source, aggregate, method, sample).writeStream
                      .format("memory").queryName(name).outputMode("update"))
        used = spark.conf.get(PROVIDER)
        query = (writer.option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None, query.exception()
        progress = [json.loads(p.json) for p in query.recentProgress]
        progress = [p for p in progress if p["numInputRows"]]
        paths = batch_stages(spark, query.runId)
        state = {}
        if method == "foreachBatch":
            last = state_version(state_dir, 1 << 30)
            table = spark.read.parquet(str(last)).toArrow()
            obj = make_aggregator(aggregate)
            keys = table.column("k").to_numpy()
            values = [obj.finish(b) for b in decode(table.column("buf").to_pylist())]
            disk = sum(f.stat().st_size for f in last.glob("*.parquet"))
            state = {"state_bytes": disk, "state_rows": table.num_rows,
                     "state_bytes_source": "parquet bytes on disk of the last state table"}
        else:
            keys, values = last_per_key(spark.table(name).toArrow())
            spark.catalog.dropTempView(name)
            operator = progress[-1]["stateOperators"][0]
            custom = operator.get("customMetrics") or {}
            state = {"state_bytes": custom.get("stateOnCurrentVersionSizeBytes",
                                               operator["memoryUsedBytes"]),
                     "memory_used_bytes": operator["memoryUsedBytes"],
                     "state_rows": operator["numRowsTotal"],
                     "state_bytes_source": "stateOnCurrentVersionSizeBytes"
                     if "stateOnCurrentVersionSizeBytes" in custom else "memoryUsedBytes"}
        state["state_store"] = used.rsplit(".", 1)[-1]
        return progress, paths, (keys, values), state
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.mark.parametrize("cell", _cells(), ids=_cell_id)
def test_streaming(benchmark, figures, spark, costs, cell):
    z, universe = cell
    directory = stream_dataset(z, universe)
    reference = Reference(directory, AGGREGATES)
    with np.load(directory / "_data.npz") as data:
        keys = data["keys"]
    per_batch = [np.unique(keys[b * STREAM_ROWS:(b + 1) * STREAM_ROWS])
                 for b in range(STREAM_BATCHES)]
    distinct = [int(len(k)) for k in per_batch]
    seen = [int(len(np.unique(keys[:(b + 1) * STREAM_ROWS]))) for b in range(STREAM_BATCHES)]
    runs = {(a, m): [] for a in AGGREGATES for m in STREAM_METHODS}
    checks = {}

    log = AutoLog()

    def every_method():
        for round_ in range(STREAM_ROUNDS):
            for aggregate, method in runs:
                log.current = (aggregate, method)
                label = f"aggs-stream-z{z}-u{universe}-{aggregate}-{method}-{round_}"
                progress, paths, result, state = run_stream(spark, directory, aggregate,
                                                            method, label)
                assert len(progress) == STREAM_BATCHES, (method, len(progress))
                runs[aggregate, method].append((progress, paths, state))
                checks[aggregate, method] = reference.check(aggregate, *result)

    with log:
        benchmark.pedantic(every_method, rounds=1, iterations=1)
    for aggregate in AGGREGATES:
        methods = {}
        for method in STREAM_METHODS:
            batch_s, critical, total, stages = [], [], [], []
            for progress, paths, _ in runs[aggregate, method]:
                for p in progress[1:]:          # after the first micro-batch
                    batch_s.append(p["durationMs"]["triggerExecution"] / 1000)
                    critical.append(sum(s["max_task_s"] for s in paths[p["batchId"]]))
                    total.append(sum(s["total_s"] for s in paths[p["batchId"]]))
                    stages.append(paths[p["batchId"]])
            state = runs[aggregate, method][0][2]
            keys_so_far = seen[-1]
            methods[method] = {
                "batch_s": spread(batch_s), "critical_s": spread(critical),
                "total_s": spread(total),
                "first_batch_s": round(min(r[0][0]["durationMs"]["triggerExecution"] / 1000
                                           for r in runs[aggregate, method]), 3),
                "stages_of_fastest_batch": stages[int(np.argmin(critical))],
                # every batch of the first round, the first included: (micro-batch s, critical
                # s, total task s), to see a cost that grows with the state
                "per_batch": [[round(p["durationMs"]["triggerExecution"] / 1000, 3),
                               round(sum(s["max_task_s"] for s in paths[p["batchId"]]), 3),
                               round(sum(s["total_s"] for s in paths[p["batchId"]]), 3)]
                              for progress, paths, _ in runs[aggregate, method][:1]
                              for p in progress],
                "state_bytes_per_key": round(state["state_bytes"] / keys_so_far, 1),
                "auto_said": log.said.get((aggregate, method), ""),
                **state}
        figures.add(what="aggregators streaming", z=z, universe=universe, aggregate=aggregate,
                    rows_per_batch=STREAM_ROWS, batches=STREAM_BATCHES,
                    files_per_batch=FILES_PER_BATCH, workers=WORKERS,
                    state_partitions=STATE_PARTITIONS, rounds=STREAM_ROUNDS,
                    distinct_keys_per_batch=distinct, keys_total=seen[-1],
                    p1=round(zipf_p1(z, universe), 4), cost_per_row_us=costs[aggregate],
                    mix_width={"cheap": CHEAP_WIDTH,
                               "expensive": EXPENSIVE_WIDTH}.get(aggregate),
                    exact={m: checks[aggregate, m] for m in STREAM_METHODS}, methods=methods)


# --- the tables --------------------------------------------------------------------------------


def batch_table(rows):
    """Markdown: per cell and aggregate, critical / total (s) per plan, auto's choice, ratios."""
    rows = [r for r in rows if r.get("what") == "aggregators batch"]
    if not rows:
        return ""
    plans = list(rows[0]["plans"])
    lines = ["| z | keys | aggregate | µs/row | " + " | ".join(plans)
             + " | auto picked | pandas_udf / auto (critical) | target >= 3 at z >= 1.4 "
             "| auto / local-global (critical) | auto / pandas_udf (total) |",
             "|---|---:|---|---:|" + "---:|" * len(plans) + "---|---:|---|---:|---:|"]
    for row in rows:
        figures = row["plans"]
        cells = [f"{figures[p]['critical_s']:.2f} / {figures[p]['total_s']:.2f}" for p in plans]
        said = row["auto_said"].split(":")[0].replace("skew_group plan=", "") or "?"

        def ratio(a, b, field="critical_s"):
            if a in figures and b in figures and figures[b][field]:
                return figures[a][field] / figures[b][field]
            return None

        speedup = ratio("pandas_udf", "auto")
        met = "—" if row["z"] < 1.4 or speedup is None else ("met" if speedup >= 3 else "MISSED")
        shown = [f"{x:.2f}" if x is not None else "—"
                 for x in (speedup, ratio("auto", "local-global"),
                           ratio("auto", "pandas_udf", "total_s"))]
        lines.append(f"| {row['z']} | {row['universe']:,} ({row['distinct_keys']:,}) | "
                     f"{row['aggregate']} | {row['cost_per_row_us']} | " + " | ".join(cells)
                     + f" | {said} | {shown[0]} | {met} | {shown[1]} | {shown[2]} |")
    return "\n".join(lines)


def stream_table(rows):
    """Markdown: per cell, aggregate and method: micro-batch, critical path and total task time
    (min (max), s), state bytes per key; then the targets."""
    rows = [r for r in rows if r.get("what") == "aggregators streaming"]
    if not rows:
        return ""
    lines = ["| z | keys | aggregate | keys/batch | method | micro-batch s | critical s "
             "| total task s | state B/key |", "|---|---:|---|---:|---|---:|---:|---:|---:|"]
    targets = ["| z | keys | aggregate | keys/batch | per-key / skew_group (micro-batch) "
               "| target | bucketed / skew_group (critical) | target "
               "| skew_group / best hand-written (micro-batch; critical) |",
               "|---|---:|---|---:|---:|---|---:|---|---|"]
    for row in rows:
        methods = row["methods"]
        keys_per_batch = int(np.mean(row["distinct_keys_per_batch"][1:]
                                     or row["distinct_keys_per_batch"]))
        for method, f in methods.items():
            lines.append(
                f"| {row['z']} | {row['universe']:,} | {row['aggregate']} | {keys_per_batch:,} "
                f"| {method} | {f['batch_s']['min']:.2f} ({f['batch_s']['max']:.2f}) "
                f"| {f['critical_s']['min']:.2f} ({f['critical_s']['max']:.2f}) "
                f"| {f['total_s']['min']:.2f} ({f['total_s']['max']:.2f}) "
                f"| {f['state_bytes_per_key']:,.0f} |")
        sg = methods.get("skew_group")
        if not sg:
            continue
        batch_ratio = crit_ratio = None
        batch_met = crit_met = "—"
        if "per-key" in methods:
            batch_ratio = methods["per-key"]["batch_s"]["min"] / sg["batch_s"]["min"]
            if row["aggregate"] == "plain":
                batch_met = "met (>= 2)" if batch_ratio >= 2 else "MISSED (>= 2)"
            elif keys_per_batch >= 5_000:
                batch_met = "met (>= 3)" if batch_ratio >= 3 else "MISSED (>= 3)"
            else:
                batch_met = "met (>= 1)" if batch_ratio >= 1 else "MISSED (>= 1)"
        if "bucketed" in methods:
            crit_ratio = methods["bucketed"]["critical_s"]["min"] / sg["critical_s"]["min"]
            if row["aggregate"] == "plain":
                over = sg["batch_s"]["min"] / methods["bucketed"]["batch_s"]["min"]
                crit_met = (f"{'met' if over <= 1.0 else 'MISSED'} (micro-batch {over:.2f}x "
                            "bucketed's, <= 1.0x)")
            elif row["z"] == 1.0:
                crit_met = "met (<= 1.1x)" if 1 / crit_ratio <= 1.1 else "MISSED (<= 1.1x)"
            elif row["aggregate"] == "expensive":
                crit_met = "met (>= 2)" if crit_ratio >= 2 else "MISSED (>= 2)"
        shown = [f"{x:.2f}" if x is not None else "—" for x in (batch_ratio, crit_ratio)]
        targets.append(f"| {row['z']} | {row['universe']:,} | {row['aggregate']} | "
                       f"{keys_per_batch:,} | {shown[0]} | {batch_met} | {shown[1]} "
                       f"| {crit_met} | {_against_best_hand(methods)} |")
    return "\n".join(lines) + "\n\n" + "\n".join(targets)


def _against_best_hand(methods):
    """skew_group's micro-batch and critical path (minima) over the best hand-written method's
    (of those that ran), each with the best named; "—" without skew_group or a hand-written
    method."""
    sg = methods.get("skew_group")
    hands = [m for m in HAND_STREAM_METHODS if m in methods]
    if not sg or not hands:
        return "—"
    shown, met = [], True
    for field in ("batch_s", "critical_s"):
        best = min(hands, key=lambda m: methods[m][field]["min"])
        ratio = sg[field]["min"] / methods[best][field]["min"]
        met &= ratio <= 1.0
        shown.append(f"{ratio:.2f}x {best}")
    return "; ".join(shown) + (" (met, <= 1.0x)" if met else " (MISSED, <= 1.0x)")


def stage_table(rows, batch_plans=("auto", "split", "routed", "pandas_udf", "local-global"),
                stream_methods=("skew_group", "bucketed", "partial", "per-key", "foreachBatch")):
    """Markdown: per run, its stages (tasks: slowest task s / total s) in order; batch: the
    fastest round of each plan; stream: the batch with the shortest critical path."""
    lines = ["| kind | z | keys | aggregate | plan | stages: tasks: slowest task s / total s |",
             "|---|---|---:|---|---|---|"]
    for row in rows:
        if row.get("what") == "aggregators batch":
            kind, runs = "batch", {p: row["plans"][p]["stages"] for p in batch_plans
                                   if p in row["plans"]}
        elif row.get("what") == "aggregators streaming":
            kind, runs = "stream", {m: row["methods"][m]["stages_of_fastest_batch"]
                                    for m in stream_methods if m in row["methods"]}
        else:
            continue
        for plan, stages in runs.items():
            if not stages:
                continue
            parts = [f"{s['tasks']}: {s['max_task_s']:.2f} / {s['total_s']:.2f}" for s in stages]
            lines.append(f"| {kind} | {row['z']} | {row['universe']:,} | {row['aggregate']} "
                         f"| {plan} | " + " · ".join(parts) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def exactness_table(rows):
    lines = []
    for row in rows:
        if row.get("what") not in ("aggregators batch", "aggregators streaming"):
            continue
        kind = "batch" if row["what"] == "aggregators batch" else "stream"
        for plan, check in row["exact"].items():
            if check.get("exact") == "rank":
                lines.append(f"- {kind} z={row['z']} keys={row['universe']:,} kll {plan}: "
                             f"{check['keys_over_k']} keys over k, max rank error "
                             f"{check['max_rank_error_over_bound']}x the bound, "
                             f"{check['share_beyond_bound']:.2%} beyond it")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        rows = json.load(f)["rows"]
    for part in (batch_table(rows), stream_table(rows), stage_table(rows),
                 exactness_table(rows)):
        if part:
            print(part)
            print()
