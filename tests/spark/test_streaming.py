"""skew_group on streams: update, complete, windowed append; router state across restarts."""
import shutil

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import skewgroup
from skewgroup.spark import agg, balance, skew_group, watch

SCHEMA = "k long, v long, ts timestamp"
FILES = 4
ROWS_PER_FILE = 4000


def write_files(directory, first, count, seed=11):
    rng = np.random.default_rng(seed)
    for i in range(first, first + count):
        keys = skewgroup.streams.zipf(1.4, ROWS_PER_FILE, universe=500, seed=seed + i)
        frame = pd.DataFrame({
            "k": keys,
            "v": rng.integers(0, 100, ROWS_PER_FILE),
            "ts": pd.Timestamp("2026-01-01") + pd.to_timedelta(
                i * 60 + np.sort(rng.integers(0, 60, ROWS_PER_FILE)), unit="s"),
        })
        frame["ts"] = frame["ts"].dt.tz_localize("UTC")
        frame.to_parquet(directory / f"part-{i:04d}.parquet", index=False,
                         coerce_timestamps="us")


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("stream-input")
    write_files(directory, 0, FILES)
    return directory


def stream(spark, directory):
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
            .parquet(str(directory)))


def run(query_df, mode, checkpoint, name, spark, sink="memory"):
    writer = query_df.writeStream.outputMode(mode).format(sink)
    if sink == "memory":
        writer = writer.queryName(name)
    query = (writer.option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert query.exception() is None
    return query, spark.sql(f"select * from {name}").toPandas() if sink == "memory" else None


def expected(spark, directory):
    return (spark.read.schema(SCHEMA).parquet(str(directory)).groupBy("k")
            .agg(F.count(F.lit(1)).alias("count(1)"), F.sum("v").alias("sum(v)"))
            .toPandas().sort_values("k").reset_index(drop=True))


def test_update_mode_equals_group_by(spark, source_dir, tmp_path):
    out = stream(spark, source_dir).transform(skew_group("k", agg.count(), agg.sum("v"), workers=4,
                                                         plan="routed"))
    query, rows = run(out, "update", tmp_path / "ck", "upd", spark)
    latest = rows.groupby("k", as_index=False).last().sort_values("k").reset_index(drop=True)
    pd.testing.assert_frame_equal(latest, expected(spark, source_dir), check_dtype=False)
    figures = [balance(p) for p in query.recentProgress]
    figures = [f for f in figures if f]
    assert len(figures) == FILES
    assert all(f["rows"] == ROWS_PER_FILE for f in figures)
    assert max(f["load_imbalance"] for f in figures) < 0.05  # kg would be > 1 here
    # (worker, key) pairs per key from HyperLogLog counts (5 % relative standard deviation):
    # between 1 and 4 workers
    assert all(0.9 < f["replication_factor"] < 4.1 for f in figures)
    # Zipf 1.4 over 500 keys, theta = 1/20: the two hottest keys (p ~ 0.30, 0.11) are hot in
    # every batch, and Pd-Stream gives each hot key more than one worker (KG would give one).
    assert all(f["hot_keys"] >= 2 for f in figures)
    assert all(f["hot_key_replication"] > 1.5 for f in figures)


def test_watch_prints_each_batch_while_the_query_runs(spark, source_dir, tmp_path):
    out = stream(spark, source_dir).transform(skew_group("k", agg.count(), workers=4,
                                                         plan="routed"))
    query = (out.writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    lines = []
    try:
        watch(query, interval=0.2, batches=FILES, out=lines.append)
    finally:
        query.stop()
    assert query.exception() is None
    assert len(lines) == FILES
    assert [line.split(":")[0] for line in lines] == [f"batch {b}" for b in range(FILES)]
    for line in lines:
        assert f"{ROWS_PER_FILE} rows" in line
        assert float(line.split("LI ")[1].split(",")[0]) < 0.05


def test_complete_mode_equals_group_by(spark, source_dir, tmp_path):
    out = stream(spark, source_dir).transform(skew_group("k", agg.count(), agg.sum("v"), workers=3,
                                                         plan="routed"))
    _, rows = run(out, "complete", tmp_path / "ck", "cmp", spark)
    got = rows.sort_values("k").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected(spark, source_dir), check_dtype=False)


def test_windowed_append_with_watermark(spark, source_dir, tmp_path):
    events = (stream(spark, source_dir).withWatermark("ts", "1 minute")
              .withColumn("window", F.window("ts", "1 minute")))
    out = events.transform(skew_group(["window", "k"], agg.count(), agg.max("v"), workers=4,
                                      plan="routed"))
    _, rows = run(out, "append", tmp_path / "ck", "win", spark)
    plain = events.groupBy("window", "k").agg(F.count(F.lit(1)).alias("count(1)"),
                                              F.max("v").alias("max(v)"))
    _, plain_rows = run(plain, "append", tmp_path / "ck-plain", "win_plain", spark)
    # Append mode emits a window once the watermark passes it: the same windows as groupBy.
    key = lambda f: sorted(zip(f["window"].map(lambda w: w["start"]), f["k"], f["count(1)"],  # noqa: E731
                               f["max(v)"]))
    assert len(plain_rows) > 0
    assert key(rows) == key(plain_rows)


def test_restart_continues_the_routers(spark, tmp_path):
    """Stop after two files, restart on the same checkpoint: every batch routes exactly as in an
    uninterrupted run. Shuffle grouping makes the router state visible: its round-robin cursor
    carries over, so with 4000 rows per batch over 3 workers the extra row moves on each batch
    (a router reset per batch or at the restart would give it to worker 0 every time)."""
    directory = tmp_path / "in"
    directory.mkdir()
    write_files(directory, 0, 4, seed=3)

    def query_df(path):
        return stream(spark, path).transform(
            skew_group("k", agg.count(), workers=3, plan="routed", strategy="sg"))

    def rows_per_worker(*queries):
        return [f["rows_per_worker"] for q in queries for f in map(balance, q.recentProgress) if f]

    # The noop sink (unlike memory in update mode) can restart from a checkpoint.
    whole, _ = run(query_df(directory), "update", tmp_path / "ck-whole", "whole", spark, "noop")
    uninterrupted = rows_per_worker(whole)
    assert uninterrupted == [[1334, 1333, 1333], [1333, 1334, 1333],
                             [1333, 1333, 1334], [1334, 1333, 1333]]
    # Shuffle grouping sends every hot key to all 3 workers.
    hot = [f for f in map(balance, whole.recentProgress) if f]
    assert all(f["hot_keys"] >= 2 and f["hot_key_replication"] == 3 for f in hot)

    restarted_dir = tmp_path / "in2"
    restarted_dir.mkdir()
    files = sorted(directory.iterdir())
    for f in files[:2]:
        (restarted_dir / f.name).write_bytes(f.read_bytes())
    first, _ = run(query_df(restarted_dir), "update", tmp_path / "ck", "a", spark, "noop")
    for f in files[2:]:
        (restarted_dir / f.name).write_bytes(f.read_bytes())
    second, _ = run(query_df(restarted_dir), "update", tmp_path / "ck", "b", spark, "noop")
    assert rows_per_worker(first, second) == uninterrupted


def test_routed_stream_balances_each_batch_after_a_restart(spark, tmp_path):
    directory = tmp_path / "in"
    directory.mkdir()
    write_files(directory, 0, 2, seed=4)
    query = lambda: stream(spark, directory).transform(skew_group("k", agg.count(), workers=4,
                                                                  plan="routed"))  # noqa: E731
    first, _ = run(query(), "update", tmp_path / "ck", "a", spark, "noop")
    write_files(directory, 2, 2, seed=4)
    second, _ = run(query(), "update", tmp_path / "ck", "b", spark, "noop")
    after = [balance(p) for p in second.recentProgress if balance(p)]
    assert len(after) == 2 and all(f["load_imbalance"] < 0.05 for f in after)


@pytest.mark.parametrize("plan", ["local", "hash"])
def test_local_and_hash_plans_stream_a_vectorized_custom_aggregate(spark, source_dir, tmp_path,
                                                                   plan):
    import numpy as np

    total = agg.custom(partial=lambda rows, offsets: {
                           "s": np.add.reduceat(rows.column("v").to_numpy(), offsets[:-1])},
                       merge={"s": "sum"}, schema="s long", vectorized=True)
    out = stream(spark, source_dir).transform(skew_group("k", total, agg.count(), workers=3,
                                                         plan=plan))
    _, rows = run(out, "complete", tmp_path / "ck", f"vec_{plan}", spark)
    got = rows.sort_values("k").reset_index(drop=True)
    want = expected(spark, source_dir)
    assert got["k"].tolist() == want["k"].tolist()
    assert got["s"].tolist() == want["sum(v)"].tolist()
    assert got["count(1)"].tolist() == want["count(1)"].tolist()


def test_split_plan_is_refused_on_a_stream(spark, source_dir):
    with pytest.raises(ValueError, match="plan='split'"):
        stream(spark, source_dir).transform(skew_group("k", agg.count(), plan="split"))


def test_cold_restart_with_other_workers_is_exact_and_balanced(spark, tmp_path):
    """Routers are soft state: a restart on the checkpoint with the routers' snapshots gone
    (as on a new executor) and with other workers still equals groupBy, and the cold routers
    balance from their first micro-batch."""
    directory = tmp_path / "in"
    directory.mkdir()
    write_files(directory, 0, 2, seed=6)
    snapshots = tmp_path / "routers"
    latest = {}

    def collect(batch, batch_id):
        for row in batch.collect():
            latest[row["k"]] = (row["count(1)"], row["sum(v)"])

    def run_with(workers):
        out = stream(spark, directory).transform(
            skew_group("k", agg.count(), agg.sum("v"), workers=workers, plan="routed"))
        query = (out.writeStream.outputMode("update").foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "ck"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(240)
        assert query.exception() is None
        return query

    spark.conf.set("spark.skewgroup.routerSnapshots", str(snapshots))
    try:
        first = run_with(4)
        assert (snapshots / str(first.id)).is_dir()
        shutil.rmtree(snapshots)
        write_files(directory, 2, 2, seed=6)
        second = run_with(3)
    finally:
        spark.conf.unset("spark.skewgroup.routerSnapshots")
    assert second.id == first.id
    after = [f for f in map(balance, second.recentProgress) if f]
    assert len(after) == 2 and all(len(f["rows_per_worker"]) == 3 for f in after)
    assert all(f["load_imbalance"] < 0.05 for f in after)
    want = expected(spark, directory)
    got = pd.DataFrame([(k, c, s) for k, (c, s) in latest.items()],
                       columns=["k", "count(1)", "sum(v)"]).sort_values("k").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_a_routed_stream_has_one_python_stage_and_two_shuffles(spark, source_dir, tmp_path):
    """The tag is one Arrow stage inside the input tasks (no shuffle before it, no
    state store operator but the merge's): placement and merge are the only exchanges."""
    out = stream(spark, source_dir).transform(skew_group("k", agg.count(), agg.sum("v"),
                                                         workers=4, plan="routed"))
    query, _ = run(out, "update", tmp_path / "ck", "plan", spark, "noop")
    plan = query._jsq.explainInternal(False)
    assert plan.count("ArrowEvalPython") == 1
    assert "MapInArrow" not in plan and "FlatMapGroupsInPandasWithState" not in plan
    assert plan.count("Exchange ") == 2 and plan.count("StateStoreSave") == 1
