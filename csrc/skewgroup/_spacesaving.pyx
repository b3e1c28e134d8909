"""SpaceSaving over the stream-summary structure (Metwally, Agrawal, El Abbadi, ICDT 2005).

k counters; a monitored key's update moves its counter to the bucket of value + 1 (creating it
next to the old one when needed), an unmonitored key takes over a counter of the minimum bucket
(ReplaceMin: count = min + 1, error = min). Buckets form a doubly linked list in increasing
value, counters a doubly linked list inside their bucket, so an update is O(1). Every estimate
satisfies true <= estimate <= true + m/k (and estimate - error <= true); a key with true count
above m/k is always monitored (Metwally et al., Theorem 2 and Lemma 3).

All memory is plain C arrays of the capacity, so the state serializes as it is.
"""
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.string cimport memcpy
from libc.math cimport llround

import numpy as np

from skewgroup._types cimport hash_t, count_t
from skewgroup._keymap cimport (KeyMap, keymap_init, keymap_free, keymap_clear, keymap_get,
                                keymap_upsert, keymap_delete, keymap_get_state, keymap_set_state)


cdef int ss_init(StreamSummary* s, int capacity) except -1:
    if capacity < 1:
        raise ValueError(f"The 'capacity' parameter must be an int in [1, inf). Got {capacity}.")
    s.capacity = capacity
    s.keys = <hash_t*>calloc(capacity, sizeof(hash_t))
    s.counts = <count_t*>calloc(capacity, sizeof(count_t))
    s.errors = <count_t*>calloc(capacity, sizeof(count_t))
    s.bucket_of = <int*>calloc(capacity, sizeof(int))
    s.next_in_bucket = <int*>calloc(capacity, sizeof(int))
    s.prev_in_bucket = <int*>calloc(capacity, sizeof(int))
    s.bucket_value = <count_t*>calloc(capacity, sizeof(count_t))
    s.bucket_head = <int*>calloc(capacity, sizeof(int))
    s.bucket_next = <int*>calloc(capacity, sizeof(int))
    s.bucket_prev = <int*>calloc(capacity, sizeof(int))
    if (s.keys == NULL or s.counts == NULL or s.errors == NULL or s.bucket_of == NULL
            or s.next_in_bucket == NULL or s.prev_in_bucket == NULL or s.bucket_value == NULL
            or s.bucket_head == NULL or s.bucket_next == NULL or s.bucket_prev == NULL):
        ss_free(s)
        raise MemoryError()
    s.index.keys = NULL
    keymap_init(&s.index, 2 * capacity)
    ss_clear(s)
    return 0


cdef void ss_free(StreamSummary* s) noexcept nogil:
    free(s.keys); free(s.counts); free(s.errors); free(s.bucket_of)
    free(s.next_in_bucket); free(s.prev_in_bucket); free(s.bucket_value)
    free(s.bucket_head); free(s.bucket_next); free(s.bucket_prev)
    s.keys = NULL; s.counts = NULL; s.errors = NULL; s.bucket_of = NULL
    s.next_in_bucket = NULL; s.prev_in_bucket = NULL; s.bucket_value = NULL
    s.bucket_head = NULL; s.bucket_next = NULL; s.bucket_prev = NULL
    if s.index.keys != NULL:
        keymap_free(&s.index)


cdef void ss_clear(StreamSummary* s) noexcept nogil:
    cdef int b
    s.size = 0
    s.total = 0
    s.min_bucket = -1
    # Every bucket id is free; the free list is linked through bucket_next.
    for b in range(s.capacity):
        s.bucket_next[b] = b + 1 if b + 1 < s.capacity else -1
    s.free_bucket = 0
    keymap_clear(&s.index)


# --- bucket list ---------------------------------------------------------------------------


cdef inline int _new_bucket(StreamSummary* s, count_t value, int after) noexcept nogil:
    """A bucket of ``value`` linked right after bucket ``after`` (-1: as the new minimum)."""
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
    s.bucket_of[c] = b
    s.prev_in_bucket[c] = -1
    s.next_in_bucket[c] = head
    if head >= 0:
        s.prev_in_bucket[head] = c
    s.bucket_head[b] = c


cdef inline void _detach(StreamSummary* s, int c) noexcept nogil:
    cdef int b = s.bucket_of[c]
    if s.prev_in_bucket[c] >= 0:
        s.next_in_bucket[s.prev_in_bucket[c]] = s.next_in_bucket[c]
    else:
        s.bucket_head[b] = s.next_in_bucket[c]
    if s.next_in_bucket[c] >= 0:
        s.prev_in_bucket[s.next_in_bucket[c]] = s.prev_in_bucket[c]


cdef inline void _increment(StreamSummary* s, int c) noexcept nogil:
    """counts[c] += 1, keeping the buckets sorted (the stream-summary step, O(1))."""
    cdef int b = s.bucket_of[c]
    cdef count_t value = s.counts[c] + 1
    cdef int next_b = s.bucket_next[b]
    s.counts[c] = value
    if next_b >= 0 and s.bucket_value[next_b] == value:
        _detach(s, c)
        _attach(s, c, next_b)
    elif s.bucket_head[b] == c and s.next_in_bucket[c] < 0:
        s.bucket_value[b] = value  # c was alone: its bucket moves up in place
        return
    else:
        _detach(s, c)
        _attach(s, c, _new_bucket(s, value, b))
    if s.bucket_head[b] < 0:
        _drop_bucket(s, b)


cdef inline void _insert_counter(StreamSummary* s, int c, count_t value) noexcept nogil:
    """Place counter c with ``value`` in the bucket list (value is at most 1 above the min)."""
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


# --- the contract --------------------------------------------------------------------------


cdef count_t ss_update(StreamSummary* s, hash_t key) noexcept nogil:
    cdef long long c = keymap_get(&s.index, key, -1)
    cdef int victim
    s.total += 1
    if c >= 0:
        _increment(s, <int>c)
        return s.counts[c]
    if s.size < s.capacity:
        c = s.size
        s.size += 1
        s.keys[c] = key
        s.errors[c] = 0
        keymap_upsert(&s.index, key, c)[0] = c
        _insert_counter(s, <int>c, 1)
        return 1
    # ReplaceMin: the head counter of the minimum bucket (deterministic) changes hands.
    victim = s.bucket_head[s.min_bucket]
    keymap_delete(&s.index, s.keys[victim])
    s.keys[victim] = key
    s.errors[victim] = s.counts[victim]
    keymap_upsert(&s.index, key, victim)[0] = victim
    _increment(s, victim)
    return s.counts[victim]


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


cdef void _relink(StreamSummary* s, const int* ascending) noexcept nogil:
    """Re-link all counters into buckets, given their ids in non-decreasing count order."""
    cdef int i, c, b = -1
    s.min_bucket = -1
    for i in range(s.capacity):
        s.bucket_next[i] = i + 1 if i + 1 < s.capacity else -1
    s.free_bucket = 0
    for i in range(s.size):
        c = ascending[i]
        if b < 0 or s.bucket_value[b] != s.counts[c]:
            b = _new_bucket(s, s.counts[c], b)
        _attach(s, c, b)


cdef int ss_decay(StreamSummary* s, double factor) except -1:
    cdef int c, b, i = 0
    cdef int* ascending
    if not 0.0 < factor <= 1.0:
        raise ValueError(f"The 'factor' parameter must be a real number in (0, 1]. Got {factor}.")
    ascending = <int*>malloc(max(1, s.size) * sizeof(int))
    if ascending == NULL:
        raise MemoryError()
    with nogil:
        # Scaling by a positive factor keeps the order, so walking the buckets upwards gives
        # the new order in O(k): no sort (FISH decays every epoch, this is its hot spot).
        b = s.min_bucket
        while b >= 0:
            c = s.bucket_head[b]
            while c >= 0:
                ascending[i] = c
                i += 1
                c = s.next_in_bucket[c]
            b = s.bucket_next[b]
        for c in range(s.size):
            s.counts[c] = llround(s.counts[c] * factor)
            s.errors[c] = llround(s.errors[c] * factor)
        s.total = llround(s.total * factor)
        _relink(s, ascending)
    free(ascending)
    return 0


cdef int ss_merge(StreamSummary* out, const StreamSummary* a, const StreamSummary* b) except -1:
    # Agarwal et al., "Mergeable summaries" (PODS 2012): a key absent from a full summary may
    # have up to its minimum count there, so that minimum is added to its estimate and error.
    cdef int c
    cdef count_t min_a = ss_min_count(a), min_b = ss_min_count(b)
    merged = {}
    for c in range(a.size):
        merged[a.keys[c]] = [a.counts[c], a.errors[c], False]
    for c in range(b.size):
        entry = merged.get(b.keys[c])
        if entry is None:
            merged[b.keys[c]] = [b.counts[c] + min_a, b.errors[c] + min_a, True]
        else:
            entry[0] += b.counts[c]
            entry[1] += b.errors[c]
            entry[2] = True
    for key, entry in merged.items():
        if not entry[2]:  # only in a
            entry[0] += min_b
            entry[1] += min_b
    ranked = sorted(merged.items(), key=lambda item: (-item[1][0], item[0]))[:out.capacity]
    ss_clear(out)
    for c, (key, entry) in enumerate(ranked):
        out.keys[c] = key
        out.counts[c] = entry[0]
        out.errors[c] = entry[1]
        keymap_upsert(&out.index, key, c)[0] = c
    out.size = len(ranked)
    out.total = a.total + b.total
    ascending = np.ascontiguousarray(np.arange(out.size - 1, -1, -1), dtype=np.intc)
    cdef int[::1] order = ascending
    if out.size:
        _relink(out, &order[0])
    return 0


cdef object _array(const void* data, Py_ssize_t n, object dtype):
    arr = np.empty(n, dtype=dtype)
    cdef unsigned char[::1] raw = arr.view(np.uint8)
    if n:
        memcpy(&raw[0], data, raw.shape[0])
    return arr


cdef void _load(void* data, object values, object dtype, Py_ssize_t n) except *:
    arr = np.ascontiguousarray(values, dtype=dtype)
    if arr.shape[0] != n:
        raise ValueError(f"corrupt SpaceSaving state: {arr.shape[0]} values for {n} slots")
    cdef const unsigned char[::1] raw = arr.view(np.uint8)
    if n:
        memcpy(data, &raw[0], raw.shape[0])


cdef object ss_get_state(const StreamSummary* s):
    cdef int k = s.capacity
    return {
        "capacity": k, "size": s.size, "total": s.total, "min_bucket": s.min_bucket,
        "free_bucket": s.free_bucket,
        "keys": _array(s.keys, k, np.uint64), "counts": _array(s.counts, k, np.int64),
        "errors": _array(s.errors, k, np.int64), "bucket_of": _array(s.bucket_of, k, np.intc),
        "next_in_bucket": _array(s.next_in_bucket, k, np.intc),
        "prev_in_bucket": _array(s.prev_in_bucket, k, np.intc),
        "bucket_value": _array(s.bucket_value, k, np.int64),
        "bucket_head": _array(s.bucket_head, k, np.intc),
        "bucket_next": _array(s.bucket_next, k, np.intc),
        "bucket_prev": _array(s.bucket_prev, k, np.intc),
        "index": keymap_get_state(&s.index),
    }


cdef int ss_set_state(StreamSummary* s, object state) except -1:
    cdef int k = int(state["capacity"])
    if k != s.capacity:
        ss_free(s)
        ss_init(s, k)
    s.size = int(state["size"])
    s.total = int(state["total"])
    s.min_bucket = int(state["min_bucket"])
    s.free_bucket = int(state["free_bucket"])
    _load(s.keys, state["keys"], np.uint64, k)
    _load(s.counts, state["counts"], np.int64, k)
    _load(s.errors, state["errors"], np.int64, k)
    _load(s.bucket_of, state["bucket_of"], np.intc, k)
    _load(s.next_in_bucket, state["next_in_bucket"], np.intc, k)
    _load(s.prev_in_bucket, state["prev_in_bucket"], np.intc, k)
    _load(s.bucket_value, state["bucket_value"], np.int64, k)
    _load(s.bucket_head, state["bucket_head"], np.intc, k)
    _load(s.bucket_next, state["bucket_next"], np.intc, k)
    _load(s.bucket_prev, state["bucket_prev"], np.intc, k)
    keys, values = state["index"]
    keymap_set_state(&s.index, keys, values)
    return 0


cdef Py_ssize_t ss_nbytes(const StreamSummary* s) noexcept nogil:
    return (s.capacity * (3 * sizeof(count_t) + sizeof(hash_t) + 6 * sizeof(int))
            + s.index.capacity * (sizeof(hash_t) + sizeof(long long)))


# --- Python handle -------------------------------------------------------------------------


cdef class SpaceSaving:
    """SpaceSaving heavy hitters over key hashes (``skewgroup.hash_keys``), k counters.

    >>> import numpy as np, skewgroup
    >>> sketch = SpaceSaving(10)
    >>> sketch.update_hashes(skewgroup.hash_keys([1, 1, 2, 1, 3]))
    >>> int(sketch.estimate_hashes(skewgroup.hash_keys([1]))[0]), sketch.total
    (3, 5)
    """
    cdef StreamSummary summary

    def __cinit__(self, int capacity):
        if capacity < 1:
            raise ValueError(
                f"The 'capacity' parameter must be an int in [1, inf). Got {capacity} instead.")
        ss_init(&self.summary, capacity)

    def __dealloc__(self):
        ss_free(&self.summary)

    def update_hashes(self, const hash_t[::1] hashes):
        cdef Py_ssize_t i
        with nogil:
            for i in range(hashes.shape[0]):
                ss_update(&self.summary, hashes[i])

    def estimate_hashes(self, const hash_t[::1] hashes):
        out = np.empty(hashes.shape[0], dtype=np.int64)
        cdef count_t[::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(hashes.shape[0]):
                o[i] = ss_estimate(&self.summary, hashes[i])
        return out

    def top(self, int k):
        """(key hashes, estimated counts) of the k largest counters, largest first."""
        if k < 0:
            raise ValueError(f"The 'k' parameter must be an int in [0, inf). Got {k} instead.")
        keys = np.empty(max(k, 1), dtype=np.uint64)
        counts = np.empty(max(k, 1), dtype=np.int64)
        cdef hash_t[::1] kv = keys
        cdef count_t[::1] cv = counts
        cdef int got = ss_top(&self.summary, k, &kv[0], &cv[0])
        return keys[:got], counts[:got]

    def decay(self, double factor):
        ss_decay(&self.summary, factor)

    def merge(self, SpaceSaving other):
        """A new summary of both streams, with this one's capacity."""
        merged = SpaceSaving(self.summary.capacity)
        ss_merge(&merged.summary, &self.summary, &other.summary)
        return merged

    @property
    def capacity(self):
        return self.summary.capacity

    @property
    def size(self):
        return self.summary.size

    @property
    def total(self):
        return self.summary.total

    @property
    def min_count(self):
        return ss_min_count(&self.summary)

    @property
    def nbytes(self):
        return ss_nbytes(&self.summary)

    def to_bytes(self):
        from skewgroup import _serial

        return _serial.pack({"kind": "spacesaving"}, ss_get_state(&self.summary))

    @classmethod
    def from_bytes(cls, data):
        from skewgroup import _serial

        meta, state = _serial.unpack(data)
        if meta.get("kind") != "spacesaving":
            raise ValueError("The 'data' parameter is not a SpaceSaving state.")
        cdef SpaceSaving sketch = cls(int(state["capacity"]))
        ss_set_state(&sketch.summary, state)
        return sketch

    def __reduce__(self):
        return (SpaceSaving.from_bytes, (self.to_bytes(),))
