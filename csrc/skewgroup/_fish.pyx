"""FISH (fish §4-5): epoch-decayed hot keys, CHK choice counts, consistent-hash candidates.

Per tuple, on a tuple-count clock (so one call or any chunks route the same):

1. every N_epoch tuples the K_max counters and their total are multiplied by α (Algorithm 1,
   TimeDecayingUpdate); counting in between is SpaceSaving's ReplaceMin (new key: min + 1);
2. f_k = c_k / total; a key is hot when f_k > θ (Algorithm 2, line 1); then
   index = floor(log2(f_top / f_k)), d = n / 2^index, at least d_min, and M_k remembers the
   largest d the key ever had (lines 3-10); a non-hot key gets d = 2 (line 12);
3. the candidates are the first d distinct workers clockwise from the key on the ring (§5);
4. Algorithm 3 picks the candidate with the shortest estimated wait C_w * P_w and adds one to
   C_w; every T tuples C_w = max(0, (C_w * P_w - T) / P_w) (eq. 1). With no capacities and no
   T this is the least loaded candidate by the local load vector, ties to the lowest id.

Hot keys' candidate lists are cached (a pool of slots of n workers) because walking the ring for
d ~ n distinct workers on every tuple would cost O(n log n). M_k and the caches of keys that
left the counters are dropped at each epoch end, so the state is bounded by K_max.
"""
from libc.stdlib cimport malloc, free

import numpy as np

from skewgroup._types cimport hash_t, count_t, worker_t
from skewgroup._keymap cimport (KeyMap, keymap_init, keymap_free, keymap_get, keymap_upsert,
                                keymap_delete, keymap_get_state, keymap_set_state, EMPTY_KEY)
from skewgroup._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_update, ss_estimate,
                                     ss_top, ss_decay, ss_get_state, ss_set_state, ss_nbytes)
from skewgroup._ring cimport HashRing, ring_init, ring_free, ring_locate, ring_candidates
from skewgroup._router cimport Router, least_of, least_of_two, least_loaded_all

cdef enum:
    LOW_MASK = 0xFFFFFFFF

cdef extern from *:
    int __builtin_clzll(unsigned long long) nogil


cdef inline int _floor_log2_ratio(count_t top, count_t count) noexcept nogil:
    # floor(log2(top / count)) = floor(log2(floor(top / count))) for top >= count > 0: an
    # integer bit length instead of a libm call per hot tuple.
    cdef unsigned long long q = <unsigned long long>(top // count)
    return 63 - __builtin_clzll(q) if q > 0 else 0


cdef class Fish(Router):
    cdef readonly int epoch
    cdef readonly double alpha
    cdef readonly double theta
    cdef readonly int k_max
    cdef readonly int virtual_nodes
    cdef readonly int d_min
    cdef readonly long long interval     # T in tuples, 0 = never
    cdef bint use_waits                   # Algorithm 3 with C_w * P_w instead of plain loads
    cdef StreamSummary summary
    cdef count_t top_count                # c of the most frequent key (f_top = top / total)
    cdef KeyMap chosen                    # hash -> M_k | (cache slot + 1) << 32
    cdef HashRing ring
    cdef object _pool_array               # [slots, n] cached candidates of hot keys
    cdef worker_t* pool
    cdef object _pool_d_array             # [slots] d the cached list was built for (0 = none)
    cdef int* pool_d
    cdef object _free_array               # stack of free slots
    cdef int* free_slots
    cdef int free_top
    cdef int slots
    cdef object _scratch_array            # candidates of a key without a cache slot
    cdef worker_t* scratch
    cdef object _wait_array               # C_w
    cdef double* wait
    cdef object _capacity_array           # P_w
    cdef double* capacity

    def __init__(self, int n, unsigned long long seed, int epoch, double alpha, double theta,
                 int k_max, int virtual_nodes, int d_min, capacities, interval):
        Router.__init__(self, n, seed)
        self.epoch = epoch
        self.alpha = alpha
        self.theta = theta
        self.k_max = k_max
        self.virtual_nodes = virtual_nodes
        self.d_min = d_min
        self.interval = interval or 0
        self.use_waits = capacities is not None or self.interval > 0
        self.top_count = 0
        ss_init(&self.summary, k_max)
        keymap_init(&self.chosen, 2 * k_max)
        self.ring.position = NULL
        ring_init(&self.ring, n, virtual_nodes, seed)
        caps = np.ones(n) if capacities is None else np.asarray(capacities, dtype=np.float64)
        self._set_worker_arrays(n, np.zeros(n), caps)
        # Hot keys are at most 1/θ at a time; K_max + 1/θ slots cover an epoch's churn.
        self.slots = k_max + int(1.0 / theta) + 1
        self._set_pool(np.zeros((self.slots, n), dtype=np.int32), np.zeros(self.slots, np.intc),
                       np.arange(self.slots - 1, -1, -1, dtype=np.intc), self.slots)

    def __dealloc__(self):
        ss_free(&self.summary)
        keymap_free(&self.chosen)
        ring_free(&self.ring)

    cdef _set_worker_arrays(self, int n, waits, caps):
        self._wait_array = np.ascontiguousarray(waits, dtype=np.float64)
        self._capacity_array = np.ascontiguousarray(caps, dtype=np.float64)
        self._scratch_array = np.zeros(n, dtype=np.int32)
        cdef double[::1] a = self._wait_array
        cdef double[::1] b = self._capacity_array
        cdef worker_t[::1] c = self._scratch_array
        self.wait, self.capacity, self.scratch = &a[0], &b[0], &c[0]

    cdef _set_pool(self, pool, pool_d, free_slots, int free_top):
        self._pool_array = pool
        self._pool_d_array = pool_d
        self._free_array = free_slots
        cdef worker_t[:, ::1] p = pool
        cdef int[::1] d = pool_d
        cdef int[::1] f = free_slots
        self.pool, self.pool_d, self.free_slots = &p[0, 0], &d[0], &f[0]
        self.free_top = free_top

    cdef void _end_epoch(self) noexcept with gil:
        # TimeDecayingUpdate (Algorithm 1, lines 23-26), then drop M_k and cached candidates of
        # keys the counters no longer hold.
        cdef long long i, slot, stale_count = 0
        cdef hash_t key
        cdef hash_t* stale
        cdef int c
        ss_decay(&self.summary, self.alpha)
        self.top_count = 0
        for c in range(self.summary.size):
            if self.summary.counts[c] > self.top_count:
                self.top_count = self.summary.counts[c]
        if self.chosen.size == 0:
            return
        stale = <hash_t*>malloc(self.chosen.size * sizeof(hash_t))
        if stale == NULL:
            return  # keep the entries: correct, only less tidy
        for i in range(self.chosen.capacity):
            key = self.chosen.keys[i]
            if key != EMPTY_KEY and ss_estimate(&self.summary, key) == 0:
                stale[stale_count] = key
                stale_count += 1
        for i in range(stale_count):
            slot = (keymap_get(&self.chosen, stale[i], 0) >> 32) - 1
            if slot >= 0:
                self.pool_d[slot] = 0
                self.free_slots[self.free_top] = <int>slot
                self.free_top += 1
            keymap_delete(&self.chosen, stale[i])
        free(stale)

    cdef inline worker_t _pick(self, const worker_t* candidates, int d) noexcept nogil:
        # Algorithm 3, lines 12-18: the shortest estimated wait, ties to the lowest id.
        cdef worker_t best, w
        cdef double best_wait, wait
        cdef int j
        if not self.use_waits:
            if d == self.n:  # every worker is a candidate: the O(1) amortised global argmin
                return least_loaded_all(&self.cursor, self.load, self.n)
            return least_of(self.load, candidates, d)
        best = candidates[0]
        best_wait = self.wait[best] * self.capacity[best]
        for j in range(1, d):
            w = candidates[j]
            wait = self.wait[w] * self.capacity[w]
            if wait < best_wait or (wait == best_wait and w < best):
                best, best_wait = w, wait
        return best

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef long long t, point, slot, m_k
        cdef long long* entry
        cdef hash_t h
        cdef count_t c_k
        cdef int d, index, n = self.n
        cdef worker_t two[2]
        cdef worker_t* candidates
        cdef worker_t w
        for i in range(m):
            t = self.routed + i
            if t > 0 and t % self.epoch == 0:
                self._end_epoch()
            if self.interval > 0 and t > 0 and t % self.interval == 0:
                for w in range(n):  # eq. (1), N_w already added to C_w as tuples were sent
                    self.wait[w] = (self.wait[w] * self.capacity[w] - self.interval) / self.capacity[w]
                    if self.wait[w] < 0:
                        self.wait[w] = 0
            h = hashes[i]
            c_k = ss_update(&self.summary, h)
            if c_k > self.top_count:
                self.top_count = c_k
            d = 2
            entry = NULL
            if c_k > self.theta * self.summary.total:
                # CHK: index = floor(log2(f_top / f_k)), d = n / 2^index, d >= d_min, M_k.
                index = _floor_log2_ratio(self.top_count, c_k)
                d = (n >> index) if index < 31 else 0
                if d < self.d_min:
                    d = self.d_min
                entry = keymap_upsert(&self.chosen, h, 0)
                m_k = entry[0] & LOW_MASK
                if m_k < d:
                    entry[0] = (entry[0] & ~(<long long>LOW_MASK)) | d
                else:
                    d = <int>m_k
            if d > n:
                d = n
            if d <= 2:
                point = ring_locate(&self.ring, h)
                two[0] = self.ring.owner[point]
                two[1] = self.ring.second[point]
                w = self._pick(two, d) if d == 2 else two[0]
            else:
                slot = (entry[0] >> 32) - 1
                if slot < 0 and self.free_top > 0:
                    self.free_top -= 1
                    slot = self.free_slots[self.free_top]
                    entry[0] |= (slot + 1) << 32
                candidates = self.pool + slot * n if slot >= 0 else self.scratch
                if slot < 0 or self.pool_d[slot] != d:
                    ring_candidates(&self.ring, h, d, candidates)
                    if slot >= 0:
                        self.pool_d[slot] = d
                w = self._pick(candidates, d)
            self.load[w] += 1
            if self.use_waits:
                self.wait[w] += 1
            out[i] = w

    def resize(self, int new_n):
        """Add or remove workers (ids 0 .. new_n-1) on the ring: only the keys of the arcs that
        move change candidates. Loads of the remaining workers are kept."""
        if new_n < 1:
            raise ValueError(f"The 'workers' parameter must be an int in [1, inf). Got {new_n}.")
        old_loads = self._load_array
        old_waits = self._wait_array
        keep = min(new_n, self.n)
        ring_free(&self.ring)
        ring_init(&self.ring, new_n, self.virtual_nodes, self.seed)
        self._allocate_loads(new_n)
        self._load_array[:keep] = old_loads[:keep]
        waits = np.zeros(new_n)
        waits[:keep] = old_waits[:keep]
        self._set_worker_arrays(new_n, waits, np.ones(new_n))
        self._set_pool(np.zeros((self.slots, new_n), dtype=np.int32), np.zeros(self.slots, np.intc),
                       self._free_array, self.free_top)
        Router.set_state(self, Router.get_state(self))  # re-derives the least-loaded cursor

    def get_state(self):
        state = Router.get_state(self)
        state.update(summary=ss_get_state(&self.summary), top_count=self.top_count,
                     chosen=keymap_get_state(&self.chosen), pool=self._pool_array.copy(),
                     pool_d=self._pool_d_array.copy(), free_slots=self._free_array.copy(),
                     free_top=self.free_top, wait=self._wait_array.copy())
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        ss_set_state(&self.summary, state["summary"])
        self.top_count = int(state["top_count"])
        keymap_set_state(&self.chosen, state["chosen"][0], state["chosen"][1])
        self._set_pool(np.array(state["pool"], dtype=np.int32).reshape(self.slots, self.n),
                       np.array(state["pool_d"], dtype=np.intc),
                       np.array(state["free_slots"], dtype=np.intc), int(state["free_top"]))
        self._set_worker_arrays(self.n, np.array(state["wait"], dtype=np.float64),
                                self._capacity_array)

    def stats(self):
        return {"keys_tracked": self.summary.size, "head_keys": self.chosen.size,
                "table_entries": int(self._pool_d_array.sum())}

    def state_bytes(self):
        return (Router.state_bytes(self) + ss_nbytes(&self.summary) + self.chosen.capacity * 16
                + self._pool_array.nbytes + self._pool_d_array.nbytes + self._free_array.nbytes
                + self._wait_array.nbytes + self._capacity_array.nbytes
                + self.ring.points * (8 + 4 + 4) + ((1 << self.ring.index_bits) + 1) * 8
                + self.n * 4)
