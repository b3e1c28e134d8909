"""A stream's state, kept as runs per bucket of keys (docs/stream.md), below the Spark layer
(pyarrow and numpy only, no pyspark):

* ``bucket``: a bucket's runs in a store, read, merged and written (``BucketRuns``), the
  policy of when runs merge;
* ``runs``: a micro-batch's partial rows merged into the runs (``merge_runs``);
* ``stored``: a run's stored bytes, their layout, its checks and migration (``decoded_run``);
* ``cache``: the runs a process has decoded, kept for the next call (``RunCache``);
* ``states``: the two kinds of state a bucket keeps per key (``BufferState``,
  ``ReducedState``).
* ``packing``: a micro-batch's partial rows packed per bucket for the stateful stage, and its
  output unpacked (``partial_packer``, ``unpacker``).
"""
