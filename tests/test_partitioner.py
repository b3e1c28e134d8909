"""Contract tests every strategy must pass (issue: routing core)."""
import pickle

import numpy as np
import pyarrow as pa
import pytest

import skewgroup
from skewgroup import STRATEGIES, partitioner

ALL = sorted(STRATEGIES)
BALANCED = ["pdstream", "dchoices", "wchoices", "fish"]


@pytest.fixture(scope="module")
def zipf_hashes(zipf_keys):
    return skewgroup.hash_keys(zipf_keys[:200_000], seed=3)


def test_the_ten_strategies_are_registered():
    assert ALL == sorted(["kg", "sg", "pkg", "dchoices", "wchoices", "roundrobin",
                          "pdstream", "fish", "flexd", "dkg"])


@pytest.mark.parametrize("name", ALL)
def test_ids_in_range_int32_and_loads_add_up(name, zipf_hashes):
    p = partitioner(name, 13, seed=3)
    ids = p.route_hashes(zipf_hashes)
    assert ids.dtype == np.int32 and ids.shape == zipf_hashes.shape
    assert ids.min() >= 0 and ids.max() < 13
    assert np.array_equal(p.loads, np.bincount(ids, minlength=13))
    assert p.workers == 13 and p.strategy == name


@pytest.mark.parametrize("name", ALL)
def test_deterministic_per_seed(name, zipf_keys):
    keys = zipf_keys[:50_000]
    a = partitioner(name, 16, seed=11).route(keys)
    b = partitioner(name, 16, seed=11).route(keys)
    assert np.array_equal(a, b)
    if name != "sg":  # shuffle grouping ignores keys, hence the seed
        assert not np.array_equal(a, partitioner(name, 16, seed=12).route(keys))


@pytest.mark.parametrize("name", ALL)
def test_chunking_invariance(name, zipf_hashes):
    whole = partitioner(name, 16, seed=1).route_hashes(zipf_hashes)
    p = partitioner(name, 16, seed=1)
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(len(zipf_hashes), size=40, replace=False))
    parts = [p.route_hashes(chunk) for chunk in np.split(zipf_hashes, cuts)]
    parts.append(p.route_hashes(zipf_hashes[:0]))
    assert np.array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("via", ["bytes", "pickle"])
def test_snapshot_round_trip_continues_identically(name, via, zipf_hashes):
    first, rest = zipf_hashes[:120_000], zipf_hashes[120_000:]
    p = partitioner(name, 24, seed=5)
    p.route_hashes(first)
    if via == "bytes":
        q = skewgroup.Partitioner.from_bytes(p.to_bytes())
    else:
        q = pickle.loads(pickle.dumps(p))
    assert q.strategy == name and q.workers == 24 and q.config == p.config
    assert np.array_equal(q.loads, p.loads)
    assert np.array_equal(q.route_hashes(rest), p.route_hashes(rest))
    assert np.array_equal(q.loads, p.loads)


@pytest.mark.parametrize("name", ALL)
def test_state_stays_bounded_over_ten_million_distinct_keys(name):
    workers = 64
    p = partitioner(name, workers, seed=2)
    rng = np.random.default_rng(2)
    sizes = []
    for block in range(10):
        # one hot key at 20 % among fresh distinct keys
        keys = np.arange(block * 1_000_000, (block + 1) * 1_000_000, dtype=np.int64)
        keys[rng.random(keys.size) < 0.2] = -1
        p.route(keys)
        sizes.append(p.stats()["state_bytes"])
    assert sizes[-1] <= skewgroup.state_bound(name, workers), (name, sizes)
    assert sizes[-1] <= 2 * sizes[0], (name, sizes)


@pytest.mark.parametrize("name", ALL)
def test_stats_report_the_state(name, zipf_hashes):
    p = partitioner(name, 16)
    p.route_hashes(zipf_hashes)
    stats = p.stats()
    for field in ("keys_tracked", "head_keys", "table_entries", "state_bytes"):
        assert isinstance(stats[field], int) and stats[field] >= 0
    assert stats["routed"] == len(zipf_hashes)


def test_pkg_imbalance_matches_the_analysis(zipf_keys, li):
    # PKG's LI ≈ p1·n/2 − 1 once p1 > 2/n (ALGORITHMS.md), Zipf z = 1.4, n = 64, 10^6 keys.
    n = 64
    p1 = np.unique(zipf_keys, return_counts=True)[1].max() / len(zipf_keys)
    measured = li(partitioner("pkg", n).route(zipf_keys), n)
    expected = p1 * n / 2 - 1
    assert abs(measured - expected) <= 0.10 * expected, (measured, expected)


@pytest.mark.parametrize("name", BALANCED)
def test_balanced_strategies_on_zipf(name, zipf_keys, li):
    n = 64
    assert li(partitioner(name, n).route(zipf_keys), n) < 1e-2


def test_kg_is_the_skewed_baseline(zipf_keys, li):
    assert li(partitioner("kg", 64).route(zipf_keys), 64) > 5


def test_none_and_nan_keys_are_keys():
    p = partitioner("kg", 8)
    ids = p.route([None, 1.0, float("nan"), None, float("nan")])
    assert ids[0] == ids[3] and ids[2] == ids[4]


def test_empty_input_routes_nothing():
    p = partitioner("pdstream", 8)
    assert p.route([]).shape == (0,) and p.loads.sum() == 0
    assert p.route(pa.array([], pa.string())).shape == (0,)


def test_string_keys_route_like_their_hashes():
    keys = ["x", "y", "x", "z"] * 100
    a = partitioner("pkg", 8, seed=9).route(keys)
    b = partitioner("pkg", 8, seed=9).route_hashes(skewgroup.hash_keys(keys, seed=9))
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: partitioner("nope", 4), ValueError, "'strategy' parameter must be one of"),
        (lambda: partitioner(3, 4), TypeError, "'strategy'"),
        (lambda: partitioner("pkg", 0), ValueError, "'workers' parameter must be an int in [1,"),
        (lambda: partitioner("pkg", 2.5), TypeError, "'workers'"),
        (lambda: partitioner("pkg", 4, seed=-1), ValueError, "'seed'"),
        (lambda: partitioner("pkg", 4, theta=0.1), TypeError, "Unknown parameter"),
        (lambda: partitioner("pdstream", 4, p_hat=1.5), ValueError, "'p_hat'"),
        (lambda: partitioner("pdstream", 4, alpha="4"), TypeError, "'alpha'"),
        (lambda: partitioner("dchoices", 4, theta=0.0), ValueError, "'theta'"),
        (lambda: partitioner("fish", 4, alpha=0.0), ValueError, "'alpha'"),
        (lambda: partitioner("fish", 4, capacities=(1.0, 2.0)), ValueError, "'capacities'"),
        (lambda: partitioner("pkg", 4).route(np.zeros((2, 2))), ValueError, "'keys'"),
        (lambda: partitioner("pkg", 4).route([1, "a"]), TypeError, "'keys'"),
        (lambda: partitioner("pkg", 4).route(np.array([1j])), TypeError, "'keys'"),
        (lambda: partitioner("pkg", 4).resize(8), ValueError, "cannot resize"),
        (lambda: skewgroup.Partitioner.from_bytes(b"junk"), ValueError, "header"),
    ],
)
def test_bad_input_is_a_clear_error(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


def test_fish_resizes_moving_few_keys():
    keys = np.arange(20_000, dtype=np.int64)
    p = partitioner("fish", 16, seed=4)
    p.route(keys)
    p.resize(17)
    assert p.workers == 17 and p.loads.shape == (17,)
    ids = p.route(keys)
    assert ids.max() < 17
