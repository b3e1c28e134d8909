"""The sketches behind a stream's balance figures (skewgroup._planning.sketches), without Spark."""
import numpy as np

import skewgroup
from skewgroup._planning.sketches import head_rows, key_codes, pair_codes, smallest


def distinct_estimate(codes, size):
    """KMV's estimate from the tasks' smallest codes, as spark._observe computes it."""
    union = np.unique(codes)
    if union.shape[0] < size:
        return int(union.shape[0])
    return int(round((size - 1) * 2.0 ** 63 / union[size - 1]))


def test_head_rows_flag_the_keys_above_theta():
    keys = skewgroup.streams.zipf(1.4, 50_000, universe=5_000, seed=2)
    hot = head_rows(skewgroup.hash_keys(keys), 8)  # theta = 1/40: 1250 rows
    counts = np.bincount(keys)
    exact = counts[keys] >= len(keys) / 40
    # SpaceSaving only overestimates, by at most m / 80 = 625 rows: no head key is missed, and
    # a flagged key has more than 1250 - 625 rows.
    assert hot[exact].all()
    assert (counts[keys[hot]] > 625).all()
    assert 2 <= len(np.unique(keys[hot])) < 10


def test_kmv_estimates_distinct_keys_and_pairs_from_the_smallest_codes():
    """Task sketches merged by their union estimate the distinct keys within a few relative
    standard errors (1 / sqrt(510) = 4.4 %); under key grouping pairs equal keys exactly."""
    size = 512
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 40_000, 300_000)
    codes = key_codes(skewgroup.hash_keys(keys))
    tasks = np.array_split(np.arange(len(keys)), 4)
    kept = [smallest(np.empty(0, np.int64), codes[rows], size) for rows in tasks]
    estimate = distinct_estimate(np.concatenate(kept), size)
    assert abs(estimate / len(np.unique(keys)) - 1) < 3 * 0.044
    hashed = (keys % 16).astype(np.int32)                # key grouping: one worker a key
    pairs = pair_codes(codes, hashed)
    kept_pairs = [smallest(np.empty(0, np.int64), pairs[rows], size) for rows in tasks]
    assert distinct_estimate(np.concatenate(kept_pairs), size) == estimate
    few = codes[:100]
    assert distinct_estimate(smallest(np.empty(0, np.int64), few, size), size) == \
        len(np.unique(keys[:100]))


def test_smallest_selects_as_the_whole_sort_does():
    """The selection before the sort gives the size smallest distinct codes of kept and codes,
    as the union of both sorted whole does: distinct codes, repeats, and codes all alike."""
    # kept holds a large code, codes repeat their smallest: the answer takes codes above the
    # selected one.
    assert smallest(np.array([100]), np.array([1, 1, 1, 5, 6]), 2).tolist() == [1, 5]
    rng = np.random.default_rng(7)
    for trial in range(2000):
        size = int(rng.integers(1, 40))
        n = int(rng.integers(0, 400))
        spread = int(rng.choice([3, 50, 1 << 40]))     # many repeats, some, none
        codes = rng.integers(0, spread, n).astype(np.int64)
        kept = np.unique(rng.integers(0, 2 * spread, int(rng.integers(0, size + 1))).astype(
            np.int64))
        kept = kept[:size]
        assert np.array_equal(smallest(kept, codes, size),
                              np.union1d(kept, codes)[:size]), (trial, size, n, spread)
