"""How a stream's cost grows with the keys it has seen: a long stream of new keys, one Python
aggregator in skew_group's stateful merge, against Spark's groupBy of built-ins and the
expert's hand-written ways (the grid's, bench/_baselines.py) in the same session:
bucketed ``applyInPandasWithState`` over the raw rows (one Arrow blob per bucket, rewritten
whole); ``partial``, a round-robin ``repartition(WORKERS)`` and a ``mapInArrow`` partial (one
buffer per partition and key) before the same bucketed merge of those partials; and a
``foreachBatch`` merge into a table (each micro-batch's partials merged with the previous
version of a parquet state table, written whole as the next version). ``skew_group`` runs with
``plan=PLAN``; ``sampled`` is skew_group with ``plan="auto"`` and ``sample=`` the batch read of
the stream's first file, one micro-batch's rows (what a user who follows docs/plans.md writes).

For each method, per micro-batch: its time (``triggerExecution``; its ``queryPlanning`` and
``addBatch`` apart, the driver's planning and the execution), its critical path and total
task time (the UI's REST API: the slowest task of each stage, summed over the stages), and the
bytes the checkpoint directory grew by (measured by a listener after each commit); at the end:
the checkpoint directory's bytes, the state memory Spark reports, and per key seen. After the
methods, one more row per skew_group method that ran (``skew_group``, ``sampled``): per
micro-batch its time over the fastest hand-written way's that ran (``bucketed``, ``partial``,
``foreachBatch``), that way named, and the largest ratio from the second micro-batch. For
foreachBatch the state is its table: "written" is the new version's bytes plus the
checkpoint's growth, "held" the checkpoint plus the last version (older versions deleted, as a
user would; the output is the table, no rows are emitted).

    cd /tmp && python -m pytest /path/to/bench/bench_stream_growth.py --benchmark-only -s \\
        -p no:cacheprovider

Environment: SKEWGROUP_BENCH_GROWTH_KEYS ("uniform:100000000" or "zipf1.0:5000000"),
_ROWS (rows a micro-batch, 250,000), _BATCHES (40), _WORKERS (16), _STATE_PARTITIONS (the
shuffle partitions, every stateful stage's tasks; the workers), _METHODS
(groupBy,groupBy-rocksdb,skew_group,bucketed,partial; also sampled, foreachBatch), _PLAN
(skew_group's plan, auto).
"""
import json
import os
import pathlib
import shutil
import tempfile
import threading
import time

import numpy as np
import pytest

pytest.importorskip("pyspark")

from _aggregators_grid import HDFS, one_batch_sample  # noqa: E402
from _baselines import OneAggregator  # noqa: E402
from _figures import AutoLog  # noqa: E402
from _rest import batch_stages  # noqa: E402
from skewgroup.app.baselines import foreach_batch, state_version  # noqa: E402
from skewgroup.spark._stream_merge import CHANGELOG, PROVIDER, ROCKSDB  # noqa: E402


def _env(name, default):
    return os.environ.get(f"SKEWGROUP_BENCH_GROWTH_{name}", default)


KEYS = _env("KEYS", "uniform:100000000")
ROWS = int(_env("ROWS", 250_000))
BATCHES = int(_env("BATCHES", 40))
WORKERS = int(_env("WORKERS", 16))
# The shuffle partitions apart from the workers: every stateful stage's tasks.
STATE_PARTITIONS = int(_env("STATE_PARTITIONS", WORKERS))
METHODS = tuple(_env("METHODS", "groupBy,groupBy-rocksdb,skew_group,bucketed,partial")
                .split(","))
# The hand-written ways skew_group's micro-batches are compared with (the fastest that ran).
HAND = ("bucketed", "partial", "foreachBatch")
PLAN = _env("PLAN", "auto")
SEED = 5
UI_PORT = 4082


class Moments:
    """n, sum and sum of squares of a double (Spark's Aggregator protocol, with the vectorized
    ``reduce_groups``/``merge_groups`` over numpy)."""

    bufferSchema = "n bigint, s double, q double"
    outputType = "n bigint, s double, q double"

    def zero(self):
        return (0, 0.0, 0.0)

    def reduce(self, buffer, value):
        x = value[0]
        return (buffer[0] + 1, buffer[1] + x, buffer[2] + x * x)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1], a[2] + b[2])

    def finish(self, buffer):
        return buffer

    def reduce_groups(self, rows, offsets):
        x = rows.column(0).to_numpy()
        starts = offsets[:-1]
        n = np.diff(offsets)
        s = np.add.reduceat(x, starts) if len(x) else np.zeros(len(n))
        q = np.add.reduceat(x * x, starts) if len(x) else np.zeros(len(n))
        return list(zip(n.tolist(), s.tolist(), q.tolist()))

    def merge_groups(self, buffers, offsets):
        if not buffers:
            return []
        array = np.asarray(buffers, dtype=np.float64)
        starts = offsets[:-1]
        summed = np.add.reduceat(array, starts, axis=0)
        return [(int(n), s, q) for n, s, q in summed.tolist()]


def dataset():
    """BATCHES parquet files of ROWS rows (k long, x double), one micro-batch each, and the
    number of distinct keys seen after each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kind, universe = KEYS.split(":")
    universe = int(universe)
    directory = pathlib.Path(tempfile.gettempdir()) / (
        f"skewgroup-bench-growth-{kind}-{universe}-{ROWS}-{BATCHES}")
    marker = directory / "_seen.json"
    if marker.exists():
        return directory, json.loads(marker.read_text())
    shutil.rmtree(directory, ignore_errors=True)
    (directory / "input").mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    seen, total = [], np.empty(0, np.int64)
    for b in range(BATCHES):
        if kind == "uniform":
            keys = rng.integers(0, universe, ROWS, dtype=np.int64)
        elif kind.startswith("zipf"):
            import skewgroup

            keys = skewgroup.streams.zipf(float(kind[4:]), ROWS, universe=universe,
                                          seed=SEED * 1000 + b)
        else:
            raise ValueError(f"SKEWGROUP_BENCH_GROWTH_KEYS: uniform:N or zipfZ:N, got {KEYS!r}")
        total = np.union1d(total, keys)
        seen.append(int(len(total)))
        path = directory / "input" / f"part-{b:04d}.parquet"
        pq.write_table(pa.table({"k": keys, "x": rng.random(ROWS)}), path)
        os.utime(path, (1_700_000_000 + b, 1_700_000_000 + b))
    marker.write_text(json.dumps(seen))
    return directory, seen


@pytest.fixture(scope="module")
def spark():
    import sys

    from _session import aggregator_stream_session

    session = aggregator_stream_session(sys.modules[__name__], "skewgroup-bench-growth",
                                        UI_PORT, STATE_PARTITIONS)
    yield session
    session.stop()


def _du(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def query(spark, source, method, directory):
    from pyspark.sql import functions as F

    from skewgroup.spark import agg, skew_group

    if method.startswith("groupBy"):
        return source.groupBy("k").agg(F.count("x").alias("n"), F.sum("x").alias("s"))
    if method in ("skew_group", "sampled"):
        sample = (one_batch_sample(spark, directory, "k long, x double")
                  if method == "sampled" else None)
        return source.transform(skew_group(
            "k", agg.aggregator(Moments(), "x", name="m"), workers=WORKERS,
            plan="auto" if method == "sampled" else PLAN, sample=sample))
    if method in ("bucketed", "partial"):
        import pyarrow as pa

        output_type = pa.struct([("n", pa.int64()), ("s", pa.float64()), ("q", pa.float64())])
        work = OneAggregator(Moments(), output="k long, a struct<n: bigint, s: double, q: double>",
                             output_type=output_type)
        return (work.bucketed(source) if method == "bucketed"
                else work.partial_bucketed(source, WORKERS))
    raise ValueError(f"unknown method {method!r}")


def run(spark, directory, method):
    from pyspark.sql.streaming import StreamingQueryListener

    source = (spark.readStream.schema("k long, x double").option("maxFilesPerTrigger", 1)
              .parquet(str(directory / "input")))
    checkpoint = tempfile.mkdtemp(prefix="sg-bench-growth-ck-")
    table = pathlib.Path(tempfile.mkdtemp(prefix="sg-bench-growth-table-"))
    # Each method on the state store a user of it gets: Spark's default (HDFS-backed) for
    # groupBy and the expert's applyInPandasWithState, RocksDB where skew_group asks for it.
    if method == "foreachBatch":
        writer = source.writeStream.foreachBatch(_foreach_batch(table))
    else:
        writer = query(spark, source, method, directory).writeStream.format("noop").outputMode(
            "update")
    rocksdb = method in ("groupBy-rocksdb", "skew_group", "sampled")
    spark.conf.set(PROVIDER, ROCKSDB if rocksdb else HDFS)
    spark.conf.set(CHANGELOG, "true")
    grown, lock = {}, threading.Lock()

    class Sizes(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            with lock:
                last = _latest(table)
                grown[event.progress.batchId] = (_du(checkpoint), _du(last) if last else 0)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    listener = Sizes()
    spark.streams.addListener(listener)
    try:
        started = time.monotonic()
        q = (writer.option("checkpointLocation", checkpoint).trigger(availableNow=True)
             .start())
        q.awaitTermination()
        wall = time.monotonic() - started
        assert q.exception() is None, q.exception()
        time.sleep(1.0)
        progress = [json.loads(p.json) for p in q.recentProgress]
        progress = [p for p in progress if p["numInputRows"]]
        stages = batch_stages(spark, q.runId)
        last = _latest(table)
        final_bytes = _du(checkpoint) + (_du(last) if last else 0)
        state_rows = spark.read.parquet(str(last)).count() if last else None
    finally:
        spark.streams.removeListener(listener)
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(table, ignore_errors=True)
    with lock:
        sizes = [grown.get(p["batchId"]) for p in progress]
    # Held: the checkpoint (and the table's last version); written: the checkpoint's growth
    # (and the table's new version, written whole).
    written = [None if now is None or before is None else now[0] - before[0] + now[1]
               for before, now in zip([(0, 0), *sizes[:-1]], sizes)]
    sizes = [None if s is None else s[0] + s[1] for s in sizes]
    operators = progress[-1]["stateOperators"]
    operator = operators[0] if operators else {"memoryUsedBytes": None,
                                               "numRowsTotal": state_rows}
    return {
        "wall_s": round(wall, 2),
        "batch_s": [p["durationMs"]["triggerExecution"] / 1000 for p in progress],
        # The driver's share: the micro-batch's planning, and its execution (addBatch), of
        # which the tasks' critical path is a part.
        "planning_s": [p["durationMs"].get("queryPlanning", 0) / 1000 for p in progress],
        "add_batch_s": [p["durationMs"].get("addBatch", 0) / 1000 for p in progress],
        "critical_s": [round(sum(s["max_task_s"] for s in stages.get(p["batchId"], [])), 3)
                       for p in progress],
        "task_s": [round(sum(s["total_s"] for s in stages.get(p["batchId"], [])), 3)
                   for p in progress],
        "checkpoint_after_batch": sizes,
        "written_bytes": written,
        "checkpoint_bytes": final_bytes,
        "memory_used_bytes": operator["memoryUsedBytes"],
        "state_rows": operator["numRowsTotal"],
    }


def _latest(table):
    """foreachBatch's last state table version in ``table``, or None."""
    return state_version(table, 1 << 30)


def _foreach_batch(table):
    """The grid's foreachBatch merge with this bench's aggregator; versions older than the
    previous one are deleted (a replayed micro-batch reads the previous one)."""
    process = foreach_batch(OneAggregator(Moments()), WORKERS, table)

    def merge(batch, batch_id):
        process(batch, batch_id)
        for old in table.iterdir():
            if old.name.startswith("v") and int(old.name[1:]) < batch_id - 1:
                shutil.rmtree(old, ignore_errors=True)

    return merge


def _median(values):
    return float(np.median(values)) if values else None


def test_stream_growth(benchmark, figures, spark):
    directory, seen = dataset()
    said = AutoLog()             # auto's plan and why, per method

    batch_s = {}

    def every_method():
        for method in METHODS:       # each method's figures kept as soon as it ends
            said.current = method
            batch_s[method] = record(method, run(spark, directory, method))
        against_hand(batch_s)

    def record(method, r):
        early, late = r["batch_s"][1:4], r["batch_s"][-3:]
        written = [w for w in r["written_bytes"] if w is not None]
        figures.add(
            bench="stream_growth", keys=KEYS, rows=ROWS, batches=BATCHES, workers=WORKERS,
            state_partitions=STATE_PARTITIONS,
            method=method, plan={"skew_group": PLAN, "sampled": "auto, sample="}.get(method),
            auto_said=said.said.get(method, ""),
            keys_seen=seen[-1], wall_s=r["wall_s"],
            batch_s_2_4=_median(early), batch_s_last3=_median(late),
            growth=round(_median(late) / _median(early), 2),
            critical_s_2_4=_median(r["critical_s"][1:4]),
            critical_s_last3=_median(r["critical_s"][-3:]),
            task_s_2_4=_median(r["task_s"][1:4]), task_s_last3=_median(r["task_s"][-3:]),
            checkpoint_bytes=r["checkpoint_bytes"],
            written_bytes_2_4=_median(written[1:4]), written_bytes_last3=_median(written[-3:]),
            memory_used_bytes=r["memory_used_bytes"],
            memory_bytes_per_key=(round(r["memory_used_bytes"] / seen[-1], 1)
                                  if r["memory_used_bytes"] is not None else None),
            state_rows=r["state_rows"], batch_s=r["batch_s"], critical_s=r["critical_s"],
            task_s=r["task_s"], planning_s=r["planning_s"], add_batch_s=r["add_batch_s"],
            checkpoint_after_batch=r["checkpoint_after_batch"])
        print(json.dumps(figures.rows[-1]), flush=True)
        return r["batch_s"]

    def against_hand(batch_s):
        hands = [m for m in HAND if m in batch_s]
        for method in ("skew_group", "sampled"):
            if method not in batch_s or not hands:
                continue
            best = [min(hands, key=lambda m: batch_s[m][i])
                    for i in range(min(len(batch_s[m]) for m in (method, *hands)))]
            ratio = [round(batch_s[method][i] / batch_s[m][i], 3) for i, m in enumerate(best)]
            figures.add(bench="stream_growth against the best hand-written way", keys=KEYS,
                        rows=ROWS, batches=BATCHES, workers=WORKERS, method=method,
                        hand_written=hands, best_per_batch=best, ratio_per_batch=ratio,
                        max_ratio_from_second=max(ratio[1:], default=None))
            print(json.dumps(figures.rows[-1]), flush=True)

    with said:
        benchmark.pedantic(every_method, rounds=1, iterations=1)
