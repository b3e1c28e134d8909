"""µs per row of a user's plain per-row Aggregator (``zero``/``reduce``/``merge``/``finish``, no
batch methods) through skewgroup's adapter, against the bare Python loop a user would write
around the same methods. No Spark.

The aggregator keeps the three largest distinct values of a key (a list buffer). The rows are
grouped by key as the partial stage hands them over: 200,000 rows, Zipf z = 1.4 keys over a
universe of 50,000, one partition. Each figure is the best of ``ROUNDS`` runs (the spread in
brackets: the worst):

* ``bare loop``       -- ``zero()`` per group and ``reduce(buffer, value)`` per row over rows
  already Python tuples: the floor of any per-row Python aggregate;
* ``+ conversions``   -- the same plus what any Arrow-fed Python stage pays: the columns to
  Python (``to_pylist``) and the buffers to an Arrow column (``pa.array``);
* ``adapter``         -- ``PythonAggregator.reduce_arrow``: everything the partial stage runs.

The same for the merge: a second partition's partials merged with the first's per key
(``merge`` per extra buffer): bare over Python buffers, with the conversions from and to
Arrow, and through ``merge_arrow``.

    cd /tmp && python -m pytest /path/to/bench/bench_per_row.py --benchmark-only -s
"""
import time

import numpy as np
import pyarrow as pa
import pytest

from skewgroup.aggregators import adapt

ROWS, UNIVERSE, Z, ROUNDS = 200_000, 50_000, 1.4, 5
BUFFER = pa.struct([("top", pa.list_(pa.int64()))])


class TopThreeDistinct:
    """The three largest distinct values of a key: Spark's Aggregator protocol, per row."""

    bufferSchema, outputType = "top array<bigint>", "array<bigint>"

    def zero(self):
        return ([],)

    def reduce(self, buffer, value):
        item, top = value[0], buffer[0]
        if item is None or item in top or (len(top) == 3 and item <= top[-1]):
            return buffer
        return (sorted(top + [item], reverse=True)[:3],)

    def merge(self, buffer1, buffer2):
        return (sorted(set(buffer1[0]) | set(buffer2[0]), reverse=True)[:3],)

    def finish(self, buffer):
        return buffer[0]


def _grouped(seed):
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, UNIVERSE + 1, dtype=np.float64) ** -Z
    keys = np.sort(rng.choice(UNIVERSE, ROWS, p=ranks / ranks.sum()))
    distinct, starts = np.unique(keys, return_index=True)
    offsets = np.append(starts, ROWS).astype(np.int64)
    return distinct, offsets, pa.table({"x": rng.integers(0, 10**6, ROWS)})


def _best(function):
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times), max(times)


def test_plain_aggregator_per_row(benchmark):
    obj = TopThreeDistinct()
    adapter = adapt(obj, ["x"], buffer_type=BUFFER, output_type=pa.list_(pa.int64()))
    _, offsets, table = _grouped(0)
    bounds = list(zip(offsets[:-1].tolist(), offsets[1:].tolist()))
    rows = list(zip(table.column("x").to_pylist()))

    def loop(values):
        buffers = []
        for start, stop in bounds:
            buffer = obj.zero()
            for value in values[start:stop]:
                buffer = obj.reduce(buffer, value)
            buffers.append(buffer)
        return buffers

    def bare():
        return loop(rows)

    def converted():
        return pa.array(loop(list(zip(table.column("x").to_pylist()))), BUFFER)

    def through_adapter():
        return adapter.reduce_arrow(table, offsets)

    assert adapter.from_arrow(through_adapter()) == bare()
    figures = {name: _best(f) for name, f in
               [("bare loop", bare), ("+ conversions", converted), ("adapter", through_adapter)]}

    # The merge: two partitions' partials of the same keys, merged per key.
    first, second = through_adapter(), adapter.reduce_arrow(_grouped(1)[2], offsets)
    both = pa.concat_arrays([first, second])
    groups = len(offsets) - 1
    order = np.ravel(np.column_stack([np.arange(groups), groups + np.arange(groups)]))
    paired = both.take(pa.array(order))
    pair_offsets = np.arange(0, 2 * groups + 1, 2, dtype=np.int64)
    python_pairs = adapter.from_arrow(paired)

    def bare_merge():
        return [obj.merge(python_pairs[i], python_pairs[i + 1]) for i in range(0, 2 * groups, 2)]

    def converted_merge():
        pairs = list(zip(*(field.to_pylist() for field in paired.flatten())))
        return pa.array([obj.merge(pairs[i], pairs[i + 1]) for i in range(0, 2 * groups, 2)],
                        BUFFER)

    def adapter_merge():
        return adapter.merge_arrow(paired, pair_offsets)

    assert adapter.from_arrow(adapter_merge()) == bare_merge()
    merges = {"bare merge loop": _best(bare_merge), "+ conversions": _best(converted_merge),
              "adapter merge_arrow": _best(adapter_merge)}
    benchmark.pedantic(through_adapter, rounds=1, iterations=1)
    print(f"\n{ROWS} rows, {groups} keys (z={Z}), best (worst) of {ROUNDS}:")
    print("| step | µs a row | x bare loop |")
    print("|---|---:|---:|")
    floor = figures["bare loop"][0]
    for name, (low, high) in figures.items():
        print(f"| {name} | {low / ROWS * 1e6:.3f} ({high / ROWS * 1e6:.3f}) | "
              f"{low / floor:.2f} |")
    print("| step | µs a key | x bare loop |")
    floor = merges["bare merge loop"][0]
    for name, (low, high) in merges.items():
        print(f"| {name} | {low / groups * 1e6:.3f} ({high / groups * 1e6:.3f}) | "
              f"{low / floor:.2f} |")


if __name__ == "__main__":
    pytest.main([__file__, "--benchmark-only", "-s", "-p", "no:cacheprovider"])
