import os
import sys
import tempfile

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark(request):
    """One local session per test module, small shuffles, no UI. A module may set SPARK_MASTER,
    e.g. "local[2, 4]" for tasks retried up to 4 times as on a cluster (local[2] never retries)."""
    from pyspark.sql import SparkSession

    # Spark's Python workers start in the JVM's working directory with it on sys.path; from a
    # checkout that is the repository root, whose skewgroup/ has no compiled modules and would
    # shadow the installed package. So the JVM (launched by the first session) starts elsewhere.
    cwd = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="skewgroup-spark-"))
    try:
        session = _build(SparkSession, getattr(request.module, "SPARK_MASTER", "local[2]"))
    finally:
        os.chdir(cwd)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _build(SparkSession, master):
    return (SparkSession.builder.master(master)
               .appName("skewgroup-tests")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
