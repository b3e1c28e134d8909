"""FlexD (flexd §4.3-4.4, Algorithm 1): per-segment SpaceSaving, per-key worker sets grown by δ.

The stream is cut into segments of l tuples (§4.3) and SpaceSaving with ⌈1/ε⌉ counters counts
the current one; f_t = (estimated count of k in the segment so far, this tuple included) / l.
Per tuple, on a tuple-count clock (so one call or any chunks route the same):

* f_t < f: a low-frequency key, hashed to one worker h_1(k) (lines 10-11);
* first time hot (no T_f[k]): the least loaded of all workers, T_f[k] = f (lines 13-16);
* f_t >= T_f[k]: the least loaded worker the key does not use yet joins its set and takes the
  tuple, T_f[k] *= δ (lines 18-20);
* otherwise: the least loaded worker of the key's set (line 22);
* every ``prune_every`` tuples both tables keep their ``prune_keep`` most recently used keys
  (§4.4: "cleared and retained the top 50k records every 10 min", of the keys "not accessed for
  a long time"; the clock is a tuple count here).

Parameter choice. The text of the paper we have does not hold the body of its Table 1 (an image
in the original), so l, f and ε are ours, chosen from §4.3's constraints (0 < ε < θ = f <= 1)
and from what the growth rule can do. A key's set grows by one worker each time f_t passes
f·δ^j, so a key of frequency p ends with about 2 + log_δ(p / f) workers, at most
2 + floor(log_δ(1 / f)) (``max_set``); it is balanced only if that reaches about p·n. Our
defaults (FlexDConfig): l = 100,000 tuples, f = 5e-5 (5 occurrences in a segment), ε = f / 2
(40,000 counters, so an unmonitored key's estimate stays below f / 2 + 1 and is never hot by
error), δ = 1.5 (§6). Then max_set = 26 and Zipf z = 1.4 (p_1 = 0.32) is balanced at n = 64
(the hottest key gets 24 workers; measured LI ~1e-4, RF 1.15 on 10^6 tuples); at n = 128
p_1·n = 41 workers would be needed and FlexD, by design, stops at those 24 (LI ~0.9): it trades
balance for a small replication factor (§1, Fig. 7).

Streaming reading of the micro-batch model (§4.2): the paper's scheduler sketches a collected
batch and then routes it; we route each tuple as it comes (no look-ahead, so chunking cannot
change the result), so f_t counts the segment up to and including this tuple. A consequence:
at each segment start a hot key's first ceil(f·l) - 1 tuples are low-frequency again and go
to its hash worker (line 11), 4 tuples per segment with the defaults; its T_f[k] and set stay.

Layout. T_f[k] = f·δ^(|set| - 1) always (one worker per raise), so a key needs no threshold of
its own: a KeyMap maps its hash to a slot, and the slot holds the set as a list of at most
``max_set`` worker ids, its size and its last use. Slots are dense (0 .. entries - 1) and a
pruning compacts them. Between two prunings at most ``max_entries`` keys can get a slot (see
flexd_limits), so the state is bounded whatever the number of distinct keys.
"""
cimport cython
from libc.math cimport ceil
from libc.stdlib cimport malloc, realloc, free, qsort
from libc.string cimport memcpy, memset

import numpy as np

from skewgroup._routing._keymap import KEYMAP_SLOT_BYTES, check_dense_slots
from skewgroup._routing._router import LOAD_VECTOR_BYTES
from skewgroup._routing._spacesaving import check_spacesaving, spacesaving_state_bound
from skewgroup._routing._validation import bad, check_array, check_distinct, check_values

from skewgroup._routing._slots cimport grown_slots, grow
from skewgroup._routing._types cimport hash_t, count_t, worker_t
from skewgroup._routing._hash cimport choice
from skewgroup._routing._keymap cimport (KeyMap, EMPTY_KEY, keymap_init, keymap_free, keymap_clear,
                                         keymap_upsert, keymap_delete, keymap_get_state,
                                         keymap_set_state)
from skewgroup._routing._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_clear, ss_update,
                                              ss_get_state, ss_set_state, ss_nbytes)
from skewgroup._routing._router cimport Router, least_loaded_all, least_of, WORKER_BITS, next_tick


def flexd_limits(int n, double delta, long long segment, double threshold, long long capacity,
                 long long prune_every, long long prune_keep):
    """(max_set, max_entries, thresholds) of a FlexD router.

    ``thresholds[j]`` = ceil(f·l·δ^j), the count a key must reach in a segment to get its
    (j + 2)-th worker (j = 0: to become hot at all); the powers are taken by repeated
    multiplication, as T_f[k] *= δ does. ``max_set`` = min(n, 1 + the number of those that a
    segment of l tuples can reach).

    ``max_entries`` bounds the keys with a table entry. A key turns hot when its estimate
    reaches f·l; SpaceSaving over-estimates by at most l / k, so its true count in the segment
    is at least h = max(1, f·l - l / k) and one segment makes at most floor(l / h) new hot keys.
    A pruning leaves prune_keep entries and at most ceil(prune_every / l) + 1 segments overlap
    the time to the next one: max_entries = prune_keep + (ceil(prune_every / l) + 1) floor(l / h).
    """
    cdef double t = threshold * segment
    thresholds = []
    while t <= segment and len(thresholds) < n:
        thresholds.append(int(ceil(t)))
        t *= delta
    max_set = max(1, min(n, 1 + len(thresholds)))
    if not thresholds:
        thresholds.append(segment + 1)    # f > 1: no key is ever hot
    least_true = max(1.0, threshold * segment - segment / <double>capacity)
    per_segment = int(segment / least_true)
    segments = -(-prune_every // segment) + 1
    return max_set, prune_keep + segments * per_segment, np.array(thresholds, dtype=np.int64)


def flexd_state_bound(int n, double delta, long long segment, double threshold,
                      long long capacity, long long prune_every, long long prune_keep):
    """Loads, SpaceSaving's k counters, and the key tables. At most max_entries keys hold
    an entry (``flexd_limits``: prune_keep + (ceil(prune_every/l) + 1) floor(l / max(1,
    f·l - l/k)), 490,000 with the defaults), each with a set of up to max_set = min(n,
    2 + floor(log_δ(1/f))) int32 workers, a size, a last use and <= 4 key map slots:
    8n + 128k + 256 K + max_entries (4 max_set + 12 + 64) + 8 max_set + n bytes."""
    max_set, max_entries, _ = flexd_limits(n, delta, segment, threshold, capacity,
                                           prune_every, prune_keep)
    return (LOAD_VECTOR_BYTES * n + spacesaving_state_bound(capacity)
            + (max_entries + 1) * (4 * max_set + 12 + 4 * KEYMAP_SLOT_BYTES)
            + 8 * max_set + n + 1024)


STATE_FIELDS = ("summary", "table", "sets", "set_size", "last_use")


# A table entry taken out for pruning.
cdef struct Use:
    long long last
    hash_t key
    int slot


cdef int _recent_first(const void* a, const void* b) noexcept nogil:
    cdef long long x = (<const Use*>a).last, y = (<const Use*>b).last
    if x != y:
        return -1 if x > y else 1
    return (<const Use*>a).slot - (<const Use*>b).slot


cdef class FlexD(Router):
    """FlexD (flexd §4); see the module docstring for the per-tuple steps and the defaults.

    Parameters
    ----------
    n, seed : int
        Workers and hash seed (Router).
    delta : float
        δ > 1, growth of T_f[k] per added worker.
    segment : int
        l, tuples per segment; SpaceSaving restarts every l tuples.
    threshold : float
        f in (0, 1], the hot threshold on f_t = count in the segment / l.
    capacity : int
        SpaceSaving counters k = ⌈1/ε⌉.
    prune_every, prune_keep : int
        Tuples between prunings; entries a pruning keeps (the most recently used).
    """
    cdef readonly double delta
    cdef readonly long long segment
    cdef readonly double threshold
    cdef readonly int capacity
    cdef readonly long long prune_every
    cdef readonly long long prune_keep
    cdef readonly int max_set             # most workers one key can get
    cdef readonly long long max_entries   # most keys with an entry between two prunings
    cdef StreamSummary summary
    cdef object _thresholds_array         # [max_set] counts that raise a key's set
    cdef count_t* thresholds
    cdef KeyMap table                     # hash -> slot
    cdef worker_t* sets                   # [slots, max_set] each key's workers, in joining order
    cdef int* set_size                    # [slots]
    cdef long long* last_use              # [slots] tuple index of the key's last hot tuple
    cdef long long entries                # slots in use, 0 .. entries - 1
    cdef long long slots                  # slots allocated
    cdef unsigned char* mark              # [n] scratch: workers of the set being grown

    def __cinit__(self, *args, **kwargs):
        self.sets = NULL
        self.set_size = NULL
        self.last_use = NULL
        self.mark = NULL
        self.slots = 0
        self.entries = 0

    def __init__(self, int n, unsigned long long seed, double delta, long long segment,
                 double threshold, int capacity, long long prune_every, long long prune_keep):
        # The parameters come checked from FlexDConfig (skewgroup._routing.config), the only builder.
        Router.__init__(self, n, seed)
        self.delta = delta
        self.segment = segment
        self.threshold = threshold
        self.capacity = capacity
        self.prune_every = prune_every
        self.prune_keep = prune_keep
        self.max_set, self.max_entries, self._thresholds_array = flexd_limits(
            n, delta, segment, threshold, capacity, prune_every, prune_keep)
        cdef count_t[::1] view = self._thresholds_array
        self.thresholds = &view[0]
        ss_init(&self.summary, capacity)
        keymap_init(&self.table, 16)
        self.mark = <unsigned char*>malloc(n)
        if self.mark == NULL:
            raise MemoryError()
        memset(self.mark, 0, n)

    def __dealloc__(self):
        ss_free(&self.summary)
        keymap_free(&self.table)
        free(self.sets)
        free(self.set_size)
        free(self.last_use)
        free(self.mark)

    # --- the tables -------------------------------------------------------------------------

    cdef int _reserve(self, long long slots) noexcept nogil:
        # Room for `slots` entries in every per-slot array; 0 on success. Capped at
        # max_entries, which no run exceeds (flexd_limits).
        cdef long long want
        if slots <= self.slots:
            return 0
        want = grown_slots(self.slots, slots, self.max_entries)
        if (grow(<void**>&self.sets, want, self.max_set * sizeof(worker_t))
                or grow(<void**>&self.set_size, want, sizeof(int))
                or grow(<void**>&self.last_use, want, sizeof(long long))):
            return -1
        self.slots = want
        return 0

    cdef void _prune(self) noexcept nogil:
        # §4.4: keep the prune_keep most recently used keys (ties cannot happen: one tuple uses
        # one entry). Survivors move to slots 0 .. prune_keep - 1, most recent first, and the
        # key map is rebuilt from them.
        cdef long long count = self.table.size, s, r, keep = self.prune_keep
        cdef Use* uses
        cdef worker_t* sets
        cdef int* sizes
        cdef long long* last
        cdef KeyMap* m = &self.table
        if count <= keep:
            return
        uses = <Use*>malloc(count * sizeof(Use))
        sets = <worker_t*>malloc(keep * self.max_set * sizeof(worker_t))
        sizes = <int*>malloc(keep * sizeof(int))
        last = <long long*>malloc(keep * sizeof(long long))
        if uses == NULL or sets == NULL or sizes == NULL or last == NULL:
            free(uses); free(sets); free(sizes); free(last)
            return  # out of memory: prune next time
        r = 0
        for s in range(m.capacity):
            if m.keys[s] != EMPTY_KEY:
                uses[r].key = m.keys[s]
                uses[r].slot = <int>m.values[s]
                uses[r].last = self.last_use[uses[r].slot]
                r += 1
        qsort(uses, count, sizeof(Use), _recent_first)
        keymap_clear(m)
        for r in range(keep):
            memcpy(sets + r * self.max_set, self.sets + uses[r].slot * self.max_set,
                   self.max_set * sizeof(worker_t))
            sizes[r] = self.set_size[uses[r].slot]
            last[r] = uses[r].last
            keymap_upsert(m, uses[r].key, r)
        memcpy(self.sets, sets, keep * self.max_set * sizeof(worker_t))
        memcpy(self.set_size, sizes, keep * sizeof(int))
        memcpy(self.last_use, last, keep * sizeof(long long))
        self.entries = keep
        free(uses); free(sets); free(sizes); free(last)

    cdef worker_t _least_unused(self, const worker_t* members, int size) noexcept nogil:
        # Line 18: the least loaded worker not in the set (ties to the lowest id), O(n + size).
        cdef int j, w
        cdef unsigned long long best = <unsigned long long>-1, packed
        cdef const count_t* load = self.load
        for j in range(size):
            self.mark[members[j]] = 1
        for w in range(self.n):
            packed = ((<unsigned long long>load[w]) << WORKER_BITS) | <unsigned long long>w
            if packed < best and not self.mark[w]:
                best = packed
        for j in range(size):
            self.mark[members[j]] = 0
        return <worker_t>(best & ((1ULL << WORKER_BITS) - 1))

    # --- routing ----------------------------------------------------------------------------

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef long long g = self.routed          # tuples routed before this one: the clock
        # The next segment start and pruning as tuple indexes: the first positive multiple at
        # or after g, so a call that starts on a boundary runs it (no division per tuple).
        cdef long long next_segment = next_tick(g, self.segment)
        cdef long long next_prune = next_tick(g, self.prune_every)
        cdef hash_t h
        cdef count_t estimate
        cdef long long* entry
        cdef long long slot
        cdef worker_t* members
        cdef int size
        cdef worker_t w
        cdef count_t hot = self.thresholds[0]
        for i in range(m):
            if g == next_segment:
                ss_clear(&self.summary)         # §4.3: each segment is counted on its own
                next_segment += self.segment
            if g == next_prune:
                self._prune()
                next_prune += self.prune_every
            h = hashes[i]
            estimate = ss_update(&self.summary, h)
            if estimate < hot:
                w = choice(h, 0, self.n)        # f_t < f: the hash worker (line 11)
            else:
                entry = keymap_upsert(&self.table, h, -1)
                slot = entry[0] if entry != NULL else -2   # -2: the map could not grow
                if slot == -2:
                    w = choice(h, 0, self.n)
                elif slot < 0:
                    # First time hot (lines 14-16): the least loaded worker, T_f[k] = f.
                    w = least_loaded_all(&self.cursor, self.load, self.n)
                    if self._reserve(self.entries + 1) != 0:
                        keymap_delete(&self.table, h)   # out of memory: stay hashed
                        w = choice(h, 0, self.n)
                    else:
                        slot = self.entries
                        self.entries += 1
                        entry[0] = slot
                        self.sets[slot * self.max_set] = w
                        self.set_size[slot] = 1
                        self.last_use[slot] = g
                else:
                    members = self.sets + slot * self.max_set
                    size = self.set_size[slot]
                    if size < self.max_set and estimate >= self.thresholds[size - 1]:
                        # f_t >= T_f[k] = f·δ^(size-1) (lines 18-20): one more worker.
                        w = self._least_unused(members, size)
                        members[size] = w
                        self.set_size[slot] = size + 1
                    else:
                        w = least_of(self.load, members, size)   # line 22
                    self.last_use[slot] = g
            self.load[w] += 1
            out[i] = w
            g += 1

    # --- state ------------------------------------------------------------------------------

    cdef _tables(self):
        cdef long long used = self.entries
        sets = np.empty((used, self.max_set), dtype=np.int32)
        sizes = np.empty(used, dtype=np.intc)
        last = np.empty(used, dtype=np.int64)
        cdef worker_t[:, ::1] a = sets
        cdef int[::1] b = sizes
        cdef long long[::1] c = last
        if used:
            memcpy(&a[0, 0], self.sets, used * self.max_set * sizeof(worker_t))
            memcpy(&b[0], self.set_size, used * sizeof(int))
            memcpy(&c[0], self.last_use, used * sizeof(long long))
        # Places past a key's set size hold whatever the memory held (realloc'd, or a removed
        # key's workers): -1 there, so the same state always gives the same bytes.
        sets[np.arange(self.max_set)[None, :] >= sizes[:, None]] = -1
        return sets, sizes, last

    def get_state(self):
        state = Router.get_state(self)
        sets, sizes, last = self._tables()
        state.update(summary=ss_get_state(&self.summary), table=keymap_get_state(&self.table),
                     sets=sets, set_size=sizes, last_use=last)
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        sizes = np.ascontiguousarray(state["set_size"], dtype=np.intc)
        cdef long long used = sizes.shape[0]
        sets = np.ascontiguousarray(state["sets"], dtype=np.int32).reshape(used, self.max_set)
        last = np.ascontiguousarray(state["last_use"], dtype=np.int64)
        if last.shape[0] != used:
            raise ValueError("corrupt FlexD state: table sizes differ")
        ss_set_state(&self.summary, state["summary"])
        keymap_set_state(&self.table, state["table"][0], state["table"][1])
        if self.table.size != used:
            raise ValueError("corrupt FlexD state: key map and slots disagree")
        self.entries = 0
        if self._reserve(used) != 0:
            raise MemoryError()
        cdef worker_t[:, ::1] a = sets
        cdef int[::1] b = sizes
        cdef long long[::1] c = last
        if used:
            memcpy(self.sets, &a[0, 0], used * self.max_set * sizeof(worker_t))
            memcpy(self.set_size, &b[0], used * sizeof(int))
            memcpy(self.last_use, &c[0], used * sizeof(long long))
        self.entries = used

    @cython.wraparound(True)
    @cython.boundscheck(True)
    def check_state(self, state):
        """Per-segment counters, key -> slot map, the slots' worker sets (module docstring)."""
        routed = self.check_base(state, STATE_FIELDS)
        cdef object max_set = self.max_set, max_entries = self.max_entries
        check_spacesaving("summary", state["summary"], self.capacity)
        sizes = check_array("set_size", state["set_size"], np.intc, (None,))
        entries = sizes.shape[0]
        if entries > max_entries:
            raise bad("set_size", f"has {entries} entries; at most {max_entries} keys hold one")
        sets = check_array("sets", state["sets"], np.int32, (entries, max_set))
        last_use = check_array("last_use", state["last_use"], np.int64, (entries,))
        # The slots are dense: each key maps to its own slot 0 .. entries-1.
        check_dense_slots("table", state["table"], self.state_bound() // KEYMAP_SLOT_BYTES,
                          entries)
        # A set has 1 .. max_set distinct workers in [0, n) (_least_unused needs one worker
        # left outside a set that may still grow) and -1 past its size.
        check_values("set_size", sizes, 1, max_set, "set sizes")
        in_set = np.arange(max_set)[None, :] < sizes[:, None]
        check_values("sets", sets[in_set], 0, self.n - 1, "worker ids in a set")
        if (sets[~in_set] != -1).any():
            raise bad("sets", "must hold -1 past each set's size")
        ordered = np.sort(sets, axis=1)
        if ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any():
            raise bad("sets", "lists a worker twice in one set")
        check_values("last_use", last_use, 0, max(0, routed - 1), "last uses (tuple indexes)")
        check_distinct("last_use", last_use, "the last use")

    def state_bound(self):
        return flexd_state_bound(self.n, self.delta, self.segment, self.threshold,
                                 self.capacity, self.prune_every, self.prune_keep)

    def worker_sets(self):
        """{key hash: array of its workers, in joining order} for every key with an entry."""
        keys, slots = keymap_get_state(&self.table)
        live = keys != EMPTY_KEY
        sets, sizes, _ = self._tables()
        return {int(k): sets[s, :sizes[s]].copy() for k, s in zip(keys[live], slots[live])}

    def stats(self):
        _, sizes, _ = self._tables()
        return {"keys_tracked": int(self.summary.size), "head_keys": int(self.entries),
                "table_entries": int(sizes.sum())}

    def state_bytes(self):
        return (Router.state_bytes(self) + ss_nbytes(&self.summary)
                + self.table.capacity * (sizeof(hash_t) + sizeof(long long))
                + self.slots * (self.max_set * sizeof(worker_t) + sizeof(int) + sizeof(long long))
                + self._thresholds_array.nbytes + self.n)
