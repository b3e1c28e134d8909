"""FISH (fish §4-5, skewgroup._routing._fish) beyond the common strategy contract."""
import numpy as np
import pytest

from skewgroup._routing.config import FishConfig
from skewgroup._routing._hash import hash_int64
from skewgroup._routing._ring import Ring

from _routers import route


def hash_keys(keys, seed=1):
    out = np.empty(len(keys), dtype=np.uint64)
    hash_int64(np.ascontiguousarray(keys, dtype=np.int64), seed, out)
    return out


def zipf_hashes(size, seed=1, z=1.4):
    return hash_keys(np.random.default_rng(seed).zipf(z, size), seed)


def fish(n, seed=1, **params):
    return FishConfig(**params).build(n, seed)


def imbalance(ids, n):
    loads = np.bincount(ids, minlength=n)
    return (loads.max() - loads.mean()) / loads.mean()


@pytest.fixture(scope="module")
def zipf_million():
    return zipf_hashes(1_000_000, seed=7)


def test_deterministic_per_seed():
    h = zipf_hashes(50_000, seed=3)
    a, b = route(fish(16, seed=3), h), route(fish(16, seed=3), h)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, route(fish(16, seed=4), h))  # the seed places the ring


@pytest.mark.parametrize("params", [{}, {"interval": 250, "capacities": (1.0, 2.0) * 8}])
def test_chunking_invariance(params):
    h = zipf_hashes(100_000, seed=5)
    whole = route(fish(16, **params), h)
    rng = np.random.default_rng(5)
    cuts = np.unique(np.concatenate([rng.integers(0, h.size, 60), [1000, 2000, 2001, 3000]]))
    f = fish(16, **params)
    parts = [route(f, chunk) for chunk in np.split(h, cuts)]
    assert np.array_equal(np.concatenate(parts), whole)
    assert f.routed == h.size


@pytest.mark.parametrize("params", [{}, {"interval": 100, "capacities": (3.0,) + (1.0,) * 23}])
def test_state_round_trip_mid_stream_continues_identically(params):
    h = zipf_hashes(150_000, seed=9)
    first, rest = h[:70_500], h[70_500:]  # mid-epoch, mid-interval
    whole = route(fish(24, seed=9, **params), h)
    f = fish(24, seed=9, **params)
    route(f, first)
    g = fish(24, seed=9, **params)
    g.set_state(f.get_state())
    assert np.array_equal(g.loads, f.loads) and g.routed == f.routed
    after_g, after_f = route(g, rest), route(f, rest)
    assert np.array_equal(after_g, after_f)
    assert np.array_equal(after_f, whole[70_500:])
    assert np.array_equal(g.loads, f.loads)


def test_state_is_bounded_over_a_million_distinct_keys():
    f = fish(64, seed=2)
    rng = np.random.default_rng(2)
    sizes = []
    for block in range(6):
        keys = np.arange(block * 250_000, (block + 1) * 250_000, dtype=np.int64)
        keys[rng.random(keys.size) < 0.2] = -1  # one hot key among 1.2 M distinct ones
        route(f, hash_keys(keys, 2))
        sizes.append(f.state_bytes())
        state_arrays = sum(np.asarray(v).nbytes for v in _flat(f.get_state()))
        assert state_arrays < 200_000
    assert sizes[-1] == sizes[1] and sizes[-1] <= FishConfig().state_bound(64)
    assert f.stats()["keys_tracked"] <= 1000


def _flat(state):
    for value in state.values():
        if isinstance(value, dict):
            yield from _flat(value)
        elif isinstance(value, tuple):
            yield from value
        else:
            yield value


def test_balance_on_zipf(zipf_million):
    # Zipf z = 1.4, n = 64, 10^6 keys: the top key alone is ~32 % of the stream.
    ids = route(fish(64, seed=7), zipf_million)
    assert imbalance(ids, 64) < 1e-2


def test_hot_keys_get_more_candidates_than_cold_ones():
    keys = np.random.default_rng(2).zipf(1.4, 300_000)
    h = hash_keys(keys, 2)
    f = fish(32, seed=2)
    ids = route(f, h)
    top = h[keys == 1][0]
    assert f.candidates(top).tolist() == list(range(32))  # f_top itself: index 0, d = n
    assert np.unique(ids[keys == 1]).size == 32
    # 2^1.4 = 2.6: CHK gives index 1, d = n / 2 now; M_k may hold more from the first tuples.
    assert f.candidates(h[keys == 2][0]).size >= 16
    cold = [k for k in range(300, 400) if (keys == k).any()]
    assert cold and all(f.candidates(h[keys == k][0]).size == 2 for k in cold)
    assert max(np.unique(ids[keys == k]).size for k in cold) <= 2


def test_chk_choice_count_and_m_k_keep_the_largest_d():
    # A is 6 times as frequent as B: index = floor(log2 6) = 2, d_B = 32 / 4 = 8 (Algorithm 2).
    n = 32
    f = fish(n, seed=4)
    a, b = hash_keys([10, 20], 4)
    block = np.array([a] * 6 + [b], dtype=np.uint64)
    ids = route(f, np.tile(block, 3_000))
    ring = Ring(n, 100, seed=4)
    expected = np.sort(ring.candidates(int(b), 8))
    assert np.array_equal(f.candidates(b), expected)
    assert np.array_equal(np.unique(ids[np.tile(block, 3_000) == b]), expected)
    # B falls to 1/12 of A: CHK alone gives d = 4, M_k keeps 8 (lines 7-10).
    block = np.array([a] * 12 + [b], dtype=np.uint64)
    ids = route(f, np.tile(block, 3_000))
    assert np.array_equal(f.candidates(b), expected)
    assert np.array_equal(np.unique(ids[np.tile(block, 3_000) == b]), expected)


def test_epoch_decay_forgets_an_old_hot_key():
    # 20k tuples of one key, then distinct keys: after a few epochs of decay (α = 0.2) the key is
    # no longer hot, its M_k is dropped, and it is back to its 2 ring candidates.
    f = fish(16, seed=1, epoch=1000)
    hot = hash_keys([1], 1)[0]
    route(f, np.full(20_000, hot, dtype=np.uint64))
    assert f.stats()["head_keys"] == 1 and f.candidates(hot).size == 16
    route(f, hash_keys(np.arange(100, 20_100), 1))
    assert f.stats()["head_keys"] == 0 and f.candidates(hot).size == 2


def test_capacities_send_less_work_to_slow_workers():
    # P_w is the time a worker takes per tuple: worker 0 is four times slower than the rest.
    f = fish(8, capacities=(4.0,) + (1.0,) * 7, interval=100)
    ids = route(f, np.zeros(80_000, dtype=np.uint64))
    loads = np.bincount(ids, minlength=8)
    assert loads[0] < 0.5 * loads[1:].mean()


def test_resize_moves_only_the_keys_of_the_moved_arcs():
    h = hash_keys(np.arange(20_000), 1)
    old, new = Ring(16, 100, seed=1), Ring(17, 100, seed=1)
    f = fish(16, seed=1)
    before = [f.candidates(x).tolist() for x in h[:2_000]]
    route(f, h)  # all cold: every key's candidates are its ring pair
    f.resize(17)
    assert f.n == 17 and f.loads.shape == (17,) and f.loads.sum() == 20_000
    after = [f.candidates(x).tolist() for x in h[:2_000]]
    changed = np.mean([x != y for x, y in zip(before, after)])
    assert 0 < changed < 2.5 / 17
    ids = route(f, h)
    pairs = new.pairs(h)
    assert np.all((ids == pairs[:, 0]) | (ids == pairs[:, 1]))
    # Down again: ids stay in range and the ring is the 16-worker one.
    f.resize(16)
    ids = route(f, h)
    assert ids.max() < 16 and f.loads.shape == (16,)
    pairs = old.pairs(h)
    assert np.all((ids == pairs[:, 0]) | (ids == pairs[:, 1]))


def test_resize_then_round_trip_and_hot_keys():
    h = zipf_hashes(200_000, seed=6)
    f = fish(16, seed=6)
    route(f, h[:100_000])
    f.resize(20)
    g = fish(20, seed=6)
    g.set_state(f.get_state())
    a, b = route(f, h[100_000:]), route(g, h[100_000:])
    assert np.array_equal(a, b) and a.max() == 19
    loads = f.loads  # the new workers started empty and caught up through the hot keys
    assert (loads.max() - loads.mean()) / loads.mean() < 0.05
    with pytest.raises(ValueError, match="ring over 20 workers"):
        fish(16, seed=6).set_state(f.get_state())
