"""Open-addressing uint64 -> int64 map (see _keymap.pxd)."""
from libc.stdlib cimport calloc, free
from libc.string cimport memset, memcpy

import numpy as np

from skewgroup._types cimport hash_t

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


cdef int keymap_grow(KeyMap* m) noexcept nogil:
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
            j = _home(old_keys[i], mask)
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

    def state(self):
        """(keys, values) arrays of the full capacity, as the routers serialize them."""
        return keymap_get_state(&self.m)
