"""SpaceSaving over the stream-summary (Metwally et al. 2005) and its merge (Agarwal et al. 2012).

The guarantees checked against exact counts: for a monitored key
true <= estimate <= true + min_count <= true + m/k and estimate - error <= true; a key seen more
than m/k times is monitored (Lemma 3.3, Theorem 3.5). Without decay the counts sum to m.
"""
import pickle
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from skewgroup import streams
from skewgroup._routing import _serial
from skewgroup._routing._hash import hash_int64
from skewgroup._routing._keymap import _KeyMapForTests
from skewgroup._routing._spacesaving import SpaceSaving


def hashes_of(values, seed=0):
    values = np.ascontiguousarray(values, dtype=np.int64)
    out = np.empty(values.shape[0], dtype=np.uint64)
    hash_int64(values, seed, out)
    return out


def zipf_stream(n, z=1.4, seed=0):
    return hashes_of(np.random.default_rng(seed).zipf(z, n))


def uniform_stream(n, universe, seed=0):
    return hashes_of(np.random.default_rng(seed).integers(0, universe, n))


def exact(stream):
    keys, counts = np.unique(stream, return_counts=True)
    return keys, counts.astype(np.int64)


def state_of(sketch):
    """The state arrays (comparable, unlike npz bytes that carry a zip timestamp)."""
    return _serial.unpack(sketch.to_bytes())[1]


def assert_same_state(a, b):
    sa, sb = state_of(a), state_of(b)
    assert sa.keys() == sb.keys()
    for name in sa:
        if name == "index":
            for x, y in zip(sa[name], sb[name]):
                np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_array_equal(sa[name], sb[name], err_msg=name)


def monitored(sketch):
    keys, counts = sketch.top(sketch.capacity)
    return dict(zip(keys.tolist(), counts.tolist()))


def check_guarantees(sketch, stream):
    """Metwally et al. Theorem 3.5 / Lemma 3.3 against exact counts of ``stream``."""
    m, k = len(stream), sketch.capacity
    keys, true = exact(stream)
    estimate = sketch.estimate_hashes(keys)
    held = monitored(sketch)
    assert sketch.total == m
    assert sketch.size == min(k, len(keys))
    assert sum(held.values()) == m  # each unit update adds exactly 1 to one counter
    is_held = np.array([key in held for key in keys.tolist()], dtype=bool)
    assert np.all(estimate[is_held] >= true[is_held])
    assert np.all(estimate[is_held] - true[is_held] <= sketch.min_count)
    assert np.all((estimate[is_held] - true[is_held]) * k <= m)
    assert np.all(estimate[~is_held] == 0)
    # Unmonitored keys occurred at most min_count times; so anything above m/k is monitored.
    assert np.all(true[~is_held] <= sketch.min_count)
    assert is_held[true * k > m].all()
    assert sketch.min_count * k <= m
    # Each counter's error bounds its over-estimate: count - error <= true <= count.
    state = state_of(sketch)
    used = slice(0, state["size"])
    true_of = dict(zip(keys.tolist(), true.tolist()))
    for key, count, error in zip(state["keys"][used].tolist(), state["counts"][used].tolist(),
                                 state["errors"][used].tolist()):
        assert 0 <= error <= min(count, sketch.min_count)
        assert count - error <= true_of[key] <= count


@pytest.mark.parametrize("capacity", [1, 7, 64, 500])
@pytest.mark.parametrize("kind", ["zipf", "uniform"])
def test_error_bound_against_exact_counts(kind, capacity):
    stream = zipf_stream(100_000, seed=3) if kind == "zipf" else uniform_stream(50_000, 300, 4)
    sketch = SpaceSaving(capacity)
    # Several batches: batching must not matter.
    for part in np.array_split(stream, 7):
        sketch.update_hashes(part)
    check_guarantees(sketch, stream)


def test_batches_do_not_matter():
    stream = zipf_stream(20_000, seed=5)
    whole, pieces = SpaceSaving(50), SpaceSaving(50)
    whole.update_hashes(stream)
    for i in range(0, len(stream), 333):
        pieces.update_hashes(stream[i:i + 333])
    assert_same_state(whole, pieces)


def test_per_tuple_path_matches_the_batch_path():
    # Strategies call ss_update per tuple; update_hashes has its own in-place fast path.
    stream = np.concatenate([zipf_stream(20_000, seed=12), uniform_stream(5_000, 3_000, seed=13)])
    batch, each = SpaceSaving(64), SpaceSaving(64)
    for part in np.array_split(stream, 5):
        batch.update_hashes(part)
        each._update_each(part)
        assert_same_state(batch, each)
        batch.decay(0.5)
        each.decay(0.5)
    # ss_update returns the key's estimate right after its update.
    one = SpaceSaving(8)
    for h in uniform_stream(500, 20, seed=14):
        single = np.array([h], dtype=np.uint64)
        assert one._update_each(single)[0] == one.estimate_hashes(single)[0] >= 1


def test_top_matches_exact_heavy_hitters_on_zipf():
    stream = zipf_stream(200_000, seed=11)
    sketch = SpaceSaving(500)
    sketch.update_hashes(stream)
    m, k = len(stream), sketch.capacity
    keys, true = exact(stream)
    order = np.lexsort((keys, -true))
    top_keys, top_counts = sketch.top(10)
    # Zipf 1.4: the ten hottest keys are far apart relative to m/k, so the order is exact.
    np.testing.assert_array_equal(top_keys, keys[order[:10]])
    assert np.all(top_counts >= true[order[:10]])
    # Every key above m/k is among the counters whose estimate is above m/k.
    all_keys, all_counts = sketch.top(k)
    reported = set(all_keys[all_counts * k > m].tolist())
    assert set(keys[true * k > m].tolist()) <= reported


@pytest.mark.parametrize("z", [1.1, 1.4, 2.0])
def test_heavy_top_keys_in_exact_order_across_skews(z):
    # Pd-Stream's generator (a 10^5-key universe): above m/k the reported top is the true top.
    keys = streams.zipf(z, 200_000, universe=10**5, seed=4)
    stream = hashes_of(keys)
    sketch = SpaceSaving(200)
    sketch.update_hashes(stream)
    check_guarantees(sketch, stream)
    true_keys, true = exact(stream)
    order = np.lexsort((true_keys, -true))[:10]
    heavy = true_keys[order][true[order] * 200 > len(stream)]
    top_keys, top_counts = sketch.top(10)
    assert np.all(np.diff(top_counts) <= 0)
    np.testing.assert_array_equal(top_keys[:len(heavy)], heavy)


def test_top_order_and_limits():
    sketch = SpaceSaving(20)
    sketch.update_hashes(uniform_stream(5_000, 60, seed=2))
    keys, counts = sketch.top(100)
    assert len(keys) == len(counts) == sketch.size == 20
    assert keys.dtype == np.uint64 and counts.dtype == np.int64
    # Count descending, ties by hash ascending.
    assert all((c1, -k1) >= (c2, -k2) for c1, k1, c2, k2 in
               zip(counts[:-1].tolist(), keys[:-1].tolist(), counts[1:].tolist(), keys[1:].tolist()))
    assert len(sketch.top(0)[0]) == 0
    np.testing.assert_array_equal(sketch.top(5)[0], keys[:5])
    empty = SpaceSaving(3)
    assert len(empty.top(3)[0]) == 0 and empty.min_count == 0 and empty.total == 0


def test_replace_min_is_deterministic_head_of_min_bucket():
    a, b, c = hashes_of([1, 2, 3]).tolist()
    sketch = SpaceSaving(2)
    sketch.update_hashes(np.array([a, b, c], dtype=np.uint64))
    # a and b share the minimum bucket; b entered it last, so it is its head and is evicted;
    # c inherits its count: min + 1 = 2 (ReplaceMin, Metwally et al. §3).
    np.testing.assert_array_equal(sketch.estimate_hashes(np.array([a, b, c], dtype=np.uint64)),
                                  [1, 0, 2])
    assert sketch.min_count == 1 and sketch.total == 3


def test_key_hash_zero_is_a_key_like_any_other():
    sketch = SpaceSaving(4)
    sketch.update_hashes(np.array([0, 0, 5, 0], dtype=np.uint64))
    np.testing.assert_array_equal(sketch.estimate_hashes(np.array([0, 5, 6], dtype=np.uint64)),
                                  [3, 1, 0])
    restored = SpaceSaving.from_bytes(sketch.to_bytes())
    np.testing.assert_array_equal(restored.top(4)[0], [0, 5])


def round_half_up(x):
    return int(Decimal(x).to_integral_value(ROUND_HALF_UP))


@pytest.mark.parametrize("factor", [1.0, 0.5, 0.2, 0.01])
def test_decay_scales_counts_errors_and_total(factor):
    stream = zipf_stream(30_000, seed=8)
    sketch = SpaceSaving(40)
    sketch.update_hashes(stream)
    before = state_of(sketch)
    keys, counts = sketch.top(40)
    sketch.decay(factor)
    after = state_of(sketch)
    assert sketch.total == round_half_up(len(stream) * factor)
    used = slice(0, before["size"])
    assert [round_half_up(c * factor) for c in before["counts"][used].tolist()] == \
        after["counts"][used].tolist()
    assert [round_half_up(e * factor) for e in before["errors"][used].tolist()] == \
        after["errors"][used].tolist()
    # Counters that round to 0 stay monitored (documented choice): same keys, same size.
    assert sketch.size == 40
    np.testing.assert_array_equal(sketch.estimate_hashes(keys),
                                  [round_half_up(c * factor) for c in counts.tolist()])
    assert sketch.min_count == min(round_half_up(c * factor) for c in counts.tolist())
    # The buckets were rebuilt consistently: the state passes the restore check, and updating
    # on from both gives the same thing.
    restored = SpaceSaving.from_bytes(sketch.to_bytes())
    more = zipf_stream(5_000, seed=9)
    sketch.update_hashes(more)
    restored.update_hashes(more)
    assert_same_state(sketch, restored)


def test_decay_worked_example():
    sketch = SpaceSaving(10)
    sketch.update_hashes(hashes_of(np.repeat(np.arange(5), [50, 40, 30, 20, 10])))
    sketch.decay(0.2)
    assert sketch.total == 30
    assert sketch.top(5)[1].tolist() == [10, 8, 6, 4, 2]


def test_decayed_counter_at_zero_is_replaced_first():
    a, b, c = hashes_of([10, 20, 30]).tolist()
    sketch = SpaceSaving(2)
    sketch.update_hashes(np.array([a] * 10 + [b], dtype=np.uint64))
    sketch.decay(0.1)  # a: 10 -> 1, b: 1 -> 0 (llround(0.1) = 0), both stay monitored
    assert sketch.size == 2 and sketch.min_count == 0
    sketch.update_hashes(np.array([c], dtype=np.uint64))
    np.testing.assert_array_equal(sketch.estimate_hashes(np.array([a, b, c], dtype=np.uint64)),
                                  [1, 0, 1])


def merged_reference(a, b, capacity):
    """Agarwal et al.'s SpaceSaving merge, written out over dicts."""
    ma, mb = monitored(a), monitored(b)
    min_a, min_b = a.min_count, b.min_count
    merged = {key: ma.get(key, min_a) + mb.get(key, min_b) for key in set(ma) | set(mb)}
    ranked = sorted(merged.items(), key=lambda item: (-item[1], item[0]))[:capacity]
    return [key for key, _ in ranked], [count for _, count in ranked]


@pytest.mark.parametrize("capacity", [5, 100])
def test_merge_bound_and_formula(capacity):
    first, second = zipf_stream(40_000, seed=21), uniform_stream(30_000, 400, seed=22)
    a, b = SpaceSaving(capacity), SpaceSaving(capacity)
    a.update_hashes(first)
    b.update_hashes(second)
    merged = a.merge(b)
    assert merged.capacity == capacity and merged.size <= capacity
    assert merged.total == len(first) + len(second)
    keys, counts = merged.top(capacity)
    ref_keys, ref_counts = merged_reference(a, b, capacity)
    assert keys.tolist() == ref_keys and counts.tolist() == ref_counts
    # Bound: true <= estimate <= true + (m_a + m_b) / k for every merged counter.
    both = np.concatenate([first, second])
    all_keys, true = exact(both)
    true_of = dict(zip(all_keys.tolist(), true.tolist()))
    m = len(both)
    for key, estimate in zip(keys.tolist(), counts.tolist()):
        assert true_of[key] <= estimate
        assert (estimate - true_of[key]) * capacity <= m
        assert estimate - true_of[key] <= a.min_count + b.min_count
    # The merge is a working summary: it keeps counting and round-trips.
    more = zipf_stream(3_000, seed=23)
    restored = SpaceSaving.from_bytes(merged.to_bytes())
    merged.update_hashes(more)
    restored.update_hashes(more)
    assert_same_state(merged, restored)


def test_merge_of_two_halves_keeps_keys_above_twice_m_over_k():
    stream = hashes_of(streams.zipf(1.3, 100_000, universe=10**4, seed=9))
    a, b = SpaceSaving(100), SpaceSaving(100)
    a.update_hashes(stream[:60_000])
    b.update_hashes(stream[60_000:])
    merged = a.merge(b)
    keys, true = exact(stream)
    estimate = merged.estimate_hashes(keys)
    held = np.isin(keys, merged.top(100)[0])
    assert np.all(estimate[held] >= true[held])
    assert np.all((estimate[held] - true[held]) * 100 <= len(stream))
    assert held[true * 100 > 2 * len(stream)].all()


def test_merge_of_unfilled_summaries_is_exact():
    a, b = SpaceSaving(100), SpaceSaving(100)
    first, second = uniform_stream(2_000, 30, seed=1), uniform_stream(2_000, 30, seed=2)
    a.update_hashes(first)
    b.update_hashes(second)
    merged = b.merge(a)
    keys, true = exact(np.concatenate([first, second]))
    np.testing.assert_array_equal(merged.estimate_hashes(keys), true)
    assert merged.min_count == 0  # 30 distinct keys in 100 counters


def test_merge_rejects_non_summaries():
    with pytest.raises(TypeError):
        SpaceSaving(3).merge(None)


@pytest.mark.parametrize("how", ["bytes", "pickle"])
def test_round_trip_mid_stream_continues_identically(how):
    stream = zipf_stream(60_000, seed=31)
    sketch = SpaceSaving(128)
    sketch.update_hashes(stream[:25_000])
    sketch.decay(0.5)
    sketch.update_hashes(stream[25_000:30_000])
    if how == "bytes":
        data = sketch.to_bytes()
        assert isinstance(data, bytes)
        copy = SpaceSaving.from_bytes(data)
    else:
        copy = pickle.loads(pickle.dumps(sketch))
    assert type(copy) is SpaceSaving
    assert_same_state(sketch, copy)
    for part in np.array_split(stream[30_000:], 3):
        sketch.update_hashes(part)
        copy.update_hashes(part)
        probe, _ = exact(stream)
        np.testing.assert_array_equal(sketch.estimate_hashes(probe), copy.estimate_hashes(probe))
        for got, want in zip(copy.top(128), sketch.top(128)):
            np.testing.assert_array_equal(got, want)
        assert (copy.total, copy.min_count, copy.size) == \
            (sketch.total, sketch.min_count, sketch.size)
    assert_same_state(sketch, copy)


@pytest.mark.parametrize("capacity, slots", [
    (1, 16),            # the key map's smallest table
    (1536, 16384),      # 8 slots per counter, rounded up to a power of two
    (3000, 16384),      # 8 per counter would pass 16384: the cap holds
    (40_000, 131072),   # large summaries keep 2 per counter (80,000 -> 2^17)
])
def test_index_slots_per_counter(capacity, slots):
    assert len(state_of(SpaceSaving(capacity))["index"][0]) == slots


def _index_with_slots(keys_by_counter, slots):
    """An index of ``slots`` slots filled by the key map itself: what a summary saved when its
    index had 2 slots per counter holds."""
    index = _KeyMapForTests(slots)
    for counter, key in enumerate(keys_by_counter):
        index.set(int(key), counter)
    assert index.capacity == slots
    return index.state()


def test_state_saved_with_a_smaller_index_continues_identically():
    # Summaries saved before the index had 8 slots per counter restore and count the same.
    stream = zipf_stream(40_000, seed=37)
    sketch = SpaceSaving(256)
    sketch.update_hashes(stream[:20_000])
    meta, state = _serial.unpack(sketch.to_bytes())
    state["index"] = _index_with_slots(state["keys"][:sketch.size], 2 * 256)
    old = SpaceSaving.from_bytes(_serial.pack(meta, state))
    assert len(state_of(old)["index"][0]) == 512
    for part in np.array_split(stream[20_000:], 4):
        sketch.update_hashes(part)
        old.update_hashes(part)
        after, before = state_of(sketch), state_of(old)
        for name in ("keys", "counts", "errors", "link", "bucket_value", "bucket_head"):
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_nbytes_counts_every_array():
    sketch = SpaceSaving(300)
    sketch.update_hashes(zipf_stream(5_000, seed=4))
    state = state_of(sketch)
    arrays = [v for v in state.values() if isinstance(v, np.ndarray)] + list(state["index"])
    assert sketch.nbytes == sum(a.nbytes for a in arrays)
    assert SpaceSaving(3000).nbytes > sketch.nbytes


@pytest.mark.parametrize("bad", [0, -5, 2**31])
def test_bad_capacity(bad):
    with pytest.raises(ValueError, match=r"'capacity' parameter must be an int in \[1, "
                                         rf"2147483647\]\. Got {bad} instead"):
        SpaceSaving(bad)


@pytest.mark.parametrize("bad", [1.5, "3", None])
def test_capacity_type(bad):
    with pytest.raises(TypeError, match="'capacity'"):
        SpaceSaving(bad)


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, 1.0000001, float("nan"), float("inf")])
def test_bad_decay_factor(bad):
    sketch = SpaceSaving(4)
    sketch.update_hashes(uniform_stream(100, 10))
    before = state_of(sketch)
    with pytest.raises(ValueError, match=r"'factor' parameter must be a real number in \(0\.0, "
                                         r"1\.0\]\. Got .* instead"):
        sketch.decay(bad)
    assert state_of(sketch)["total"] == before["total"] == 100
    with pytest.raises(TypeError, match="'factor'"):
        sketch.decay("0.5")


def test_bad_top_k():
    with pytest.raises(ValueError, match="'k' parameter"):
        SpaceSaving(4).top(-1)


def test_from_bytes_rejects_other_data():
    with pytest.raises(TypeError, match="'data'"):
        SpaceSaving.from_bytes("not bytes")
    with pytest.raises(ValueError, match="'data'"):
        SpaceSaving.from_bytes(b"garbage")
    other = _serial.pack({"kind": "something-else"}, {"x": np.zeros(2)})
    with pytest.raises(ValueError, match="not a SpaceSaving state"):
        SpaceSaving.from_bytes(other)


@pytest.mark.parametrize("field, value", [
    ("bucket_next", 10**6), ("link", 7), ("link", -3), ("size", 99), ("min_bucket", -7),
    ("counts", 12345), ("bucket_prev", 3), ("keys", 1),
])
def test_corrupt_state_is_refused(field, value):
    sketch = SpaceSaving(16)
    sketch.update_hashes(uniform_stream(1_000, 40, seed=6))
    meta, state = _serial.unpack(sketch.to_bytes())
    if isinstance(state[field], np.ndarray):
        state[field] = state[field].copy()
        # A bucket field at the minimum bucket, a counter field at the largest counter (for
        # "link", its next pointer).
        at = state["min_bucket"] if field.startswith("bucket") else int(np.argmax(state["counts"]))
        if field == "link":
            at = (at, 2)
        state[field][at] = value
    else:
        state[field] = value
    with pytest.raises(ValueError, match="corrupt SpaceSaving state"):
        SpaceSaving.from_bytes(_serial.pack(meta, state))


def test_state_of_wrong_shape_is_refused():
    sketch = SpaceSaving(16)
    sketch.update_hashes(uniform_stream(100, 40, seed=6))
    meta, state = _serial.unpack(sketch.to_bytes())
    flat = dict(state, link=state["link"].reshape(-1))
    with pytest.raises(ValueError, match="corrupt SpaceSaving state: field 'link' has shape"):
        SpaceSaving.from_bytes(_serial.pack(meta, flat))
    missing = {name: value for name, value in state.items() if name != "link"}
    with pytest.raises(ValueError, match="corrupt SpaceSaving state"):
        SpaceSaving.from_bytes(_serial.pack(meta, missing))
    # A capacity that disagrees with the arrays is refused before anything is allocated.
    huge = dict(state, capacity=2**31 - 1)
    with pytest.raises(ValueError, match="corrupt SpaceSaving state: field 'keys' has shape"):
        SpaceSaving.from_bytes(_serial.pack(meta, huge))


def test_repr():
    sketch = SpaceSaving(8)
    sketch.update_hashes(uniform_stream(10, 3))
    assert repr(sketch) == "SpaceSaving(capacity=8, size=3, total=10)"


# --- properties over random operation sequences ------------------------------------------------

batches = st.lists(st.integers(0, 30), max_size=60)
ops = st.lists(st.one_of(st.tuples(st.just("update"), batches),
                         st.tuples(st.just("roundtrip"), st.none())), max_size=12)


@settings(max_examples=50, derandomize=True, deadline=None)
@given(capacity=st.integers(1, 12), ops=ops, seed=st.integers(0, 3))
def test_guarantees_hold_through_any_update_sequence(capacity, ops, seed):
    sketch = SpaceSaving(capacity)
    seen = []
    for op, arg in ops:
        if op == "update":
            hashed = hashes_of(arg, seed)
            sketch.update_hashes(hashed)
            seen.extend(hashed.tolist())
        else:
            sketch = pickle.loads(pickle.dumps(sketch))  # the restore check validates links
        check_guarantees(sketch, np.array(seen, dtype=np.uint64))


def check_top_k(sketch, stream):
    """top(j) against exact counts, for every j (Metwally et al. 2005, §3.2 "guaranteed top-k").

    top(j) is the first j of top(k), counts descending. When every reported counter's
    guaranteed count (count - error) is at least the next counter's count (or, past the
    monitored keys, min_count), the reported j keys are a true top-j: none of them occurred
    less often than any key left out.
    """
    keys, true = exact(stream)
    true_of = dict(zip(keys.tolist(), true.tolist()))
    state = state_of(sketch)
    used = slice(0, state["size"])
    error_of = dict(zip(state["keys"][used].tolist(), state["errors"][used].tolist()))
    all_keys, all_counts = sketch.top(sketch.capacity)
    assert np.all(np.diff(all_counts) <= 0)
    guaranteed = np.minimum.accumulate(
        all_counts - np.array([error_of[k] for k in all_keys.tolist()], dtype=np.int64))
    for j in range(1, len(all_keys) + 1):
        top_keys, top_counts = sketch.top(j)
        np.testing.assert_array_equal(top_keys, all_keys[:j])
        np.testing.assert_array_equal(top_counts, all_counts[:j])
        next_count = all_counts[j] if j < len(all_keys) else sketch.min_count
        if guaranteed[j - 1] >= next_count:
            reported = set(top_keys.tolist())
            lowest_in = min(true_of[k] for k in reported)
            highest_out = max((c for k, c in true_of.items() if k not in reported), default=0)
            assert lowest_in >= highest_out, (j, lowest_in, highest_out)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(kind=st.sampled_from(["zipf", "uniform"]),
       z=st.floats(1.05, 3.0),
       universe=st.integers(1, 2_000),
       length=st.integers(0, 20_000),
       capacity=st.integers(1, 200),
       batches=st.integers(1, 5),
       seed=st.integers(0, 2**16))
def test_bound_and_top_k_on_random_and_zipf_streams(kind, z, universe, length, capacity,
                                                    batches, seed):
    rng = np.random.default_rng(seed)
    if kind == "zipf":
        values = rng.zipf(z, length)
    else:
        values = rng.integers(0, universe, length)
    stream = hashes_of(values, seed)
    sketch = SpaceSaving(capacity)
    for part in np.array_split(stream, batches):
        sketch.update_hashes(part)
    check_guarantees(sketch, stream)
    check_top_k(sketch, stream)


def reference_counts(stream):
    return Counter(stream.tolist())


@settings(max_examples=40, derandomize=True, deadline=None)
@given(capacity=st.integers(1, 10),
       ops=st.lists(st.one_of(st.tuples(st.just("update"), batches),
                              st.tuples(st.just("decay"), st.sampled_from([0.9, 0.5, 0.3, 0.05])),
                              st.tuples(st.just("merge"), batches)), max_size=10))
def test_structure_stays_consistent_under_decay_and_merge(capacity, ops):
    sketch = SpaceSaving(capacity)
    for op, arg in ops:
        if op == "update":
            sketch.update_hashes(hashes_of(arg))
        elif op == "decay":
            sketch.decay(arg)
        else:
            other = SpaceSaving(capacity)
            stream = hashes_of(arg)
            other.update_hashes(stream)
            total = sketch.total + other.total
            sketch = sketch.merge(other)
            assert sketch.total == total
        # Restoring runs the full link check; continuing both must agree exactly.
        copy = SpaceSaving.from_bytes(sketch.to_bytes())
        probe = hashes_of(list(range(31)))
        sketch.update_hashes(probe[:5])
        copy.update_hashes(probe[:5])
        assert_same_state(sketch, copy)
        keys, counts = sketch.top(capacity)
        assert np.all(counts[:-1] >= counts[1:])
        assert sketch.min_count == (counts.min() if sketch.size == capacity else 0)
        np.testing.assert_array_equal(sketch.estimate_hashes(keys), counts)


def test_counters_round_trip_to_the_merge_layout():
    a, b = SpaceSaving(50), SpaceSaving(50)
    a.update_hashes(zipf_stream(3_000, seed=41))
    b.update_hashes(uniform_stream(3_000, 200, seed=42))
    rebuilt = [SpaceSaving.from_counters(50, *s.counters(), s.total) for s in (a, b)]
    assert_same_state(a.merge(b), rebuilt[0].merge(rebuilt[1]))
    keys, counts, errors = a.counters()
    assert counts.tolist() == sorted(counts.tolist(), reverse=True)
    assert (a.top(50)[0] == keys).all() and (errors <= counts).all()
    # Signed hashes (as a Spark bigint column holds them) read as their bits.
    same = SpaceSaving.from_counters(50, keys.view(np.int64), counts, errors, a.total)
    assert_same_state(rebuilt[0], same)


def test_from_counters_keeps_the_largest_and_rejects_broken_counters():
    small = SpaceSaving.from_counters(2, np.array([5, 6, 7], np.uint64), [1, 3, 2], [0, 0, 0], 6)
    assert small.top(2)[0].tolist() == [6, 7] and small.total == 6
    with pytest.raises(ValueError, match="one length"):
        SpaceSaving.from_counters(4, np.array([1, 2], np.uint64), [1], [0], 1)
    with pytest.raises(ValueError, match="distinct"):
        SpaceSaving.from_counters(4, np.array([1, 1], np.uint64), [1, 1], [0, 0], 2)
    with pytest.raises(ValueError, match="0 <= error <= count"):
        SpaceSaving.from_counters(4, np.array([1, 2], np.uint64), [1, 1], [0, 2], 2)
    with pytest.raises(ValueError, match="'total'"):
        SpaceSaving.from_counters(4, np.array([1], np.uint64), [1], [0], -1)
