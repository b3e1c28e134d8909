"""Entry point for ``spark-submit skewgroup/job.py [options]`` (same options as ``skewgroup run``).

A thin script: the job lives in :mod:`skewgroup.spark.job`, the only layer that imports pyspark.
"""
import sys

if __name__ == "__main__":
    from skewgroup.spark.job import main

    sys.exit(main())
