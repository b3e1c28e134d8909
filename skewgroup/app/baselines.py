"""The hand-written ways a Spark expert runs the job's Python aggregators in a stream, each
measured by the job on the same micro-batches as skew_group (:func:`measure`), and their
results (:func:`results`, which the tests hold equal to skew_group's):

* ``bucketed``: ``applyInPandasWithState`` over ``pmod(xxhash64(keys), BUCKETS)`` buckets of
  keys, one call per bucket a micro-batch over the bucket's raw rows, reduced per key (the
  aggregators' vectorized reduce) and merged into the bucket's stored buffers (one Arrow blob);
  the hot key's rows all reach one call;
* ``partial``: a round-robin ``repartition(workers)``, then a ``mapInArrow`` partial (each
  partition reduces its rows per key into the aggregators' buffers), then the bucketed merge of
  those partials: the per-row work is balanced before the shuffle by key;
* ``foreachBatch``: each micro-batch as a batch DataFrame: round robin, the same partial, the
  union with the last version of a parquet table of per-key buffers, one merge per key
  (``mapInArrow`` after ``repartition(workers, keys)``), written as the table's next version
  (the MERGE pattern without Delta: one directory per batch id, so a replayed micro-batch
  rewrites its own version). The table is the result; no rows are emitted;
* ``spark``: Spark's own aggregate functions where they do the aggregators' job, in a plain
  streaming ``groupBy`` (combined map-side before the shuffle, the state in the JVM): a
  least-squares fit (``lsq``) as the normal equations' terms, ``F.sum`` of the products of
  X^T X and X^T y, solved after the aggregation in a pandas UDF; quantiles (``quantiles``) as
  ``kll_sketch_agg_double`` and ``kll_sketch_get_quantile_double`` (Spark's KLL sketch, not
  KllQuantiles': results near, not equal); an exact distinct count (``distinct``) as
  ``size(collect_set)``, equal to DistinctCount's; the most frequent values (``topk``) as
  ``approx_top_k`` (Spark's own frequent-items sketch, not TopK's SpaceSaving: counts near, and
  a null counted as an item where TopK skips it).

``skew_group`` itself is measured the same way (:func:`skew_group_query`, the job's query
without its observation). The bench's copies of these patterns (bench/bench_aggregators_spark.py)
work on one key column and one value column; these take the job's keys and aggregates.
"""
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from skewgroup._aggregation.groups import BufferState, group_rows, merge_runs
from skewgroup.aggregators import adapt
from skewgroup.app.options import PYTHON_MERGED
from skewgroup.app.query import grouped, output_name
from skewgroup.app.sources import source
from skewgroup.app.workload import python_aggregator

BUCKETS = 64   # the expert's bucket count, as skew_group's stream merge uses (the job sees only the
#               Spark layer's public API, so the figure is written here too)

# Spark's own functions: which --agg kinds they do.
SPARK_KINDS = ("lsq", "quantiles", "distinct", "topk")

# (name, label) of each way, in the order the job measures and prints them.
WAYS = {
    "skew_group": "skew_group (routed partial, bucketed merge)",
    "bucketed": f"bucketed applyInPandasWithState ({BUCKETS} buckets of keys, over the raw rows)",
    "partial": ("round-robin mapInArrow partial, then the bucketed applyInPandasWithState merge "
                "of the partials"),
    "foreachBatch": ("foreachBatch into a table (round-robin mapInArrow partial, union with the "
                     "last state table, merge per key, written as its next version)"),
    "spark": "Spark's own functions in a streaming groupBy",
}
SPARK_LABELS = {
    "lsq": "sums of X^T X, X^T y (F.sum), solved after in a pandas UDF",
    "quantiles": "kll_sketch_agg_double, kll_sketch_get_quantile_double",
    "distinct": "size(collect_set)",
    "topk": "approx_top_k",
}


def python_merged(args):
    """The job's Python-merged aggregates, (kind, column) each: what the ways compute."""
    return [(kind, column) for kind, column in args.agg if kind in PYTHON_MERGED]


def ways(args):
    """The ways the job compares for ``args.agg``: Spark's own only when its functions do
    every Python-merged aggregate."""
    kinds = {kind for kind, _ in python_merged(args)}
    return [w for w in WAYS if w != "spark" or kinds <= set(SPARK_KINDS)]


def label(way, args):
    if way != "spark":
        return WAYS[way]
    kinds = []
    for kind, _ in python_merged(args):
        if kind not in kinds:
            kinds.append(kind)
    return f"{WAYS[way]}: {'; '.join(SPARK_LABELS[k] for k in kinds)}"


def _plan(spark, args):
    """(the source, the :class:`_Aggregates` every way computes)."""
    df = source(spark, args)
    return df, _Aggregates(args, df.schema)


class _Aggregates:
    """What every way shares: the keys, the Python-merged aggregates and their adapters, the
    output schema (keys, then one column per aggregate named as the job names it), the
    partials' schema (keys, one encoded buffer per aggregate). Picklable: the Python stages'
    functions carry it."""

    def __init__(self, args, schema):
        from pyspark.sql import types as T

        self.keys = list(args.key)
        self.aggregates = python_merged(args)
        self.adapters = [adapt(*python_aggregator(kind, column, schema))
                         for kind, column in self.aggregates]
        self.names = [output_name(kind, column) for kind, column in self.aggregates]
        self.buffers = [f"b{i}" for i in range(len(self.adapters))]
        self.inputs = sorted({c for adapter in self.adapters for c in adapter.columns})
        # The columns the ways read: an aggregate may read a key column (distinct:key).
        self.read = list(dict.fromkeys(self.keys + self.inputs))
        self.output = T.StructType(
            [schema[k] for k in self.keys]
            + [T.StructField(name, T._parse_datatype_string(adapter.obj.outputType))
               for name, adapter in zip(self.names, self.adapters)])
        self.partials = T.StructType([schema[k] for k in self.keys]
                                     + [T.StructField(b, T.BinaryType()) for b in self.buffers])

    def reduce(self, rows):
        """(keys, each aggregate's encoded buffer) per key of ``rows`` (an Arrow table)."""
        import pyarrow as pa

        groups = group_rows(rows, self.keys)
        table = pa.table(groups.keys)
        for adapter, b in zip(self.adapters, self.buffers):
            grouped = rows.select(list(adapter.columns)).take(groups.order)
            table = table.append_column(b, adapter.encode(adapter.reduce_groups(
                grouped, groups.offsets)).cast(pa.binary()))
        return table

    def merge(self, table):
        """``table``'s (keys, encoded buffers) rows merged per key, still encoded; a key with
        one row passes through undecoded."""
        import pyarrow as pa

        groups = group_rows(table, self.keys)
        sizes = np.diff(groups.offsets)
        first = groups.order.take(pa.array(groups.offsets[:-1]))
        merged = pa.table(groups.keys)
        several = np.flatnonzero(sizes > 1)
        rows = np.concatenate([np.arange(groups.offsets[g], groups.offsets[g + 1])
                               for g in several.tolist()] or [np.zeros(0, np.int64)])
        picked = groups.order.take(pa.array(rows, pa.int64()))
        sub = np.concatenate([[0], np.cumsum(sizes[several])]).astype(np.int64)
        for adapter, b in zip(self.adapters, self.buffers):
            column = table.column(b).combine_chunks()
            blobs = column.take(first).to_pylist()
            if several.size:
                fresh = adapter.encode(adapter.merge_groups(
                    adapter.decode(column.take(picked)), sub)).to_pylist()
                for g, blob in zip(several.tolist(), fresh):
                    blobs[g] = blob
            merged = merged.append_column(b, pa.array(blobs, pa.binary()))
        return merged

    def finish(self, table):
        """(keys, each aggregate's result) of ``table``'s one row per key, as pandas."""
        import pyarrow as pa

        result = table.select(self.keys)
        for adapter, b, name in zip(self.adapters, self.buffers, self.names):
            result = result.append_column(name, adapter.finish(adapter.decode(table.column(b))))
        return result.to_pandas()

    def bucket_merge(self, raw):
        """applyInPandasWithState's function over a bucket of keys: its rows (``raw``: the
        source's, reduced per key first; else partials) merged into the bucket's stored
        buffers; emits the touched keys' results."""
        import pyarrow as pa

        keys, buffers = self.keys, self.buffers
        states = [BufferState(adapter, b) for adapter, b in zip(self.adapters, buffers)]
        columns = self.read if raw else keys + buffers
        names = self.names

        def per_bucket(_, frames, group_state):
            rows = pa.concat_tables([pa.Table.from_pandas(f[columns], preserve_index=False)
                                     for f in frames if len(f)])
            if raw:
                new = self.reduce(rows)
            else:
                new = pa.table({**{k: rows.column(k) for k in keys},
                                **{b: rows.column(b).cast(pa.binary()) for b in buffers}})
            stored = (pa.ipc.open_stream(group_state.get[0]).read_all() if group_state.exists
                      else new.schema.empty_table())
            result = merge_runs([stored], new, keys, states)
            kept = result.live()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, kept.schema) as writer:
                writer.write_table(kept)
            group_state.update((sink.getvalue().to_pybytes(),))
            yield pa.table({**{k: result.emitted[k] for k in keys},
                            **{name: result.emitted[b] for name, b in zip(names, buffers)}}
                           ).to_pandas()

        return per_bucket

    def partial(self):
        """mapInArrow: the partition's rows reduced per key into encoded buffers."""
        def reduce(batches):
            import pyarrow as pa

            batches = [b for b in batches if b.num_rows]
            if batches:
                yield from self.reduce(pa.Table.from_batches(batches)).to_batches()

        return reduce

    def merger(self):
        """mapInArrow: the partition's (keys, buffers) rows merged per key."""
        def merge(batches):
            import pyarrow as pa

            batches = [b for b in batches if b.num_rows]
            if batches:
                yield from self.merge(pa.Table.from_batches(batches)).to_batches()

        return merge


def skew_group_query(spark, args):
    """The job's skew_group over the source (routed, as the job runs it), unobserved."""
    return grouped(args, source(spark, args))


def _bucket(work):
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64(*work.keys), F.lit(BUCKETS)).alias("bucket")


def bucketed_query(spark, args):
    from pyspark.sql.streaming.state import GroupStateTimeout

    df, work = _plan(spark, args)
    return (df.select(*work.read, _bucket(work)).groupBy("bucket")
            .applyInPandasWithState(work.bucket_merge(raw=True), work.output, "blob binary",
                                    "update", GroupStateTimeout.NoTimeout))


def partial_query(spark, args):
    from pyspark.sql.streaming.state import GroupStateTimeout

    df, work = _plan(spark, args)
    partials = (df.select(*work.read).repartition(args.workers)
                .mapInArrow(work.partial(), work.partials))
    return (partials.select(*work.keys, *work.buffers, _bucket(work)).groupBy("bucket")
            .applyInPandasWithState(work.bucket_merge(raw=False), work.output, "blob binary",
                                    "update", GroupStateTimeout.NoTimeout))


def spark_query(spark, args):
    """Spark's own functions in a streaming groupBy (see the module docstring)."""
    from pyspark.sql import functions as F

    df, work = _plan(spark, args)
    parts, finals = [], []
    for (kind, column), name in zip(work.aggregates, work.names):
        columns = column.split(",")
        if kind == "lsq":
            terms, final = _normal_equations(columns, name)
        elif kind == "distinct":
            terms = [F.collect_set(F.col(columns[0])).alias(f"{name}__set")]
            final = F.size(F.col(f"{name}__set")).cast("long").alias(name)
        elif kind == "topk":
            obj, _ = python_aggregator(kind, column, df.schema)
            # approx_top_k is in Spark's SQL functions, not (yet) in pyspark.sql.functions
            terms = [F.call_function("approx_top_k", F.col(columns[0]), F.lit(obj.k),
                                     F.lit(obj.capacity)).alias(name)]
            final = F.col(name)
        else:
            obj, _ = python_aggregator(kind, column, df.schema)
            sketch = F.kll_sketch_agg_double(F.col(columns[0]).cast("double"))
            terms = [sketch.alias(f"{name}__sketch")]
            final = F.kll_sketch_get_quantile_double(
                F.col(f"{name}__sketch"),
                F.array(*[F.lit(float(q)) for q in obj.quantiles])).alias(name)
        parts += terms
        finals.append(final)
    return df.groupBy(*work.keys).agg(*parts).select(*work.keys, *finals)


def _normal_equations(columns, name):
    """(the aggregate Columns of a fit y ~ 1 + X's normal equations: the rows fitted, the upper
    triangle of X^T X and X^T y, as F.sum of products; the Column solving them) for
    ``columns`` = [y, x1, ...]. A row with a null is skipped, as LeastSquares skips it."""
    from pyspark.sql import functions as F

    y, *features = [F.col(c).cast("double") for c in columns]
    valid = F.lit(True)
    for c in columns:
        valid = valid & F.col(c).isNotNull()
    x = [F.lit(1.0)] + features
    p = len(x)
    upper = [(i, j) for i in range(p) for j in range(i, p)]
    terms = ([F.count_if(valid).alias(f"{name}__n")]
             + [F.sum(F.when(valid, x[i] * x[j])).alias(f"{name}__xx{i}_{j}") for i, j in upper]
             + [F.sum(F.when(valid, x[i] * y)).alias(f"{name}__xy{i}") for i in range(p)])
    solve = _solver(p)
    final = solve(F.col(f"{name}__n"), F.array(*[F.col(f"{name}__xx{i}_{j}") for i, j in upper]),
                  F.array(*[F.col(f"{name}__xy{i}") for i in range(p)])).alias(name)
    return terms, final


def _solver(p):
    """A pandas UDF: the coefficients from (n, X^T X's upper triangle, X^T y), one matrix
    solve for all the rows at once; null where LeastSquares.finish gives null (no row, or
    X^T X rank deficient)."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    rows, cols = np.triu_indices(p)

    @pandas_udf("array<double>")
    def solve(n: pd.Series, xtx: pd.Series, xty: pd.Series) -> pd.Series:
        out = [None] * len(n)
        fitted = np.flatnonzero(n.to_numpy() > 0)
        if fitted.size:
            upper = np.stack(xtx.to_numpy()[fitted]).astype(np.float64)
            matrices = np.zeros((fitted.size, p, p))
            matrices[:, rows, cols] = upper
            matrices[:, cols, rows] = upper
            vectors = np.stack(xty.to_numpy()[fitted]).astype(np.float64)
            finite = np.isfinite(matrices).all(axis=(1, 2)) & np.isfinite(vectors).all(axis=1)
            full = np.zeros(fitted.size, bool)
            full[finite] = np.linalg.matrix_rank(matrices[finite]) == p
            if full.any():
                solved = np.linalg.solve(matrices[full], vectors[full][..., None])[..., 0]
                for i, coefficients in zip(fitted[full].tolist(), solved.tolist()):
                    out[i] = coefficients
        return pd.Series(out, dtype=object)

    return solve


def foreach_batch(work, workers, state_dir):
    """The foreachBatch function of the table way: state table version per batch id."""
    def process(batch, batch_id):
        spark = batch.sparkSession
        partial = (batch.select(*work.read).repartition(workers)
                   .mapInArrow(work.partial(), work.partials))
        previous = _state_version(state_dir, batch_id - 1)
        if previous is not None:
            partial = partial.unionByName(spark.read.schema(work.partials)
                                          .parquet(str(previous)))
        merged = partial.repartition(workers, *work.keys).mapInArrow(work.merger(),
                                                                     work.partials)
        merged.write.mode("overwrite").parquet(str(state_dir / f"v{batch_id:06d}"))

    return process


def _state_version(state_dir, batch_id):
    """The latest state table written for a batch id <= ``batch_id`` (a batch with no rows
    writes none), or None."""
    if batch_id < 0 or not state_dir.exists():
        return None
    versions = sorted(p for p in state_dir.iterdir()
                      if p.name.startswith("v") and int(p.name[1:]) <= batch_id
                      and (p / "_SUCCESS").exists())
    return versions[-1] if versions else None


QUERIES = {"skew_group": skew_group_query, "bucketed": bucketed_query,
           "partial": partial_query, "spark": spark_query}


def run(spark, args, batches, way, collect=False):
    """Run ``way`` over the first ``batches`` micro-batches of the job's source (a generated
    source draws the same rows again; files are read again) from a fresh checkpoint.

    Returns (each micro-batch's seconds, progress ``durationMs.triggerExecution``; with
    ``collect``, the latest row per key of micro-batches 0 to ``batches - 1`` as pandas, else
    None). Without ``collect`` a stream's rows go to Spark's ``noop`` sink: every way pays its
    own work only.
    """
    import pandas as pd

    scratch = Path(tempfile.mkdtemp(prefix=f"skewgroup-{way}-"))
    frames = []
    table_dir = scratch / "table"
    if way == "foreachBatch":
        df, work = _plan(spark, args)
        writer = df.writeStream.foreachBatch(foreach_batch(work, args.workers, table_dir))
    else:
        result = QUERIES[way](spark, args)
        writer = result.writeStream.outputMode("update")
        if collect:
            def keep(batch, batch_id):
                # Every micro-batch runs its plan, one past the last kept too: a stateful
                # operator whose micro-batch never ran commits no state, which Spark's check of
                # the commits refuses (STATE_STORE_COMMIT_VALIDATION_FAILED).
                if batch_id < batches:
                    frames.append(batch.toPandas())
                else:
                    batch.write.format("noop").mode("overwrite").save()

            writer = writer.foreachBatch(keep)
        else:
            writer = writer.format("noop")
    query = writer.option("checkpointLocation", str(scratch / "checkpoint")).start()
    try:
        while query.isActive and _batches_done(query) < batches:
            time.sleep(0.25)
        if query.exception() is not None:
            raise query.exception()
    finally:
        # The batch running now is cancelled, and its tasks end after stop() returns: the log
        # stays off, as the job's stop leaves it.
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
    try:
        seconds = [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress
                   if p["numInputRows"]][:batches]
        latest = None
        if collect and way == "foreachBatch":
            last = _state_version(table_dir, batches - 1)
            import pyarrow.parquet as pq

            latest = work.finish(pq.read_table(last))
        elif collect:
            keys = list(args.key)
            latest = (pd.concat(frames, ignore_index=True).drop_duplicates(keys, keep="last")
                      if frames else pd.DataFrame())
        if latest is not None and len(latest):
            latest = latest.sort_values(list(args.key)).reset_index(drop=True)
        return seconds, latest
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(spark, args, batches, way):
    """Each micro-batch's seconds of ``way`` over the first ``batches`` micro-batches."""
    return run(spark, args, batches, way)[0]


def results(spark, args, batches, way):
    """The latest result per key of ``way`` after ``batches`` micro-batches (pandas)."""
    return run(spark, args, batches, way, collect=True)[1]


def _batches_done(query):
    return sum(1 for p in query.recentProgress if p["numInputRows"])
