"""Pd-Stream's binomial probability table (pd-stream §V-C, Algorithm 1, Table III)."""
from libc.math cimport lgamma, log, exp, log1p

import numpy as np


cdef double _at_least(int window, int n_k, double p) noexcept nogil:
    """P(X >= n_k) for X ~ Binomial(window, p), eq. (14)-(15), summed in log space."""
    cdef double total = 0.0
    cdef double log_p, log_q, log_n_fact
    cdef int i
    if p <= 0.0:
        return 0.0 if n_k > 0 else 1.0
    if p >= 1.0:
        return 1.0
    log_p = log(p)
    log_q = log1p(-p)
    log_n_fact = lgamma(window + 1.0)
    for i in range(n_k, window + 1):
        total += exp(log_n_fact - lgamma(i + 1.0) - lgamma(window - i + 1.0)
                     + i * log_p + (window - i) * log_q)
    return total


cdef void probability_table(int window, double expected, double epsilon, double* p_hat) noexcept nogil:
    cdef int n_k
    cdef double lower, upper, mid
    for n_k in range(1, window + 1):
        # Algorithm 1, steps 1-11: the last midpoint is the estimate.
        lower = 0.0
        upper = 1.0
        mid = 0.5
        while upper - lower > epsilon:
            mid = (upper + lower) / 2.0
            if _at_least(window, n_k, mid) < expected:
                lower = mid
            else:
                upper = mid
        p_hat[n_k - 1] = mid


def hot_key_probabilities(int window, double expected=0.99, double epsilon=1e-4):
    """The table of Algorithm 1: ``out[n_k - 1]`` = p̂ for a key seen n_k times in the window.

    >>> [round(100 * float(p), 1) for p in hot_key_probabilities(16)[:3]]
    [25.0, 34.9, 43.0]
    """
    if window < 1:
        raise ValueError(f"The 'window' parameter must be an int in [1, inf). Got {window} instead.")
    if not 0.0 < expected < 1.0:
        raise ValueError(f"The 'expected' parameter must be in (0, 1). Got {expected} instead.")
    if not 0.0 < epsilon < 0.5:
        raise ValueError(f"The 'epsilon' parameter must be in (0, 0.5). Got {epsilon} instead.")
    out = np.empty(window, dtype=np.float64)
    cdef double[::1] view = out
    with nogil:
        probability_table(window, expected, epsilon, &view[0])
    return out
