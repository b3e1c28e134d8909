"""Entry point for ``spark-submit skewgroup/app/job.py [options]`` (same options as ``skewgroup run``).

A thin script: the job is the application package :mod:`skewgroup.app`, above the Spark layer.
"""
import sys

if __name__ == "__main__":
    from skewgroup.app.main import main

    sys.exit(main())
