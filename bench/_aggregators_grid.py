"""The aggregators grid's workload (bench_aggregators_spark.py's docstring describes it): its
sizes from the environment (SKEWGROUP_BENCH_AGGS_*), the aggregators (``make_aggregator``:
MixSum's with the vectorized form, PlainSum's per row only, KllQuantiles), the data and the
single-process references, and the query of each batch plan and stream method (skew_group's,
or the expert's from bench/_baselines.py). bench_stream_floor.py,
bench_stream_growth.py and bench_shipped_vs_spark.py use its stream. Shipped to Spark's Python
workers by value (its aggregators run there)."""
import os
import pathlib
import shutil
import tempfile
import time

import numpy as np


def env(name, default):
    return os.environ.get(f"SKEWGROUP_BENCH_AGGS_{name}", default)


BATCH_ROWS = int(env("BATCH_ROWS", 2_000_000))
FILES = int(env("FILES", 8))
STREAM_ROWS = int(env("STREAM_ROWS", 200_000))
STREAM_BATCHES = int(env("STREAM_BATCHES", 5))
FILES_PER_BATCH = int(env("FILES_PER_BATCH", 1))
# wide_mix lanes per row: ~1.15 ns a lane on a quiet machine (calibrated against bench_plans'
# 900 rounds of mixed = 0.957 µs/row, measured interleaved): about 0.1 and 10 µs/row.
CHEAP_WIDTH = int(env("CHEAP_WIDTH", 48))
EXPENSIVE_WIDTH = int(env("EXPENSIVE_WIDTH", 8_700))
KLL_QUANTILES = (0.5, 0.9, 0.99)
WORKERS = int(env("WORKERS", 16))   # the partial's workers and the shuffle partitions
SEED = 21
DATA = pathlib.Path(tempfile.gettempdir()) / "skewgroup-bench-aggregators"
SCHEMA = "k long, x double"
SKEW_PLANS = ("auto", "local", "hash", "split", "routed", "spread")
HAND_PLANS = ("pandas_udf", "applyInPandas", "local-global")
SKEW_METHODS = ("skew_group", "sampled", "routed", "spread", "local")
TWS_METHODS = ("tws-blob", "tws-map")
# The hand-written stream methods a Spark expert writes: skew_group is compared with the best.
HAND_STREAM_METHODS = ("bucketed", "partial", "foreachBatch")
# The state store of the methods that do not ask for RocksDB: Spark's default.
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


# --- the aggregators ---------------------------------------------------------------------------


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def wide_mix(bits, width):
    """Per value (uint64): the splitmix64 finaliser of ``width`` lanes (the value plus
    lane * golden ratio), xor-reduced, top 31 bits (int64). bench_plans' ``mixed`` loops
    ``rounds`` times over numpy calls, so one call costs rounds x numpy's call overhead
    (~0.1 s at 9,400 rounds) however few rows it gets: a per-key caller (pandas UDF,
    applyInPandas, per-key state) would pay that per key. Here a call is a few numpy calls per
    chunk of 2^16 lanes: the cost follows rows x width, tens of µs at least."""
    out = np.empty(len(bits), dtype=np.int64)
    step = max(1, (1 << 16) // width)
    lanes = np.arange(1, width + 1, dtype=np.uint64) * _GOLDEN
    for start in range(0, len(bits), step):
        z = np.asarray(bits[start:start + step], dtype=np.uint64)[:, None] + lanes[None, :]
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
        out[start:start + len(z)] = (np.bitwise_xor.reduce(z, axis=1)
                                     >> np.uint64(33)).astype(np.int64)
    return out


class MixSum:
    """Spark's Aggregator protocol with the vectorized form: per row ``wide_mix`` of x's 64
    bits over ``width`` lanes (cost proportional to rows x width), summed per key, and the
    rows. Buffer (score, n); result [score, n]; the merge is Python (numpy over the buffers'
    tuples), so Spark cannot combine it."""

    bufferSchema = "score bigint, n bigint"
    outputType = "array<bigint>"

    def __init__(self, width):
        self.width = width

    def _mix(self, x):
        return wide_mix(np.ascontiguousarray(x, dtype=np.float64).view(np.uint64), self.width)

    def zero(self):
        return (0, 0)

    def reduce(self, buffer, value):
        return (buffer[0] + int(self._mix(np.array([value[0]]))[0]), buffer[1] + 1)

    def merge(self, buffer1, buffer2):
        return (buffer1[0] + buffer2[0], buffer1[1] + buffer2[1])

    def finish(self, buffer):
        return [buffer[0], buffer[1]]

    def reduce_groups(self, rows, offsets):
        offsets = np.asarray(offsets, dtype=np.int64)
        values = self._mix(rows.column(0).to_numpy())
        sums = _group_sums(values, offsets)
        return list(zip(sums.tolist(), np.diff(offsets).tolist()))

    def merge_groups(self, buffers, offsets):
        offsets = np.asarray(offsets, dtype=np.int64)
        pairs = np.array(buffers, dtype=np.int64).reshape(-1, 2)
        return [tuple(pair) for pair in _group_sums(pairs, offsets).tolist()]


def _group_sums(values, offsets):
    """Per group [offsets[i], offsets[i+1]) the sum of ``values`` (axis 0); empty groups 0."""
    padded = np.concatenate([values, np.zeros((1,) + values.shape[1:], values.dtype)])
    sums = np.add.reduceat(padded, offsets[:-1], axis=0)
    sums[offsets[:-1] == offsets[1:]] = 0
    return sums


class PlainSum:
    """Spark's Aggregator protocol and nothing more: ``zero``/``reduce``/``merge``/``finish``,
    one Python ``reduce`` call per row (a user's plain per-row aggregator, no batch methods).
    Per row ``int(x * 1024)`` (truncated toward zero), summed per key, and the rows. Buffer
    (score, n); result [score, n] as MixSum's, so the reference checks it bit for bit."""

    bufferSchema = "score bigint, n bigint"
    outputType = "array<bigint>"

    def zero(self):
        return (0, 0)

    def reduce(self, buffer, value):
        return (buffer[0] + int(value[0] * 1024), buffer[1] + 1)

    def merge(self, buffer1, buffer2):
        return (buffer1[0] + buffer2[0], buffer1[1] + buffer2[1])

    def finish(self, buffer):
        return [buffer[0], buffer[1]]


def plain_scores(x):
    """PlainSum's per-row score of ``x`` in numpy: Python's ``int(v * 1024)`` truncates
    toward zero as ``np.trunc`` does (the same float64 product), exact for the grid's x."""
    return np.trunc(np.asarray(x, dtype=np.float64) * 1024).astype(np.int64)


def make_aggregator(name):
    from skewgroup.aggregators import KllQuantiles

    if name == "plain":
        return PlainSum()
    if name == "cheap":
        return MixSum(CHEAP_WIDTH)
    if name == "expensive":
        return MixSum(EXPENSIVE_WIDTH)
    if name == "kll":
        return KllQuantiles(KLL_QUANTILES)
    raise ValueError(f"unknown aggregate {name!r}")


# --- batch plans -------------------------------------------------------------------------------


def batch_query(df, aggregate, plan):
    """The result (k, a) of ``plan`` for ``aggregate``."""
    from _baselines import OneAggregator
    from skewgroup.spark import agg, skew_group

    obj = make_aggregator(aggregate)
    if plan in SKEW_PLANS:
        return df.transform(skew_group("k", agg.aggregator(obj, "x", name="a"),
                                       workers=WORKERS, plan=plan)).select("k", "a")
    if plan == "pandas_udf":
        return OneAggregator(obj).pandas_udf(df)
    if plan == "applyInPandas":
        return OneAggregator(obj).apply_in_pandas(df)
    if plan == "local-global":
        return OneAggregator(obj).local_global(df, WORKERS)
    raise ValueError(f"unknown plan {plan!r}")


# --- streaming methods -------------------------------------------------------------------------


def stream_query(spark, source, aggregate, method, sample=None):
    """The streaming DataFrame (k, a) of ``method`` (not foreachBatch); ``sample``: a batch
    read of one micro-batch's rows, which ``sampled`` (auto with ``sample=``) hands skew_group."""
    from _baselines import OneAggregator
    from skewgroup.spark import agg, skew_group

    obj = make_aggregator(aggregate)
    if method in SKEW_METHODS:
        plan = "auto" if method in ("skew_group", "sampled") else method
        return source.transform(skew_group(
            "k", agg.aggregator(obj, "x", name="a"), workers=WORKERS, plan=plan,
            sample=sample if method == "sampled" else None)).select("k", "a")
    if method == "per-key":
        return OneAggregator(obj).per_key(source)
    if method == "bucketed":
        return OneAggregator(obj).bucketed(source)
    if method == "partial":
        return OneAggregator(obj).partial_bucketed(source, WORKERS)
    if method in TWS_METHODS:
        return OneAggregator(obj).tws(source, method)
    raise ValueError(f"unknown method {method!r}")


def one_batch_sample(spark, directory, schema):
    """``sample=`` for auto on the stream in ``directory``: a batch read of its first file, one
    micro-batch's rows, as docs/plans.md asks."""
    first = sorted((directory / "input").glob("*.parquet"))[0]
    return spark.read.schema(schema).parquet(str(first))


# --- data and references -------------------------------------------------------------------


def _draw(z, universe, rows, seed):
    import skewgroup

    keys = skewgroup.streams.zipf(z, rows, universe=universe, seed=seed)
    x = np.random.default_rng(seed + 1).lognormal(0.0, 1.0, rows)
    return keys.astype(np.int64), x


def batch_dataset(z, universe):
    """BATCH_ROWS rows (k, x) as FILES parquet files in arrival order (written once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = DATA / f"batch-z{z}-u{universe}-{BATCH_ROWS}-f{FILES}"
    if not (directory / "_done").exists():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        keys, x = _draw(z, universe, BATCH_ROWS, SEED)
        for i, rows in enumerate(np.array_split(np.arange(BATCH_ROWS), FILES)):
            pq.write_table(pa.table({"k": keys[rows], "x": x[rows]}),
                           directory / f"part-{i:03d}.parquet")
        np.savez(directory / "_data.npz", keys=keys, x=x)
        (directory / "_done").write_text(f"{BATCH_ROWS} rows\n")
    return directory


def stream_dataset(z, universe):
    """STREAM_BATCHES micro-batches of STREAM_ROWS rows, FILES_PER_BATCH files each, their
    modification times increasing (the file source's order). The input is ``input/``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = (DATA / f"stream-z{z}-u{universe}-{STREAM_ROWS}x{STREAM_BATCHES}"
                        f"-f{FILES_PER_BATCH}")
    if not (directory / "_done").exists():
        shutil.rmtree(directory, ignore_errors=True)
        (directory / "input").mkdir(parents=True)
        keys, x = _draw(z, universe, STREAM_ROWS * STREAM_BATCHES, SEED + 100)
        start = time.time() - 10 * STREAM_BATCHES * FILES_PER_BATCH
        for b in range(STREAM_BATCHES):
            rows = np.arange(b * STREAM_ROWS, (b + 1) * STREAM_ROWS)
            for i, part in enumerate(np.array_split(rows, FILES_PER_BATCH)):
                path = directory / "input" / f"batch-{b:04d}-{i:03d}.parquet"
                pq.write_table(pa.table({"k": keys[part], "x": x[part]}), path)
                stamp = start + 10 * (b * FILES_PER_BATCH + i)
                os.utime(path, (stamp, stamp))
        np.savez(directory / "_data.npz", keys=keys, x=x)
        (directory / "_done").write_text(f"{STREAM_BATCHES} x {STREAM_ROWS} rows\n")
    return directory


class Reference:
    """The single-process answer for every aggregate over (keys, x), and its checks."""

    def __init__(self, directory, aggregates):
        with np.load(directory / "_data.npz") as data:
            keys, x = data["keys"], data["x"]
        self.rows = len(keys)
        order = np.lexsort((x, keys))                      # by key, then value
        sorted_keys, xs = keys[order], x[order]
        self.keys, starts, self.counts = np.unique(sorted_keys, return_index=True,
                                                   return_counts=True)
        self.starts = starts.astype(np.int64)
        self.expected = {}
        for name in aggregates:
            if name == "kll":
                continue
            if name == "plain":
                scores = np.add.reduceat(plain_scores(x)[order], self.starts)
                self.expected[name] = np.column_stack([scores, self.counts])
                continue
            width = CHEAP_WIDTH if name == "cheap" else EXPENSIVE_WIDTH
            cache = directory / f"_reference-{width}.npy"
            if cache.exists():
                scores = np.load(cache)
            else:
                values = wide_mix(x.view(np.uint64), width)[order]
                scores = np.add.reduceat(values, self.starts)
                np.save(cache, scores)
            self.expected[name] = np.column_stack([scores, self.counts])
        # KLL: a value's rank among its key's values, through one sorted code per row:
        # key index * (rows + 1) + the value's rank among all values (increasing within a key).
        self.all_x = np.sort(x)
        group = np.repeat(np.arange(len(self.keys), dtype=np.int64), self.counts)
        self.codes = group * (self.rows + 1) + np.searchsorted(self.all_x, xs)

    def distinct(self):
        return int(len(self.keys))

    def check(self, aggregate, keys, values):
        """Compare a result (keys, list values) with the reference; figures of the check, or
        AssertionError."""
        order = np.argsort(keys, kind="stable")
        keys = np.asarray(keys)[order]
        assert len(keys) == len(self.keys) and np.array_equal(keys, self.keys), (
            f"{aggregate}: {len(keys)} result keys, {len(self.keys)} expected; "
            f"first differences {np.setxor1d(keys, self.keys)[:5]}")
        values = [values[i] for i in order.tolist()]
        if aggregate != "kll":
            got = np.array(values, dtype=np.int64).reshape(-1, 2)
            bad = np.flatnonzero((got != self.expected[aggregate]).any(axis=1))
            assert bad.size == 0, (f"{aggregate}: {bad.size} keys differ, e.g. key "
                                   f"{self.keys[bad[0]]}: {got[bad[0]]} != "
                                   f"{self.expected[aggregate][bad[0]]}")
            return {"exact": "bit for bit"}
        return self._check_kll(values)

    def _check_kll(self, values):
        from skewgroup.aggregators import KllQuantiles

        assert all(v is not None and len(v) == len(KLL_QUANTILES) for v in values), \
            "kll: a key without quantiles"
        got = np.array(values, dtype=np.float64)                     # [keys, quantiles]
        q = np.array(KLL_QUANTILES)[None, :]
        base = (np.arange(len(self.keys), dtype=np.int64) * (self.rows + 1))[:, None]
        below = np.searchsorted(self.codes, base + np.searchsorted(self.all_x, got, "left"))
        upto = np.searchsorted(self.codes, base + np.searchsorted(self.all_x, got, "right"))
        n = self.counts[:, None].astype(np.float64)
        low = (below - self.starts[:, None]) / n
        high = (upto - self.starts[:, None]) / n
        error = np.maximum(0.0, np.maximum(low - q, q - high))
        sketch = KllQuantiles(KLL_QUANTILES)
        small = self.counts <= sketch.k
        assert (error[small] == 0).all(), (
            f"kll: {int((error[small] > 0).sum())} quantiles of keys with <= k values are "
            f"not exact (max rank error {error[small].max():.4f})")
        bound = sketch.rank_error
        large = error[~small]
        worst = float(large.max()) if large.size else 0.0
        assert worst <= 2 * bound, f"kll: rank error {worst:.4f} > 2 x {bound:.4f}"
        return {"exact": "rank", "keys_over_k": int((~small).sum()),
                "max_rank_error_over_bound": round(worst / bound, 3),
                "share_beyond_bound": round(float((large > bound).mean()) if large.size
                                            else 0.0, 4)}


def result_columns(table):
    """(keys as numpy, values as a Python list) of a collected (k, a) table."""
    return table.column("k").to_numpy(), table.column("a").to_pylist()


def last_per_key(table):
    """The memory sink's rows in order of arrival: the last row of every key."""
    keys, values = result_columns(table)
    if not len(keys):
        return keys, values
    reverse = keys[::-1]
    _, first = np.unique(reverse, return_index=True)
    last = len(keys) - 1 - first
    return keys[last], [values[i] for i in last.tolist()]

