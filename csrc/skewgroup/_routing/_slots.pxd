# The growth of a slot table: the per-key arrays of adaptive and FlexD, indexed by the slot the
# key map gives a key, grown together.
from libc.stdlib cimport realloc


cdef inline long long grown_slots(long long slots, long long wanted,
                                  long long max_entries) noexcept nogil:
    # The slot count that holds `wanted` entries: doubling from 64 (amortized O(1) an insert),
    # capped at max_entries unless `wanted` itself is beyond it.
    cdef long long want = slots if slots > 0 else 64
    while want < wanted:
        want *= 2
    if want > max_entries:
        want = wanted if wanted > max_entries else max_entries
    return want


cdef inline int grow(void** array, long long slots, size_t slot_bytes) noexcept nogil:
    # *array reallocated to `slots` slots of `slot_bytes`; -1, *array unchanged, without memory.
    cdef void* p = realloc(array[0], slots * slot_bytes)
    if p == NULL:
        return -1
    array[0] = p
    return 0
