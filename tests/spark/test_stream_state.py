"""The stream's stateful merge (skewgroup.spark._stream_merge) keeps each bucket of keys as runs
in RocksDB (skewgroup._aggregation.stream, docs/stream.md): exactly once when the driver is
SIGKILLed between micro-batches and the query restarts on its checkpoint, and a checkpoint of
the previous layout refused by name. (A restart with other workers and windowed append's
expiry: test_python_aggregators.py.)"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from skewgroup.spark import agg, skew_group

FILES = 6

JOB = textwrap.dedent('''
    import sys
    from pyspark.sql import SparkSession
    from skewgroup.aggregators import DistinctCount
    from skewgroup.spark import agg, skew_group

    source, checkpoint, out = sys.argv[1:4]
    spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", 3)
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def write(batch, batch_id):      # idempotent per micro-batch: a rerun overwrites its file
        batch.toPandas().to_parquet(f"{out}/batch-{batch_id:04d}.parquet")

    stream = (spark.readStream.schema("k long, v long").option("maxFilesPerTrigger", 1)
              .parquet(source))
    query = (stream.transform(skew_group("k", agg.aggregator(DistinctCount("bigint"), "v"),
                                         agg.count(), agg.sum("v"), workers=3))
             .writeStream.outputMode("update").foreachBatch(write)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
''')


def test_driver_killed_between_micro_batches_restarts_exactly_once(tmp_path):
    """SIGKILL the driver (and its Python workers) once two micro-batches are committed, then
    run the same query again on the checkpoint: every micro-batch's output is written, and each
    key's last row equals pandas' groupby of every row, nothing counted twice or lost."""
    rng = np.random.default_rng(11)
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    frames = []
    for i in range(FILES):
        frame = pd.DataFrame({"k": rng.zipf(1.4, 4000) % 300, "v": rng.integers(0, 50, 4000)})
        frames.append(frame)
        path = source / f"part-{i}.parquet"
        frame.to_parquet(path, index=False)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    script = tmp_path / "job.py"
    script.write_text(JOB)
    checkpoint = tmp_path / "ck"
    command = [sys.executable, "-P", str(script), str(source), str(checkpoint), str(out)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    driver = subprocess.Popen(command, cwd=tmp_path, env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    commits = checkpoint / "commits"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and driver.poll() is None:
            done = [p for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
            if len(done) >= 2:
                assert len(done) < FILES, "the query ended before the driver could be killed"
                os.killpg(driver.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the driver ended or stalled:\n{driver.stderr.read().decode()[-3000:]}")
    finally:
        driver.wait(60)
    assert driver.returncode == -signal.SIGKILL
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]

    batches = sorted(out.glob("batch-*.parquet"))
    assert [int(p.stem.split("-")[1]) for p in batches] == list(range(FILES))
    last = {}
    for path in batches:
        for row in pd.read_parquet(path).itertuples(index=False):
            last[row.k] = (row[1], row[2], row[3])
    rows = pd.concat(frames)
    want = rows.groupby("k").v.agg(["nunique", "size", "sum"])
    assert last == {k: (int(r["nunique"]), int(r["size"]), int(r["sum"]))
                    for k, r in want.iterrows()}


def test_a_checkpoint_of_the_previous_layout_is_refused_by_name(spark, tmp_path):
    """The previous layout kept a bucket as one blob in an ``applyInPandasWithState`` state:
    restarted on such a checkpoint, the query stops before reading its state, and the error
    names the operator that wrote it and the one that reads now."""
    source = tmp_path / "in"
    source.mkdir()
    pd.DataFrame({"k": [1, 2], "v": [3, 4]}).to_parquet(source / "0.parquet")
    stream = spark.readStream.schema("k long, v long").parquet(str(source))

    def previous(_, frames, state):
        state.update((b"blob",))
        yield pd.DataFrame({"k": [1]})

    old = (stream.withColumn("bucket", F.pmod(F.xxhash64("k"), F.lit(64))).groupBy("bucket")
           .applyInPandasWithState(previous, "k long", "blob binary", "update",
                                   GroupStateTimeout.NoTimeout))
    checkpoint = str(tmp_path / "ck")
    query = (old.writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    pd.DataFrame({"k": [1], "v": [5]}).to_parquet(source / "1.parquet")

    class SumCount:
        bufferSchema, outputType = "s bigint, n bigint", "s bigint, n bigint"

        def zero(self):
            return (0, 0)

        def reduce(self, buffer, value):
            return (buffer[0] + value[0], buffer[1] + 1)

        def merge(self, a, b):
            return (a[0] + b[0], a[1] + b[1])

        def finish(self, buffer):
            return buffer

    new = stream.transform(skew_group("k", agg.aggregator(SumCount(), "v"), workers=2))
    query = (new.writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    with pytest.raises(Exception) as error:
        query.awaitTermination()
    message = str(error.value)
    assert "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in message
    assert "applyInPandasWithState" in message and "transformWithStateInPandas" in message
