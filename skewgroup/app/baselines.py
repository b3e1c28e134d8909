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
  sample of k rows per key (``sample``) as ``collect_list`` of every row with its rank (the
  hash RowSample ranks by, computed before the ``groupBy`` in a scalar pandas UDF: Spark's
  ``xxhash64`` is another hash), sorted and sliced after, equal to RowSample's; a
  least-squares fit (``lsq``) as the normal equations' terms, ``F.sum`` of the products of
  X^T X and X^T y, solved after the aggregation in a pandas UDF; quantiles (``quantiles``) as
  ``kll_sketch_agg_double`` and ``kll_sketch_get_quantile_double`` (Spark's KLL sketch, not
  KllQuantiles': results near, not equal); an exact distinct count (``distinct``) as
  ``size(collect_set)``, equal to DistinctCount's; the most frequent values (``topk``) as
  ``approx_top_k`` (Spark's own frequent-items sketch, not TopK's SpaceSaving: counts near, and
  a null counted as an item where TopK skips it).

``skew_group`` itself is measured the same way (:func:`skew_group_query`, the job's query
without its observation). These take the job's keys and aggregates (:class:`_Aggregates`).

The benches' ways on one aggregator (bench/_baselines.py's ``OneAggregator``) build on the
job's :func:`partial_bucketed`, :func:`foreach_batch` and :func:`bucket_column`, so that each
bench measures the code the job runs.
"""
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from skewgroup._aggregation.batches import table_of
from skewgroup._aggregation.groups import group_rows
from skewgroup._aggregation.stream.runs import merge_runs
from skewgroup._aggregation.stream.states import BufferState
from skewgroup.aggregators import adapt
from skewgroup.app import rest
from skewgroup.app.figures import Measurement
from skewgroup.app.options import PYTHON_MERGED
from skewgroup.app.query import grouped, output_name
from skewgroup.app.sources import source
from skewgroup.app.workload import python_aggregator

# Spark's own functions: which --agg kinds they do.
SPARK_KINDS = ("sample", "lsq", "quantiles", "distinct", "topk")

# (name, label) of each way, in the order the job measures and prints them.
WAYS = {
    "skew_group": "skew_group (plan {plan}, then its merge over buckets of keys)",
    "bucketed": "bucketed applyInPandasWithState ({buckets} buckets of keys, over the raw rows)",
    "partial": ("round-robin mapInArrow partial, then the bucketed applyInPandasWithState merge "
                "of the partials"),
    "foreachBatch": ("foreachBatch into a table (round-robin mapInArrow partial, union with the "
                     "last state table, merge per key, written as its next version)"),
    "spark": "Spark's own functions in a streaming groupBy",
}
SPARK_LABELS = {
    "sample": "collect_list of every row, sorted and sliced after",
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
    if way == "bucketed":
        from skewgroup.spark._stream_merge import BUCKETS

        return WAYS[way].format(buckets=BUCKETS)
    if way == "skew_group":
        return WAYS[way].format(plan=(getattr(args, "chosen_plan", None) or (args.plan,))[0])
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

    def reduce(self, rows, arrow=False):
        """(keys, each aggregate's buffer) per key of ``rows`` (an Arrow table): encoded (one
        pickle, what crosses pandas here), or with ``arrow`` an Arrow column of the
        aggregator's buffer type (what ``merge_runs`` merges)."""
        import pyarrow as pa

        groups = group_rows(rows, self.keys)
        table = pa.table(groups.keys)
        for adapter, b in zip(self.adapters, self.buffers):
            grouped = rows.select(list(adapter.columns)).take(groups.order)
            if arrow:
                buffers = adapter.reduce_arrow(grouped, groups.offsets)
            else:
                buffers = adapter.encode(adapter.reduce_groups(grouped, groups.offsets)).cast(
                    pa.binary())
            table = table.append_column(b, buffers)
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
                new = self.reduce(rows, arrow=True)
            else:     # the partials' pickles, as Arrow buffers for merge_runs
                new = pa.table({**{k: rows.column(k) for k in keys},
                                **{b: adapter.to_arrow(adapter.decode(rows.column(b)))
                                   for adapter, b in zip(self.adapters, buffers)}})
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

    def rows(self, batch):
        """The columns of a micro-batch the ways read."""
        return batch.select(*self.read)

    def read_state(self, spark, path):
        """A state table version of :func:`foreach_batch`, read with the partials' schema."""
        return spark.read.schema(self.partials).parquet(str(path))

    def partial_merge(self):
        """applyInPandasWithState's function of :func:`partial_bucketed`: the partials of a
        bucket merged into its stored buffers."""
        return self.bucket_merge(raw=False)

    def partial(self):
        """mapInArrow: the partition's rows reduced per key into encoded buffers."""
        def reduce(batches):
            table = table_of(batches)
            if table is not None:
                yield from self.reduce(table).to_batches()

        return reduce

    def merger(self):
        """mapInArrow: the partition's (keys, buffers) rows merged per key."""
        def merge(batches):
            table = table_of(batches)
            if table is not None:
                yield from self.merge(table).to_batches()

        return merge


def skew_group_query(spark, args):
    """The job's skew_group over the source (its --plan, as the job runs it), unobserved."""
    return grouped(args, source(spark, args))


def bucket_column(*keys):
    """The expert's bucket of a row: ``pmod(xxhash64(keys), BUCKETS)``, the bucket count of
    skew_group's stream merge."""
    from pyspark.sql import functions as F

    from skewgroup.spark._stream_merge import BUCKETS

    return F.pmod(F.xxhash64(*keys), F.lit(BUCKETS)).alias("bucket")


def bucketed_query(spark, args):
    from pyspark.sql.streaming.state import GroupStateTimeout

    df, work = _plan(spark, args)
    return (df.select(*work.read, bucket_column(*work.keys)).groupBy("bucket")
            .applyInPandasWithState(work.bucket_merge(raw=True), work.output, "blob binary",
                                    "update", GroupStateTimeout.NoTimeout))


def partial_query(spark, args):
    df, work = _plan(spark, args)
    return partial_bucketed(work, df, args.workers)


def partial_bucketed(work, source, workers):
    """The ``partial`` way over the stream ``source`` for ``work`` (the job's
    :class:`_Aggregates` or a :class:`OneAggregator`): a round-robin ``repartition(workers)``
    of ``work.rows(source)``, ``work.partial()`` in ``mapInArrow`` (one row per partition and
    key: the key and its encoded buffers, ``work.partials``), then ``applyInPandasWithState``
    per bucket of keys (:func:`bucket_column`) with ``work.partial_merge()``: a bucket's
    partials merged per key into its stored buffers (one Arrow IPC blob a bucket), the touched
    keys' results emitted (``work.output``)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    partials = (work.rows(source).repartition(workers)
                .mapInArrow(work.partial(), work.partials))
    return (partials.select("*", bucket_column(*work.keys)).groupBy("bucket")
            .applyInPandasWithState(work.partial_merge(), work.output, "blob binary",
                                    "update", GroupStateTimeout.NoTimeout))


def spark_query(spark, args):
    """Spark's own functions in a streaming groupBy (see the module docstring)."""
    from pyspark.sql import functions as F

    df, work = _plan(spark, args)
    parts, finals = [], []
    for (kind, column), name in zip(work.aggregates, work.names):
        columns = column.split(",")
        if kind == "sample":
            obj, _ = python_aggregator(kind, column, df.schema)
            terms, final = _collected_sample(columns, name, obj.k)
        elif kind == "lsq":
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


def _collected_sample(columns, name, k):
    """(the aggregate Column of a sample of k rows per key with Spark's functions: every row's
    (rank, id, value) in a ``collect_list``; the Column keeping the k of smallest rank) for
    ``columns`` = [value, id]. The rank is RowSample's (``sample_ranks``), and a row with a
    null id is left out of the list (``collect_list`` skips nulls), so the result equals
    RowSample's. The list keeps every row a key ever had: Spark has no bounded way."""
    from pyspark.sql import functions as F

    value, row_id = columns
    # Without nulls the UDF gets an integer Series: pandas would hold a column with nulls as
    # float64, whose ids above 2**53 are not exact. The rows of null id are left out below.
    rank = _sample_rank(F.coalesce(F.col(row_id), F.lit(0)))
    row = F.when(F.col(row_id).isNotNull(),
                 F.struct(rank.alias("rank"), F.col(row_id).alias("id"),
                          F.col(value).alias("value")))
    terms = [F.collect_list(row).alias(f"{name}__rows")]
    # array_sort orders structs field by field: by rank, then id.
    final = F.transform(F.slice(F.array_sort(F.col(f"{name}__rows")), 1, k),
                        lambda kept: kept["value"]).alias(name)
    return terms, final


def _sample_rank(ids):
    """A scalar pandas UDF: RowSample's rank of each row id (bigint)."""
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql.functions import pandas_udf

    from skewgroup._aggregation.shipped import sample_ranks

    @pandas_udf("bigint")
    def rank(row_ids: pd.Series) -> pd.Series:
        return pd.Series(sample_ranks(pa.Array.from_pandas(row_ids).cast(pa.int64())))

    return rank(ids)


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
    """The foreachBatch function of the table way (the MERGE pattern) for ``work`` (the job's
    :class:`_Aggregates` or a :class:`OneAggregator`): state table version per batch id,
    ``workers`` partitions for the partial and the merge."""
    def process(batch, batch_id):
        spark = batch.sparkSession
        partial = (work.rows(batch).repartition(workers)
                   .mapInArrow(work.partial(), work.partials))
        previous = state_version(state_dir, batch_id - 1)
        if previous is not None:
            partial = partial.unionByName(work.read_state(spark, previous))
        merged = partial.repartition(workers, *work.keys).mapInArrow(work.merger(),
                                                                     work.partials)
        merged.write.mode("overwrite").parquet(str(state_dir / f"v{batch_id:06d}"))

    return process


def state_version(state_dir, batch_id):
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

    Returns (a :class:`skewgroup.app.figures.Measurement`: each micro-batch's seconds, progress
    ``durationMs.triggerExecution``, its critical path from Spark's UI (:mod:`rest`) and the
    bytes the way holds after it (:func:`held_bytes`); with ``collect``, the latest row per key
    of micro-batches 0 to ``batches - 1`` as pandas, else None). Without ``collect`` a stream's
    rows go to Spark's ``noop`` sink: every way pays its own work only.
    """
    import pandas as pd

    scratch = Path(tempfile.mkdtemp(prefix=f"skewgroup-{way}-"))
    frames = []
    table_dir = scratch / "table"
    checkpoint = scratch / "checkpoint"
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
    query = writer.option("checkpointLocation", str(checkpoint)).start()
    # batch id -> bytes held after it, measured when its progress is first seen: the state
    # store's maintenance may later add snapshots or delete old files.
    held = {}

    def sample_new_batches():
        for progress in query.recentProgress:
            if progress["numInputRows"] and progress["batchId"] not in held:
                held[progress["batchId"]] = held_bytes(checkpoint, table_dir,
                                                       through=progress["batchId"])[0]

    try:
        while query.isActive and _batches_done(query) < batches:
            sample_new_batches()
            time.sleep(0.25)
        sample_new_batches()
        if query.exception() is not None:
            raise query.exception()
    finally:
        # The batch running now is cancelled, and its tasks end after stop() returns: the log
        # stays off, as the job's stop leaves it.
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
    try:
        measured = query_figures(spark, query, batches, held, critical_path=not collect)
        ids = measured.batch_ids
        if not collect:
            if way == "foreachBatch" and ids:
                _, measured.table_versions, measured.latest_table_bytes = held_bytes(
                    checkpoint, table_dir, through=ids[-1])
        latest = None
        if collect and way == "foreachBatch":
            last = state_version(table_dir, batches - 1)
            import pyarrow.parquet as pq

            latest = work.finish(pq.read_table(last))
        elif collect:
            keys = list(args.key)
            latest = (pd.concat(frames, ignore_index=True).drop_duplicates(keys, keep="last")
                      if frames else pd.DataFrame())
        if latest is not None and len(latest):
            latest = latest.sort_values(list(args.key)).reset_index(drop=True)
        return measured, latest
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def query_figures(spark, query, batches, held, critical_path=True):
    """The :class:`skewgroup.app.figures.Measurement` of a stopped ``query``'s first
    ``batches`` micro-batches with rows: their seconds (progress ``triggerExecution``), the
    bytes held after each (``held``: batch id -> bytes, sampled as the query ran) and, with
    ``critical_path``, each one's critical path and total task time from Spark's UI."""
    counted = [p for p in query.recentProgress if p["numInputRows"]][:batches]
    ids = [p["batchId"] for p in counted]
    measured = Measurement(seconds=[p["durationMs"]["triggerExecution"] / 1000 for p in counted],
                           state_bytes=[held.get(b) for b in ids], batch_ids=ids)
    if critical_path:
        try:
            times = rest.stage_times(spark, query.runId, ids)
            measured.critical_path_s = [times[b][0] if b in times else None for b in ids]
            measured.task_s = [times[b][1] if b in times else None for b in ids]
        except rest.Unavailable as why:
            measured.unavailable = str(why)
    return measured


def held_bytes(checkpoint, table_dir=None, through=None):
    """(the bytes a way holds on disk, the versions of its foreachBatch table, the latest
    version's bytes): the state store's files under ``checkpoint`` (its ``state`` directory)
    plus every complete version of the table in ``table_dir`` (a way without a table: None;
    those of batch ids <= ``through``, when given), all kept. A file being written (``*.tmp``,
    ``_temporary``) is not held yet."""
    state = _files_bytes(Path(checkpoint) / "state")
    versions = []
    if table_dir is not None and Path(table_dir).is_dir():
        versions = sorted(p for p in Path(table_dir).iterdir()
                          if p.name.startswith("v") and (p / "_SUCCESS").exists()
                          and (through is None or int(p.name[1:]) <= through))
    sizes = [_files_bytes(v) for v in versions]
    return state + sum(sizes), len(versions), sizes[-1] if sizes else None


def _files_bytes(directory):
    total = 0
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d != "_temporary"]
        for name in files:
            if name.endswith(".tmp"):
                continue
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:   # renamed or cleaned up by Spark meanwhile
                pass
    return total


def measure(spark, args, batches, way):
    """``way``'s :class:`skewgroup.app.figures.Measurement` over the first ``batches``
    micro-batches."""
    return run(spark, args, batches, way)[0]


def results(spark, args, batches, way):
    """The latest result per key of ``way`` after ``batches`` micro-batches (pandas)."""
    return run(spark, args, batches, way, collect=True)[1]


def _batches_done(query):
    return sum(1 for p in query.recentProgress if p["numInputRows"])
