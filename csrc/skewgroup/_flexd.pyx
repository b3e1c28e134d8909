"""FlexD (flexd §4.3-4.4, Algorithm 1): per-segment SpaceSaving, per-key worker sets grown by δ.

The stream is cut into segments of l tuples; SpaceSaving (⌈1/ε⌉ counters) counts the current
segment and f_t = estimated count / l. Per tuple:

* f_t < f: a low-frequency key, hashed to one worker h(k) (line 11);
* first time hot: the least loaded worker, T_f[k] = f (lines 14-16);
* f_t >= T_f[k]: the least loaded worker the key does not use yet joins its set and takes the
  tuple, T_f[k] *= δ (lines 18-20);
* otherwise: the least loaded worker of the key's set (line 22).

Our choices where the paper leaves values open (its Table 1 is not in the text): l = 10,000
tuples, f = 1/(5n) (D-Choices' head threshold), ε = f/2 (so ⌈2/f⌉ counters); the operator /
scheduler micro-batch of the paper maps onto Spark's micro-batches, and its clock onto tuple
counts. The two tables (T_f, worker sets as n-bit sets) keep, every `prune_every` tuples, the
`prune_keep` most recently used keys (the paper: "retained the top 50k records every 10 min");
between prunes at most `max_entries` keys have entries, later hot keys are hashed until the
next prune. So the state is bounded whatever the number of distinct keys.
"""
from libc.stdint cimport uint64_t

import numpy as np

from skewgroup._types cimport hash_t, count_t, worker_t
from skewgroup._hash cimport choice
from skewgroup._keymap cimport (KeyMap, keymap_init, keymap_free, keymap_clear, keymap_get,
                                keymap_upsert, keymap_delete, keymap_get_state, keymap_set_state)
from skewgroup._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_clear, ss_update,
                                     ss_get_state, ss_set_state, ss_nbytes)
from skewgroup._router cimport Router, least_loaded_all

cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil


cdef class FlexD(Router):
    cdef readonly double delta
    cdef readonly int segment
    cdef readonly double threshold
    cdef readonly int capacity
    cdef readonly long long prune_every
    cdef readonly int prune_keep
    cdef readonly int max_entries
    cdef int words                       # uint64 words per worker set
    cdef StreamSummary summary
    cdef KeyMap slot_of                  # hash -> slot
    cdef object _tf_array                # [max_entries] T_f
    cdef double* tf
    cdef object _last_array              # [max_entries] last tuple that used the entry
    cdef long long* last
    cdef object _keys_array              # [max_entries] key of the slot
    cdef hash_t* keys
    cdef object _bits_array              # [max_entries, words] worker sets
    cdef uint64_t* bits
    cdef object _free_array
    cdef int* free_slots
    cdef int free_top

    def __init__(self, int n, unsigned long long seed, double delta, int segment,
                 double threshold, int capacity, long long prune_every, int prune_keep):
        Router.__init__(self, n, seed)
        self.delta = delta
        self.segment = segment
        self.threshold = threshold
        self.capacity = capacity
        self.prune_every = prune_every
        self.prune_keep = prune_keep
        # Hot keys per segment are at most 1/f; so many segments pass between two prunes.
        self.max_entries = prune_keep + int((prune_every // segment + 1) * (1.0 / threshold + 1))
        self.words = (n + 63) // 64
        ss_init(&self.summary, capacity)
        keymap_init(&self.slot_of, 64)
        self._set_tables(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.uint64),
                         np.zeros((0, self.words), np.uint64), np.zeros(0, np.intc), 0)

    def __dealloc__(self):
        ss_free(&self.summary)
        keymap_free(&self.slot_of)

    cdef _set_tables(self, tf, last, keys, bits, free_slots, int free_top):
        self._tf_array, self._last_array, self._keys_array = tf, last, keys
        self._bits_array, self._free_array = bits, free_slots
        self.free_top = free_top
        cdef double[::1] a = tf
        cdef long long[::1] b = last
        cdef hash_t[::1] c = keys
        cdef uint64_t[:, ::1] d = bits
        cdef int[::1] e = free_slots
        self.tf = &a[0] if a.shape[0] else NULL
        self.last = &b[0] if b.shape[0] else NULL
        self.keys = &c[0] if c.shape[0] else NULL
        self.bits = &d[0, 0] if d.shape[0] else NULL
        self.free_slots = &e[0] if e.shape[0] else NULL

    cdef int _grow(self) noexcept with gil:
        # Tables grow by doubling up to max_entries, so the state follows the hot keys seen.
        cdef int old = self._tf_array.shape[0]
        cdef int new = min(self.max_entries, max(64, 2 * old))
        if new == old:
            return 0
        tf = np.zeros(new); tf[:old] = self._tf_array
        last = np.zeros(new, np.int64); last[:old] = self._last_array
        keys = np.zeros(new, np.uint64); keys[:old] = self._keys_array
        bits = np.zeros((new, self.words), np.uint64); bits[:old] = self._bits_array
        free_slots = np.zeros(new, np.intc)
        free_slots[:self.free_top] = self._free_array[:self.free_top]
        added = np.arange(new - 1, old - 1, -1, dtype=np.intc)
        free_slots[self.free_top:self.free_top + added.size] = added
        self._set_tables(tf, last, keys, bits, free_slots, self.free_top + added.size)
        return 1

    cdef void _prune(self) noexcept with gil:
        # Keep the prune_keep most recently used entries (flexd §4.4, "retained the top 50k").
        used = self._tf_array.shape[0] - self.free_top
        if used <= self.prune_keep:
            return
        in_use = np.ones(self._tf_array.shape[0], dtype=bool)
        in_use[self._free_array[:self.free_top]] = False
        slots = np.flatnonzero(in_use)
        order = np.lexsort((slots, -self._last_array[slots]))
        drop = slots[order[self.prune_keep:]]
        cdef long long s
        for s in drop.tolist():
            keymap_delete(&self.slot_of, self.keys[s])
            self.tf[s] = 0
            for w in range(self.words):
                self.bits[s * self.words + w] = 0
            self.free_slots[self.free_top] = <int>s
            self.free_top += 1

    cdef inline worker_t _least_in_set(self, long long slot) noexcept nogil:
        cdef const uint64_t* row = self.bits + slot * self.words
        cdef worker_t best = -1, w
        cdef uint64_t word
        cdef int j
        for j in range(self.words):
            word = row[j]
            while word:
                w = j * 64 + __builtin_ctzll(word)
                if best < 0 or self.load[w] < self.load[best]:
                    best = w
                word &= word - 1
        return best

    cdef inline worker_t _least_unused(self, long long slot) noexcept nogil:
        cdef const uint64_t* row = self.bits + slot * self.words
        cdef worker_t best = -1, w
        for w in range(self.n):
            if not (row[w >> 6] >> (w & 63)) & 1:
                if best < 0 or self.load[w] < self.load[best]:
                    best = w
        return best

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef long long t, slot
        cdef hash_t h
        cdef double f_t
        cdef worker_t w
        for i in range(m):
            t = self.routed + i
            if t > 0 and t % self.segment == 0:
                ss_clear(&self.summary)  # a new segment: frequencies restart (§4.3)
            if t > 0 and t % self.prune_every == 0:
                self._prune()
            h = hashes[i]
            f_t = <double>ss_update(&self.summary, h) / self.segment
            w = -1
            if f_t >= self.threshold:
                slot = keymap_get(&self.slot_of, h, -1)
                if slot < 0:
                    if self.free_top == 0:
                        self._grow()
                    if self.free_top > 0:
                        # First time hot: the least loaded worker, T_f[k] = f.
                        self.free_top -= 1
                        slot = self.free_slots[self.free_top]
                        keymap_upsert(&self.slot_of, h, slot)[0] = slot
                        self.keys[slot] = h
                        self.tf[slot] = self.threshold
                        w = least_loaded_all(&self.cursor, self.load, self.n)
                        self.bits[slot * self.words + (w >> 6)] |= (<uint64_t>1) << (w & 63)
                elif f_t >= self.tf[slot] and self._least_unused(slot) >= 0:
                    # Over its threshold again: one more worker, the least loaded unused one.
                    w = self._least_unused(slot)
                    self.bits[slot * self.words + (w >> 6)] |= (<uint64_t>1) << (w & 63)
                    self.tf[slot] *= self.delta
                else:
                    w = self._least_in_set(slot)
                if slot >= 0:
                    self.last[slot] = t
            if w < 0:
                w = choice(h, 0, self.n)  # low frequency: the hash worker
            self.load[w] += 1
            out[i] = w

    def get_state(self):
        state = Router.get_state(self)
        state.update(summary=ss_get_state(&self.summary), slot_of=keymap_get_state(&self.slot_of),
                     tf=self._tf_array.copy(), last=self._last_array.copy(),
                     keys=self._keys_array.copy(), bits=self._bits_array.copy(),
                     free_slots=self._free_array.copy(), free_top=self.free_top)
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        ss_set_state(&self.summary, state["summary"])
        keymap_set_state(&self.slot_of, state["slot_of"][0], state["slot_of"][1])
        self._set_tables(np.array(state["tf"], dtype=np.float64),
                         np.array(state["last"], dtype=np.int64),
                         np.array(state["keys"], dtype=np.uint64),
                         np.array(state["bits"], dtype=np.uint64).reshape(-1, self.words),
                         np.array(state["free_slots"], dtype=np.intc), int(state["free_top"]))

    def stats(self):
        used = self._tf_array.shape[0] - self.free_top
        set_sizes = np.unpackbits(self._bits_array.view(np.uint8)).sum() if used else 0
        return {"keys_tracked": self.summary.size, "head_keys": int(used),
                "table_entries": int(set_sizes)}

    def state_bytes(self):
        return (Router.state_bytes(self) + ss_nbytes(&self.summary) + self.slot_of.capacity * 16
                + self._tf_array.nbytes + self._last_array.nbytes + self._keys_array.nbytes
                + self._bits_array.nbytes + self._free_array.nbytes)
