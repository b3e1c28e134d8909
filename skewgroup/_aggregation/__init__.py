"""Aggregation over Arrow, below the Spark layer (pyarrow and numpy, no pyspark): rows grouped
by key, the adapter of Python aggregators (``skewgroup.aggregators`` is its face), the partials of
custom aggregates, Spark's reductions and functions with Spark's semantics, the shipped
aggregators, and a stream's state kept as runs."""
