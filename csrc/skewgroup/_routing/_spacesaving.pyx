"""SpaceSaving over the stream-summary structure (Metwally, Agrawal, El Abbadi, ICDT 2005).

k counters. A monitored key's update moves its counter to the bucket of value + 1 (creating it
next to the old one when needed); an unmonitored key takes over a counter of the minimum bucket
(ReplaceMin: count = min + 1, error = min; §3, Fig. 1 of the paper). Buckets form a doubly
linked list in increasing value and counters a doubly linked list inside their bucket, so a unit
update is O(1) (§3.1, "Stream-Summary"). Every estimate satisfies
true <= estimate <= true + min <= true + m/k, and estimate - error <= true; a key with true count
above m/k is always monitored (Lemma 3.3, Theorem 3.5).

Layout choices (all deterministic, so a restored summary continues exactly like the original):

* Counters 0 .. size-1 are in use, so "not full" hands out counter ``size`` and the state is a
  handful of plain C arrays of the capacity that serialize as they are.
* ReplaceMin evicts the head of the minimum bucket. A counter that enters a bucket becomes its
  head, so among tied minimum counters the one that reached the minimum last is evicted first.
* Decay keeps counters whose count rounds to 0 monitored (count 0, estimate 0): they sit in the
  minimum bucket and are the first ReplaceMin victims, and the counter array stays dense.
"""
cimport cython
from libc.limits cimport INT_MAX
from libc.math cimport llround
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.string cimport memcpy

import numpy as np

from skewgroup._routing._types cimport hash_t, count_t
from skewgroup._routing._keymap cimport (KeyMap, EMPTY_KEY, keymap_init, keymap_free, keymap_clear,
                                         keymap_get, keymap_upsert, keymap_delete, keymap_get_state,
                                         keymap_slot, keymap_put_at, keymap_set_state)
from skewgroup._routing import _serial
from skewgroup._routing._keymap import KEYMAP_SLOT_BYTES, check_keymap, stored_keys
from skewgroup._routing._validation import (MAX_CLOCK, bad, check_array, check_chains,
                                            check_field_int, check_fields, check_int, check_real,
                                            check_values, join)

# The tag to_bytes() writes into the archive's metadata; from_bytes() refuses anything else.
_KIND = "spacesaving"

# Index slots a small summary may use beyond the 2 per counter it needs; see ss_init.
cdef enum:
    SMALL_INDEX_SLOTS = 16384


cdef int ss_init(StreamSummary* s, int capacity) except -1:
    s.keys = NULL; s.counts = NULL; s.errors = NULL; s.link = NULL; s.bucket_value = NULL
    s.bucket_head = NULL; s.bucket_next = NULL; s.bucket_prev = NULL
    s.index.keys = NULL; s.index.values = NULL; s.index.capacity = 0; s.index.size = 0
    s.capacity = 0
    s.size = 0
    if capacity < 1:
        raise ValueError(
            f"The 'capacity' parameter must be an int in [1, {INT_MAX}]. Got {capacity} instead.")
    s.capacity = capacity
    s.keys = <hash_t*>calloc(capacity, sizeof(hash_t))
    s.counts = <count_t*>calloc(capacity, sizeof(count_t))
    s.errors = <count_t*>calloc(capacity, sizeof(count_t))
    s.link = <CounterLink*>calloc(capacity, sizeof(CounterLink))
    s.bucket_value = <count_t*>calloc(capacity, sizeof(count_t))
    s.bucket_head = <int*>calloc(capacity, sizeof(int))
    s.bucket_next = <int*>calloc(capacity, sizeof(int))
    s.bucket_prev = <int*>calloc(capacity, sizeof(int))
    if (s.keys == NULL or s.counts == NULL or s.errors == NULL or s.link == NULL
            or s.bucket_value == NULL
            or s.bucket_head == NULL or s.bucket_next == NULL or s.bucket_prev == NULL):
        ss_free(s)
        raise MemoryError()
    # At most k keys are ever indexed (k + 1 for a moment in ReplaceMin) and a key map grows
    # only past half full, so >= 2k slots mean the update path never reallocates. A small
    # summary gets up to 8k slots (at most SMALL_INDEX_SLOTS, 256 KB): at load <= 1/8 a lookup
    # almost always ends on the first slot it reads. Measured on 10^6 Zipf 1.4 keys at k = 1536:
    # 19% of the monitored keys sat off their home slot with 4096 slots, 2% with 16384, and an
    # update went from 6.6 to 5.6 ns (bench_spacesaving.py). Large summaries keep 2k slots, so
    # FlexD's 40,000 counters do not pay 4x the memory.
    cdef long long slots = 8 * <long long>capacity
    if slots > SMALL_INDEX_SLOTS:
        slots = max(SMALL_INDEX_SLOTS, 2 * <long long>capacity)
    try:
        keymap_init(&s.index, slots)
    except MemoryError:
        ss_free(s)
        raise
    ss_clear(s)
    return 0


cdef void ss_free(StreamSummary* s) noexcept nogil:
    free(s.keys); free(s.counts); free(s.errors); free(s.link); free(s.bucket_value)
    free(s.bucket_head); free(s.bucket_next); free(s.bucket_prev)
    s.keys = NULL; s.counts = NULL; s.errors = NULL; s.link = NULL; s.bucket_value = NULL
    s.bucket_head = NULL; s.bucket_next = NULL; s.bucket_prev = NULL
    if s.index.keys != NULL:
        keymap_free(&s.index)
    s.capacity = 0
    s.size = 0
    s.total = 0


cdef void ss_clear(StreamSummary* s) noexcept nogil:
    s.size = 0
    s.total = 0
    _reset_buckets(s)
    keymap_clear(&s.index)


# --- bucket list ---------------------------------------------------------------------------


cdef inline void _reset_buckets(StreamSummary* s) noexcept nogil:
    """No bucket in use: every bucket id is on the free list, linked through bucket_next."""
    cdef int b
    s.min_bucket = -1
    for b in range(s.capacity):
        s.bucket_next[b] = b + 1 if b + 1 < s.capacity else -1
    s.free_bucket = 0 if s.capacity > 0 else -1


cdef inline int _new_bucket(StreamSummary* s, count_t value, int after) noexcept nogil:
    """A bucket of ``value`` linked right after bucket ``after`` (-1: as the new minimum).

    The free list never runs dry: buckets in use <= counters in use <= capacity, and a new
    bucket is only taken while its counter still shares another one (see _increment).
    """
    cdef int b = s.free_bucket
    s.free_bucket = s.bucket_next[b]
    s.bucket_value[b] = value
    s.bucket_head[b] = -1
    s.bucket_prev[b] = after
    if after < 0:
        s.bucket_next[b] = s.min_bucket
        if s.min_bucket >= 0:
            s.bucket_prev[s.min_bucket] = b
        s.min_bucket = b
    else:
        s.bucket_next[b] = s.bucket_next[after]
        if s.bucket_next[after] >= 0:
            s.bucket_prev[s.bucket_next[after]] = b
        s.bucket_next[after] = b
    return b


cdef inline void _drop_bucket(StreamSummary* s, int b) noexcept nogil:
    """Unlink bucket b (now empty) and return its id to the free list."""
    if s.bucket_prev[b] >= 0:
        s.bucket_next[s.bucket_prev[b]] = s.bucket_next[b]
    else:
        s.min_bucket = s.bucket_next[b]
    if s.bucket_next[b] >= 0:
        s.bucket_prev[s.bucket_next[b]] = s.bucket_prev[b]
    s.bucket_next[b] = s.free_bucket
    s.free_bucket = b


cdef inline void _attach(StreamSummary* s, int c, int b) noexcept nogil:
    """Counter c becomes the head of bucket b."""
    cdef int head = s.bucket_head[b]
    s.link[c].bucket = b
    s.link[c].prev = -1
    s.link[c].next = head
    if head >= 0:
        s.link[head].prev = c
    s.bucket_head[b] = c


cdef inline void _detach(StreamSummary* s, int c) noexcept nogil:
    """Unlink counter c from its bucket's list (the bucket may be left empty)."""
    cdef CounterLink link = s.link[c]
    if link.prev >= 0:
        s.link[link.prev].next = link.next
    else:
        s.bucket_head[link.bucket] = link.next
    if link.next >= 0:
        s.link[link.next].prev = link.prev


cdef inline void _increment(StreamSummary* s, int c) noexcept nogil:
    """counts[c] += 1 keeping the buckets sorted: Metwally et al. §3.1, Increment-Counter."""
    cdef int b = s.link[c].bucket
    cdef count_t value = s.counts[c] + 1
    cdef int next_b = s.bucket_next[b]
    # Both tests are computed without branches: the hottest key's bucket is the last one, and
    # branching on that for every update would mispredict on a Zipf stream. The last bucket
    # compares against its own value (value - 1), which never matches.
    cdef bint join_next = s.bucket_value[next_b if next_b >= 0 else b] == value
    cdef bint alone = (s.link[c].prev & s.link[c].next) < 0  # both links are -1
    s.counts[c] = value
    if join_next:
        _detach(s, c)
        _attach(s, c, next_b)
        if alone:
            _drop_bucket(s, b)
    elif alone:
        # No bucket holds value yet: c's bucket moves up in place (the hot keys' usual case).
        s.bucket_value[b] = value
    else:
        _detach(s, c)
        _attach(s, c, _new_bucket(s, value, b))


cdef inline void _insert_counter(StreamSummary* s, int c, count_t value) noexcept nogil:
    """Place a fresh counter c with ``value`` = 1 in the bucket list.

    Only a bucket of value 0 (counters decayed to zero) can lie below it, so the walk is O(1).
    """
    cdef int b = s.min_bucket
    cdef int prev = -1
    while b >= 0 and s.bucket_value[b] < value:
        prev = b
        b = s.bucket_next[b]
    s.counts[c] = value
    if b >= 0 and s.bucket_value[b] == value:
        _attach(s, c, b)
    else:
        _attach(s, c, _new_bucket(s, value, prev))


cdef void _link_descending(StreamSummary* s) noexcept nogil:
    """Build the bucket list from scratch; counters 0 .. size-1 hold non-increasing counts.

    Counters are attached from the smallest up, so inside a bucket the lowest counter id (the
    first in the given order) ends up as the head.
    """
    cdef int c, b = -1
    _reset_buckets(s)
    for c in range(s.size - 1, -1, -1):
        if b < 0 or s.bucket_value[b] != s.counts[c]:
            b = _new_bucket(s, s.counts[c], b)
        _attach(s, c, b)


# --- the contract --------------------------------------------------------------------------


cdef inline int _miss_at(StreamSummary* s, hash_t key, long long slot) noexcept nogil:
    """Start counting ``key``, not monitored, whose free slot in the index is ``slot``: a free
    counter, else ReplaceMin. Returns the key's counter."""
    cdef int c
    if s.size < s.capacity:
        c = s.size
        s.size += 1
        s.keys[c] = key
        s.errors[c] = 0
        keymap_put_at(&s.index, slot, key, c)
        _insert_counter(s, c, 1)
        return c
    # ReplaceMin (Metwally et al. §3, Fig. 1): the new key inherits the minimum counter, whose
    # value bounds how often the key could have been seen while not monitored. The new key goes
    # in first, at the slot its lookup ended on, and the evicted key leaves after: the index
    # briefly holds k + 1 <= capacity / 2 + 1 keys, never full, and no slot is probed twice.
    c = s.bucket_head[s.min_bucket]
    keymap_put_at(&s.index, slot, key, c)
    keymap_delete(&s.index, s.keys[c])
    s.keys[c] = key
    s.errors[c] = s.counts[c]
    _increment(s, c)
    return c


cdef count_t ss_update(StreamSummary* s, hash_t key) noexcept nogil:
    cdef long long slot = keymap_slot(&s.index, key)
    cdef int c
    s.total += 1
    if s.index.keys[slot] == EMPTY_KEY:
        return s.counts[_miss_at(s, key, slot)]
    c = <int>s.index.values[slot]
    _increment(s, c)
    return s.counts[c]


cdef inline count_t _increment_local(StreamSummary* s, count_t* counts, CounterLink* link,
                                     count_t* bucket_value, int* bucket_next,
                                     long long c) noexcept nogil:
    """counts[c] += 1 as _increment, its usual case on the caller's local copies of the pointers
    (see _update_batch); returns the new count."""
    cdef int b = link[c].bucket
    cdef count_t value = counts[c] + 1
    cdef int next_b = bucket_next[b]
    if ((link[c].prev & link[c].next) < 0
            and bucket_value[next_b if next_b >= 0 else b] != value):
        counts[c] = value
        bucket_value[b] = value
    else:
        _increment(s, <int>c)
    return value


cdef void ss_update_admit_many(StreamSummary* s, const hash_t* keys, Py_ssize_t m,
                               hash_t* door, long long door_size,
                               count_t* counts_out) noexcept nogil:
    # ss_update of each key behind a doorkeeper (docs/adaptive.md "Speed"); counts_out
    # gets each key's estimate after its update. Once the counters are full, a key that is not
    # monitored replaces the minimum only if the door slot of its hash already holds it (seen
    # before, not overwritten since); otherwise it takes the slot and counts in the total alone
    # (estimate 0). The miss of a key seen once costs no eviction.
    # A whole block at a time, on local copies of the pointers as _update_batch below: the
    # router's loop called this per tuple across modules, a third of its time (perf, z = 1.4).
    cdef count_t* counts = s.counts
    cdef CounterLink* link = s.link
    cdef count_t* bucket_value = s.bucket_value
    cdef int* bucket_next = s.bucket_next
    cdef KeyMap index = s.index
    cdef Py_ssize_t i
    cdef long long slot
    cdef hash_t key
    cdef hash_t* d
    for i in range(m):
        key = keys[i]
        slot = keymap_slot(&index, key)
        if index.keys[slot] == EMPTY_KEY:
            if door_size > 0 and s.size >= s.capacity:
                d = door + <long long>(((key >> 32) * <hash_t>door_size) >> 32)
                if d[0] != key:
                    d[0] = key
                    counts_out[i] = 0
                    continue
            counts_out[i] = counts[_miss_at(s, key, slot)]
            index = s.index
            continue
        counts_out[i] = _increment_local(s, counts, link, bucket_value, bucket_next,
                                         index.values[slot])
    s.total += m


cdef void _update_batch(StreamSummary* s, const hash_t* hashes, Py_ssize_t n) noexcept nogil:
    """ss_update for each of ``hashes``, in order.

    Most updates of a skewed stream take Increment-Counter's in-place case (the counter alone in
    its bucket, no bucket at value + 1): 86% of 10^6 Zipf 1.4 keys at k = 1536, against 5.6%
    misses, 6.7% joins of the next bucket and 1.4% new buckets. That case runs here on local
    copies of the pointers, which stay in registers; through the struct, every store to a
    counter could alias its fields and force them to be reloaded. The rest goes the general way.
    """
    cdef count_t* counts = s.counts
    cdef CounterLink* link = s.link
    cdef count_t* bucket_value = s.bucket_value
    cdef int* bucket_next = s.bucket_next
    # Lookups read a copy of the key map; only _miss changes the map, so refresh it after that.
    cdef KeyMap index = s.index
    cdef Py_ssize_t i
    cdef long long slot
    for i in range(n):
        slot = keymap_slot(&index, hashes[i])
        if index.keys[slot] == EMPTY_KEY:
            _miss_at(s, hashes[i], slot)
            index = s.index
            continue
        _increment_local(s, counts, link, bucket_value, bucket_next, index.values[slot])
    s.total += n


cdef count_t ss_estimate(const StreamSummary* s, hash_t key) noexcept nogil:
    cdef long long c = keymap_get(&s.index, key, -1)
    return s.counts[c] if c >= 0 else 0


cdef count_t ss_min_count(const StreamSummary* s) noexcept nogil:
    if s.size < s.capacity or s.min_bucket < 0:
        return 0
    return s.bucket_value[s.min_bucket]


cdef struct _Entry:
    count_t count
    hash_t key


cdef int _by_count_desc(const void* a, const void* b) noexcept nogil:
    cdef const _Entry* x = <const _Entry*>a
    cdef const _Entry* y = <const _Entry*>b
    if x.count != y.count:
        return -1 if x.count > y.count else 1
    if x.key != y.key:
        return -1 if x.key < y.key else 1
    return 0


cdef int ss_top(const StreamSummary* s, int k, hash_t* keys, count_t* counts) noexcept nogil:
    # O(k log k) sort of a copy: top is read between batches, never per tuple. The contract is
    # noexcept nogil, so an out-of-memory copy reports 0 counters rather than raising.
    cdef int c, got
    cdef _Entry* entries
    if k <= 0 or s.size == 0:
        return 0
    entries = <_Entry*>malloc(s.size * sizeof(_Entry))
    if entries == NULL:
        return 0
    for c in range(s.size):
        entries[c].count = s.counts[c]
        entries[c].key = s.keys[c]
    qsort(entries, s.size, sizeof(_Entry), _by_count_desc)
    got = k if k < s.size else s.size
    for c in range(got):
        keys[c] = entries[c].key
        counts[c] = entries[c].count
    free(entries)
    return got


cdef int ss_decay(StreamSummary* s, double factor) except -1:
    # FISH §4 (TimeDecayingUpdate): every counter, error and the total shrink by alpha at an
    # epoch's end. llround is monotone, so the bucket order survives and only neighbours whose
    # values now round alike merge: one O(k) pass over the buckets, no sort, no allocation.
    cdef int b, nxt, prev = -1, c, tail
    if not 0.0 < factor <= 1.0:
        raise ValueError(
            f"The 'factor' parameter must be a real number in (0.0, 1.0]. Got {factor!r} instead.")
    with nogil:
        b = s.min_bucket
        while b >= 0:
            nxt = s.bucket_next[b]
            s.bucket_value[b] = llround(s.bucket_value[b] * factor)
            if prev >= 0 and s.bucket_value[prev] == s.bucket_value[b]:
                # Splice b's counters in front of prev's, then drop b.
                c = s.bucket_head[b]
                tail = c
                while c >= 0:
                    s.link[c].bucket = prev
                    tail = c
                    c = s.link[c].next
                s.link[tail].next = s.bucket_head[prev]
                s.link[s.bucket_head[prev]].prev = tail
                s.bucket_head[prev] = s.bucket_head[b]
                s.bucket_head[b] = -1
                _drop_bucket(s, b)
            else:
                prev = b
            b = nxt
        for c in range(s.size):
            s.counts[c] = s.bucket_value[s.link[c].bucket]
            s.errors[c] = llround(s.errors[c] * factor)
        s.total = llround(s.total * factor)
    return 0


cdef int ss_merge(StreamSummary* out, const StreamSummary* a, const StreamSummary* b) except -1:
    # Agarwal et al., "Mergeable summaries" (PODS 2012), for SpaceSaving: a key absent from a
    # full summary may have occurred up to that summary's minimum there, so the minimum is added
    # to the key's estimate and error; estimates stay >= the true count and within
    # min_a + min_b <= (m_a + m_b) / k of it. The out.capacity largest survive (ties: smaller
    # hash first). out may be a or b: both are read completely before out is written.
    cdef count_t min_a = ss_min_count(a), min_b = ss_min_count(b)
    keys_a, counts_a, errors_a = _used(a)
    keys_b, counts_b, errors_b = _used(b)
    keys, inverse = np.unique(np.concatenate([keys_a, keys_b]), return_inverse=True)
    at_a, at_b = inverse[:a.size], inverse[a.size:]
    # A key is held at most once per summary, so plain fancy-index adds are exact.
    counts = np.full(keys.shape[0], min_a + min_b, dtype=np.int64)
    errors = counts.copy()
    counts[at_a] += counts_a - min_a
    errors[at_a] += errors_a - min_a
    counts[at_b] += counts_b - min_b
    errors[at_b] += errors_b - min_b
    _set_counters(out, keys, counts, errors, a.total + b.total)
    return 0


cdef int _set_counters(StreamSummary* out, keys, counts, errors, count_t total) except -1:
    """out = the out.capacity largest of the (key, count, error) counters, ties by smaller key.

    Keys must be distinct. Sorted by count descending, the counters are laid out as
    _link_descending needs, the same layout whether they come from a merge or from counters().
    """
    keep = np.lexsort((keys, -counts))[:out.capacity]
    cdef const hash_t[::1] kv = np.ascontiguousarray(keys[keep], dtype=np.uint64)
    cdef const count_t[::1] cv = np.ascontiguousarray(counts[keep], dtype=np.int64)
    cdef const count_t[::1] ev = np.ascontiguousarray(errors[keep], dtype=np.int64)
    cdef int c, n = kv.shape[0]
    with nogil:
        ss_clear(out)
        for c in range(n):
            out.keys[c] = kv[c]
            out.counts[c] = cv[c]
            out.errors[c] = ev[c]
            keymap_upsert(&out.index, kv[c], c)[0] = c
        out.size = n
        out.total = total
        _link_descending(out)
    return 0


cdef tuple _used(const StreamSummary* s):
    """Copies of (keys, counts, errors) of the counters in use."""
    return (_array(s.keys, s.size, np.uint64), _array(s.counts, s.size, np.int64),
            _array(s.errors, s.size, np.int64))


# --- state ---------------------------------------------------------------------------------


cdef object _array(const void* data, Py_ssize_t n, object dtype):
    arr = np.empty(n, dtype=dtype)
    cdef unsigned char[::1] raw = arr.view(np.uint8)
    if n:
        memcpy(&raw[0], data, raw.shape[0])
    return arr


cdef int _load(void* data, object values, object dtype, object shape) except -1:
    arr = np.ascontiguousarray(values, dtype=dtype)
    if arr.shape != shape:
        raise ValueError(f"corrupt SpaceSaving state: shape {arr.shape}, expected {shape}")
    cdef const unsigned char[::1] raw = arr.reshape(-1).view(np.uint8)
    if raw.shape[0]:
        memcpy(data, &raw[0], raw.shape[0])
    return 0


cdef bint _consistent(const StreamSummary* s) noexcept nogil:
    """Whether a restored state is a well-formed stream summary (so no walk leaves the arrays).

    O(capacity): buckets strictly increasing and non-empty, each counter in exactly the bucket
    of its value, the free list holding the other bucket ids, the index (at least 2k slots)
    mapping each monitored key to its counter.
    """
    cdef int k = s.capacity, b = s.min_bucket, prev_b = -1, c, prev_c
    cdef int buckets = 0, counters = 0, free_ids = 0
    cdef long long i, v
    cdef hash_t stored
    if s.size < 0 or s.size > k or s.total < 0:
        return False
    while b >= 0:
        if b >= k or buckets >= k or s.bucket_prev[b] != prev_b or s.bucket_head[b] < 0:
            return False
        if s.bucket_value[b] < 0 or (prev_b >= 0 and s.bucket_value[b] <= s.bucket_value[prev_b]):
            return False
        buckets += 1
        c = s.bucket_head[b]
        prev_c = -1
        while c >= 0:
            if c >= s.size or counters >= s.size or s.link[c].bucket != b:
                return False
            if s.link[c].prev != prev_c or s.counts[c] != s.bucket_value[b]:
                return False
            counters += 1
            prev_c = c
            c = s.link[c].next
        if c != -1:
            return False
        prev_b = b
        b = s.bucket_next[b]
    if b != -1 or counters != s.size:
        return False
    b = s.free_bucket
    while b >= 0:
        if b >= k or free_ids >= k:
            return False
        free_ids += 1
        b = s.bucket_next[b]
    if b != -1 or buckets + free_ids != k:
        return False
    # The update path relies on the key map never growing (see ss_init).
    if s.index.size != s.size or s.index.capacity < 2 * <long long>k:
        return False
    for i in range(s.index.capacity):
        if s.index.keys[i] != EMPTY_KEY:
            v = s.index.values[i]
            if v < 0 or v >= s.size:
                return False
            # The key map stores a hash equal to EMPTY_KEY under the golden-ratio constant.
            stored = s.keys[v] if s.keys[v] != EMPTY_KEY else <hash_t>0x9E3779B97F4A7C15ULL
            if stored != s.index.keys[i]:
                return False
    return True


cdef object ss_get_state(const StreamSummary* s):
    # Every array verbatim, the key map included: a restored summary links, probes and evicts
    # exactly as this one would.
    cdef int k = s.capacity
    return {
        "capacity": k, "size": s.size, "total": s.total, "min_bucket": s.min_bucket,
        "free_bucket": s.free_bucket,
        "keys": _array(s.keys, k, np.uint64), "counts": _array(s.counts, k, np.int64),
        "errors": _array(s.errors, k, np.int64),
        "link": _array(s.link, 3 * k, np.intc).reshape(k, 3),  # (bucket, prev, next) rows
        "bucket_value": _array(s.bucket_value, k, np.int64),
        "bucket_head": _array(s.bucket_head, k, np.intc),
        "bucket_next": _array(s.bucket_next, k, np.intc),
        "bucket_prev": _array(s.bucket_prev, k, np.intc),
        "index": keymap_get_state(&s.index),
    }


cdef int ss_set_state(StreamSummary* s, object state) except -1:
    cdef long long k = int(state["capacity"])
    # Checked before anything is allocated for a capacity read from untrusted bytes.
    if not 1 <= k <= INT_MAX or np.shape(state["keys"]) != (k,):
        raise ValueError(f"corrupt SpaceSaving state: capacity {k}")
    if k != s.capacity:
        ss_free(s)
        ss_init(s, <int>k)
    try:
        s.size = int(state["size"])
        s.total = int(state["total"])
        s.min_bucket = int(state["min_bucket"])
        s.free_bucket = int(state["free_bucket"])
        _load(s.keys, state["keys"], np.uint64, (k,))
        _load(s.counts, state["counts"], np.int64, (k,))
        _load(s.errors, state["errors"], np.int64, (k,))
        _load(s.link, state["link"], np.intc, (k, 3))
        _load(s.bucket_value, state["bucket_value"], np.int64, (k,))
        _load(s.bucket_head, state["bucket_head"], np.intc, (k,))
        _load(s.bucket_next, state["bucket_next"], np.intc, (k,))
        _load(s.bucket_prev, state["bucket_prev"], np.intc, (k,))
        index_keys, index_values = state["index"]
        keymap_set_state(&s.index, index_keys, index_values)
        if not _consistent(s):
            raise ValueError("corrupt SpaceSaving state: the counter and bucket links disagree")
    except BaseException:
        # Leave an empty, usable summary, never a half-loaded one whose links point anywhere.
        ss_free(s)
        ss_init(s, <int>k)
        raise
    return 0


cdef Py_ssize_t ss_nbytes(const StreamSummary* s) noexcept nogil:
    # Per counter: key, count, error, link; per bucket id: value, head, next, prev; the key map.
    return (s.capacity * (sizeof(hash_t) + 2 * sizeof(count_t) + sizeof(CounterLink)
                          + sizeof(count_t) + 3 * sizeof(int))
            + s.index.capacity * (sizeof(hash_t) + sizeof(long long)))


# --- Python handle -------------------------------------------------------------------------


cdef class SpaceSaving:
    """SpaceSaving heavy hitters over 64-bit key hashes, with ``capacity`` counters.

    Every estimate of a monitored key is within ``total / capacity`` above its true count and
    never below it; a key seen more than ``total / capacity`` times is always monitored
    (Metwally et al. 2005, Theorem 3.5).

    Parameters
    ----------
    capacity : int
        Number of counters k, 1 <= k <= 2**31 - 1.

    Examples
    --------
    >>> import skewgroup
    >>> from skewgroup._routing._spacesaving import SpaceSaving
    >>> sketch = SpaceSaving(10)
    >>> sketch.update_hashes(skewgroup.hash_keys([1, 1, 2, 1, 3]))
    >>> int(sketch.estimate_hashes(skewgroup.hash_keys([1]))[0]), sketch.total
    (3, 5)
    """
    cdef StreamSummary summary

    def __cinit__(self, capacity):
        ss_init(&self.summary, check_int("capacity", capacity, 1, INT_MAX))

    def __dealloc__(self):
        ss_free(&self.summary)

    def __repr__(self):
        return (f"SpaceSaving(capacity={self.summary.capacity}, size={self.summary.size}, "
                f"total={self.summary.total})")

    def update_hashes(self, const hash_t[::1] hashes not None):
        """Count every hash of ``hashes`` (uint64) once, in order."""
        with nogil:
            if hashes.shape[0]:
                _update_batch(&self.summary, &hashes[0], hashes.shape[0])

    def _update_each(self, const hash_t[::1] hashes not None):
        """ss_update per hash, the strategies' per-tuple path; the estimate after each (tests)."""
        out = np.empty(hashes.shape[0], dtype=np.int64)
        cdef count_t[::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(hashes.shape[0]):
                o[i] = ss_update(&self.summary, hashes[i])
        return out

    def estimate_hashes(self, const hash_t[::1] hashes not None):
        """Estimated counts (int64) of ``hashes``; 0 for keys not monitored."""
        out = np.empty(hashes.shape[0], dtype=np.int64)
        cdef count_t[::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(hashes.shape[0]):
                o[i] = ss_estimate(&self.summary, hashes[i])
        return out

    def top(self, k):
        """(uint64 hashes, int64 estimated counts) of the k largest counters.

        Largest count first, ties by hash ascending; fewer than k when fewer are monitored.
        """
        k = min(check_int("k", k, 0, None), self.summary.size)
        keys = np.empty(k, dtype=np.uint64)
        counts = np.empty(k, dtype=np.int64)
        if k == 0:
            return keys, counts
        cdef hash_t[::1] kv = keys
        cdef count_t[::1] cv = counts
        cdef int got = ss_top(&self.summary, k, &kv[0], &cv[0])
        if got < k:
            raise MemoryError()
        return keys, counts

    def decay(self, factor):
        """Multiply every count, error and the total by ``factor`` in (0, 1], rounding to nearest.

        Counters that reach 0 stay monitored with count 0 until ReplaceMin reuses them.
        """
        ss_decay(&self.summary, check_real("factor", factor, 0.0, 1.0, closed="right"))

    def merge(self, SpaceSaving other not None):
        """A new summary of both streams with this one's capacity (Agarwal et al. 2012).

        Monitored estimates stay >= the true count and within ``(self.total + other.total) /
        capacity`` of it when both have that capacity.
        """
        cdef SpaceSaving merged = SpaceSaving(self.summary.capacity)
        ss_merge(&merged.summary, &self.summary, &other.summary)
        return merged

    def counters(self):
        """(uint64 hashes, int64 counts, int64 errors) of every monitored key.

        Largest count first, ties by hash ascending. With ``capacity`` and ``total`` this is the
        summary's content, a few dozen bytes per counter where ``to_bytes`` also holds the
        bucket links and the key map: the compact form for storing many small summaries.
        """
        keys, counts, errors = _used(&self.summary)
        order = np.lexsort((keys, -counts))
        return keys[order], counts[order], errors[order]

    @classmethod
    def from_counters(cls, capacity, hashes, counts, errors, total):
        """A summary holding the counters of ``counters()``, with ``capacity`` counters.

        When there are more than ``capacity`` counters, the largest are kept (ties: smaller
        hash), as a merge does. The summary answers estimates, ``top`` and merges exactly as
        the one the counters came from; its continued updates evict among tied minimum
        counters in its own order (the bound of Theorem 3.5 holds either way).

        Parameters
        ----------
        capacity : int
            Number of counters k, 1 <= k <= 2**31 - 1.
        hashes : array-like of uint64
            Distinct key hashes (int64 values are read as their bits).
        counts, errors : array-like of int64
            Per counter, 0 <= error <= count.
        total : int
            Updates summarised, m >= 0.
        """
        check_int("capacity", capacity, 1, INT_MAX)
        check_int("total", total, 0, None)
        keys = np.asarray(hashes)
        if keys.dtype == np.int64:
            keys = keys.view(np.uint64)
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        counts = np.ascontiguousarray(counts, dtype=np.int64).reshape(-1)
        errors = np.ascontiguousarray(errors, dtype=np.int64).reshape(-1)
        # The arrays may come from stored bytes: each check keeps the bucket links well-formed
        # (a negative count or a repeated key would break _link_descending's invariants).
        if not keys.shape[0] == counts.shape[0] == errors.shape[0]:
            raise ValueError(
                f"The 'hashes', 'counts' and 'errors' parameters must have one length. Got "
                f"{keys.shape[0]}, {counts.shape[0]} and {errors.shape[0]}.")
        if np.unique(keys).shape[0] != keys.shape[0]:
            raise ValueError("The 'hashes' parameter must hold distinct hashes. Got repeats.")
        if counts.shape[0] and (errors.min() < 0 or (errors > counts).any()):
            raise ValueError("The 'errors' parameter must satisfy 0 <= error <= count for "
                             "every counter. Got an error outside that range.")
        cdef SpaceSaving sketch = cls(capacity)
        _set_counters(&sketch.summary, keys, counts, errors, total)
        return sketch

    @property
    def capacity(self):
        """Number of counters k."""
        return self.summary.capacity

    @property
    def size(self):
        """Counters in use (monitored keys)."""
        return self.summary.size

    @property
    def total(self):
        """Updates seen, m (scaled by decay)."""
        return self.summary.total

    @property
    def min_count(self):
        """Smallest monitored count; 0 while not full."""
        return ss_min_count(&self.summary)

    @property
    def nbytes(self):
        """Bytes of the C arrays this summary holds."""
        return ss_nbytes(&self.summary)

    def to_bytes(self):
        """The exact state as bytes: an npz archive (no pickle inside) tagged 'spacesaving'."""
        return _serial.pack({"kind": _KIND}, ss_get_state(&self.summary))

    @classmethod
    def from_bytes(cls, data):
        """A summary from ``to_bytes()`` output; it continues exactly where that one stopped."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"The 'data' parameter must be bytes made by SpaceSaving.to_bytes(). "
                            f"Got {type(data).__name__} instead.")
        meta, state = _serial.unpack(data)
        if meta.get("kind") != _KIND:
            raise ValueError(f"The 'data' parameter is not a SpaceSaving state "
                             f"(kind {meta.get('kind')!r}).")
        # The bytes may be damaged or crafted: the whole summary is checked before any of it
        # is copied into C arrays (ss_set_state's own checks stay behind it).
        try:
            check_spacesaving("", state)
        except ValueError as error:
            raise ValueError(f"corrupt SpaceSaving state: {error}") from error
        # ss_set_state sizes the summary once it has checked the state.
        cdef SpaceSaving sketch = cls(1)
        try:
            ss_set_state(&sketch.summary, state)
        except (KeyError, TypeError) as error:
            raise ValueError(f"corrupt SpaceSaving state: {error!r}") from error
        return sketch

    def __reduce__(self):
        return (SpaceSaving.from_bytes, (self.to_bytes(),))


# --- a summary read back from bytes, checked before C reads it -------------------------------


def _power_of_two_slots(slots):
    return max(16, 1 << (slots - 1).bit_length())  # keymap_init's rounding


def spacesaving_index_slots(capacity):
    """(fewest, most) slots a summary's index may have (_spacesaving.pyx). ss_init gives it
    up to 8 per counter; summaries saved before that have 2 per counter, and restore (the
    update path only needs >= 2 per counter: it never grows the index)."""
    slots = 8 * capacity
    if slots > 16384:
        slots = max(16384, 2 * capacity)
    return _power_of_two_slots(2 * capacity), _power_of_two_slots(slots)


# Bytes per counter for the documented state bounds: the counter arrays and its index slots. A
# small summary gives its index up to 16384 slots whatever its capacity (ss_init): a constant
# on top.
SPACESAVING_COUNTER_BYTES = 64 + 4 * KEYMAP_SLOT_BYTES
SPACESAVING_SMALL_INDEX_BYTES = 16384 * KEYMAP_SLOT_BYTES


def spacesaving_state_bound(capacity):
    """Upper bound on the bytes of a summary of ``capacity`` counters."""
    return SPACESAVING_COUNTER_BYTES * capacity + SPACESAVING_SMALL_INDEX_BYTES


SPACESAVING_FIELDS = ("capacity", "size", "total", "min_bucket", "free_bucket", "keys", "counts",
                      "errors", "link", "bucket_value", "bucket_head", "bucket_next",
                      "bucket_prev", "index")


@cython.wraparound(True)
@cython.boundscheck(True)
def check_spacesaving(path, state, capacity=None):
    """A SpaceSaving stream summary (_spacesaving.pyx) of ``capacity`` counters (None: any,
    as a standalone SpaceSaving saves it).

    Counters 0 .. size-1 are in use; each is in the bucket of its count; the buckets in use
    form one list by increasing value from min_bucket (bucket_next / bucket_prev), each bucket's
    counters one list from its head (link next / prev); the other bucket ids form the free
    list; the index maps each monitored key to its counter. Unused counters are not read.
    """
    check_fields(path, state, SPACESAVING_FIELDS)
    def f(name):  # a field's full name
        return join(path, name)

    k = check_field_int(f("capacity"), state["capacity"], 1, (1 << 31) - 1) if capacity is None \
        else check_field_int(f("capacity"), state["capacity"], capacity, capacity)
    size = check_field_int(f("size"), state["size"], 0, k)
    total = check_field_int(f("total"), state["total"], 0, MAX_CLOCK)
    min_bucket = check_field_int(f("min_bucket"), state["min_bucket"], -1, k - 1)
    free_bucket = check_field_int(f("free_bucket"), state["free_bucket"], -1, k - 1)
    keys = check_array(f("keys"), state["keys"], np.uint64, (k,))
    counts = check_array(f("counts"), state["counts"], np.int64, (k,))[:size]
    errors = check_array(f("errors"), state["errors"], np.int64, (k,))[:size]
    link = check_array(f("link"), state["link"], np.intc, (k, 3))[:size]
    bucket_value = check_array(f("bucket_value"), state["bucket_value"], np.int64, (k,))
    bucket_head = check_array(f("bucket_head"), state["bucket_head"], np.intc, (k,))
    bucket_next = check_array(f("bucket_next"), state["bucket_next"], np.intc, (k,))
    bucket_prev = check_array(f("bucket_prev"), state["bucket_prev"], np.intc, (k,))
    check_values(f("counts"), counts, 0, total, "counts of the counters in use")
    check_values(f("errors"), errors, 0, np.iinfo(np.int64).max, "errors")
    if (errors > counts).any():
        c = int(np.argmax(errors > counts))
        raise bad(f("errors"), f"is {errors[c]} at counter {c}, above its count {counts[c]}")
    bucket, prev, nxt = link[:, 0], link[:, 1], link[:, 2]
    check_values(f("link"), bucket, 0, k - 1, "bucket ids (column 0)")
    check_values(f("link"), link[:, 1:], -1, size - 1, "counter links (columns 1, 2)")
    # The bucket list: the buckets in use by increasing value, linked both ways.
    used = np.unique(bucket)
    order = used[np.argsort(bucket_value[used], kind="stable")]
    values = bucket_value[order]
    if (values < 0).any() or (np.diff(values) <= 0).any():
        raise bad(f("bucket_value"), "must be >= 0 and differ between the buckets in use")
    if not np.array_equal(counts, bucket_value[bucket]):
        c = int(np.argmax(counts != bucket_value[bucket]))
        raise bad(f("counts"), f"is {counts[c]} at counter {c}, not its bucket's value "
                               f"{bucket_value[bucket[c]]}")
    if min_bucket != (int(order[0]) if size else -1):
        raise bad(f("min_bucket"), f"is {min_bucket}, not the least bucket in use")
    if size and (not np.array_equal(bucket_next[order[:-1]], order[1:])
                 or bucket_next[order[-1]] != -1):
        raise bad(f("bucket_next"), "does not link the buckets in use by increasing value")
    if size and (not np.array_equal(bucket_prev[order[1:]], order[:-1])
                 or bucket_prev[order[0]] != -1):
        raise bad(f("bucket_prev"), "does not link the buckets in use by decreasing value")
    # Each bucket's counters: one list from its head, every link in the same bucket.
    heads = bucket_head[used].astype(np.int64)
    check_values(f("bucket_head"), heads, 0, size - 1, "heads of the buckets in use")
    if not np.array_equal(bucket[heads], used) or (prev[heads] != -1).any():
        raise bad(f("bucket_head"), "names a counter that does not head that bucket")
    check_chains(f("link"), nxt.astype(np.int64), np.ones(size, dtype=bool), heads,
                 heads_field=f("bucket_head"))
    linked = np.flatnonzero(nxt >= 0)
    if (bucket[nxt[linked]] != bucket[linked]).any() or (prev[nxt[linked]] != linked).any():
        raise bad(f("link"), "links counters of different buckets, or prev and next disagree")
    # The free list: exactly the bucket ids not in use (_new_bucket never finds it empty).
    free = np.ones(k, dtype=bool)
    free[used] = False
    free_heads = np.array([free_bucket] if free_bucket >= 0 else [], dtype=np.int64)
    if free.any() != (free_bucket >= 0):
        raise bad(f("free_bucket"), f"is {free_bucket}; the free bucket list must hold "
                                    f"exactly the {int(free.sum())} buckets not in use")
    check_chains(f("bucket_next"), bucket_next.astype(np.int64), free, free_heads,
                 heads_field=f("free_bucket"))
    # The index: each monitored key once, to its counter, in a table the update path never
    # has to grow.
    fewest, most = spacesaving_index_slots(k)
    occupied, index_keys, index_values = check_keymap(f("index"), state["index"], most,
                                                      min_capacity=fewest)
    if int(occupied.sum()) != size:
        raise bad(f("index"), f"holds {int(occupied.sum())} keys for {size} counters in use")
    targets = index_values[occupied]
    check_values(f"{f('index')}#1", targets, 0, size - 1, "counters of the monitored keys")
    if not np.array_equal(stored_keys(keys[targets]), index_keys[occupied]):
        raise bad(f("index"), "maps a key to a counter that holds another key")
