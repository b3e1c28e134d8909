"""FISH (fish §4-5): epoch-decayed hot keys, CHK choice counts, consistent-hash candidates.

Per tuple, on a tuple-count clock (tuple t of the router's whole stream, so one call or any
chunks route the same):

1. before tuple t, when t > 0 and t is a multiple of N_epoch, every counter and the total are
   multiplied by α (Algorithm 1, TimeDecayingUpdate, lines 4-6 and 23-26); in between, counting
   is SpaceSaving's ReplaceMin (new key: min + 1, lines 8-21);
2. f_k = c_k / total (both decayed); the key is hot when f_k >= θ (docs/algorithms.md#fish;
   Algorithm 2 line 1 prints ">", the two differ only on exact equality); then
   index = floor(log2(f_top/f_k)), d = n / 2^index (integer), at least d_min, and M_k keeps the
   largest d the key ever had (lines 3-10); a non-hot key gets d = 2 (line 12);
3. the candidates are the first d distinct workers clockwise from the key on the ring (§5);
4. Algorithm 3 picks the candidate with the shortest estimated wait C_w * P_w, ties to the
   lowest id, and adds one to C_w (lines 12-18). Every T tuples C_w = max(0, (C_w P_w - T)/P_w)
   (eq. 1; C_w already holds the N_w tuples sent, line 18, so N_w is not added twice). With no
   capacities and no T, C_w is the local load and this is the least loaded candidate.

T is counted in tuples of this source, as N_epoch is, instead of the paper's 10 s of wall clock:
routing must be a function of the stream so that a restored or re-chunked router routes the same.

Speed (no Python object per tuple). A hot key's candidates are cached in a pool of rows keyed
by M_k's entry, because walking the ring for d ~ n distinct workers costs O(d log d) points.
Cold keys read their two candidates from the ring point they land on (owner and next distinct
worker, precomputed).

With plain loads (no capacities, no T) the router keeps the workers grouped by load level, as
D-Choices does (_heavy.pyx; both use _levels.pxd): level j is a bit set of the workers whose
load is the global minimum + j, j < LEVELS. A row is a bit set of the key's candidates, and
Algorithm 3's "least loaded candidate, ties to the lowest id" is the lowest bit of (row & level
j) for the first level j where that is not empty: the first level holding a candidate is the
row's least load and the lowest bit its lowest id, the same worker as a scan of the row. d = n
(every worker) is the lowest bit of level 0. A few word ANDs and a count of trailing zeros per
tuple, instead of scans of the row that restart each time its minimum rises (the cost of a
scan grows with n; figures in bench/RESULTS.md, bench_routing). The levels are derived from
the loads: rebuilt on restore and resize, never serialized. Weighted routing compares C_w * P_w,
real numbers that decay every T, which no load level holds: there a row is the list of
candidates by ascending id and Algorithm 3 scans it.

Bounded state (a deviation: the paper's M is never pruned). At each epoch end the M_k entries
(and cached rows) of keys the counters no longer hold, or hold at count 0, are dropped: the
entries are keys that were hot and are still among the K_max counters, plus the keys that turned
hot during one epoch. A key that returns later starts again from CHK's d. Rows are at most
K_max + 1/θ + 1; past that a hot key's list is walked on the ring each time (correct, slower).
"""
cimport cython
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memset

import numpy as np

from skewgroup._routing._keymap import KEYMAP_SLOT_BYTES, check_keymap
from skewgroup._routing._ring import check_ring_workers
from skewgroup._routing._router import MAX_WORKERS
from skewgroup._routing._spacesaving import check_spacesaving, spacesaving_state_bound
from skewgroup._routing._validation import bad, check_array, check_field_int, check_values

from skewgroup._routing._types cimport hash_t, count_t, worker_t
from skewgroup._routing._keymap cimport (KeyMap, EMPTY_KEY, keymap_init, keymap_free, keymap_upsert,
                                         keymap_get, keymap_delete, keymap_get_state,
                                         keymap_set_state)
from skewgroup._routing._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_update,
                                              ss_estimate, ss_decay, ss_get_state, ss_set_state,
                                              ss_nbytes)
from skewgroup._routing._ring cimport (HashRing, RingPoint, ring_init, ring_free, ring_add_worker,
                                       ring_remove_worker, ring_locate, ring_candidates,
                                       ring_live_workers, ring_nbytes)
from skewgroup._routing._router cimport (Router, next_tick, least_of, least_of_two,
                                         least_loaded_all, cursor_reset)
from skewgroup._routing._levels cimport (LoadLevels, LEVELS, levels_init, levels_free,
                                         levels_add_load, levels_least_loaded, levels_least_in)

cdef extern from *:
    int __builtin_clzll(unsigned long long) nogil

# A chosen-map value packs M_k (low 32 bits) and the key's cache row + 1 (high bits, 0 = none).
cdef long long M_MASK = 0xFFFFFFFF
cdef int FIRST_ROWS = 16
cdef enum:
    MEMO_BITS = 6
    MEMO_SIZE = 1 << MEMO_BITS


cdef struct RowInfo:
    count_t min_load    # <= the row's least load (load levels): lower levels hold none of its
                        # candidates, which stays true while loads only grow
    int d               # candidates cached in the row, 0 = not filled


cdef inline double _default_theta(int n) noexcept nogil:
    # FISH's hot threshold when none is given (FishConfig's theta=None): 1/(4n), following n
    # through a resize.
    return 1.0 / (4 * n)


cdef inline int _chk_index(count_t top, count_t count) noexcept nogil:
    # floor(log2(f_top / f_k)) = floor(log2(top / count)) for top >= count >= 1 (Algorithm 2,
    # line 3) without a division: align the leading bits, step back if count then exceeds top.
    cdef int i = __builtin_clzll(<unsigned long long>count) - __builtin_clzll(<unsigned long long>top)
    if i <= 0:
        return 0
    if (<unsigned long long>count << i) > <unsigned long long>top:
        i -= 1
    return i


STATE_FIELDS = ("summary", "top_count", "top_key", "chosen", "wait", "ring_workers")


def fish_state_bound(int n, theta, int k_max, int virtual_nodes):
    """K_max SpaceSaving counters, M_k and cached candidate lists for K_max + 1/θ keys
    (n workers each), the ring (n * virtual_nodes points plus its lookup table), loads and
    wait estimates: 128 K + 256 K + slots (64 + 4n + 20) + 48 n V + 36 n bytes. ``theta``
    None is the default 1/(4n)."""
    theta = _default_theta(n) if theta is None else theta
    slots = k_max + int(1.0 / theta) + 1
    return (spacesaving_state_bound(k_max) + slots * (64 + 4 * n + 20)
            + 48 * n * virtual_nodes + 36 * n + 512)


@cython.final  # direct, inlinable calls to the per-tuple helpers instead of the vtable
cdef class Fish(Router):
    """FISH for ``n`` workers (see the module docstring); built by ``FishConfig``.

    Parameters
    ----------
    n, seed : int
        Workers and hash seed (the seed also places the ring's points).
    epoch, alpha, theta, k_max, virtual_nodes, d_min : see ``FishConfig``.
    capacities : sequence of float or None
        P_w, the time a worker takes per tuple; None = all 1.
    interval : int or None
        T in tuples; None or 0 = C_w never drains.
    """
    cdef readonly int epoch
    cdef readonly double alpha
    cdef readonly double theta
    cdef bint theta_follows_n              # theta given as None: 1/(4n) at every n
    cdef readonly int k_max
    cdef readonly int virtual_nodes
    cdef readonly int d_min
    cdef readonly long long interval      # T in tuples, 0 = never
    cdef bint use_waits                    # Algorithm 3 on C_w * P_w instead of plain loads
    cdef StreamSummary summary
    cdef count_t top_count                 # the largest counter: f_top = top_count / total
    cdef hash_t top_key                    # a key holding it
    cdef KeyMap chosen                     # hash -> M_k | (row + 1) << 32
    cdef HashRing ring
    cdef object _wait_array                # C_w
    cdef double* wait
    cdef object _capacity_array            # P_w
    cdef double* capacity
    cdef worker_t* scratch                 # [n] a walk's candidates
    cdef unsigned char* marks              # [n] zero between uses
    cdef worker_t* rows                    # [row_capacity * n] candidates by ascending id (weighted)
    cdef unsigned long long* row_bits      # [row_capacity * words] candidate bit sets (levels)
    cdef RowInfo* row_info                 # [row_capacity]
    cdef int* free_rows                    # [max_rows] stack of released rows
    cdef int free_top
    cdef int rows_used                     # rows ever handed out (high-water mark)
    cdef int row_capacity                  # rows allocated
    cdef int max_rows
    # Load levels (module docstring), kept while use_levels: plain loads (and the memory for them).
    cdef bint use_levels
    cdef int words                         # ceil(n / 64): words of a bit set of workers
    cdef LoadLevels levels                 # workers by load level
    # A direct-mapped copy of recent chosen-map values (by the hash's top bits), so the hottest
    # keys skip the key map probe; entries are written through and dropped with their key.
    cdef hash_t memo_key[MEMO_SIZE]
    cdef long long memo_value[MEMO_SIZE]    # -1 = empty

    def __init__(self, int n, unsigned long long seed, int epoch, double alpha, theta,
                 int k_max, int virtual_nodes, int d_min, capacities, interval):
        Router.__init__(self, n, seed)
        self.epoch = epoch
        self.alpha = alpha
        self.theta_follows_n = theta is None
        self.theta = _default_theta(n) if theta is None else theta
        self.k_max = k_max
        self.virtual_nodes = virtual_nodes
        self.d_min = d_min
        self.interval = interval or 0
        self.use_waits = capacities is not None or self.interval > 0
        self.top_count = 0
        self.top_key = 0
        ss_init(&self.summary, k_max)
        # M_k entries: a few per hot key; the map grows on demand, and the epoch sweep reads all
        # of its slots, so it starts small.
        keymap_init(&self.chosen, 64)
        ring_init(&self.ring, n, virtual_nodes, seed)
        caps = np.ones(n) if capacities is None else np.asarray(capacities, dtype=np.float64)
        self._set_worker_arrays(np.zeros(n), caps)
        self._setup_levels()
        self._drop_rows()

    def __dealloc__(self):
        ss_free(&self.summary)
        keymap_free(&self.chosen)
        ring_free(&self.ring)
        free(self.scratch)
        free(self.marks)
        free(self.rows)
        free(self.row_bits)
        free(self.row_info)
        free(self.free_rows)
        levels_free(&self.levels)

    cdef _set_worker_arrays(self, waits, caps):
        cdef int n = self.n
        self._wait_array = np.ascontiguousarray(waits, dtype=np.float64)
        self._capacity_array = np.ascontiguousarray(caps, dtype=np.float64)
        cdef double[::1] a = self._wait_array
        cdef double[::1] b = self._capacity_array
        self.wait, self.capacity = &a[0], &b[0]
        free(self.scratch)
        free(self.marks)
        self.scratch = <worker_t*>malloc(n * sizeof(worker_t))
        self.marks = <unsigned char*>malloc(n)
        if self.scratch == NULL or self.marks == NULL:
            raise MemoryError()
        memset(self.marks, 0, n)

    # --- load levels (module docstring) ----------------------------------------------------

    cdef _setup_levels(self):
        # After any change of n or of the loads (init, resize, restore).
        levels_free(&self.levels)
        self.words = (self.n + 63) // 64
        # Without memory for them routing stays exact (lists and scans, slower): no error.
        self.use_levels = not self.use_waits and levels_init(&self.levels, self.load, self.n) == 0

    # --- candidate rows --------------------------------------------------------------------

    cdef _drop_rows(self):
        # Forget every cached row (new n or θ, restored state): rows refill on the keys' next
        # tuple. At most 1/θ keys are hot at once; with the K_max counters' keys that were hot
        # earlier this bounds the rows an epoch needs.
        cdef long long i
        for i in range(self.chosen.capacity):
            if self.chosen.keys[i] != EMPTY_KEY:
                self.chosen.values[i] &= M_MASK
        for i in range(MEMO_SIZE):
            self.memo_key[i] = 0
            self.memo_value[i] = -1
        free(self.rows)
        free(self.row_bits)
        free(self.row_info)
        free(self.free_rows)
        self.rows = NULL
        self.row_bits = NULL
        self.row_info = NULL
        self.row_capacity = 0
        self.rows_used = 0
        self.free_top = 0
        self.max_rows = self.k_max + int(1.0 / self.theta) + 1
        self.free_rows = <int*>malloc(self.max_rows * sizeof(int))
        if self.free_rows == NULL:
            self.max_rows = 0  # no rows: every hot key walks the ring (correct, slower)
            raise MemoryError()

    cdef int _grow_rows(self) noexcept nogil:
        cdef int capacity = FIRST_ROWS if self.row_capacity == 0 else 2 * self.row_capacity
        cdef worker_t* rows
        cdef unsigned long long* row_bits
        cdef RowInfo* info
        if capacity > self.max_rows:
            capacity = self.max_rows
        if capacity <= self.row_capacity:
            return -1
        if self.use_levels:
            row_bits = <unsigned long long*>realloc(
                self.row_bits, <size_t>capacity * self.words * sizeof(unsigned long long))
            if row_bits == NULL:
                return -1
            self.row_bits = row_bits
        else:
            rows = <worker_t*>realloc(self.rows, <size_t>capacity * self.n * sizeof(worker_t))
            if rows == NULL:
                return -1
            self.rows = rows
        info = <RowInfo*>realloc(self.row_info, capacity * sizeof(RowInfo))
        if info == NULL:
            return -1
        self.row_info = info
        self.row_capacity = capacity
        return 0

    cdef inline long long _row_of(self, long long* entry) noexcept nogil:
        # The key's cache row, taking a free one on first use; -1 when none is left.
        cdef long long row = (entry[0] >> 32) - 1
        if row >= 0:
            return row
        if self.free_top > 0:
            self.free_top -= 1
            row = self.free_rows[self.free_top]
        elif self.rows_used < self.row_capacity or self._grow_rows() == 0:
            row = self.rows_used
            self.rows_used += 1
        else:
            return -1
        self.row_info[row].d = 0
        entry[0] |= (row + 1) << 32
        return row

    cdef void _fill_row(self, hash_t h, int d, long long row) noexcept nogil:
        # The first d distinct workers clockwise (§5), as a bit set with load levels, else by
        # ascending id.
        cdef worker_t* out
        cdef unsigned long long* bits
        cdef int got = ring_candidates(&self.ring, h, d, self.scratch)
        cdef int j, k = 0
        cdef worker_t w
        if self.use_levels:
            bits = self.row_bits + row * self.words
            for j in range(self.words):
                bits[j] = 0
            for j in range(got):
                w = self.scratch[j]
                bits[w >> 6] |= 1ULL << (w & 63)
            self.row_info[row].d = got
            self.row_info[row].min_load = 0
            return
        out = self.rows + row * self.n
        for j in range(got):
            self.marks[self.scratch[j]] = 1
        for w in range(self.n):
            if self.marks[w]:
                self.marks[w] = 0
                out[k] = w
                k += 1
        self.row_info[row].d = got

    cdef void _end_epoch(self) noexcept with gil:
        # TimeDecayingUpdate (Algorithm 1, lines 23-26), then drop M_k and rows of keys the
        # counters no longer hold (module docstring, "Bounded state").
        cdef long long i, row, stale_count = 0, key_count = 0
        cdef int memo
        cdef hash_t key
        cdef hash_t* stale
        ss_decay(&self.summary, self.alpha)
        # Rounding c * alpha is monotone, so the top key stays on top (ties aside, which do not
        # change the value): no O(K log K) top-1 query per epoch.
        self.top_count = ss_estimate(&self.summary, self.top_key)
        if self.chosen.size == 0:
            return
        # (+ 1: the branch-free collection below writes one slot past the last key.)
        stale = <hash_t*>malloc((self.chosen.size + 1) * sizeof(hash_t))
        if stale == NULL:
            return  # keep the entries: routing is unchanged, the sweep waits for the next epoch
        # The keys first, in slot order and without a branch per slot (a slot is empty or not
        # at random), then the ones to drop, still in slot order.
        for i in range(self.chosen.capacity):
            key = self.chosen.keys[i]
            stale[key_count] = key
            key_count += key != EMPTY_KEY
        for i in range(key_count):
            if ss_estimate(&self.summary, stale[i]) == 0:
                stale[stale_count] = stale[i]
                stale_count += 1
        for i in range(stale_count):
            row = (keymap_get(&self.chosen, stale[i], 0) >> 32) - 1
            if row >= 0:
                self.free_rows[self.free_top] = <int>row
                self.free_top += 1
            keymap_delete(&self.chosen, stale[i])
            memo = <int>(stale[i] >> (64 - MEMO_BITS))
            if self.memo_key[memo] == stale[i]:
                self.memo_value[memo] = -1
        free(stale)

    cdef void _drain_waits(self) noexcept nogil:
        # Eq. (1): in T time units worker w clears T / P_w of its C_w queued tuples.
        cdef int w
        for w in range(self.n):
            self.wait[w] = (self.wait[w] * self.capacity[w] - self.interval) / self.capacity[w]
            if self.wait[w] < 0:
                self.wait[w] = 0

    cdef inline worker_t _shortest_wait(self, const worker_t* candidates, int d) noexcept nogil:
        # Algorithm 3, lines 12-18: the smallest C_w * P_w, ties to the lowest id.
        cdef worker_t best = candidates[0], w
        cdef double best_wait = self.wait[best] * self.capacity[best], t
        cdef int j
        for j in range(1, d):
            w = candidates[j]
            t = self.wait[w] * self.capacity[w]
            if t < best_wait or (t == best_wait and w < best):
                best, best_wait = w, t
        return best

    cdef inline worker_t _route_pair(self, hash_t h, int d) noexcept nogil:
        cdef RingPoint arc = self.ring.point[ring_locate(&self.ring, h)]
        cdef worker_t two[2]
        if d < 2:
            return arc.owner
        if not self.use_waits:
            return least_of_two(self.load, arc.owner, arc.second)
        two[0], two[1] = arc.owner, arc.second
        return self._shortest_wait(two, 2)

    cdef worker_t _route_hot(self, hash_t h, count_t c) noexcept nogil:
        # CHK (Algorithm 2, lines 1-10), then Algorithm 3 over the key's d candidates.
        cdef int n = self.n
        cdef int index = _chk_index(self.top_count, c)
        cdef int d = (n >> index) if index < 31 else 0
        cdef int memo = <int>(h >> (64 - MEMO_BITS))
        cdef long long value = self.memo_value[memo] if self.memo_key[memo] == h else -1
        cdef long long m_k = value & M_MASK, row
        cdef long long* entry
        cdef worker_t* candidates
        cdef worker_t w
        cdef int got
        if d < self.d_min:
            d = self.d_min
        if d > n:
            d = n
        if value < 0 or m_k < d or ((value >> 32) == 0 and 2 < m_k < n):
            # Memo miss, M_k grows (lines 7-8), or the key needs a cache row: the key map.
            entry = keymap_upsert(&self.chosen, h, 0)
            if entry == NULL:  # out of memory: route by CHK's d alone, without a row
                value = d
            else:
                if (entry[0] & M_MASK) < d:
                    entry[0] = (entry[0] & ~M_MASK) | d
                m_k = entry[0] & M_MASK
                if 2 < m_k < n:
                    self._row_of(entry)
                value = entry[0]
                self.memo_key[memo] = h
                self.memo_value[memo] = value
            m_k = value & M_MASK
        # d = M_k >= CHK's d (lines 9-10); M_k may exceed n after a resize to fewer workers.
        d = <int>m_k if m_k < n else n
        if d >= n:  # every worker: the global argmin
            if self.use_waits:
                for w in range(n):
                    self.scratch[w] = w
                return self._shortest_wait(self.scratch, n)
            if self.use_levels:
                return levels_least_loaded(&self.levels)
            return least_loaded_all(&self.cursor, self.load, n)
        if d <= 2:
            return self._route_pair(h, d)
        row = (value >> 32) - 1
        if row < 0:  # no row left: walk the ring for this tuple
            got = ring_candidates(&self.ring, h, d, self.scratch)
            if self.use_waits:
                return self._shortest_wait(self.scratch, got)
            return least_of(self.load, self.scratch, got)
        if self.row_info[row].d != d:
            self._fill_row(h, d, row)
        if self.use_levels:  # the least loaded candidate, ties to the lowest id (docstring)
            return levels_least_in(&self.levels, self.load, self.row_bits + row * self.words,
                                   &self.row_info[row].min_load)
        candidates = self.rows + row * n
        if self.use_waits:
            return self._shortest_wait(candidates, self.row_info[row].d)
        return least_of(self.load, candidates, self.row_info[row].d)  # no memory for levels

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef long long to_epoch = (next_tick(self.routed, self.epoch) - self.routed)
        cdef long long to_interval = ((next_tick(self.routed, self.interval) - self.routed)
                                      if self.interval > 0 else -1)
        cdef hash_t h
        cdef count_t c
        cdef worker_t w
        for i in range(m):
            if to_epoch == 0:
                self._end_epoch()
                to_epoch = self.epoch
            to_epoch -= 1
            if to_interval == 0:
                self._drain_waits()
                to_interval = self.interval
            if to_interval > 0:
                to_interval -= 1
            h = hashes[i]
            c = ss_update(&self.summary, h)
            # The top key is only ever evicted as the minimum, i.e. when every counter equals it,
            # and then the newcomer's min + 1 takes over here. (Conditional moves: the top key
            # is a third of a Zipf stream, a branch on it would be a coin flip.)
            self.top_key = h if c > self.top_count else self.top_key
            self.top_count = c if c > self.top_count else self.top_count
            if c < self.theta * self.summary.total:
                w = self._route_pair(h, 2)  # not hot: 2 ring candidates (Algorithm 2, line 12)
            else:
                w = self._route_hot(h, c)
            if self.use_levels:
                levels_add_load(&self.levels, self.load, self.n, w)
            else:
                self.load[w] += 1
            if self.use_waits:
                self.wait[w] += 1
            out[i] = w

    def resize(self, int new_n):
        """Add or remove workers so that ids 0 .. new_n-1 are live.

        Workers new_n .. n-1 leave the ring (highest first) or n .. new_n-1 join it; every other
        point stays, so only keys whose clockwise walk meets a moved point change candidates
        (§5). Loads and C_w of the remaining workers are kept, new workers start at 0 (P_w = 1);
        M_k is kept and cached candidate lists are dropped.
        """
        if new_n < 1 or new_n > MAX_WORKERS:
            raise ValueError(f"The 'workers' parameter must be an int in [1, {MAX_WORKERS}]. "
                             f"Got {new_n}.")
        cdef int old_n = self.n, keep = min(new_n, self.n), w
        if new_n == old_n:
            return
        if self.theta_follows_n:
            self.theta = _default_theta(new_n)
        for w in range(old_n, new_n):
            ring_add_worker(&self.ring, w)
        for w in range(old_n - 1, new_n - 1, -1):
            ring_remove_worker(&self.ring, w)
        loads, waits, caps = self._load_array, self._wait_array, self._capacity_array
        self._allocate_loads(new_n)  # sets n and resets the global cursor
        self._load_array[:keep] = loads[:keep]
        cursor_reset(&self.cursor, self.load, self.n)
        new_waits, new_caps = np.zeros(new_n), np.ones(new_n)
        new_waits[:keep], new_caps[:keep] = waits[:keep], caps[:keep]
        self._set_worker_arrays(new_waits, new_caps)
        self._setup_levels()
        self._drop_rows()

    def get_state(self):
        state = Router.get_state(self)
        keys, values = keymap_get_state(&self.chosen)
        # Rows are a cache of the ring: only M_k is state.
        state.update(summary=ss_get_state(&self.summary), top_count=self.top_count,
                     top_key=self.top_key,
                     chosen=(keys, values & M_MASK), wait=self._wait_array.copy(),
                     ring_workers=ring_live_workers(&self.ring))
        return state

    def set_state(self, state):
        workers = np.asarray(state["ring_workers"])
        if not np.array_equal(workers, np.arange(self.n)):
            raise ValueError(f"state holds a ring over {workers.size} workers, router has "
                             f"{self.n}")
        waits = np.array(state["wait"], dtype=np.float64)
        if waits.shape != (self.n,):
            raise ValueError(f"state holds waits for {waits.size} workers, router has {self.n}")
        Router.set_state(self, state)
        ss_set_state(&self.summary, state["summary"])
        self.top_count = int(state["top_count"])
        self.top_key = <hash_t>int(state["top_key"])
        keymap_set_state(&self.chosen, state["chosen"][0], state["chosen"][1])
        self._set_worker_arrays(waits, self._capacity_array)
        self._setup_levels()
        self._drop_rows()

    def candidates(self, hash_t h):
        """The candidate workers key hash ``h`` would get now (ascending ids), without routing
        it: 2 ring candidates if it is not hot, else CHK's d (and M_k) on the ring."""
        cdef count_t c = ss_estimate(&self.summary, h)
        cdef int n = self.n, d = 2, index
        cdef long long m_k
        if c > 0 and c >= self.theta * self.summary.total:
            index = _chk_index(max(self.top_count, c), c)
            d = max((n >> index) if index < 31 else 0, self.d_min)
            m_k = keymap_get(&self.chosen, h, 0) & M_MASK
            d = min(max(d, <int>m_k), n)
        out = np.empty(min(d, n), dtype=np.int32)
        cdef worker_t[::1] o = out
        ring_candidates(&self.ring, h, d, &o[0])
        return np.sort(out)

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def check_state(self, state):
        """Decayed counters, M_k, waits and the ring (module docstring)."""
        self.check_base(state, STATE_FIELDS, resizable=True)
        summary = state["summary"]
        check_spacesaving("summary", summary, self.k_max)
        check_field_int("top_count", state["top_count"], 0, summary["total"])
        check_field_int("top_key", state["top_key"], 0, 0xFFFFFFFFFFFFFFFF)
        occupied, _, m_k = check_keymap("chosen", state["chosen"],
                                        self.state_bound() // KEYMAP_SLOT_BYTES)
        # M_k (low 32 bits; rows are not state): at least one worker, at most any n ever had.
        check_values("chosen#1", m_k[occupied], 1, MAX_WORKERS, "M_k values")
        waits = check_array("wait", state["wait"], np.float64, (self.n,))
        if not np.isfinite(waits).all() or (waits < 0).any():
            raise bad("wait", "must hold finite waits >= 0")
        check_ring_workers("ring_workers", state["ring_workers"], self.n)

    def state_bound(self):
        return fish_state_bound(self.n, self.theta, self.k_max, self.virtual_nodes)

    def stats(self):
        cdef int r
        cdef long long cached = 0
        for r in range(self.rows_used):
            cached += self.row_info[r].d
        return {"keys_tracked": self.summary.size, "head_keys": self.chosen.size,
                "table_entries": cached}

    def state_bytes(self):
        return (Router.state_bytes(self) + ss_nbytes(&self.summary)
                + self.chosen.capacity * (sizeof(hash_t) + sizeof(long long))
                + <long long>self.row_capacity * (
                    (self.words * sizeof(unsigned long long) if self.use_levels
                     else self.n * sizeof(worker_t)) + sizeof(RowInfo))
                + (LEVELS * self.words * sizeof(unsigned long long) if self.use_levels else 0)
                + self.max_rows * sizeof(int)
                + self._wait_array.nbytes + self._capacity_array.nbytes
                + self.n * (sizeof(worker_t) + 1) + ring_nbytes(&self.ring))
