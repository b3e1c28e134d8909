import os
import sys
import tempfile

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    """One local session per test module, small shuffles, no UI."""
    from pyspark.sql import SparkSession

    # Spark's Python workers start in the JVM's working directory with it on sys.path; from a
    # checkout that is the repository root, whose skewgroup/ has no compiled modules and would
    # shadow the installed package. So the JVM (launched by the first session) starts elsewhere.
    cwd = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="skewgroup-spark-"))
    try:
        session = _build(SparkSession)
    finally:
        os.chdir(cwd)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _build(SparkSession):
    return (SparkSession.builder.master("local[2]")
               .appName("skewgroup-tests")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g")
               .getOrCreate())
