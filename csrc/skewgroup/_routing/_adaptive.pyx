"""Adaptive (docs/adaptive.md): the tail on one hash, hot keys water-filling the gaps.

Per tuple of key hash h, on a tuple-count clock (so one call or any chunks route the same):

1. SpaceSaving counts h; every ``epoch`` tuples the counters and the total are multiplied by
   ``decay`` (FISH §4's TimeDecayingUpdate), and entries of keys that went cold are dropped;
2. c_k < θ·max(total, epoch): a tail key, worker h_1(k) (key grouping: RF contribution 1);
3. hot, no entry: h_1(k) unless it is more than ``slack`` tuples above the *mean* load, else
   the key gets an entry with the set S_k = {h_1(k)} (where its tuples went so far: no
   replication yet);
4. hot with an entry: w = the least loaded worker of S_k (holistic partitioning, Katsipoulakis
   et al. PVLDB 2017: a worker that holds the key already). If w is more than ``slack`` above
   the least load and |S_k| < cap_k, the globally least loaded worker joins S_k and takes the
   tuple (FlexD §4.3's growth by need; Pd-Stream §V step 13's "least loaded of all workers");
   cap_k = min(n, ⌈p̂_k/H·n·(1 + headroom)⌉ + 1), p̂_k = max(c_k / total,
   seen_k / max(age_k, ⌈1/θ⌉)), near the lower bound ⌈p_k·n⌉ of the workers a key of share
   p_k needs.

With ``burst`` > 0 (the default, 12; docs/adaptive.md, "Pairs against the mean"), a pair is
spent only to relieve a worker above the mean: the set of a key whose share is below its
set's room (c·n < H·|S_k|) grows only when its best worker is ``slack`` above the mean or
``burst`` above the least load, a bigger key's as soon as it is ``slack`` above the least
load; and any set grows past its cap when its best worker is above the mean by ``burst`` (a
small key) or ``slack`` (a bigger one): p̂ lags a burst denser than the key's recent rate.
``burst`` = 0 makes every growth against the least load, caps strict.
``hold`` > 0 (off by default) lets a small key keep its hash worker up to ``hold`` above the
mean: fewer pairs on natural-order streams, larger swings in a window (docs/adaptive.md).

Layout. A KeyMap maps h to a dense slot 0 .. entries - 1; a slot holds S_k as a bit set of n
bits (so "least loaded of S_k" is the load levels' word ANDs, as in Pd-Stream and FISH), its
size, the tuple index it was made at, and its hot tuples since. Pruning compacts the slots
(the last one moves into a hole), so the state is at most ⌈2/θ⌉ slots whatever the number of
distinct keys; when the table is full a new hot key stays on its hash worker.
"""
cimport cython
from libc.math cimport ceil, llround
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

import numpy as np

from skewgroup._routing._keymap import KEYMAP_SLOT_BYTES, check_dense_slots, stored_keys
from skewgroup._routing._router import LOAD_VECTOR_BYTES
from skewgroup._routing._spacesaving import check_spacesaving, spacesaving_state_bound
from skewgroup._routing._validation import bad, check_array, check_field_int, check_values

from skewgroup._routing._slots cimport grown_slots, grow
from skewgroup._routing._types cimport hash_t, count_t, worker_t
from skewgroup._routing._hash cimport choice
from skewgroup._routing._keymap cimport (KeyMap, keymap_init, keymap_free, keymap_get, keymap_slot,
                                         keymap_upsert, keymap_delete, keymap_get_state,
                                         keymap_set_state)
from skewgroup._routing._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_update_admit_many,
                                              ss_estimate, ss_decay, ss_get_state, ss_set_state,
                                              ss_nbytes)
from skewgroup._routing._router cimport Router, next_tick
from skewgroup._routing._levels cimport (LoadLevels, LEVELS, levels_init, levels_free,
                                         levels_add_load, levels_least_loaded, levels_least_in)


cdef enum:
    # Keys counted by SpaceSaving ahead of routing (route_many): 4 KB of counts on the stack.
    COUNT_BLOCK = 512


def adaptive_limits(int n, double theta, long long epoch, long long capacity):
    """(max_entries, rate_floor) of an adaptive router: at most ⌈2/θ⌉ entries (capped by the
    counters: an entry needs its key monitored), and the age ⌈1/θ⌉ under which a key's rate
    since its entry is not trusted alone."""
    cdef long long entries = <long long>ceil(2.0 / theta)
    if entries > capacity:
        entries = capacity
    cdef long long floor = <long long>ceil(1.0 / theta)
    return max(1, entries), max(1, floor)


def adaptive_state_bound(int n, double theta, long long epoch, long long capacity,
                         long long door_size):
    """Loads, SpaceSaving's k counters, the load levels, the doorkeeper and the table: at most
    max_entries = min(ceil(2/θ), k) slots (``adaptive_limits``) of 8 ceil(n/64) + 40 bytes,
    and a key map of at most pow2ceil(2 (max_entries + 1)) slots: 8n + 128k + 256 K +
    16 slots + max_entries (8 ceil(n/64) + 40) + 128 ceil(n/64) bytes, plus 8 bytes per
    doorkeeper slot: about 1.9 MB at n = 128 with the defaults."""
    max_entries, _ = adaptive_limits(n, theta, epoch, capacity)
    words = -(-n // 64)
    map_slots = max(16, 1 << (2 * (max_entries + 1) - 1).bit_length())
    return (LOAD_VECTOR_BYTES * n + spacesaving_state_bound(capacity)
            + KEYMAP_SLOT_BYTES * map_slots + max_entries * (8 * words + 40)
            + LEVELS * 8 * words + 8 * door_size + 1024)


STATE_FIELDS = ("summary", "table", "hot_mass", "slot_key", "set_bits", "set_size", "set_cap",
                "born", "seen", "door")


cdef class Adaptive(Router):
    """The adaptive strategy; see the module docstring and docs/adaptive.md.

    Parameters
    ----------
    n, seed : int
        Workers and hash seed (Router).
    theta : float
        Hot threshold θ on a key's decayed share.
    epoch : int
        Tuples between two decays (and prunings).
    decay : float
        Factor of the counters at each epoch end, in (0, 1].
    slack : int
        Tuples above the mean load a key's best worker may be before its set grows.
    headroom : float
        A hot key may hold up to ⌈p̂·n·(1 + headroom)⌉ + 1 workers.
    capacity : int
        SpaceSaving counters.
    burst : int
        0 (every growth against the least load), or the tuples above the mean a small key's capped set's best
        worker, or above the least load its best worker, may be before its set grows.
    hold : int
        0 (off), or the tuples above the mean a small hot key's hash worker may be before the
        key leaves it.
    doorkeeper : int
        Hashes in the doorkeeper in front of the full counters (0: none): a key that is not
        monitored replaces the least counter only when its door slot saw it last.
    """
    cdef readonly double theta
    cdef readonly long long epoch
    cdef readonly double decay
    cdef readonly long long slack
    cdef readonly long long burst
    cdef readonly long long hold
    cdef readonly long long door_size
    cdef hash_t* door                   # [door_size] the last unmonitored hash of each slot
    cdef readonly double headroom
    cdef readonly int capacity
    cdef readonly long long max_entries
    cdef readonly long long rate_floor
    cdef StreamSummary summary
    cdef KeyMap table                   # hash -> slot
    cdef int words                      # ceil(n / 64)
    cdef hash_t* slot_key               # [slots] the key of each slot
    cdef unsigned long long* bits       # [slots, words] S_k as a bit set
    cdef int* set_size                  # [slots] |S_k|
    cdef long long* born                # [slots] tuple index the entry was made at
    cdef long long* seen                # [slots] hot tuples of the key since
    cdef int* cap                       # [slots] most workers the key may hold (refreshed)
    cdef count_t hot_mass               # hot tuples, decayed like the counters' total
    cdef count_t* low                   # [slots] <= least load of S_k (a hint; not state)
    cdef long long entries              # slots in use, 0 .. entries - 1
    cdef long long slots                # slots allocated
    cdef LoadLevels levels              # derived from the loads, rebuilt on restore

    def __cinit__(self, *args, **kwargs):
        self.slot_key = NULL
        self.door = NULL
        self.door_size = 0
        self.bits = NULL
        self.set_size = NULL
        self.born = NULL
        self.seen = NULL
        self.cap = NULL
        self.low = NULL
        self.hot_mass = 0
        self.slots = 0
        self.entries = 0
        self.levels.bits = NULL

    def __init__(self, int n, unsigned long long seed, double theta, long long epoch,
                 double decay, long long slack, double headroom, int capacity,
                 long long burst=12, long long hold=0, long long doorkeeper=0):
        # The parameters come checked from AdaptiveConfig (skewgroup._routing.config), the only builder.
        Router.__init__(self, n, seed)
        self.theta = theta
        self.epoch = epoch
        self.decay = decay
        self.slack = slack
        self.burst = burst
        self.hold = hold
        if doorkeeper:
            self.door = <hash_t*>calloc(doorkeeper, sizeof(hash_t))
            if self.door == NULL:
                raise MemoryError()
        self.door_size = doorkeeper
        self.headroom = headroom
        self.capacity = capacity
        self.max_entries, self.rate_floor = adaptive_limits(n, theta, epoch, capacity)
        self.words = (n + 63) // 64
        ss_init(&self.summary, capacity)
        keymap_init(&self.table, 16)
        if levels_init(&self.levels, self.load, n) != 0:
            raise MemoryError()

    def __dealloc__(self):
        ss_free(&self.summary)
        keymap_free(&self.table)
        levels_free(&self.levels)
        free(self.slot_key)
        free(self.door)
        free(self.bits)
        free(self.set_size)
        free(self.born)
        free(self.seen)
        free(self.cap)
        free(self.low)

    # --- the table ---------------------------------------------------------------------------

    cdef int _reserve(self, long long slots) noexcept nogil:
        # Room for `slots` entries in every per-slot array; 0 on success.
        cdef long long want
        if slots <= self.slots:
            return 0
        want = grown_slots(self.slots, slots, self.max_entries)
        if (grow(<void**>&self.slot_key, want, sizeof(hash_t))
                or grow(<void**>&self.bits, want, self.words * sizeof(unsigned long long))
                or grow(<void**>&self.set_size, want, sizeof(int))
                or grow(<void**>&self.born, want, sizeof(long long))
                or grow(<void**>&self.seen, want, sizeof(long long))
                or grow(<void**>&self.cap, want, sizeof(int))
                or grow(<void**>&self.low, want, sizeof(count_t))):
            return -1
        self.slots = want
        return 0

    cdef void _move(self, long long src, long long dst) noexcept nogil:
        self.slot_key[dst] = self.slot_key[src]
        memcpy(self.bits + dst * self.words, self.bits + src * self.words,
               self.words * sizeof(unsigned long long))
        self.set_size[dst] = self.set_size[src]
        self.born[dst] = self.born[src]
        self.seen[dst] = self.seen[src]
        self.cap[dst] = self.cap[src]
        self.low[dst] = self.low[src]

    cdef void _end_epoch(self) noexcept with gil:
        # Decay (FISH §4), then drop the entries of keys whose estimate fell below θ/4 of the
        # total: they route on their hash again, and a return starts from {h_1(k)}. Slots stay
        # dense: the last entry moves into each hole (in slot order, so deterministic).
        cdef long long s = 0, last
        cdef double limit
        cdef count_t base
        ss_decay(&self.summary, self.decay)
        self.hot_mass = llround(self.hot_mass * self.decay)
        if 4 * self.entries <= 3 * self.max_entries:
            return
        base = self.summary.total if self.summary.total > self.epoch else self.epoch
        limit = self.theta * base / 4.0
        while s < self.entries:
            if ss_estimate(&self.summary, self.slot_key[s]) >= limit:
                s += 1
                continue
            keymap_delete(&self.table, self.slot_key[s])
            last = self.entries - 1
            if s != last:
                self._move(last, s)
                # The moved key is in the map: a lookup, never an insertion (no rehash).
                self.table.values[keymap_slot(&self.table, self.slot_key[s])] = s
            self.entries -= 1

    # --- routing -----------------------------------------------------------------------------

    cdef inline int _cap(self, long long slot, count_t c, count_t base,
                         long long g) noexcept nogil:
        # A hot key fills the room that the hashed tail leaves on its workers, a share H of
        # every worker's load (H = the decayed share of hot tuples), so at perfect balance a key
        # of share p needs p·n/H workers: the lower bound ⌈p·n⌉ when every tuple is hot
        # (docs/adaptive.md, step 4). p̂ is the larger of the decayed share and the rate since
        # the entry was made, which a new hot key reaches within rate_floor tuples after a
        # drift (docs/adaptive.md, "Drift").
        cdef double share = <double>c / base
        cdef long long age = g - self.born[slot] + 1
        cdef double rate = <double>self.seen[slot] / (age if age > self.rate_floor
                                                      else self.rate_floor)
        cdef double p = share if share > rate else rate
        cdef double room = <double>self.hot_mass / base
        cdef double want
        if room < p:
            room = p
        if room > 1.0:
            room = 1.0
        want = ceil(p / room * self.n * (1.0 + self.headroom)) + 1.0
        return self.n if want >= self.n else <int>want

    cdef inline worker_t _route_hot(self, hash_t h, worker_t home, count_t c, count_t base,
                                    long long g) noexcept nogil:
        cdef long long slot = keymap_get(&self.table, h, -1)
        cdef long long* entry
        cdef unsigned long long* member
        cdef worker_t w
        cdef bint big
        if slot < 0:
            # Step 3: most hot keys never need more than their hash worker. A key leaves it
            # only when it is more than `slack` above the *mean* load (n·load - g > n·slack),
            # not the minimum: in natural-order streams thousands of keys are hot for one
            # burst each, and the big keys' sets fill the workers below the mean anyway
            # (against the minimum every burst left its hash worker: RF 1.15-1.25 on the
            # python_source streams, docs/adaptive.md "Measured").
            # With `hold` on, a key that cannot hold a worker above the mean by itself
            # (c·n < hot_mass: its share is below the room H/n that the hashed tail leaves on
            # a worker) causes an excess that ends with its burst, so it may keep its hash
            # worker up to `hold` above the mean; a bigger key leaves at `slack`.
            if (self.n * (self.load[home] - (self.hold if self.hold and
                                             c * self.n < self.hot_mass else self.slack)) <= g
                    or self.entries >= self.max_entries):
                return home
            if self._reserve(self.entries + 1) != 0:
                return home
            entry = keymap_upsert(&self.table, h, self.entries)
            if entry == NULL:
                return home                     # out of memory: stay on the hash worker
            slot = self.entries
            self.entries += 1
            self.slot_key[slot] = h
            member = self.bits + slot * self.words
            memset(member, 0, self.words * sizeof(unsigned long long))
            member[home >> 6] = 1ULL << (home & 63)
            self.set_size[slot] = 1
            self.born[slot] = g
            self.seen[slot] = 0
            self.low[slot] = 0
            self.cap[slot] = self._cap(slot, c, base, g)
        self.seen[slot] += 1
        member = self.bits + slot * self.words
        w = levels_least_in(&self.levels, self.load, member, &self.low[slot])
        # Routing inside S_k is free; a new worker is a pair for good, so the set grows only
        # when its best worker is more than `slack` above the mean (n·load - g > n·slack):
        # a worker below the mean costs no balance (LI is max - mean).
        # Within `slack` of the least load is within `slack` of the mean too: no growth in
        # either version (the common case, tested first).
        if self.load[w] - self.levels.min_load <= self.slack:
            return w
        big = True
        if self.burst:
            # A key whose share fills its set's room (c·n >= H·|S_k|) grows against the least
            # load (after a drift the new hot keys must spread at once); a smaller one only
            # when its best worker is `slack` above the mean (LI is max - mean: a worker below
            # the mean costs no balance) or `burst` above the least load (a bound on the
            # spread, which a window's own loads see). With burst = 0 every set grows
            # against the least load.
            big = c * self.n >= self.hot_mass * self.set_size[slot]
            if (not big and self.load[w] - self.levels.min_load <= self.burst
                    and self.n * (self.load[w] - self.slack) <= g):
                return w
        if self.set_size[slot] >= self.cap[slot] and (self.seen[slot] & 15) == 0:
            # The cap follows p̂, refreshed every 16 hot tuples of a key that has reached it:
            # two divisions per hot tuple were 40 % of this function (perf).
            self.cap[slot] = self._cap(slot, c, base, g)
        if self.set_size[slot] < self.cap[slot] or (
                self.burst and self.set_size[slot] < self.n and self.n * (self.load[w] - (
                    self.slack if big else self.burst)) > g):
            # Step 4: the key needs a worker; the least loaded of all is below the mean, so
            # not in S_k. Past the cap only when even the best worker of S_k is `burst` above
            # the mean: p̂ lags a burst denser than the key's recent average (the end of the
            # prose stream: "s" at 2.6 % held 2 workers, LI 4.7e-3 at n = 128).
            w = levels_least_loaded(&self.levels)
            member[w >> 6] |= 1ULL << (w & 63)
            self.set_size[slot] += 1
            self.low[slot] = self.load[w]
        return w

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        # The counts depend on the keys alone, not on the routing, so SpaceSaving counts a
        # block of keys first (one call, its loop on registers; per tuple across modules it was
        # a third of the time) and the block is then routed; a block never crosses an epoch
        # end, where the counters decay.
        cdef count_t counts[COUNT_BLOCK]
        cdef Py_ssize_t i = 0, j, block
        cdef long long g = self.routed
        cdef long long to_epoch = (next_tick(g, self.epoch) - g)
        cdef hash_t h
        cdef count_t c, base, total
        cdef worker_t w
        while i < m:
            if to_epoch == 0:
                self._end_epoch()
                to_epoch = self.epoch
            block = m - i
            if block > to_epoch:
                block = to_epoch
            if block > COUNT_BLOCK:
                block = COUNT_BLOCK
            total = self.summary.total
            ss_update_admit_many(&self.summary, hashes + i, block, self.door, self.door_size,
                                 counts)
            for j in range(block):
                h = hashes[i + j]
                c = counts[j]
                total += 1
                # Warm-up floor: before an epoch's worth of tuples one occurrence is no share.
                base = total if total > self.epoch else self.epoch
                w = choice(h, 0, self.n)
                if c >= self.theta * base:
                    self.hot_mass += 1
                    w = self._route_hot(h, w, c, base, g)
                levels_add_load(&self.levels, self.load, self.n, w)
                out[i + j] = w
                g += 1
            i += block
            to_epoch -= block

    # --- state -------------------------------------------------------------------------------

    cdef _tables(self):
        cdef long long used = self.entries
        keys = np.empty(used, dtype=np.uint64)
        bits = np.empty((used, self.words), dtype=np.uint64)
        sizes = np.empty(used, dtype=np.intc)
        caps = np.empty(used, dtype=np.intc)
        born = np.empty(used, dtype=np.int64)
        seen = np.empty(used, dtype=np.int64)
        cdef hash_t[::1] a = keys
        cdef unsigned long long[:, ::1] b = bits
        cdef int[::1] c = sizes
        cdef int[::1] f = caps
        cdef long long[::1] d = born
        cdef long long[::1] e = seen
        if used:
            memcpy(&a[0], self.slot_key, used * sizeof(hash_t))
            memcpy(&b[0, 0], self.bits, used * self.words * sizeof(unsigned long long))
            memcpy(&c[0], self.set_size, used * sizeof(int))
            memcpy(&f[0], self.cap, used * sizeof(int))
            memcpy(&d[0], self.born, used * sizeof(long long))
            memcpy(&e[0], self.seen, used * sizeof(long long))
        return dict(slot_key=keys, set_bits=bits, set_size=sizes, set_cap=caps, born=born,
                    seen=seen)

    def get_state(self):
        state = Router.get_state(self)
        door = np.zeros(self.door_size, dtype=np.uint64)
        cdef hash_t[::1] dv = door
        if self.door_size:
            memcpy(&dv[0], self.door, self.door_size * sizeof(hash_t))
        state.update(self._tables(), summary=ss_get_state(&self.summary),
                     table=keymap_get_state(&self.table), hot_mass=self.hot_mass, door=door)
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        keys = np.ascontiguousarray(state["slot_key"], dtype=np.uint64)
        cdef long long used = keys.shape[0]
        bits = np.ascontiguousarray(state["set_bits"], dtype=np.uint64).reshape(used, self.words)
        sizes = np.ascontiguousarray(state["set_size"], dtype=np.intc)
        caps = np.ascontiguousarray(state["set_cap"], dtype=np.intc)
        born = np.ascontiguousarray(state["born"], dtype=np.int64)
        seen = np.ascontiguousarray(state["seen"], dtype=np.int64)
        if not sizes.shape[0] == caps.shape[0] == born.shape[0] == seen.shape[0] == used:
            raise ValueError("corrupt adaptive state: table sizes differ")
        door = np.ascontiguousarray(state["door"], dtype=np.uint64)
        if door.shape[0] != self.door_size:
            raise ValueError("corrupt adaptive state: the doorkeeper has "
                             f"{door.shape[0]} slots, not {self.door_size}")
        cdef hash_t[::1] dv = door
        if self.door_size:
            memcpy(self.door, &dv[0], self.door_size * sizeof(hash_t))
        ss_set_state(&self.summary, state["summary"])
        keymap_set_state(&self.table, state["table"][0], state["table"][1])
        if self.table.size != used:
            raise ValueError("corrupt adaptive state: key map and slots disagree")
        self.hot_mass = int(state["hot_mass"])
        self.entries = 0
        if self._reserve(used) != 0:
            raise MemoryError()
        cdef hash_t[::1] a = keys
        cdef unsigned long long[:, ::1] b = bits
        cdef int[::1] c = sizes
        cdef int[::1] f = caps
        cdef long long[::1] d = born
        cdef long long[::1] e = seen
        if used:
            memcpy(self.slot_key, &a[0], used * sizeof(hash_t))
            memcpy(self.bits, &b[0, 0], used * self.words * sizeof(unsigned long long))
            memcpy(self.set_size, &c[0], used * sizeof(int))
            memcpy(self.cap, &f[0], used * sizeof(int))
            memcpy(self.born, &d[0], used * sizeof(long long))
            memcpy(self.seen, &e[0], used * sizeof(long long))
            memset(self.low, 0, used * sizeof(count_t))   # 0 is a valid hint (<= any load)
        self.entries = used
        if levels_init(&self.levels, self.load, self.n) != 0:
            raise MemoryError()

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def check_state(self, state):
        """Decayed counters, key -> slot map, the slots' worker sets (module docstring)."""
        routed = self.check_base(state, STATE_FIELDS)
        cdef object workers = self.n, words = self.words
        summary = state["summary"]
        check_spacesaving("summary", summary, self.capacity)
        # Decayed like the summary's total and never above it: one per hot tuple, the total
        # one per tuple (a larger value only widens the caps, but it has no meaning).
        check_field_int("hot_mass", state["hot_mass"], 0, summary["total"])
        # The doorkeeper holds any hashes (0 is an empty slot); only its size is the router's.
        check_array("door", state["door"], np.uint64, (self.door_size,))
        keys = check_array("slot_key", state["slot_key"], np.uint64, (None,))
        entries = keys.shape[0]
        if entries > self.max_entries:
            raise bad("slot_key", f"has {entries} entries; at most {self.max_entries} keys "
                                  f"hold one")
        bits = check_array("set_bits", state["set_bits"], np.uint64, (entries, words))
        sizes = check_array("set_size", state["set_size"], np.intc, (entries,))
        caps = check_array("set_cap", state["set_cap"], np.intc, (entries,))
        born = check_array("born", state["born"], np.int64, (entries,))
        seen = check_array("seen", state["seen"], np.int64, (entries,))
        # The slots are dense: each key maps to its own slot 0 .. entries-1, whose key it is.
        occupied, map_keys, slots = check_dense_slots(
            "table", state["table"], self.state_bound() // KEYMAP_SLOT_BYTES, entries)
        if not np.array_equal(stored_keys(keys[slots[occupied]]), map_keys[occupied]):
            raise bad("slot_key", "does not hold the key the table maps to each slot")
        # levels_least_in turns set bits into worker ids: no bit at n or above, and at least
        # one (a set is never empty); |S_k| is the bit count, within [1, n] (a burst may take
        # a set past its cap), and cap within [1, n].
        if words and workers % 64:
            spare = ~np.uint64((1 << (workers % 64)) - 1)
            if (bits[:, -1] & spare).any():
                raise bad("set_bits", f"names a worker >= {workers}")
        counts = np.unpackbits(bits.view(np.uint8), axis=1).sum(axis=1) if entries else sizes
        if not np.array_equal(counts, sizes):
            raise bad("set_size", "does not count the workers of each set")
        check_values("set_size", sizes, 1, workers, "set sizes")
        check_values("set_cap", caps, 1, workers, "set caps")
        check_values("born", born, 0, routed, "entry births (tuple indexes)")
        check_values("seen", seen, 0, routed, "hot tuples per entry")

    def state_bound(self):
        return adaptive_state_bound(self.n, self.theta, self.epoch, self.capacity,
                                    self.door_size)

    def worker_sets(self):
        """{key hash: sorted array of the workers of its set} for every key with an entry."""
        tables = self._tables()
        out = {}
        for key, row in zip(tables["slot_key"].tolist(), tables["set_bits"]):
            flags = np.unpackbits(row.view(np.uint8), bitorder="little")[:self.n]
            out[key] = np.flatnonzero(flags).astype(np.int32)
        return out

    def stats(self):
        return {"keys_tracked": int(self.summary.size), "head_keys": int(self.entries),
                "table_entries": int(self._tables()["set_size"].sum())}

    def state_bytes(self):
        return (Router.state_bytes(self) + ss_nbytes(&self.summary)
                + self.table.capacity * (sizeof(hash_t) + sizeof(long long))
                + self.slots * (sizeof(hash_t) + self.words * sizeof(unsigned long long)
                                + 2 * sizeof(int) + 2 * sizeof(long long) + sizeof(count_t))
                + LEVELS * self.words * sizeof(unsigned long long)
                + self.door_size * sizeof(hash_t))
