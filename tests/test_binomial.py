import numpy as np
import pytest

from skewgroup._routing._binomial import hot_key_probabilities

# Pd-Stream Table III (N = 16, P̂ = 0.99, ε = 1e-4), in percent.
TABLE_III = [25.0, 34.9, 43.1, 50.3, 56.9, 63.0, 68.7, 73.9,
             78.8, 83.4, 87.5, 91.2, 94.5, 97.1, 99.0, 99.9]


def test_reproduces_pd_stream_table_iii_to_a_tenth_of_a_percent():
    ours = 100 * hot_key_probabilities(16, 0.99, 1e-4)
    assert np.max(np.abs(ours - TABLE_III)) <= 0.1


def test_figure_3_value():
    # §V-D: key 1 seen 6 times "we derive its estimated probability to be 62.99%".
    assert round(100 * hot_key_probabilities(16)[5], 2) == 62.99


def test_table_is_monotone_and_solves_the_binomial_tail():
    from math import comb

    p = hot_key_probabilities(40, 0.99, 1e-6)
    assert np.all(np.diff(p) > 0)
    for n_k in (1, 7, 40):
        tail = sum(comb(40, i) * p[n_k - 1] ** i * (1 - p[n_k - 1]) ** (40 - i)
                   for i in range(n_k, 41))
        assert abs(tail - 0.99) < 1e-4


@pytest.mark.parametrize("kwargs, name", [({"window": 0}, "window"),
                                          ({"window": 4, "expected": 1.0}, "expected"),
                                          ({"window": 4, "epsilon": 0.0}, "epsilon")])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        hot_key_probabilities(**kwargs)
