"""The runs a process keeps (skewgroup._aggregation.stream.cache), without Spark: within their
bound, an idle bucket dropped first."""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.stream.cache import RunCache
from skewgroup.aggregators import adapt

from _aggregators import Total
from _stream_buckets import SUM_BUFFER, partials_of


def test_the_kept_runs_stay_within_their_bound_and_only_an_idle_bucket_is_dropped():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    table = partials_of(adapter, np.arange(100), np.ones(100, np.int64))
    run, size = (0, table, 100), table.get_total_buffer_size()
    cache = RunCache(limit=int(2.5 * size))
    for scope in ("a", "b", "c"):
        cache.bucket(scope, [])
        cache.add(scope, 1, run)
    # Full: the buckets are read in turn, so none is dropped for "c", whose run is not kept.
    assert cache.bucket("c", [1]) == {} and cache.size == 2 * size
    assert cache.bucket("a", [1]) == {1: run} and cache.bucket("b", [1]) == {1: run}
    # "a" not read for four rounds of the kept buckets (a stopped query's): dropped for "c".
    for _ in range(6):
        cache.bucket("b", [1])
        cache.bucket("c", [])
    cache.add("c", 1, run)
    assert set(cache.buckets) == {"b", "c"} and cache.size == 2 * size
    # A run removed from the store is dropped when its bucket is read.
    assert cache.bucket("c", [2]) == {} and cache.size == size
