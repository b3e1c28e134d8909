"""The job's streaming sources: ``zipf`` / ``drift`` (generated, :mod:`skewgroup.app.workload`),
``files`` (a directory of parquet / CSV / JSON files) and ``rate`` (Spark's rate source)."""
from skewgroup.app.options import GENERATED_COLUMNS, JobError
from skewgroup.app.workload import FEATURES, draw_features, draw_keys


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
    z, universe, seed = args.z, args.universe, args.seed
    drift_every = args.drift_every if args.source == "drift" else None

    def draw(batches):
        for batch in batches:
            numbers = batch.column("value").to_numpy()
            keys, amounts = draw_keys(numbers, z, universe, seed, drift_every)
            x, y = draw_features(numbers, keys, seed)
            yield pa.RecordBatch.from_arrays(
                [batch.column("timestamp"), pa.array(keys), pa.array(amounts),
                 *(pa.array(x[:, j]) for j in range(FEATURES)), pa.array(y)],
                names=list(GENERATED_COLUMNS))

    ts, *numbers = GENERATED_COLUMNS
    schema = T.StructType([T.StructField(ts, T.TimestampType())] + [
        T.StructField(name, T.LongType() if name == "key" else T.DoubleType(), False)
        for name in numbers])
    return rows.mapInArrow(draw, schema)


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
    if args.source in ("zipf", "drift"):
        return _generated(spark, args)
    if args.source == "files":
        return _files(spark, args)
    return (spark.readStream.format("rate").option("rowsPerSecond", args.rate or 1000)
            .option("numPartitions", args.partitions).load())
