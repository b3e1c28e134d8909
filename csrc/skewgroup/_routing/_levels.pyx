"""Load levels' rebuild and rise of the minimum: the parts of _levels.pxd that are not per
tuple (the struct and the reasoning are in _levels.pxd)."""
from libc.stdlib cimport malloc, free
from skewgroup._routing._types cimport count_t

cdef inline void _mark_load(const count_t* load, int n, count_t value,
                            unsigned long long* bits) noexcept nogil:
    # bits = the workers whose load is `value`, without a branch per worker.
    cdef int start, w, end
    cdef unsigned long long word
    for start in range(0, n, 64):
        end = start + 64 if start + 64 < n else n
        word = 0
        for w in range(start, end):
            word |= (<unsigned long long>(load[w] == value)) << (w - start)
        bits[start >> 6] = word


cdef inline void _count_min(LoadLevels* lv) noexcept nogil:
    cdef const unsigned long long* level0 = lv.bits + lv.base * lv.words
    cdef int word
    lv.at_min = 0
    for word in range(lv.words):
        lv.at_min += __builtin_popcountll(level0[word])
    lv.min_word = 0


cdef void levels_rebuild(LoadLevels* lv, const count_t* load, int n) noexcept nogil:
    # From the loads: after init, restore, or a time the levels were not kept up to date.
    cdef int w, j
    cdef count_t low = load[0]
    for w in range(1, n):
        low = load[w] if load[w] < low else low
    lv.min_load = low
    lv.base = 0
    for j in range(LEVELS):
        _mark_load(load, n, low + j, lv.bits + j * lv.words)
    _count_min(lv)


cdef int levels_init(LoadLevels* lv, const count_t* load, int n) noexcept nogil:
    # Memory for n workers (any earlier levels freed), built from the loads; -1 when out of
    # memory (then bits is NULL).
    free(lv.bits)
    lv.words = (n + 63) // 64
    lv.bits = <unsigned long long*>malloc(LEVELS * lv.words * sizeof(unsigned long long))
    if lv.bits == NULL:
        return -1
    levels_rebuild(lv, load, n)
    return 0


cdef void levels_free(LoadLevels* lv) noexcept nogil:
    free(lv.bits)
    lv.bits = NULL


cdef void levels_raise_min(LoadLevels* lv, const count_t* load, int n) noexcept nogil:
    # Level 0 emptied: the minimum rose by one (loads rise one at a time). Its slot becomes
    # the new top level, filled from the loads: one pass over n per rise of the minimum.
    cdef int slot = lv.base
    lv.min_load += 1
    lv.base = (slot + 1) & (LEVELS - 1)
    _mark_load(load, n, lv.min_load + LEVELS - 1, lv.bits + slot * lv.words)
    _count_min(lv)


