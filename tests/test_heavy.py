"""D-Choices / W-Choices / Round-Robin (d-choices-w-choices §III-IV)."""
import numpy as np
import pytest

import skewgroup
from skewgroup._routing._heavy import find_optimal_choices


def constraint_holds(p_head, n, d, eps):
    """Eq. (3) for every prefix h, written out independently of the native code."""
    head = sum(p_head)
    tail = max(0.0, 1.0 - head)
    prefix = 0.0
    for h, p in enumerate(p_head, start=1):
        prefix += p
        b = n - n * ((n - 1) / n) ** (h * d)
        if prefix + (b / n) ** d * (head - prefix) + (b / n) ** 2 * tail > b * (1 / n + eps):
            return False
    return True


def test_worked_case_one_hot_key():
    # n = 10, one head key with p1 = 0.3, tail 0.7, ε = 1e-4. Start at d = ceil(0.3·10) = 3:
    #   d=3: b = 10 - 10·0.9^3 = 2.710; 0.3 + 0.271^2·0.7 = 0.351 > 2.710·0.1001 = 0.271  ✗
    #   d=4: b = 3.439; 0.3 + 0.3439^2·0.7 = 0.383 > 0.344                              ✗
    #   d=5: b = 4.095; 0.3 + 0.4095^2·0.7 = 0.417 > 0.410                              ✗
    #   d=6: b = 4.686; 0.3 + 0.4686^2·0.7 = 0.454 <= 0.469                             ✓
    assert find_optimal_choices(np.array([0.3]), 10, 1e-4) == 6


def test_d_is_the_smallest_satisfying_eq3_from_p1_n():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(4, 200))
        p = np.sort(rng.dirichlet(np.ones(int(rng.integers(1, 8)))) * rng.uniform(0.05, 0.9))[::-1]
        d = find_optimal_choices(np.ascontiguousarray(p), n, 1e-4)
        start = max(2, int(np.ceil(p[0] * n)))
        assert d >= start
        if d < n:
            assert constraint_holds(p, n, d, 1e-4)
        for smaller in range(start, min(d, n)):
            assert not constraint_holds(p, n, smaller, 1e-4)


def test_d_grows_with_skew_and_switches_to_w_choices():
    # Fig. 4's setting: |K| = 10^4 keys, ε = 1e-4; the head is {k : p_k >= 1/(5n)}.
    n = 50
    ranks = np.arange(1, 10**4 + 1, dtype=np.float64)
    ds = []
    for z in (0.8, 1.0, 1.2, 1.4, 1.6, 2.0):
        p = ranks ** -z
        p /= p.sum()
        head = np.ascontiguousarray(p[p >= 1 / (5 * n)])
        ds.append(find_optimal_choices(head, n, 1e-4))
    assert ds == sorted(ds)
    assert ds[0] == 2 and ds[-1] >= 0.9 * n  # Fig. 4: from PKG's d to nearly every worker


def test_no_d_below_n_means_w_choices():
    # p1 = 0.95 needs d >= ceil(0.95 * 10) = 10 = n: the paper switches to W-Choices.
    assert find_optimal_choices(np.array([0.95]), 10, 1e-4) == 10


def test_no_head_means_pkg():
    assert find_optimal_choices(np.array([], dtype=np.float64), 16, 1e-4) == 2


@pytest.mark.parametrize("name", ["dchoices", "wchoices", "roundrobin"])
def test_head_holds_the_hot_keys(name):
    keys = skewgroup.streams.zipf(1.4, 200_000, universe=10**5, seed=3)
    p = skewgroup.partitioner(name, 32)
    p.route(keys)
    head_hashes, freqs = p._router.head()
    assert skewgroup.hash_keys([0])[0] in set(head_hashes.tolist())
    assert np.all(freqs >= 1 / (5 * 32))
    assert p.stats()["head_keys"] == len(head_hashes) > 0


def test_dchoices_spreads_the_hottest_key_over_about_d_workers():
    keys = skewgroup.streams.zipf(1.0, 300_000, universe=10**5, seed=3)
    p = skewgroup.partitioner("dchoices", 64)
    ids, ds = [], []
    for chunk in np.split(keys, 300):  # d is refreshed every 1000 tuples
        ids.append(p.route(chunk))
        ds.append(p.stats()["d"])
    ids = np.concatenate(ids)
    assert 2 < min(ds[10:]) and max(ds) < 64
    # Greedy-d over h_1..h_d: the hottest key never uses more than d distinct workers.
    used = np.unique(ids[keys == 0]).size
    assert 2 < used <= max(ds)


def test_roundrobin_sends_a_hot_key_everywhere():
    keys = np.zeros(10_000, dtype=np.int64)
    ids = skewgroup.partitioner("roundrobin", 16).route(keys)
    assert np.unique(ids).size == 16
