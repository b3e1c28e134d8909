import pytest

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark(request):
    """One local session per test module, small shuffles, no UI. A module may set SPARK_MASTER,
    e.g. "local[2, 4]" for tasks retried up to 4 times as on a cluster (local[2] never retries)."""
    from skewgroup.spark._session import spark_session

    # The JVM (launched by the first session) starts outside the checkout (see _session).
    session = spark_session("skewgroup-tests", getattr(request.module, "SPARK_MASTER", "local[2]"),
                            {"spark.sql.shuffle.partitions": "4",
                             "spark.default.parallelism": "2",
                             "spark.ui.enabled": "false",
                             "spark.ui.showConsoleProgress": "false",
                             "spark.sql.session.timeZone": "UTC",
                             "spark.driver.memory": "2g"})
    yield session
    session.stop()
