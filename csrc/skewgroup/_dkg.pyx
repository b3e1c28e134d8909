"""DKG (dkg §4): a generational key space finds skewed keys; only those scale out.

Key space (§4.1.2): Old (10 % of the expected distinct keys), Teenage (40 %) and Baby spaces hold
occurrence counts. Every P_1 tuples Baby's most frequent keys are promoted into Teenage, every
P_2 tuples Teenage's into Old (Algorithms 1-3: fill free places, then swap the source's most
frequent with the destination's least frequent while the latter is not more frequent). The
paper's 15 s / 60 s cycles and 15 s warm-up are tuple counts here, so runs are reproducible.

Routing (Algorithms 4-6): index = hash(k) mod n, candidates index .. index + N_m - 1 (mod n),
N_m = 2 by default; the target is the least loaded candidate (local loads in % of this
source's tuples). After warm-up, a key in Old space whose least loaded candidate is at or above
L_s = L_i + sqrt(L_i) (L_i = 100/n, eq. 3-4) scales out to index + N_m if that machine is less
loaded; N_m > 2 with at least two candidates under L_s scales down. N_m <= floor(100/L_s) + 1,
which reproduces the paper's Table 1.

Bounded state: Baby keeps its 50 % share plus the keys first seen since the last cycle (the
paper's Baby space is unbounded; "truncate BS to discard quite new items" is its own remedy), and
widths N_m > 2 are kept for keys in Old space only.
"""
from libc.math cimport sqrt, floor

import numpy as np

from skewgroup._types cimport hash_t, count_t, worker_t
from skewgroup._hash cimport choice
from skewgroup._keymap cimport (KeyMap, keymap_init, keymap_free, keymap_clear, keymap_get,
                                keymap_upsert, keymap_delete, keymap_get_state, keymap_set_state,
                                EMPTY_KEY)
from skewgroup._router cimport Router


def dkg_table(int machines):
    """(ideal load L_i %, threshold L_s %, max machines) for ``machines`` (DKG Table 1)."""
    ideal = 100.0 / machines
    threshold = ideal + ideal ** 0.5
    return ideal, threshold, min(machines, int(floor(100.0 / threshold)) + 1)


cdef class DKG(Router):
    cdef readonly int expected_keys
    cdef readonly long long promote_every
    cdef readonly long long promote_every_old
    cdef readonly long long warmup
    cdef readonly int old_size, teen_size, baby_size
    cdef readonly double ideal, threshold
    cdef readonly int max_width
    cdef KeyMap old_space, teen_space, baby_space   # hash -> occurrences
    cdef KeyMap width                               # hash -> N_m, for N_m > 2

    def __init__(self, int n, unsigned long long seed, int expected_keys, long long promote_every,
                 long long promote_every_old, long long warmup):
        Router.__init__(self, n, seed)
        self.expected_keys = expected_keys
        self.promote_every = promote_every
        self.promote_every_old = promote_every_old
        self.warmup = warmup
        self.old_size = max(1, expected_keys // 10)
        self.teen_size = max(1, (expected_keys * 4) // 10)
        self.baby_size = max(1, expected_keys - self.old_size - self.teen_size)
        self.ideal, self.threshold, self.max_width = dkg_table(n)
        keymap_init(&self.old_space, 2 * self.old_size)
        keymap_init(&self.teen_space, 2 * self.teen_size)
        keymap_init(&self.baby_space, 64)
        keymap_init(&self.width, 16)

    def __dealloc__(self):
        keymap_free(&self.old_space)
        keymap_free(&self.teen_space)
        keymap_free(&self.baby_space)
        keymap_free(&self.width)

    # --- key space ---------------------------------------------------------------------

    cdef void _promote(self, bint to_old) noexcept with gil:
        if to_old:
            self._promote_between(&self.teen_space, &self.old_space, self.old_size, False)
            # Widths are kept for Old keys only (bounded state).
            keys, _ = _items(&self.width)
            for key in keys.tolist():
                if keymap_get(&self.old_space, key, -1) < 0:
                    keymap_delete(&self.width, key)
        else:
            self._promote_between(&self.baby_space, &self.teen_space, self.teen_size, True)

    cdef void _promote_between(self, KeyMap* source, KeyMap* destination, int size,
                               bint truncate_source):
        # Algorithm 3 over both spaces sorted by occurrences (ties: lower hash first). At most
        # `size` items move in either direction, so only the source's top 2 * size matter.
        src_keys, src_counts = _items(source)
        dst_keys, dst_counts = _items(destination)
        src_order = np.lexsort((src_keys, -src_counts))
        head, rest = src_order[:2 * size], src_order[2 * size:]
        src = list(zip(src_counts[head].tolist(), src_keys[head].tolist()))
        dst = sorted(zip(dst_counts.tolist(), dst_keys.tolist()), key=lambda item: (-item[0], item[1]))
        while len(dst) < size and src:        # free places first
            dst.append(src.pop(0))
        dst.sort(key=lambda item: (-item[0], item[1]))
        for _ in range(len(dst)):
            if not src or dst[len(dst) - 1][0] > src[0][0]:
                break                          # "Lio > Fio: transition completed"
            first, last = src.pop(0), dst.pop()
            dst.insert(0, first)
            src.append(last)
        src += list(zip(src_counts[rest].tolist(), src_keys[rest].tolist()))
        if truncate_source:                   # "truncate BS to discard quite new items"
            src = sorted(src, key=lambda item: (-item[0], item[1]))[:self.baby_size]
        _fill(destination, dst)
        _fill(source, src)

    cdef inline void _count(self, hash_t h) noexcept nogil:
        cdef long long* slot
        if keymap_get(&self.old_space, h, -1) >= 0:
            slot = keymap_upsert(&self.old_space, h, 0)
        elif keymap_get(&self.teen_space, h, -1) >= 0:
            slot = keymap_upsert(&self.teen_space, h, 0)
        else:
            slot = keymap_upsert(&self.baby_space, h, 0)
        slot[0] += 1

    # --- routing -------------------------------------------------------------------------

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef long long t
        cdef hash_t h
        cdef int n = self.n, width, j, below
        cdef worker_t index, w, best, candidate
        cdef double scale, best_load, load, new_load
        cdef bint warm, old
        for i in range(m):
            t = self.routed + i
            if t > 0 and t % self.promote_every == 0:
                self._promote(False)
            if t > 0 and t % self.promote_every_old == 0:
                self._promote(True)
            h = hashes[i]
            self._count(h)
            index = choice(h, 0, n)
            width = <int>keymap_get(&self.width, h, 2)
            if width > n:
                width = n
            scale = 100.0 / (t if t > 0 else 1)   # loads in % of this source's tuples
            while True:
                # findBestCandidate (Algorithm 4): least loaded of index .. index + N_m - 1.
                best = index
                best_load = self.load[index] * scale
                below = 0
                for j in range(width):
                    w = (index + j) % n
                    load = self.load[w] * scale
                    if load < self.threshold:
                        below += 1
                    if load < best_load:
                        best, best_load = w, load
                warm = t >= self.warmup
                old = keymap_get(&self.old_space, h, -1) >= 0
                if warm and best_load >= self.threshold and old and width < self.max_width:
                    # shouldScaleOut (Algorithm 5): the next machine, if it is less loaded.
                    candidate = (index + width) % n
                    new_load = self.load[candidate] * scale
                    if new_load < best_load:
                        best = candidate
                        width += 1
                        keymap_upsert(&self.width, h, width)[0] = width
                    break
                if width > 2 and below >= 2:
                    # shouldScaleDown (Algorithm 6), then choose again with one machine less.
                    width -= 1
                    if width > 2:
                        keymap_upsert(&self.width, h, width)[0] = width
                    else:
                        keymap_delete(&self.width, h)
                    continue
                break
            self.load[best] += 1
            out[i] = best

    def get_state(self):
        state = Router.get_state(self)
        state.update(old_space=keymap_get_state(&self.old_space),
                     teen_space=keymap_get_state(&self.teen_space),
                     baby_space=keymap_get_state(&self.baby_space),
                     width=keymap_get_state(&self.width))
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        keymap_set_state(&self.old_space, state["old_space"][0], state["old_space"][1])
        keymap_set_state(&self.teen_space, state["teen_space"][0], state["teen_space"][1])
        keymap_set_state(&self.baby_space, state["baby_space"][0], state["baby_space"][1])
        keymap_set_state(&self.width, state["width"][0], state["width"][1])

    def stats(self):
        return {"keys_tracked": self.old_space.size + self.teen_space.size + self.baby_space.size,
                "head_keys": self.old_space.size, "table_entries": self.width.size}

    def state_bytes(self):
        return Router.state_bytes(self) + 16 * (self.old_space.capacity + self.teen_space.capacity
                                                + self.baby_space.capacity + self.width.capacity)


cdef tuple _items(const KeyMap* m):
    keys, values = keymap_get_state(m)
    live = keys != EMPTY_KEY
    return keys[live], values[live]


cdef void _fill(KeyMap* m, list items):
    keymap_free(m)
    keymap_init(m, 2 * len(items) + 16)
    for count, key in items:
        keymap_upsert(m, key, count)[0] = count
