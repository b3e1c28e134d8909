"""DKG, Dynamic Key Grouping (dkg §4): generational key space, contiguous candidates, thresholds.

Per tuple, on a tuple-count clock (so one call or any chunks route the same):

1. every P_1 tuples Baby space is sorted, truncated and its best items promoted to Teenage
   space; every P_2 tuples the same from Teenage to Old space (§4.1.3, Algorithms 1-3);
2. the key's Key Item is found (Old, Teenage or Baby space; a new key enters Baby space) and
   its occurrences go up by one (§4.1.2);
3. index = hash(k) mod n (eq. 5) and the candidates are index .. index + N_m - 1 (mod n), with
   N_m = 2 unless the key has scaled (§4.4); the target is the least loaded candidate
   (findBestCandidate of Algorithm 4), NLL the number of candidates under L_s;
4. scale out (Algorithm 5): after the warm-up, when that least load is >= L_s and the key is in
   Old space, candidate index + N_m is tried and taken (N_m += 1) if it is less loaded; N_m
   never exceeds floor(100 / L_s) + 1 (§4.3, Table 1). Otherwise scale down (Algorithm 6):
   while N_m > 2 and NLL >= 2, N_m -= 1 and the choice is made again (Algorithm 4's recursion).

Loads are percentages of the tuples this source has routed so far: L_i = 100 / n and
L_s = L_i + sqrt(L_i) (eqs. 3, 4). DKG lets a machine reach L_s before an Old key spreads, so
on a skewed stream the most loaded machine ends near L_s: LI -> L_s / L_i - 1 = sqrt(n / 100)
(measured on Zipf z = 1.4, 10^6 tuples: 0.800 at n = 64, 1.132 at n = 128; PKG 9.3 and 19.6).
That is the balance the paper designs for (§4.3), not the near-zero LI of FlexD or W-Choices.

Where the paper is open, we decide (each a comment below too):

* Time is counted in tuples: the 15 s / 60 s cycles and the 15 s warm-up become P_1, P_2 and
  ``warmup`` tuples (DKGConfig gives the conversion), so runs are reproducible.
* Algorithm 3 swaps while the destination's last item has no more occurrences than the source's
  first, so it leaves the destination holding the top |DS| items of DS ∪ SS (ties to the
  source). We compute exactly that with a merge; an empty destination slot counts as an item
  with no occurrences (read literally, the loop over an empty DS would never promote anything).
* "Truncate BS to discard quite new items" (Algorithm 1) keeps the Baby space's 50 % share of
  the expected keys, the items with the most occurrences; the others are forgotten (and come
  back as new Key Items). This is what bounds the memory: at most E + P_1 Key Items are alive
  (E after a truncation, plus at most one new key per tuple until the next), so the key map
  holds at most pow2ceil(2 (E + P_1)) slots of 16 bytes: 512 KiB with the defaults.
* When both cycles fall on the same tuple, Baby -> Teenage runs first.
* Least loaded breaks ties by the lowest worker id (docs/algorithms.md#ties); Algorithm 4
  keeps the first candidate in index order instead.

A Key Item is one int64 in a KeyMap (hash -> item): occurrences in the low 40 bits (saturating
at 2^40 - 1), N_m in the next 21 bits (0 = the default 2, so only scaled keys carry one, as
§4.4 says), and the space in the top bits.
"""
cimport cython
from libc.math cimport floor, sqrt
from libc.stdlib cimport qsort

import numpy as np

from skewgroup._routing._keymap import KEYMAP_SLOT_BYTES, check_keymap
from skewgroup._routing._router import LOAD_VECTOR_BYTES
from skewgroup._routing._validation import bad, check_values

from skewgroup._routing._types cimport hash_t, count_t, worker_t
from skewgroup._routing._hash cimport choice
from skewgroup._routing._keymap cimport (KeyMap, EMPTY_KEY, keymap_init, keymap_free, keymap_clear,
                                         keymap_upsert, keymap_get_state, keymap_set_state)
from skewgroup._routing._router cimport Router, WORKER_BITS, next_tick

# --- Key Item packing ------------------------------------------------------------------------

cdef enum:
    BABY = 0
    TEENAGE = 1
    OLD = 2

cdef long long COUNT_MASK = (1LL << 40) - 1
cdef int MACHINES_SHIFT = 40
cdef long long MACHINES_MASK = (1LL << 21) - 1
cdef int SPACE_SHIFT = 61


cdef inline long long item_count(long long item) noexcept nogil:
    return item & COUNT_MASK

cdef inline int item_machines(long long item) noexcept nogil:
    return <int>((item >> MACHINES_SHIFT) & MACHINES_MASK)

cdef inline int item_space(long long item) noexcept nogil:
    return <int>(item >> SPACE_SHIFT)

cdef inline long long make_item(long long count, int machines, int space) noexcept nogil:
    return (count | ((<long long>machines) << MACHINES_SHIFT)
            | ((<long long>space) << SPACE_SHIFT))


cdef inline void _scan_run(const count_t* load, int start, int length, count_t threshold,
                           unsigned long long* best, int* below) noexcept nogil:
    # findBestCandidate over load[start .. start + length): the (load, id) minimum packed into
    # one integer (ties to the lowest id) and the count under the threshold, with two
    # independent accumulators so consecutive machines do not wait on each other.
    cdef unsigned long long b0 = best[0], b1 = best[0], p0, p1
    cdef int c0 = 0, c1 = 0, j = 0, w
    while j + 2 <= length:
        w = start + j
        p0 = ((<unsigned long long>load[w]) << WORKER_BITS) | <unsigned long long>w
        p1 = ((<unsigned long long>load[w + 1]) << WORKER_BITS) | <unsigned long long>(w + 1)
        b0 = p0 if p0 < b0 else b0
        b1 = p1 if p1 < b1 else b1
        c0 += load[w] < threshold
        c1 += load[w + 1] < threshold
        j += 2
    if j < length:
        w = start + j
        p0 = ((<unsigned long long>load[w]) << WORKER_BITS) | <unsigned long long>w
        b0 = p0 if p0 < b0 else b0
        c0 += load[w] < threshold
    best[0] = b0 if b0 < b1 else b1
    below[0] += c0 + c1


# An item taken out of the key map for sorting and promotion.
cdef struct Entry:
    hash_t key
    long long item


cdef inline bint better(const Entry* a, const Entry* b) noexcept nogil:
    # "More occurrences" order of the spaces (§4.1.3); equal counts by the lower hash so a
    # promotion never depends on where a key sat in the map.
    cdef long long ca = item_count(a.item), cb = item_count(b.item)
    return ca > cb or (ca == cb and a.key < b.key)


cdef int _by_occurrences_desc(const void* a, const void* b) noexcept nogil:
    if better(<const Entry*>a, <const Entry*>b):
        return -1
    if better(<const Entry*>b, <const Entry*>a):
        return 1
    return 0


cdef void _sift_down(Entry* heap, int size, int i) noexcept nogil:
    # Min-heap by `better`: the root is the worst item kept so far.
    cdef int child
    cdef Entry tmp
    while True:
        child = 2 * i + 1
        if child >= size:
            return
        if child + 1 < size and better(&heap[child], &heap[child + 1]):
            child += 1
        if not better(&heap[i], &heap[child]):
            return
        tmp = heap[i]
        heap[i] = heap[child]
        heap[child] = tmp
        i = child


cdef void _heap_offer(Entry* heap, int* size, int capacity, Entry e) noexcept nogil:
    # Keep the `capacity` best items seen: O(log capacity) per kept item, O(1) per rejected one.
    cdef int i, parent
    cdef Entry tmp
    if size[0] < capacity:
        i = size[0]
        heap[i] = e
        size[0] += 1
        while i > 0:
            parent = (i - 1) // 2
            if not better(&heap[parent], &heap[i]):
                break
            tmp = heap[i]
            heap[i] = heap[parent]
            heap[parent] = tmp
            i = parent
    elif capacity > 0 and better(&e, &heap[0]):
        heap[0] = e
        _sift_down(heap, capacity, 0)


cdef int _promote(Entry* dst, int dst_size, int dst_cap, int dst_space,
                  Entry* src, int src_size, int src_space) noexcept nogil:
    """promoteToNextSpace (Algorithm 3) over two lists sorted best first.

    Afterwards the destination holds the best dst_cap items of both (ties to the source, as the
    loop swaps unless the destination's last item has *more* occurrences); the space bits of
    every item are rewritten. Returns how many source items moved up.
    """
    cdef int i = 0, j = 0, taken = 0, moved = 0
    while taken < dst_cap and (i < src_size or j < dst_size):
        if i < src_size and (j >= dst_size
                             or item_count(src[i].item) >= item_count(dst[j].item)):
            src[i].item = make_item(item_count(src[i].item), item_machines(src[i].item), dst_space)
            i += 1
            moved += 1
        else:
            j += 1
        taken += 1
    # Destination items past the cut fall back to the source space ("add Li to tail of SS").
    while j < dst_size:
        dst[j].item = make_item(item_count(dst[j].item), item_machines(dst[j].item), src_space)
        j += 1
    return moved


def dkg_table(int machines):
    """(L_i, L_s, max machines) of dkg §4.3 for ``machines`` workers (the paper's Table 1).

    L_i = 100 / m is the ideal load in percent (eq. 3), L_s = L_i + sqrt(L_i) the scale-out
    threshold (eq. 4) and floor(100 / L_s) + 1 the most machines one key may spread over.

    >>> dkg_table(10)[2]
    8
    """
    if machines < 1:
        raise ValueError(f"The 'machines' parameter must be an int in [1, inf). Got {machines} instead.")
    cdef double ideal = 100.0 / machines
    cdef double threshold = ideal + sqrt(ideal)
    return ideal, threshold, int(floor(100.0 / threshold)) + 1


def dkg_limits(long long expected_keys, long long promote_every):
    """((Old, Teenage, Baby) sizes, most key-map slots) for E = ``expected_keys``, P_1.

    The spaces hold 10 %, 40 % and the remaining 50 % of E, at least one Key Item each
    (§4.1.2). Right after a Baby -> Teenage cycle at most E' = their sum are alive, and the
    next P_1 tuples add at most P_1 new ones; a KeyMap at load <= 1/2 then never holds more
    than pow2ceil(max(16, 2 (E' + P_1))) slots.
    """
    old = max(1, expected_keys // 10)
    teenage = max(1, (4 * expected_keys) // 10)
    baby = max(1, expected_keys - old - teenage)
    slots = 16
    while slots < 2 * (old + teenage + baby + promote_every):
        slots *= 2
    return (old, teenage, baby), slots


def dkg_state_bound(int n, long long expected_keys, long long promote_every):
    """Loads, the Key Item map and the promotion workspace. At most E' + P_1 Key Items are
    alive (E' = the three spaces' sizes, about E, after each truncation; one new key per
    tuple until the next), so the map has at most pow2ceil(max(16, 2 (E' + P_1))) slots of 16
    bytes (``dkg_limits``): 8n + 16 slots + 32 E' bytes, about 512 KiB with the defaults."""
    spaces, map_slots = dkg_limits(expected_keys, promote_every)
    return LOAD_VECTOR_BYTES * n + KEYMAP_SLOT_BYTES * map_slots + 32 * sum(spaces) + 256


cdef class DKG(Router):
    """Dynamic Key Grouping (dkg §4); see the module docstring for the per-tuple steps.

    Parameters
    ----------
    n, seed : int
        Workers and hash seed (Router).
    expected_keys : int
        E, the expected number of distinct keys: Old space holds 10 %, Teenage space 40 %, Baby
        space 50 % of it after each truncation (§4.1.2; the paper uses E = 100).
    promote_every, promote_every_old : int
        P_1 and P_2, tuples between Baby -> Teenage and Teenage -> Old promotions (the paper's
        15 s and 60 s cycles, Algorithms 1 and 2).
    warmup : int
        Tuples routed before scaling out is allowed (isWarmUp of Algorithm 5, 15 s in the paper).
    """
    cdef readonly long long expected_keys
    cdef readonly long long promote_every
    cdef readonly long long promote_every_old
    cdef readonly long long warmup
    cdef readonly int old_capacity
    cdef readonly int teenage_capacity
    cdef readonly int baby_capacity
    cdef readonly double ideal_load         # L_i, percent
    cdef readonly double threshold_load     # L_s, percent
    cdef readonly int max_machines          # floor(100 / L_s) + 1, at most n
    cdef int base_machines                  # N_m of a key that never scaled: 2 (1 when n = 1)
    cdef double threshold_fraction          # L_s / 100
    cdef KeyMap items                       # hash -> Key Item
    cdef object _scratch_array              # promotion workspace: old | teenage | baby lists
    cdef Entry* scratch

    def __init__(self, int n, unsigned long long seed, long long expected_keys,
                 long long promote_every, long long promote_every_old, long long warmup):
        # The parameters come checked from DKGConfig (skewgroup._routing.config), the only builder.
        Router.__init__(self, n, seed)
        self.expected_keys = expected_keys
        self.promote_every = promote_every
        self.promote_every_old = promote_every_old
        self.warmup = warmup
        # §4.1.2: 10 % Old, 40 % Teenage, the remaining 50 % Baby; at least one item each.
        (self.old_capacity, self.teenage_capacity, self.baby_capacity), _ = dkg_limits(
            expected_keys, promote_every)
        self.ideal_load, self.threshold_load, self.max_machines = dkg_table(n)
        self.threshold_fraction = self.threshold_load / 100.0
        self.base_machines = 2 if n >= 2 else 1
        if self.max_machines < self.base_machines:
            self.max_machines = self.base_machines
        # A record of 16 bytes per Entry; numpy owns the memory.
        self._scratch_array = np.zeros(
            2 * (self.old_capacity + self.teenage_capacity + self.baby_capacity), dtype=np.uint64)
        cdef hash_t[::1] view = self._scratch_array
        self.scratch = <Entry*>&view[0]
        keymap_init(&self.items, 16)

    def __dealloc__(self):
        keymap_free(&self.items)

    # --- Key Space Manager (§4.1.3) ---------------------------------------------------------

    cdef void _promote_to_teenage(self) noexcept nogil:
        # Algorithm 1: sort BS, sort TS, truncate BS, promoteToNextSpace(BS, TS). Old items are
        # carried over untouched. The map is rebuilt from the survivors, which is what forgets
        # the truncated Baby items in O(capacity) without a delete per key.
        cdef Entry* old = self.scratch
        cdef Entry* teen = old + self.old_capacity
        cdef Entry* baby = teen + self.teenage_capacity
        cdef int n_old = 0, n_teen = 0, n_baby = 0, space
        cdef long long s
        cdef Entry e
        cdef KeyMap* m = &self.items
        for s in range(m.capacity):
            if m.keys[s] == EMPTY_KEY:
                continue
            e.key = m.keys[s]
            e.item = m.values[s]
            space = item_space(e.item)
            if space == OLD:
                old[n_old] = e
                n_old += 1
            elif space == TEENAGE:
                teen[n_teen] = e
                n_teen += 1
            else:
                _heap_offer(baby, &n_baby, self.baby_capacity, e)
        qsort(teen, n_teen, sizeof(Entry), _by_occurrences_desc)
        qsort(baby, n_baby, sizeof(Entry), _by_occurrences_desc)
        _promote(teen, n_teen, self.teenage_capacity, TEENAGE, baby, n_baby, BABY)
        keymap_clear(m)
        for s in range(n_old):
            keymap_upsert(m, old[s].key, old[s].item)
        for s in range(n_teen):
            keymap_upsert(m, teen[s].key, teen[s].item)
        for s in range(n_baby):
            keymap_upsert(m, baby[s].key, baby[s].item)

    cdef void _promote_to_old(self) noexcept nogil:
        # Algorithm 2: sort TS, sort OS, promoteToNextSpace(TS, OS); items change space in place.
        cdef Entry* old = self.scratch
        cdef Entry* teen = old + self.old_capacity
        cdef int n_old = 0, n_teen = 0, space, i
        cdef long long s
        cdef KeyMap* m = &self.items
        for s in range(m.capacity):
            if m.keys[s] == EMPTY_KEY:
                continue
            space = item_space(m.values[s])
            if space == OLD:
                old[n_old].key = m.keys[s]
                old[n_old].item = m.values[s]
                n_old += 1
            elif space == TEENAGE:
                teen[n_teen].key = m.keys[s]
                teen[n_teen].item = m.values[s]
                n_teen += 1
        qsort(old, n_old, sizeof(Entry), _by_occurrences_desc)
        qsort(teen, n_teen, sizeof(Entry), _by_occurrences_desc)
        _promote(old, n_old, self.old_capacity, OLD, teen, n_teen, TEENAGE)
        for i in range(n_old):
            keymap_upsert(m, old[i].key, old[i].item)[0] = old[i].item
        for i in range(n_teen):
            keymap_upsert(m, teen[i].key, teen[i].item)[0] = teen[i].item

    # --- routing (§4.4-4.6) -----------------------------------------------------------------

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef long long g = self.routed       # tuples routed before this one: the clock
        # The next cycles as tuple indexes: the first positive multiple of P_1 (P_2) at or after
        # g, so a call that starts on a boundary runs it (no division per tuple).
        cdef long long next_teenage = next_tick(g, self.promote_every)
        cdef long long next_old = next_tick(g, self.promote_every_old)
        cdef int n = self.n
        cdef count_t* load = self.load
        cdef hash_t h
        cdef long long* slot
        cdef long long item, count, spare = 0
        cdef int machines, space, below, index, fresh, run
        cdef count_t threshold, least
        cdef double share
        cdef unsigned long long best, packed
        cdef worker_t target
        for i in range(m):
            if g == next_teenage:
                self._promote_to_teenage()
                next_teenage += self.promote_every
            if g == next_old:
                self._promote_to_old()
                next_old += self.promote_every_old
            h = hashes[i]
            # §4.1.2: fetch the Key Item (a new key is born in Baby space) and count it.
            slot = keymap_upsert(&self.items, h, 0)
            if slot == NULL:
                slot = &spare    # the map could not grow (out of memory): an untracked item
                spare = 0
            item = slot[0]
            count = item_count(item)
            if count < COUNT_MASK:
                count += 1
            machines = item_machines(item)
            if machines == 0:
                machines = self.base_machines
            space = item_space(item)
            index = choice(h, 0, n)          # eq. 5: hash(key) mod N_m
            # Load >= L_s percent of the tuples routed so far, as an integer count:
            # x >= t  <=>  x >= ceil(t) for an integer x.
            share = self.threshold_fraction * <double>g
            threshold = <count_t>share
            threshold += threshold < share      # ceil without a libm call
            while True:
                # findBestCandidate (Algorithm 4): least loaded of index .. index + N_m - 1
                # (mod n), ties to the lowest id, and NLL = candidates under the threshold.
                # The candidates are one or two contiguous runs of the load vector.
                best = <unsigned long long>-1
                below = 0
                run = n - index
                if run > machines:
                    run = machines
                _scan_run(load, index, run, threshold, &best, &below)
                if machines > run:
                    _scan_run(load, 0, machines - run, threshold, &best, &below)
                target = <worker_t>(best & ((1ULL << WORKER_BITS) - 1))
                least = load[target]
                # shouldScaleOut (Algorithm 5): warmed up, least load >= L_s, key in Old space;
                # and at most floor(100 / L_s) + 1 machines per key (§4.3).
                if (g > self.warmup and least >= threshold and space == OLD
                        and machines < self.max_machines):
                    fresh = index + machines
                    if fresh >= n:
                        fresh -= n
                    if load[fresh] < least:
                        target = fresh
                        machines += 1
                    break
                # shouldScaleDown (Algorithm 6), then chooseBestTask again with one machine less.
                if machines > 2 and below >= 2:
                    machines -= 1
                    continue
                break
            slot[0] = make_item(count, 0 if machines == self.base_machines else machines, space)
            load[target] += 1
            out[i] = target
            g += 1

    # --- state ------------------------------------------------------------------------------

    def get_state(self):
        state = Router.get_state(self)
        state["items"] = keymap_get_state(&self.items)
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        keys, values = state["items"]
        keymap_set_state(&self.items, keys, values)

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def check_state(self, state):
        """One Key Item per tracked key (module docstring)."""
        self.check_base(state, ("items",))
        occupied, _, items = check_keymap("items", state["items"],
                                          self.state_bound() // KEYMAP_SLOT_BYTES)
        items = items[occupied]
        # Item = occurrences (40 bits) | N_m (21 bits) << 40 | space << 61 (Baby, Teenage, Old).
        check_values("items#1", items, 0, (3 << 61) - 1, "Key Items (space must be 0, 1 or 2)")
        check_values("items#1", items & ((1 << 40) - 1), 1, (1 << 40) - 1, "occurrences")
        # N_m: the scan of index .. index + N_m - 1 stays within the n loads.
        check_values("items#1", (items >> 40) & ((1 << 21) - 1), 0, self.max_machines,
                     "machines N_m")
        space = items >> 61
        # The promotions copy each space into a workspace of that space's size.
        for name, code, limit in (("Old", OLD, self.old_capacity),
                                  ("Teenage", TEENAGE, self.teenage_capacity)):
            if int((space == code).sum()) > limit:
                raise bad("items#1", f"holds {int((space == code).sum())} {name} items; the "
                                     f"space holds at most {limit}")

    def state_bound(self):
        return dkg_state_bound(self.n, self.expected_keys, self.promote_every)

    def key_items(self):
        """(hashes, occurrences, N_m, space) of the live Key Items; space 0 Baby, 1 Teenage, 2 Old."""
        keys, values = keymap_get_state(&self.items)
        live = keys != EMPTY_KEY
        keys, values = keys[live], values[live]
        counts = values & ((1 << 40) - 1)
        machines = (values >> 40) & ((1 << 21) - 1)
        machines = np.where(machines == 0, self.base_machines, machines)
        return keys, counts, machines, values >> 61

    def stats(self):
        _, _, machines, space = self.key_items()
        return {"keys_tracked": int(self.items.size), "head_keys": int((space == OLD).sum()),
                "table_entries": int((machines > self.base_machines).sum())}

    def state_bytes(self):
        return (Router.state_bytes(self) + self.items.capacity * (sizeof(hash_t) + sizeof(long long))
                + self._scratch_array.nbytes)
