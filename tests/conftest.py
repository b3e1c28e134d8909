import numpy as np
import pytest

import skewgroup


@pytest.fixture(scope="session")
def zipf_keys():
    """10^6 keys of a Zipf(z = 1.4) stream, seeded."""
    return np.random.default_rng(7).zipf(1.4, 1_000_000).astype(np.int64)


def load_imbalance(ids, workers):
    loads = np.bincount(ids, minlength=workers)
    return (loads.max() - loads.mean()) / loads.mean()


@pytest.fixture(scope="session")
def li():
    return load_imbalance
