"""Pd-Stream (pd-stream §V): sliding sampling window, hot-key probability table, routing table.

Per tuple (Algorithm 2), with the window slid first so that n_k counts this tuple (Fig. 3: "key 1,
which now appears 6 times"):

1. push k into the window of the last N keys; the key leaving it loses one occurrence, and its
   routing-table entry is dropped when it has none left (steps 18-22);
2. n_k = 1: a non-hot key, PKG over h_1(k), h_2(k) (step 3);
3. n_k >= 2: the key's entry (created with {h_1(k), h_2(k)}, steps 7-9) holds its candidates C;
   n̂ = floor(p̂(n_k) * n) from the probability table (eq. 16); if n̂ > |C| the least loaded of
   all workers joins C unless it is already there (steps 13-14);
4. the target is the least loaded worker of C (step 17).

One KeyMap holds, per key in the window, its occurrences (low 32 bits) and its routing-table
slot + 1 (high 32 bits, 0 = no entry), so a tuple costs two map probes (the key entering, the
key leaving). An entry's candidates live in a pool of N slots of n worker ids (at most N keys are
in the window), so the state is bounded by O(N * n) whatever the number of distinct keys.

Steps 13 and 17 ask for the least loaded of all workers and of C. Both come from the workers
grouped by load level (_levels.pxd, as D-Choices and FISH do), with C as its bit set: a few word
ANDs instead of a scan of C, which grows to n̂ (about 50 of 128 workers for the hottest key of a
Zipf 1.4 stream). Same workers, ties to the lowest id as the scan: the ids are identical to the
scan's (tests/test_partitioner.py holds the router contract; speed in bench/RESULTS.md).
"""
cimport cython
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy, memset

import numpy as np

from skewgroup._routing._keymap import KEYMAP_SLOT_BYTES, check_keymap, stored_keys
from skewgroup._routing._router import LOAD_VECTOR_BYTES
from skewgroup._routing._validation import (bad, check_array, check_distinct, check_field_int,
                                            check_values)

from skewgroup._routing._types cimport hash_t, count_t, worker_t
from skewgroup._routing._hash cimport choice
from skewgroup._routing._keymap cimport (KeyMap, keymap_init, keymap_free, keymap_get,
                                         keymap_upsert, keymap_delete, keymap_get_state,
                                         keymap_set_state)
from skewgroup._routing._binomial cimport probability_table
from skewgroup._routing._router cimport Router, least_loaded_all, least_of_two, least_of
from skewgroup._routing._levels cimport (LoadLevels, levels_init, levels_free, levels_add_load,
                                         levels_least_loaded, levels_least_in)


cdef enum:
    COUNT_MASK = 0xFFFFFFFF


STATE_FIELDS = ("window_keys", "ring_pos", "ring_fill", "window_map", "pool", "pool_size",
                "free_slots", "pool_bits", "free_top")


def pdstream_state_bound(int n, int window):
    """Window N hashes, N routing-table slots of n candidates (a list and a bitset), a
    KeyMap of <= N keys: 8n + N (8 + 4n + 8 ceil(n/64) + 8 + 4 + 4 * 16) bytes; N = 2n by
    default, so O(n^2)."""
    words = (n + 63) // 64
    return (LOAD_VECTOR_BYTES * n
            + window * (8 + 4 * n + 8 * words + 8 + 4 + 4 * KEYMAP_SLOT_BYTES) + 256)


cdef class PdStream(Router):
    cdef readonly int window            # N
    cdef readonly double p_hat          # P̂ of Algorithm 1
    cdef readonly double epsilon
    cdef object _nhat_array             # [N + 1] n̂ for n_k (index 0 unused)
    cdef int* nhat
    cdef object _window_array           # [N] ring buffer of the last N hashes
    cdef hash_t* ring
    cdef long long ring_pos             # next slot to overwrite
    cdef long long ring_fill            # keys in the window (< N only while warming up)
    cdef KeyMap window_map              # hash -> occurrences | (entry slot + 1) << 32
    cdef object _pool_array             # [N, n] candidate workers per entry
    cdef worker_t* pool
    cdef object _pool_size_array        # [N] |C| per slot
    cdef int* pool_size
    cdef object _bits_array             # [N, words] membership bitset of each entry's C
    cdef unsigned long long* bits
    cdef int words
    cdef object _free_array             # stack of free pool slots
    cdef int* free_slots
    cdef int free_top
    # Workers by load level (module docstring): derived from the loads, rebuilt on restore.
    cdef LoadLevels levels
    cdef bint use_levels
    cdef count_t* slot_low              # [N] <= the least load of the slot's C (levels_least_in)

    def __init__(self, int n, unsigned long long seed, int window, double p_hat, double epsilon):
        Router.__init__(self, n, seed)
        self.window = window
        self.p_hat = p_hat
        self.epsilon = epsilon
        probabilities = np.empty(window, dtype=np.float64)
        cdef double[::1] pv = probabilities
        with nogil:
            probability_table(window, p_hat, epsilon, &pv[0])
        nhat = np.zeros(window + 1, dtype=np.int32)
        nhat[1:] = np.floor(probabilities * n).astype(np.int32)
        self.words = (n + 63) // 64
        self._set_arrays(nhat, np.zeros(window, dtype=np.uint64),
                         np.zeros((window, n), dtype=np.int32), np.zeros(window, dtype=np.int32),
                         np.arange(window - 1, -1, -1, dtype=np.int32),
                         np.zeros((window, self.words), dtype=np.uint64))
        self.free_top = window
        self.ring_pos = 0
        self.ring_fill = 0
        keymap_init(&self.window_map, 2 * window)
        self._setup_levels()

    def __dealloc__(self):
        keymap_free(&self.window_map)
        levels_free(&self.levels)
        free(self.slot_low)

    cdef _setup_levels(self):
        # After any change of the loads (init, restore). Without memory for the levels routing
        # stays exact, by scans of C: no error.
        free(self.slot_low)
        self.slot_low = <count_t*>calloc(self.window, sizeof(count_t))
        self.use_levels = (self.slot_low != NULL
                           and levels_init(&self.levels, self.load, self.n) == 0)

    cdef _set_arrays(self, nhat, ring, pool, pool_size, free_slots, bits):
        cdef unsigned long long[:, ::1] g = bits
        self._bits_array = bits
        self.bits = &g[0, 0]
        cdef int[::1] a = nhat
        cdef hash_t[::1] b = ring
        cdef worker_t[:, ::1] c = pool
        cdef int[::1] d = pool_size
        cdef int[::1] e = free_slots
        self._nhat_array, self._window_array, self._pool_array = nhat, ring, pool
        self._pool_size_array, self._free_array = pool_size, free_slots
        self.nhat, self.ring, self.pool = &a[0], &b[0], &c[0, 0]
        self.pool_size, self.free_slots = &d[0], &e[0]

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef hash_t h, leaving
        cdef long long n_k, slot
        cdef long long* entry
        cdef worker_t target, w, h1, h2
        cdef worker_t* candidates
        cdef int size
        cdef unsigned long long* member
        for i in range(m):
            h = hashes[i]
            # Steps 18-22: slide the window; drop the leaving key's entry when it is gone.
            if self.ring_fill == self.window:
                leaving = self.ring[self.ring_pos]
                entry = keymap_upsert(&self.window_map, leaving, 0)
                entry[0] -= 1
                if (entry[0] & COUNT_MASK) == 0:
                    slot = (entry[0] >> 32) - 1
                    if slot >= 0:
                        self.free_slots[self.free_top] = <int>slot
                        self.free_top += 1
                    keymap_delete(&self.window_map, leaving)
            else:
                self.ring_fill += 1
            self.ring[self.ring_pos] = h
            self.ring_pos += 1
            if self.ring_pos == self.window:
                self.ring_pos = 0
            entry = keymap_upsert(&self.window_map, h, 0)
            entry[0] += 1
            n_k = entry[0] & COUNT_MASK

            h1 = choice(h, 0, self.n)
            h2 = choice(h, 1, self.n)
            if n_k == 1:
                # Step 3: a non-hot key goes PKG's way.
                target = least_of_two(self.load, h1, h2)
            else:
                slot = (entry[0] >> 32) - 1
                if slot < 0:
                    # Steps 7-9: a new entry with the two hash choices.
                    self.free_top -= 1
                    slot = self.free_slots[self.free_top]
                    entry[0] |= (slot + 1) << 32
                    candidates = self.pool + slot * self.n
                    member = self.bits + slot * self.words
                    memset(member, 0, self.words * sizeof(unsigned long long))
                    candidates[0] = h1
                    member[h1 >> 6] |= 1ULL << (h1 & 63)
                    self.pool_size[slot] = 1
                    self.slot_low[slot] = 0
                    if h2 != h1:
                        candidates[1] = h2
                        member[h2 >> 6] |= 1ULL << (h2 & 63)
                        self.pool_size[slot] = 2
                candidates = self.pool + slot * self.n
                member = self.bits + slot * self.words
                size = self.pool_size[slot]
                # The globally least loaded worker (ties: lowest id), when it is in C, is also
                # C's least loaded: the O(1) amortised cursor spares the scan of C.
                if self.use_levels:
                    w = levels_least_loaded(&self.levels)
                else:
                    w = least_loaded_all(&self.cursor, self.load, self.n)
                # Steps 12-15: grow C by the globally least loaded worker when n̂ > |C|.
                if self.nhat[n_k] > size and not (member[w >> 6] >> (w & 63)) & 1:
                    candidates[size] = w
                    member[w >> 6] |= 1ULL << (w & 63)
                    size += 1
                    self.pool_size[slot] = size
                    # w holds the global minimum: C's least load can be no higher.
                    self.slot_low[slot] = self.load[w]
                if (member[w >> 6] >> (w & 63)) & 1:
                    target = w
                elif self.use_levels:
                    target = levels_least_in(&self.levels, self.load, member, &self.slot_low[slot])
                else:
                    target = least_of(self.load, candidates, size)
            if self.use_levels:
                levels_add_load(&self.levels, self.load, self.n, target)
            else:
                self.load[target] += 1
            out[i] = target

    def get_state(self):
        state = Router.get_state(self)
        state.update(
            window_keys=self._window_array.copy(), ring_pos=self.ring_pos,
            ring_fill=self.ring_fill, window_map=keymap_get_state(&self.window_map), pool=self._pool_array.copy(),
            pool_size=self._pool_size_array.copy(), free_slots=self._free_array.copy(),
            pool_bits=self._bits_array.copy(),
            free_top=self.free_top,
        )
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        self._set_arrays(self._nhat_array,
                         np.array(state["window_keys"], dtype=np.uint64),
                         np.array(state["pool"], dtype=np.int32).reshape(self.window, self.n),
                         np.array(state["pool_size"], dtype=np.int32),
                         np.array(state["free_slots"], dtype=np.int32),
                         np.array(state["pool_bits"], dtype=np.uint64).reshape(self.window, self.words))
        self.ring_pos = int(state["ring_pos"])
        self.ring_fill = int(state["ring_fill"])
        self.free_top = int(state["free_top"])
        keymap_set_state(&self.window_map, state["window_map"][0], state["window_map"][1])
        self._setup_levels()

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def check_state(self, state):
        """The window, its key map and the routing-table pool (module docstring)."""
        self.check_base(state, STATE_FIELDS)
        cdef object window = self.window, workers = self.n   # Python ints: window << 32
        ring = check_array("window_keys", state["window_keys"], np.uint64, (window,))
        fill = check_field_int("ring_fill", state["ring_fill"], 0, window)
        # The ring fills from slot 0, so while it is not full the next slot is the fill.
        position = check_field_int("ring_pos", state["ring_pos"], 0, window - 1)
        if fill < window and position != fill:
            raise bad("ring_pos", f"is {position}; while the window fills it must equal "
                                  f"ring_fill ({fill})")
        occupied, keys, values = check_keymap("window_map", state["window_map"],
                                              self.state_bound() // KEYMAP_SLOT_BYTES)
        # The map holds each key in the window with its occurrences (low 32 bits): a leaving
        # key is found and decremented, and n_k indexes the n̂ table of N + 1 entries.
        in_window, occurrences = np.unique(stored_keys(ring[:fill]), return_counts=True)
        order = np.argsort(keys[occupied])
        held, entries = keys[occupied][order], values[occupied][order]
        if not np.array_equal(held, in_window):
            raise bad("window_map", "does not hold exactly the keys in the window")
        check_values("window_map#1", entries, 0, (window << 32) | window, "entries")
        if not np.array_equal(entries & 0xFFFFFFFF, occurrences):
            raise bad("window_map#1", "does not count each key's occurrences in the window")
        # Routing-table slots (high 32 bits, slot + 1): in use by one key each, the others on
        # the free stack, so a new entry always finds a free slot.
        slots = (entries >> 32) - 1
        check_values("window_map#1", slots, -1, window - 1,
                     "routing-table slots (high bits - 1)")
        used = slots[slots >= 0]
        check_distinct("window_map#1", used, "routing-table slot")
        free_top = check_field_int("free_top", state["free_top"], 0, window)
        free_slots = check_array("free_slots", state["free_slots"], np.int32,
                                 (window,))[:free_top]
        check_values("free_slots", free_slots, 0, window - 1, "free routing-table slots")
        check_distinct("free_slots", free_slots, "the free slot")
        if np.isin(free_slots, used).any() or used.size + free_top != window:
            raise bad("free_slots", f"with free_top {free_top} must hold exactly the "
                                    f"{window - used.size} routing-table slots not in use")
        # The entries in use: |C| distinct workers in [0, n), and the bit set of exactly them
        # (levels_least_in walks the set bits as worker ids).
        pool = check_array("pool", state["pool"], np.int32, (window, workers))[used]
        sizes = check_array("pool_size", state["pool_size"], np.int32, (window,))[used]
        bits = check_array("pool_bits", state["pool_bits"], np.uint64,
                           (window, self.words))[used]
        check_values("pool_size", sizes, 1, workers, "sizes of the entries in use")
        in_entry = np.arange(workers)[None, :] < sizes[:, None]
        check_values("pool", pool[in_entry], 0, workers - 1, "candidate worker ids")
        rows, columns = np.nonzero(in_entry)
        members = pool[rows, columns]
        pairs = rows.astype(np.int64) * workers + members
        if np.unique(pairs).size != pairs.size:
            raise bad("pool", "lists a worker twice in one entry")
        expected = np.zeros_like(bits)
        np.bitwise_or.at(expected, (rows, members >> 6),
                         np.left_shift(np.uint64(1), (members & 63).astype(np.uint64)))
        if not np.array_equal(expected, bits):
            raise bad("pool_bits", "does not hold exactly the workers of each entry in use")

    def state_bound(self):
        return pdstream_state_bound(self.n, self.window)

    def stats(self):
        entries = self.window - self.free_top
        in_use = np.ones(self.window, dtype=bool)
        in_use[self._free_array[:self.free_top]] = False
        return {"keys_tracked": self.window_map.size, "head_keys": entries,
                "table_entries": int(self._pool_size_array[in_use].sum())}

    def state_bytes(self):
        return (Router.state_bytes(self) + self._window_array.nbytes + self._pool_array.nbytes
                + self._pool_size_array.nbytes + self._free_array.nbytes + self._nhat_array.nbytes
                + self._bits_array.nbytes
                + self.window_map.capacity * 16)

    @property
    def candidate_counts(self):
        """n̂ per n_k (index n_k), from the probability table."""
        return self._nhat_array.copy()
