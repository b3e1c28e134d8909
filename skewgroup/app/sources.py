"""The job's streaming sources: ``sessions`` / ``zipf`` / ``drift`` (generated,
:mod:`skewgroup.app.workload`), ``files`` (a directory of parquet / CSV / JSON files) and
``rate`` (Spark's rate source)."""
from skewgroup.app.options import GENERATED_SOURCES, GENERATED_TYPES, JobError
from skewgroup.app.workload import FEATURES, draw_features, draw_keys, draw_sessions


def _generated(spark, args):
    import pyarrow as pa
    from pyspark.sql import types as T

    if args.rate:
        rows = (spark.readStream.format("rate").option("rowsPerSecond", args.rate)
                .option("numPartitions", args.partitions).load())
    else:
        rows = (spark.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", args.rows_per_batch)
                .option("numPartitions", args.partitions).load())
    draw_rows = _key_drawer(args)
    seed = args.seed

    def draw(batches):
        for batch in batches:
            # The rate sources number the rows from 0 across micro-batches: the row number is
            # the row's id, and every column is drawn from it.
            numbers = batch.column("value")
            keys, amounts = draw_rows(numbers.to_numpy())
            x, y = draw_features(numbers.to_numpy(), keys, seed)
            yield pa.RecordBatch.from_arrays(
                [batch.column("timestamp"), numbers, pa.array(keys), pa.array(amounts),
                 *(pa.array(x[:, j]) for j in range(FEATURES)), pa.array(y)],
                names=list(GENERATED_TYPES))

    spark_types = {"timestamp": T.TimestampType(), "bigint": T.LongType(),
                   "double": T.DoubleType()}
    # Only the rate source's timestamp is nullable; the columns drawn have a value every row.
    schema = T.StructType([
        T.StructField(name, spark_types[spark_type], nullable=spark_type == "timestamp")
        for name, spark_type in GENERATED_TYPES.items()])
    return rows.mapInArrow(draw, schema)


def _key_drawer(args):
    """The function drawing (keys, amounts) from row numbers for a generated source."""
    if args.source == "sessions":
        hot_keys, hot_share, new_keys = args.hot_keys, args.hot_share, args.new_keys
        span, seed = args.rows_per_batch, args.seed
        return lambda numbers: draw_sessions(numbers, hot_keys, hot_share, new_keys, span, seed)
    z, universe, seed = args.z, args.universe, args.seed
    drift_every = args.drift_every if args.source == "drift" else None
    return lambda numbers: draw_keys(numbers, z, universe, seed, drift_every)


def _files(spark, args):
    from pyspark.errors import AnalysisException

    reader = spark.read
    if args.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        schema = reader.format(args.format).load(args.input).schema
    except AnalysisException as error:
        if error.getCondition() != "UNABLE_TO_INFER_SCHEMA":
            raise
        schema = None
    if not schema:
        # The files are there (checked before Spark started) but hold no columns, e.g. they are
        # empty: parquet fails to infer, JSON infers no column.
        raise JobError(f"--input {args.input}: Spark finds no columns in its {args.format} "
                       f"files (are they empty?); put a non-empty {args.format} file in it")
    stream = (spark.readStream.format(args.format).schema(schema)
              .option("maxFilesPerTrigger", args.max_files_per_trigger))
    if args.format == "csv":
        stream = stream.option("header", "true")
    return stream.load(args.input)


def source(spark, args):
    if args.source in GENERATED_SOURCES:
        return _generated(spark, args)
    if args.source == "files":
        return _files(spark, args)
    return (spark.readStream.format("rate").option("rowsPerSecond", args.rate or 1000)
            .option("numPartitions", args.partitions).load())
