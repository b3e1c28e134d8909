"""The benches' Spark session: local[2] with the UI's REST API on 127.0.0.1 (bench/_rest.py
reads it), started outside the checkout by :func:`skewgroup.spark._session.spark_session`."""
import tempfile

WORKERS = 16   # the shuffle partitions, unless a bench's conf says otherwise


def local_session(module, name, ui_port, conf, by_value=()):
    """local[2] with the UI's REST API on 127.0.0.1, ``WORKERS`` shuffle partitions, one input
    partition per file, the functions of ``module``, of the modules ``by_value`` and of
    bench/_baselines.py (the hand-written ways) shipped by value (Spark's Python workers cannot
    import bench/), and ``conf`` on top."""
    from pyspark import cloudpickle

    import _baselines
    from skewgroup.spark._session import spark_session

    for shipped in (_baselines, *by_value, module):
        cloudpickle.register_pickle_by_value(shipped)
    return spark_session(name, "local[2]",
                         {"spark.sql.shuffle.partitions": str(WORKERS),
                          "spark.ui.enabled": "true",
                          "spark.ui.port": str(ui_port),
                          "spark.driver.bindAddress": "127.0.0.1",
                          "spark.driver.host": "127.0.0.1",
                          "spark.ui.showConsoleProgress": "false",
                          "spark.driver.memory": "4g",
                          # one input partition (source) per file: opening a file costs a whole
                          # split
                          "spark.sql.files.openCostInBytes": str(128 << 20),
                          **conf},
                         start_in=tempfile.mkdtemp(prefix="skewgroup-bench-"))


def aggregator_stream_session(module, name, ui_port, workers):
    """:func:`local_session` for the benches on the aggregators grid's stream
    (bench/_aggregators_grid.py, shipped by value: its aggregators run in the Python workers),
    AQE off, ``workers`` shuffle partitions."""
    import _aggregators_grid

    return local_session(module, name, ui_port, {"spark.sql.adaptive.enabled": "false",
                                                 "spark.sql.shuffle.partitions": str(workers)},
                         by_value=(_aggregators_grid,))
