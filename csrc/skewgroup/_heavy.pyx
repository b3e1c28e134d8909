"""The head/tail strategies of d-choices-w-choices (§III-IV): D-Choices, W-Choices, Round-Robin.

Each source runs SpaceSaving over its keys (UPDATESPACESAVING of Algorithm 1); a key is in the
head H when its estimated frequency f_k/m >= θ. Tail keys take PKG's two choices; head keys:

* D-Choices: Greedy-d, the least loaded of h_1(k) .. h_d(k), with d from FINDOPTIMALCHOICES
  (§IV-A); when d >= n the paper switches to W-Choices;
* W-Choices: the least loaded of all n workers;
* Round-Robin: round robin over all n workers (the paper's "RR" baseline).
"""
from libc.math cimport ceil, pow
from libc.stdlib cimport malloc, free

import numpy as np

from skewgroup._types cimport hash_t, count_t, worker_t
from skewgroup._hash cimport choice
from skewgroup._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_update, ss_top,
                                     ss_get_state, ss_set_state, ss_nbytes)
from skewgroup._router cimport Router, least_loaded_all, least_of_two


cdef class _HeadTail(Router):
    cdef readonly double theta
    cdef readonly int capacity
    cdef StreamSummary summary
    cdef long long head_tuples

    def __init__(self, int n, unsigned long long seed, double theta, int capacity):
        Router.__init__(self, n, seed)
        self.theta = theta
        self.capacity = capacity
        self.head_tuples = 0
        ss_init(&self.summary, capacity)

    def __dealloc__(self):
        ss_free(&self.summary)

    cdef inline bint _in_head(self, hash_t h) noexcept nogil:
        # UPDATESPACESAVING, then k ∈ H iff f_k / m >= θ (estimates include this tuple).
        cdef count_t estimate = ss_update(&self.summary, h)
        return estimate >= self.theta * self.summary.total

    cdef inline worker_t _tail(self, hash_t h) noexcept nogil:
        return least_of_two(self.load, choice(h, 0, self.n), choice(h, 1, self.n))

    def head(self):
        """(hashes, estimated frequencies) of the current head, most frequent first."""
        keys = np.empty(self.capacity, dtype=np.uint64)
        counts = np.empty(self.capacity, dtype=np.int64)
        cdef hash_t[::1] kv = keys
        cdef count_t[::1] cv = counts
        cdef int got = ss_top(&self.summary, self.capacity, &kv[0], &cv[0])
        total = max(1, self.summary.total)
        freqs = counts[:got] / total
        keep = freqs >= self.theta
        return keys[:got][keep], freqs[keep]

    def get_state(self):
        state = Router.get_state(self)
        state["summary"] = ss_get_state(&self.summary)
        state["head_tuples"] = self.head_tuples
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        ss_set_state(&self.summary, state["summary"])
        self.head_tuples = int(state["head_tuples"])

    def stats(self):
        return {"keys_tracked": self.summary.size, "head_keys": len(self.head()[0]),
                "head_tuples": self.head_tuples}

    def state_bytes(self):
        return Router.state_bytes(self) + ss_nbytes(&self.summary)


cdef class WChoices(_HeadTail):
    """W-Choices: head keys to the least loaded of all n workers, tail keys PKG."""

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef hash_t h
        cdef worker_t w
        for i in range(m):
            h = hashes[i]
            if self._in_head(h):
                w = least_loaded_all(&self.cursor, self.load, self.n)
                self.head_tuples += 1
            else:
                w = self._tail(h)
            self.load[w] += 1
            out[i] = w


cdef class RoundRobinHead(_HeadTail):
    """Round-Robin: head keys round robin over all n workers, tail keys PKG."""
    cdef long long next_worker

    def __init__(self, int n, unsigned long long seed, double theta, int capacity):
        _HeadTail.__init__(self, n, seed, theta, capacity)
        self.next_worker = 0

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef hash_t h
        cdef worker_t w
        for i in range(m):
            h = hashes[i]
            if self._in_head(h):
                w = <worker_t>self.next_worker
                self.next_worker += 1
                if self.next_worker == self.n:
                    self.next_worker = 0
                self.head_tuples += 1
            else:
                w = self._tail(h)
            self.load[w] += 1
            out[i] = w

    def get_state(self):
        state = _HeadTail.get_state(self)
        state["next_worker"] = self.next_worker
        return state

    def set_state(self, state):
        _HeadTail.set_state(self, state)
        self.next_worker = int(state["next_worker"])


cpdef int find_optimal_choices(const double[::1] head_frequencies, int n, double epsilon) noexcept nogil:
    """FINDOPTIMALCHOICES (d-choices-w-choices §IV-A): the smallest d that satisfies eq. (3).

    ``head_frequencies`` are p_1 >= p_2 >= ... of the head keys (fractions of the stream). Start
    at d = ceil(p_1 * n) (p_1 <= d/n is necessary), at least 2, and raise d until for every
    prefix h of the head
        sum_{i<=h} p_i + (b_h/n)^d sum_{h<i<=|H|} p_i + (b_h/n)^2 sum_{i>|H|} p_i <= b_h (1/n + ε)
    with b_h = n - n ((n-1)/n)^(h d). Returns n when no d < n satisfies it: the caller then
    switches to W-Choices, as the paper does.
    """
    cdef int size = head_frequencies.shape[0]
    cdef double head_mass = 0.0, tail_mass, prefix, rest, b, ratio
    cdef int h, d
    cdef bint ok
    if size == 0:
        return 2
    for h in range(size):
        head_mass += head_frequencies[h]
    tail_mass = 1.0 - head_mass
    if tail_mass < 0.0:
        tail_mass = 0.0
    d = <int>ceil(head_frequencies[0] * n)
    if d < 2:
        d = 2
    while d < n:
        ok = True
        prefix = 0.0
        for h in range(1, size + 1):
            prefix += head_frequencies[h - 1]
            rest = head_mass - prefix
            b = n - n * pow((n - 1.0) / n, <double>h * d)
            ratio = b / n
            if prefix + pow(ratio, d) * rest + ratio * ratio * tail_mass > b * (1.0 / n + epsilon):
                ok = False
                break
        if ok:
            return d
        d += 1
    return n


cdef class DChoices(_HeadTail):
    """D-Choices: head keys Greedy-d over h_1..h_d, tail keys PKG; d >= n falls back to W-Choices.

    d is recomputed by FINDOPTIMALCHOICES from the SpaceSaving head every ``update_every``
    tuples (a tuple-count clock, so chunking never changes the routing).
    """
    cdef readonly double epsilon
    cdef readonly int update_every
    cdef readonly int d
    cdef long long next_update

    def __init__(self, int n, unsigned long long seed, double theta, int capacity,
                 double epsilon, int update_every):
        _HeadTail.__init__(self, n, seed, theta, capacity)
        self.epsilon = epsilon
        self.update_every = update_every
        self.d = 2
        self.next_update = 0

    cdef void _update_d(self) noexcept with gil:
        _, frequencies = self.head()
        self.d = find_optimal_choices(np.ascontiguousarray(frequencies, dtype=np.float64),
                                      self.n, self.epsilon)

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef hash_t h
        cdef worker_t w, c
        cdef count_t best_load
        cdef int j
        for i in range(m):
            h = hashes[i]
            if self.routed + i >= self.next_update:
                self._update_d()
                self.next_update = self.routed + i + self.update_every
            if self._in_head(h):
                self.head_tuples += 1
                if self.d >= self.n:
                    w = least_loaded_all(&self.cursor, self.load, self.n)
                else:
                    # Greedy-d: MINLOAD(F_1(k), ..., F_d(k)), ties to the lowest id.
                    w = choice(h, 0, self.n)
                    best_load = self.load[w]
                    for j in range(1, self.d):
                        c = choice(h, j, self.n)
                        if self.load[c] < best_load or (self.load[c] == best_load and c < w):
                            w = c
                            best_load = self.load[c]
            else:
                w = self._tail(h)
            self.load[w] += 1
            out[i] = w

    def get_state(self):
        state = _HeadTail.get_state(self)
        state["d"] = self.d
        state["next_update"] = self.next_update
        return state

    def set_state(self, state):
        _HeadTail.set_state(self, state)
        self.d = int(state["d"])
        self.next_update = int(state["next_update"])

    def stats(self):
        stats = _HeadTail.stats(self)
        stats["d"] = self.d
        return stats
