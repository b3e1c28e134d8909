"""Key streams for simulation and benchmarks."""
import numpy as np

from skewgroup._validation import check_int, check_real


def zipf(z, messages, universe=10**7, seed=0):
    """``messages`` keys drawn from a Zipf law of exponent ``z`` over ``universe`` keys.

    Key ``r`` (0-based rank) has probability proportional to ``1 / (r + 1) ** z``, the generator
    of Pd-Stream Table IV (a universe of 10^7 keys). Keys are int64 ranks, so key 0 is the
    hottest. Sampling inverts the cumulative weights with a binary search over whole arrays.

    >>> keys = zipf(1.4, 1000, universe=100, seed=1)
    >>> keys.dtype.name, int(keys.min()) >= 0, int(keys.max()) < 100
    ('int64', True, True)
    """
    z = check_real("z", z, 0.0, None)
    messages = check_int("messages", messages, 0)
    universe = check_int("universe", universe, 1)
    seed = check_int("seed", seed, 0)
    weights = np.arange(1, universe + 1, dtype=np.float64) ** -z
    cumulative = np.cumsum(weights)
    cumulative /= cumulative[-1]
    rng = np.random.default_rng(seed)
    keys = np.searchsorted(cumulative, rng.random(messages), side="right")
    return np.minimum(keys, universe - 1).astype(np.int64)
