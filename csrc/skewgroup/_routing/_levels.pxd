# Workers grouped by load level, shared by D-Choices (_heavy.pyx), FISH with plain loads
# (_fish.pyx) and Pd-Stream (_pdstream.pyx).
#
# All pick "the least loaded of a key's candidates, ties to the lowest id" (Greedy-d,
# d-choices-w-choices §III; FISH Algorithm 3 without capacities) for the same few hot keys on
# every tuple. With the candidates as a bit set of n bits, level j below (the workers whose load
# is the global minimum + j, j < LEVELS) answers it in a few word ANDs: the first level that
# holds a candidate is the set's least load, and that AND's lowest bit its lowest id, the same
# worker as a scan. The argument for LEVELS = 16 and the measurements are in the two modules'
# docstrings. The levels are derived from the loads (rebuilt on restore and resize, never
# serialized) and stay exact only while every load change goes through levels_add_load: loads
# only grow, one at a time, so the minimum rises by one when level 0 empties.
#
# A plain C struct and free functions, as preshed's maps.pxd: the per-tuple ones are inline here
# and compile into the routers' loops; the ones that run once per rise of the minimum or per
# rebuild are compiled once in _levels.pyx. Inlined too, they made the routers' loops larger
# and slower (valgrind, 3*10^5 Zipf z = 1.4 tuples, n = 128: FISH 57.5M instructions before the
# move, 62.1M all inline, 59.5M so; D-Choices 45.8M, 48.4M, 46.2M).
from skewgroup._routing._types cimport count_t, worker_t
from skewgroup._routing._router cimport _packed, _umin, WORKER_BITS

cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil
    int __builtin_popcountll(unsigned long long) nogil

cdef enum:
    # A power of two (the levels are a ring of slots); the routers keep the candidates' loads
    # close to the minimum, and a set none of whose workers is within LEVELS of it is scanned.
    LEVELS = 16

cdef struct LoadLevels:
    unsigned long long* bits    # [LEVELS * words] the levels' bit sets, a ring starting at base
    int words                   # ceil(n / 64): words of a bit set of workers
    count_t min_load            # the global minimum load (level 0)
    int base                    # slot of level 0
    long long at_min            # workers at min_load
    int min_word                # words of level 0 before this one are empty


# Not per tuple: compiled once in _levels.pyx, out of the routers' loops (see the top).
cdef int levels_init(LoadLevels* lv, const count_t* load, int n) noexcept nogil
cdef void levels_free(LoadLevels* lv) noexcept nogil
cdef void levels_rebuild(LoadLevels* lv, const count_t* load, int n) noexcept nogil
cdef void levels_raise_min(LoadLevels* lv, const count_t* load, int n) noexcept nogil


cdef inline void levels_add_load(LoadLevels* lv, count_t* load, int n, worker_t w) noexcept nogil:
    # load[w] += 1, moving w up one level.
    cdef count_t gap = load[w] - lv.min_load
    cdef unsigned long long bit = 1ULL << (w & 63)
    cdef int word = w >> 6
    load[w] += 1
    if gap < LEVELS:
        lv.bits[((lv.base + gap) & (LEVELS - 1)) * lv.words + word] &= ~bit
        if gap + 1 < LEVELS:
            lv.bits[((lv.base + gap + 1) & (LEVELS - 1)) * lv.words + word] |= bit
        if gap == 0:
            lv.at_min -= 1
            if lv.at_min == 0:
                levels_raise_min(lv, load, n)


cdef inline const unsigned long long* levels_level(const LoadLevels* lv, count_t j) noexcept nogil:
    # Level j's bit set (the workers at min_load + j), 0 <= j < LEVELS.
    return lv.bits + ((lv.base + j) & (LEVELS - 1)) * lv.words


cdef inline worker_t levels_least_loaded(LoadLevels* lv) noexcept nogil:
    # The lowest id at the global minimum, as least_loaded_all: level 0's lowest bit. Bits
    # only leave level 0 between rises of the minimum, so min_word only moves forward.
    cdef const unsigned long long* level0 = lv.bits + lv.base * lv.words
    while level0[lv.min_word] == 0:
        lv.min_word += 1
    return (lv.min_word << 6) | __builtin_ctzll(level0[lv.min_word])


cdef inline worker_t levels_least_in(const LoadLevels* lv, const count_t* load,
                                     const unsigned long long* candidates,
                                     count_t* known_low) noexcept nogil:
    # The least loaded worker of a non-empty bit set of candidates, ties to the lowest id.
    # known_low (the caller's per-set hint, 0 when unknown) is <= the set's least load and
    # stays so while loads only grow: levels below it hold no candidate, so the search starts
    # there, and it is updated to the load found.
    cdef count_t j = known_low[0] - lv.min_load
    cdef int word
    cdef const unsigned long long* level
    cdef unsigned long long hit, best = <unsigned long long>-1
    cdef worker_t w
    if j < 0:
        j = 0
    while j < LEVELS:
        level = levels_level(lv, j)
        for word in range(lv.words):
            hit = candidates[word] & level[word]
            if hit:
                known_low[0] = lv.min_load + j
                return (word << 6) | __builtin_ctzll(hit)
        j += 1
    # Every candidate is LEVELS or more above the minimum: scan them.
    for word in range(lv.words):
        hit = candidates[word]
        while hit:
            w = (word << 6) | __builtin_ctzll(hit)
            best = _umin(best, _packed(load, w))
            hit &= hit - 1
    known_low[0] = <count_t>(best >> WORKER_BITS)
    return <worker_t>(best & ((1ULL << WORKER_BITS) - 1))
