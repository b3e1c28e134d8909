# Pd-Stream's hot-key probability table (pd-stream §V-C, Algorithm 1).

# p_hat[n_k - 1] for n_k = 1 .. window: the probability p at which a key appears at least n_k times
# in a window of `window` samples with probability `expected` (P̂), found by binary search to
# margin `epsilon`. Built once when a router starts, so routing only looks it up.
cdef void probability_table(int window, double expected, double epsilon, double* p_hat) noexcept nogil
