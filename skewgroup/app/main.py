"""The job's entry points: the Spark session, :func:`main` (``spark-submit skewgroup/app/job.py``)
and :func:`run` (``skewgroup run``)."""
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from skewgroup.app._stderr import JvmStderr
from skewgroup.app.display import Display, follow, summary
from skewgroup.app.options import JOB_FILE, JobError, job_parser, parse_job_args, routing_config
from skewgroup.app import baselines, figures
from skewgroup.app.query import build_query, merged_in_python, start
from skewgroup.app.workload import _AddPerTask


def session(args, jvm_stderr):
    """The SparkSession: spark-submit's when run by it, else a local one (or ``--master``),
    whose JVM writes its stderr through ``jvm_stderr`` (a :class:`_stderr.JvmStderr`)."""
    from skewgroup.spark._session import spark_session

    # pandas' FutureWarnings from inside pyspark's own worker code are not the user's to act on;
    # the Python workers inherit this environment.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    conf = {"spark.ui.showConsoleProgress": "false",
            "spark.sql.streaming.schemaInference": "true",
            # Python workers start in the executor's working directory with it first on
            # sys.path: run from a checkout, its uncompiled skewgroup/ would shadow the
            # installed package. Python >= 3.11 leaves it out of sys.path with this.
            "spark.executorEnv.PYTHONSAFEPATH": "1"}
    master = args.master if under_submit else args.master or "local[*]"
    spark = spark_session("skewgroup", master, conf, start_in=tempfile.gettempdir(),
                          jvm_stderr=None if under_submit else jvm_stderr)
    # The stateful stages' tasks apart from the partial's workers: a stateful task costs a
    # fixed time (its state server, its store's load and commit) whatever its rows
    # (bench/RESULTS.md, "The stateful stage's levers"), so one a core.
    partitions = args.state_partitions or spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return spark


def main(argv=None):
    """``spark-submit skewgroup/app/job.py [options]``: the same options as ``skewgroup run``."""
    return run(parse_job_args(sys.argv[1:] if argv is None else argv))


def run(args):
    """Run the job with options parsed by :func:`skewgroup.app.options.parse_job_args`."""
    try:
        return _run(args)
    except JobError as error:
        # Found once Spark could read the source (a file source's columns): the same error line
        # and exit code as an option error found before Spark started, and no traceback.
        print(f"{job_parser().prog}: error: {error}", file=sys.stderr)
        return 2


def _run(args):
    temporary = None
    checkpoint = args.checkpoint
    if checkpoint is None:
        temporary = checkpoint = tempfile.mkdtemp(prefix="skewgroup-checkpoint-")
    jvm_stderr = JvmStderr()
    spark = session(args, jvm_stderr)
    try:
        timings = None
        if any(kind == "score" for kind, _ in args.agg):
            timings = spark.sparkContext.accumulator({}, _AddPerTask())
        result = build_query(spark, args, timings)
        Path(checkpoint, JOB_FILE).write_text(json.dumps(routing_config(args), indent=1))
        latest = {} if merged_in_python(args) else None
        query = start(result, args, checkpoint, latest)
        display = Display(args, args.batches, timed=timings is not None)
        # The live run is skew_group's measurement too when it runs as the comparison's ways
        # do (a fresh checkpoint, micro-batches back to back), which spares the comparison one
        # of its runs. Its figures then include the live run's own work besides skew_group's:
        # the rows per worker groupBy would give (observed) and the summary's first keys.
        held = ({} if temporary and args.trigger is None and args.sink == "memory"
                and latest is not None else None)
        started = time.perf_counter()
        try:
            batches = follow(query, args, display, timings=timings,
                             stop=lambda: _stop_quietly(spark, query, jvm_stderr),
                             on_batch=None if held is None else _state_sampler(checkpoint, held))
        except KeyboardInterrupt:
            _stop_quietly(spark, query, jvm_stderr)
            batches = len(display.rows)
        finally:
            display.close()
        seconds = time.perf_counter() - started
        measured = None
        if merged_in_python(args) and args.batches:
            # Every other way on the same micro-batches, each from a fresh checkpoint into
            # Spark's noop sink; skew_group again too when the live run could not be its
            # measurement (a checkpoint of the user's, a trigger, another sink).
            measured = {}
            for way in baselines.ways(args):
                if way == figures.OURS and held is not None:
                    measured[way] = baselines.query_figures(spark, query, batches, held)
                    continue
                display.console.print(f"measuring on the same {batches} micro-batches: "
                                      f"{baselines.label(way, args)} ...", style="dim",
                                      highlight=False)
                measured[way] = baselines.measure(spark, args, batches, way)
        summary(spark, args, display, batches, seconds, checkpoint, latest, measured)
        if measured:
            _write_figures(args, measured, batches, display.console)
    finally:
        spark.stop()
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
    return 0


def _state_sampler(checkpoint, held):
    """A function of a micro-batch id that puts the bytes the live run's state holds after it
    in ``held``, as :func:`baselines.run` samples each way's."""
    def sample(batch_id):
        held[batch_id] = baselines.held_bytes(checkpoint)[0]
    return sample


def _write_figures(args, measured, batches, console):
    """The compared ways' figures: a JSON line a way appended to ``--metrics``, the ``--plot``."""
    if args.metrics:
        with open(args.metrics, "a") as metrics:
            metrics.writelines(figures.metrics_lines(
                [figures.way_figures(way, m) for way, m in measured.items()]))
    if args.plot:
        from skewgroup.app.plot import draw

        try:
            draw(args.plot, measured, batches)
        except OSError as error:
            raise JobError(f"--plot {args.plot} could not be written "
                           f"({error.strerror or error})") from None
        console.print(f"plot: {args.plot}", highlight=False, soft_wrap=True)


def _stop_quietly(spark, query, jvm_stderr):
    """Stop after --batches: the next micro-batch has usually started, and Spark reports its
    cancellation though nothing failed: ERROR logs (e.g. 'Store broadcast ... fail', 'Error in
    TaskCompletionListener' from a state store aborted by the interruption) and its Python
    workers' BrokenPipeError tracebacks (see skewgroup.app._stderr). The cancelled tasks end
    after stop() returns, so the log stays off for the rest of the run: what is left (the
    summary) reports its own errors as Python exceptions."""
    jvm_stderr.stopping.set()
    spark.sparkContext.setLogLevel("OFF")
    query.stop()
