"""A SparkSession whose JVM starts outside the current directory, for the job, the tests and
the benches.

Spark's Python workers start in the JVM's working directory with it first on ``sys.path``.
Started from a checkout, that directory's ``skewgroup/`` (no compiled modules) would shadow the
installed package, so the JVM (launched by the first session of a process) starts elsewhere.
"""
import contextlib
import os
import sys
import tempfile


def session_cores(spark):
    """The task slots ``spark`` has (its default parallelism), or None on Spark Connect, which
    has no SparkContext."""
    try:
        return max(1, spark.sparkContext.defaultParallelism)
    except Exception:     # Spark Connect: no SparkContext
        return None


def spark_session(app_name, master="local[2]", conf=None, *, start_in=None, jvm_stderr=None,
                  log_level="ERROR"):
    """``SparkSession.builder`` with ``app_name``, ``master`` and every (key, value) of
    ``conf``, its JVM launched in ``start_in`` (default: a fresh temporary directory).

    ``master=None`` leaves the master to spark-submit (a session it launched). Spark's Python
    workers run this interpreter (``PYSPARK_PYTHON``, unless set), and a local master binds to
    127.0.0.1 (``SPARK_LOCAL_IP``, unless set). ``jvm_stderr``: a context manager entered while
    the session starts (the job's :class:`skewgroup.app._stderr.JvmStderr`). The session logs
    at ``log_level``.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    here = os.getcwd()
    os.chdir(start_in or tempfile.mkdtemp(prefix="skewgroup-spark-"))
    try:
        with jvm_stderr or contextlib.nullcontext():
            session = builder.getOrCreate()
    finally:
        os.chdir(here)
    session.sparkContext.setLogLevel(log_level)
    return session
