"""The head/tail strategies of d-choices-w-choices (§III-IV): D-Choices, W-Choices, Round-Robin.

Each source runs SpaceSaving over its keys (UPDATESPACESAVING of Algorithm 1); a key is in the
head H when its estimated frequency f_k/m >= θ. Tail keys take PKG's two choices; head keys:

* D-Choices: Greedy-d, the least loaded of h_1(k) .. h_d(k), with d from FINDOPTIMALCHOICES
  (§IV-A); when d >= n the paper switches to W-Choices;
* W-Choices: the least loaded of all n workers;
* Round-Robin: round robin over all n workers (the paper's "RR" baseline).
"""
from libc.math cimport ceil, pow
from libc.stdlib cimport malloc, realloc, free, qsort

import numpy as np

from skewgroup._routing._keymap import KEYMAP_SLOT_BYTES
from skewgroup._routing._router import LOAD_VECTOR_BYTES
from skewgroup._routing._spacesaving import check_spacesaving, spacesaving_state_bound
from skewgroup._routing._validation import check_field_int

from skewgroup._routing._types cimport hash_t, count_t, worker_t
from skewgroup._routing._hash cimport choice
from skewgroup._routing._keymap cimport (KeyMap, EMPTY_KEY, keymap_init, keymap_free, keymap_clear,
                                         keymap_get, keymap_upsert, keymap_delete)
from skewgroup._routing._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_update, ss_top,
                                              ss_estimate, ss_get_state, ss_set_state, ss_nbytes)
from skewgroup._routing._router cimport (Router, least_loaded_all, least_of_two, _packed, _umin,
                                         WORKER_BITS)
from skewgroup._routing._levels cimport (LoadLevels, LEVELS, levels_init, levels_free,
                                         levels_rebuild, levels_add_load, levels_least_in)


def head_tail_state_bound(int n, int capacity):
    """Loads plus SpaceSaving's k counters: 8n + 128k + 256 K bytes (k = 10n by default)."""
    return LOAD_VECTOR_BYTES * n + spacesaving_state_bound(capacity) + 256


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

    def check_state(self, state):
        self.check_head_tail(state, ())

    def check_head_tail(self, state, fields):
        """The loads, the summary of ``capacity`` counters and the head's tuple count, with
        the subclass's ``fields``: returns ``routed``."""
        routed = self.check_base(state, ("summary", "head_tuples") + tuple(fields))
        check_spacesaving("summary", state["summary"], self.capacity)
        check_field_int("head_tuples", state["head_tuples"], 0, routed)
        return routed

    def state_bound(self):
        return head_tail_state_bound(self.n, self.capacity)

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

    def check_state(self, state):
        self.check_head_tail(state, ("next_worker",))
        check_field_int("next_worker", state["next_worker"], 0, self.n - 1)


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


# D-Choices caches each head key's candidate set h_1(k) .. h_d(k) (a pure function of the key's
# hash, d and n) so that a head tuple does not recompute d mixes. Greedy-d's answer, the least
# loaded candidate with ties to the lowest id, depends on the *set* of candidates only, so a
# row is a bit set of n bits (repeated choices collapse, which changes nothing). The router
# also keeps the workers grouped by load level (_levels.pxd): level j holds the workers whose
# load is the global minimum + j, for j < LEVELS. The least loaded candidate is then the lowest
# bit of (row & level j) for the first j where that is not empty: the first level a candidate
# is in is the row's minimum, and the lowest bit is its lowest id. A row none of whose
# candidates is within LEVELS of the minimum is scanned. Rows are derived state: never
# serialized, dropped on restore; the levels are rebuilt from the loads.
cdef int FIRST_ROWS = 16


def dchoices_state_bound(int n, double theta, int capacity):
    """The head/tail bound plus D-Choices' candidate cache (derived from the hashes and the
    loads, never serialized): the workers as bit sets by load level (LEVELS sets of
    ceil(n/64) words), and at most min(1/θ + 1, k) head-key rows of ceil(n/64) words plus
    16 bytes (their d, least-load bound and free-stack slot), with their key -> row map.
    At the default θ = 1/(5n) and n = 128 the cache adds 62 KB (165 KB -> 227 KB)."""
    words = -(-n // 64)
    rows = min(int(1.0 / theta) + 1, capacity)
    cache = (LEVELS * 8 * words + rows * (8 * words + 16)
             + KEYMAP_SLOT_BYTES * (4 * rows + 16))
    return head_tail_state_bound(n, capacity) + cache

# Below this d, computing the d choices costs less than the cache's upkeep (the load levels are
# updated on every tuple): the rows and levels are used only while CACHE_MIN_D <= d < n.
cdef int CACHE_MIN_D = 16


cdef class DChoices(_HeadTail):
    """D-Choices: head keys Greedy-d over h_1..h_d, tail keys PKG; d >= n falls back to W-Choices.

    d is recomputed by FINDOPTIMALCHOICES from the SpaceSaving head every ``update_every``
    tuples (a tuple-count clock, so chunking never changes the routing). Head keys' candidate
    sets are cached as bit sets of n bits (see the comment above ``LEVELS``): at most
    min(1/θ + 1, capacity) rows, the most keys the head can hold at once; rows of keys that left
    the head are released at each refresh of d. Past that a head key computes its d choices
    each time (the same answer, slower).
    """
    cdef readonly double epsilon
    cdef readonly int update_every
    cdef readonly int d
    cdef long long next_update
    cdef bint use_rows                  # CACHE_MIN_D <= d < n: the levels are kept up to date
    cdef int words                      # ceil(n / 64): words of a bit set of workers
    cdef LoadLevels levels              # workers by load level, kept while use_rows
    cdef KeyMap row_of                  # head key hash -> its row
    cdef unsigned long long* rows       # [row_capacity * words] candidate bit sets
    cdef int* row_d                     # [row_capacity] the d a row was filled for, 0 = none
    cdef count_t* row_low               # [row_capacity] <= the row's least load
    cdef int* free_rows                 # [row_capacity] stack of released rows
    cdef int free_top
    cdef int rows_used                  # rows ever handed out (high-water mark)
    cdef int row_capacity               # rows allocated
    cdef int max_rows

    def __init__(self, int n, unsigned long long seed, double theta, int capacity,
                 double epsilon, int update_every):
        _HeadTail.__init__(self, n, seed, theta, capacity)
        self.epsilon = epsilon
        self.update_every = update_every
        self.d = 2
        self.next_update = 0
        # At most 1/θ keys have f_k/m >= θ (the estimates sum to m), and every head key is
        # monitored, so at most `capacity`.
        self.max_rows = min(int(1.0 / theta) + 1, capacity)
        self.words = (n + 63) // 64
        keymap_init(&self.row_of, 16)
        if levels_init(&self.levels, self.load, n) != 0:
            raise MemoryError()

    def __dealloc__(self):
        keymap_free(&self.row_of)
        levels_free(&self.levels)
        free(self.rows)
        free(self.row_d)
        free(self.row_low)
        free(self.free_rows)

    # --- candidate rows ------------------------------------------------------------------

    cdef void _drop_rows(self) noexcept nogil:
        # Forget every cached row; they refill on the keys' next tuple.
        keymap_clear(&self.row_of)
        free(self.rows)
        free(self.row_d)
        free(self.row_low)
        free(self.free_rows)
        self.rows = NULL
        self.row_d = NULL
        self.row_low = NULL
        self.free_rows = NULL
        self.row_capacity = 0
        self.rows_used = 0
        self.free_top = 0

    cdef int _grow_rows(self) noexcept nogil:
        cdef int capacity = FIRST_ROWS if self.row_capacity == 0 else 2 * self.row_capacity
        cdef unsigned long long* rows
        cdef int* row_d
        cdef count_t* row_low
        cdef int* free_rows
        if capacity > self.max_rows:
            capacity = self.max_rows
        if capacity <= self.row_capacity:
            return -1
        rows = <unsigned long long*>realloc(
            self.rows, <size_t>capacity * self.words * sizeof(unsigned long long))
        if rows == NULL:
            return -1
        self.rows = rows
        row_d = <int*>realloc(self.row_d, capacity * sizeof(int))
        if row_d == NULL:
            return -1
        self.row_d = row_d
        row_low = <count_t*>realloc(self.row_low, capacity * sizeof(count_t))
        if row_low == NULL:
            return -1
        self.row_low = row_low
        free_rows = <int*>realloc(self.free_rows, capacity * sizeof(int))
        if free_rows == NULL:
            return -1
        self.free_rows = free_rows
        self.row_capacity = capacity
        return 0

    cdef long long _take_row(self, hash_t h) noexcept nogil:
        # A row for head key h, or -1 when none is left (or out of memory).
        cdef long long row
        if self.free_top > 0:
            row = self.free_rows[self.free_top - 1]
        elif self.rows_used < self.row_capacity or self._grow_rows() == 0:
            row = self.rows_used
        else:
            return -1
        if keymap_upsert(&self.row_of, h, row) == NULL:
            return -1
        if self.free_top > 0:
            self.free_top -= 1
        else:
            self.rows_used += 1
        self.row_d[row] = 0
        return row

    cdef void _fill_row(self, hash_t h, long long row) noexcept nogil:
        # The bit set of h_1(k) .. h_d(k).
        cdef unsigned long long* bits = self.rows + row * self.words
        cdef int j
        cdef worker_t w
        for j in range(self.words):
            bits[j] = 0
        for j in range(self.d):
            w = choice(h, j, self.n)
            bits[w >> 6] |= 1ULL << (w & 63)
        self.row_d[row] = self.d
        self.row_low[row] = 0

    cdef void _release_rows(self) noexcept nogil:
        # Release the rows of keys that are no longer in the head (f_k/m < θ): at most 1/θ
        # keys are in the head at once, so this keeps the rows within max_rows.
        cdef long long i, stale_count = 0, row
        cdef hash_t key
        cdef hash_t* stale
        if self.row_of.size == 0:
            return
        stale = <hash_t*>malloc(self.row_of.size * sizeof(hash_t))
        if stale == NULL:
            return  # keep the rows: routing is unchanged, the sweep waits for the next refresh
        for i in range(self.row_of.capacity):
            key = self.row_of.keys[i]
            if key != EMPTY_KEY and ss_estimate(&self.summary, key) < self.theta * self.summary.total:
                stale[stale_count] = key
                stale_count += 1
        for i in range(stale_count):
            row = keymap_get(&self.row_of, stale[i], -1)
            keymap_delete(&self.row_of, stale[i])
            self.free_rows[self.free_top] = <int>row
            self.free_top += 1
        free(stale)

    # --- routing -------------------------------------------------------------------------

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
        cdef bint use_rows
        self._release_rows()
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
        use_rows = CACHE_MIN_D <= self.d < self.n
        if use_rows and not self.use_rows:
            levels_rebuild(&self.levels, self.load, self.n)  # not kept while unused
        self.use_rows = use_rows

    cdef inline worker_t _greedy_d(self, hash_t h) noexcept nogil:
        # Greedy-d: MINLOAD(F_1(k), ..., F_d(k)), ties to the lowest id. The d choices are
        # independent mixes, so they pipeline; a (load, id) packed min keeps the loop free of
        # branches (a compare-and-branch per choice mispredicts about half the time). Used when
        # no cache row is left or d is small.
        cdef int n = self.n, j
        cdef unsigned long long even = _packed(self.load, choice(h, 0, n))
        cdef unsigned long long odd = _packed(self.load, choice(h, 1, n))
        for j in range(2, self.d - 1, 2):
            even = _umin(even, _packed(self.load, choice(h, j, n)))
            odd = _umin(odd, _packed(self.load, choice(h, j + 1, n)))
        if self.d % 2 == 1:
            even = _umin(even, _packed(self.load, choice(h, self.d - 1, n)))
        return <worker_t>(_umin(even, odd) & ((1ULL << WORKER_BITS) - 1))

    cdef inline worker_t _greedy_d_cached(self, hash_t h) noexcept nogil:
        # Greedy-d over the key's cached row: the same worker as _greedy_d.
        cdef long long row = keymap_get(&self.row_of, h, -1)
        if row < 0:
            row = self._take_row(h)
            if row < 0:
                return self._greedy_d(h)
        if self.row_d[row] != self.d:
            self._fill_row(h, row)
        # The least loaded candidate, ties to the lowest id (see the comment above FIRST_ROWS).
        return levels_least_in(&self.levels, self.load, self.rows + row * self.words,
                               &self.row_low[row])

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
                if self.use_rows:
                    w = self._greedy_d_cached(h)
                elif self.d >= self.n:
                    w = least_loaded_all(&self.cursor, self.load, self.n)
                else:
                    w = self._greedy_d(h)
            else:
                w = self._tail(h)
            if self.use_rows:
                levels_add_load(&self.levels, self.load, self.n, w)
            else:
                self.load[w] += 1
            out[i] = w

    def get_state(self):
        # The rows and levels are derived from the hashes, d and the loads: not state.
        state = _HeadTail.get_state(self)
        state["d"] = self.d
        state["next_update"] = self.next_update
        return state

    def check_state(self, state):
        routed = self.check_head_tail(state, ("d", "next_update"))
        # _greedy_d runs d choices per head tuple; FINDOPTIMALCHOICES gives 2 .. n, or n
        # when that is below 2 (n = 1); d starts at 2.
        check_field_int("d", state["d"], 1, max(2, self.n))
        check_field_int("next_update", state["next_update"], 0, routed + self.update_every)

    def state_bound(self):
        return dchoices_state_bound(self.n, self.theta, self.capacity)

    def set_state(self, state):
        _HeadTail.set_state(self, state)
        self.d = int(state["d"])
        self.next_update = int(state["next_update"])
        self._drop_rows()
        levels_rebuild(&self.levels, self.load, self.n)
        self.use_rows = CACHE_MIN_D <= self.d < self.n

    def stats(self):
        stats = _HeadTail.stats(self)
        stats["d"] = self.d
        stats["cached_rows"] = self.row_of.size
        return stats

    def state_bytes(self):
        # Loads, SpaceSaving, and the candidate cache: load levels, rows, their d and free
        # stack, the key -> row map.
        return (_HeadTail.state_bytes(self)
                + LEVELS * self.words * sizeof(unsigned long long)
                + self.row_capacity * (self.words * sizeof(unsigned long long) + 2 * sizeof(int)
                                       + sizeof(count_t))
                + self.row_of.capacity * (sizeof(hash_t) + sizeof(long long)))
