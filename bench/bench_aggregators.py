"""µs per row of the shipped aggregators' partial step: the adapter's Python loop over the
scalar protocol against their vectorized ``reduce_groups``, and the merge of those partials.

    python bench/bench_aggregators.py [rows] [groups]

200,000 rows over about 7,000 keys (Zipf z = 1.2 over 7,000 key ids, so a few keys are hot),
one partition, rows already grouped by key as the Spark layer hands them over; the best of
``ROUNDS`` runs after a warm-up. No Spark.
"""
import sys
import time

import numpy as np
import pyarrow as pa

from skewgroup.aggregators import DistinctCount, KllQuantiles, LeastSquares, TopK, adapt

ROUNDS = 3


class ScalarOnly:
    """The scalar protocol alone, so the adapter takes its Python loop."""

    def __init__(self, inner):
        self.inner = inner

    def zero(self):
        return self.inner.zero()

    def reduce(self, buffer, value):
        return self.inner.reduce(buffer, value)

    def merge(self, buffer1, buffer2):
        return self.inner.merge(buffer1, buffer2)

    def finish(self, buffer):
        return self.inner.finish(buffer)


def best(function, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main(rows=200_000, groups=7_000):
    rng = np.random.default_rng(0)
    keys = np.sort(rng.zipf(1.2, rows) % groups)
    distinct, starts = np.unique(keys, return_index=True)
    offsets = np.append(starts, rows).astype(np.int64)
    x = rng.normal(size=(rows, 3))
    cases = {
        "KllQuantiles()": (KllQuantiles(), pa.table({"v": x[:, 0]})),
        "TopK(10, bigint)": (TopK(10, "bigint"),
                             pa.table({"v": (rng.zipf(1.3, rows) % 10_000).astype(np.int64)})),
        "DistinctCount(bigint)": (DistinctCount("bigint"),
                                  pa.table({"v": rng.integers(0, 1_000, rows)})),
        "LeastSquares(2, intercept)": (LeastSquares(2, intercept=True),
                                       pa.table({"y": x[:, 0], "a": x[:, 1], "b": x[:, 2]})),
    }
    print(f"{rows} rows, {len(distinct)} keys; µs per row (best of {ROUNDS}), "
          f"bytes per buffer")
    for name, (obj, table) in cases.items():
        fast = adapt(obj, table.column_names)
        slow = adapt(ScalarOnly(obj), table.column_names, buffer_type=obj.arrow_buffer_type,
                     output_type=obj.arrow_output_type)
        fast.reduce_groups(table.slice(0, 1000), np.array([0, 1000]))      # warm-up
        loop = best(lambda: slow.reduce_groups(table, offsets), 1)
        vectorized = best(lambda: fast.reduce_groups(table, offsets), ROUNDS)
        partials = fast.reduce_groups(table, offsets)
        # Merge: the partials of two workers per key.
        pairs = [b for b in partials for _ in range(2)]
        pair_offsets = np.arange(0, len(pairs) + 1, 2, dtype=np.int64)
        merge_loop = best(lambda: slow.merge_groups(pairs, pair_offsets), 1)
        merge_vec = best(lambda: fast.merge_groups(pairs, pair_offsets), ROUNDS)
        encoded = fast.encode(partials)
        codec = best(lambda: fast.decode(fast.encode(partials)), ROUNDS)
        print(f"{name:28s} reduce loop {loop / rows * 1e6:7.2f}  vectorized "
              f"{vectorized / rows * 1e6:6.2f}  | merge per key loop "
              f"{merge_loop / len(distinct) * 1e6:7.1f}  vectorized "
              f"{merge_vec / len(distinct) * 1e6:6.1f}  | encode+decode per key "
              f"{codec / len(distinct) * 1e6:6.1f}  | {fast.buffer_bytes(encoded):8.0f} B")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:]))
