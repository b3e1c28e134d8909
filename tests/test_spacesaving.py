"""SpaceSaving (Metwally et al. 2005): error bound, top-k, decay, merge, snapshots."""
import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import skewgroup
from skewgroup._spacesaving import SpaceSaving


def check_bounds(sketch, keys):
    """Every monitored estimate is >= the true count and <= true + m/k; every key with true
    count > m/k is monitored (Metwally et al., Lemma 3 and Theorem 2)."""
    counts = Counter(keys.tolist())
    unique = np.array(list(counts), dtype=np.int64)
    truth = np.array([counts[k] for k in unique.tolist()])
    estimates = sketch.estimate_hashes(skewgroup.hash_keys(unique))
    m, k = len(keys), sketch.capacity
    monitored = estimates > 0
    assert np.all(estimates[monitored] >= truth[monitored])
    assert np.all(estimates[monitored] - truth[monitored] <= m / k)
    assert np.all(monitored[truth > m / k])
    return unique, truth, estimates


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=600), st.integers(1, 30))
def test_error_bound_on_random_streams(values, capacity):
    keys = np.array(values, dtype=np.int64)
    sketch = SpaceSaving(capacity)
    sketch.update_hashes(skewgroup.hash_keys(keys))
    assert sketch.total == len(keys) and sketch.size == min(capacity, len(set(values)))
    check_bounds(sketch, keys)


@pytest.mark.parametrize("z", [1.1, 1.4, 2.0])
def test_error_bound_and_top_k_on_zipf(z):
    keys = skewgroup.streams.zipf(z, 200_000, universe=10**5, seed=4)
    sketch = SpaceSaving(200)
    sketch.update_hashes(skewgroup.hash_keys(keys))
    unique, truth, _ = check_bounds(sketch, keys)
    top_hashes, top_counts = sketch.top(10)
    assert np.all(np.diff(top_counts) <= 0)
    # The true top keys above m/k are exactly the reported top keys, in order of frequency.
    heavy = unique[np.argsort(-truth)][:10]
    heavy = heavy[np.sort(truth)[::-1][:10] > len(keys) / 200]
    assert list(top_hashes[:len(heavy)]) == list(skewgroup.hash_keys(heavy))


def test_decay_scales_counts_and_total():
    sketch = SpaceSaving(10)
    sketch.update_hashes(skewgroup.hash_keys(np.repeat(np.arange(5), [50, 40, 30, 20, 10])))
    sketch.decay(0.2)
    assert sketch.total == 30
    assert sketch.top(5)[1].tolist() == [10, 8, 6, 4, 2]
    with pytest.raises(ValueError, match="factor"):
        sketch.decay(0.0)


def test_merge_keeps_the_bound_of_both_streams():
    keys = skewgroup.streams.zipf(1.3, 100_000, universe=10**4, seed=9)
    a, b = SpaceSaving(100), SpaceSaving(100)
    a.update_hashes(skewgroup.hash_keys(keys[:60_000]))
    b.update_hashes(skewgroup.hash_keys(keys[60_000:]))
    merged = a.merge(b)
    assert merged.total == len(keys)
    counts = Counter(keys.tolist())
    unique = np.array(list(counts))
    truth = np.array([counts[k] for k in unique.tolist()])
    est = merged.estimate_hashes(skewgroup.hash_keys(unique))
    seen = est > 0
    assert np.all(est[seen] >= truth[seen])
    assert np.all(est[seen] - truth[seen] <= len(keys) / 100 * 2)
    assert np.all(seen[truth > 2 * len(keys) / 100])


@pytest.mark.parametrize("via", ["bytes", "pickle"])
def test_snapshot_continues_identically(via):
    keys = skewgroup.hash_keys(skewgroup.streams.zipf(1.2, 50_000, universe=5000, seed=1))
    sketch = SpaceSaving(64)
    sketch.update_hashes(keys[:20_000])
    copy = (SpaceSaving.from_bytes(sketch.to_bytes()) if via == "bytes"
            else pickle.loads(pickle.dumps(sketch)))
    sketch.update_hashes(keys[20_000:])
    copy.update_hashes(keys[20_000:])
    for a, b in zip(sketch.top(64), copy.top(64)):
        assert np.array_equal(a, b)
    assert sketch.min_count == copy.min_count and sketch.total == copy.total


def test_bad_capacity():
    with pytest.raises(ValueError, match="'capacity'"):
        SpaceSaving(0)
