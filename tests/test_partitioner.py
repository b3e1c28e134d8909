"""Contract tests every strategy must pass."""
import pickle

import numpy as np
import pyarrow as pa
import pytest

import skewgroup
from skewgroup import STRATEGIES, partitioner

ALL = sorted(STRATEGIES)
BALANCED = ["pdstream", "dchoices", "wchoices", "fish", "adaptive"]


@pytest.fixture(scope="module")
def zipf_hashes(zipf_keys):
    return skewgroup.hash_keys(zipf_keys[:200_000], seed=3)


def test_the_eleven_strategies_are_registered():
    assert ALL == sorted(["kg", "sg", "pkg", "dchoices", "wchoices", "roundrobin",
                          "pdstream", "fish", "flexd", "dkg", "adaptive"])


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
    assert q.to_bytes() == p.to_bytes()  # the same state, the same bytes


@pytest.mark.parametrize("name", ALL)
def test_same_stream_same_bytes(name, zipf_hashes):
    a, b = partitioner(name, 24, seed=5), partitioner(name, 24, seed=5)
    b.route_hashes(zipf_hashes[:1000])  # b's memory grows in other steps than a's
    b.route_hashes(zipf_hashes[1000:])
    a.route_hashes(zipf_hashes)
    assert a.to_bytes() == b.to_bytes()


@pytest.mark.parametrize("name", ALL)
def test_state_stays_bounded_over_ten_million_distinct_keys(name):
    # 10^7 distinct keys (arange, hashed once per block) plus one hot key at 20 % of the tuples,
    # so the per-key tables see both churn and a head key; the state must stay under the
    # documented bound after every block, not only at the end.
    workers = 64
    bound = skewgroup.state_bound(name, workers)
    p = partitioner(name, workers, seed=2)
    hot = skewgroup.hash_keys([-1], seed=2)[0]
    block = 1_000_000
    stream = np.empty((block // 4, 5), dtype=np.uint64)  # every fifth tuple is the hot key
    stream[:, 4] = hot
    sizes = []
    for start in range(0, 10 * block, block):
        fresh = skewgroup.hash_keys(np.arange(start, start + block, dtype=np.int64), seed=2)
        stream[:, :4] = fresh.reshape(-1, 4)
        for chunk in np.array_split(stream.ravel(), 5):
            p.route_hashes(chunk)
        sizes.append(p.stats()["state_bytes"])
    assert p.stats()["routed"] == 10 * block * 5 // 4
    assert max(sizes) <= bound, (name, sizes, bound)
    assert sizes[-1] <= 2 * sizes[0], (name, sizes)


@pytest.mark.parametrize("name", ALL)
def test_each_router_checks_its_own_state_and_bound(name, zipf_hashes):
    # The layout, the byte bound and the checks sit beside each router: the config asks the
    # router module's bound (no router built), which equals the router's own, and a router
    # accepts a state of its own kind but names the field of a state of other parameters.
    p = partitioner(name, 16)
    p.route_hashes(zipf_hashes)
    router = p._router
    assert router.state_bound() == skewgroup.state_bound(name, 16)
    assert router.state_bytes() <= router.state_bound()
    state = router.get_state()
    router.check_state(state)
    with pytest.raises(ValueError, match="field 'load' has shape"):
        partitioner(name, 17)._router.check_state(state)
    with pytest.raises(ValueError, match="field 'routed' is missing"):
        router.check_state({k: v for k, v in state.items() if k != "routed"})


@pytest.mark.parametrize("name", ALL)
def test_stats_report_the_state(name, zipf_hashes):
    p = partitioner(name, 16)
    p.route_hashes(zipf_hashes)
    stats = p.stats()
    for field in ("keys_tracked", "head_keys", "table_entries", "state_bytes"):
        assert isinstance(stats[field], int) and stats[field] >= 0
    assert stats["routed"] == len(zipf_hashes)


def test_pkg_imbalance_matches_the_analysis(zipf_keys, li):
    # PKG's LI ≈ p1·n/2 − 1 once p1 > 2/n (docs/algorithms.md#pkg); Zipf z = 1.4, n = 64,
    # 10^6 keys.
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


@pytest.mark.parametrize("name", ALL)
def test_none_and_nan_keys_route_like_any_key(name):
    # Documented behaviour (README, hash_keys): None/null is one key with a fixed hash, every
    # NaN is one key; in any container, for every strategy.
    seed = 4
    nulls = [None, "a", None, "b"]
    expected = partitioner(name, 8, seed=seed).route_hashes(skewgroup.hash_keys(nulls, seed))
    assert np.array_equal(partitioner(name, 8, seed=seed).route(nulls), expected)
    assert np.array_equal(partitioner(name, 8, seed=seed).route(pa.array(nulls)), expected)
    nans = np.array([np.nan, 1.0, -np.nan, np.nan])
    h = skewgroup.hash_keys(nans, seed)
    assert h[0] == h[2] == h[3] != h[1]
    ids = partitioner(name, 8, seed=seed).route(nans)
    assert ids.min() >= 0 and ids.max() < 8


def test_empty_input_routes_nothing():
    p = partitioner("pdstream", 8)
    assert p.route([]).shape == (0,) and p.loads.sum() == 0
    assert p.route(pa.array([], pa.string())).shape == (0,)


@pytest.mark.parametrize("name", ALL)
def test_empty_input_leaves_the_state_alone(name, zipf_hashes):
    p, fresh = partitioner(name, 8, seed=1), partitioner(name, 8, seed=1)
    for empty in ([], (), np.array([], np.int64), np.array([], np.float64), np.array([], "U1"),
                  pa.array([], pa.string()), pa.chunked_array([], pa.int64())):
        ids = p.route(empty)
        assert ids.dtype == np.int32 and ids.shape == (0,)
    assert p.route_hashes(np.array([], np.uint64)).shape == (0,)
    assert p.stats()["routed"] == 0 and p.loads.sum() == 0
    head = zipf_hashes[:20_000]
    assert np.array_equal(p.route_hashes(head), fresh.route_hashes(head))


@pytest.mark.parametrize("mixed", [[1, 2.5], [b"a", "a"], [True, 1], [1, None, "1"]])
def test_a_list_mixing_kinds_is_refused(mixed):
    # Arrow reads [1, 2.5] as float64: the int key 1 would hash (and route) differently than in
    # an all-int list.
    with pytest.raises(TypeError, match="'keys'.*mixing"):
        partitioner("kg", 8).route(mixed)


def test_route_hashes_refuses_non_integer_hashes():
    with pytest.raises(TypeError, match="'hashes'.*float64"):
        partitioner("kg", 8).route_hashes(np.array([1.7]))


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
        (lambda: partitioner("pkg", -1), ValueError, "'workers' parameter must be an int in [1,"),
        (lambda: partitioner("pkg", True), TypeError, "'workers'"),
        (lambda: partitioner("pkg", 2**20 + 1), ValueError, "'workers'"),
        (lambda: partitioner("pkg", 4, seed=2**64), ValueError, "'seed'"),
        (lambda: partitioner("sg", 4, theta=0.1), TypeError, "takes no parameters"),
        (lambda: partitioner("wchoices", 4, capacity=0), ValueError, "'capacity'"),
        (lambda: partitioner("roundrobin", 4, theta=2.0), ValueError, "'theta'"),
        (lambda: partitioner("dchoices", 4, update_every=0), ValueError, "'update_every'"),
        (lambda: partitioner("dchoices", 4, epsilon=1.0), ValueError, "'epsilon'"),
        (lambda: partitioner("pdstream", 4, window=0), ValueError, "'window'"),
        (lambda: partitioner("fish", 4, epoch=0), ValueError, "'epoch'"),
        (lambda: partitioner("fish", 4, k_max=True), TypeError, "'k_max'"),
        (lambda: partitioner("fish", 4, capacities=(1.0, -1.0, 1.0, 1.0)), ValueError,
         "'capacities[1]'"),
        (lambda: partitioner("flexd", 4, delta=1.0), ValueError, "'delta'"),
        (lambda: partitioner("flexd", 4, segment=0), ValueError, "'segment'"),
        (lambda: partitioner("dkg", 4, expected_keys=0), ValueError, "'expected_keys'"),
        (lambda: partitioner("dkg", 4, warmup=-1), ValueError, "'warmup'"),
        (lambda: partitioner("pkg", 4).route(None), TypeError, "'keys'"),
        (lambda: partitioner("pkg", 4).route("abc"), TypeError, "single str"),
        (lambda: partitioner("pkg", 4).route(7), TypeError, "single int"),
        (lambda: partitioner("pkg", 4).route([[1], [2]]), TypeError, "scalar keys"),
        (lambda: partitioner("pkg", 4).route([1.0, "x"]), TypeError, "one type"),
        (lambda: partitioner("pkg", 4).route(np.array([1, "a"], dtype=object)), TypeError,
         "one type"),
        (lambda: partitioner("pkg", 4).route(np.zeros(2, dtype=[("a", "i4"), ("b", "i4")])),
         TypeError, "'keys'"),
        (lambda: partitioner("pkg", 4).route_hashes(np.zeros((2, 2), np.uint64)), ValueError,
         "'hashes'"),
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


def test_partitioners_docstring_names_every_strategy():
    import re

    named = set(re.findall(r"``(\w+)``", skewgroup.partitioner.__doc__.split("workers :")[0]))
    assert set(skewgroup.STRATEGIES) <= named


def test_config_module_exports_what_it_names():
    import skewgroup._routing.config as config

    namespace = {}
    exec("from skewgroup._routing.config import *", namespace)
    assert set(config.__all__) <= set(namespace) and "make_config" in namespace
