"""auto's estimate (skewgroup._estimate) on sampled rows, without Spark."""
import numpy as np
import pytest

from skewgroup import _estimate


@pytest.mark.parametrize("rows_per_key", [1, 3, 40, 400])
def test_auto_counts_the_partial_rows_spread_gives_the_merge(rows_per_key):
    """The estimate's merge term against the truth: keys of c rows each, dealt round robin
    over n workers, reach n (1 - (1 - 1/n)^c) workers on average (one for c = 1, all n for
    c >> n); the routed plan gives one partial row a key. Every row sampled (weight 1)."""
    n, keys = 16, 2_000
    kh = np.repeat(np.arange(keys, dtype=np.int64), rows_per_key)
    rng = np.random.default_rng(rows_per_key)
    rng.shuffle(kh)
    rows = len(kh)
    dealt = (np.arange(rows) + 5) % n                  # round robin from an offset
    true_pairs = len(np.unique(kh * n + dealt))
    stats = _estimate.from_sample(np.arange(rows) % 4, kh % n, kh, np.ones(rows), n, keys=keys)
    assert not stats.hot                               # no key near 1/(5n) of the rows
    estimates = stats.estimates("python")
    per_pair = _estimate.GROUP_COST + _estimate.MERGE_COST["python"]   # made by 1/n, merged over n
    spread_pairs = (estimates["spread"] - 1 / n) * n * rows / per_pair
    hash_pairs = (estimates["hash"] - stats.shares()[1]) * n * rows / per_pair
    assert spread_pairs == pytest.approx(true_pairs, rel=0.1)
    assert hash_pairs == pytest.approx(keys)
    # A Spark merge (JVM) charges the same rows less.
    spark_spread = (stats.estimates("spark")["spread"] - 1 / n) * n * rows
    assert spark_spread == pytest.approx(
        spread_pairs * (_estimate.GROUP_COST + _estimate.MERGE_COST["spark"]))
