"""SpaceSaving updates per second, ours against Apache DataSketches' frequent-items sketch.

    pytest bench/bench_spacesaving.py --benchmark-only

Both are fed the same 10^6 Zipf (z = 1.4) keys, already hashed to uint64 (hashing is not
measured): ours takes the whole array (``update_hashes``, a nogil loop), DataSketches takes one
Python int per ``update`` call, which is how its Python API counts a stream. Sizes match: ours has
1536 counters, the DataSketches map ``lg_max_k = 11`` holds at most 0.75 * 2^11 = 1536 items.
Each round starts from an empty sketch. The figures (updates/s and the ratio, target >= 10x) are
printed in the session summary and saved under bench/results/.
"""
import numpy as np
import pytest

from skewgroup._routing._hash import hash_int64
from skewgroup._routing._spacesaving import SpaceSaving

N_KEYS = 1_000_000
ZIPF_Z = 1.4
CAPACITY = 1536
LG_MAX_K = 11  # DataSketches: up to 0.75 * 2^11 = 1536 items

_RATE = {}  # updates/s by implementation, for the ratio


@pytest.fixture(scope="module")
def hashes():
    keys = np.random.default_rng(1).zipf(ZIPF_Z, N_KEYS).astype(np.int64)
    out = np.empty(N_KEYS, dtype=np.uint64)
    hash_int64(keys, 0, out)
    return out


def _record(benchmark, figures, name):
    rate = N_KEYS / benchmark.stats.stats.min
    _RATE[name] = rate
    row = dict(bench="spacesaving", impl=name, updates=N_KEYS, zipf=ZIPF_Z, capacity=CAPACITY,
               updates_per_s=round(rate), ns_per_update=round(1e9 / rate, 2))
    benchmark.extra_info.update(row)
    figures.add(**row)
    print(f"\n{name}: {rate / 1e6:.2f} M updates/s ({1e9 / rate:.1f} ns/update)")
    if len(_RATE) == 2:
        ratio = _RATE["skewgroup"] / _RATE["datasketches"]
        figures.add(bench="spacesaving", ratio_ours_over_datasketches=round(ratio, 1), target=10)
        print(f"skewgroup / datasketches: {ratio:.1f}x (target >= 10x)")


def test_skewgroup_spacesaving(benchmark, figures, hashes):
    benchmark.pedantic(lambda sketch: sketch.update_hashes(hashes),
                       setup=lambda: ((SpaceSaving(CAPACITY),), {}), rounds=10, warmup_rounds=1)
    _record(benchmark, figures, "skewgroup")


def test_datasketches_frequent_items(benchmark, figures, hashes):
    datasketches = pytest.importorskip("datasketches")
    items = hashes.tolist()  # Python ints made once, outside the measurement

    def feed(sketch):
        update = sketch.update
        for item in items:
            update(item)

    benchmark.pedantic(feed, setup=lambda: ((datasketches.frequent_items_sketch(LG_MAX_K),), {}),
                       rounds=10, warmup_rounds=1)
    _record(benchmark, figures, "datasketches")
