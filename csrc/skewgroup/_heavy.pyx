"""The head/tail strategies of d-choices-w-choices (§III-IV): D-Choices, W-Choices, Round-Robin.

Each source runs SpaceSaving over its keys (UPDATESPACESAVING of Algorithm 1); a key is in the
head H when its estimated frequency f_k/m >= θ. Tail keys take PKG's two choices; head keys:

* D-Choices: Greedy-d, the least loaded of h_1(k) .. h_d(k), with d from FINDOPTIMALCHOICES
  (§IV-A); when d >= n the paper switches to W-Choices;
* W-Choices: the least loaded of all n workers;
* Round-Robin: round robin over all n workers (the paper's "RR" baseline).
"""
from libc.math cimport ceil, pow
from libc.stdlib cimport malloc, free, qsort

import numpy as np

from skewgroup._types cimport hash_t, count_t, worker_t
from skewgroup._hash cimport choice
from skewgroup._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_update, ss_top,
                                     ss_get_state, ss_set_state, ss_nbytes)
from skewgroup._router cimport (Router, least_loaded_all, least_of_two, _packed, _umin,
                                WORKER_BITS)


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
    if head_frequencies.shape[0] == 0:
        return 2
    return _find_optimal_choices(&head_frequencies[0], head_frequencies.shape[0], n, epsilon)


cdef int _find_optimal_choices(const double* head_frequencies, int size, int n,
                               double epsilon) noexcept nogil:
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


cdef int _by_frequency_desc(const void* a, const void* b) noexcept nogil:
    cdef double x = (<const double*>a)[0], y = (<const double*>b)[0]
    return -1 if x > y else (1 if x < y else 0)


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

    cdef void _update_d(self) noexcept nogil:
        # The same frequencies as head(), without its O(k log k) sort of all k counters and its
        # Python arrays: one O(k) pass picks the head (at most 1/θ counters, as the counts sum
        # to m), and only those are sorted. This runs every update_every tuples, so a full sort
        # of k = 10n counters here cost more than the routing itself.
        cdef count_t total = self.summary.total if self.summary.total > 1 else 1
        # (+ 1 byte: an empty summary must not ask malloc for 0 bytes, which may return NULL.)
        cdef double* frequencies = <double*>malloc(self.summary.size * sizeof(double) + 1)
        cdef double f
        cdef int c, size = 0
        if frequencies == NULL:
            return  # out of memory: keep the current d, routing stays valid
        for c in range(self.summary.size):
            f = <double>self.summary.counts[c] / total
            if f >= self.theta:
                frequencies[size] = f
                size += 1
        qsort(frequencies, size, sizeof(double), _by_frequency_desc)
        self.d = _find_optimal_choices(frequencies, size, self.n, self.epsilon)
        free(frequencies)

    cdef inline worker_t _greedy_d(self, hash_t h) noexcept nogil:
        # Greedy-d: MINLOAD(F_1(k), ..., F_d(k)), ties to the lowest id. The d choices are
        # independent mixes, so they pipeline; a (load, id) packed min keeps the loop free of
        # branches (a compare-and-branch per choice mispredicts about half the time).
        cdef int n = self.n, j
        cdef unsigned long long even = _packed(self.load, choice(h, 0, n))
        cdef unsigned long long odd = _packed(self.load, choice(h, 1, n))
        for j in range(2, self.d - 1, 2):
            even = _umin(even, _packed(self.load, choice(h, j, n)))
            odd = _umin(odd, _packed(self.load, choice(h, j + 1, n)))
        if self.d % 2 == 1:
            even = _umin(even, _packed(self.load, choice(h, self.d - 1, n)))
        return <worker_t>(_umin(even, odd) & ((1ULL << WORKER_BITS) - 1))

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef hash_t h
        cdef worker_t w
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
                    w = self._greedy_d(h)
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
