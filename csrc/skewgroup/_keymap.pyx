"""Open-addressing uint64 -> int64 map (see _keymap.pxd)."""
from libc.stdlib cimport calloc, free
from libc.string cimport memset, memcpy

import numpy as np

from skewgroup._types cimport hash_t

cdef inline hash_t _stored(hash_t key) noexcept nogil:
    # A hash that happens to equal EMPTY_KEY is stored under the golden-ratio constant instead.
    return key if key != EMPTY_KEY else <hash_t>0x9E3779B97F4A7C15ULL


cdef inline long long _slot(hash_t key, long long mask) noexcept nogil:
    # Keys are already well-mixed 64-bit hashes; the high bits pick the home slot.
    return <long long>((key * <hash_t>0x9E3779B97F4A7C15ULL) >> 20) & mask


cdef int keymap_init(KeyMap* m, long long min_capacity) except -1:
    cdef long long cap = 16
    while cap < min_capacity:
        cap <<= 1
    m.keys = <hash_t*>calloc(cap, sizeof(hash_t))
    m.values = <long long*>calloc(cap, sizeof(long long))
    if m.keys == NULL or m.values == NULL:
        free(m.keys)
        free(m.values)
        m.keys = NULL
        m.values = NULL
        raise MemoryError()
    m.capacity = cap
    m.size = 0
    return 0


cdef void keymap_free(KeyMap* m) noexcept nogil:
    free(m.keys)
    free(m.values)
    m.keys = NULL
    m.values = NULL
    m.capacity = 0
    m.size = 0


cdef void keymap_clear(KeyMap* m) noexcept nogil:
    memset(m.keys, 0, m.capacity * sizeof(hash_t))
    m.size = 0


cdef long long keymap_get(const KeyMap* m, hash_t key, long long missing) noexcept nogil:
    cdef hash_t k = _stored(key)
    cdef long long mask = m.capacity - 1
    cdef long long i = _slot(k, mask)
    while True:
        if m.keys[i] == k:
            return m.values[i]
        if m.keys[i] == EMPTY_KEY:
            return missing
        i = (i + 1) & mask


cdef int _grow(KeyMap* m) noexcept nogil:
    cdef long long old_cap = m.capacity
    cdef hash_t* old_keys = m.keys
    cdef long long* old_values = m.values
    cdef long long new_cap = old_cap * 2
    cdef long long mask = new_cap - 1
    cdef long long i, j
    cdef hash_t* keys = <hash_t*>calloc(new_cap, sizeof(hash_t))
    cdef long long* values = <long long*>calloc(new_cap, sizeof(long long))
    if keys == NULL or values == NULL:
        free(keys)
        free(values)
        return -1
    for i in range(old_cap):
        if old_keys[i] != EMPTY_KEY:
            j = _slot(old_keys[i], mask)
            while keys[j] != EMPTY_KEY:
                j = (j + 1) & mask
            keys[j] = old_keys[i]
            values[j] = old_values[i]
    free(old_keys)
    free(old_values)
    m.keys = keys
    m.values = values
    m.capacity = new_cap
    return 0


cdef long long* keymap_upsert(KeyMap* m, hash_t key, long long initial) noexcept nogil:
    cdef hash_t k = _stored(key)
    cdef long long mask
    cdef long long i
    # Load factor <= 1/2 keeps linear probing short.
    if (m.size + 1) * 2 > m.capacity:
        if _grow(m) != 0:
            return NULL
    mask = m.capacity - 1
    i = _slot(k, mask)
    while True:
        if m.keys[i] == k:
            return &m.values[i]
        if m.keys[i] == EMPTY_KEY:
            m.keys[i] = k
            m.values[i] = initial
            m.size += 1
            return &m.values[i]
        i = (i + 1) & mask


cdef int keymap_delete(KeyMap* m, hash_t key) noexcept nogil:
    cdef hash_t k = _stored(key)
    cdef long long mask = m.capacity - 1
    cdef long long i = _slot(k, mask)
    cdef long long j, home
    while True:
        if m.keys[i] == EMPTY_KEY:
            return 0
        if m.keys[i] == k:
            break
        i = (i + 1) & mask
    # Backward-shift deletion (Knuth 6.4, Algorithm R): pull later members of the probe run
    # into the hole so lookups never need tombstones.
    j = i
    while True:
        j = (j + 1) & mask
        if m.keys[j] == EMPTY_KEY:
            break
        home = _slot(m.keys[j], mask)
        # Move j into the hole i unless its home lies cyclically in (i, j].
        if (j > i and (home <= i or home > j)) or (j < i and (home <= i and home > j)):
            m.keys[i] = m.keys[j]
            m.values[i] = m.values[j]
            i = j
    m.keys[i] = EMPTY_KEY
    m.size -= 1
    return 1


cdef object keymap_get_state(const KeyMap* m):
    keys = np.empty(m.capacity, dtype=np.uint64)
    values = np.empty(m.capacity, dtype=np.int64)
    cdef hash_t[::1] kv = keys
    cdef long long[::1] vv = values
    if m.capacity:
        memcpy(&kv[0], m.keys, m.capacity * sizeof(hash_t))
        memcpy(&vv[0], m.values, m.capacity * sizeof(long long))
    return keys, values


cdef int keymap_set_state(KeyMap* m, object keys, object values) except -1:
    cdef hash_t[::1] kv = np.ascontiguousarray(keys, dtype=np.uint64)
    cdef long long[::1] vv = np.ascontiguousarray(values, dtype=np.int64)
    cdef long long cap = kv.shape[0]
    cdef long long i
    if cap < 16 or (cap & (cap - 1)) != 0 or vv.shape[0] != cap:
        raise ValueError(f"corrupt key map state: capacity {cap}")
    keymap_free(m)
    keymap_init(m, cap)
    memcpy(m.keys, &kv[0], cap * sizeof(hash_t))
    memcpy(m.values, &vv[0], cap * sizeof(long long))
    m.size = 0
    for i in range(cap):
        if m.keys[i] != EMPTY_KEY:
            m.size += 1
    return 0


cdef class _KeyMapForTests:
    """Python handle on a KeyMap, for the property tests only."""
    cdef KeyMap m

    def __cinit__(self, long long capacity=16):
        keymap_init(&self.m, capacity)

    def __dealloc__(self):
        keymap_free(&self.m)

    def get(self, hash_t key, long long missing=-1):
        return keymap_get(&self.m, key, missing)

    def set(self, hash_t key, long long value):
        cdef long long* slot = keymap_upsert(&self.m, key, value)
        if slot == NULL:
            raise MemoryError()
        slot[0] = value

    def delete(self, hash_t key):
        return keymap_delete(&self.m, key) == 1

    def __len__(self):
        return self.m.size

    @property
    def capacity(self):
        return self.m.capacity
