"""Open-addressing uint64 -> int64 map (see _keymap.pxd)."""
from libc.stdlib cimport calloc, free
from libc.string cimport memset, memcpy

cimport cython

import numpy as np

from skewgroup._routing._validation import bad, check_array, check_distinct, check_values

from skewgroup._routing._types cimport hash_t

# Bytes of one slot (key + value), for the documented state bounds; a KeyMap keeps its load
# <= 1/2, so it holds at most 4 slots per live key.
KEYMAP_SLOT_BYTES = 16

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


# --- a key map read back from bytes, checked before C reads it -------------------------------

_EMPTY = 0                                   # EMPTY_KEY, as numpy compares it
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)      # the multiplier of _home and _stored


def _home_slots(keys, capacity):
    # _home below, on arrays: a multiply (wrapping mod 2**64) spreads the hash once more.
    return ((keys * _GOLDEN) >> np.uint64(20)).astype(np.int64) & (capacity - 1)


@cython.wraparound(True)
@cython.boundscheck(True)
def check_keymap(field, value, max_capacity, min_capacity=16):
    """A KeyMap as (keys, values): returns (occupied mask, keys, values).

    C's probes stop on the key or on an empty slot and C deletes by backward shift, so: a
    power-of-two capacity, load <= 1/2 as every insertion keeps it (so probes end), every key
    once, and every key reachable from its home slot by a run of occupied slots.
    """
    if not isinstance(value, tuple) or len(value) != 2:
        raise bad(field, "must be a key map: a pair (keys, values)")
    keys = check_array(f"{field}#0", value[0], np.uint64, (None,))
    values = check_array(f"{field}#1", value[1], np.int64, keys.shape)
    capacity = keys.shape[0]
    if capacity & (capacity - 1) or not min_capacity <= capacity <= max(min_capacity,
                                                                        max_capacity):
        raise bad(f"{field}#0", f"has {capacity} slots; a key map has a power of two of slots "
                                f"in [{min_capacity}, {max(min_capacity, max_capacity)}]")
    occupied = keys != _EMPTY
    size = int(occupied.sum())
    if 2 * size > capacity:
        raise bad(f"{field}#0", f"holds {size} keys in {capacity} slots; at most half may be used")
    check_distinct(f"{field}#0", keys[occupied], "the key")
    slots = np.arange(capacity)
    # The run of occupied slots just before each slot: slot - (last empty slot before it) - 1,
    # cyclically (there is at least one empty slot).
    last_empty = np.maximum.accumulate(np.where(occupied, -1, slots))
    last_empty = np.where(last_empty < 0, slots[~occupied][-1] - capacity, last_empty)
    run = slots - last_empty - 1
    distance = (slots - _home_slots(keys, capacity)) & (capacity - 1)
    unreachable = occupied & (distance > run)
    if unreachable.any():
        raise bad(f"{field}#0", f"holds key {keys[np.argmax(unreachable)]} at slot "
                                f"{int(np.argmax(unreachable))}, which its probe sequence "
                                "never reaches")
    return occupied, keys, values


def check_dense_slots(field, value, max_capacity, entries):
    """A KeyMap from key to a dense slot (FlexD's and adaptive's tables): ``entries`` keys,
    each to its own slot 0 .. entries-1. Returns (occupied mask, keys, slots)."""
    occupied, keys, slots = check_keymap(field, value, max_capacity)
    if int(occupied.sum()) != entries:
        raise bad(field, f"holds {int(occupied.sum())} keys for {entries} slots")
    check_values(f"{field}#1", slots[occupied], 0, entries - 1, "slots")
    check_distinct(f"{field}#1", slots[occupied], "the slot")
    return occupied, keys, slots


def stored_keys(hashes):
    """The keys a KeyMap stores for ``hashes`` (_keymap.pxd _stored)."""
    return np.where(hashes == _EMPTY, _GOLDEN, hashes)
